// Parsing and validating a safetensors header in one pass (huggingface/safetensors
// safetensors/src/tensor.rs: read_metadata, Metadata::validate; docs/accepted-input.md).
#include "safetensors/header.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include "common/byte_reader.hpp"
#include "common/checked.hpp"
#include "pthload/error.hpp"
#include "safetensors/json_tree.hpp"

namespace pthload::safetensors {
namespace {

using nlohmann::json;

constexpr std::uint64_t kSizeFieldBytes = 8;
constexpr std::string_view kMetadataKey = "__metadata__";

struct DtypeName {
  std::string_view name;
  std::optional<Dtype> dtype;  // nullopt: no torch dtype (the 6-bit floats)
};

// Every dtype safetensors 0.8 writes (its Dtype enum, 22 variants).
constexpr std::array<DtypeName, 22> kDtypes{{
    {"BOOL", Dtype::kBool},
    {"F4", Dtype::kFloat4E2M1FNx2},
    {"F6_E2M3", std::nullopt},
    {"F6_E3M2", std::nullopt},
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
}};

[[noreturn]] void fail(Errc code, std::string message, std::optional<std::uint64_t> offset = {}) {
  throw FormatError(code, "safetensors: " + std::move(message), {.offset = offset});
}

// Rejects what nlohmann would silently accept: a key twice in one object (it keeps the last;
// serde's HashMap too — a file whose two readers may disagree is refused), and nesting deeper
// than a header has, before it costs memory. A SAX pass of its own, before the DOM is built:
// nlohmann's parse callbacks rescan an object at its end, quadratic in its members (20 000
// tensors took seconds).
class StrictnessCheck : public nlohmann::json_sax<json> {
 public:
  bool null() override { return true; }
  bool boolean(bool /*value*/) override { return true; }
  bool number_integer(number_integer_t /*value*/) override { return true; }
  bool number_unsigned(number_unsigned_t /*value*/) override { return true; }
  bool number_float(number_float_t /*value*/, const string_t& /*text*/) override { return true; }
  bool string(string_t& /*value*/) override { return true; }
  bool binary(binary_t& /*value*/) override { return true; }
  bool start_object(std::size_t /*elements*/) override {
    enter();
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& key) override {
    if (!keys_.back().insert(key).second) {
      fail(Errc::kSafetensorsBadHeader,
           fmt::format("the JSON header has the key '{}' twice in one object", key));
    }
    return true;
  }
  bool end_object() override {
    --depth_;
    keys_.pop_back();
    return true;
  }
  bool start_array(std::size_t /*elements*/) override {
    enter();
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  // The DOM parse that follows reports the fault, with its position.
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& /*error*/) override {
    return false;
  }

 private:
  void enter() {
    if (++depth_ > kMaxHeaderNesting) {
      fail(Errc::kSafetensorsBadHeader,
           fmt::format("the JSON header nests deeper than {} levels", kMaxHeaderNesting));
    }
  }

  int depth_ = 0;
  std::vector<std::set<std::string>> keys_;
};

std::uint64_t unsigned_of(const json& value, std::string_view tensor, std::string_view what) {
  if (!value.is_number_unsigned()) {
    fail(Errc::kSafetensorsBadTensorInfo,
         fmt::format("tensor '{}': {} is not a non-negative integer: {}", tensor, what,
                     value.dump().substr(0, 40)));
  }
  return value.get<std::uint64_t>();
}

const json& member(const json& info, std::string_view tensor, const char* key) {
  const auto found = info.find(key);
  if (found == info.end()) {
    fail(Errc::kSafetensorsBadTensorInfo, fmt::format("tensor '{}' has no \"{}\"", tensor, key));
  }
  return *found;
}

// The entry of one tensor, its offsets still relative to the data section.
TensorEntry tensor_entry(const std::string& name, const json& info) {
  if (!info.is_object()) {
    fail(Errc::kSafetensorsBadTensorInfo,
         fmt::format("tensor '{}' is a JSON {}, not an object", name, info.type_name()));
  }
  // safetensors' TensorInfo has these three fields; serde ignores others, so do we
  // (docs/accepted-input.md).
  const json& dtype = member(info, name, "dtype");
  const json& shape = member(info, name, "shape");
  const json& offsets = member(info, name, "data_offsets");

  TensorEntry entry{.name = name};
  if (!dtype.is_string()) {
    fail(Errc::kSafetensorsBadTensorInfo, fmt::format("tensor '{}': dtype is not a string", name));
  }
  entry.file_dtype = dtype.get<std::string>();
  const auto known = std::find_if(kDtypes.begin(), kDtypes.end(),
                                  [&](const DtypeName& d) { return d.name == entry.file_dtype; });
  if (known == kDtypes.end()) {
    fail(Errc::kSafetensorsUnknownDtype,
         fmt::format("tensor '{}': unknown dtype '{}'", name, entry.file_dtype.substr(0, 40)));
  }
  if (!known->dtype) {
    throw UnsupportedError(
        Errc::kSafetensorsUnsupportedDtype,
        fmt::format("safetensors: tensor '{}' has dtype {} (6-bit floats), which torch has no "
                    "dtype for",
                    name, entry.file_dtype));
  }
  entry.dtype = *known->dtype;

  if (!shape.is_array()) {
    fail(Errc::kSafetensorsBadTensorInfo, fmt::format("tensor '{}': shape is not a list", name));
  }
  std::vector<std::uint64_t> sizes;
  for (const json& dim : shape)
    sizes.push_back(unsigned_of(dim, name, "a dimension of its shape"));
  const auto numel = common::row_major_numel(sizes);
  if (!numel) {
    fail(Errc::kSafetensorsSizeOverflow,
         fmt::format("tensor '{}': its shape's sizes multiply past 64 bits (its element count "
                     "or its strides overflow)",
                     name));
  }
  entry.shape.assign(sizes.begin(), sizes.end());
  std::optional<std::uint64_t> nbytes = common::checked_mul(*numel, element_size(entry.dtype));
  if (entry.dtype == Dtype::kFloat4E2M1FNx2) {
    // F4 counts 4-bit values; torch's float4_e2m1fn_x2 holds two per element (byte), along the
    // last dimension (safetensors.torch's view of an F4 tensor).
    if (entry.shape.empty() || entry.shape.back() % 2 != 0) {
      throw UnsupportedError(
          Errc::kSafetensorsUnsupportedDtype,
          fmt::format("safetensors: F4 tensor '{}' has {}; torch's float4_e2m1fn_x2 needs an even "
                      "last dimension",
                      name, entry.shape.empty() ? "no dimensions" : "an odd last dimension"));
    }
    entry.shape.back() /= 2;
    nbytes = *numel / 2;
  }
  if (!nbytes || *nbytes > static_cast<std::uint64_t>(INT64_MAX)) {
    fail(Errc::kSafetensorsSizeOverflow,
         fmt::format("tensor '{}': its size in bytes overflows", name));
  }
  entry.nbytes = *nbytes;

  if (!offsets.is_array() || offsets.size() != 2) {
    fail(Errc::kSafetensorsBadTensorInfo,
         fmt::format("tensor '{}': data_offsets is not a [begin, end] pair", name));
  }
  const std::uint64_t begin = unsigned_of(offsets[0], name, "data_offsets' begin");
  const std::uint64_t end = unsigned_of(offsets[1], name, "data_offsets' end");
  if (end < begin || end - begin != entry.nbytes) {
    fail(Errc::kSafetensorsSizeMismatch,
         fmt::format("tensor '{}': data_offsets [{}, {}] hold {} bytes, but {} {} needs {}", name,
                     begin, end, end >= begin ? end - begin : 0, entry.file_dtype,
                     shape.dump().substr(0, 60), entry.nbytes));
  }
  entry.offset = begin;
  return entry;
}

std::vector<std::pair<std::string, std::string>> metadata_of(const json& value) {
  std::vector<std::pair<std::string, std::string>> result;
  if (value.is_null()) return result;  // serde's Option<HashMap> takes null as None
  if (!value.is_object()) {
    fail(Errc::kSafetensorsBadMetadata,
         fmt::format("__metadata__ is a JSON {}, not an object", value.type_name()));
  }
  for (const auto& [key, text] : value.items()) {
    if (!text.is_string()) {
      fail(Errc::kSafetensorsBadMetadata,
           fmt::format("__metadata__ '{}' is a JSON {}, not a string", key, text.type_name()));
    }
    result.emplace_back(key, text.get<std::string>());
  }
  return result;  // items() of nlohmann's object iterate in key order
}

}  // namespace

bool looks_like_safetensors(std::span<const std::byte> file) noexcept {
  if (file.size() <= kSizeFieldBytes) return false;
  if (file[kSizeFieldBytes] != std::byte{'{'}) return false;
  for (std::size_t i = kSizeFieldBytes + 1; i < file.size(); ++i) {
    const auto c = static_cast<char>(file[i]);
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    return c == '"' || c == '}';
  }
  return false;
}

Header Header::parse(std::span<const std::byte> file) {
  if (file.size() < kSizeFieldBytes) {
    fail(Errc::kSafetensorsTruncated,
         fmt::format("the file has {} bytes, fewer than the 8 of the header size", file.size()), 0);
  }
  Header header;
  header.header_size_ = common::load_le<std::uint64_t>(file.data());
  if (header.header_size_ > kMaxHeaderBytes) {
    fail(Errc::kSafetensorsHeaderTooLarge,
         fmt::format("the header size {} is above the limit of {} bytes", header.header_size_,
                     kMaxHeaderBytes),
         0);
  }
  if (!common::fits(kSizeFieldBytes, header.header_size_, file.size())) {
    fail(Errc::kSafetensorsTruncated,
         fmt::format("the header size {} runs past the end of the file ({} bytes)",
                     header.header_size_, file.size()),
         0);
  }
  const auto text = file.subspan(kSizeFieldBytes, static_cast<std::size_t>(header.header_size_));
  if (text.empty() || text[0] != std::byte{'{'}) {
    // safetensors ≥ 0.4 requires it too (InvalidHeaderStart).
    fail(Errc::kSafetensorsBadHeader, "the header does not start with '{'", kSizeFieldBytes);
  }

  // JSON has no raw NUL (a string escapes it as \u0000), and nlohmann-json would take one for
  // the end of its input, ignoring whatever follows it.
  if (const auto* nul = std::memchr(text.data(), 0, text.size())) {
    fail(Errc::kSafetensorsBadHeader, "the header holds a NUL byte",
         kSizeFieldBytes +
             static_cast<std::uint64_t>(static_cast<const std::byte*>(nul) - text.data()));
  }

  std::optional<JsonTree> tree;
  try {
    const auto* begin = reinterpret_cast<const char*>(text.data());
    StrictnessCheck check;  // bounds the nesting JsonTree's teardown recurses over
    (void)json::sax_parse(begin, begin + text.size(), &check);
    tree.emplace(std::string_view(begin, text.size()));
  } catch (const json::parse_error& e) {
    // e.byte counts from 1: the offending byte's position in the header.
    const std::uint64_t position = e.byte > 0 ? e.byte - 1 : 0;
    std::string what = e.what();
    if (const auto colon = what.find("syntax error"); colon != std::string::npos) {
      what = what.substr(colon);
    }
    fail(Errc::kSafetensorsBadHeader, fmt::format("the header is not valid JSON: {}", what),
         kSizeFieldBytes + position);
  } catch (const json::exception& e) {
    // A number beyond a double (1e999) is json::out_of_range, which carries no position.
    fail(Errc::kSafetensorsBadHeader, fmt::format("the header is not valid JSON: {}", e.what()));
  }
  const json& root = tree->root();
  if (!root.is_object()) {
    fail(Errc::kSafetensorsBadHeader,
         fmt::format("the header is a JSON {}, not an object", root.type_name()), kSizeFieldBytes);
  }

  for (const auto& [key, value] : root.items()) {
    if (key == kMetadataKey) {
      header.metadata_ = metadata_of(value);
    } else {
      header.tensors_.push_back(tensor_entry(key, value));
    }
  }

  // Metadata::validate: sorted by range, each tensor starts where the previous one ended, and
  // the last ends at the end of the file. So no two tensors share a byte and none is unread.
  std::sort(header.tensors_.begin(), header.tensors_.end(),
            [](const TensorEntry& a, const TensorEntry& b) {
              return std::tie(a.offset, a.nbytes, a.name) < std::tie(b.offset, b.nbytes, b.name);
            });
  const std::uint64_t data_size = file.size() - header.data_offset();
  std::uint64_t expected = 0;
  for (auto& entry : header.tensors_) {
    // No overflow: tensor_entry() checked that data_offsets' end - begin is nbytes.
    const std::uint64_t end = entry.offset + entry.nbytes;
    if (entry.offset < expected) {
      fail(Errc::kSafetensorsTensorsOverlap,
           fmt::format("tensor '{}' at data offset {} overlaps the tensor before it, which ends "
                       "at {}",
                       entry.name, entry.offset, expected),
           header.data_offset() + entry.offset);
    }
    if (entry.offset > expected) {
      fail(Errc::kSafetensorsDataGap,
           fmt::format("no tensor covers data bytes [{}, {}) before tensor '{}'", expected,
                       entry.offset, entry.name),
           header.data_offset() + expected);
    }
    if (end > data_size) {
      fail(Errc::kSafetensorsTensorOutOfBounds,
           fmt::format("tensor '{}' ends at data offset {}, past the {} bytes of data in the file",
                       entry.name, end, data_size),
           header.data_offset() + entry.offset);
    }
    expected = end;
    entry.offset += header.data_offset();
  }
  if (expected != data_size) {
    fail(Errc::kSafetensorsDataGap,
         fmt::format("{} bytes after the last tensor belong to none (safetensors: incomplete "
                     "metadata, file not fully covered)",
                     data_size - expected),
         header.data_offset() + expected);
  }
  return header;
}

}  // namespace pthload::safetensors
