// A file's bytes, memory-mapped read-only, or read into memory where mapping is impossible, or an
// image of the file read with pread (io=read): the one interface that supplies a checkpoint's
// bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <variant>

#include "common/aligned_buffer.hpp"
#include "common/file_reader.hpp"

namespace pthload::common {

/// The whole content of one file. Regular files are mapped (MAP_PRIVATE, PROT_READ): nothing is
/// read until touched. Pipes, character devices and anything mmap refuses are read with read()
/// into an owned 64-byte aligned buffer. An image() is owned memory the size of the file into
/// which parts of it are read with pread; the parts never read (large storages) are holes that
/// read as zeros and cost no memory. Move-only; bytes() stays valid while the object lives.
///
/// A mapping's bytes raise SIGBUS when touched after the file shrank under them; copy_out()
/// reads with pread instead, so copies of a file that shrinks end in an IoError.
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
  /// `buffer` itself as the file's bytes, without a copy (bytes assembled in memory, such as a
  /// DCP tensor put together from its chunks).
  [[nodiscard]] static MappedFile adopt(AlignedBuffer buffer) noexcept;

  /// A view of `bytes` that the caller owns: nothing is copied, so the bytes must stay alive and
  /// unchanged while this object, or anything holding it, lives (open() and load() over memory).
  [[nodiscard]] static MappedFile borrow(std::span<const std::byte> bytes) noexcept;

  /// An image of the file `reader` opened, with nothing read yet (all holes). Parts are read
  /// with fill(). Throws OutOfMemoryError when the address space cannot hold it.
  [[nodiscard]] static MappedFile image(std::shared_ptr<const FileReader> reader);
  /// An image() beside a read-only mapping of the same file (io=map): the structure (index,
  /// pickles) is read into the image with pread and parsed there (a zip's local headers through
  /// a reused buffer: zip/image.hpp), so a file truncated while it is opened gives IoError
  /// rather than SIGBUS; storages are zero-copy views of the mapping
  /// (view_of). Where the file cannot be mapped, storages are copied out instead.
  [[nodiscard]] static MappedFile image_with_views(std::shared_ptr<const FileReader> reader);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  /// The file's bytes; valid while this object lives.
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return bytes_; }
  /// Whether the bytes are a mapping (zero-copy) rather than a buffer that was read.
  [[nodiscard]] bool is_mapped() const noexcept { return std::holds_alternative<Mapping>(owner_); }
  /// Whether this is an image() that may have holes: its bytes are only valid where filled, so
  /// storages are copied out of it with copy_out(), never viewed.
  [[nodiscard]] bool has_holes() const noexcept {
    return std::holds_alternative<Image>(owner_) && !complete_;
  }

  /// Reads [offset, offset + size) of an image() from the file (clamped to the file's size
  /// at open). Only while the image is being built, before anyone else reads it: it writes the
  /// image's bytes. Throws what FileReader::read_at throws.
  void fill(std::uint64_t offset, std::uint64_t size) const;
  /// Tells the kernel that [offset, offset + size) of an image()'s file will be fill()ed soon
  /// (POSIX_FADV_WILLNEED), so that the reads of many scattered ranges of a file that is not
  /// in the page cache are queued at once instead of waiting for each other. Advice only.
  void will_fill(std::uint64_t offset, std::uint64_t size) const noexcept;
  /// Reads the whole file into an image(); it has no holes afterwards.
  void fill_all();

  /// Copies `range` into `destination` (of the same size): with pread from the file when this
  /// is a mapping or an image and `range` lies in bytes() (a file that shrank gives IoError,
  /// never SIGBUS), else from memory. `record` names the bytes in errors.
  void copy_out(std::span<const std::byte> range, std::span<std::byte> destination,
                std::string_view record = {}) const;

  /// Where `range` (of bytes() or view_bytes()) lies in the file, when copy_out() reads it with
  /// pread: this is a mapping or an image of an open file. nullopt where copy_out() copies
  /// memory (bytes from memory, a pipe's bytes, a range outside both).
  [[nodiscard]] std::optional<std::uint64_t> file_offset_of(
      std::span<const std::byte> range) const noexcept;

  /// `range` (bytes of bytes()) as bytes that may be viewed for as long as this object lives:
  /// `range` itself for a mapping, memory or a complete image; the same bytes of the mapping of
  /// an image_with_views(); nothing for an image with holes and no mapping (copy_out instead).
  [[nodiscard]] std::optional<std::span<const std::byte>> view_of(
      std::span<const std::byte> range) const noexcept;
  /// The bytes views are taken from: the mapping of an image_with_views(), else bytes(). A
  /// view's range lies in it, and copy_out() accepts it as it accepts bytes().
  [[nodiscard]] std::span<const std::byte> view_bytes() const noexcept {
    return views_.address != nullptr
               ? std::span<const std::byte>(static_cast<const std::byte*>(views_.address),
                                            views_.length)
               : bytes_;
  }

  /// Throws IoError kIoFileChanged when the file was written or truncated since it was opened
  /// (see FileReader::check_unchanged); nothing for bytes that came from memory.
  void check_unchanged() const;
  /// The open file behind a mapping or an image; nullptr for memory and pipes.
  [[nodiscard]] const FileReader* reader() const noexcept { return reader_.get(); }

 private:
  struct Mapping {
    void* address = nullptr;
    std::size_t length = 0;
  };
  struct Image {
    void* address = nullptr;
    std::size_t length = 0;
  };
  MappedFile() = default;
  void release() noexcept;

  // monostate: borrowed or empty
  std::variant<std::monostate, Mapping, AlignedBuffer, Image> owner_;
  Mapping views_;  // an image_with_views()'s mapping of the file; address nullptr otherwise
  std::span<const std::byte> bytes_;
  std::shared_ptr<const FileReader> reader_;  // a mapping's or an image's file, for pread
  bool complete_ = false;                     // an image with every byte read
};

}  // namespace pthload::common
