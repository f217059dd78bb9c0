// The fault injection hooks: one relaxed atomic load per read, write or allocation when unused.
#include "common/fault_hooks.hpp"

#include <unistd.h>

#include <atomic>

namespace pthload::common::fault_hooks {
namespace {

std::atomic<ReadFunction> installed_read{nullptr};
std::atomic<WriteFunction> installed_write{nullptr};
std::atomic<AllocationFailure> installed_failure{nullptr};

}  // namespace

void set_read(ReadFunction read) noexcept {
  installed_read.store(read, std::memory_order_relaxed);
}

void set_write(WriteFunction write) noexcept {
  installed_write.store(write, std::memory_order_relaxed);
}

void set_allocation_failure(AllocationFailure fail) noexcept {
  installed_failure.store(fail, std::memory_order_relaxed);
}

ssize_t read(int fd, void* buffer, std::size_t bytes, off_t offset) noexcept {
  if (const auto hook = installed_read.load(std::memory_order_relaxed)) {
    return hook(fd, buffer, bytes, offset);
  }
  return ::pread(fd, buffer, bytes, offset);
}

ssize_t write(int fd, const void* buffer, std::size_t bytes) noexcept {
  if (const auto hook = installed_write.load(std::memory_order_relaxed)) {
    return hook(fd, buffer, bytes);
  }
  return ::write(fd, buffer, bytes);
}

bool write_hooked() noexcept {
  return installed_write.load(std::memory_order_relaxed) != nullptr;
}

bool allocation_fails(std::size_t bytes) noexcept {
  const auto hook = installed_failure.load(std::memory_order_relaxed);
  return hook != nullptr && hook(bytes);
}

}  // namespace pthload::common::fault_hooks
