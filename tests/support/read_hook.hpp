// Test helper: a pread stand-in (lib/common/fault_hooks.hpp) installed for one scope, so that a
// test can make the library's reads fail, stop short or be interrupted.
#pragma once

#include "common/fault_hooks.hpp"

namespace pthload::test {

/// Installs `read` as the library's pread; the real one again however the scope ends.
class ReadHook {
 public:
  explicit ReadHook(common::fault_hooks::ReadFunction read) { common::fault_hooks::set_read(read); }
  ReadHook(const ReadHook&) = delete;
  ReadHook& operator=(const ReadHook&) = delete;
  ~ReadHook() { common::fault_hooks::set_read(nullptr); }
};

}  // namespace pthload::test
