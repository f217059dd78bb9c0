// The records of a zip checkpoint (torch.save ≥ 1.6, torch.jit.save): list, verify, read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pthload/export.hpp"
#include "pthload/options.hpp"

namespace pthload {

/// One record (file) inside a zip checkpoint, as its central directory describes it.
struct RecordInfo {
  std::string name;                   ///< full name, e.g. "model/data/0"
  std::uint64_t payload_offset = 0;   ///< where the record's bytes start in the file
  std::uint64_t size = 0;             ///< uncompressed size in bytes
  std::uint64_t compressed_size = 0;  ///< bytes in the file (== size when stored)
  std::uint32_t crc32 = 0;            ///< CRC-32 the central directory declares
  bool is_compressed = false;         ///< deflated (method 8) rather than stored
};

/// A zip checkpoint's records, opened once: the file is mapped and its central directory parsed
/// by open(), then list(), find() and read() cost no more than their own work, however many
/// times they are called. Move-only (a moved-from reader may only be destroyed or assigned to).
/// Its const functions may be called from several threads at once.
class PTHLOAD_API RecordReader {
 public:
  /// Maps the file at `path` and parses its end records, central directory and local headers;
  /// reads no record. Uses `options.limits`, and with `options.verify_crc` makes every read()
  /// check its record's CRC-32. Throws FormatError (malformed archive), UnsupportedError (e.g.
  /// multi-disk), IoError; errors name `path`.
  [[nodiscard]] static RecordReader open(const std::filesystem::path& path,
                                         const LoadOptions& options = {});
  /// open() over a zip checkpoint in memory: `bytes`, which the caller owns, are read in place,
  /// not copied, so they must stay alive and unchanged while the RecordReader lives. Errors
  /// name the file "<memory>". Throws as open(path).
  [[nodiscard]] static RecordReader open(std::span<const std::byte> bytes,
                                         const LoadOptions& options = {});

  RecordReader(RecordReader&&) noexcept;
  RecordReader& operator=(RecordReader&&) noexcept;
  ~RecordReader();

  /// Every record, in central-directory order. Valid while this RecordReader lives.
  [[nodiscard]] std::span<const RecordInfo> list() const noexcept;
  /// The record named exactly `name` (its full name, "archive/data/0"), or nullptr; one of
  /// list()'s, valid while this RecordReader lives.
  [[nodiscard]] const RecordInfo* find(std::string_view name) const noexcept;
  /// A copy of the uncompressed bytes of record `name` (inflated when deflated), its CRC-32
  /// checked when opened with `verify_crc`. Throws FormatError(kZipRecordNotFound) when there is
  /// no such record; FormatError, UnsupportedError (encrypted, unknown method) for its bytes.
  [[nodiscard]] std::vector<std::byte> read(std::string_view name) const;
  /// Reads record `name` (inflating it when deflated) and checks its CRC-32 against the central
  /// directory's. Throws FormatError(kZipCrcMismatch) when they differ, and as read().
  void verify_crc(std::string_view name) const;

 private:
  struct State;
  explicit RecordReader(std::unique_ptr<State> state) noexcept;

  std::unique_ptr<State> state_;
};

/// Lists every record of the zip checkpoint at `path`, in central-directory order. Reads only
/// the headers, unless `options.verify_crc` is set: then every record is read and its CRC-32
/// checked. `RecordReader::open(path, options).list()`, copied; kept for callers that want one
/// answer per file (each call maps and parses the file again: use a RecordReader for more).
/// Throws FormatError (malformed archive, CRC mismatch), UnsupportedError (e.g.
/// encrypted or an unknown compression method), IoError.
[[nodiscard]] PTHLOAD_API std::vector<RecordInfo> list_records(const std::filesystem::path& path,
                                                               const LoadOptions& options = {});

/// Returns a copy of the uncompressed bytes of record `name` (its full name, as list_records
/// gives it): `RecordReader::open(path, options).read(name)`, which maps and parses the file
/// again on every call (to read several records, keep a RecordReader). Throws
/// FormatError(kZipRecordNotFound) when there is no such record, and as list_records otherwise;
/// checks the CRC-32 when `options.verify_crc` is set.
[[nodiscard]] PTHLOAD_API std::vector<std::byte> read_record(const std::filesystem::path& path,
                                                             std::string_view name,
                                                             const LoadOptions& options = {});

}  // namespace pthload
