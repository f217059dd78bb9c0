// fuzz_safetensors: the safetensors header reader alone (lib/safetensors: size field, JSON
// through nlohmann-json, tensor entries, the layout of the data section) and the sharded index
// reader, then through open() + CPU placement + checksums. Property: any input yields a result or a
// pthload::Error, within limits; an accepted header describes tensors that tile the data section
// exactly, each range inside the input and the size its dtype and shape give.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>

#include "load_path.hpp"
#include "pthload/error.hpp"
#include "safetensors/header.hpp"
#include "safetensors/index.hpp"

namespace {

void header_alone(std::span<const std::byte> bytes) {
  try {
    const auto header = pthload::safetensors::Header::parse(bytes);
    std::uint64_t expected = header.data_offset();
    for (const auto& tensor : header.tensors()) {
      std::uint64_t numel = 1;
      for (const auto size : tensor.shape)
        numel *= static_cast<std::uint64_t>(size);
      // The bugs this target hunts: a range outside the input, two tensors on the same bytes,
      // a size that disagrees with the shape.
      if (tensor.offset != expected || tensor.nbytes > bytes.size() - tensor.offset ||
          tensor.nbytes != numel * pthload::element_size(tensor.dtype)) {
        std::abort();
      }
      expected += tensor.nbytes;
    }
    if (expected != bytes.size()) std::abort();
  } catch (const pthload::Error&) {
  }
}

// A sharded checkpoint's index from the same bytes: every shard name it accepts is a plain file
// name, listed once.
void index_alone(std::span<const std::byte> bytes) {
  try {
    const auto index = pthload::safetensors::parse_index(bytes);
    for (std::size_t i = 0; i < index.shards.size(); ++i) {
      const auto& shard = index.shards[i];
      if (shard.empty() || shard == "." || shard == ".." ||
          shard.find_first_of(std::string_view("/\\\0", 3)) != std::string::npos ||
          (i > 0 && !(index.shards[i - 1] < shard))) {
        std::abort();
      }
    }
  } catch (const pthload::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  header_alone(bytes);
  index_alone(bytes);
  pthload::fuzz::load_every_way(bytes);
  return 0;
}
