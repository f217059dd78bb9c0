// The C API (pthload.h) and DLPack export against the fixtures, through the shared library as a C
// program links it: codes, the last error's context, map_location callbacks, lifetimes.
#include <dlpack/dlpack.h>
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "pthload/checkpoint.hpp"
#include "pthload/dlpack.hpp"
#include "pthload/error.hpp"
#include "pthload/limits.hpp"
#include "pthload/pthload.h"
#include "support/error_code.hpp"
#include "support/files.hpp"

using pthload::test::error_thrown;
using pthload::test::file_bytes;

namespace {

std::string fixture(const char* name) {
  return std::string(PTHLOAD_FIXTURES_DIR) + "/" + name;
}

struct CheckpointDeleter {
  void operator()(pthload_checkpoint* checkpoint) const { pthload_checkpoint_free(checkpoint); }
};
using CheckpointPtr = std::unique_ptr<pthload_checkpoint, CheckpointDeleter>;

CheckpointPtr load_cpu(const std::string& path) {
  pthload_options options;
  pthload_options_init(&options);
  options.map_to = "cpu";
  pthload_checkpoint* checkpoint = nullptr;
  REQUIRE(pthload_load(path.c_str(), &options, &checkpoint) == PTHLOAD_OK);
  return CheckpointPtr(checkpoint);
}

std::vector<std::int64_t> shape_of(const pthload_tensor* tensor) {
  const std::int64_t* shape = pthload_tensor_shape(tensor);
  return {shape, shape + pthload_tensor_ndim(tensor)};
}

const char* const kViews = "torch/torch-2.15.0/views.pt";
const char* const kCuda = "torch/torch-2.15.0/cuda.pt";

}  // namespace

TEST_CASE("capi: errors come back as Errc codes with a NULL output and no exception") {
  pthload_checkpoint* checkpoint = reinterpret_cast<pthload_checkpoint*>(&checkpoint);
  CHECK(pthload_open(nullptr, nullptr, &checkpoint) == PTHLOAD_ERROR_INVALID_ARGUMENT);
  CHECK(checkpoint == nullptr);
  CHECK(pthload_open("x.pt", nullptr, nullptr) == PTHLOAD_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(pthload_last_error()->code_name) == "CapiInvalidArgument");

  const char not_a_checkpoint[] = "hello, world";
  CHECK(pthload_open_bytes(not_a_checkpoint, sizeof not_a_checkpoint, nullptr, &checkpoint) ==
        static_cast<int>(pthload::Errc::kTorchUnsupportedFormat));
  CHECK(checkpoint == nullptr);
  const pthload_error* error = pthload_last_error();
  CHECK(std::string(error->path) == "<memory>");
  CHECK(error->has_offset == 1);
  CHECK(error->offset == 0);
  CHECK(std::string(error->what).starts_with("<memory>: offset 0x0: not a PyTorch checkpoint"));

  pthload_options options;
  pthload_options_init(&options);
  options.map_to = "gpu:0";
  CHECK(pthload_load(fixture(kViews).c_str(), &options, &checkpoint) ==
        static_cast<int>(pthload::Errc::kDeviceUnsupportedType));
  CHECK(std::string(pthload_last_error()->message).find("gpu") != std::string::npos);
}

TEST_CASE("capi: the version macros are the library's, and the structs that grow say their size") {
  CHECK(std::string(pthload_version()) == PTHLOAD_VERSION_STRING);
  CHECK(std::string(PTHLOAD_VERSION_STRING) == std::to_string(PTHLOAD_VERSION_MAJOR) + "." +
                                                   std::to_string(PTHLOAD_VERSION_MINOR) + "." +
                                                   std::to_string(PTHLOAD_VERSION_PATCH));
  // The end of the last field, not sizeof: pthload_error's tail padding is no field.
  CHECK(pthload_last_error()->struct_size == PTHLOAD_ERROR_SIZE_V1);
  CHECK(PTHLOAD_ERROR_SIZE_V1 < sizeof(pthload_error));
  CHECK(PTHLOAD_HAS_FIELD(pthload_last_error(), pthload_error, opcode));
  CHECK(pthload_open(nullptr, nullptr, nullptr) == PTHLOAD_ERROR_INVALID_ARGUMENT);
  CHECK(pthload_last_error()->struct_size == PTHLOAD_ERROR_SIZE_V1);

  pthload_options options;
  std::memset(&options, 0xab, sizeof options);
  pthload_options_init(&options);
  CHECK(options.struct_size == sizeof(pthload_options));
  CHECK(options.map_to == nullptr);
  CHECK(options.max_zip_entries == pthload::Limits{}.max_zip_entries);
  // Setting options up to try again leaves the failure's error readable.
  CHECK(pthload_last_error()->code == PTHLOAD_ERROR_INVALID_ARGUMENT);
}

TEST_CASE(
    "capi: options from an older or newer header: defaults for what is missing, refusal "
    "for what this library cannot honour") {
  pthload_checkpoint* raw = nullptr;
  // A struct that was never set up (struct_size 0, as `= {0}` leaves it) is refused, named.
  pthload_options unset{};
  CHECK(pthload_open(fixture(kViews).c_str(), &unset, &raw) == PTHLOAD_ERROR_INVALID_ARGUMENT);
  CHECK(raw == nullptr);
  CHECK(std::string(pthload_last_error()->message).find("pthload_options_init") !=
        std::string::npos);
  // Garbage in struct_size is refused before anything past the struct is read.
  unset.struct_size = SIZE_MAX;
  CHECK(pthload_open(fixture(kViews).c_str(), &unset, &raw) == PTHLOAD_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(pthload_last_error()->message)
            .starts_with("pthload_options.struct_size is " + std::to_string(SIZE_MAX)));
  // init_sized refuses a size below the first struct's, writing nothing.
  pthload_options untouched{};
  untouched.verify_crc = 7;
  CHECK(pthload_options_init_sized(&untouched, PTHLOAD_OPTIONS_SIZE_V1 - 1) ==
        PTHLOAD_ERROR_INVALID_ARGUMENT);
  CHECK(untouched.verify_crc == 7);
  CHECK(pthload_options_init_sized(nullptr, sizeof(pthload_options)) ==
        PTHLOAD_ERROR_INVALID_ARGUMENT);

  // A newer header's struct: this library's fields, then one it does not know.
  struct NewerOptions {
    pthload_options known;
    std::uint64_t later_option;
  } newer;
  std::memset(&newer, 0xab, sizeof newer);
  REQUIRE(pthload_options_init_sized(&newer.known, sizeof newer) == PTHLOAD_OK);
  CHECK(newer.known.struct_size == sizeof newer);
  CHECK(newer.later_option == 0);  // zeroed: the later option at its default
  newer.known.select = "";
  REQUIRE(pthload_open(fixture(kViews).c_str(), &newer.known, &raw) == PTHLOAD_OK);
  const CheckpointPtr opened(raw);
  CHECK(pthload_checkpoint_tensor_count(opened.get()) ==
        pthload::open(fixture(kViews)).tensors().size());
  // Set, it is an option this library cannot honour: refused, with the byte that says so.
  std::memset(&newer.later_option, 1, sizeof newer.later_option);  // every byte set, any endian
  raw = nullptr;
  CHECK(pthload_open(fixture(kViews).c_str(), &newer.known, &raw) ==
        PTHLOAD_ERROR_UNSUPPORTED_OPTION);
  CHECK(raw == nullptr);
  const pthload_error* error = pthload_last_error();
  CHECK(std::string(error->code_name) == "CapiUnsupportedOption");
  CHECK(error->has_offset == 1);
  CHECK(error->offset == sizeof(pthload_options));
  CHECK(std::string(error->message).find(PTHLOAD_VERSION_STRING) != std::string::npos);
  // The records handle reads the same options the same way.
  pthload_records* records = nullptr;
  CHECK(pthload_records_open(fixture(kViews).c_str(), &newer.known, &records) ==
        PTHLOAD_ERROR_UNSUPPORTED_OPTION);
  CHECK(records == nullptr);
}

TEST_CASE(
    "capi: max_overlapping_view_bytes, 0.5.0's field, bounds what a view overlapping itself "
    "makes copies and checksums read; an older caller's struct gets the default") {
  pthload_options options;
  pthload_options_init(&options);
  CHECK(options.struct_size == PTHLOAD_OPTIONS_SIZE_V2);
  CHECK(options.max_overlapping_view_bytes == 0);  // zero: the default
  // views.pt's "expanded": arange(3).reshape(3, 1).expand(3, 4) in float64, 96 bytes shown of a
  // 24-byte storage. The code of its copy, after checking the checksums fail or succeed alike.
  const auto read_expanded = [](const pthload_options* with) {
    pthload_checkpoint* raw = nullptr;
    REQUIRE(pthload_load(fixture(kViews).c_str(), with, &raw) == PTHLOAD_OK);
    const CheckpointPtr checkpoint(raw);
    const pthload_tensor* expanded = nullptr;
    REQUIRE(pthload_checkpoint_find_tensor(checkpoint.get(), "expanded", &expanded) == PTHLOAD_OK);
    std::array<double, 12> values{};
    const int copied = pthload_tensor_copy(expanded, values.data(), sizeof values);
    if (copied == PTHLOAD_OK)
      CHECK(values == std::array<double, 12>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2});
    std::uint64_t checksum = 0;
    CHECK(pthload_tensor_checksum(expanded, &checksum) == copied);
    std::size_t index = 0;
    while (pthload_checkpoint_tensor(checkpoint.get(), index) != expanded)
      ++index;
    CHECK(pthload_checkpoint_checksums(checkpoint.get(), index, 1, &checksum) == copied);
    return copied;
  };
  CHECK(read_expanded(nullptr) == PTHLOAD_OK);
  CHECK(read_expanded(&options) == PTHLOAD_OK);
  options.max_overlapping_view_bytes = 95;
  CHECK(read_expanded(&options) == static_cast<int>(pthload::Errc::kTorchLimitExceeded));
  CHECK(std::string(pthload_last_error()->code_name) == "TorchLimitExceeded");
  options.max_overlapping_view_bytes = 96;
  CHECK(read_expanded(&options) == PTHLOAD_OK);
  // A 0.4.0 caller's struct ends before the field: what lies there is not the caller's option.
  options.struct_size = PTHLOAD_OPTIONS_SIZE_V1;
  options.max_overlapping_view_bytes = 95;
  CHECK(read_expanded(&options) == PTHLOAD_OK);
}

TEST_SUITE("fixtures") {
  TEST_CASE("capi: a missing file names its path; success resets the last error") {
    pthload_checkpoint* checkpoint = nullptr;
    const std::string missing = fixture("no-such-file.pt");
    CHECK(pthload_open(missing.c_str(), nullptr, &checkpoint) ==
          static_cast<int>(pthload::Errc::kIoOpenFailed));
    CHECK(std::string(pthload_last_error()->path) == missing);
    CHECK(std::string(pthload_last_error()->message).find("No such file") != std::string::npos);

    CHECK(pthload_open(fixture(kViews).c_str(), nullptr, &checkpoint) == PTHLOAD_OK);
    CHECK(pthload_last_error()->code == PTHLOAD_OK);
    CHECK(std::string(pthload_last_error()->message).empty());
    pthload_checkpoint_free(checkpoint);
  }

  TEST_CASE("capi: a truncated zip reports the C++ error's code, record and offset") {
    auto bytes = file_bytes(fixture(kViews));
    bytes.resize(bytes.size() - 30);  // inside the end-of-central-directory record
    pthload_checkpoint* checkpoint = nullptr;
    const int code = pthload_open_bytes(bytes.data(), bytes.size(), nullptr, &checkpoint);
    const auto e = error_thrown([&] { (void)pthload::open(std::as_bytes(std::span(bytes))); });
    CHECK(std::string(pthload_last_error()->what) == e.what());
    CHECK(static_cast<bool>(pthload_last_error()->has_offset) == e.context().offset.has_value());
    CHECK(e.code() != pthload::Errc::kOk);
    CHECK(code == static_cast<int>(e.code()));
  }

  TEST_CASE("capi: tensors are listed as the C++ API lists them") {
    const auto checkpoint = load_cpu(fixture(kViews));
    const auto expected = pthload::load(fixture(kViews), {.map_location = pthload::map_to("cpu")});
    REQUIRE(pthload_checkpoint_tensor_count(checkpoint.get()) == expected.tensors().size());
    CHECK(pthload_checkpoint_tensor(checkpoint.get(), expected.tensors().size()) == nullptr);
    for (std::size_t i = 0; i < expected.tensors().size(); ++i) {
      const pthload::NamedTensor& want = expected.tensors()[i];
      const pthload_tensor* got = pthload_checkpoint_tensor(checkpoint.get(), i);
      CAPTURE(want.name);
      CHECK(std::string(pthload_tensor_name(got)) == want.name);
      CHECK(pthload_tensor_dtype(got) == static_cast<int>(want.tensor.dtype()));
      CHECK(std::string(pthload_dtype_name(pthload_tensor_dtype(got))) ==
            pthload::dtype_name(want.tensor.dtype()));
      CHECK(pthload_dtype_size(pthload_tensor_dtype(got)) ==
            pthload::element_size(want.tensor.dtype()));
      CHECK(shape_of(got) == std::vector(want.tensor.sizes().begin(), want.tensor.sizes().end()));
      const std::int64_t* strides = pthload_tensor_strides(got);
      CHECK(std::vector(strides, strides + pthload_tensor_ndim(got)) ==
            std::vector(want.tensor.strides().begin(), want.tensor.strides().end()));
      CHECK(pthload_tensor_storage_offset(got) == want.tensor.storage_offset());
      CHECK(pthload_tensor_numel(got) == want.tensor.numel());
      CHECK(pthload_tensor_nbytes(got) == want.tensor.nbytes());
      CHECK(pthload_tensor_is_contiguous(got) == (want.tensor.is_contiguous() ? 1 : 0));
      CHECK(pthload_tensor_layout(got) == PTHLOAD_LAYOUT_STRIDED);
      CHECK(pthload_tensor_device(got).type == PTHLOAD_DEVICE_CPU);
      CHECK(pthload_tensor_device_pointer(got) == nullptr);

      // The data pointer is the first element; the copy is what the view shows, row-major.
      const void* data = pthload_tensor_data(got);
      REQUIRE(data != nullptr);
      CHECK(std::memcmp(data, want.tensor.data(), 4) == 0);
      const auto contiguous = want.tensor.contiguous_bytes();
      std::vector<std::byte> copy(contiguous.size());
      CHECK(pthload_tensor_copy(got, copy.data(), copy.size()) == PTHLOAD_OK);
      CHECK(copy == contiguous);
      if (!copy.empty()) {
        CHECK(pthload_tensor_copy(got, copy.data(), copy.size() - 1) ==
              PTHLOAD_ERROR_INVALID_ARGUMENT);
      }
    }
  }

  TEST_CASE("capi: checkpoint_checksums gives each tensor's checksum; it fails as they do") {
    const auto checkpoint = load_cpu(fixture(kViews));
    const std::size_t count = pthload_checkpoint_tensor_count(checkpoint.get());
    REQUIRE(count > 2);
    std::vector<std::uint64_t> each(count);
    for (std::size_t i = 0; i < count; ++i) {
      REQUIRE(pthload_tensor_checksum(pthload_checkpoint_tensor(checkpoint.get(), i), &each[i]) ==
              PTHLOAD_OK);
    }
    std::vector<std::uint64_t> together(count);
    CHECK(pthload_checkpoint_checksums(checkpoint.get(), 0, count, together.data()) == PTHLOAD_OK);
    CHECK(together == each);
    std::vector<std::uint64_t> tail(count - 1);
    CHECK(pthload_checkpoint_checksums(checkpoint.get(), 1, count - 1, tail.data()) == PTHLOAD_OK);
    CHECK(tail == std::vector(each.begin() + 1, each.end()));
    CHECK(pthload_checkpoint_checksums(checkpoint.get(), count, 0, nullptr) == PTHLOAD_OK);
    CHECK(pthload_checkpoint_checksums(checkpoint.get(), 1, count, together.data()) ==
          PTHLOAD_ERROR_INVALID_ARGUMENT);
    CHECK(pthload_checkpoint_checksums(checkpoint.get(), 0, 1, nullptr) ==
          PTHLOAD_ERROR_INVALID_ARGUMENT);
    CHECK(pthload_checkpoint_checksums(nullptr, 0, 0, together.data()) ==
          PTHLOAD_ERROR_INVALID_ARGUMENT);

    // Opened, not loaded: the first tensor's reason, as pthload_tensor_checksum gives it.
    pthload_checkpoint* raw = nullptr;
    REQUIRE(pthload_open(fixture(kViews).c_str(), nullptr, &raw) == PTHLOAD_OK);
    const CheckpointPtr opened(raw);
    std::uint64_t one = 0;
    const int alone = pthload_tensor_checksum(pthload_checkpoint_tensor(opened.get(), 0), &one);
    CHECK(alone == static_cast<int>(pthload::Errc::kDeviceNotOnCpu));
    const std::string message = pthload_last_error()->message;
    CHECK(pthload_checkpoint_checksums(opened.get(), 0, count, together.data()) == alone);
    CHECK(std::string(pthload_last_error()->message) == message);
  }

  TEST_CASE("capi: find_tensor by name, and its error for a missing name") {
    const auto checkpoint = load_cpu(fixture(kViews));
    const pthload_tensor* found = nullptr;
    CHECK(pthload_checkpoint_find_tensor(checkpoint.get(), "column", &found) == PTHLOAD_OK);
    REQUIRE(found != nullptr);
    CHECK(std::string(pthload_tensor_name(found)) == "column");
    CHECK(shape_of(found) == std::vector<std::int64_t>{4});
    CHECK(pthload_checkpoint_find_tensor(checkpoint.get(), "nope", &found) ==
          static_cast<int>(pthload::Errc::kTorchNameNotFound));
    CHECK(found == nullptr);
    CHECK(std::string(pthload_last_error()->message).find("'nope'") != std::string::npos);
  }

  TEST_CASE("capi: select, rename_prefix, only and exclude choose as LoadOptions does") {
    const auto path = fixture("partial/lightning.ckpt");
    const auto names = [](const pthload_checkpoint* checkpoint) {
      std::set<std::string> result;
      for (std::size_t i = 0; i < pthload_checkpoint_tensor_count(checkpoint); ++i)
        result.insert(pthload_tensor_name(pthload_checkpoint_tensor(checkpoint, i)));
      return result;
    };
    const char* from[] = {"module."};
    const char* to[] = {"net."};
    const char* only[] = {"net.*"};
    const char* exclude[] = {"*.bias"};
    pthload_options options;
    pthload_options_init(&options);
    CHECK(options.select == nullptr);
    CHECK(options.only_count == 0);
    options.map_to = "cpu";
    options.select = "state_dict";
    options.rename_prefix_from = from;
    options.rename_prefix_to = to;
    options.rename_prefix_count = 1;
    options.only = only;
    options.only_count = 1;
    options.exclude = exclude;
    options.exclude_count = 1;
    pthload_checkpoint* raw = nullptr;
    REQUIRE(pthload_load(path.c_str(), &options, &raw) == PTHLOAD_OK);
    const CheckpointPtr loaded(raw);
    CHECK(names(loaded.get()) == std::set<std::string>{"net.decoder.weight", "net.encoder.weight"});
    const auto expected = pthload::load(path, {.map_location = pthload::map_to("cpu"),
                                               .filter = {.select = "state_dict",
                                                          .rename_prefix = {{"module.", "net."}},
                                                          .only = {"net.*"},
                                                          .exclude = {"*.bias"}}});
    for (const auto& named : expected.tensors()) {
      const pthload_tensor* got = nullptr;
      REQUIRE(pthload_checkpoint_find_tensor(loaded.get(), named.name.c_str(), &got) == PTHLOAD_OK);
      CHECK(std::memcmp(pthload_tensor_data(got), named.tensor.data(), named.tensor.nbytes()) == 0);
    }
    // open chooses too, and select naming nothing is the C++ API's error.
    REQUIRE(pthload_open(path.c_str(), &options, &raw) == PTHLOAD_OK);
    const CheckpointPtr opened(raw);
    CHECK(names(opened.get()) == names(loaded.get()));
    options.select = "nothing";
    CHECK(pthload_open(path.c_str(), &options, &raw) ==
          static_cast<int>(pthload::Errc::kSelectNotFound));
    CHECK(raw == nullptr);
    // A count without its array is the caller's mistake, reported, not dereferenced.
    options.select = nullptr;
    options.only = nullptr;
    CHECK(pthload_open(path.c_str(), &options, &raw) == PTHLOAD_ERROR_INVALID_ARGUMENT);
    options.only = only;
    options.rename_prefix_to = nullptr;
    CHECK(pthload_open(path.c_str(), &options, &raw) == PTHLOAD_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(pthload_last_error()->message).find("rename_prefix") != std::string::npos);
    // Whatever the count: nothing is reserved for it before the array is found NULL (2^32
    // strings were 128 GiB asked of the allocator, and out of memory came back).
    options.rename_prefix_to = to;
    options.only = nullptr;
    options.only_count = std::size_t{1} << 32;
    CHECK(pthload_open(path.c_str(), &options, &raw) == PTHLOAD_ERROR_INVALID_ARGUMENT);
    options.only = only;
    options.only_count = 1;
    options.rename_prefix_from = nullptr;
    options.rename_prefix_count = SIZE_MAX;
    CHECK(pthload_open(path.c_str(), &options, &raw) == PTHLOAD_ERROR_INVALID_ARGUMENT);
  }

  TEST_CASE("capi: open reads no data; data() says why") {
    pthload_checkpoint* raw = nullptr;
    REQUIRE(pthload_open(fixture(kViews).c_str(), nullptr, &raw) == PTHLOAD_OK);
    const CheckpointPtr checkpoint(raw);
    const pthload_tensor* tensor = pthload_checkpoint_tensor(checkpoint.get(), 0);
    CHECK(pthload_tensor_data(tensor) == nullptr);
    CHECK(pthload_last_error()->code == static_cast<int>(pthload::Errc::kDeviceNotOnCpu));

    // An accessor: its success leaves the last error, and the strings it points at, alone.
    pthload_checkpoint* loaded_raw = nullptr;
    REQUIRE(pthload_load(fixture(kViews).c_str(), nullptr, &loaded_raw) == PTHLOAD_OK);
    const CheckpointPtr loaded(loaded_raw);
    pthload_checkpoint* missing = nullptr;
    REQUIRE(pthload_open(fixture("no-such-file.pt").c_str(), nullptr, &missing) ==
            static_cast<int>(pthload::Errc::kIoOpenFailed));
    const char* message = pthload_last_error()->message;
    const std::string copy = message;
    CHECK(pthload_tensor_data(pthload_checkpoint_tensor(loaded.get(), 0)) != nullptr);
    CHECK(pthload_last_error()->code == static_cast<int>(pthload::Errc::kIoOpenFailed));
    CHECK(pthload_last_error()->message == message);
    CHECK(std::string(message) == copy);
    DLManagedTensor* managed = nullptr;
    CHECK(pthload_tensor_to_dlpack(tensor, &managed) == PTHLOAD_ERROR_NO_DLPACK_FORM);
    CHECK(managed == nullptr);
  }

  TEST_CASE("capi: map_location callback is asked once per storage, with its key and tag") {
    struct Seen {
      std::set<std::string> tags;
      int calls = 0;
    } seen;
    pthload_options options;
    pthload_options_init(&options);
    options.map_location_user_data = &seen;
    options.map_location = [](void* user_data, const pthload_storage_info* storage,
                              pthload_device* device) {
      auto& record = *static_cast<Seen*>(user_data);
      if (storage->struct_size != PTHLOAD_STORAGE_INFO_SIZE_V1) return -1;
      if (!PTHLOAD_HAS_FIELD(storage, pthload_storage_info, nbytes)) return -1;
      record.tags.emplace(storage->location);
      ++record.calls;
      if (std::string(storage->location) == "cpu") return 0;  // where the tag says
      *device = {PTHLOAD_DEVICE_META, -1};
      return 1;
    };
    pthload_checkpoint* raw = nullptr;
    REQUIRE(pthload_load(fixture(kCuda).c_str(), &options, &raw) == PTHLOAD_OK);
    const CheckpointPtr checkpoint(raw);
    const auto reference = pthload::open(fixture(kCuda));
    CHECK(seen.calls == static_cast<int>(reference.storages().size()));
    CHECK(seen.tags == std::set<std::string>{"cpu", "cuda:0", "cuda:3"});
    std::set<int> devices;
    for (std::size_t i = 0; i < pthload_checkpoint_tensor_count(checkpoint.get()); ++i) {
      devices.insert(pthload_tensor_device(pthload_checkpoint_tensor(checkpoint.get(), i)).type);
    }
    CHECK(devices == std::set<int>{PTHLOAD_DEVICE_CPU, PTHLOAD_DEVICE_META});

    // A device type outside the enum, which C lets a callback store, is refused as such.
    options.map_location = [](void*, const pthload_storage_info*, pthload_device* device) {
      const int seven = 7;
      static_assert(sizeof device->type == sizeof seven);
      std::memcpy(&device->type, &seven, sizeof seven);
      return 1;
    };
    CHECK(pthload_load(fixture(kCuda).c_str(), &options, &raw) == PTHLOAD_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(pthload_last_error()->message).find("device type 7") != std::string::npos);

    // A negative answer stops the load, naming the storage.
    options.map_location = [](void*, const pthload_storage_info*, pthload_device*) { return -7; };
    CHECK(pthload_load(fixture(kCuda).c_str(), &options, &raw) == PTHLOAD_ERROR_CALLBACK_FAILED);
    CHECK(std::string(pthload_last_error()->message).find("returned -7") != std::string::npos);
    CHECK(std::string(pthload_last_error()->path) == fixture(kCuda));

    // Without map_location, a CUDA tag on a machine without CUDA is the C++ DeviceError.
    if (pthload::cuda_device_count() == 0) {
      CHECK(pthload_load(fixture(kCuda).c_str(), nullptr, &raw) ==
            static_cast<int>(pthload::Errc::kDeviceCudaUnavailable));
    }
  }

  TEST_CASE("capi: the last error is per thread") {
    pthload_checkpoint* checkpoint = nullptr;
    CHECK(pthload_open("/no/such/file.pt", nullptr, &checkpoint) ==
          static_cast<int>(pthload::Errc::kIoOpenFailed));
    std::thread([] { CHECK(pthload_last_error()->code == PTHLOAD_OK); }).join();
    CHECK(pthload_last_error()->code == static_cast<int>(pthload::Errc::kIoOpenFailed));
  }

  TEST_CASE("capi: load from bytes views the caller's bytes without copying") {
    const auto bytes = file_bytes(fixture(kViews));
    pthload_options options;
    pthload_options_init(&options);
    options.map_to = "cpu";
    pthload_checkpoint* raw = nullptr;
    REQUIRE(pthload_load_bytes(bytes.data(), bytes.size(), &options, &raw) == PTHLOAD_OK);
    const CheckpointPtr checkpoint(raw);
    const auto* data =
        static_cast<const std::byte*>(pthload_tensor_data(pthload_checkpoint_tensor(raw, 0)));
    CHECK(data >= bytes.data());
    CHECK(data < bytes.data() + bytes.size());

    options.copy_cpu_storages = 1;
    REQUIRE(pthload_load_bytes(bytes.data(), bytes.size(), &options, &raw) == PTHLOAD_OK);
    const CheckpointPtr copied(raw);
    const auto* copy =
        static_cast<const std::byte*>(pthload_tensor_data(pthload_checkpoint_tensor(raw, 0)));
    CHECK((copy < bytes.data() || copy >= bytes.data() + bytes.size()));
    CHECK(std::memcmp(copy, data, pthload_tensor_nbytes(pthload_checkpoint_tensor(raw, 0))) == 0);
  }

  TEST_CASE("dlpack: a view is exported without copying; the deleter releases the storage") {
    std::optional<pthload::Checkpoint> checkpoint =
        pthload::load(fixture(kViews), {.map_location = pthload::map_to("cpu")});
    const pthload::Tensor column = checkpoint->tensor("column");
    const long holders = column.shared_storage().use_count();
    DLManagedTensor* managed = pthload::to_dlpack(column);
    CHECK(column.shared_storage().use_count() == holders + 1);
    const DLTensor& dl = managed->dl_tensor;
    CHECK(dl.data == column.data());
    CHECK(dl.byte_offset == 0);
    CHECK(dl.device.device_type == kDLCPU);
    CHECK(dl.ndim == 1);
    CHECK(dl.shape[0] == 4);
    CHECK(dl.strides[0] == 6);
    CHECK(dl.dtype.code == kDLFloat);
    CHECK(dl.dtype.bits == 32);
    CHECK(dl.dtype.lanes == 1);

    // The export outlives the checkpoint: its bytes stay mapped until the deleter runs.
    const std::vector<std::byte> before = column.contiguous_bytes();
    checkpoint.reset();
    const long without_checkpoint = column.shared_storage().use_count();
    CHECK(without_checkpoint == 2);  // `column` and the export
    CHECK(std::memcmp(static_cast<const std::byte*>(dl.data) + 6 * 4, before.data() + 4, 4) == 0);
    managed->deleter(managed);
    CHECK(column.shared_storage().use_count() == 1);
  }

  TEST_CASE("dlpack: dtypes DLPack has are exported; the others are refused with a code") {
    const auto checkpoint = pthload::load(fixture("torch/torch-2.15.0/dtypes.pt"),
                                          {.map_location = pthload::map_to("cpu")});
    int exported = 0;
    for (const pthload::NamedTensor& named : checkpoint.tensors()) {
      CAPTURE(named.name);
      if (pthload::dlpack_dtype(named.tensor.dtype())) {
        DLManagedTensor* managed = pthload::to_dlpack(named.tensor);
        CHECK(managed->dl_tensor.dtype.bits / 8 == pthload::element_size(named.tensor.dtype()));
        managed->deleter(managed);
        ++exported;
      } else {
        CHECK_THROWS_AS((void)pthload::to_dlpack(named.tensor), pthload::UnsupportedError);
      }
    }
    CHECK(exported == 32);  // 16 dtypes DLPack 0.6 has, each whole and as a view
  }
}

TEST_SUITE("fixtures") {
  TEST_CASE("memory: open and load over the caller's bytes equal the file's, without a copy") {
    const auto file = file_bytes(fixture(kViews));
    const auto bytes = std::as_bytes(std::span(file));
    const auto cpu = pthload::LoadOptions{.map_location = pthload::map_to("cpu")};
    const auto from_file = pthload::load(fixture(kViews), cpu);
    const auto from_memory = pthload::load(bytes, cpu);
    REQUIRE(from_memory.tensors().size() == from_file.tensors().size());
    for (std::size_t i = 0; i < from_file.tensors().size(); ++i) {
      const pthload::NamedTensor& want = from_file.tensors()[i];
      const pthload::NamedTensor& got = from_memory.tensors()[i];
      CAPTURE(want.name);
      CHECK(got.name == want.name);
      CHECK(got.tensor.content_checksum() == want.tensor.content_checksum());
      CHECK(got.tensor.storage().is_file_view());
      CHECK(got.tensor.data() >= bytes.data());
      CHECK(got.tensor.data() < bytes.data() + bytes.size());
    }
    const auto listed = pthload::open(bytes);
    CHECK(listed.tensors().size() == from_file.tensors().size());
    CHECK_FALSE(listed.storages().front()->is_placed());

    const auto cut = bytes.first(bytes.size() / 2);
    const auto e = error_thrown<pthload::Error>([&] { (void)pthload::open(cut); });
    CHECK(e.context().path == "<memory>");
    CHECK(std::string(e.what()).starts_with("<memory>: "));
  }
}
