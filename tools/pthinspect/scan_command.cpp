// `pthinspect scan FILE...`: a security verdict per file from the pickle machine's real state
// (what torch.load would import and call), and whether torch.load(weights_only=True) accepts it.
// Exit 0 when every file is safe, else the worst verdict: 1 unknown, 2 dangerous, 3 not a
// checkpoint, a dangerous file deciding over the others.
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <pthload/pthload.hpp>

#include "commands.hpp"
#include "output.hpp"

namespace pthinspect {
namespace {

struct ScanArgs {
  std::vector<std::string> paths;
  bool json = false;
  bool verbose = false;
};

// Record names and messages come from the file and need not be UTF-8: JSON output replaces
// invalid bytes with U+FFFD rather than failing.
int exit_status(pthload::Verdict verdict) {
  return static_cast<int>(verdict);
}

// Over several files a dangerous one decides the exit status, then one that is no checkpoint,
// then an unknown one.
pthload::Verdict worse(pthload::Verdict a, pthload::Verdict b) {
  const auto rank = [](pthload::Verdict v) {
    switch (v) {
      case pthload::Verdict::kSafe:
        return 0;
      case pthload::Verdict::kUnknown:
        return 1;
      case pthload::Verdict::kNotACheckpoint:
        return 2;
      case pthload::Verdict::kDangerous:
        return 3;
    }
    return 3;
  };
  return rank(a) >= rank(b) ? a : b;
}

std::string_view colour_of(pthload::Verdict verdict) {
  switch (verdict) {
    case pthload::Verdict::kSafe:
      return "32";
    case pthload::Verdict::kUnknown:
      return "33";
    default:
      return "31";
  }
}

nlohmann::json report_json(const std::string& path, const pthload::ScanReport& report) {
  auto globals = nlohmann::json::array();
  for (const auto& g : report.globals) {
    nlohmann::json global = {{"module", g.module},
                             {"name", g.name},
                             {"verdict", pthload::verdict_name(g.verdict)},
                             {"called", g.called},
                             {"where", g.where}};
    if (!g.reason.empty()) global["reason"] = g.reason;
    globals.push_back(std::move(global));
  }
  auto findings = nlohmann::json::array();
  for (const auto& f : report.findings) {
    findings.push_back({{"severity", pthload::verdict_name(f.severity)},
                        {"where", f.where},
                        {"message", f.message}});
  }
  nlohmann::json opcodes = nlohmann::json::object();
  for (const auto& [name, count] : report.opcodes)
    opcodes[name] = count;
  nlohmann::json weights_only = {{"accepted", report.weights_only.accepted},
                                 {"torch", report.weights_only.torch_version}};
  if (!report.weights_only.accepted) {
    weights_only["reason"] = report.weights_only.reason;
    weights_only["where"] = report.weights_only.where;
  }
  return {{"file", path},
          {"verdict", pthload::verdict_name(report.verdict)},
          {"format", report.format.empty() ? nlohmann::json() : nlohmann::json(report.format)},
          {"weights_only", std::move(weights_only)},
          {"globals", std::move(globals)},
          {"findings", std::move(findings)},
          {"code_calls", report.code_calls},
          {"opcodes", std::move(opcodes)}};
}

void print_report(const std::string& path, const pthload::ScanReport& report, bool verbose,
                  bool colour) {
  std::cout << fmt::format(
      "{}: {}{}\n", path,
      coloured(pthload::verdict_name(report.verdict), colour_of(report.verdict), colour),
      report.format.empty() ? "" : fmt::format(" ({})", report.format));
  const auto& weights_only = report.weights_only;
  std::cout << fmt::format(
      "  torch {} weights_only=True: {}\n", weights_only.torch_version,
      weights_only.accepted
          ? std::string("accepted")
          : fmt::format(
                "refused: {}{}", weights_only.reason,
                weights_only.where.empty() ? "" : fmt::format(" ({})", weights_only.where)));
  for (const auto& g : report.globals) {
    if (g.verdict == pthload::Verdict::kSafe && !verbose) continue;
    std::cout << fmt::format(
        "  {:<9}  {}.{}{}  in {}{}\n",
        coloured(pthload::verdict_name(g.verdict), colour_of(g.verdict), colour), g.module, g.name,
        g.called ? " (called)" : "", g.where, g.reason.empty() ? "" : ": " + g.reason);
  }
  for (const auto& f : report.findings) {
    std::cout << fmt::format(
        "  {:<9}  {}{}\n",
        coloured(pthload::verdict_name(f.severity), colour_of(f.severity), colour),
        f.where.empty() ? "" : f.where + ": ", f.message);
  }
}

int run_scan(const ScanArgs& args) {
  pthload::Verdict worst = pthload::Verdict::kSafe;
  auto reports = nlohmann::json::array();
  const bool colour = use_colour(1);
  for (const auto& path : args.paths) {
    pthload::ScanReport report;
    try {
      report = pthload::scan(path);
    } catch (const pthload::Error& e) {
      // A file that cannot be read is no checkpoint; the others are still scanned.
      report.verdict = pthload::Verdict::kNotACheckpoint;
      report.findings.push_back({pthload::Verdict::kNotACheckpoint, "", e.what()});
    }
    worst = worse(worst, report.verdict);
    if (args.json) {
      reports.push_back(report_json(path, report));
    } else {
      print_report(path, report, args.verbose, colour);
    }
  }
  if (args.json)
    std::cout << nlohmann::json{{"files", std::move(reports)}}.dump(
                     1, ' ', false, nlohmann::json::error_handler_t::replace)
              << '\n';
  return exit_status(worst);
}

}  // namespace

Command add_scan_command(CLI::App& app) {
  auto args = std::make_shared<ScanArgs>();
  auto* cmd = app.add_subcommand(
      "scan",
      "Can loading the file run code? A verdict per file, and whether torch.load(weights_only="
      "True) accepts it; nothing is ever executed");
  cmd->footer(
      "Two answers per file:\n"
      "  verdict       safe: proved harmless. Every global the pickles name is, by exact name,\n"
      "                one torch.load(weights_only=True) allows; every call and BUILD is one it\n"
      "                accepts, and it accepts the file; CPython's unpickler and pthload read the\n"
      "                same opcodes; nothing else in the file is run by a loader (code, extra\n"
      "                pickles).\n"
      "                unknown: not proved harmless (a global off that allow list, an opcode or\n"
      "                layout that loader refuses, bytes CPython could read otherwise,\n"
      "                TorchScript code, a pickle or record that cannot be read).\n"
      "                dangerous: something that runs commands or code, reaches files,\n"
      "                processes or the network, or unpickles more; or a structure made to\n"
      "                mislead scanners.\n"
      "                not a checkpoint: holds no pickle any loader would run.\n"
      "  weights_only  accepted or refused (with torch's reason): what torch.load(weights_only=\n"
      "                True), torch's default since 2.6, does with the file, by the rules of the\n"
      "                torch version named. Tensor data records are not read.\n"
      "Exit status: 0 safe, 1 unknown, 2 dangerous, 3 not a checkpoint; over several files a\n"
      "dangerous one decides, then one that is no checkpoint, then an unknown one.");
  cmd->add_option("files", args->paths, "checkpoints or pickles")->required();
  cmd->add_flag("--json", args->json,
                "print JSON: verdict, weights_only, globals (with reasons), findings, code_calls "
                "and the opcode census");
  cmd->add_flag("-v,--verbose", args->verbose, "also list the globals judged safe");
  return {cmd, [args] { return run_scan(*args); }, 3};
}

}  // namespace pthinspect
