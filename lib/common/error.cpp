// Formatting of pthload::Error and the names of its codes.
#include "pthload/error.hpp"

#include <fmt/format.h>

namespace pthload {

Error::Error(Errc code, std::string message, ErrorContext context)
    : std::runtime_error(message),
      code_(code),
      message_(std::move(message)),
      context_(std::move(context)) {}

const char* Error::what() const noexcept {
  // Formatted on every call because higher layers add path and record after construction.
  try {
    std::string text;
    if (!context_.path.empty()) text += context_.path + ": ";
    if (!context_.record.empty()) {
      text += context_.record;
      if (context_.offset) text += fmt::format("+{:#x}", *context_.offset);
      text += ": ";
    } else if (context_.offset) {
      text += fmt::format("offset {:#x}: ", *context_.offset);
    }
    text += message_;
    what_ = std::move(text);
    return what_.c_str();
  } catch (...) {
    return message_.c_str();
  }
}

std::string_view errc_name(Errc code) noexcept {
  switch (code) {
#define PTHLOAD_ERRC_NAME(name) \
  case Errc::k##name:           \
    return #name;
    PTHLOAD_ERRC_NAME(Ok)
    PTHLOAD_ERRC_NAME(IoOpenFailed)
    PTHLOAD_ERRC_NAME(IoReadFailed)
    PTHLOAD_ERRC_NAME(IoStatFailed)
    PTHLOAD_ERRC_NAME(IoFileTooLarge)
    PTHLOAD_ERRC_NAME(OutOfMemory)
    PTHLOAD_ERRC_NAME(IoFileChanged)
    PTHLOAD_ERRC_NAME(IoUnexpectedEof)
    PTHLOAD_ERRC_NAME(ZipNotAnArchive)
    PTHLOAD_ERRC_NAME(ZipEndRecordNotFound)
    PTHLOAD_ERRC_NAME(ZipEndRecordTruncated)
    PTHLOAD_ERRC_NAME(Zip64LocatorInvalid)
    PTHLOAD_ERRC_NAME(Zip64EndRecordInvalid)
    PTHLOAD_ERRC_NAME(ZipCentralDirectoryOutOfBounds)
    PTHLOAD_ERRC_NAME(ZipCentralDirectoryEntryInvalid)
    PTHLOAD_ERRC_NAME(Zip64ExtraFieldInvalid)
    PTHLOAD_ERRC_NAME(ZipEntryCountMismatch)
    PTHLOAD_ERRC_NAME(ZipLocalHeaderInvalid)
    PTHLOAD_ERRC_NAME(ZipLocalHeaderMismatch)
    PTHLOAD_ERRC_NAME(ZipRecordOutOfBounds)
    PTHLOAD_ERRC_NAME(ZipRecordsOverlap)
    PTHLOAD_ERRC_NAME(ZipDuplicateName)
    PTHLOAD_ERRC_NAME(ZipUnsupportedMethod)
    PTHLOAD_ERRC_NAME(ZipEncrypted)
    PTHLOAD_ERRC_NAME(ZipInflateFailed)
    PTHLOAD_ERRC_NAME(ZipInflatedSizeMismatch)
    PTHLOAD_ERRC_NAME(ZipImplausibleCompressionRatio)
    PTHLOAD_ERRC_NAME(ZipCrcMismatch)
    PTHLOAD_ERRC_NAME(ZipRecordNotFound)
    PTHLOAD_ERRC_NAME(ZipMultiDiskUnsupported)
    PTHLOAD_ERRC_NAME(ZipLimitExceeded)
    PTHLOAD_ERRC_NAME(PickleTruncated)
    PTHLOAD_ERRC_NAME(PickleUnknownOpcode)
    PTHLOAD_ERRC_NAME(PickleStackUnderflow)
    PTHLOAD_ERRC_NAME(PickleMarkNotFound)
    PTHLOAD_ERRC_NAME(PickleMemoKeyMissing)
    PTHLOAD_ERRC_NAME(PickleBadArgument)
    PTHLOAD_ERRC_NAME(PickleBadStop)
    PTHLOAD_ERRC_NAME(PickleTrailingBytes)
    PTHLOAD_ERRC_NAME(PickleInvalidUtf8)
    PTHLOAD_ERRC_NAME(PickleTypeMismatch)
    PTHLOAD_ERRC_NAME(PickleUnsupportedOpcode)
    PTHLOAD_ERRC_NAME(PickleLimitExceeded)
    PTHLOAD_ERRC_NAME(PickleNoStop)
    PTHLOAD_ERRC_NAME(PickleBadProtocol)
    PTHLOAD_ERRC_NAME(PickleUnhashableKey)
    PTHLOAD_ERRC_NAME(TorchNoDataPickle)
    PTHLOAD_ERRC_NAME(TorchBadPersistentId)
    PTHLOAD_ERRC_NAME(TorchUnknownStorageType)
    PTHLOAD_ERRC_NAME(TorchStorageRecordMissing)
    PTHLOAD_ERRC_NAME(TorchStorageTooSmall)
    PTHLOAD_ERRC_NAME(TorchStorageConflict)
    PTHLOAD_ERRC_NAME(TorchBadRebuildArguments)
    PTHLOAD_ERRC_NAME(TorchTensorOutOfBounds)
    PTHLOAD_ERRC_NAME(TorchUnsupportedRebuild)
    PTHLOAD_ERRC_NAME(TorchUnknownDtype)
    PTHLOAD_ERRC_NAME(TorchUnsupportedFormat)
    PTHLOAD_ERRC_NAME(TorchBadByteOrder)
    PTHLOAD_ERRC_NAME(TorchNameNotFound)
    PTHLOAD_ERRC_NAME(TorchLimitExceeded)
    PTHLOAD_ERRC_NAME(TorchBadQuantizerParams)
    PTHLOAD_ERRC_NAME(TorchTensorWithoutData)
    PTHLOAD_ERRC_NAME(TorchBadNumpyArray)
    PTHLOAD_ERRC_NAME(TorchBadNestedTensor)
    PTHLOAD_ERRC_NAME(DeviceBadString)
    PTHLOAD_ERRC_NAME(DeviceUnsupportedType)
    PTHLOAD_ERRC_NAME(DeviceCudaUnavailable)
    PTHLOAD_ERRC_NAME(DeviceOrdinalOutOfRange)
    PTHLOAD_ERRC_NAME(DeviceAllocationFailed)
    PTHLOAD_ERRC_NAME(DeviceCopyFailed)
    PTHLOAD_ERRC_NAME(DeviceNotOnCpu)
    PTHLOAD_ERRC_NAME(DeviceBadOptions)
    PTHLOAD_ERRC_NAME(LegacyBadMagic)
    PTHLOAD_ERRC_NAME(LegacyBadProtocol)
    PTHLOAD_ERRC_NAME(LegacyBadSysInfo)
    PTHLOAD_ERRC_NAME(LegacyBadKeyList)
    PTHLOAD_ERRC_NAME(LegacyTruncated)
    PTHLOAD_ERRC_NAME(LegacyStorageOutOfBounds)
    PTHLOAD_ERRC_NAME(LegacyKeyMismatch)
    PTHLOAD_ERRC_NAME(LegacyViewOutOfRange)
    PTHLOAD_ERRC_NAME(LegacyTarUnsupported)
    PTHLOAD_ERRC_NAME(LegacyStorageSizeMismatch)
    PTHLOAD_ERRC_NAME(SafetensorsTruncated)
    PTHLOAD_ERRC_NAME(SafetensorsHeaderTooLarge)
    PTHLOAD_ERRC_NAME(SafetensorsBadHeader)
    PTHLOAD_ERRC_NAME(SafetensorsBadMetadata)
    PTHLOAD_ERRC_NAME(SafetensorsBadTensorInfo)
    PTHLOAD_ERRC_NAME(SafetensorsUnknownDtype)
    PTHLOAD_ERRC_NAME(SafetensorsUnsupportedDtype)
    PTHLOAD_ERRC_NAME(SafetensorsSizeOverflow)
    PTHLOAD_ERRC_NAME(SafetensorsSizeMismatch)
    PTHLOAD_ERRC_NAME(SafetensorsTensorsOverlap)
    PTHLOAD_ERRC_NAME(SafetensorsDataGap)
    PTHLOAD_ERRC_NAME(SafetensorsTensorOutOfBounds)
    PTHLOAD_ERRC_NAME(ShardIndexBad)
    PTHLOAD_ERRC_NAME(ShardNameUnsafe)
    PTHLOAD_ERRC_NAME(ShardNoIndex)
    PTHLOAD_ERRC_NAME(ShardTensorMissing)
    PTHLOAD_ERRC_NAME(ShardTensorUnlisted)
    PTHLOAD_ERRC_NAME(ShardMixedFormats)
    PTHLOAD_ERRC_NAME(ShardRecordCompressed)
    PTHLOAD_ERRC_NAME(CapiInvalidArgument)
    PTHLOAD_ERRC_NAME(CapiOutOfMemory)
    PTHLOAD_ERRC_NAME(CapiInternal)
    PTHLOAD_ERRC_NAME(CapiCallbackFailed)
    PTHLOAD_ERRC_NAME(DlpackUnsupportedTensor)
    PTHLOAD_ERRC_NAME(CapiUnsupportedOption)
    PTHLOAD_ERRC_NAME(SelectNotFound)
    PTHLOAD_ERRC_NAME(SelectNameCollision)
    PTHLOAD_ERRC_NAME(SliceBadRange)
    PTHLOAD_ERRC_NAME(SliceUnsupported)
    PTHLOAD_ERRC_NAME(DcpBadMetadata)
    PTHLOAD_ERRC_NAME(DcpBadChunks)
    PTHLOAD_ERRC_NAME(DcpTransformUnsupported)
    PTHLOAD_ERRC_NAME(DcpItemOutOfBounds)
    PTHLOAD_ERRC_NAME(DcpItemMismatch)
    PTHLOAD_ERRC_NAME(SaveWriteFailed)
    PTHLOAD_ERRC_NAME(SaveBadTensor)
    PTHLOAD_ERRC_NAME(SaveNameCollision)
    PTHLOAD_ERRC_NAME(SaveUnsupportedTensor)
    PTHLOAD_ERRC_NAME(SaveBadOptions)
#undef PTHLOAD_ERRC_NAME
  }
  return "Unknown";
}

}  // namespace pthload
