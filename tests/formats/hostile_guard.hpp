// Test helper: runs one hostile-input case in a forked child under a wall-clock and a memory
// bound, and tells the parent how it ended (passed, failed with a message, crashed, hung, or
// allocated more than the input paid for). Linux/POSIX only, like the library's mmap.
#pragma once

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

// AddressSanitizer reserves terabytes of shadow address space at start-up, so an address-space
// limit (RLIMIT_AS) would make every allocation fail; under it the guard measures resident memory
// instead. GCC says so with __SANITIZE_ADDRESS__, clang with __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define PTHLOAD_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PTHLOAD_TEST_ASAN 1
#endif
#endif
#ifndef PTHLOAD_TEST_ASAN
#define PTHLOAD_TEST_ASAN 0
#endif
#if PTHLOAD_TEST_ASAN
#include <sanitizer/lsan_interface.h>
#endif

namespace pthload::test::guard {

inline constexpr bool kUnderAsan = PTHLOAD_TEST_ASAN != 0;

/// A case's outcome was wrong (e.g. it loaded where an error was required, or threw another
/// code); the child reports the message and exits.
class CaseFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The bounds a case runs under.
struct Bounds {
  /// Wall-clock time for the whole case (every input the child runs). The inputs are at most a
  /// few MB and the loads are linear, so 10 s is two orders of magnitude above a normal run on a
  /// loaded machine: only a hang (or a walk exponential in the input) reaches it. Sanitizers make
  /// the code 3-20x slower, so they get 60 s.
  std::chrono::seconds wall = kUnderAsan ? std::chrono::seconds(60) : std::chrono::seconds(10);
  /// Memory the case may use beyond what the test process held when it forked.
  std::uint64_t memory_bytes = 0;
};

/// What a case may allocate: a 256 MiB allowance (the loader's own tables, the allocator's
/// slack, and under ASan its quarantine of freed blocks, 256 MiB by default; the test runner
/// itself is not counted, see run()) plus 64 bytes per input byte. 64x covers what the library
/// is allowed to build from a byte it reads: one value node, stack slot and memo slot per pickle
/// opcode byte (each opcode is one byte), and the owned copy of a storage (1x). A case that
/// claims sizes it does not carry (2^40-byte records, 2^63 lengths) exceeds this by orders of
/// magnitude. Deflated records may expand up to 1032x by design; the deflate cases below keep
/// their streams small enough that 256 MiB still holds what they may legitimately inflate.
[[nodiscard]] inline std::uint64_t memory_bound(std::uint64_t largest_input_bytes) {
  return (std::uint64_t{256} << 20) + 64 * largest_input_bytes;
}

[[nodiscard]] inline Bounds bounds_for(std::uint64_t largest_input_bytes) {
  Bounds bounds;
  bounds.memory_bytes = memory_bound(largest_input_bytes);
  return bounds;
}

/// A page shared by parent and child: the child writes which input it is on and, when it
/// fails, why, so the parent can name the input even if the child dies from a signal.
class SharedReport {
 public:
  static constexpr std::size_t kLabelSize = 512;
  static constexpr std::size_t kMessageSize = 3072;

  SharedReport() {
    void* page =
        ::mmap(nullptr, sizeof(Page), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) throw std::runtime_error("guard: mmap of the shared page failed");
    page_ = static_cast<Page*>(page);
  }
  SharedReport(const SharedReport&) = delete;
  SharedReport& operator=(const SharedReport&) = delete;
  ~SharedReport() { ::munmap(page_, sizeof(Page)); }

  /// Called by the child before each input: cheap (one bounded copy), no allocation.
  void at(std::string_view label) noexcept { copy(page_->label, kLabelSize, label); }
  void fail(std::string_view message) noexcept { copy(page_->message, kMessageSize, message); }
  [[nodiscard]] std::string label() const { return page_->label; }
  [[nodiscard]] std::string message() const { return page_->message; }

 private:
  struct Page {
    char label[kLabelSize];
    char message[kMessageSize];
  };
  static void copy(char* to, std::size_t capacity, std::string_view from) noexcept {
    const auto n = from.size() < capacity - 1 ? from.size() : capacity - 1;
    std::memcpy(to, from.data(), n);
    to[n] = '\0';
  }
  Page* page_ = nullptr;
};

/// The body of a case, run in the child. It calls report.at() before each input and throws
/// CaseFailure when an outcome is wrong.
using Body = std::function<void(SharedReport& report)>;

/// How a case ended, seen from the parent.
struct Result {
  enum class Kind { kPassed, kFailed, kCrashed, kTimedOut, kOverMemory, kOtherException };
  Kind kind = Kind::kPassed;
  std::string label;    ///< the input the child was on
  std::string message;  ///< the child's message, or what the parent saw
  std::uint64_t peak_growth_bytes = 0;

  [[nodiscard]] bool passed() const { return kind == Kind::kPassed; }
  [[nodiscard]] std::string describe() const {
    static constexpr const char* kNames[] = {
        "passed", "failed", "crashed", "timed out", "over memory", "threw a non-pthload exception"};
    return std::string(kNames[static_cast<int>(kind)]) + " at [" + label + "]: " + message +
           " (memory growth " + std::to_string(peak_growth_bytes >> 20) + " MiB)";
  }
};

// Exit codes of the child; anything else (or a signal) is a crash.
inline constexpr int kExitPassed = 0;
inline constexpr int kExitFailed = 90;
inline constexpr int kExitOutOfMemory = 91;
inline constexpr int kExitOtherException = 92;
inline constexpr int kExitLeaked = 93;

/// The resident set of this process now, in bytes (/proc/self/statm's second field, in pages).
[[nodiscard]] inline std::uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size_pages = 0;
  std::uint64_t resident_pages = 0;
  statm >> size_pages >> resident_pages;
  return resident_pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

[[nodiscard]] inline std::uint64_t address_space_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size_pages = 0;
  statm >> size_pages;
  return size_pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

[[noreturn]] inline void run_child(const Body& body, const Bounds& bounds, SharedReport& report,
                                   std::uint64_t parent_address_space) {
  // The child's own alarm: SIGALRM's default action ends it even if the parent is stalled.
  ::alarm(static_cast<unsigned>(bounds.wall.count()));
  if constexpr (!kUnderAsan) {
    // Address space, not resident memory: an allocation the file did not pay for fails at once
    // (std::bad_alloc) instead of being touched page by page. The child inherits the runner's
    // mappings, so the bound is on top of those.
    const rlim_t limit = parent_address_space + bounds.memory_bytes;
    const rlimit address_space{limit, limit};
    ::setrlimit(RLIMIT_AS, &address_space);
  }
  int code = kExitPassed;
  try {
    body(report);
  } catch (const std::bad_alloc&) {
    report.fail("std::bad_alloc: an allocation beyond the memory bound");
    code = kExitOutOfMemory;
  } catch (const CaseFailure& e) {
    report.fail(e.what());
    code = kExitFailed;
  } catch (const std::exception& e) {
    report.fail(e.what());
    code = kExitOtherException;
  } catch (...) {
    report.fail("an exception of unknown type");
    code = kExitOtherException;
  }
#if PTHLOAD_TEST_ASAN
  // _exit skips LeakSanitizer's exit-time check, so the child runs it itself.
  if (code == kExitPassed && __lsan_do_recoverable_leak_check() != 0) code = kExitLeaked;
#endif
  // _exit, not exit: the child must not run the test runner's atexit handlers or flush the
  // stdio buffers it shares with the parent.
  ::_exit(code);
}

/// Runs `body` in a forked child under `bounds` and waits for it. The parent polls (1 ms
/// doubling to 20 ms) so that short cases cost little, and kills the child with SIGKILL a few
/// seconds past the wall bound in case SIGALRM was blocked.
[[nodiscard]] inline Result run(const Body& body, const Bounds& bounds) {
  SharedReport report;
  report.at("(before the first input)");
  std::fflush(nullptr);
  const auto parent_resident = resident_bytes();
  const auto parent_address_space = address_space_bytes();
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error("guard: fork failed");
  if (child == 0) run_child(body, bounds, report, parent_address_space);

  const auto deadline = std::chrono::steady_clock::now() + bounds.wall + std::chrono::seconds(5);
  auto pause = std::chrono::milliseconds(1);
  int status = 0;
  rusage usage{};
  bool killed = false;
  for (;;) {
    const pid_t done = ::wait4(child, &status, WNOHANG, &usage);
    if (done == child) break;
    if (done < 0) throw std::runtime_error("guard: wait4 failed");
    if (std::chrono::steady_clock::now() > deadline && !killed) {
      ::kill(child, SIGKILL);
      killed = true;
      pause = std::chrono::milliseconds(1);
    }
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::milliseconds(20)) pause *= 2;
  }

  Result result;
  result.label = report.label();
  result.message = report.message();
  // ru_maxrss (KiB) counts the pages shared with the parent at fork, so the growth is the
  // peak minus what the parent held then.
  const auto peak = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
  result.peak_growth_bytes = peak > parent_resident ? peak - parent_resident : 0;

  if (killed || (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)) {
    result.kind = Result::Kind::kTimedOut;
    result.message = "no result within " + std::to_string(bounds.wall.count()) + " s";
  } else if (WIFSIGNALED(status)) {
    result.kind = Result::Kind::kCrashed;
    result.message = std::string("signal ") + ::strsignal(WTERMSIG(status));
  } else if (WEXITSTATUS(status) == kExitOutOfMemory) {
    result.kind = Result::Kind::kOverMemory;
  } else if (WEXITSTATUS(status) == kExitFailed) {
    result.kind = Result::Kind::kFailed;
  } else if (WEXITSTATUS(status) == kExitOtherException) {
    result.kind = Result::Kind::kOtherException;
  } else if (WEXITSTATUS(status) == kExitLeaked) {
    result.kind = Result::Kind::kCrashed;
    result.message = "LeakSanitizer found leaks (see its report above)";
  } else if (WEXITSTATUS(status) != kExitPassed) {
    result.kind = Result::Kind::kCrashed;
    result.message = "exit status " + std::to_string(WEXITSTATUS(status));
  } else if (result.peak_growth_bytes > bounds.memory_bytes) {
    // Without RLIMIT_AS (ASan) an over-allocation shows only here, after the fact.
    result.kind = Result::Kind::kOverMemory;
    result.message = "peak resident memory grew past the bound of " +
                     std::to_string(bounds.memory_bytes >> 20) + " MiB";
  }
  return result;
}

}  // namespace pthload::test::guard
