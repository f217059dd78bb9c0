// open(): the file → its format → the zip records → data.pkl → storages and named tensors,
// reading no tensor bytes (torch/serialization.py _load; docs/format.md §0, §1).
#include "formats/open.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <new>
#include <thread>
#include <utility>

#include "checkpoint/access.hpp"
#include "checkpoint/parse_threads.hpp"
#include "checkpoint/select.hpp"
#include "checkpoint/state.hpp"
#include "checkpoint/unused_storages.hpp"
#include "common/check.hpp"
#include "common/mapped_file.hpp"
#include "common/phase_marks.hpp"
#include "formats/dcp.hpp"
#include "formats/open.hpp"
#include "formats/other_formats.hpp"
#include "formats/read_image.hpp"
#include "formats/shards.hpp"
#include "formats/torchscript.hpp"
#include "legacy/stream.hpp"
#include "pthload/error.hpp"
#include "safetensors/header.hpp"
#include "torch/legacy_storages.hpp"
#include "torch/naming.hpp"
#include "torch/tensor_builder.hpp"

namespace pthload {
namespace {

constexpr std::array<std::byte, 4> kZipMagic{std::byte{'P'}, std::byte{'K'}, std::byte{3},
                                             std::byte{4}};
bool starts_with(std::span<const std::byte> bytes, std::span<const std::byte> prefix) {
  return bytes.size() >= prefix.size() &&
         std::memcmp(bytes.data(), prefix.data(), prefix.size()) == 0;
}

// A legacy stream opens with the pickle of its magic number (torch.save(pickle_protocol=...)
// chooses its protocol). Protocols 2 to 5 begin it with PROTO (0x80): anything else starting
// with PROTO is also handed to the legacy reader, whose magic number check then explains what is
// wrong, as torch.load's does. Protocols 0 and 1 have no PROTO and write the number as a text
// LONG, "L119547037146038801333356L\n" (pickle.py save_long), which torch.load reads too.
bool is_legacy_stream(std::span<const std::byte> bytes) {
  if (bytes.empty()) return false;
  if (bytes[0] == std::byte{0x80}) return true;
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()),
                              std::min<std::size_t>(bytes.size(), 64));
  if (text[0] != 'L') return false;
  const auto digits_end = text.find_first_not_of("0123456789", 1);
  if (digits_end == 1 || digits_end == std::string_view::npos) return false;
  const auto line_end = text[digits_end] == 'L' ? digits_end + 1 : digits_end;
  return line_end < text.size() && text[line_end] == '\n';
}

// A POSIX tar header has "ustar" at offset 257 (torch ≤ 0.1.x wrote checkpoints as tar files).
bool is_tar(std::span<const std::byte> bytes) {
  return bytes.size() >= 262 && std::memcmp(bytes.data() + 257, "ustar", 5) == 0;
}

std::string_view as_text(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

void open_zip(internal::CheckpointState& state, const LoadOptions& options,
              std::optional<zip::CentralDirectory> central_directory) {
  state.archive = central_directory ? zip::Archive::parse(*state.file, options.limits,
                                                          std::move(*central_directory))
                                    : zip::Archive::parse(*state.file, options.limits);
  const auto& entries = state.archive->entries();
  // torch's reader takes the top folder from the first record (inline_container.cc init).
  if (entries.empty()) {
    throw FormatError(Errc::kTorchNoDataPickle, "the zip archive has no records");
  }
  const auto slash = entries.front().name.find('/');
  if (slash == std::string::npos) {
    throw FormatError(Errc::kTorchNoDataPickle,
                      fmt::format("the first record '{}' is not inside a folder, as torch's "
                                  "records always are",
                                  entries.front().name));
  }
  state.top_folder = entries.front().name.substr(0, slash);
  const std::string prefix = state.top_folder + "/";

  // LoadOptions::verify_crc: every record but the storages, which load() checks as it places
  // them (a partial load reads only the chosen ones).
  if (options.verify_crc) {
    const std::string storages = prefix + "data/";
    for (const zip::Entry& entry : entries) {
      if (entry.name.compare(0, storages.size(), storages) != 0) state.archive->verify_crc(entry);
    }
  }

  // torch.jit.save writes constants.pkl beside data.pkl (docs/format.md §1.5).
  const zip::Entry* constants_pickle = state.archive->find(prefix + "constants.pkl");
  if (constants_pickle != nullptr) state.format = Format::kTorchScript;
  const zip::Entry* data_pickle = state.archive->find(prefix + "data.pkl");
  if (data_pickle == nullptr) {
    throw FormatError(Errc::kTorchNoDataPickle,
                      fmt::format("no {}data.pkl: not a torch.save checkpoint", prefix));
  }
  if (const zip::Entry* byteorder = state.archive->find(prefix + "byteorder")) {
    const auto record = state.archive->read(*byteorder);
    const std::string_view order = as_text(record.bytes());
    if (order == "big") {
      state.big_endian = true;
    } else if (order != "little") {
      throw FormatError(
          Errc::kTorchBadByteOrder,
          fmt::format("byteorder record says '{}', not 'little' or 'big'", order.substr(0, 16)),
          {.record = std::string(byteorder->name)});
    }
  }
  common::phases::end("parse the archive");

  auto pickle_bytes = state.archive->read(*data_pickle);
  common::with_context({.record = data_pickle->name}, [&] {
    pickle::Machine machine(options.limits);
    const auto bytes = pickle_bytes.bytes();
    torch::TensorBuilder builder(state, prefix + "data/", options.limits);
    pickle::RunOptions run_options;
    if (bytes.size() >= internal::kPrebuildPickleBytes && internal::uses_parse_thread(options)) {
      // The worker reserves the list, for as many tensors as it may rebuild.
      builder.prebuild_during(run_options, bytes.size());
    } else {
      // About one tensor per storage record: growing the list 17 times for 100 000 tensors
      // moved more bytes than naming them did.
      state.tensors.reserve(state.archive->entries().size());
    }
    state.pickle = machine.run(bytes, run_options);
    common::phases::end("run the pickle");
    // The worker may still be rebuilding: the walk names its tensors beside it.
    builder.prebuilding_done();
    state.pickle_bytes.emplace(std::move(pickle_bytes));
    torch::collect_named_tensors(*state.pickle.root, state.pickle.end_offset, builder,
                                 options.limits, state.tensors, state.opaque_values);
    common::phases::end("name the tensors");
  });
  if (constants_pickle != nullptr) {
    formats::read_torchscript_constants(state, *constants_pickle, prefix, options);
  }
}

// The pre-1.6 stream: its pickles, then its storages' ranges of the file (docs/format.md §5.1).
void open_legacy(internal::CheckpointState& state, const LoadOptions& options) {
  torch::LegacyStorages storages(state);
  auto stream = legacy::Stream::parse(
      state.file->bytes(), options.limits,
      [&](const pickle::Value& id, pickle::ValueArena&) { return storages.on_persistent_id(id); });
  storages.assign_data(stream);
  state.pickle = std::move(stream.main());
  torch::TensorBuilder builder(state, storages, options.limits);
  torch::collect_named_tensors(*state.pickle.root, state.pickle.end_offset, builder, options.limits,
                               state.tensors, state.opaque_values);
}

// Keeps what Checkpoint::to() needs of `options` to place the storages as load() would.
Checkpoint remember_options(Checkpoint checkpoint, const LoadOptions& options) {
  LoadOptions& kept = internal::Access::state(checkpoint).open_options;
  kept = options;
  kept.map_location = {};
  kept.filter = {};
  return checkpoint;
}

}  // namespace

namespace formats {

Checkpoint open_mapped(std::shared_ptr<const common::MappedFile> file, std::string path,
                       const LoadOptions& options,
                       std::optional<zip::CentralDirectory> central_directory) {
  auto state = std::make_unique<internal::CheckpointState>();
  // Before any storage joins: Access::add_storage gives each the limit on overlapping views.
  state->open_options.limits = options.limits;
  state->path = std::move(path);
  state->file = std::move(file);
  common::with_context(
      {.path = state->path}, "reading the checkpoint's structure (index, pickle, records)", [&] {
        const auto bytes = state->file->bytes();
        if (starts_with(bytes, kZipMagic)) {
          state->format = Format::kZip;
          try {
            open_zip(*state, options, std::move(central_directory));
          } catch (FormatError& e) {
            // A zip without torch's records may be another tool's archive: say which.
            const auto other = e.code() == Errc::kTorchNoDataPickle && state->archive
                                   ? formats::foreign_zip_format(*state->archive)
                                   : std::nullopt;
            if (!other) throw;
            throw FormatError(Errc::kTorchUnsupportedFormat,
                              fmt::format("not a PyTorch checkpoint: this is {}", *other),
                              {.offset = 0});
          }
        } else if (safetensors::looks_like_safetensors(bytes)) {
          // Before the legacy check: a header size of 128 + 256k makes the first byte 0x80.
          state->format = Format::kSafetensors;
          formats::open_safetensors(*state);
        } else if (is_legacy_stream(bytes)) {
          state->format = Format::kLegacy;
          open_legacy(*state, options);
        } else if (is_tar(bytes)) {
          // torch ≤ 0.1.x (early 2017) wrote tar files; torch stopped writing them in 0.1.10 and
          // refuses them with weights_only=True since 2.6. Kept out of scope: docs/format.md §5.2.
          throw UnsupportedError(
              Errc::kLegacyTarUnsupported,
              "this is a tar-format checkpoint from torch 0.1.x (before 2017), "
              "which pthload does not read; load it with torch and save it again",
              {.offset = 0});
        } else if (const auto other = formats::foreign_format(bytes)) {
          throw FormatError(Errc::kTorchUnsupportedFormat,
                            fmt::format("not a PyTorch checkpoint: this is {}", *other),
                            {.offset = 0});
        } else {
          throw FormatError(Errc::kTorchUnsupportedFormat,
                            "not a PyTorch checkpoint: neither a zip archive, a legacy torch.save "
                            "stream nor a safetensors file",
                            {.offset = 0});
        }
        internal::record_unused_storages(*state);
        common::phases::end("find unused storages");
      });
  return internal::Access::make_checkpoint(std::move(state));
}

}  // namespace formats

Checkpoint open(const std::filesystem::path& path, const LoadOptions& options) {
  const std::string& name = path.native();  // no allocation before the handler
  return common::with_context({.path = name}, "opening", [&] {
    // A directory with a .metadata file, or that file: torch.distributed.checkpoint's (options
    // applied there).
    if (formats::is_dcp_directory(path))
      return remember_options(formats::open_dcp(path, options), options);
    if (const auto directory = formats::dcp_directory_of_metadata(path)) {
      return remember_options(formats::open_dcp(*directory, options), options);
    }
    // A directory or a *.index.json file: a sharded checkpoint, its shards opened as one.
    // (It applies options' select, renames and filters itself, shard by shard.)
    if (const auto index = formats::shard_index_of(path)) {
      return remember_options(formats::open_sharded(*index, options), options);
    }
    auto opened = formats::open_checkpoint_file(path, options);
    common::phases::end("read the structure");
    auto checkpoint = formats::open_mapped(std::move(opened.file), name, options,
                                           std::move(opened.central_directory));
    internal::choose_tensors(internal::Access::state(checkpoint), options);
    common::phases::end("choose tensors");
    return remember_options(std::move(checkpoint), options);
  });
}

Checkpoint open(std::span<const std::byte> bytes, const LoadOptions& options) {
  auto checkpoint = formats::open_mapped(
      std::make_shared<const common::MappedFile>(common::MappedFile::borrow(bytes)), "<memory>",
      options);
  internal::choose_tensors(internal::Access::state(checkpoint), options);
  return remember_options(std::move(checkpoint), options);
}

}  // namespace pthload
