// fuzz_zip: the zip layer over arbitrary bytes (APPNOTE 4.3). Properties: any input parses into
// an archive or throws pthload::Error, without reading outside the input or allocating past the
// limits; every record it lists is found by name, reads to its stated size, and the CRC path
// (read with verify_crc, and verify_crc) accepts it exactly when a bitwise reference CRC-32 of
// the bytes read equals the central directory's, so the checked and unchecked reads agree.
// And the io=map image of the same bytes as a file (zip/image.hpp: local headers read through a
// window, kept out of the image) parses to the same records at the same offsets, or fails with
// the same error at the same place.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/file_reader.hpp"
#include "common/mapped_file.hpp"
#include "pthload/error.hpp"
#include "pthload/limits.hpp"
#include "zip/archive.hpp"
#include "zip/image.hpp"

namespace {

// APPNOTE 4.4.7's CRC-32 one bit at a time: slow and obviously right, unlike the library's.
std::uint32_t reference_crc32(std::span<const std::byte> bytes) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (const std::byte b : bytes) {
    crc ^= std::to_integer<std::uint32_t>(b);
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

bool reads_with_crc_check(const pthload::zip::Archive& archive, const pthload::zip::Entry& entry) {
  try {
    (void)archive.read(entry, /*verify_crc=*/true);
  } catch (const pthload::Error&) {
    return false;
  }
  try {
    archive.verify_crc(entry);
  } catch (const pthload::Error&) {
    __builtin_trap();  // the two CRC paths disagree
  }
  return true;
}

// What parsing gave: each record's data offset, or the error's code, offset and record.
struct Outcome {
  std::vector<std::uint64_t> data_offsets;
  pthload::Errc code = pthload::Errc::kOk;
  std::optional<std::uint64_t> offset;
  std::string record;
  bool operator==(const Outcome&) const = default;
};

template <typename Parse>
Outcome outcome_of(Parse&& parse) {
  Outcome outcome;
  try {
    const auto archive = parse();
    for (const auto& entry : archive.entries())
      outcome.data_offsets.push_back(entry.data_offset);
  } catch (const pthload::Error& error) {
    outcome.code = error.code();
    outcome.offset = error.context().offset;
    outcome.record = error.context().record;
  }
  return outcome;
}

// The bytes as a file with no name on disk, for the image reader, which reads files.
class MemoryFile {
 public:
  explicit MemoryFile(std::span<const std::byte> bytes) : fd_(::memfd_create("fuzz_zip", 0)) {
    if (fd_ < 0) return;
    for (std::size_t done = 0; done < bytes.size();) {
      const auto written = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (written <= 0) __builtin_trap();
      done += static_cast<std::size_t>(written);
    }
  }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  ~MemoryFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] bool ok() const { return fd_ >= 0; }
  [[nodiscard]] std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

void check_image_agrees(std::span<const std::byte> bytes, const pthload::Limits& limits) {
  const MemoryFile file(bytes);
  if (!file.ok()) return;
  const auto image =
      pthload::common::MappedFile::image_with_views(pthload::common::FileReader::open(file.path()));
  const auto leave_out = [](const pthload::zip::Entry& entry) { return entry.method == 0; };
  std::optional<pthload::zip::CentralDirectory> directory;
  try {
    directory = pthload::zip::fill_archive_image(image, limits, leave_out,
                                                 pthload::zip::LocalHeaders::kResolved);
  } catch (const pthload::Error&) {
    __builtin_trap();  // the file is intact: reading it cannot fail
  }
  if (!directory) return;  // parse() over the image reports it, as over the bytes
  const Outcome from_image =
      outcome_of([&] { return pthload::zip::Archive::parse(image, limits, *directory); });
  const Outcome from_bytes =
      outcome_of([&] { return pthload::zip::Archive::parse(bytes, limits); });
  if (!(from_image == from_bytes)) __builtin_trap();
}

pthload::Limits fuzz_limits() {
  pthload::Limits limits;
  limits.max_zip_entries = 100'000;
  limits.max_inflated_record_bytes = 16u << 20;
  return limits;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const auto archive = pthload::zip::Archive::parse(bytes, fuzz_limits());
    for (const auto& entry : archive.entries()) {
      if (archive.find(entry.name) != &entry) __builtin_trap();  // the index must be exact
      try {
        const auto record = archive.read(entry);
        if (record.bytes().size() != entry.uncompressed_size) __builtin_trap();
        const bool crc_matches = reference_crc32(record.bytes()) == entry.crc32;
        if (reads_with_crc_check(archive, entry) != crc_matches) __builtin_trap();
      } catch (const pthload::Error&) {
        // One bad record must not hide the others.
      }
    }
  } catch (const pthload::Error&) {
  }
  check_image_agrees(bytes, fuzz_limits());
  return 0;
}
