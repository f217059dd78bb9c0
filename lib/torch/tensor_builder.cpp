// TensorBuilder: persistent ids → storages, rebuild calls → tensors (torch/_utils.py).
#include "torch/tensor_builder.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <limits>

#include "common/checked.hpp"
#include "pthload/error.hpp"
#include "torch/globals.hpp"
#include "torch/storage_types.hpp"

namespace pthload::torch {
namespace {

using pickle::Kind;
using pickle::Value;

// More dimensions than this is no tensor torch can make (at::Tensor caps at 64 in practice);
// the bound keeps a hostile size tuple from costing more than it should.
constexpr std::size_t kMaxDims = 1024;

std::string global_name(const Value& callable);

// `function` is the rebuild function's global: its name is formatted only when there is an error.
[[noreturn]] void bad_arguments(const Value& function, std::string_view what) {
  throw FormatError(Errc::kTorchBadRebuildArguments,
                    fmt::format("{}: {}", global_name(function), what));
}

std::string global_name(const Value& callable) {
  if (!callable.is(Kind::kGlobal)) return std::string(pickle::kind_name(callable.kind()));
  return fmt::format("{}.{}", callable.module(), callable.name());
}

const Value& argument(const Value& args, std::size_t index, const Value& function) {
  const auto items = args.items();
  if (index >= items.size()) {
    bad_arguments(function,
                  fmt::format("expected at least {} arguments, got {}", index + 1, items.size()));
  }
  return *items[index];
}

std::int64_t int_argument(const Value& value, const Value& function, std::string_view what) {
  if (value.is(Kind::kInt)) return value.as_int();
  if (value.is(Kind::kBool)) return value.as_bool() ? 1 : 0;
  bad_arguments(function,
                fmt::format("{} is a {}, not an int", what, pickle::kind_name(value.kind())));
}

bool bool_argument(const Value& value, const Value& function, std::string_view what) {
  if (value.is(Kind::kBool)) return value.as_bool();
  if (value.is(Kind::kInt)) return value.as_int() != 0;
  bad_arguments(function,
                fmt::format("{} is a {}, not a bool", what, pickle::kind_name(value.kind())));
}

// Sizes and strides are plain tuples in torch.save files, torch.Size(tuple) in some others.
// Written into `result` (reused scratch: no allocation per tensor).
void int_tuple(const Value& value, const Value& function, std::string_view what,
               std::vector<std::int64_t>& result) {
  const Value* tuple = &value;
  if (value.is(Kind::kCall) && classify_global(value.callable()) == KnownGlobal::kSize &&
      !value.args().items().empty()) {
    tuple = value.args().items()[0];
  }
  if (!tuple->is(Kind::kTuple) && !tuple->is(Kind::kList)) {
    bad_arguments(function, fmt::format("{} is a {}, not a tuple of ints", what,
                                        pickle::kind_name(tuple->kind())));
  }
  const auto items = tuple->items();
  if (items.size() > kMaxDims) {
    bad_arguments(function,
                  fmt::format("{} has {} dimensions (at most {})", what, items.size(), kMaxDims));
  }
  result.clear();
  for (const Value* item : items) {
    const std::int64_t n = int_argument(*item, function, what);
    if (n < 0) bad_arguments(function, fmt::format("{} holds a negative value {}", what, n));
    result.push_back(n);
  }
}

std::string text_of(const Value& value) {
  if (value.is(Kind::kString) || value.is(Kind::kPython2String)) {
    return std::string(value.as_string());
  }
  if (value.is(Kind::kInt)) return std::to_string(value.as_int());  // pre-1.6 integer keys
  throw FormatError(
      Errc::kTorchBadPersistentId,
      fmt::format("persistent id: expected a string, got a {}", pickle::kind_name(value.kind())));
}

// offset + Σ (size_i - 1) · stride_i, the last element's index; nullopt on overflow.
std::optional<std::uint64_t> last_element(std::int64_t offset, std::span<const std::int64_t> sizes,
                                          std::span<const std::int64_t> strides) {
  std::uint64_t last = static_cast<std::uint64_t>(offset);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const auto step = common::checked_mul(static_cast<std::uint64_t>(sizes[i] - 1),
                                          static_cast<std::uint64_t>(strides[i]));
    if (!step) return std::nullopt;
    const auto sum = common::checked_add(last, *step);
    if (!sum) return std::nullopt;
    last = *sum;
  }
  return last;
}

}  // namespace

TensorBuilder::TensorBuilder(detail::CheckpointState& checkpoint, std::string data_prefix)
    : checkpoint_(checkpoint), data_prefix_(std::move(data_prefix)) {
  // A checkpoint has about one storage per record and a few tensors per storage.
  const std::size_t records = checkpoint_.archive ? checkpoint_.archive->entries().size() : 0;
  storage_by_record_.resize(records);
  checkpoint_.storages.reserve(records);
}

TensorBuilder::TensorBuilder(detail::CheckpointState& checkpoint, const LegacyStorages& legacy)
    : checkpoint_(checkpoint), legacy_(&legacy) {}

std::optional<Tensor> TensorBuilder::tensor_of(const Value& value) {
  if (!value.is(Kind::kCall)) return std::nullopt;
  return rebuild(value.callable(), value.args());
}

std::optional<Tensor> TensorBuilder::rebuild(const Value& callable, const Value& args) {
  const Value& function = callable;
  switch (classify_global(callable)) {
    case KnownGlobal::kRebuildTensor:
    case KnownGlobal::kRebuildTensorV2:
    case KnownGlobal::kRebuildTensorV3:
      return rebuild_dense(callable, args);
    case KnownGlobal::kRebuildParameter:
    case KnownGlobal::kRebuildParameterState:
    case KnownGlobal::kParameter: {
      // Parameter(data, requires_grad, ...): the tensor is data's, with the parameter's flag.
      const Value& data = argument(args, 0, function);
      auto tensor = tensor_of(data);
      if (!tensor) bad_arguments(function, "its data is not a tensor");
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
      auto tensor = rebuild(inner_callable, inner_args);
      if (!tensor)
        bad_arguments(function, fmt::format("{} made no tensor", global_name(inner_callable)));
      return tensor;
    }
    case KnownGlobal::kOtherRebuild:
      throw UnsupportedError(Errc::kTorchUnsupportedRebuild,
                             fmt::format("{} is not supported yet (quantized, sparse, nested and "
                                         "device-specific tensors come in a later release)",
                                         global_name(function)));
    default:
      return std::nullopt;
  }
}

Tensor TensorBuilder::rebuild_dense(const Value& callable, const Value& args) {
  const Value& function = callable;
  const auto kind = classify_global(callable);
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
    const Value& dtype_value = argument(args, 6, function);
    const auto explicit_dtype = dtype_of_global(dtype_value);
    if (!explicit_dtype) {
      throw FormatError(
          Errc::kTorchUnknownDtype,
          fmt::format("{}: unknown dtype {}", global_name(function), global_name(dtype_value)));
    }
    dtype = *explicit_dtype;
  }

  const bool empty = std::any_of(sizes.begin(), sizes.end(), [](std::int64_t s) { return s == 0; });
  if (!empty) {
    // Bounds against the storage: a hostile file must not make a tensor read past its bytes.
    const auto last = last_element(offset, sizes, strides);
    const auto end_byte = last ? common::checked_mul(*last + 1, element_size(dtype)) : std::nullopt;
    // A legacy storage view bounds the tensor, whose offsets count from the view's start.
    const std::uint64_t limit = view_nbytes ? *view_nbytes : storage->nbytes();
    if (!end_byte || *end_byte > limit) {
      throw FormatError(
          Errc::kTorchTensorOutOfBounds,
          fmt::format("{}: a {} tensor of size ({}) stride ({}) at offset {} reads "
                      "past the end of storage '{}' ({} bytes)",
                      global_name(function), dtype_name(dtype), fmt::join(sizes, ", "),
                      fmt::join(strides, ", "), offset, storage->key(), limit));
    }
  }
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
    if (!nested.storage) nested = load_from_bytes(checkpoint_, persistent, Limits{});
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
  auto state = std::make_unique<detail::StorageState>();
  state->key = std::move(key);
  state->location = text_of(*fields[3]);
  state->dtype = *dtype;
  state->numel = numel;
  state->nbytes = *nbytes;
  state->record = record;
  if (checkpoint_.big_endian) {
    // Complex numbers swap each half (torch/_utils.py _byteswap via the real dtype).
    const std::size_t size = element_size(*dtype);
    const bool is_complex =
        *dtype == Dtype::kComplex32 || *dtype == Dtype::kComplex64 || *dtype == Dtype::kComplex128;
    state->swap_unit = is_complex ? size / 2 : size;
  }
  cached = std::make_shared<Storage>(std::move(state));
  checkpoint_.storages.push_back(cached);
  return {.storage = cached};
}

}  // namespace pthload::torch
