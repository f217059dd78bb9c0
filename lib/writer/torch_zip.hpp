// The zip archive torch.save writes, laid out byte for byte as torch's writer (miniz under
// caffe2/serialize/inline_container.cc) lays it out: every payload aligned by padding in an
// `FB` extra field of its local header, local headers without sizes followed by data
// descriptors, zip64 end records always. Only then do torch.load's
// calculate_storage_offsets (which predicts where records are instead of reading their
// headers) and its TORCH_SERIALIZATION_DEBUG checks agree with the file (docs/format.md §13).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "writer/output.hpp"

namespace pthload::writer {

/// The bytes a record takes in the archive when its local header starts at `offset`: header,
/// name, extra fields with padding, `size` bytes of payload and the descriptor. For planning
/// the file's size before writing it.
[[nodiscard]] std::uint64_t record_footprint(std::uint64_t offset, std::size_t name_size,
                                             std::uint64_t size, std::uint32_t alignment);
/// The bytes the central directory and end records take for records of these name sizes at
/// these offsets and sizes (all three spans of one length).
[[nodiscard]] std::uint64_t directory_footprint(std::span<const std::size_t> name_sizes,
                                                std::span<const std::uint64_t> offsets,
                                                std::span<const std::uint64_t> sizes);

/// Writes the records of one archive in order, then its directory.
class TorchZipWriter {
 public:
  /// `archive`: the top folder every record is under; `alignment`: of every payload (a power of
  /// two, 64 in torch).
  TorchZipWriter(Output& output, std::string archive, std::uint32_t alignment);

  /// Starts the record `<archive>/<name>` of exactly `size` bytes: its local header and padding.
  /// `known_crc`: the payload's CRC-32 where the caller knows it (a record copied whole from
  /// another archive), to be written through copy_of(), which does not read the bytes.
  void begin_record(std::string_view name, std::uint64_t size,
                    std::optional<std::uint32_t> known_crc = std::nullopt);
  /// A part of the current record's payload.
  void write(std::span<const std::byte> bytes);
  /// A part of the current record's payload that the file `fd` also holds at `offset`
  /// (Output::write_copy_of).
  void write_copy_of(std::span<const std::byte> bytes, int fd, std::uint64_t offset);
  /// A part of a record begun with its known CRC-32: bytes [offset, offset + size) of the file
  /// `fd`, not read where the output can copy them (Output::copy_from).
  void copy_of(int fd, std::uint64_t offset, std::uint64_t size, const Output::SourceReader& read);
  /// Ends the current record (all `size` bytes written): its data descriptor.
  void end_record();
  /// The CRC-32 of the record last ended.
  [[nodiscard]] std::uint32_t last_crc() const noexcept { return entries_.back().crc; }
  /// A whole record at once.
  void add_record(std::string_view name, std::span<const std::byte> bytes);
  /// The central directory, the zip64 end record and locator, the end record.
  void finish();

 private:
  struct Entry {
    std::string name;  // with the archive folder
    std::uint64_t header_offset = 0;
    std::uint64_t size = 0;
    std::uint32_t crc = 0;
    bool crc_known = false;  // given by begin_record, not computed from the bytes
  };

  Output& output_;
  std::string archive_;
  std::uint32_t alignment_;
  std::vector<Entry> entries_;
  std::uint64_t remaining_ = 0;  // payload bytes the current record still needs
  bool in_record_ = false;
};

}  // namespace pthload::writer
