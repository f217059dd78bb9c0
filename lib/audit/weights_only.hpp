// Whether torch.load(weights_only=True) would accept a pickle: a port of torch's weights-only
// unpickler (torch/_weights_only_unpickler.py Unpickler.load, torch 2.15) that tracks what each
// value is rather than making it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace pthload::audit {

/// How torch.load resolves persistent ids in the pickle being checked.
enum class PersistentIds : unsigned char {
  kNone,    ///< a pickle torch.load reads with the default persistent_load, which refuses all
  kZip,     ///< torch/serialization.py _load: ('storage', storage type, key, location, numel)
  kLegacy,  ///< _legacy_load: ('storage', storage type, key, location, numel, view metadata)
};

/// The outcome of one pickle under torch's weights-only rules.
struct WeightsOnlyCheck {
  bool accepted = false;
  std::string reason;      ///< why not, as torch says it ("Unsupported operand 149")
  std::size_t offset = 0;  ///< where the refusing opcode starts
  std::size_t end = 0;     ///< offset just past STOP, when accepted
  /// The root when it is an int that fits in 64 bits (LONG1 of up to 8 bytes, BININT*).
  std::optional<std::int64_t> root_int;
  /// The root when it is LONG1's bytes (torch's legacy magic number is 10 of them).
  std::string root_long_bytes;
};

/// Runs the pickle at the start of `pickle` as torch's weights-only unpickler would, with
/// torch.load's encoding ('utf-8'). Never runs or imports anything; never throws for input
/// (bad_alloc aside). Values are counted against the input's size, so memory stays bounded.
[[nodiscard]] WeightsOnlyCheck check_weights_only(std::span<const std::byte> pickle,
                                                  PersistentIds persistent_ids);

}  // namespace pthload::audit
