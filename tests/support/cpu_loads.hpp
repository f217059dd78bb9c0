// Test helper: the ways a checkpoint's storages reach the CPU, and every real torch.save fixture
// loaded there, for suites that check a property across all of them (checksums, copy_to).
#pragma once

#include <array>
#include <filesystem>
#include <optional>

#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/files.hpp"

namespace pthload::test {

struct CpuPlacement {
  const char* what;
  LoadOptions options;
};

/// Views of the mapped file, owned copies, and io=read (no mapping at all).
inline const std::array<CpuPlacement, 3> kCpuPlacements = {{
    {"views of the file", {}},
    {"owned copies", {.copy_cpu_storages = true}},
    {"io=read", {.io = IoStrategy::kRead}},
}};

/// Calls `check(path, checkpoint)` for every .pt under tests/fixtures/torch that loads with
/// map_to("cpu"); the hostile fixtures, which load nothing, are passed over. Returns how many
/// were checked.
template <typename Check>
int for_each_torch_fixture(Check&& check) {
  int files = 0;
  for (const auto& path : fixture_files("torch", has_extension(".pt"))) {
    std::optional<Checkpoint> checkpoint;
    try {
      checkpoint.emplace(load(path, {.map_location = map_to("cpu")}));
    } catch (const Error&) {
      continue;
    }
    check(path, *checkpoint);
    ++files;
  }
  return files;
}

}  // namespace pthload::test
