// Argument readers shared by the rebuild functions (rebuild_*.cpp, storage_resolver.cpp).
#include "torch/rebuild_args.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>

#include "common/checked.hpp"
#include "pthload/error.hpp"
#include "torch/globals.hpp"

namespace pthload::torch {
namespace {

using pickle::Kind;
using pickle::Value;

// offset + Σ (size_i - 1) · stride_i, the last element's index; nullopt on overflow.
std::optional<std::uint64_t> last_element(std::int64_t offset, std::span<const std::int64_t> sizes,
                                          std::span<const std::int64_t> strides) {
  std::uint64_t last = static_cast<std::uint64_t>(offset);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const auto step = common::checked_mul(static_cast<std::uint64_t>(sizes[i] - 1),
                                          static_cast<std::uint64_t>(strides[i]));
    if (!step) return std::nullopt;
    const auto sum = common::checked_add(last, *step);
    if (!sum) return std::nullopt;
    last = *sum;
  }
  return last;
}

}  // namespace

std::string global_name(const Value& callable) {
  if (!callable.is(Kind::kGlobal)) return std::string(pickle::kind_name(callable.kind()));
  return fmt::format("{}.{}", callable.module(), callable.name());
}

// `function` is the rebuild function's global: its name is formatted only when there is an error.
void bad_arguments(const Value& function, std::string_view what) {
  throw FormatError(Errc::kTorchBadRebuildArguments,
                    fmt::format("{}: {}", global_name(function), what));
}

const Value& argument(const Value& args, std::size_t index, const Value& function) {
  const auto items = args.items();
  if (index >= items.size()) {
    bad_arguments(function,
                  fmt::format("expected at least {} arguments, got {}", index + 1, items.size()));
  }
  return *items[index];
}

void expect_arity(const Value& args, std::size_t count, std::size_t most, const Value& function) {
  const std::size_t n = args.items().size();
  if (n < count || n > most) {
    bad_arguments(function, count == most ? fmt::format("expected {} arguments, got {}", count, n)
                                          : fmt::format("expected {} to {} arguments, got {}",
                                                        count, most, n));
  }
}

std::int64_t int_argument(const Value& value, const Value& function, std::string_view what) {
  if (value.is(Kind::kInt)) return value.as_int();
  if (value.is(Kind::kBool)) return value.as_bool() ? 1 : 0;
  bad_arguments(function,
                fmt::format("{} is a {}, not an int", what, pickle::kind_name(value.kind())));
}

double float_argument(const Value& value, const Value& function, std::string_view what) {
  if (value.is(Kind::kFloat)) return value.as_float();
  if (value.is(Kind::kInt)) return static_cast<double>(value.as_int());
  bad_arguments(function,
                fmt::format("{} is a {}, not a float", what, pickle::kind_name(value.kind())));
}

bool bool_argument(const Value& value, const Value& function, std::string_view what) {
  if (value.is(Kind::kBool)) return value.as_bool();
  if (value.is(Kind::kInt)) return value.as_int() != 0;
  bad_arguments(function,
                fmt::format("{} is a {}, not a bool", what, pickle::kind_name(value.kind())));
}

void int_tuple(const Value& value, const Value& function, std::string_view what,
               std::vector<std::int64_t>& result) {
  const Value* tuple = &value;
  if (value.is(Kind::kCall) && classify_global(value.callable()) == KnownGlobal::kSize &&
      !value.args().items().empty()) {
    tuple = value.args().items()[0];
  }
  if (!tuple->is(Kind::kTuple) && !tuple->is(Kind::kList)) {
    bad_arguments(function, fmt::format("{} is a {}, not a tuple of ints", what,
                                        pickle::kind_name(tuple->kind())));
  }
  const auto items = tuple->items();
  if (items.size() > kMaxDims) {
    bad_arguments(function,
                  fmt::format("{} has {} dimensions (at most {})", what, items.size(), kMaxDims));
  }
  result.clear();
  for (const Value* item : items) {
    const std::int64_t n = int_argument(*item, function, what);
    if (n < 0) bad_arguments(function, fmt::format("{} holds a negative value {}", what, n));
    result.push_back(n);
  }
}

void size_and_stride(const Value& size, const Value& stride, const Value& function,
                     std::vector<std::int64_t>& sizes, std::vector<std::int64_t>& strides) {
  int_tuple(size, function, "size", sizes);
  int_tuple(stride, function, "stride", strides);
  if (sizes.size() != strides.size()) {
    bad_arguments(function, fmt::format("size has {} dimensions but stride has {}", sizes.size(),
                                        strides.size()));
  }
}

Dtype dtype_argument(const Value& value, const Value& function) {
  const auto dtype = dtype_of_global(value);
  if (!dtype) {
    throw FormatError(
        Errc::kTorchUnknownDtype,
        fmt::format("{}: unknown dtype {}", global_name(function), global_name(value)));
  }
  return *dtype;
}

std::string device_argument(const Value& value, const Value& function) {
  if (value.is(Kind::kString)) return std::string(value.as_string());
  if (value.is(Kind::kCall) && value.callable().is(Kind::kGlobal) &&
      value.callable().is_global("torch", "device")) {
    const auto args = value.args().items();
    if (args.size() == 1 && args[0]->is(Kind::kString)) return std::string(args[0]->as_string());
    if (args.size() == 2 && args[0]->is(Kind::kString) && args[1]->is(Kind::kInt)) {
      return fmt::format("{}:{}", args[0]->as_string(), args[1]->as_int());
    }
    bad_arguments(function, "device is torch.device called with neither (type) nor (type, index)");
  }
  bad_arguments(function, fmt::format("device is a {}, neither a string nor a torch.device",
                                      pickle::kind_name(value.kind())));
}

std::string_view layout_name_argument(const Value& value, const Value& function) {
  std::optional<std::string_view> name;
  if (value.is(Kind::kCall) && classify_global(value.callable()) == KnownGlobal::kGetLayout &&
      value.args().items().size() == 1 && value.args().items()[0]->is(Kind::kString)) {
    name = value.args().items()[0]->as_string();
  } else if (value.is(Kind::kGlobal) && value.module() == "torch") {
    name = value.name();
  }
  if (!name) {
    bad_arguments(function, fmt::format("layout is a {}, not torch.serialization._get_layout(name) "
                                        "or a torch.<layout> global",
                                        pickle::kind_name(value.kind())));
  }
  if (name->starts_with("torch.")) name->remove_prefix(6);
  return *name;
}

void check_in_bounds(const Value& function, const Storage& storage, Dtype dtype,
                     std::int64_t offset, std::span<const std::int64_t> sizes,
                     std::span<const std::int64_t> strides,
                     std::optional<std::uint64_t> limit_bytes) {
  const bool empty = std::any_of(sizes.begin(), sizes.end(), [](std::int64_t s) { return s == 0; });
  if (empty) return;
  const std::uint64_t limit = limit_bytes.value_or(storage.nbytes());
  const auto last = last_element(offset, sizes, strides);
  const auto end_byte = last ? common::checked_mul(*last + 1, element_size(dtype)) : std::nullopt;
  if (!end_byte || *end_byte > limit) {
    throw FormatError(Errc::kTorchTensorOutOfBounds,
                      fmt::format("{}: a {} tensor of size ({}) stride ({}) at offset {} reads "
                                  "past the end of storage '{}' ({} bytes)",
                                  global_name(function), dtype_name(dtype), fmt::join(sizes, ", "),
                                  fmt::join(strides, ", "), offset, storage.key(), limit));
  }
}

void check_numel(const Value& function, Dtype dtype, std::span<const std::int64_t> sizes) {
  std::optional<std::uint64_t> bytes = element_size(dtype);
  for (const std::int64_t size : sizes) {
    if (size == 0) return;
    if (bytes) bytes = common::checked_mul(*bytes, static_cast<std::uint64_t>(size));
  }
  if (!bytes) {
    bad_arguments(function, fmt::format("a tensor of size ({}) has more bytes than 64 bits count",
                                        fmt::join(sizes, ", ")));
  }
}

}  // namespace pthload::torch
