// Shared by the fault tests: temporary files, the error code of a call.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "pthload/error.hpp"
#include "support/error_code.hpp"

namespace pthload::faults {

/// A path in the temporary directory, unique to this process and `name`, removed at the end.
class TempPath {
 public:
  explicit TempPath(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              ("pthload-faults-" + std::to_string(::getpid()) + "-" + name)) {}
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;
  ~TempPath() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

/// The code of the pthload::Error a call throws (kOk when none): the suites' shared helper.
using test::error_code_of;

}  // namespace pthload::faults
