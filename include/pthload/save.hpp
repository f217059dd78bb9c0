// Writing checkpoints that torch.load reads: the zip format torch.save writes, laid out record for
// record as torch 2.x lays it out (docs/format.md §13), with a pickle that
// torch.load(weights_only=True) accepts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "pthload/checkpoint.hpp"
#include "pthload/dtype.hpp"
#include "pthload/export.hpp"
#include "pthload/tensor.hpp"

namespace pthload {

/// A tensor in the caller's memory, for save(): what an embedding runtime holds. Nothing is
/// copied before save() writes it.
struct MemoryTensor {
  std::string name;  ///< its key in the file's dict (with dots: see SaveOptions::nest_dotted_names)
  Dtype dtype = Dtype::kFloat32;  ///< any dtype but the quantized ones
  std::vector<std::int64_t> sizes;
  /// In elements, one per size; empty for a contiguous (row-major) tensor.
  std::vector<std::int64_t> strides;
  /// Elements from the first byte of `storage` to the tensor's first element.
  std::int64_t storage_offset = 0;
  /// The bytes the tensor views, whole (torch's storage), owned by the caller and left unchanged
  /// while save() runs; a multiple of element_size(dtype) bytes. Tensors whose `storage` is the
  /// same span (same first byte and size) share one storage in the file, as tied weights and
  /// views do in torch's.
  std::span<const std::byte> storage;
  bool requires_grad = false;  ///< written as torch writes it; torch.load gives it back
};

/// How save() writes. The defaults give what torch.save writes for a state_dict of CPU tensors.
struct SaveOptions {
  /// Dotted names become nested dicts ("enc.0.w" → {"enc": {"0": {"w": ...}}}), as a module's
  /// nested state is sometimes kept; a name that is both a tensor and a prefix of another
  /// ("a" and "a.b") is then refused. Default: one flat dict keyed by the full names, as
  /// model.state_dict() is. Either way pthload reads the same names back.
  bool nest_dotted_names = false;
  /// Write each tensor as its own contiguous storage of exactly its elements (one tensor under
  /// two names, tied weights, stays one). Default: as torch does, a view keeps its whole storage,
  /// offset and strides, and tensors sharing a storage share it in the file (written once).
  bool compact_views = false;
  /// Where storage payloads start in the file: a power of two from 64 (torch's) to 65 536; 4 096
  /// lets GPUDirect Storage read them in place. The `.storage_alignment` record says it, so torch's
  /// calculate_storage_offsets finds them too.
  std::uint32_t alignment = 64;
  /// The location tag written for every storage: "cpu", or a device string torch's
  /// location tags use ("cuda:0", "cuda", "mps", "xpu:1", "meta", ...), for users whose
  /// map_location code expects a file saved from that device. torch.load without map_location
  /// puts the storage there, so "cuda:0" files need a GPU or a map_location to load.
  std::string location = "cpu";
  /// Write each storage's tag from the file it was read from (Storage::location()) instead of
  /// `location`; tensors from caller memory still get `location`.
  bool keep_locations = false;
  /// The archive's top folder. Empty: the file's stem, as torch.save names it ("archive" for a
  /// sink). Any name loads; it must be one path component of printable ASCII.
  std::string archive_name;
  /// Leave out tensors save() cannot write (sparse, nested, quantized and meta tensors, wrapper
  /// subclasses), each named in SaveReport::skipped, instead of refusing the whole save.
  bool skip_unsupported = false;
  /// Called after each chunk written with the bytes written so far and the file's size, which is
  /// known before the first byte. Runs on the calling thread; throwing aborts the save.
  std::function<void(std::uint64_t written, std::uint64_t total)> progress;
};

/// What save() wrote.
struct SaveReport {
  std::uint64_t bytes = 0;           ///< the file's size
  std::size_t tensors = 0;           ///< names written
  std::size_t storages = 0;          ///< storage records written (a shared storage once)
  std::vector<std::string> skipped;  ///< "name (reason)" for each tensor left out
};

/// Receives the file's bytes in order, a chunk per call; a chunk is valid only during the call.
/// Throwing aborts the save: save() throws IoError(kSaveWriteFailed) naming the byte offset and
/// carrying the exception's text.
using SaveSink = std::function<void(std::span<const std::byte> bytes)>;

/// Writes `tensors` as torch.save writes a dict of them: a zip archive whose data.pkl is a dict
/// of the names, in this order, that torch.load(weights_only=True) reads with and without
/// mmap=True (torch ≥ 2.1 for uint16/32/64, float8, complex32 and bits tensors, which 1.13
/// lacks; 1.13 reads the others). A single tensor named "" is written as the root object, as
/// torch.save(tensor) writes it. The same tensors and options give the same bytes.
///
/// Written atomically: into a temporary file beside `path`, flushed to disk (fsync), then
/// renamed over `path`; when save() throws, `path` is as it was and the temporary file is gone.
/// A `path` that is a symbolic link is written through, as torch.save's open() writes: the link
/// stays and its target is replaced (from beside the target); a replaced file keeps its mode.
/// Memory stays bounded (a few MiB of buffers and the pickle) whatever the tensors' size: bytes
/// are read from their storages as they are written. Storages must be on the CPU (load(), not
/// open(); Checkpoint::to(Device::cpu()) for GPU ones).
///
/// Throws FormatError(kSaveBadTensor) for a tensor that lies outside its storage or a storage
/// shared under two dtypes or sizes, FormatError(kSaveNameCollision) for two tensors of one
/// name (or one a prefix of the other when nesting), UnsupportedError(kSaveUnsupportedTensor)
/// for a tensor save() cannot write (unless skip_unsupported) or one not on the CPU,
/// UnsupportedError(kSaveBadOptions) for options outside their ranges, IoError(kSaveWriteFailed)
/// when writing, syncing or renaming fails (errno's text: a full disk says ENOSPC), and the
/// errors of reading the storages (a file view truncated since the load: IoError). Each names the
/// tensor, or the file and byte offset.
PTHLOAD_API SaveReport save(const std::filesystem::path& path, std::span<const NamedTensor> tensors,
                            const SaveOptions& options = {});
/// save() of the checkpoint's tensors (Checkpoint::tensors(), in that order): any format
/// pthload reads — safetensors, shards, DCP directories, legacy and TorchScript files — becomes
/// a torch.save file. The checkpoint must have been load()ed onto the CPU.
PTHLOAD_API SaveReport save(const std::filesystem::path& path, const Checkpoint& checkpoint,
                            const SaveOptions& options = {});
/// save() of tensors in the caller's memory.
PTHLOAD_API SaveReport save(const std::filesystem::path& path,
                            std::span<const MemoryTensor> tensors, const SaveOptions& options = {});

/// The same files, streamed to `sink` instead of a path: what a caller sends over a socket or
/// into its own storage. Memory stays bounded as above. A failed save leaves the sink with a
/// partial file; what to do with it is the caller's.
PTHLOAD_API SaveReport save(const SaveSink& sink, std::span<const NamedTensor> tensors,
                            const SaveOptions& options = {});
/// save() of the checkpoint's tensors to `sink`.
PTHLOAD_API SaveReport save(const SaveSink& sink, const Checkpoint& checkpoint,
                            const SaveOptions& options = {});
/// save() of tensors in the caller's memory to `sink`.
PTHLOAD_API SaveReport save(const SaveSink& sink, std::span<const MemoryTensor> tensors,
                            const SaveOptions& options = {});

}  // namespace pthload
