// `pthinspect verify FILE`: every record's CRC-32, the structure, every tensor within its
// storage, every byte read once. Exit 0, or 1 with one line per problem on stderr.
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <pthload/pthload.hpp>

#include "commands.hpp"
#include "output.hpp"

namespace pthinspect {
namespace {

struct VerifyArgs {
  std::string path;
};

// The last byte a strided view reaches, past its first element, in elements.
std::uint64_t extent_of(const pthload::Tensor& t) {
  std::uint64_t extent = 0;
  for (std::size_t d = 0; d < t.dim(); ++d) {
    if (t.sizes()[d] == 0) return 0;
    extent +=
        static_cast<std::uint64_t>(t.sizes()[d] - 1) * static_cast<std::uint64_t>(t.strides()[d]);
  }
  return extent;
}

int run_verify(const VerifyArgs& args) {
  std::vector<std::string> problems;
  std::uint64_t record_count = 0;
  // The records first: a zip checkpoint's bytes are all in its records, each read once.
  const bool is_zip = [&] {
    try {
      const auto reader = pthload::RecordReader::open(args.path);
      const auto records = reader.list();
      record_count = records.size();
      std::uint64_t total = 0;
      for (const auto& r : records)
        total += r.compressed_size;
      Progress progress("verify", total);
      for (const auto& problem : reader.verify_all([&](std::uint64_t n) { progress.advance(n); }))
        problems.push_back(problem.message);
      return true;
    } catch (const pthload::Error& e) {
      if (e.code() != pthload::Errc::kZipNotAnArchive &&
          e.code() != pthload::Errc::kZipEndRecordNotFound) {
        problems.push_back(e.what());
      }
      return false;
    }
  }();
  // Then the structure: the pickle, every storage and every tensor, as load() checks them.
  std::size_t tensor_count = 0;
  try {
    const auto checkpoint = pthload::open(args.path);
    for (const auto& named : checkpoint.tensors()) {
      const pthload::Tensor& t = named.tensor;
      ++tensor_count;
      if (!t.has_storage() || t.numel() == 0) continue;
      const auto& storage = t.storage();
      const std::uint64_t element = pthload::element_size(t.dtype());
      const std::uint64_t packed = pthload::packed_per_byte(t.dtype());
      const std::uint64_t last = static_cast<std::uint64_t>(t.storage_offset()) + extent_of(t);
      // The byte after the last element's (last / packed + 1: no wrap for the largest last).
      const std::uint64_t needed = packed > 1 ? last / packed + 1 : (last + 1) * element;
      if (t.storage_offset() < 0 || needed > storage.nbytes()) {
        problems.push_back(
            fmt::format("{}: tensor '{}' reaches byte {} of storage '{}', which holds {} bytes",
                        args.path, named.name, needed, storage.key(), storage.nbytes()));
      }
    }
  } catch (const pthload::Error& e) {
    problems.push_back(e.what());
  }
  if (!problems.empty()) {
    for (const auto& problem : problems)
      std::cerr << "pthinspect: verify: " << problem << '\n';
    return 1;
  }
  if (is_zip) {
    std::cout << fmt::format(
        "{}: ok: {} records (every CRC-32 checked), {} tensors within their "
        "storages\n",
        args.path, record_count, tensor_count);
  } else {
    std::cout << fmt::format(
        "{}: ok: {} tensors within their storages (no checksums in this "
        "format)\n",
        args.path, tensor_count);
  }
  return 0;
}

}  // namespace

Command add_verify_command(CLI::App& app) {
  auto args = std::make_shared<VerifyArgs>();
  auto* cmd = app.add_subcommand(
      "verify", "Check every record's CRC-32, the structure and every tensor's bounds (exit 0/1)");
  cmd->add_option("file", args->path, "checkpoint")->required();
  return {cmd, [args] { return run_verify(*args); }};
}

}  // namespace pthinspect
