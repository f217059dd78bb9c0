// The load path shared by fuzz targets: open the bytes, report its globals and print its tree,
// place every storage on the CPU as views and then as copies, and read every tensor end to end
// through its checksum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "common/mapped_file.hpp"
#include "device/place.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "pthload/inspect.hpp"
#include "torch/open.hpp"

namespace pthload::fuzz {

/// CPU placement with limits small enough that each input runs in milliseconds.
inline LoadOptions fuzz_options(bool copy) {
  LoadOptions options;
  options.map_location = map_to(Device::cpu());
  options.copy = copy;
  options.limits.max_zip_entries = 10'000;
  options.limits.max_inflated_record_bytes = 64 << 20;
  options.limits.max_pickle_stack = 100'000;
  options.limits.max_pickle_memo = 100'000;
  options.limits.max_pickle_nesting = 200;
  options.limits.max_pickle_values = 1'000'000;
  return options;
}

/// Loads `bytes` as views and as copies; a pthload::Error is an accepted outcome, anything else
/// (a crash, a sanitizer report) is a finding.
inline void load_every_way(std::span<const std::byte> bytes) {
  const auto file =
      std::make_shared<const common::MappedFile>(common::MappedFile::from_bytes(bytes));
  for (const bool copy : {false, true}) {
    try {
      const auto options = fuzz_options(copy);
      auto checkpoint = torch::open_mapped(file, "fuzz.pt", options);
      std::uint64_t sink = 0;
      if (!copy) {
        // What `pthinspect globals` and `tree` show, once per input: same tree either way.
        sink += referenced_globals(checkpoint).size();
        TreeOptions tree_options;
        tree_options.max_depth = 20;
        tree_options.max_items = 20;
        sink += object_tree(checkpoint, tree_options).size();
      }
      device::place_storages(checkpoint, options);
      for (const auto& named : checkpoint.tensors()) {
        sink ^= named.tensor.content_checksum() + named.name.size();
      }
      // Keeps the reads observable, so the optimizer cannot drop them.
      if (sink == 0x5eed) return;
    } catch (const Error&) {
    }
  }
}

}  // namespace pthload::fuzz
