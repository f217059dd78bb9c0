// list_records / read_record: the public face of the zip layer, for auditing a checkpoint.
#include "pthload/records.hpp"

#include <algorithm>

#include "common/mapped_file.hpp"
#include "pthload/error.hpp"
#include "zip/archive.hpp"

namespace pthload {
namespace {

// Errors from the layers below know the record and offset; only this layer knows the path.
template <typename F>
auto with_path(const std::filesystem::path& path, F&& body) {
  try {
    return body();
  } catch (Error& e) {
    if (e.context().path.empty()) e.context().path = path.string();
    throw;
  }
}

}  // namespace

std::vector<RecordInfo> list_records(const std::filesystem::path& path,
                                     const LoadOptions& options) {
  return with_path(path, [&] {
    const auto file = common::MappedFile::open(path);
    const auto archive = zip::Archive::parse(file.bytes(), options.limits);
    std::vector<RecordInfo> records;
    records.reserve(archive.entries().size());
    for (const zip::Entry& entry : archive.entries()) {
      if (options.verify_crc) archive.verify_crc(entry);
      records.push_back({.name = entry.name,
                         .payload_offset = entry.data_offset,
                         .size = entry.uncompressed_size,
                         .compressed_size = entry.compressed_size,
                         .crc32 = entry.crc32,
                         .is_compressed = entry.method != 0});
    }
    return records;
  });
}

std::vector<std::byte> read_record(const std::filesystem::path& path, std::string_view name,
                                   const LoadOptions& options) {
  return with_path(path, [&] {
    const auto file = common::MappedFile::open(path);
    const auto archive = zip::Archive::parse(file.bytes(), options.limits);
    const auto record = archive.read(archive.at(name), options.verify_crc);
    const auto bytes = record.bytes();
    return std::vector<std::byte>(bytes.begin(), bytes.end());
  });
}

}  // namespace pthload
