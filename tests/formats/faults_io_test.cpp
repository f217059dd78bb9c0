// Loads under faults of the byte source: a file changed between open() and load is refused, CRC
// checks on request, a cut download refused from its tail, pread's large and threaded copies and
// a read failing among them; io=map and io=read load the same bytes from every kind of fixture.
// The reader itself under EINTR, short reads and EIO: tests/common/file_reader_test.cpp.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <vector>

#include <doctest/doctest.h>

#include "common/fault_hooks.hpp"
#include "device/place.hpp"
#include "pthload/pthload.hpp"
#include "support/checkpoint_file.hpp"
#include "support/error_code.hpp"
#include "support/files.hpp"
#include "support/read_hook.hpp"

namespace pthload::test {
namespace {

std::uint64_t bytes_read = 0;

int read_calls = 0;

ssize_t counting(int fd, void* buffer, std::size_t bytes, off_t offset) {
  ++read_calls;
  const ssize_t got = ::pread(fd, buffer, bytes, offset);
  if (got > 0) bytes_read += static_cast<std::uint64_t>(got);
  return got;
}

}  // namespace

TEST_CASE("formats faults: a checkpoint written or truncated after open() is refused at load") {
  const TempPath file("_changed.pt");
  write_float_checkpoint(file.path(), 1024);
  for (const bool copy : {false, true}) {
    Checkpoint checkpoint = open(file.path());
    std::filesystem::resize_file(file.path(), 4096);
    CHECK(error_code_of([&] { device::place_storages(checkpoint, {.copy_cpu_storages = copy}); }) ==
          Errc::kIoFileChanged);
    write_float_checkpoint(file.path(), 1024);
  }
  // Replaced by rename: the opened file is intact, and it is what gets loaded.
  Checkpoint checkpoint = open(file.path());
  const TempPath other("_changed-other.pt");
  write_float_checkpoint(other.path(), 16);
  std::filesystem::rename(other.path(), file.path());
  device::place_storages(checkpoint, {});
  CHECK(checkpoint.tensors()[0].tensor.numel() == 1024);
}

namespace {

// float_checkpoint(1024) written to `path` with a byte of `record` flipped: its CRC-32 no longer
// matches.
void write_corrupted(const std::filesystem::path& path, std::string_view record) {
  auto built = float_checkpoint(1024);
  const std::uint64_t offset = built.at(record).data;
  REQUIRE(offset < built.bytes.size());
  built.bytes[offset] ^= std::byte{0x01};
  write_file(path, built.bytes);
}

}  // namespace

TEST_CASE("formats faults: verify_crc checks the records a load reads, with either strategy") {
  const TempPath file("_crc.pt");
  for (const IoStrategy io : {IoStrategy::kMap, IoStrategy::kRead}) {
    CAPTURE(static_cast<int>(io));
    LoadOptions checked{.verify_crc = true};
    checked.io = io;
    LoadOptions unchecked;
    unchecked.io = io;

    write_float_checkpoint(file.path(), 1024);
    CHECK(load(file.path(), checked).tensors().size() == 1);

    write_corrupted(file.path(), "archive/data/0");
    CHECK(load(file.path(), unchecked).tensors().size() == 1);  // torch never checks
    CHECK(open(file.path(), checked).tensors().size() == 1);    // open() reads no storage
    // to() after open() places the storages as load() with open()'s options would have.
    auto opened = open(file.path(), checked);
    const auto to_error = error_thrown<FormatError>([&] { opened.to(pthload::Device::cpu()); });
    CHECK(to_error.code() == Errc::kZipCrcMismatch);
    CHECK(to_error.context().record == "archive/data/0");
    CHECK(to_error.context().path == file.path().string());
    CHECK_FALSE(opened.storages()[0]->is_placed());
    const auto load_error = error_thrown<FormatError>([&] { (void)load(file.path(), checked); });
    CHECK(load_error.code() == Errc::kZipCrcMismatch);
    CHECK(load_error.context().record == "archive/data/0");
    CHECK(load_error.context().path == file.path().string());
    // A storage that is not placed is not read, so not checked.
    CHECK(
        load(file.path(), {.map_location = map_to("meta"), .verify_crc = true}).tensors().size() ==
        1);

    write_corrupted(file.path(), "archive/version");
    CHECK(open(file.path(), unchecked).tensors().size() == 1);
    CHECK(error_code_of([&] { (void)open(file.path(), checked); }) == Errc::kZipCrcMismatch);
  }
}

TEST_CASE("formats faults: a large checkpoint cut short is refused from its tail, not read whole") {
  // What a download that stopped early looks like: the central directory and end records gone.
  const TempPath whole("_cut-whole.pt");
  const TempPath cut("_cut.pt");
  write_float_checkpoint(whole.path(), std::size_t{8} << 20);  // 32 MiB
  std::filesystem::copy_file(whole.path(), cut.path(),
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(cut.path(), std::filesystem::file_size(whole.path()) / 2);
  const ReadHook hook(counting);
  for (const IoStrategy io : {IoStrategy::kMap, IoStrategy::kRead}) {
    CAPTURE(static_cast<int>(io));
    LoadOptions options;
    options.io = io;
    bytes_read = 0;
    CHECK(error_code_of([&] { (void)open(cut.path(), options); }) == Errc::kZipEndRecordNotFound);
    CHECK(bytes_read < (std::uint64_t{1} << 20));  // the tail the end record is searched in
  }
}

TEST_CASE("formats faults: io=read reads a large storage with pread, as owned memory") {
  const TempPath file("_large.pt");
  constexpr std::size_t kElements = std::size_t{3} << 20;  // 12 MiB: a hole in the image
  write_float_checkpoint(file.path(), kElements);
  LoadOptions options;
  options.io = IoStrategy::kRead;
  const Checkpoint checkpoint = load(file.path(), options);
  const auto& storage = *checkpoint.storages()[0];
  CHECK_FALSE(storage.is_file_view());
  const auto bytes = storage.bytes();
  REQUIRE(bytes.size() == kElements * 4);
  bool equal = true;
  for (std::size_t i = 0; i < kElements; i += 4099) {
    float value = 0;
    std::memcpy(&value, bytes.data() + i * 4, 4);
    equal = equal && value == float_checkpoint_value(i);
  }
  CHECK(equal);
  // A view load of the same file maps it.
  CHECK(load(file.path()).storages()[0]->is_file_view());
}

// Fails the reads of at least 1 MiB that touch [16 MiB, 24 MiB) of the file: the copy of a
// 40 MiB storage, read whole or by 8 MiB chunks, and none of the structure open() reads.
ssize_t eio_from_16_mib(int fd, void* buffer, std::size_t bytes, off_t offset) {
  const off_t end = offset + static_cast<off_t>(bytes);
  if (bytes >= (std::size_t{1} << 20) && offset < (off_t{24} << 20) && end > (off_t{16} << 20)) {
    errno = EIO;
    return -1;
  }
  return ::pread(fd, buffer, bytes, offset);
}

TEST_CASE(
    "formats faults: copies read by several threads: every byte, progress, and a failed read") {
  const TempPath file("_parallel.pt");
  constexpr std::size_t kElements = std::size_t{10} << 20;  // 40 MiB: five 8 MiB chunks
  write_float_checkpoint(file.path(), kElements);
  for (const unsigned threads : {1u, 4u}) {
    for (const IoStrategy io : {IoStrategy::kMap, IoStrategy::kRead}) {
      CAPTURE(threads);
      CAPTURE(static_cast<int>(io));
      std::atomic<bool> inside{false};
      std::atomic<bool> overlapped{false};
      std::uint64_t last_placed = 0;
      std::uint64_t last_total = 0;
      int progress_calls = 0;
      LoadOptions options{.copy_cpu_storages = true};
      options.io = io;
      options.copy_threads = threads;
      options.cuda.progress = [&](std::uint64_t placed, std::uint64_t total) {
        if (inside.exchange(true)) overlapped = true;
        last_placed = placed;
        last_total = total;
        ++progress_calls;
        inside = false;
      };
      const Checkpoint checkpoint = load(file.path(), options);
      const auto& storage = *checkpoint.storages()[0];
      CHECK_FALSE(storage.is_file_view());
      const auto bytes = storage.bytes();
      REQUIRE(bytes.size() == kElements * 4);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < kElements; ++i) {
        float value = 0;
        std::memcpy(&value, bytes.data() + i * 4, 4);
        wrong += value != float_checkpoint_value(i) ? 1 : 0;
      }
      CHECK(wrong == 0);
      CHECK_FALSE(overlapped.load());
      CHECK(last_total == kElements * 4);
      CHECK(last_placed == last_total);
      // One report per 8 MiB chunk, however many threads read them.
      CHECK(progress_calls == 5);

      const ReadHook hook(eio_from_16_mib);
      const auto e = error_thrown<IoError>([&] { (void)load(file.path(), options); });
      CHECK(e.code() == Errc::kIoReadFailed);
      CHECK(e.context().path == file.path().string());
      CHECK_MESSAGE(e.context().record.ends_with("/data/0"), std::string(e.what()));
    }
  }
}

TEST_SUITE("fixtures") {
  TEST_CASE("formats faults: the copies of adjacent small storages are read together") {
    // 20 000 tensors of a few bytes each, one record each, written by torch.save.
    const auto path =
        std::filesystem::path(PTHLOAD_FIXTURES_DIR) / "torch" / "torch-2.15.0" / "many_20000.pt";
    const Checkpoint viewed = load(path);
    std::vector<std::uint64_t> expected;
    for (const auto& named : viewed.tensors())
      expected.push_back(named.tensor.content_checksum());
    read_calls = 0;
    const ReadHook hook(counting);
    const Checkpoint copied = load(path, {.copy_cpu_storages = true});
    const int calls = read_calls;
    std::vector<std::uint64_t> got;
    for (const auto& named : copied.tensors()) {
      CHECK_FALSE(named.tensor.storage().is_file_view());
      got.push_back(named.tensor.content_checksum());
    }
    CHECK(got == expected);
    // The structure's reads and one per run of records (at most 8 MiB), not one per storage.
    CHECK(calls < 100);
  }

  TEST_CASE("formats faults: io=map and io=read give the same bytes for every kind of checkpoint") {
    const std::filesystem::path fixtures = PTHLOAD_FIXTURES_DIR;
    const char* const names[] = {
        "sample.pt",
        "torch/torch-2.15.0/dtypes.pt",
        "torch/torch-2.15.0/views.pt",
        "torch/torch-2.15.0/tied.pt",
        "torch/torch-2.15.0/quantized.pt",
        "torch/torch-2.15.0/nested_tensors.pt",
        "torch/torch-2.15.0/numpy_arrays.pt",
        "torch/torch-2.15.0/torchscript.pt",
        "torch/torch-2.15.0/legacy_views.pt",
        "torch/torch-2.15.0/legacy_tied.pt",
        "torch/torch-1.13.0/dtypes.pt",
        "torch/protocols-torch-2.15.0/p2_legacy.pt",
        "safetensors/dtypes.safetensors",
        "safetensors/layers.safetensors",
        "shards/bin",
        "shards/safetensors",
    };
    for (const std::string name : names) {
      CAPTURE(name);
      const auto path = fixtures / name;
      LoadOptions read_options{.map_location = map_to("cpu")};
      read_options.io = IoStrategy::kRead;
      const Checkpoint mapped = load(path, {.map_location = map_to("cpu")});
      const Checkpoint read = load(path, read_options);
      REQUIRE(mapped.storages().size() == read.storages().size());
      REQUIRE(mapped.tensors().size() == read.tensors().size());
      for (std::size_t i = 0; i < mapped.storages().size(); ++i) {
        const auto a = mapped.storages()[i]->bytes();
        const auto b = read.storages()[i]->bytes();
        CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
      }
      for (std::size_t i = 0; i < mapped.tensors().size(); ++i) {
        const Tensor& a = mapped.tensors()[i].tensor;
        const Tensor& b = read.tensors()[i].tensor;
        CHECK(mapped.tensors()[i].name == read.tensors()[i].name);
        // Sparse and nested tensors have no checksum of their own (their parts are storages).
        const auto checksum = [](const Tensor& t) -> std::optional<std::uint64_t> {
          try {
            return t.content_checksum();
          } catch (const Error&) {
            return std::nullopt;
          }
        };
        CHECK(checksum(a) == checksum(b));
      }
    }
  }
}

}  // namespace pthload::test
