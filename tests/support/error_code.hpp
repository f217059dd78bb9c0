// Test helper: the pthload::Errc a callable throws, or kOk when it throws nothing.
#pragma once

#include <pthload/error.hpp>

namespace pthload::test {

template <typename F>
Errc error_code_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return Errc::kOk;
}

}  // namespace pthload::test
