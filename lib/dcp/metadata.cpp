// Interpreting DCP's `.metadata` pickle (torch/distributed/checkpoint/metadata.py: Metadata,
// TensorStorageMetadata, TensorProperties.__getstate__, ChunkStorageMetadata, MetadataIndex;
// filesystem.py: _StorageInfo). The pickle layer builds opaque Calls of these classes; nothing
// is called, and every field is checked before anything trusts it.
#include "dcp/metadata.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "common/checked.hpp"
#include "pickle/machine.hpp"
#include "pthload/error.hpp"

namespace pthload::dcp {
namespace {

constexpr std::string_view kMetadataModule = "torch.distributed.checkpoint.metadata";
constexpr std::string_view kFilesystemModule = "torch.distributed.checkpoint.filesystem";
// Pairwise disjointness of a tensor's chunks costs n² box tests: far above the ranks one tensor
// is sharded over in practice, low enough that a hostile file cannot stall open().
constexpr std::size_t kMaxChunksPerTensor = 8192;

[[noreturn]] void bad(std::string message) {
  throw FormatError(Errc::kDcpBadMetadata, std::move(message));
}

// Whether `value` is an object a pickle made of `module.name` (NEWOBJ or REDUCE of that global).
bool is_object_of(const pickle::Value& value, std::string_view module, std::string_view name) {
  return value.is(pickle::Kind::kCall) && value.callable().is(pickle::Kind::kGlobal) &&
         value.callable().is_global(module, name);
}

std::string describe(const pickle::Value& value) {
  if (value.is(pickle::Kind::kCall) && value.callable().is(pickle::Kind::kGlobal)) {
    return fmt::format("a {}.{} object", value.callable().module(), value.callable().name());
  }
  return fmt::format("a {}", pickle::kind_name(value.kind()));
}

// The dict BUILD gave an object of `module.name` (a dataclass's __dict__, or its __getstate__).
const pickle::Value& object_state(const pickle::Value& value, std::string_view module,
                                  std::string_view name, std::string_view what) {
  if (!is_object_of(value, module, name)) {
    bad(fmt::format("{} is {}, not a {}.{}", what, describe(value), module, name));
  }
  const pickle::Value* state = value.state();
  if (state == nullptr) bad(fmt::format("{} ({}) has no state", what, name));
  return *state;
}

// A dict's value for the text key `key` (the last one, as Python keeps), or nullptr.
const pickle::Value* field(const pickle::Value& dict, std::string_view key) {
  const pickle::Value* found = nullptr;
  for (const auto& item : dict.dict_items()) {
    if (item.key->is(pickle::Kind::kString) && item.key->as_string() == key) found = item.value;
  }
  return found;
}

const pickle::Value& required_field(const pickle::Value& dict, std::string_view key,
                                    std::string_view what) {
  if (!dict.is(pickle::Kind::kDict)) bad(fmt::format("{}'s state is not a dict", what));
  const pickle::Value* value = field(dict, key);
  if (value == nullptr) bad(fmt::format("{} has no '{}'", what, key));
  return *value;
}

std::string text(const pickle::Value& value, std::string_view what) {
  if (!value.is(pickle::Kind::kString)) {
    bad(fmt::format("{} is {}, not a str", what, describe(value)));
  }
  return std::string(value.as_string());
}

std::uint64_t non_negative(const pickle::Value& value, std::string_view what) {
  if (!value.is(pickle::Kind::kInt) || value.as_int() < 0) {
    bad(fmt::format(
        "{} is {}, not an int >= 0", what,
        value.is(pickle::Kind::kInt) ? fmt::format("{}", value.as_int()) : describe(value)));
  }
  return static_cast<std::uint64_t>(value.as_int());
}

// torch.Size(tuple) as pickled (REDUCE of torch.Size), or a bare tuple or list of ints.
std::vector<std::uint64_t> size_of(const pickle::Value& value, std::string_view what) {
  const pickle::Value* sequence = &value;
  if (is_object_of(value, "torch", "Size")) {
    if (value.args().items().size() != 1) bad(fmt::format("{}: torch.Size takes one tuple", what));
    sequence = value.args().items()[0];
  }
  if (!sequence->is(pickle::Kind::kTuple) && !sequence->is(pickle::Kind::kList)) {
    bad(fmt::format("{} is {}, not a torch.Size", what, describe(*sequence)));
  }
  std::vector<std::uint64_t> sizes;
  sizes.reserve(sequence->items().size());
  for (const pickle::Value* item : sequence->items())
    sizes.push_back(non_negative(*item, what));
  return sizes;
}

// TensorProperties pickles its __getstate__ tuple (dtype, layout, requires_grad, memory format
// encoding, pin_memory[, strides]); older torch pickled its __dict__.
std::string dtype_name_of(const pickle::Value& properties, std::string_view fqn) {
  const auto what = fmt::format("tensor '{}': properties", fqn);
  const auto& state = object_state(properties, kMetadataModule, "TensorProperties", what);
  const pickle::Value* dtype = nullptr;
  const pickle::Value* layout = nullptr;
  if (state.is(pickle::Kind::kTuple)) {
    if (state.items().size() < 5)
      bad(fmt::format("{}: a state tuple of {}", what, state.items().size()));
    dtype = state.items()[0];
    layout = state.items()[1];
  } else if (state.is(pickle::Kind::kDict)) {
    dtype = &required_field(state, "dtype", what);
    layout = field(state, "layout");
  } else {
    bad(fmt::format("{}: a state that is {}", what, describe(state)));
  }
  if (!dtype->is(pickle::Kind::kGlobal) || dtype->module() != "torch") {
    bad(fmt::format("{}: dtype is {}, not a torch dtype", what, describe(*dtype)));
  }
  // torch.serialization._get_layout("torch.strided"): DCP saves dense tensors only.
  if (layout != nullptr && is_object_of(*layout, "torch.serialization", "_get_layout") &&
      layout->args().items().size() == 1 && layout->args().items()[0]->is(pickle::Kind::kString) &&
      layout->args().items()[0]->as_string() != "torch.strided") {
    throw UnsupportedError(Errc::kDcpBadMetadata,
                           fmt::format("tensor '{}' has layout {}: pthload reads DCP's strided "
                                       "tensors only",
                                       fqn, layout->args().items()[0]->as_string()));
  }
  return std::string(dtype->name());
}

using ItemKey = std::pair<std::string, std::optional<std::vector<std::uint64_t>>>;

// A file name of the directory: DCP writes "__<rank>_<n>.distcp"; anything that could leave the
// directory (a hostile .metadata naming "../../etc/passwd") is refused.
void check_relative_path(const std::string& path) {
  if (path.empty() || path == "." || path == ".." || path.find('/') != std::string::npos ||
      path.find('\\') != std::string::npos || path.find('\0') != std::string::npos) {
    throw FormatError(Errc::kShardNameUnsafe,
                      fmt::format("storage item path '{}' is not a plain file name of the "
                                  "checkpoint's directory",
                                  path));
  }
}

std::map<ItemKey, ItemLocation> read_storage_data(const pickle::Value& storage_data) {
  if (!storage_data.is(pickle::Kind::kDict)) {
    bad(
        fmt::format("storage_data is {}, not a dict (a storage writer other than "
                    "FileSystemWriter?)",
                    describe(storage_data)));
  }
  std::map<ItemKey, ItemLocation> items;
  for (const auto& item : storage_data.dict_items()) {
    const auto& index =
        object_state(*item.key, kMetadataModule, "MetadataIndex", "a storage_data key");
    std::string fqn = text(required_field(index, "fqn", "MetadataIndex"), "MetadataIndex.fqn");
    std::optional<std::vector<std::uint64_t>> offset;
    if (const pickle::Value* o = field(index, "offset");
        o != nullptr && !o->is(pickle::Kind::kNone)) {
      offset = size_of(*o, fmt::format("MetadataIndex '{}' offset", fqn));
    }
    const auto what = fmt::format("storage item of '{}'", fqn);
    const auto& info = object_state(*item.value, kFilesystemModule, "_StorageInfo", what);
    ItemLocation location{
        .relative_path = text(required_field(info, "relative_path", what), what),
        .offset = non_negative(required_field(info, "offset", what), what + " offset"),
        .length = non_negative(required_field(info, "length", what), what + " length"),
    };
    check_relative_path(location.relative_path);
    if (!common::checked_add(location.offset, location.length)) {
      bad(fmt::format("{}: offset + length overflows", what));
    }
    if (const pickle::Value* t = field(info, "transform_descriptors");
        t != nullptr && !t->is(pickle::Kind::kNone) && !t->items().empty()) {
      throw UnsupportedError(Errc::kDcpTransformUnsupported,
                             fmt::format("{} was written through stream transforms (extensions "
                                         "such as compression), which pthload does not undo",
                                         what));
    }
    const bool inserted = items.emplace(ItemKey{fqn, offset}, std::move(location)).second;
    if (!inserted) bad(fmt::format("{} is listed twice in storage_data", what));
  }
  // FileSystemWriter writes each item once, after the one before. Items that share bytes would
  // let one item's bytes fill any number of chunks, and a few hundred bytes of metadata per
  // chunk buy buffers of gigabytes.
  std::vector<const ItemLocation*> by_place;
  by_place.reserve(items.size());
  for (const auto& [key, location] : items)
    if (location.length > 0) by_place.push_back(&location);
  std::sort(by_place.begin(), by_place.end(), [](const ItemLocation* a, const ItemLocation* b) {
    return std::tie(a->relative_path, a->offset) < std::tie(b->relative_path, b->offset);
  });
  for (std::size_t i = 1; i < by_place.size(); ++i) {
    const ItemLocation& before = *by_place[i - 1];
    const ItemLocation& here = *by_place[i];
    if (before.relative_path == here.relative_path && before.offset + before.length > here.offset) {
      bad(fmt::format("two storage items share bytes of {} (offsets {} and {})", here.relative_path,
                      before.offset, here.offset));
    }
  }
  return items;
}

// A tensor's chunks must lie inside it, not overlap, and together cover it: then assembling
// them writes every element exactly once.
void check_chunks(const Entry& entry) {
  const std::size_t dims = entry.size.size();
  // Assembling strides must fit in an int64, even for an empty tensor. Every chunk lies inside
  // the tensor, so its element count fits too.
  const auto numel = common::row_major_numel(entry.size);
  if (!numel) bad(fmt::format("tensor '{}': its size overflows", entry.fqn));
  if (entry.chunks.size() > kMaxChunksPerTensor) {
    throw UnsupportedError(Errc::kDcpBadChunks,
                           fmt::format("tensor '{}' has {} chunks; pthload reads at most {}",
                                       entry.fqn, entry.chunks.size(), kMaxChunksPerTensor));
  }
  std::uint64_t covered = 0;
  for (const auto& chunk : entry.chunks) {
    if (chunk.offsets.size() != dims || chunk.sizes.size() != dims) {
      throw FormatError(Errc::kDcpBadChunks,
                        fmt::format("tensor '{}' has {} dimensions, a chunk {}", entry.fqn, dims,
                                    chunk.offsets.size()));
    }
    std::uint64_t volume = 1;
    for (std::size_t d = 0; d < dims; ++d) {
      if (!common::fits(chunk.offsets[d], chunk.sizes[d], entry.size[d])) {
        throw FormatError(
            Errc::kDcpBadChunks,
            fmt::format("tensor '{}': a chunk runs past dimension {} (offset {}, "
                        "size {}, of {})",
                        entry.fqn, d, chunk.offsets[d], chunk.sizes[d], entry.size[d]));
      }
      volume *= chunk.sizes[d];  // fits: the chunk lies inside the tensor
    }
    // Chunks that lie inside the tensor and do not overlap hold at most numel elements together;
    // the sum of overlapping ones may pass 64 bits before the overlap is found below.
    const auto sum = common::checked_add(covered, volume);
    if (!sum) {
      throw FormatError(Errc::kDcpBadChunks,
                        fmt::format("tensor '{}': its chunks hold more elements than it has (they "
                                    "overlap)",
                                    entry.fqn));
    }
    covered = *sum;
  }
  for (std::size_t a = 0; a < entry.chunks.size(); ++a) {
    for (std::size_t b = a + 1; b < entry.chunks.size(); ++b) {
      const auto& x = entry.chunks[a];
      const auto& y = entry.chunks[b];
      bool overlap = true;
      for (std::size_t d = 0; d < dims && overlap; ++d) {
        overlap =
            x.offsets[d] < y.offsets[d] + y.sizes[d] && y.offsets[d] < x.offsets[d] + x.sizes[d];
      }
      if (overlap) {
        throw FormatError(Errc::kDcpBadChunks,
                          fmt::format("tensor '{}': chunks {} and {} overlap", entry.fqn, a, b));
      }
    }
  }
  if (covered != *numel) {
    throw FormatError(Errc::kDcpBadChunks,
                      fmt::format("tensor '{}': its chunks hold {} of its {} elements", entry.fqn,
                                  covered, *numel));
  }
}

}  // namespace

Metadata parse_metadata(std::span<const std::byte> bytes, const Limits& limits) {
  pickle::Machine machine(limits);
  const pickle::Result pickled = machine.run(bytes);
  const auto& root = object_state(*pickled.root, kMetadataModule, "Metadata", ".metadata's root");

  Metadata metadata;
  if (const pickle::Value* version = field(root, "version");
      version != nullptr && !version->is(pickle::Kind::kNone)) {
    metadata.version = text(*version, "Metadata.version");
  }
  auto items = read_storage_data(required_field(root, "storage_data", "Metadata"));

  const auto& entries = required_field(root, "state_dict_metadata", "Metadata");
  if (!entries.is(pickle::Kind::kDict)) bad("state_dict_metadata is not a dict");
  for (const auto& item : entries.dict_items()) {
    Entry entry;
    entry.fqn = text(*item.key, "a state_dict_metadata key");
    const pickle::Value& md = *item.value;
    if (is_object_of(md, kMetadataModule, "BytesStorageMetadata")) {
      const auto found = items.find(ItemKey{entry.fqn, std::nullopt});
      if (found == items.end()) {
        bad(fmt::format("bytes item '{}' has no storage_data entry", entry.fqn));
      }
      entry.bytes_location = found->second;
      items.erase(found);
      metadata.entries.push_back(std::move(entry));
      continue;
    }
    const auto what = fmt::format("tensor '{}'", entry.fqn);
    const auto& state = object_state(md, kMetadataModule, "TensorStorageMetadata", what);
    entry.is_tensor = true;
    entry.dtype_name = dtype_name_of(required_field(state, "properties", what), entry.fqn);
    entry.size = size_of(required_field(state, "size", what), what + " size");
    const auto& chunks = required_field(state, "chunks", what);
    if (!chunks.is(pickle::Kind::kList)) bad(fmt::format("{}: chunks is not a list", what));
    for (const pickle::Value* chunk_value : chunks.items()) {
      const auto& chunk_state =
          object_state(*chunk_value, kMetadataModule, "ChunkStorageMetadata", what + " chunk");
      Chunk chunk{
          .offsets = size_of(required_field(chunk_state, "offsets", what), what + " chunk offsets"),
          .sizes = size_of(required_field(chunk_state, "sizes", what), what + " chunk sizes"),
          .location = {},
      };
      const auto found = items.find(ItemKey{entry.fqn, chunk.offsets});
      if (found == items.end()) {
        bad(fmt::format("{}: the chunk at offsets ({}) has no storage_data entry", what,
                        fmt::join(chunk.offsets, ", ")));
      }
      chunk.location = found->second;
      items.erase(found);
      entry.chunks.push_back(std::move(chunk));
    }
    check_chunks(entry);
    metadata.entries.push_back(std::move(entry));
  }
  if (!items.empty()) {
    bad(fmt::format("storage_data lists an item of '{}' that state_dict_metadata has not",
                    items.begin()->first.first));
  }
  return metadata;
}

}  // namespace pthload::dcp
