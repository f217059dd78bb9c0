// load() of the tensors whose bytes or geometry the pickle holds (numpy arrays,
// _rebuild_device_tensor_from_numpy, _rebuild_wrapper_subclass, _rebuild_nested_tensor) and of a
// stride-0 view: the torch layer's rebuilds seen through their placed bytes. Their open(), which
// reads no bytes: pickled_rebuilds_test.cpp.
#include <doctest/doctest.h>

#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <xxhash.h>

#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/checkpoint_file.hpp"
#include "support/error_code.hpp"
#include "support/pickle_writer.hpp"
#include "support/pickled_tensors.hpp"

using pthload::Errc;
using pthload::test::checkpoint_file;
using pthload::test::dict_of;
using pthload::test::error_code_of;
using pthload::test::error_thrown;
using pthload::test::float_record;
using pthload::test::kBigEndianInt16;
using pthload::test::kFloat32Bytes;
using pthload::test::kFortranInt32;
using pthload::test::kObjectArray;
using pthload::test::le64s;
using pthload::test::nested_pickle;
using pthload::test::nested_records;
using pthload::test::numpy_array;
using pthload::test::PickleWriter;

namespace {

template <typename T>
std::vector<T> values_of(const pthload::Tensor& t) {
  const auto bytes = t.contiguous_bytes();
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

std::vector<std::int64_t> vec(std::span<const std::int64_t> s) {
  return {s.begin(), s.end()};
}

// _codecs.encode(text, encoding): protocol 2's bytes. Memoized as `memo_key`, or the memoized
// text `memo_key` when `text` is empty.
auto encoded(std::string_view text, std::string_view encoding, std::uint8_t memo_key) {
  return [=](PickleWriter& p) {
    p.global("_codecs", "encode").mark();
    if (text.empty()) {
      p.get(memo_key);
    } else {
      p.str(text).put(memo_key);
    }
    p.str(encoding).tuple().reduce();
  };
}

// SHORT_BINBYTES `bytes`, memoized as `memo_key`, or the memoized bytes when `bytes` is empty.
auto raw_bytes(std::string_view bytes, std::uint8_t memo_key) {
  return [=](PickleWriter& p) {
    if (bytes.empty()) {
      p.get(memo_key);
      return;
    }
    p.op('C').raw(std::string(1, static_cast<char>(bytes.size()))).raw(bytes).put(memo_key);
  };
}

// _rebuild_device_tensor_from_numpy(<f4 array of `order` and `shape` over `data`),
// torch.bfloat16, 'cpu', False).
template <typename WriteData>
void bfloat16_from_numpy(PickleWriter& p, std::string_view order,
                         std::initializer_list<std::int64_t> shape, WriteData&& data) {
  p.global("torch._utils", "_rebuild_device_tensor_from_numpy").mark();
  numpy_array(p, "f4", order, shape, data);
  p.global("torch", "bfloat16").str("cpu").boolean(false).tuple().reduce();
}

// {'x': _rebuild_device_tensor_from_numpy(<numpy>, torch.<dtype>, device, False)}
std::string device_from_numpy(const std::string& numpy_pickle, std::string_view dtype,
                              std::string_view device = "xla:0",
                              std::string_view function = "_rebuild_device_tensor_from_numpy") {
  PickleWriter p;
  p.empty_dict().str("x").global("torch._utils", function).mark().raw(numpy_pickle);
  p.global("torch", dtype).str(device).boolean(false).tuple().reduce().setitem();
  return p.stop().bytes();
}

}  // namespace

TEST_CASE("torch: numpy arrays are tensors over the pickle's bytes") {
  const auto file = checkpoint_file(dict_of(kBigEndianInt16), {});
  auto checkpoint = pthload::load(file.path(), {.map_location = pthload::map_to("cuda:0")});
  const auto& t = checkpoint.tensor("a");
  CHECK(t.dtype() == pthload::Dtype::kInt16);
  CHECK(vec(t.sizes()) == std::vector<std::int64_t>{3});
  CHECK(t.storage().is_in_pickle());
  // numpy arrays stay on the CPU whatever map_location says, as in torch.load.
  CHECK(t.device() == pthload::Device::cpu());
  CHECK(values_of<std::int16_t>(t) == std::vector<std::int16_t>{0, 1, 2});  // swapped

  const auto fortran = checkpoint_file(dict_of(kFortranInt32), {});
  const auto f = pthload::load(fortran.path());
  CHECK(vec(f.tensor("a").strides()) == std::vector<std::int64_t>{1, 2});
  CHECK(values_of<std::int32_t>(f.tensor("a")) == std::vector<std::int32_t>{0, 1, 2, 3, 4, 5});

  // BINBYTES in a stored data.pkl: read where they lie (a view when aligned for the dtype).
  const auto raw = checkpoint_file(dict_of(kFloat32Bytes), {});
  const auto r = pthload::load(raw.path());
  CHECK(r.tensor("a").storage().is_in_pickle());
  CHECK(values_of<float>(r.tensor("a")) == std::vector<float>{0.0f, 1.0f, 1.00390625f, -3.5f});
}

TEST_CASE("torch: device tensors from numpy go through map_location") {
  const auto file = checkpoint_file(device_from_numpy(kFloat32Bytes, "bfloat16"), {});
  const auto opened = pthload::open(file.path());
  CHECK(opened.tensor("x").dtype() == pthload::Dtype::kBFloat16);
  CHECK(opened.tensor("x").storage().location() == "xla:0");
  // Without map_location: a clear error naming the fix.
  const auto e = error_thrown<pthload::UnsupportedError>([&] { (void)pthload::load(file.path()); });
  CHECK(e.code() == Errc::kDeviceUnsupportedType);
  CHECK(std::string(e.what()).find("map_location \"cpu\"") != std::string::npos);
  // float32 → bfloat16 rounds to nearest even: 1.00390625 is a tie that rounds down to 1.0.
  const auto loaded =
      pthload::load(file.path(), {.map_location = pthload::map_dict({{"xla:0", "cpu"}})});
  CHECK(values_of<std::uint16_t>(loaded.tensor("x")) ==
        std::vector<std::uint16_t>{0x0000, 0x3F80, 0x3F80, 0xC060});
  // A callable is asked with the tag, where torch refuses callables here.
  std::string seen;
  (void)pthload::load(file.path(),
                      {.map_location = [&](const pthload::StorageInfo&, std::string_view tag) {
                        seen = tag;
                        return std::optional(pthload::Device::cpu());
                      }});
  CHECK(seen == "xla:0");

  const auto same = checkpoint_file(
      device_from_numpy(kBigEndianInt16, "int16", "mlc", "_rebuild_mlc_tensor"), {});
  const auto s = pthload::load(same.path(), {.map_location = pthload::map_to("cpu")});
  CHECK(values_of<std::int16_t>(s.tensor("x")) == std::vector<std::int16_t>{0, 1, 2});

  CHECK(error_code_of([&] {
          (void)pthload::open(
              checkpoint_file(device_from_numpy(kFloat32Bytes, "float64"), {}).path());
        }) == Errc::kTorchUnsupportedRebuild);
  CHECK(error_code_of([&] {
          (void)pthload::open(
              checkpoint_file(device_from_numpy(kObjectArray, "float32"), {}).path());
        }) == Errc::kTorchUnsupportedRebuild);
  PickleWriter not_numpy;
  not_numpy.empty_dict().str("x").global("torch._utils", "_rebuild_xla_tensor").mark();
  not_numpy.integer(1).global("torch", "float32").str("xla:0").boolean(false).tuple().reduce();
  CHECK(error_code_of([&] {
          (void)pthload::open(checkpoint_file(not_numpy.setitem().stop().bytes(), {}).path());
        }) == Errc::kTorchBadRebuildArguments);
}

TEST_CASE("torch: numpy arrays over one text encoded two ways have each their own bytes") {
  // One memoized str 'éé' (UTF-8 c3 a9 c3 a9), encoded as latin1 (e9 e9) for 'a' and as utf-8
  // for 'b': torch.load gives a = [233, 233], b = [195, 169, 195, 169]. Sharing one copy of the
  // bytes per text gave 'b' the 2 bytes of 'a' as its 4 (a read past the copy).
  PickleWriter p;
  p.empty_dict().str("a");
  numpy_array(p, "u1", "|", {2}, encoded("\xc3\xa9\xc3\xa9", "latin1", 0));
  p.setitem().str("b");
  numpy_array(p, "u1", "|", {4}, encoded("", "utf-8", 0));
  const auto file = checkpoint_file(p.setitem().stop().bytes(), {});
  for (const bool copy : {false, true}) {
    const auto loaded = pthload::load(file.path(), {.copy_cpu_storages = copy});
    CHECK(values_of<std::uint8_t>(loaded.tensor("a")) == std::vector<std::uint8_t>{233, 233});
    CHECK(values_of<std::uint8_t>(loaded.tensor("b")) ==
          std::vector<std::uint8_t>{195, 169, 195, 169});
  }
}

TEST_CASE("torch: bfloat16 device tensors from numpy convert each array's own bytes") {
  // As torch.load gives them: one memoized str 'éééé' as latin1 (e9 e9 e9 e9, one float) and as
  // utf-8 (c3 a9 c3 a9 c3 a9 c3 a9, two); one memoized 3f 80 00 00 read as '<f4' (a denormal,
  // rounded up to 0x0001) and as '>f4' (1.0). Sharing one conversion per text or per bytes gave
  // 'utf8' a 2-byte storage under its 4 bytes, and 'big' the value of 'little'.
  PickleWriter p;
  p.empty_dict().str("latin1");
  bfloat16_from_numpy(p, "<", {1}, encoded("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", "latin1", 0));
  p.setitem().str("utf8");
  bfloat16_from_numpy(p, "<", {2}, encoded("", "utf-8", 0));
  p.setitem().str("little");
  bfloat16_from_numpy(p, "<", {1}, raw_bytes(std::string_view("\x3f\x80\x00\x00", 4), 1));
  p.setitem().str("big");
  bfloat16_from_numpy(p, ">", {1}, raw_bytes("", 1));
  const auto file = checkpoint_file(p.setitem().stop().bytes(), {});
  for (const bool copy : {false, true}) {
    const auto loaded = pthload::load(file.path(), {.copy_cpu_storages = copy});
    CHECK(values_of<std::uint16_t>(loaded.tensor("latin1")) == std::vector<std::uint16_t>{0xE9EA});
    CHECK(values_of<std::uint16_t>(loaded.tensor("utf8")) ==
          std::vector<std::uint16_t>{0xA9C4, 0xA9C4});
    CHECK(values_of<std::uint16_t>(loaded.tensor("little")) == std::vector<std::uint16_t>{0x0001});
    CHECK(values_of<std::uint16_t>(loaded.tensor("big")) == std::vector<std::uint16_t>{0x3F80});
  }
}

namespace {

std::string wrapper(std::string_view layout = "torch.strided", bool cls_global = true) {
  PickleWriter p;
  p.empty_dict().str("w").global("torch._utils", "_rebuild_wrapper_subclass").mark();
  if (cls_global) {
    p.global("my.module", "Wrapper");
  } else {
    p.integer(3);
  }
  p.global("torch", "float32").ints({2, 3}).ints({3, 1}).integer(1);
  p.global("torch.serialization", "_get_layout").mark().str(layout).tuple().reduce();
  p.global("torch", "device").mark().str("xla").integer(0).tuple().reduce();
  p.boolean(false).tuple().reduce().setitem();
  return p.stop().bytes();
}

}  // namespace

TEST_CASE("torch: wrapper subclasses have no storage, a class and a mapped device") {
  const auto file = checkpoint_file(wrapper(), {});
  const auto opened = pthload::open(file.path());
  const auto& w = opened.tensor("w");
  CHECK_FALSE(w.has_storage());
  REQUIRE(w.wrapper_subclass() != nullptr);
  CHECK(w.wrapper_subclass()->subclass == "my.module.Wrapper");
  CHECK(w.wrapper_subclass()->location == "xla:0");
  CHECK(w.storage_offset() == 1);
  CHECK(error_code_of([&] { (void)w.data(); }) == Errc::kTorchTensorWithoutData);
  CHECK(error_code_of([&] { (void)pthload::load(file.path()); }) == Errc::kDeviceUnsupportedType);
  const auto loaded = pthload::load(file.path(), {.map_location = pthload::map_to("meta")});
  CHECK(loaded.tensor("w").device() == pthload::Device::meta());

  CHECK(error_code_of([&] {
          (void)pthload::open(checkpoint_file(wrapper("torch.sparse_coo"), {}).path());
        }) == Errc::kTorchUnsupportedRebuild);
  CHECK(error_code_of([&] {
          (void)pthload::open(checkpoint_file(wrapper("torch.strided", false), {}).path());
        }) == Errc::kTorchBadRebuildArguments);
}

TEST_CASE("torch: nested tensors list their components as views of the buffer") {
  const auto file =
      checkpoint_file(nested_pickle(), nested_records(le64s({3, 5}), le64s({1, 1}), le64s({0, 3})));
  const auto checkpoint = pthload::load(file.path());
  REQUIRE(checkpoint.tensors().size() == 3);
  const auto& nt = checkpoint.tensor("nt");
  CHECK(nt.layout() == pthload::Layout::kNested);
  CHECK(vec(nt.sizes()) == std::vector<std::int64_t>{2});
  CHECK(checkpoint.tensors()[1].name == "nt.0");
  const auto& second = checkpoint.tensor("nt.1");
  CHECK(vec(second.sizes()) == std::vector<std::int64_t>{5});
  CHECK(second.storage_offset() == 3);
  CHECK(values_of<float>(second) == std::vector<float>{3, 4, 5, 6, 7});
}

TEST_CASE("torch: a stride-0 view reads what it shows, up to a bound") {
  // {'small': 1000 elements over one float, 'huge': 2^40 elements over one float}
  PickleWriter p;
  p.empty_dict().mark();
  p.str("small").tensor_v2("FloatStorage", "0", 1, 0, {1000}, {0});
  p.str("huge").tensor_v2("FloatStorage", "0", 1, 0, {INT64_C(1) << 20, INT64_C(1) << 20}, {0, 0});
  const auto file = checkpoint_file(p.setitems().stop().bytes(),
                                    {{.name = "ck/data/0", .data = float_record(1)}});
  const auto checkpoint = pthload::load(file.path());

  const auto& small = checkpoint.tensor("small");
  const auto bytes = small.contiguous_bytes();
  REQUIRE(bytes.size() == 4000);
  for (std::size_t i = 0; i < bytes.size(); i += 4) {
    CHECK(std::memcmp(bytes.data() + i, small.data(), 4) == 0);
  }
  CHECK(small.content_checksum() == XXH3_64bits(bytes.data(), bytes.size()));

  // 4 TiB shown by 4 bytes: refused at once, no allocation, no hour-long hash.
  const auto& huge = checkpoint.tensor("huge");
  CHECK(huge.nbytes() == (std::uint64_t{1} << 42));
  CHECK(error_code_of([&] { (void)huge.content_checksum(); }) == Errc::kTorchLimitExceeded);
  CHECK(error_code_of([&] { (void)huge.contiguous_bytes(); }) == Errc::kTorchLimitExceeded);
}
