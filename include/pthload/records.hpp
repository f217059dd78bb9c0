// The records of a zip checkpoint (torch.save ≥ 1.6, torch.jit.save): list, verify, read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
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

/// Lists every record of the zip checkpoint at `path`, in central-directory order. Reads only
/// the headers, unless `options.verify_crc` is set: then every record is read and its CRC-32
/// checked. Throws FormatError (malformed archive, CRC mismatch), UnsupportedError (e.g.
/// encrypted or an unknown compression method), IoError.
[[nodiscard]] PTHLOAD_API std::vector<RecordInfo> list_records(const std::filesystem::path& path,
                                                               const LoadOptions& options = {});

/// Returns a copy of the uncompressed bytes of record `name` (its full name, as list_records
/// gives it). Throws FormatError(kZipRecordNotFound) when there is no such record, and as
/// list_records otherwise; checks the CRC-32 when `options.verify_crc` is set.
[[nodiscard]] PTHLOAD_API std::vector<std::byte> read_record(const std::filesystem::path& path,
                                                             std::string_view name,
                                                             const LoadOptions& options = {});

}  // namespace pthload
