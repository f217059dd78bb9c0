// common::FileReader under faults (the read hook of common/fault_hooks.hpp): pread retries EINTR
// and short reads, names EIO with the file, record and offset, and a file that ended early.
// Faults while loading a whole checkpoint: tests/formats/faults_io_test.cpp.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "common/fault_hooks.hpp"
#include "common/file_reader.hpp"
#include "pthload/error.hpp"
#include "support/bytes.hpp"
#include "support/error_code.hpp"
#include "support/files.hpp"
#include "support/read_hook.hpp"

namespace pthload::common {
namespace {

using test::error_code_of;
using test::error_thrown;
using test::ReadHook;
using test::TempPath;
using test::text_of;

int calls = 0;

// Interrupted every other call; otherwise at most 7 bytes.
ssize_t interrupted_and_short(int fd, void* buffer, std::size_t bytes, off_t offset) {
  if (calls++ % 2 == 0) {
    errno = EINTR;
    return -1;
  }
  return ::pread(fd, buffer, std::min<std::size_t>(bytes, 7), offset);
}

ssize_t eio(int, void*, std::size_t, off_t) {
  errno = EIO;
  return -1;
}

}  // namespace

TEST_CASE("common file reader: pread retries EINTR and continues short reads") {
  const TempPath file("_eintr");
  file.write("0123456789abcdefghijklmnopqrstuvwxyz");
  const auto reader = FileReader::open(file.path());
  std::vector<std::byte> got(30);
  calls = 0;
  {
    const ReadHook hook(interrupted_and_short);
    reader->read_at(3, got);
  }
  CHECK(text_of(got) == "3456789abcdefghijklmnopqrstuvw");
  CHECK(calls == 10);  // 5 interrupted, 5 short reads of 7, 7, 7, 7, 2 bytes
}

TEST_CASE("common file reader: EIO is an IoError naming the file, the record and the offset") {
  const TempPath file("_eio");
  file.write("0123456789");
  const auto reader = FileReader::open(file.path());
  std::vector<std::byte> got(4);
  const ReadHook hook(eio);
  const auto e = error_thrown<IoError>([&] { reader->read_at(5, got, "archive/data/0"); });
  CHECK(e.code() == Errc::kIoReadFailed);
  CHECK(e.context().path == file.path().string());
  CHECK(e.context().record == "archive/data/0");
  CHECK(e.context().offset == 5);
  CHECK(std::string(e.what()).find(std::strerror(EIO)) != std::string::npos);
}

TEST_CASE("common file reader: a file that shrank under a read is kIoUnexpectedEof") {
  const TempPath file("_eof");
  file.write("0123456789");
  const auto reader = FileReader::open(file.path());
  std::filesystem::resize_file(file.path(), 6);
  std::vector<std::byte> got(8);
  CHECK(error_code_of([&] { reader->read_at(0, got); }) == Errc::kIoUnexpectedEof);
  std::vector<std::byte> head(6);
  reader->read_at(0, head);  // what is still there reads fine
  CHECK(text_of(head) == "012345");
}

}  // namespace pthload::common
