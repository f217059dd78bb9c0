// read_file_image and map_file_image: which parts of a checkpoint an image reads (its structure)
// and which it leaves as holes (torch's storage records, safetensors' data).
#include "torch/read_image.hpp"

#include <algorithm>
#include <optional>
#include <string_view>
#include <system_error>

#include "common/byte_reader.hpp"
#include "common/checked.hpp"
#include "zip/image.hpp"

namespace pthload::torch {
namespace {

// Holes only pay off for large payloads; small ones are read with their neighbours anyway.
constexpr std::uint64_t kHoleBytes = std::uint64_t{1} << 20;

// torch.save and torch.jit.save name storage records `<archive>/data/<key>`.
bool is_stored_storage_record(const zip::Entry& entry) noexcept {
  if (entry.method != zip::kMethodStored) return false;
  const std::string_view name = entry.name;
  const auto data = name.rfind("/data/");
  return data != std::string_view::npos && data + 6 < name.size() &&
         name.find('/', data + 6) == std::string_view::npos;
}

bool is_large_storage_record(const zip::Entry& entry) noexcept {
  return entry.compressed_size >= kHoleBytes && is_stored_storage_record(entry);
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
    zip::fill_archive_image(image, limits, is_large_storage_record);
  } else {
    image.fill_all();
  }
  return std::make_shared<const common::MappedFile>(std::move(image));
}

}  // namespace pthload::torch

namespace pthload::torch {
namespace {

// A safetensors file begins with its header's size (u64, little-endian) and the header, a JSON
// object: the part of the file an io=map image reads (safetensors/header.cpp checks the rest).
std::optional<std::uint64_t> safetensors_prefix(std::span<const std::byte> first) noexcept {
  constexpr std::uint64_t kSizeField = 8;
  if (first.size() <= kSizeField || first[kSizeField] != std::byte{'{'}) return std::nullopt;
  return common::checked_add(kSizeField, common::load_le<std::uint64_t>(first.data()));
}

}  // namespace

std::shared_ptr<const common::MappedFile> map_file_image(const std::filesystem::path& path,
                                                         const Limits& limits) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    return std::make_shared<const common::MappedFile>(common::MappedFile::open(path));
  }
  auto image = common::MappedFile::image_with_views(common::FileReader::open(path));
  constexpr std::uint64_t kPeekBytes = 9;
  image.fill(0, kPeekBytes);
  const auto first = image.bytes().first(std::min<std::size_t>(image.bytes().size(), kPeekBytes));
  if (starts_like_zip(first)) {
    // Every storage, whatever its size, is viewed in the mapping: reading it too would be waste.
    zip::fill_archive_image(image, limits, is_stored_storage_record);
  } else if (const auto prefix = safetensors_prefix(first)) {
    image.fill(0, *prefix);
  } else {
    return std::make_shared<const common::MappedFile>(common::MappedFile::open(path));
  }
  return std::make_shared<const common::MappedFile>(std::move(image));
}

common::MappedFile index_file_image(const std::filesystem::path& path, const Limits& limits) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return common::MappedFile::open(path);
  auto image = common::MappedFile::image(common::FileReader::open(path));
  zip::fill_archive_image(
      image, limits, [](const zip::Entry& entry) { return entry.method == zip::kMethodStored; });
  return image;
}

std::shared_ptr<const common::MappedFile> open_checkpoint_file(const std::filesystem::path& path,
                                                               const LoadOptions& options) {
  return options.io == IoStrategy::kRead ? read_file_image(path, options.limits)
                                         : map_file_image(path, options.limits);
}

}  // namespace pthload::torch
