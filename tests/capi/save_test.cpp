// The C API's saving (pthload_save*, pthload.h) through the shared library as a C program links
// it: tensors from the caller's memory and loaded checkpoints written, then read back through
// pthload_load; the caller's mistakes as codes; the callbacks; the structs that grow.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "pthload/pthload.h"
#include "support/files.hpp"

using pthload::test::file_bytes;
using pthload::test::TempPath;

namespace {

struct CheckpointDeleter {
  void operator()(pthload_checkpoint* checkpoint) const { pthload_checkpoint_free(checkpoint); }
};
using CheckpointPtr = std::unique_ptr<pthload_checkpoint, CheckpointDeleter>;

struct RecordsDeleter {
  void operator()(pthload_records* records) const { pthload_records_free(records); }
};
using RecordsPtr = std::unique_ptr<pthload_records, RecordsDeleter>;

int code(pthload::Errc errc) {
  return static_cast<int>(errc);
}

CheckpointPtr load_cpu(const std::filesystem::path& path) {
  pthload_options options;
  pthload_options_init(&options);
  options.map_to = "cpu";
  pthload_checkpoint* checkpoint = nullptr;
  const int loaded = pthload_load(path.c_str(), &options, &checkpoint);
  INFO(pthload_last_error()->what);
  REQUIRE(loaded == PTHLOAD_OK);
  return CheckpointPtr(checkpoint);
}

CheckpointPtr load_bytes_cpu(const std::vector<std::byte>& bytes) {
  pthload_options options;
  pthload_options_init(&options);
  options.map_to = "cpu";
  pthload_checkpoint* checkpoint = nullptr;
  const int loaded = pthload_load_bytes(bytes.data(), bytes.size(), &options, &checkpoint);
  INFO(pthload_last_error()->what);
  REQUIRE(loaded == PTHLOAD_OK);
  return CheckpointPtr(checkpoint);
}

std::vector<std::int64_t> shape_of(const pthload_tensor* tensor) {
  const std::int64_t* shape = pthload_tensor_shape(tensor);
  return {shape, shape + pthload_tensor_ndim(tensor)};
}

std::vector<std::int64_t> strides_of(const pthload_tensor* tensor) {
  const std::int64_t* strides = pthload_tensor_strides(tensor);
  return {strides, strides + pthload_tensor_ndim(tensor)};
}

std::vector<std::byte> elements_of(const pthload_tensor* tensor) {
  std::vector<std::byte> bytes(pthload_tensor_nbytes(tensor));
  REQUIRE(pthload_tensor_copy(tensor, bytes.data(), bytes.size()) == PTHLOAD_OK);
  return bytes;
}

std::uint64_t checksum_of(const pthload_tensor* tensor) {
  std::uint64_t checksum = 0;
  REQUIRE(pthload_tensor_checksum(tensor, &checksum) == PTHLOAD_OK);
  return checksum;
}

const pthload_tensor* find(const pthload_checkpoint* checkpoint, const char* name) {
  const pthload_tensor* tensor = nullptr;
  REQUIRE(pthload_checkpoint_find_tensor(checkpoint, name, &tensor) == PTHLOAD_OK);
  return tensor;
}

// The storage records of a saved file ("<archive>/data/<key>").
std::size_t data_records(const std::filesystem::path& path) {
  pthload_records* raw = nullptr;
  REQUIRE(pthload_records_open(path.c_str(), nullptr, &raw) == PTHLOAD_OK);
  const RecordsPtr records(raw);
  std::size_t count = 0;
  for (std::size_t i = 0; i < pthload_records_count(records.get()); ++i) {
    pthload_record_info info = {sizeof info};
    REQUIRE(pthload_records_info(records.get(), i, &info) == PTHLOAD_OK);
    if (std::string(info.name).find("/data/") != std::string::npos) ++count;
  }
  return count;
}

// Two tensors in the caller's memory: a 2x3 float32 matrix over its own storage and an int64
// vector; and a transposed view of the matrix's storage, which shares it.
struct MemoryTensors {
  std::array<float, 6> matrix{1.5f, -2.0f, 3.25f, 0.0f, 5.0f, -6.5f};
  std::array<std::int64_t, 4> steps{10, 20, -30, 1LL << 40};
  std::array<std::int64_t, 2> matrix_sizes{2, 3};
  std::array<std::int64_t, 1> steps_sizes{4};
  std::array<std::int64_t, 2> transposed_sizes{3, 2};
  std::array<std::int64_t, 2> transposed_strides{1, 3};

  [[nodiscard]] std::vector<pthload_save_tensor> list() const {
    pthload_save_tensor weight;
    pthload_save_tensor_init(&weight);
    weight.name = "layer.weight";
    weight.dtype = PTHLOAD_FLOAT32;
    weight.ndim = matrix_sizes.size();
    weight.sizes = matrix_sizes.data();
    weight.storage = matrix.data();
    weight.storage_nbytes = sizeof matrix;
    weight.requires_grad = 1;
    pthload_save_tensor counts;
    pthload_save_tensor_init(&counts);
    counts.name = "counts";
    counts.dtype = PTHLOAD_INT64;
    counts.ndim = steps_sizes.size();
    counts.sizes = steps_sizes.data();
    counts.storage = steps.data();
    counts.storage_nbytes = sizeof steps;
    pthload_save_tensor transposed = weight;
    transposed.name = "layer.weight_t";
    transposed.ndim = transposed_sizes.size();
    transposed.sizes = transposed_sizes.data();
    transposed.strides = transposed_strides.data();
    transposed.requires_grad = 0;
    return {weight, counts, transposed};
  }
};

}  // namespace

TEST_CASE("capi: save from memory, then load: names, dtypes, shapes, strides and bytes come back") {
  const MemoryTensors memory;
  const std::vector<pthload_save_tensor> tensors = memory.list();
  const TempPath out(".pt");
  const int saved = pthload_save(out.path().c_str(), tensors.data(), tensors.size(), nullptr);
  INFO(pthload_last_error()->what);
  REQUIRE(saved == PTHLOAD_OK);
  CHECK(pthload_last_error()->code == PTHLOAD_OK);

  const CheckpointPtr loaded = load_cpu(out.path());
  REQUIRE(pthload_checkpoint_tensor_count(loaded.get()) == 3);
  const std::vector<std::string> names{"layer.weight", "counts", "layer.weight_t"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    CHECK(pthload_tensor_name(pthload_checkpoint_tensor(loaded.get(), i)) == names[i]);
  }
  const pthload_tensor* weight = find(loaded.get(), "layer.weight");
  CHECK(pthload_tensor_dtype(weight) == PTHLOAD_FLOAT32);
  CHECK(shape_of(weight) == std::vector<std::int64_t>{2, 3});
  CHECK(strides_of(weight) == std::vector<std::int64_t>{3, 1});
  CHECK(pthload_tensor_storage_offset(weight) == 0);
  CHECK(std::memcmp(elements_of(weight).data(), memory.matrix.data(), sizeof memory.matrix) == 0);
  const pthload_tensor* counts = find(loaded.get(), "counts");
  CHECK(pthload_tensor_dtype(counts) == PTHLOAD_INT64);
  CHECK(shape_of(counts) == std::vector<std::int64_t>{4});
  CHECK(std::memcmp(elements_of(counts).data(), memory.steps.data(), sizeof memory.steps) == 0);
  // The view keeps its strides over the shared storage, as torch.save keeps them.
  const pthload_tensor* transposed = find(loaded.get(), "layer.weight_t");
  CHECK(shape_of(transposed) == std::vector<std::int64_t>{3, 2});
  CHECK(strides_of(transposed) == std::vector<std::int64_t>{1, 3});
  const std::vector<std::byte> shown = elements_of(transposed);
  std::array<float, 6> expected{};
  for (std::size_t r = 0; r < 3; ++r)
    for (std::size_t c = 0; c < 2; ++c)
      expected[r * 2 + c] = memory.matrix[c * 3 + r];
  CHECK(std::memcmp(shown.data(), expected.data(), sizeof expected) == 0);

  // requires_grad is written as torch writes it, and read back.
  const auto reference = pthload::load(out.path(), {.map_location = pthload::map_to("cpu")});
  CHECK(reference.tensor("layer.weight").requires_grad());
  CHECK_FALSE(reference.tensor("counts").requires_grad());
}

TEST_CASE("capi: tensors with the same storage and size share one storage, written once") {
  const MemoryTensors memory;
  const std::vector<pthload_save_tensor> tensors = memory.list();
  const TempPath out(".pt");
  REQUIRE(pthload_save(out.path().c_str(), tensors.data(), tensors.size(), nullptr) == PTHLOAD_OK);
  CHECK(data_records(out.path()) == 2);  // the matrix's once, the steps'
  const CheckpointPtr loaded = load_cpu(out.path());
  CHECK(pthload_tensor_data(find(loaded.get(), "layer.weight")) ==
        pthload_tensor_data(find(loaded.get(), "layer.weight_t")));

  // The same first byte with another size is another storage (a prefix of the matrix).
  std::vector<pthload_save_tensor> apart = tensors;
  apart[2].storage_nbytes = sizeof(float) * 6 - sizeof(float);
  apart[2].sizes = memory.steps_sizes.data();  // 4 elements, contiguous
  apart[2].ndim = 1;
  apart[2].strides = nullptr;
  const TempPath other(".pt");
  REQUIRE(pthload_save(other.path().c_str(), apart.data(), apart.size(), nullptr) == PTHLOAD_OK);
  CHECK(data_records(other.path()) == 3);

  // compact_views writes each tensor as exactly its elements: no sharing, contiguous, offset 0.
  pthload_save_options options;
  pthload_save_options_init(&options);
  options.compact_views = 1;
  const TempPath compact(".pt");
  REQUIRE(pthload_save(compact.path().c_str(), tensors.data(), tensors.size(), &options) ==
          PTHLOAD_OK);
  CHECK(data_records(compact.path()) == 3);
  const CheckpointPtr compacted = load_cpu(compact.path());
  const pthload_tensor* transposed = find(compacted.get(), "layer.weight_t");
  CHECK(strides_of(transposed) == std::vector<std::int64_t>{2, 1});
  CHECK(pthload_tensor_storage_offset(transposed) == 0);
  CHECK(checksum_of(transposed) == checksum_of(find(loaded.get(), "layer.weight_t")));
}

TEST_CASE("capi: save options: defaults, nesting, alignment, location, archive name") {
  pthload_save_options options;
  std::memset(&options, 0xab, sizeof options);
  pthload_save_options_init(&options);
  CHECK(options.struct_size == sizeof(pthload_save_options));
  CHECK(options.nest_dotted_names == 0);
  CHECK(options.alignment == 0);
  CHECK(options.location == nullptr);
  CHECK((options.progress == nullptr));
  CHECK(options.skipped_user_data == nullptr);

  const MemoryTensors memory;
  const std::vector<pthload_save_tensor> tensors = memory.list();
  // Nested dicts read back under the same dotted names.
  options.nest_dotted_names = 1;
  options.alignment = 4096;
  options.archive_name = "weights";
  const TempPath out(".pt");
  REQUIRE(pthload_save(out.path().c_str(), tensors.data(), tensors.size(), &options) == PTHLOAD_OK);
  const CheckpointPtr loaded = load_cpu(out.path());
  std::set<std::string> names;
  for (std::size_t i = 0; i < pthload_checkpoint_tensor_count(loaded.get()); ++i)
    names.insert(pthload_tensor_name(pthload_checkpoint_tensor(loaded.get(), i)));
  CHECK(names == std::set<std::string>{"layer.weight", "counts", "layer.weight_t"});
  pthload_records* raw_records = nullptr;
  REQUIRE(pthload_records_open(out.path().c_str(), nullptr, &raw_records) == PTHLOAD_OK);
  const RecordsPtr records(raw_records);
  for (std::size_t i = 0; i < pthload_records_count(records.get()); ++i) {
    pthload_record_info info = {sizeof info};
    REQUIRE(pthload_records_info(records.get(), i, &info) == PTHLOAD_OK);
    CAPTURE(info.name);
    CHECK(std::string(info.name).starts_with("weights/"));
    if (std::string(info.name).find("/data/") != std::string::npos)
      CHECK(info.payload_offset % 4096 == 0);
  }

  // The location tag every storage gets, as a map_location callback sees it.
  pthload_save_options cuda;
  pthload_save_options_init(&cuda);
  cuda.location = "cuda:1";
  const TempPath tagged(".pt");
  REQUIRE(pthload_save(tagged.path().c_str(), tensors.data(), tensors.size(), &cuda) == PTHLOAD_OK);
  std::set<std::string> tags;
  pthload_options load_options;
  pthload_options_init(&load_options);
  load_options.map_location_user_data = &tags;
  load_options.map_location = [](void* user_data, const pthload_storage_info* storage,
                                 pthload_device* device) {
    static_cast<std::set<std::string>*>(user_data)->insert(storage->location);
    *device = {PTHLOAD_DEVICE_CPU, -1};
    return 1;
  };
  pthload_checkpoint* raw = nullptr;
  REQUIRE(pthload_load(tagged.path().c_str(), &load_options, &raw) == PTHLOAD_OK);
  pthload_checkpoint_free(raw);
  CHECK(tags == std::set<std::string>{"cuda:1"});

  // An alignment save() does not take is its error, not the library's default.
  cuda.alignment = 3;
  CHECK(pthload_save(tagged.path().c_str(), tensors.data(), tensors.size(), &cuda) ==
        code(pthload::Errc::kSaveBadOptions));
}

TEST_CASE("capi: a single tensor named \"\" is the file's root object") {
  const MemoryTensors memory;
  pthload_save_tensor root = memory.list()[1];
  root.name = "";
  const TempPath out(".pt");
  REQUIRE(pthload_save(out.path().c_str(), &root, 1, nullptr) == PTHLOAD_OK);
  const CheckpointPtr loaded = load_cpu(out.path());
  REQUIRE(pthload_checkpoint_tensor_count(loaded.get()) == 1);
  CHECK(std::string(pthload_tensor_name(pthload_checkpoint_tensor(loaded.get(), 0))).empty());

  // No tensors: an empty dict, which loads as a checkpoint of none.
  const TempPath empty(".pt");
  REQUIRE(pthload_save(empty.path().c_str(), nullptr, 0, nullptr) == PTHLOAD_OK);
  CHECK(pthload_checkpoint_tensor_count(load_cpu(empty.path()).get()) == 0);
}

TEST_CASE("capi: the caller's mistakes are PTHLOAD_ERROR_INVALID_ARGUMENT, before any write") {
  const MemoryTensors memory;
  std::vector<pthload_save_tensor> tensors = memory.list();
  const TempPath out(".pt");
  const char* path = out.path().c_str();
  const auto refused = [&](const std::vector<pthload_save_tensor>& list, const char* says) {
    CHECK(pthload_save(path, list.data(), list.size(), nullptr) == PTHLOAD_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(pthload_last_error()->code_name) == "CapiInvalidArgument");
    CHECK(std::string(pthload_last_error()->message).find(says) != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(out.path()));
  };
  CHECK(pthload_save(nullptr, tensors.data(), tensors.size(), nullptr) ==
        PTHLOAD_ERROR_INVALID_ARGUMENT);
  CHECK(pthload_save(path, nullptr, 2, nullptr) == PTHLOAD_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(pthload_last_error()->message).find("tensors is NULL") != std::string::npos);
  // Whatever the count: nothing is reserved for it before the array is found NULL.
  CHECK(pthload_save(path, nullptr, SIZE_MAX, nullptr) == PTHLOAD_ERROR_INVALID_ARGUMENT);
  CHECK_FALSE(std::filesystem::exists(out.path()));

  SUBCASE("struct_size too small: a struct never set up") {
    std::vector<pthload_save_tensor> list = tensors;
    list[0].struct_size = 0;
    refused(list, "pthload_save_tensor.struct_size is 0");
    list[0].struct_size = PTHLOAD_SAVE_TENSOR_SIZE_V1 - 1;
    refused(list, "pthload_save_tensor.struct_size");
  }
  SUBCASE("an element whose struct_size is not the first's") {
    std::vector<pthload_save_tensor> list = tensors;
    list[1].struct_size = PTHLOAD_SAVE_TENSOR_SIZE_V1;
    if (PTHLOAD_SAVE_TENSOR_SIZE_V1 == sizeof(pthload_save_tensor)) list[1].struct_size = 0;
    refused(list, "tensors[1].struct_size");
  }
  SUBCASE("a NULL name") {
    std::vector<pthload_save_tensor> list = tensors;
    list[2].name = nullptr;
    refused(list, "tensors[2].name is NULL");
  }
  SUBCASE("a dtype outside pthload_dtype") {
    std::vector<pthload_save_tensor> list = tensors;
    const int ninety_nine = 99;
    static_assert(sizeof list[1].dtype == sizeof ninety_nine);
    std::memcpy(&list[1].dtype, &ninety_nine, sizeof ninety_nine);
    refused(list, "dtype 99");
  }
  SUBCASE("sizes NULL with ndim > 0") {
    std::vector<pthload_save_tensor> list = tensors;
    list[0].sizes = nullptr;
    refused(list, "sizes are NULL");
  }
  SUBCASE("a NULL storage of some bytes") {
    std::vector<pthload_save_tensor> list = tensors;
    list[1].storage = nullptr;
    refused(list, "storage is NULL");
  }
  SUBCASE("options never set up") {
    pthload_save_options unset{};
    CHECK(pthload_save(path, tensors.data(), tensors.size(), &unset) ==
          PTHLOAD_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(pthload_last_error()->message).find("pthload_save_options_init") !=
          std::string::npos);
    pthload_save_options untouched{};
    untouched.compact_views = 7;
    CHECK(pthload_save_options_init_sized(&untouched, PTHLOAD_SAVE_OPTIONS_SIZE_V1 - 1) ==
          PTHLOAD_ERROR_INVALID_ARGUMENT);
    CHECK(untouched.compact_views == 7);
    CHECK(pthload_save_options_init_sized(nullptr, sizeof(pthload_save_options)) ==
          PTHLOAD_ERROR_INVALID_ARGUMENT);
  }
  SUBCASE("init_sized of a NULL tensor or a size below the first struct's writes nothing") {
    pthload_save_tensor untouched = tensors[0];
    CHECK(pthload_save_tensor_init_sized(&untouched, PTHLOAD_SAVE_TENSOR_SIZE_V1 - 1) ==
          PTHLOAD_ERROR_INVALID_ARGUMENT);
    CHECK(untouched.name == tensors[0].name);
    CHECK(pthload_save_tensor_init_sized(nullptr, sizeof(pthload_save_tensor)) ==
          PTHLOAD_ERROR_INVALID_ARGUMENT);
  }
  SUBCASE("a NULL checkpoint or write function") {
    CHECK(pthload_save_checkpoint(path, nullptr, nullptr) == PTHLOAD_ERROR_INVALID_ARGUMENT);
    CHECK(pthload_save_to_sink(nullptr, nullptr, tensors.data(), tensors.size(), nullptr) ==
          PTHLOAD_ERROR_INVALID_ARGUMENT);
    CHECK(pthload_save_checkpoint_to_sink(nullptr, nullptr, nullptr, nullptr) ==
          PTHLOAD_ERROR_INVALID_ARGUMENT);
  }
}

TEST_CASE(
    "capi: structs from a newer header: zero past this library's is the default, "
    "set is refused") {
  const MemoryTensors memory;
  const std::vector<pthload_save_tensor> known = memory.list();
  struct NewerTensor {
    pthload_save_tensor known;
    std::uint64_t later_field;
  };
  std::vector<NewerTensor> newer;
  for (const pthload_save_tensor& tensor : known) {
    NewerTensor element;
    std::memset(&element, 0xab, sizeof element);
    REQUIRE(pthload_save_tensor_init_sized(&element.known, sizeof element) == PTHLOAD_OK);
    CHECK(element.later_field == 0);  // zeroed: the later field at its default
    const std::size_t size = element.known.struct_size;
    CHECK(size == sizeof element);
    element.known = tensor;
    element.known.struct_size = size;
    newer.push_back(element);
  }
  const TempPath out(".pt");
  // Stepped through by the caller's struct_size: every tensor is found where the caller put it.
  REQUIRE(pthload_save(out.path().c_str(), &newer[0].known, newer.size(), nullptr) == PTHLOAD_OK);
  const CheckpointPtr loaded = load_cpu(out.path());
  CHECK(pthload_checkpoint_tensor_count(loaded.get()) == 3);
  CHECK(std::string(pthload_tensor_name(pthload_checkpoint_tensor(loaded.get(), 2))) ==
        "layer.weight_t");

  std::memset(&newer[2].later_field, 1, sizeof newer[2].later_field);
  const TempPath refused(".pt");
  CHECK(pthload_save(refused.path().c_str(), &newer[0].known, newer.size(), nullptr) ==
        PTHLOAD_ERROR_UNSUPPORTED_OPTION);
  CHECK(pthload_last_error()->has_offset == 1);
  CHECK(pthload_last_error()->offset == sizeof(pthload_save_tensor));
  CHECK(std::string(pthload_last_error()->message).find("tensors[2]") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(refused.path()));

  struct NewerOptions {
    pthload_save_options known;
    std::uint64_t later_option;
  } options;
  std::memset(&options, 0xab, sizeof options);
  REQUIRE(pthload_save_options_init_sized(&options.known, sizeof options) == PTHLOAD_OK);
  CHECK(options.known.struct_size == sizeof options);
  CHECK(options.later_option == 0);
  REQUIRE(pthload_save(refused.path().c_str(), known.data(), known.size(), &options.known) ==
          PTHLOAD_OK);
  std::memset(&options.later_option, 1, sizeof options.later_option);
  CHECK(pthload_save(refused.path().c_str(), known.data(), known.size(), &options.known) ==
        PTHLOAD_ERROR_UNSUPPORTED_OPTION);
  CHECK(pthload_last_error()->offset == sizeof(pthload_save_options));
}

TEST_CASE("capi: a tensor outside its storage is SaveBadTensor (1201); the path is untouched") {
  const MemoryTensors memory;
  std::vector<pthload_save_tensor> tensors = memory.list();
  tensors[1].storage_offset = 1;  // 4 int64 from element 1 of 4
  const TempPath out(".pt");
  CHECK(pthload_save(out.path().c_str(), tensors.data(), tensors.size(), nullptr) ==
        code(pthload::Errc::kSaveBadTensor));
  CHECK(pthload_last_error()->code == 1201);
  CHECK(std::string(pthload_last_error()->code_name) == "SaveBadTensor");
  CHECK(std::string(pthload_last_error()->what).find("counts") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(out.path()));

  // An old file at the path stays as it was.
  out.write(std::string_view("an older file"));
  CHECK(pthload_save(out.path().c_str(), tensors.data(), tensors.size(), nullptr) == 1201);
  CHECK(out.read() == "an older file");

  // Two tensors of one name.
  tensors = memory.list();
  tensors[1].name = tensors[0].name;
  CHECK(pthload_save(out.path().c_str(), tensors.data(), tensors.size(), nullptr) ==
        code(pthload::Errc::kSaveNameCollision));
}

TEST_CASE("capi: the progress callback sees every byte; a negative answer stops the save") {
  const MemoryTensors memory;
  const std::vector<pthload_save_tensor> tensors = memory.list();
  struct Seen {
    std::uint64_t written = 0;
    std::uint64_t total = 0;
    int calls = 0;
    bool in_order = true;
  } seen;
  pthload_save_options options;
  pthload_save_options_init(&options);
  options.progress_user_data = &seen;
  options.progress = [](void* user_data, std::uint64_t written, std::uint64_t total) {
    auto& record = *static_cast<Seen*>(user_data);
    record.in_order = record.in_order && written >= record.written && written <= total &&
                      (record.calls == 0 || total == record.total);
    record.written = written;
    record.total = total;
    ++record.calls;
    return 0;
  };
  const TempPath out(".pt");
  REQUIRE(pthload_save(out.path().c_str(), tensors.data(), tensors.size(), &options) == PTHLOAD_OK);
  CHECK(seen.calls > 0);
  CHECK(seen.in_order);
  CHECK(seen.written == seen.total);
  CHECK(seen.total == std::filesystem::file_size(out.path()));

  options.progress = [](void*, std::uint64_t, std::uint64_t) { return -3; };
  const TempPath stopped(".pt");
  CHECK(pthload_save(stopped.path().c_str(), tensors.data(), tensors.size(), &options) ==
        PTHLOAD_ERROR_CALLBACK_FAILED);
  CHECK(std::string(pthload_last_error()->message).find("returned -3") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(stopped.path()));
}

TEST_CASE("capi: skip_unsupported leaves a quantized tensor out and names it to `skipped`") {
  const MemoryTensors memory;
  std::vector<pthload_save_tensor> tensors = memory.list();
  tensors[1].dtype = PTHLOAD_QINT8;  // MemoryTensor has no scale or zero point to save with it
  const TempPath out(".pt");
  CHECK(pthload_save(out.path().c_str(), tensors.data(), tensors.size(), nullptr) ==
        code(pthload::Errc::kSaveUnsupportedTensor));
  CHECK_FALSE(std::filesystem::exists(out.path()));

  std::vector<std::string> skipped;
  pthload_save_options options;
  pthload_save_options_init(&options);
  options.skip_unsupported = 1;
  options.skipped_user_data = &skipped;
  options.skipped = [](void* user_data, const char* description) {
    static_cast<std::vector<std::string>*>(user_data)->emplace_back(description);
  };
  REQUIRE(pthload_save(out.path().c_str(), tensors.data(), tensors.size(), &options) == PTHLOAD_OK);
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0].starts_with("counts"));
  CHECK(pthload_checkpoint_tensor_count(load_cpu(out.path()).get()) == 2);
}

TEST_CASE("capi: saved to a sink: the file's bytes, in order; a failed write is SaveWriteFailed") {
  const MemoryTensors memory;
  const std::vector<pthload_save_tensor> tensors = memory.list();
  std::vector<std::byte> streamed;
  const pthload_save_write_fn append = [](void* user_data, const void* bytes, size_t size) {
    auto& into = *static_cast<std::vector<std::byte>*>(user_data);
    const auto* first = static_cast<const std::byte*>(bytes);
    into.insert(into.end(), first, first + size);
    return 0;
  };
  REQUIRE(pthload_save_to_sink(append, &streamed, tensors.data(), tensors.size(), nullptr) ==
          PTHLOAD_OK);
  // The same tensors and options give the same bytes: a file whose archive is named as a
  // sink's ("archive").
  pthload_save_options options;
  pthload_save_options_init(&options);
  options.archive_name = "archive";
  const TempPath out(".pt");
  REQUIRE(pthload_save(out.path().c_str(), tensors.data(), tensors.size(), &options) == PTHLOAD_OK);
  CHECK(streamed == file_bytes(out.path()));
  const CheckpointPtr loaded = load_bytes_cpu(streamed);
  CHECK(checksum_of(find(loaded.get(), "layer.weight_t")) ==
        checksum_of(find(load_cpu(out.path()).get(), "layer.weight_t")));

  int calls = 0;
  const pthload_save_write_fn failing = [](void* user_data, const void*, size_t) {
    ++*static_cast<int*>(user_data);
    return 28;  // ENOSPC, say
  };
  CHECK(pthload_save_to_sink(failing, &calls, tensors.data(), tensors.size(), nullptr) ==
        code(pthload::Errc::kSaveWriteFailed));
  CHECK(calls == 1);  // nothing more is written after a failed write
  CHECK(std::string(pthload_last_error()->what).find("returned 28") != std::string::npos);
}

TEST_SUITE("fixtures") {
  TEST_CASE("capi: save_checkpoint of a loaded fixture reads back tensor for tensor") {
    for (const char* name : {"torch/torch-2.15.0/views.pt", "torch/torch-2.15.0/tied.pt",
                             "torch/torch-2.15.0/dtypes.pt", "sample.pt"}) {
      CAPTURE(name);
      const CheckpointPtr source = load_cpu(pthload::test::fixture_path(name));
      const TempPath out(".pt");
      const int saved = pthload_save_checkpoint(out.path().c_str(), source.get(), nullptr);
      INFO(pthload_last_error()->what);
      REQUIRE(saved == PTHLOAD_OK);
      const CheckpointPtr back = load_cpu(out.path());
      const std::size_t count = pthload_checkpoint_tensor_count(source.get());
      REQUIRE(pthload_checkpoint_tensor_count(back.get()) == count);
      std::vector<std::uint64_t> want(count);
      std::vector<std::uint64_t> got(count);
      REQUIRE(pthload_checkpoint_checksums(source.get(), 0, count, want.data()) == PTHLOAD_OK);
      REQUIRE(pthload_checkpoint_checksums(back.get(), 0, count, got.data()) == PTHLOAD_OK);
      for (std::size_t i = 0; i < count; ++i) {
        const pthload_tensor* a = pthload_checkpoint_tensor(source.get(), i);
        const pthload_tensor* b = pthload_checkpoint_tensor(back.get(), i);
        CAPTURE(pthload_tensor_name(a));
        CHECK(std::string(pthload_tensor_name(b)) == pthload_tensor_name(a));
        CHECK(pthload_tensor_dtype(b) == pthload_tensor_dtype(a));
        CHECK(shape_of(b) == shape_of(a));
        CHECK(strides_of(b) == strides_of(a));
        CHECK(pthload_tensor_storage_offset(b) == pthload_tensor_storage_offset(a));
        CHECK(got[i] == want[i]);
      }
      // A sink receives the same file, its archive named "archive".
      std::vector<std::byte> streamed;
      REQUIRE(pthload_save_checkpoint_to_sink(
                  [](void* user_data, const void* bytes, size_t size) {
                    auto& into = *static_cast<std::vector<std::byte>*>(user_data);
                    const auto* first = static_cast<const std::byte*>(bytes);
                    into.insert(into.end(), first, first + size);
                    return 0;
                  },
                  &streamed, source.get(), nullptr) == PTHLOAD_OK);
      CHECK(pthload_checkpoint_tensor_count(load_bytes_cpu(streamed).get()) == count);
    }
  }

  TEST_CASE("capi: save_checkpoint of an opened (not loaded) checkpoint is refused") {
    pthload_checkpoint* raw = nullptr;
    REQUIRE(pthload_open(pthload::test::fixture_path("sample.pt").c_str(), nullptr, &raw) ==
            PTHLOAD_OK);
    const CheckpointPtr opened(raw);
    const TempPath out(".pt");
    CHECK(pthload_save_checkpoint(out.path().c_str(), opened.get(), nullptr) ==
          code(pthload::Errc::kSaveUnsupportedTensor));
    CHECK_FALSE(std::filesystem::exists(out.path()));
  }
}
