// Where a checkpoint's bytes go: a file replaced atomically, or the caller's sink. Both are
// written through one buffer so small records (headers, descriptors) do not cost a call each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "pthload/save.hpp"

namespace pthload::writer {

/// Bytes out, in order, with the count written so far. write() throws
/// IoError(kSaveWriteFailed) naming the byte offset.
class Output {
 public:
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;
  virtual ~Output() = default;

  /// Appends `bytes` (copied into the buffer when small, handed on whole when large).
  void write(std::span<const std::byte> bytes);
  /// Appends `bytes`, which are also bytes [offset, offset + bytes.size()) of the open file
  /// `fd`: a file output copies them in the kernel (copy_file_range, what cp does: no copy
  /// through this process), falling back to writing `bytes` where the kernel cannot.
  void write_copy_of(std::span<const std::byte> bytes, int fd, std::uint64_t offset);
  /// Fills `out` with the source's bytes from a position relative to a copy's start (the
  /// caller's read policy), returning them, in `out` or in place.
  using SourceReader =
      std::function<std::span<const std::byte>(std::uint64_t position, std::span<std::byte> out)>;
  /// Appends bytes [offset, offset + size) of the open file `fd` without reading them where the
  /// kernel can copy them (a file output); what it cannot copy is read through `read`.
  void copy_from(int fd, std::uint64_t offset, std::uint64_t size, const SourceReader& read);
  /// Appends `count` copies of `byte`.
  void fill(std::byte byte, std::uint64_t count);
  /// Everything buffered handed on; then the destination made durable and visible
  /// (FileOutput: fsync, rename, fsync of the folder). Nothing may be written after.
  void finish();
  /// The bytes written so far.
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }

 protected:
  explicit Output(std::string where);
  /// Hands `bytes` on, all of them, or throws.
  virtual void deliver(std::span<const std::byte> bytes) = 0;
  /// Copies up to `size` bytes of the file `fd` from `offset` to the destination without
  /// them passing through this process, and returns how many it copied: fewer where it cannot
  /// (another file system, a source that ends early), none by default (a sink).
  virtual std::uint64_t copy_in_kernel(int fd, std::uint64_t offset, std::uint64_t size) {
    (void)fd;
    (void)offset;
    (void)size;
    return 0;
  }
  virtual void commit() = 0;
  /// The error for a failure `what` at byte `offset` of the output.
  [[noreturn]] void fail(const std::string& what, std::uint64_t offset) const;

 private:
  void flush();

  std::string where_;  // the path, or "<sink>", for errors
  std::vector<std::byte> buffer_;
  std::size_t buffered_ = 0;
  std::uint64_t offset_ = 0;  // bytes written, buffered ones included
};

/// A file written beside `path` under a temporary name and renamed over `path` by finish(); the
/// temporary file is removed when the output is destroyed unfinished.
[[nodiscard]] std::unique_ptr<Output> file_output(const std::filesystem::path& path);
/// The caller's sink; an exception it throws becomes IoError(kSaveWriteFailed).
[[nodiscard]] std::unique_ptr<Output> sink_output(const SaveSink& sink);

}  // namespace pthload::writer
