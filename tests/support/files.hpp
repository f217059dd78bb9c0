// Test helper: files on disk — a temporary path removed with whatever is there, the bytes of a
// file, and the fixture files under a folder of tests/fixtures.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace pthload::test {

/// Writes `bytes` to `path`, replacing what is there.
inline void write_file(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}
inline void write_file(const std::filesystem::path& path, std::string_view text) {
  write_file(path, std::as_bytes(std::span(text.data(), text.size())));
}

/// The bytes of the file at `path`; throws when it cannot be read.
[[nodiscard]] inline std::vector<std::byte> file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto bytes = std::as_bytes(std::span(text.data(), text.size()));
  return {bytes.begin(), bytes.end()};
}

/// A path in the temporary directory, unique to this process and object, whose name ends in
/// `tail`. Whatever is there when it goes — a file, or a folder and all it holds — is removed.
/// Move-only.
class TempPath {
 public:
  /// Nothing is at the path yet.
  explicit TempPath(std::string_view tail = "") {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("pthload_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) +
             std::string(tail));
    remove();
  }
  /// A file holding `bytes`.
  explicit TempPath(std::span<const std::byte> bytes, std::string_view tail = ".pt")
      : TempPath(tail) {
    write_file(path_, bytes);
  }
  /// An empty folder.
  [[nodiscard]] static TempPath folder(std::string_view tail = "") {
    TempPath temp(tail);
    std::filesystem::create_directories(temp.path_);
    return temp;
  }
  /// A copy of the file or folder `from`, which the test may change.
  [[nodiscard]] static TempPath copy_of(const std::filesystem::path& from) {
    TempPath temp("_" + from.filename().string());
    std::filesystem::copy(from, temp.path_, std::filesystem::copy_options::recursive);
    return temp;
  }

  TempPath(TempPath&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  TempPath& operator=(TempPath&& other) noexcept {
    if (this != &other) {
      remove();
      path_ = std::exchange(other.path_, {});
    }
    return *this;
  }
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;
  ~TempPath() { remove(); }

  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  /// The path of `name` inside the folder.
  [[nodiscard]] std::filesystem::path operator/(const std::filesystem::path& name) const {
    return path_ / name;
  }
  /// Writes the file, replacing what is there.
  void write(std::span<const std::byte> bytes) const { write_file(path_, bytes); }
  void write(std::string_view text) const { write_file(path_, text); }
  /// Writes the file `name` inside the folder, replacing what is there.
  void write(const std::filesystem::path& name, std::span<const std::byte> bytes) const {
    write_file(path_ / name, bytes);
  }
  void write(const std::filesystem::path& name, std::string_view text) const {
    write_file(path_ / name, text);
  }
  /// The text of the file, or of the file `name` inside the folder.
  [[nodiscard]] std::string read(const std::filesystem::path& name = {}) const {
    const auto bytes = file_bytes(name.empty() ? path_ : path_ / name);
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
  }

 private:
  void remove() const noexcept {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }

  std::filesystem::path path_;
};

/// tests/fixtures/`relative`.
[[nodiscard]] inline std::filesystem::path fixture_path(
    const std::filesystem::path& relative = {}) {
  return relative.empty() ? std::filesystem::path(PTHLOAD_FIXTURES_DIR)
                          : std::filesystem::path(PTHLOAD_FIXTURES_DIR) / relative;
}

/// For fixture_files: files whose extension is `extension` (".pt").
[[nodiscard]] inline std::function<bool(const std::filesystem::path&)> has_extension(
    std::string extension) {
  return [extension = std::move(extension)](const std::filesystem::path& path) {
    return path.extension() == extension;
  };
}

/// The regular files under tests/fixtures/`folder` (all of tests/fixtures when empty), at any
/// depth, that `wanted` accepts; sorted, so that their order, and any seed taken from it, is the
/// same on every run.
[[nodiscard]] inline std::vector<std::filesystem::path> fixture_files(
    const std::filesystem::path& folder,
    const std::function<bool(const std::filesystem::path&)>& wanted =
        [](const std::filesystem::path&) { return true; }) {
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(fixture_path(folder))) {
    if (entry.is_regular_file() && wanted(entry.path())) paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace pthload::test
