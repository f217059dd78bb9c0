// Composing a torch.distributed.checkpoint directory into one Checkpoint: .metadata through
// lib/dcp, each chosen tensor's items (torch.save streams at the offsets it records; filesystem.py
// _write_item) opened as checkpoints of their own and moved in, several chunks assembled as
// FileSystemReader.read_data + narrow_tensor_by_index place them into dcp.load's tensor.
#include "formats/dcp.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <system_error>

#include "checkpoint/access.hpp"
#include "checkpoint/select.hpp"
#include "checkpoint/state.hpp"
#include "common/check.hpp"
#include "common/checked.hpp"
#include "dcp/metadata.hpp"
#include "formats/open.hpp"
#include "formats/parts.hpp"
#include "pthload/error.hpp"

namespace pthload::formats {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kMetadataName = ".metadata";

// The directory's .distcp files, each opened once, when a chosen tensor first needs it.
class ItemFiles {
 public:
  ItemFiles(const fs::path& directory, const LoadOptions& options)
      : directory_(directory), options_(options) {}

  fs::path path_of(const dcp::ItemLocation& location) const {
    return directory_ / location.relative_path;
  }

  // The bytes of one item, checked against its file; with io=read, read into the file's image.
  std::pair<std::shared_ptr<const common::MappedFile>, std::span<const std::byte>> item(
      const dcp::ItemLocation& location) {
    auto& file = files_[location.relative_path];
    const fs::path path = path_of(location);
    if (!file) {
      // The metadata names the file: a FIFO would block the open and /dev/zero be read without
      // end, whichever io strategy reads it.
      std::error_code ignored;
      if (!fs::is_regular_file(path, ignored)) {
        throw IoError(Errc::kIoOpenFailed, "no such file (or not a regular file)",
                      {.path = path.string()});
      }
      if (options_.io == IoStrategy::kRead) {
        file = std::make_shared<const common::MappedFile>(
            common::MappedFile::image(common::FileReader::open(path)));
      } else {
        // Mapped as it is: a .distcp file is no one zip archive (its items are, back to back),
        // so the io=map image that reads a checkpoint's zip index with pread does not apply.
        common::with_context({.path = path.string()}, [&] {
          file = std::make_shared<const common::MappedFile>(common::MappedFile::open(path));
        });
      }
    }
    const auto size = file->bytes().size();
    if (!common::fits(location.offset, location.length, size)) {
      throw FormatError(Errc::kDcpItemOutOfBounds,
                        fmt::format("the item at offset {}, {} bytes long, runs past the end of "
                                    "the file ({} bytes)",
                                    location.offset, location.length, size),
                        {.path = path.string(), .offset = location.offset});
    }
    // An image's items are read whole: the zip index and pickle at its ends, the storage
    // between them (placement copies it out again with pread: the image is never viewed).
    if (file->has_holes()) file->fill(location.offset, location.length);
    return {file, file->bytes().subspan(static_cast<std::size_t>(location.offset),
                                        static_cast<std::size_t>(location.length))};
  }

 private:
  fs::path directory_;
  const LoadOptions& options_;
  std::map<std::string, std::shared_ptr<const common::MappedFile>> files_;
};

// One chunk's item, opened: a torch.save stream of the chunk's tensor and nothing else.
struct OpenedItem {
  Checkpoint checkpoint;
  std::shared_ptr<const common::MappedFile> file;
  const Tensor* tensor = nullptr;
};

OpenedItem open_item(ItemFiles& files, const dcp::Entry& entry, const dcp::Chunk& chunk,
                     Dtype dtype, const LoadOptions& options) {
  // Named, not a structured binding: clang before 16 cannot capture bindings in the lambda.
  const auto file_and_bytes = files.item(chunk.location);
  const std::shared_ptr<const common::MappedFile>& file = file_and_bytes.first;
  const std::span<const std::byte> bytes = file_and_bytes.second;
  const std::string where =
      fmt::format("{}+{}", chunk.location.relative_path, chunk.location.offset);
  const std::string path = files.path_of(chunk.location).string();
  return common::with_context({.path = path, .record = where}, [&] {
    // FileSystemWriter(serialization_format=SAFETENSORS) writes each file as a safetensors file
    // whose items are raw tensor bytes: no torch.save stream to open.
    constexpr std::string_view kZipMagic{"PK\x03\x04", 4};
    if (bytes.size() < kZipMagic.size() ||
        std::memcmp(bytes.data(), kZipMagic.data(), kZipMagic.size()) != 0) {
      throw UnsupportedError(Errc::kDcpItemMismatch,
                             fmt::format("the item of tensor '{}' is not a torch.save stream "
                                         "(FileSystemWriter's serialization_format=SAFETENSORS "
                                         "writes raw bytes, which pthload does not read)",
                                         entry.fqn),
                             {.offset = chunk.location.offset});
    }
    Checkpoint item =
        open_mapped(std::make_shared<const common::MappedFile>(common::MappedFile::borrow(bytes)),
                    where, options);
    auto& item_state = internal::Access::state(item);
    const auto mismatch = [&](const std::string& what) {
      return FormatError(Errc::kDcpItemMismatch,
                         fmt::format("the item of tensor '{}' {}", entry.fqn, what),
                         {.offset = chunk.location.offset});
    };
    if (item_state.format != Format::kZip || item_state.tensors.size() != 1 ||
        !item_state.tensors.front().name.empty()) {
      throw mismatch("is not a torch.save stream of one tensor");
    }
    const Tensor& tensor = item_state.tensors.front().tensor;
    if (tensor.layout() != Layout::kStrided || !tensor.has_storage() ||
        tensor.quantization() != nullptr) {
      throw mismatch("is not a dense tensor with a storage");
    }
    if (tensor.dtype() != dtype) {
      throw mismatch(fmt::format("is {}, the metadata says {}", dtype_name(tensor.dtype()),
                                 dtype_name(dtype)));
    }
    const auto sizes = tensor.sizes();
    if (!std::equal(sizes.begin(), sizes.end(), chunk.sizes.begin(), chunk.sizes.end(),
                    [](std::int64_t a, std::uint64_t b) {
                      return a >= 0 && static_cast<std::uint64_t>(a) == b;
                    })) {
      throw mismatch(fmt::format("has shape ({}), the chunk ({})", fmt::join(sizes, ", "),
                                 fmt::join(chunk.sizes, ", ")));
    }
    for (const auto& storage : item_state.storages) {
      point_at_file(internal::Access::state(*storage), file, chunk.location.offset);
    }
    OpenedItem opened{.checkpoint = std::move(item), .file = file, .tensor = nullptr};
    opened.tensor = &internal::Access::state(opened.checkpoint).tensors.front().tensor;
    return opened;
  });
}

// Copies the chunk `item` holds into `whole` (the row-major bytes of a tensor of `size`), at the
// chunk's offsets: runs along the last dimension when the item's tensor is contiguous there,
// else element by element. `fqn` names the tensor in errors.
void copy_chunk(const OpenedItem& item, const dcp::Chunk& chunk, std::string_view fqn,
                const std::vector<std::uint64_t>& size, std::span<std::byte> whole) {
  const Tensor& tensor = *item.tensor;
  const auto& storage = internal::Access::state(tensor.storage());
  const std::size_t element = element_size(tensor.dtype());
  const auto& range = *storage.file_range;  // point_at_file made every storage a range
  // Not zero-filled: copy_out writes every byte.
  common::AlignedBuffer source_buffer(static_cast<std::size_t>(storage.nbytes));
  const std::span<std::byte> source = source_buffer.span();
  if (!source.empty()) {
    item.file->copy_out(item.file->bytes().subspan(static_cast<std::size_t>(range.offset),
                                                   static_cast<std::size_t>(range.size)),
                        source);
  }
  const std::size_t dims = size.size();
  const auto strides = tensor.strides();
  std::uint64_t chunk_numel = 1;
  std::uint64_t last = static_cast<std::uint64_t>(tensor.storage_offset());
  for (std::size_t d = 0; d < dims; ++d) {
    chunk_numel *= chunk.sizes[d];
    if (strides[d] < 0)
      throw UnsupportedError(Errc::kDcpItemMismatch,
                             fmt::format("the item of tensor '{}' has a negative stride", fqn));
    if (chunk.sizes[d] > 0) last += (chunk.sizes[d] - 1) * static_cast<std::uint64_t>(strides[d]);
  }
  if (chunk_numel == 0) return;
  if (tensor.storage_offset() < 0 || (last + 1) * element > source.size()) {
    throw FormatError(Errc::kDcpItemMismatch,
                      fmt::format("the item of tensor '{}' views past its storage", fqn));
  }
  // Row-major strides of the whole tensor, in elements.
  std::vector<std::uint64_t> whole_strides(dims, 1);
  for (std::size_t d = dims; d-- > 1;)
    whole_strides[d - 1] = whole_strides[d] * size[d];

  const bool runs = dims > 0 && strides[dims - 1] == 1;
  const std::uint64_t run = runs ? chunk.sizes[dims - 1] : 1;
  std::vector<std::uint64_t> index(dims, 0);
  for (std::uint64_t done = 0; done < chunk_numel; done += run) {
    std::uint64_t from = static_cast<std::uint64_t>(tensor.storage_offset());
    std::uint64_t to = 0;
    for (std::size_t d = 0; d < dims; ++d) {
      from += index[d] * static_cast<std::uint64_t>(strides[d]);
      to += (chunk.offsets[d] + index[d]) * whole_strides[d];
    }
    std::memcpy(whole.data() + to * element, source.data() + from * element, run * element);
    // The next index: the innermost dimension moves by `run`, carrying outwards.
    for (std::size_t d = dims; d-- > 0;) {
      index[d] += d == dims - 1 ? run : 1;
      if (index[d] < chunk.sizes[d]) break;
      index[d] = 0;
    }
  }
}

// A tensor saved in several chunks, assembled into one owned buffer read now, at open().
NamedTensor assemble(ItemFiles& files, const dcp::Entry& entry, Dtype dtype,
                     const std::string& name, const LoadOptions& options,
                     std::vector<std::shared_ptr<Storage>>& storages) {
  std::uint64_t numel = 1;
  for (const auto s : entry.size)
    numel *= s;  // checked by parse_metadata
  const auto nbytes = common::checked_mul(numel, element_size(dtype));
  if (!nbytes || *nbytes > SIZE_MAX) {
    throw FormatError(Errc::kDcpBadChunks, fmt::format("tensor '{}' is too large", entry.fqn));
  }
  // Every item is opened and checked before the buffer is allocated: its size comes from the
  // metadata alone, and only items whose storages hold their chunks' bytes pay for it (the
  // chunks cover the tensor exactly; no two items share bytes, parse_metadata checks). An
  // expanded item (stride 0) would let a few KB of files fill gigabytes.
  std::vector<OpenedItem> items;
  items.reserve(entry.chunks.size());
  std::size_t swap_unit = 0;
  for (const auto& chunk : entry.chunks) {
    OpenedItem item = open_item(files, entry, chunk, dtype, options);
    const Storage& storage = item.tensor->storage();
    if (item.tensor->nbytes() > storage.nbytes()) {
      throw FormatError(
          Errc::kDcpItemMismatch,
          fmt::format("the item of tensor '{}' shows {} bytes over a storage of {} "
                      "(an expanded view): assembling it would write more than the "
                      "file holds",
                      entry.fqn, item.tensor->nbytes(), storage.nbytes()),
          {.path = files.path_of(chunk.location).string(), .offset = chunk.location.offset});
    }
    const std::size_t unit = internal::Access::state(storage).swap_unit;
    if (swap_unit != 0 && unit != swap_unit) {
      throw UnsupportedError(Errc::kDcpItemMismatch,
                             fmt::format("tensor '{}' has chunks of both byte orders", entry.fqn));
    }
    swap_unit = unit;
    items.push_back(std::move(item));
  }
  // Not zero-filled: the chunks were checked to cover the tensor exactly, so every byte is
  // written once.
  common::AlignedBuffer whole_buffer(static_cast<std::size_t>(*nbytes));
  const std::span<std::byte> whole = whole_buffer.span();
  for (std::size_t i = 0; i < items.size(); ++i) {
    const dcp::Chunk& chunk = entry.chunks[i];
    common::with_context(
        {.path = files.path_of(chunk.location).string(),
         .record = fmt::format("{}+{}", chunk.location.relative_path, chunk.location.offset)},
        [&] { copy_chunk(items[i], chunk, entry.fqn, entry.size, whole); });
  }
  internal::StorageState storage_state;
  storage_state.key = entry.fqn;
  storage_state.location = "cpu";  // FileSystemWriter saves CPU tensors only
  storage_state.dtype = dtype;
  storage_state.numel = numel;
  storage_state.nbytes = *nbytes;
  storage_state.swap_unit = static_cast<std::uint8_t>(std::max<std::size_t>(swap_unit, 1));
  storage_state.max_overlapping_view_bytes = options.limits.max_overlapping_view_bytes;
  storage_state.file_range = std::make_unique<internal::FileRange>(
      internal::FileRange{.offset = 0,
                          .size = *nbytes,
                          .file = std::make_shared<const common::MappedFile>(
                              common::MappedFile::adopt(std::move(whole_buffer)))});
  auto storage = internal::Access::make_storage(std::move(storage_state));
  std::vector<std::int64_t> sizes(entry.size.begin(), entry.size.end());
  std::vector<std::int64_t> strides(sizes.size(), 1);
  for (std::size_t d = sizes.size(); d-- > 1;)
    strides[d - 1] = strides[d] * sizes[d];
  NamedTensor named{
      .name = name,
      .tensor = internal::Access::make_tensor(storage, dtype, sizes, strides, 0, false)};
  storages.push_back(std::move(storage));
  return named;
}

bool is_whole(const dcp::Entry& entry) {
  if (entry.chunks.size() != 1) return false;
  const auto& chunk = entry.chunks.front();
  return chunk.sizes == entry.size &&
         std::all_of(chunk.offsets.begin(), chunk.offsets.end(), [](auto o) { return o == 0; });
}

}  // namespace

bool is_dcp_directory(const fs::path& path) {
  std::error_code ignored;
  return fs::is_directory(path, ignored) && fs::is_regular_file(path / kMetadataName, ignored);
}

std::optional<fs::path> dcp_directory_of_metadata(const fs::path& path) {
  if (path.filename() != kMetadataName) return std::nullopt;
  fs::path directory = path.parent_path();
  if (directory.empty()) directory = ".";
  if (is_dcp_directory(directory)) return directory;
  return std::nullopt;
}

Checkpoint open_dcp(const fs::path& directory, const LoadOptions& options) {
  auto state = std::make_unique<internal::CheckpointState>();
  state->path = directory.string();
  state->format = Format::kDcp;
  const fs::path metadata_path = directory / kMetadataName;
  common::with_context(
      {.path = state->path},
      "reading the checkpoint's metadata or assembling a tensor from its chunks", [&] {
        state->file = open_file(metadata_path, options).file;
        dcp::Metadata metadata;
        common::with_context({.path = metadata_path.string()}, [&] {
          metadata = dcp::parse_metadata(state->file->bytes(), options.limits);
        });
        if (!metadata.version.empty()) state->metadata.emplace_back("version", metadata.version);

        ItemFiles files(directory, options);
        bool selected_any = false;
        for (const auto& entry : metadata.entries) {
          auto name = internal::renamed(options, entry.fqn);
          selected_any = selected_any || name.has_value();
          if (!name || !internal::chosen(options, *name)) continue;
          if (!entry.is_tensor) {
            const auto& location = *entry.bytes_location;
            state->opaque_values.push_back(
                {.name = std::move(*name),
                 .reason =
                     fmt::format("a torch.distributed.checkpoint bytes item (a value dcp.save "
                                 "pickled with torch.save: {} bytes at {}+{}), not read",
                                 location.length, location.relative_path, location.offset)});
            continue;
          }
          const auto dtype = dtype_from_name(entry.dtype_name);
          if (!dtype) {
            throw UnsupportedError(Errc::kTorchUnknownDtype,
                                   fmt::format("tensor '{}' has dtype torch.{}, which pthload does "
                                               "not know",
                                               entry.fqn, entry.dtype_name),
                                   {.path = metadata_path.string()});
          }
          if (!is_whole(entry)) {
            state->tensors.push_back(
                assemble(files, entry, *dtype, *name, options, state->storages));
            continue;
          }
          OpenedItem item = open_item(files, entry, entry.chunks.front(), *dtype, options);
          auto& item_state = internal::Access::state(item.checkpoint);
          state->tensors.push_back({.name = std::move(*name), .tensor = *item.tensor});
          std::move(item_state.storages.begin(), item_state.storages.end(),
                    std::back_inserter(state->storages));
          std::move(item_state.unused_storages.begin(), item_state.unused_storages.end(),
                    std::back_inserter(state->unused_storages));
          // The item's checkpoint (its pickle, its borrowed bytes) goes: nothing moved out of it
          // points in, and its storages keep the .distcp file they read from.
        }
        if (!options.filter.select.empty() && !selected_any) {
          throw FormatError(Errc::kSelectNotFound,
                            fmt::format("select '{}' names nothing of the checkpoint: no name is "
                                        "'{}.<name>'",
                                        options.filter.select, options.filter.select));
        }
        // Renames may merge two names (storages are already only the chosen tensors').
        std::set<std::string_view> names;
        for (const auto& named : state->tensors) {
          if (!names.insert(named.name).second) {
            throw FormatError(Errc::kSelectNameCollision,
                              fmt::format("two tensors are renamed to '{}'", named.name));
          }
        }
      });
  return internal::Access::make_checkpoint(std::move(state));
}

}  // namespace pthload::formats
