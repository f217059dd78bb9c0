// Opening a checkpoint whose bytes are already in memory: open() over a path uses it, and so do
// the fuzz targets and benchmarks.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "common/mapped_file.hpp"
#include "pthload/checkpoint.hpp"
#include "zip/central_directory.hpp"

namespace pthload::formats {

/// open() over `file`; `path` only names the file in errors. A zip archive's
/// `central_directory`, when given, is what reading `file`'s image parsed (OpenedFile): it is
/// not parsed again. Throws as open().
[[nodiscard]] Checkpoint open_mapped(
    std::shared_ptr<const common::MappedFile> file, std::string path, const LoadOptions& options,
    std::optional<zip::CentralDirectory> central_directory = std::nullopt);

}  // namespace pthload::formats
