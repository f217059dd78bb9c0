// fuzz_audit: scan() and the models it judges pickles by. Properties: scan never throws for what a
// file holds and never calls a file safe that torch's weights-only loader refuses or that has a
// finding against it; the weights-only model, when it accepts, ends where the linear census ends;
// CPython's reading of the frames consumes no byte twice and none the input lacks.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "audit/cpython_reading.hpp"
#include "audit/scan_file.hpp"
#include "audit/weights_only.hpp"
#include "common/mapped_file.hpp"
#include "pickle/census.hpp"
#include "pthload/scan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pthload;
  const auto bytes = std::as_bytes(std::span{data, size});
  LoadOptions options;
  options.limits.max_zip_entries = 10'000;
  options.limits.max_inflated_record_bytes = 64 << 20;
  options.limits.max_pickle_stack = 100'000;
  options.limits.max_pickle_memo = 100'000;
  options.limits.max_pickle_nesting = 200;
  options.limits.max_pickle_values = 1'000'000;
  const auto file = common::MappedFile::borrow(bytes);
  const ScanReport report = audit::scan_file(file, "fuzz.pt", options);
  if (report.verdict == Verdict::kSafe) {
    // A safetensors file holds no pickle: safe whatever torch.load makes of its name.
    if (!report.weights_only.accepted && report.format != "safetensors") std::abort();
    for (const auto& finding : report.findings)
      if (finding.severity != Verdict::kSafe) std::abort();
    for (const auto& global : report.globals)
      if (global.verdict != Verdict::kSafe) std::abort();
  }

  const auto check = audit::check_weights_only(bytes, audit::PersistentIds::kZip);
  if (check.accepted) {
    const auto census = pickle::opcode_census(bytes);
    if (!census.complete || census.end_offset != check.end) std::abort();
  }

  const auto reading = audit::read_as_cpython(bytes);
  if (!reading.divergence && !reading.bytes.empty()) std::abort();
  if (reading.bytes.size() > bytes.size()) std::abort();
  for (std::size_t at = 0; at < reading.bytes.size(); ++at) {
    const std::size_t from = reading.input_offset(at);
    if (from >= bytes.size() || bytes[from] != reading.bytes[at]) std::abort();
  }
  return 0;
}
