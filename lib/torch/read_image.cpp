// read_file_image: which records an io=read image leaves as holes (torch's storage records).
#include "torch/read_image.hpp"

#include <string_view>
#include <system_error>

#include "zip/image.hpp"

namespace pthload::torch {
namespace {

// Holes only pay off for large payloads; small ones are read with their neighbours anyway.
constexpr std::uint64_t kHoleBytes = std::uint64_t{1} << 20;

// torch.save and torch.jit.save name storage records `<archive>/data/<key>`.
bool is_storage_record(const zip::Entry& entry) noexcept {
  if (entry.method != zip::kMethodStored || entry.compressed_size < kHoleBytes) return false;
  const std::string_view name = entry.name;
  const auto data = name.rfind("/data/");
  return data != std::string_view::npos && data + 6 < name.size() &&
         name.find('/', data + 6) == std::string_view::npos;
}

bool starts_like_zip(std::span<const std::byte> bytes) noexcept {
  return bytes.size() >= 4 && bytes[0] == std::byte{'P'} && bytes[1] == std::byte{'K'} &&
         bytes[2] == std::byte{3} && bytes[3] == std::byte{4};
}

}  // namespace

std::shared_ptr<const common::MappedFile> read_file_image(const std::filesystem::path& path,
                                                          const Limits& limits) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    return std::make_shared<const common::MappedFile>(common::MappedFile::open(path));
  }
  auto image = common::MappedFile::image(common::FileReader::open(path));
  image.fill(0, 4);
  if (starts_like_zip(image.bytes())) {
    zip::fill_archive_image(image, limits, is_storage_record);
  } else {
    image.fill_all();
  }
  return std::make_shared<const common::MappedFile>(std::move(image));
}

}  // namespace pthload::torch
