// `pthbench load FILE`: open (structure only), a zero-copy load, a copy-mode load, and the
// references they are measured against: reading the whole file once, in this process.
// `pthbench once MODE FILE`: one of those, once, then exit — for a parent that times the whole
// process and reads its peak RSS (tools/bench_compare.py).
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "bench.hpp"
#include "common/phase_marks.hpp"
#include "device/backend.hpp"
#include "pthload/checkpoint.hpp"

namespace pthbench {
namespace {

constexpr std::size_t kChunk = std::size_t{1} << 20;

class Fd {
 public:
  explicit Fd(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) throw std::runtime_error("cannot open " + path);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { ::close(fd_); }
  // Reads up to `size` bytes into `into`; returns how many (short only at the end of the file).
  std::size_t read(char* into, std::size_t size) const {
    std::size_t done = 0;
    while (done < size) {
      const ssize_t got = ::read(fd_, into + done, size - done);
      if (got <= 0) break;
      done += static_cast<std::size_t>(got);
    }
    return done;
  }

 private:
  int fd_;
};

// The copy bandwidth: the whole file through one reused 1 MiB buffer (no page faults after the
// first chunk). A load that copies cannot beat this.
std::size_t read_chunked(const std::string& path) {
  const Fd fd(path);
  const auto buffer = std::make_unique_for_overwrite<char[]>(kChunk);
  std::size_t total = 0;
  for (std::size_t got = 0; (got = fd.read(buffer.get(), kChunk)) > 0;)
    total += got;
  return total;
}

// The same into one fresh buffer of the file's size, 1 MiB per read: what an owned copy of every
// byte costs, page faults of fresh memory included.
std::size_t read_fresh(const std::string& path) {
  const Fd fd(path);
  const auto size = static_cast<std::size_t>(std::filesystem::file_size(path));
  const auto buffer = std::make_unique_for_overwrite<char[]>(size);
  std::size_t total = 0;
  while (total < size) {
    const std::size_t got = fd.read(buffer.get() + total, std::min(kChunk, size - total));
    if (got == 0) break;
    total += got;
  }
  return total;
}

std::uint64_t tensor_bytes(const pthload::Checkpoint& checkpoint) {
  std::uint64_t bytes = 0;
  for (const auto& storage : checkpoint.storages())
    bytes += storage->nbytes();
  return bytes;
}

// What `once` runs: returns the bytes it concerned (tensor bytes, or file bytes for reads). The
// checkpoint is kept in `keep`, so its release is not timed (a program keeps what it loads).
std::uint64_t run_mode(std::string_view mode, const std::string& file, unsigned parse_threads,
                       std::optional<pthload::Checkpoint>& keep) {
  const auto cpu = pthload::map_to("cpu");
  if (mode == "read-chunked") return read_chunked(file);
  if (mode == "read-fresh") return read_fresh(file);
  if (mode == "read-index") return read_index_floor(file);
  if (mode == "open") {
    keep.emplace(pthload::open(file, {.parse_threads = parse_threads}));
  } else if (mode == "view") {
    keep.emplace(pthload::load(file, {.map_location = cpu, .parse_threads = parse_threads}));
  } else if (mode == "copy") {
    keep.emplace(pthload::load(
        file, {.map_location = cpu, .copy_cpu_storages = true, .parse_threads = parse_threads}));
  } else if (mode == "checksum") {
    keep.emplace(pthload::load(file, {.map_location = cpu, .parse_threads = parse_threads}));
    std::vector<const pthload::Tensor*> hashed;
    for (const auto& named : keep->tensors())
      if (named.tensor.has_storage()) hashed.push_back(&named.tensor);
    std::uint64_t mix = 0;
    for (const std::uint64_t checksum : pthload::content_checksums(hashed))
      mix ^= checksum;
    std::fprintf(stderr, "checksums xor %016llx\n", static_cast<unsigned long long>(mix));
  } else if (mode == "cuda") {
    keep.emplace(pthload::load(file, {.map_location = pthload::map_to(pthload::Device::cuda(0)),
                                      .parse_threads = parse_threads}));
  } else {
    throw std::runtime_error("unknown mode '" + std::string(mode) +
                             "' (open, view, copy, checksum, cuda, read-chunked, read-fresh, "
                             "read-index)");
  }
  return tensor_bytes(*keep);
}

// The process's peak resident set (VmHWM), in KiB, or 0 where /proc has none. A parent's wait4
// would also report it, but Linux carries the spawning process's peak across exec into that
// figure (16 MiB of Python for bench_compare.py), so the child reads its own.
unsigned long long peak_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmHWM:")) return std::strtoull(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

// The phases the library names as they end (common/phase_marks.hpp), kept for `once` to print
// when PTHBENCH_PHASES is set: where the time of one load went, without a profiler. Beside each
// phase's wall time: the CPU time of the whole process (both parse threads), its minor page
// faults and how much its resident memory grew: a 100 000-tensor load spends about a fifth of
// its CPU time in the kernel zeroing fresh pages, and these say which phase pays for them.
struct ProcessCounters {
  std::chrono::steady_clock::time_point at;
  double cpu_ms = 0;
  long minor_faults = 0;
  long resident_pages = 0;
};

// Resident pages from /proc/self/statm's second field, read with plain system calls: the
// recorder runs inside the load, where it must not throw or allocate. 0 where unreadable.
long resident_pages() noexcept {
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  std::array<char, 128> text{};
  const ssize_t got = ::read(fd, text.data(), text.size() - 1);
  ::close(fd);
  if (got <= 0) return 0;
  const char* space = std::find(text.data(), text.data() + got, ' ');
  return space < text.data() + got ? std::strtol(space + 1, nullptr, 10) : 0;
}

ProcessCounters process_counters() noexcept {
  ProcessCounters counters{.at = std::chrono::steady_clock::now()};
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) == 0) {
    const auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
    counters.cpu_ms = ms(usage.ru_utime) + ms(usage.ru_stime);
    counters.minor_faults = usage.ru_minflt;
  }
  counters.resident_pages = resident_pages();
  return counters;
}

struct PhaseEnd {
  const char* name;
  ProcessCounters counters;
};
constexpr std::size_t kMaxPhases = 64;
std::array<PhaseEnd, kMaxPhases> phase_ends;
std::size_t phase_count = 0;

void record_phase_end(const char* phase) noexcept {
  if (phase_count < kMaxPhases) phase_ends[phase_count++] = {phase, process_counters()};
}

void print_phase(const char* name, const ProcessCounters& begin, const ProcessCounters& end) {
  static const double page_mib = static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1 << 20);
  std::fprintf(stderr, "phase %-32s %9.3f ms  cpu %8.3f ms  %7ld faults  %+8.1f MiB\n", name,
               std::chrono::duration<double, std::milli>(end.at - begin.at).count(),
               end.cpu_ms - begin.cpu_ms, end.minor_faults - begin.minor_faults,
               static_cast<double>(end.resident_pages - begin.resident_pages) * page_mib);
}

void print_phases(const ProcessCounters& start) {
  for (std::size_t i = 0; i < phase_count; ++i)
    print_phase(phase_ends[i].name, i == 0 ? start : phase_ends[i - 1].counters,
                phase_ends[i].counters);
}

}  // namespace

int bench_load(const Options& options) {
  for (const auto& file : options.files) {
    const auto file_bytes = static_cast<std::size_t>(std::filesystem::file_size(file));
    std::size_t tensors = 0;
    report("read 1 MiB chunks", file, file_bytes,
           time_runs(options.repetitions, [&] { (void)read_chunked(file); }));
    report("read fresh buffer", file, file_bytes,
           time_runs(options.repetitions, [&] { (void)read_fresh(file); }));
    report("open", file, file_bytes,
           time_runs(options.repetitions, [&] { tensors = pthload::open(file).tensors().size(); }));
    const auto cpu = pthload::map_to("cpu");
    report("view", file, file_bytes, time_runs(options.repetitions, [&] {
             (void)pthload::load(file, {.map_location = cpu});
           }));
    report("copy", file, file_bytes, time_runs(options.repetitions, [&] {
             (void)pthload::load(file, {.map_location = cpu, .copy_cpu_storages = true});
           }));
    std::printf("%zu tensors\n", tensors);
  }
  return 0;
}

// One run, timed inside the process too: `MODE FILE: BYTES bytes, X ms, peak N KiB`. The parent's
// clock adds start-up and exit (the mapping's teardown, the copies' release) to this. With
// PTHBENCH_PHASES set, the time of each phase of the load, then of freeing the checkpoint, goes
// to stderr.
int bench_once(const Options& options) {
  if (options.files.size() != 2) throw std::runtime_error("once needs MODE FILE");
  const auto& mode = options.files[0];
  const auto& file = options.files[1];
  // The CUDA context (driver start-up, hundreds of ms) is made before the clock starts, as the
  // torch rows make theirs with torch.zeros(1, device="cuda") before theirs: a runtime that
  // loads weights onto a GPU has one already. The parent's whole-process time still has it.
  if (mode == "cuda") {
    if (const auto backend = pthload::device::cuda_backend();
        backend && backend->device_count() > 0) {
      backend->use_device(0);
      backend->free(0, backend->allocate(0, 256));
    }
  }
  const bool phases = std::getenv("PTHBENCH_PHASES") != nullptr;
  if (phases) pthload::common::phases::set_recorder(record_phase_end);
  const auto counters_at_start = phases ? process_counters() : ProcessCounters{};
  const auto start = std::chrono::steady_clock::now();
  std::optional<pthload::Checkpoint> keep;
  const std::uint64_t bytes = run_mode(mode, file, options.parse_threads, keep);
  const auto stop = std::chrono::steady_clock::now();
  std::printf("%s %s: %llu bytes, %.3f ms, peak %llu KiB\n", mode.c_str(), file.c_str(),
              static_cast<unsigned long long>(bytes),
              std::chrono::duration<double, std::milli>(stop - start).count(), peak_rss_kib());
  if (phases) {
    pthload::common::phases::set_recorder(nullptr);
    print_phases(counters_at_start);
    const auto before_freeing = process_counters();
    keep.reset();
    print_phase("free the checkpoint", before_freeing, process_counters());
  }
  return 0;
}

}  // namespace pthbench
