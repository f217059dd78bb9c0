/* pthload's C API: open and load PyTorch checkpoints from C (and through a C ABI, from Rust, Go,
 * Zig, C#...). A thin layer over the C++ API (pthload.hpp); no C++ exception ever crosses it.
 *
 * Conventions, for every function below:
 * - Functions returning `int` return 0 (PTHLOAD_OK) on success, else a pthload::Errc value: the
 *   codes of the C++ errors, unchanged (1xx input/output, 2xx zip, 3xx pickle, 4xx torch,
 *   5xx device, 6xx legacy streams, 7xx safetensors, 8xx sets of files, 9xx this API, 10xx
 *   choosing tensors and slices, 11xx torch.distributed.checkpoint, 12xx saving).
 *   pthload_last_error() then describes the failure. Each such function resets the calling
 *   thread's last error to code 0 on success.
 * - Handles (pthload_checkpoint, pthload_records) are owned by the caller and released with their
 * _free function. Pointers to tensors and strings a checkpoint hands out are borrowed: valid until
 *   the checkpoint is freed, never to be freed by the caller.
 * - Accessors taking a `const pthload_tensor*` never fail and never touch the last error, except
 *   where they say so. Passing NULL where a handle is expected is a PTHLOAD_ERROR_INVALID_ARGUMENT
 *   for functions returning `int`, and undefined behaviour for accessors.
 * - Every function may be called from any thread; one checkpoint may be read from several threads
 *   at once (nothing here mutates it), but freed only once nothing else uses it.
 *
 * Compatibility (docs/compatibility.md). A program built against this header keeps working,
 * unchanged and not rebuilt, with every later library of the same soname major
 * (libpthload.so.PTHLOAD_SOVERSION). The structs that cross the API can grow because each begins
 * with `struct_size`, the bytes of the struct as the side that made it knows it; fields are only
 * ever added at the end, and a field added after the first version means "the default" when zero.
 * Each version's size is the end of its last field (PTHLOAD_<STRUCT>_SIZE_V1...), never a
 * sizeof that counts tail padding, where a later version may put a field.
 * - A struct the caller passes in (pthload_options, pthload_save_options, pthload_save_tensor)
 *   is set up by its init function, which zeroes it and sets `struct_size` to the caller's
 *   sizeof. The library reads that first: fields past it (an older caller) take their
 *   defaults; bytes past the library's own struct (a newer caller) must be zero, else the call
 *   fails with PTHLOAD_ERROR_UNSUPPORTED_OPTION: an option this library cannot honour is
 *   refused, never ignored.
 * - A struct the library fills for the caller (pthload_record_info) has its `struct_size` set by
 *   the caller; the library writes the fields that fit and sets `struct_size` to the bytes it
 *   filled, so that PTHLOAD_HAS_FIELD then says which fields an older library left alone.
 * - A struct the library hands out (pthload_storage_info, pthload_error) carries the library's
 *   `struct_size`: read a field added after the first version only where PTHLOAD_HAS_FIELD says so.
 * - pthload_device is passed by value and never changes.
 */
#ifndef PTHLOAD_PTHLOAD_H
#define PTHLOAD_PTHLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "pthload/export.hpp"

#ifdef __cplusplus
extern "C" {
#endif

/** The version of this header; pthload_version() gives the library's. meson.build refuses to
 *  configure where these disagree with the project's version and soname. */
#define PTHLOAD_VERSION_MAJOR 0
#define PTHLOAD_VERSION_MINOR 5
#define PTHLOAD_VERSION_PATCH 0
#define PTHLOAD_VERSION_STRING "0.5.0"
/** The soname's major (libpthload.so.2): it changes exactly when a program built against an
 *  earlier header may not work with this library (docs/compatibility.md). */
#define PTHLOAD_SOVERSION 2

/** The most any struct_size may say: a larger one is garbage in a struct never set up, refused
 *  with PTHLOAD_ERROR_INVALID_ARGUMENT. */
#define PTHLOAD_STRUCT_SIZE_MAX 65536

/** Whether `*pointer`, a struct that begins with `struct_size`, holds `field`. */
#define PTHLOAD_HAS_FIELD(pointer, type, field) \
  ((pointer)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

/** Success. Other codes are pthload::Errc values (include/pthload/error.hpp). */
#define PTHLOAD_OK 0
/** A NULL handle or output pointer, or a nonzero count beside a NULL array (9xx: this API's
 *  own). A device string that names no device fails with Device::parse's code instead (500
 *  DeviceBadString, 501 DeviceUnsupportedType), as in C++. */
#define PTHLOAD_ERROR_INVALID_ARGUMENT 900
/** Memory ran out (std::bad_alloc inside the library). */
#define PTHLOAD_ERROR_OUT_OF_MEMORY 901
/** An exception that is not a pthload error: a bug in pthload; the message says what. */
#define PTHLOAD_ERROR_INTERNAL 902
/** The map_location callback returned a negative value: loading stops. */
#define PTHLOAD_ERROR_CALLBACK_FAILED 903
/** The tensor has no DLPack form: quantized, packed sub-byte, sparse, nested, meta, or without
 *  bytes (pthload_tensor_to_dlpack). */
#define PTHLOAD_ERROR_NO_DLPACK_FORM 904
/** A struct from a newer pthload.h sets an option this library does not have (a nonzero byte
 *  past the library's own struct; the error's offset says where): see Compatibility above. */
#define PTHLOAD_ERROR_UNSUPPORTED_OPTION 905

/** A checkpoint, opened or loaded. Owns its tensors and their storages; free it with
 *  pthload_checkpoint_free(). Opaque. */
typedef struct pthload_checkpoint pthload_checkpoint;
/** One named tensor of a checkpoint, borrowed from it (valid until the checkpoint is freed).
 *  Opaque: read it through the pthload_tensor_* accessors. */
typedef struct pthload_tensor pthload_tensor;

/** Element types, numbered as pthload::Dtype (torch's dtypes; names by pthload_dtype_name). */
typedef enum pthload_dtype {
  PTHLOAD_FLOAT64 = 0,
  PTHLOAD_FLOAT32 = 1,
  PTHLOAD_FLOAT16 = 2,
  PTHLOAD_BFLOAT16 = 3,
  PTHLOAD_COMPLEX32 = 4,
  PTHLOAD_COMPLEX64 = 5,
  PTHLOAD_COMPLEX128 = 6,
  PTHLOAD_BOOL = 7,
  PTHLOAD_INT8 = 8,
  PTHLOAD_INT16 = 9,
  PTHLOAD_INT32 = 10,
  PTHLOAD_INT64 = 11,
  PTHLOAD_UINT8 = 12,
  PTHLOAD_UINT16 = 13,
  PTHLOAD_UINT32 = 14,
  PTHLOAD_UINT64 = 15,
  PTHLOAD_QINT8 = 16,
  PTHLOAD_QUINT8 = 17,
  PTHLOAD_QINT32 = 18,
  PTHLOAD_QUINT4X2 = 19,
  PTHLOAD_QUINT2X4 = 20,
  PTHLOAD_FLOAT8_E5M2 = 21,
  PTHLOAD_FLOAT8_E4M3FN = 22,
  PTHLOAD_FLOAT8_E5M2FNUZ = 23,
  PTHLOAD_FLOAT8_E4M3FNUZ = 24,
  PTHLOAD_FLOAT8_E8M0FNU = 25,
  PTHLOAD_FLOAT4_E2M1FN_X2 = 26,
  PTHLOAD_BITS8 = 27,
  PTHLOAD_BITS16 = 28,
  PTHLOAD_BITS1X8 = 29,
  PTHLOAD_BITS2X4 = 30,
  PTHLOAD_BITS4X2 = 31
} pthload_dtype;

/** Kinds of device, numbered as pthload::Device::Type. */
typedef enum pthload_device_type {
  PTHLOAD_DEVICE_CPU = 0,
  PTHLOAD_DEVICE_CUDA = 1,
  PTHLOAD_DEVICE_META = 2
} pthload_device_type;

/** A device: its type and, for CUDA, its ordinal (-1: the current device; one below -1 fails the
 * load with code 503 DeviceOrdinalOutOfRange, as torch refuses it). */
typedef struct pthload_device {
  pthload_device_type type;
  int index;
} pthload_device;

/** How a tensor's elements are laid out, numbered as pthload::Layout. Only strided tensors have
 *  data of their own; the parts of sparse and nested tensors are listed as tensors too. */
typedef enum pthload_layout {
  PTHLOAD_LAYOUT_STRIDED = 0,
  PTHLOAD_LAYOUT_SPARSE_COO = 1,
  PTHLOAD_LAYOUT_SPARSE_CSR = 2,
  PTHLOAD_LAYOUT_SPARSE_CSC = 3,
  PTHLOAD_LAYOUT_SPARSE_BSR = 4,
  PTHLOAD_LAYOUT_SPARSE_BSC = 5,
  PTHLOAD_LAYOUT_NESTED = 6
} pthload_layout;

/** What a map_location callback learns about one storage before it is placed. The strings are
 *  NUL-terminated and valid only during the call. */
typedef struct pthload_storage_info {
  size_t struct_size;   /**< the library's PTHLOAD_STORAGE_INFO_SIZE_V<n> */
  const char* key;      /**< the storage's key in the file ("0") */
  const char* location; /**< the tag torch saved ("cpu", "cuda:1") */
  pthload_dtype dtype;  /**< the storage's element type (uint8 for an untyped storage) */
  uint64_t numel;       /**< elements in the storage */
  uint64_t nbytes;      /**< bytes in the storage */
} pthload_storage_info;

/** The size of the first pthload_storage_info (pthload 0.2.0). */
#define PTHLOAD_STORAGE_INFO_SIZE_V1 (offsetof(pthload_storage_info, nbytes) + sizeof(uint64_t))

/** torch.load's map_location as a C function: called once per storage while loading, on the
 *  calling thread, with the user data given in pthload_options. Return 1 after writing the
 *  storage's device to `*device`; 0 to place it where its tag says (the tag's device); a negative
 *  value to stop loading with PTHLOAD_ERROR_CALLBACK_FAILED. */
typedef int (*pthload_map_location_fn)(void* user_data, const pthload_storage_info* storage,
                                       pthload_device* device);

/** Options for opening and loading. Set every field with pthload_options_init() first, then
 *  change what you need; a NULL options pointer means the defaults. Grows at its end only (see
 *  Compatibility above). */
typedef struct pthload_options {
  /** sizeof(pthload_options) as the caller's header has it (pthload_options_init sets it). At
   *  least PTHLOAD_OPTIONS_SIZE_V1, else the call fails with PTHLOAD_ERROR_INVALID_ARGUMENT. */
  size_t struct_size;
  /** Every storage goes to this device ("cpu", "cuda:0", "meta"); NULL: not used. Applied
   *  before map_location, which is then not called. The string is read during the call only;
   *  one that names no device fails with code 500 or 501. */
  const char* map_to;
  /** Called per storage to choose its device (see pthload_map_location_fn); NULL: not used. */
  pthload_map_location_fn map_location;
  /** Passed to map_location unchanged. */
  void* map_location_user_data;
  /** Nonzero: CPU storages become owned 64-byte aligned copies instead of read-only views of
   *  the mapped file (pthload::LoadOptions::copy_cpu_storages). */
  int copy_cpu_storages;
  /** Nonzero: check each zip record's CRC-32 (pthload::LoadOptions::verify_crc). */
  int verify_crc;
  /** pthload::Limits, with the same defaults; see options.hpp for what each guards against. */
  uint64_t max_zip_entries;
  uint64_t max_inflated_record_bytes;
  uint64_t max_pickle_stack;
  uint64_t max_pickle_memo;
  uint64_t max_pickle_nesting;
  uint64_t max_pickle_values;
  /* Choosing tensors (pthload::TensorFilter's select, rename_prefix, only, exclude;
   * docs/partial-loading.md): applied in this order by open and load alike. Left-out tensors are
   * not listed and their storages are never read or placed. The strings are read during the call
   * only; an array with a nonzero count must not be NULL (else PTHLOAD_ERROR_INVALID_ARGUMENT). */
  /** The sub-tree that is the state dict ("state_dict", "model", "ema"): only tensors named
   *  "<select>.<rest>" are kept, named "<rest>". NULL or "": the whole tree. */
  const char* select;
  /** rename_prefix_count prefix renames: a name starting with rename_prefix_from[i] has it
   *  replaced by rename_prefix_to[i] (the first that matches; "module." to "" drops
   *  DataParallel's prefix). */
  const char* const* rename_prefix_from;
  const char* const* rename_prefix_to;
  size_t rename_prefix_count;
  /** Globs over the (renamed) names: `*`, `?`, `[a-z]`, `[!a-z]`. A tensor is kept when it
   *  matches one of `only` (or only_count is 0) and none of `exclude`. */
  const char* const* only;
  size_t only_count;
  const char* const* exclude;
  size_t exclude_count;
  /* Fields added later go here; zero must mean their default. */
  /** pthload 0.5.0 (PTHLOAD_OPTIONS_SIZE_V2). pthload::Limits::max_overlapping_view_bytes: the
   *  bytes pthload_tensor_copy, pthload_tensor_checksum and pthload_checkpoint_checksums may
   *  read of a view that shows more than its storage holds (stride 0, expand: a file of a few
   *  hundred bytes can claim 2^40 elements), past which they fail with code 413
   *  (TorchLimitExceeded); views that do not overlap themselves are never limited. Tensors keep
   *  the value of the open or load that made them. 0: the default, 1 GiB. */
  uint64_t max_overlapping_view_bytes;
} pthload_options;

/** The size of the first pthload_options (pthload 0.2.0): the least struct_size accepted. */
#define PTHLOAD_OPTIONS_SIZE_V1 (offsetof(pthload_options, exclude_count) + sizeof(size_t))
/** The size of pthload 0.5.0's pthload_options, which added max_overlapping_view_bytes. */
#define PTHLOAD_OPTIONS_SIZE_V2 \
  (offsetof(pthload_options, max_overlapping_view_bytes) + sizeof(uint64_t))

/** The calling thread's last error. Every string is NUL-terminated (empty when unknown). */
typedef struct pthload_error {
  size_t struct_size;    /**< the library's PTHLOAD_ERROR_SIZE_V<n> */
  int code;              /**< PTHLOAD_OK, or the pthload::Errc value */
  const char* code_name; /**< the Errc's name without its k ("ZipCrcMismatch"); "Ok" for 0 */
  const char* message;   /**< what went wrong, without the location */
  const char* what;      /**< location then message: "model.pt: archive/data.pkl+0x1a2: ..." */
  const char* path;      /**< the file, when known */
  const char* record;    /**< the zip record ("archive/data.pkl"), when known */
  int has_offset;        /**< whether offset is known */
  uint64_t offset;       /**< byte offset within the record or file */
  int has_opcode;        /**< whether opcode is known */
  uint8_t opcode;        /**< the pickle opcode being executed */
} pthload_error;

/** The size of the first pthload_error (pthload 0.2.0): its last field ends before its sizeof. */
#define PTHLOAD_ERROR_SIZE_V1 (offsetof(pthload_error, opcode) + sizeof(uint8_t))

/** The calling thread's last error: code 0 after a success. The pointer and its strings stay
 *  valid until this thread's next call of a function returning int, or a call of
 *  pthload_tensor_data that returns NULL (which records why there); never NULL. */
PTHLOAD_API const pthload_error* pthload_last_error(void);

/** What pthload_options_init calls, for bindings that cannot call an inline function. `size`
 *  is the caller's sizeof(pthload_options) and becomes options->struct_size; fields past it are
 *  not written, bytes past the library's own struct are zeroed. Fails with
 *  PTHLOAD_ERROR_INVALID_ARGUMENT for a NULL `options` or a `size` outside
 *  PTHLOAD_OPTIONS_SIZE_V1..PTHLOAD_STRUCT_SIZE_MAX (then nothing is written). Unlike the other
 *  functions returning int, a success leaves the thread's last error as it was: setting up
 *  options to try again does not erase why the first try failed. */
PTHLOAD_API int pthload_options_init_sized(pthload_options* options, size_t size);

/** Sets `*options` to the defaults: no map_location, views, no CRC check, default limits, no
 *  choosing; zeroes every other byte (padding included) and sets `struct_size` to this
 *  header's sizeof(pthload_options). Does nothing when options is NULL. Inline, so that the size
 *  is the caller's, not the library's. */
static inline void pthload_options_init(pthload_options* options) {
  if (options != NULL) (void)pthload_options_init_sized(options, sizeof(pthload_options));
}

/** Reads the checkpoint at `path` (a NUL-terminated file name) without placing any storage:
 *  names, dtypes, shapes, strides and storages only; tensor data pointers are NULL
 *  (pthload::open). On success `*out` is a new checkpoint to free with pthload_checkpoint_free;
 *  on failure `*out` is NULL. `options` may be NULL. */
PTHLOAD_API int pthload_open(const char* path, const pthload_options* options,
                             pthload_checkpoint** out);

/** Reads the checkpoint at `path` and places every storage where the options say (map_to, else
 *  map_location, else each storage's tag), as pthload::load. Ownership as pthload_open. */
PTHLOAD_API int pthload_load(const char* path, const pthload_options* options,
                             pthload_checkpoint** out);

/** pthload_open over `size` bytes at `data` that the caller owns, not a file. The bytes are not
 *  copied: they must stay unchanged and alive until the checkpoint and every DLPack tensor made
 *  from it are freed. */
PTHLOAD_API int pthload_open_bytes(const void* data, size_t size, const pthload_options* options,
                                   pthload_checkpoint** out);

/** pthload_load over bytes the caller owns: CPU storages are views of those bytes (unless
 *  options->copy_cpu_storages), so the bytes must outlive the checkpoint and every DLPack
 *  tensor made from it. */
PTHLOAD_API int pthload_load_bytes(const void* data, size_t size, const pthload_options* options,
                                   pthload_checkpoint** out);

/** Releases the checkpoint and what it holds, except storages still held by DLPack tensors
 *  (pthload_tensor_to_dlpack), which live until their deleter runs. NULL is ignored. */
PTHLOAD_API void pthload_checkpoint_free(pthload_checkpoint* checkpoint);

/** How many tensors the checkpoint lists (pthload::Checkpoint::tensors()). */
PTHLOAD_API size_t pthload_checkpoint_tensor_count(const pthload_checkpoint* checkpoint);

/** The tensor at `index` in the checkpoint's list (pickle order), or NULL past the end.
 *  Borrowed from the checkpoint. */
PTHLOAD_API const pthload_tensor* pthload_checkpoint_tensor(const pthload_checkpoint* checkpoint,
                                                            size_t index);

/** Looks up the tensor named `name` ("layers.0.weight"; NUL-terminated). On success `*out` is
 *  the tensor, borrowed from the checkpoint; else `*out` is NULL and the code is
 *  TorchNameNotFound (412). */
PTHLOAD_API int pthload_checkpoint_find_tensor(const pthload_checkpoint* checkpoint,
                                               const char* name, const pthload_tensor** out);

/** The tensor's name, its path from the checkpoint's root ("0.weight"); NUL-terminated. */
PTHLOAD_API const char* pthload_tensor_name(const pthload_tensor* tensor);
/** The tensor's element type. */
PTHLOAD_API pthload_dtype pthload_tensor_dtype(const pthload_tensor* tensor);
/** The tensor's layout: strided, one of the sparse layouts, or nested. */
PTHLOAD_API pthload_layout pthload_tensor_layout(const pthload_tensor* tensor);
/** Its number of dimensions (0 for a scalar). */
PTHLOAD_API size_t pthload_tensor_ndim(const pthload_tensor* tensor);
/** Its sizes, ndim of them; borrowed (may be NULL when ndim is 0). */
PTHLOAD_API const int64_t* pthload_tensor_shape(const pthload_tensor* tensor);
/** Its strides in elements, ndim of them; borrowed (may be NULL when ndim is 0). */
PTHLOAD_API const int64_t* pthload_tensor_strides(const pthload_tensor* tensor);
/** The index of its first element in its storage, in elements. */
PTHLOAD_API int64_t pthload_tensor_storage_offset(const pthload_tensor* tensor);
/** The product of its sizes (1 for a scalar). */
PTHLOAD_API uint64_t pthload_tensor_numel(const pthload_tensor* tensor);
/** numel times the element size. */
PTHLOAD_API uint64_t pthload_tensor_nbytes(const pthload_tensor* tensor);
/** Nonzero when its strides are the row-major ones for its sizes. */
PTHLOAD_API int pthload_tensor_is_contiguous(const pthload_tensor* tensor);
/** Where its bytes are (CPU also for a storage that is not placed, after pthload_open); meta for
 *  a tensor without storage. */
PTHLOAD_API pthload_device pthload_tensor_device(const pthload_tensor* tensor);
/** The address of its first element on the CPU, valid while the checkpoint (or a DLPack tensor
 *  of it) lives; read-only (it may be a view of the mapped file). NULL when the tensor is not on
 *  the CPU, is not placed (pthload_open), or has no storage, and the last error then says why;
 *  also possibly NULL for a tensor of no elements over an empty storage, the last error then
 *  code 0. A non-NULL result leaves the last error as it was. */
PTHLOAD_API const void* pthload_tensor_data(const pthload_tensor* tensor);
/** The device address of its first element on CUDA; NULL for tensors elsewhere. */
PTHLOAD_API const void* pthload_tensor_device_pointer(const pthload_tensor* tensor);

/** Copies the tensor's elements in row-major order (what the view shows, whatever its strides)
 *  into `buffer`, which holds `size` bytes: at least pthload_tensor_nbytes() for all but the
 *  packed quantized dtypes (pthload::Tensor::copy_to: a contiguous view of the file is read
 *  straight into the buffer). Fails with PTHLOAD_ERROR_INVALID_ARGUMENT when the buffer is too
 *  small, and as pthload_tensor_data when the tensor has no bytes on the CPU. */
PTHLOAD_API int pthload_tensor_copy(const pthload_tensor* tensor, void* buffer, size_t size);

/** Sets `*out` to the XXH3-64 of the tensor's elements in row-major order as little-endian bytes
 *  (what the view shows; pthload::Tensor::content_checksum, pthinspect ls --checksum). Fails as
 *  pthload_tensor_data when the tensor has no bytes on the CPU. */
PTHLOAD_API int pthload_tensor_checksum(const pthload_tensor* tensor, uint64_t* out);

/** Sets out[i] to what pthload_tensor_checksum gives the checkpoint's tensor first + i, for every
 *  i < count (pthload::content_checksums): the same values, but the small tensors that view the
 *  file are read together, in file order, one pread per MiB of neighbouring records rather than
 *  one per tensor (100 000 tensors of an optimizer state). Fails as pthload_tensor_checksum fails
 *  for the first tensor of the range that fails (out[] is then unspecified), and with
 *  PTHLOAD_ERROR_INVALID_ARGUMENT for a NULL checkpoint or `out` (with count > 0), or a range
 *  that runs past pthload_checkpoint_tensor_count(). */
PTHLOAD_API int pthload_checkpoint_checksums(const pthload_checkpoint* checkpoint, size_t first,
                                             size_t count, uint64_t* out);

struct DLManagedTensor;
/** Exports the tensor as a DLPack (dlpack.h, version 0.6 and later) DLManagedTensor without
 *  copying its bytes: CPU tensors as kDLCPU, CUDA tensors as kDLCUDA. The result holds the
 *  tensor's storage, so it stays valid after pthload_checkpoint_free; its consumer (e.g. numpy's
 *  from_dlpack) calls its deleter once, which releases that hold. The data are read-only.
 *  Fails with PTHLOAD_ERROR_NO_DLPACK_FORM for tensors DLPack cannot describe (quantized, packed,
 *  sparse, nested, meta, float8) or that are not placed. */
PTHLOAD_API int pthload_tensor_to_dlpack(const pthload_tensor* tensor,
                                         struct DLManagedTensor** out);

/** The records of a zip checkpoint (torch.save since 1.6, torch.jit.save), opened once: the file
 *  is mapped and its central directory parsed by pthload_records_open, then any number of
 *  lookups and reads cost only their own work (pthload::RecordReader). Free it with
 *  pthload_records_free. Opaque. */
typedef struct pthload_records pthload_records;

/** One record as the central directory describes it (pthload::RecordInfo). */
typedef struct pthload_record_info {
  size_t struct_size;       /**< set by the caller: sizeof(pthload_record_info) in its header */
  const char* name;         /**< full name ("archive/data/0"), NUL-terminated; borrowed from the
                                 pthload_records, valid until it is freed */
  uint64_t payload_offset;  /**< where the record's bytes start in the file */
  uint64_t size;            /**< uncompressed size in bytes */
  uint64_t compressed_size; /**< bytes in the file (== size when stored) */
  uint32_t crc32;           /**< the CRC-32 the central directory declares */
  int is_compressed;        /**< nonzero when deflated rather than stored */
} pthload_record_info;

/** The size of the first pthload_record_info (pthload 0.2.0). */
#define PTHLOAD_RECORD_INFO_SIZE_V1 (offsetof(pthload_record_info, is_compressed) + sizeof(int))

/** Maps the zip checkpoint at `path` and parses its central directory; reads no record. Of
 *  `options` (NULL: the defaults) only the zip limits and verify_crc count: with verify_crc,
 *  every pthload_records_read checks its record's CRC-32. On success `*out` is a new handle to
 *  free with pthload_records_free; on failure NULL. */
PTHLOAD_API int pthload_records_open(const char* path, const pthload_options* options,
                                     pthload_records** out);

/** pthload_records_open over `size` bytes at `data` that the caller owns: they are not copied,
 *  so they must stay alive and unchanged until the handle is freed. */
PTHLOAD_API int pthload_records_open_bytes(const void* data, size_t size,
                                           const pthload_options* options, pthload_records** out);

/** Releases the handle and its mapping. NULL is ignored. */
PTHLOAD_API void pthload_records_free(pthload_records* records);

/** How many records the archive holds. */
PTHLOAD_API size_t pthload_records_count(const pthload_records* records);

/** Fills `*out` with the record at `index` (central-directory order); its name is borrowed from
 *  the handle. Set out->struct_size first (`pthload_record_info info = {sizeof info};`): the
 *  fields that fit in it are written, and struct_size becomes the bytes written (the library's
 *  PTHLOAD_RECORD_INFO_SIZE_V<n> at most: read later fields where PTHLOAD_HAS_FIELD says so).
 *  Fails with PTHLOAD_ERROR_INVALID_ARGUMENT past the end, for a NULL pointer, or for a
 *  struct_size outside PTHLOAD_RECORD_INFO_SIZE_V1..PTHLOAD_STRUCT_SIZE_MAX (then nothing is
 *  written). */
PTHLOAD_API int pthload_records_info(const pthload_records* records, size_t index,
                                     pthload_record_info* out);

/** Sets `*index` to the position of the record named exactly `name` (NUL-terminated). Fails
 *  with ZipRecordNotFound (220) when there is none. */
PTHLOAD_API int pthload_records_find(const pthload_records* records, const char* name,
                                     size_t* index);

/** Copies the uncompressed bytes of the record at `index` (inflating a deflated one) into
 *  `buffer`, which holds `size` bytes: at least the record's size (pthload_record_info.size).
 *  Fails with PTHLOAD_ERROR_INVALID_ARGUMENT past the end or when the buffer is too small; with
 *  ZipCrcMismatch when opened with verify_crc and the bytes do not match; with the zip errors
 *  (encrypted, unknown method, inflate) for a record it cannot read. */
PTHLOAD_API int pthload_records_read(const pthload_records* records, size_t index, void* buffer,
                                     size_t size);

/* Saving (pthload::save, pthload/save.hpp; docs/capi.md): torch.save files that torch.load
 * (weights_only=True, with and without mmap=True) reads, from tensors in the caller's memory or
 * from a loaded checkpoint. The file is written atomically: under a temporary name beside `path`,
 * synced, then renamed over it (over its target when `path` is a symbolic link, which stays);
 * when the call fails, `path` is as it was. Memory stays bounded whatever the tensors' size:
 * their bytes are read from their storages as they are written.
 * Codes (pthload::Errc): SaveWriteFailed (1200) writing, syncing or renaming failed (the message
 * carries errno's text: a full disk says so), or a write callback failed; SaveBadTensor (1201) a
 * tensor outside its storage, or one storage shared under two dtypes or sizes;
 * SaveNameCollision (1202) two tensors of one name (or, nesting, one a prefix of another);
 * SaveUnsupportedTensor (1203) a tensor it cannot write (quantized, sparse, nested, meta, not
 * on the CPU) unless skip_unsupported; SaveBadOptions (1204) an option out of its range. */

/** A tensor in the caller's memory, for pthload_save (pthload::MemoryTensor). Set each with
 *  pthload_save_tensor_init() first, then fill in what it needs. In an array, every element
 *  carries the same struct_size (the caller's sizeof): the library steps through the array by
 *  it. Grows at its end only (see Compatibility above). */
typedef struct pthload_save_tensor {
  /** sizeof(pthload_save_tensor) as the caller's header has it (pthload_save_tensor_init sets
   *  it). At least PTHLOAD_SAVE_TENSOR_SIZE_V1, else PTHLOAD_ERROR_INVALID_ARGUMENT. */
  size_t struct_size;
  /** Its key in the file's dict, NUL-terminated, read during the call only; must not be NULL.
   *  With dots: see pthload_save_options.nest_dotted_names. A single tensor named "" is written
   *  as the file's root object, as torch.save(tensor) writes it. */
  const char* name;
  /** Its element type: any but the quantized ones (those fail with SaveUnsupportedTensor). */
  pthload_dtype dtype;
  /** Nonzero: written as torch writes a tensor that requires grad (torch.load gives it back). */
  int requires_grad;
  /** Its number of dimensions (0 for a scalar). */
  size_t ndim;
  /** Its sizes, ndim of them; read during the call only. May be NULL when ndim is 0. */
  const int64_t* sizes;
  /** Its strides in elements, ndim of them; NULL: contiguous (row-major). */
  const int64_t* strides;
  /** Elements from the first byte of `storage` to the tensor's first element. */
  int64_t storage_offset;
  /** The bytes the tensor views, whole (torch's storage): the caller's, left unchanged while the
   *  call runs and never kept after it. NULL only with storage_nbytes 0. Tensors whose storage
   *  and storage_nbytes are both equal share one storage in the file (written once), as tied
   *  weights and views do in torch's. */
  const void* storage;
  /** The storage's size in bytes: a multiple of the dtype's element size. */
  uint64_t storage_nbytes;
  /* Fields added later go here; zero must mean their default. */
} pthload_save_tensor;

/** The size of the first pthload_save_tensor: the least struct_size accepted. */
#define PTHLOAD_SAVE_TENSOR_SIZE_V1 \
  (offsetof(pthload_save_tensor, storage_nbytes) + sizeof(uint64_t))

/** What pthload_save_tensor_init calls, for bindings that cannot call an inline function: zeroes
 *  the caller's `size` bytes at `tensor` (every field at its default: NULL, 0, PTHLOAD_FLOAT64)
 *  and sets struct_size to `size`, the caller's sizeof(pthload_save_tensor). Fails with
 *  PTHLOAD_ERROR_INVALID_ARGUMENT for a NULL `tensor` or a `size` outside
 *  PTHLOAD_SAVE_TENSOR_SIZE_V1..PTHLOAD_STRUCT_SIZE_MAX (then nothing is written). A success
 *  leaves the thread's last error as it was. */
PTHLOAD_API int pthload_save_tensor_init_sized(pthload_save_tensor* tensor, size_t size);

/** Zeroes `*tensor`, padding included, and sets `struct_size` to this header's
 *  sizeof(pthload_save_tensor). Does nothing when tensor is NULL. Inline, so that the size is
 *  the caller's, not the library's. */
static inline void pthload_save_tensor_init(pthload_save_tensor* tensor) {
  if (tensor != NULL) (void)pthload_save_tensor_init_sized(tensor, sizeof(pthload_save_tensor));
}

/** Called while saving, on the calling thread, after each chunk written, with the bytes written
 *  so far and the file's size (known before the first byte). Return 0 (or any value that is not
 *  negative) to go on; a negative value stops the save with PTHLOAD_ERROR_CALLBACK_FAILED (the
 *  file at the path is then as it was). */
typedef int (*pthload_save_progress_fn)(void* user_data, uint64_t written, uint64_t total);

/** Called once per tensor skip_unsupported left out, after the file is written, with the tensor's
 *  name and the reason ("name (reason)"; NUL-terminated, valid only during the call). */
typedef void (*pthload_save_skipped_fn)(void* user_data, const char* description);

/** Options for saving (pthload::SaveOptions). Set every field with pthload_save_options_init()
 *  first, then change what you need; a NULL options pointer means the defaults, which write what
 *  torch.save writes for a state_dict of CPU tensors. Grows at its end only (see Compatibility
 *  above). */
typedef struct pthload_save_options {
  /** sizeof(pthload_save_options) as the caller's header has it (pthload_save_options_init sets
   *  it). At least PTHLOAD_SAVE_OPTIONS_SIZE_V1, else PTHLOAD_ERROR_INVALID_ARGUMENT. */
  size_t struct_size;
  /** Nonzero: dotted names become nested dicts ("enc.0.w" is {"enc": {"0": {"w": ...}}}); a
   *  name that is both a tensor and a prefix of another ("a", "a.b") then fails with
   *  SaveNameCollision. 0: one flat dict keyed by the full names, as model.state_dict() is.
   *  Either way pthload reads the same names back. */
  int nest_dotted_names;
  /** Nonzero: each tensor is written as its own contiguous storage of exactly its elements. 0:
   *  as torch does, a view keeps its whole storage, offset and strides, and tensors sharing a
   *  storage share it in the file. */
  int compact_views;
  /** Where storage payloads start in the file: a power of two from 64 to 65536 (4096 lets
   *  GPUDirect Storage read them in place); 0: 64, torch's. Others fail with SaveBadOptions. */
  uint32_t alignment;
  /** Nonzero: each storage of a loaded checkpoint keeps the location tag it was read with
   *  (pthload_save_checkpoint); tensors from memory still get `location`. */
  int keep_locations;
  /** Nonzero: tensors that cannot be written (quantized, sparse, nested, meta) are left out, each
   *  reported to `skipped`, instead of failing the save with SaveUnsupportedTensor. */
  int skip_unsupported;
  /** The location tag written for every storage: "cpu", or a device string torch's tags use
   *  ("cuda:0", "cuda", "mps", "xpu:1", "meta"); NULL or "": "cpu". torch.load without
   *  map_location puts the storage there. Read during the call only. */
  const char* location;
  /** The archive's top folder, one path component of printable ASCII; NULL or "": the file's
   *  stem, as torch.save names it ("archive" for a sink). Any name loads. */
  const char* archive_name;
  /** Told the progress of the save (see pthload_save_progress_fn); NULL: not used. */
  pthload_save_progress_fn progress;
  /** Passed to progress unchanged. */
  void* progress_user_data;
  /** Told each tensor skip_unsupported left out (see pthload_save_skipped_fn); NULL: not used. */
  pthload_save_skipped_fn skipped;
  /** Passed to skipped unchanged. */
  void* skipped_user_data;
  /* Fields added later go here; zero must mean their default. */
} pthload_save_options;

/** The size of the first pthload_save_options: the least struct_size accepted. */
#define PTHLOAD_SAVE_OPTIONS_SIZE_V1 \
  (offsetof(pthload_save_options, skipped_user_data) + sizeof(void*))

/** pthload_options_init_sized for pthload_save_options: `size` is the caller's
 *  sizeof(pthload_save_options) and becomes options->struct_size; fields past it are not written,
 *  bytes past the library's own struct are zeroed. Fails with PTHLOAD_ERROR_INVALID_ARGUMENT
 *  for a NULL `options` or a `size` outside
 *  PTHLOAD_SAVE_OPTIONS_SIZE_V1..PTHLOAD_STRUCT_SIZE_MAX (then nothing is written). A success
 *  leaves the thread's last error as it was. */
PTHLOAD_API int pthload_save_options_init_sized(pthload_save_options* options, size_t size);

/** Sets `*options` to the defaults: a flat dict, views kept, alignment 64, tag "cpu", the
 *  archive named after the file, nothing skipped, no callbacks; zeroes every other byte (padding
 *  included) and sets `struct_size` to this header's sizeof(pthload_save_options). Does nothing
 *  when options is NULL. Inline, so that the size is the caller's, not the library's. */
static inline void pthload_save_options_init(pthload_save_options* options) {
  if (options != NULL) (void)pthload_save_options_init_sized(options, sizeof(pthload_save_options));
}

/** Writes the `count` tensors at `tensors` (in the caller's memory; see pthload_save_tensor) to
 *  the file at `path` (NUL-terminated) as torch.save writes a dict of them, in this order
 *  (pthload::save). The caller's bytes are read during the call only. `tensors` may be NULL
 *  when count is 0 (an empty dict); `options` may be NULL (the defaults). Fails with
 *  PTHLOAD_ERROR_INVALID_ARGUMENT for a NULL path, a NULL `tensors` with count > 0, a tensor
 *  with a NULL name, NULL sizes (ndim > 0), a NULL storage (storage_nbytes > 0), a dtype outside
 *  pthload_dtype, or a struct_size out of range or unlike the first tensor's; with the 12xx codes
 *  above. The same tensors and options give the same bytes. */
PTHLOAD_API int pthload_save(const char* path, const pthload_save_tensor* tensors, size_t count,
                             const pthload_save_options* options);

/** Writes the tensors of `checkpoint` (pthload_checkpoint_tensor's list, in that order) to the
 *  file at `path`: any format pthload reads (torch zip and legacy files, TorchScript,
 *  safetensors, shards, DCP directories) becomes a torch.save file. The checkpoint must have
 *  been loaded onto the CPU (pthload_load with map_to "cpu"); pthload_open's unplaced storages
 *  fail with SaveUnsupportedTensor. Fails as pthload_save. */
PTHLOAD_API int pthload_save_checkpoint(const char* path, const pthload_checkpoint* checkpoint,
                                        const pthload_save_options* options);

/** Receives the bytes of the file being saved, in order, `size` bytes at `bytes` per call (valid
 *  only during the call; never a call of 0 bytes), on the calling thread. Return 0 after taking
 *  them all; any other value stops the save with SaveWriteFailed (1200). */
typedef int (*pthload_save_write_fn)(void* user_data, const void* bytes, size_t size);

/** pthload_save, but the file's bytes go to `write` (called with `user_data`) instead of a path:
 *  what a caller sends over a socket or into its own storage. A failed save leaves what `write`
 *  received a partial file; what to do with it is the caller's. Fails with
 *  PTHLOAD_ERROR_INVALID_ARGUMENT for a NULL `write`, else as pthload_save. */
PTHLOAD_API int pthload_save_to_sink(pthload_save_write_fn write, void* user_data,
                                     const pthload_save_tensor* tensors, size_t count,
                                     const pthload_save_options* options);

/** pthload_save_checkpoint, to `write` as pthload_save_to_sink. */
PTHLOAD_API int pthload_save_checkpoint_to_sink(pthload_save_write_fn write, void* user_data,
                                                const pthload_checkpoint* checkpoint,
                                                const pthload_save_options* options);

/** torch's name of the dtype ("float32", "bfloat16"); "unknown" for a value outside the enum.
 *  Static. */
PTHLOAD_API const char* pthload_dtype_name(pthload_dtype dtype);
/** Bytes per element as torch's element_size() gives it; 0 for a value outside the enum. */
PTHLOAD_API size_t pthload_dtype_size(pthload_dtype dtype);
/** The library's version ("0.3.0"), which may be later than PTHLOAD_VERSION_STRING of the header
 *  a program was built with. Static. */
PTHLOAD_API const char* pthload_version(void);

#ifdef __cplusplus
}
#endif

#endif /* PTHLOAD_PTHLOAD_H */
