// The worker that rebuilds dense tensors while the pickle runs (prebuilt_tensors.hpp).
#include "torch/prebuilt_tensors.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "common/assert.hpp"
#include "common/checked.hpp"
#include "common/fresh_memory.hpp"
#include "torch/globals.hpp"
#include "torch/rebuild.hpp"

namespace pthload::torch {
namespace {

using pickle::Kind;
using pickle::Value;

// Whether rebuild_dense, reading `call` on the worker, reads only what the machine cannot change
// any more: tuples (a list given as a size, or as a persistent id, may still be appended to by
// a later APPEND on the machine's thread), and the scalars, strings and globals in them. Only
// kinds and tuple sizes are read here, and neither ever changes. Anything else is left to the
// walk: nullopt. Else the elements of the size and stride together.
std::optional<std::size_t> frozen_dims_elements(const Value& call) noexcept {
  const auto args = call.args().items();
  if (args.empty() || !args[0]->is(Kind::kPersistent) ||
      !args[0]->persistent_id().is(Kind::kTuple)) {
    return std::nullopt;
  }
  // size and stride: tuples, or torch.Size calls of tuples.
  std::size_t elements = 0;
  for (std::size_t i = 2; i < 4 && i < args.size(); ++i) {
    const Value* dims = args[i];
    if (dims->is(Kind::kCall)) {
      const auto size_args = dims->args().items();
      if (size_args.empty()) return std::nullopt;
      dims = size_args[0];
    }
    if (!dims->is(Kind::kTuple)) return std::nullopt;
    elements += dims->items().size();
  }
  return elements;
}

// What the worker may keep, per byte of the pickle (beside the list reserved per record): a
// call the walk never reaches (made, then popped) costs the pickle a few bytes and, rebuilt, the
// worker a tensor and its dims: bounded by the pickle's size. torch.save writes 76 bytes of
// pickle for a 1- or 2-dimensional tensor that is charged about 150 here, so four times the
// pickle leaves room on every file torch writes.
constexpr std::size_t kMemoryPerPickleByte = 4;

// Calls handed over together: one lock and one wake-up per batch. Small enough that the worker
// starts while the machine is early in a large pickle.
constexpr std::size_t kBatchCalls = 512;

// Tensors the worker lists before it publishes them: a store and a look at the waiting walk per
// 32 tensors, not per tensor.
constexpr std::size_t kPublishEvery = 32;

// How many more tensors a walk that caught up with the worker waits for: it sleeps and wakes
// once per so many, not once per tensor.
constexpr std::size_t kCatchUpTensors = 256;

// How far ahead of the calls handed over the walk's thread makes the tensor list ready
// (populate_list_ahead): two batches, so the worker, which starts on a batch once it is handed
// over, seldom reaches a page before it is there.
constexpr std::size_t kPopulateAheadCalls = 2 * kBatchCalls;

}  // namespace

bool PrebuiltTensors::is_dense_kind(KnownGlobal kind) noexcept {
  return kind == KnownGlobal::kRebuildTensor || kind == KnownGlobal::kRebuildTensorV2 ||
         kind == KnownGlobal::kRebuildTensorV3;
}

bool PrebuiltTensors::may_hold(const Value& call, KnownGlobal kind) noexcept {
  if (!is_dense_kind(kind)) return false;
  const auto args = call.args().items();
  // A storage pickled by plain pickle (torch.storage._load_from_bytes) is read from a nested
  // stream whose storages join the checkpoint as they are read: left to the walk.
  return !args.empty() && args[0]->is(Kind::kPersistent);
}

PrebuiltTensors::PrebuiltTensors(RebuildContext& context, std::size_t pickle_bytes)
    : context_(context),
      list_(context.checkpoint.tensors),
      first_(context.checkpoint.tensors.size()),
      memory_left_(static_cast<std::size_t>(
          common::checked_mul(pickle_bytes, kMemoryPerPickleByte).value_or(SIZE_MAX))) {
  try {
    batch_.reserve(kBatchCalls);
    // The lists never grow: the walk reads them while the worker appends (hand_over_rest()).
    // So they have room for every tensor the worker's memory admits (many views of a few
    // storages, as a flattened parameter's, included). Reserved is not yet memory: a large
    // list is a mapping of its own (common/fresh_memory.hpp), memory only where it is filled;
    // twice the tensors torch writes for the pickle cost address space only.
    const auto& archive = context_.checkpoint.archive;
    const std::size_t records = archive ? archive->entries().size() : 0;
    const std::size_t room =
        std::max(records, memory_left_ / (sizeof(NamedTensor) + sizeof(const Value*)));
    calls_.reserve(room);
    list_.reserve(first_ + room);
    calls_data_ = calls_.data();
    list_data_ = list_.data();
    // Only a list with a mapping of its own is fresh memory worth readying ahead.
    if (list_.capacity() * sizeof(NamedTensor) >= common::kLargeBlockBytes) {
      list_reserved_ = reinterpret_cast<std::byte*>(list_data_ + first_);
      list_reserved_end_ = reinterpret_cast<std::byte*>(list_data_ + list_.capacity());
      list_populated_ = list_reserved_;
      populate_list_ahead();
    }
    worker_ = std::jthread([this] { work(); });
  } catch (const std::system_error&) {
    finished_ = true;  // no thread: every call is left to the walk
  } catch (const std::bad_alloc&) {
    finished_ = true;
  } catch (const std::length_error&) {
    finished_ = true;  // room for more tensors than a vector can hold: none
  }
}

PrebuiltTensors::~PrebuiltTensors() {
  stop();
}

bool PrebuiltTensors::is_dense_rebuild(const Value& call) noexcept {
  const Value& callable = call.callable();
  if (&callable == last_other_) return false;
  if (&callable != last_dense_) {
    const KnownGlobal kind = classify_global(callable);
    if (!is_dense_kind(kind)) {
      last_other_ = &callable;
      return false;
    }
    last_dense_ = &callable;
  }
  const auto args = call.args().items();
  return !args.empty() && args[0]->is(Kind::kPersistent);
}

void PrebuiltTensors::on_call(const Value& value) noexcept {
  if (finished_ || !value.is(Kind::kCall) || !is_dense_rebuild(value)) return;
  try {
    batch_.push_back(&value);
    ++handed_over_;
    if (batch_.size() >= kBatchCalls) hand_over_batch();
  } catch (...) {
    // No memory for the batch: its calls are left to the walk.
  }
}

void PrebuiltTensors::hand_over_batch() {
  {
    const std::lock_guard lock(mutex_);
    if (queued_.empty()) {
      queued_.swap(batch_);
    } else {
      queued_.insert(queued_.end(), batch_.begin(), batch_.end());
      batch_.clear();
    }
  }
  wake_worker_.notify_one();
  batch_.reserve(kBatchCalls);  // the worker's emptied batch, most often: no allocation
  populate_list_ahead();
}

void PrebuiltTensors::populate_list_ahead() noexcept {
  // The walk's thread has time to spare while the worker rebuilds; the worker has none: where it
  // made the list's fresh memory ready itself, naming the tensors waited on it.
  if (list_populated_ == nullptr) return;
  const std::size_t available = static_cast<std::size_t>(list_reserved_end_ - list_reserved_);
  const std::size_t ahead =
      std::min(available, (handed_over_ + kPopulateAheadCalls) * sizeof(NamedTensor));
  if (list_reserved_ + ahead <= list_populated_) return;
  // On to the next 2 MiB boundary: one madvise per 2 MiB of list, not per batch.
  const auto boundary =
      (reinterpret_cast<std::uintptr_t>(list_reserved_ + ahead) + common::kLargeBlockBytes - 1) &
      ~std::uintptr_t{common::kLargeBlockBytes - 1};
  std::byte* end = std::min(reinterpret_cast<std::byte*>(boundary), list_reserved_end_);
  if (!common::populate_for_filler({list_populated_, end})) {
    list_populated_ = nullptr;  // a kernel that cannot: the worker readies it as it fills it
    return;
  }
  list_populated_ = end;
}

void PrebuiltTensors::work() {
  rebuild_queued();
  publish(true);
}

void PrebuiltTensors::publish(bool done) noexcept {
  const std::size_t count = calls_.size();
  unpublished_ = 0;
  published_.store(count | (done ? kPublishedAll : 0), std::memory_order_seq_cst);
  // Sequentially consistent with the walk's store of wanted_ and its load of published_: either
  // the walk sees this count, or this sees what it waits for (and wakes it).
  if (done || count >= wanted_.load(std::memory_order_seq_cst)) published_.notify_all();
}

bool PrebuiltTensors::wait_for_published(const Value& value) noexcept {
  if (!worker_.joinable()) return false;  // all its tensors are visible_ since join()
  for (;;) {
    const std::uint64_t published = published_.load(std::memory_order_acquire);
    visible_ = static_cast<std::size_t>(published & ~kPublishedAll);
    if (named_ < visible_) return true;
    // Only calls are listed: anything else is not the next, whatever the worker lists later.
    if ((published & kPublishedAll) != 0 || !value.is(Kind::kCall)) return false;
    wanted_.store(named_ + kCatchUpTensors, std::memory_order_seq_cst);
    const std::uint64_t seen = published_.load(std::memory_order_seq_cst);
    if (seen == published) published_.wait(seen, std::memory_order_acquire);
    wanted_.store(SIZE_MAX, std::memory_order_relaxed);
  }
}

void PrebuiltTensors::rebuild_queued() {
  std::vector<const Value*> calls;
  const Value* last_callable = nullptr;
  KnownGlobal last_kind = KnownGlobal::kOther;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_worker_.wait(lock, [this] { return !queued_.empty() || closed_; });
      if (discard_ || queued_.empty()) return;
      calls.swap(queued_);
    }
    for (const Value* call : calls) {
      const Value& callable = call->callable();
      if (&callable != last_callable) {
        last_callable = &callable;
        last_kind = classify_global(callable);
      }
      if (memory_left_ == 0) break;  // the rest is the walk's
      std::optional<Tensor> tensor;
      try {
        if (const auto elements = frozen_dims_elements(*call)) {
          // Dims beyond the few a Tensor keeps inline are on the heap: counted all the same.
          const std::size_t memory =
              sizeof(NamedTensor) + sizeof(call) + *elements * sizeof(std::int64_t);
          if (memory > memory_left_) {
            memory_left_ = 0;
            break;
          }
          memory_left_ -= memory;
          tensor = rebuild_dense(context_, last_kind, callable, call->args());
        }
      } catch (...) {
        // Left to the walk, which rebuilds the call and reports what is wrong with it where
        // it would have without the worker.
      }
      if (!tensor) continue;
      if (calls_.size() == calls_.capacity() || list_.size() == list_.capacity()) {
        memory_left_ = 0;  // no room: the rest is the walk's
        break;
      }
      try {
        calls_.push_back(call);
        try {
          list_.push_back({TensorName(), std::move(*tensor)});
        } catch (...) {
          calls_.pop_back();
          throw;
        }
        ++rebuilt_;
      } catch (...) {
        return;  // no memory: the calls from here on are the walk's
      }
      if (++unpublished_ == kPublishEvery) publish(false);
    }
    calls.clear();
    if (unpublished_ != 0) publish(false);
  }
}

void PrebuiltTensors::close_queue(bool discard) noexcept {
  if (!worker_.joinable()) return;
  try {
    if (!discard && !batch_.empty()) hand_over_batch();
  } catch (...) {
    // The batch stays the walk's: its calls are simply not prebuilt.
  }
  {
    const std::lock_guard lock(mutex_);
    closed_ = true;
    discard_ = discard_ || discard;
  }
  wake_worker_.notify_one();
}

void PrebuiltTensors::join() noexcept {
  if (!worker_.joinable()) return;
  worker_.join();
  visible_ = calls_.size();
}

void PrebuiltTensors::hand_over_rest() noexcept {
  close_queue(false);
  finished_ = true;
}

void PrebuiltTensors::finish() noexcept {
  close_queue(false);
  join();
  finished_ = true;
}

void PrebuiltTensors::stop() noexcept {
  close_queue(true);
  join();
  finished_ = true;
  // The list keeps only what the walk named: a failed pickle leaves it as it found it.
  if (in_place_) {
    list_.erase(list_.begin() + static_cast<std::ptrdiff_t>(first_ + named_), list_.end());
    calls_.clear();
    in_place_ = false;
  }
}

void PrebuiltTensors::end_in_place() {
  if (!in_place_) return;
  PTHLOAD_ASSERT(!worker_.joinable());  // finish() first
  const std::size_t named_end = first_ + named_;
  built_.reserve(list_.size() - named_end);
  for (std::size_t i = named_; i < calls_.size(); ++i)
    built_.push_back({.call = calls_[i], .tensor = std::move(list_[first_ + i].tensor)});
  list_.erase(list_.begin() + static_cast<std::ptrdiff_t>(named_end), list_.end());
  calls_.clear();
  calls_.shrink_to_fit();
  in_place_ = false;
}

std::optional<Tensor> PrebuiltTensors::take(const Value& call) {
  if (worker_.joinable()) return std::nullopt;  // finish() first
  end_in_place();
  while (next_ < built_.size() && !built_[next_].tensor)
    ++next_;  // taken out of order
  if (next_ < built_.size() && built_[next_].call == &call) {
    return std::exchange(built_[next_++].tensor, std::nullopt);
  }
  // Out of the pickle's order (or a call reached twice, or one the worker never had): look it
  // up among those not taken in order.
  if (!by_call_) {
    by_call_.emplace();
    by_call_->reserve(built_.size() - std::min(next_, built_.size()));
    for (std::size_t i = next_; i < built_.size(); ++i)
      by_call_->emplace(built_[i].call, i);
  }
  const auto found = by_call_->find(&call);
  if (found == by_call_->end()) return std::nullopt;
  return std::exchange(built_[found->second].tensor, std::nullopt);
}

}  // namespace pthload::torch
