// Tensor::copy_to(): the bytes contiguous_bytes() gives, written into the caller's memory, and
// nothing written where it refuses.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/checkpoint_file.hpp"
#include "support/cpu_loads.hpp"
#include "support/error_code.hpp"
#include "support/pickle_writer.hpp"

namespace {

using pthload::Errc;
using pthload::test::error_code_of;
using pthload::test::float_record;
using pthload::test::PickleWriter;

constexpr auto kUnwritten = std::byte{0xAB};

bool unwritten(std::byte b) {
  return b == kUnwritten;
}

// copy_to() into a destination 16 bytes larger than needed gives contiguous_bytes() and leaves
// the rest alone; one byte short, it throws and writes nothing.
void check_copy_to(const pthload::Tensor& tensor) {
  const auto expected = tensor.contiguous_bytes();
  std::vector<std::byte> destination(expected.size() + 16, kUnwritten);
  CHECK(tensor.copy_to(destination) == expected.size());
  CHECK(std::equal(expected.begin(), expected.end(), destination.begin()));
  CHECK(std::all_of(destination.begin() + static_cast<std::ptrdiff_t>(expected.size()),
                    destination.end(), unwritten));
  if (expected.empty()) return;
  std::vector<std::byte> small(expected.size() - 1, kUnwritten);
  CHECK(error_code_of([&] { (void)tensor.copy_to(small); }) == Errc::kTorchTensorOutOfBounds);
  CHECK(std::all_of(small.begin(), small.end(), unwritten));
}

std::vector<float> floats_of(const std::vector<std::byte>& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

}  // namespace

TEST_CASE("tensor: copy_to writes a view's elements in row-major order into the caller's memory") {
  // Storage 0: 0, 1, ... 999; storage 1: 600 000 floats (2.4 MB: more than one read window).
  PickleWriter p;
  p.empty_dict().mark();
  p.str("whole").tensor_v2("FloatStorage", "0", 1000, 0, {1000}, {1});
  p.str("offset").tensor_v2("FloatStorage", "0", 1000, 10, {100}, {1});
  p.str("strided").tensor_v2("FloatStorage", "0", 1000, 1, {3, 2}, {2, 20});
  p.str("empty").tensor_v2("FloatStorage", "0", 1000, 0, {0}, {1});
  p.str("big").tensor_v2("FloatStorage", "1", 600'000, 0, {600'000}, {1});
  const auto file = pthload::test::checkpoint_file(
      p.setitems().stop().bytes(), {{.name = "ck/data/0", .data = float_record(1000)},
                                    {.name = "ck/data/1", .data = float_record(600'000, 7)}});
  for (const auto& placement : pthload::test::kCpuPlacements) {
    CAPTURE(placement.what);
    const auto checkpoint = pthload::load(file.path(), placement.options);
    for (const auto& named : checkpoint.tensors()) {
      CAPTURE(named.name);
      check_copy_to(named.tensor);
    }
    std::vector<std::byte> out(24);
    CHECK(checkpoint.tensor("strided").copy_to(out) == 24);
    CHECK(floats_of(out) == std::vector<float>{1, 21, 3, 23, 5, 25});
    out.resize(400);
    CHECK(checkpoint.tensor("offset").copy_to(out) == 400);
    CHECK(floats_of(out).front() == 10);
    CHECK(floats_of(out).back() == 109);
    out.resize(2'400'000);
    CHECK(checkpoint.tensor("big").copy_to(out) == 2'400'000);
    const auto big = floats_of(out);
    CHECK(big.front() == 7);
    CHECK(big.back() == 600'006);
  }
}

TEST_CASE("tensor: copy_to refuses what contiguous_bytes refuses, before writing") {
  // 2^40 floats shown by one: refused at once, whatever the destination.
  PickleWriter p;
  p.empty_dict().mark();
  p.str("huge").tensor_v2("FloatStorage", "0", 1, 0, {INT64_C(1) << 20, INT64_C(1) << 20}, {0, 0});
  const auto file = pthload::test::checkpoint_file(
      p.setitems().stop().bytes(), {{.name = "ck/data/0", .data = float_record(1)}});
  const auto checkpoint = pthload::load(file.path());
  std::vector<std::byte> out(16, kUnwritten);
  CHECK(error_code_of([&] { (void)checkpoint.tensor("huge").copy_to(out); }) ==
        Errc::kTorchLimitExceeded);
  // open() places nothing: no bytes on the CPU to copy.
  const auto opened = pthload::open(file.path());
  CHECK(error_code_of([&] { (void)opened.tensor("huge").copy_to(out); }) ==
        Errc::kTorchLimitExceeded);
  CHECK(std::all_of(out.begin(), out.end(), unwritten));
}

TEST_SUITE("fixtures") {
  TEST_CASE("tensor: copy_to gives contiguous_bytes for every fixture's tensors") {
    const int files = pthload::test::for_each_torch_fixture(
        [](const std::filesystem::path& path, const pthload::Checkpoint& checkpoint) {
          CAPTURE(path.string());
          for (const auto& named : checkpoint.tensors()) {
            if (!named.tensor.has_storage()) continue;
            CAPTURE(named.name);
            try {
              (void)named.tensor.contiguous_bytes();
            } catch (const pthload::Error& e) {
              // What contiguous_bytes() refuses, copy_to() refuses alike.
              std::vector<std::byte> out(static_cast<std::size_t>(named.tensor.nbytes()) + 64);
              CHECK(error_code_of([&] { (void)named.tensor.copy_to(out); }) == e.code());
              continue;
            }
            check_copy_to(named.tensor);
          }
        });
    CHECK(files > 50);
  }
}
