// The machine on hand-assembled pickles: what each opcode makes (Lib/pickletools.py).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <string_view>

#include "pickle/opcodes.hpp"
#include "pickle_test_support.hpp"

using namespace std::literals;
using pthload::pickle::Kind;
using pthload::pickle::Opcode;
using pthload::pickle::Result;
using pthload::pickle::RunOptions;
using pthload::pickle::Value;
using pthload::pickle::ValueArena;
using pthload::pickle::test::printed;
using pthload::pickle::test::run;

namespace {
const Value& root(const Result& result) {
  return *result.root;
}
}  // namespace

TEST_CASE("pickle: protocol 2 scalars") {
  CHECK(printed("\x80\x02]q\x00(N\x88\x89K\x05M\x00\x01J\xff\xff\xff\xff"
                "e."sv) == "[None, True, False, 5, 256, -1]");
  CHECK(run("\x80\x02N."sv).protocol == 2);
}

TEST_CASE("pickle: INT reads 00 and 01 as booleans, other decimals as ints") {
  const auto r = run("(I01\nI00\nI-12\nI0\nI9223372036854775808\nl."sv);
  CHECK(print(root(r)) == "[True, False, -12, 0, 9223372036854775808]");
  CHECK(root(r).items()[0]->is(Kind::kBool));
  CHECK(root(r).items()[4]->is(Kind::kBigInt));
}

TEST_CASE("pickle: LONG, LONG1 and LONG4 give int64 when it fits, else a big int") {
  CHECK(printed("L123L\n."sv) == "123");
  CHECK(printed("L-99999999999999999999\n."sv) == "-99999999999999999999");
  CHECK(printed("\x8a\x00."sv) == "0");
  CHECK(printed("\x8a\x01\xff."sv) == "-1");
  CHECK(printed("\x8a\x02\xff\x00."sv) == "255");
  // Sign-extension bytes beyond eight still make an int64.
  const auto minus_one = run("\x8a\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff."sv);
  CHECK(root(minus_one).is(Kind::kInt));
  CHECK(root(minus_one).as_int() == -1);
  const auto two_64 = run("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01."sv);
  CHECK(root(two_64).is(Kind::kBigInt));
  CHECK(root(two_64).as_bytes().size() == 9);
  CHECK(print(root(two_64)) == "18446744073709551616");
  CHECK(printed("\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80."sv) == "-9223372036854775808");
  CHECK(printed("\x8b\x02\x00\x00\x00\xff\x7f."sv) == "32767");
}

TEST_CASE("pickle: FLOAT text and big-endian BINFLOAT") {
  CHECK(printed("F1.5\n."sv) == "1.5");
  CHECK(printed("F-inf\n."sv) == "-inf");
  CHECK(printed("Fnan\n."sv) == "nan");
  CHECK(printed("F1e-400\n."sv) == "0.0");
  CHECK(printed("F100\n."sv) == "100.0");
  const auto r = run("G\x3f\xf8\x00\x00\x00\x00\x00\x00."sv);
  CHECK(root(r).as_float() == 1.5);
}

TEST_CASE("pickle: STRING, BINSTRING and SHORT_BINSTRING make Python 2 strings") {
  const auto r = run("S'a\\nb\\x41\\101'\n."sv);
  CHECK(root(r).is(Kind::kPython2String));
  CHECK(root(r).as_string() == "a\nbAA");
  CHECK(printed("S\"it's\"\n."sv) == "\"it's\"");
  CHECK(printed("T\x03\x00\x00\x00"
                "abc."sv) == "'abc'");
  CHECK(printed("U\x02hi."sv) == "'hi'");
  CHECK(printed("U\x01\xff."sv) == "b'\\xff'");
}

TEST_CASE("pickle: UNICODE decodes raw-unicode-escape") {
  CHECK(printed("V\\u00e9\\U0001f600\n."sv) == "'\xc3\xa9\xf0\x9f\x98\x80'");
  CHECK(printed("V\xe9\n."sv) == "'\xc3\xa9'");
  CHECK(printed("V\\\\u0041\n."sv) == "'\\\\\\\\u0041'");
  const auto r = run("V\\ud800\n."sv);
  CHECK(root(r).has_surrogates());
  CHECK(print(root(r)) == "'\\ud800'");
}

TEST_CASE("pickle: binary strings, bytes and bytearrays of every width") {
  CHECK(printed("X\x02\x00\x00\x00hi."sv) == "'hi'");
  CHECK(printed("\x8c\x02hi."sv) == "'hi'");
  CHECK(printed("\x8d\x02\x00\x00\x00\x00\x00\x00\x00hi."sv) == "'hi'");
  CHECK(printed("B\x01\x00\x00\x00z."sv) == "b'z'");
  CHECK(printed("C\x01z."sv) == "b'z'");
  CHECK(printed("\x8e\x01\x00\x00\x00\x00\x00\x00\x00z."sv) == "b'z'");
  CHECK(printed("\x96\x01\x00\x00\x00\x00\x00\x00\x00z."sv) == "bytearray(b'z')");
  // CPython writes lone surrogates with 'surrogatepass' and reads them back.
  const auto r = run("X\x03\x00\x00\x00\xed\xa0\x80."sv);
  CHECK(root(r).has_surrogates());
  CHECK_FALSE(run("X\x02\x00\x00\x00\xc3\xa9."sv).root->has_surrogates());
}

TEST_CASE("pickle: strings and bytes are views into the input") {
  const std::string_view pickle = "X\x02\x00\x00\x00hi."sv;
  const auto r = run(pickle);
  CHECK(root(r).as_string().data() == pickle.data() + 5);
}

TEST_CASE("pickle: MARK, POP, POP_MARK and DUP") {
  CHECK(printed("NK\x01"
                "0."sv) == "None");
  CHECK(printed("N(K\x01K\x02"
                "1."sv) == "None");
  CHECK(printed("N(0."sv) == "None");  // POP takes an empty MARK, as _pickle.c does
  CHECK(printed("]2a."sv) == "#1=[<cycle #1>]");
  CHECK(printed("(K\x01K\x02t."sv) == "(1, 2)");
  CHECK(printed("(t."sv) == "()");
}

TEST_CASE("pickle: tuples of every opcode; the empty tuple is one shared value") {
  CHECK(printed("K\x01\x85."sv) == "(1,)");
  CHECK(printed("K\x01K\x02\x86."sv) == "(1, 2)");
  CHECK(printed("K\x01K\x02K\x03\x87."sv) == "(1, 2, 3)");
  const auto r = run("))\x86."sv);
  CHECK(root(r).items()[0] == root(r).items()[1]);
  CHECK(root(r).depth() == 2);
  // A tuple is unhashable when any element is, wherever it sits; its depth is the deepest
  // element's plus one; an element's other flags (surrogates) are not the tuple's.
  const auto last = run("K\x01K\x02]\x87."sv);
  CHECK_FALSE(root(last).is_hashable());
  CHECK(root(last).depth() == 2);
  const auto middle = run("(K\x01}K\x02K\x03t."sv);
  CHECK_FALSE(root(middle).is_hashable());
  CHECK(root(middle).items().size() == 4);
  CHECK(root(middle).items()[3]->as_int() == 3);
  const auto deep = run("(K\x01K\x01\x85\x85K\x02t."sv);
  CHECK(root(deep).depth() == 3);
  CHECK(root(deep).is_hashable());
  const auto surrogate = run("\x8c\x03\xed\xa0\x80K\x01\x86."sv);
  CHECK(root(surrogate).items()[0]->has_surrogates());
  CHECK_FALSE(root(surrogate).has_surrogates());
  CHECK(root(surrogate).is_hashable());
}

TEST_CASE("pickle: tuples of any size among other values keep their elements") {
  // Small and large tuples of shared ints that say their size, among strings the arena copies (the
  // escape makes STRING decode): values are cut from chunks of the arena, a tuple larger than
  // half a chunk gets memory of its own, and the copies come from the arena between chunks.
  const int sizes[] = {5000, 1,   3,   60,   61,   62,   63,   64, 65,
                       127,  128, 500, 1000, 2046, 4095, 4096, 2};
  std::string pickle = "(";
  for (const int size : sizes) {
    pickle += "(";
    for (int i = 0; i < size; ++i) {
      pickle += 'K';
      pickle += static_cast<char>(size & 0xff);
    }
    pickle += "tS'" + std::string(100, 'x') + "\\n'\n";
  }
  pickle += "l.";
  const auto r = run(pickle);
  const auto items = root(r).items();
  REQUIRE(items.size() == 2 * std::size(sizes));
  for (std::size_t t = 0; t < std::size(sizes); ++t) {
    const Value& tuple = *items[2 * t];
    CAPTURE(sizes[t]);
    REQUIRE(tuple.items().size() == static_cast<std::size_t>(sizes[t]));
    for (const Value* element : tuple.items())
      CHECK(element->as_int() == (sizes[t] & 0xff));
    CHECK(items[2 * t + 1]->as_string() == std::string(100, 'x') + "\n");
  }
}

TEST_CASE("pickle: lists, dicts, sets and frozensets") {
  CHECK(printed("(K\x01K\x02l."sv) == "[1, 2]");
  CHECK(printed("(K\x01K\x02"
                "d."sv) == "{1: 2}");
  CHECK(printed("(K\x01\x91."sv) == "frozenset({1})");
  CHECK(printed("(\x91."sv) == "frozenset()");
  CHECK(printed("\x8f(K\x01K\x02\x90."sv) == "{1, 2}");
  CHECK(printed("\x8f."sv) == "set()");
  CHECK(printed("}K\x01K\x02s."sv) == "{1: 2}");
  CHECK(printed("}(K\x01K\x02K\x03K\x04u."sv) == "{1: 2, 3: 4}");
  CHECK(printed("]K\x01"
                "a."sv) == "[1]");
  CHECK(printed("](K\x01K\x02"
                "e."sv) == "[1, 2]");
  // A repeated key is kept; Python would keep the last value.
  CHECK(run("}(K\x01K\x02K\x01K\x03u."sv).root->dict_items().size() == 2);
  // A tuple holding only hashable values is a valid key.
  CHECK(printed("}(K\x01\x85K\x02u."sv) == "{(1,): 2}");
  // SETITEMS into a dict that has entries already, SETITEM after SETITEMS, in batches.
  std::string batches = "}K\x00K\x00s"s;
  for (int batch = 0; batch < 3; ++batch) {
    batches += '(';
    for (int i = 1; i <= 5; ++i) {
      batches += 'K';
      batches += static_cast<char>(batch * 5 + i);
      batches += "K\x07";
    }
    batches += 'u';
  }
  batches += "K\x63K\x08s.";
  const auto dict = run(batches);
  REQUIRE(root(dict).dict_items().size() == 17);
  for (int i = 0; i < 16; ++i) {
    CHECK(root(dict).dict_items()[i].key->as_int() == i);
    CHECK(root(dict).dict_items()[i].value->as_int() == (i == 0 ? 0 : 7));
  }
  CHECK(root(dict).dict_items()[16].key->as_int() == 99);
}

TEST_CASE("pickle: GLOBAL and STACK_GLOBAL name things without importing them") {
  const auto r = run("cos\nsystem\n."sv);
  CHECK(root(r).is(Kind::kGlobal));
  CHECK(root(r).is_global("os", "system"));
  CHECK(printed("\x8c\x02os\x8c\x06system\x93."sv) == "os.system");
  CHECK(run("c__builtin__\nset\n."sv).root->module() == "__builtin__");  // no py2 mapping
}

TEST_CASE("pickle: REDUCE, NEWOBJ, NEWOBJ_EX, INST and OBJ make calls") {
  const auto reduce = run("cos\nsystem\n(S'rm -rf /'\ntR."sv);
  CHECK(root(reduce).is(Kind::kCall));
  CHECK(root(reduce).call_opcode() == static_cast<std::uint8_t>(Opcode::kReduce));
  CHECK(root(reduce).callable().is_global("os", "system"));
  CHECK(root(reduce).args().items().size() == 1);
  CHECK(print(root(reduce)) == "os.system('rm -rf /')");

  const auto newobj =
      run("cargparse\nNamespace\n)\x81}(U\x02lrG\x3f\xe0\x00\x00\x00\x00\x00\x00ub."sv);
  CHECK(root(newobj).call_opcode() == static_cast<std::uint8_t>(Opcode::kNewObj));
  CHECK(print(root(newobj)) == "argparse.Namespace() state={'lr': 0.5}");
  REQUIRE(root(newobj).state() != nullptr);
  CHECK(root(newobj).state()->is(Kind::kDict));

  const auto newobj_ex =
      run("c__main__\nK\n(K\x01t}(U\x01"
          "bK\x02u\x92."sv);
  CHECK(root(newobj_ex).call_opcode() == static_cast<std::uint8_t>(Opcode::kNewObjEx));
  REQUIRE(root(newobj_ex).kwargs() != nullptr);
  CHECK(print(root(newobj_ex)) == "__main__.K(1, **{'b': 2})");

  const auto inst = run("(K\x01K\x02icollections\nOrderedDict\n."sv);
  CHECK(root(inst).call_opcode() == static_cast<std::uint8_t>(Opcode::kInst));
  CHECK(print(root(inst)) == "collections.OrderedDict(1, 2)");

  const auto obj = run("(c__main__\nP\nK\x01o."sv);
  CHECK(root(obj).call_opcode() == static_cast<std::uint8_t>(Opcode::kObj));
  CHECK(print(root(obj)) == "__main__.P(1)");
  CHECK(printed("(c__main__\nP\no."sv) == "__main__.P()");
}

TEST_CASE("pickle: an OrderedDict call takes SETITEMS and BUILD, as in every state_dict") {
  const auto r = run(
      "ccollections\nOrderedDict\nq\x00)Rq\x01(X\x01\x00\x00\x00wK\x01X\x01\x00\x00\x00"
      "bK\x02u}"
      "X\x09\x00\x00\x00_metadatah\x00)R(X\x00\x00\x00\x00}X\x07\x00\x00\x00versionK\x01susb."sv);
  const Value& od = root(r);
  REQUIRE(od.is(Kind::kCall));
  CHECK(od.callable().is_global("collections", "OrderedDict"));
  REQUIRE(od.dict_items().size() == 2);
  CHECK(od.dict_items()[0].key->as_string() == "w");
  CHECK(od.dict_items()[1].value->as_int() == 2);
  REQUIRE(od.states().size() == 1);
  CHECK(&od.state()->dict_items()[0].value->callable() == &od.callable());  // memo: same node
  CHECK(print(od) ==
        "collections.OrderedDict() items={\n"
        "  'w': 1,\n"
        "  'b': 2,\n"
        "} state={'_metadata': collections.OrderedDict() items={'': {'version': 1}}}");
}

TEST_CASE("pickle: calls take APPENDS and ADDITEMS (list and set subclasses)") {
  CHECK(printed("c__main__\nL\n)\x81(K\x01K\x02"
                "e."sv) == "__main__.L() items=[1, 2]");
  CHECK(printed("c__main__\nL\n)\x81K\x01"
                "a."sv) == "__main__.L() items=[1]");
  CHECK(printed("c__main__\nS\n)\x81(K\x01\x90."sv) == "__main__.S() items={1}");
  // A Call may be any mapping: Python does not necessarily hash its keys.
  CHECK(printed("c__main__\nM\n)\x81]K\x01s."sv) == "__main__.M() items={[]: 1}");
}

TEST_CASE("pickle: BUILD on dicts, lists and sets is recorded; a None state is a no-op") {
  CHECK(printed("}}(U\x01"
                "aK\x01u"
                "b."sv) == "{} state={'a': 1}");
  CHECK(printed("]Nb."sv) == "[] state=None");
  CHECK(printed("\x8f"
                "K\x01"
                "b."sv) == "set() state=1");
  CHECK(printed("K\x01N"
                "b."sv) == "1");
  const auto twice =
      run("}K\x01"
          "bK\x02"
          "b."sv);
  CHECK(root(twice).states().size() == 2);
  CHECK(root(twice).state()->as_int() == 2);
}

TEST_CASE("pickle: PERSID and BINPERSID without a callback wrap the id") {
  const auto r = run("Pabc\n."sv);
  REQUIRE(root(r).is(Kind::kPersistent));
  CHECK(root(r).persistent_id().as_string() == "abc");
  CHECK(printed("(U\x07storageK\x01tQ."sv) == "persistent(('storage', 1))");
}

TEST_CASE("pickle: PERSID and BINPERSID hand the id to the callback and push its value") {
  int calls = 0;
  RunOptions options;
  options.persistent_load = [&](const Value& id, ValueArena& arena) -> const Value* {
    ++calls;
    if (id.is(Kind::kString))
      return arena.make_int(static_cast<std::int64_t>(id.as_string().size()));
    if (id.is(Kind::kTuple))
      return arena.make_string(std::string(id.items()[0]->as_string()) + "!");
    return nullptr;
  };
  CHECK(print(*run("Pabc\n."sv, options).root) == "3");
  CHECK(print(*run("(U\x07storageK\x01tQ."sv, options).root) == "'storage!'");
  CHECK(print(*run("K\x05Q."sv, options).root) == "persistent(5)");
  CHECK(calls == 3);
  // What the callback returns may be extended further, like any value.
  options.persistent_load = [](const Value&, ValueArena& arena) -> const Value* {
    return arena.make_container(Kind::kList);
  };
  CHECK(print(*run("NQK\x01"
                   "a."sv,
                   options)
                   .root) == "[1]");
}

TEST_CASE("pickle: a callback's error gets the opcode's offset") {
  RunOptions options;
  options.persistent_load = [](const Value&, ValueArena&) -> const Value* {
    throw pthload::FormatError(pthload::Errc::kPickleBadArgument, "bad id");
  };
  const auto error = pthload::pickle::test::run_error("NNQ."sv, {}, options);
  REQUIRE(error);
  CHECK(error->context().offset == 2);
  CHECK(error->context().opcode == 'Q');
}

TEST_CASE("pickle: the memo shares nodes: PUT/GET, BINPUT/BINGET, LONG_BINPUT/GET, MEMOIZE") {
  CHECK(printed("K\x07p3\n0g3\n."sv) == "7");
  CHECK(printed("K\x07\x94"
                "0h\x00."sv) == "7");
  CHECK(printed("K\x07r\x05\x00\x00\x00"
                "0j\x05\x00\x00\x00."sv) == "7");
  const auto r = run("(]q\x00h\x00l."sv);
  CHECK(root(r).items()[0] == root(r).items()[1]);
  CHECK(print(root(r)) == "[#1=[], <ref #1>]");
  // MEMOIZE numbers entries by the memo's size, whatever keys PUT used.
  CHECK(printed("K\x01q\x09"
                "0K\x02\x94"
                "0h\x01."sv) == "2");
  // A PUT may overwrite a key.
  CHECK(printed("K\x01q\x00K\x02q\x00"
                "00h\x00."sv) == "2");
}

TEST_CASE("pickle: huge memo keys cost one entry, not the key's value") {
  CHECK(printed("K\x07r\xff\xff\xff\xff"
                "0j\xff\xff\xff\xff."sv) == "7");
  CHECK(printed("K\x07p9223372036854775807\n0g9223372036854775807\n."sv) == "7");
  // A key first kept apart moves into the dense part once that grows past it.
  std::string pickle =
      "K\x00r\x00\x05\x00\x00"
      "0"s;  // key 1280
  for (int i = 0; i < 1100; ++i)
    pickle +=
        "K\x01\x94"
        "0";
  pickle += "j\x00\x05\x00\x00."sv;
  CHECK(printed(pickle) == "0");
}

TEST_CASE("pickle: keys in order after many sparse ones are found, whichever part holds them") {
  // 2000 keys far apart raise the dense part's limit; keys 0, 1, 2... then each land at its end.
  // It grows only by doubling (growing by a few slots, each growth walking every sparse key,
  // took time with the square of the pickle), so some of them are kept apart until it does.
  const auto long_key = [](char opcode, std::uint32_t key) {
    std::string out(1, opcode);
    for (int i = 0; i < 4; ++i)
      out += static_cast<char>((key >> (8 * i)) & 0xff);
    return out;
  };
  std::string pickle = "(K\x07";
  for (std::uint32_t i = 0; i < 2000; ++i)
    pickle += long_key('r', 0xFFFFFFFFu - i);
  for (std::uint32_t key = 0; key < 3000; ++key)
    pickle += long_key('r', key);
  pickle += "0" + long_key('j', 2999) + long_key('j', 1500) + long_key('j', 0) +
            long_key('j', 0xFFFFFFFFu - 1999) + "t.";
  CHECK(printed(pickle) == "(7, 7, 7, 7)");
}

TEST_CASE("pickle: memo keys out of order, overwritten, and in pages not yet written") {
  // Key 1000 first: the dense part grows to it, and keys below it then find their slots.
  CHECK(printed("K\x01r\xe8\x03\x00\x00"
                "0K\x02q\x05"
                "0K\x03q\x05"
                "0h\x05j\xe8\x03\x00\x00\x86."sv) == "(3, 1)");
  // 5000 entries in order fill two pages; a key on the second page that was never written,
  // and one past the dense part, are missing.
  std::string filled = "N";
  for (int i = 0; i < 5000; ++i)
    filled += "\x94";
  filled += "0";
  CHECK(printed(filled + "j\x87\x13\x00\x00\x85."s) == "(None,)");  // key 4999
  const auto unwritten = pthload::pickle::test::run_error(filled + "j\x88\x13\x00\x00."s);
  REQUIRE(unwritten);
  CHECK(unwritten->message().find("memo key 5000 not found in LONG_BINGET") != std::string::npos);
  const auto beyond = pthload::pickle::test::run_error(filled + "j\x00\x00\x01\x00."s);
  REQUIRE(beyond);
  CHECK(beyond->message().find("memo key 65536 not found") != std::string::npos);
}

TEST_CASE("pickle: a MARK keeps its place while the stack grows past it") {
  // 1000 values pushed and popped above a MARK: the stack's storage moved meanwhile, and the
  // MARK's fence must still stop TUPLE1 from reaching the 0 below it.
  const std::string above = std::string(1000, 'N') + std::string(1000, '0');
  const auto error = pthload::pickle::test::run_error("K\x00("s + above + "\x85.");
  REQUIRE(error);
  CHECK(error->code() == pthload::Errc::kPickleStackUnderflow);
  CHECK(error->context().offset == 2003);
  CHECK(printed("K\x00("s + above + "K\x01t\x86.") == "(0, (1,))");
  CHECK(printed("(" + std::string(300, 'N') + "(" + std::string(700, 'N') + "tl.") ==
        printed("(" + std::string(300, 'N') + "(" + std::string(700, 'N') + "tl."));
  const auto r = run("(" + std::string(300, 'N') + "(" + std::string(700, 'N') + "tl.");
  CHECK(root(r).items().size() == 301);
  CHECK(root(r).items()[300]->items().size() == 700);
}

TEST_CASE("pickle: FRAME and PROTO") {
  const auto r = run("\x80\x04\x95\x02\x00\x00\x00\x00\x00\x00\x00N."sv);
  CHECK(r.protocol == 4);
  CHECK(root(r).is(Kind::kNone));
  for (char version = 0; version <= 5; ++version) {
    const std::string pickle = std::string("\x80") + version + "N.";
    CHECK(run(pickle).protocol == version);
  }
}

TEST_CASE("pickle: stacked pickles run one after another with allow_trailing_bytes") {
  const std::string_view stream = "N.K\x01.\x80\x02]."sv;
  RunOptions options;
  options.allow_trailing_bytes = true;
  pthload::pickle::Machine machine;
  std::size_t offset = 0;
  std::string seen;
  while (offset < stream.size()) {
    options.base_offset = offset;
    const auto r = machine.run(pthload::pickle::test::bytes(stream.substr(offset)), options);
    seen += print(*r.root) + ";";
    offset += r.end_offset;
  }
  CHECK(seen == "None;1;[];");
}

TEST_CASE("pickle: a Machine is reusable and its results independent") {
  pthload::pickle::Machine machine;
  const std::string_view a =
      "]K\x01"
      "a."sv;
  const std::string_view b = "}K\x01K\x02s."sv;
  const auto first = machine.run(pthload::pickle::test::bytes(a));
  const auto second = machine.run(pthload::pickle::test::bytes(b));
  CHECK(print(*first.root) == "[1]");
  CHECK(print(*second.root) == "{1: 2}");
  auto moved = std::move(const_cast<Result&>(first));
  CHECK(print(*moved.root) == "[1]");
}

TEST_CASE("pickle: depth counts container nesting") {
  const auto r = run("K\x01\x85\x85]\x86."sv);
  CHECK(root(r).depth() == 3);
  CHECK(root(r).items()[0]->depth() == 2);
  CHECK(run("N."sv).root->depth() == 0);
}

TEST_CASE("pickle: opcode names and protocols") {
  CHECK(pthload::pickle::opcode_name('(') == "MARK");
  CHECK(pthload::pickle::opcode_name(0x98) == "READONLY_BUFFER");
  CHECK(pthload::pickle::opcode_name(0xff).empty());
  CHECK(pthload::pickle::opcode_protocol(0x93) == 4);
  CHECK(pthload::pickle::opcode_protocol(0x00) == -1);
  int known = 0;
  for (int i = 0; i < 256; ++i)
    known += pthload::pickle::opcode_name(static_cast<std::uint8_t>(i)).empty() ? 0 : 1;
  CHECK(known == 68);
  CHECK(pthload::pickle::kind_name(Kind::kPython2String) == "python2-string");
}

TEST_CASE("pickle: tuples of one or two small ints are one node each, as small ints are") {
  // [(4,), (4,), (1, 2), (1, 2), (2, 1), (300,), (300,)]: TUPLE1 and TUPLE2 of BININT1 and
  // BININT2. Two equal tuples of small ints are one shared node (a small tensor's size and
  // stride); tuples of larger ints, or of other values, are made each time, like the ints.
  const auto r =
      run("(K\x04\x85K\x04\x85K\x01K\x02\x86K\x01K\x02\x86K\x02K\x01\x86"
          "M\x2c\x01\x85M\x2c\x01\x85l."sv);
  const auto items = root(r).items();
  REQUIRE(items.size() == 7);
  CHECK(print(*items[2]) == "(1, 2)");
  CHECK(print(*items[5]) == "(300,)");
  CHECK(items[0] == items[1]);
  CHECK(items[0]->is_shared_constant());
  CHECK(items[0]->depth() == 1);
  CHECK(items[2] == items[3]);
  CHECK(items[2] != items[4]);
  CHECK(items[4]->items()[0]->as_int() == 2);
  CHECK(items[5] != items[6]);
  CHECK_FALSE(items[5]->is_shared_constant());
  // Counted once each, as made: (4,), (1, 2), (2, 1), two 300s and their tuples, the list.
  CHECK(r.arena->value_count() == 8);
}
