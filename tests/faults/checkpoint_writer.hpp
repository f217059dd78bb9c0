// Writes a torch.save-format checkpoint of any size for the fault tests: one float32 tensor 'w'
// of `elements` values (value i = i mod 4096), laid out as torch 2.x lays it out (records
// padded to 64 bytes). Too large to commit at 64 MB; generated in a few tens of milliseconds.
#pragma once

#include <cstddef>
#include <filesystem>

namespace pthload::faults {

/// Writes the checkpoint to `path` (replacing it).
void write_float_checkpoint(const std::filesystem::path& path, std::size_t elements);

/// The value the writer stores at index `i`.
[[nodiscard]] float float_checkpoint_value(std::size_t i) noexcept;

}  // namespace pthload::faults
