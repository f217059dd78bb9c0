// What save() refuses, and what a failure leaves: a pthload::Error naming the tensor or the
// byte offset, and the destination as it was (a full disk by injection, a failing sink).
#include <doctest/doctest.h>

#include <cerrno>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/fault_hooks.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "pthload/save.hpp"
#include "support/error_code.hpp"
#include "support/files.hpp"
#include "writer/saved_bytes.hpp"

namespace pthload::test {
namespace {

const std::vector<float> kValues{1, 2, 3, 4};

std::span<const std::byte> storage() {
  return std::as_bytes(std::span(kValues));
}

Error save_error(const std::vector<MemoryTensor>& tensors, const SaveOptions& options = {}) {
  return error_thrown([&] { (void)saved_bytes(tensors, options); });
}

TEST_CASE("a tensor outside its storage, or a storage shared two ways, is refused by name") {
  const auto past = save_error({{.name = "w", .sizes = {5}, .storage = storage()}});
  CHECK(past.code() == Errc::kSaveBadTensor);
  CHECK(std::string(past.what()).find("'w'") != std::string::npos);
  CHECK(
      save_error(
          {{.name = "w", .sizes = {2}, .strides = {3}, .storage_offset = 1, .storage = storage()}})
          .code() == Errc::kSaveBadTensor);
  CHECK(save_error({{.name = "w", .sizes = {-1}, .storage = storage()}}).code() ==
        Errc::kSaveBadTensor);
  CHECK(save_error({{.name = "w", .sizes = {1}, .storage_offset = -1, .storage = storage()}})
            .code() == Errc::kSaveBadTensor);
  CHECK(save_error({{.name = "w", .sizes = {2, 2}, .strides = {1}, .storage = storage()}}).code() ==
        Errc::kSaveBadTensor);
  // Sizes whose extent overflows 64 bits.
  CHECK(save_error({{.name = "w", .sizes = {INT64_MAX, 3}, .storage = storage()}}).code() ==
        Errc::kSaveBadTensor);
  // A storage of 16 bytes is no whole number of float64s... 16 is; 12 bytes of int64 are not.
  CHECK(save_error(
            {{.name = "w", .dtype = Dtype::kInt64, .sizes = {1}, .storage = storage().first(12)}})
            .code() == Errc::kSaveBadTensor);
  const auto mixed =
      save_error({{.name = "a", .sizes = {1}, .storage = storage()},
                  {.name = "b", .dtype = Dtype::kInt32, .sizes = {1}, .storage = storage()}});
  CHECK(mixed.code() == Errc::kSaveBadTensor);
  CHECK(std::string(mixed.what()).find("'b'") != std::string::npos);
  // An empty tensor needs no bytes: an empty span is fine, and two are not one storage.
  CHECK(
      saved_bytes(std::vector<MemoryTensor>{{.name = "e", .sizes = {0}},
                                            {.name = "f", .dtype = Dtype::kInt8, .sizes = {0, 2}}})
          .size() > 0);
}

TEST_CASE("compact_views bounds what a view overlapping itself may expand to") {
  // 2^31 floats shown by a stride of 0 over one: 8 GiB to write, from 16 bytes.
  const std::vector<MemoryTensor> expanded{
      {.name = "x", .sizes = {std::int64_t{1} << 31}, .strides = {0}, .storage = storage()}};
  CHECK(saved_bytes(expanded).size() < 4096);  // as torch: the storage, once
  CHECK(save_error(expanded, {.compact_views = true}).code() == Errc::kSaveBadTensor);
  // Element counts past 2^64 are refused either way.
  CHECK(save_error({{.name = "x",
                     .sizes = {std::int64_t{1} << 40, std::int64_t{1} << 40},
                     .strides = {0, 0},
                     .storage = storage()}})
            .code() == Errc::kSaveBadTensor);
}

TEST_CASE("names: duplicates, nesting conflicts and text that is not UTF-8") {
  CHECK(save_error({{.name = "a", .sizes = {1}, .storage = storage()},
                    {.name = "a", .sizes = {1}, .storage = storage()}})
            .code() == Errc::kSaveNameCollision);
  const std::vector<MemoryTensor> prefix{{.name = "a", .sizes = {1}, .storage = storage()},
                                         {.name = "a.b", .sizes = {1}, .storage = storage()}};
  CHECK(saved_bytes(prefix).size() > 0);  // flat: two keys
  CHECK(save_error(prefix, {.nest_dotted_names = true}).code() == Errc::kSaveNameCollision);
  const std::vector<MemoryTensor> reversed{prefix[1], prefix[0]};
  CHECK(save_error(reversed, {.nest_dotted_names = true}).code() == Errc::kSaveNameCollision);
  CHECK(save_error({{.name = "bad\xff", .sizes = {1}, .storage = storage()}}).code() ==
        Errc::kSaveBadTensor);
}

TEST_CASE("options outside their ranges") {
  const std::vector<MemoryTensor> one{{.name = "a", .sizes = {1}, .storage = storage()}};
  for (const std::uint32_t alignment : {0u, 32u, 100u, 131072u})
    CHECK(save_error(one, {.alignment = alignment}).code() == Errc::kSaveBadOptions);
  for (const char* location : {"", "Cuda", "cuda:", "cuda:01", "cuda:-1", "1cpu", "cpu x"})
    CHECK(save_error(one, {.location = location}).code() == Errc::kSaveBadOptions);
  for (const char* name : {"a/b", "..", "with space"})
    CHECK(save_error(one, {.archive_name = name}).code() == Errc::kSaveBadOptions);
  CHECK(saved_bytes(one, {.location = "xpu:3"}).size() > 0);
}

TEST_CASE("a sink that throws: IoError naming the byte offset, with the sink's text") {
  const std::vector<float> big(1 << 20, 2.0f);
  const std::vector<MemoryTensor> tensors{
      {.name = "big", .sizes = {1 << 20}, .storage = std::as_bytes(std::span(big))}};
  int calls = 0;
  const auto error = error_thrown<IoError>([&] {
    (void)save(
        [&](std::span<const std::byte>) {
          if (++calls == 2) throw std::runtime_error("connection reset");
        },
        std::span(tensors));
  });
  CHECK(error.code() == Errc::kSaveWriteFailed);
  CHECK(error.context().offset.has_value());
  CHECK(std::string(error.what()).find("connection reset") != std::string::npos);
}

// The disk fills after this many bytes.
std::size_t g_room = 0;
ssize_t full_disk(int fd, const void* buffer, std::size_t bytes) {
  if (g_room == 0) {
    errno = ENOSPC;
    return -1;
  }
  const std::size_t part = std::min(bytes, g_room);
  g_room -= part;
  return ::write(fd, buffer, part);
}

struct WriteHook {
  explicit WriteHook(common::fault_hooks::WriteFunction write) {
    common::fault_hooks::set_write(write);
  }
  WriteHook(const WriteHook&) = delete;
  WriteHook& operator=(const WriteHook&) = delete;
  ~WriteHook() { common::fault_hooks::set_write(nullptr); }
};

TEST_CASE("a disk that fills midway: IoError (ENOSPC), the old file intact, nothing left") {
  const auto folder = TempPath::folder();
  const auto path = folder / "model.pt";
  write_file(path, "the previous checkpoint");
  const std::vector<float> big(1 << 20, 2.0f);
  const std::vector<MemoryTensor> tensors{
      {.name = "big", .sizes = {1 << 20}, .storage = std::as_bytes(std::span(big))}};
  for (const std::size_t room : {std::size_t{0}, std::size_t{100}, std::size_t{3} << 20}) {
    CAPTURE(room);
    g_room = room;
    const WriteHook hook(full_disk);
    const auto error = error_thrown<IoError>([&] { (void)save(path, std::span(tensors)); });
    CHECK(error.code() == Errc::kSaveWriteFailed);
    CHECK(std::string(error.what()).find("ENOSPC") != std::string::npos);
    CHECK(error.context().path == path.string());
    CHECK(folder.read("model.pt") == "the previous checkpoint");
    CHECK(std::distance(std::filesystem::directory_iterator(folder.path()),
                        std::filesystem::directory_iterator()) == 1);
  }
  // A folder that does not exist: the temporary file cannot be made.
  CHECK(error_code_of([&] { (void)save(folder / "missing" / "x.pt", std::span(tensors)); }) ==
        Errc::kSaveWriteFailed);
}

TEST_SUITE("fixtures") {
  TEST_CASE("tensors save() cannot write: refused by name, or skipped and reported") {
    const auto path = fixture_path("torch/torch-2.15.0/quantized.pt");
    const Checkpoint quantized = load(path);
    const auto error = error_thrown<UnsupportedError>([&] { (void)saved_bytes(quantized); });
    CHECK(error.code() == Errc::kSaveUnsupportedTensor);
    std::vector<std::byte> bytes;
    const SaveReport report =
        save([&](std::span<const std::byte> c) { bytes.insert(bytes.end(), c.begin(), c.end()); },
             quantized, {.skip_unsupported = true});
    CHECK(!report.skipped.empty());
    CHECK(report.skipped.front().find("quantized") != std::string::npos);
  }

  TEST_CASE("a checkpoint open() made has no bytes to save") {
    const Checkpoint opened = open(fixture_path("torch/torch-2.15.0/dtypes.pt"));
    const auto error = error_thrown<UnsupportedError>([&] { (void)saved_bytes(opened); });
    CHECK(error.code() == Errc::kSaveUnsupportedTensor);
    CHECK(std::string(error.what()).find("load()") != std::string::npos);
  }
}

}  // namespace
}  // namespace pthload::test
