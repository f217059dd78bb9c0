// JsonTree and nesting_within: the JSON reading that must not allocate while it frees.
#include <doctest/doctest.h>

#include <string>

#include "safetensors/index.hpp"
#include "safetensors/json_tree.hpp"
#include "support/error_code.hpp"

using pthload::safetensors::JsonTree;
using pthload::safetensors::nesting_within;

TEST_CASE("nesting_within counts brackets outside strings only") {
  CHECK(nesting_within("{}", 1));
  CHECK_FALSE(nesting_within("{\"a\": [1]}", 1));
  CHECK(nesting_within("{\"a\": [1]}", 2));
  CHECK(nesting_within(R"({"a[[[": "{{{"})", 1));
  // An escaped quote does not end the string; an escaped backslash before a quote does.
  CHECK(nesting_within(R"({"a\"[[[": 1})", 1));
  CHECK_FALSE(nesting_within(R"({"a\\": [[1]]})", 2));
  CHECK_FALSE(nesting_within(std::string(100000, '['), 16));
}

TEST_CASE("JsonTree parses as nlohmann::json::parse does, errors included") {
  const JsonTree tree(R"({"w": {"dtype": "F32", "shape": [2, 3]}, "n": null})");
  CHECK(tree.root().at("w").at("shape").at(1) == 3);
  CHECK(tree.root().at("n").is_null());
  CHECK_THROWS_AS(JsonTree(R"({"w": [1, 2})"), nlohmann::json::parse_error);
  CHECK_THROWS_AS(JsonTree(R"({"w": 1} trailing)"), nlohmann::json::parse_error);
}

TEST_CASE("a shard index nested past its limit is refused before it is parsed") {
  const std::string deep = R"({"weight_map": {"a": "s.bin"}, "metadata": )" + std::string(17, '[') +
                           std::string(17, ']') + "}";
  const auto bytes = std::as_bytes(std::span(deep));
  CHECK(pthload::test::error_code_of([&] { (void)pthload::safetensors::parse_index(bytes); }) ==
        pthload::Errc::kShardIndexBad);
}
