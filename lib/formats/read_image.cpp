// read_file_image and map_file_image: which parts of a checkpoint an image reads (its structure)
// and which it leaves as holes (torch's storage records, safetensors' data).
#include "formats/read_image.hpp"

#include <algorithm>
#include <functional>
#include <memory>
#include <new>
#include <string_view>
#include <system_error>

#include "common/byte_reader.hpp"
#include "formats/open.hpp"
#include "safetensors/header.hpp"
#include "zip/image.hpp"

namespace pthload::formats {
namespace {

// Holes only pay off for large payloads; small ones are read with their neighbours anyway.
constexpr std::uint64_t kHoleBytes = std::uint64_t{1} << 20;

// torch.save and torch.jit.save name storage records `<archive>/data/<key>`.
bool is_stored_storage_record(const zip::Entry& entry) noexcept {
  if (entry.method != zip::kMethodStored) return false;
  // The last '/' must end "/data/" and be followed by the key: one backward scan for a byte
  // (asked of 100 000 records) instead of a backward search for the string, then a forward one.
  const std::string_view name = entry.name;
  const auto slash = name.rfind('/');
  constexpr std::string_view kData = "/data/";
  return slash != std::string_view::npos && slash + 1 >= kData.size() && slash + 1 < name.size() &&
         name.substr(slash + 1 - kData.size(), kData.size()) == kData;
}

bool is_large_storage_record(const zip::Entry& entry) noexcept {
  return entry.compressed_size >= kHoleBytes && is_stored_storage_record(entry);
}

bool starts_like_zip(std::span<const std::byte> bytes) noexcept {
  return bytes.size() >= 4 && bytes[0] == std::byte{'P'} && bytes[1] == std::byte{'K'} &&
         bytes[2] == std::byte{3} && bytes[3] == std::byte{4};
}

// Pipes and devices cannot be read at an offset: they are read (or mapped) as MappedFile::open
// reads them.
std::shared_ptr<const common::MappedFile> opened_whole(const std::filesystem::path& path) {
  return std::make_shared<const common::MappedFile>(common::MappedFile::open(path));
}

bool is_regular(const std::filesystem::path& path) noexcept {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error);
}

}  // namespace

OpenedFile read_file_image(const std::filesystem::path& path, const Limits& limits) {
  if (!is_regular(path)) return {opened_whole(path)};
  auto image = common::MappedFile::image(common::FileReader::open(path));
  image.fill(0, 4);
  std::optional<zip::CentralDirectory> directory;
  if (starts_like_zip(image.bytes())) {
    directory = zip::fill_archive_image(image, limits, is_large_storage_record,
                                        zip::LocalHeaders::kIntoImage);
  } else {
    image.fill_all();
  }
  // Moving the image keeps its bytes where they are: the directory's views stay valid.
  return {std::make_shared<const common::MappedFile>(std::move(image)), std::move(directory)};
}

OpenedFile map_file_image(const std::filesystem::path& path, const Limits& limits) {
  if (!is_regular(path)) return {opened_whole(path)};
  auto image = common::MappedFile::image_with_views(common::FileReader::open(path));
  // Enough for the zip magic and for looks_like_safetensors (the size field, '{' and the first
  // key's quote after any whitespace).
  constexpr std::uint64_t kPeekBytes = 64;
  image.fill(0, kPeekBytes);
  const auto first = image.bytes().first(std::min<std::size_t>(image.bytes().size(), kPeekBytes));
  std::optional<zip::CentralDirectory> directory;
  if (starts_like_zip(first)) {
    // Every storage, whatever its size, is viewed in the mapping: reading it too would be waste.
    directory = zip::fill_archive_image(image, limits, is_stored_storage_record,
                                        zip::LocalHeaders::kResolved);
  } else if (safetensors::looks_like_safetensors(first)) {
    // The size field and the header; the tensors' data stays in the mapping. A size above
    // the limit is refused by Header::parse from the size field alone.
    constexpr std::uint64_t kSizeField = 8;
    const std::uint64_t header =
        std::min(common::load_le<std::uint64_t>(first.data()), safetensors::kMaxHeaderBytes);
    image.fill(0, kSizeField + header);
  } else {
    // Legacy streams and the rest are parsed where they lie (options.hpp says so).
    return {opened_whole(path)};
  }
  return {std::make_shared<const common::MappedFile>(std::move(image)), std::move(directory)};
}

common::MappedFile index_file_image(const std::filesystem::path& path, const Limits& limits) {
  if (!is_regular(path)) return common::MappedFile::open(path);
  auto image = common::MappedFile::image(common::FileReader::open(path));
  // The record reader parses the index over the image itself.
  (void)zip::fill_archive_image(
      image, limits, [](const zip::Entry& entry) { return entry.method == zip::kMethodStored; });
  return image;
}

OpenedFile open_checkpoint_file(const std::filesystem::path& path, const LoadOptions& options) {
  return options.io == IoStrategy::kRead ? read_file_image(path, options.limits)
                                         : map_file_image(path, options.limits);
}

}  // namespace pthload::formats
