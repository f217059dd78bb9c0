// A file's bytes, memory-mapped read-only, or read into memory where mapping is impossible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <variant>

#include "common/aligned_buffer.hpp"

namespace pthload::common {

/// The whole content of one file. Regular files are mapped (MAP_PRIVATE, PROT_READ): nothing is
/// read until touched. Pipes, character devices and anything mmap refuses are read with read()
/// into an owned 64-byte aligned buffer. Move-only; bytes() stays valid while the object lives.
class MappedFile {
 public:
  /// Opens `path`. A read fallback stops with IoError(kIoFileTooLarge) past `max_read_bytes`,
  /// so an endless pipe cannot exhaust memory. Throws IoError with errno's text.
  [[nodiscard]] static MappedFile open(
      const std::filesystem::path& path,
      std::uint64_t max_read_bytes = std::numeric_limits<std::uint64_t>::max());

  /// A copy of `bytes` in an owned buffer, as if read from a file (tests, fuzzing, callers
  /// that already hold the checkpoint in memory). Throws std::bad_alloc.
  [[nodiscard]] static MappedFile from_bytes(std::span<const std::byte> bytes);

  /// A view of `bytes` that the caller owns: nothing is copied, so the bytes must stay alive and
  /// unchanged while this object, or anything holding it, lives (open() and load() over memory).
  [[nodiscard]] static MappedFile borrow(std::span<const std::byte> bytes) noexcept;

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  /// The file's bytes; valid while this object lives.
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return bytes_; }
  /// Whether the bytes are a mapping (zero-copy) rather than a buffer that was read.
  [[nodiscard]] bool is_mapped() const noexcept { return std::holds_alternative<Mapping>(owner_); }

 private:
  struct Mapping {
    void* address = nullptr;
    std::size_t length = 0;
  };
  MappedFile() = default;
  void release() noexcept;

  std::variant<std::monostate, Mapping, AlignedBuffer> owner_;  // monostate: borrowed or empty
  std::span<const std::byte> bytes_;
};

}  // namespace pthload::common
