// StorageResolver: persistent ids → storages (torch/serialization.py _load.persistent_load;
// docs/format.md §1.4, §2.2).
#include "torch/storage_resolver.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cstdint>
#include <optional>
#include <span>

#include "checkpoint/access.hpp"
#include "common/assert.hpp"
#include "common/check.hpp"
#include "common/checked.hpp"
#include "common/prefetch.hpp"
#include "pthload/error.hpp"
#include "torch/globals.hpp"
#include "torch/rebuild_args.hpp"
#include "torch/storage_types.hpp"

namespace pthload::torch {
namespace {

using pickle::Kind;
using pickle::Value;

// What Access::make_empty_storage takes of the arena per storage (the state, the Storage and
// the control block: about 160 bytes), rounded up: a size hint for the arena's blocks.
constexpr std::size_t kStorageNodeBytes = 256;

// The text of a persistent id's key or location; an int (a pre-1.6 key) is written into
// `digits`, which the result then views.
std::string_view text_of(const Value& value, std::array<char, 24>& digits) {
  if (value.is(Kind::kString) || value.is(Kind::kPython2String)) return value.as_string();
  if (value.is(Kind::kInt)) {
    const auto written =
        std::to_chars(digits.data(), digits.data() + digits.size(), value.as_int());
    return {digits.data(), written.ptr};
  }
  throw FormatError(
      Errc::kTorchBadPersistentId,
      fmt::format("persistent id: expected a string, got a {}", pickle::kind_name(value.kind())));
}

}  // namespace

StorageResolver::StorageResolver(internal::CheckpointState& checkpoint, std::string data_prefix,
                                 const Limits& limits)
    : checkpoint_(checkpoint), limits_(limits), data_prefix_(std::move(data_prefix)) {
  // A checkpoint has about one storage per record and a few tensors per storage.
  const std::size_t records = checkpoint_.archive ? checkpoint_.archive->entries().size() : 0;
  storage_by_record_.resize(records);
  made_.reserve(records);
  checkpoint_.storages.reserve(records);
}

StorageResolver::StorageResolver(internal::CheckpointState& checkpoint,
                                 const LegacyStorages& legacy, const Limits& limits)
    : checkpoint_(checkpoint), limits_(limits), legacy_(&legacy) {}

const zip::Entry* StorageResolver::find_record(std::string_view name) {
  PTHLOAD_ASSERT(checkpoint_.archive);  // the archive constructor's case
  const auto entries = std::span(checkpoint_.archive->entries());
  const zip::Entry* found = next_record_ < entries.size() && entries[next_record_].name == name
                                ? &entries[next_record_]
                                : checkpoint_.archive->find(name);
  if (found != nullptr) next_record_ = static_cast<std::size_t>(found - entries.data()) + 1;
  return found;
}

StorageRef StorageResolver::resolve(const Value& persistent) {
  if (is_load_from_bytes(persistent)) {
    auto& nested = nested_storages_[load_from_bytes_key(persistent)];
    // The caller's limits: a nested stream is no licence to exceed them. Its values are counted
    // per pickle, as every pickle of a stream is; its bytes are part of the outer pickle's, so
    // the streams together cannot make more values than the file has bytes.
    if (!nested.storage) nested = load_from_bytes(checkpoint_, persistent, limits_);
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
  refuse_text_persistent_id(id);
  const auto fields = id.items();
  common::require_format(id.is(Kind::kTuple) && fields.size() >= 5 &&
                             fields[0]->is(Kind::kString) && fields[0]->as_string() == "storage",
                         Errc::kTorchBadPersistentId,
                         "persistent id is not a ('storage', type, key, location, numel) tuple");
  const Value& storage_type = *fields[1];
  std::array<char, 24> key_digits{};
  const std::string_view key = text_of(*fields[2], key_digits);
  common::require_format(fields[4]->is(Kind::kInt) && fields[4]->as_int() >= 0,
                         Errc::kTorchBadPersistentId,
                         "storage '{}': numel is not a non-negative int", key);
  const auto numel = static_cast<std::uint64_t>(fields[4]->as_int());

  std::string& record_name = record_name_scratch_;
  record_name.assign(data_prefix_).append(key);
  const zip::Entry* record = find_record(record_name);
  common::require_format(record != nullptr, Errc::kTorchStorageRecordMissing,
                         "storage '{}': no record {}", key, record_name);
  // Sized by the archive's entries when the resolver was made, and the archive does not change.
  const auto record_index =
      static_cast<std::size_t>(record - checkpoint_.archive->entries().data());
  PTHLOAD_ASSERT(record_index < storage_by_record_.size());
  // Every persistent id of a pickle names its storage type with the same memoized global, most
  // often: the last one's dtype is kept.
  std::optional<Dtype> dtype;
  if (&storage_type == last_storage_type_) {
    dtype = last_storage_dtype_;
  } else if (storage_type.is(Kind::kGlobal)) {
    dtype = storage_type_dtype(storage_type.name());
    last_storage_type_ = &storage_type;
    last_storage_dtype_ = dtype;
  }
  common::check(dtype.has_value(), [&] {
    return FormatError(
        Errc::kTorchUnknownStorageType,
        fmt::format("storage '{}': unknown storage type {}", key, global_name(storage_type)));
  });
  std::array<char, 24> location_digits{};
  const std::string_view location = text_of(*fields[3], location_digits);
  std::size_t& cached = storage_by_record_[record_index];
  if (cached != 0) return known_storage(made_[cached - 1], key, *dtype, numel, location);
  const auto nbytes = common::checked_mul(numel, element_size(*dtype));
  common::require_format(nbytes.has_value(), Errc::kTorchStorageTooSmall,
                         "storage '{}': {} elements overflow", key, numel);
  common::require_format(record->uncompressed_size >= *nbytes, Errc::kTorchStorageTooSmall,
                         "storage '{}': {} elements of {} need {} bytes, record {} holds {}", key,
                         numel, dtype_name(*dtype), *nbytes, record_name,
                         record->uncompressed_size);
  if (!storage_arena_) {
    storage_arena_ = common::ObjectArena::make();
    // About one storage per record (Access::make_empty_storage's node: the state, the Storage
    // and the control block).
    storage_arena_->expect(storage_by_record_.size() * kStorageNodeBytes);
  }
  auto storage = internal::Access::make_empty_storage(storage_arena_);
  Storage* made = storage.get();
  internal::StorageState& state = internal::Access::state(*made);
  state.key = key;
  state.location = location;
  state.dtype = *dtype;
  state.numel = numel;
  state.nbytes = *nbytes;
  state.record = record;
  if (checkpoint_.big_endian) state.swap_unit = internal::swap_unit_for(*dtype);
  made_.push_back({.owner = std::move(storage), .storage = made});
  cached = made_.size();
  return {.storage = registration_deferred_ ? made_.back().owner : registered(made_.back())};
}

StorageRef StorageResolver::known_storage(Made& made, std::string_view key, Dtype dtype,
                                          std::uint64_t numel, std::string_view location) {
  // torch caches storages by key and uses the first persistent id's; torch.save gives every id
  // of a key the same type, size and location (it refuses to save two views of one storage as
  // two types). Ids that disagree would make the result depend on which is resolved first,
  // which is not the same order with and without a second parse thread: refused instead.
  const internal::StorageState& first = internal::Access::state(*made.storage);
  common::check(first.dtype == dtype && first.numel == numel && first.location == location, [&] {
    return FormatError(Errc::kTorchStorageConflict,
                       fmt::format("storage '{}': one persistent id gives it {} elements of {} "
                                   "on '{}', another {} elements of {} on '{}'",
                                   key, first.numel, dtype_name(first.dtype), first.location, numel,
                                   dtype_name(dtype), location));
  });
  return {.storage =
              registration_deferred_ && made.owner != nullptr ? made.owner : registered(made)};
}

const std::shared_ptr<Storage>& StorageResolver::registered(Made& made) {
  if (made.owner == nullptr) {
    return checkpoint_.storages[internal::Access::state(*made.storage).index];
  }
  return internal::Access::add_storage(checkpoint_, std::move(made.owner));
}

const std::shared_ptr<Storage>& StorageResolver::register_storage(const Storage& storage) {
  if (next_registered_ < made_.size() && made_[next_registered_].storage == &storage) {
    // registered() writes the position into the state: the state of a storage registered a
    // few calls later is asked for now.
    if (next_registered_ + common::kPrefetchAhead < made_.size()) {
      internal::Access::prefetch_state(*made_[next_registered_ + common::kPrefetchAhead].storage);
    }
    return registered(made_[next_registered_++]);
  }
  const zip::Entry* record = internal::Access::state(storage).record;
  PTHLOAD_ASSERT(record != nullptr && checkpoint_.archive);  // made by resolve() for a record
  const auto record_index =
      static_cast<std::size_t>(record - checkpoint_.archive->entries().data());
  PTHLOAD_ASSERT(storage_by_record_[record_index] != 0);
  next_registered_ = storage_by_record_[record_index];
  return registered(made_[next_registered_ - 1]);
}

}  // namespace pthload::torch
