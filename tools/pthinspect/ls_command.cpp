// `pthinspect ls FILE`: the tensors of a checkpoint, as a table or as JSON (docs/pthinspect.md,
// "ls: names, and the JSON it prints").
#include <chrono>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <pthload/pthload.hpp>

#include "choose.hpp"
#include "commands.hpp"
#include "elements.hpp"
#include "io_option.hpp"
#include "json_layout.hpp"
#include "output.hpp"

namespace pthinspect {
namespace {

struct LsArgs {
  std::string path;
  bool json = false;
  bool checksum = false;
  ChooseArgs choose;
  std::string io = "map";
};

// The saved tag: a storage's, a wrapper subclass's device, "meta" for a meta tensor.
std::string_view location_of(const pthload::Tensor& t) {
  if (t.has_storage()) return t.storage().location();
  if (const pthload::WrapperSubclass* wrapper = t.wrapper_subclass()) return wrapper->location;
  return t.layout() == pthload::Layout::kStrided ? "meta" : "-";
}

// Whether the schema gives the tensor an "xxh3": a strided tensor with bytes (a sparse
// tensor's parts are entries of their own).
bool has_checksum(const pthload::Tensor& t) {
  return t.layout() == pthload::Layout::kStrided && t.has_storage();
}

// Each tensor's "xxh3", or "" where it has none, read together (content_checksums_naming: 100 000
// small ones of an optimizer state in a few preads, not one each).
std::vector<std::string> checksums_of(const pthload::Checkpoint& checkpoint,
                                      const std::string& path) {
  const auto tensors = checkpoint.tensors();
  std::vector<const pthload::Tensor*> hashed;
  std::vector<std::string_view> names;
  for (const auto& named : tensors) {
    if (has_checksum(named.tensor)) {
      hashed.push_back(&named.tensor);
      names.emplace_back(named.name);
    }
  }
  const std::vector<std::uint64_t> values = content_checksums_naming(hashed, names, path);
  std::vector<std::string> checksums(tensors.size());
  for (std::size_t i = 0, next = 0; i < tensors.size(); ++i) {
    if (has_checksum(tensors[i].tensor)) checksums[i] = fmt::format("{:016x}", values[next++]);
  }
  return checksums;
}

// A tensor's entry, its checksum aside.
nlohmann::json tensor_json(const pthload::NamedTensor& named) {
  const pthload::Tensor& t = named.tensor;
  const auto shape = std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end());
  if (t.layout() != pthload::Layout::kStrided) {
    // The schema's sparse entry: name, dtype, shape; its parts follow as tensors of their own.
    return {{"name", named.name},
            {"dtype", pthload::dtype_name(t.dtype())},
            {"shape", shape},
            {"layout", pthload::layout_name(t.layout())}};
  }
  nlohmann::json entry{
      {"name", named.name},
      {"dtype", pthload::dtype_name(t.dtype())},
      {"shape", shape},
      {"stride", std::vector<std::int64_t>(t.strides().begin(), t.strides().end())},
      {"storage_offset", t.storage_offset()},
      // A meta tensor has no storage, a numpy array's bytes no key in the file: torch_dump.py
      // says null too.
      {"storage", t.has_storage() && !t.storage().is_in_pickle() ? nlohmann::json(t.storage().key())
                                                                 : nlohmann::json()},
      {"location", location_of(t)},
      {"nbytes", t.nbytes()},
  };
  if (t.has_storage() && t.storage().is_in_pickle()) entry["source"] = "numpy";
  if (const pthload::WrapperSubclass* wrapper = t.wrapper_subclass()) {
    entry["subclass"] = wrapper->subclass;
  }
  if (const pthload::Quantization* q = t.quantization()) {
    entry["qscheme"] = pthload::qscheme_name(q->scheme);
    if (q->scheme == pthload::QScheme::kPerTensorAffine) {
      entry["scale"] = q->scale;
      entry["zero_point"] = q->zero_point;
    } else {
      entry["axis"] = q->axis;
    }
  }
  return entry;
}

// The entry of an ordinary tensor (strided; no quantization, subclass or numpy source: nearly
// every tensor of a checkpoint) as indented(tensor_json(...), 2) writes it, without making the
// json object (eight map nodes and their strings per tensor). Returns false, writing nothing,
// for any other tensor.
bool append_plain_entry(std::string& out, const pthload::NamedTensor& named,
                        const std::string* checksum) {
  const pthload::Tensor& t = named.tensor;
  if (t.layout() != pthload::Layout::kStrided || t.quantization() != nullptr ||
      t.wrapper_subclass() != nullptr || (t.has_storage() && t.storage().is_in_pickle())) {
    return false;
  }
  auto it = std::back_inserter(out);
  fmt::format_to(it, "{{\n   \"dtype\": {},\n   \"location\": {},\n   \"name\": {},\n",
                 json_text(pthload::dtype_name(t.dtype())), json_text(location_of(t)),
                 json_text(named.name));
  fmt::format_to(it, "   \"nbytes\": {},\n   \"shape\": ", t.nbytes());
  append_int_list(out, t.sizes(), 3);
  fmt::format_to(it, ",\n   \"storage\": {},\n   \"storage_offset\": {},\n   \"stride\": ",
                 t.has_storage() ? json_text(t.storage().key()) : std::string("null"),
                 t.storage_offset());
  append_int_list(out, t.strides(), 3);
  if (checksum != nullptr) fmt::format_to(it, ",\n   \"xxh3\": {}", json_text(*checksum));
  out += "\n  }";
  return true;
}

// The JSON document of docs/pthinspect.md, exactly as nlohmann's dump(1) of it reads (keys sorted),
// written a tensor at a time: 100 000 tensors are 20 MB of text, and a document tree of them took
// 130 MB and most of the command's time. `checksums` is empty, or one per tensor.
void write_json(std::ostream& out, const pthload::Checkpoint& checkpoint,
                const std::vector<std::string>& checksums) {
  out << "{\n \"format\": " << json_text(pthload::format_name(checkpoint.format()));
  if (!checkpoint.opaque_values().empty()) {
    auto opaque = nlohmann::json::array();
    for (const auto& value : checkpoint.opaque_values())
      opaque.push_back({{"name", value.name}, {"reason", value.reason}});
    out << ",\n \"opaque\": " << indented(opaque, 1);
  }
  out << ",\n \"tensors\": ";
  const auto tensors = checkpoint.tensors();
  ListWriter list(out);
  std::string text;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string* checksum =
        !checksums.empty() && has_checksum(tensors[i].tensor) ? &checksums[i] : nullptr;
    text.clear();
    if (!append_plain_entry(text, tensors[i], checksum)) {
      auto entry = tensor_json(tensors[i]);
      if (checksum != nullptr) entry["xxh3"] = *checksum;
      text = indented(entry, 2);
    }
    list.item(text);
  }
  list.close();
  auto unused = nlohmann::json::array();
  for (const auto& storage : checkpoint.unused_storages())
    unused.push_back(
        {{"key", storage.key}, {"record", storage.record}, {"nbytes", storage.nbytes}});
  out << ",\n \"unused_storages\": " << indented(unused, 1) << "\n}\n";
}

// Storages no listed tensor uses are what a reader that drops tensors leaves behind: said on
// stderr, once, so that stdout stays what it was.
void warn_unused_storages(const pthload::Checkpoint& checkpoint, const std::string& path) {
  const auto unused = checkpoint.unused_storages();
  if (unused.empty()) return;
  constexpr std::size_t kKeysShown = 8;
  std::uint64_t bytes = 0;
  std::vector<std::string> keys;
  for (const auto& storage : unused) {
    bytes += storage.nbytes;
    if (keys.size() < kKeysShown) keys.push_back(fmt::format("'{}'", storage.key));
  }
  if (unused.size() > kKeysShown) keys.push_back("...");
  std::cerr << fmt::format(
      "pthinspect: warning: {}: {} {} ({}) used by no listed tensor: {} (`ls --json` lists "
      "them under \"unused_storages\")\n",
      path, unused.size(), unused.size() == 1 ? "storage" : "storages", human_bytes(bytes),
      fmt::join(keys, ", "));
}

int run_ls(const LsArgs& args) {
  // Checksums need the bytes: a zero-copy CPU load maps them, whatever the tags say; a plain
  // listing reads only the structure.
  pthload::LoadOptions options;
  apply_choose_options(args.choose, options);
  if (args.checksum) options.map_location = pthload::map_to("cpu");
  options.io = io_strategy(args.io);
  const pthload::Checkpoint checkpoint =
      args.checksum ? pthload::load(args.path, options) : pthload::open(args.path, options);
  if (args.json) {
    // Every checksum first: an error (a view too large to read) must leave stdout empty, not
    // half a document.
    std::vector<std::string> checksums;
    if (args.checksum) checksums = checksums_of(checkpoint, args.path);
    write_json(std::cout, checkpoint, checksums);
    warn_unused_storages(checkpoint, args.path);
    return 0;
  }
  // Before the table: an error leaves no half of it.
  const std::vector<std::string> checksums =
      args.checksum ? checksums_of(checkpoint, args.path) : std::vector<std::string>();
  std::size_t name_width = 4;
  for (const auto& named : checkpoint.tensors())
    name_width = std::max(name_width, named.name.size());
  std::cout << fmt::format("{:<{}}  {:<10}  {:<20}  {:<8}  {:>10}{}\n", "name", name_width, "dtype",
                           "shape", "location", "size", args.checksum ? "  xxh3" : "");
  std::uint64_t tensor_bytes = 0;
  for (std::size_t i = 0; i < checkpoint.tensors().size(); ++i) {
    const auto& named = checkpoint.tensors()[i];
    const auto& t = named.tensor;
    // Only tensors with bytes of their own have one (a sparse tensor's parts are listed apart).
    const std::string checksum = !args.checksum               ? ""
                                 : has_checksum(named.tensor) ? "  " + checksums[i]
                                                              : "  -";
    std::cout << fmt::format(
        "{:<{}}  {:<10}  {:<20}  {:<8}  {:>10}{}\n", named.name.empty() ? "(root)" : named.name,
        name_width, pthload::dtype_name(t.dtype()), fmt::format("[{}]", fmt::join(t.sizes(), ", ")),
        location_of(t), human_bytes(t.has_storage() ? t.nbytes() : 0), checksum);
    if (t.has_storage()) tensor_bytes += t.nbytes();
  }
  for (const auto& value : checkpoint.opaque_values()) {
    std::cout << fmt::format("{:<{}}  not a tensor: {}\n",
                             value.name.empty() ? "(root)" : value.name, name_width, value.reason);
  }
  std::uint64_t storage_bytes = 0;
  for (const auto& storage : checkpoint.storages())
    storage_bytes += storage->nbytes();
  std::cout << fmt::format("{} tensors ({}) in {} storages ({}), {} format\n",
                           checkpoint.tensors().size(), human_bytes(tensor_bytes),
                           checkpoint.storages().size(), human_bytes(storage_bytes),
                           pthload::format_name(checkpoint.format()));
  warn_unused_storages(checkpoint, args.path);
  return 0;
}

}  // namespace

Command add_ls_command(CLI::App& app) {
  auto args = std::make_shared<LsArgs>();
  auto* cmd = app.add_subcommand("ls", "List the tensors of a checkpoint");
  cmd->add_option("file", args->path, "checkpoint (.pt, .pth, .bin, .ckpt)")->required();
  cmd->add_flag("--json", args->json, "print JSON (its schema: docs/pthinspect.md)");
  cmd->add_flag("--checksum", args->checksum,
                "add each tensor's XXH3-64 over its elements (reads the data)");
  add_choose_options(*cmd, args->choose);
  add_io_option(*cmd, args->io);
  return {cmd, [args] { return run_ls(*args); }};
}

}  // namespace pthinspect
