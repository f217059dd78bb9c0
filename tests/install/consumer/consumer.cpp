// A program outside pthload's tree, built against an installed pthload: the C++ API and the
// DLPack header. Prints "<tensors> <name of the first> <the sum of its floats>"; exit 1 on error.
#include <pthload/dlpack.hpp>
#include <pthload/pthload.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  try {
    const pthload::Checkpoint checkpoint =
        pthload::load(argv[1], {.map_location = pthload::map_to("cpu")});
    const pthload::NamedTensor& first = checkpoint.tensors().front();
    double sum = 0;
    for (std::uint64_t i = 0; i < first.tensor.numel(); ++i) {  // a contiguous float32 tensor
      float value;
      std::memcpy(&value, first.tensor.data() + i * sizeof value, sizeof value);
      sum += value;
    }
    DLManagedTensor* managed = pthload::to_dlpack(first.tensor);
    const bool same = managed->dl_tensor.data == first.tensor.data();
    managed->deleter(managed);
    std::printf("%zu %s %g\n", checkpoint.tensors().size(), first.name.c_str(), sum);
    return same ? 0 : 1;
  } catch (const pthload::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
