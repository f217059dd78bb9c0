// OutputFile: write(2) loops with errors that name the file.
#include "files.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pthinspect {

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  struct stat existing {};
  if (::stat(path_.c_str(), &existing) == 0 && !S_ISREG(existing.st_mode)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd_ < 0) throw CliError(fmt::format("{}: cannot open: {}", path_, std::strerror(errno)));
    return;
  }
  // A short name of its own, not path_ + a suffix: a file name near NAME_MAX (a long tensor
  // name's .npy) must not become too long. O_EXCL: a name another run is writing (or left
  // behind when killed) is never shared.
  static unsigned serial = 0;
  // A symlink is written through, as opening it would: the rename replaces the file it names.
  std::error_code error;
  const std::filesystem::path resolved = std::filesystem::canonical(path_, error);
  target_ = error ? path_ : resolved.string();
  const std::filesystem::path folder = std::filesystem::path(target_).parent_path();
  for (unsigned attempt = 0; fd_ < 0; ++attempt) {
    temporary_ = (folder / fmt::format(".pthinspect-{}-{}.partial", ::getpid(), serial++)).string();
    fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0 && (errno != EEXIST || attempt == 100)) {
      throw CliError(fmt::format("{}: cannot create: {}", path_, std::strerror(errno)));
    }
  }
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!temporary_.empty()) ::unlink(temporary_.c_str());
}

void OutputFile::write(std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw CliError(fmt::format("{}: write failed: {}", path_, std::strerror(errno)));
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
}

void OutputFile::close() {
  const int fd = fd_;
  fd_ = -1;
  if (fd >= 0 && ::close(fd) != 0) {
    throw CliError(fmt::format("{}: close failed: {}", path_, std::strerror(errno)));
  }
}

void OutputFile::commit() {
  close();
  if (temporary_.empty()) return;
  if (::rename(temporary_.c_str(), target_.c_str()) != 0) {
    throw CliError(fmt::format("{}: cannot replace: {}", path_, std::strerror(errno)));
  }
  temporary_.clear();
}

}  // namespace pthinspect
