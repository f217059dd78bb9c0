// pthload::open and load over safetensors files: the same Checkpoint, storages and placement as
// torch.save files; and the files people take for checkpoints (GGUF, HDF5, .npy, .npz, ONNX),
// refused with an error that says what they are. The real files safetensors writes:
// fixtures_test.cpp and tests/tools/fixtures_crosscheck_test.py.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "pthload/inspect.hpp"
#include "safetensors/safetensors_builder.hpp"
#include "support/checkpoint_file.hpp"
#include "support/error_code.hpp"

using pthload::Errc;
using pthload::test::error_code_of;
using pthload::test::TempFile;
namespace sb = pthload::test::safetensors_build;

namespace {

std::vector<float> floats_of(const pthload::Tensor& tensor) {
  const auto bytes = tensor.contiguous_bytes();
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

std::vector<std::byte> bytes_of(std::string_view text) {
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

// The message of what open() throws for the file, "" when it opens.
std::string open_message(const std::vector<std::byte>& bytes) {
  const TempFile file(bytes);
  try {
    (void)pthload::open(file.path());
  } catch (const pthload::Error& e) {
    return e.what();
  }
  return "";
}

// "w": float32 (2, 3) = 0..5, then "b": float32 (2,) = 6, 7; the header padded with spaces to
// a multiple of 8 bytes, or to `size` bytes.
std::vector<std::byte> two_tensors(std::size_t size = 0) {
  std::string header = R"({"__metadata__":{"format":"pt"},)" +
                       sb::tensor("w", "F32", "[2,3]", 0, 24) + "," +
                       sb::tensor("b", "F32", "[2]", 24, 32) + "}";
  header.resize(size != 0 ? size : (header.size() + 7) / 8 * 8, ' ');
  return sb::file(header, pthload::test::float_record(8));
}

}  // namespace

TEST_CASE("safetensors: open() lists the tensors over one storage each, reading no data") {
  const TempFile file(two_tensors());
  const auto checkpoint = pthload::open(file.path());
  CHECK(checkpoint.format() == pthload::Format::kSafetensors);
  CHECK(pthload::format_name(checkpoint.format()) == "safetensors");
  REQUIRE(checkpoint.tensors().size() == 2);
  const auto& w = checkpoint.tensors()[0];
  CHECK(w.name == "w");
  CHECK(w.tensor.dtype() == pthload::Dtype::kFloat32);
  CHECK(std::vector(w.tensor.sizes().begin(), w.tensor.sizes().end()) ==
        std::vector<std::int64_t>{2, 3});
  CHECK(std::vector(w.tensor.strides().begin(), w.tensor.strides().end()) ==
        std::vector<std::int64_t>{3, 1});
  CHECK(w.tensor.storage_offset() == 0);
  CHECK(w.tensor.storage().key() == "w");
  CHECK(w.tensor.storage().location() == "cpu");
  CHECK(w.tensor.storage().nbytes() == 24);
  CHECK_FALSE(w.tensor.storage().is_placed());
  CHECK(checkpoint.storages().size() == 2);
  REQUIRE(checkpoint.metadata().size() == 1);
  CHECK(checkpoint.metadata()[0].first == "format");
  CHECK(checkpoint.metadata()[0].second == "pt");
  CHECK(checkpoint.opaque_values().empty());
}

TEST_CASE("safetensors: load() views the file where aligned, copies on request") {
  const TempFile file(two_tensors());
  const auto views = pthload::load(file.path());
  CHECK(views.tensors()[0].tensor.storage().is_file_view());
  CHECK(floats_of(views.tensors()[0].tensor) == std::vector<float>{0, 1, 2, 3, 4, 5});
  CHECK(floats_of(views.tensors()[1].tensor) == std::vector<float>{6, 7});
  const auto copies = pthload::load(file.path(), {.copy_cpu_storages = true});
  CHECK_FALSE(copies.tensors()[1].tensor.storage().is_file_view());
  CHECK(floats_of(copies.tensors()[1].tensor) == std::vector<float>{6, 7});
  CHECK(copies.tensors()[1].tensor.content_checksum() ==
        views.tensors()[1].tensor.content_checksum());
}

TEST_CASE("safetensors: data that is not aligned for its dtype is copied, not viewed") {
  // Other writers need not pad the header to 8 bytes.
  std::string header = "{" + sb::tensor("w", "F32", "[2]", 0, 8) + "}";
  if ((8 + header.size()) % 4 == 0) header += ' ';
  const TempFile file(sb::file(header, pthload::test::float_record(2)));
  const auto checkpoint = pthload::load(file.path());
  CHECK_FALSE(checkpoint.tensors()[0].tensor.storage().is_file_view());
  CHECK(floats_of(checkpoint.tensors()[0].tensor) == std::vector<float>{0, 1});
}

TEST_CASE("safetensors: map_location places safetensors storages like any others") {
  const TempFile file(two_tensors());
  const auto meta = pthload::load(file.path(), {.map_location = pthload::map_to("meta")});
  CHECK(meta.tensors()[0].tensor.device() == pthload::Device::meta());
  int calls = 0;
  const auto chosen = pthload::load(
      file.path(), {.map_location = [&](const pthload::StorageInfo&, std::string_view tag) {
        ++calls;
        CHECK(tag == "cpu");
        return std::optional(pthload::Device::cpu());
      }});
  CHECK(calls == 2);
  CHECK(floats_of(chosen.tensors()[1].tensor) == std::vector<float>{6, 7});
}

TEST_CASE("safetensors: a header size whose low byte is 0x80 is still safetensors") {
  // 0x80 is also PROTO, the first byte of a legacy stream: safetensors is checked first.
  const auto bytes = two_tensors(256 + 128);
  REQUIRE(bytes[0] == std::byte{0x80});
  const TempFile file(bytes);
  CHECK(pthload::open(file.path()).format() == pthload::Format::kSafetensors);
}

TEST_CASE("safetensors: errors name the file and the offset") {
  auto bytes = two_tensors();
  bytes.pop_back();  // the last tensor now runs past the end of the file
  const TempFile file(bytes);
  try {
    (void)pthload::open(file.path());
    FAIL("opened");
  } catch (const pthload::FormatError& e) {
    CHECK(e.code() == Errc::kSafetensorsTensorOutOfBounds);
    CHECK(e.context().path == file.path().string());
    CHECK(e.context().offset.has_value());
    CHECK(std::string(e.what()).find("'b'") != std::string::npos);
  }
}

TEST_CASE("safetensors: a file without a pickle has no object tree and no globals") {
  // Found by fuzz_safetensors: both walked the missing pickle's root.
  const TempFile file(two_tensors());
  const auto checkpoint = pthload::open(file.path());
  CHECK(pthload::object_tree(checkpoint).empty());
  CHECK(pthload::referenced_globals(checkpoint).empty());
}

TEST_CASE("safetensors: a tensor() lookup by name, and a missing name") {
  const TempFile file(two_tensors());
  const auto checkpoint = pthload::load(file.path());
  CHECK(checkpoint.tensor("b").numel() == 2);
  CHECK(error_code_of([&] { (void)checkpoint.tensor("nope"); }) == Errc::kTorchNameNotFound);
}

TEST_CASE("formats: files people take for checkpoints are named in the error") {
  const auto check = [](std::string_view bytes, std::string_view what) {
    INFO(what);
    const auto message = open_message(bytes_of(bytes));
    CHECK(message.find("not a PyTorch checkpoint") != std::string::npos);
    CHECK(message.find(what) != std::string::npos);
    const TempFile file(bytes_of(bytes));
    CHECK(error_code_of([&] { (void)pthload::open(file.path()); }) ==
          Errc::kTorchUnsupportedFormat);
  };
  check(std::string_view("GGUF\x03\0\0\0\0\0\0\0\0\0\0\0", 16), "GGUF");
  check(std::string_view("lmgg\x01\0\0\0", 8), "GGML");
  check(std::string_view("\x89HDF\r\n\x1a\n\0\0\0\0\0\0\0\0", 16), "HDF5");
  check(std::string_view("\x93NUMPY\x01\0v\0{'descr': '<f4'}", 24), ".npy");
  check(std::string_view("\x1c\0\0\0TFL3\0\0\0\0", 12), "TensorFlow Lite");
  check(std::string_view("\x08\x07\x12\x07pytorch\x1a\x03"
                         "2.1",
                         15),
        "ONNX");
  // HDF5 after a 512-byte user block.
  std::string user_block(512, 'u');
  check(user_block + std::string("\x89HDF\r\n\x1a\n\0\0", 10), "HDF5");
}

TEST_CASE("formats: a numpy .npz archive is named, not reported as a broken checkpoint") {
  const auto built = pthload::test::zip_build::build(
      {{.name = "arr_0.npy", .data = "\x93NUMPY"}, {.name = "arr_1.npy", .data = "\x93NUMPY"}});
  const auto message = open_message(built.bytes);
  CHECK(message.find("numpy .npz") != std::string::npos);
}

TEST_CASE("formats: a zip that is neither torch's nor a known archive keeps torch's error") {
  const auto built = pthload::test::zip_build::build({{.name = "readme.txt", .data = "hello"}});
  const TempFile file(built.bytes);
  CHECK(error_code_of([&] { (void)pthload::open(file.path()); }) == Errc::kTorchNoDataPickle);
}

TEST_CASE("formats: an unknown file is neither zip, legacy stream nor safetensors") {
  const auto message = open_message(bytes_of("hello, world\n"));
  CHECK(message.find("safetensors") != std::string::npos);
}
