// Test helper for tests/writer: what save() writes, kept in memory through its sink.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "pthload/checkpoint.hpp"
#include "pthload/save.hpp"

namespace pthload::test {

/// The bytes save() streams for `tensors` (a Checkpoint, NamedTensors or MemoryTensors).
template <typename Tensors>
[[nodiscard]] std::vector<std::byte> saved_bytes(const Tensors& tensors,
                                                 const SaveOptions& options = {}) {
  std::vector<std::byte> bytes;
  const SaveSink sink = [&](std::span<const std::byte> chunk) {
    bytes.insert(bytes.end(), chunk.begin(), chunk.end());
  };
  if constexpr (std::is_same_v<Tensors, Checkpoint>) {
    (void)save(sink, tensors, options);
  } else {
    (void)save(sink, std::span(tensors), options);
  }
  return bytes;
}

/// The checkpoint those bytes hold, loaded onto the CPU as owned copies (the bytes may go).
[[nodiscard]] inline Checkpoint reload(std::span<const std::byte> bytes) {
  return load(bytes, {.copy_cpu_storages = true});
}

}  // namespace pthload::test
