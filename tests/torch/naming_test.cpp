// The naming rules (docs/naming.md), one row per container form, and the audit that lists what
// no rule reaches; storages no listed tensor uses.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "pthload/checkpoint.hpp"
#include "support/checkpoint_file.hpp"
#include "support/pickle_writer.hpp"

using pthload::test::checkpoint_file;
using pthload::test::float_record;
using pthload::test::PickleWriter;

namespace {

// Memo slots 1 and 2 hold tensors over storages '0' and '1' once `tensors()` has run.
void tensors(PickleWriter& p) {
  p.tensor_v2("FloatStorage", "0", 8, 0, {8}, {1}).put(1).op('0');
  p.tensor_v2("FloatStorage", "1", 8, 0, {8}, {1}).put(2).op('0');
}

PickleWriter& newobj(PickleWriter& p) {
  return p.op('\x81');
}
PickleWriter& tuple2(PickleWriter& p) {
  return p.op('\x86');
}

std::vector<std::string> names_of(const std::function<void(PickleWriter&)>& body) {
  PickleWriter p;
  tensors(p);
  body(p);
  p.stop();
  const auto file = checkpoint_file(p.bytes(), {{.name = "ck/data/0", .data = float_record(8)},
                                                {.name = "ck/data/1", .data = float_record(8)}});
  const auto checkpoint = pthload::open(file.path());
  std::vector<std::string> names;
  for (const auto& t : checkpoint.tensors())
    names.push_back(t.name);
  return names;
}

struct Row {
  std::string form;
  std::function<void(PickleWriter&)> body;  // pushes the root, using memo 1 and 2
  std::vector<std::string> names;
};

}  // namespace

TEST_CASE("torch naming: every container form torch rebuilds names its tensors") {
  const std::vector<Row> rows = {
      {"Python 2 OrderedDict: REDUCE with a list of [key, value] lists, then BUILD",
       [](PickleWriter& p) {
         p.global("collections", "OrderedDict").mark().empty_list().mark();
         p.empty_list().mark().str("a").get(1).appends();
         p.empty_list().mark().str("b").get(2).appends();
         p.appends().tuple().reduce();
         p.empty_dict().str("_metadata").empty_dict().setitem().build();
       },
       {"a", "b"}},
      {"OrderedDict from a tuple of 2-tuples",
       [](PickleWriter& p) {
         p.global("collections", "OrderedDict").mark();
         p.str("a").get(1);
         tuple2(p).str("b").get(2);
         tuple2(p).tuple().op('\x85').reduce();  // TUPLE1 around the pairs
       },
       {"a", "b"}},
      {"dict(pairs), then SETITEMS",
       [](PickleWriter& p) {
         p.global("__builtin__", "dict").mark().empty_list().mark();
         p.str("a").get(1);
         tuple2(p).appends().tuple().reduce();
         p.str("b").get(2).setitem();
       },
       {"a", "b"}},
      {"dict(OrderedDict(mapping))",
       [](PickleWriter& p) {
         p.global("builtins", "dict").mark().global("collections", "OrderedDict").mark();
         p.empty_dict().str("a").get(1).setitem().tuple().reduce().tuple().reduce();
       },
       {"a"}},
      {"Counter(dict) and defaultdict(factory, mapping)",
       [](PickleWriter& p) {
         p.empty_list().mark();
         p.global("collections", "Counter").mark().empty_dict().str("c").get(1).setitem();
         p.tuple().reduce();
         p.global("collections", "defaultdict").mark().global("builtins", "list");
         p.empty_dict().str("d").get(2).setitem().tuple().reduce();
         p.appends();
       },
       {"0.c", "1.d"}},
      {"set(list) by REDUCE, and EMPTY_SET + ADDITEMS, FROZENSET (protocol 4)",
       [](PickleWriter& p) {
         p.empty_dict().mark();
         p.str("s").global("__builtin__", "set").mark().empty_list().mark().get(2).get(1);
         p.appends().tuple().reduce();
         p.str("e").op('\x8f').mark().get(1).op('\x90');
         p.str("f").mark().get(2).op('\x91');
         p.setitems();
       },
       {"s.0", "s.1", "e.0", "f.0"}},
      {"a tensor as a dict key, and a tuple holding one",
       [](PickleWriter& p) {
         p.empty_dict().mark().get(1).get(2);
         p.mark().str("k").get(1).tuple().str("v").setitems();
       },
       {"<value 0>", "<key 0>", "<key 1>.1"}},
      {"keys of other types named by Python's str()",
       [](PickleWriter& p) {
         p.empty_dict().mark();
         p.mark().str("a").integer(1).tuple().get(1);
         p.real(1.0).get(1).real(1e16).get(1).real(1e-5).get(1).none().get(1);
         p.boolean(true).get(1).integer(-3).get(1);
         p.global("_codecs", "encode").mark().str("k\xc3\xbf").str("latin1").tuple().reduce();
         p.get(1).setitems();
       },
       {"('a', 1)", "1.0", "1e+16", "1e-05", "None", "True", "-3", "b'k\\xff'"}},
      {"namedtuple by NEWOBJ: its arguments by position",
       [](PickleWriter& p) {
         p.global("__main__", "Pair").mark().get(1).get(2).tuple();
         newobj(p);
       },
       {"0", "1"}},
      {"functools.partial: REDUCE(partial, (f,)) then BUILD((f, (t,), None, None))",
       [](PickleWriter& p) {
         p.global("functools", "partial").mark().global("_operator", "mul").tuple().reduce();
         p.mark().global("_operator", "mul").mark().get(1).tuple().none().none().tuple().build();
       },
       {"1.0"}},
      {"NEWOBJ_EX keyword arguments by name",
       [](PickleWriter& p) {
         p.global("__main__", "Cls").empty_tuple().empty_dict().str("w").get(1).setitem();
         p.op('\x92');
       },
       {"w"}},
      {"(dict, slots) BUILD state, and a BUILD state that is no dict",
       [](PickleWriter& p) {
         p.empty_list().mark();
         p.global("__main__", "Slots").empty_tuple();
         newobj(p).none().empty_dict().str("s").get(1).setitem();
         tuple2(p).build();
         p.global("__main__", "State").empty_tuple();
         newobj(p).empty_list().get(2).append().build();
         p.appends();
       },
       {"0.s", "1.0"}},
      {"copyreg._reconstructor of a list subclass and of an object",
       [](PickleWriter& p) {
         p.empty_list().mark();
         p.global("copy_reg", "_reconstructor").mark().global("__main__", "L");
         p.global("__builtin__", "list").empty_list().get(1).append().tuple().reduce();
         p.global("copy_reg", "_reconstructor").mark().global("__main__", "O");
         p.global("__builtin__", "object").none().tuple().reduce();
         p.empty_dict().str("w").get(2).setitem().build();
         p.appends();
       },
       {"0.0", "1.w"}},
      {"list(iterable) and APPENDS on a list subclass",
       [](PickleWriter& p) {
         p.empty_list().mark();
         p.global("builtins", "tuple").mark().empty_list().get(1).append().tuple().reduce();
         p.global("__main__", "MyList").empty_tuple();
         newobj(p).mark().get(2).appends();
         p.appends();
       },
       {"0.0", "1.0"}},
      // Tensors before, between and after containers keep the order of the walk, which lists
      // a container's leading tensors at once and the rest after the containers before them.
      {"tensors and containers interleaved",
       [](PickleWriter& p) {
         p.empty_dict().mark().str("a").get(1).str("b").empty_dict().str("c").get(2).setitem();
         p.str("d").get(2).str("e").empty_list().get(1).append().str("f").get(1).setitems();
       },
       {"a", "b.c", "d", "e.0", "f"}},
  };
  for (const auto& row : rows) {
    CAPTURE(row.form);
    CHECK(names_of(row.body) == row.names);
  }
}

TEST_CASE("torch naming: the audit lists a tensor no rule reaches, under its path") {
  // A tensor in a state_dict's BUILD state (its attributes, which naming does not walk), and one
  // in the persistent id of a bare storage's tuple: listed all the same.
  const auto names = names_of([](PickleWriter& p) {
    p.empty_dict().str("sd").global("collections", "OrderedDict").empty_tuple().reduce();
    p.empty_dict().str("extra").get(1).setitem().build().setitem();
  });
  CHECK(names == std::vector<std::string>{"sd.<state>.extra"});
  // The same tensor reached by a rule and by no rule is listed once, by the rule.
  CHECK(names_of([](PickleWriter& p) {
          p.empty_list().mark().get(1);
          p.global("collections", "OrderedDict").empty_tuple().reduce();
          p.empty_dict().str("again").get(1).setitem().build();
          p.appends();
        }) == std::vector<std::string>{"0"});
}

TEST_CASE("torch naming: the audit skips only plain containers the walk dealt with whole") {
  // The walk marks a dict, list, tuple or set it walked all the contents of, and the audit does
  // not look below it again; anything the walk leaves out keeps the container in the audit.
  CHECK(names_of([](PickleWriter& p) {
          // {'a': [t1, {'b': t2}], 'c': ()}: covered throughout, named by the walk alone.
          p.empty_dict().mark().str("a").empty_list().mark().get(1);
          p.empty_dict().str("b").get(2).setitem().appends();
          p.str("c").empty_tuple().setitems();
        }) == std::vector<std::string>{"a.0", "a.1.b"});
  // A BUILD state on a plain dict is not walked: the dict is not covered, and the audit finds
  // the tensor in it.
  CHECK(names_of([](PickleWriter& p) {
          p.empty_dict().str("d").empty_dict().str("x").integer(3).setitem();
          p.empty_dict().str("extra").get(1).setitem().build().setitem();
        }) == std::vector<std::string>{"d.<state>.extra"});
  // A bare storage is not walked either: a list holding one, whose persistent id holds a
  // tensor, is audited.
  CHECK(names_of([](PickleWriter& p) {
          p.empty_dict().str("l").empty_list().mark().get(2).get(1).op('\x85').binpersid();
          p.appends().setitem();
        }) == std::vector<std::string>{"l.0", "l.1.<persistent id>.0"});
  // A list holding itself: the walk skips the cycle, so the list is audited, and its tensor is
  // still listed once, by the walk.
  CHECK(names_of([](PickleWriter& p) { p.empty_list().put(3).mark().get(3).get(1).appends(); }) ==
        std::vector<std::string>{"1"});
}

TEST_CASE("torch naming: storages no listed tensor uses are reported") {
  // {'t': tensor over '0', 's': the bare storage '1'}; the record data/2 is named by nothing.
  PickleWriter p;
  p.empty_dict().mark().str("t").tensor_v2("FloatStorage", "0", 8, 0, {8}, {1});
  p.str("s").storage("FloatStorage", "1", "cpu", 8).setitems().stop();
  const auto file = checkpoint_file(p.bytes(), {{.name = "ck/data/0", .data = float_record(8)},
                                                {.name = "ck/data/1", .data = float_record(8)},
                                                {.name = "ck/data/2", .data = float_record(2)}});
  const auto checkpoint = pthload::open(file.path());
  REQUIRE(checkpoint.tensors().size() == 1);
  const auto unused = checkpoint.unused_storages();
  REQUIRE(unused.size() == 2);
  CHECK(unused[0].key == "1");
  CHECK(unused[0].record == "ck/data/1");
  CHECK(unused[0].nbytes == 32);
  CHECK(unused[1].key == "2");
  CHECK(unused[1].nbytes == 8);
}
