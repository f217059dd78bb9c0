// One compiled implementation of XXH3-64 (xxhash.h, XXH_INLINE_ALL): xxh3_variant.cpp is built
// once per instruction set (lib/common/meson.build), and content_hash.cpp picks the widest the
// CPU runs. Only C types here: the variants' translation units are compiled for instruction sets
// the CPU may lack, so they must not emit inline C++ functions the linker could pick for others.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pthload::common::xxh3 {

/// Room for an XXH3_state_t (576 bytes in xxhash 0.8; each variant checks it fits).
inline constexpr std::size_t kStateBytes = 640;
inline constexpr std::size_t kStateAlignment = 64;

/// The functions of one implementation. A state made by one variant's `reset` is only ever
/// passed to the same variant's `update` and `digest`.
struct Variant {
  const char* name;
  void (*reset)(void* state) noexcept;
  void (*update)(void* state, const void* bytes, std::size_t size) noexcept;
  std::uint64_t (*digest)(const void* state) noexcept;
  std::uint64_t (*hash)(const void* bytes, std::size_t size) noexcept;
};

// The variants a build may hold; content_hash.cpp uses those meson compiled (it defines
// PTHLOAD_XXH3_AVX2 and PTHLOAD_XXH3_AVX512 for them). The generic one is the compiler's own
// target: SSE2 on x86-64, NEON on AArch64.
extern const Variant kGenericVariant;
extern const Variant kAvx2Variant;
extern const Variant kAvx512Variant;

}  // namespace pthload::common::xxh3
