// The torch layer's rebuilds beyond dense tensors, over built checkpoints: quantized
// (_rebuild_qtensor), sparse (_rebuild_sparse_tensor, _rebuild_sparse_csr_tensor), meta
// (_rebuild_meta_tensor_no_storage) and storage-less backends
// (_rebuild_device_tensor_from_cpu_tensor), and each malformed form.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/checkpoint_file.hpp"
#include "support/error_code.hpp"
#include "support/pickle_writer.hpp"

using pthload::Errc;
using pthload::test::checkpoint_file;
using pthload::test::error_code_of;
using pthload::test::error_thrown;
using pthload::test::PickleWriter;
using Record = pthload::test::zip_build::Record;

namespace {

std::vector<std::int64_t> vec(std::span<const std::int64_t> s) {
  return {s.begin(), s.end()};
}

Record bytes_record(const std::string& key, std::size_t n) {
  return {.name = "ck/data/" + key, .data = std::string(n, '\x01')};
}

Errc open_code(const std::string& pickle, std::vector<Record> records) {
  const auto file = checkpoint_file(pickle, std::move(records));
  return error_code_of([&] { (void)pthload::open(file.path()); });
}

// _rebuild_qtensor(storage '0' (QInt8Storage, 12), 0, (3, 4), (4, 1), params, False,
// OrderedDict()); `params` writes the quantizer_params tuple.
template <typename Params>
std::string qtensor(Params params, int arity = 7) {
  PickleWriter p;
  p.global("torch._utils", "_rebuild_qtensor").mark();
  p.storage("QInt8Storage", "0", "cpu", 12).integer(0).ints({3, 4}).ints({4, 1});
  params(p);
  if (arity > 5) p.boolean(false);
  if (arity > 6) p.global("collections", "OrderedDict").empty_tuple().reduce();
  return p.tuple().reduce().stop().bytes();
}

// Per-channel params with `scales` float64 and `zero_points` int64 tensors of n elements.
auto per_channel(std::int64_t n, std::int64_t axis,
                 std::string_view scheme = "per_channel_affine") {
  return [=](PickleWriter& p) {
    p.mark().global("torch", scheme);
    p.tensor_v2("DoubleStorage", "1", n, 0, {n}, {1});
    p.tensor_v2("LongStorage", "2", n, 0, {n}, {1});
    p.integer(axis).tuple();
  };
}

std::vector<Record> per_channel_records(std::size_t n) {
  return {bytes_record("0", 12), bytes_record("1", 8 * n), bytes_record("2", 8 * n)};
}

}  // namespace

TEST_CASE("torch: a per-tensor quantized tensor keeps scale, zero point and its integers") {
  const auto file = checkpoint_file(qtensor([](PickleWriter& p) {
                                      p.mark().global("torch", "per_tensor_affine");
                                      p.real(0.25).integer(-3).tuple();
                                    }),
                                    {bytes_record("0", 12)});
  const auto checkpoint = pthload::open(file.path());
  REQUIRE(checkpoint.tensors().size() == 1);
  const auto& t = checkpoint.tensors()[0].tensor;
  CHECK(t.dtype() == pthload::Dtype::kQInt8);
  CHECK(vec(t.sizes()) == std::vector<std::int64_t>{3, 4});
  REQUIRE(t.quantization() != nullptr);
  CHECK(t.quantization()->scheme == pthload::QScheme::kPerTensorAffine);
  CHECK(t.quantization()->scale == 0.25);
  CHECK(t.quantization()->zero_point == -3);
  CHECK_FALSE(t.quantization()->scales.has_value());
  CHECK(pthload::qscheme_name(t.quantization()->scheme) == "per_tensor_affine");
}

TEST_CASE("torch: a per-channel quantized tensor has one scale and zero point per channel") {
  const auto file = checkpoint_file(qtensor(per_channel(4, 1)), per_channel_records(4));
  const auto checkpoint = pthload::open(file.path());
  REQUIRE(checkpoint.tensors().size() == 1);  // scales and zero points are not listed
  const auto* q = checkpoint.tensors()[0].tensor.quantization();
  REQUIRE(q != nullptr);
  CHECK(q->scheme == pthload::QScheme::kPerChannelAffine);
  CHECK(q->axis == 1);
  REQUIRE(q->scales.has_value());
  CHECK(q->scales->dtype() == pthload::Dtype::kFloat64);
  CHECK(q->zero_points->numel() == 4);
  CHECK(checkpoint.storages().size() == 3);
}

TEST_CASE("torch: per_channel_affine with floating zero points is float qparams, as in torch") {
  // torch.save writes torch.per_channel_affine for both per-channel schemes.
  const auto file =
      checkpoint_file(qtensor([](PickleWriter& p) {
                        p.mark().global("torch", "per_channel_affine");
                        p.tensor_v2("FloatStorage", "1", 3, 0, {3}, {1});
                        p.tensor_v2("FloatStorage", "2", 3, 0, {3}, {1});
                        p.integer(0).tuple();
                      }),
                      {bytes_record("0", 12), bytes_record("1", 12), bytes_record("2", 12)});
  const auto checkpoint = pthload::open(file.path());
  const auto* q = checkpoint.tensors()[0].tensor.quantization();
  REQUIRE(q != nullptr);
  CHECK(q->scheme == pthload::QScheme::kPerChannelAffineFloatQParams);
  CHECK(q->zero_points->dtype() == pthload::Dtype::kFloat32);
}

TEST_CASE("torch: malformed quantizer params are rejected") {
  // Scales for 3 channels along an axis of size 4: torch's quantizer refuses it too.
  CHECK(open_code(qtensor(per_channel(3, 1)), per_channel_records(3)) ==
        Errc::kTorchBadQuantizerParams);
  // An axis outside the tensor.
  CHECK(open_code(qtensor(per_channel(4, 2)), per_channel_records(4)) ==
        Errc::kTorchBadQuantizerParams);
  CHECK(open_code(qtensor(per_channel(4, -1)), per_channel_records(4)) ==
        Errc::kTorchBadQuantizerParams);
  // Per-tensor params without a zero point; a qscheme that is no global.
  CHECK(open_code(qtensor([](PickleWriter& p) {
                    p.mark().global("torch", "per_tensor_affine").real(0.5).tuple();
                  }),
                  {bytes_record("0", 12)}) == Errc::kTorchBadQuantizerParams);
  CHECK(open_code(
            qtensor([](PickleWriter& p) { p.mark().str("affine").real(0.5).integer(0).tuple(); }),
            {bytes_record("0", 12)}) == Errc::kTorchBadQuantizerParams);
  // A symmetric qscheme: valid torch, which torch.load refuses.
  CHECK(open_code(qtensor([](PickleWriter& p) {
                    p.mark().global("torch", "per_tensor_symmetric").real(0.5).integer(0).tuple();
                  }),
                  {bytes_record("0", 12)}) == Errc::kTorchUnsupportedRebuild);
  // Scales that are no tensor.
  CHECK(open_code(qtensor([](PickleWriter& p) {
                    p.mark().global("torch", "per_channel_affine").none().none().integer(0).tuple();
                  }),
                  {bytes_record("0", 12)}) == Errc::kTorchUnsupportedRebuild);
}

TEST_CASE("torch: _rebuild_qtensor with the wrong arity or storage is rejected") {
  const auto per_tensor = [](PickleWriter& p) {
    p.mark().global("torch", "per_tensor_affine").real(0.5).integer(0).tuple();
  };
  CHECK(open_code(qtensor(per_tensor, 6), {bytes_record("0", 12)}) ==
        Errc::kTorchBadRebuildArguments);
  PickleWriter float_storage;
  float_storage.global("torch._utils", "_rebuild_qtensor").mark();
  float_storage.storage("FloatStorage", "0", "cpu", 3).integer(0).ints({3}).ints({1});
  per_tensor(float_storage);
  float_storage.boolean(false).global("collections", "OrderedDict").empty_tuple().reduce();
  float_storage.tuple().reduce().stop();
  CHECK(open_code(float_storage.bytes(), {bytes_record("0", 12)}) ==
        Errc::kTorchBadRebuildArguments);
  // A quantized tensor past its storage's end.
  PickleWriter past;
  past.global("torch._utils", "_rebuild_qtensor").mark();
  past.storage("QInt8Storage", "0", "cpu", 12).integer(1).ints({3, 4}).ints({4, 1});
  per_tensor(past);
  past.boolean(false).global("collections", "OrderedDict").empty_tuple().reduce();
  past.tuple().reduce().stop();
  CHECK(open_code(past.bytes(), {bytes_record("0", 12)}) == Errc::kTorchTensorOutOfBounds);
}

namespace {

// _rebuild_sparse_tensor(_get_layout('torch.sparse_coo'), (indices (2, nnz), values (nnz,),
// size)) with indices over LongStorage '0' and values over FloatStorage '1'.
std::string coo(std::int64_t nnz, std::int64_t values_nnz, std::initializer_list<std::int64_t> size,
                bool with_coalesced = true, std::string_view layout = "torch.sparse_coo") {
  PickleWriter p;
  p.global("torch._utils", "_rebuild_sparse_tensor").mark();
  p.global("torch.serialization", "_get_layout").mark().str(layout).tuple().reduce();
  p.mark();
  p.tensor_v2("LongStorage", "0", 2 * nnz, 0, {2, nnz}, {nnz, 1});
  p.tensor_v2("FloatStorage", "1", values_nnz, 0, {values_nnz}, {1});
  p.ints(size);
  if (with_coalesced) p.boolean(false);
  p.tuple();
  return p.tuple().reduce().stop().bytes();
}

std::vector<Record> coo_records(std::size_t nnz) {
  return {bytes_record("0", 16 * nnz), bytes_record("1", 4 * nnz)};
}

}  // namespace

TEST_CASE("torch: a sparse COO tensor is listed, then its indices and values") {
  for (const bool with_coalesced : {true, false}) {
    const auto file = checkpoint_file(coo(3, 3, {4, 5}, with_coalesced), coo_records(3));
    const auto checkpoint = pthload::open(file.path());
    REQUIRE(checkpoint.tensors().size() == 3);
    const auto& sparse = checkpoint.tensors()[0];
    CHECK(sparse.name.empty());
    CHECK(sparse.tensor.layout() == pthload::Layout::kSparseCoo);
    CHECK_FALSE(sparse.tensor.has_storage());
    CHECK(sparse.tensor.dtype() == pthload::Dtype::kFloat32);
    CHECK(vec(sparse.tensor.sizes()) == std::vector<std::int64_t>{4, 5});
    CHECK(sparse.tensor.parts().size() == 2);
    CHECK(checkpoint.tensors()[1].name == "indices");
    CHECK(checkpoint.tensors()[2].name == "values");
    CHECK(error_code_of([&] { (void)sparse.tensor.content_checksum(); }) ==
          Errc::kTorchTensorWithoutData);
  }
}

TEST_CASE("torch: sparse COO parts that do not fit each other are rejected") {
  // nnz 3 in indices, 2 values.
  CHECK(open_code(coo(3, 2, {4, 5}), coo_records(3)) == Errc::kTorchBadRebuildArguments);
  // Two sparse dimensions and no dense ones, but a 3-D size.
  CHECK(open_code(coo(3, 3, {4, 5, 6}), coo_records(3)) == Errc::kTorchBadRebuildArguments);
  // An unknown layout; the wrong arity.
  CHECK(open_code(coo(3, 3, {4, 5}, true, "torch.jagged"), coo_records(3)) ==
        Errc::kTorchUnsupportedRebuild);
  PickleWriter one;
  one.global("torch._utils", "_rebuild_sparse_tensor").mark();
  one.global("torch", "sparse_coo").tuple().reduce().stop();
  CHECK(open_code(one.bytes(), {}) == Errc::kTorchBadRebuildArguments);
}

TEST_CASE("torch: sparse index values are not checked (open() reads no data)") {
  // Indices all 0x0101010101010101, far outside size (4, 5): accepted, as documented in
  // lib/torch/rebuild_sparse.cpp; a consumer validates them.
  CHECK(open_code(coo(3, 3, {4, 5}), coo_records(3)) == Errc::kOk);
}

TEST_CASE("torch: a CSR tensor (1.13's _rebuild_sparse_csr_tensor) names its parts") {
  PickleWriter p;
  p.empty_dict().str("m");
  p.global("torch._utils", "_rebuild_sparse_csr_tensor").mark();
  p.global("torch", "sparse_csr").mark();
  p.tensor_v2("LongStorage", "0", 4, 0, {4}, {1});
  p.tensor_v2("LongStorage", "1", 2, 0, {2}, {1});
  p.tensor_v2("FloatStorage", "2", 2, 0, {2}, {1});
  p.ints({3, 3}).tuple().tuple().reduce().setitem().stop();
  const auto file = checkpoint_file(
      p.bytes(), {bytes_record("0", 32), bytes_record("1", 16), bytes_record("2", 8)});
  const auto checkpoint = pthload::open(file.path());
  REQUIRE(checkpoint.tensors().size() == 4);
  CHECK(checkpoint.tensors()[0].tensor.layout() == pthload::Layout::kSparseCsr);
  CHECK(checkpoint.tensors()[1].name == "m.crow_indices");
  CHECK(checkpoint.tensors()[2].name == "m.col_indices");
  CHECK(checkpoint.tensors()[3].name == "m.values");
}

namespace {

std::string meta(std::initializer_list<std::int64_t> size,
                 std::initializer_list<std::int64_t> stride, int arity = 4) {
  PickleWriter p;
  p.global("torch._utils", "_rebuild_meta_tensor_no_storage").mark();
  p.global("torch", "float16").ints(size).ints(stride);
  if (arity > 3) p.boolean(true);
  return p.tuple().reduce().stop().bytes();
}

}  // namespace

TEST_CASE("torch: a meta tensor has a geometry and no storage") {
  const auto file = checkpoint_file(meta({2, 3}, {1, 2}), {});
  const auto checkpoint = pthload::open(file.path());
  REQUIRE(checkpoint.tensors().size() == 1);
  const auto& t = checkpoint.tensors()[0].tensor;
  CHECK_FALSE(t.has_storage());
  CHECK(t.device() == pthload::Device::meta());
  CHECK(t.dtype() == pthload::Dtype::kFloat16);
  CHECK(t.nbytes() == 12);
  CHECK(t.requires_grad());
  CHECK(checkpoint.storages().empty());
  CHECK(error_code_of([&] { (void)t.data(); }) == Errc::kTorchTensorWithoutData);
}

TEST_CASE("torch: malformed meta tensors are rejected") {
  CHECK(open_code(meta({2, 3}, {1}), {}) == Errc::kTorchBadRebuildArguments);
  CHECK(open_code(meta({2, 3}, {1, 2}, 3), {}) == Errc::kTorchBadRebuildArguments);
  // 2^62 × 2^62 elements: no byte count bounds a meta tensor, so numel must fit.
  CHECK(open_code(meta({INT64_C(1) << 62, INT64_C(1) << 62}, {1, 1}), {}) ==
        Errc::kTorchBadRebuildArguments);
}

namespace {

std::string device_from_cpu(std::string_view dtype, bool string_device = true) {
  PickleWriter p;
  p.global("torch._utils", "_rebuild_device_tensor_from_cpu_tensor").mark();
  p.tensor_v2("FloatStorage", "0", 4, 0, {2, 2}, {2, 1});
  p.global("torch", dtype);
  if (string_device) {
    p.str("privateuseone:0");
  } else {
    p.integer(0);
  }
  return p.boolean(false).tuple().reduce().stop().bytes();
}

}  // namespace

TEST_CASE("torch: a storage-less backend's tensor is its CPU data") {
  const auto file = checkpoint_file(device_from_cpu("float32"), {bytes_record("0", 16)});
  const auto checkpoint = pthload::open(file.path());
  REQUIRE(checkpoint.tensors().size() == 1);
  const auto& t = checkpoint.tensors()[0].tensor;
  CHECK(t.has_storage());
  CHECK(t.device() == pthload::Device::cpu());
  CHECK(vec(t.sizes()) == std::vector<std::int64_t>{2, 2});
  CHECK(open_code(device_from_cpu("float64"), {bytes_record("0", 16)}) ==
        Errc::kTorchUnsupportedRebuild);
  CHECK(open_code(device_from_cpu("float32", false), {bytes_record("0", 16)}) ==
        Errc::kTorchBadRebuildArguments);
}

TEST_CASE("torch: the storage-less rebuilds refuse a wrong arity, naming the function") {
  for (const char* name :
       {"_rebuild_nested_tensor", "_rebuild_wrapper_subclass", "_rebuild_device_tensor_from_numpy",
        "_rebuild_xla_tensor", "_rebuild_mlc_tensor"}) {
    PickleWriter p;
    p.global("torch._utils", name).mark().none().tuple().reduce().stop();
    const auto file = checkpoint_file(p.bytes(), {});
    const auto e = error_thrown<pthload::FormatError>([&] { (void)pthload::open(file.path()); });
    CHECK(e.code() == Errc::kTorchBadRebuildArguments);
    CHECK(std::string(e.what()).find(name) != std::string::npos);
  }
}

namespace {

// A quantized tensor of `sizes` and `strides` over `storage` (type and element count), per-tensor
// affine.
std::string qtensor_of(std::string_view storage, std::int64_t numel,
                       std::initializer_list<std::int64_t> sizes,
                       std::initializer_list<std::int64_t> strides) {
  PickleWriter p;
  p.global("torch._utils", "_rebuild_qtensor").mark();
  p.storage(storage, "0", "cpu", numel).integer(0).ints(sizes).ints(strides);
  p.mark().global("torch", "per_tensor_affine").real(0.5).integer(0).tuple();
  p.boolean(false).global("collections", "OrderedDict").empty_tuple().reduce();
  return p.tuple().reduce().stop().bytes();
}

// A float tensor inside `levels` _rebuild_from_type_v2 calls, each the function of the one
// around it (torch writes one: a subclass's tensor).
std::string subclass_of_subclass(int levels) {
  PickleWriter p;
  p.global("torch._tensor", "_rebuild_from_type_v2").mark();
  for (int i = 1; i < levels; ++i)
    p.global("torch._tensor", "_rebuild_from_type_v2").none().mark();
  p.global("torch._utils", "_rebuild_tensor_v2").none().mark();
  p.storage("FloatStorage", "0", "cpu", 1).integer(0).ints({1}).ints({1}).boolean(false);
  p.global("collections", "OrderedDict").empty_tuple().reduce().tuple();
  for (int i = 0; i < levels; ++i)
    p.none().tuple();
  return p.reduce().stop().bytes();
}

}  // namespace

TEST_CASE("torch: a quantized tensor whose sizes multiply past 64 bits is refused") {
  // 3 x 6148914691236517207 is 2^64 + 5: counted in 64 bits, a 5-element tensor whose zero
  // stride keeps it inside 3 bytes, which readers sized by numel() would overrun.
  CHECK(open_code(qtensor_of("QInt8Storage", 3, {6148914691236517207, 3}, {0, 1}),
                  {bytes_record("0", 3)}) == Errc::kTorchBadRebuildArguments);
}

TEST_CASE("torch: packed quint4x2 bytes are counted without wrapping") {
  // (2^32 - 1) x (2^32 + 1) = 2^64 - 1 elements: ceil(numel / 2) computed as (numel + 1) / 2
  // wraps to 0 bytes, which an empty storage would hold.
  CHECK(open_code(qtensor_of("QUInt4x2Storage", 0, {4294967295, 4294967297}, {4294967297, 1}),
                  {bytes_record("0", 0)}) == Errc::kTorchTensorOutOfBounds);
  // 5 packed integers take 3 bytes.
  CHECK(open_code(qtensor_of("QUInt4x2Storage", 3, {5}, {1}), {bytes_record("0", 3)}) == Errc::kOk);
  CHECK(open_code(qtensor_of("QUInt4x2Storage", 2, {5}, {1}), {bytes_record("0", 2)}) ==
        Errc::kTorchTensorOutOfBounds);
}

TEST_CASE("torch: a packed dtype outside _rebuild_qtensor is refused") {
  // Its readers take ceil(numel / 2) contiguous bytes from the offset: a dense rebuild's strides
  // and offset (here 100 000 integers shown by a 1-byte storage with stride 0) do not apply.
  PickleWriter p;
  p.tensor_v2("QUInt4x2Storage", "0", 1, 0, {100000}, {0}).stop();
  CHECK(open_code(p.bytes(), {bytes_record("0", 1)}) == Errc::kTorchUnsupportedRebuild);
}

TEST_CASE("torch: rebuild calls nested past kMaxRebuildNesting are refused, not recursed into") {
  const auto listed = [](int levels) {
    const auto file = checkpoint_file(subclass_of_subclass(levels),
                                      {{.name = "ck/data/0", .data = std::string(4, '\0')}});
    return pthload::open(file.path()).tensors().size();
  };
  CHECK(listed(3) == 1);
  // Thousands of levels fit the pickle's nesting limit, and each recursed three frames deep.
  const auto file = checkpoint_file(subclass_of_subclass(4000),
                                    {{.name = "ck/data/0", .data = std::string(4, '\0')}});
  CHECK(error_code_of([&] { (void)pthload::open(file.path()); }) == Errc::kTorchLimitExceeded);
}
