// Dense tensors built on a second thread while the pickle machine is still running, so that the
// two halves of open() — running the pickle and rebuilding its tensors — overlap on two cores.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "checkpoint/state.hpp"
#include "common/fresh_memory.hpp"
#include "common/prefetch.hpp"
#include "pickle/value.hpp"
#include "pthload/tensor.hpp"
#include "torch/globals.hpp"

namespace pthload::torch {

struct RebuildContext;

/// The dense rebuild calls (torch._utils._rebuild_tensor, _v2, _v3) whose first argument is a
/// storage's persistent id: the pickle machine hands each to a worker thread as it makes it
/// (on_call, RunOptions::on_global_or_call), and the worker rebuilds its tensor then, while the
/// machine runs on. The worker appends the tensors, unnamed, to the checkpoint's own tensor list,
/// in the pickle's order, which is the order the naming walk meets them in, most often: while it
/// does, the walk names each where it lies (take_in_place), and no second list of 100 000
/// tensors is filled, moved from and freed. Once the walk meets anything else — a call out of
/// that order or reached twice, a tensor the worker did not rebuild — or ends, end_in_place()
/// moves the tensors not yet named out of the list, and the walk takes them by call (take,
/// from TensorBuilder::tensor_of) or rebuilds what the worker did not.
///
/// The walk need not wait for the worker to finish (hand_over_rest()): rebuilding a tensor costs
/// the worker more than making its call costs the machine, so the worker is still busy when the
/// pickle ends, and the walk names in place, beside it, each tensor the worker has published
/// (published_), waiting only where it catches up. Naming in place reads nothing else the worker
/// writes; everything else the walk does waits for finish() first (TensorBuilder::settle). The
/// worker never grows the list or its calls while the walk may read them: both are reserved for
/// as many tensors as the worker's memory bound admits.
///
/// What the worker reads of a call — the callable and the arguments, a tuple of ints, tuples,
/// bools and persistent ids — never changes once the call is made, and the values live in the
/// machine's arena, which outlives the worker (finish() or stop() first: see the pickle
/// layer's RunOptions::on_abandon). Storages the worker makes wait for the walk to register
/// them (StorageResolver::set_registration_deferred), so the checkpoint lists them in the
/// walk's order, as when the walk made them. A call the worker cannot rebuild (malformed
/// arguments, a missing record, no memory) is simply not prebuilt: the walk rebuilds it and
/// reports its error where it would have without the worker. Only the walk's thread calls the
/// public functions, and it leaves the checkpoint's tensor list alone until finish().
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
  /// Hands the calls not yet handed over to the worker, which stops once it has rebuilt them
  /// all; does not wait for it. take_in_place() may then be called.
  void hand_over_rest() noexcept;
  /// Waits for the worker to rebuild every call handed over; take() may then be called.
  void finish() noexcept;
  /// Stops the worker without waiting for the calls not yet rebuilt (the pickle or the walk
  /// failed), and takes the tensors not yet named out of the checkpoint's list.
  void stop() noexcept;

  /// Whether `value` is the call whose tensor take_in_place() would name next: a comparison of
  /// pointers, which spares the walk reading the node of every tensor it lists in place. Where
  /// the walk has caught up with a worker still running, waits for it to publish more tensors
  /// (or stop) if `value` is a call.
  [[nodiscard]] bool is_next_in_place(const pickle::Value& value) noexcept {
    if (!in_place_) return false;
    if (named_ >= visible_ && !wait_for_published(value)) return false;
    return calls_data_[named_] == &value;
  }
  /// The list entry holding the tensor the worker rebuilt from `call`, for the walk to name, if
  /// it is the next one of the list and nothing else was listed since the walk began: its place
  /// in the list is then already the one the walk gives it. Else null (the walk then calls
  /// end_in_place() before it lists anything).
  [[nodiscard]] NamedTensor* take_in_place(const pickle::Value& call) noexcept {
    if (!is_next_in_place(call)) return nullptr;
    // The walk marks each call it names (pickle::Value::set_walk_mark): the node of one named a
    // few calls later is asked for now.
    if (named_ + common::kPrefetchAhead < visible_) {
      common::prefetch(calls_data_[named_ + common::kPrefetchAhead]);
    }
    return &list_data_[first_ + named_++];
  }
  /// Ends naming in place: the tensors past those named leave the checkpoint's list for take().
  /// Call before anything else joins the list, and once the walk ends. Throws std::bad_alloc.
  void end_in_place();

  /// The tensor the worker rebuilt from `call` and the walk has not named in place, once;
  /// nullopt when it did not (or it was taken already: a call the walk reaches twice is rebuilt
  /// the second time, as without a worker). Ends naming in place first.
  [[nodiscard]] std::optional<Tensor> take(const pickle::Value& call);

  /// Whether `call`, a call of a function `kind` (classify_global), may be one of the calls
  /// the worker rebuilds: take() is worth asking.
  [[nodiscard]] static bool may_hold(const pickle::Value& call, KnownGlobal kind) noexcept;

  /// How many calls were handed over and how many of them the worker rebuilt (tests).
  [[nodiscard]] std::size_t handed_over() const noexcept { return handed_over_; }
  [[nodiscard]] std::size_t rebuilt() const noexcept { return rebuilt_; }
  /// How many of them the walk named in place (tests).
  [[nodiscard]] std::size_t named_in_place() const noexcept { return named_; }
  /// The tensors named in place, in the list's order.
  [[nodiscard]] std::span<NamedTensor> named_in_place_tensors() noexcept {
    return {list_.data() + first_, named_};
  }

 private:
  struct Built {
    const pickle::Value* call;
    std::optional<Tensor> tensor;
  };

  void work();
  void rebuild_queued();
  // The worker's: makes the tensors it listed so far visible to the walk, and wakes a walk that
  // waits for them.
  void publish(bool done) noexcept;
  // The walk's, once it has named every tensor it saw published: the count published now, after
  // waiting if the worker is still running and `value` is a call. False where nothing more
  // will come.
  bool wait_for_published(const pickle::Value& value) noexcept;
  void hand_over_batch();
  // Makes the part of the list the worker fills next ready (common::populate_for_filler), on
  // the walk's thread, which the worker lags behind: the worker then fills memory that is there.
  void populate_list_ahead() noexcept;
  // Closes the queue: the worker stops once it is empty (at once with `discard`).
  void close_queue(bool discard) noexcept;
  void join() noexcept;
  [[nodiscard]] static bool is_dense_kind(KnownGlobal kind) noexcept;
  [[nodiscard]] bool is_dense_rebuild(const pickle::Value& call) noexcept;

  // Set before the worker starts. The walk reads the list and the calls through their first
  // elements, never through the vectors, whose ends the worker moves with every tensor (neither
  // is reallocated while it runs: both are reserved).
  RebuildContext& context_;
  // The checkpoint's tensor list, which the worker appends to from first_ on.
  internal::TensorList& list_;
  std::size_t first_;
  NamedTensor* list_data_ = nullptr;
  const pickle::Value* const* calls_data_ = nullptr;

  // The walk's side, on cache lines of its own, like the worker's side and what both write: the
  // two threads update their counts once per tensor, and where one line held both, every update
  // took the line from the other core.
  //
  // Calls gathered until a batch is full (one lock per batch, not per call).
  alignas(common::kCacheLineBytes) std::vector<const pickle::Value*> batch_;
  // The classification of the last two callables met: every call of a pickle names its
  // function through one memoized global, so this spares classifying 100 000 calls.
  const pickle::Value* last_dense_ = nullptr;
  const pickle::Value* last_other_ = nullptr;
  std::size_t handed_over_ = 0;
  bool finished_ = false;
  // How many of the worker's tensors the walk named in place, how many it knows to be
  // published, and whether it still names in place.
  std::size_t named_ = 0;
  std::size_t visible_ = 0;
  bool in_place_ = true;
  // The tensors end_in_place() took out of the list, and take()'s cursor over them: the walk
  // meets the calls in the order the pickle made them, most often.
  std::vector<Built> built_;
  std::size_t next_ = 0;
  // The list's bytes from first_ on, and how far the walk's thread has made them ready ahead of
  // the worker; null where it does not (populate_list_ahead).
  std::byte* list_reserved_ = nullptr;
  std::byte* list_reserved_end_ = nullptr;
  std::byte* list_populated_ = nullptr;
  // The calls not taken in that order, by call, made the first time the order breaks.
  std::optional<std::unordered_map<const pickle::Value*, std::size_t>> by_call_;

  alignas(common::kCacheLineBytes) std::mutex mutex_;
  std::condition_variable wake_worker_;
  std::vector<const pickle::Value*> queued_;  // guarded by mutex_
  bool closed_ = false;                       // guarded by mutex_
  bool discard_ = false;                      // guarded by mutex_

  // The worker's; the walk's once the worker has stopped. The call each tensor the worker put
  // in the list was rebuilt from (calls_[i] for list_[first_ + i]); the walk reads those below
  // the count published (through calls_data_).
  alignas(common::kCacheLineBytes)
      std::vector<const pickle::Value*, common::LargeArrayAllocator<const pickle::Value*>> calls_;
  std::size_t rebuilt_ = 0;
  std::size_t memory_left_;
  std::size_t unpublished_ = 0;

  // How many tensors the worker has listed, with kPublishedAll once it has stopped: written
  // (release) by the worker, read (acquire) by the walk, so that what the worker wrote of a
  // tensor and its storage is there for the walk before it names it.
  static constexpr std::uint64_t kPublishedAll = std::uint64_t{1} << 63;
  alignas(common::kCacheLineBytes) std::atomic<std::uint64_t> published_{0};
  // The count the walk waits for (none: SIZE_MAX); the worker wakes it once it publishes that.
  std::atomic<std::size_t> wanted_{SIZE_MAX};

  alignas(common::kCacheLineBytes) std::jthread worker_;
};

}  // namespace pthload::torch
