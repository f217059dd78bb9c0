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
/// of files (shards), 9xx the C API and DLPack. Never renumbered once released; the C API
/// returns them unchanged (0 = ok).
enum class Errc : int {
  kOk = 0,

  // 1xx: files, memory, and limits shared by every layer.
  kIoOpenFailed = 100,
  kIoReadFailed = 101,
  kIoStatFailed = 102,
  kIoFileTooLarge = 103,
  kOutOfMemory = 104,      ///< an allocation failed: the message names what and how many bytes
  kIoFileChanged = 105,    ///< the file is not the one opened (size, mtime, inode or device)
  kIoUnexpectedEof = 106,  ///< a read met the end of a file that has shrunk

  // 2xx: the zip container.
  kZipNotAnArchive = 200,
  kZipEndRecordNotFound = 201,
  kZipEndRecordTruncated = 202,
  kZip64LocatorInvalid = 203,
  kZip64EndRecordInvalid = 204,
  kZipCentralDirectoryOutOfBounds = 205,
  kZipCentralDirectoryEntryInvalid = 206,
  kZip64ExtraFieldInvalid = 207,
  kZipEntryCountMismatch = 208,
  kZipLocalHeaderInvalid = 209,
  kZipLocalHeaderMismatch = 210,
  kZipRecordOutOfBounds = 211,
  kZipRecordsOverlap = 212,
  kZipDuplicateName = 213,
  kZipUnsupportedMethod = 214,
  kZipEncrypted = 215,
  kZipInflateFailed = 216,
  kZipInflatedSizeMismatch = 217,
  kZipImplausibleCompressionRatio = 218,
  kZipCrcMismatch = 219,
  kZipRecordNotFound = 220,
  kZipMultiDiskUnsupported = 221,
  kZipLimitExceeded = 222,

  // 3xx: the pickle machine.
  kPickleTruncated = 300,
  kPickleUnknownOpcode = 301,
  kPickleStackUnderflow = 302,
  kPickleMarkNotFound = 303,
  kPickleMemoKeyMissing = 304,
  kPickleBadArgument = 305,
  kPickleBadStop = 306,
  kPickleTrailingBytes = 307,
  kPickleInvalidUtf8 = 308,
  kPickleTypeMismatch = 309,
  kPickleUnsupportedOpcode = 310,
  kPickleLimitExceeded = 311,
  kPickleNoStop = 312,
  kPickleBadProtocol = 313,
  kPickleUnhashableKey = 314,

  // 4xx: the torch layer (storages, rebuild calls, tensors).
  kTorchNoDataPickle = 400,
  kTorchBadPersistentId = 401,
  kTorchUnknownStorageType = 402,
  kTorchStorageRecordMissing = 403,
  kTorchStorageTooSmall = 404,
  kTorchStorageConflict = 405,
  kTorchBadRebuildArguments = 406,
  kTorchTensorOutOfBounds = 407,
  kTorchUnsupportedRebuild = 408,
  kTorchUnknownDtype = 409,
  kTorchUnsupportedFormat = 410,
  kTorchBadByteOrder = 411,
  kTorchNameNotFound = 412,
  kTorchLimitExceeded = 413,
  kTorchBadQuantizerParams = 414,
  kTorchTensorWithoutData = 415,
  kTorchBadNumpyArray = 416,
  kTorchBadNestedTensor = 417,

  // 5xx: placing storages on devices.
  kDeviceBadString = 500,
  kDeviceUnsupportedType = 501,
  kDeviceCudaUnavailable = 502,
  kDeviceOrdinalOutOfRange = 503,
  kDeviceAllocationFailed = 504,
  kDeviceCopyFailed = 505,
  kDeviceNotOnCpu = 506,
  kDeviceBadOptions = 507,

  // 6xx: the legacy (pre-1.6, non-zip) torch.save stream.
  kLegacyBadMagic = 600,
  kLegacyBadProtocol = 601,
  kLegacyBadSysInfo = 602,
  kLegacyBadKeyList = 603,
  kLegacyTruncated = 604,
  kLegacyStorageOutOfBounds = 605,
  kLegacyKeyMismatch = 606,
  kLegacyViewOutOfRange = 607,
  kLegacyTarUnsupported = 608,
  kLegacyStorageSizeMismatch = 609,

  // 7xx: safetensors files (huggingface/safetensors).
  kSafetensorsTruncated = 700,
  kSafetensorsHeaderTooLarge = 701,
  kSafetensorsBadHeader = 702,
  kSafetensorsBadMetadata = 703,
  kSafetensorsBadTensorInfo = 704,
  kSafetensorsUnknownDtype = 705,
  kSafetensorsUnsupportedDtype = 706,
  kSafetensorsSizeOverflow = 707,
  kSafetensorsSizeMismatch = 708,
  kSafetensorsTensorsOverlap = 709,
  kSafetensorsDataGap = 710,
  kSafetensorsTensorOutOfBounds = 711,

  // 8xx: sets of files (a sharded checkpoint's index and its shards).
  kShardIndexBad = 800,
  kShardNameUnsafe = 801,
  kShardNoIndex = 802,
  kShardTensorMissing = 803,
  kShardTensorUnlisted = 804,
  kShardMixedFormats = 805,
  kShardRecordCompressed = 806,

  // 9xx: the embedding interfaces (pthload.h, dlpack.hpp).
  kCapiInvalidArgument = 900,
  kCapiOutOfMemory = 901,
  kCapiInternal = 902,
  kCapiCallbackFailed = 903,
  kDlpackUnsupportedTensor = 904,
  kCapiUnsupportedOption = 905,

  // 10xx: choosing what to load (LoadOptions' select, rename_prefix, only/exclude; slices).
  kSelectNotFound = 1000,
  kSelectNameCollision = 1001,
  kSliceBadRange = 1002,
  kSliceUnsupported = 1003,

  // 11xx: torch.distributed.checkpoint directories (.metadata and .distcp items).
  kDcpBadMetadata = 1100,
  kDcpBadChunks = 1101,
  kDcpTransformUnsupported = 1102,
  kDcpItemOutOfBounds = 1103,
  kDcpItemMismatch = 1104,
};

/// Where an error happened. Each layer fills in what it knows: the zip layer the byte
/// offset, the torch layer the record name and the path.
struct ErrorContext {
  std::string path;                     ///< the file, when known
  std::string record;                   ///< the zip record (e.g. "archive/data.pkl"), when known
  std::optional<std::uint64_t> offset;  ///< byte offset within the record or file
  std::optional<std::uint8_t> opcode;   ///< the pickle opcode being executed
};

/// The base of every exception pthload throws. `what()` reads like
/// `model.pt: archive/data.pkl+0x1a2: pickle: unknown opcode 0xff`.
class PTHLOAD_API Error : public std::runtime_error {
 public:
  Error(Errc code, std::string message, ErrorContext context = {});

  /// The stable code of this error.
  [[nodiscard]] Errc code() const noexcept { return code_; }
  /// The message without location.
  [[nodiscard]] const std::string& message() const noexcept { return message_; }
  /// Where it happened; higher layers add to it before rethrowing.
  [[nodiscard]] ErrorContext& context() noexcept { return context_; }
  [[nodiscard]] const ErrorContext& context() const noexcept { return context_; }
  /// The full text: location, then message. Valid until the next call or a context change.
  [[nodiscard]] const char* what() const noexcept override;

 private:
  Errc code_;
  std::string message_;
  ErrorContext context_;
  mutable std::string what_;
};

/// The input is malformed: truncated, inconsistent, or beyond a configured limit.
class PTHLOAD_API FormatError : public Error {
 public:
  using Error::Error;
};

/// The input is valid but uses something pthload does not handle.
class PTHLOAD_API UnsupportedError : public Error {
 public:
  using Error::Error;
};

/// The operating system refused a file operation; the message carries errno's text.
class PTHLOAD_API IoError : public Error {
 public:
  using Error::Error;
};

/// Memory ran out (kOutOfMemory): the message names what was being read or placed (storage,
/// record) and how many bytes were asked for. Everything the failed call allocated is freed.
class PTHLOAD_API OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

/// Placing data on a device failed (no such device, allocation or copy failure).
class PTHLOAD_API DeviceError : public Error {
 public:
  using Error::Error;
};

/// The enumerator's name without its leading `k` (`Errc::kZipCrcMismatch` → "ZipCrcMismatch"),
/// or "Unknown" for a value outside the enum. The returned view is static.
[[nodiscard]] PTHLOAD_API std::string_view errc_name(Errc code) noexcept;

}  // namespace pthload
