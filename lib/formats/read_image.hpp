// How a checkpoint file's bytes are got (LoadOptions::io): an image read with pread, beside a
// mapping for zero-copy views (kMap) or alone (kRead).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>

#include "common/mapped_file.hpp"
#include "pthload/options.hpp"
#include "zip/central_directory.hpp"

namespace pthload::formats {

/// A checkpoint file as a load opens it: its bytes, and, for a zip archive, the central
/// directory reading its image parsed (zip::fill_archive_image), for Archive::parse to take
/// rather than parse again; empty where there is none.
struct OpenedFile {
  std::shared_ptr<const common::MappedFile> file;
  std::optional<zip::CentralDirectory> central_directory;
};

/// The file at `path` for a load that never maps it: a zip archive's index, pickles and small
/// records read into an image (large stored storage records stay holes, copied out with pread
/// when placed); any other file read whole. A pipe or device is read as MappedFile::open reads
/// it. Throws IoError, OutOfMemoryError.
[[nodiscard]] OpenedFile read_file_image(const std::filesystem::path& path, const Limits& limits);

/// The file at `path` for a load that views storages in place (io=map): a zip archive's
/// index, pickles and non-storage records, or a safetensors file's header, read into an image
/// with pread (a file truncated meanwhile gives IoError, not SIGBUS), and every storage a view
/// of a mapping of the file. Legacy streams, pipes and anything else are mapped (or read) as
/// MappedFile::open does: their structure is parsed where it lies. Throws IoError,
/// OutOfMemoryError.
[[nodiscard]] OpenedFile map_file_image(const std::filesystem::path& path, const Limits& limits);

/// The file at `path` for reading its zip records one by one (RecordReader): the index read
/// into an image with pread, every stored record a hole to be read with copy_out. What is not a
/// zip archive is read whole (the parse then says what it is). A pipe or device is read as
/// MappedFile::open reads it. Throws IoError, OutOfMemoryError.
[[nodiscard]] common::MappedFile index_file_image(const std::filesystem::path& path,
                                                  const Limits& limits);

/// read_file_image or map_file_image, as `options.io` says.
[[nodiscard]] OpenedFile open_checkpoint_file(const std::filesystem::path& path,
                                              const LoadOptions& options);

}  // namespace pthload::formats
