// The Checkpoint object: what it hands out, and its release (formats/ makes one; device/ places
// its storages).
#include "pthload/checkpoint.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <utility>

#include "checkpoint/access.hpp"
#include "checkpoint/parse_threads.hpp"
#include "checkpoint/state.hpp"
#include "pthload/error.hpp"

namespace pthload {

bool internal::uses_parse_thread(const LoadOptions& options) noexcept {
  if (options.parse_threads != 0) return options.parse_threads > 1;
  return std::thread::hardware_concurrency() > 1;
}

namespace {

// Releasing a checkpoint of 100 000 tensors takes 10-15 ms on one thread: destroying the tensors
// and storages (a cache miss each), and unmapping some 80 MiB in 4 KiB pages. The value tree and
// the zip index, about 35 MiB of it, are read by nothing the tensors and storages hold, even
// while they are destroyed: a second thread can unmap them meanwhile, where the load was allowed
// one (the phase took 9.6 -> 8.4 ms).
void release(std::unique_ptr<internal::CheckpointState> state) noexcept {
  if (state == nullptr) return;
  const bool two_threads = state->pickle_bytes.has_value() &&
                           state->pickle_bytes->bytes().size() >= internal::kPrebuildPickleBytes &&
                           internal::uses_parse_thread(state->open_options);
  if (!two_threads) return;  // `state` goes here
  std::thread releaser;
  try {
    releaser = std::thread([pickle = std::move(state->pickle), archive = std::move(state->archive),
                            pickle_bytes = std::move(state->pickle_bytes)]() mutable {
      pickle.arena.reset();
      archive.reset();
      pickle_bytes.reset();
    });
  } catch (...) {
    // No thread (std::system_error, std::bad_alloc): the lambda that took the parts released
    // them here as it went.
  }
  state.reset();
  if (releaser.joinable()) releaser.join();
}

}  // namespace

std::string_view format_name(Format format) noexcept {
  switch (format) {
    case Format::kZip:
      return "zip";
    case Format::kLegacy:
      return "legacy";
    case Format::kTorchScript:
      return "torchscript";
    case Format::kSafetensors:
      return "safetensors";
    case Format::kDcp:
      return "dcp";
  }
  return "unknown";
}

Checkpoint::Checkpoint(std::unique_ptr<internal::CheckpointState> state) noexcept
    : state_(std::move(state)) {}
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&& other) noexcept {
  if (this != &other) release(std::exchange(state_, std::move(other.state_)));
  return *this;
}
Checkpoint::~Checkpoint() {
  release(std::move(state_));
}

Format Checkpoint::format() const noexcept {
  return state_->format;
}
std::span<const NamedTensor> Checkpoint::tensors() const noexcept {
  return state_->tensors;
}
std::span<const OpaqueValue> Checkpoint::opaque_values() const noexcept {
  return state_->opaque_values;
}
std::span<const std::shared_ptr<Storage>> Checkpoint::storages() const noexcept {
  return state_->storages;
}
std::span<const std::pair<std::string, std::string>> Checkpoint::metadata() const noexcept {
  return state_->metadata;
}
std::span<const UnusedStorage> Checkpoint::unused_storages() const noexcept {
  return state_->unused_storages;
}

// The index is built under the once flag, so concurrent first lookups build it once.
const Tensor* Checkpoint::find(std::string_view name) const {
  internal::CheckpointState& state = *state_;
  const auto& tensors = state.tensors;
  std::call_once(state.name_index_built, [&] {
    state.name_index.resize(tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i)
      state.name_index[i] = i;
    std::stable_sort(state.name_index.begin(), state.name_index.end(),
                     [&](std::size_t a, std::size_t b) {
                       return tensors[a].name.view() < tensors[b].name.view();
                     });
  });
  const auto found = std::lower_bound(
      state.name_index.begin(), state.name_index.end(), name,
      [&](std::size_t i, std::string_view wanted) { return tensors[i].name.view() < wanted; });
  if (found == state.name_index.end() || tensors[*found].name.view() != name) return nullptr;
  return &tensors[*found].tensor;
}

const Tensor& Checkpoint::tensor(std::string_view name) const {
  if (const Tensor* found = find(name)) return *found;
  throw FormatError(Errc::kTorchNameNotFound, fmt::format("no tensor named '{}'", name),
                    {.path = state_->path});
}

}  // namespace pthload
