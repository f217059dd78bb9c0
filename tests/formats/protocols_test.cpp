// Every pickle protocol torch.save can write: legacy streams whose magic number is a protocol 0/1
// text LONG are detected by their first pickle, and the real torch's files of protocols 0-5 in
// both formats (tests/fixtures/torch/protocols-torch-*/, tests/fixtures/make_protocol_fixtures.py)
// load as torch.load loads them. Names and checksums against torch:
// tests/tools/fixtures_crosscheck_test.py.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/bytes.hpp"
#include "support/error_code.hpp"
#include "support/files.hpp"
#include "support/legacy_builder.hpp"
#include "support/pickle_writer.hpp"

using pthload::Errc;
using pthload::test::bytes_of;
using pthload::test::error_code_of;
using pthload::test::error_thrown;
using pthload::test::PickleWriter;
using pthload::test::TempPath;
namespace lb = pthload::test::legacy_build;

namespace {

// pickle.dumps(MAGIC_NUMBER, protocol=0 or 1): LONG with Python's decimal repr, then STOP.
const std::string kTextMagic = "L119547037146038801333356L\n.";

// {'w': a float32 (2, 3) tensor over storage '7'}, with its key list and data.
std::string body() {
  PickleWriter p;
  p.empty_dict().str("w");
  lb::tensor(p, "FloatStorage", "7", 6, 0, {2, 3}, {3, 1});
  return p.setitem().stop().bytes() + lb::key_list({"7"}) + lb::count(6) + lb::floats(6);
}

std::string stream_with_magic(const std::string& magic) {
  return magic + lb::protocol() + lb::sys_info() + body();
}

Errc open_code(const std::string& text) {
  const TempPath file(bytes_of(text));
  return error_code_of([&] { (void)pthload::open(file.path()); });
}

}  // namespace

TEST_CASE("formats legacy: a stream whose magic number is a protocol 0/1 text LONG opens") {
  const TempPath file(bytes_of(stream_with_magic(kTextMagic)));
  const auto checkpoint = pthload::load(file.path());
  CHECK(checkpoint.format() == pthload::Format::kLegacy);
  REQUIRE(checkpoint.tensors().size() == 1);
  CHECK(checkpoint.tensors()[0].name == "w");
  CHECK(checkpoint.tensors()[0].tensor.nbytes() == 24);
  // Python 3 writes the trailing L too; without it (a hand-written LONG) it is the same number.
  CHECK(open_code(stream_with_magic("L119547037146038801333356\n.")) == Errc::kOk);
}

TEST_CASE("formats legacy: a text LONG that is not the magic number is a stream with a bad magic") {
  CHECK(open_code(stream_with_magic("L119547037146038801333357L\n.")) == Errc::kLegacyBadMagic);
  CHECK(open_code(stream_with_magic("L12L\n.")) == Errc::kLegacyBadMagic);
}

TEST_CASE("formats legacy: text that only starts with L is no legacy stream") {
  CHECK(open_code("Lorem ipsum dolor sit amet\n") == Errc::kTorchUnsupportedFormat);
  CHECK(open_code("L123") == Errc::kTorchUnsupportedFormat);  // no end of line
  CHECK(open_code("L\n.") == Errc::kTorchUnsupportedFormat);  // no digits
  CHECK(open_code("L12x\n.") == Errc::kTorchUnsupportedFormat);
}

TEST_CASE("formats legacy: a protocol 0 text persistent id is refused as torch.load refuses it") {
  // Pickle protocol 0 writes persistent ids as PERSID str(tuple); torch.load asserts a tuple.
  PickleWriter p;
  p.empty_dict().str("w").raw("P('storage', <class 'torch.FloatStorage'>, '7', 'cpu', 6, None)\n");
  const auto text = kTextMagic + lb::protocol() + lb::sys_info() + p.setitem().stop().bytes() +
                    lb::key_list({"7"}) + lb::count(6) + lb::floats(6);
  const TempPath file(bytes_of(text));
  const auto e = error_thrown<pthload::FormatError>([&] { (void)pthload::open(file.path()); });
  CHECK(e.code() == Errc::kTorchBadPersistentId);
  CHECK(std::string(e.what()).find("pickle protocol 0") != std::string::npos);
}

TEST_SUITE("fixtures") {
  TEST_CASE("formats: torch's files of every pickle protocol load as torch.load loads them") {
    int folders = 0;
    // One folder per torch version, found by the reference file each holds.
    for (const auto& reference_file :
         pthload::test::fixture_files("torch", [](const std::filesystem::path& path) {
           return path.filename() == "p2_zip.pt" &&
                  path.parent_path().filename().string().starts_with("protocols-torch-");
         })) {
      const auto folder = reference_file.parent_path();
      ++folders;
      for (const std::string format : {"zip", "legacy"}) {
        // Protocol 2 is torch's default: every other protocol must give the same tensors.
        const auto reference = pthload::load(folder / ("p2_" + format + ".pt"));
        REQUIRE(reference.tensors().size() == 23);
        for (int protocol = 0; protocol <= 5; ++protocol) {
          const auto path = folder / ("p" + std::to_string(protocol) + "_" + format + ".pt");
          INFO(path.string());
          if (protocol == 0) {
            // torch.save writes it, torch.load refuses it ("saved_id must be a tuple").
            CHECK(error_code_of([&] { (void)pthload::open(path); }) == Errc::kTorchBadPersistentId);
            continue;
          }
          const auto checkpoint = pthload::load(path);
          CHECK(pthload::format_name(checkpoint.format()) == format);
          REQUIRE(checkpoint.tensors().size() == reference.tensors().size());
          for (std::size_t i = 0; i < checkpoint.tensors().size(); ++i) {
            const auto& got = checkpoint.tensors()[i];
            const auto& want = reference.tensors()[i];
            CHECK(got.name == want.name);
            CHECK(got.tensor.dtype() == want.tensor.dtype());
            CHECK(got.tensor.content_checksum() == want.tensor.content_checksum());
          }
        }
      }
    }
    CHECK(folders >= 2);
  }
}
