// Fault injection for tests: the byte source's reads, the writer's writes and the library's
// aligned allocations can be made to fail at a chosen call (tests/formats/faults_*). Internal: not
// part of the public API.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace pthload::common::fault_hooks {

/// Stands in for ::pread(fd, buffer, bytes, offset): returns what pread returns and sets errno.
using ReadFunction = ssize_t (*)(int fd, void* buffer, std::size_t bytes, off_t offset);
/// Stands in for ::write(fd, buffer, bytes): returns what write returns and sets errno (a full
/// disk: -1 and ENOSPC, or a short count first).
using WriteFunction = ssize_t (*)(int fd, const void* buffer, std::size_t bytes);
/// Asked before each aligned allocation of `bytes`: true makes that allocation fail.
using AllocationFailure = bool (*)(std::size_t bytes);

/// Installs `read` (nullptr: ::pread). Not thread-safe against running loads: set it first.
void set_read(ReadFunction read) noexcept;
/// Installs `write` (nullptr: ::write).
void set_write(WriteFunction write) noexcept;
/// Installs `fail` (nullptr: never fail).
void set_allocation_failure(AllocationFailure fail) noexcept;

/// What the library calls: the installed function, or ::pread.
ssize_t read(int fd, void* buffer, std::size_t bytes, off_t offset) noexcept;
/// What the writer calls: the installed function, or ::write.
ssize_t write(int fd, const void* buffer, std::size_t bytes) noexcept;
/// Whether a write function is installed: the writer then writes every byte through it, never
/// copying in the kernel (copy_file_range), so a test's fault reaches every path.
bool write_hooked() noexcept;
/// Whether the installed hook says this allocation fails.
bool allocation_fails(std::size_t bytes) noexcept;

}  // namespace pthload::common::fault_hooks
