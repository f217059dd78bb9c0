// Test helper: what parsing (and reading every record of) an archive threw, with where.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include <pthload/error.hpp>

#include "zip/archive.hpp"

namespace pthload::test {

/// The first pthload::Error thrown, or code kOk when nothing threw.
struct Outcome {
  Errc code = Errc::kOk;
  bool unsupported = false;  ///< an UnsupportedError rather than a FormatError
  std::string record;
  std::optional<std::uint64_t> offset;
  std::string message;
};

inline Outcome outcome_of_error(const Error& e) {
  return {e.code(), dynamic_cast<const UnsupportedError*>(&e) != nullptr, e.context().record,
          e.context().offset, e.what()};
}

/// Parses `bytes`; pthload errors become the Outcome, anything else propagates.
inline Outcome parse_outcome(std::span<const std::byte> bytes, const Limits& limits = {}) {
  try {
    (void)zip::Archive::parse(bytes, limits);
  } catch (const Error& e) {
    return outcome_of_error(e);
  }
  return {};
}

/// Parses `bytes`, then reads every record (without, then with, CRC verification).
inline Outcome load_outcome(std::span<const std::byte> bytes, const Limits& limits = {}) {
  try {
    const auto archive = zip::Archive::parse(bytes, limits);
    for (const auto& entry : archive.entries())
      (void)archive.read(entry);
    for (const auto& entry : archive.entries())
      (void)archive.read(entry, true);
  } catch (const Error& e) {
    return outcome_of_error(e);
  }
  return {};
}

/// Parses `bytes` and reads the record `name`.
inline Outcome read_outcome(std::span<const std::byte> bytes, std::string_view name,
                            bool verify_crc = false, const Limits& limits = {}) {
  try {
    const auto archive = zip::Archive::parse(bytes, limits);
    (void)archive.read(archive.at(name), verify_crc);
  } catch (const Error& e) {
    return outcome_of_error(e);
  }
  return {};
}

}  // namespace pthload::test
