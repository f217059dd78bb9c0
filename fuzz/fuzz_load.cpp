// fuzz_load: the whole path a user takes — open, load on the CPU (views, then copies), list,
// checksum every tensor. Property: any input yields a checkpoint or a pthload::Error, within
// limits, and every tensor a load returns can be read end to end.
#include <cstddef>
#include <cstdint>
#include <span>

#include "load_path.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  pthload::fuzz::load_every_way(std::as_bytes(std::span(data, size)));
  return 0;
}
