// Fuzz target for DCP's .metadata reader (lib/dcp). Properties: any input yields a Metadata or a
// pthload::Error, within small pickle limits, without crashing, leaking or hanging; and whatever
// it accepts keeps the promises the torch layer relies on: item paths are plain file names,
// item ranges do not overflow, and each tensor's chunks lie inside it and hold exactly its
// elements.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "common/checked.hpp"
#include "dcp/metadata.hpp"
#include "pickle_limits.hpp"
#include "pthload/error.hpp"

namespace {

void check_location(const pthload::dcp::ItemLocation& location) {
  if (location.relative_path.empty() || location.relative_path.find('/') != std::string::npos ||
      location.relative_path == "..") {
    std::abort();
  }
  if (!pthload::common::checked_add(location.offset, location.length)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto metadata = pthload::dcp::parse_metadata(std::as_bytes(std::span{data, size}),
                                                       pthload::fuzz::pickle_fuzz_limits(200));
    for (const auto& entry : metadata.entries) {
      if (!entry.is_tensor) {
        if (!entry.bytes_location) std::abort();
        check_location(*entry.bytes_location);
        continue;
      }
      std::uint64_t numel = 1;
      for (const auto s : entry.size)
        numel *= s;  // checked by the reader
      std::uint64_t held = 0;
      for (const auto& chunk : entry.chunks) {
        check_location(chunk.location);
        if (chunk.offsets.size() != entry.size.size() || chunk.sizes.size() != entry.size.size())
          std::abort();
        std::uint64_t volume = 1;
        for (std::size_t d = 0; d < entry.size.size(); ++d) {
          if (!pthload::common::fits(chunk.offsets[d], chunk.sizes[d], entry.size[d])) std::abort();
          volume *= chunk.sizes[d];
        }
        held += volume;
      }
      if (held != numel) std::abort();
    }
  } catch (const pthload::Error&) {
  }
  return 0;
}
