// LoadOptions::floating_dtype: placed floating storages converted to one dtype, on the device
// they were placed on (a kernel on a GPU, the CPU reference on the CPU), all or nothing.
#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>

#include "checkpoint/access.hpp"
#include "checkpoint/state.hpp"
#include "device/convert.hpp"
#include "device/cpu/kernels.hpp"
#include "device/pipeline.hpp"
#include "pthload/error.hpp"

namespace pthload::device {
namespace {

// The storages a conversion must leave alone: those behind the parts of sparse, nested and
// quantized tensors, which the device layer cannot retype.
void collect_parts(const Tensor& tensor, std::set<const Storage*>& blocked) {
  for (const Tensor& part : tensor.parts()) {
    if (part.has_storage()) blocked.insert(&part.storage());
    collect_parts(part, blocked);
  }
  if (const Quantization* q = tensor.quantization()) {
    if (tensor.has_storage()) blocked.insert(&tensor.storage());
    for (const auto* params : {&q->scales, &q->zero_points}) {
      if (*params && (*params)->has_storage()) blocked.insert(&(*params)->storage());
    }
  }
}

}  // namespace

void check_floating_dtype(Dtype target) {
  if (!cpu::is_convertible(target)) {
    throw UnsupportedError(Errc::kDeviceBadOptions,
                           fmt::format("LoadOptions::floating_dtype: cannot convert to {} (only "
                                       "float32, bfloat16, float16, float8_e4m3fn, float8_e5m2)",
                                       dtype_name(target)));
  }
}

void convert_storages(Checkpoint& checkpoint, Dtype target,
                      const std::shared_ptr<Backend>& backend) {
  check_floating_dtype(target);
  auto& state = internal::Access::state(checkpoint);
  std::set<const Storage*> blocked;
  std::map<const Storage*, std::vector<Tensor*>> viewers;
  for (auto& named : state.tensors) {
    collect_parts(named.tensor, blocked);
    if (!named.tensor.has_storage()) continue;
    viewers[&named.tensor.storage()].push_back(&named.tensor);
  }
  // The dtype a storage's bytes are read as: its own, or — for an untyped storage (uint8:
  // torch 2.x saves float8 tensors over UntypedStorage with _rebuild_tensor_v3) — the one dtype
  // every tensor over it shows, when its bytes are whole elements of that dtype. A storage
  // viewed as two dtypes is left as it is.
  const auto element_dtype = [&](const internal::StorageState& s,
                                 const std::vector<Tensor*>& tensors) -> std::optional<Dtype> {
    if (tensors.empty()) return s.dtype;
    const Dtype shown = tensors.front()->dtype();
    for (const Tensor* tensor : tensors)
      if (tensor->dtype() != shown) return std::nullopt;
    if (shown == s.dtype) return shown;
    const bool untyped = s.dtype == Dtype::kUInt8;
    if (!untyped || s.nbytes % element_size(shown) != 0) return std::nullopt;
    return shown;
  };

  struct Conversion {
    internal::StorageState* storage;
    Dtype source;         // what its bytes hold
    std::uint64_t numel;  // elements of `source`
    std::vector<Tensor*> tensors;
    common::AlignedBuffer host;                            // a CPU storage's new bytes
    std::unique_ptr<internal::DeviceMemory> device_bytes;  // a GPU storage's
  };
  std::vector<Conversion> conversions;
  for (const auto& storage : state.storages) {
    auto& s = internal::Access::state(*storage);
    const auto& tensors = viewers[storage.get()];
    const auto source = element_dtype(s, tensors);
    if (!source || *source == target || !cpu::is_convertible(*source) || s.in_pickle ||
        blocked.count(storage.get()) > 0 || s.device.type == Device::Type::kMeta) {
      continue;
    }
    conversions.push_back({.storage = &s,
                           .source = *source,
                           .numel = s.nbytes / element_size(*source),
                           .tensors = tensors});
  }

  // The CPU ones here, the GPU ones on a thread of their own (the caller's device untouched).
  std::vector<Conversion*> on_gpu;
  for (auto& conversion : conversions) {
    auto& s = *conversion.storage;
    if (s.device.type != Device::Type::kCpu) {
      on_gpu.push_back(&conversion);
      continue;
    }
    conversion.host = common::AlignedBuffer(conversion.numel * element_size(target));
    cpu::convert(s.cpu_bytes, conversion.source, conversion.host.span(), target, conversion.numel);
  }
  if (!on_gpu.empty()) {
    run_on_own_thread([&] {
      std::map<int, StreamHandle> streams;
      try {
        for (auto* conversion : on_gpu) {
          auto& s = *conversion->storage;
          const int device = s.device.index;
          backend->use_device(device);
          auto& stream = streams[device];
          if (stream == nullptr) stream = backend->create_stream(device);
          std::shared_ptr<DeviceBlock> block;
          const std::size_t bytes = conversion->numel * element_size(target);
          if (bytes > 0) {
            try {
              block = std::make_shared<DeviceBlock>(backend, nullptr, device, bytes);
            } catch (const Error& e) {
              throw DeviceError(e.code(), fmt::format("converting storage '{}' to {} on {} ({} "
                                                      "bytes): {}",
                                                      s.key, dtype_name(target),
                                                      s.device.to_string(), bytes, e.message()));
            }
            const auto* source =
                std::get<std::unique_ptr<internal::DeviceMemory>>(s.placement)->pointer();
            backend->convert(source, conversion->source, block->data(), target, conversion->numel,
                             stream);
          }
          conversion->device_bytes = std::make_unique<DeviceSlice>(std::move(block), 0);
        }
        for (const auto& [device, stream] : streams) {
          backend->use_device(device);
          backend->synchronize(stream);
        }
      } catch (...) {
        for (const auto& [device, stream] : streams) {
          try {
            backend->use_device(device);
            backend->synchronize(stream);
          } catch (...) {  // NOLINT(bugprone-empty-catch): the first failure says more
          }
          backend->destroy_stream(stream);
        }
        throw;
      }
      for (const auto& [device, stream] : streams)
        backend->destroy_stream(stream);
    });
  }

  for (auto& conversion : conversions) {
    auto& s = *conversion.storage;
    s.dtype = target;
    s.numel = conversion.numel;
    s.nbytes = conversion.numel * element_size(target);
    if (s.device.type == Device::Type::kCpu) {
      s.placement = std::move(conversion.host);
      s.cpu_bytes = std::get<common::AlignedBuffer>(s.placement).span().first(s.nbytes);
    } else {
      s.placement = std::move(conversion.device_bytes);
    }
    for (Tensor* tensor : conversion.tensors)
      internal::Access::set_dtype(*tensor, target);
  }
}

}  // namespace pthload::device
