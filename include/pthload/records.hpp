// The records of a zip checkpoint (torch.save ≥ 1.6, torch.jit.save): list, read, verify.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
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

/// One record that RecordReader::verify_all() found bad.
struct RecordProblem {
  std::string record;   ///< its full name, "archive/data/0"
  std::string message;  ///< the error's what(): file, record, offset and what is wrong
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
  /// Reads every record once, in central-directory order, inflating deflated ones, and checks
  /// its CRC-32; calls `progress` (when set) with each record's compressed size once it is
  /// checked. Returns one problem per record that fails (every record is checked; none: all
  /// good). Stored records are read with pread a chunk at a time, so a file truncated since
  /// open() gives a problem (IoError's message), not SIGBUS. Throws only what `progress` throws
  /// and std::bad_alloc.
  [[nodiscard]] std::vector<RecordProblem> verify_all(
      const std::function<void(std::uint64_t bytes)>& progress = {}) const;

 private:
  struct PTHLOAD_HIDDEN State;
  explicit RecordReader(std::unique_ptr<State> state) noexcept;

  std::unique_ptr<State> state_;
};

}  // namespace pthload
