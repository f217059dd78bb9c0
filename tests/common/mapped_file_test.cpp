#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/mapped_file.hpp"
#include "support/error_code.hpp"

using pthload::Errc;
using pthload::common::MappedFile;

namespace {
std::filesystem::path write_temp(const std::string& content) {
  auto path = std::filesystem::temp_directory_path() /
              ("pthload_mapped_" + std::to_string(::getpid()) + ".bin");
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

std::string as_string(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}
}  // namespace

TEST_CASE("common: MappedFile maps a regular file") {
  const auto path = write_temp("hello, checkpoint");
  {
    auto file = MappedFile::open(path);
    CHECK(file.is_mapped());
    CHECK(as_string(file.bytes()) == "hello, checkpoint");
    MappedFile moved = std::move(file);
    CHECK(as_string(moved.bytes()) == "hello, checkpoint");
  }
  std::filesystem::remove(path);
}

TEST_CASE("common: MappedFile of an empty file is empty") {
  const auto path = write_temp("");
  CHECK(MappedFile::open(path).bytes().empty());
  std::filesystem::remove(path);
}

TEST_CASE("common: MappedFile reads a pipe with read()") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const std::string payload(200'000, 'x');
  std::FILE* writer = ::fdopen(fds[1], "w");
  // The pipe buffer is smaller than the payload: write from a child so the read can drain it.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    std::fwrite(payload.data(), 1, payload.size(), writer);
    std::fclose(writer);
    ::_exit(0);
  }
  std::fclose(writer);
  const auto path = "/proc/self/fd/" + std::to_string(fds[0]);
  auto file = MappedFile::open(path);
  CHECK_FALSE(file.is_mapped());
  CHECK(file.bytes().size() == payload.size());
  CHECK(as_string(file.bytes()) == payload);
  ::close(fds[0]);
}

TEST_CASE("common: MappedFile bounds what it reads from a pipe") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  REQUIRE(::write(fds[1], "0123456789", 10) == 10);
  ::close(fds[1]);
  const auto path = "/proc/self/fd/" + std::to_string(fds[0]);
  CHECK(pthload::test::error_code_of([&] { (void)MappedFile::open(path, 4); }) ==
        Errc::kIoFileTooLarge);
  ::close(fds[0]);
}

TEST_CASE("common: MappedFile reports a missing file as IoError") {
  CHECK_THROWS_AS((void)MappedFile::open("/nonexistent/pthload/file.pt"), pthload::IoError);
  CHECK(pthload::test::error_code_of([] { (void)MappedFile::open("/nonexistent/x"); }) ==
        Errc::kIoOpenFailed);
}
