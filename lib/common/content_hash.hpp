// XXH3-64 (seed 0) of tensor bytes, with the widest vector unit the CPU has: what
// Tensor::content_checksum() and pthinspect's `--checksum` give (DESIGN.md, the JSON's "xxh3").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/xxh3_variant.hpp"

namespace pthload::common {

/// XXH3-64 of bytes given in pieces: digest() is what XXH3_64bits gives of the pieces joined,
/// whatever their sizes.
class ContentHash {
 public:
  ContentHash() noexcept;
  void update(std::span<const std::byte> bytes) noexcept;
  [[nodiscard]] std::uint64_t digest() const noexcept;

  /// XXH3-64 of `bytes` alone.
  [[nodiscard]] static std::uint64_t of(std::span<const std::byte> bytes) noexcept;

 private:
  const xxh3::Variant* variant_;
  alignas(xxh3::kStateAlignment) std::byte state_[xxh3::kStateBytes];
};

namespace xxh3 {

/// The implementation ContentHash uses on this CPU: AVX-512, then AVX2 where the build has them
/// (x86-64) and the CPU and kernel run them, else the generic one. Chosen once per process.
[[nodiscard]] const Variant& chosen_variant() noexcept;

/// Every variant this build has that this CPU runs, the generic one first (for tests that check
/// they agree).
[[nodiscard]] std::span<const Variant* const> usable_variants() noexcept;

}  // namespace xxh3
}  // namespace pthload::common
