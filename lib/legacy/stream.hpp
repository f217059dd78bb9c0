// The pre-1.6 torch.save stream: stacked pickles (magic number, protocol version, sys_info, the
// object, the storage keys), then each storage's element count and bytes (docs/format.md §5.1;
// torch/serialization.py _legacy_save, _legacy_load).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pickle/machine.hpp"
#include "pthload/limits.hpp"

namespace pthload::legacy {

/// torch/serialization.py PROTOCOL_VERSION, the second pickle of every legacy stream.
inline constexpr std::int64_t kProtocolVersion = 1001;

/// A range of bytes of the file.
struct ByteRange {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

/// Where one storage's data lies: its int64 element count at `count_offset`, its bytes after.
struct StorageData {
  std::uint64_t count_offset = 0;
  std::uint64_t count = 0;  ///< elements, as the file says
  ByteRange bytes;          ///< count × element size bytes, right after the count
};

/// A parsed legacy stream. The pickles are run by parse(); the data section is walked only when
/// the caller knows each storage's element size (storage_data()), which the main pickle's
/// persistent ids define. Borrows the file's bytes: they must outlive the Stream and its values.
class Stream {
 public:
  /// Runs the five pickles of `file`: checks the magic number ("invalid magic number") and the
  /// protocol version (1001), reads sys_info, runs the main pickle (calling `persistent_load`
  /// for each persistent id, in file order, as torch does) and the list of storage keys, which
  /// must be distinct strings (or ints, written as decimal). Throws FormatError (kLegacy* codes
  /// or the pickle machine's, with the file offset), UnsupportedError from the pickle machine.
  [[nodiscard]] static Stream parse(std::span<const std::byte> file, const Limits& limits = {},
                                    pickle::PersistentLoad persistent_load = {});

  /// The main pickle's value tree (owns its arena; strings may view the file).
  [[nodiscard]] pickle::Result& main() noexcept { return main_; }
  /// Where the main pickle is in the file.
  [[nodiscard]] ByteRange main_range() const noexcept { return main_range_; }
  /// The storage keys, in the order their data follows (torch writes them sorted as strings).
  [[nodiscard]] const std::vector<std::string>& keys() const noexcept { return keys_; }
  /// The offset of the first storage's count: just past the key list pickle.
  [[nodiscard]] std::uint64_t data_offset() const noexcept { return data_offset_; }
  /// sys_info['little_endian'], when sys_info has it. Informational only: torch ignores
  /// sys_info, and its writer converts every storage to little-endian whatever the host.
  [[nodiscard]] std::optional<bool> little_endian() const noexcept { return little_endian_; }

  /// Walks the data section: for keys()[i], an int64 little-endian count, then count ×
  /// element_sizes[i] bytes. `element_sizes` must have one entry per key. Checks every count
  /// against the bytes left (a huge count is an error, never an allocation). Bytes after the
  /// last storage are ignored, as torch does. Throws FormatError (kLegacyTruncated,
  /// kLegacyStorageOutOfBounds, kLegacyKeyMismatch) with the file offset.
  [[nodiscard]] std::vector<StorageData> storage_data(
      std::span<const std::size_t> element_sizes) const;

 private:
  explicit Stream(std::span<const std::byte> file) : file_(file) {}

  std::span<const std::byte> file_;
  pickle::Result main_;
  ByteRange main_range_;
  std::vector<std::string> keys_;
  std::uint64_t data_offset_ = 0;
  std::optional<bool> little_endian_;
};

}  // namespace pthload::legacy
