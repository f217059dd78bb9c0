// equal_bytes: every size up to a few words, a difference at every position.
#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

#include "zip/short_bytes.hpp"

using pthload::zip::equal_bytes;

namespace {

// Bytes with no two neighbours alike, 0x80 and 0xFF among them.
std::vector<std::byte> sample(std::size_t size) {
  const unsigned char pattern[] = {0x80, 0x01, 0xFF, 0x7F, 0x81, 0x02, 0xFE, 0x10, 0x61};
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i)
    bytes[i] = std::byte{pattern[i % sizeof pattern]};
  return bytes;
}

}  // namespace

TEST_CASE("zip short bytes: equal_bytes finds a difference at any position of any size") {
  for (std::size_t size = 0; size <= 40; ++size) {
    CAPTURE(size);
    const auto a = sample(size);
    auto b = a;
    CHECK(equal_bytes(a.data(), b.data(), size));
    for (std::size_t at = 0; at < size; ++at) {
      CAPTURE(at);
      for (const unsigned flip : {0x01u, 0x80u, 0xFFu}) {
        b[at] ^= std::byte(flip);
        CHECK_FALSE(equal_bytes(a.data(), b.data(), size));
        b[at] ^= std::byte(flip);
      }
    }
  }
}
