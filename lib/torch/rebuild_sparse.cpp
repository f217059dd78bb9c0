// _rebuild_sparse_tensor and _rebuild_sparse_csr_tensor: sparse tensors, whose data are ordinary
// dense tensors, their parts (torch/_utils.py; docs/format.md §3). A sparse Tensor has no storage:
// its parts follow it in Checkpoint::tensors() as `<name>.indices`, `<name>.values`...
//
// Checked here: the layout, the number and kinds of the parts, their dtypes and the shape
// relations torch's constructors check without reading the data (nnz agreement, sparse and
// dense dimensions adding up to the size). Not checked: the index *values* (in bounds, sorted,
// compressed indices monotonic). torch checks those at load only when sparse invariant checking
// is enabled; open() reads no tensor data, so a consumer must validate them before indexing
// with them.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checkpoint/access.hpp"
#include "common/assert.hpp"
#include "pthload/error.hpp"
#include "torch/globals.hpp"
#include "torch/rebuild.hpp"
#include "torch/rebuild_args.hpp"

namespace pthload::torch {
namespace {

using pickle::Kind;
using pickle::Value;

std::optional<Layout> layout_from_name(std::string_view name) {
  if (name == "sparse_coo") return Layout::kSparseCoo;
  if (name == "sparse_csr") return Layout::kSparseCsr;
  if (name == "sparse_csc") return Layout::kSparseCsc;
  if (name == "sparse_bsr") return Layout::kSparseBsr;
  if (name == "sparse_bsc") return Layout::kSparseBsc;
  return std::nullopt;
}

Layout layout_of(const Value& value, const Value& function) {
  const std::string_view name = layout_name_argument(value, function);
  const auto layout = layout_from_name(name);
  if (!layout) {
    throw UnsupportedError(Errc::kTorchUnsupportedRebuild,
                           fmt::format("{}: layout '{}' is not a sparse layout pthload knows",
                                       global_name(function), name));
  }
  return *layout;
}

bool is_index_dtype(Dtype dtype) {
  return dtype == Dtype::kInt64 || dtype == Dtype::kInt32;
}

}  // namespace

Tensor rebuild_sparse(RebuildContext& context, const Value& function, const Value& args) {
  expect_arity(args, 2, 2, function);
  const Layout layout = layout_of(*args.items()[0], function);
  if (classify_global(function) == KnownGlobal::kRebuildSparseCsr && layout != Layout::kSparseCsr) {
    bad_arguments(function, fmt::format("layout is {}, not sparse_csr", layout_name(layout)));
  }
  const Value& data = *args.items()[1];
  if (!data.is(Kind::kTuple)) bad_arguments(function, "its data is not a tuple");
  const auto items = data.items();
  const bool coo = layout == Layout::kSparseCoo;
  // COO: (indices, values, size[, is_coalesced]); compressed: (compressed, plain, values, size).
  if (coo ? (items.size() < 3 || items.size() > 4) : items.size() != 4) {
    bad_arguments(function, fmt::format("{} data has {} items", layout_name(layout), items.size()));
  }
  const auto names = sparse_part_names(layout);
  // The arity checked above leaves every part, then the size (two parts for COO, three else).
  PTHLOAD_ASSERT(!names.empty() && items.size() > names.size());
  std::vector<Tensor> parts;
  parts.reserve(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    parts.push_back(dense_argument(context, *items[i], function, names[i]));
  }
  std::vector<std::int64_t> size;
  int_tuple(*items[names.size()], function, "size", size);
  if (coo && items.size() == 4 && !items[3]->is(Kind::kBool) && !items[3]->is(Kind::kNone)) {
    bad_arguments(function, "is_coalesced is not a bool");
  }

  const Tensor& values = parts.back();
  if (values.dim() == 0) bad_arguments(function, "values is 0-dimensional");
  if (coo) {
    const Tensor& indices = parts[0];
    if (indices.dtype() != Dtype::kInt64 || indices.dim() != 2) {
      bad_arguments(function, fmt::format("indices is a {}-D {} tensor, not a 2-D int64 one",
                                          indices.dim(), dtype_name(indices.dtype())));
    }
    // indices: (sparse_dim, nnz); values: (nnz, dense sizes...); size = sparse + dense sizes.
    const auto sparse_dim = static_cast<std::size_t>(indices.sizes()[0]);
    const std::size_t dense_dim = values.dim() - 1;
    if (indices.sizes()[1] != values.sizes()[0] || sparse_dim + dense_dim != size.size() ||
        !std::equal(values.sizes().begin() + 1, values.sizes().end(), size.begin() + sparse_dim)) {
      bad_arguments(function, fmt::format("indices ({}) and values ({}) do not fit size ({})",
                                          fmt::join(indices.sizes(), ", "),
                                          fmt::join(values.sizes(), ", "), fmt::join(size, ", ")));
    }
  } else {
    const Tensor& compressed = parts[0];
    const Tensor& plain = parts[1];
    if (!is_index_dtype(compressed.dtype()) || compressed.dtype() != plain.dtype() ||
        compressed.dim() == 0 || compressed.dim() != plain.dim()) {
      bad_arguments(function,
                    fmt::format("{} ({}-D {}) and {} ({}-D {}) are not index tensors of "
                                "one dtype and rank",
                                names[0], compressed.dim(), dtype_name(compressed.dtype()),
                                names[1], plain.dim(), dtype_name(plain.dtype())));
    }
    // Batch dimensions lead all three; the plain indices' last size is nnz, values' next one.
    const std::size_t batch = plain.dim() - 1;
    if (values.dim() <= batch || plain.sizes()[batch] != values.sizes()[batch] ||
        size.size() < batch + 2) {
      bad_arguments(function, fmt::format("{} ({}) and values ({}) do not fit size ({})", names[1],
                                          fmt::join(plain.sizes(), ", "),
                                          fmt::join(values.sizes(), ", "), fmt::join(size, ", ")));
    }
  }
  check_numel(function, values.dtype(), size);
  // A sparse tensor has no strides (torch raises for .stride()): zeros keep the shape rank.
  const std::vector<std::int64_t> strides(size.size(), 0);
  return internal::Access::make_tensor(layout, values.dtype(), size, strides,
                                       values.requires_grad(), std::move(parts));
}

}  // namespace pthload::torch
