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

struct Tensor::Extras {
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
  /// storage again). Returns the checkpoint's pointer.
  static const std::shared_ptr<Storage>& add_storage(CheckpointState& checkpoint,
                                                     std::shared_ptr<Storage> storage) {
    const std::size_t position = checkpoint.storages.size();
    checkpoint.storages.push_back(std::move(storage));
    state(*checkpoint.storages.back()).index = position;
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
