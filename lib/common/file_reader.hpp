// A file read with pread into memory the caller owns: the byte source of every copy (owned CPU
// copies, CUDA staging, an io=read image), so a file that shrinks gives an error, not SIGBUS.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace pthload::common {

/// What tells one version of a file from another: replaced (device, inode), rewritten or
/// truncated (size, modification time).
struct FileIdentity {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  friend bool operator==(const FileIdentity&, const FileIdentity&) = default;
};

/// An open file descriptor and the identity the file had when it was opened. Reads are pread
/// calls, safe from many threads at once. Move-only (share it through std::shared_ptr).
class FileReader {
 public:
  /// Opens `path` read-only and records its identity. Throws IoError (kIoOpenFailed,
  /// kIoStatFailed) naming the path.
  [[nodiscard]] static std::shared_ptr<const FileReader> open(const std::filesystem::path& path);
  /// Takes ownership of `fd` (open on `path`), whose fstat gave `identity`.
  FileReader(int fd, std::string path, FileIdentity identity) noexcept;
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;
  ~FileReader();

  /// Fills `destination` with the file's bytes at `offset`. Retries EINTR and continues after
  /// short reads (POSIX allows both); throws IoError kIoUnexpectedEof when the file ends first
  /// (it shrank since it was opened) and kIoReadFailed with errno's text for EIO and every other
  /// error, naming the path, `record` (when given) and the file offset that failed.
  void read_at(std::uint64_t offset, std::span<std::byte> destination,
               std::string_view record = {}) const;

  /// Throws IoError kIoFileChanged when the opened file was written or truncated since it was
  /// opened (its size or modification time differ). A file replaced at the path by rename is
  /// not a change: the opened one is still intact and is what gets read.
  void check_unchanged() const;

  [[nodiscard]] const FileIdentity& identity() const noexcept { return identity_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] int descriptor() const noexcept { return fd_; }

 private:
  int fd_;
  std::string path_;
  FileIdentity identity_;
};

/// The identity fstat gives for `fd`; throws IoError kIoStatFailed naming `path`.
[[nodiscard]] FileIdentity identity_of(int fd, const std::string& path);

}  // namespace pthload::common
