// Helpers for the pickle tests: running byte strings and fixture files, catching errors.
#pragma once

#include <cstddef>
#include <fstream>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pickle/machine.hpp"
#include "pickle/print.hpp"
#include "pthload/error.hpp"
#include "support/error_code.hpp"

namespace pthload::pickle::test {

inline std::span<const std::byte> bytes(std::string_view text) {
  return std::as_bytes(std::span{text.data(), text.size()});
}

/// Runs `pickle`; the Result borrows `pickle`, which must outlive it.
inline Result run(std::string_view pickle, const RunOptions& options = {},
                  const Limits& limits = {}) {
  Machine machine(limits);
  return machine.run(bytes(pickle), options);
}

/// The printed tree of `pickle`.
inline std::string printed(std::string_view pickle, const PrintOptions& print_options = {}) {
  const Result result = run(pickle);
  return print(*result.root, print_options);
}

/// The error `f` throws, or nullopt (support/error_code.hpp).
using pthload::test::error_of;

/// The error running `pickle` throws, or nullopt.
inline std::optional<Error> run_error(std::string_view pickle, const Limits& limits = {},
                                      const RunOptions& options = {}) {
  return error_of([&] { (void)run(pickle, options, limits); });
}

/// The bytes of tests/fixtures/pickle/<name>.
inline std::string fixture(const std::string& name) {
  std::ifstream in(std::string(PTHLOAD_FIXTURES_DIR) + "/pickle/" + name, std::ios::binary);
  if (!in) throw std::runtime_error("missing fixture " + name);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace pthload::pickle::test
