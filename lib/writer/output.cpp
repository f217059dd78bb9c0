// The two outputs. A file is replaced, never rewritten in place: a crash or a full disk midway
// leaves the old file whole, because the new one becomes visible only by rename(2), after
// fsync(2) made its bytes durable (the pattern of SQLite's and git's lockfiles).
#include "writer/output.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <exception>
#include <utility>

#include <fmt/format.h>

#include "common/fault_hooks.hpp"
#include "pthload/error.hpp"

namespace pthload::writer {
namespace {

// Writes under this size are gathered; larger ones go straight through, so a storage streamed
// from a mapped file is not copied twice.
constexpr std::size_t kBufferBytes = std::size_t{1} << 20;

std::string errno_text(int error) {
  return fmt::format("{} ({})", std::strerror(error), error == ENOSPC ? "ENOSPC" : "errno");
}

// The file a save to `path` replaces: torch.save's open(path, 'wb') follows symbolic links and
// rewrites their target, so a link (a "latest.pt" pointing at "step-1000.pt") stays a link.
// Renaming over the link itself would have turned it into a file. Followed here as the kernel
// follows them, to a target that need not exist yet (open() would create it); 40 links deep at
// most, the kernel's own bound (ELOOP).
std::filesystem::path file_to_replace(const std::filesystem::path& path) {
  constexpr int kMaxLinks = 40;
  std::filesystem::path target = path;
  for (int links = 0; links <= kMaxLinks; ++links) {
    std::error_code error;
    if (!std::filesystem::is_symlink(std::filesystem::symlink_status(target, error))) {
      return target;  // a file, a folder or nothing: what happens to it is the open's to say
    }
    const std::filesystem::path link = std::filesystem::read_symlink(target, error);
    if (error) return target;
    target = link.is_absolute() ? link : target.parent_path() / link;
  }
  throw IoError(
      Errc::kSaveWriteFailed,
      fmt::format("cannot write through it: more than {} symbolic links (ELOOP)", kMaxLinks),
      ErrorContext{.path = path.string()});
}

// The mode the saved file gets: the replaced file's, as open(path, 'wb') keeps it when it
// truncates, or that of any new file (0666 less the umask) where there was none.
mode_t mode_for(const std::filesystem::path& target) {
  struct stat existing {};
  if (::stat(target.c_str(), &existing) == 0 && S_ISREG(existing.st_mode)) {
    return existing.st_mode & 07777;
  }
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

class FileOutput final : public Output {
 public:
  explicit FileOutput(const std::filesystem::path& path)
      : Output(path.string()), path_(file_to_replace(path)) {
    // mkstemp's unique name in the destination's folder: rename() is atomic only within one
    // file system, and two saves to one path must not share a temporary file.
    auto name = path_;
    name += ".tmp-XXXXXX";
    temporary_ = name.string();
    fd_ = ::mkstemp(temporary_.data());
    if (fd_ < 0) {
      const int error = errno;
      temporary_.clear();
      throw IoError(Errc::kSaveWriteFailed,
                    fmt::format("cannot create a temporary file beside it: {}", errno_text(error)),
                    ErrorContext{.path = path.string()});
    }
    // mkstemp makes the file 0600; a checkpoint gets the mode torch.save's open() leaves.
    (void)::fchmod(fd_, mode_for(path_));
  }

  ~FileOutput() override {
    if (fd_ >= 0) ::close(fd_);
    if (!temporary_.empty()) ::unlink(temporary_.c_str());
  }

 private:
  void deliver(std::span<const std::byte> bytes) override {
    while (!bytes.empty()) {
      const ssize_t wrote = common::fault_hooks::write(fd_, bytes.data(), bytes.size());
      if (wrote < 0 && errno == EINTR) continue;
      if (wrote <= 0) {
        // write(2) returns 0 only for a zero count; a device that accepts nothing is full.
        fail(fmt::format("write failed: {}", errno_text(wrote < 0 ? errno : ENOSPC)), written_);
      }
      bytes = bytes.subspan(static_cast<std::size_t>(wrote));
      written_ += static_cast<std::uint64_t>(wrote);
    }
  }

  std::uint64_t copy_in_kernel(int fd, std::uint64_t offset, std::uint64_t size) override {
    if (!copy_in_kernel_ || common::fault_hooks::write_hooked()) return 0;
    std::uint64_t done = 0;
    while (done < size) {
      auto from = static_cast<loff_t>(offset + done);
      const ssize_t copied = ::copy_file_range(fd, &from, fd_, nullptr, size - done, 0);
      if (copied < 0 && errno == EINTR) continue;
      if (copied < 0 && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP ||
                         errno == EINVAL || errno == EBADF)) {
        // Another file system (before Linux 5.19), or one that cannot: the caller writes.
        copy_in_kernel_ = false;
        break;
      }
      if (copied < 0) fail(fmt::format("write failed: {}", errno_text(errno)), written_);
      // 0: the source ends early (it shrank since the load); the caller's read says how.
      if (copied == 0) break;
      done += static_cast<std::uint64_t>(copied);
      written_ += static_cast<std::uint64_t>(copied);
    }
    return done;
  }

  void commit() override {
    if (::fsync(fd_) != 0) fail(fmt::format("fsync failed: {}", errno_text(errno)), written_);
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) fail(fmt::format("close failed: {}", errno_text(errno)), written_);
    if (::rename(temporary_.c_str(), path_.c_str()) != 0) {
      fail(fmt::format("cannot rename {} over it: {}", temporary_, errno_text(errno)), written_);
    }
    temporary_.clear();
    // The rename is durable once the folder is: without this a crash may bring back the old file.
    auto folder = path_.parent_path();
    if (folder.empty()) folder = ".";
    const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      (void)::fsync(dir);
      ::close(dir);
    }
  }

  std::filesystem::path path_;
  std::string temporary_;  // empty once renamed (or never made)
  int fd_ = -1;
  bool copy_in_kernel_ = true;  // until the kernel says it cannot
  std::uint64_t written_ = 0;
};

class SinkOutput final : public Output {
 public:
  explicit SinkOutput(const SaveSink& sink) : Output("<sink>"), sink_(sink) {}

 private:
  void deliver(std::span<const std::byte> bytes) override {
    try {
      sink_(bytes);
    } catch (const std::exception& e) {
      fail(fmt::format("the sink failed: {}", e.what()), delivered_);
    } catch (...) {
      fail("the sink failed (an exception that is no std::exception)", delivered_);
    }
    delivered_ += bytes.size();
  }
  void commit() override {}

  const SaveSink& sink_;
  std::uint64_t delivered_ = 0;
};

}  // namespace

Output::Output(std::string where) : where_(std::move(where)) {}

void Output::write(std::span<const std::byte> bytes) {
  offset_ += bytes.size();
  if (bytes.size() >= kBufferBytes) {
    flush();
    deliver(bytes);
    return;
  }
  if (buffer_.empty()) buffer_.resize(kBufferBytes);
  if (bytes.size() > buffer_.size() - buffered_) flush();
  std::copy(bytes.begin(), bytes.end(), buffer_.begin() + static_cast<std::ptrdiff_t>(buffered_));
  buffered_ += bytes.size();
}

void Output::write_copy_of(std::span<const std::byte> bytes, int fd, std::uint64_t offset) {
  flush();
  offset_ += bytes.size();
  const std::uint64_t copied = copy_in_kernel(fd, offset, bytes.size());
  if (copied < bytes.size()) deliver(bytes.subspan(static_cast<std::size_t>(copied)));
}

void Output::copy_from(int fd, std::uint64_t offset, std::uint64_t size, const SourceReader& read) {
  flush();
  offset_ += size;
  std::uint64_t done = copy_in_kernel(fd, offset, size);
  if (done == size) return;
  if (buffer_.empty()) buffer_.resize(kBufferBytes);
  while (done < size) {
    const auto step =
        static_cast<std::size_t>(std::min<std::uint64_t>(buffer_.size(), size - done));
    deliver(read(done, std::span(buffer_).first(step)));
    done += step;
  }
}

void Output::fill(std::byte byte, std::uint64_t count) {
  std::array<std::byte, 4096> block;
  block.fill(byte);
  while (count > 0) {
    const auto part = static_cast<std::size_t>(std::min<std::uint64_t>(count, block.size()));
    write(std::span(block).first(part));
    count -= part;
  }
}

void Output::flush() {
  if (buffered_ == 0) return;
  deliver(std::span(buffer_).first(buffered_));
  buffered_ = 0;
}

void Output::finish() {
  flush();
  commit();
}

void Output::fail(const std::string& what, std::uint64_t offset) const {
  throw IoError(Errc::kSaveWriteFailed, what, ErrorContext{.path = where_, .offset = offset});
}

std::unique_ptr<Output> file_output(const std::filesystem::path& path) {
  return std::make_unique<FileOutput>(path);
}

std::unique_ptr<Output> sink_output(const SaveSink& sink) {
  return std::make_unique<SinkOutput>(sink);
}

}  // namespace pthload::writer
