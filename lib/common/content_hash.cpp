// ContentHash: the XXH3 variant this CPU runs fastest, chosen once (see xxh3_variant.cpp).
#include "common/content_hash.hpp"

#include <array>

namespace pthload::common {
namespace xxh3 {
namespace {

// __builtin_cpu_supports checks the kernel saves the vector registers too (XCR0), not only CPUID.
bool cpu_runs([[maybe_unused]] const Variant& variant) noexcept {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
#if defined(PTHLOAD_XXH3_AVX512)
  if (&variant == &kAvx512Variant) return __builtin_cpu_supports("avx512f");
#endif
#if defined(PTHLOAD_XXH3_AVX2)
  if (&variant == &kAvx2Variant) return __builtin_cpu_supports("avx2");
#endif
#endif
  return &variant == &kGenericVariant;
}

struct Usable {
  std::array<const Variant*, 3> variants{};
  std::size_t count = 0;
};

Usable find_usable() noexcept {
  Usable usable;
  for (const Variant* variant : {
         &kGenericVariant,
#if defined(PTHLOAD_XXH3_AVX2)
             &kAvx2Variant,
#endif
#if defined(PTHLOAD_XXH3_AVX512)
             &kAvx512Variant,
#endif
       }) {
    if (cpu_runs(*variant)) usable.variants[usable.count++] = variant;
  }
  return usable;
}

const Usable& usable() noexcept {
  static const Usable found = find_usable();
  return found;
}

}  // namespace

std::span<const Variant* const> usable_variants() noexcept {
  return std::span(usable().variants).first(usable().count);
}

const Variant& chosen_variant() noexcept {
  // The widest is last; the generic one is always usable.
  static const Variant& chosen = *usable_variants().back();
  return chosen;
}

}  // namespace xxh3

ContentHash::ContentHash() noexcept : variant_(&xxh3::chosen_variant()) {
  variant_->reset(state_);
}

void ContentHash::update(std::span<const std::byte> bytes) noexcept {
  variant_->update(state_, bytes.data(), bytes.size());
}

std::uint64_t ContentHash::digest() const noexcept {
  return variant_->digest(state_);
}

std::uint64_t ContentHash::of(std::span<const std::byte> bytes) noexcept {
  return xxh3::chosen_variant().hash(bytes.data(), bytes.size());
}

}  // namespace pthload::common
