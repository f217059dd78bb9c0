// Files that are not torch.save checkpoints: safetensors files, read into the same Checkpoint,
// and the formats people mistake for checkpoints, named in the error (DESIGN.md "Other formats
// are readers beside zip/legacy").
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

#include "checkpoint/state.hpp"
#include "zip/archive.hpp"

namespace pthload::formats {

/// Reads the safetensors file `state.file` into `state`: one storage per tensor (its key the
/// tensor's name, location "cpu", its bytes a FileRange of the file, so placement views or
/// copies them as it does legacy storages), one contiguous tensor over each, in the order of
/// their bytes in the file; the header's __metadata__ into state.metadata. Reads no tensor
/// bytes. Throws what safetensors::Header::parse throws.
void open_safetensors(internal::CheckpointState& state);

/// What `file` is when it is one of the formats people take for checkpoints — "a GGUF model
/// file (llama.cpp)", "an HDF5 file (Keras .h5, ...)", "a numpy .npy array", "an ONNX model" —
/// or nullopt. The views are static.
[[nodiscard]] std::optional<std::string_view> foreign_format(
    std::span<const std::byte> file) noexcept;

/// What a zip archive that torch.save did not write is, when pthload can tell — "a numpy .npz
/// archive" (every record a .npy array), "a Keras .keras archive" — or nullopt. The views are
/// static.
[[nodiscard]] std::optional<std::string_view> foreign_zip_format(
    const zip::Archive& archive) noexcept;

}  // namespace pthload::formats
