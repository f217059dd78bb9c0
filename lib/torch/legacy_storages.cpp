// LegacyStorages: 6-tuple persistent ids → root storages and views, then their file ranges
// (torch/serialization.py _legacy_load: persistent_load and the loop over the storage keys).
#include "torch/legacy_storages.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "checkpoint/access.hpp"
#include "common/check.hpp"
#include "common/checked.hpp"
#include "pickle/codecs.hpp"
#include "pthload/error.hpp"
#include "torch/storage_types.hpp"

namespace pthload::torch {
namespace {

using pickle::Kind;
using pickle::Value;

[[noreturn]] void bad_id(std::string_view what) {
  throw FormatError(Errc::kTorchBadPersistentId, fmt::format("legacy persistent id: {}", what));
}

// Keys are str(storage._cdata); locations may be bytes under encoding='bytes' (torch decodes
// them as ASCII: _maybe_decode_ascii).
std::string text_of(const Value& value, std::string_view what) {
  if (value.is(Kind::kString) || value.is(Kind::kPython2String)) {
    return std::string(value.as_string());
  }
  if (value.is(Kind::kBytes)) {
    const auto bytes = value.as_bytes();
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
  }
  if (value.is(Kind::kInt)) return std::to_string(value.as_int());
  bad_id(fmt::format("{} is a {}, not a string", what, pickle::kind_name(value.kind())));
}

std::uint64_t count_of(const Value& value, std::string_view what) {
  if (!value.is(Kind::kInt) || value.as_int() < 0) {
    bad_id(fmt::format("{} is not a non-negative int", what));
  }
  return static_cast<std::uint64_t>(value.as_int());
}

bool is_text(const Value& value, std::string_view text) {
  return (value.is(Kind::kString) || value.is(Kind::kPython2String)) && value.as_string() == text;
}

// The fields of a ('storage', type, root_key, location, numel, view_metadata) id.
std::span<const Value* const> storage_fields(const Value& id) {
  const auto fields = id.items();
  if (!id.is(Kind::kTuple) || fields.size() != 6 || !is_text(*fields[0], "storage")) {
    bad_id("not a ('storage', type, root_key, location, numel, view_metadata) tuple");
  }
  return fields;
}

struct ViewMetadata {
  std::string key;
  std::uint64_t offset;  // elements of the id's storage type
  std::uint64_t numel;
};

std::optional<ViewMetadata> view_metadata(const Value& value) {
  if (value.is(Kind::kNone)) return std::nullopt;
  const auto items = value.items();
  if (!value.is(Kind::kTuple) || items.size() != 3) {
    bad_id("view_metadata is not None or a (view_key, offset, numel) tuple");
  }
  return ViewMetadata{.key = text_of(*items[0], "view key"),
                      .offset = count_of(*items[1], "view offset"),
                      .numel = count_of(*items[2], "view numel")};
}

}  // namespace

const Value* LegacyStorages::on_persistent_id(const Value& id) {
  refuse_text_persistent_id(id);
  const auto items = id.items();
  if (!id.is(Kind::kTuple) || items.empty()) bad_id("not a tuple");
  // A pickled nn.Module class with its source: torch returns the class, for us an opaque value.
  if (is_text(*items[0], "module")) return nullptr;
  if (!is_text(*items[0], "storage")) bad_id("unknown saved id type (not 'storage' or 'module')");
  const auto fields = storage_fields(id);

  std::optional<Dtype> dtype;
  if (fields[1]->is(Kind::kGlobal)) dtype = storage_type_dtype(fields[1]->name());
  std::string root_key = text_of(*fields[2], "root key");
  if (!dtype) {
    throw FormatError(Errc::kTorchUnknownStorageType,
                      fmt::format("storage '{}': unknown storage type", root_key));
  }
  const std::uint64_t element = element_size(*dtype);
  auto root = roots_.find(root_key);
  if (root == roots_.end()) {
    const std::uint64_t numel = count_of(*fields[4], "numel");
    const auto nbytes = common::checked_mul(numel, element);
    if (!nbytes) {
      throw FormatError(Errc::kTorchStorageTooSmall,
                        fmt::format("storage '{}': {} elements overflow", root_key, numel));
    }
    internal::StorageState state;
    state.key = root_key;
    state.location = text_of(*fields[3], "location");
    state.dtype = *dtype;
    state.numel = numel;
    state.nbytes = *nbytes;
    auto storage = internal::Access::make_storage(std::move(state));
    (void)internal::Access::add_storage(checkpoint_, storage);
    root = roots_.emplace(std::move(root_key), std::move(storage)).first;
  }

  auto view = view_metadata(*fields[5]);
  if (!view || views_.contains(view->key)) return nullptr;  // torch caches views by key too
  const auto byte_offset = common::checked_mul(view->offset, element);
  const auto nbytes = common::checked_mul(view->numel, element);
  const auto end =
      byte_offset && nbytes ? common::checked_add(*byte_offset, *nbytes) : std::nullopt;
  // torch slices the root storage, which would silently clamp such a view; no writer makes one.
  if (!end || *end > root->second->nbytes()) {
    throw FormatError(
        Errc::kLegacyViewOutOfRange,
        fmt::format("storage view '{}' of {} elements at offset {} lies outside its "
                    "root storage '{}' ({} bytes)",
                    view->key, view->numel, view->offset, root->first, root->second->nbytes()));
  }
  views_.emplace(std::move(view->key),
                 View{.root_key = root->first, .byte_offset = *byte_offset, .nbytes = *nbytes});
  return nullptr;
}

StorageRef LegacyStorages::storage_of(const Value& id) const {
  const auto fields = storage_fields(id);
  if (auto view = view_metadata(*fields[5])) {
    const auto found = views_.find(view->key);
    if (found != views_.end()) {
      return {.storage = roots_.at(found->second.root_key),
              .view_byte_offset = found->second.byte_offset,
              .view_nbytes = found->second.nbytes};
    }
  } else if (const auto found = roots_.find(text_of(*fields[2], "root key"));
             found != roots_.end()) {
    return {.storage = found->second};
  }
  // Every id went through on_persistent_id() while the pickle ran.
  bad_id("a storage that the pickle's persistent ids did not make");
}

void LegacyStorages::assign_data(const legacy::Stream& stream) {
  const auto& keys = stream.keys();
  std::vector<std::size_t> element_sizes;
  element_sizes.reserve(keys.size());
  for (const auto& key : keys) {
    const auto found = roots_.find(key);
    // torch asserts `key in deserialized_objects`.
    if (found == roots_.end()) {
      throw FormatError(Errc::kLegacyKeyMismatch,
                        fmt::format("the storage key list names '{}', which no persistent id of "
                                    "the pickle does",
                                    key));
    }
    element_sizes.push_back(element_size(found->second->dtype()));
  }
  if (keys.size() != roots_.size()) {
    // Keys are distinct and each names a root, so some root is missing from the list: torch
    // would leave its bytes uninitialised.
    for (const auto& [key, storage] : roots_) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        throw FormatError(
            Errc::kLegacyKeyMismatch,
            fmt::format("storage '{}' has no data: the storage key list omits it", key));
      }
    }
  }
  const auto data = stream.storage_data(element_sizes);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    auto& state = internal::Access::state(*roots_.at(keys[i]));
    if (data[i].count != state.numel) {
      throw FormatError(Errc::kLegacyStorageSizeMismatch,
                        fmt::format("storage '{}' has wrong size: the pickle says {} elements, "
                                    "the data section {}",
                                    keys[i], state.numel, static_cast<std::int64_t>(data[i].count)),
                        {.offset = data[i].count_offset});
    }
    state.file_range = std::make_unique<internal::FileRange>(internal::FileRange{
        .offset = data[i].bytes.offset, .size = data[i].bytes.size, .file = file_});
  }
}

bool is_load_from_bytes(const Value& value) noexcept {
  return value.is(Kind::kCall) && value.callable().is(Kind::kGlobal) &&
         value.callable().is_global("torch.storage", "_load_from_bytes");
}

std::pair<const Value*, pickle::BytesSpelling::Form> load_from_bytes_key(const Value& call) {
  const auto args = call.args().items();
  if (args.size() == 1) {
    if (const auto spelling = pickle::spelling_of(*args[0])) {
      return {spelling->source, spelling->form};
    }
  }
  return {&call, pickle::BytesSpelling::Form::kRaw};  // refused by load_from_bytes
}

StorageRef load_from_bytes(internal::CheckpointState& checkpoint, const Value& call,
                           const Limits& limits) {
  const auto args = call.args().items();
  const auto bytes = args.size() == 1 ? pickle::bytes_of(*args[0]) : std::nullopt;
  if (!bytes) {
    throw FormatError(Errc::kTorchBadRebuildArguments,
                      "torch.storage._load_from_bytes: its argument is not bytes");
  }
  // A copy: the bytes may be inflated or decoded (_codecs.encode under protocol 2), and the
  // storage may outlive the pickle they came from.
  auto file = std::make_shared<const common::MappedFile>(
      common::MappedFile::from_bytes(std::as_bytes(std::span(bytes->data(), bytes->size()))));
  // Offsets are within the nested stream, which has no name of its own.
  return common::with_context({.record = "<torch.storage._load_from_bytes>"}, [&] {
    LegacyStorages storages(checkpoint, file);
    auto stream = legacy::Stream::parse(
        file->bytes(), limits,
        [&](const Value& id, pickle::ValueArena&) { return storages.on_persistent_id(id); });
    storages.assign_data(stream);
    const Value& root = *stream.main().root;
    if (!root.is(Kind::kPersistent)) {
      throw FormatError(Errc::kTorchBadRebuildArguments,
                        fmt::format("torch.storage._load_from_bytes: the stream holds a {}, not "
                                    "a storage",
                                    pickle::kind_name(root.kind())));
    }
    return storages.storage_of(root.persistent_id());
  });
}

}  // namespace pthload::torch
