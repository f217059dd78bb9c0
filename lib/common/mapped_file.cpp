// MappedFile: mmap for regular files, a bounded read() loop for everything else.
#include "common/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "common/assert.hpp"
#include "common/fresh_memory.hpp"
#include "pthload/error.hpp"

namespace pthload::common {
namespace {

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

[[noreturn]] void throw_errno(Errc code, std::string_view what, const std::filesystem::path& path,
                              int error_number) {
  throw IoError(code, fmt::format("{}: {}", what, std::strerror(error_number)),
                {.path = path.string()});
}

// Grows by doubling: a pipe's length is unknown, and each doubling copies at most what has
// already been read, so the total copying stays linear in the input.
AlignedBuffer read_all(int fd, const std::filesystem::path& path, std::uint64_t max_read_bytes) {
  AlignedBuffer buffer(std::size_t{1} << 16);
  std::size_t used = 0;
  for (;;) {
    if (used == buffer.size()) {
      AlignedBuffer bigger(buffer.size() * 2);
      std::memcpy(bigger.data(), buffer.data(), used);
      buffer = std::move(bigger);
    }
    const ssize_t got = ::read(fd, buffer.data() + used, buffer.size() - used);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw_errno(Errc::kIoReadFailed, "read failed", path, errno);
    }
    if (got == 0) break;
    used += static_cast<std::size_t>(got);
    if (used > max_read_bytes) {
      throw IoError(Errc::kIoFileTooLarge,
                    fmt::format("input exceeds the read limit of {} bytes", max_read_bytes),
                    {.path = path.string()});
    }
  }
  AlignedBuffer exact(used);
  if (used != 0) std::memcpy(exact.data(), buffer.data(), used);
  return exact;
}

}  // namespace

MappedFile MappedFile::open(const std::filesystem::path& path, std::uint64_t max_read_bytes) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw_errno(Errc::kIoOpenFailed, "cannot open", path, errno);

  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) throw_errno(Errc::kIoStatFailed, "cannot stat", path, errno);

  MappedFile file;
  if (S_ISREG(info.st_mode) && info.st_size > 0) {
    const auto length = static_cast<std::size_t>(info.st_size);
    void* address = ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (address != MAP_FAILED) {
      file.owner_ = Mapping{address, length};
      file.bytes_ = {static_cast<const std::byte*>(address), length};
      // The descriptor stays open: copies read through it (copy_out), not through the mapping.
      const FileIdentity identity = identity_of(fd.get(), path.string());
      file.reader_ = std::make_shared<const FileReader>(fd.release(), path.string(), identity);
      return file;
    }
    // Some filesystems (FUSE, /proc) refuse mmap; reading still works there.
  }
  if (S_ISREG(info.st_mode) && static_cast<std::uint64_t>(info.st_size) > max_read_bytes) {
    throw IoError(Errc::kIoFileTooLarge,
                  fmt::format("file of {} bytes exceeds the read limit of {} bytes", info.st_size,
                              max_read_bytes),
                  {.path = path.string()});
  }
  auto& buffer = file.owner_.emplace<AlignedBuffer>(read_all(fd.get(), path, max_read_bytes));
  file.bytes_ = buffer.span();
  return file;
}

MappedFile MappedFile::image(std::shared_ptr<const FileReader> reader) {
  MappedFile file;
  const std::uint64_t size = reader->identity().size;
  if (size > 0) {
    // Anonymous and unreserved: pages cost memory only once a fill() writes them; holes read as
    // the shared zero page.
    void* address = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (address == MAP_FAILED) {
      throw OutOfMemoryError(
          Errc::kOutOfMemory,
          fmt::format("out of memory: no address space for an image of the file ({} bytes)", size),
          {.path = reader->path()});
    }
    file.owner_ = Image{address, static_cast<std::size_t>(size)};
    file.bytes_ = {static_cast<const std::byte*>(address), static_cast<std::size_t>(size)};
  }
  file.reader_ = std::move(reader);
  return file;
}

MappedFile MappedFile::image_with_views(std::shared_ptr<const FileReader> reader) {
  const int fd = reader->descriptor();
  MappedFile file = image(std::move(reader));
  if (!file.bytes_.empty()) {
    void* address = ::mmap(nullptr, file.bytes_.size(), PROT_READ, MAP_PRIVATE, fd, 0);
    // A filesystem that refuses mmap: storages are copied out of the file instead.
    if (address != MAP_FAILED) file.views_ = Mapping{address, file.bytes_.size()};
  }
  return file;
}

void MappedFile::fill(std::uint64_t offset, std::uint64_t size) const {
  const auto* image = std::get_if<Image>(&owner_);
  // An image of an empty file holds no Image (nothing to map): filling it fills nothing.
  PTHLOAD_ASSERT(image != nullptr || bytes_.empty());
  if (image == nullptr || offset >= bytes_.size()) return;
  size = std::min<std::uint64_t>(size, bytes_.size() - offset);
  // The image is this object's own writable memory; bytes_ is const only for its readers.
  auto* target = static_cast<std::byte*>(image->address) + offset;
  // Only where one fill covers whole blocks (the merged structure of a 100 000-tensor state
  // dict, a record read whole) is the memory policy's advice given: given the whole image, it
  // made each 30-byte local header of a 1 GB checkpoint cost 2 MiB (115 MB of resident memory
  // for its index).
  advise_fresh({target, static_cast<std::size_t>(size)});
  reader_->read_at(offset, {target, static_cast<std::size_t>(size)});
}

void MappedFile::will_fill(std::uint64_t offset, std::uint64_t size) const noexcept {
  if (reader_ == nullptr || !std::holds_alternative<Image>(owner_) || offset >= bytes_.size()) {
    return;
  }
  size = std::min<std::uint64_t>(size, bytes_.size() - offset);
  (void)::posix_fadvise(reader_->descriptor(), static_cast<off_t>(offset), static_cast<off_t>(size),
                        POSIX_FADV_WILLNEED);
}

void MappedFile::fill_all() {
  fill(0, bytes_.size());
  complete_ = true;
}

std::optional<std::uint64_t> MappedFile::file_offset_of(
    std::span<const std::byte> range) const noexcept {
  if (reader_ == nullptr ||
      !(std::holds_alternative<Mapping>(owner_) || std::holds_alternative<Image>(owner_))) {
    return std::nullopt;
  }
  const auto inside = [&](std::span<const std::byte> all) {
    return !all.empty() && range.data() >= all.data() &&
           range.data() + range.size() <= all.data() + all.size();
  };
  if (inside(bytes_)) return static_cast<std::uint64_t>(range.data() - bytes_.data());
  if (views_.address != nullptr && inside(view_bytes())) {
    return static_cast<std::uint64_t>(range.data() - view_bytes().data());
  }
  return std::nullopt;
}

void MappedFile::copy_out(std::span<const std::byte> range, std::span<std::byte> destination,
                          std::string_view record) const {
  PTHLOAD_ASSERT(range.size() == destination.size());
  if (range.empty()) return;
  if (const auto offset = file_offset_of(range)) {
    reader_->read_at(*offset, destination, record);
    return;
  }
  std::memcpy(destination.data(), range.data(), range.size());
}

std::optional<std::span<const std::byte>> MappedFile::view_of(
    std::span<const std::byte> range) const noexcept {
  if (!std::holds_alternative<Image>(owner_) || complete_) return range;
  if (views_.address == nullptr) return std::nullopt;
  PTHLOAD_ASSERT(range.data() >= bytes_.data() &&
                 range.data() + range.size() <= bytes_.data() + bytes_.size());
  return view_bytes().subspan(static_cast<std::size_t>(range.data() - bytes_.data()), range.size());
}

void MappedFile::check_unchanged() const {
  if (reader_ != nullptr) reader_->check_unchanged();
}

MappedFile MappedFile::from_bytes(std::span<const std::byte> bytes) {
  MappedFile file;
  auto& buffer = file.owner_.emplace<AlignedBuffer>(bytes.size());
  if (!bytes.empty()) std::memcpy(buffer.data(), bytes.data(), bytes.size());
  file.bytes_ = buffer.span().first(bytes.size());
  return file;
}

MappedFile MappedFile::adopt(AlignedBuffer buffer) noexcept {
  MappedFile file;
  auto& owned = file.owner_.emplace<AlignedBuffer>(std::move(buffer));
  file.bytes_ = owned.span();
  return file;
}

MappedFile MappedFile::borrow(std::span<const std::byte> bytes) noexcept {
  MappedFile file;
  file.bytes_ = bytes;
  return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : owner_(std::exchange(other.owner_, std::monostate{})),
      views_(std::exchange(other.views_, {})),
      bytes_(std::exchange(other.bytes_, {})),
      reader_(std::move(other.reader_)),
      complete_(std::exchange(other.complete_, false)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = std::exchange(other.owner_, std::monostate{});
    views_ = std::exchange(other.views_, {});
    bytes_ = std::exchange(other.bytes_, {});
    reader_ = std::move(other.reader_);
    complete_ = std::exchange(other.complete_, false);
  }
  return *this;
}

MappedFile::~MappedFile() {
  release();
}

void MappedFile::release() noexcept {
  if (auto* mapping = std::get_if<Mapping>(&owner_)) ::munmap(mapping->address, mapping->length);
  if (auto* image = std::get_if<Image>(&owner_)) ::munmap(image->address, image->length);
  if (views_.address != nullptr) ::munmap(views_.address, views_.length);
  views_ = {};
  owner_ = std::monostate{};
  bytes_ = {};
  reader_.reset();
  complete_ = false;
}

}  // namespace pthload::common
