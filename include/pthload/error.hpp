// pthload's errors: one exception hierarchy, stable numeric codes, and where it went wrong.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "pthload/export.hpp"

namespace pthload {

/// Stable error codes, grouped by layer: 1xx input/output and common limits, 2xx zip,
/// 3xx pickle, 4xx torch, 5xx device, 6xx legacy (pre-1.6) streams, 7xx safetensors, 8xx sets
/// of files (shards), 9xx the C API and DLPack, 10xx choosing what to load, 11xx
/// torch.distributed.checkpoint directories, 12xx writing checkpoints (save.hpp). Never renumbered
/// once released; the C API returns them unchanged (0 = ok). Error::code() gives one; errc_name()
/// its name. The code says what went wrong, the exception's class what kind of failure it is
/// (FormatError for malformed input, UnsupportedError for valid input pthload does not handle,
/// ...). A few codes come with more than one class: kDeviceBadOptions is a DeviceError for
/// CudaOptions and an UnsupportedError for LoadOptions::floating_dtype.
enum class Errc : int {
  kOk = 0,  ///< no error: what the C API returns on success; no Error carries it

  // 1xx: files, memory, and limits shared by every layer.
  kIoOpenFailed = 100,     ///< cannot open or list a file or directory, or it is no regular file
  kIoReadFailed = 101,     ///< reading the file failed (errno's text)
  kIoStatFailed = 102,     ///< the file's size and identity could not be read (errno's text)
  kIoFileTooLarge = 103,   ///< the input is larger than pthload will read
  kOutOfMemory = 104,      ///< an allocation failed: the message says while doing what
  kIoFileChanged = 105,    ///< the file is not the one opened (size, mtime, inode or device)
  kIoUnexpectedEof = 106,  ///< a read met the end of a file that has shrunk

  // 2xx: the zip container.
  kZipNotAnArchive = 200,                  ///< no end record, and no zip signature at the start
  kZipEndRecordNotFound = 201,             ///< no end of central directory record (truncated?)
  kZipEndRecordTruncated = 202,            ///< the end record or its comment is cut short
  kZip64LocatorInvalid = 203,              ///< the zip64 end record locator is malformed
  kZip64EndRecordInvalid = 204,            ///< the zip64 end record is malformed or disagrees
  kZipCentralDirectoryOutOfBounds = 205,   ///< the central directory runs past its end records
  kZipCentralDirectoryEntryInvalid = 206,  ///< a central directory entry is malformed
  kZip64ExtraFieldInvalid = 207,           ///< an entry's zip64 extra field is missing or short
  kZipEntryCountMismatch = 208,            ///< the declared entry count differs from the directory
  kZipLocalHeaderInvalid = 209,            ///< a record's local header is malformed
  kZipLocalHeaderMismatch = 210,           ///< a local header contradicts the central directory
  kZipRecordOutOfBounds = 211,             ///< a record or its local header runs past the file
  kZipRecordsOverlap = 212,                ///< two records (or a record and the directory) overlap
  kZipDuplicateName = 213,                 ///< two records have the same name
  kZipUnsupportedMethod = 214,             ///< a compression method other than stored or deflate
  kZipEncrypted = 215,                     ///< an encrypted record
  kZipInflateFailed = 216,                 ///< a deflated record's data is invalid
  kZipInflatedSizeMismatch = 217,          ///< a record inflates to another size than declared
  kZipImplausibleCompressionRatio = 218,   ///< a declared size its compressed bytes cannot reach
  kZipCrcMismatch = 219,                   ///< a record's CRC-32 differs from the directory's
  kZipRecordNotFound = 220,                ///< no record of the name asked for
  kZipMultiDiskUnsupported = 221,          ///< an archive split over several disks
  kZipLimitExceeded = 222,                 ///< a Limits bound on the archive is exceeded

  // 3xx: the pickle machine.
  kPickleTruncated = 300,          ///< an opcode's argument runs past the end of the pickle
  kPickleUnknownOpcode = 301,      ///< a byte that is no pickle opcode
  kPickleStackUnderflow = 302,     ///< an opcode takes more values than the stack holds
  kPickleMarkNotFound = 303,       ///< an opcode that needs a MARK finds none
  kPickleMemoKeyMissing = 304,     ///< a memo lookup of a key never stored
  kPickleBadArgument = 305,        ///< an opcode's argument is malformed or out of range
  kPickleBadStop = 306,            ///< STOP with an open MARK, or not one value on the stack
  kPickleTrailingBytes = 307,      ///< bytes follow STOP where none may
  kPickleInvalidUtf8 = 308,        ///< a string or global name that is not valid UTF-8
  kPickleTypeMismatch = 309,       ///< an opcode applied to a value of the wrong kind
  kPickleUnsupportedOpcode = 310,  ///< an opcode that needs the writing process (EXT1/2/4, buffers)
  kPickleLimitExceeded = 311,      ///< a Limits bound (or a container's size) is exceeded
  kPickleNoStop = 312,             ///< the pickle ends before its STOP opcode
  kPickleBadProtocol = 313,        ///< a PROTO opcode names a protocol pthload does not know
  kPickleUnhashableKey = 314,      ///< an unhashable value used as a dict key or set element

  // 4xx: the torch layer (storages, rebuild calls, tensors).
  kTorchNoDataPickle = 400,          ///< the archive has no data.pkl: not a torch.save archive
  kTorchBadPersistentId = 401,       ///< a storage's persistent id is not torch's tuple
  kTorchUnknownStorageType = 402,    ///< a storage type pthload does not know
  kTorchStorageRecordMissing = 403,  ///< a storage's record is not in the archive
  kTorchStorageTooSmall = 404,       ///< a storage's record holds fewer bytes than it needs
  kTorchStorageConflict = 405,       ///< one storage described two different ways
  kTorchBadRebuildArguments = 406,   ///< a rebuild call's arguments are not what torch passes
  kTorchTensorOutOfBounds = 407,     ///< a view past its storage's bytes, or a short copy_to buffer
  kTorchUnsupportedRebuild = 408,    ///< a rebuild call or form pthload does not rebuild
  kTorchUnknownDtype = 409,          ///< a dtype pthload does not know
  kTorchUnsupportedFormat = 410,     ///< a file that is no checkpoint pthload reads
  kTorchBadByteOrder = 411,          ///< the byteorder record is neither "little" nor "big"
  kTorchNameNotFound = 412,          ///< no tensor of the name asked for (Checkpoint::tensor)
  kTorchLimitExceeded = 413,         ///< a bound on the tensors is exceeded (the message names it)
  kTorchBadQuantizerParams = 414,    ///< a quantized tensor's quantizer parameters are malformed
  kTorchTensorWithoutData = 415,     ///< bytes asked of a tensor with no storage of its own
  kTorchBadNumpyArray = 416,         ///< a pickled numpy array is malformed
  kTorchBadNestedTensor = 417,       ///< a nested tensor's sizes, strides or offsets are malformed

  // 5xx: placing storages on devices.
  kDeviceBadString = 500,  ///< text that is no device string (Device::parse)
  kDeviceUnsupportedType =
      501,  ///< a device type pthload cannot place on (mps, xla), or a move to meta
  kDeviceCudaUnavailable = 502,    ///< a CUDA device is needed and none can be used
  kDeviceOrdinalOutOfRange = 503,  ///< a CUDA ordinal this machine lacks, or an index below -1
  kDeviceAllocationFailed = 504,   ///< device (or pinned host) memory could not be allocated
  kDeviceCopyFailed = 505,         ///< a copy to or from a device failed
  kDeviceNotOnCpu = 506,           ///< CPU bytes asked of a storage that is not on the CPU
  kDeviceBadOptions = 507,         ///< CudaOptions no load can use, or a bad floating_dtype

  // 6xx: the legacy (pre-1.6, non-zip) torch.save stream.
  kLegacyBadMagic = 600,             ///< the stream does not start with torch's magic number
  kLegacyBadProtocol = 601,          ///< the stream's protocol version is not torch's
  kLegacyBadSysInfo = 602,           ///< the stream's sys_info is not a dict
  kLegacyBadKeyList = 603,           ///< the storage key list is not a list of distinct strings
  kLegacyTruncated = 604,            ///< the stream ends before a pickle or a storage's size
  kLegacyStorageOutOfBounds = 605,   ///< a storage's data runs past the end of the file
  kLegacyKeyMismatch = 606,          ///< the key list and the pickle's storages disagree
  kLegacyViewOutOfRange = 607,       ///< a storage view lies outside its root storage
  kLegacyTarUnsupported = 608,       ///< a tar-format checkpoint of torch 0.1.x
  kLegacyStorageSizeMismatch = 609,  ///< a storage's size differs between pickle and data

  // 7xx: safetensors files (huggingface/safetensors).
  kSafetensorsTruncated = 700,          ///< the file ends within its header
  kSafetensorsHeaderTooLarge = 701,     ///< the declared header size is above the accepted limit
  kSafetensorsBadHeader = 702,          ///< the JSON header is malformed
  kSafetensorsBadMetadata = 703,        ///< __metadata__ is not an object of strings
  kSafetensorsBadTensorInfo = 704,      ///< a tensor's dtype, shape or data_offsets is malformed
  kSafetensorsUnknownDtype = 705,       ///< a dtype string safetensors does not define
  kSafetensorsUnsupportedDtype = 706,   ///< a dtype torch lacks (6-bit floats; F4 of odd last dim)
  kSafetensorsSizeOverflow = 707,       ///< a tensor's size overflows 64 bits
  kSafetensorsSizeMismatch = 708,       ///< data_offsets that differ from the size the shape needs
  kSafetensorsTensorsOverlap = 709,     ///< two tensors' data overlap
  kSafetensorsDataGap = 710,            ///< data bytes that no tensor covers
  kSafetensorsTensorOutOfBounds = 711,  ///< a tensor's data runs past the end of the file

  // 8xx: sets of files (a sharded checkpoint's index and its shards).
  kShardIndexBad = 800,          ///< the shard index (*.index.json) is malformed
  kShardNameUnsafe = 801,        ///< a file name in an index or .metadata that is not a plain name
  kShardNoIndex = 802,           ///< a directory with no index (or more than one) to open
  kShardTensorMissing = 803,     ///< the index puts a tensor in a shard that lacks it
  kShardTensorUnlisted = 804,    ///< a shard holds a tensor the index does not put there
  kShardMixedFormats = 805,      ///< shards of different formats in one checkpoint
  kShardRecordCompressed = 806,  ///< a shard's storage record is compressed

  // 9xx: the embedding interfaces (pthload.h, dlpack.hpp).
  kCapiInvalidArgument = 900,      ///< a C API argument is invalid (a NULL handle or pointer, ...)
  kCapiOutOfMemory = 901,          ///< std::bad_alloc reached the C API
  kCapiInternal = 902,             ///< a non-pthload exception reached the C API: a bug
  kCapiCallbackFailed = 903,       ///< the C map_location callback returned a negative value
  kDlpackUnsupportedTensor = 904,  ///< a tensor with no DLPack form (to_dlpack)
  kCapiUnsupportedOption = 905,    ///< a struct from a newer pthload.h sets an unknown option

  // 10xx: choosing what to load (TensorFilter's select and rename_prefix; load_slice).
  kSelectNotFound = 1000,       ///< TensorFilter::select names no tensor
  kSelectNameCollision = 1001,  ///< two tensors would have one name (after rename_prefix)
  kSliceBadRange = 1002,        ///< load_slice's dim, range or device is not accepted
  kSliceUnsupported = 1003,     ///< a tensor load_slice cannot slice

  // 11xx: torch.distributed.checkpoint directories (.metadata and .distcp items).
  kDcpBadMetadata = 1100,           ///< .metadata is malformed or describes a non-strided tensor
  kDcpBadChunks = 1101,             ///< a tensor's chunks do not tile it (or are too many)
  kDcpTransformUnsupported = 1102,  ///< items written through stream transforms (compression)
  kDcpItemOutOfBounds = 1103,       ///< an item runs past the end of its .distcp file
  kDcpItemMismatch = 1104,          ///< an item does not hold the tensor the metadata describes

  // 12xx: writing checkpoints (save.hpp).
  kSaveWriteFailed = 1200,        ///< writing, syncing or renaming the file failed, or a sink threw
  kSaveBadTensor = 1201,          ///< a tensor outside its storage, or a storage shared two ways
  kSaveNameCollision = 1202,      ///< two tensors of one name, or a name nesting cannot hold
  kSaveUnsupportedTensor = 1203,  ///< a tensor save() cannot write, or not on the CPU
  kSaveBadOptions = 1204,         ///< SaveOptions outside their ranges (alignment, location, name)
};

/// Where an error happened. Each layer fills in what it knows: the zip layer the byte
/// offset, the torch layer the record name and the path.
struct ErrorContext {
  std::string path;                     ///< the file, when known
  std::string record;                   ///< the zip record (e.g. "archive/data.pkl"), when known
  std::optional<std::uint64_t> offset;  ///< byte offset within the record or file
  std::optional<std::uint8_t> opcode;   ///< the pickle opcode being executed
};

/// The base of every exception pthload throws, apart from the std::bad_alloc that functions
/// name where it can escape. `what()` reads like
/// `model.pt: archive/data.pkl+0x1a2: pickle: unknown opcode 0xff`.
class PTHLOAD_API Error : public std::runtime_error {
 public:
  /// An error of `code` with `message`, the text without location, and `context`, where it
  /// happened (what() puts the two together). Throws only std::bad_alloc.
  Error(Errc code, std::string message, ErrorContext context = {});

  /// The stable code of this error.
  [[nodiscard]] Errc code() const noexcept { return code_; }
  /// The message without location. Borrowed: valid while this error lives.
  [[nodiscard]] const std::string& message() const noexcept { return message_; }
  /// Where it happened; higher layers add to it before rethrowing. A reference into this error,
  /// valid while it lives; the next what() shows what was changed through it.
  [[nodiscard]] ErrorContext& context() noexcept { return context_; }
  /// Where it happened, read-only. A reference into this error, valid while it lives.
  [[nodiscard]] const ErrorContext& context() const noexcept { return context_; }
  /// The full text: location, then message (the message alone if memory runs out building it).
  /// Borrowed from this error: valid until the next what() call on it or its destruction. Each
  /// call rebuilds the text, so two threads must not call it on one error at once.
  [[nodiscard]] const char* what() const noexcept override;

 private:
  Errc code_;
  std::string message_;
  ErrorContext context_;
  mutable std::string what_;
};

/// The input is malformed: truncated, inconsistent, or beyond a configured limit. Also thrown
/// for a tensor name the checkpoint does not hold (kTorchNameNotFound) and for a copy_to()
/// destination too small for the tensor (kTorchTensorOutOfBounds).
class PTHLOAD_API FormatError : public Error {
 public:
  /// Takes what Error's constructor takes.
  using Error::Error;
};

/// The input is valid but uses something pthload does not handle, or a call asks for what
/// pthload does not do (a slice along a middle dimension or outside the tensor, a move to meta,
/// a DLPack export of a quantized tensor).
class PTHLOAD_API UnsupportedError : public Error {
 public:
  /// Takes what Error's constructor takes.
  using Error::Error;
};

/// A file operation failed: the operating system refused it (the message then carries errno's
/// text), the file changed or shrank since it was opened, or a path is not a regular file.
class PTHLOAD_API IoError : public Error {
 public:
  /// Takes what Error's constructor takes.
  using Error::Error;
};

/// Memory ran out (kOutOfMemory): the message says what was being done (opening, loading; for
/// a storage being placed, which one and how many bytes). Everything the failed call allocated is
/// freed.
class PTHLOAD_API OutOfMemoryError : public Error {
 public:
  /// Takes what Error's constructor takes.
  using Error::Error;
};

/// Placing data on a device failed (no such device, allocation or copy failure), or the device
/// or CudaOptions asked for cannot be used.
class PTHLOAD_API DeviceError : public Error {
 public:
  /// Takes what Error's constructor takes.
  using Error::Error;
};

/// The enumerator's name without its leading `k` (`Errc::kZipCrcMismatch` → "ZipCrcMismatch"),
/// or "Unknown" for a value outside the enum. The returned view is static: never freed, valid
/// for the life of the program.
[[nodiscard]] PTHLOAD_API std::string_view errc_name(Errc code) noexcept;

}  // namespace pthload
