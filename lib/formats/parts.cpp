#include "formats/parts.hpp"

#include <fmt/format.h>

#include "common/check.hpp"
#include "pthload/error.hpp"
#include "zip/entry.hpp"

namespace pthload::formats {

namespace fs = std::filesystem;

OpenedFile open_file(const fs::path& path, const LoadOptions& options) {
  return common::with_context({.path = path.string()},
                              [&] { return open_checkpoint_file(path, options); });
}

void point_at_file(internal::StorageState& storage,
                   const std::shared_ptr<const common::MappedFile>& file, std::uint64_t base) {
  if (storage.record != nullptr) {
    const zip::Entry& record = *storage.record;
    if (record.method != zip::kMethodStored || record.compressed_size != record.uncompressed_size ||
        storage.nbytes > record.uncompressed_size) {
      throw UnsupportedError(Errc::kShardRecordCompressed,
                             fmt::format("storage record {} is compressed: pthload reads the "
                                         "records of a shard only as torch.save writes them, "
                                         "stored",
                                         record.name),
                             {.record = std::string(record.name)});
    }
    storage.file_range = std::make_unique<internal::FileRange>(internal::FileRange{
        .offset = base + record.data_offset, .size = storage.nbytes, .file = file});
    storage.record = nullptr;
  } else if (storage.file_range && !storage.file_range->file) {
    storage.file_range->offset += base;
    storage.file_range->file = file;
  }
}

}  // namespace pthload::formats
