// Helpers for the formats tests: how a checkpoint's files are read (mapped, or read with pread).
#pragma once

#include "common/mapped_file.hpp"
#include "pthload/checkpoint.hpp"

namespace pthload::test {

/// Whether `file` has any part of the file mapped: a mapping, or an io=map image's mapping for
/// views beside its pread image.
inline bool maps_file(const common::MappedFile& file) {
  return file.is_mapped() || file.view_bytes().data() != file.bytes().data();
}

/// "map" or "read", for CAPTURE.
inline const char* io_name(IoStrategy io) {
  return io == IoStrategy::kMap ? "map" : "read";
}

}  // namespace pthload::test
