// common::MappedFile: a mapping of a regular file, read() of what cannot be mapped (a pipe) within
// a bound, and the error for a missing file.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "common/mapped_file.hpp"
#include "support/bytes.hpp"
#include "support/error_code.hpp"
#include "support/files.hpp"

using pthload::Errc;
using pthload::common::MappedFile;
using pthload::test::bytes_of;
using pthload::test::TempPath;
using pthload::test::text_of;

TEST_CASE("common: MappedFile maps a regular file") {
  const TempPath temp(bytes_of("hello, checkpoint"), ".bin");
  auto file = MappedFile::open(temp.path());
  CHECK(file.is_mapped());
  CHECK(text_of(file.bytes()) == "hello, checkpoint");
  MappedFile moved = std::move(file);
  CHECK(text_of(moved.bytes()) == "hello, checkpoint");
}

TEST_CASE("common: MappedFile of an empty file is empty") {
  const TempPath temp(bytes_of(""), ".bin");
  CHECK(MappedFile::open(temp.path()).bytes().empty());
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
  CHECK(text_of(file.bytes()) == payload);
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
