// DLPack export (dlpack.h: DLManagedTensor): a hold on the tensor's bytes (Tensor::hold_bytes)
// rides in manager_ctx, so they live until the consumer calls the deleter, whatever the
// Checkpoint does meanwhile.
#include "pthload/dlpack.hpp"

#include <memory>
#include <string>
#include <vector>

#include "pthload/error.hpp"

namespace pthload {
namespace {

struct DlpackHolder {
  std::shared_ptr<const void> bytes;  // what the deleter releases
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  DLManagedTensor managed{};
};

void delete_holder(DLManagedTensor* self) {
  delete static_cast<DlpackHolder*>(self->manager_ctx);
}

[[noreturn]] void refuse(const Tensor& tensor, const std::string& why) {
  throw UnsupportedError(
      Errc::kDlpackUnsupportedTensor,
      "a " + std::string(dtype_name(tensor.dtype())) + " tensor has no DLPack form: " + why);
}

constexpr DLDataType type(DLDataTypeCode code, std::uint8_t bits) {
  return {static_cast<std::uint8_t>(code), bits, 1};
}

}  // namespace

std::optional<DLDataType> dlpack_dtype(Dtype dtype) noexcept {
  switch (dtype) {
    case Dtype::kFloat64:
      return type(kDLFloat, 64);
    case Dtype::kFloat32:
      return type(kDLFloat, 32);
    case Dtype::kFloat16:
      return type(kDLFloat, 16);
    case Dtype::kBFloat16:
      return type(kDLBfloat, 16);
    case Dtype::kComplex32:
      return type(kDLComplex, 32);
    case Dtype::kComplex64:
      return type(kDLComplex, 64);
    case Dtype::kComplex128:
      return type(kDLComplex, 128);
    case Dtype::kBool:
#if DLPACK_VERSION >= 80
      return type(kDLBool, 8);
#else
      return type(kDLUInt, 8);
#endif
    case Dtype::kInt8:
      return type(kDLInt, 8);
    case Dtype::kInt16:
      return type(kDLInt, 16);
    case Dtype::kInt32:
      return type(kDLInt, 32);
    case Dtype::kInt64:
      return type(kDLInt, 64);
    case Dtype::kUInt8:
      return type(kDLUInt, 8);
    case Dtype::kUInt16:
      return type(kDLUInt, 16);
    case Dtype::kUInt32:
      return type(kDLUInt, 32);
    case Dtype::kUInt64:
      return type(kDLUInt, 64);
    default:
      return std::nullopt;
  }
}

DLManagedTensor* to_dlpack(const Tensor& tensor) {
  const auto dtype = dlpack_dtype(tensor.dtype());
  if (!dtype) refuse(tensor, "DLPack has no such type");
  if (tensor.layout() != Layout::kStrided) {
    refuse(tensor, "its layout is " + std::string(layout_name(tensor.layout())) +
                       "; export its parts instead");
  }
  if (!tensor.has_storage()) refuse(tensor, "it has no storage (meta, or a wrapper subclass)");
  const Storage& storage = tensor.storage();
  if (!storage.is_placed())
    refuse(tensor, "its storage is not placed: load() it (open() does not)");
  const Device device = storage.device();
  DLDevice dl_device{};
  const std::byte* data = nullptr;
  switch (device.type) {
    case Device::Type::kCpu:
      dl_device = {kDLCPU, 0};
      data = tensor.data();
      break;
    case Device::Type::kCuda:
      dl_device = {kDLCUDA, device.index < 0 ? 0 : device.index};
      data = static_cast<const std::byte*>(storage.device_pointer());
      if (data != nullptr) {
        data += static_cast<std::size_t>(tensor.storage_offset()) * element_size(tensor.dtype());
      }
      break;
    case Device::Type::kMeta:
      refuse(tensor, "it is on the meta device, which has no bytes");
  }

  auto holder = std::make_unique<DlpackHolder>(DlpackHolder{
      .bytes = tensor.hold_bytes(),
      .shape = {tensor.sizes().begin(), tensor.sizes().end()},
      .strides = {tensor.strides().begin(), tensor.strides().end()},
  });
  DLTensor& dl = holder->managed.dl_tensor;
  // DLPack has no const: consumers are told (to_dlpack's contract) that the bytes are read-only.
  dl.data = const_cast<std::byte*>(data);
  dl.device = dl_device;
  dl.ndim = static_cast<std::int32_t>(tensor.dim());
  dl.dtype = *dtype;
  dl.shape = holder->shape.data();
  dl.strides = holder->strides.data();
  dl.byte_offset = 0;
  holder->managed.manager_ctx = holder.get();
  holder->managed.deleter = delete_holder;
  return &holder.release()->managed;
}

}  // namespace pthload
