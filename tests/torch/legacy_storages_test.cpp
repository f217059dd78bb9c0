// The torch layer over built legacy (pre-1.6) streams (lib/torch/legacy_storages.cpp), through
// open() and load(): storages as file ranges, views of root storages, opaque module ids, nested
// streams of torch.storage._load_from_bytes, and the torch-level errors (key list, sizes, views).
#include <doctest/doctest.h>

#include <cstring>
#include <string>

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

std::string header() {
  return lb::magic() + lb::protocol() + lb::sys_info();
}

// {'a': (2, 3) over root '100'; 'v': (3,) over view '200' = elements [2, 5) of '100'}
std::string views_pickle(std::int64_t view_offset = 2, std::int64_t view_numel = 3,
                         std::int64_t tensor_size = 3) {
  PickleWriter p;
  p.empty_dict().mark().str("a");
  lb::tensor(p, "FloatStorage", "100", 6, 0, {2, 3}, {3, 1});
  p.str("v");
  lb::tensor(p, "FloatStorage", "100", 6, 0, {tensor_size}, {1},
             lb::View{"200", view_offset, view_numel});
  return p.setitems().stop().bytes();
}

std::string stream(const std::string& main, std::initializer_list<std::string_view> keys,
                   const std::string& data) {
  return header() + main + lb::key_list(keys) + data;
}

TempPath file_of(const std::string& text) {
  return TempPath(bytes_of(text));
}

Errc open_code(const std::string& text) {
  const auto file = file_of(text);
  return error_code_of([&] { (void)pthload::open(file.path()); });
}

std::vector<float> floats_of(const pthload::Tensor& tensor) {
  const auto bytes = tensor.contiguous_bytes();
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

}  // namespace

TEST_CASE("torch legacy: a storage view shares its root storage, offsets adjusted") {
  const auto text = stream(views_pickle(), {"100"}, lb::count(6) + lb::floats(6));
  const auto file = file_of(text);
  // Legacy data sits wherever the pickles end (the mapping itself is page-aligned): a view
  // only where floats may be read.
  const bool aligned = (text.size() - 24) % 4 == 0;
  for (const bool copy : {false, true}) {
    const auto checkpoint = pthload::load(file.path(), {.copy_cpu_storages = copy});
    CHECK(checkpoint.format() == pthload::Format::kLegacy);
    REQUIRE(checkpoint.tensors().size() == 2);
    CHECK(checkpoint.storages().size() == 1);
    const auto& a = checkpoint.tensor("a");
    const auto& v = checkpoint.tensor("v");
    CHECK(&a.storage() == &v.storage());
    CHECK(a.storage().key() == "100");
    CHECK(v.storage_offset() == 2);
    CHECK(floats_of(a) == std::vector<float>{0, 1, 2, 3, 4, 5});
    CHECK(floats_of(v) == std::vector<float>{2, 3, 4});
    CHECK(a.storage().is_file_view() == (!copy && aligned));
  }
}

TEST_CASE("torch legacy: views are zero-copy when the data is aligned, copies otherwise") {
  // One-byte elements are always aligned: a view of the file. (Not uint8: an untyped storage
  // may hold any dtype, so uint8 storages keep the 16-byte rule.)
  PickleWriter p;
  lb::tensor(p, "CharStorage", "1", 3, 0, {3}, {1});
  const auto bytes_file = file_of(stream(p.stop().bytes(), {"1"}, lb::count(3) + "abc"));
  const auto checkpoint = pthload::load(bytes_file.path());
  CHECK(checkpoint.tensors()[0].tensor.storage().is_file_view());
  // Four-byte floats at an odd offset: copied.
  PickleWriter q;
  lb::tensor(q, "FloatStorage", "1", 1, 0, {1}, {1});
  std::string main = q.stop().bytes();
  const auto pad_to_odd = [&](const std::string& text) { return (text.size() - 4) % 4 == 0; };
  if (pad_to_odd(stream(main, {"1"}, lb::count(1) + lb::floats(1)))) main.insert(2, "N0");
  const auto float_text = stream(main, {"1"}, lb::count(1) + lb::floats(1));
  REQUIRE((float_text.size() - 4) % 4 != 0);
  const auto float_file = file_of(float_text);
  const auto floats = pthload::load(float_file.path());
  CHECK_FALSE(floats.tensors()[0].tensor.storage().is_file_view());
  CHECK(floats_of(floats.tensors()[0].tensor) == std::vector<float>{0});
}

TEST_CASE("torch legacy: view metadata out of range, and tensors larger than their view") {
  const auto data = lb::count(6) + lb::floats(6);
  CHECK(open_code(stream(views_pickle(4, 3), {"100"}, data)) == Errc::kLegacyViewOutOfRange);
  CHECK(open_code(stream(views_pickle(0, 7), {"100"}, data)) == Errc::kLegacyViewOutOfRange);
  CHECK(open_code(stream(views_pickle(std::int64_t{1} << 62, 1), {"100"}, data)) ==
        Errc::kLegacyViewOutOfRange);
  CHECK(open_code(stream(views_pickle(2, 3, 4), {"100"}, data)) == Errc::kTorchTensorOutOfBounds);
  CHECK(open_code(stream(views_pickle(-1, 3), {"100"}, data)) == Errc::kTorchBadPersistentId);
}

TEST_CASE("torch legacy: the key list must match the storages") {
  const auto data = lb::count(6) + lb::floats(6);
  CHECK(open_code(stream(views_pickle(), {"999"}, data)) == Errc::kLegacyKeyMismatch);
  CHECK(open_code(stream(views_pickle(), {}, "")) == Errc::kLegacyKeyMismatch);
  CHECK(open_code(stream(views_pickle(), {"100", "101"}, data + data)) == Errc::kLegacyKeyMismatch);
  // The count must equal the persistent id's numel (torch: "storage has wrong byte size").
  CHECK(open_code(stream(views_pickle(), {"100"}, lb::count(5) + lb::floats(6))) ==
        Errc::kLegacyStorageSizeMismatch);
  CHECK(open_code(stream(views_pickle(), {"100"}, lb::count(7) + lb::floats(6))) ==
        Errc::kLegacyStorageOutOfBounds);
  CHECK(open_code(stream(views_pickle(), {"100"}, lb::count(6) + lb::floats(5))) ==
        Errc::kLegacyStorageOutOfBounds);
}

TEST_CASE("torch legacy: the first persistent id of a key defines its storage") {
  PickleWriter p;
  p.empty_list().mark();
  lb::tensor(p, "FloatStorage", "7", 2, 0, {2}, {1});
  lb::tensor(p, "FloatStorage", "7", 99, 1, {1}, {1});  // numel ignored, as torch does
  p.appends().stop();
  const auto file = file_of(stream(p.bytes(), {"7"}, lb::count(2) + lb::floats(2)));
  const auto checkpoint = pthload::load(file.path());
  REQUIRE(checkpoint.tensors().size() == 2);
  CHECK(checkpoint.storages().size() == 1);
  CHECK(checkpoint.storages()[0]->nbytes() == 8);
  CHECK(floats_of(checkpoint.tensors()[1].tensor) == std::vector<float>{1});
}

TEST_CASE("torch legacy: module ids are opaque; other id types are errors") {
  PickleWriter p;
  p.empty_dict().mark().str("m");
  p.mark().str("module").global("mymodel", "Net").str("net.py").str("class Net: ...").tuple();
  p.binpersid().str("a");
  lb::tensor(p, "FloatStorage", "1", 2, 0, {2}, {1});
  p.setitems().stop();
  const auto file = file_of(stream(p.bytes(), {"1"}, lb::count(2) + lb::floats(2)));
  const auto checkpoint = pthload::load(file.path());
  REQUIRE(checkpoint.tensors().size() == 1);
  CHECK(checkpoint.tensors()[0].name == "a");

  PickleWriter bad;
  bad.mark().str("tensor").str("x").tuple().binpersid().stop();
  CHECK(open_code(stream(bad.bytes(), {}, "")) == Errc::kTorchBadPersistentId);
  PickleWriter five;
  five.mark().str("storage").global("torch", "FloatStorage").str("1").str("cpu").integer(1);
  five.tuple().binpersid().stop();
  CHECK(open_code(stream(five.bytes(), {"1"}, lb::count(1) + lb::floats(1))) ==
        Errc::kTorchBadPersistentId);
  PickleWriter unknown;
  lb::storage(unknown, "NoSuchStorage", "1", 1).stop();
  CHECK(open_code(stream(unknown.bytes(), {"1"}, lb::count(1) + lb::floats(1))) ==
        Errc::kTorchUnknownStorageType);
}

TEST_CASE("torch legacy: a bare storage in the pickle still needs its data") {
  PickleWriter p;
  lb::storage(p, "FloatStorage", "5", 2).stop();
  CHECK(open_code(stream(p.bytes(), {"5"}, lb::count(2) + lb::floats(2))) == Errc::kOk);
  CHECK(open_code(stream(p.bytes(), {}, "")) == Errc::kLegacyKeyMismatch);
}

namespace {

// A whole legacy stream of one 2-float storage: what Storage.__reduce__ passes to
// torch.storage._load_from_bytes.
std::string storage_stream() {
  PickleWriter p;
  lb::storage(p, "FloatStorage", "140001", 2).stop();
  return stream(p.bytes(), {"140001"}, lb::count(2) + lb::floats(2));
}

// The text whose Latin-1 encoding is `bytes` (each byte one code point), as UTF-8.
std::string latin1_text(const std::string& bytes) {
  std::string text;
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x80) {
      text += c;
    } else {
      text += static_cast<char>(0xc0 | (byte >> 6));
      text += static_cast<char>(0x80 | (byte & 0x3f));
    }
  }
  return text;
}

// `bytes` as `_codecs.encode(text, 'latin1')`, as protocol 2 spells bytes.
PickleWriter& latin1_bytes(PickleWriter& p, const std::string& bytes) {
  return p.global("_codecs", "encode")
      .mark()
      .str(latin1_text(bytes))
      .str("latin1")
      .tuple()
      .reduce();
}

std::string load_from_bytes_pickle(bool protocol2_bytes, const std::string& inner) {
  PickleWriter p;
  p.empty_dict().mark();
  for (const char* name : {"t", "u"}) {
    p.str(name).global("torch._utils", "_rebuild_tensor_v2").mark();
    if (name[0] == 't') {
      p.global("torch.storage", "_load_from_bytes").mark();
      if (protocol2_bytes) {
        latin1_bytes(p, inner);
      } else {
        p.op('B').raw(lb::count(inner.size()).substr(0, 4)).raw(inner);
      }
      p.tuple().reduce().put(9);
    } else {
      p.get(9);  // the memoised call again: the same storage
    }
    p.integer(name[0] == 't' ? 0 : 1).ints({1}).ints({1}).boolean(false);
    p.global("collections", "OrderedDict").empty_tuple().reduce().tuple().reduce();
  }
  return p.setitems().stop().bytes();
}

}  // namespace

TEST_CASE("torch legacy: torch.storage._load_from_bytes reads the nested stream") {
  for (const bool protocol2_bytes : {false, true}) {
    const auto file =
        file_of(stream(load_from_bytes_pickle(protocol2_bytes, storage_stream()), {}, ""));
    for (const bool copy : {false, true}) {
      const auto checkpoint = pthload::load(file.path(), {.copy_cpu_storages = copy});
      REQUIRE(checkpoint.tensors().size() == 2);
      CHECK(checkpoint.storages().size() == 1);
      CHECK(checkpoint.tensor("t").storage().key() == "140001");
      CHECK(&checkpoint.tensor("t").storage() == &checkpoint.tensor("u").storage());
      CHECK(floats_of(checkpoint.tensor("t")) == std::vector<float>{0});
      CHECK(floats_of(checkpoint.tensor("u")) == std::vector<float>{1});
    }
  }
  // Nested streams are checked like files.
  auto truncated = storage_stream();
  truncated.resize(truncated.size() - 1);
  CHECK(open_code(stream(load_from_bytes_pickle(false, truncated), {}, "")) ==
        Errc::kLegacyStorageOutOfBounds);
  CHECK(open_code(stream(load_from_bytes_pickle(false, "not a stream"), {}, "")) ==
        Errc::kPickleUnknownOpcode);
  CHECK(open_code(stream(load_from_bytes_pickle(false, lb::magic(false)), {}, "")) ==
        Errc::kLegacyBadMagic);
}

TEST_CASE("torch legacy: _load_from_bytes calls that encode one text two ways are two streams") {
  // 't' reads _codecs.encode(text, 'latin1'), a valid stream; 'u' encodes the same memoized text
  // as UTF-8, other bytes that are no stream. Sharing the first call's storage by the text node
  // alone loaded 'u' silently from bytes its call does not spell.
  const std::string text = latin1_text(storage_stream());
  PickleWriter p;
  p.empty_dict().mark();
  for (const char* name : {"t", "u"}) {
    p.str(name).global("torch._utils", "_rebuild_tensor_v2").mark();
    p.global("torch.storage", "_load_from_bytes").mark().global("_codecs", "encode").mark();
    if (name[0] == 't') {
      p.str(text).put(8).str("latin1");
    } else {
      p.get(8).str("utf-8");
    }
    p.tuple().reduce().tuple().reduce();
    p.integer(0).ints({1}).ints({1}).boolean(false);
    p.global("collections", "OrderedDict").empty_tuple().reduce().tuple().reduce();
  }
  CHECK(open_code(stream(p.setitems().stop().bytes(), {}, "")) == Errc::kPickleUnknownOpcode);
}

TEST_CASE("torch legacy: the caller's limits bound a _load_from_bytes stream too") {
  // The nested stream's main pickle makes 200 values; the outer pickle far fewer.
  PickleWriter many;
  many.mark();
  for (int i = 0; i < 200; ++i)
    many.integer(1'000'000 + i);  // beyond the shared small ints
  const auto inner = stream(many.tuple().stop().bytes(), {}, "");
  const auto file = file_of(stream(load_from_bytes_pickle(false, inner), {}, ""));
  // With room for it, the stream is read and found to hold no storage.
  CHECK(error_code_of([&] { (void)pthload::open(file.path()); }) ==
        Errc::kTorchBadRebuildArguments);
  pthload::LoadOptions tight;
  tight.limits.max_pickle_values = 100;
  const auto e = error_thrown<pthload::Error>([&] { (void)pthload::open(file.path(), tight); });
  CHECK(e.code() == Errc::kPickleLimitExceeded);
  CHECK(e.context().record == "<torch.storage._load_from_bytes>");
}
