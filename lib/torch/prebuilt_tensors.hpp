// Dense tensors built on a second thread while the pickle machine is still running, so that the
// two halves of open() — running the pickle and rebuilding its tensors — overlap on two cores.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/large_arrays.hpp"
#include "pickle/value.hpp"
#include "pthload/tensor.hpp"
#include "torch/globals.hpp"

namespace pthload::torch {

struct RebuildContext;

/// The dense rebuild calls (torch._utils._rebuild_tensor, _v2, _v3) whose first argument is a
/// storage's persistent id: the pickle machine hands each to a worker thread as it makes it
/// (on_call, RunOptions::on_global_or_call), and the worker rebuilds its tensor then, while the
/// machine runs on. The naming walk, which runs once the pickle is done, takes each tensor
/// instead of rebuilding it (take, from TensorBuilder::tensor_of).
///
/// What the worker reads of a call — the callable and the arguments, a tuple of ints, tuples,
/// bools and persistent ids — never changes once the call is made, and the values live in the
/// machine's arena, which outlives the worker (finish() or stop() first: see the pickle
/// layer's RunOptions::on_abandon). Storages the worker makes wait for the walk to register
/// them (StorageResolver::set_registration_deferred), so the checkpoint lists them in the
/// walk's order, as when the walk made them. A call the worker cannot rebuild (malformed
/// arguments, a missing record, no memory) is simply not prebuilt: the walk rebuilds it and
/// reports its error where it would have without the worker. Only the walk's thread calls the
/// public functions.
class PrebuiltTensors {
 public:
  /// Starts the worker on `context` (which the caller must not use until finish() or stop()),
  /// unless no thread can be started, when every call is left to the walk. What the worker
  /// keeps is bounded by `pickle_bytes`, the size of the pickle it follows: beyond that, the
  /// calls are left to the walk (a pickle can make calls the walk never reaches, cheaply).
  PrebuiltTensors(RebuildContext& context, std::size_t pickle_bytes);
  PrebuiltTensors(const PrebuiltTensors&) = delete;
  PrebuiltTensors& operator=(const PrebuiltTensors&) = delete;
  /// Stops the worker if it is still running.
  ~PrebuiltTensors();

  /// Hands `value` to the worker if it is a dense rebuild call of a persistent id. Never
  /// throws: a call that cannot be handed over is left to the walk.
  void on_call(const pickle::Value& value) noexcept;
  /// Waits for the worker to rebuild every call handed over; take() may then be called.
  void finish() noexcept;
  /// Stops the worker without waiting for the calls not yet rebuilt (the pickle failed).
  void stop() noexcept;

  /// The tensor the worker rebuilt from `call`, once; nullopt when it did not (or it was taken
  /// already: a call the walk reaches twice is rebuilt the second time, as without a worker).
  [[nodiscard]] std::optional<Tensor> take(const pickle::Value& call);

  /// Whether `call`, a call of a function `kind` (classify_global), may be one of the calls
  /// the worker rebuilds: take() is worth asking.
  [[nodiscard]] static bool may_hold(const pickle::Value& call, KnownGlobal kind) noexcept;

  /// How many calls were handed over and how many of them the worker rebuilt (tests).
  [[nodiscard]] std::size_t handed_over() const noexcept { return handed_over_; }
  [[nodiscard]] std::size_t rebuilt() const noexcept { return rebuilt_; }

 private:
  struct Built {
    const pickle::Value* call;
    std::optional<Tensor> tensor;
  };

  void work();
  void hand_over_batch();
  void close(bool discard) noexcept;
  [[nodiscard]] static bool is_dense_kind(KnownGlobal kind) noexcept;
  [[nodiscard]] bool is_dense_rebuild(const pickle::Value& call) noexcept;

  RebuildContext& context_;
  // The walk's side: calls gathered until a batch is full (one lock per batch, not per call).
  std::vector<const pickle::Value*> batch_;
  // The classification of the last two callables met: every call of a pickle names its
  // function through one memoized global, so this spares classifying 100 000 calls.
  const pickle::Value* last_dense_ = nullptr;
  const pickle::Value* last_other_ = nullptr;
  std::size_t handed_over_ = 0;
  bool finished_ = false;

  std::mutex mutex_;
  std::condition_variable wake_worker_;
  std::vector<const pickle::Value*> queued_;  // guarded by mutex_
  bool closed_ = false;                       // guarded by mutex_
  bool discard_ = false;                      // guarded by mutex_

  // The worker's; the walk's once the worker has stopped.
  std::vector<Built, common::LargeArrayAllocator<Built>> built_;
  std::size_t rebuilt_ = 0;
  std::size_t memory_left_;
  std::jthread worker_;

  // take()'s cursor: the walk meets the calls in the order the pickle made them, most often.
  std::size_t next_ = 0;
  // The calls not taken in that order, by call, made the first time the order breaks.
  std::optional<std::unordered_map<const pickle::Value*, std::size_t>> by_call_;
};

}  // namespace pthload::torch
