// LoadOptions::io = kRead: a checkpoint file read with pread into owned memory, never mapped.
#pragma once

#include <filesystem>
#include <memory>

#include "common/mapped_file.hpp"
#include "pthload/options.hpp"

namespace pthload::torch {

/// The file at `path` for a load that never maps it: a zip archive's index, pickles and small
/// records read into an image (large stored storage records stay holes, copied out with pread
/// when placed); any other file read whole. A pipe or device is read as MappedFile::open reads
/// it. Throws IoError, OutOfMemoryError.
[[nodiscard]] std::shared_ptr<const common::MappedFile> read_file_image(
    const std::filesystem::path& path, const Limits& limits);

}  // namespace pthload::torch
