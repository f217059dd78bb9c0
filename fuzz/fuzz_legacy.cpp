// fuzz_legacy: the pre-1.6 stream reader, alone (lib/legacy: stacked pickles, storage table with
// element sizes the input picks) and through open() + CPU placement + checksums, since the
// legacy storages and views are made in the torch layer. Property: any input yields a result or
// a pthload::Error, within limits; every storage range lies inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <vector>

#include "common/mapped_file.hpp"
#include "device/place.hpp"
#include "legacy/stream.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "torch/open.hpp"

namespace {

pthload::LoadOptions fuzz_options(bool copy) {
  pthload::LoadOptions options;
  options.map_location = pthload::map_to(pthload::Device::cpu());
  options.copy = copy;
  options.limits.max_pickle_stack = 100'000;
  options.limits.max_pickle_memo = 100'000;
  options.limits.max_pickle_nesting = 200;
  options.limits.max_pickle_values = 1'000'000;
  return options;
}

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
  stream_alone(bytes, fuzz_options(false).limits);
  const auto file = std::make_shared<const pthload::common::MappedFile>(
      pthload::common::MappedFile::from_bytes(bytes));
  for (const bool copy : {false, true}) {
    try {
      const auto options = fuzz_options(copy);
      auto checkpoint = pthload::torch::open_mapped(file, "fuzz.pt", options);
      pthload::device::place_storages(checkpoint, options);
      std::uint64_t sink = 0;
      for (const auto& named : checkpoint.tensors()) {
        sink ^= named.tensor.content_checksum() + named.name.size();
      }
      if (sink == 0x5eed) return 0;  // keeps the work observable
    } catch (const pthload::Error&) {
    }
  }
  return 0;
}
