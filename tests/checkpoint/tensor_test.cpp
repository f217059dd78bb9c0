// pthload::Tensor as a value: its sizes and strides kept inside it or in one allocation, and its
// rarely used parts (sparse parts, quantization, wrapper subclass) shared by copies and replaced
// whole, never changed under a copy.
#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "checkpoint/access.hpp"
#include "pthload/dtype.hpp"
#include "pthload/tensor.hpp"

using pthload::Dtype;
using pthload::Layout;
using pthload::Tensor;

namespace {

std::vector<std::int64_t> as_vector(std::span<const std::int64_t> values) {
  return {values.begin(), values.end()};
}

Tensor meta_tensor(const std::vector<std::int64_t>& sizes) {
  std::vector<std::int64_t> strides(sizes.size());
  std::int64_t stride = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= sizes[i];
  }
  return pthload::internal::Access::make_tensor(Layout::kStrided, Dtype::kFloat32, sizes, strides,
                                                false);
}

void check_geometry(const Tensor& tensor, const std::vector<std::int64_t>& sizes) {
  CHECK(tensor.dim() == sizes.size());
  CHECK(as_vector(tensor.sizes()) == sizes);
  CHECK(as_vector(tensor.strides()) == as_vector(meta_tensor(sizes).strides()));
}

}  // namespace

TEST_CASE("tensor: sizes and strides survive copies and moves, however many dimensions") {
  // 0 to 2 dimensions fit inside the tensor, 3 and more take an allocation.
  const std::vector<std::vector<std::int64_t>> shapes = {
      {}, {7}, {3, 5}, {2, 3, 4}, {2, 3, 4, 5, 6, 7}};
  for (const auto& sizes : shapes) {
    CAPTURE(sizes.size());
    Tensor original = meta_tensor(sizes);
    check_geometry(original, sizes);

    Tensor copy = original;
    check_geometry(copy, sizes);
    if (!sizes.empty()) CHECK(copy.sizes().data() != original.sizes().data());

    Tensor assigned = meta_tensor({9, 9, 9, 9, 9});
    assigned = original;
    check_geometry(assigned, sizes);
    const Tensor& same = assigned;
    assigned = same;  // assigning itself keeps it whole
    check_geometry(assigned, sizes);

    Tensor moved = std::move(copy);
    check_geometry(moved, sizes);
    CHECK(copy.dim() == 0);  // NOLINT(bugprone-use-after-move): a moved-from tensor is empty
    CHECK(copy.sizes().empty());
    Tensor move_assigned = meta_tensor({1});
    move_assigned = std::move(moved);
    check_geometry(move_assigned, sizes);
    CHECK(moved.strides().empty());  // NOLINT(bugprone-use-after-move)
    check_geometry(original, sizes);
  }
}

TEST_CASE("tensor: parts are shared by copies; a quantization given to one copy is its own") {
  const std::vector<std::int64_t> sizes{4};
  const std::vector<std::int64_t> strides{1};
  std::vector<Tensor> parts{meta_tensor({1, 2}), meta_tensor({2})};
  const Tensor sparse = pthload::internal::Access::make_tensor(
      Layout::kSparseCoo, Dtype::kFloat32, sizes, strides, false, std::move(parts));
  REQUIRE(sparse.parts().size() == 2);
  CHECK(sparse.parts()[0].dim() == 2);
  CHECK(sparse.quantization() == nullptr);
  CHECK(sparse.wrapper_subclass() == nullptr);

  Tensor copy = sparse;
  CHECK(copy.parts().data() == sparse.parts().data());
  auto quantization = std::make_shared<pthload::Quantization>();
  quantization->scale = 0.5;
  pthload::internal::Access::set_quantization(copy, quantization);
  REQUIRE(copy.quantization() != nullptr);
  CHECK(copy.quantization()->scale == 0.5);
  CHECK(copy.parts().size() == 2);  // kept beside the quantization
  CHECK(sparse.quantization() == nullptr);

  auto wrapper = std::make_shared<pthload::WrapperSubclass>();
  wrapper->subclass = "m.Fake";
  pthload::internal::Access::set_wrapper_subclass(copy, wrapper, 3);
  REQUIRE(copy.wrapper_subclass() != nullptr);
  CHECK(copy.wrapper_subclass()->subclass == "m.Fake");
  CHECK(copy.quantization() != nullptr);  // kept beside the wrapper
  CHECK(copy.storage_offset() == 3);
  CHECK(sparse.wrapper_subclass() == nullptr);
  CHECK(sparse.storage_offset() == 0);

  const Tensor plain = meta_tensor({2});
  CHECK(plain.parts().empty());
  CHECK(plain.device() == pthload::Device::meta());
}

TEST_CASE("tensor: is_contiguous never overflows, and an empty tensor is contiguous") {
  // (0, 2^32, 2^32): no element; the product of the other sizes passes 64 bits.
  const std::int64_t big = std::int64_t{1} << 32;
  CHECK(pthload::internal::Access::make_tensor(Layout::kStrided, Dtype::kUInt8,
                                               std::vector<std::int64_t>{0, big, big},
                                               std::vector<std::int64_t>{0, big, 1}, false)
            .is_contiguous());
  // (2, 2^62, 4): the row-major stride of the first dimension would be 2^64, which no int64
  // stride is (a product wrapped to 0 would match the stride 0).
  const std::int64_t huge = std::int64_t{1} << 62;
  CHECK_FALSE(pthload::internal::Access::make_tensor(Layout::kStrided, Dtype::kUInt8,
                                                     std::vector<std::int64_t>{2, huge, 4},
                                                     std::vector<std::int64_t>{0, 4, 1}, false)
                  .is_contiguous());
  CHECK(pthload::internal::Access::make_tensor(Layout::kStrided, Dtype::kUInt8,
                                               std::vector<std::int64_t>{huge, 4},
                                               std::vector<std::int64_t>{4, 1}, false)
            .is_contiguous());
}

TEST_CASE("dtype: packed_nbytes rounds up, and the largest count does not wrap") {
  CHECK(pthload::packed_nbytes(Dtype::kQUInt4x2, 5) == 3);
  CHECK(pthload::packed_nbytes(Dtype::kQUInt2x4, 5) == 2);
  CHECK(pthload::packed_nbytes(Dtype::kQUInt2x4, 8) == 2);
  CHECK(pthload::packed_nbytes(Dtype::kQUInt4x2, UINT64_MAX) == std::uint64_t{1} << 63);
  CHECK(pthload::packed_nbytes(Dtype::kQUInt8, 7) == 7);
}
