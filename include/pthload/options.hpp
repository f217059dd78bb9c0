// What a caller can set when opening or loading a checkpoint: placement, limits and checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pthload/device.hpp"
#include "pthload/limits.hpp"

namespace pthload {

/// Device memory the caller provides instead of pthload's own (cudaMalloc): an inference
/// runtime's caching allocator, or slices of one region it hands over. Both are called on
/// pthload's threads, with `device` already current there.
struct DeviceAllocator {
  /// Returns `bytes` of memory on CUDA device `device`, aligned to at least 256 bytes, or
  /// nullptr when it has none (load() then throws DeviceError(kDeviceAllocationFailed)).
  std::function<void*(int device, std::size_t bytes)> allocate;
  /// Gives back what `allocate` returned, when the last storage in it is released (or the load
  /// fails). Empty: pthload never frees that memory (the caller owns the region).
  std::function<void(int device, void* pointer, std::size_t bytes)> deallocate;
};

/// How storages reach a GPU: each storage bound for a device is read by `reader_threads`
/// threads into a ring of pinned staging buffers and copied asynchronously from them; storages
/// smaller than `arena_storage_bytes` that lie close together in the file share one device
/// allocation laid out like the file (one copy per chunk of the file, not one per storage).
/// Options no load can use (no staging buffer; a caller's stream or event with storages bound
/// for two GPUs) throw DeviceError(kDeviceBadOptions) before any byte is placed.
struct CudaOptions {
  /// Pinned staging buffers per load (split among the devices used), and the size of each:
  /// the host memory the pipeline uses is at most their product (64 MiB by default).
  std::size_t staging_buffers = 16;
  std::size_t staging_buffer_bytes = std::size_t{4} << 20;
  /// Threads reading the file into staging buffers; 0: min(8, hardware threads).
  unsigned reader_threads = 0;
  /// Storages smaller than this share arenas; 0 turns arenas off (one allocation each).
  std::uint64_t arena_storage_bytes = std::uint64_t{1} << 20;
  /// The largest arena (one device allocation).
  std::uint64_t arena_max_bytes = std::uint64_t{256} << 20;
  /// The caller's allocator; empty: cudaMalloc / cudaFree.
  DeviceAllocator allocator{};
  /// A cudaStream_t of the caller's on which the copies (and byte swaps) are ordered; nullptr:
  /// pthload's own stream per device, synchronized before load() returns. With the caller's
  /// stream, load() returns once the staging buffers are free; work on the stream may still be
  /// running, ordered before anything the caller enqueues after. Only for loads onto one device.
  void* stream = nullptr;
  /// A cudaEvent_t of the caller's, recorded after the last work of the load on the stream
  /// (only for loads onto one device).
  void* event = nullptr;
  /// Called with the bytes placed so far and the bytes to place in all (every storage, CPU
  /// ones too), one call at a time, from the loading thread or pthload's reader and copy threads.
  std::function<void(std::uint64_t placed, std::uint64_t total)> progress;
};

/// How a checkpoint file's bytes are read (LoadOptions::io).
enum class IoStrategy {
  /// Memory-map the file for zero-copy views of its storages. The structure (a zip index and
  /// pickles, a safetensors header) is read with pread, every copy (copy_cpu_storages, CUDA
  /// staging, conversions) and every read the library makes of a view (checksums, CRC checks,
  /// Storage::read) too, so a file truncated during a load or those reads gives IoError, not
  /// SIGBUS. A view of a file truncated afterwards raises SIGBUS when the caller touches its
  /// bytes, as torch.load(mmap=True) and safetensors do. (Legacy pre-1.6 streams are parsed
  /// in the mapping.)
  kMap,
  /// Never map the file: its structure (zip index, pickles) is read with pread into owned
  /// memory and every storage is an owned copy read with pread (no views), so a file that
  /// shrinks or fails to read at any point of the load gives IoError. For network filesystems
  /// and files that other processes may rewrite. Legacy and safetensors files are read whole.
  kRead,
};

/// Which tensors a load keeps, and under which names (docs/partial-loading.md): LoadOptions'
/// filter, pthinspect's --select/--rename-prefix/--only/--exclude and the C API's
/// pthload_options fields of the same names. open() applies it in this order: `select`, then
/// `rename_prefix`, then `only`, `exclude` and `predicate` on the new names. Tensors left out
/// are not in Checkpoint::tensors(); storages no remaining tensor views are not in storages()
/// and are never read or placed (a storage shared by a kept and a left-out tensor is kept,
/// once). A sharded checkpoint's shard is opened only when one of its tensors is kept. (A
/// map_location may also answer kSkipStorage: device.hpp.) A default TensorFilter keeps every
/// tensor under its own name.
struct TensorFilter {
  /// The sub-tree that is the state dict ("state_dict" in a Lightning .ckpt, "model", "ema"):
  /// only tensors named `select.<rest>` are kept, named `<rest>`. Empty: the whole tree. open()
  /// throws FormatError(kSelectNotFound) when no tensor is under it.
  std::string select{};
  /// Prefix renames ({"module.", ""} for what DataParallel leaves): a name starting with a
  /// pair's first gets it replaced by the pair's second (the first pair that matches; names
  /// that match none stay). Two tensors renamed to one name make open() throw
  /// FormatError(kSelectNameCollision).
  std::vector<std::pair<std::string, std::string>> rename_prefix{};
  /// Globs over the names (`*` any run of characters, dots included; `?` one; `[a-z]`, `[!0-9]`
  /// one of a set; a name without those matches only itself): a tensor is kept when it matches
  /// one of `only` (or `only` is empty), none of `exclude`, and `predicate` (when set) says
  /// true.
  std::vector<std::string> only{};
  std::vector<std::string> exclude{};
  /// Called on the loading thread with each (renamed) name that `only` and `exclude` kept; the
  /// view is valid during the call only. What it throws, open() throws.
  std::function<bool(std::string_view name)> predicate{};
};

/// Options for reading a checkpoint. An aggregate: `load(p, {.map_location = map_to("cpu")})`.
struct LoadOptions {
  /// Where each storage goes (see map_to, map_dict, or any callable). Empty: where its location
  /// tag says, as torch.load without map_location.
  MapLocation map_location{};
  /// Copy each storage placed on the CPU out of the mapped file (or the caller's bytes) into
  /// owned, 64-byte aligned memory, instead of a zero-copy view of it (views are read-only and
  /// keep the file mapped). Small storages may share one block of memory, released with the
  /// last of them. pthinspect's `load --copy`.
  bool copy_cpu_storages = false;
  /// Check each record's CRC-32 against the central directory (FormatError kZipCrcMismatch):
  /// open() checks every record but the storages, load() the storages it places (each read
  /// once more, with pread, before placement). torch itself never checks, and files saved
  /// with CRC computation disabled are valid, so this is off by default.
  bool verify_crc = false;
  /// Bounds on what the file may make pthload do (limits.hpp); the defaults suit any file
  /// torch.save writes.
  Limits limits{};
  /// Floating storages (float32, bfloat16, float16, float8_e4m3fn, float8_e5m2) converted to
  /// this dtype, one of those, as they are placed, rounding as torch's Tensor.to(dtype): on a
  /// GPU by a kernel, on the CPU into owned buffers. An untyped storage (torch 2.x saves float8
  /// tensors over one) counts as the one dtype its tensors show. Left as they are: storages of
  /// other dtypes, numpy arrays, meta storages, and storages tensors view with different dtypes
  /// or that back a sparse, nested or quantized tensor's parts. Empty: no conversion. Another
  /// target throws UnsupportedError(kDeviceBadOptions) before any byte is placed. open() places
  /// nothing, so converts nothing; Checkpoint::to() after open() converts as load() would have.
  std::optional<Dtype> floating_dtype{};
  /// How storages bound for CUDA devices are placed.
  CudaOptions cuda{};

  /// Which tensors to load, and under which names; default: all, as the file names them.
  TensorFilter filter{};

  // How bytes are read.
  /// Map the file (views possible) or read it with pread (owned copies only); see IoStrategy.
  IoStrategy io = IoStrategy::kMap;
  /// Threads that read the owned copies of CPU storages from the file (copy_cpu_storages,
  /// io=read) when there are enough bytes to share; 0: min(8, hardware threads); 1: the loading
  /// thread alone. (Storages bound for a GPU are read by CudaOptions::reader_threads.)
  unsigned copy_threads = 0;
  /// Threads that read a large torch.save data.pkl (thousands of tensors): the loading thread
  /// runs the pickle while one more rebuilds its tensors as they appear. 0: two when the
  /// machine has more than one hardware thread; 1: the loading thread alone. With two, when
  /// such a checkpoint goes (its destructor, or a move assigned over it), one more thread
  /// releases part of it, joined before that returns. The result is the same either way for
  /// every file torch.save writes (docs/accepted-input.md, "Storages by key", names the one kind
  /// of crafted file that is not).
  unsigned parse_threads = 0;
};

}  // namespace pthload
