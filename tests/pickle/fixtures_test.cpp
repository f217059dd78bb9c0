// CPython-written vectors (tests/fixtures/make_pickle_vectors.py) and their expected trees;
// the pickle inside a torch.save file; a legacy torch.save stream of stacked pickles.
#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include "pickle/codecs.hpp"
#include "pickle/opcodes.hpp"
#include "pickle_test_support.hpp"

using namespace std::literals;
using pthload::Errc;
using pthload::pickle::Kind;
using pthload::pickle::Opcode;
using pthload::pickle::Value;
using pthload::pickle::test::fixture;
using pthload::pickle::test::run;

namespace {

void check_printed(std::initializer_list<const char*> names, std::string_view expected) {
  for (const char* name : names) {
    CAPTURE(name);
    const std::string pickle = fixture(name);
    const auto result = run(pickle);
    CHECK(result.end_offset == pickle.size());
    CHECK(print(*result.root) == expected);
  }
}

}  // namespace

TEST_SUITE("fixtures") {
  // The same values pickled at each protocol print alike except for what the protocol changes:
  // how bytes are written (protocol 2 as _codecs.encode, 3 as BINBYTES, 5 as BYTEARRAY8) and how
  // sets are (a REDUCE of set/frozenset before protocol 4, EMPTY_SET/FROZENSET from it).
  constexpr std::string_view kScalarsShared = R"__(  None,
  True,
  False,
  0,
  1,
  255,
  256,
  65535,
  65536,
  -1,
  2147483647,
  -2147483648,
  2147483648,
  9223372036854775808,
  -9223372036854775809,
  1180591620717411303424,
  -1180591620717411303424,
  1.5,
  -0.0,
  1e+300,
  'ascii',
  'é😀',
  "a\nb\\c'",
  '\ud800',
)__";

  struct ProtocolCase {
    std::initializer_list<const char*> files;
    std::string_view differing;  ///< the lines this group of protocols prints its own way
  };

  TEST_CASE("pickle: scalars at every protocol") {
    const ProtocolCase cases[] = {
        {{"scalars_p0.pkl", "scalars_p1.pkl", "scalars_p2.pkl"},
         "  _codecs.encode('\\x00ÿab', 'latin1'),\n"
         "  __builtin__.bytes(),\n"
         "  __builtin__.bytearray(_codecs.encode('xy', 'latin1')),\n"},
        {{"scalars_p3.pkl", "scalars_p4.pkl"},
         "  b'\\x00\\xffab',\n  b'',\n  builtins.bytearray(b'xy'),\n"},
        {{"scalars_p5.pkl"}, "  b'\\x00\\xffab',\n  b'',\n  bytearray(b'xy'),\n"},
    };
    for (const auto& c : cases)
      check_printed(c.files, "[\n" + std::string(kScalarsShared) + std::string(c.differing) + "]");
  }

  TEST_CASE("pickle: containers at every protocol") {
    const ProtocolCase cases[] = {
        {{"containers_p0.pkl", "containers_p1.pkl", "containers_p2.pkl"},
         "  'set': __builtin__.set([1, 2]),\n  'fset': __builtin__.frozenset([3]),\n"},
        {{"containers_p3.pkl"},
         "  'set': builtins.set([1, 2]),\n  'fset': builtins.frozenset([3]),\n"},
        {{"containers_p4.pkl", "containers_p5.pkl"},
         "  'set': {1, 2},\n  'fset': frozenset({3}),\n"},
    };
    for (const auto& c : cases) {
      check_printed(c.files,
                    "{\n"
                    "  't0': (),\n"
                    "  't1': (1,),\n"
                    "  't2': (1, 2),\n"
                    "  't3': (1, 2, 3),\n"
                    "  't4': (1, 2, 3, 4),\n"
                    "  'list': [1, [2]],\n" +
                        std::string(c.differing) +
                        "  'nested': {'a': {'b': 1}},\n"
                        "  'shared': [#1=[0], <ref #1>],\n"
                        "  'cycle': #2=[<cycle #2>],\n"
                        "}");
    }
  }

  TEST_CASE("pickle: objects at protocols 0, 1") {
    check_printed({"objects_p0.pkl", "objects_p1.pkl"}, R"__([
  collections.OrderedDict() items={'a': 1, 'b': 2},
  copy_reg._reconstructor(
    __main__.Point,
    __builtin__.object,
    None,
  ) state={'x': 1, 'y': 2},
  copy_reg._reconstructor(__main__.MyList, __builtin__.list, [1, 2]),
  copy_reg._reconstructor(__main__.MyDict, __builtin__.dict, {'k': 1}),
  #1=([<cycle #1>],),
])__");
  }

  TEST_CASE("pickle: objects at protocols 2, 3, 4, 5") {
    check_printed({"objects_p2.pkl", "objects_p3.pkl", "objects_p4.pkl", "objects_p5.pkl"}, R"__([
  collections.OrderedDict() items={'a': 1, 'b': 2},
  __main__.Point() state={'x': 1, 'y': 2},
  __main__.MyList() items=[1, 2],
  __main__.MyDict() items={'k': 1},
  #1=([<cycle #1>],),
  __main__.Slotted() state=(None, {'s': 5}),
])__");
  }
  TEST_CASE("pickle: NEWOBJ_EX at protocol 4, functools.partial at protocol 2") {
    check_printed({"keyed_p4.pkl"}, "__main__.Keyed(1, **{'b': 2})");
    check_printed({"keyed_p2.pkl"},
                  "functools.partial(\n"
                  "  #1=__builtin__.getattr(__main__.Keyed, '__new__'),\n"
                  ") state=(\n"
                  "  <ref #1>,\n"
                  "  (__main__.Keyed, 1),\n"
                  "  {'b': 2},\n"
                  "  None,\n"
                  ")()");
  }

  TEST_CASE("pickle: memo beyond 256 entries (LONG_BINPUT/LONG_BINGET, PUT/GET) shares nodes") {
    for (const char* name : {"memo_p0.pkl", "memo_p2.pkl"}) {
      CAPTURE(name);
      const std::string pickle = fixture(name);
      const auto r = run(pickle);
      const auto items = r.root->items();
      REQUIRE(items.size() == 3);
      REQUIRE(items[0]->items().size() == 300);
      CHECK(items[1] == items[0]->items()[299]);
      CHECK(items[2] == items[0]->items()[0]);
      CHECK(items[1]->as_string() == "s299");
    }
  }

  TEST_CASE("pickle: LONG4 big ints and BINBYTES") {
    const std::string long4 = fixture("long4_p2.pkl");
    const auto r = run(long4);
    REQUIRE(r.root->items().size() == 2);
    const Value& big = *r.root->items()[0];
    CHECK(big.is(Kind::kBigInt));
    CHECK(big.as_bytes().size() == 263);  // 2**2100: 2101 bits and a sign bit
    CHECK(print(big).starts_with("1455428565004863093618902384493"));
    CHECK(print(*r.root->items()[1]).starts_with("-1455428565004863093618902384493"));
    const std::string binbytes = fixture("binbytes_p3.pkl");
    const auto b = run(binbytes);
    REQUIRE(b.root->is(Kind::kBytes));
    CHECK(b.root->as_bytes().size() == 257);
    CHECK(std::to_integer<int>(b.root->as_bytes()[255]) == 255);
  }

  TEST_CASE("pickle: persistent ids at protocols 0 (PERSID) and 2 (BINPERSID)") {
    check_printed({"persid_p0.pkl", "persid_p2.pkl"},
                  "{'p': persistent('point-7'), 'q': [persistent('point-9')]}");
  }

  TEST_CASE("pickle: EXT and out-of-band buffers written by CPython are unsupported") {
    const std::string ext = fixture("ext_p2.pkl");
    CHECK_THROWS_AS((void)run(ext), pthload::UnsupportedError);
    const std::string buffers = fixture("out_of_band_p5.pkl");
    const auto error = pthload::pickle::test::run_error(buffers);
    REQUIRE(error);
    CHECK(error->code() == Errc::kPickleUnsupportedOpcode);
    CHECK(error->context().opcode == static_cast<std::uint8_t>(Opcode::kNextBuffer));
  }

  namespace {

  const Value* entry(const Value& dict, std::string_view key) {
    for (const auto& item : dict.dict_items()) {
      if (item.key->is(Kind::kString) && item.key->as_string() == key) return item.value;
    }
    return nullptr;
  }

  }  // namespace

  TEST_CASE("pickle: the data.pkl of a torch.save checkpoint (torch 1.13)") {
    const std::string pickle = fixture("torch_checkpoint_p2.pkl");
    const auto r = run(pickle);
    CHECK(r.protocol == 2);
    const Value& root = *r.root;
    REQUIRE(root.is(Kind::kDict));

    const Value* model = entry(root, "model");
    REQUIRE(model != nullptr);
    REQUIRE(model->is(Kind::kCall));
    CHECK(model->callable().is_global("collections", "OrderedDict"));
    CHECK(model->call_opcode() == static_cast<std::uint8_t>(Opcode::kReduce));
    REQUIRE(model->dict_items().size() == 4);
    CHECK(model->dict_items()[0].key->as_string() == "0.weight");
    REQUIRE(model->state() != nullptr);
    const Value* metadata = entry(*model->state(), "_metadata");
    REQUIRE(metadata != nullptr);
    CHECK(metadata->callable().is_global("collections", "OrderedDict"));
    CHECK(metadata->dict_items().size() == 4);

    const Value& weight = *model->dict_items()[0].value;
    CHECK(weight.callable().is_global("torch._utils", "_rebuild_tensor_v2"));
    const auto args = weight.args().items();
    REQUIRE(args.size() == 6);
    REQUIRE(args[0]->is(Kind::kPersistent));
    const auto id = args[0]->persistent_id().items();
    REQUIRE(id.size() == 5);
    CHECK(id[0]->as_string() == "storage");
    CHECK(id[1]->is_global("torch", "FloatStorage"));
    CHECK(id[2]->as_string() == "0");
    CHECK(id[3]->as_string() == "cpu");
    CHECK(id[4]->as_int() == 6);
    CHECK(print(*args[2]) == "(2, 3)");
    CHECK(args[5]->callable().is_global("collections", "OrderedDict"));

    CHECK(pthload::pickle::bytes_of(*entry(root, "bytes")) == "ab");
    CHECK(entry(root, "big")->is(Kind::kBigInt));
    CHECK(print(*entry(root, "big")) == "1180591620717411303424");
    CHECK(print(*entry(root, "device")) == "torch.device('cuda', 1)");
    CHECK(entry(root, "dtype")->is_global("torch", "float16"));
    CHECK(print(*entry(root, "size")) == "torch.Size((2, 3))");
    CHECK(entry(root, "view")->args().items()[1]->as_int() == 2);
    const Value* optimizer = entry(root, "optimizer");
    REQUIRE(optimizer != nullptr);
    CHECK(entry(*optimizer, "state")->dict_items().size() == 4);
    CHECK(entry(*optimizer, "param_groups")->items().size() == 1);
  }

  TEST_CASE("pickle: every BINPERSID id of the checkpoint goes through the callback") {
    const std::string pickle = fixture("torch_checkpoint_p2.pkl");
    std::vector<std::string> keys;
    pthload::pickle::RunOptions options;
    options.persistent_load = [&](const Value& id,
                                  pthload::pickle::ValueArena& arena) -> const Value* {
      REQUIRE(id.is(Kind::kTuple));
      REQUIRE(id.items().size() == 5);
      keys.emplace_back(id.items()[2]->as_string());
      return arena.make_string("storage " + keys.back());
    };
    const auto r = run(pickle, options);
    REQUIRE(keys.size() == 17);
    for (std::size_t i = 0; i < keys.size(); ++i)
      CHECK(keys[i] == std::to_string(i));
    const Value* weight = entry(*r.root, "model")->dict_items()[0].value;
    CHECK(weight->args().items()[0]->as_string() == "storage 0");
  }

  TEST_CASE("pickle: a legacy torch.save stream is stacked pickles, read one after another") {
    const std::string stream = fixture("torch_legacy_stream.bin");
    pthload::pickle::Machine machine;
    pthload::pickle::RunOptions options;
    options.allow_trailing_bytes = true;
    std::size_t offset = 0;
    std::vector<std::string> texts;
    for (int i = 0; i < 5; ++i) {
      options.base_offset = offset;
      const auto r = machine.run(
          pthload::pickle::test::bytes(std::string_view(stream).substr(offset)), options);
      texts.push_back(print(*r.root));
      offset += r.end_offset;
    }
    CHECK(texts[0] == "119547037146038801333356");  // torch's MAGIC_NUMBER
    CHECK(texts[1] == "1001");
    CHECK(texts[2].find("'little_endian': True") != std::string::npos);
    CHECK(texts[3].find("persistent(('storage', torch.FloatStorage, '") != std::string::npos);
    CHECK(texts[4].starts_with("['"));
    CHECK(offset < stream.size());  // raw storage bytes follow
  }

}  // TEST_SUITE
