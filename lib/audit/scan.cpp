// scan(): which bytes of a file a loader would unpickle or run, by format, and torch.load
// (weights_only=True)'s answer for it (torch/serialization.py load, _load, _legacy_load).
#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "audit/global_rules.hpp"
#include "audit/scan_file.hpp"
#include "audit/scanner.hpp"
#include "audit/tar_members.hpp"
#include "audit/torchscript_code.hpp"
#include "audit/weights_only.hpp"
#include "common/byte_reader.hpp"
#include "common/check.hpp"
#include "common/mapped_file.hpp"
#include "pickle/census.hpp"
#include "pickle/opcodes.hpp"
#include "pthload/error.hpp"
#include "pthload/scan.hpp"
#include "zip/archive.hpp"
#include "zip/central_directory.hpp"
#include "zip/end_records.hpp"
#include "zip/signatures.hpp"

namespace pthload {
namespace {

using audit::PersistentIds;
using audit::Scanner;

bool starts_with(std::span<const std::byte> bytes, std::string_view prefix) {
  return bytes.size() >= prefix.size() &&
         std::memcmp(bytes.data(), prefix.data(), prefix.size()) == 0;
}

// A pickle's first bytes as CPython's picklers begin one: PROTO 2 to 5.
bool starts_like_pickle(std::span<const std::byte> bytes) {
  return bytes.size() >= 2 && bytes[0] == std::byte{0x80} && bytes[1] >= std::byte{2} &&
         bytes[1] <= std::byte{5};
}

// Record names that loaders of other kinds unpickle (picklescan's and modelscan's extension
// lists), beside what torch.load itself runs.
bool has_pickle_extension(std::string_view name) {
  static constexpr auto kExtensions =
      std::to_array<std::string_view>({".pkl", ".pickle", ".pk", ".joblib", ".dill", ".dat",
                                       ".data", ".bin", ".pt", ".pth", ".ckpt", ".mar"});
  return std::any_of(kExtensions.begin(), kExtensions.end(),
                     [&](std::string_view extension) { return name.ends_with(extension); });
}

void refuse(WeightsOnlyAnswer& answer, std::string reason, std::string where = {}) {
  if (!answer.accepted && !answer.reason.empty()) return;  // the first refusal stands
  answer.accepted = false;
  answer.reason = std::move(reason);
  answer.where = std::move(where);
}

// PyTorchStreamReader::init: the version record, a decimal std::stoull reads, within the
// versions the reader supports (caffe2/serialize/versions.h: 1 to 0xA).
void weights_only_version(WeightsOnlyAnswer& answer, std::span<const std::byte> bytes,
                          std::string where) {
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  while (!text.empty() && (text.front() == ' ' || text.front() == '\n' || text.front() == '\t'))
    text.remove_prefix(1);
  std::uint64_t version = 0;
  std::size_t digits = 0;
  while (digits < text.size() && digits < 19 && text[digits] >= '0' && text[digits] <= '9')
    version = version * 10 + static_cast<std::uint64_t>(text[digits++] - '0');
  if (digits == 0) {
    refuse(answer, "Couldn't parse the version record as a number", std::move(where));
  } else if (version < 1 || version > 10) {
    refuse(answer, fmt::format("file format version {} is not one torch reads", version),
           std::move(where));
  }
}

void weights_only_pickle(WeightsOnlyAnswer& answer, std::span<const std::byte> bytes,
                         const std::string& where, PersistentIds ids) {
  const audit::WeightsOnlyCheck check = audit::check_weights_only(bytes, ids);
  if (!check.accepted) refuse(answer, check.reason, audit::at(where, check.offset));
}

// torch.load's answer for an archive pthload refuses as misleading: torch's reader (miniz through
// PyTorchStreamReader) takes the central directory's word, and a stored record's payload from
// after its local header's name and extra field whatever they say (getRecordOffset).
void weights_only_torch_reading(std::span<const std::byte> file, const LoadOptions& options,
                                WeightsOnlyAnswer& answer) {
  try {
    const zip::EndRecords end = zip::read_end_records(file);
    const zip::CentralDirectory directory = zip::read_central_directory(file, end, options.limits);
    const auto& entries = directory.entries;
    if (entries.empty() || entries.front().name.find('/') == std::string_view::npos) {
      refuse(answer, "archive does not have a top-level folder (torch's reader refuses it)");
      return;
    }
    const std::string_view first = entries.front().name;
    const std::string prefix(first.substr(0, first.find('/') + 1));
    const auto find = [&](std::string_view record) -> const zip::Entry* {
      for (const auto& entry : entries)
        if (entry.name.size() == prefix.size() + record.size() && entry.name.starts_with(prefix) &&
            entry.name.ends_with(record))
          return &entry;
      return nullptr;
    };
    if (find("constants.pkl") != nullptr) {
      refuse(answer, "Cannot use weights_only=True with TorchScript archives passed to torch.load");
      return;
    }
    const auto payload_of =
        [&](const zip::Entry& entry) -> std::optional<std::span<const std::byte>> {
      const std::uint64_t header = entry.local_header_offset;
      if (entry.method != 0 || header > file.size() ||
          file.size() - header < zip::kLocalHeaderSize) {
        return std::nullopt;
      }
      const std::uint64_t payload = header + zip::kLocalHeaderSize +
                                    common::load_le<std::uint16_t>(file.data() + header + 26) +
                                    common::load_le<std::uint16_t>(file.data() + header + 28);
      if (payload > file.size() || entry.compressed_size > file.size() - payload)
        return std::nullopt;
      return file.subspan(static_cast<std::size_t>(payload),
                          static_cast<std::size_t>(entry.compressed_size));
    };
    const zip::Entry* version = find(".data/version");
    if (version == nullptr) version = find("version");
    if (version == nullptr) {
      refuse(answer, fmt::format("no {}version record (torch's reader requires one)", prefix));
      return;
    }
    const zip::Entry* data = find("data.pkl");
    if (data == nullptr) {
      refuse(answer, fmt::format("no {}data.pkl", prefix));
      return;
    }
    const auto version_bytes = payload_of(*version);
    const auto data_bytes = payload_of(*data);
    if (!version_bytes || !data_bytes) {
      refuse(answer, "a record cannot be read as torch reads it");
      return;
    }
    answer.accepted = true;
    weights_only_version(answer, *version_bytes, std::string(version->name));
    if (answer.accepted) {
      weights_only_pickle(answer, *data_bytes, std::string(data->name), PersistentIds::kZip);
    }
  } catch (const Error& e) {
    refuse(answer, fmt::format("torch cannot read the archive: {}", e.what()));
  }
}

void scan_zip(const common::MappedFile& file, ScanReport& report, const LoadOptions& options) {
  std::optional<zip::Archive> archive;
  try {
    archive.emplace(zip::Archive::parse(file, options.limits));
  } catch (const Error& e) {
    const bool misleading = e.code() == Errc::kZipLocalHeaderMismatch ||
                            e.code() == Errc::kZipRecordsOverlap ||
                            e.code() == Errc::kZipDuplicateName;
    // pthload's own limits, which torch's reader does not share: the archive may well be one
    // torch.load unpickles, so it is not judged, never called no checkpoint.
    const bool over_limits =
        e.code() == Errc::kZipLimitExceeded || e.code() == Errc::kZipImplausibleCompressionRatio;
    // Torch's answer as torch reads: the caller's limits are pthload's, not torch's (the
    // defaults still bound what reading the directory may take).
    if (misleading) weights_only_torch_reading(file.bytes(), options, report.weights_only);
    if (over_limits) weights_only_torch_reading(file.bytes(), LoadOptions{}, report.weights_only);
    const Verdict verdict = misleading    ? Verdict::kDangerous
                            : over_limits ? Verdict::kUnknown
                                          : Verdict::kNotACheckpoint;
    std::string message =
        misleading ? fmt::format(
                         "{}: zip readers disagree on what this file holds, the trick "
                         "that hides a pickle from scanners",
                         e.what())
        : over_limits ? fmt::format(
                            "{}: beyond pthload's limits (scan's Limits), so its pickles "
                            "are not judged; torch's reader may still read them",
                            e.what())
                      : fmt::format("not a readable zip archive: {}", e.what());
    report.findings.push_back({verdict, "zip", std::move(message)});
    report.verdict = verdict;
    report.format = verdict == Verdict::kNotACheckpoint ? "" : "zip";
    if (verdict == Verdict::kNotACheckpoint) {
      refuse(report.weights_only, fmt::format("torch cannot read the archive: {}", e.what()));
    }
    return;
  }
  const auto& entries = archive->entries();
  // torch.load's reader takes the folder of the first record for the archive's
  // (inline_container.cc init) and reads records under it only.
  const std::size_t slash = entries.empty() ? std::string::npos : entries.front().name.find('/');
  const std::string prefix = slash == std::string::npos
                                 ? std::string()
                                 : std::string(entries.front().name.substr(0, slash + 1));
  const auto is_top_record = [&](std::string_view name, std::string_view record) {
    return !prefix.empty() && name.size() == prefix.size() + record.size() &&
           name.starts_with(prefix) && name.ends_with(record);
  };
  const auto under = [&](std::string_view name, std::string_view folder) {
    return !prefix.empty() && name.size() > prefix.size() + folder.size() &&
           name.starts_with(prefix) && name.substr(prefix.size()).starts_with(folder);
  };
  bool torchscript = false;
  const zip::Entry* data_pickle = nullptr;
  const zip::Entry* byteorder = nullptr;
  const zip::Entry* version = nullptr;
  std::size_t outside_records = 0;
  std::string_view first_outside;
  for (const auto& entry : entries) {
    torchscript = torchscript || is_top_record(entry.name, "constants.pkl");
    if (is_top_record(entry.name, "data.pkl")) data_pickle = &entry;
    if (is_top_record(entry.name, "byteorder")) byteorder = &entry;
    // The reader looks for .data/version first (inline_container.cc init).
    if (is_top_record(entry.name, ".data/version") ||
        (version == nullptr && is_top_record(entry.name, "version"))) {
      version = &entry;
    }
    if (!prefix.empty() && !entry.name.starts_with(prefix) && outside_records++ == 0) {
      first_outside = entry.name;
    }
  }
  report.format = torchscript ? "torchscript" : "zip";
  WeightsOnlyAnswer& answer = report.weights_only;
  answer.accepted = true;
  Scanner scanner(report, options);
  if (prefix.empty()) {
    scanner.finding(Verdict::kUnknown, entries.empty() ? "zip" : std::string(entries.front().name),
                    "the first record is not inside a folder, as torch's records always are: "
                    "torch.load refuses the archive, other loaders may still unpickle its records");
    refuse(answer, "archive does not have a top-level folder (torch's reader refuses it)");
  }
  if (outside_records > 0) {
    // PyTorchStreamReader::getAllRecords, which torch.load calls on every zip, throws "file in
    // archive is not in a subdirectory" for them.
    scanner.finding(Verdict::kUnknown, std::string(first_outside),
                    fmt::format("{} record{} outside the folder {} that the first record names: "
                                "torch.load refuses such an archive",
                                outside_records, outside_records == 1 ? " lies" : "s lie", prefix));
    refuse(answer, "a record lies outside the archive's folder", std::string(first_outside));
  }
  if (torchscript) {
    refuse(answer, "Cannot use weights_only=True with TorchScript archives passed to torch.load");
  }
  if (!prefix.empty() && data_pickle == nullptr) {
    refuse(answer, fmt::format("no {}data.pkl", prefix));
  }
  if (!prefix.empty() && version == nullptr) {
    refuse(answer, fmt::format("no {}version record (torch's reader requires one)", prefix));
  } else if (version != nullptr) {
    try {
      weights_only_version(answer, archive->read(*version).bytes(), std::string(version->name));
    } catch (const Error& e) {
      refuse(answer, e.what(), std::string(version->name));
    }
  }
  if (byteorder != nullptr) {
    try {
      const auto record = archive->read(*byteorder);
      const std::string_view text(reinterpret_cast<const char*>(record.bytes().data()),
                                  record.bytes().size());
      if (text != "little" && text != "big")
        refuse(answer, "Unknown endianness type", std::string(byteorder->name));
    } catch (const Error& e) {
      refuse(answer, e.what(), std::string(byteorder->name));
    }
  }

  std::set<std::string> code_calls;
  bool data_pickle_checked = false;
  for (const auto& entry : entries) {
    const std::string_view name = entry.name;
    const std::string where(name);
    // Tensor data: raw bytes no loader unpickles.
    const bool tensor_data =
        (under(name, "data/") ||
         (torchscript && (under(name, "constants/") || under(name, "traced_inputs/")))) &&
        !has_pickle_extension(name);
    if (tensor_data) continue;
    const bool is_code = name.find("/code/") != std::string_view::npos ||
                         name.starts_with("code/") || name.ends_with(".py") ||
                         name.ends_with(".pyc");
    // torch.load runs data.pkl; torch.jit.load the TorchScript pickles
    // (torch/csrc/jit/serialization/import.cpp, export_module.cpp).
    const bool expected_pickle =
        is_top_record(name, "data.pkl") ||
        (torchscript &&
         (is_top_record(name, "constants.pkl") || is_top_record(name, "traced_inputs.pkl") ||
          is_top_record(name, "bytecode.pkl") || name.ends_with(".debug_pkl")));
    std::optional<zip::RecordBytes> record;
    try {
      record.emplace(archive->read(entry));
    } catch (const Error& e) {
      if (expected_pickle || has_pickle_extension(name) || is_code) {
        scanner.finding(
            Verdict::kUnknown, where,
            fmt::format("a record that may hold a pickle or code cannot be read: {}", e.what()));
        scanner.note_pickle();
      }
      continue;
    }
    const auto bytes = record->bytes();
    if (is_code) {
      if (!torchscript) {
        scanner.finding(Verdict::kUnknown, where, "a code record outside a TorchScript archive");
      }
      scanner.note_pickle();
      const audit::CodeCalls calls = audit::torchscript_calls(bytes);
      code_calls.insert(calls.calls.begin(), calls.calls.end());
      if (!calls.dangerous.empty()) {
        scanner.finding(
            Verdict::kDangerous, where,
            fmt::format("TorchScript code calls {}, which reach{} files, processes, "
                        "shared storage or the network; torch.jit.load compiles it",
                        fmt::join(calls.dangerous, ", "), calls.dangerous.size() == 1 ? "es" : ""));
      } else {
        scanner.finding(
            Verdict::kUnknown, where,
            fmt::format("TorchScript code, which torch.load hands to torch.jit.load: its classes' "
                        "__setstate__ run while it loads ({}), the rest when the module is "
                        "called; {} distinct call{}, listed in code_calls",
                        calls.defines_setstate ? "this code defines one" : "this code defines none",
                        calls.calls.size(), calls.calls.size() == 1 ? "" : "s"));
      }
      continue;
    }
    const bool looks_like_pickle = has_pickle_extension(name) || starts_like_pickle(bytes);
    if (!expected_pickle && !looks_like_pickle) {
      if (starts_with(bytes, "PK\x03\x04")) {
        scanner.finding(Verdict::kUnknown, where,
                        "an archive inside the archive, which scan does not open");
      }
      continue;
    }
    scanner.note_pickle();
    if (!expected_pickle) {
      scanner.finding(Verdict::kUnknown, where,
                      "a pickle record torch.load does not run (torch writes one data.pkl); "
                      "other loaders may");
    }
    const auto end = scanner.scan_pickle(bytes, where, 0);
    if (end && *end < bytes.size()) {
      scanner.finding(Verdict::kUnknown, audit::at(name, *end),
                      fmt::format("{} bytes after the pickle's STOP", bytes.size() - *end));
      // A second pickle there is not run by torch.load, but it is what another reader of the
      // record may find: scan it too.
      (void)scanner.scan_pickle(bytes.subspan(*end), audit::at(name, *end), 0);
    }
    if (torchscript && is_top_record(name, "bytecode.pkl")) {
      const auto operators = audit::dangerous_operator_names(bytes);
      if (!operators.empty()) {
        scanner.finding(Verdict::kDangerous, where,
                        fmt::format("mobile bytecode naming {}, which reach files or the network",
                                    fmt::join(operators, ", ")));
      }
    }
    if (&entry == data_pickle) {
      data_pickle_checked = true;
      if (answer.accepted) weights_only_pickle(answer, bytes, where, PersistentIds::kZip);
    }
  }
  report.code_calls.assign(code_calls.begin(), code_calls.end());
  if (data_pickle != nullptr && !data_pickle_checked) {
    refuse(answer, "data.pkl cannot be read", std::string(data_pickle->name));
  }
  if (!scanner.saw_pickle()) {
    scanner.finding(Verdict::kNotACheckpoint, "zip", "no record holds a pickle or code");
  }
  scanner.finish();
  if (!scanner.saw_pickle() && report.verdict <= Verdict::kUnknown) {
    report.verdict = Verdict::kNotACheckpoint;
    report.format = "";
  }
}

// torch/serialization.py _legacy_load, legacy_load: a torch 0.1.x tar holds 'storages' (a count,
// then per storage a pickle (key, location, storage type) and the raw bytes, then a pickle of
// views), 'tensors' (a count, then per tensor a pickle and a struct), and 'pickle' (the object).
void scan_tar(std::span<const std::byte> bytes, const std::vector<audit::TarMember>& members,
              ScanReport& report, const LoadOptions& options) {
  report.format = "tar";
  refuse(report.weights_only,
         "Cannot use weights_only=True with files saved in the legacy .tar format");
  Scanner scanner(report, options);
  const auto member = [&](std::string_view name) -> const audit::TarMember* {
    // tarfile.getmember: the last member of that name.
    for (auto it = members.rbegin(); it != members.rend(); ++it)
      if (it->name == name) return &*it;
    return nullptr;
  };
  const auto data_of = [&](const audit::TarMember& m) {
    return bytes.subspan(static_cast<std::size_t>(m.offset), static_cast<std::size_t>(m.size));
  };
  // A count pickle, then `count` records, each a pickle and what follows it.
  const auto walk_records = [&](std::string_view name, auto&& skip_after) {
    const audit::TarMember* m = member(name);
    if (m == nullptr) return;
    scanner.note_pickle();
    const auto data = data_of(*m);
    std::int64_t count = -1;
    const std::string where(name);
    auto end = scanner.scan_pickle(data, audit::at(where, 0), 0, [&](const pickle::Value& root) {
      if (root.is(pickle::Kind::kInt)) count = root.as_int();
    });
    std::size_t offset = end.value_or(data.size());
    for (std::int64_t i = 0; end && i < count && offset < data.size(); ++i) {
      std::string storage_type;
      end = scanner.scan_pickle(data.subspan(offset), audit::at(where, offset), 0,
                                [&](const pickle::Value& root) {
                                  const auto items = root.items();
                                  if (items.size() == 3 && items[2]->is(pickle::Kind::kGlobal))
                                    storage_type = std::string(items[2]->name());
                                });
      if (!end) break;
      offset += *end;
      const auto skipped = skip_after(data.subspan(offset), storage_type);
      if (!skipped) {
        scanner.finding(Verdict::kUnknown, audit::at(where, offset),
                        "the raw bytes after this record cannot be followed; the rest of the "
                        "member is not scanned");
        return;
      }
      offset += *skipped;
    }
    if (name == "storages" && end && offset < data.size()) {
      // The storage views: one more pickle.
      (void)scanner.scan_pickle(data.subspan(offset), audit::at(where, offset), 0);
    }
  };
  const auto element_size = [](std::string_view storage_type) -> std::size_t {
    static constexpr std::array<std::pair<std::string_view, std::size_t>, 10> kSizes{
        {{"DoubleStorage", 8},
         {"FloatStorage", 4},
         {"HalfStorage", 2},
         {"LongStorage", 8},
         {"IntStorage", 4},
         {"ShortStorage", 2},
         {"CharStorage", 1},
         {"ByteStorage", 1},
         {"BoolStorage", 1},
         {"BFloat16Storage", 2}}};
    for (const auto& [name, size] : kSizes)
      if (storage_type == name) return size;
    return 0;
  };
  // UntypedStorage._new_with_file: an 8-byte element count, then the elements.
  walk_records("storages",
               [&](std::span<const std::byte> rest,
                   const std::string& storage_type) -> std::optional<std::size_t> {
                 const std::size_t size = element_size(storage_type);
                 if (size == 0 || rest.size() < 8) return std::nullopt;
                 std::uint64_t count = 0;
                 for (std::size_t i = 0; i < 8; ++i)
                   count |= std::to_integer<std::uint64_t>(rest[i]) << (8 * i);
                 if (count > (rest.size() - 8) / size) return std::nullopt;
                 return 8 + static_cast<std::size_t>(count) * size;
               });
  // ndim (4 bytes), 4 bytes skipped, sizes and strides (8 bytes each per dimension), offset.
  walk_records(
      "tensors",
      [&](std::span<const std::byte> rest, const std::string&) -> std::optional<std::size_t> {
        if (rest.size() < 16) return std::nullopt;
        std::uint32_t ndim = 0;
        for (std::size_t i = 0; i < 4; ++i)
          ndim |= std::to_integer<std::uint32_t>(rest[i]) << (8 * i);
        if (ndim > (rest.size() - 16) / 16) return std::nullopt;
        return 8 + 16 * static_cast<std::size_t>(ndim) + 8;
      });
  if (const audit::TarMember* m = member("pickle")) {
    scanner.note_pickle();
    (void)scanner.scan_pickle(data_of(*m), "pickle", 0);
  }
  // Other members torch.load does not read, which another reader may unpickle.
  for (const auto& m : members) {
    if (m.name == "storages" || m.name == "tensors" || m.name == "pickle" || m.name == "sys_info")
      continue;
    const auto data = data_of(m);
    if (!has_pickle_extension(m.name) && !starts_like_pickle(data)) continue;
    scanner.note_pickle();
    scanner.finding(Verdict::kUnknown, m.name, "a pickle member torch.load does not read");
    (void)scanner.scan_pickle(data, m.name, 0);
  }
  // pickle.load reads the same bytes from their start, and a tar header can be a pickle as well:
  // judge them as one where they name a global at all.
  const pickle::OpcodeCensus census = pickle::opcode_census(bytes);
  const auto count = [&](pickle::Opcode op) {
    return census.counts[static_cast<std::uint8_t>(op)];
  };
  if (count(pickle::Opcode::kGlobal) + count(pickle::Opcode::kInst) +
          count(pickle::Opcode::kStackGlobal) >
      0) {
    (void)scanner.scan_stream(bytes, "the whole file as a pickle", 0, false);
  }
  if (!scanner.saw_pickle()) {
    scanner.finding(Verdict::kNotACheckpoint, "tar", "a tar archive without torch's members");
  }
  scanner.finish();
  if (!scanner.saw_pickle() && report.verdict <= Verdict::kUnknown) {
    report.verdict = Verdict::kNotACheckpoint;
    report.format = "";
  }
}

// torch.load's legacy stream under weights_only=True: five pickles, the first the magic number,
// the second the protocol version (_legacy_load); each by the weights-only rules.
void weights_only_stream(WeightsOnlyAnswer& answer, std::span<const std::byte> bytes) {
  static constexpr std::array<unsigned char, 10> kMagic{0x6c, 0xfc, 0x9c, 0x46, 0xf9,
                                                        0x20, 0x6a, 0xa8, 0x50, 0x19};
  std::size_t offset = 0;
  for (int index = 1; index <= 5; ++index) {
    const std::string where = fmt::format("stream pickle {}", index);
    const audit::WeightsOnlyCheck check = audit::check_weights_only(
        bytes.subspan(offset), index == 4 ? PersistentIds::kLegacy : PersistentIds::kNone);
    if (!check.accepted) {
      refuse(answer, check.reason, audit::at(where, check.offset));
      return;
    }
    if (index == 1 &&
        (check.root_long_bytes.size() != kMagic.size() ||
         std::memcmp(check.root_long_bytes.data(), kMagic.data(), kMagic.size()) != 0)) {
      refuse(answer, "Invalid magic number; corrupt file?", where);
      return;
    }
    if (index == 2 && check.root_int != 1001) {
      refuse(answer, "Invalid protocol version", where);
      return;
    }
    offset += check.end;
  }
}

}  // namespace

std::string_view verdict_name(Verdict verdict) noexcept {
  switch (verdict) {
    case Verdict::kSafe:
      return "safe";
    case Verdict::kUnknown:
      return "unknown";
    case Verdict::kDangerous:
      return "dangerous";
    case Verdict::kNotACheckpoint:
      return "not a checkpoint";
  }
  return "unknown";
}

ScanReport scan(const std::filesystem::path& path, const Limits& limits) {
  const std::string path_text = path.string();
  const common::MappedFile file =
      common::with_context({.path = path_text}, [&] { return common::MappedFile::open(path); });
  return audit::scan_file(file, path_text, LoadOptions{.limits = limits});
}

ScanReport audit::scan_file(const common::MappedFile& file, std::string_view path_text,
                            const LoadOptions& options) {
  ScanReport report;
  report.weights_only.torch_version = std::string(audit::weights_only_torch_version());
  const auto bytes = file.bytes();
  // torch 2.15's torch.load hands a path ending in .safetensors to safetensors.torch.load_file,
  // whatever it holds.
  const bool safetensors_name = path_text.ends_with(".safetensors");
  if (starts_with(bytes, "PK\x03\x04")) {
    scan_zip(file, report, options);
  } else if (starts_with(bytes, "PK\x05\x06")) {
    // An empty zip: torch.load takes it for no zip (_is_zipfile) and reads a pickle.
    report.verdict = Verdict::kNotACheckpoint;
    report.findings.push_back({Verdict::kNotACheckpoint, "zip", "an empty zip archive"});
    refuse(report.weights_only, "an empty zip archive is no checkpoint");
  } else if (std::string problem; const auto members = audit::read_tar_members(bytes, problem)) {
    scan_tar(bytes, *members, report, options);
    if (!problem.empty()) report.findings.push_back({Verdict::kUnknown, "tar", problem});
  } else {
    // safetensors (8-byte little-endian header size, then a JSON object): data only, no code.
    // Read as a pickle (torch.load's legacy path), such a file stops at byte 8 at the latest ('{'
    // is no opcode): eight bytes cannot import and call anything (GLOBAL alone needs two lines).
    bool is_safetensors = false;
    if (bytes.size() >= 10 && std::to_integer<char>(bytes[8]) == '{') {
      std::uint64_t header_size = 0;
      for (std::size_t i = 0; i < 8; ++i)
        header_size |= std::to_integer<std::uint64_t>(bytes[i]) << (8 * i);
      is_safetensors = header_size >= 2 && header_size <= bytes.size() - 8;
    }
    if (is_safetensors) {
      report.format = "safetensors";
      report.weights_only.accepted = safetensors_name;
      if (!safetensors_name) {
        refuse(report.weights_only,
               "torch.load reads a safetensors file only through a path ending in .safetensors; "
               "otherwise it unpickles its bytes, which fails");
      }
    } else {
      Scanner scanner(report, options);
      report.format = scanner.scan_stream(bytes, "stream", 0);
      report.weights_only.accepted = true;
      weights_only_stream(report.weights_only, bytes);
      if (report.format.empty()) {
        report.findings.push_back(
            {Verdict::kNotACheckpoint, "", "neither a zip checkpoint nor a pickle stream"});
      }
      scanner.finish();
      if (report.format.empty() && report.verdict <= Verdict::kUnknown) {
        report.verdict = Verdict::kNotACheckpoint;
      }
    }
  }
  if (safetensors_name && report.format != "safetensors") {
    report.weights_only.accepted = false;
    report.weights_only.reason =
        "torch.load hands a path ending in .safetensors to safetensors, which cannot read this "
        "file";
    report.weights_only.where.clear();
  }
  // Safe is only ever what the weights-only loader accepts (ScanReport::verdict): the branches
  // above that judge no pickle (safetensors; a name that sends torch.load elsewhere) say so here.
  if (report.verdict == Verdict::kSafe && !report.weights_only.accepted) {
    report.verdict = Verdict::kUnknown;
    report.findings.push_back({Verdict::kUnknown, report.weights_only.where,
                               fmt::format("torch.load(weights_only=True) refuses the file: {}",
                                           report.weights_only.reason)});
  }
  return report;
}

}  // namespace pthload
