// Turns persistent ids into storages and rebuild calls into tensors, as torch.load would
// (torch/serialization.py _load.persistent_load; torch/_utils.py _rebuild_tensor*).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "checkpoint/state.hpp"
#include "pickle/machine.hpp"
#include "pickle/value.hpp"
#include "pthload/limits.hpp"
#include "pthload/tensor.hpp"
#include "torch/legacy_storages.hpp"
#include "torch/prebuilt_tensors.hpp"
#include "torch/rebuild.hpp"
#include "torch/storage_resolver.hpp"

namespace pthload::torch {

/// Builds the tensors a value tree describes into a CheckpointState: one Storage per key
/// (however many tensors view it; storage_resolver.hpp), each tensor made by the rebuild
/// function of its family (rebuild.hpp) and checked against its storage's bounds.
class TensorBuilder {
 public:
  /// `data_prefix` is what storage keys are appended to ("model/data/"). `limits` (the caller's,
  /// which must outlive the builder) also bound the legacy streams nested in the pickle
  /// (torch.storage._load_from_bytes).
  TensorBuilder(internal::CheckpointState& checkpoint, std::string data_prefix,
                const Limits& limits)
      : context_{.checkpoint = checkpoint,
                 .storages = StorageResolver(checkpoint, std::move(data_prefix), limits)} {}
  /// For a legacy stream: storages come from `legacy` (which must outlive the builder).
  TensorBuilder(internal::CheckpointState& checkpoint, const LegacyStorages& legacy,
                const Limits& limits)
      : context_{.checkpoint = checkpoint,
                 .storages = StorageResolver(checkpoint, legacy, limits)} {}

  /// The tensor `value` rebuilds, or nullopt when `value` is no tensor (a dict, an opaque
  /// object...). The same node always gives an equal tensor over the same Storage (a node
  /// reached twice, like tied weights, is rebuilt: cheaper than caching every node). Throws
  /// FormatError for a malformed rebuild call or persistent id, UnsupportedError for a rebuild
  /// function pthload does not know or a form of a known one it does not read, with the
  /// offending function named.
  [[nodiscard]] std::optional<Tensor> tensor_of(const pickle::Value& value) {
    // Only a call may be rebuilt (with the context the worker uses until it is waited for).
    if (!value.is(pickle::Kind::kCall)) return std::nullopt;
    if (!settled_) settle();
    return torch::tensor_of(context_, value);
  }

  /// Where the tensor `value` rebuilds already lies in the checkpoint's tensor list, unnamed,
  /// for the naming walk to name: a tensor rebuilt while the pickle ran, met in the order it was
  /// rebuilt in (PrebuiltTensors::take_in_place); its storage joins the checkpoint's now. Else
  /// null: call end_in_place_listing() before adding anything to the list.
  [[nodiscard]] NamedTensor* listed_in_place(const pickle::Value& value) {
    return listing_in_place_ ? prebuilt_listed_in_place(value) : nullptr;
  }
  /// Whether listed_in_place(value) would name a tensor, without reading `value`'s node (but
  /// where the walk waits for the worker to publish more tensors).
  [[nodiscard]] bool is_next_in_place(const pickle::Value& value) noexcept {
    return listing_in_place_ && prebuilt_->is_next_in_place(value);
  }
  /// Ends listing in place (PrebuiltTensors::end_in_place): the walk calls it before it adds
  /// to the tensor list itself, and when it ends. Throws std::bad_alloc.
  void end_in_place_listing() {
    if (!settled_) settle();
    if (listing_in_place_) end_prebuilt_listing();
  }
  /// Ends listing in place when the walk fails: the tensors not named leave the list.
  void abandon_in_place_listing() noexcept;

  /// Makes `options` hand the dense rebuild calls of the pickle it runs to a worker thread that
  /// rebuilds them meanwhile (prebuilt_tensors.hpp), for tensor_of() to take. Call
  /// prebuilding_done() when the run returns; a run that throws stops the worker itself
  /// (RunOptions::on_abandon). Without a thread to spare, tensor_of() rebuilds every call.
  /// `pickle_bytes`, the pickle's size, bounds what the worker keeps.
  void prebuild_during(pickle::RunOptions& options, std::size_t pickle_bytes);
  /// Lets the worker finish the calls it was handed without waiting for it: listed_in_place()
  /// names its tensors as it publishes them, and tensor_of() waits for it, then takes what it
  /// rebuilt.
  void prebuilding_done();
  /// How many distinct spellings of bytes (protocol 2's _codecs.encode(text, encoding)) the
  /// numpy arrays' data were decoded from (tests).
  [[nodiscard]] std::size_t decoded_byte_spellings() const noexcept {
    return context_.pickled.spelled.size();
  }
  /// The worker's count of calls handed over and rebuilt, {0, 0} without one (tests).
  [[nodiscard]] std::pair<std::size_t, std::size_t> prebuilt_counts() const noexcept;
  /// How many of the worker's tensors the walk named in place (tests).
  [[nodiscard]] std::size_t prebuilt_named_in_place() const noexcept;

  /// Why the last tensor_of() that returned nullopt left a tensor-like value opaque (a numpy
  /// object array...), once; nullopt when it was simply no tensor. Clears the reason.
  [[nodiscard]] std::optional<std::string> take_opaque_reason() {
    // Only the walk's rebuilds give a reason (a numpy array's): the worker rebuilds dense
    // tensors only.
    return std::exchange(context_.opaque_reason, std::nullopt);
  }

 private:
  NamedTensor* prebuilt_listed_in_place(const pickle::Value& value);
  void end_prebuilt_listing();
  // Waits for the worker, whose context (the storage resolver...) is then the walk's alone, and
  // registers the storages of the tensors named in place meanwhile, in the order named.
  void settle() noexcept;

  RebuildContext context_;
  // After context_, which its worker uses: stopped before the context goes.
  std::unique_ptr<PrebuiltTensors> prebuilt_;
  // From prebuilding_done() until the walk first adds to the list itself: asked of every value
  // the walk meets, so a load without the worker pays one test for it.
  bool listing_in_place_ = false;
  // Whether nothing runs beside the walk: no worker, or one waited for (settle()).
  bool settled_ = true;
};

}  // namespace pthload::torch
