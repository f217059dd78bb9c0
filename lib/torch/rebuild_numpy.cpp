// Tensors whose bytes the pickle itself holds: numpy arrays and scalars found in the object tree,
// and torch._utils._rebuild_device_tensor_from_numpy (_rebuild_xla_tensor, _rebuild_mlc_tensor)
// whose data travels as a numpy array (torch/_utils.py; docs/format.md §3, §7).
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "checkpoint/access.hpp"
#include "common/byte_reader.hpp"
#include "common/mapped_file.hpp"
#include "pthload/error.hpp"
#include "torch/numpy_arrays.hpp"
#include "torch/rebuild.hpp"
#include "torch/rebuild_args.hpp"

namespace pthload::torch {
namespace {

using pickle::Kind;
using pickle::Value;

// c10::round_to_nearest_even (c10/util/BFloat16.h), which Tensor.to(torch.bfloat16) uses.
std::uint16_t bfloat16_of(float value) {
  if (std::isnan(value)) return 0x7FC0;
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  const std::uint32_t rounding_bias = ((bits >> 16) & 1) + 0x7FFF;
  return static_cast<std::uint16_t>((bits + rounding_bias) >> 16);
}

// float32 elements (in the array's byte order) → little-endian bfloat16, element by element: the
// strides stay those of the array, as .to() keeps a dense tensor's strides.
std::vector<std::byte> float32_to_bfloat16(std::span<const std::byte> bytes, bool big_endian) {
  std::vector<std::byte> out(bytes.size() / 2);
  for (std::size_t i = 0; i + 4 <= bytes.size(); i += 4) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, bytes.data() + i, 4);
    if (big_endian) bits = common::byteswap(bits);
    float value = 0;
    std::memcpy(&value, &bits, 4);
    const std::uint16_t half = bfloat16_of(value);
    std::memcpy(out.data() + i / 2, &half, 2);
  }
  return out;
}

internal::FileRange pickled_bytes(RebuildContext& context, const NumpyArray& array) {
  const auto bytes = array.bytes();
  // Decoded text: an owned copy already, shared by the arrays that spell their bytes alike.
  if (array.raw_decoded) return {.offset = 0, .size = bytes.size(), .file = array.raw_decoded};
  if (context.checkpoint.file) {
    // Raw bytes inside a stored data.pkl or a legacy stream lie in the mapped file: a view.
    const auto file = context.checkpoint.file->bytes();
    if (bytes.data() >= file.data() && bytes.data() + bytes.size() <= file.data() + file.size()) {
      return {.offset = static_cast<std::uint64_t>(bytes.data() - file.data()),
              .size = bytes.size()};
    }
  }
  // Bytes of an inflated pickle, which will not outlive open(): a copy, one per run of bytes
  // however many arrays share it through the memo. The size check is a backstop: a storage
  // must never claim more bytes than the copy it lies in.
  auto& copy = context.pickled.copies[{bytes.data(), bytes.size()}];
  if (!copy || copy->bytes().size() != bytes.size())
    copy = std::make_shared<const common::MappedFile>(common::MappedFile::from_bytes(bytes));
  return {.offset = 0, .size = bytes.size(), .file = copy};
}

std::shared_ptr<Storage> pickled_storage(RebuildContext& context, Dtype dtype,
                                         internal::FileRange range, bool big_endian,
                                         std::string location, bool follows_map_location) {
  auto& shared = context.pickled.storages[{range.file.get(), range.offset, range.size, dtype,
                                           big_endian, location, follows_map_location}];
  if (shared) return shared;
  internal::StorageState state;
  state.key = fmt::format("<numpy {}>", context.pickled.storage_count++);
  state.location = std::move(location);
  state.dtype = dtype;
  state.nbytes = range.size;
  state.numel = range.size / element_size(dtype);
  state.file_range = std::make_unique<internal::FileRange>(std::move(range));
  state.in_pickle = true;
  state.follows_map_location = follows_map_location;
  if (big_endian) state.swap_unit = internal::swap_unit_for(dtype);
  shared = internal::Access::make_storage(std::move(state));
  (void)internal::Access::add_storage(context.checkpoint, shared);
  return shared;
}

}  // namespace

std::optional<Tensor> numpy_tensor(RebuildContext& context, const Value& value) {
  auto& by_node = context.pickled.by_node;
  if (const auto found = by_node.find(&value); found != by_node.end()) {
    return found->second;
  }
  auto read = read_numpy(value, context.pickled.spelled);
  if (auto* opaque = std::get_if<NumpyOpaque>(&read)) {
    context.opaque_reason = std::move(opaque->reason);
    return std::nullopt;
  }
  const auto& array = std::get<NumpyArray>(read);
  // torch.load leaves numpy arrays on the CPU: map_location does not move them.
  auto storage = pickled_storage(context, array.dtype, pickled_bytes(context, array),
                                 array.big_endian, "cpu", /*follows_map_location=*/false);
  check_in_bounds(value.callable(), *storage, array.dtype, 0, array.sizes, array.strides);
  Tensor tensor = internal::Access::make_tensor(std::move(storage), array.dtype, array.sizes,
                                                array.strides, 0, false);
  by_node.emplace(&value, tensor);
  return tensor;
}

// (data: numpy array, dtype, device, requires_grad): torch.from_numpy(data).to(dtype, device).
// The tensor's storage holds the array's bytes and is tagged with `device`, so map_location
// places it like any storage (a callable is asked too, where torch refuses callables); a device
// pthload cannot place ('xla:0') without one is the usual "pass map_location" error at load().
Tensor rebuild_device_from_numpy(RebuildContext& context, const Value& function,
                                 const Value& args) {
  auto& by_node = context.pickled.by_node;
  if (const auto found = by_node.find(&args); found != by_node.end()) {
    return found->second;
  }
  expect_arity(args, 4, 4, function);
  const Value& data = *args.items()[0];
  if (!is_numpy_value(data)) {
    bad_arguments(function,
                  fmt::format("its data is a {}, not a numpy array",
                              global_name(data.is(Kind::kCall) ? data.callable() : data)));
  }
  auto read = read_numpy(data, context.pickled.spelled);
  if (auto* opaque = std::get_if<NumpyOpaque>(&read)) {
    throw UnsupportedError(
        Errc::kTorchUnsupportedRebuild,
        fmt::format("{}: its data is a {}", global_name(function), opaque->reason));
  }
  const auto& array = std::get<NumpyArray>(read);
  const Dtype dtype = dtype_argument(*args.items()[1], function);
  std::string device = device_argument(*args.items()[2], function);
  const bool requires_grad = bool_argument(*args.items()[3], function, "requires_grad");

  std::shared_ptr<Storage> storage;
  if (dtype == array.dtype) {
    storage = pickled_storage(context, dtype, pickled_bytes(context, array), array.big_endian,
                              std::move(device), true);
  } else if (dtype == Dtype::kBFloat16 && array.dtype == Dtype::kFloat32) {
    // torch saves bfloat16 device tensors as float32 arrays (numpy has no bfloat16). One
    // conversion per bytes and byte order, however many arrays share them; read_numpy made the
    // bytes numel × 4, so a conversion of any other size than numel × 2 is not this array's.
    const auto bytes = array.bytes();
    auto& converted = context.pickled.converted[{{bytes.data(), bytes.size()}, array.big_endian}];
    if (!converted || converted->bytes().size() * 2 != bytes.size()) {
      const auto halves = float32_to_bfloat16(bytes, array.big_endian);
      converted =
          std::make_shared<const common::MappedFile>(common::MappedFile::from_bytes(halves));
    }
    storage = pickled_storage(context, dtype,
                              {.offset = 0, .size = converted->bytes().size(), .file = converted},
                              false, std::move(device), true);
  } else {
    throw UnsupportedError(
        Errc::kTorchUnsupportedRebuild,
        fmt::format("{}: converting a numpy {} array to {} is not supported "
                    "(torch writes the tensor's own dtype, or float32 for "
                    "bfloat16)",
                    global_name(function), dtype_name(array.dtype), dtype_name(dtype)));
  }
  check_in_bounds(function, *storage, dtype, 0, array.sizes, array.strides);
  Tensor tensor = internal::Access::make_tensor(std::move(storage), dtype, array.sizes,
                                                array.strides, 0, requires_grad);
  by_node.emplace(&args, tensor);
  return tensor;
}

}  // namespace pthload::torch
