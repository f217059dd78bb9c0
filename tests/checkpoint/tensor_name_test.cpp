// TensorName: a tensor's name reads as text, compares as a std::string does, joins through its
// view, and stays valid, with every copy, after the Checkpoint that made it is gone.
#include <doctest/doctest.h>

#include <algorithm>
#include <compare>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "pthload/checkpoint.hpp"
#include "pthload/tensor.hpp"
#include "support/checkpoint_file.hpp"
#include "support/error_code.hpp"
#include "support/pickle_writer.hpp"

using pthload::TensorName;
using pthload::test::checkpoint_file;
using pthload::test::float_record;
using pthload::test::PickleWriter;

namespace {
TensorName copy_of(const TensorName& name) {
  return TensorName(name.view());
}
}  // namespace

TEST_CASE("tensor names: a name reads as its text, NUL-terminated, and compares as a string") {
  const TensorName name("layers.0.weight");
  CHECK(name.view() == "layers.0.weight");
  CHECK(name.size() == 15);
  CHECK_FALSE(name.empty());
  CHECK(std::strlen(name.c_str()) == name.size());
  CHECK(name == "layers.0.weight");
  CHECK(name == std::string("layers.0.weight"));
  CHECK(name == std::string_view("layers.0.weight"));
  CHECK(name == TensorName(std::string("layers.0.weight")));
  CHECK("layers.0.weight" == name);
  CHECK(name != "layers.0.bias");
  CHECK(TensorName("a.b") < TensorName("a.c"));
  CHECK(name > std::string_view("layers.0.bias"));
  const std::string text = name;
  CHECK(text == "layers.0.weight");
  CHECK(name.str() == text);
  CHECK(std::string("model.").append(name) == "model.layers.0.weight");
  CHECK(name.str() + ".grad" == "layers.0.weight.grad");
  CHECK(std::string(name) == name);
  CHECK(name == name);
  CHECK_FALSE(name != copy_of(name));
  CHECK((name <=> std::string_view("layers.0.weight")) == std::strong_ordering::equal);
  std::vector<TensorName> sorted{"b", "a.c", "a.b"};
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == std::vector<TensorName>{"a.b", "a.c", "b"});
  std::ostringstream written;
  written << name << '!';
  CHECK(written.str() == "layers.0.weight!");
  std::map<std::string, int> by_name;
  by_name[name] = 1;
  CHECK(by_name.count("layers.0.weight") == 1);

  const TensorName none;
  CHECK(none.empty());
  CHECK(none.size() == 0);
  CHECK(std::string_view(none.c_str()).empty());
  CHECK(none == "");
  CHECK(TensorName(std::string()).empty());

  // A copy shares the text: no allocation, the same bytes.
  const TensorName copy = name;
  CHECK(copy.data() == name.data());
}

TEST_CASE("tensor names: the names a checkpoint made outlive it, as its tensors do") {
  PickleWriter p;
  p.empty_dict().str("state").empty_dict();
  for (int i = 0; i < 3; ++i) {
    p.integer(i).empty_dict().str("exp_avg_sq");
    p.tensor_v2("FloatStorage", std::to_string(i), 8, 0, {8}, {1}).setitem().setitem();
  }
  p.setitem().stop();
  std::vector<pthload::test::zip_build::Record> records;
  for (int i = 0; i < 3; ++i)
    records.push_back({.name = "ck/data/" + std::to_string(i), .data = float_record(8)});
  const auto file = checkpoint_file(p.bytes(), records);
  std::vector<pthload::NamedTensor> kept;
  std::optional<TensorName> one;
  {
    const auto checkpoint = pthload::open(file.path());
    kept.assign(checkpoint.tensors().begin(), checkpoint.tensors().end());
    one = checkpoint.tensors()[1].name;
  }
  REQUIRE(kept.size() == 3);
  CHECK(kept[0].name == "state.0.exp_avg_sq");
  CHECK(kept[2].name == "state.2.exp_avg_sq");
  CHECK(std::string_view(kept[2].name.c_str()) == "state.2.exp_avg_sq");
  kept.clear();
  // The last copy of one name keeps its text: ASan reads it in CI.
  CHECK(*one == "state.1.exp_avg_sq");
}

TEST_CASE("tensor names: Checkpoint::find looks a name up, nullptr for none; tensor() throws") {
  PickleWriter p;
  p.empty_dict().mark();
  // Out of order, so that the index's sort matters.
  const std::vector<std::string> names{"z", "layers.10.w", "layers.2.w", "a", "layers.1.w"};
  for (std::size_t i = 0; i < names.size(); ++i)
    p.str(names[i]).tensor_v2("FloatStorage", std::to_string(i), 8, 0, {8}, {1});
  p.setitems().stop();
  std::vector<pthload::test::zip_build::Record> records;
  for (std::size_t i = 0; i < names.size(); ++i)
    records.push_back({.name = "ck/data/" + std::to_string(i), .data = float_record(8)});
  const auto file = checkpoint_file(p.bytes(), records);
  const auto checkpoint = pthload::open(file.path());
  REQUIRE(checkpoint.tensors().size() == names.size());
  for (const auto& named : checkpoint.tensors()) {
    CAPTURE(named.name.view());
    CHECK(checkpoint.find(named.name) == &named.tensor);
    CHECK(&checkpoint.tensor(named.name) == &named.tensor);
  }
  for (const std::string_view missing : {"", "b", "layers", "layers.1", "layers.1.w.x", "zz"}) {
    CAPTURE(missing);
    CHECK(checkpoint.find(missing) == nullptr);
    CHECK(pthload::test::error_code_of([&] { (void)checkpoint.tensor(missing); }) ==
          pthload::Errc::kTorchNameNotFound);
  }
}

TEST_CASE("tensor names: two paths that name the same text: find gives the first in tensors()") {
  // {"a.b": t0, "a": {"b": t1}, "z": t2}: both of the first two are named "a.b".
  PickleWriter p;
  p.empty_dict().mark();
  p.str("a.b").tensor_v2("FloatStorage", "0", 8, 0, {8}, {1});
  p.str("a").empty_dict().str("b").tensor_v2("FloatStorage", "1", 8, 0, {8}, {1}).setitem();
  p.str("z").tensor_v2("FloatStorage", "2", 8, 0, {8}, {1});
  p.setitems().stop();
  std::vector<pthload::test::zip_build::Record> records;
  for (int i = 0; i < 3; ++i)
    records.push_back({.name = "ck/data/" + std::to_string(i), .data = float_record(8)});
  const auto file = checkpoint_file(p.bytes(), records);
  const auto checkpoint = pthload::open(file.path());
  const auto tensors = checkpoint.tensors();
  REQUIRE(tensors.size() == 3);
  REQUIRE(tensors[0].name == "a.b");
  REQUIRE(tensors[1].name == "a.b");
  CHECK(checkpoint.find("a.b") == &tensors[0].tensor);
  CHECK(checkpoint.find("a.b")->storage().key() == "0");
  CHECK(checkpoint.find("z") == &tensors[2].tensor);
}
