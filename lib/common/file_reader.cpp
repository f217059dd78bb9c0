// FileReader: pread loops that retry what POSIX says to retry and name what failed.
#include "common/file_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "common/fault_hooks.hpp"
#include "pthload/error.hpp"

namespace pthload::common {
namespace {

FileIdentity identity_from(const struct stat& info) noexcept {
  return {.device = static_cast<std::uint64_t>(info.st_dev),
          .inode = static_cast<std::uint64_t>(info.st_ino),
          .size = static_cast<std::uint64_t>(info.st_size),
          .mtime_ns = static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 +
                      info.st_mtim.tv_nsec};
}

// Linux moves at most 0x7ffff000 bytes per read call; asking for less keeps every request
// within ssize_t on any system.
constexpr std::size_t kMaxRequest = std::size_t{1} << 30;

}  // namespace

FileIdentity identity_of(int fd, const std::string& path) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    throw IoError(Errc::kIoStatFailed, fmt::format("cannot stat: {}", std::strerror(errno)),
                  {.path = path});
  }
  return identity_from(info);
}

std::shared_ptr<const FileReader> FileReader::open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw IoError(Errc::kIoOpenFailed, fmt::format("cannot open: {}", std::strerror(errno)),
                  {.path = path.string()});
  }
  try {
    FileIdentity identity = identity_of(fd, path.string());
    return std::make_shared<const FileReader>(fd, path.string(), identity);
  } catch (...) {
    ::close(fd);
    throw;
  }
}

FileReader::FileReader(int fd, std::string path, FileIdentity identity) noexcept
    : fd_(fd), path_(std::move(path)), identity_(identity) {}

FileReader::~FileReader() {
  if (fd_ >= 0) ::close(fd_);
}

void FileReader::read_at(std::uint64_t offset, std::span<std::byte> destination,
                         std::string_view record) const {
  std::size_t done = 0;
  while (done < destination.size()) {
    const std::uint64_t at = offset + done;
    const std::size_t want = std::min(destination.size() - done, kMaxRequest);
    if (at > static_cast<std::uint64_t>(std::numeric_limits<off_t>::max())) {
      throw IoError(Errc::kIoReadFailed, "read offset beyond what this system can address",
                    {.path = path_, .record = std::string(record), .offset = at});
    }
    const ssize_t got =
        fault_hooks::read(fd_, destination.data() + done, want, static_cast<off_t>(at));
    if (got < 0) {
      if (errno == EINTR) continue;  // interrupted before any byte moved: ask again
      throw IoError(Errc::kIoReadFailed, fmt::format("read failed: {}", std::strerror(errno)),
                    {.path = path_, .record = std::string(record), .offset = at});
    }
    if (got == 0) {
      throw IoError(Errc::kIoUnexpectedEof,
                    fmt::format("the file ended after {} of {} bytes: it shrank since it was "
                                "opened ({} bytes then)",
                                done, destination.size(), identity_.size),
                    {.path = path_, .record = std::string(record), .offset = at});
    }
    done += static_cast<std::size_t>(got);  // a short read: go on from where it stopped
  }
}

void FileReader::check_unchanged() const {
  // The descriptor's file, not the path's: a file replaced by rename (how sync tools and careful
  // trainers write) leaves the opened one intact, and reading it stays consistent. What breaks a
  // load is the opened file written or truncated in place.
  const FileIdentity now = identity_of(fd_, path_);
  if (now == identity_) return;
  const std::string what =
      now.size != identity_.size
          ? fmt::format("its size changed from {} to {} bytes", identity_.size, now.size)
          : std::string("it was written to (its modification time changed)");
  throw IoError(Errc::kIoFileChanged, fmt::format("the file changed since it was opened: {}", what),
                {.path = path_});
}

}  // namespace pthload::common
