// open() on what is not a torch.save file, or not a checkpoint at all: the formats it detects,
// the files people take for checkpoints (GGUF, HDF5, .npy, .npz, ONNX) refused with an error that
// says what they are, and the file's path added to every error.
#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <vector>

#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/bytes.hpp"
#include "support/checkpoint_file.hpp"
#include "support/error_code.hpp"
#include "support/pickle_writer.hpp"

using pthload::Errc;
using pthload::test::bytes_of;
using pthload::test::checkpoint_file;
using pthload::test::error_code_of;
using pthload::test::error_of;
using pthload::test::error_thrown;
using pthload::test::float_record;
using pthload::test::PickleWriter;
using pthload::test::TempPath;
namespace zip_build = pthload::test::zip_build;

namespace {

Errc open_code(const std::string& pickle, std::vector<zip_build::Record> records) {
  const auto file = checkpoint_file(pickle, std::move(records));
  return error_code_of([&] { (void)pthload::open(file.path()); });
}

// The message of what open() throws for the file, "" when it opens.
std::string open_message(const std::vector<std::byte>& bytes) {
  const TempPath file(bytes);
  const auto error = error_of([&] { (void)pthload::open(file.path()); });
  return error ? error->what() : "";
}

}  // namespace

TEST_CASE("formats: formats that are not supported yet, and files that are no checkpoint") {
  PickleWriter p;
  p.empty_dict().stop();
  // TorchScript archives are read (tests/formats/torchscript_test.cpp).
  CHECK(open_code(p.bytes(), {{.name = "ck/constants.pkl", .data = p.bytes()}}) == Errc::kOk);
  const TempPath text(std::vector<std::byte>(100, std::byte{'x'}));
  CHECK(error_code_of([&] { (void)pthload::open(text.path()); }) == Errc::kTorchUnsupportedFormat);
  const auto no_pickle = TempPath(zip_build::build({{.name = "ck/other", .data = "x"}}).bytes);
  CHECK(error_code_of([&] { (void)pthload::open(no_pickle.path()); }) == Errc::kTorchNoDataPickle);
  const auto no_folder =
      TempPath(zip_build::build({{.name = "data.pkl", .data = p.bytes()}}).bytes);
  CHECK(error_code_of([&] { (void)pthload::open(no_folder.path()); }) == Errc::kTorchNoDataPickle);
  CHECK(open_code(p.bytes(), {{.name = "ck/byteorder", .data = "middle"}}) ==
        Errc::kTorchBadByteOrder);
}

TEST_CASE("formats: errors name the file and the record") {
  PickleWriter p;
  p.tensor_v2("FloatStorage", "0", 9, 0, {8}, {1}).stop();
  const auto file = checkpoint_file(p.bytes(), {{.name = "ck/data/0", .data = float_record(8)}});
  const auto e = error_thrown<pthload::FormatError>([&] { (void)pthload::open(file.path()); });
  CHECK(e.context().path == file.path().string());
  CHECK(e.context().record == "ck/data.pkl");
  CHECK(std::string(e.what()).find("storage '0'") != std::string::npos);
}

TEST_CASE("formats: files people take for checkpoints are named in the error") {
  const auto check = [](std::string_view bytes, std::string_view what) {
    INFO(what);
    const auto message = open_message(bytes_of(bytes));
    CHECK(message.find("not a PyTorch checkpoint") != std::string::npos);
    CHECK(message.find(what) != std::string::npos);
    const TempPath file(bytes_of(bytes));
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
  const auto built = zip_build::build(
      {{.name = "arr_0.npy", .data = "\x93NUMPY"}, {.name = "arr_1.npy", .data = "\x93NUMPY"}});
  const auto message = open_message(built.bytes);
  CHECK(message.find("numpy .npz") != std::string::npos);
}

TEST_CASE("formats: a zip that is neither torch's nor a known archive keeps torch's error") {
  const auto built = zip_build::build({{.name = "readme.txt", .data = "hello"}});
  const TempPath file(built.bytes);
  CHECK(error_code_of([&] { (void)pthload::open(file.path()); }) == Errc::kTorchNoDataPickle);
}

TEST_CASE("formats: an unknown file is neither zip, legacy stream nor safetensors") {
  const auto message = open_message(bytes_of("hello, world\n"));
  CHECK(message.find("safetensors") != std::string::npos);
}
