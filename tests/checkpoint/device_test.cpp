// pthload::Device (lib/checkpoint/device.cpp): torch's device strings, parsed and written back.
#include <doctest/doctest.h>

#include "pthload/device.hpp"
#include "pthload/error.hpp"
#include "support/error_code.hpp"

using pthload::Device;
using pthload::Errc;
using pthload::test::error_code_of;

TEST_CASE("checkpoint: Device::parse reads torch's device strings") {
  CHECK(Device::parse("cpu") == Device::cpu());
  CHECK(Device::parse("cuda") == Device::cuda());
  CHECK(Device::parse("cuda:1") == Device::cuda(1));
  CHECK(Device::parse("meta") == Device::meta());
  CHECK(Device::cuda(2).to_string() == "cuda:2");
  CHECK(error_code_of([] { (void)Device::parse("cuda:x"); }) == Errc::kDeviceBadString);
  CHECK(error_code_of([] { (void)Device::parse("cuda:-1"); }) == Errc::kDeviceBadString);
  // torch: "Invalid device string" for an index with a leading zero or sign.
  CHECK(Device::parse("cuda:0") == Device::cuda(0));
  CHECK(Device::parse("cuda:10") == Device::cuda(10));
  for (const char* text : {"cuda:01", "cuda:00", "cuda:-0", "cuda:+1", "cuda:", "cpu:01"}) {
    CAPTURE(text);
    CHECK(error_code_of([&] { (void)Device::parse(text); }) == Errc::kDeviceBadString);
  }
  CHECK(error_code_of([] { (void)Device::parse(""); }) == Errc::kDeviceBadString);
  CHECK(error_code_of([] { (void)Device::parse("mps"); }) == Errc::kDeviceUnsupportedType);
  CHECK(error_code_of([] { (void)Device::parse("xla:0"); }) == Errc::kDeviceUnsupportedType);
}
