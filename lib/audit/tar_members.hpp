// The members of a tar archive as Python's tarfile module lists them: what torch.load's legacy
// path opens before anything else (torch/serialization.py _legacy_load: tarfile.open(mode='r:'),
// the format torch 0.1.x saved: members 'sys_info', 'pickle', 'tensors', 'storages').
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace pthload::audit {

struct TarMember {
  std::string name;          ///< after GNU long names and PAX `path` records, as tarfile has it
  std::uint64_t offset = 0;  ///< where its data starts in the archive
  std::uint64_t size = 0;    ///< its data's size, within the archive
  char type = '0';           ///< the typeflag ('0' or '\0': a regular file)
};

/// Whether the first 512 bytes are a tar header Python's tarfile accepts (its checksum, signed
/// or unsigned, matches): then torch.load takes the file for a tar archive.
[[nodiscard]] bool looks_like_tar(std::span<const std::byte> file) noexcept;

/// The members in archive order, up to the end-of-archive block or to the first header tarfile
/// would refuse (then `problem` says what and where). nullopt when the file is not a tar archive.
[[nodiscard]] std::optional<std::vector<TarMember>> read_tar_members(
    std::span<const std::byte> file, std::string& problem);

}  // namespace pthload::audit
