// The library's one way into the private members of the public types (fmt's friend-class way):
// include/pthload/ declares internal::Access as a friend and nothing more, so users see no state
// and no setters, and the torch and device layers reach them only here.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "checkpoint/state.hpp"
#include "common/object_arena.hpp"
#include "common/prefetch.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/dtype.hpp"
#include "pthload/tensor.hpp"

namespace pthload {

struct PTHLOAD_HIDDEN Tensor::Extras {
  std::vector<Tensor> parts;
  std::shared_ptr<const Quantization> quantization;
  std::shared_ptr<const WrapperSubclass> wrapper_subclass;
};

}  // namespace pthload

namespace pthload::internal {

struct Access {
  /// The state behind a checkpoint or a storage; valid while it lives.
  [[nodiscard]] static CheckpointState& state(Checkpoint& checkpoint) noexcept {
    return *checkpoint.state_;
  }
  [[nodiscard]] static const CheckpointState& state(const Checkpoint& checkpoint) noexcept {
    return *checkpoint.state_;
  }
  [[nodiscard]] static StorageState& state(Storage& storage) noexcept { return *storage.state_; }
  [[nodiscard]] static const StorageState& state(const Storage& storage) noexcept {
    return *storage.state_;
  }

  /// A tensor over `storage`: `sizes` and `strides` of one length, copied.
  [[nodiscard]] static Tensor make_tensor(std::shared_ptr<const Storage> storage, Dtype dtype,
                                          std::span<const std::int64_t> sizes,
                                          std::span<const std::int64_t> strides,
                                          std::int64_t storage_offset, bool requires_grad) {
    return Tensor(std::move(storage), dtype, sizes, strides, storage_offset, requires_grad);
  }
  /// A tensor without a storage: on the meta device (`layout` kStrided; torch's
  /// _rebuild_meta_tensor_no_storage), a sparse tensor whose data are its `parts` (in
  /// sparse_part_names(layout) order), or a nested tensor (kNested: `sizes` is {number of
  /// components}, `parts` the components). Its data() and checksum throw.
  [[nodiscard]] static Tensor make_tensor(Layout layout, Dtype dtype,
                                          std::span<const std::int64_t> sizes,
                                          std::span<const std::int64_t> strides, bool requires_grad,
                                          std::vector<Tensor> parts = {}) {
    return Tensor(layout, dtype, sizes, strides, requires_grad, std::move(parts));
  }

  /// A checkpoint owning `state` (the torch layer's readers build one each).
  [[nodiscard]] static Checkpoint make_checkpoint(std::unique_ptr<CheckpointState> state) noexcept {
    return Checkpoint(std::move(state));
  }
  /// A name whose text (`size` chars and a NUL) lies in a block `owner` keeps alive: the names
  /// a checkpoint makes share a few blocks (torch/naming.cpp).
  [[nodiscard]] static TensorName block_name(std::shared_ptr<const void> owner, const char* text,
                                             std::size_t size) noexcept {
    return TensorName(std::move(owner), text, size);
  }
  /// A shared storage owning `state`, in one allocation with its control block.
  [[nodiscard]] static std::shared_ptr<Storage> make_storage(StorageState&& state) {
    return std::make_shared<ConstructibleStorage>(std::move(state));
  }
  /// A shared storage with a default state for the caller to fill in place (through state()),
  /// in `arena`, which the storage keeps alive (common::ObjectArena): the storages of a
  /// 100 000-tensor checkpoint are then a few large blocks, not 100 000 heap allocations, and no
  /// state is built to be moved, which cost a fifth of
  /// resolving a persistent id (both strings and the variant moved, the source destroyed).
  [[nodiscard]] static std::shared_ptr<Storage> make_empty_storage(
      const std::shared_ptr<common::ObjectArena>& arena) {
    return std::allocate_shared<ConstructibleStorage>(
        common::ObjectArena::Allocator<ConstructibleStorage>(arena));
  }

  /// Appends `storage` to the checkpoint's storages, noting its position in its state
  /// (StorageState::index, which counting unused storages looks up instead of numbering every
  /// storage again) and the open's limit on overlapping views (set in open_options.limits
  /// before the first storage joins). Returns the checkpoint's pointer.
  static const std::shared_ptr<Storage>& add_storage(CheckpointState& checkpoint,
                                                     std::shared_ptr<Storage> storage) {
    const std::size_t position = checkpoint.storages.size();
    checkpoint.storages.push_back(std::move(storage));
    StorageState& added = state(*checkpoint.storages.back());
    added.index = position;
    added.max_overlapping_view_bytes = checkpoint.open_options.limits.max_overlapping_view_bytes;
    return checkpoint.storages.back();
  }

  /// Starts fetching what passes over every storage read of it: the Storage and the end of its
  /// state, which lie together, without reading either yet. Every Storage is a
  /// ConstructibleStorage: only this class can construct one.
  static void prefetch_state(const Storage& storage) noexcept {
    const auto& constructed = static_cast<const ConstructibleStorage&>(storage);
    common::prefetch(&constructed.state.index);
    common::prefetch(&storage);
  }
  /// The same for a pass that reads all of the state (placement: the key, the location, the
  /// sizes and the record).
  static void prefetch_whole_state(const Storage& storage) noexcept {
    const auto& constructed = static_cast<const ConstructibleStorage&>(storage);
    common::prefetch_lines(&constructed.state, sizeof(StorageState));
    common::prefetch(&storage);
  }

  /// Whether `tensor` has parts, a quantization or a wrapper subclass: false for almost every
  /// tensor, which passes over 100 000 of them then skip asking for each of the three.
  [[nodiscard]] static bool has_extras(const Tensor& tensor) noexcept {
    return tensor.extras_ != nullptr;
  }

  /// Marks a storage-less tensor as a wrapper subclass, with the storage_offset a wrapper keeps
  /// without a storage (torch layer; the device layer replaces it once placed).
  static void set_wrapper_subclass(Tensor& tensor, std::shared_ptr<const WrapperSubclass> wrapper,
                                   std::int64_t storage_offset) {
    Tensor::Extras extras = extras_of(tensor);
    extras.wrapper_subclass = std::move(wrapper);
    tensor.extras_ = std::make_shared<const Tensor::Extras>(std::move(extras));
    tensor.storage_offset_ = storage_offset;
  }
  /// The tensor's storage was converted to `dtype` (same elements, same geometry;
  /// LoadOptions::floating_dtype, device layer).
  static void set_dtype(Tensor& tensor, Dtype dtype) noexcept { tensor.dtype_ = dtype; }
  /// Attaches the quantization torch's _rebuild_qtensor describes (torch layer).
  static void set_quantization(Tensor& tensor, std::shared_ptr<const Quantization> quantization) {
    Tensor::Extras extras = extras_of(tensor);
    extras.quantization = std::move(quantization);
    tensor.extras_ = std::make_shared<const Tensor::Extras>(std::move(extras));
  }

 private:
  // A copy of what `tensor` has (shared with its copies, so never changed in place).
  static Tensor::Extras extras_of(const Tensor& tensor) {
    return tensor.extras_ ? *tensor.extras_ : Tensor::Extras{};
  }

  // std::make_shared cannot call Storage's private constructor; this member class, which
  // friendship lets construct its base, can.
  // The state comes first among the bases, so it is constructed before the Storage that refers
  // to it and destroyed after; its last fields, which passes over all storages read
  // (StorageState), then share a cache line with the Storage's pointer to it.
  struct OwnedStorageState {
    StorageState state;
  };
  struct ConstructibleStorage final : OwnedStorageState, Storage {
    explicit ConstructibleStorage(StorageState&& moved) noexcept
        : OwnedStorageState{std::move(moved)}, Storage(OwnedStorageState::state) {}
    ConstructibleStorage() noexcept : Storage(OwnedStorageState::state) {}
  };
};

}  // namespace pthload::internal
