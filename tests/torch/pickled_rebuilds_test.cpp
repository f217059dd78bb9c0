// Tensors whose bytes or geometry the pickle holds: numpy arrays, _rebuild_device_tensor_from_numpy
// (XLA/MLC: no torch here can write those files, so the pickles are built here around the real
// numpy array pickles below, copied from pickle.dumps of numpy arrays), _rebuild_wrapper_subclass
// and _rebuild_nested_tensor, each with malformed variants.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/checkpoint_file.hpp"
#include "support/error_code.hpp"
#include "support/pickle_writer.hpp"

using pthload::Errc;
using pthload::test::checkpoint_file;
using pthload::test::error_code_of;
using pthload::test::PickleWriter;
using Record = pthload::test::zip_build::Record;

namespace {

// pickle.dumps(...)[2:-1] of numpy 1.24.2
const std::string kBigEndianInt16{
    "\x63\x6e\x75\x6d\x70\x79\x2e\x63\x6f\x72\x65\x2e\x6d\x75\x6c\x74\x69\x61\x72\x72\x61\x79\x0a"
    "\x5f"
    "\x72\x65\x63\x6f\x6e\x73\x74\x72\x75\x63\x74\x0a\x71\x00\x63\x6e\x75\x6d\x70\x79\x0a\x6e\x64"
    "\x61"
    "\x72\x72\x61\x79\x0a\x71\x01\x4b\x00\x85\x71\x02\x63\x5f\x63\x6f\x64\x65\x63\x73\x0a\x65\x6e"
    "\x63"
    "\x6f\x64\x65\x0a\x71\x03\x58\x01\x00\x00\x00\x62\x71\x04\x58\x06\x00\x00\x00\x6c\x61\x74\x69"
    "\x6e"
    "\x31\x71\x05\x86\x71\x06\x52\x71\x07\x87\x71\x08\x52\x71\x09\x28\x4b\x01\x4b\x03\x85\x71\x0a"
    "\x63"
    "\x6e\x75\x6d\x70\x79\x0a\x64\x74\x79\x70\x65\x0a\x71\x0b\x58\x02\x00\x00\x00\x69\x32\x71\x0c"
    "\x89"
    "\x88\x87\x71\x0d\x52\x71\x0e\x28\x4b\x03\x58\x01\x00\x00\x00\x3e\x71\x0f\x4e\x4e\x4e\x4a\xff"
    "\xff"
    "\xff\xff\x4a\xff\xff\xff\xff\x4b\x00\x74\x71\x10\x62\x89\x68\x03\x58\x06\x00\x00\x00\x00\x00"
    "\x00"
    "\x01\x00\x02\x71\x11\x68\x05\x86\x71\x12\x52\x71\x13\x74\x71\x14\x62",
    209};

// pickle.dumps(...)[2:-1] of numpy 1.24.2
const std::string kFloat32Bytes{
    "\x63\x6e\x75\x6d\x70\x79\x2e\x63\x6f\x72\x65\x2e\x6d\x75\x6c\x74\x69\x61\x72\x72\x61\x79\x0a"
    "\x5f"
    "\x72\x65\x63\x6f\x6e\x73\x74\x72\x75\x63\x74\x0a\x71\x00\x63\x6e\x75\x6d\x70\x79\x0a\x6e\x64"
    "\x61"
    "\x72\x72\x61\x79\x0a\x71\x01\x4b\x00\x85\x71\x02\x43\x01\x62\x71\x03\x87\x71\x04\x52\x71\x05"
    "\x28"
    "\x4b\x01\x4b\x04\x85\x71\x06\x63\x6e\x75\x6d\x70\x79\x0a\x64\x74\x79\x70\x65\x0a\x71\x07\x58"
    "\x02"
    "\x00\x00\x00\x66\x34\x71\x08\x89\x88\x87\x71\x09\x52\x71\x0a\x28\x4b\x03\x58\x01\x00\x00\x00"
    "\x3c"
    "\x71\x0b\x4e\x4e\x4e\x4a\xff\xff\xff\xff\x4a\xff\xff\xff\xff\x4b\x00\x74\x71\x0c\x62\x89\x43"
    "\x10"
    "\x00\x00\x00\x00\x00\x00\x80\x3f\x00\x80\x80\x3f\x00\x00\x60\xc0\x71\x0d\x74\x71\x0e\x62",
    166};

// pickle.dumps(...)[2:-1] of numpy 1.24.2
const std::string kObjectArray{
    "\x63\x6e\x75\x6d\x70\x79\x2e\x63\x6f\x72\x65\x2e\x6d\x75\x6c\x74\x69\x61\x72\x72\x61\x79\x0a"
    "\x5f"
    "\x72\x65\x63\x6f\x6e\x73\x74\x72\x75\x63\x74\x0a\x71\x00\x63\x6e\x75\x6d\x70\x79\x0a\x6e\x64"
    "\x61"
    "\x72\x72\x61\x79\x0a\x71\x01\x4b\x00\x85\x71\x02\x63\x5f\x63\x6f\x64\x65\x63\x73\x0a\x65\x6e"
    "\x63"
    "\x6f\x64\x65\x0a\x71\x03\x58\x01\x00\x00\x00\x62\x71\x04\x58\x06\x00\x00\x00\x6c\x61\x74\x69"
    "\x6e"
    "\x31\x71\x05\x86\x71\x06\x52\x71\x07\x87\x71\x08\x52\x71\x09\x28\x4b\x01\x4b\x02\x85\x71\x0a"
    "\x63"
    "\x6e\x75\x6d\x70\x79\x0a\x64\x74\x79\x70\x65\x0a\x71\x0b\x58\x02\x00\x00\x00\x4f\x38\x71\x0c"
    "\x89"
    "\x88\x87\x71\x0d\x52\x71\x0e\x28\x4b\x03\x58\x01\x00\x00\x00\x7c\x71\x0f\x4e\x4e\x4e\x4a\xff"
    "\xff"
    "\xff\xff\x4a\xff\xff\xff\xff\x4b\x3f\x74\x71\x10\x62\x89\x5d\x71\x11\x28\x4b\x01\x58\x01\x00"
    "\x00"
    "\x00\x61\x71\x12\x65\x74\x71\x13\x62",
    201};

// pickle.dumps(...)[2:-1] of numpy 1.24.2
const std::string kFortranInt32{
    "\x63\x6e\x75\x6d\x70\x79\x2e\x63\x6f\x72\x65\x2e\x6d\x75\x6c\x74\x69\x61\x72\x72\x61\x79\x0a"
    "\x5f"
    "\x72\x65\x63\x6f\x6e\x73\x74\x72\x75\x63\x74\x0a\x71\x00\x63\x6e\x75\x6d\x70\x79\x0a\x6e\x64"
    "\x61"
    "\x72\x72\x61\x79\x0a\x71\x01\x4b\x00\x85\x71\x02\x63\x5f\x63\x6f\x64\x65\x63\x73\x0a\x65\x6e"
    "\x63"
    "\x6f\x64\x65\x0a\x71\x03\x58\x01\x00\x00\x00\x62\x71\x04\x58\x06\x00\x00\x00\x6c\x61\x74\x69"
    "\x6e"
    "\x31\x71\x05\x86\x71\x06\x52\x71\x07\x87\x71\x08\x52\x71\x09\x28\x4b\x01\x4b\x02\x4b\x03\x86"
    "\x71"
    "\x0a\x63\x6e\x75\x6d\x70\x79\x0a\x64\x74\x79\x70\x65\x0a\x71\x0b\x58\x02\x00\x00\x00\x69\x34"
    "\x71"
    "\x0c\x89\x88\x87\x71\x0d\x52\x71\x0e\x28\x4b\x03\x58\x01\x00\x00\x00\x3c\x71\x0f\x4e\x4e\x4e"
    "\x4a"
    "\xff\xff\xff\xff\x4a\xff\xff\xff\xff\x4b\x00\x74\x71\x10\x62\x88\x68\x03\x58\x18\x00\x00\x00"
    "\x00"
    "\x00\x00\x00\x03\x00\x00\x00\x01\x00\x00\x00\x04\x00\x00\x00\x02\x00\x00\x00\x05\x00\x00\x00"
    "\x71"
    "\x11\x68\x05\x86\x71\x12\x52\x71\x13\x74\x71\x14\x62",
    229};

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

// {'a': <numpy pickle>}
std::string dict_of(const std::string& numpy_pickle) {
  PickleWriter p;
  p.empty_dict().str("a").raw(numpy_pickle).setitem();
  return p.stop().bytes();
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

std::string le64s(std::initializer_list<std::int64_t> values) {
  std::string out;
  for (const auto v : values) {
    for (int i = 0; i < 8; ++i)
      out += static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff);
  }
  return out;
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

TEST_CASE("torch: numpy object arrays stay opaque with a reason") {
  const auto file = checkpoint_file(dict_of(kObjectArray), {});
  const auto checkpoint = pthload::open(file.path());
  CHECK(checkpoint.tensors().empty());
  REQUIRE(checkpoint.opaque_values().size() == 1);
  CHECK(checkpoint.opaque_values()[0].name == "a");
  CHECK(checkpoint.opaque_values()[0].reason.find("object") != std::string::npos);
}

TEST_CASE("torch: malformed numpy arrays are FormatErrors") {
  auto wrong_count = kBigEndianInt16;  // shape (3,) over 6 bytes: claim 4 elements
  wrong_count[wrong_count.find("\x4b\x03\x85") + 1] = '\x04';
  CHECK(error_code_of([&] {
          (void)pthload::open(checkpoint_file(dict_of(wrong_count), {}).path());
        }) == Errc::kTorchBadNumpyArray);
  auto bad_order = kBigEndianInt16;
  bad_order[bad_order.find("\x3e\x71\x0f")] = 'x';
  CHECK(error_code_of([&] {
          (void)pthload::open(checkpoint_file(dict_of(bad_order), {}).path());
        }) == Errc::kTorchBadNumpyArray);
  // A BUILD state of the wrong arity.
  PickleWriter p;
  p.empty_dict().str("a").global("numpy.core.multiarray", "_reconstruct");
  p.mark().global("numpy", "ndarray").ints({0}).str("b").tuple().reduce();
  p.mark().integer(1).tuple().build().setitem();
  CHECK(error_code_of([&] { (void)pthload::open(checkpoint_file(p.stop().bytes(), {}).path()); }) ==
        Errc::kTorchBadNumpyArray);
}

TEST_CASE("torch: device tensors from numpy go through map_location") {
  const auto file = checkpoint_file(device_from_numpy(kFloat32Bytes, "bfloat16"), {});
  const auto opened = pthload::open(file.path());
  CHECK(opened.tensor("x").dtype() == pthload::Dtype::kBFloat16);
  CHECK(opened.tensor("x").storage().location() == "xla:0");
  // Without map_location: a clear error naming the fix.
  try {
    (void)pthload::load(file.path());
    FAIL("xla:0 placed");
  } catch (const pthload::UnsupportedError& e) {
    CHECK(e.code() == Errc::kDeviceUnsupportedType);
    CHECK(std::string(e.what()).find("map_location \"cpu\"") != std::string::npos);
  }
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

namespace {

// {'nt': _rebuild_nested_tensor(buffer: 8 floats, sizes [2, d], strides [2, d], offsets [2])};
// the int64 tensors' values are the records' bytes.
std::vector<Record> nested_records(const std::string& sizes, const std::string& strides,
                                   const std::string& offsets) {
  std::string buffer;
  for (int i = 0; i < 8; ++i) {
    const float v = static_cast<float>(i);
    buffer.append(reinterpret_cast<const char*>(&v), 4);
  }
  return {{.name = "ck/data/0", .data = buffer},
          {.name = "ck/data/1", .data = sizes},
          {.name = "ck/data/2", .data = strides},
          {.name = "ck/data/3", .data = offsets}};
}

std::string nested_pickle(std::int64_t d = 1, std::string_view sizes_type = "LongStorage") {
  PickleWriter p;
  p.empty_dict().str("nt").global("torch._utils", "_rebuild_nested_tensor").mark();
  p.tensor_v2("FloatStorage", "0", 8, 0, {8}, {1});
  p.tensor_v2(sizes_type, "1", 2 * d, 0, {2, d}, {d, 1});
  p.tensor_v2("LongStorage", "2", 2 * d, 0, {2, d}, {d, 1});
  p.tensor_v2("LongStorage", "3", 2, 0, {2}, {1});
  return p.tuple().reduce().setitem().stop().bytes();
}

}  // namespace

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

TEST_CASE("torch: hostile nested tensor geometry is an error with record and offset") {
  auto code_of = [](const std::string& pickle, std::vector<Record> records) {
    return error_code_of(
        [&] { (void)pthload::open(checkpoint_file(pickle, std::move(records)).path()); });
  };
  // A component past the buffer's end.
  CHECK(code_of(nested_pickle(), nested_records(le64s({3, 1LL << 40}), le64s({1, 1}),
                                                le64s({0, 3}))) == Errc::kTorchTensorOutOfBounds);
  // A negative stride, reported at its byte in its record.
  try {
    (void)pthload::open(
        checkpoint_file(nested_pickle(),
                        nested_records(le64s({3, 5}), le64s({1, -1}), le64s({0, 3})))
            .path());
    FAIL("negative stride accepted");
  } catch (const pthload::FormatError& e) {
    CHECK(e.code() == Errc::kTorchBadNestedTensor);
    CHECK(e.context().record == "ck/data/2");
    CHECK(e.context().offset == 8);
  }
  CHECK(code_of(nested_pickle(), nested_records(le64s({3, 5}), le64s({1, 1}), le64s({0, -3}))) ==
        Errc::kTorchBadNestedTensor);
  // sizes must be int64 and [n, d] beside strides [n, d].
  CHECK(code_of(nested_pickle(1, "IntStorage"),
                nested_records(std::string(8, '\0'), le64s({1, 1}), le64s({0, 3}))) ==
        Errc::kTorchBadNestedTensor);
  CHECK(code_of(nested_pickle(), nested_records(le64s({3, 5}), le64s({1, 1}), le64s({0}))) ==
        Errc::kTorchStorageTooSmall);
}
