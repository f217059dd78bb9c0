// The CPU references of the device kernels: conversions against values torch computed
// (tests/fixtures/device, made by make_conversion_vectors.py), byte swap, strided gather; and the
// host backend running them on its streams.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "device/cpu/float_bits.hpp"
#include "device/cpu/kernels.hpp"
#include "device/host_backend.hpp"
#include "pthload/dtype.hpp"
#include "support/files.hpp"

using pthload::Dtype;
namespace cpu = pthload::device::cpu;
namespace bits = pthload::device::bits;

namespace {

constexpr Dtype kConvertible[] = {Dtype::kFloat32, Dtype::kBFloat16, Dtype::kFloat16,
                                  Dtype::kFloat8E4M3FN, Dtype::kFloat8E5M2};

std::vector<std::byte> read_fixture(const std::string& name) {
  const auto path = pthload::test::fixture_path("device") / name;
  REQUIRE_MESSAGE(std::filesystem::is_regular_file(path), "missing fixture ", name);
  return pthload::test::file_bytes(path);
}

std::uint32_t element_bits(const std::byte* at, std::size_t size) {
  std::uint32_t value = 0;
  std::memcpy(&value, at, size);  // little-endian host
  return value;
}

bool is_nan(std::uint32_t value, Dtype dtype) {
  switch (dtype) {
    case Dtype::kFloat32:
      return (value & 0x7FFFFFFFu) > 0x7F800000u;
    case Dtype::kBFloat16:
      return (value & 0x7FFFu) > 0x7F80u;
    case Dtype::kFloat16:
      return (value & 0x7FFFu) > 0x7C00u;
    case Dtype::kFloat8E4M3FN:
      return (value & 0x7Fu) == 0x7Fu;
    case Dtype::kFloat8E5M2:
      return (value & 0x7Fu) > 0x7Cu;
    default:
      return false;
  }
}

}  // namespace

TEST_SUITE("fixtures") {
  TEST_CASE("device: conversions round exactly as torch's .to() (every pair of float types)") {
    for (const Dtype from : kConvertible) {
      for (const Dtype to : kConvertible) {
        if (from == to) continue;
        const std::string name = std::string(pthload::dtype_name(from)) + "_to_" +
                                 std::string(pthload::dtype_name(to)) + ".bin";
        CAPTURE(name);
        const auto bytes = read_fixture(name);
        const std::size_t from_size = pthload::element_size(from);
        const std::size_t to_size = pthload::element_size(to);
        const std::size_t count = bytes.size() / (from_size + to_size);
        REQUIRE(count * (from_size + to_size) == bytes.size());
        REQUIRE(count > 200);
        const std::span<const std::byte> input(bytes.data(), count * from_size);
        const std::byte* expected = bytes.data() + count * from_size;
        std::vector<std::byte> output(count * to_size, std::byte{0xAB});
        cpu::convert(input, from, output, to, count);
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < count; ++i) {
          const auto want = element_bits(expected + i * to_size, to_size);
          const auto got = element_bits(output.data() + i * to_size, to_size);
          // torch's NaN payload depends on its code path (scalar or vectorised); NaN is NaN.
          const bool same = want == got || (is_nan(want, to) && is_nan(got, to));
          if (!same && ++mismatches <= 5) {
            MESSAGE("input ", element_bits(input.data() + i * from_size, from_size), ": torch ",
                    want, ", pthload ", got);
          }
        }
        CHECK(mismatches == 0);
      }
    }
  }
}

TEST_CASE("device: narrow formats round-trip through float32 exactly") {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    for (const auto& format : {bits::kBFloat16, bits::kFloat16}) {
      const auto wide = bits::f32_from_narrow(h, format);
      if ((wide & 0x7FFFFFFFu) > 0x7F800000u) continue;  // NaN
      CHECK(bits::narrow_from_f32(wide, format) == h);
    }
  }
  for (std::uint32_t h = 0; h < 0x100; ++h) {
    for (const auto& format : {bits::kFloat8E4M3FN, bits::kFloat8E5M2}) {
      const auto wide = bits::f32_from_narrow(h, format);
      if ((wide & 0x7FFFFFFFu) > 0x7F800000u) continue;
      CHECK(bits::narrow_from_f32(wide, format) == h);
    }
  }
}

TEST_CASE("device: byteswap reverses each element by its unit") {
  std::vector<std::byte> bytes(16);
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<std::byte>(i);
  auto two = bytes;
  cpu::byteswap(two, 2);
  CHECK(two[0] == std::byte{1});
  CHECK(two[1] == std::byte{0});
  auto four = bytes;
  cpu::byteswap(four, 4);
  CHECK(four[0] == std::byte{3});
  CHECK(four[7] == std::byte{4});
  auto eight = bytes;
  cpu::byteswap(eight, 8);
  CHECK(eight[0] == std::byte{7});
  CHECK(eight[15] == std::byte{8});
  auto one = bytes;
  cpu::byteswap(one, 1);
  CHECK(one == bytes);
}

TEST_CASE("device: make_contiguous gathers a strided view in row-major order") {
  // A 5x8 float32 arange, viewed as [1:4, 1::3].t() (the fixture's lone_view): sizes {3, 3},
  // strides {3, 8}, offset 9.
  std::vector<float> base(40);
  for (std::size_t i = 0; i < base.size(); ++i)
    base[i] = static_cast<float>(i);
  pthload::device::StridedView view{.element_size = 4, .dims = 2, .offset = 9};
  view.sizes[0] = 3;
  view.sizes[1] = 3;
  view.strides[0] = 3;
  view.strides[1] = 8;
  CHECK(cpu::element_count(view) == 9);
  CHECK(cpu::strided_extent(view) == (9 + 2 * 3 + 2 * 8 + 1) * 4);
  std::vector<float> out(9, -1.0f);
  cpu::make_contiguous(reinterpret_cast<const std::byte*>(base.data()), view,
                       reinterpret_cast<std::byte*>(out.data()));
  const std::vector<float> expected{9, 17, 25, 12, 20, 28, 15, 23, 31};
  CHECK(out == expected);
  // Stride 0 (expand) repeats an element; a 0-dim view is one element.
  pthload::device::StridedView expanded{.element_size = 4, .dims = 1, .offset = 2};
  expanded.sizes[0] = 3;
  std::vector<float> repeated(3);
  cpu::make_contiguous(reinterpret_cast<const std::byte*>(base.data()), expanded,
                       reinterpret_cast<std::byte*>(repeated.data()));
  CHECK(repeated == std::vector<float>{2, 2, 2});
  pthload::device::StridedView scalar{.element_size = 4, .dims = 0, .offset = 7};
  float one = 0;
  cpu::make_contiguous(reinterpret_cast<const std::byte*>(base.data()), scalar,
                       reinterpret_cast<std::byte*>(&one));
  CHECK(one == 7.0f);
}

TEST_CASE("device: the host backend runs the kernels in stream order") {
  pthload::device::HostBackend backend;
  auto* stream = backend.create_stream(0);
  const std::vector<float> values{1.0f, -2.5f, 3.0e-3f, 65504.0f};
  auto* device = static_cast<std::byte*>(backend.allocate(0, 16));
  auto* converted = static_cast<std::byte*>(backend.allocate(0, 8));
  backend.copy_to_device(device, values.data(), 16, stream);
  backend.convert(device, Dtype::kFloat32, converted, Dtype::kBFloat16, 4, stream);
  backend.byteswap(converted, 8, 2, stream);
  std::vector<std::byte> out(8);
  backend.copy_to_host(out.data(), converted, 8, stream);
  std::vector<std::byte> expected(8);
  cpu::convert({reinterpret_cast<const std::byte*>(values.data()), 16}, Dtype::kFloat32, expected,
               Dtype::kBFloat16, 4);
  cpu::byteswap(expected, 2);
  CHECK(out == expected);
  backend.free(0, converted);
  backend.free(0, device);
  backend.destroy_stream(stream);
  CHECK(backend.counts().device_allocations == 0);
  CHECK(backend.counts().streams == 0);
}
