// OutputFile: write(2) loops with errors that name the file.
#include "files.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

namespace pthinspect {

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw CliError(fmt::format("{}: cannot create: {}", path_, std::strerror(errno)));
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
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

}  // namespace pthinspect
