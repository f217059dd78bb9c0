// Test helper: the files the real torch wrote for partial loading (tests/fixtures/partial, made by
// tests/fixtures/make_partial_fixtures.py) and their manifest; and the proof that a load reads
// only some bytes of a file: a copy whose other pages are unreadable (PROT_NONE), where any read
// of them kills the process, and a child process to see it die in.
#pragma once

#include <doctest/doctest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/access.hpp"
#include "checkpoint/state.hpp"
#include "pthload/checkpoint.hpp"

namespace pthload::test {

/// tests/fixtures/partial.
inline const std::filesystem::path kPartialFixtures =
    std::filesystem::path(PTHLOAD_FIXTURES_DIR) / "partial";

/// The partial fixtures' MANIFEST.txt lines that start with `kind`, split at tabs (without the
/// kind).
inline std::vector<std::vector<std::string>> partial_manifest(const std::string& kind) {
  std::ifstream in(kPartialFixtures / "MANIFEST.txt");
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields;
    std::stringstream split(line);
    for (std::string field; std::getline(split, field, '\t');)
      fields.push_back(field);
    if (!fields.empty() && fields[0] == kind) rows.emplace_back(fields.begin() + 1, fields.end());
  }
  return rows;
}

/// The names of the checkpoint's tensors, sorted.
inline std::vector<std::string> names_of(const Checkpoint& checkpoint) {
  std::vector<std::string> names;
  for (const auto& named : checkpoint.tensors())
    names.push_back(named.name);
  std::sort(names.begin(), names.end());
  return names;
}

/// load() and open() of a file with `options` and the I/O strategy `io`.
inline Checkpoint load_with(IoStrategy io, const std::filesystem::path& path,
                            LoadOptions options = {}) {
  options.io = io;
  return load(path, options);
}
inline Checkpoint open_with(IoStrategy io, const std::filesystem::path& path,
                            LoadOptions options = {}) {
  options.io = io;
  return open(path, options);
}

/// Where a storage's bytes are in its file (zip record data, or a safetensors range).
inline std::pair<std::uint64_t, std::uint64_t> file_range_of(const Storage& storage) {
  const auto begin = internal::file_offset(internal::Access::state(storage));
  return {begin, begin + storage.nbytes()};
}

/// A copy of a file in page-aligned memory whose pages can be made unreadable.
class ProtectedCopy {
 public:
  explicit ProtectedCopy(const std::vector<std::byte>& bytes)
      : page_(static_cast<std::size_t>(::sysconf(_SC_PAGESIZE))),
        size_(bytes.size()),
        mapped_((bytes.size() + page_ - 1) / page_ * page_) {
    void* memory =
        ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(memory != MAP_FAILED);
    data_ = static_cast<std::byte*>(memory);
    std::copy(bytes.begin(), bytes.end(), data_);
  }
  ProtectedCopy(const ProtectedCopy&) = delete;
  ProtectedCopy& operator=(const ProtectedCopy&) = delete;
  ~ProtectedCopy() { ::munmap(data_, mapped_); }

  [[nodiscard]] std::span<const std::byte> bytes() const { return {data_, size_}; }

  /// Makes the whole pages inside [begin, end) of the file unreadable; returns how many bytes.
  std::uint64_t protect(std::uint64_t begin, std::uint64_t end) {
    const std::uint64_t first = (begin + page_ - 1) / page_ * page_;
    const std::uint64_t last = end / page_ * page_;
    if (first >= last) return 0;
    REQUIRE(::mprotect(data_ + first, last - first, PROT_NONE) == 0);
    return last - first;
  }

 private:
  std::size_t page_;
  std::size_t size_;
  std::size_t mapped_;
  std::byte* data_ = nullptr;
};

/// Runs `body` in a child process: whether it crashed (a signal, or under ASan, whose SEGV
/// handler reports and exits 1, any status but 0 = done and 2 = threw).
inline bool crashes(const std::function<void()>& body) {
  const pid_t child = ::fork();
  if (child == 0) {
    // doctest's own handler would report the crash as this test's failure.
    std::signal(SIGSEGV, SIG_DFL);
    std::signal(SIGBUS, SIG_DFL);
    try {
      body();
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  if (WIFSIGNALED(status)) return true;
  return WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 2;
}

}  // namespace pthload::test
