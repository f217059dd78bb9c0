#include "common/large_arrays.hpp"

#include <sys/mman.h>

#include <cstdint>

#include "common/fault_hooks.hpp"

namespace pthload::common {
namespace {

std::size_t mapped_length(std::size_t size) noexcept {
  const std::size_t page = page_bytes();
  return (size + page - 1) & ~(page - 1);
}

}  // namespace

std::byte* map_large_array(std::size_t size) {
  const std::size_t length = mapped_length(size);
  // Room to slide the block to a 2 MiB boundary; what it does not use is unmapped below.
  const std::size_t padded = length + kHugePageBytes - page_bytes();
  if (length < size || padded < length || fault_hooks::allocation_fails(size)) {
    throw std::bad_alloc();
  }
  void* mapping =
      ::mmap(nullptr, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(mapping);
  const auto aligned = (start + kHugePageBytes - 1) & ~std::uintptr_t{kHugePageBytes - 1};
  if (aligned > start) ::munmap(mapping, aligned - start);
  const std::uintptr_t end = aligned + length;
  if (start + padded > end) ::munmap(reinterpret_cast<void*>(end), start + padded - end);
  return reinterpret_cast<std::byte*>(aligned);
}

void unmap_large_array(std::byte* block, std::size_t size) noexcept {
  if (block != nullptr) ::munmap(block, mapped_length(size));
}

}  // namespace pthload::common
