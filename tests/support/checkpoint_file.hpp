// Test helper: writes a torch-like zip checkpoint (zip_builder) to a temporary file that is
// removed when the object goes away.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/zip_builder.hpp"

namespace pthload::test {

class TempFile {
 public:
  explicit TempFile(const std::vector<std::byte>& bytes) {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() / ("pthload_test_" + std::to_string(::getpid()) +
                                                      "_" + std::to_string(counter++) + ".pt");
    std::ofstream(path_, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() { std::filesystem::remove(path_); }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// A checkpoint file "ck/data.pkl" + the given "ck/<name>" records, as torch.save lays it out.
inline TempFile checkpoint_file(const std::string& data_pkl,
                                std::vector<zip_build::Record> records = {}) {
  records.insert(records.begin(), {.name = "ck/data.pkl", .data = data_pkl});
  records.push_back({.name = "ck/version", .data = "3\n"});
  return TempFile(zip_build::build(records).bytes);
}

/// `count` little-endian float32 values first, first + 1, first + 2, ... as a record's bytes
/// (exact while they stay below 2^24).
inline std::string float_record(int count, float first = 0) {
  std::string bytes;
  for (int i = 0; i < count; ++i) {
    const float value = first + static_cast<float>(i);
    bytes.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  return bytes;
}

}  // namespace pthload::test
