// check_weights_only(): torch 2.15's weights-only unpickler, opcode by opcode, on hand-made
// pickles; what each case expects is what torch.load(weights_only=True) did with it.
#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include "audit/weights_only.hpp"
#include "support/pickle_writer.hpp"

using pthload::audit::check_weights_only;
using pthload::audit::PersistentIds;
using pthload::test::PickleWriter;

namespace {

pthload::audit::WeightsOnlyCheck check(const std::string& pickle,
                                       PersistentIds ids = PersistentIds::kZip) {
  return check_weights_only(std::as_bytes(std::span(pickle.data(), pickle.size())), ids);
}

}  // namespace

TEST_CASE("weights-only: a torch.save state dict is accepted") {
  PickleWriter p;
  p.global("collections", "OrderedDict").empty_tuple().reduce().put(0).mark();
  p.str("w").tensor_v2("FloatStorage", "0", 6, 0, {2, 3}, {3, 1});
  const auto result = check(p.setitems().stop().bytes());
  CHECK(result.accepted);
  CHECK(result.reason.empty());
}

TEST_CASE("weights-only: unsupported opcodes and globals, as torch words them") {
  const auto frame = check("\x80\x04\x95\x02\x00\x00\x00\x00\x00\x00\x00}.");
  CHECK(!frame.accepted);
  CHECK(frame.reason == "Unsupported operand 149");
  CHECK(frame.offset == 2);
  PickleWriter p;
  p.global("collections", "defaultdict").empty_tuple().reduce().stop();
  const auto global = check(p.bytes());
  CHECK(!global.accepted);
  CHECK(global.reason ==
        "Unsupported global: GLOBAL collections.defaultdict was not an allowed global by default");
  // The blocked modules, and the text opcodes of protocol 0.
  CHECK(!check("\x80\x02\x63os\nsep\n.").accepted);
  CHECK(!check("S'x'\n.").accepted);
  // PROTO of any version only warns.
  CHECK(check("\x80\x09}.").accepted);
}

TEST_CASE("weights-only: calls, NEWOBJ, BUILD, SETITEMS and APPEND targets") {
  PickleWriter build_dict;
  build_dict.empty_dict().empty_dict().build().stop();
  CHECK(!check(build_dict.bytes()).accepted);  // BUILD on a dict
  PickleWriter build_od;
  build_od.global("collections", "OrderedDict").empty_tuple().reduce().empty_dict().build().stop();
  CHECK(check(build_od.bytes()).accepted);
  PickleWriter build_class;
  build_class.global("collections", "OrderedDict").empty_dict().build().stop();
  CHECK(!check(build_class.bytes()).accepted);  // BUILD on the class itself
  PickleWriter dtype_call;
  dtype_call.global("torch", "float32").empty_tuple().reduce().stop();
  CHECK(!check(dtype_call.bytes()).accepted);  // a dtype is no callable
  PickleWriter newobj_function;
  newobj_function.global("torch._utils", "_rebuild_tensor").empty_tuple().op('\x81').stop();
  CHECK(!check(newobj_function.bytes()).accepted);
  PickleWriter newobj_size;
  newobj_size.global("torch", "Size").empty_tuple().op('\x81').stop();
  CHECK(check(newobj_size.bytes()).accepted);
  PickleWriter set_on_list;
  set_on_list.empty_list().str("k").none().setitem().stop();
  CHECK(!check(set_on_list.bytes()).accepted);
  PickleWriter set_on_counter;
  set_on_counter.global("collections", "Counter")
      .empty_tuple()
      .reduce()
      .str("k")
      .none()
      .setitem()
      .stop();
  CHECK(check(set_on_counter.bytes()).accepted);
  PickleWriter append_to_dict;
  append_to_dict.empty_dict().none().append().stop();
  CHECK(!check(append_to_dict.bytes()).accepted);
  PickleWriter unhashable;
  unhashable.empty_dict().empty_list().none().setitem().stop();
  CHECK(!check(unhashable.bytes()).accepted);
}

TEST_CASE("weights-only: MARK starts a new stack") {
  // REDUCE inside a MARK cannot reach the callable below it.
  PickleWriter p;
  p.global("collections", "OrderedDict").mark().empty_tuple().reduce();
  const auto result = check(p.stop().bytes());
  CHECK(!result.accepted);
}

TEST_CASE("weights-only: persistent ids as torch.load unpacks them") {
  PickleWriter zip_id;
  zip_id.mark()
      .str("storage")
      .global("torch", "FloatStorage")
      .str("0")
      .str("cpu")
      .integer(6)
      .tuple();
  CHECK(check(zip_id.binpersid().stop().bytes(), PersistentIds::kZip).accepted);
  CHECK(!check(zip_id.bytes(), PersistentIds::kLegacy).accepted);  // legacy ids have 6 items
  CHECK(!check(zip_id.bytes(), PersistentIds::kNone).accepted);
  PickleWriter module_id;
  module_id.mark().str("module").none().none().tuple().binpersid().stop();
  CHECK(!check(module_id.bytes(), PersistentIds::kLegacy).accepted);
  PickleWriter not_a_type;
  not_a_type.mark()
      .str("storage")
      .global("torch", "float32")
      .str("0")
      .str("cpu")
      .integer(6)
      .tuple();
  CHECK(!check(not_a_type.binpersid().stop().bytes(), PersistentIds::kZip).accepted);
}

TEST_CASE("weights-only: the root, and broken input") {
  const auto magic = check("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.");
  CHECK(magic.accepted);
  CHECK(magic.root_long_bytes.size() == 10);
  const auto version = check("\x80\x02M\xe9\x03.");
  REQUIRE(version.root_int);
  CHECK(*version.root_int == 1001);
  CHECK(!check("\x80\x02}").accepted);  // no STOP
  CHECK(!check("\x80\x02X\xff\x00\x00\x00"
               "ab.")
             .accepted);                                     // a string past the end
  CHECK(!check("\x80\x02h\x05.").accepted);                  // a memo key never put
  CHECK(!check("\x80\x02.").accepted);                       // STOP on an empty stack
  CHECK(!check("\x80\x02X\x01\x00\x00\x00\xff.").accepted);  // not UTF-8
}
