// safetensors files into a Checkpoint, and recognising the files people mistake for checkpoints
// by their signatures (GGUF: ggml/docs/gguf.md; HDF5: the format spec's superblock signature;
// NPY: numpy/lib/format.py; ONNX: onnx.proto ModelProto field numbers).
#include "formats/other_formats.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "checkpoint/access.hpp"
#include "safetensors/header.hpp"

namespace pthload::formats {
namespace {

bool has_at(std::span<const std::byte> file, std::size_t offset, std::string_view text) {
  return file.size() >= offset + text.size() &&
         std::memcmp(file.data() + offset, text.data(), text.size()) == 0;
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// HDF5 puts its superblock at 0 or, after a user block, at 512, 1024, 2048, ... (HDF5 File
// Format Specification, "Format Signature").
bool is_hdf5(std::span<const std::byte> file) {
  constexpr std::string_view kSignature{"\x89HDF\r\n\x1a\n", 8};
  for (std::size_t offset = 0; offset < file.size(); offset = offset == 0 ? 512 : offset * 2) {
    if (has_at(file, offset, kSignature)) return true;
  }
  return false;
}

// An ONNX file is a protobuf ModelProto with no magic number; the exporters write field 1
// (ir_version, a small varint) first, then another ModelProto field: producer_name (2),
// producer_version (3), domain (4), model_version (5), doc_string (6), graph (7) or
// opset_import (8). Checked only after every real signature failed.
bool is_onnx(std::span<const std::byte> file) {
  if (file.size() < 3 || file[0] != std::byte{0x08}) return false;
  const auto ir_version = std::to_integer<unsigned>(file[1]);
  constexpr std::array<unsigned, 7> kNextTags{0x12, 0x1a, 0x22, 0x28, 0x32, 0x3a, 0x42};
  return ir_version >= 1 && ir_version < 0x40 &&
         std::find(kNextTags.begin(), kNextTags.end(), std::to_integer<unsigned>(file[2])) !=
             kNextTags.end();
}

}  // namespace

void open_safetensors(internal::CheckpointState& state) {
  auto header = safetensors::Header::parse(state.file->bytes());
  state.metadata = header.metadata();
  state.storages.reserve(header.tensors().size());
  state.tensors.reserve(header.tensors().size());
  for (const auto& entry : header.tensors()) {
    internal::StorageState storage_state;
    storage_state.key = entry.name;
    // safetensors has no devices: safetensors.torch.save_file moves tensors to the CPU, and
    // safe_open(device=...) chooses at load time, as map_location does here.
    storage_state.location = "cpu";
    storage_state.dtype = entry.dtype;
    storage_state.numel = entry.nbytes / element_size(entry.dtype);
    storage_state.nbytes = entry.nbytes;
    storage_state.file_range = std::make_unique<internal::FileRange>(
        internal::FileRange{.offset = entry.offset, .size = entry.nbytes});
    auto storage = internal::Access::make_storage(std::move(storage_state));

    // Row-major ('C' order, as safetensors stores every tensor).
    std::vector<std::int64_t> strides(entry.shape.size());
    std::int64_t stride = 1;
    for (std::size_t i = entry.shape.size(); i-- > 0;) {
      strides[i] = stride;
      // Fits: the header refuses shapes whose sizes (each at least 1) multiply past INT64_MAX.
      stride *= std::max<std::int64_t>(entry.shape[i], 1);
    }
    state.tensors.push_back({.name = entry.name,
                             .tensor = internal::Access::make_tensor(
                                 storage, entry.dtype, entry.shape, strides, 0, false)});
    (void)internal::Access::add_storage(state, std::move(storage));
  }
}

std::optional<std::string_view> foreign_format(std::span<const std::byte> file) noexcept {
  if (has_at(file, 0, "GGUF")) return "a GGUF model file (llama.cpp / ggml)";
  // The pre-GGUF ggml formats: 'ggml', 'ggmf', 'ggjt' as little-endian uint32 magic numbers.
  if (has_at(file, 0, "lmgg") || has_at(file, 0, "fmgg") || has_at(file, 0, "tjgg")) {
    return "a GGML model file (llama.cpp, before GGUF)";
  }
  if (is_hdf5(file)) return "an HDF5 file (Keras .h5 weights, or other HDF5 data)";
  if (has_at(file, 0, "\x93NUMPY")) return "a numpy .npy array (numpy.save)";
  if (has_at(file, 4, "TFL3")) return "a TensorFlow Lite model (.tflite)";
  if (is_onnx(file)) return "an ONNX model (a protobuf ModelProto)";
  return std::nullopt;
}

std::optional<std::string_view> foreign_zip_format(const zip::Archive& archive) noexcept {
  const auto& entries = archive.entries();
  if (!entries.empty() && std::all_of(entries.begin(), entries.end(), [](const zip::Entry& e) {
        return ends_with(e.name, ".npy");
      })) {
    return "a numpy .npz archive (numpy.savez)";
  }
  if (archive.find("config.json") != nullptr && archive.find("metadata.json") != nullptr) {
    return "a Keras .keras archive";
  }
  return std::nullopt;
}

}  // namespace pthload::formats
