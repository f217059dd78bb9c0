// verify_records(): the CRC-32 of every record of a zip checkpoint, read with pread a chunk at a
// time (torch never checks CRCs: a loader that did would refuse files torch reads).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "pthload/error.hpp"
#include "pthload/inspect.hpp"
#include "torch/read_image.hpp"
#include "zip/archive.hpp"

namespace pthload {

std::vector<RecordProblem> verify_records(const std::filesystem::path& path,
                                          const std::function<void(std::uint64_t)>& progress,
                                          const LoadOptions& options) {
  std::vector<RecordProblem> problems;
  try {
    // The index read with pread, the records checked a chunk at a time with pread: a file
    // truncated meanwhile is an IoError, not SIGBUS.
    const auto file = torch::index_file_image(path, options.limits);
    const auto archive = zip::Archive::parse(file, options.limits);
    for (const zip::Entry& entry : archive.entries()) {
      try {
        archive.verify_crc(entry);
      } catch (Error& e) {
        if (e.context().path.empty()) e.context().path = path.string();
        problems.push_back({std::string(entry.name), e.what()});
      }
      if (progress) progress(entry.compressed_size);
    }
  } catch (Error& e) {
    if (e.context().path.empty()) e.context().path = path.string();
    throw;
  }
  return problems;
}

}  // namespace pthload
