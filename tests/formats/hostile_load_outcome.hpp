// Test helper: the path a hostile case runs — open the bytes (as pthload::open does), place every
// storage on the CPU as views and then as copies (as pthload::load does), and read every tensor
// end to end through its checksum — and the checks each case makes on its outcome.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/mapped_file.hpp"
#include "device/place.hpp"
#include "formats/hostile_guard.hpp"
#include "formats/open.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"

namespace pthload::test::hostile {

/// The default limits: the suite proves that they alone keep hostile files in bounds.
inline LoadOptions cpu_options(bool copy) {
  LoadOptions options;
  options.map_location = map_to(Device::cpu());
  options.copy_cpu_storages = copy;
  return options;
}

/// Opens, places (views, then copies) and checksums `bytes`; returns the first pthload::Error's
/// code, or kOk when both loads succeed. Anything else a load throws propagates.
inline Errc load_outcome(std::span<const std::byte> bytes) {
  const auto file =
      std::make_shared<const common::MappedFile>(common::MappedFile::from_bytes(bytes));
  try {
    for (const bool copy : {false, true}) {
      const auto options = cpu_options(copy);
      auto checkpoint = formats::open_mapped(file, "hostile.pt", options);
      device::place_storages(checkpoint, options);
      std::uint64_t sink = 0;
      for (const auto& named : checkpoint.tensors())
        sink ^= named.tensor.content_checksum() + named.name.size();
      // Keeps the reads observable, so the optimizer cannot drop them.
      if (sink == 0x5eed) return Errc::kOk;
    }
  } catch (const Error& e) {
    return e.code();
  }
  return Errc::kOk;
}

/// The input must end in a pthload::Error with code `expected`.
inline void expect_error(std::span<const std::byte> bytes, Errc expected) {
  const auto code = load_outcome(bytes);
  if (code != expected) {
    throw guard::CaseFailure(
        "expected " + std::string(errc_name(expected)) + ", got " +
        std::string(code == Errc::kOk ? "a successful load" : errc_name(code)));
  }
}

/// The input must end in some pthload::Error (which one depends on where the damage lands).
inline void expect_some_error(std::span<const std::byte> bytes) {
  if (load_outcome(bytes) == Errc::kOk)
    throw guard::CaseFailure("expected a pthload::Error, but the input loaded");
}

/// Either outcome is fine (a flipped data byte is still a valid file); only a crash, a hang, an
/// over-allocation or another exception type is a failure, and the guard sees those.
inline void expect_load_or_error(std::span<const std::byte> bytes) {
  (void)load_outcome(bytes);
}

}  // namespace pthload::test::hostile
