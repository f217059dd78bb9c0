// TensorBuilder: persistent ids → storages, rebuild calls → tensors (torch/_utils.py).
#include "torch/tensor_builder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "common/checked.hpp"
#include "pthload/error.hpp"
#include "torch/access.hpp"
#include "torch/globals.hpp"
#include "torch/rebuild_args.hpp"
#include "torch/storage_types.hpp"

namespace pthload::torch {
namespace {

using pickle::Kind;
using pickle::Value;

std::string text_of(const Value& value) {
  if (value.is(Kind::kString) || value.is(Kind::kPython2String)) {
    return std::string(value.as_string());
  }
  if (value.is(Kind::kInt)) return std::to_string(value.as_int());  // pre-1.6 integer keys
  throw FormatError(
      Errc::kTorchBadPersistentId,
      fmt::format("persistent id: expected a string, got a {}", pickle::kind_name(value.kind())));
}

}  // namespace

TensorBuilder::TensorBuilder(internal::CheckpointState& checkpoint, std::string data_prefix,
                             const Limits& limits)
    : checkpoint_(checkpoint), limits_(limits), data_prefix_(std::move(data_prefix)) {
  // A checkpoint has about one storage per record and a few tensors per storage.
  const std::size_t records = checkpoint_.archive ? checkpoint_.archive->entries().size() : 0;
  storage_by_record_.resize(records);
  checkpoint_.storages.reserve(records);
}

TensorBuilder::TensorBuilder(internal::CheckpointState& checkpoint, const LegacyStorages& legacy,
                             const Limits& limits)
    : checkpoint_(checkpoint), limits_(limits), legacy_(&legacy) {}

std::optional<Tensor> TensorBuilder::tensor_of(const Value& value) {
  if (!value.is(Kind::kCall)) return std::nullopt;
  if (is_numpy_value(value)) return numpy_tensor(value);
  return rebuild(value.callable(), value.args());
}

std::optional<Tensor> TensorBuilder::rebuild(const Value& function, const Value& args) {
  switch (classify_global(function)) {
    case KnownGlobal::kRebuildTensor:
    case KnownGlobal::kRebuildTensorV2:
    case KnownGlobal::kRebuildTensorV3:
      return rebuild_dense(function, args);
    case KnownGlobal::kRebuildParameter:
    case KnownGlobal::kRebuildParameterState:
    case KnownGlobal::kParameter: {
      // Parameter(data, requires_grad, ...): the tensor is data's, with the parameter's flag.
      const Value& data = argument(args, 0, function);
      auto tensor = tensor_of(data);
      if (!tensor) bad_arguments(function, "its data is not a tensor");
      // Sparse, meta and quantized parameters keep what their rebuild made.
      if (!tensor->has_storage() || tensor->quantization() != nullptr) return tensor;
      const bool requires_grad = args.items().size() > 1
                                     ? bool_argument(*args.items()[1], function, "requires_grad")
                                     : true;
      return Tensor(tensor->shared_storage(), tensor->dtype(),
                    {tensor->sizes().begin(), tensor->sizes().end()},
                    {tensor->strides().begin(), tensor->strides().end()}, tensor->storage_offset(),
                    requires_grad);
    }
    case KnownGlobal::kRebuildFromType: {
      // _rebuild_from_type_v2(func, new_type, args, state): the tensor is func(*args); the
      // subclass and its attributes are metadata torch applies afterwards.
      const Value& inner_callable = argument(args, 0, function);
      const Value& inner_args = argument(args, 2, function);
      if (!inner_args.is(Kind::kTuple)) bad_arguments(function, "its args are not a tuple");
      // A jagged nested tensor (NJT) is a Python subclass over its values and offsets tensors:
      // no tensor of its own; the naming walk lists those parts (`<name>.values`...).
      if (classify_global(inner_callable) == KnownGlobal::kRebuildJagged) return std::nullopt;
      auto tensor = rebuild(inner_callable, inner_args);
      if (!tensor)
        bad_arguments(function, fmt::format("{} made no tensor", global_name(inner_callable)));
      return tensor;
    }
    case KnownGlobal::kRebuildQTensor:
      return rebuild_quantized(function, args);
    case KnownGlobal::kRebuildSparse:
    case KnownGlobal::kRebuildSparseCsr:
      return rebuild_sparse(function, args);
    case KnownGlobal::kRebuildMeta:
      return rebuild_meta(function, args);
    case KnownGlobal::kRebuildDeviceFromCpu:
      return rebuild_device_from_cpu(function, args);
    case KnownGlobal::kRebuildDeviceFromNumpy:
      return rebuild_device_from_numpy(function, args);
    case KnownGlobal::kRebuildWrapperSubclass:
      return rebuild_wrapper_subclass(function, args);
    case KnownGlobal::kRebuildNested:
      return rebuild_nested(function, args);
    case KnownGlobal::kOtherRebuild:
      // Whatever torch adds next: a rebuild that is not understood must not silently drop a
      // tensor.
      throw UnsupportedError(Errc::kTorchUnsupportedRebuild,
                             fmt::format("{} is not supported", global_name(function)));
    default:
      return std::nullopt;
  }
}

Tensor TensorBuilder::rebuild_dense(const Value& function, const Value& args) {
  const auto kind = classify_global(function);
  auto [storage, view_byte_offset, view_nbytes] = storage_of(argument(args, 0, function));
  std::int64_t offset = int_argument(argument(args, 1, function), function, "storage_offset");
  if (offset < 0) bad_arguments(function, "storage_offset is negative");
  auto& sizes = sizes_scratch_;
  auto& strides = strides_scratch_;
  int_tuple(argument(args, 2, function), function, "size", sizes);
  int_tuple(argument(args, 3, function), function, "stride", strides);
  if (sizes.size() != strides.size()) {
    bad_arguments(function, fmt::format("size has {} dimensions but stride has {}", sizes.size(),
                                        strides.size()));
  }
  bool requires_grad = false;
  if (kind != KnownGlobal::kRebuildTensor && args.items().size() > 4) {
    requires_grad = bool_argument(*args.items()[4], function, "requires_grad");
  }
  Dtype dtype = storage->dtype();
  if (kind == KnownGlobal::kRebuildTensorV3) {
    // v3 stores bytes (UntypedStorage); the dtype is the explicit 7th argument.
    dtype = dtype_argument(argument(args, 6, function), function);
  }

  // torch requires numel * element size to fit in 64 bits; without this check, sizes whose
  // product wraps (2^62 x 2^62 x 4 with zero strides) pass the bounds check as a small tensor.
  check_numel(function, dtype, sizes);
  // A legacy storage view bounds the tensor, whose offsets count from the view's start.
  check_in_bounds(function, *storage, dtype, offset, sizes, strides, view_nbytes);
  if (view_byte_offset != 0) {
    // The tensor shares the root storage, as torch's view storage shares its bytes.
    if (view_byte_offset % element_size(dtype) != 0) {
      bad_arguments(function, "a storage view's offset is not a whole number of elements");
    }
    const auto shifted = common::checked_add(static_cast<std::uint64_t>(offset),
                                             view_byte_offset / element_size(dtype));
    if (!shifted || *shifted > static_cast<std::uint64_t>(INT64_MAX)) {
      bad_arguments(function, "storage_offset overflows in its storage view");
    }
    offset = static_cast<std::int64_t>(*shifted);
  }
  return Tensor(std::move(storage), dtype, sizes, strides, offset, requires_grad);
}

StorageRef TensorBuilder::storage_of(const Value& persistent) {
  if (is_load_from_bytes(persistent)) {
    auto& nested = nested_storages_[load_from_bytes_key(persistent)];
    // The caller's limits: a nested stream is no licence to exceed them. Its values are counted
    // per pickle, as every pickle of a stream is; its bytes are part of the outer pickle's, so
    // the streams together cannot make more values than the file has bytes.
    if (!nested.storage) nested = load_from_bytes(checkpoint_, persistent, limits_);
    return nested;
  }
  if (!persistent.is(Kind::kPersistent)) {
    throw FormatError(Errc::kTorchBadRebuildArguments,
                      fmt::format("expected a storage (a persistent id), got a {}",
                                  pickle::kind_name(persistent.kind())));
  }
  if (legacy_ != nullptr) return legacy_->storage_of(persistent.persistent_id());
  // ('storage', storage_type, key, location, numel) — torch/serialization.py _save.
  const Value& id = persistent.persistent_id();
  refuse_text_persistent_id(id);
  const auto fields = id.items();
  if (!id.is(Kind::kTuple) || fields.size() < 5 || !fields[0]->is(Kind::kString) ||
      fields[0]->as_string() != "storage") {
    throw FormatError(Errc::kTorchBadPersistentId,
                      "persistent id is not a ('storage', type, key, location, numel) tuple");
  }
  const Value& storage_type = *fields[1];
  std::string key = text_of(*fields[2]);
  if (!fields[4]->is(Kind::kInt) || fields[4]->as_int() < 0) {
    throw FormatError(Errc::kTorchBadPersistentId,
                      fmt::format("storage '{}': numel is not a non-negative int", key));
  }
  const auto numel = static_cast<std::uint64_t>(fields[4]->as_int());

  // Reused, so naming the record costs no allocation per storage.
  std::string& record_name = record_name_scratch_;
  record_name.assign(data_prefix_).append(key);
  const zip::Entry* record = checkpoint_.archive->find(record_name);
  if (record == nullptr) {
    throw FormatError(Errc::kTorchStorageRecordMissing,
                      fmt::format("storage '{}': no record {}", key, record_name));
  }
  auto& cached =
      storage_by_record_[static_cast<std::size_t>(record - checkpoint_.archive->entries().data())];
  // torch caches storages by key: the first persistent id for a key wins.
  if (cached) return {.storage = cached};
  std::optional<Dtype> dtype;
  if (storage_type.is(Kind::kGlobal)) dtype = storage_type_dtype(storage_type.name());
  if (!dtype) {
    throw FormatError(
        Errc::kTorchUnknownStorageType,
        fmt::format("storage '{}': unknown storage type {}", key, global_name(storage_type)));
  }
  const auto nbytes = common::checked_mul(numel, element_size(*dtype));
  if (!nbytes) {
    throw FormatError(Errc::kTorchStorageTooSmall,
                      fmt::format("storage '{}': {} elements overflow", key, numel));
  }
  if (record->uncompressed_size < *nbytes) {
    throw FormatError(Errc::kTorchStorageTooSmall,
                      fmt::format("storage '{}': {} elements of {} need {} bytes, record {} "
                                  "holds {}",
                                  key, numel, dtype_name(*dtype), *nbytes, record_name,
                                  record->uncompressed_size));
  }
  auto state = std::make_unique<internal::StorageState>();
  state->key = std::move(key);
  state->location = text_of(*fields[3]);
  state->dtype = *dtype;
  state->numel = numel;
  state->nbytes = *nbytes;
  state->record = record;
  if (checkpoint_.big_endian) state->swap_unit = internal::swap_unit_for(*dtype);
  cached = internal::Access::make_storage(std::move(state));
  checkpoint_.storages.push_back(cached);
  return {.storage = cached};
}

}  // namespace pthload::torch
