// The dispatch of rebuild calls to their families (rebuild.hpp): which torch function a call
// names decides which file rebuilds it (torch/_utils.py; docs/format.md §3).
#include "torch/tensor_builder.hpp"

#include <fmt/format.h>

#include "pthload/error.hpp"
#include "torch/globals.hpp"
#include "torch/numpy_arrays.hpp"
#include "torch/rebuild.hpp"
#include "torch/rebuild_args.hpp"

namespace pthload::torch {

using pickle::Kind;
using pickle::Value;

namespace {

// The tensor `function(*args)` rebuilds, `kind` being classify_global(function): looked up once
// per call, where the numpy check, the dispatch and the dense rebuild each looked it up.
std::optional<Tensor> rebuild_kind(RebuildContext& context, KnownGlobal kind, const Value& function,
                                   const Value& args) {
  if (context.rebuild_depth >= kMaxRebuildNesting) {
    throw FormatError(Errc::kTorchLimitExceeded,
                      fmt::format("{}: rebuild calls nest deeper than {} (a tensor rebuilt "
                                  "inside another's arguments): torch nests a few",
                                  global_name(function), kMaxRebuildNesting));
  }
  ++context.rebuild_depth;
  const struct Leave {
    std::size_t& depth;
    ~Leave() { --depth; }
  } leave{context.rebuild_depth};
  switch (kind) {
    case KnownGlobal::kRebuildTensor:
    case KnownGlobal::kRebuildTensorV2:
    case KnownGlobal::kRebuildTensorV3:
      return rebuild_dense(context, kind, function, args);
    case KnownGlobal::kRebuildParameter:
    case KnownGlobal::kRebuildParameterState:
    case KnownGlobal::kParameter:
      return rebuild_parameter(context, function, args);
    case KnownGlobal::kRebuildFromType:
      return rebuild_from_type(context, function, args);
    case KnownGlobal::kRebuildQTensor:
      return rebuild_quantized(context, function, args);
    case KnownGlobal::kRebuildSparse:
    case KnownGlobal::kRebuildSparseCsr:
      return rebuild_sparse(context, function, args);
    case KnownGlobal::kRebuildMeta:
      return rebuild_meta(function, args);
    case KnownGlobal::kRebuildDeviceFromCpu:
      return rebuild_device_from_cpu(context, function, args);
    case KnownGlobal::kRebuildDeviceFromNumpy:
      return rebuild_device_from_numpy(context, function, args);
    case KnownGlobal::kRebuildWrapperSubclass:
      return rebuild_wrapper_subclass(function, args);
    case KnownGlobal::kRebuildNested:
      return rebuild_nested(context, function, args);
    case KnownGlobal::kOtherRebuild:
      // Whatever torch adds next: a rebuild that is not understood must not silently drop a
      // tensor.
      throw UnsupportedError(Errc::kTorchUnsupportedRebuild,
                             fmt::format("{} is not supported", global_name(function)));
    default:
      return std::nullopt;
  }
}

}  // namespace

std::optional<Tensor> tensor_of(RebuildContext& context, const Value& value) {
  if (!value.is(Kind::kCall)) return std::nullopt;
  // A global's module and name never change, so its classification can be kept by address.
  const Value& callable = value.callable();
  if (&callable != context.last_callable) {
    context.last_kind = classify_global(callable);
    context.last_callable = &callable;
  }
  const KnownGlobal kind = context.last_kind;
  if (kind == KnownGlobal::kNumpyReconstruct || kind == KnownGlobal::kNumpyScalar) {
    return numpy_tensor(context, value);
  }
  if (context.prebuilt != nullptr && PrebuiltTensors::may_hold(value, kind)) {
    if (auto tensor = context.prebuilt->take(value)) {
      // The storage joins the checkpoint's now, where rebuilding the call would have made it.
      (void)context.storages.register_storage(tensor->storage());
      return tensor;
    }
  }
  return rebuild_kind(context, kind, value.callable(), value.args());
}

NamedTensor* TensorBuilder::prebuilt_listed_in_place(const Value& value) {
  // Only calls were handed to the worker: a comparison of pointers says enough.
  NamedTensor* listed = prebuilt_->take_in_place(value);
  // Beside the worker, which makes storages as it goes, the storage joins the checkpoint's in
  // settle(); after it, now.
  if (listed != nullptr && settled_) {
    (void)context_.storages.register_storage(listed->tensor.storage());
  }
  return listed;
}

void TensorBuilder::end_prebuilt_listing() {
  prebuilt_->end_in_place();
  listing_in_place_ = false;
}

void TensorBuilder::abandon_in_place_listing() noexcept {
  if (!settled_) settle();
  if (!listing_in_place_) return;
  prebuilt_->stop();
  listing_in_place_ = false;
}

void TensorBuilder::prebuild_during(pickle::RunOptions& options, std::size_t pickle_bytes) {
  context_.storages.set_registration_deferred(true);
  prebuilt_ = std::make_unique<PrebuiltTensors>(context_, pickle_bytes);
  PrebuiltTensors* prebuilt = prebuilt_.get();
  options.on_global_or_call = [prebuilt](const Value& value) { prebuilt->on_call(value); };
  options.on_abandon = [prebuilt] { prebuilt->stop(); };
}

void TensorBuilder::prebuilding_done() {
  if (!prebuilt_) return;
  prebuilt_->hand_over_rest();
  listing_in_place_ = true;
  settled_ = false;
}

void TensorBuilder::settle() noexcept {
  settled_ = true;
  if (!prebuilt_) return;
  prebuilt_->finish();
  // The storages were made by resolve() on the worker, one per record: registering them only
  // moves their owners into the checkpoint's list, which is reserved for one per record.
  for (const NamedTensor& named : prebuilt_->named_in_place_tensors())
    (void)context_.storages.register_storage(named.tensor.storage());
  context_.storages.set_registration_deferred(false);
  context_.prebuilt = prebuilt_.get();
}

std::pair<std::size_t, std::size_t> TensorBuilder::prebuilt_counts() const noexcept {
  if (!prebuilt_) return {0, 0};
  return {prebuilt_->handed_over(), prebuilt_->rebuilt()};
}

std::size_t TensorBuilder::prebuilt_named_in_place() const noexcept {
  return prebuilt_ ? prebuilt_->named_in_place() : 0;
}

std::optional<Tensor> rebuild(RebuildContext& context, const Value& function, const Value& args) {
  return rebuild_kind(context, classify_global(function), function, args);
}

}  // namespace pthload::torch
