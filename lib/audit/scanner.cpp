// scan()'s judgement of pickles, from the pickle machine's real state: every global it makes and
// every call and BUILD, whether or not the result reaches them (Python's unpickler imports and
// calls a value even when it is popped afterwards). Where CPython would read the bytes otherwise
// (a FRAME it reads differently), its reading is judged too; where the machine stops short of
// STOP, the rest is read linearly for the names it holds.
#include "audit/scanner.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "audit/cpython_reading.hpp"
#include "pickle/census.hpp"
#include "pickle/machine.hpp"
#include "pickle/opcodes.hpp"
#include "pickle/text.hpp"
#include "pthload/error.hpp"

namespace pthload::audit {
namespace {

using pickle::Kind;
using pickle::Opcode;
using pickle::Value;

// Opcodes CPython's pickler (protocols 2-5) and torch's own pickler never write: a file holding
// them was made by hand. INST and OBJ (protocol 0/1 objects), EXT* (copyreg's registry), the
// text opcodes of protocol 0, DUP (no pickler writes it), POP and POP_MARK (only for recursive
// tuples, which checkpoints do not hold; the classic way to discard a call's result), PERSID as
// text, and out-of-band buffers.
constexpr auto kNeverWritten = std::to_array<Opcode>(
    {Opcode::kInst,    Opcode::kObj,    Opcode::kExt1,       Opcode::kExt2,
     Opcode::kExt4,    Opcode::kDup,    Opcode::kPop,        Opcode::kPopMark,
     Opcode::kInt,     Opcode::kLong,   Opcode::kFloat,      Opcode::kString,
     Opcode::kUnicode, Opcode::kGet,    Opcode::kPut,        Opcode::kDict,
     Opcode::kList,    Opcode::kPersId, Opcode::kNextBuffer, Opcode::kReadonlyBuffer});

// What protocols 0 and 1 write, which torch.save(pickle_protocol=0 or 1) therefore writes too: a
// pickle without PROTO may hold these (Lib/pickle.py save_long, save_float, save_str, memoize,
// save_dict, save_list, persistent_id).
constexpr auto kTextProtocolOpcodes = std::to_array<Opcode>(
    {Opcode::kInt, Opcode::kLong, Opcode::kFloat, Opcode::kString, Opcode::kUnicode, Opcode::kGet,
     Opcode::kPut, Opcode::kDict, Opcode::kList, Opcode::kPersId});

// Globals whose call calls one of its arguments (or makes an instance of it, running its
// __new__, __init__ or __setstate__): what is passed there is judged as if it were called.
struct CallsArguments {
  std::string_view module;
  std::string_view name;
  std::array<int, 2> arguments;  // -1: none
};
constexpr auto kCallsArguments = std::to_array<CallsArguments>({
    {"torch._tensor", "_rebuild_from_type_v2", {0, 1}},  // func(*args), then new_type's state
    {"torch._tensor", "_rebuild_from_type", {0, 1}},
    {"torch._utils", "_rebuild_wrapper_subclass", {0, -1}},
    {"copyreg", "_reconstructor", {0, 1}},
    {"copy_reg", "_reconstructor", {0, 1}},
    {"copyreg", "__newobj__", {0, -1}},
    {"copyreg", "__newobj_ex__", {0, -1}},
    {"collections", "defaultdict", {0, -1}},
    {"builtins", "map", {0, -1}},
    {"builtins", "filter", {0, -1}},
    {"builtins", "iter", {0, -1}},
    {"__builtin__", "map", {0, -1}},
    {"__builtin__", "filter", {0, -1}},
    {"__builtin__", "iter", {0, -1}},
});

bool is_loads(const Value& callable) {
  if (callable.is_global("torch.storage", "_load_from_bytes")) return true;
  const std::string_view module = callable.module();
  const std::string_view name = callable.name();
  const bool pickle_module = module == "pickle" || module == "_pickle" || module == "cPickle" ||
                             module == "dill" || module.starts_with("dill.");
  return pickle_module && (name == "loads" || name == "_loads");
}

// The global a chain of calls starts from: what built the callable being called.
const Value* maker_of(const Value& call) {
  const Value* maker = &call;
  for (int hops = 0; maker->is(Kind::kCall) && hops < 64; ++hops)
    maker = &maker->callable();
  return maker->is(Kind::kGlobal) ? maker : nullptr;
}

}  // namespace

std::string at(std::string_view where, std::uint64_t offset) {
  return fmt::format("{}+{:#x}", where, offset);
}

void Scanner::finding(Verdict severity, std::string where, std::string message) {
  report_.findings.push_back({severity, std::move(where), std::move(message)});
}

void Scanner::add_global(std::string_view module, std::string_view name, bool called,
                         const std::string& where) {
  auto key = std::make_tuple(std::string(module), std::string(name), where);
  auto [it, inserted] = globals_.try_emplace(key);
  if (inserted) {
    auto judged = judgements_.try_emplace({std::get<0>(key), std::get<1>(key)});
    if (judged.second) judged.first->second = judge_global(module, name);
    it->second = {.module = std::get<0>(key),
                  .name = std::get<1>(key),
                  .verdict = judged.first->second.verdict,
                  .called = called,
                  .where = where,
                  .reason = judged.first->second.reason};
  }
  it->second.called = it->second.called || called;
}

void Scanner::on_call(const Value& call, const std::string& where) {
  const Value& callable = call.callable();
  // Calling what a call returned: getattr(os, 'system')(...), attrgetter('system')(os),
  // partial(f, ...)(...), a dotted global's __getitem__('eval')(...). torch.save never writes
  // such a call; the callable was built while unpickling, so nothing vouches for it.
  if (callable.is(Kind::kCall)) {
    const Value* maker = maker_of(callable);
    std::string message =
        maker != nullptr
            ? fmt::format("calls what a call of {}.{} returned (a callable built while unpickling)",
                          maker->module(), maker->name())
            : std::string("calls a callable built while unpickling");
    const auto [it, first] =
        repeated_findings_.try_emplace(std::move(message), report_.findings.size(), 0);
    if (first) finding(Verdict::kDangerous, where, it->first);
    ++it->second.second;
    return;
  }
  if (!callable.is(Kind::kGlobal)) {
    const auto [it, first] = repeated_findings_.try_emplace(
        fmt::format("calls a {}, which is no global: torch.save never writes such a call",
                    pickle::kind_name(callable.kind())),
        report_.findings.size(), 0);
    if (first) finding(Verdict::kUnknown, where, it->first);
    ++it->second.second;
    return;
  }
  add_global(callable.module(), callable.name(), true, where);
  // What a call passes to a function that calls it is called too.
  const auto args = call.args().items();
  for (const auto& entry : kCallsArguments) {
    if (!callable.is_global(entry.module, entry.name)) continue;
    for (const int index : entry.arguments) {
      if (index < 0 || static_cast<std::size_t>(index) >= args.size()) continue;
      const Value& argument = *args[static_cast<std::size_t>(index)];
      if (argument.is(Kind::kGlobal)) {
        add_global(argument.module(), argument.name(), true, where);
      } else if (argument.is(Kind::kCall)) {
        const Value* maker = maker_of(argument);
        const auto [it, first] = repeated_findings_.try_emplace(
            fmt::format("passes what a call of {} returned to {}.{}, which calls it",
                        maker != nullptr ? fmt::format("{}.{}", maker->module(), maker->name())
                                         : std::string("a built callable"),
                        entry.module, entry.name),
            report_.findings.size(), 0);
        if (first) finding(Verdict::kDangerous, where, it->first);
        ++it->second.second;
      }
    }
  }
}

void Scanner::scan_machine(std::span<const std::byte> bytes, const std::string& where, int depth,
                           const std::function<void(const Value&)>& on_root,
                           std::optional<std::size_t>& end, std::optional<std::size_t>& failed_at,
                           const CPythonReading* reading) {
  std::vector<std::pair<std::string, std::vector<std::byte>>> nested;
  std::set<const Value*> nested_seen;
  repeated_findings_.clear();
  pickle::RunOptions run_options;
  run_options.allow_trailing_bytes = true;
  run_options.on_global_or_call = [&](const Value& value) {
    if (value.is(Kind::kGlobal)) {
      add_global(value.module(), value.name(), false, where);
      return;
    }
    on_call(value, where);
    const Value& callable = value.callable();
    // The bytes a loads-like call unpickles: a pickle no linear scan of this one sees. Each
    // bytes value once: a memo GET hands the same value to any number of calls, and copying it
    // per call would let a small file take any amount of memory.
    const auto args = value.args().items();
    if (callable.is(Kind::kGlobal) && is_loads(callable) && !args.empty() &&
        args[0]->is(Kind::kBytes) && nested_seen.insert(args[0]).second) {
      const auto inner = args[0]->as_bytes();
      nested.emplace_back(fmt::format("{}.{}", callable.module(), callable.name()),
                          std::vector<std::byte>(inner.begin(), inner.end()));
    }
  };
  run_options.on_build = [&](const Value& target, const Value&) {
    if (target.is(Kind::kGlobal)) {
      const auto [it, first] = repeated_findings_.try_emplace(
          fmt::format("BUILD sets attributes of {}.{} itself (a class, function or module, for "
                      "the whole process): the way to replace what later calls run",
                      target.module(), target.name()),
          report_.findings.size(), 0);
      if (first) finding(Verdict::kDangerous, where, it->first);
      ++it->second.second;
    }
  };
  try {
    pickle::Machine machine(options_.limits);
    const pickle::Result result = machine.run(bytes, run_options);
    end = result.end_offset;
    if (on_root) on_root(*result.root);
  } catch (const Error& e) {
    failed_at = e.context().offset;
    const auto in_input = [&](std::size_t at_bytes) {
      return reading != nullptr ? reading->input_offset(at_bytes) : at_bytes;
    };
    finding(Verdict::kUnknown, failed_at ? at(where, in_input(*failed_at)) : where,
            fmt::format("the pickle cannot be read to its end ({}); Python's unpickler runs it up "
                        "to there, or further where pthload is stricter",
                        e.what()));
  }
  for (const auto& [message, place] : repeated_findings_) {
    const auto [index, times] = place;
    if (times > 1) report_.findings[index].message += fmt::format(" ({} times)", times);
  }
  repeated_findings_.clear();
  for (auto& [callable, inner] : nested) {
    const std::string inner_where = fmt::format("{} > pickle given to {}", where, callable);
    if (depth >= 4) {
      finding(Verdict::kDangerous, inner_where, "pickles nested too deeply to scan");
      continue;
    }
    if (callable != "torch.storage._load_from_bytes") {
      finding(Verdict::kUnknown, inner_where, "a nested pickle stream");
    }
    constexpr std::string_view kZipMagic{"PK\x03\x04", 4};
    if (callable == "torch.storage._load_from_bytes" && inner.size() >= kZipMagic.size() &&
        std::memcmp(inner.data(), kZipMagic.data(), kZipMagic.size()) == 0) {
      // _load_from_bytes is torch.load on the bytes, which reads a zip archive's data.pkl too.
      finding(Verdict::kUnknown, inner_where,
              "a zip archive, whose data.pkl torch.load unpickles: archives inside a pickle are "
              "not opened by scan");
      continue;
    }
    // _load_from_bytes is torch.load on the bytes: here a legacy stream of stacked pickles.
    (void)scan_stream(inner, inner_where, depth + 1);
  }
}

std::optional<std::size_t> Scanner::scan_pickle(std::span<const std::byte> bytes,
                                                const std::string& where, int depth,
                                                const std::function<void(const Value&)>& on_root) {
  const pickle::OpcodeCensus census = pickle::opcode_census(bytes);
  for (std::size_t op = 0; op < census.counts.size(); ++op)
    if (census.counts[op] > 0) {
      const auto name = pickle::opcode_name(static_cast<std::uint8_t>(op));
      opcodes_[name.empty() ? fmt::format("{:#04x}", op) : std::string(name)] += census.counts[op];
    }
  const bool text_protocol = census.counts[static_cast<std::uint8_t>(Opcode::kProto)] == 0;
  for (const Opcode op : kNeverWritten) {
    const auto count = census.counts[static_cast<std::uint8_t>(op)];
    if (text_protocol && std::find(kTextProtocolOpcodes.begin(), kTextProtocolOpcodes.end(), op) !=
                             kTextProtocolOpcodes.end()) {
      continue;
    }
    if (count > 0) {
      finding(Verdict::kUnknown, where,
              fmt::format("opcode {} ({} time{}), which torch.save never writes",
                          pickle::opcode_name(static_cast<std::uint8_t>(op)), count,
                          count == 1 ? "" : "s"));
    }
  }

  std::optional<std::size_t> end;
  std::optional<std::size_t> failed_at;
  scan_machine(bytes, where, depth, on_root, end, failed_at);
  last_pickle_read_ = end.has_value();
  if (failed_at) {
    // What the machine could not reach, read linearly: a pickle CPython reads further than
    // pthload (whose limits and checks are stricter in places) must not hide names there.
    scan_linear_names(bytes, *failed_at, where);
  }

  // Frames: CPython's C unpickler, reading a file, can take other bytes for an operand than
  // pickletools and pthload do. Judge what it reads as well.
  const CPythonReading reading = read_as_cpython(bytes);
  if (reading.nested_frame) {
    finding(Verdict::kUnknown, at(where, *reading.nested_frame),
            "a FRAME begins before the previous frame ends: pickle.py refuses this, CPython's C "
            "unpickler reads on; no pickler writes it");
  }
  if (reading.divergence) {
    finding(Verdict::kUnknown, at(where, *reading.divergence), reading.divergence_reason);
    const std::string cpython_where = fmt::format("{} as CPython reads its frames", where);
    std::optional<std::size_t> cpython_end;
    std::optional<std::size_t> cpython_failed_at;
    scan_machine(reading.bytes, cpython_where, depth, {}, cpython_end, cpython_failed_at, &reading);
    if (cpython_failed_at) {
      scan_linear_names(reading.bytes, *cpython_failed_at, cpython_where, &reading);
    }
  }
  if (end) return end;
  return census.complete ? std::optional<std::size_t>(census.end_offset) : std::nullopt;
}

// The names GLOBAL, INST and STACK_GLOBAL would import in bytes the machine did not reach, read
// linearly as pickletools reads them; STACK_GLOBAL's names are the strings the opcodes before it
// pushed, memo entries followed (what picklescan recovers).
void Scanner::scan_linear_names(std::span<const std::byte> bytes, std::size_t from,
                                const std::string& where, const CPythonReading* reading) {
  const std::string linear_where =
      fmt::format("{} (read on linearly past +{:#x})", where,
                  reading != nullptr ? reading->input_offset(from) : from);
  struct Pushed {
    bool is_text = false;
    std::string text;
  };
  std::vector<Pushed> recent;  // the latest values pushed, up to a few
  std::map<std::uint64_t, Pushed> memo;
  const auto push = [&](Pushed value) {
    recent.push_back(std::move(value));
    if (recent.size() > 8) recent.erase(recent.begin());
  };
  std::size_t names = 0;
  std::size_t pos = from;
  const auto text_at = [&](std::size_t offset, std::size_t size) {
    return std::string(reinterpret_cast<const char*>(bytes.data() + offset), size);
  };
  while (pos < bytes.size() && names < 10'000) {
    const auto op = std::to_integer<std::uint8_t>(bytes[pos]);
    const pickle::OperandLayout layout = pickle::operand_layout(op);
    if (pickle::opcode_protocol(op) < 0) break;
    std::size_t operand = pos + 1;
    std::size_t next = operand;
    std::vector<std::pair<std::size_t, std::size_t>> lines;  // (start, size without newline)
    std::size_t payload = 0;
    std::size_t payload_size = 0;
    switch (layout.shape) {
      case pickle::OperandShape::kNone:
        break;
      case pickle::OperandShape::kFixed:
        next += layout.width;
        break;
      case pickle::OperandShape::kLine:
      case pickle::OperandShape::kTwoLines: {
        const int count = layout.shape == pickle::OperandShape::kLine ? 1 : 2;
        for (int i = 0; i < count && next <= bytes.size(); ++i) {
          const auto* begin = bytes.data() + next;
          const void* nl = std::memchr(begin, '\n', bytes.size() - next);
          if (nl == nullptr) {
            next = bytes.size() + 1;
            break;
          }
          const auto size = static_cast<std::size_t>(static_cast<const std::byte*>(nl) - begin);
          lines.emplace_back(next, size);
          next += size + 1;
        }
        break;
      }
      case pickle::OperandShape::kCounted:
      case pickle::OperandShape::kCountedBytes: {
        if (bytes.size() - operand < layout.width) {
          next = bytes.size() + 1;
          break;
        }
        std::uint64_t length = 0;
        for (std::size_t i = 0; i < layout.width; ++i)
          length |= std::to_integer<std::uint64_t>(bytes[operand + i]) << (8 * i);
        payload = operand + layout.width;
        if (length > bytes.size() - payload) {
          next = bytes.size() + 1;
          break;
        }
        payload_size = static_cast<std::size_t>(length);
        next = payload + payload_size;
        break;
      }
    }
    if (next > bytes.size()) break;
    switch (static_cast<Opcode>(op)) {
      case Opcode::kGlobal:
      case Opcode::kInst:
        if (lines.size() == 2) {
          add_global(text_at(lines[0].first, lines[0].second),
                     text_at(lines[1].first, lines[1].second), op == 'i', linear_where);
          ++names;
        }
        push({});
        break;
      case Opcode::kShortBinUnicode:
      case Opcode::kBinUnicode:
      case Opcode::kBinUnicode8:
      case Opcode::kShortBinString:
      case Opcode::kBinString:
        push({true, text_at(payload, payload_size)});
        break;
      case Opcode::kString:
      case Opcode::kUnicode: {
        std::string text = text_at(lines[0].first, lines[0].second);
        if (op == 'S' && text.size() >= 2) text = text.substr(1, text.size() - 2);
        push({true, std::move(text)});
        break;
      }
      case Opcode::kMemoize:
        if (!recent.empty()) memo[memo.size()] = recent.back();
        break;
      case Opcode::kBinPut:
      case Opcode::kLongBinPut:
      case Opcode::kPut: {
        std::uint64_t key = 0;
        if (op == 'p') {
          key = std::strtoull(text_at(lines[0].first, lines[0].second).c_str(), nullptr, 10);
        } else {
          for (std::size_t i = 0; i < layout.width; ++i)
            key |= std::to_integer<std::uint64_t>(bytes[operand + i]) << (8 * i);
        }
        if (!recent.empty()) memo[key] = recent.back();
        break;
      }
      case Opcode::kBinGet:
      case Opcode::kLongBinGet:
      case Opcode::kGet: {
        std::uint64_t key = 0;
        if (op == 'g') {
          key = std::strtoull(text_at(lines[0].first, lines[0].second).c_str(), nullptr, 10);
        } else {
          for (std::size_t i = 0; i < layout.width; ++i)
            key |= std::to_integer<std::uint64_t>(bytes[operand + i]) << (8 * i);
        }
        const auto it = memo.find(key);
        push(it == memo.end() ? Pushed{} : it->second);
        break;
      }
      case Opcode::kPop:
        if (!recent.empty()) recent.pop_back();
        break;
      case Opcode::kStackGlobal:
        if (recent.size() >= 2 && recent[recent.size() - 1].is_text &&
            recent[recent.size() - 2].is_text) {
          add_global(recent[recent.size() - 2].text, recent[recent.size() - 1].text, false,
                     linear_where);
          ++names;
        } else {
          finding(Verdict::kUnknown, at(where, pos),
                  "a STACK_GLOBAL past the point pthload could read, whose names a linear "
                  "reading cannot recover");
        }
        recent.clear();
        push({});
        break;
      default:
        if (op != '.' && op != '(' && op != 0x95 && op != 0x80) push({});
        break;
    }
    pos = next;
    if (op == '.') break;
  }
}

std::string Scanner::scan_stream(std::span<const std::byte> bytes, const std::string& where,
                                 int depth, bool torch_reads_it) {
  const std::size_t globals_before = globals_.size();
  const std::size_t findings_before = report_.findings.size();
  const auto first = scan_pickle(bytes, fmt::format("{} pickle 1", where), depth);
  if (!last_pickle_read_ && globals_.size() == globals_before) {
    // The bytes are no pickle pthload can read and name no global anywhere: Python's unpickler
    // imports and calls nothing in them either. Findings about unreadable bytes mean nothing.
    report_.findings.resize(findings_before);
    return "";
  }
  saw_pickle_ = true;
  if (!first) return "pickle";
  // torch/serialization.py _legacy_save: magic number, protocol version, sys_info, the object,
  // the storage keys; then the storages' raw bytes. torch.load runs the first pickle whatever
  // it holds, before it compares it with the magic number.
  if (!is_legacy_magic(bytes.first(*first))) {
    if (*first < bytes.size()) {
      finding(Verdict::kUnknown, at(where, *first),
              fmt::format("{} bytes after the pickle's STOP", bytes.size() - *first));
    }
    finding(Verdict::kUnknown, where,
            torch_reads_it ? "a bare pickle, not a torch.save stream: torch.load runs it, then "
                             "fails on the magic number"
                           : "a pickle that pickle.load runs from the file's first byte");
    return "pickle";
  }
  std::size_t offset = *first;
  for (int index = 2; index <= 5 && offset < bytes.size(); ++index) {
    const auto end =
        scan_pickle(bytes.subspan(offset), fmt::format("{} pickle {}", where, index), depth);
    if (!end) break;
    offset += *end;
  }
  return "legacy";
}

bool Scanner::is_legacy_magic(std::span<const std::byte> pickle_bytes) {
  // 0x1950a86a20f9469cfc6c as LONG1: 10 little-endian bytes.
  static constexpr std::array<unsigned char, 12> kMagicLong1{0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                                             0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  const auto* begin = reinterpret_cast<const unsigned char*>(pickle_bytes.data());
  if (std::search(begin, begin + pickle_bytes.size(), kMagicLong1.begin(), kMagicLong1.end()) !=
      begin + pickle_bytes.size()) {
    return true;
  }
  // Protocols 0 and 1 write it as a text LONG: L119547037146038801333356L.
  const std::string_view text(reinterpret_cast<const char*>(begin), pickle_bytes.size());
  return text.starts_with("L119547037146038801333356");
}

void Scanner::finish() {
  for (auto& [key, global] : globals_)
    report_.globals.push_back(std::move(global));
  globals_.clear();
  for (auto& [name, count] : opcodes_)
    report_.opcodes.emplace_back(name, count);
  opcodes_.clear();
  Verdict worst = Verdict::kSafe;
  for (const auto& global : report_.globals)
    worst = std::max(worst, global.verdict);
  for (const auto& finding : report_.findings)
    if (finding.severity != Verdict::kNotACheckpoint) worst = std::max(worst, finding.severity);
  // Safe is what torch's weights-only loader accepts and nothing else found makes doubtful.
  if (!report_.weights_only.accepted) worst = std::max(worst, Verdict::kUnknown);
  report_.verdict = worst;
}

}  // namespace pthload::audit
