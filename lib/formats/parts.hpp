// A checkpoint made of parts (the shards of an index, the files of a DCP directory): each part
// opened as options.io says, and its storages pointed at the part's file, so that the
// checkpoint they move into places them without the part's archive.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "checkpoint/state.hpp"
#include "common/mapped_file.hpp"
#include "formats/read_image.hpp"
#include "pthload/options.hpp"

namespace pthload::formats {

/// The file at `path` as options.io says (formats/read_image.hpp open_checkpoint_file: its
/// structure read with pread, storages viewed in a mapping under kMap; nothing mapped under
/// kRead), with the path in errors. Throws IoError, OutOfMemoryError.
[[nodiscard]] OpenedFile open_file(const std::filesystem::path& path, const LoadOptions& options);

/// Makes `storage` (of a checkpoint opened over bytes that start at `base` in `file`: a shard,
/// whose base is 0, or a DCP item) read its bytes as a range of `file`, so that the
/// checkpoint it moves into places it without the part's archive. Throws
/// UnsupportedError(kShardRecordCompressed) for a deflated record (torch.save stores them).
void point_at_file(internal::StorageState& storage,
                   const std::shared_ptr<const common::MappedFile>& file, std::uint64_t base);

}  // namespace pthload::formats
