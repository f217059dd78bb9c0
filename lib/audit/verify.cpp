// verify_records(): the CRC-32 of every record of a zip checkpoint, read with pread a chunk at a
// time (torch never checks CRCs: a loader that did would refuse files torch reads).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/check.hpp"
#include "formats/read_image.hpp"
#include "pthload/error.hpp"
#include "pthload/inspect.hpp"
#include "zip/archive.hpp"

namespace pthload {

std::vector<RecordProblem> verify_records(const std::filesystem::path& path,
                                          const std::function<void(std::uint64_t)>& progress,
                                          const LoadOptions& options) {
  const std::string& path_text = path.native();
  return common::with_context({.path = path_text}, [&] {
    std::vector<RecordProblem> problems;
    // The index read with pread, the records checked a chunk at a time with pread: a file
    // truncated meanwhile is an IoError, not SIGBUS.
    const auto file = formats::index_file_image(path, options.limits);
    const auto archive = zip::Archive::parse(file, options.limits);
    for (const zip::Entry& entry : archive.entries()) {
      try {
        archive.verify_crc(entry);
      } catch (Error& e) {
        common::fill_missing(e.context(), {.path = path_text});
        problems.push_back({std::string(entry.name), e.what()});
      }
      if (progress) progress(entry.compressed_size);
    }
    return problems;
  });
}

}  // namespace pthload
