// Opening a checkpoint whose bytes are already in memory: open() over a path uses it, and so do
// the fuzz targets and benchmarks.
#pragma once

#include <memory>
#include <string>

#include "common/mapped_file.hpp"
#include "pthload/checkpoint.hpp"

namespace pthload::torch {

/// open() over `file`; `path` only names the file in errors. Throws as open().
[[nodiscard]] Checkpoint open_mapped(std::shared_ptr<const common::MappedFile> file,
                                     std::string path, const LoadOptions& options);

}  // namespace pthload::torch
