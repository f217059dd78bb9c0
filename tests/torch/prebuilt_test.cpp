// Tensors rebuilt on a second thread while the pickle runs (torch/prebuilt_tensors.hpp): the same
// pickles built with and without the worker must give the same tensors, the same storages in the
// same order, and the same errors.
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "checkpoint/state.hpp"
#include "pickle/machine.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/checkpoint_file.hpp"
#include "support/pickle_writer.hpp"
#include "support/zip_builder.hpp"
#include "torch/naming.hpp"
#include "torch/tensor_builder.hpp"
#include "zip/archive.hpp"

using pthload::Errc;
using pthload::test::float_record;
using pthload::test::PickleWriter;
namespace zip_build = pthload::test::zip_build;

namespace {

// LONG_BINPUT and LONG_BINGET: memo keys past the writer's one-byte ones.
void put(PickleWriter& p, std::uint32_t key) {
  std::string op = "r";
  for (int i = 0; i < 4; ++i)
    op += static_cast<char>((key >> (8 * i)) & 0xff);
  p.raw(op);
}
void get(PickleWriter& p, std::uint32_t key) {
  std::string op = "j";
  for (int i = 0; i < 4; ++i)
    op += static_cast<char>((key >> (8 * i)) & 0xff);
  p.raw(op);
}

// A tensor of 2 floats at `offset` of the 8-float storage `key`.
void tensor(PickleWriter& p, int key, std::int64_t offset = 0) {
  p.tensor_v2("FloatStorage", std::to_string(key), 8, offset, {2}, {1});
}

struct Listed {
  std::string name;
  std::string key;
  pthload::Dtype dtype;
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;
  std::int64_t offset;
  bool requires_grad;
  friend bool operator==(const Listed&, const Listed&) = default;
};

struct Outcome {
  std::vector<Listed> tensors;
  std::vector<std::string> storage_keys;
  std::optional<Errc> error;
  std::string message;
  std::size_t handed_over = 0;
  std::size_t rebuilt = 0;
  std::size_t named_in_place = 0;
};

// Runs `pickle` over records "ck/data/0" ... "ck/data/<records - 1>" as open() runs data.pkl,
// with or without the worker.
Outcome build(const std::string& pickle, int records, bool prebuild) {
  std::vector<zip_build::Record> files{{.name = "ck/data.pkl", .data = pickle}};
  for (int key = 0; key < records; ++key)
    files.push_back({.name = "ck/data/" + std::to_string(key), .data = float_record(8)});
  const auto zip = zip_build::build(files).bytes;
  const pthload::Limits limits;
  pthload::internal::CheckpointState state;
  state.archive = pthload::zip::Archive::parse(zip, limits);
  const auto bytes = state.archive->read(state.archive->at("ck/data.pkl")).bytes();
  Outcome outcome;
  pthload::torch::TensorBuilder builder(state, "ck/data/", limits);
  try {
    pthload::pickle::RunOptions options;
    if (prebuild) builder.prebuild_during(options, bytes.size());
    state.pickle = pthload::pickle::Machine(limits).run(bytes, options);
    builder.prebuilding_done();
    pthload::torch::collect_named_tensors(*state.pickle.root, state.pickle.end_offset, builder,
                                          limits, state.tensors, state.opaque_values);
  } catch (const pthload::Error& e) {
    outcome.error = e.code();
    outcome.message = e.what();
  }
  std::tie(outcome.handed_over, outcome.rebuilt) = builder.prebuilt_counts();
  outcome.named_in_place = builder.prebuilt_named_in_place();
  for (const auto& named : state.tensors) {
    const auto& t = named.tensor;
    outcome.tensors.push_back({named.name, std::string(t.storage().key()), t.dtype(),
                               std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end()),
                               std::vector<std::int64_t>(t.strides().begin(), t.strides().end()),
                               t.storage_offset(), t.requires_grad()});
  }
  for (const auto& storage : state.storages)
    outcome.storage_keys.emplace_back(storage->key());
  return outcome;
}

void check_same(const Outcome& walked, const Outcome& prebuilt) {
  CHECK(prebuilt.tensors == walked.tensors);
  CHECK(prebuilt.storage_keys == walked.storage_keys);
  CHECK(prebuilt.error == walked.error);
  CHECK(prebuilt.message == walked.message);
  CHECK(walked.handed_over == 0);
}

// What open() with one parse thread and with two must list alike: the tensors in order, each
// with its name, storage (key and size), offset and first size, and the storages in order.
void check_same_listing(const pthload::Checkpoint& one, const pthload::Checkpoint& two) {
  REQUIRE(two.tensors().size() == one.tensors().size());
  for (std::size_t i = 0; i < one.tensors().size(); ++i) {
    const auto& x = one.tensors()[i];
    const auto& y = two.tensors()[i];
    REQUIRE(x.name == y.name);
    REQUIRE(x.tensor.storage().key() == y.tensor.storage().key());
    REQUIRE(x.tensor.storage().nbytes() == y.tensor.storage().nbytes());
    REQUIRE(x.tensor.storage_offset() == y.tensor.storage_offset());
    REQUIRE(x.tensor.sizes()[0] == y.tensor.sizes()[0]);
  }
  REQUIRE(two.storages().size() == one.storages().size());
  for (std::size_t i = 0; i < one.storages().size(); ++i)
    REQUIRE(one.storages()[i]->key() == two.storages()[i]->key());
}

}  // namespace

TEST_CASE("torch: tensors rebuilt while the pickle runs are those the walk rebuilds") {
  // 3000 entries (several of the worker's batches): views sharing storages, Parameters around
  // rebuild calls, tied weights fetched from the memo, a tensor whose storage is a bare list.
  PickleWriter p;
  p.empty_dict();
  constexpr int kEntries = 3000;
  for (int i = 0; i < kEntries; ++i) {
    p.str("t" + std::to_string(i));
    if (i % 7 == 3) {
      p.global("torch._utils", "_rebuild_parameter");
      tensor(p, i / 2, 2);
      p.boolean(true).global("collections", "OrderedDict").empty_tuple().reduce();
      p.op('\x87').reduce();  // TUPLE3: (data, requires_grad, hooks)
    } else {
      tensor(p, i / 2, i % 2 == 0 ? 0 : 4);  // two views of each storage
    }
    put(p, static_cast<std::uint32_t>(i));
    p.setitem();
  }
  for (int i = 0; i < 100; ++i) {  // tied weights: the same calls again, from the memo
    p.str("tied" + std::to_string(i));
    get(p, static_cast<std::uint32_t>(i * 13));
    p.setitem();
  }
  const std::string pickle = p.stop().bytes();
  const Outcome walked = build(pickle, kEntries / 2, false);
  const Outcome prebuilt = build(pickle, kEntries / 2, true);
  REQUIRE_FALSE(walked.error);
  CHECK(walked.tensors.size() == kEntries + 100);
  check_same(walked, prebuilt);
  CHECK(prebuilt.handed_over == kEntries);
  CHECK(prebuilt.rebuilt == kEntries);
}

TEST_CASE("torch: tensors met in the pickle's order are named where the worker listed them") {
  // 2000 tensors named in the order the pickle makes them (the worker's list is the checkpoint's
  // then), 50 tied weights after them (rebuilt by the walk), and 10 calls the walk never
  // reaches (made, then dropped), which must leave the list.
  PickleWriter p;
  p.empty_dict();
  constexpr int kTensors = 2000;
  for (int i = 0; i < kTensors; ++i) {
    p.str("t" + std::to_string(i));
    tensor(p, i / 2, i % 2 == 0 ? 0 : 4);
    put(p, static_cast<std::uint32_t>(i));
    p.setitem();
  }
  for (int i = 0; i < 50; ++i) {
    p.str("tied" + std::to_string(i));
    get(p, static_cast<std::uint32_t>(i * 37));
    p.setitem();
  }
  p.mark();
  for (int i = 0; i < 10; ++i)
    tensor(p, i);
  p.op('1');  // POP_MARK
  const std::string pickle = p.stop().bytes();
  const Outcome walked = build(pickle, kTensors / 2, false);
  const Outcome prebuilt = build(pickle, kTensors / 2, true);
  REQUIRE_FALSE(walked.error);
  CHECK(walked.tensors.size() == kTensors + 50);
  check_same(walked, prebuilt);
  CHECK(prebuilt.rebuilt == kTensors + 10);
  CHECK(prebuilt.named_in_place == kTensors);
}

TEST_CASE("torch: an optimizer state's tensors named in place get the names the walk gives") {
  // {"state": {0: {"step": t, "exp_avg": t}, 1: ...}, "param_groups": [...]}: int keys and a
  // prefix two levels up, each name made in the walk's blocks (TensorName), not as a string.
  PickleWriter p;
  p.empty_dict().str("state").empty_dict();
  constexpr int kParameters = 600;
  for (int i = 0; i < kParameters; ++i) {
    p.integer(i).empty_dict();
    p.str("step");
    tensor(p, 2 * i);
    p.setitem().str("exp_avg");
    tensor(p, 2 * i + 1);
    p.setitem().setitem();
  }
  p.setitem().str("param_groups").empty_list().setitem();
  const std::string pickle = p.stop().bytes();
  const Outcome walked = build(pickle, 2 * kParameters, false);
  const Outcome prebuilt = build(pickle, 2 * kParameters, true);
  REQUIRE_FALSE(walked.error);
  REQUIRE(walked.tensors.size() == 2 * kParameters);
  check_same(walked, prebuilt);
  CHECK(prebuilt.named_in_place == 2 * kParameters);
  CHECK(prebuilt.tensors[0].name == "state.0.step");
  CHECK(prebuilt.tensors[1].name == "state.0.exp_avg");
  CHECK(prebuilt.tensors[2 * kParameters - 1].name == "state.599.exp_avg");
}

TEST_CASE("torch: a walk that fails while naming in place keeps what it named, as without one") {
  PickleWriter p;
  p.empty_dict();
  constexpr int kTensors = 1000;
  for (int i = 0; i < kTensors; ++i) {
    p.str("t" + std::to_string(i));
    tensor(p, i);
    p.setitem();
  }
  // A Parameter of no arguments, then more tensors the walk never gets to.
  p.str("bad").global("torch._utils", "_rebuild_parameter").empty_tuple().reduce().setitem();
  for (int i = 0; i < 100; ++i) {
    p.str("after" + std::to_string(i));
    tensor(p, i);
    p.setitem();
  }
  const std::string pickle = p.stop().bytes();
  const Outcome walked = build(pickle, kTensors, false);
  const Outcome prebuilt = build(pickle, kTensors, true);
  REQUIRE(walked.error);
  CHECK(walked.tensors.size() == kTensors);
  check_same(walked, prebuilt);
  CHECK(prebuilt.named_in_place == kTensors);
}

TEST_CASE("torch: tensors the walk meets out of the pickle's order keep the walk's storage order") {
  // The calls are made under a MARK and dropped (POP_MARK), kept by the memo, then named in the
  // reverse order; every third is never named, and its storage must not be listed.
  PickleWriter p;
  p.mark();
  constexpr int kTensors = 1500;
  for (int i = 0; i < kTensors; ++i) {
    tensor(p, i);
    put(p, static_cast<std::uint32_t>(i));
  }
  p.op('1').empty_dict();  // POP_MARK
  for (int i = kTensors - 1; i >= 0; --i) {
    if (i % 3 == 0) continue;
    p.str("r" + std::to_string(i));
    get(p, static_cast<std::uint32_t>(i));
    p.setitem();
  }
  const std::string pickle = p.stop().bytes();
  const Outcome walked = build(pickle, kTensors, false);
  const Outcome prebuilt = build(pickle, kTensors, true);
  REQUIRE_FALSE(walked.error);
  CHECK(walked.tensors.size() == kTensors - kTensors / 3);
  CHECK(walked.storage_keys.front() == std::to_string(kTensors - 1));
  check_same(walked, prebuilt);
  CHECK(prebuilt.rebuilt == kTensors);
}

TEST_CASE("torch: a call the worker cannot rebuild fails as the walk fails it") {
  const auto pickle_with = [](const std::function<void(PickleWriter&)>& bad) {
    PickleWriter p;
    p.empty_dict();
    for (int i = 0; i < 1200; ++i) {
      // Not "t" + std::to_string(i): GCC 12 at -O3 warns of an overlapping memcpy (-Wrestrict)
      // inlined from that operator+ here.
      std::string name = "t";
      name += std::to_string(i);
      p.str(name);
      if (i == 700) {
        bad(p);
      } else {
        tensor(p, i % 100);
      }
      p.setitem();
    }
    return p.stop().bytes();
  };
  struct Case {
    const char* what;
    std::string pickle;
    int records;
  };
  const std::vector<Case> cases{
      {"past its storage", pickle_with([](PickleWriter& p) { tensor(p, 5, 7); }), 100},
      {"no record",
       pickle_with([](PickleWriter& p) { p.tensor_v2("FloatStorage", "100", 8, 0, {2}, {1}); }),
       100},
      {"negative size",
       pickle_with([](PickleWriter& p) { p.tensor_v2("FloatStorage", "5", 8, 0, {-2}, {1}); }),
       100},
      // Key 100 is met first here: keys met before are cached, whatever type names them again.
      {"unknown storage type",
       pickle_with([](PickleWriter& p) { p.tensor_v2("LemonStorage", "100", 8, 0, {2}, {1}); }),
       101},
  };
  for (const auto& [what, pickle, records] : cases) {
    CAPTURE(what);
    const Outcome walked = build(pickle, records, false);
    const Outcome prebuilt = build(pickle, records, true);
    REQUIRE(walked.error);
    check_same(walked, prebuilt);
    CHECK(prebuilt.handed_over == 1200);
    CHECK(prebuilt.rebuilt < prebuilt.handed_over);
  }
}

TEST_CASE("torch: a size given as a list the pickle appends to later is left to the walk") {
  // The worker must not read a list the machine may still change (under ThreadSanitizer, a data
  // race): the call is the walk's, which sees the list as the pickle finally made it.
  PickleWriter p;
  p.empty_dict();
  for (int i = 0; i < 1100; ++i) {
    p.str("t" + std::to_string(i));
    if (i == 600) {
      p.global("torch._utils", "_rebuild_tensor_v2").mark();
      p.storage("FloatStorage", "0", "cpu", 8).integer(0);
      p.empty_list();
      put(p, 60000);  // the size: [] now, [4] once appended to below
      p.ints({1}).boolean(false);
      p.global("collections", "OrderedDict").empty_tuple().reduce().tuple().reduce();
    } else {
      tensor(p, i % 8);
    }
    p.setitem();
  }
  get(p, 60000);
  p.integer(4).append().op('0');  // APPEND 4 to the size list, POP it
  const std::string pickle = p.stop().bytes();
  const Outcome walked = build(pickle, 8, false);
  const Outcome prebuilt = build(pickle, 8, true);
  REQUIRE_FALSE(walked.error);
  CHECK(walked.tensors[600].sizes == std::vector<std::int64_t>{4});
  check_same(walked, prebuilt);
  CHECK(prebuilt.handed_over == 1100);
  CHECK(prebuilt.rebuilt == 1099);
}

TEST_CASE("torch: persistent ids that give one key two types, sizes or places are refused") {
  // The first id resolved would win, and the worker resolves in the pickle's order (here A, made
  // first and kept by the memo) where the walk meets B first: refused with and without it.
  struct Case {
    const char* what;
    std::function<void(PickleWriter&)> second;
  };
  const std::vector<Case> cases{
      {"type", [](PickleWriter& p) { p.tensor_v2("FloatStorage", "0", 4, 0, {4}, {1}); }},
      {"size", [](PickleWriter& p) { p.tensor_v2("HalfStorage", "0", 8, 0, {4}, {1}); }},
      {"place", [](PickleWriter& p) { p.tensor_v2("HalfStorage", "0", 4, 0, {4}, {1}, "cuda:0"); }},
  };
  for (const auto& [what, second] : cases) {
    CAPTURE(what);
    PickleWriter p;
    p.tensor_v2("HalfStorage", "0", 4, 0, {4}, {1}).put(0).op('0');  // A, then POP
    p.empty_dict().str("a");
    second(p);
    p.setitem().str("b").get(0).setitem();
    const std::string pickle = p.stop().bytes();
    for (const bool prebuild : {false, true}) {
      CAPTURE(prebuild);
      const Outcome outcome = build(pickle, 1, prebuild);
      CHECK(outcome.error == Errc::kTorchStorageConflict);
      CHECK(outcome.message.find("storage '0'") != std::string::npos);
    }
  }
}

TEST_CASE("torch: calls the walk never reaches cost the worker no more than the pickle's size") {
  // Six bytes a call (BINGET, BINGET, REDUCE, POP) of a memoized call with 64 dimensions: kept,
  // each would cost the worker more than a kilobyte, 200 times what the pickle paid for it.
  PickleWriter p;
  p.global("torch._utils", "_rebuild_tensor_v2").put(0).op('0');
  p.mark().storage("FloatStorage", "0", "cpu", 8).integer(0);
  for (int i = 0; i < 2; ++i) {
    p.mark();
    for (int d = 0; d < 64; ++d)
      p.integer(0);
    p.tuple();
  }
  p.boolean(false).global("collections", "OrderedDict").empty_tuple().reduce();
  p.tuple().put(1).op('0');
  constexpr int kCalls = 20000;
  for (int i = 0; i < kCalls; ++i)
    p.get(0).get(1).reduce().op('0');
  const std::string pickle = p.empty_dict().stop().bytes();
  const Outcome walked = build(pickle, 1, false);
  const Outcome prebuilt = build(pickle, 1, true);
  REQUIRE_FALSE(walked.error);
  check_same(walked, prebuilt);
  CHECK(walked.tensors.empty());
  CHECK(prebuilt.handed_over == kCalls);
  CHECK(prebuilt.rebuilt > 0);
  CHECK(prebuilt.rebuilt * 128 * sizeof(std::int64_t) <= 4 * pickle.size());
}

TEST_CASE("torch: a pickle that fails after handing calls over stops the worker first") {
  // No STOP, then a bad opcode: the machine throws just after handing over a full batch (4096
  // calls are 8 of the worker's batches), while the worker is still rebuilding calls whose
  // values the failed run releases: under ASan, a use after free unless it is stopped first.
  for (const std::string ending : {"", "\xff"}) {
    PickleWriter p;
    p.empty_list().mark();
    for (int i = 0; i < 4096; ++i)
      tensor(p, i % 50);
    p.raw(ending);
    const Outcome walked = build(p.bytes(), 50, false);
    const Outcome prebuilt = build(p.bytes(), 50, true);
    REQUIRE(walked.error);
    check_same(walked, prebuilt);
    CHECK(prebuilt.handed_over == 4096);
  }
}

TEST_CASE("torch: open() of a large pickle lists the same with one parse thread and with two") {
  // 3000 tensors (a pickle past the size from which open() starts the worker), views of 1000
  // storages met out of their keys' order, then a 300 KB string: parse_threads 1 rebuilds every
  // tensor after the pickle, 2 while it runs.
  PickleWriter p;
  p.empty_dict();
  for (int i = 0; i < 3000; ++i) {
    p.str("t" + std::to_string(i));
    tensor(p, (i * 7) % 1000, i % 4);
    p.setitem();
  }
  p.str("padding").str(std::string(300'000, 'x')).setitem();
  std::vector<zip_build::Record> records;
  for (int key = 0; key < 1001; ++key)  // "1000" is a record no tensor uses
    records.push_back({.name = "ck/data/" + std::to_string(key), .data = float_record(8)});
  const auto file = pthload::test::checkpoint_file(p.stop().bytes(), records);
  const auto one = pthload::open(file.path(), {.parse_threads = 1});
  const auto two = pthload::open(file.path(), {.parse_threads = 2});
  REQUIRE(one.tensors().size() == 3000);
  check_same_listing(one, two);
  REQUIRE(two.unused_storages().size() == 1);
  CHECK(one.unused_storages().front().key == two.unused_storages().front().key);
}

TEST_CASE("torch: an open() of 24 000 records lists the same with one parse thread and two") {
  // With two, a worker rebuilds the tensors while the pickle runs, into a list large enough to
  // be a mapping of its own; with one, the walk rebuilds them.
  constexpr int kRecords = 24'000;
  PickleWriter p;
  p.empty_dict();
  for (int i = 0; i < kRecords; ++i) {
    p.str("t" + std::to_string(i));
    p.tensor_v2("FloatStorage", std::to_string(i), 3 + i % 3, i % 2, {1 + i % 2}, {1});
    p.setitem();
  }
  std::vector<zip_build::Record> records;
  for (int key = 0; key < kRecords; ++key)
    records.push_back(
        {.name = "ck/data/" + std::to_string(key), .data = float_record(3 + key % 3)});
  const auto file = pthload::test::checkpoint_file(p.stop().bytes(), records);
  for (const auto io : {pthload::IoStrategy::kMap, pthload::IoStrategy::kRead}) {
    CAPTURE(io == pthload::IoStrategy::kMap);
    const auto one = pthload::open(file.path(), {.io = io, .parse_threads = 1});
    const auto two = pthload::open(file.path(), {.io = io, .parse_threads = 2});
    REQUIRE(one.tensors().size() == kRecords);
    check_same_listing(one, two);
    const auto& last = two.tensors().back();
    CHECK(last.name == "t" + std::to_string(kRecords - 1));
    CHECK(last.tensor.storage().nbytes() == 4 * (3 + (kRecords - 1) % 3));
  }
}
