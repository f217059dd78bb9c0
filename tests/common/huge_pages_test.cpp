// common::fault_in_huge_pages: each huge page is faulted in and timed, and the first dear one
// sends the rest of the range, and every range after it, to small pages; fault_in_for_writing
// faults in the rest of a range in small pages; BumpArena faults its blocks in as its cursor
// reaches them. Thresholds of zero and of a minute make the verdict certain; what the kernel was
// told and did is read back from /proc/self/smaps (VmFlags: hg for MADV_HUGEPAGE, nh for
// MADV_NOHUGEPAGE) and the pages resident from mincore.
#include <doctest/doctest.h>

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/aligned_buffer.hpp"
#include "common/bump_arena.hpp"
#include "common/huge_pages.hpp"
#include "common/large_arrays.hpp"
#include "support/residency.hpp"

namespace pthload::common {
namespace {

using test::resident_kib;

struct MappingFacts {
  std::string advice;  // "hg", "nh" or "" (neither)
};

// What /proc/self/smaps says of the advice of the mapping holding `address`.
MappingFacts mapping_facts(const std::byte* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto where = reinterpret_cast<std::uintptr_t>(address);
  MappingFacts facts;
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t begin = 0;
    std::uintptr_t end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-') {
      if (inside) break;
      inside = begin <= where && where < end;
      continue;
    }
    if (!inside) continue;
    if (line.starts_with("VmFlags:")) {
      std::istringstream flags(line.substr(8));
      std::string flag;
      while (flags >> flag) {
        if (flag == "hg" || flag == "nh") facts.advice = flag;
      }
    }
  }
  return facts;
}

// Whether this kernel takes both pieces of advice and can populate (Linux 5.14), without which
// fault_in_huge_pages does nothing.
bool fault_in_possible() {
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled")) return false;
  std::byte* block = map_large_array(kHugePageBytes);
  const bool possible =
      ::madvise(block, kHugePageBytes, MADV_NOHUGEPAGE) == 0 && populate_for_writing(block, 4096);
  unmap_large_array(block, kHugePageBytes);
  return possible;
}

bool all_zero(const std::byte* block, std::size_t size) {
  return std::all_of(block, block + size, [](std::byte b) { return b == std::byte{0}; });
}

// Sets a threshold for one test, and puts the default and an open verdict back after it. The host
// is taken to keep free memory unless a test says otherwise: what is tested then does not depend
// on the machine the tests run on.
struct VerdictReset {
  explicit VerdictReset(std::chrono::nanoseconds threshold, HostReclaim host = HostReclaim::kNo) {
    reset_huge_page_verdict(threshold, host);
  }
  ~VerdictReset() { reset_huge_page_verdict(); }
  VerdictReset(const VerdictReset&) = delete;
  VerdictReset& operator=(const VerdictReset&) = delete;
};

constexpr std::uint64_t kHugePageKib = kHugePageBytes / 1024;

}  // namespace

TEST_CASE("common: a large array is not faulted in until its user asks") {
  std::byte* block = map_large_array(3 * kHugePageBytes);
  CHECK(resident_kib(block, 3 * kHugePageBytes) == 0);
  CHECK(mapping_facts(block).advice.empty());
  unmap_large_array(block, 3 * kHugePageBytes);
}

TEST_CASE("common: cheap huge pages are faulted in, every one of the range") {
  if (!fault_in_possible()) return;
  const VerdictReset reset(std::chrono::minutes(1));
  const std::size_t size = 3 * kHugePageBytes;
  std::byte* block = map_large_array(size);
  CHECK(fault_in_huge_pages(block, size));
  CHECK_FALSE(huge_pages_dear());
  CHECK(mapping_facts(block).advice == "hg");
  CHECK(resident_kib(block, size) == 3 * kHugePageKib);
  CHECK(all_zero(block, size));
  unmap_large_array(block, size);
}

TEST_CASE("common: a dear huge page sends the rest of the range and later ranges to small pages") {
  if (!fault_in_possible()) return;
  const VerdictReset reset(std::chrono::nanoseconds(0));
  const std::size_t size = 3 * kHugePageBytes;
  std::byte* first = map_large_array(size);
  CHECK_FALSE(fault_in_huge_pages(first, size));
  CHECK(huge_pages_dear());
  // The page that was timed stays as it was faulted in; the rest is left to fault in later.
  CHECK(mapping_facts(first).advice == "hg");
  CHECK(resident_kib(first, kHugePageBytes) == kHugePageKib);
  CHECK(mapping_facts(first + kHugePageBytes).advice == "nh");
  CHECK(resident_kib(first + kHugePageBytes, size - kHugePageBytes) == 0);

  std::byte* later = map_large_array(size);
  CHECK_FALSE(fault_in_huge_pages(later, size));
  CHECK(mapping_facts(later).advice == "nh");
  CHECK(resident_kib(later, size) == 0);
  std::fill(later, later + size, std::byte{0x5a});
  CHECK(later[size - 1] == std::byte{0x5a});
  CHECK(all_zero(first, size));
  unmap_large_array(later, size);
  unmap_large_array(first, size);
}

TEST_CASE("common: a range without a whole huge page is left alone") {
  if (!fault_in_possible()) return;
  const VerdictReset reset(std::chrono::nanoseconds(0));
  std::byte* block = map_large_array(2 * kHugePageBytes);
  // From the middle of one huge page to the middle of the next.
  CHECK(fault_in_huge_pages(block + kHugePageBytes / 2, kHugePageBytes));
  CHECK_FALSE(huge_pages_dear());
  CHECK(mapping_facts(block).advice.empty());
  CHECK(resident_kib(block, 2 * kHugePageBytes) == 0);
  unmap_large_array(block, 2 * kHugePageBytes);
}

TEST_CASE("common: where the host reclaims free memory, only a large range times huge pages") {
  if (!fault_in_possible()) return;
  const VerdictReset reset(std::chrono::minutes(1), HostReclaim::kYes);
  const std::size_t small_size = 3 * kHugePageBytes;
  std::byte* small = map_large_array(small_size);
  // Left alone: no advice, nothing resident, no verdict.
  CHECK_FALSE(fault_in_huge_pages(small, small_size));
  CHECK_FALSE(huge_pages_dear());
  CHECK(mapping_facts(small).advice.empty());
  CHECK(resident_kib(small, small_size) == 0);

  // A small piece of a range that large is timed.
  std::byte* piece = map_large_array(small_size);
  CHECK(fault_in_huge_pages(piece, small_size, kProbeWorthyBytes));
  CHECK(mapping_facts(piece).advice == "hg");
  CHECK(resident_kib(piece, small_size) == 3 * kHugePageKib);
  unmap_large_array(piece, small_size);
  CHECK(resident_kib(small, small_size) == 0);

  // A range of kProbeWorthyBytes is timed, and its cheap huge pages let small ranges have some.
  std::byte* large = map_large_array(kProbeWorthyBytes);
  CHECK(fault_in_huge_pages(large, kProbeWorthyBytes));
  CHECK(mapping_facts(large).advice == "hg");
  CHECK(resident_kib(large, kProbeWorthyBytes) == kProbeWorthyBytes / 1024);
  CHECK(fault_in_huge_pages(small, small_size));
  CHECK(mapping_facts(small).advice == "hg");
  CHECK(resident_kib(small, small_size) == 3 * kHugePageKib);
  unmap_large_array(large, kProbeWorthyBytes);
  unmap_large_array(small, small_size);
}

TEST_CASE("common: where the host reclaims free memory, a large range finds huge pages dear") {
  if (!fault_in_possible()) return;
  const VerdictReset reset(std::chrono::nanoseconds(0), HostReclaim::kYes);
  std::byte* large = map_large_array(kProbeWorthyBytes);
  CHECK_FALSE(fault_in_huge_pages(large, kProbeWorthyBytes));
  CHECK(huge_pages_dear());
  CHECK(resident_kib(large, kProbeWorthyBytes) == kHugePageKib);
  unmap_large_array(large, kProbeWorthyBytes);
}

TEST_CASE("common: free page reporting is feature bit 5 of a virtio balloon") {
  // As this project's Firecracker machines show it: bits 1, 2, 5 and 7 (and 32, VERSION_1).
  CHECK(reports_free_pages("0110010100000000000000000000000010000000"));
  CHECK_FALSE(reports_free_pages("0110000100000000000000000000000010000000"));
  CHECK_FALSE(reports_free_pages("01100"));
  CHECK_FALSE(reports_free_pages(""));
  {
    const VerdictReset reset(kDearHugePage, HostReclaim::kYes);
    CHECK(host_reclaims_free_memory());
  }
  {
    const VerdictReset reset(kDearHugePage, HostReclaim::kNo);
    CHECK_FALSE(host_reclaims_free_memory());
  }
}

TEST_CASE("common: a BumpArena faults its blocks in a huge page at a time as it fills them") {
  if (!fault_in_possible()) return;
  const VerdictReset reset(std::chrono::minutes(1));
  BumpArena arena;
  arena.expect(std::size_t{4} << 20);  // one 4 MiB block: two huge pages
  auto* first = static_cast<std::byte*>(arena.allocate(64, 16));
  const std::byte* block = first - reinterpret_cast<std::uintptr_t>(first) % kHugePageBytes;
  CHECK(resident_kib(block, 2 * kHugePageBytes) == kHugePageKib);
  // Up to the end of the first huge page: nothing more.
  (void)arena.allocate(kHugePageBytes - 64 - 256, 16);
  CHECK(resident_kib(block, 2 * kHugePageBytes) == kHugePageKib);
  // Into the second.
  auto* across = static_cast<std::byte*>(arena.allocate(1024, 16));
  CHECK(resident_kib(block, 2 * kHugePageBytes) == 2 * kHugePageKib);
  std::fill(across, across + 1024, std::byte{1});
}

TEST_CASE("common: where huge pages are dear, a BumpArena's blocks fault in as they are written") {
  if (!fault_in_possible()) return;
  const VerdictReset reset(std::chrono::nanoseconds(0));
  BumpArena arena;
  arena.expect(std::size_t{4} << 20);
  auto* first = static_cast<std::byte*>(arena.allocate(64, 16));
  CHECK(huge_pages_dear());
  std::fill(first, first + 64, std::byte{1});
  // Written to the end of the block without another huge page faulted in.
  const std::size_t rest_size = (std::size_t{4} << 20) - 4096;
  auto* rest = static_cast<std::byte*>(arena.allocate(rest_size, 16));
  std::fill(rest + rest_size - 4096, rest + rest_size, std::byte{2});
  const std::byte* block = first - reinterpret_cast<std::uintptr_t>(first) % kHugePageBytes;
  CHECK(mapping_facts(block + kHugePageBytes).advice == "nh");
  CHECK(resident_kib(block + kHugePageBytes, kHugePageBytes) < kHugePageKib);
}

TEST_CASE("common: writing to each page makes every page of the range resident, and no other") {
  std::byte* block = map_large_array(kHugePageBytes);
  // From byte 100 of page 1 to byte 100 of page 5: five pages touched, the first and the last in
  // part. The advice keeps a kernel whose huge pages are "always" to 4 KiB pages here.
  (void)::madvise(block, kHugePageBytes, MADV_NOHUGEPAGE);
  write_to_each_page(block + 4096 + 100, 4 * 4096);
  CHECK(resident_kib(block, 4096) == 0);
  CHECK(resident_kib(block + 4096, 5 * 4096) == 5 * 4);
  CHECK(resident_kib(block + 6 * 4096, kHugePageBytes - 6 * 4096) == 0);
  write_to_each_page(block + 20 * 4096, 0);
  CHECK(resident_kib(block + 20 * 4096, 4096) == 0);
  // Read last: a read maps the zero page, which mincore counts as resident.
  CHECK(all_zero(block, kHugePageBytes));
  unmap_large_array(block, kHugePageBytes);
}

TEST_CASE("common: a range about to be filled is faulted in whole, in huge pages where cheap") {
  if (!fault_in_possible()) return;
  const std::size_t size = 4 * kHugePageBytes;
  // From the middle of the first huge page to the middle of the last: two whole ones between.
  const std::size_t from = kHugePageBytes / 2;
  const std::size_t length = 3 * kHugePageBytes;
  SUBCASE("cheap") {
    const VerdictReset reset(std::chrono::minutes(1));
    std::byte* block = map_large_array(size);
    // The first huge page holds the range's first small pages, and the bytes before it that
    // must stay out: not one huge page, even where huge pages are "always".
    (void)::madvise(block, kHugePageBytes, MADV_NOHUGEPAGE);
    fault_in_for_writing(block + from, length);
    CHECK_FALSE(huge_pages_dear());
    CHECK(resident_kib(block + from, length) == length / 1024);
    CHECK(resident_kib(block, from) == 0);
    CHECK(all_zero(block, size));
    unmap_large_array(block, size);
  }
  SUBCASE("dear: the rest in small pages") {
    const VerdictReset reset(std::chrono::nanoseconds(0));
    std::byte* block = map_large_array(size);
    fault_in_for_writing(block + from, length, kProbeWorthyBytes);
    CHECK(huge_pages_dear());
    CHECK(mapping_facts(block + 2 * kHugePageBytes).advice == "nh");
    CHECK(resident_kib(block + from, length) == length / 1024);
    CHECK(all_zero(block, size));
    unmap_large_array(block, size);
  }
  SUBCASE("where the host reclaims free memory, a small range in small pages") {
    const VerdictReset reset(std::chrono::minutes(1), HostReclaim::kYes);
    std::byte* block = map_large_array(size);
    fault_in_for_writing(block + from, length);
    CHECK(mapping_facts(block).advice.empty());
    CHECK(resident_kib(block + from, length) == length / 1024);
    unmap_large_array(block, size);
  }
}

TEST_CASE("common: an AlignedBuffer filled now is faulted in, one filled later is not") {
  if (!fault_in_possible()) return;
  const VerdictReset reset(std::chrono::minutes(1));
  // Above glibc's largest mmap threshold (32 MiB): a mapping of its own, which smaps shows.
  constexpr std::size_t kSize = std::size_t{64} << 20;
  const AlignedBuffer now(kSize);
  // Every whole huge page inside; the 2 MiB-aligned start leaves at most a huge page out.
  CHECK(resident_kib(now.data(), kSize) >= (kSize - kHugePageBytes) / 1024);
  CHECK(mapping_facts(now.data()).advice == "hg");
  const AlignedBuffer later(kSize, AlignedBuffer::Filled::kLater);
  // Unless glibc wrote every byte it handed out (MALLOC_PERTURB_, which meson test sets).
  const char* perturb = std::getenv("MALLOC_PERTURB_");
  if (perturb == nullptr || std::string(perturb) == "0") {
    CHECK(resident_kib(later.data(), kSize) < kHugePageKib);
  }
  CHECK(mapping_facts(later.data()).advice.empty());
}

}  // namespace pthload::common
