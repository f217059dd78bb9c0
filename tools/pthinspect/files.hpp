// Output files for pthinspect: written with write(2) in large chunks, errors naming the file.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

namespace pthinspect {

/// An error of pthinspect itself (not of the library): a file it cannot write, an option that
/// does not fit the checkpoint. main() prints it as one line and exits 1.
class CliError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A file written under a temporary name beside `path` (.pthinspect-<pid>-<n>.partial), renamed
/// to `path` by commit(), so that a failed write leaves neither a half-written file nor a
/// truncated old one. A symlink is written through. When `path` exists and is not a regular
/// file (/dev/null, a pipe), it is written directly. Throws CliError naming the file and errno's
/// text.
class OutputFile {
 public:
  explicit OutputFile(std::string path);
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  /// Removes the temporary file unless commit() has renamed it.
  ~OutputFile();
  /// Writes all of `bytes`.
  void write(std::span<const std::byte> bytes);
  /// Closes the file, reporting a failed close (a full disk can show up only there); the
  /// bytes stay under the temporary name until commit().
  void close();
  /// Closes the file if still open, then renames it to path(), replacing what was there.
  void commit();
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  std::string target_;     // path_, or the file it links to
  std::string temporary_;  // empty when path_ itself is written
  int fd_ = -1;
};

}  // namespace pthinspect
