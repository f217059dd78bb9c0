// safetensors::Header::parse: what a valid header gives, and one case per malformed condition,
// grouped as the file is read (size field, JSON, __metadata__, tensor entries, data layout).
#include <doctest/doctest.h>

#include <chrono>
#include <limits>
#include <string>

#include "pthload/error.hpp"
#include "safetensors/header.hpp"
#include "support/bytes.hpp"
#include "support/error_code.hpp"
#include "support/safetensors_builder.hpp"

using pthload::Dtype;
using pthload::Errc;
using pthload::safetensors::Header;
using pthload::test::error_code_of;
namespace sb = pthload::test::safetensors_build;

namespace {

Errc parse_code(const std::vector<std::byte>& bytes) {
  return error_code_of([&] { (void)Header::parse(bytes); });
}

// A header holding exactly the given members, with `data` after it.
Errc code_of(const std::string& members, const std::string& data = {}) {
  return parse_code(sb::file("{" + members + "}", data));
}

// The offset of the error parsing `bytes` throws; all ones when it throws none or names none.
std::uint64_t offset_of(const std::vector<std::byte>& bytes) {
  const auto error = pthload::test::error_of([&] { (void)Header::parse(bytes); });
  return error ? error->context().offset.value_or(~std::uint64_t{0}) : ~std::uint64_t{0};
}

}  // namespace

// ---- valid headers ----

TEST_CASE("safetensors: a header gives each tensor's dtype, torch shape and absolute range") {
  const std::string header = "{" + sb::tensor("b", "F32", "[2,3]", 8, 32) + "," +
                             sb::tensor("a", "I16", "[4]", 0, 8) + "}";
  const auto bytes = sb::file(header, pthload::test::float_record(8));
  const auto parsed = Header::parse(bytes);
  CHECK(parsed.header_size() == header.size());
  CHECK(parsed.data_offset() == 8 + header.size());
  REQUIRE(parsed.tensors().size() == 2);
  // In the order of their bytes, not of the JSON.
  CHECK(parsed.tensors()[0].name == "a");
  CHECK(parsed.tensors()[0].dtype == Dtype::kInt16);
  CHECK(parsed.tensors()[0].file_dtype == "I16");
  CHECK(parsed.tensors()[0].offset == parsed.data_offset());
  CHECK(parsed.tensors()[0].nbytes == 8);
  CHECK(parsed.tensors()[1].name == "b");
  CHECK(parsed.tensors()[1].shape == std::vector<std::int64_t>{2, 3});
  CHECK(parsed.tensors()[1].offset == parsed.data_offset() + 8);
  CHECK(parsed.tensors()[1].nbytes == 24);
  CHECK(parsed.metadata().empty());
}

TEST_CASE("safetensors: every dtype safetensors writes maps to torch's") {
  const std::pair<const char*, Dtype> table[] = {
      {"BOOL", Dtype::kBool},
      {"U8", Dtype::kUInt8},
      {"I8", Dtype::kInt8},
      {"F8_E5M2", Dtype::kFloat8E5M2},
      {"F8_E4M3", Dtype::kFloat8E4M3FN},
      {"F8_E8M0", Dtype::kFloat8E8M0FNU},
      {"F8_E4M3FNUZ", Dtype::kFloat8E4M3FNUZ},
      {"F8_E5M2FNUZ", Dtype::kFloat8E5M2FNUZ},
      {"I16", Dtype::kInt16},
      {"U16", Dtype::kUInt16},
      {"F16", Dtype::kFloat16},
      {"BF16", Dtype::kBFloat16},
      {"I32", Dtype::kInt32},
      {"U32", Dtype::kUInt32},
      {"F32", Dtype::kFloat32},
      {"C64", Dtype::kComplex64},
      {"F64", Dtype::kFloat64},
      {"I64", Dtype::kInt64},
      {"U64", Dtype::kUInt64},
  };
  for (const auto& [name, dtype] : table) {
    INFO(name);
    const auto size = pthload::element_size(dtype);
    const auto bytes =
        sb::file("{" + sb::tensor("t", name, "[3]", 0, 3 * size) + "}", std::string(3 * size, 'x'));
    const auto parsed = Header::parse(bytes);
    REQUIRE(parsed.tensors().size() == 1);
    CHECK(parsed.tensors()[0].dtype == dtype);
  }
}

TEST_CASE("safetensors: F4 is float4_e2m1fn_x2 with the last dimension counted in pairs") {
  const auto bytes = sb::file("{" + sb::tensor("t", "F4", "[2,6]", 0, 6) + "}", "abcdef");
  const auto parsed = Header::parse(bytes);
  REQUIRE(parsed.tensors().size() == 1);
  CHECK(parsed.tensors()[0].dtype == Dtype::kFloat4E2M1FNx2);
  CHECK(parsed.tensors()[0].shape == std::vector<std::int64_t>{2, 3});
  CHECK(parsed.tensors()[0].nbytes == 6);
}

TEST_CASE("safetensors: empty tensors share a range and are listed by name") {
  const std::string header =
      "{" + sb::tensor("z", "F32", "[0]", 4, 4) + "," + sb::tensor("w", "F32", "[1]", 0, 4) + "," +
      sb::tensor("y", "I8", "[2,0]", 4, 4) + "," + sb::tensor("a", "BF16", "[0,3]", 0, 0) + "}";
  const auto parsed = Header::parse(sb::file(header, pthload::test::float_record(1)));
  REQUIRE(parsed.tensors().size() == 4);
  CHECK(parsed.tensors()[0].name == "a");
  CHECK(parsed.tensors()[1].name == "w");
  CHECK(parsed.tensors()[2].name == "y");
  CHECK(parsed.tensors()[3].name == "z");
}

TEST_CASE("safetensors: an empty header, padding spaces, a 0-dim tensor, extra fields") {
  CHECK(Header::parse(sb::file("{}")).tensors().empty());
  CHECK(Header::parse(sb::file("{}      ")).tensors().empty());  // serialize() pads to 8
  const auto scalar =
      Header::parse(sb::file("{" + sb::tensor("s", "F64", "[]", 0, 8) + "}", std::string(8, '\0')));
  REQUIRE(scalar.tensors().size() == 1);
  CHECK(scalar.tensors()[0].shape.empty());
  // serde ignores members TensorInfo lacks; so do we (docs/accepted-input.md).
  CHECK(code_of(R"("t":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":[1,2]})", "x") ==
        Errc::kOk);
}

TEST_CASE("safetensors: __metadata__ is read, sorted by key; null means none") {
  const auto parsed = Header::parse(sb::file(R"({"__metadata__":{"format":"pt","a":"caf\u00e9"},)" +
                                                 sb::tensor("t", "U8", "[1]", 0, 1) + "}",
                                             "x"));
  REQUIRE(parsed.metadata().size() == 2);
  CHECK(parsed.metadata()[0] == std::pair<std::string, std::string>{"a", "caf\xc3\xa9"});
  CHECK(parsed.metadata()[1] == std::pair<std::string, std::string>{"format", "pt"});
  CHECK(Header::parse(sb::file(R"({"__metadata__":null})")).metadata().empty());
}

TEST_CASE("safetensors: a header of 100 000 tensors parses in linear time") {
  // nlohmann's parse callbacks rescan an object at its end: 20 000 tensors once took 2.4 s.
  std::string header = "{";
  for (int i = 0; i < 100'000; ++i) {
    if (i != 0) header += ",";
    header += sb::tensor("t" + std::to_string(i), "F32", "[0]", 0, 0);
  }
  header += "}";
  const auto bytes = sb::file(header);
  const auto start = std::chrono::steady_clock::now();
  CHECK(Header::parse(bytes).tensors().size() == 100'000);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
}

// ---- the size field ----

TEST_CASE("safetensors: a file shorter than its size field is refused") {
  CHECK(parse_code({std::byte{2}, std::byte{0}, std::byte{0}}) == Errc::kSafetensorsTruncated);
}

TEST_CASE("safetensors: a header size above 100 MB is refused before anything is read") {
  const auto bytes = sb::file("{}", {}, pthload::safetensors::kMaxHeaderBytes + 1);
  CHECK(parse_code(bytes) == Errc::kSafetensorsHeaderTooLarge);
  CHECK(offset_of(bytes) == 0);
}

TEST_CASE("safetensors: a header size past the end of the file is refused") {
  CHECK(parse_code(sb::file("{}", {}, 3)) == Errc::kSafetensorsTruncated);
  CHECK(parse_code(sb::file("{}", {}, std::numeric_limits<std::uint64_t>::max())) ==
        Errc::kSafetensorsHeaderTooLarge);
}

TEST_CASE("safetensors: a header size of 0 is refused") {
  CHECK(parse_code(sb::file("", {}, 0)) == Errc::kSafetensorsBadHeader);
}

// ---- the JSON ----

TEST_CASE("safetensors: a header that does not start with '{' is refused") {
  CHECK(parse_code(sb::file(" {}")) == Errc::kSafetensorsBadHeader);
  CHECK(parse_code(sb::file("[1]")) == Errc::kSafetensorsBadHeader);
}

TEST_CASE("safetensors: JSON that does not parse is refused, with the offset of the fault") {
  const auto bytes = sb::file(R"({"a":)");
  CHECK(parse_code(bytes) == Errc::kSafetensorsBadHeader);
  CHECK(offset_of(bytes) >= 8);
  CHECK(offset_of(bytes) <= 8 + 5);
}

TEST_CASE("safetensors: bytes after the JSON object other than spaces are refused") {
  CHECK(parse_code(sb::file("{}x")) == Errc::kSafetensorsBadHeader);
  // nlohmann-json would stop at a NUL as at the end of its input, and ignore what follows.
  CHECK(parse_code(sb::file(std::string("{}\0\0", 4))) == Errc::kSafetensorsBadHeader);
  CHECK(parse_code(sb::file(std::string("{}\0{\"a\":1}", 10))) == Errc::kSafetensorsBadHeader);
  const auto with_nul = sb::file(std::string("{\"a\0\":1}", 8));
  CHECK(parse_code(with_nul) == Errc::kSafetensorsBadHeader);
  CHECK(offset_of(with_nul) == 8 + 3);
}

TEST_CASE("safetensors: a number beyond a double is refused") {
  CHECK(code_of(R"("__metadata__":null,"x":1e999)") == Errc::kSafetensorsBadHeader);
}

TEST_CASE("safetensors: invalid UTF-8 in the header is refused") {
  CHECK(parse_code(sb::file("{\"a\xff\":1}")) == Errc::kSafetensorsBadHeader);
}

TEST_CASE("safetensors: a key twice in one object is refused") {
  CHECK(code_of(sb::tensor("t", "U8", "[1]", 0, 1) + "," + sb::tensor("t", "U8", "[1]", 0, 1),
                "x") == Errc::kSafetensorsBadHeader);
  CHECK(code_of(R"("t":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]})", "x") ==
        Errc::kSafetensorsBadHeader);
}

TEST_CASE("safetensors: JSON nested deeper than a header is refused") {
  CHECK(code_of(R"("t":{"dtype":"U8","shape":[[1]],"data_offsets":[0,1]})", "x") ==
        Errc::kSafetensorsBadHeader);
  // Deep nesting is refused as it is met, not after building it.
  CHECK(code_of("\"t\":" + std::string(100000, '[') + std::string(100000, ']')) ==
        Errc::kSafetensorsBadHeader);
}

// ---- __metadata__ ----

TEST_CASE("safetensors: __metadata__ that is not an object is refused") {
  CHECK(code_of(R"("__metadata__":["pt"])") == Errc::kSafetensorsBadMetadata);
}

TEST_CASE("safetensors: a __metadata__ value that is not a string is refused") {
  CHECK(code_of(R"("__metadata__":{"step":10})") == Errc::kSafetensorsBadMetadata);
}

// ---- tensor entries ----

TEST_CASE("safetensors: a tensor entry that is not an object is refused") {
  CHECK(code_of(R"("t":[1])") == Errc::kSafetensorsBadTensorInfo);
}

TEST_CASE("safetensors: a tensor entry without dtype, shape or data_offsets is refused") {
  CHECK(code_of(R"("t":{"shape":[1],"data_offsets":[0,1]})", "x") ==
        Errc::kSafetensorsBadTensorInfo);
  CHECK(code_of(R"("t":{"dtype":"U8","data_offsets":[0,1]})", "x") ==
        Errc::kSafetensorsBadTensorInfo);
  CHECK(code_of(R"("t":{"dtype":"U8","shape":[1]})", "x") == Errc::kSafetensorsBadTensorInfo);
}

TEST_CASE("safetensors: a dtype that is not a string is refused") {
  CHECK(code_of(R"("t":{"dtype":8,"shape":[1],"data_offsets":[0,1]})", "x") ==
        Errc::kSafetensorsBadTensorInfo);
}

TEST_CASE("safetensors: an unknown dtype is refused") {
  CHECK(code_of(sb::tensor("t", "F128", "[1]", 0, 16), std::string(16, 'x')) ==
        Errc::kSafetensorsUnknownDtype);
  CHECK(code_of(sb::tensor("t", "f32", "[1]", 0, 4), "xxxx") == Errc::kSafetensorsUnknownDtype);
}

TEST_CASE("safetensors: 6-bit float dtypes are valid but have no torch dtype") {
  const auto bytes = sb::file("{" + sb::tensor("t", "F6_E2M3", "[4]", 0, 3) + "}", "xyz");
  CHECK_THROWS_AS((void)Header::parse(bytes), pthload::UnsupportedError);
  CHECK(parse_code(bytes) == Errc::kSafetensorsUnsupportedDtype);
}

TEST_CASE("safetensors: F4 with an odd last dimension or no dimension has no torch dtype") {
  CHECK(code_of(sb::tensor("t", "F4", "[2,3]", 0, 3), "xyz") == Errc::kSafetensorsUnsupportedDtype);
  CHECK(code_of(sb::tensor("t", "F4", "[]", 0, 0)) == Errc::kSafetensorsUnsupportedDtype);
}

TEST_CASE("safetensors: a shape that is not a list of non-negative integers is refused") {
  CHECK(code_of(R"("t":{"dtype":"U8","shape":3,"data_offsets":[0,3]})", "xyz") ==
        Errc::kSafetensorsBadTensorInfo);
  CHECK(code_of(sb::tensor("t", "U8", "[-1]", 0, 0)) == Errc::kSafetensorsBadTensorInfo);
  CHECK(code_of(sb::tensor("t", "U8", "[1.0]", 0, 1), "x") == Errc::kSafetensorsBadTensorInfo);
  CHECK(code_of(sb::tensor("t", "U8", "[\"1\"]", 0, 1), "x") == Errc::kSafetensorsBadTensorInfo);
}

TEST_CASE("safetensors: a dimension beyond int64 is refused") {
  CHECK(code_of(sb::tensor("t", "U8", "[9223372036854775808]", 0, 0)) ==
        Errc::kSafetensorsSizeOverflow);
}

TEST_CASE("safetensors: a shape whose element count or byte size overflows is refused") {
  CHECK(code_of(sb::tensor("t", "U8", "[4294967296,4294967296]", 0, 0)) ==
        Errc::kSafetensorsSizeOverflow);
  CHECK(code_of(sb::tensor("t", "F64", "[4611686018427387904]", 0, 0)) ==
        Errc::kSafetensorsSizeOverflow);
}

TEST_CASE("safetensors: an empty shape whose other sizes multiply past int64 is refused") {
  // 0 elements, but its row-major strides (2^80, 2^40, 1) do not fit in an int64.
  CHECK(code_of(sb::tensor("t", "F32", "[0,1099511627776,1099511627776]", 0, 0)) ==
        Errc::kSafetensorsSizeOverflow);
  // Empty, with strides that fit: accepted, as safetensors writes it.
  CHECK(code_of(sb::tensor("t", "F32", "[0,1099511627776,8]", 0, 0)) == Errc::kOk);
}

TEST_CASE("safetensors: data_offsets that are not two non-negative integers are refused") {
  CHECK(code_of(R"("t":{"dtype":"U8","shape":[1],"data_offsets":[0]})", "x") ==
        Errc::kSafetensorsBadTensorInfo);
  CHECK(code_of(R"("t":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]})", "x") ==
        Errc::kSafetensorsBadTensorInfo);
  CHECK(code_of(R"("t":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]})", "x") ==
        Errc::kSafetensorsBadTensorInfo);
  CHECK(code_of(R"("t":{"dtype":"U8","shape":[1],"data_offsets":{"a":1}})", "x") ==
        Errc::kSafetensorsBadTensorInfo);
}

TEST_CASE("safetensors: data_offsets whose end is before their begin are refused") {
  CHECK(code_of(sb::tensor("t", "U8", "[0]", 1, 0), "x") == Errc::kSafetensorsSizeMismatch);
}

TEST_CASE("safetensors: a range whose size is not the shape's bytes is refused") {
  CHECK(code_of(sb::tensor("t", "F32", "[2]", 0, 4), "xxxx") == Errc::kSafetensorsSizeMismatch);
  CHECK(code_of(sb::tensor("t", "F32", "[1]", 0, 8), "xxxxxxxx") == Errc::kSafetensorsSizeMismatch);
}

// ---- the data section ----

TEST_CASE("safetensors: overlapping tensors are refused") {
  const auto bytes = sb::file(
      "{" + sb::tensor("a", "U8", "[4]", 0, 4) + "," + sb::tensor("b", "U8", "[4]", 2, 6) + "}",
      "xxxxxx");
  CHECK(parse_code(bytes) == Errc::kSafetensorsTensorsOverlap);
  // Two names for the same bytes overlap too.
  CHECK(code_of(sb::tensor("a", "U8", "[4]", 0, 4) + "," + sb::tensor("b", "U8", "[4]", 0, 4),
                "xxxx") == Errc::kSafetensorsTensorsOverlap);
}

TEST_CASE("safetensors: bytes between tensors that no tensor covers are refused") {
  const std::string header =
      "{" + sb::tensor("a", "U8", "[2]", 0, 2) + "," + sb::tensor("b", "U8", "[2]", 3, 5) + "}";
  const auto bytes = sb::file(header, "xxxxx");
  CHECK(parse_code(bytes) == Errc::kSafetensorsDataGap);
  CHECK(offset_of(bytes) == 8 + header.size() + 2);
}

TEST_CASE("safetensors: a first tensor that does not start the data is refused") {
  CHECK(code_of(sb::tensor("a", "U8", "[2]", 1, 3), "xxx") == Errc::kSafetensorsDataGap);
}

TEST_CASE("safetensors: bytes after the last tensor are refused") {
  CHECK(code_of(sb::tensor("a", "U8", "[2]", 0, 2), "xxx") == Errc::kSafetensorsDataGap);
  CHECK(parse_code(sb::file("{}", "x")) == Errc::kSafetensorsDataGap);
}

TEST_CASE("safetensors: a tensor that runs past the end of the file is refused") {
  CHECK(code_of(sb::tensor("a", "U8", "[4]", 0, 4), "xx") == Errc::kSafetensorsTensorOutOfBounds);
  CHECK(code_of(sb::tensor("a", "U8", "[4611686018427387904]", 0, 4611686018427387904ULL), "xx") ==
        Errc::kSafetensorsTensorOutOfBounds);
}

TEST_CASE("safetensors: looks_like_safetensors wants '{' after the size, then a key or '}'") {
  using pthload::safetensors::looks_like_safetensors;
  CHECK(looks_like_safetensors(sb::file("{}")));
  CHECK(looks_like_safetensors(sb::file("{ \n\"a\":1}")));
  CHECK(looks_like_safetensors(sb::file("{\"a", {}, 1000)));  // truncated: parse() says so
  CHECK_FALSE(looks_like_safetensors(sb::file("[]")));
  CHECK_FALSE(looks_like_safetensors(sb::file("{x")));
  CHECK_FALSE(looks_like_safetensors(sb::file("{   ")));
  CHECK_FALSE(looks_like_safetensors({}));
}
