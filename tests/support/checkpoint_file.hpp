// Test helper: the one writer of torch.save-format checkpoints for the suites — a data.pkl and
// records in a zip laid out as torch writes it (zip_builder), as bytes or as a temporary file;
// and a checkpoint of one float tensor of any size, too large to commit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "support/bytes.hpp"
#include "support/files.hpp"
#include "support/pickle_writer.hpp"
#include "support/zip_builder.hpp"

namespace pthload::test {

/// The archive of a checkpoint: "<folder>/data.pkl" holding `data_pkl`, then `records` (named in
/// full, "<folder>/data/0"), then "<folder>/version", as torch.save lays them out.
[[nodiscard]] inline zip_build::Built checkpoint_archive(
    const std::string& data_pkl, std::vector<zip_build::Record> records = {},
    std::string_view folder = "ck") {
  const std::string prefix = std::string(folder) + "/";
  records.insert(records.begin(), {.name = prefix + "data.pkl", .data = data_pkl});
  records.push_back({.name = prefix + "version", .data = "3\n"});
  return zip_build::build(records);
}

/// A checkpoint file "ck/data.pkl" + the given "ck/<name>" records, as torch.save lays it out.
[[nodiscard]] inline TempPath checkpoint_file(const std::string& data_pkl,
                                              std::vector<zip_build::Record> records = {}) {
  return TempPath(checkpoint_archive(data_pkl, std::move(records)).bytes);
}

/// `count` float32 values from `next` on, one apart, as a record's bytes; `next` moves past them.
[[nodiscard]] inline std::string distinct_floats(int count, float& next) {
  std::string data = float_record(count, next);
  next += static_cast<float>(count);
  return data;
}

/// A checkpoint file of `count` float32 tensors "t0".. over storages '0'..; storage i holds
/// `sizes[i % sizes.size()]` elements, each element's value distinct across the whole file. Tags
/// alternate cuda:0 / cuda:1.
[[nodiscard]] inline TempPath many_storages(int count, const std::vector<int>& sizes) {
  PickleWriter p;
  p.empty_dict().mark();
  std::vector<zip_build::Record> records;
  float next = 0.5f;
  for (int i = 0; i < count; ++i) {
    const int n = sizes[static_cast<std::size_t>(i) % sizes.size()];
    const std::string key = std::to_string(i);
    p.str("t" + key).tensor_v2("FloatStorage", key, n, 0, {n}, {1},
                               i % 2 == 0 ? "cuda:0" : "cuda:1");
    records.push_back({.name = "ck/data/" + key, .data = distinct_floats(n, next)});
  }
  p.setitems().stop();
  return checkpoint_file(p.bytes(), records);
}

/// The value float_checkpoint stores at index `i`.
[[nodiscard]] inline float float_checkpoint_value(std::size_t i) noexcept {
  return static_cast<float>(i % 4096);
}

/// torch.save({'w': tensor}) of `elements` float32 values (float_checkpoint_value(i) at i), in
/// "archive/" as torch 2.x names it: built in a few tens of milliseconds at 64 MB, for the tests
/// of large loads. Storage '0' is record "archive/data/0".
[[nodiscard]] inline zip_build::Built float_checkpoint(std::size_t elements) {
  std::string values(elements * sizeof(float), '\0');
  for (std::size_t i = 0; i < elements; ++i) {
    const float value = float_checkpoint_value(i);
    std::memcpy(values.data() + i * sizeof value, &value, sizeof value);
  }
  const auto count = static_cast<std::int64_t>(elements);
  PickleWriter p;
  p.empty_dict().str("w").tensor_v2("FloatStorage", "0", count, 0, {count}, {1}).setitem().stop();
  return checkpoint_archive(p.bytes(),
                            {{.name = "archive/byteorder", .data = "little"},
                             {.name = "archive/data/0", .data = std::move(values)}},
                            "archive");
}

/// float_checkpoint(elements), written to `path` (replacing what is there).
inline void write_float_checkpoint(const std::filesystem::path& path, std::size_t elements) {
  write_file(path, float_checkpoint(elements).bytes);
}

}  // namespace pthload::test
