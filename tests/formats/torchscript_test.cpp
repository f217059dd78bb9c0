// TorchScript archives (torch.jit.save, lib/formats/torchscript.cpp): data.pkl read like a
// torch.save pickle, whose module attributes name the tensors, and the constants.pkl it adds.
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
using pthload::test::PickleWriter;
using Record = pthload::test::zip_build::Record;

namespace {

Record bytes_record(const std::string& key, std::size_t n) {
  return {.name = "ck/data/" + key, .data = std::string(n, '\x01')};
}

Errc open_code(const std::string& pickle, std::vector<Record> records) {
  const auto file = checkpoint_file(pickle, std::move(records));
  return error_code_of([&] { (void)pthload::open(file.path()); });
}

}  // namespace

TEST_CASE("formats torchscript: a TorchScript archive names module attributes and constants") {
  // __torch__.Net() BUILD {'w': tensor, 'tl': build_tensorlist([tensor]), 'lin': Linear BUILD
  // {'weight': tensor}}; constants.pkl (tensor,) over constants/0.
  PickleWriter p;
  p.global("__torch__", "Net").empty_tuple().op('\x81').empty_dict().mark();
  p.str("w").tensor_v2("FloatStorage", "0", 2, 0, {2}, {1});
  p.str("tl").global("torch.jit._pickle", "build_tensorlist").mark().empty_list().mark();
  p.tensor_v2("FloatStorage", "1", 1, 0, {1}, {1}).appends().tuple().reduce();
  p.str("lin").global("__torch__.torch.nn.modules.linear", "Linear").empty_tuple().op('\x81');
  p.empty_dict().mark().str("weight").tensor_v2("FloatStorage", "2", 4, 0, {2, 2}, {2, 1});
  p.setitems().build();
  p.setitems().build().stop();
  PickleWriter constants;
  constants.mark().tensor_v2("FloatStorage", "0", 3, 0, {3}, {1}).tuple().stop();
  const auto file =
      checkpoint_file(p.bytes(), {bytes_record("0", 8),
                                  bytes_record("1", 4),
                                  bytes_record("2", 16),
                                  {.name = "ck/constants.pkl", .data = constants.bytes()},
                                  {.name = "ck/constants/0", .data = std::string(12, '\2')},
                                  {.name = "ck/code/__torch__.py", .data = "class Net"}});
  const auto checkpoint = pthload::open(file.path());
  CHECK(checkpoint.format() == pthload::Format::kTorchScript);
  std::vector<std::string> names;
  for (const auto& named : checkpoint.tensors())
    names.push_back(named.name);
  CHECK(names == std::vector<std::string>{"w", "tl.0", "lin.weight", "CONSTANTS.c0"});
  CHECK(checkpoint.tensor("CONSTANTS.c0").storage().key() == "0");
  CHECK(&checkpoint.tensor("CONSTANTS.c0").storage() != &checkpoint.tensor("w").storage());
  CHECK(checkpoint.storages().size() == 4);
}

TEST_CASE("formats torchscript: a TorchScript constant without its record is rejected") {
  PickleWriter p;
  p.empty_dict().stop();
  PickleWriter constants;
  constants.mark().tensor_v2("FloatStorage", "0", 3, 0, {3}, {1}).tuple().stop();
  CHECK(open_code(p.bytes(), {bytes_record("0", 12),
                              {.name = "ck/constants.pkl", .data = constants.bytes()}}) ==
        Errc::kTorchStorageRecordMissing);
}
