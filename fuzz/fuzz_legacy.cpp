// fuzz_legacy: the pre-1.6 stream reader, alone (lib/legacy: stacked pickles, storage table with
// element sizes the input picks) and through open() + CPU placement + checksums, since the
// legacy storages and views are made in the torch layer. Property: any input yields a result or
// a pthload::Error, within limits; every storage range lies inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "legacy/stream.hpp"
#include "load_path.hpp"
#include "pthload/error.hpp"

namespace {

void stream_alone(std::span<const std::byte> bytes, const pthload::Limits& limits) {
  try {
    const auto stream = pthload::legacy::Stream::parse(bytes, limits);
    // Element sizes from the keys' lengths: 1, 2, 4, 8 or 16 bytes, like torch's dtypes.
    std::vector<std::size_t> sizes;
    for (const auto& key : stream.keys())
      sizes.push_back(std::size_t{1} << (key.size() % 5));
    for (const auto& data : stream.storage_data(sizes)) {
      if (data.bytes.offset > bytes.size() || data.bytes.size > bytes.size() - data.bytes.offset) {
        std::abort();  // a range outside the input: the bug this target hunts
      }
    }
  } catch (const pthload::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  stream_alone(bytes, pthload::fuzz::fuzz_options(false).limits);
  pthload::fuzz::load_every_way(bytes);
  return 0;
}
