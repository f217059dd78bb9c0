// The torch layer over built checkpoints: storages, rebuild calls, names, and each error.
#include <doctest/doctest.h>

#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/checkpoint_file.hpp"
#include "support/error_code.hpp"
#include "support/pickle_writer.hpp"

using pthload::Errc;
using pthload::test::checkpoint_file;
using pthload::test::error_code_of;
using pthload::test::error_thrown;
using pthload::test::float_record;
using pthload::test::PickleWriter;

namespace {

// {'a': tensor over storage '0', 'b': a transposed view of it at offset 2}
std::string two_views_pickle() {
  PickleWriter p;
  p.empty_dict().mark();
  p.str("a").tensor_v2("FloatStorage", "0", 8, 0, {2, 3}, {3, 1});
  p.str("b").tensor_v2("FloatStorage", "0", 8, 2, {3, 2}, {1, 3});
  return p.setitems().stop().bytes();
}

Errc open_code(const std::string& pickle, std::vector<pthload::test::zip_build::Record> records) {
  const auto file = checkpoint_file(pickle, std::move(records));
  return error_code_of([&] { (void)pthload::open(file.path()); });
}

}  // namespace

TEST_CASE("torch: views share one storage and keep offset and strides") {
  const auto file =
      checkpoint_file(two_views_pickle(), {{.name = "ck/data/0", .data = float_record(8)}});
  const auto checkpoint = pthload::open(file.path());
  REQUIRE(checkpoint.tensors().size() == 2);
  const auto& a = checkpoint.tensor("a");
  const auto& b = checkpoint.tensor("b");
  CHECK(a.dtype() == pthload::Dtype::kFloat32);
  CHECK(std::vector<std::int64_t>(b.sizes().begin(), b.sizes().end()) ==
        std::vector<std::int64_t>{3, 2});
  CHECK(std::vector<std::int64_t>(b.strides().begin(), b.strides().end()) ==
        std::vector<std::int64_t>{1, 3});
  CHECK(b.storage_offset() == 2);
  CHECK(&a.storage() == &b.storage());
  CHECK(checkpoint.storages().size() == 1);
  CHECK(a.is_contiguous());
  CHECK_FALSE(b.is_contiguous());
  CHECK(a.storage().nbytes() == 32);
  CHECK(a.storage().location() == "cpu");
}

TEST_CASE("torch: storage types memoized and alternating give each storage its own dtype") {
  // As torch's pickler writes them: each storage type global once, fetched from the memo after.
  PickleWriter p;
  p.empty_dict().mark();
  const auto tensor = [&](std::string_view name, std::string_view key, bool first_of_type,
                          std::string_view type, std::uint8_t memo) {
    p.str(name).global("torch._utils", "_rebuild_tensor_v2").mark();
    p.mark().str("storage");
    if (first_of_type) {
      p.global("torch", type).put(memo);
    } else {
      p.get(memo);
    }
    p.str(key).str("cpu").integer(2).tuple().binpersid();
    p.integer(0).ints({2}).ints({1}).boolean(false);
    p.global("collections", "OrderedDict").empty_tuple().reduce().tuple().reduce();
  };
  tensor("a", "0", true, "FloatStorage", 1);
  tensor("b", "1", true, "HalfStorage", 2);
  tensor("c", "2", false, "FloatStorage", 1);
  tensor("d", "3", false, "HalfStorage", 2);
  tensor("e", "4", false, "HalfStorage", 2);
  const std::string pickle = p.setitems().stop().bytes();
  std::vector<pthload::test::zip_build::Record> records;
  for (int key = 0; key < 5; ++key)
    records.push_back({.name = "ck/data/" + std::to_string(key), .data = float_record(2)});
  const auto file = checkpoint_file(pickle, records);
  const auto checkpoint = pthload::open(file.path());
  CHECK(checkpoint.tensor("a").dtype() == pthload::Dtype::kFloat32);
  CHECK(checkpoint.tensor("b").dtype() == pthload::Dtype::kFloat16);
  CHECK(checkpoint.tensor("c").dtype() == pthload::Dtype::kFloat32);
  CHECK(checkpoint.tensor("d").dtype() == pthload::Dtype::kFloat16);
  CHECK(checkpoint.tensor("e").dtype() == pthload::Dtype::kFloat16);
  CHECK(checkpoint.tensor("e").storage().nbytes() == 4);
}

TEST_CASE("torch: a storage key pickled as an int names the record of its digits") {
  PickleWriter p;
  p.empty_dict().str("w").global("torch._utils", "_rebuild_tensor_v2").mark();
  p.mark().str("storage").global("torch", "FloatStorage").integer(-12).str("cpu").integer(4);
  p.tuple().binpersid().integer(0).ints({4}).ints({1}).boolean(false);
  p.global("collections", "OrderedDict").empty_tuple().reduce().tuple().reduce().setitem();
  const auto file =
      checkpoint_file(p.stop().bytes(), {{.name = "ck/data/-12", .data = float_record(4)}});
  const auto checkpoint = pthload::open(file.path());
  CHECK(checkpoint.tensor("w").storage().key() == "-12");
  CHECK(checkpoint.tensor("w").storage().location() == "cpu");
  CHECK(checkpoint.tensor("w").sizes()[0] == 4);
}

TEST_CASE("torch: open() reads no tensor bytes") {
  const auto file =
      checkpoint_file(two_views_pickle(), {{.name = "ck/data/0", .data = float_record(8)}});
  const auto checkpoint = pthload::open(file.path());
  const auto& storage = checkpoint.tensor("a").storage();
  CHECK_FALSE(storage.is_placed());
  CHECK(error_code_of([&] { (void)storage.bytes(); }) == Errc::kDeviceNotOnCpu);
  CHECK(error_code_of([&] { (void)checkpoint.tensor("nope"); }) == Errc::kTorchNameNotFound);
}

TEST_CASE("torch: a tensor that reads past its storage is rejected") {
  PickleWriter p;
  p.tensor_v2("FloatStorage", "0", 8, 3, {2, 3}, {3, 1}).stop();  // last element 3+3+2 = 8
  CHECK(open_code(p.bytes(), {{.name = "ck/data/0", .data = float_record(8)}}) ==
        Errc::kTorchTensorOutOfBounds);
  PickleWriter huge;
  huge.tensor_v2("FloatStorage", "0", 8, 0, {2, 2}, {INT64_C(1) << 62, 1}).stop();
  CHECK(open_code(huge.bytes(), {{.name = "ck/data/0", .data = float_record(8)}}) ==
        Errc::kTorchTensorOutOfBounds);
}

TEST_CASE("torch: a zero-size tensor may sit at any offset") {
  PickleWriter p;
  p.tensor_v2("FloatStorage", "0", 1, 100, {0, 3}, {3, 1}).stop();
  const auto file = checkpoint_file(p.bytes(), {{.name = "ck/data/0", .data = float_record(1)}});
  CHECK(pthload::open(file.path()).tensors().front().tensor.numel() == 0);
}

TEST_CASE("torch: storage errors") {
  PickleWriter missing;
  missing.tensor_v2("FloatStorage", "7", 8, 0, {8}, {1}).stop();
  CHECK(open_code(missing.bytes(), {{.name = "ck/data/0", .data = float_record(8)}}) ==
        Errc::kTorchStorageRecordMissing);

  PickleWriter too_small;
  too_small.tensor_v2("FloatStorage", "0", 9, 0, {8}, {1}).stop();
  CHECK(open_code(too_small.bytes(), {{.name = "ck/data/0", .data = float_record(8)}}) ==
        Errc::kTorchStorageTooSmall);

  PickleWriter overflowing;
  overflowing.tensor_v2("DoubleStorage", "0", INT64_C(1) << 62, 0, {1}, {1}).stop();
  CHECK(open_code(overflowing.bytes(), {{.name = "ck/data/0", .data = float_record(8)}}) ==
        Errc::kTorchStorageTooSmall);

  PickleWriter unknown_type;
  unknown_type.tensor_v2("EvilStorage", "0", 8, 0, {8}, {1}).stop();
  CHECK(open_code(unknown_type.bytes(), {{.name = "ck/data/0", .data = float_record(8)}}) ==
        Errc::kTorchUnknownStorageType);

  PickleWriter bad_id;
  bad_id.global("torch._utils", "_rebuild_tensor_v2").mark();
  bad_id.str("not a tuple").binpersid().integer(0).ints({1}).ints({1}).boolean(false);
  bad_id.global("collections", "OrderedDict").empty_tuple().reduce().tuple().reduce().stop();
  CHECK(open_code(bad_id.bytes(), {}) == Errc::kTorchBadPersistentId);
}

TEST_CASE("torch: malformed rebuild arguments") {
  auto rebuild = [](auto&& write_arguments) {
    PickleWriter p;
    p.global("torch._utils", "_rebuild_tensor_v2").mark();
    p.storage("FloatStorage", "0", "cpu", 8);
    write_arguments(p);
    p.tuple().reduce().stop();
    return open_code(p.bytes(), {{.name = "ck/data/0", .data = float_record(8)}});
  };
  CHECK(rebuild([](PickleWriter& p) {
          p.integer(0).ints({2, 4}).ints({4});
        }) == Errc::kTorchBadRebuildArguments);  // size and stride disagree
  CHECK(rebuild([](PickleWriter& p) { p.integer(0).ints({-2}).ints({1}); }) ==
        Errc::kTorchBadRebuildArguments);  // negative size
  CHECK(rebuild([](PickleWriter& p) { p.integer(-1).ints({2}).ints({1}); }) ==
        Errc::kTorchBadRebuildArguments);  // negative offset
  CHECK(rebuild([](PickleWriter& p) { p.str("zero").ints({2}).ints({1}); }) ==
        Errc::kTorchBadRebuildArguments);  // offset is not an int
  CHECK(rebuild([](PickleWriter& p) { p.integer(0); }) == Errc::kTorchBadRebuildArguments);
}

TEST_CASE("torch: _rebuild_tensor_v3 takes its dtype from the 7th argument") {
  PickleWriter p;
  p.global("torch._utils", "_rebuild_tensor_v3").mark();
  p.storage("UntypedStorage", "0", "cpu", 8).integer(0).ints({4}).ints({1}).boolean(false);
  p.global("collections", "OrderedDict").empty_tuple().reduce();
  p.global("torch", "uint16").tuple().reduce().stop();
  const auto file =
      checkpoint_file(p.bytes(), {{.name = "ck/data/0", .data = std::string(8, '\1')}});
  const auto checkpoint = pthload::open(file.path());
  const auto& t = checkpoint.tensors().front().tensor;
  CHECK(t.dtype() == pthload::Dtype::kUInt16);
  CHECK(t.storage().dtype() == pthload::Dtype::kUInt8);
  CHECK(t.nbytes() == 8);

  PickleWriter too_long;
  too_long.global("torch._utils", "_rebuild_tensor_v3").mark();
  too_long.storage("UntypedStorage", "0", "cpu", 8).integer(0).ints({5}).ints({1}).boolean(false);
  too_long.global("collections", "OrderedDict").empty_tuple().reduce();
  too_long.global("torch", "uint16").tuple().reduce().stop();
  CHECK(open_code(too_long.bytes(), {{.name = "ck/data/0", .data = std::string(8, '\1')}}) ==
        Errc::kTorchTensorOutOfBounds);
}

TEST_CASE("torch: rebuilds not supported yet fail clearly, naming the function") {
  PickleWriter p;
  p.global("torch._utils", "_rebuild_from_the_future").mark().integer(1).tuple().reduce().stop();
  const auto file = checkpoint_file(p.bytes());
  const auto e = error_thrown<pthload::UnsupportedError>([&] { (void)pthload::open(file.path()); });
  CHECK(e.code() == Errc::kTorchUnsupportedRebuild);
  CHECK(std::string(e.what()).find("_rebuild_from_the_future") != std::string::npos);
  CHECK(e.context().record == "ck/data.pkl");
}

TEST_CASE("torch: Parameter and _rebuild_from_type_v2 wrap the tensor they rebuild") {
  PickleWriter p;
  p.empty_dict().mark().str("w");
  p.global("torch._utils", "_rebuild_parameter").mark();
  p.tensor_v2("FloatStorage", "0", 8, 0, {8}, {1}).boolean(true);
  p.global("collections", "OrderedDict").empty_tuple().reduce().tuple().reduce();
  p.str("sub").global("torch._tensor", "_rebuild_from_type_v2").mark();
  p.global("torch._utils", "_rebuild_tensor_v2").global("torch", "Tensor");
  p.mark().storage("FloatStorage", "0", "cpu", 8).integer(4).ints({4}).ints({1}).boolean(false);
  p.global("collections", "OrderedDict").empty_tuple().reduce().tuple();
  p.empty_dict().tuple().reduce();
  p.setitems().stop();
  const auto file = checkpoint_file(p.bytes(), {{.name = "ck/data/0", .data = float_record(8)}});
  const auto checkpoint = pthload::open(file.path());
  REQUIRE(checkpoint.tensors().size() == 2);
  CHECK(checkpoint.tensor("w").requires_grad());
  CHECK(checkpoint.tensor("sub").storage_offset() == 4);
  CHECK(&checkpoint.tensor("sub").storage() == &checkpoint.tensor("w").storage());
}

TEST_CASE("torch: names follow dict keys, indices and object state; cycles end") {
  PickleWriter p;
  // {'layers': [t, {'x': t}], 1: (t,), 'obj': Foo() with state {'w': t}, 'loop': L=[L, t]}
  p.empty_dict().mark();
  p.str("layers").empty_list().mark();
  p.tensor_v2("FloatStorage", "0", 8, 0, {8}, {1}).put(1);
  p.empty_dict().str("x").get(1).setitem();
  p.appends();
  p.integer(1).mark().get(1).tuple();
  p.str("obj").global("__main__", "Foo").empty_tuple().op('\x81');  // NEWOBJ
  p.empty_dict().str("w").get(1).setitem().build();
  p.str("loop").empty_list().put(2).get(2).append().get(1).append();
  p.setitems().stop();
  const auto file = checkpoint_file(p.bytes(), {{.name = "ck/data/0", .data = float_record(8)}});
  const auto checkpoint = pthload::open(file.path());
  std::vector<std::string> names;
  for (const auto& t : checkpoint.tensors())
    names.push_back(t.name);
  CHECK(names == std::vector<std::string>{"layers.0", "layers.1.x", "1.0", "obj.w", "loop.1"});
  CHECK(checkpoint.storages().size() == 1);
}

TEST_CASE("torch: exponentially many shared paths hit a limit instead of hanging") {
  // 2^40 paths to the tensor through 80 values.
  PickleWriter p = pthload::test::shared_list_dag(40);
  p.stop();
  const auto file = checkpoint_file(p.bytes(), {{.name = "ck/data/0", .data = float_record(8)}});
  pthload::LoadOptions options;
  options.limits.max_pickle_values = 100'000;
  CHECK(error_code_of([&] { (void)pthload::open(file.path(), options); }) ==
        Errc::kTorchLimitExceeded);
}

TEST_CASE(
    "torch: a tensor referred to over and over cannot buy names and shapes it did not pay for") {
  // torch shares one tensor object however often the pickle refers to it; pthload lists every
  // path, and each copy costs its name and its sizes and strides. The list may take 32 bytes per
  // pickle byte, at least 16 MiB (kTensorListBytesPerPickleByte, kMinTensorListBytes).
  const std::string long_key(65'536, 'k');
  const auto open_tensors = [](const PickleWriter& p) {
    const auto file = checkpoint_file(p.bytes(), {{.name = "ck/data/0", .data = float_record(8)}});
    return pthload::open(file.path()).tensors().size();
  };
  const auto refused = [](const PickleWriter& p) {
    const auto file = checkpoint_file(p.bytes(), {{.name = "ck/data/0", .data = float_record(8)}});
    try {
      (void)pthload::open(file.path());
    } catch (const pthload::FormatError& e) {
      return e.code() == Errc::kTorchLimitExceeded &&
             std::string_view(e.what()).find("per pickle byte") != std::string_view::npos;
    }
    return false;
  };
  // {long key: [t] * count}: each name is the 64 KiB key and an index.
  const auto long_names = [&](int count) {
    PickleWriter p;
    p.empty_dict().str(long_key).empty_list().mark();
    p.tensor_v2("FloatStorage", "0", 8, 0, {8}, {1}).put(1);
    for (int i = 1; i < count; ++i)
      p.get(1);
    p.appends().setitem().stop();
    return p;
  };
  CHECK(open_tensors(long_names(200)) == 200);  // 13 MB of names
  CHECK(refused(long_names(300)));              // 20 MB of names from a 66 KB pickle

  // {long key: [{'x': t}] * 300}: the names the walk keeps for dicts it has yet to visit count.
  PickleWriter shared_dicts;
  shared_dicts.empty_dict().str(long_key).empty_list().mark();
  shared_dicts.empty_dict().str("x").tensor_v2("FloatStorage", "0", 8, 0, {8}, {1}).setitem();
  shared_dicts.put(1);
  for (int i = 1; i < 300; ++i)
    shared_dicts.get(1);
  shared_dicts.appends().setitem().stop();
  CHECK(refused(shared_dicts));

  // [t] * count with 64 dimensions: each copy holds 1 KiB of sizes and strides.
  const std::vector<std::int64_t> ones(64, 1);
  const auto many_dims = [&](int count) {
    PickleWriter p;
    p.empty_list().mark().tensor_v2("FloatStorage", "0", 8, 0, ones, ones).put(1);
    for (int i = 1; i < count; ++i)
      p.get(1);
    p.appends().stop();
    return p;
  };
  CHECK(open_tensors(many_dims(10'000)) == 10'000);  // 12 MB
  CHECK(refused(many_dims(20'000)));                 // 23 MB from a 40 KB pickle
}
