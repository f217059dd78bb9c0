// load(): map_location in each form, CPU views and copies, byte order, the device errors, and
// tensors that outlive their checkpoint.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/phase_marks.hpp"
#include "device/device_check.hpp"
#include "device/place.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/checkpoint_file.hpp"
#include "support/error_code.hpp"
#include "support/pickle_writer.hpp"

using pthload::Device;
using pthload::Errc;
using pthload::test::checkpoint_file;
using pthload::test::error_code_of;
using pthload::test::error_thrown;
using pthload::test::float_record;
using pthload::test::PickleWriter;

namespace {

// {'a': cpu storage '0', 'b': storage '1' tagged cuda:0, 'c': storage '2' tagged cuda:3}
pthload::test::TempPath tagged_checkpoint() {
  PickleWriter p;
  p.empty_dict().mark();
  p.str("a").tensor_v2("FloatStorage", "0", 4, 0, {4}, {1}, "cpu");
  p.str("b").tensor_v2("FloatStorage", "1", 4, 0, {2, 2}, {2, 1}, "cuda:0");
  p.str("c").tensor_v2("FloatStorage", "2", 4, 1, {3}, {1}, "cuda:3");
  p.setitems().stop();
  return checkpoint_file(p.bytes(), {{.name = "ck/data/0", .data = float_record(4)},
                                     {.name = "ck/data/1", .data = float_record(4)},
                                     {.name = "ck/data/2", .data = float_record(4)}});
}

float element(const pthload::Tensor& t, std::size_t i) {
  float value;
  std::memcpy(&value, t.data() + i * sizeof(float), sizeof value);
  return value;
}

std::string error_text(const pthload::test::TempPath& file, const pthload::LoadOptions& options) {
  const auto error = pthload::test::error_of([&] { (void)pthload::load(file.path(), options); });
  return error ? error->what() : "";
}

}  // namespace

TEST_CASE("device: without map_location a CUDA tag this machine cannot serve is a clear error") {
  // Without a GPU the first CUDA storage fails; with fewer than 4, the cuda:3 one does.
  const auto file = tagged_checkpoint();
  const int gpus = pthload::cuda_device_count();
  if (gpus >= 4) return;  // every tag exists: nothing to refuse
  CHECK(error_code_of([&] { (void)pthload::load(file.path()); }) ==
        (gpus == 0 ? Errc::kDeviceCudaUnavailable : Errc::kDeviceOrdinalOutOfRange));
  const std::string text = error_text(file, {});
  CHECK(text.find(gpus == 0 ? "storage '1'" : "storage '2'") != std::string::npos);
  CHECK(text.find(gpus == 0 ? "'cuda:0'" : "'cuda:3'") != std::string::npos);
  CHECK(text.find("map_location") != std::string::npos);
  CHECK(text.find("--map-location") == std::string::npos);  // the CLI adds its own words
  CHECK(text.find(file.path().string()) == 0);
}

TEST_CASE("device: without a device the error says no CUDA device, naming storage and fix") {
  // The same decision without depending on this machine: a backend with no device.
  const auto file = tagged_checkpoint();
  auto checkpoint = pthload::open(file.path());
  const auto e = error_thrown<pthload::DeviceError>(
      [&] { pthload::device::place_storages(checkpoint, {}, nullptr); });
  CHECK(e.code() == Errc::kDeviceCudaUnavailable);
  const std::string text = e.what();
  CHECK(text.find("storage '1' is tagged 'cuda:0'") != std::string::npos);
  CHECK(text.find("map_location \"cpu\"") != std::string::npos);
}

TEST_CASE("device: map_location as a device string or a Device") {
  const auto file = tagged_checkpoint();
  for (const auto& map_location : {pthload::map_to("cpu"), pthload::map_to(Device::cpu())}) {
    const auto checkpoint = pthload::load(file.path(), {.map_location = map_location});
    for (const auto& storage : checkpoint.storages()) {
      CHECK(storage->device() == Device::cpu());
      CHECK(storage->is_file_view());
    }
    CHECK(element(checkpoint.tensor("c"), 0) == 1.0f);
    CHECK(checkpoint.tensor("b").storage().location() == "cuda:0");  // the tag is kept
  }
  CHECK(error_code_of([] { (void)pthload::map_to("gpu:0"); }) == Errc::kDeviceUnsupportedType);
}

TEST_CASE("device: map_location \"auto\" is the first GPU when there is one, else the CPU") {
  const Device expected = pthload::cuda_device_count() > 0 ? Device::cuda(0) : Device::cpu();
  CHECK(pthload::auto_device() == expected);
  const auto file = tagged_checkpoint();
  const auto checkpoint = pthload::load(file.path(), {.map_location = pthload::map_to("auto")});
  for (const auto& storage : checkpoint.storages())
    CHECK(storage->device() == expected);
  CHECK(error_code_of([] { (void)pthload::map_to("automatic"); }) == Errc::kDeviceUnsupportedType);
}

TEST_CASE("device: map_location as a dict renames tags exactly") {
  const auto file = tagged_checkpoint();
  const auto checkpoint = pthload::load(
      file.path(), {.map_location = pthload::map_dict({{"cuda:0", "cpu"}, {"cuda:3", "cpu"}})});
  CHECK(checkpoint.storages().size() == 3);
  // A partial dict leaves cuda:3 where its tag says: an error naming that storage and tag.
  const std::string text =
      error_text(file, {.map_location = pthload::map_dict({{"cuda:0", "cpu"}})});
  CHECK(text.find("storage '2' is tagged 'cuda:3'") != std::string::npos);
  // Keys match exactly: "cuda" is not "cuda:0" (placed on no device: nothing is renamed).
  auto opened = pthload::open(file.path());
  CHECK(error_code_of([&] {
          pthload::device::place_storages(
              opened, {.map_location = pthload::map_dict({{"cuda", "cpu"}})}, nullptr);
        }) == Errc::kDeviceCudaUnavailable);
}

TEST_CASE("device: map_location as a callable is called once per storage") {
  const auto file = tagged_checkpoint();
  std::vector<std::string> seen;
  const pthload::MapLocation callable = [&](const pthload::StorageInfo& info,
                                            std::string_view location) -> std::optional<Device> {
    seen.push_back(std::string(info.key) + "@" + std::string(location));
    CHECK(info.nbytes == 16);
    CHECK(info.numel == 4);
    CHECK(info.dtype == pthload::Dtype::kFloat32);
    if (location == "cpu") return std::nullopt;  // falls back to the tag
    return Device::cpu();
  };
  const auto checkpoint = pthload::load(file.path(), {.map_location = callable});
  CHECK(seen == std::vector<std::string>{"0@cpu", "1@cuda:0", "2@cuda:3"});
  CHECK(checkpoint.tensor("a").device() == Device::cpu());
}

TEST_CASE("device: a map_location answer that is no device is refused, before any byte moves") {
  const auto file = tagged_checkpoint();
  const auto answering = [](Device device) -> pthload::MapLocation {
    return [device](const pthload::StorageInfo&, std::string_view) -> std::optional<Device> {
      return device;
    };
  };
  // A type outside the enum (a cast integer) left every storage unplaced, without an error.
  const Device bogus{static_cast<Device::Type>(7), 0};
  for (const auto& map_location : {answering(bogus), pthload::map_to(bogus)}) {
    auto opened = pthload::open(file.path());
    const auto e = error_thrown<pthload::UnsupportedError>(
        [&] { pthload::device::place_storages(opened, {.map_location = map_location}, nullptr); });
    CHECK(e.code() == Errc::kDeviceUnsupportedType);
    const std::string text = e.what();
    CHECK(text.find("storage '0' is tagged 'cpu'") != std::string::npos);
    CHECK(text.find("device type 7") != std::string::npos);
    for (const auto& storage : opened.storages())
      CHECK_FALSE(storage->is_placed());
  }
  // torch refuses a negative index other than -1 ("Device index must not be negative").
  CHECK(error_code_of([&] {
          (void)pthload::load(file.path(), {.map_location = answering(Device::cuda(-2))});
        }) == Errc::kDeviceOrdinalOutOfRange);
  // A CPU or meta index is dropped, as torch's t.to("cpu:5") lands on "cpu".
  for (const Device device : {Device{Device::Type::kCpu, 5}, Device{Device::Type::kMeta, 0}}) {
    const auto checkpoint = pthload::load(file.path(), {.map_location = answering(device)});
    for (const auto& storage : checkpoint.storages()) {
      CHECK(storage->is_placed());
      CHECK(storage->device().index == -1);
      CHECK(storage->device().type == device.type);
    }
  }
}

TEST_CASE("device: a CUDA ordinal past the device count names the fix") {
  pthload::internal::StorageState storage;
  storage.key = "2";
  storage.location = "cuda:3";
  const auto e = error_thrown<pthload::DeviceError>(
      [&] { pthload::device::check_device_exists(storage, Device::cuda(3), false, 1); });
  CHECK(e.code() == Errc::kDeviceOrdinalOutOfRange);
  const std::string text = e.what();
  CHECK(text.find("storage '2' is tagged 'cuda:3'") != std::string::npos);
  CHECK(text.find("1 CUDA device") != std::string::npos);
  CHECK(text.find("map_location") != std::string::npos);
  CHECK_NOTHROW(pthload::device::check_device_exists(storage, Device::cuda(0), true, 1));
  CHECK_NOTHROW(pthload::device::check_device_exists(storage, Device::cpu(), false, 0));
}

TEST_CASE("device: copy mode gives owned aligned buffers equal to the views") {
  const auto file = tagged_checkpoint();
  const auto cpu = pthload::map_to("cpu");
  const auto views = pthload::load(file.path(), {.map_location = cpu});
  const auto copies = pthload::load(file.path(), {.map_location = cpu, .copy_cpu_storages = true});
  for (std::size_t i = 0; i < views.storages().size(); ++i) {
    const auto& view = *views.storages()[i];
    const auto& copy = *copies.storages()[i];
    CHECK(view.is_file_view());
    CHECK_FALSE(copy.is_file_view());
    CHECK(reinterpret_cast<std::uintptr_t>(copy.bytes().data()) % 64 == 0);
    REQUIRE(view.bytes().size() == copy.bytes().size());
    CHECK(std::memcmp(view.bytes().data(), copy.bytes().data(), view.bytes().size()) == 0);
  }
}

TEST_CASE("device: a copy load's small storages share one block, which a kept tensor keeps") {
  // Two small storages around one past PackedCopies::kMaxPieceBytes (4 KiB), which gets a buffer
  // of its own.
  PickleWriter p;
  p.empty_dict().mark();
  p.str("small").tensor_v2("FloatStorage", "0", 4, 0, {4}, {1}, "cpu");
  p.str("large").tensor_v2("FloatStorage", "1", 2000, 0, {2000}, {1}, "cpu");
  p.str("tail").tensor_v2("FloatStorage", "2", 3, 1, {2}, {1}, "cpu");
  p.setitems().stop();
  const auto file = checkpoint_file(p.bytes(), {{.name = "ck/data/0", .data = float_record(4)},
                                                {.name = "ck/data/1", .data = float_record(2000)},
                                                {.name = "ck/data/2", .data = float_record(3)}});
  std::optional<pthload::Tensor> kept;
  {
    const auto views = pthload::load(file.path());
    const auto copies = pthload::load(file.path(), {.copy_cpu_storages = true});
    REQUIRE(copies.storages().size() == 3);
    for (std::size_t i = 0; i < copies.storages().size(); ++i) {
      const auto& view = *views.storages()[i];
      const auto& copy = *copies.storages()[i];
      CHECK_FALSE(copy.is_file_view());
      CHECK(reinterpret_cast<std::uintptr_t>(copy.bytes().data()) % 64 == 0);
      REQUIRE(view.bytes().size() == copy.bytes().size());
      CHECK(std::memcmp(view.bytes().data(), copy.bytes().data(), view.bytes().size()) == 0);
    }
    // Pieces of one block, in the order they were placed (file order): 16 bytes take 64.
    CHECK(copies.storages()[2]->bytes().data() == copies.storages()[0]->bytes().data() + 64);
    kept = copies.tensor("tail");
  }
  // The checkpoint, and the storages the tensor does not use, are gone; the block is not.
  REQUIRE(kept->numel() == 2);
  CHECK(element(*kept, 0) == 1.0f);
  CHECK(element(*kept, 1) == 2.0f);
}

TEST_CASE(
    "device: to() after open() places as load() with open()'s options; its errors name the "
    "file") {
  const auto file = tagged_checkpoint();
  auto opened = pthload::open(
      file.path(), {.copy_cpu_storages = true, .floating_dtype = pthload::Dtype::kBFloat16});
  opened.to(Device::cpu());
  const auto& a = opened.tensor("a");
  CHECK(a.dtype() == pthload::Dtype::kBFloat16);
  CHECK_FALSE(a.storage().is_file_view());
  CHECK(a.nbytes() == 4 * 2);

  // Moving a placed checkpoint: the error names the file, as load()'s do.
  auto loaded = pthload::load(file.path(), {.map_location = pthload::map_to("cpu")});
  const auto e = error_thrown<pthload::DeviceError>([&] { loaded.to(Device::cuda(99)); });
  CHECK(e.context().path == file.path().string());
}

TEST_CASE("device: meta placement reads no bytes") {
  const auto file = tagged_checkpoint();
  const auto checkpoint = pthload::load(file.path(), {.map_location = pthload::map_to("meta")});
  const auto& storage = checkpoint.tensor("a").storage();
  CHECK(storage.is_placed());
  CHECK(storage.device() == Device::meta());
  CHECK(error_code_of([&] { (void)storage.bytes(); }) == Errc::kDeviceNotOnCpu);
}

TEST_CASE("device: a tensor outlives its checkpoint") {
  const auto file = tagged_checkpoint();
  std::optional<pthload::Tensor> kept;
  {
    const auto checkpoint = pthload::load(file.path(), {.map_location = pthload::map_to("cpu")});
    kept = checkpoint.tensor("c");
  }
  CHECK(element(*kept, 2) == 3.0f);
}

TEST_CASE("device: a big-endian checkpoint is byte-swapped by element size") {
  PickleWriter p;
  p.empty_dict().mark();
  p.str("f").tensor_v2("FloatStorage", "0", 2, 0, {2}, {1});
  p.str("h").tensor_v2("ShortStorage", "1", 2, 0, {2}, {1});
  p.setitems().stop();
  std::string floats;  // 1.5f and -2.0f, big-endian
  for (const std::uint32_t bits : {0x3fc00000u, 0xc0000000u}) {
    for (int shift = 24; shift >= 0; shift -= 8)
      floats += static_cast<char>((bits >> shift) & 0xff);
  }
  const auto file = checkpoint_file(
      p.bytes(), {{.name = "ck/byteorder", .data = "big"},
                  {.name = "ck/data/0", .data = floats},
                  {.name = "ck/data/1", .data = std::string("\x01\x02\x00\x07", 4)}});
  const auto checkpoint = pthload::load(file.path());
  const auto& f = checkpoint.tensor("f");
  CHECK_FALSE(f.storage().is_file_view());
  CHECK(element(f, 0) == 1.5f);
  CHECK(element(f, 1) == -2.0f);
  std::int16_t shorts[2];
  std::memcpy(shorts, checkpoint.tensor("h").data(), sizeof shorts);
  CHECK(shorts[0] == 0x0102);
  CHECK(shorts[1] == 7);
}

TEST_CASE("device: a view's contiguous bytes and checksum follow its strides") {
  PickleWriter p;
  p.tensor_v2("FloatStorage", "0", 6, 0, {3, 2}, {1, 3}).stop();  // transpose of [[0,1,2],[3,4,5]]
  const auto file = checkpoint_file(p.bytes(), {{.name = "ck/data/0", .data = float_record(6)}});
  const auto checkpoint = pthload::load(file.path());
  const auto& t = checkpoint.tensors().front().tensor;
  const auto bytes = t.contiguous_bytes();
  std::vector<float> values(6);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  CHECK(values == std::vector<float>{0, 3, 1, 4, 2, 5});

  PickleWriter q;
  q.tensor_v2("FloatStorage", "0", 6, 0, {6}, {1}).stop();
  std::string reordered;
  for (const float v : values)
    reordered.append(reinterpret_cast<const char*>(&v), sizeof v);
  const auto same = checkpoint_file(q.bytes(), {{.name = "ck/data/0", .data = reordered}});
  const auto contiguous = pthload::load(same.path());
  CHECK(t.content_checksum() == contiguous.tensors().front().tensor.content_checksum());
}

namespace {
std::vector<std::string> ended_phases;
void remember_phase(const char* phase) noexcept {
  try {
    ended_phases.emplace_back(phase);
  } catch (...) {
  }
}
}  // namespace

TEST_CASE("device: a load names its phases in order to an installed recorder, and only then") {
  const auto file = tagged_checkpoint();
  const auto cpu = pthload::map_to("cpu");
  ended_phases.clear();
  pthload::common::phases::set_recorder(remember_phase);
  (void)pthload::load(file.path(), {.map_location = cpu});
  pthload::common::phases::set_recorder(nullptr);
  CHECK(ended_phases == std::vector<std::string>{"read the structure", "parse the archive",
                                                 "run the pickle", "name the tensors",
                                                 "find unused storages", "choose tensors",
                                                 "place the storages"});
  ended_phases.clear();
  (void)pthload::load(file.path(), {.map_location = cpu});
  CHECK(ended_phases.empty());
}

TEST_CASE(
    "device: tensors kept from a large checkpoint outlive it, released on one thread or two") {
  // A pickle past the size from which a checkpoint allowed a second thread releases its value
  // tree and zip index on one (checkpoint.cpp release()) while the tensors and storages go.
  PickleWriter p;
  p.empty_dict();
  for (int i = 0; i < 3000; ++i) {
    p.str("t" + std::to_string(i));
    p.tensor_v2("FloatStorage", std::to_string(i % 1000), 8, i % 4, {2}, {1});
    p.setitem();
  }
  p.str("padding").str(std::string(300'000, 'x')).setitem();
  std::vector<pthload::test::zip_build::Record> records;
  for (int key = 0; key < 1000; ++key) {
    // 8 floats, distinct across the file
    records.push_back({.name = "ck/data/" + std::to_string(key),
                       .data = float_record(8, static_cast<float>(key * 8))});
  }
  const auto file = pthload::test::checkpoint_file(p.stop().bytes(), records);
  const auto reference = pthload::load(file.path(), {.copy_cpu_storages = true});
  for (const unsigned threads : {1u, 2u}) {
    for (const bool copy : {false, true}) {
      CAPTURE(threads);
      CAPTURE(copy);
      const pthload::LoadOptions options{.copy_cpu_storages = copy, .parse_threads = threads};
      std::vector<pthload::NamedTensor> kept;
      {
        auto checkpoint = pthload::load(file.path(), options);
        for (std::size_t i = 0; i < checkpoint.tensors().size(); i += 7)
          kept.push_back(checkpoint.tensors()[i]);
        // Assigning over a checkpoint releases the one it held as its destructor would.
        checkpoint = pthload::load(file.path(), options);
        for (std::size_t i = 3; i < checkpoint.tensors().size(); i += 7)
          kept.push_back(checkpoint.tensors()[i]);
      }
      REQUIRE(kept.size() == 858);
      for (const auto& named : kept) {
        const auto& expected = reference.tensor(named.name.view());
        CHECK(named.tensor.sizes()[0] == 2);
        CHECK(named.tensor.storage_offset() == expected.storage_offset());
        CHECK(named.tensor.storage().key() == expected.storage().key());
        const auto bytes = named.tensor.contiguous_bytes();
        const auto want = expected.contiguous_bytes();
        REQUIRE(bytes.size() == want.size());
        CHECK(std::equal(bytes.begin(), bytes.end(), want.begin()));
      }
    }
  }
}
