// `pthinspect scan FILE...`: a security verdict per file from the pickle machine's real state
// (what torch.load would import and call), and what torch.save never writes. Exit 0 when every
// file is safe, else the worst verdict: 1 unknown, 2 dangerous, 3 not a checkpoint.
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
    globals.push_back({{"module", g.module},
                       {"name", g.name},
                       {"verdict", pthload::verdict_name(g.verdict)},
                       {"called", g.called},
                       {"where", g.where}});
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
  return {{"file", path},
          {"verdict", pthload::verdict_name(report.verdict)},
          {"format", report.format.empty() ? nlohmann::json() : nlohmann::json(report.format)},
          {"globals", std::move(globals)},
          {"findings", std::move(findings)},
          {"opcodes", std::move(opcodes)}};
}

void print_report(const std::string& path, const pthload::ScanReport& report, bool verbose,
                  bool colour) {
  std::cout << fmt::format(
      "{}: {}{}\n", path,
      coloured(pthload::verdict_name(report.verdict), colour_of(report.verdict), colour),
      report.format.empty() ? "" : fmt::format(" ({})", report.format));
  for (const auto& g : report.globals) {
    if (g.verdict == pthload::Verdict::kSafe && !verbose) continue;
    std::cout << fmt::format(
        "  {:<9}  {}.{}{}  in {}\n",
        coloured(pthload::verdict_name(g.verdict), colour_of(g.verdict), colour), g.module, g.name,
        g.called ? " (called)" : "", g.where);
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
    worst = std::max(worst, report.verdict);
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
      "Security verdict per file: safe, unknown, dangerous (exit 0/1/2; 3: not a checkpoint); "
      "nothing is ever executed");
  cmd->add_option("files", args->paths, "checkpoints or pickles")->required();
  cmd->add_flag("--json", args->json, "print JSON: globals, findings and the opcode census");
  cmd->add_flag("-v,--verbose", args->verbose, "also list the globals judged safe");
  return {cmd, [args] { return run_scan(*args); }, 3};
}

}  // namespace pthinspect
