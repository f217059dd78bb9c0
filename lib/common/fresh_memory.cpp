#include "common/fresh_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/fault_hooks.hpp"

namespace pthload::common {
namespace {

std::size_t mapped_length(std::size_t size) noexcept {
  const std::size_t page = page_bytes();
  return (size + page - 1) & ~(page - 1);
}

// The whole 2 MiB blocks inside [begin, begin + size): [first, last), empty where first >= last.
struct WholeBlocks {
  std::uintptr_t first;
  std::uintptr_t last;
};
WholeBlocks whole_blocks(const std::byte* begin, std::size_t size) noexcept {
  const auto start = reinterpret_cast<std::uintptr_t>(begin);
  return {.first = (start + kLargeBlockBytes - 1) & ~std::uintptr_t{kLargeBlockBytes - 1},
          .last = (start + size) & ~std::uintptr_t{kLargeBlockBytes - 1}};
}

// One zero written every `step` bytes of [begin, begin + size), at each `step` boundary and at
// the first byte: fresh memory (all zero) is unchanged, and each page becomes resident.
void write_every(std::byte* begin, std::size_t size, std::size_t step) noexcept {
  if (size == 0) return;
  volatile std::byte* const bytes = begin;
  bytes[0] = std::byte{0};
  const auto start = reinterpret_cast<std::uintptr_t>(begin);
  for (std::size_t at = ((start + step) & ~std::uintptr_t{step - 1}) - start; at < size; at += step)
    bytes[at] = std::byte{0};
}

}  // namespace

bool huge_pages_requested() noexcept {
  static const bool requested = [] {
    const char* value = std::getenv("PTHLOAD_HUGE_PAGES");
    if (value == nullptr) return false;
    const std::string_view text(value);
    return text == "1" || text == "on" || text == "yes" || text == "true";
  }();
  return requested;
}

std::size_t page_bytes() noexcept {
  static const std::size_t bytes = [] {
    const long size = ::sysconf(_SC_PAGESIZE);
    return size > 0 ? static_cast<std::size_t>(size) : std::size_t{4096};
  }();
  return bytes;
}

std::byte* map_fresh(std::size_t size) {
  const std::size_t length = mapped_length(size);
  // Room to slide the block to a 2 MiB boundary; what it does not use is unmapped below.
  const std::size_t padded = length + kLargeBlockBytes - page_bytes();
  if (length < size || padded < length || fault_hooks::allocation_fails(size)) {
    throw std::bad_alloc();
  }
  void* mapping =
      ::mmap(nullptr, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(mapping);
  const auto aligned = (start + kLargeBlockBytes - 1) & ~std::uintptr_t{kLargeBlockBytes - 1};
  if (aligned > start) ::munmap(mapping, aligned - start);
  const std::uintptr_t end = aligned + length;
  if (start + padded > end) ::munmap(reinterpret_cast<void*>(end), start + padded - end);
  auto* block = reinterpret_cast<std::byte*>(aligned);
  advise_fresh({block, length});
  return block;
}

void unmap_fresh(std::byte* block, std::size_t size) noexcept {
  if (block != nullptr) ::munmap(block, mapped_length(size));
}

void advise_fresh(std::span<std::byte> range) noexcept {
#ifdef MADV_HUGEPAGE
  if (!huge_pages_requested()) return;
  const auto [first, last] = whole_blocks(range.data(), range.size());
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)range;
#endif
}

void prepare_for_pread(std::span<std::byte> range) noexcept {
  // A base-page step (page_bytes()) whatever huge pages were asked for: where one came, the first
  // write faulted it in and the others cost a cache line each; where the kernel gave none, each
  // write takes the fault pread would have.
  write_every(range.data(), range.size(), page_bytes());
}

bool populate_for_filler(std::span<std::byte> range) noexcept {
  if (range.empty()) return true;
#ifdef MADV_POPULATE_WRITE
  const std::size_t page = page_bytes();
  const auto start = reinterpret_cast<std::uintptr_t>(range.data()) & ~std::uintptr_t{page - 1};
  const auto end = reinterpret_cast<std::uintptr_t>(range.data()) + range.size();
  return ::madvise(reinterpret_cast<void*>(start), end - start, MADV_POPULATE_WRITE) == 0;
#else
  return false;
#endif
}

}  // namespace pthload::common
