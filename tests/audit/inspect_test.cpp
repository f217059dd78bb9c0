// object_tree() and referenced_globals(): an auditor sees every global, with its arguments, and
// which of them pthload interprets; nothing is called.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "pthload/checkpoint.hpp"
#include "pthload/inspect.hpp"
#include "support/checkpoint_file.hpp"
#include "support/pickle_writer.hpp"
#include "support/safetensors_builder.hpp"

using pthload::test::checkpoint_file;
using pthload::test::float_record;
using pthload::test::PickleWriter;

namespace {

// {'w': tensor, 'hook': os.system('echo pwned'), 'again': os.system (memoised, GET twice),
//  'self': a list holding itself}
std::string hostile_pickle() {
  PickleWriter p;
  p.empty_dict().mark();
  p.str("w").tensor_v2("FloatStorage", "0", 6, 0, {2, 3}, {3, 1});
  p.str("hook").global("os", "system").put(1).mark().str("echo pwned").tuple().reduce();
  p.str("again").get(1);
  p.str("self").empty_list().put(2).get(2).append();
  return p.setitems().stop().bytes();
}

bool has_global(const std::vector<pthload::GlobalReference>& globals, std::string_view module,
                std::string_view name, bool interpreted) {
  return std::any_of(globals.begin(), globals.end(), [&](const auto& global) {
    return global.module == module && global.name == name && global.interpreted == interpreted;
  });
}

}  // namespace

TEST_CASE("inspect: unknown globals are reported as opaque, known ones as interpreted") {
  const auto file =
      checkpoint_file(hostile_pickle(), {{.name = "ck/data/0", .data = float_record(6)}});
  const auto checkpoint = pthload::open(file.path());
  // The tensor still loads beside the opaque call.
  CHECK(checkpoint.tensors().size() == 1);
  const auto globals = pthload::referenced_globals(checkpoint);
  CHECK(has_global(globals, "os", "system", false));
  CHECK(has_global(globals, "torch._utils", "_rebuild_tensor_v2", true));
  CHECK(has_global(globals, "torch", "FloatStorage", true));
  // os.system is one entry however often the pickle refers to it; the list is sorted.
  CHECK(std::count_if(globals.begin(), globals.end(),
                      [](const auto& g) { return g.module == "os"; }) == 1);
  CHECK(std::is_sorted(globals.begin(), globals.end(), [](const auto& a, const auto& b) {
    return std::tie(a.module, a.name) < std::tie(b.module, b.name);
  }));
}

TEST_CASE("inspect: the object tree shows the opaque call with its arguments") {
  const auto file =
      checkpoint_file(hostile_pickle(), {{.name = "ck/data/0", .data = float_record(6)}});
  const auto checkpoint = pthload::open(file.path());
  const std::string tree = pthload::object_tree(checkpoint);
  CHECK(tree.find("os.system('echo pwned')") != std::string::npos);
  CHECK(tree.find("torch._utils._rebuild_tensor_v2(") != std::string::npos);
  CHECK(tree.find("<cycle #") != std::string::npos);

  pthload::TreeOptions shallow;
  shallow.max_depth = 0;
  CHECK(pthload::object_tree(checkpoint, shallow).find("echo pwned") == std::string::npos);
  pthload::TreeOptions few;
  few.max_items = 1;
  CHECK(pthload::object_tree(checkpoint, few).find("(3 more)") != std::string::npos);

  // Streamed to an ostream: the same text.
  std::ostringstream streamed;
  pthload::object_tree(streamed, checkpoint, few);
  CHECK(streamed.str() == pthload::object_tree(checkpoint, few));
  std::ostringstream whole;
  pthload::object_tree(whole, checkpoint);
  CHECK(whole.str() == tree);
}

TEST_CASE("inspect: a safetensors file has no pickle, so no object tree and no globals") {
  // Found by fuzz_safetensors: both walked the missing pickle's root.
  namespace sb = pthload::test::safetensors_build;
  // "w": float32 (2, 3), then "b": float32 (2,), the header padded with spaces to 8 bytes.
  std::string header = R"({"__metadata__":{"format":"pt"},)" +
                       sb::tensor("w", "F32", "[2,3]", 0, 24) + "," +
                       sb::tensor("b", "F32", "[2]", 24, 32) + "}";
  header.resize((header.size() + 7) / 8 * 8, ' ');
  const pthload::test::TempPath file(sb::file(header, float_record(8)));
  const auto checkpoint = pthload::open(file.path());
  CHECK(pthload::object_tree(checkpoint).empty());
  CHECK(pthload::referenced_globals(checkpoint).empty());
}
