// XXH3-64 compiled for one instruction set: PTHLOAD_XXH3_VARIANT names the Variant this file
// defines (kGenericVariant, kAvx2Variant, kAvx512Variant) and meson adds the matching -m flag.
// xxhash picks its vector code from what the compiler targets (XXH_VECTOR from __AVX512F__,
// __AVX2__, __SSE2__), which is the same choice its own dispatcher (xxh_x86dispatch.c) makes at
// run time. That dispatcher is in Debian's libxxhash.so but not in its libxxhash.a, which the
// tools linked, and without it the library hashed with SSE2 at a quarter of AVX-512's speed
// (18.5 against 79.7 GB/s from cache on this project's machines).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <new>

#include "common/xxh3_variant.hpp"

#ifndef PTHLOAD_XXH3_VARIANT
#error "meson defines PTHLOAD_XXH3_VARIANT as the variant to compile"
#endif

namespace pthload::common::xxh3 {
namespace {

static_assert(sizeof(XXH3_state_t) <= kStateBytes && alignof(XXH3_state_t) <= kStateAlignment,
              "an XXH3 state must fit common::xxh3::kStateBytes");

void reset(void* state) noexcept {
  // The caller's storage becomes an XXH3_state_t here; reset initialises every field it reads.
  XXH3_64bits_reset(::new (state) XXH3_state_t);
}

void update(void* state, const void* bytes, std::size_t size) noexcept {
  // Never fails: XXH3 returns an error only for a null state, or for null bytes with a size.
  (void)XXH3_64bits_update(std::launder(static_cast<XXH3_state_t*>(state)), bytes, size);
}

std::uint64_t digest(const void* state) noexcept {
  return XXH3_64bits_digest(std::launder(static_cast<const XXH3_state_t*>(state)));
}

std::uint64_t hash(const void* bytes, std::size_t size) noexcept {
  return XXH3_64bits(bytes, size);
}

}  // namespace

// The name says which vector code xxhash chose for the flags this file was compiled with.
constinit const Variant PTHLOAD_XXH3_VARIANT{
    .name = XXH_VECTOR == XXH_AVX512 ? "avx512"
            : XXH_VECTOR == XXH_AVX2 ? "avx2"
            : XXH_VECTOR == XXH_SSE2 ? "sse2"
            : XXH_VECTOR == XXH_NEON ? "neon"
            : XXH_VECTOR == XXH_VSX  ? "vsx"
                                     : "scalar",
    .reset = reset,
    .update = update,
    .digest = digest,
    .hash = hash,
};

}  // namespace pthload::common::xxh3
