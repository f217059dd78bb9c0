// Tensors whose bytes or geometry the pickle holds, as open() rebuilds them: numpy arrays kept
// opaque or refused, and nested tensors with hostile geometry (the pickles:
// tests/support/pickled_tensors.hpp). Their loads, which read the bytes, and the device-tensor
// and wrapper-subclass cases, which need map_location, are loaded_rebuilds_test.cpp.
#include <doctest/doctest.h>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/state.hpp"
#include "pickle/machine.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/checkpoint_file.hpp"
#include "support/error_code.hpp"
#include "support/pickle_writer.hpp"
#include "support/pickled_tensors.hpp"
#include "torch/naming.hpp"
#include "torch/tensor_builder.hpp"

using pthload::Errc;
using pthload::test::checkpoint_file;
using pthload::test::dict_of;
using pthload::test::error_code_of;
using pthload::test::error_thrown;
using pthload::test::kBigEndianInt16;
using pthload::test::kObjectArray;
using pthload::test::le64s;
using pthload::test::nested_pickle;
using pthload::test::nested_records;
using pthload::test::numpy_array;
using pthload::test::PickleWriter;
using Record = pthload::test::zip_build::Record;

TEST_CASE("torch: numpy object arrays stay opaque with a reason") {
  const auto file = checkpoint_file(dict_of(kObjectArray), {});
  const auto checkpoint = pthload::open(file.path());
  CHECK(checkpoint.tensors().empty());
  REQUIRE(checkpoint.opaque_values().size() == 1);
  CHECK(checkpoint.opaque_values()[0].name == "a");
  CHECK(checkpoint.opaque_values()[0].reason.find("object") != std::string::npos);
}

TEST_CASE("torch: malformed numpy arrays are FormatErrors") {
  auto wrong_count = kBigEndianInt16;  // shape (3,) over 6 bytes: claim 4 elements
  wrong_count[wrong_count.find("\x4b\x03\x85") + 1] = '\x04';
  CHECK(error_code_of([&] {
          (void)pthload::open(checkpoint_file(dict_of(wrong_count), {}).path());
        }) == Errc::kTorchBadNumpyArray);
  auto bad_order = kBigEndianInt16;
  bad_order[bad_order.find("\x3e\x71\x0f")] = 'x';
  CHECK(error_code_of([&] {
          (void)pthload::open(checkpoint_file(dict_of(bad_order), {}).path());
        }) == Errc::kTorchBadNumpyArray);
  // A BUILD state of the wrong arity.
  PickleWriter p;
  p.empty_dict().str("a").global("numpy.core.multiarray", "_reconstruct");
  p.mark().global("numpy", "ndarray").ints({0}).str("b").tuple().reduce();
  p.mark().integer(1).tuple().build().setitem();
  CHECK(error_code_of([&] { (void)pthload::open(checkpoint_file(p.stop().bytes(), {}).path()); }) ==
        Errc::kTorchBadNumpyArray);
}

TEST_CASE("torch: numpy arrays have at most 64 dimensions, numpy's NPY_MAXDIMS") {
  const auto array_of_rank = [](std::size_t rank) {
    const std::vector<std::int64_t> shape(rank, 1);
    PickleWriter p;
    pthload::test::numpy_array(p, "u1", "|", shape, [](PickleWriter& w) {
      w.op('C').raw(std::string(1, '\x01')).raw("\x07");  // SHORT_BINBYTES b'\x07'
    });
    return checkpoint_file(dict_of(p.bytes()), {});
  };
  const auto checkpoint = pthload::open(array_of_rank(64).path());
  REQUIRE(checkpoint.tensors().size() == 1);
  CHECK(checkpoint.tensors()[0].tensor.dim() == 64);
  const auto e =
      error_thrown<pthload::FormatError>([&] { (void)pthload::open(array_of_rank(65).path()); });
  CHECK(e.code() == Errc::kTorchBadNumpyArray);
  CHECK(std::string(e.what()).find("65 dimensions (at most 64,") != std::string::npos);
}

TEST_CASE("torch: numpy arrays sharing spelled bytes decode each spelling once") {
  // A memoized str of 64 KiB ('a's, memo 0) under 2001 arrays: 1000 share one memoized BUILD
  // state (memo 1) holding _codecs.encode(str, 'latin1'); 1000 have encode calls of their own,
  // naming latin1 two ways; 1 encodes it as utf-8. Two spellings, so two decodes. Decoding for
  // each array cost arrays × text (20 000 arrays over 1 MiB: 41 s).
  constexpr std::int64_t kText = 64 << 10;
  constexpr int kArrays = 1000;
  const auto reconstruct = [](PickleWriter& p) {
    p.global("numpy.core.multiarray", "_reconstruct").mark().global("numpy", "ndarray");
    p.ints({0}).str("b").tuple().reduce();
  };
  const auto encode_memoized = [](std::string_view encoding) {
    return [=](PickleWriter& p) {
      p.global("_codecs", "encode").mark().get(0).str(encoding).tuple().reduce();
    };
  };
  PickleWriter p;
  p.empty_list().mark();
  reconstruct(p);
  p.mark().integer(1).ints({kText});
  p.global("numpy", "dtype").mark().str("u1").boolean(false).boolean(true).tuple().reduce();
  p.mark().integer(3).str("|").none().none().none().integer(-1).integer(-1).integer(0);
  p.tuple().build().boolean(false);
  p.global("_codecs", "encode").mark().str(std::string(kText, 'a')).put(0).str("latin1");
  p.tuple().reduce().tuple().put(1).build();
  for (int i = 1; i < kArrays; ++i) {
    reconstruct(p);
    p.get(1).build();
  }
  for (int i = 0; i < kArrays; ++i)
    numpy_array(p, "u1", "|", {kText}, encode_memoized(i % 2 == 0 ? "latin1" : "ISO_8859_1"));
  numpy_array(p, "u1", "|", {kText}, encode_memoized("utf-8"));
  const auto bytes = p.appends().stop().bytes();

  const pthload::Limits limits;
  pthload::internal::CheckpointState state;
  pthload::torch::TensorBuilder builder(state, "ck/data/", limits);
  state.pickle = pthload::pickle::Machine(limits).run(std::as_bytes(std::span(bytes)));
  pthload::torch::collect_named_tensors(*state.pickle.root, state.pickle.end_offset, builder,
                                        limits, state.tensors, state.opaque_values);
  REQUIRE(state.tensors.size() == 2 * kArrays + 1);
  CHECK(builder.decoded_byte_spellings() == 2);
  // And two storages, though torch.load makes each its own array: pthload's tensors are
  // read-only, and a copy load then copies each spelling's bytes once, not once per array.
  CHECK(state.storages.size() == 2);
  CHECK(state.tensors.back().tensor.storage().nbytes() == static_cast<std::uint64_t>(kText));
}

TEST_CASE("torch: hostile nested tensor geometry is an error with record and offset") {
  auto code_of = [](const std::string& pickle, std::vector<Record> records) {
    return error_code_of(
        [&] { (void)pthload::open(checkpoint_file(pickle, std::move(records)).path()); });
  };
  // A component past the buffer's end.
  CHECK(code_of(nested_pickle(), nested_records(le64s({3, 1LL << 40}), le64s({1, 1}),
                                                le64s({0, 3}))) == Errc::kTorchTensorOutOfBounds);
  // A negative stride, reported at its byte in its record.
  const auto e = error_thrown<pthload::FormatError>([&] {
    (void)pthload::open(
        checkpoint_file(nested_pickle(),
                        nested_records(le64s({3, 5}), le64s({1, -1}), le64s({0, 3})))
            .path());
  });
  CHECK(e.code() == Errc::kTorchBadNestedTensor);
  CHECK(e.context().record == "ck/data/2");
  CHECK(e.context().offset == 8);
  CHECK(code_of(nested_pickle(), nested_records(le64s({3, 5}), le64s({1, 1}), le64s({0, -3}))) ==
        Errc::kTorchBadNestedTensor);
  // sizes must be int64 and [n, d] beside strides [n, d].
  CHECK(code_of(nested_pickle(1, "IntStorage"),
                nested_records(std::string(8, '\0'), le64s({1, 1}), le64s({0, 3}))) ==
        Errc::kTorchBadNestedTensor);
  CHECK(code_of(nested_pickle(), nested_records(le64s({3, 5}), le64s({1, 1}), le64s({0}))) ==
        Errc::kTorchStorageTooSmall);
}
