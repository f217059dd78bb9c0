#include <doctest/doctest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/content_hash.hpp"

using pthload::common::ContentHash;
namespace xxh3 = pthload::common::xxh3;

namespace {

// Deterministic bytes: XXH3 takes a different path for 0, 1-3, 4-8, 9-16, 17-128, 129-240 and
// longer inputs, and for the longer ones stripes (64 bytes), blocks (1 024 with the default
// secret) and the streaming buffer (256) all have edges the lengths below cross.
std::vector<std::byte> test_bytes(std::size_t size) {
  std::vector<std::byte> bytes(size);
  std::uint64_t x = 0x9E3779B97F4A7C15u;
  for (auto& b : bytes) {
    x = x * 6364136223846793005u + 1442695040888963407u;
    b = static_cast<std::byte>(x >> 56);
  }
  return bytes;
}

std::uint64_t reference(const std::vector<std::byte>& bytes, std::size_t size) {
  return XXH3_64bits(bytes.data(), size);
}

// `size` bytes fed to `variant` in pieces of `piece` bytes (the last one shorter).
std::uint64_t streamed(const xxh3::Variant& variant, const std::vector<std::byte>& bytes,
                       std::size_t size, std::size_t piece) {
  alignas(xxh3::kStateAlignment) std::byte state[xxh3::kStateBytes];
  variant.reset(state);
  for (std::size_t done = 0; done < size; done += piece)
    variant.update(state, bytes.data() + done, std::min(piece, size - done));
  return variant.digest(state);
}

}  // namespace

TEST_CASE("common: the empty input hashes to XXH3's published value") {
  CHECK(ContentHash::of({}) == 0x2D06800538D394C2u);
  CHECK(ContentHash().digest() == 0x2D06800538D394C2u);
}

TEST_CASE("common: every XXH3 variant this CPU runs gives xxhash's XXH3_64bits") {
  const auto variants = xxh3::usable_variants();
  REQUIRE(!variants.empty());
  std::string names;
  for (const xxh3::Variant* variant : variants)
    names += std::string(names.empty() ? "" : ", ") + variant->name;
  MESSAGE("XXH3 variants this CPU runs: ", names,
          "; chosen: ", std::string(xxh3::chosen_variant().name));
  // The widest is the one ContentHash uses.
  CHECK(&xxh3::chosen_variant() == variants.back());

  const auto bytes = test_bytes((std::size_t{1} << 20) + 4096);
  std::vector<std::size_t> sizes;
  for (std::size_t size = 0; size <= 2100; ++size)
    sizes.push_back(size);
  for (const std::size_t size : {4095u, 4096u, 4097u, 65535u, 65537u, 1048576u, 1049000u})
    sizes.push_back(size);
  for (const xxh3::Variant* variant : variants) {
    CAPTURE(variant->name);
    for (const std::size_t size : sizes) {
      CAPTURE(size);
      const std::uint64_t expected = reference(bytes, size);
      REQUIRE(variant->hash(bytes.data(), size) == expected);
      // Pieces shorter than, equal to and longer than the streaming buffer and a block.
      if (size % 7 == 0 || size > 2100) {
        for (const std::size_t piece : {1u, 63u, 64u, 256u, 1000u, 1024u, 4096u})
          REQUIRE(streamed(*variant, bytes, size, piece) == expected);
      }
    }
  }
}

TEST_CASE("common: ContentHash in pieces equals ContentHash::of the whole") {
  const auto bytes = test_bytes(300'000);
  const std::span<const std::byte> all(bytes);
  ContentHash hash;
  hash.update(all.first(1));
  hash.update(all.subspan(1, 239));
  hash.update(all.subspan(240, 100'000));
  hash.update(all.subspan(100'240, 0));
  hash.update(all.subspan(100'240));
  CHECK(hash.digest() == ContentHash::of(all));
  CHECK(ContentHash::of(all) == reference(bytes, bytes.size()));
  // digest() leaves the state as it was: more bytes may follow.
  ContentHash twice;
  twice.update(all.first(500));
  CHECK(twice.digest() == ContentHash::of(all.first(500)));
  twice.update(all.subspan(500, 500));
  CHECK(twice.digest() == ContentHash::of(all.first(1000)));
}
