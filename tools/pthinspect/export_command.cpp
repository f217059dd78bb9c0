// `pthinspect export FILE --to safetensors OUT`, `--to npy DIR` and `--to pt OUT.pt`: the
// checkpoint's tensors in the formats the rest of the world loads without torch, or as a
// torch.save file (pthload::save), written streaming with bounded memory.
// safetensors: https://github.com/huggingface/safetensors (README "Format"): an 8-byte
// little-endian header size N, N bytes of JSON padded with spaces to a multiple of 8, then the
// data; every tensor's [begin, end) is relative to the data's start, the ranges tile it without
// holes or overlaps. npy: numpy's NEP 1 (format version 1.0). pt: docs/format.md §13.
#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <pthload/pthload.hpp>
#include <pthload/save.hpp>

#include "choose.hpp"
#include "commands.hpp"
#include "elements.hpp"
#include "files.hpp"
#include "output.hpp"

namespace pthinspect {
namespace {

struct ExportArgs {
  std::string path;
  std::string to;
  std::string out;
  std::string max_shard_size;
  bool skip_unsupported = false;
  ChooseArgs choose;
  // --to pt only (pthload::SaveOptions).
  bool nest = false;
  bool compact = false;
  std::uint32_t alignment = 64;
  std::string location = "cpu";
  bool keep_locations = false;
};

// safetensors' dtype names (safetensors/src/tensor.rs Dtype, as safetensors.torch maps them).
std::optional<std::string_view> safetensors_dtype(pthload::Dtype dtype) {
  using pthload::Dtype;
  switch (dtype) {
    case Dtype::kFloat64:
      return "F64";
    case Dtype::kFloat32:
      return "F32";
    case Dtype::kFloat16:
      return "F16";
    case Dtype::kBFloat16:
      return "BF16";
    case Dtype::kInt64:
      return "I64";
    case Dtype::kInt32:
      return "I32";
    case Dtype::kInt16:
      return "I16";
    case Dtype::kInt8:
      return "I8";
    case Dtype::kUInt8:
      return "U8";
    case Dtype::kUInt16:
      return "U16";
    case Dtype::kUInt32:
      return "U32";
    case Dtype::kUInt64:
      return "U64";
    case Dtype::kBool:
      return "BOOL";
    case Dtype::kFloat8E4M3FN:
      return "F8_E4M3";
    case Dtype::kFloat8E5M2:
      return "F8_E5M2";
    case Dtype::kFloat8E4M3FNUZ:
      return "F8_E4M3FNUZ";
    case Dtype::kFloat8E5M2FNUZ:
      return "F8_E5M2FNUZ";
    case Dtype::kComplex64:
      return "C64";
    default:
      return std::nullopt;
  }
}

// numpy's array-protocol type strings; numpy has no bfloat16, float8 or complex32.
std::optional<std::string_view> npy_descr(pthload::Dtype dtype) {
  using pthload::Dtype;
  switch (dtype) {
    case Dtype::kFloat64:
      return "<f8";
    case Dtype::kFloat32:
      return "<f4";
    case Dtype::kFloat16:
      return "<f2";
    case Dtype::kInt64:
      return "<i8";
    case Dtype::kInt32:
      return "<i4";
    case Dtype::kInt16:
      return "<i2";
    case Dtype::kInt8:
      return "|i1";
    case Dtype::kUInt8:
      return "|u1";
    case Dtype::kUInt16:
      return "<u2";
    case Dtype::kUInt32:
      return "<u4";
    case Dtype::kUInt64:
      return "<u8";
    case Dtype::kBool:
      return "|b1";
    case Dtype::kComplex64:
      return "<c8";
    case Dtype::kComplex128:
      return "<c16";
    default:
      return std::nullopt;
  }
}

// "5GB" (10^9, as transformers reads it), "2GiB", "500MB", "64KiB", or a number of bytes.
std::uint64_t parse_size(const std::string& text) {
  static constexpr std::array<std::pair<std::string_view, std::uint64_t>, 8> kUnits{{
      {"KiB", 1ull << 10},
      {"MiB", 1ull << 20},
      {"GiB", 1ull << 30},
      {"TiB", 1ull << 40},
      {"KB", 1'000ull},
      {"MB", 1'000'000ull},
      {"GB", 1'000'000'000ull},
      {"TB", 1'000'000'000'000ull},
  }};
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9')
    ++digits;
  const std::string_view unit = std::string_view(text).substr(digits);
  std::uint64_t scale = unit.empty() || unit == "B" ? 1 : 0;
  for (const auto& [name, value] : kUnits)
    if (unit == name) scale = value;
  if (digits == 0 || digits > 12 || scale == 0) {
    throw CliError(fmt::format(
        "--max-shard-size: '{}' is not a size (a number of bytes, or with KB, MB, GB, KiB, MiB, "
        "GiB)",
        text));
  }
  const std::uint64_t count = std::stoull(text.substr(0, digits));
  // Twelve digits of TB overflow 64 bits: a wrapped product would be some other, small size.
  if (count > std::numeric_limits<std::uint64_t>::max() / scale)
    throw CliError(fmt::format("--max-shard-size: '{}' is 2^64 bytes or more", text));
  const std::uint64_t size = count * scale;
  if (size == 0) throw CliError("--max-shard-size must be more than 0 bytes");
  return size;
}

struct Item {
  const pthload::NamedTensor* named;
  std::string_view dtype_name;  // the target format's name for the dtype
  std::uint64_t nbytes;
};

// A file name for the tensor: its name with '/' replaced, so nothing lands outside DIR, and NUL
// (a Python key may hold one), which would end the path open() sees: "a\0x" and "a\0y" both
// became the file "a", without .npy, the second replacing the first.
std::string npy_file_name(std::string_view name) {
  std::string file = name.empty() ? "_root" : std::string(name);
  std::replace(file.begin(), file.end(), '/', '_');
  std::replace(file.begin(), file.end(), '\0', '_');
  if (file == "." || file == "..") file = "_" + file;
  return file + ".npy";
}

// Two tensors that would be written under one name — the same name (a pickle with a repeated
// dict key, a module attribute and a TorchScript constant that meet), or two names one .npy file
// name stands for — are refused: the second would silently replace the first.
void refuse_name_clashes(std::span<const Item> items, const ExportArgs& args) {
  const bool npy = args.to == "npy";
  std::unordered_map<std::string, std::string_view> written;
  written.reserve(items.size());
  for (const Item& item : items) {
    const std::string_view name = item.named->name;
    auto key = npy ? npy_file_name(name) : std::string(name);
    const auto [first, inserted] = written.try_emplace(std::move(key), name);
    if (inserted) continue;
    if (first->second == name) {
      throw CliError(fmt::format("{}: two tensors are named '{}'; {} holds one tensor per name",
                                 args.path, name,
                                 npy ? "a directory of .npy files" : "safetensors"));
    }
    throw CliError(fmt::format("{}: tensors '{}' and '{}' would both be written to {}", args.path,
                               first->second, name, first->first));
  }
}

// The tensors the target format can hold; the others are skipped when asked, else refused
// with every one named (never silently dropped).
std::vector<Item> exportable(const pthload::Checkpoint& checkpoint, const ExportArgs& args) {
  const bool npy = args.to == "npy";
  std::vector<Item> items;
  std::vector<std::string> refused;
  for (const auto& named : checkpoint.tensors()) {
    std::string reason = unreadable_reason(named.tensor);
    const auto name =
        npy ? npy_descr(named.tensor.dtype()) : safetensors_dtype(named.tensor.dtype());
    if (reason.empty() && pthload::is_quantized(named.tensor.dtype())) {
      reason = "quantized tensor";
    } else if (reason.empty() && !name) {
      reason = fmt::format("dtype {} has no {} name", pthload::dtype_name(named.tensor.dtype()),
                           npy ? "numpy" : "safetensors");
    } else if (reason.empty() && !npy && named.name == "__metadata__") {
      // The header's key for the metadata: a tensor under it makes a file no reader opens.
      reason = "safetensors keeps that name for its metadata";
    }
    if (reason.empty()) {
      items.push_back({&named, *name, named.tensor.nbytes()});
    } else {
      refused.push_back(fmt::format("'{}' ({})", named.name, reason));
    }
  }
  if (!refused.empty()) {
    if (!args.skip_unsupported) {
      throw CliError(fmt::format(
          "{}: {} tensor{} cannot be exported to {}: {}; --skip-unsupported leaves {} out",
          args.path, refused.size(), refused.size() == 1 ? "" : "s", args.to,
          fmt::join(refused, ", "), refused.size() == 1 ? "it" : "them"));
    }
    for (const auto& what : refused)
      std::cerr << fmt::format("pthinspect: skipped {}\n", what);
  }
  refuse_name_clashes(items, args);
  return items;
}

// Writing over the checkpoint being read truncates it under its own mapping: the export fails
// half-way and the checkpoint is lost. Every output path is checked before anything is written.
void refuse_overwriting_input(std::span<const std::string> outputs, const ExportArgs& args) {
  for (const std::string& output : outputs) {
    std::error_code error;  // an output that does not exist yet is no input
    if (std::filesystem::equivalent(output, args.path, error)) {
      throw CliError(
          fmt::format("{}: is the checkpoint being exported; export writes elsewhere", output));
    }
  }
}

void stream_tensor(const pthload::NamedTensor& named, OutputFile& out, Progress& progress) {
  ElementReader reader(named.tensor, named.name);
  for (auto chunk = reader.next(); !chunk.empty(); chunk = reader.next()) {
    out.write(chunk);
    progress.advance(chunk.size());
  }
}

// One safetensors file holding `items` (already in data order), written and closed but not yet
// committed: the caller renames it into place once every file of the export is whole.
std::unique_ptr<OutputFile> write_safetensors(const std::string& path, std::span<const Item> items,
                                              Progress& progress) {
  nlohmann::ordered_json header;
  // What torch-based writers put (safetensors.torch.save_file, transformers' save_pretrained).
  header["__metadata__"] = {{"format", "pt"}};
  std::uint64_t offset = 0;
  for (const Item& item : items) {
    const auto sizes = item.named->tensor.sizes();
    header[item.named->name] = {{"dtype", item.dtype_name},
                                {"shape", std::vector<std::int64_t>(sizes.begin(), sizes.end())},
                                {"data_offsets", {offset, offset + item.nbytes}}};
    offset += item.nbytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::type_error& e) {
    // The spec's header is UTF-8 JSON; a name that is not UTF-8 cannot be written as it is.
    throw CliError(fmt::format("{}: a tensor name is not valid UTF-8 ({})", path, e.what()));
  }
  // The data must start 8-byte aligned: the header is padded with spaces, as the spec allows.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::array<std::byte, 8> size_le{};
  for (std::size_t i = 0; i < 8; ++i)
    size_le[i] = static_cast<std::byte>((text.size() >> (8 * i)) & 0xff);
  auto out = std::make_unique<OutputFile>(path);
  out->write(size_le);
  out->write(std::as_bytes(std::span(text)));
  for (const Item& item : items)
    stream_tensor(*item.named, *out, progress);
  out->close();
  return out;
}

int export_safetensors(const pthload::Checkpoint& checkpoint, const ExportArgs& args) {
  std::vector<Item> items = exportable(checkpoint, args);
  // safetensors' own writer orders the data by dtype (its Dtype enum, last first: the widest
  // come first, so every tensor starts aligned to its element size), then by name; in that order
  // the file is byte for byte what safetensors.torch.save_file writes for the same tensors.
  static constexpr std::array<std::string_view, 18> kDataOrder{
      "U64", "I64", "F64",         "C64",         "F32",     "U32",     "I32", "BF16", "F16",
      "U16", "I16", "F8_E5M2FNUZ", "F8_E4M3FNUZ", "F8_E4M3", "F8_E5M2", "I8",  "U8",   "BOOL"};
  const auto rank = [](const Item& item) {
    return std::find(kDataOrder.begin(), kDataOrder.end(), item.dtype_name) - kDataOrder.begin();
  };
  std::stable_sort(items.begin(), items.end(), [&](const Item& a, const Item& b) {
    const auto rank_a = rank(a);
    const auto rank_b = rank(b);
    return rank_a != rank_b ? rank_a < rank_b : a.named->name < b.named->name;
  });
  std::uint64_t total = 0;
  for (const Item& item : items)
    total += item.nbytes;

  std::vector<std::span<const Item>> shards;
  if (args.max_shard_size.empty()) {
    shards.emplace_back(items);
  } else {
    const std::uint64_t limit = parse_size(args.max_shard_size);
    std::size_t first = 0;
    std::uint64_t bytes = 0;
    for (std::size_t i = 0; i < items.size(); ++i) {
      // A tensor larger than the limit gets a shard of its own, as transformers does.
      if (i > first && bytes + items[i].nbytes > limit) {
        shards.emplace_back(std::span(items).subspan(first, i - first));
        first = i;
        bytes = 0;
      }
      bytes += items[i].nbytes;
    }
    shards.emplace_back(std::span(items).subspan(first));
  }

  // transformers' naming: model-00001-of-00003.safetensors beside model.safetensors.index.json.
  const std::filesystem::path out(args.out);
  const std::string stem =
      out.extension() == ".safetensors" ? out.stem().string() : out.filename().string();
  std::vector<std::string> shard_names;
  std::vector<std::string> outputs;
  if (shards.size() == 1) {
    outputs.push_back(args.out);
  } else {
    for (std::size_t s = 0; s < shards.size(); ++s) {
      shard_names.push_back(
          fmt::format("{}-{:05d}-of-{:05d}.safetensors", stem, s + 1, shards.size()));
      outputs.push_back((out.parent_path() / shard_names.back()).string());
    }
    outputs.push_back(args.out + ".index.json");
  }
  refuse_overwriting_input(outputs, args);

  Progress progress("export", total);
  if (shards.size() == 1) {
    write_safetensors(args.out, shards.front(), progress)->commit();
    progress.clear();
    std::cout << fmt::format("exported {} tensors ({}) to {}\n", items.size(), human_bytes(total),
                             args.out);
    return 0;
  }
  // No shard is renamed into place before every one is whole and the index written: a failed
  // export leaves no set of shards that an index (a new one, or an old one) half describes.
  std::vector<std::unique_ptr<OutputFile>> files;
  nlohmann::json weight_map = nlohmann::json::object();
  for (std::size_t s = 0; s < shards.size(); ++s) {
    files.push_back(write_safetensors(outputs[s], shards[s], progress));
    for (const Item& item : shards[s])
      weight_map[item.named->name] = shard_names[s];
  }
  progress.clear();
  const std::string& index_path = outputs.back();
  const nlohmann::json index{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  const std::string index_text =
      index.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  files.push_back(std::make_unique<OutputFile>(index_path));
  files.back()->write(std::as_bytes(std::span(index_text)));
  for (const auto& file : files)
    file->commit();
  std::cout << fmt::format("exported {} tensors ({}) to {} shards, index {}\n", items.size(),
                           human_bytes(total), shards.size(), index_path);
  return 0;
}

int export_npy(const pthload::Checkpoint& checkpoint, const ExportArgs& args) {
  const std::vector<Item> items = exportable(checkpoint, args);
  std::error_code error;
  std::filesystem::create_directories(args.out, error);
  if (error) throw CliError(fmt::format("{}: cannot create: {}", args.out, error.message()));
  std::uint64_t total = 0;
  std::vector<std::string> outputs;
  for (const Item& item : items) {
    total += item.nbytes;
    outputs.push_back((std::filesystem::path(args.out) / npy_file_name(item.named->name)).string());
  }
  refuse_overwriting_input(outputs, args);
  Progress progress("export", total);
  for (std::size_t i = 0; i < items.size(); ++i) {
    const Item& item = items[i];
    const auto sizes = item.named->tensor.sizes();
    std::string shape;
    for (const auto size : sizes)
      shape += fmt::format("{}, ", size);
    if (!shape.empty()) shape.resize(shape.size() - (sizes.size() == 1 ? 1 : 2));
    std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                                     item.dtype_name, shape);
    // Magic (6) + version (2) + length (2) + header, padded with spaces and ended by '\n' to a
    // multiple of 64 bytes, as numpy writes it.
    const std::size_t padded = (10 + header.size() + 1 + 63) / 64 * 64 - 10;
    header.append(padded - header.size() - 1, ' ');
    header.push_back('\n');
    std::string preamble = "\x93NUMPY";
    preamble.push_back('\x01');
    preamble.push_back('\x00');
    preamble.push_back(static_cast<char>(header.size() & 0xff));
    preamble.push_back(static_cast<char>(header.size() >> 8));
    OutputFile out(outputs[i]);
    out.write(std::as_bytes(std::span(preamble)));
    out.write(std::as_bytes(std::span(header)));
    stream_tensor(*item.named, out, progress);
    out.commit();
  }
  progress.clear();
  std::cout << fmt::format("exported {} tensors ({}) to {}/\n", items.size(), human_bytes(total),
                           args.out);
  return 0;
}

// pthload::save writes the file (under a temporary name, synced, renamed into place) and decides
// what it can hold: the tensors it leaves out with --skip-unsupported come back in its report.
int export_pt(const pthload::Checkpoint& checkpoint, const ExportArgs& args) {
  refuse_overwriting_input(std::span(&args.out, 1), args);
  // The file's size is known only when the writer starts: the bar is made at its first call.
  std::optional<Progress> progress;
  std::uint64_t shown = 0;
  const pthload::SaveOptions options{
      .nest_dotted_names = args.nest,
      .compact_views = args.compact,
      .alignment = args.alignment,
      .location = args.location,
      .keep_locations = args.keep_locations,
      .skip_unsupported = args.skip_unsupported,
      .progress =
          [&](std::uint64_t written, std::uint64_t total) {
            if (!progress) progress.emplace("export", total);
            progress->advance(written - std::min(shown, written));
            shown = written;
          },
  };
  pthload::SaveReport report;
  try {
    report = pthload::save(args.out, checkpoint, options);
  } catch (const pthload::Error& e) {
    if (e.code() != pthload::Errc::kSaveUnsupportedTensor || args.skip_unsupported) throw;
    // As the other targets say it: the library names its option, the tool its flag.
    pthload::Error named = e;
    if (named.context().path.empty()) named.context().path = args.path;
    std::string text = named.what();
    if (const auto at = text.find("(skip_unsupported "); at != std::string::npos) {
      text.replace(at + 1, std::string_view("skip_unsupported").size(), "--skip-unsupported");
    } else {
      text += "; --skip-unsupported leaves such tensors out";
    }
    throw CliError(text);
  }
  if (progress) progress->clear();
  for (const auto& what : report.skipped)
    std::cerr << fmt::format("pthinspect: skipped {}\n", what);
  std::cout << fmt::format("exported {} tensors ({}) to {}\n", report.tensors,
                           human_bytes(report.bytes), args.out);
  return 0;
}

int run_export(const ExportArgs& args) {
  if (!args.max_shard_size.empty() && args.to != "safetensors")
    throw CliError("--max-shard-size applies to --to safetensors only");
  // Zero-copy views of the mapped file: the bytes are read once, straight into the output.
  pthload::LoadOptions options{.map_location = pthload::map_to("cpu")};
  apply_choose_options(args.choose, options);
  const pthload::Checkpoint checkpoint = pthload::load(args.path, options);
  if (args.to == "pt") return export_pt(checkpoint, args);
  return args.to == "npy" ? export_npy(checkpoint, args) : export_safetensors(checkpoint, args);
}

// Errors of the streaming readers know the tensor, not the file.
int run_export_naming_file(const ExportArgs& args) {
  try {
    return run_export(args);
  } catch (pthload::Error& e) {
    if (e.context().path.empty()) e.context().path = args.path;
    throw;
  }
}

}  // namespace

Command add_export_command(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  auto* cmd = app.add_subcommand(
      "export",
      "Write the tensors as safetensors (one file, or shards + index), .npy files, or a "
      "torch.save file (--to pt) that torch.load reads");
  cmd->add_option("file", args->path, "checkpoint")->required();
  cmd->add_option("out", args->out, "output file (safetensors, pt) or directory (npy)")->required();
  cmd->add_option("--to", args->to, "safetensors | npy | pt")
      ->required()
      ->check(CLI::IsMember({"safetensors", "npy", "pt"}));
  cmd->add_option("--max-shard-size", args->max_shard_size,
                  "split into shards of at most this size (5GB, 500MB, 2GiB) plus "
                  "OUT.index.json, as transformers writes them");
  cmd->add_flag("--skip-unsupported", args->skip_unsupported,
                "leave out (and name on stderr) tensors the format cannot hold, instead of "
                "failing");
  add_choose_options(*cmd, args->choose);
  // The options of --to pt (pthload::SaveOptions), refused with the other targets.
  const std::vector<std::pair<std::string, CLI::Option*>> pt_only{
      {"--nest", cmd->add_flag("--nest", args->nest,
                               "pt: dotted names become nested dicts ({\"enc\": {\"0\": ...}}) "
                               "instead of one flat dict; pthload reads the same names back")},
      {"--compact", cmd->add_flag("--compact", args->compact,
                                  "pt: each tensor its own contiguous storage of exactly its "
                                  "elements, instead of views keeping their whole storage")},
      {"--alignment",
       cmd->add_option("--alignment", args->alignment,
                       "pt: storage payloads start at multiples of N bytes, a power of two "
                       "from 64 (torch's, the default) to 65536 (4096: GPUDirect Storage)")
           ->type_name("N")},
      {"--location", cmd->add_option("--location", args->location,
                                     "pt: the location tag written for every storage (cpu, the "
                                     "default; cuda:0, mps, ...): where torch.load puts it")
                         ->type_name("TAG")},
      {"--keep-locations",
       cmd->add_flag("--keep-locations", args->keep_locations,
                     "pt: each storage keeps the tag it had in FILE (cuda:1 stays cuda:1)")},
  };
  return {cmd, [args, pt_only] {
            for (const auto& [name, option] : pt_only) {
              if (option->count() > 0 && args->to != "pt")
                throw CliError(fmt::format("{} applies to --to pt only", name));
            }
            return run_export_naming_file(*args);
          }};
}

}  // namespace pthinspect
