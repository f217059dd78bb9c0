// TensorName: a tensor's name reads as text, compares and joins as a std::string does, and stays
// valid, with every copy, after the Checkpoint that made it is gone.
#include <doctest/doctest.h>

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
#include "support/pickle_writer.hpp"

using pthload::TensorName;
using pthload::test::checkpoint_file;
using pthload::test::float_record;
using pthload::test::PickleWriter;

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
  CHECK("model." + name == "model.layers.0.weight");
  CHECK(name + ".grad" == "layers.0.weight.grad");
  CHECK(std::string("[") + name + "]" == "[layers.0.weight]");
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
