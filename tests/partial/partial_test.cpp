// Partial loading (issue 14): LoadOptions' only/exclude/filter, map_location's kSkipStorage,
// select and rename_prefix, load_slice, and lazy shards, on files the real torch wrote
// (tests/fixtures/make_partial_fixtures.py). That a partial or sliced load reads only the chosen
// bytes is shown twice: by the bytes placement counts, and by loading from a copy of the file
// whose pages holding nothing chosen are unreadable (PROT_NONE), where any read of them kills
// the process — and a control that does read them crashes.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "device/host_backend.hpp"
#include "device/place.hpp"
#include "device/select_slice.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "pthload/slice.hpp"
#include "support/checkpoint_file.hpp"
#include "support/error_code.hpp"
#include "support/pickle_writer.hpp"
#include "checkpoint/access.hpp"
#include "checkpoint/select.hpp"
#include "checkpoint/state.hpp"

using pthload::Errc;
using pthload::IoStrategy;
using pthload::test::checkpoint_file;
using pthload::test::error_code_of;
using pthload::test::float_record;
using pthload::test::PickleWriter;
namespace fs = std::filesystem;

namespace {

const fs::path kFixtures = fs::path(PTHLOAD_FIXTURES_DIR) / "partial";

std::vector<std::byte> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(text.size());
  std::transform(text.begin(), text.end(), bytes.begin(),
                 [](char c) { return static_cast<std::byte>(c); });
  return bytes;
}

std::vector<std::string> names_of(const pthload::Checkpoint& checkpoint) {
  std::vector<std::string> names;
  for (const auto& named : checkpoint.tensors())
    names.push_back(named.name);
  std::sort(names.begin(), names.end());
  return names;
}

// Whether `file` has any part of the file mapped: a mapping, or an io=map image's mapping for
// views beside its pread image.
bool maps_file(const pthload::common::MappedFile& file) {
  return file.is_mapped() || file.view_bytes().data() != file.bytes().data();
}

// load() and open() of a file with `options` and the I/O strategy `io`.
pthload::Checkpoint load_with(IoStrategy io, const fs::path& path,
                              pthload::LoadOptions options = {}) {
  options.io = io;
  return pthload::load(path, options);
}
pthload::Checkpoint open_with(IoStrategy io, const fs::path& path,
                              pthload::LoadOptions options = {}) {
  options.io = io;
  return pthload::open(path, options);
}

std::map<std::string, std::uint64_t> checksums_of(const pthload::Checkpoint& checkpoint) {
  std::map<std::string, std::uint64_t> sums;
  for (const auto& named : checkpoint.tensors())
    sums[named.name] = named.tensor.content_checksum();
  return sums;
}

std::uint64_t storage_bytes(const pthload::Checkpoint& checkpoint) {
  std::uint64_t bytes = 0;
  for (const auto& storage : checkpoint.storages())
    bytes += storage->nbytes();
  return bytes;
}

// MANIFEST.txt's lines that start with `kind`, split at tabs (without the kind).
std::vector<std::vector<std::string>> manifest(const std::string& kind) {
  std::ifstream in(kFixtures / "MANIFEST.txt");
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields;
    std::stringstream split(line);
    for (std::string field; std::getline(split, field, '\t');)
      fields.push_back(field);
    if (!fields.empty() && fields[0] == kind) rows.emplace_back(fields.begin() + 1, fields.end());
  }
  return rows;
}

// A copy of a file in page-aligned memory whose pages can be made unreadable.
class ProtectedCopy {
 public:
  explicit ProtectedCopy(const std::vector<std::byte>& bytes)
      : page_(static_cast<std::size_t>(::sysconf(_SC_PAGESIZE))),
        size_(bytes.size()),
        mapped_((bytes.size() + page_ - 1) / page_ * page_) {
    void* memory =
        ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(memory != MAP_FAILED);
    data_ = static_cast<std::byte*>(memory);
    std::copy(bytes.begin(), bytes.end(), data_);
  }
  ProtectedCopy(const ProtectedCopy&) = delete;
  ProtectedCopy& operator=(const ProtectedCopy&) = delete;
  ~ProtectedCopy() { ::munmap(data_, mapped_); }

  [[nodiscard]] std::span<const std::byte> bytes() const { return {data_, size_}; }

  // Makes the whole pages inside [begin, end) of the file unreadable; returns how many bytes.
  std::uint64_t protect(std::uint64_t begin, std::uint64_t end) {
    const std::uint64_t first = (begin + page_ - 1) / page_ * page_;
    const std::uint64_t last = end / page_ * page_;
    if (first >= last) return 0;
    REQUIRE(::mprotect(data_ + first, last - first, PROT_NONE) == 0);
    return last - first;
  }

 private:
  std::size_t page_;
  std::size_t size_;
  std::size_t mapped_;
  std::byte* data_ = nullptr;
};

// Where a storage's bytes are in its file (zip record data, or a safetensors range).
std::pair<std::uint64_t, std::uint64_t> file_range_of(const pthload::Storage& storage) {
  const auto begin = pthload::internal::file_offset(pthload::internal::Access::state(storage));
  return {begin, begin + storage.nbytes()};
}

// Runs `body` in a child process: whether it crashed (a signal, or under ASan, whose SEGV
// handler reports and exits 1, any status but 0 = done and 2 = threw).
bool crashes(const std::function<void()>& body) {
  const pid_t child = ::fork();
  if (child == 0) {
    // doctest's own handler would report the crash as this test's failure.
    std::signal(SIGSEGV, SIG_DFL);
    std::signal(SIGBUS, SIG_DFL);
    try {
      body();
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  if (WIFSIGNALED(status)) return true;
  return WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 2;
}

}  // namespace

TEST_CASE("partial: globs match as fnmatch without special dots") {
  using pthload::internal::glob_matches;
  CHECK(glob_matches("layers.0.weight", "layers.0.weight"));
  CHECK_FALSE(glob_matches("layers.0.weight", "layers.0.weights"));
  CHECK(glob_matches("layers.*", "layers.0.weight"));
  CHECK(glob_matches("*.weight", "layers.10.weight"));
  CHECK_FALSE(glob_matches("*.weight", "layers.10.bias"));
  CHECK(glob_matches("layers.?.bias", "layers.3.bias"));
  CHECK_FALSE(glob_matches("layers.?.bias", "layers.13.bias"));
  CHECK(glob_matches("layers.[0-2].*", "layers.2.bias"));
  CHECK_FALSE(glob_matches("layers.[0-2].*", "layers.3.bias"));
  CHECK(glob_matches("layers.[!0-2].*", "layers.3.bias"));
  CHECK(glob_matches("a[b", "a[b"));  // an unclosed set is a plain '['
  CHECK(glob_matches("*", ""));
  CHECK_FALSE(glob_matches("?", ""));
  CHECK(glob_matches("*a*a*a*a*b", std::string(60, 'a') + "b"));
  CHECK_FALSE(glob_matches("*a*a*a*a*b", std::string(60, 'a')));
}

TEST_CASE("partial: select strips the sub-tree's name, then the first matching prefix is renamed") {
  pthload::LoadOptions options{.select = "state_dict",
                               .rename_prefix = {{"module.", ""}, {"module.x", "never"}}};
  CHECK(pthload::internal::renamed(options, "state_dict.module.x.weight") == "x.weight");
  CHECK(pthload::internal::renamed(options, "state_dict.head") == "head");
  CHECK_FALSE(pthload::internal::renamed(options, "state_dictx.head").has_value());
  CHECK_FALSE(pthload::internal::renamed(options, "state_dict").has_value());
  CHECK_FALSE(pthload::internal::renamed(options, "ema.head").has_value());
  options.only = {"x.*", "head"};
  options.exclude = {"*.bias"};
  options.filter = [](std::string_view name) { return name != "x.skip"; };
  CHECK(pthload::internal::chosen(options, "x.weight"));
  CHECK(pthload::internal::chosen(options, "head"));
  CHECK_FALSE(pthload::internal::chosen(options, "x.bias"));
  CHECK_FALSE(pthload::internal::chosen(options, "x.skip"));
  CHECK_FALSE(pthload::internal::chosen(options, "y.weight"));
}

TEST_CASE("partial: a slice without elements keeps torch's strides, even beside huge sizes") {
  // The empty tensor torch loads from such a file (sizes [3, 0, 2^62, 2^62], strides 0):
  // contiguous strides for it overflow int64; torch's narrow().contiguous() keeps the view's.
  constexpr std::int64_t kHuge = std::int64_t{1} << 62;
  PickleWriter p;
  p.empty_dict().mark();
  p.str("empty").tensor_v2("FloatStorage", "0", 0, 0, {3, 0, kHuge, kHuge}, {0, 0, 0, 0});
  p.str("rows").tensor_v2("FloatStorage", "1", 6, 0, {3, 2}, {2, 1});
  p.setitems().stop();
  const auto file = checkpoint_file(p.bytes(), {{.name = "ck/data/0", .data = ""},
                                                {.name = "ck/data/1", .data = float_record(6)}});
  const auto opened = pthload::open(file.path());
  for (const auto& [dim, begin, end] : std::vector<std::tuple<int, std::int64_t, std::int64_t>>{
           {0, 0, 3}, {0, 1, 2}, {-1, 0, kHuge}, {-1, kHuge - 1, kHuge}}) {
    CAPTURE(dim);
    CAPTURE(begin);
    const auto slice = pthload::load_slice(opened, "empty", dim, begin, end);
    CHECK(slice.numel() == 0);
    CHECK(slice.nbytes() == 0);
    CHECK(std::vector(slice.strides().begin(), slice.strides().end()) ==
          std::vector<std::int64_t>{0, 0, 0, 0});
    CHECK(slice.sizes()[dim == 0 ? 0 : 3] == end - begin);
  }
  // An empty range of a tensor with elements: the tensor's strides, as narrow() gives.
  const auto none = pthload::load_slice(opened, "rows", 0, 1, 1);
  CHECK(std::vector(none.sizes().begin(), none.sizes().end()) == std::vector<std::int64_t>{0, 2});
  CHECK(std::vector(none.strides().begin(), none.strides().end()) ==
        std::vector<std::int64_t>{2, 1});
  // With elements: contiguous strides.
  const auto column = pthload::load_slice(opened, "rows", -1, 1, 2);
  CHECK(std::vector(column.strides().begin(), column.strides().end()) ==
        std::vector<std::int64_t>{1, 1});
}

TEST_CASE("partial: load_slice checks the device it is given, and names where a storage lies") {
  PickleWriter p;
  p.empty_dict().mark();
  p.str("rows").tensor_v2("FloatStorage", "0", 6, 0, {3, 2}, {2, 1});
  p.setitems().stop();
  const auto file = checkpoint_file(p.bytes(), {{.name = "ck/data/0", .data = float_record(6)}});
  const auto opened = pthload::open(file.path());
  const auto slice_onto = [&](pthload::Device device) {
    return pthload::load_slice(opened, "rows", 0, 0, 2, device);
  };
  // A type outside the enum (a cast integer) was placed nowhere and called "unknown".
  const pthload::Device bogus{static_cast<pthload::Device::Type>(7), 0};
  CHECK(error_code_of([&] { (void)slice_onto(bogus); }) == Errc::kDeviceUnsupportedType);
  CHECK(error_code_of([&] { (void)slice_onto(pthload::Device::cuda(-3)); }) ==
        Errc::kDeviceOrdinalOutOfRange);
  // torch's t.to("cpu:5") lands on "cpu"; so does a slice.
  CHECK(slice_onto({pthload::Device::Type::kCpu, 5}).device() == pthload::Device::cpu());
  CHECK(slice_onto({pthload::Device::Type::kMeta, 1}).device() == pthload::Device::meta());

  // A storage placed on meta has no bytes; the error said "a GPU".
  const auto on_meta = pthload::load(file.path(), {.map_location = pthload::map_to("meta")});
  try {
    (void)pthload::load_slice(on_meta, "rows", 0, 0, 1);
    FAIL("no error");
  } catch (const pthload::UnsupportedError& e) {
    CHECK(e.code() == Errc::kSliceUnsupported);
    const std::string text = e.what();
    CHECK(text.find("placed on meta") != std::string::npos);
    CHECK(text.find("GPU") == std::string::npos);
  }
  auto backend = std::make_shared<pthload::device::HostBackend>();
  auto on_gpu = pthload::open(file.path());
  pthload::device::place_storages(on_gpu, {.map_location = pthload::map_to("cuda:0")}, backend);
  try {
    (void)pthload::load_slice(on_gpu, "rows", 0, 0, 1);
    FAIL("no error");
  } catch (const pthload::UnsupportedError& e) {
    CHECK(std::string(e.what()).find("placed on cuda:0") != std::string::npos);
  }
}

TEST_SUITE("fixtures") {
  TEST_CASE("partial: only, exclude and a predicate keep the chosen tensors and their storages") {
    // Both I/O strategies: each SUBCASE runs the case once more.
    IoStrategy io = IoStrategy::kMap;
    SUBCASE("io=map") {}
    SUBCASE("io=read") {
      io = IoStrategy::kRead;
    }
    for (const char* file : {"model.pt", "model.safetensors"}) {
      CAPTURE(file);
      const auto path = kFixtures / file;
      const auto whole = load_with(io, path, {.map_location = pthload::map_to("cpu")});
      const auto all = checksums_of(whole);
      CHECK(pthload::internal::Access::state(whole).placed_bytes == storage_bytes(whole));

      const auto part = load_with(io, path, {.only = {"layers.0.*"}, .exclude = {"*.bias"}});
      const bool tied = std::string(file) == "model.pt";
      CHECK(names_of(part) == (tied ? std::vector<std::string>{"layers.0.upper", "layers.0.weight"}
                                    : std::vector<std::string>{"layers.0.weight"}));
      // layers.0.upper views layers.0.weight's storage: one storage, placed once.
      REQUIRE(part.storages().size() == 1);
      CHECK(part.storages()[0]->is_placed());
      CHECK(pthload::internal::Access::state(part).placed_bytes == 8 * 2048 * 4);
      // Not structured bindings: doctest's CHECK is a lambda, and clang 14 cannot capture them.
      for (const auto& entry : checksums_of(part))
        CHECK(entry.second == all.at(entry.first));

      const auto by_predicate = load_with(
          io, path, {.filter = [](std::string_view name) { return name.ends_with(".bias"); }});
      CHECK(names_of(by_predicate) == std::vector<std::string>{"layers.0.bias"});
      CHECK(pthload::internal::Access::state(by_predicate).placed_bytes == 2048 * 4);

      // open() chooses too: a listing of the chosen tensors reads no tensor byte.
      const auto listed = open_with(io, path, {.only = {"embed.weight", "layers.1.*"}});
      CHECK(names_of(listed) ==
            std::vector<std::string>{"embed.weight", "layers.1.scale", "layers.1.weight"});
      CHECK(listed.storages().size() == 3);
      for (const auto& storage : listed.storages())
        CHECK_FALSE(storage->is_placed());
      // The file's unused storages are still the file's: none here.
      CHECK(listed.unused_storages().empty());
    }
  }

  TEST_CASE("partial: a storage tied to a left-out tensor is placed once for the kept one") {
    // Both I/O strategies: each SUBCASE runs the case once more.
    IoStrategy io = IoStrategy::kMap;
    SUBCASE("io=map") {}
    SUBCASE("io=read") {
      io = IoStrategy::kRead;
    }
    const auto path = kFixtures / "model.pt";
    const auto whole = load_with(io, path, {.map_location = pthload::map_to("cpu")});
    const auto head = load_with(io, path, {.only = {"head.weight"}});
    CHECK(names_of(head) == std::vector<std::string>{"head.weight"});
    REQUIRE(head.storages().size() == 1);
    CHECK(pthload::internal::Access::state(head).placed_bytes == 16 * 1024 * 4);
    CHECK(head.tensor("head.weight").content_checksum() ==
          whole.tensor("embed.weight").content_checksum());
    CHECK(error_code_of([&] { (void)head.tensor("embed.weight"); }) == Errc::kTorchNameNotFound);
  }

  TEST_CASE("partial: map_location's kSkipStorage leaves a storage and its tensors out") {
    const auto path = kFixtures / "model.pt";
    std::vector<std::string> asked;
    const auto skip_big = [&](const pthload::StorageInfo& s, std::string_view) {
      asked.emplace_back(s.key);
      return s.nbytes > 64 * 1024 ? std::optional(pthload::kSkipStorage)
                                  : std::optional(pthload::Device::cpu());
    };
    const auto loaded = pthload::load(path, {.map_location = skip_big});
    CHECK(asked.size() == 5);  // once per storage
    CHECK(names_of(loaded) == std::vector<std::string>{"embed.weight", "head.weight",
                                                       "layers.0.bias", "layers.0.upper",
                                                       "layers.0.weight", "layers.1.scale"});
    CHECK(loaded.storages().size() == 4);
    CHECK(pthload::internal::Access::state(loaded).placed_bytes ==
          64 * 1024 + 64 * 1024 + 8 * 1024 + 6000);
    for (const auto& storage : loaded.storages())
      CHECK(storage->is_placed());

    // The same through the GPU pipeline (the host backend stands in for CUDA in CI).
    auto backend = std::make_shared<pthload::device::HostBackend>();
    auto opened = pthload::open(path);
    pthload::device::place_storages(opened,
                                    {.map_location =
                                         [](const pthload::StorageInfo& s, std::string_view) {
                                           return s.nbytes > 64 * 1024
                                                      ? std::optional(pthload::kSkipStorage)
                                                      : std::optional(pthload::Device::cuda(0));
                                         }},
                                    backend);
    CHECK(names_of(opened) == names_of(loaded));
    CHECK(pthload::internal::Access::state(opened).placed_bytes ==
          pthload::internal::Access::state(loaded).placed_bytes);
    REQUIRE(opened.storages().size() == loaded.storages().size());
    for (std::size_t i = 0; i < opened.storages().size(); ++i) {
      const auto& device = *opened.storages()[i];
      const auto expected = loaded.storages()[i]->bytes();
      CHECK(device.device() == pthload::Device::cuda(0));
      REQUIRE(device.device_pointer() != nullptr);
      CHECK(std::memcmp(device.device_pointer(), expected.data(), expected.size()) == 0);
    }
  }

  TEST_CASE("partial: a partial load through the pipeline places only the chosen storages") {
    const auto path = kFixtures / "model.pt";
    const auto cpu = pthload::load(path, {.only = {"layers.*"}});
    auto backend = std::make_shared<pthload::device::HostBackend>();
    pthload::LoadOptions options{.map_location = pthload::map_to("cuda:0"), .only = {"layers.*"}};
    auto opened = pthload::open(path, options);
    pthload::device::PipelineReport report;
    pthload::device::place_storages(opened, options, backend, &report);
    REQUIRE(opened.storages().size() == cpu.storages().size());
    CHECK(pthload::internal::Access::state(opened).placed_bytes ==
          64 * 1024 + 8 * 1024 + 128 * 1024 + 6000);
    for (std::size_t i = 0; i < opened.storages().size(); ++i) {
      const auto& device = *opened.storages()[i];
      const auto expected = cpu.storages()[i]->bytes();
      CHECK(device.device() == pthload::Device::cuda(0));
      REQUIRE(device.device_pointer() != nullptr);
      CHECK(std::memcmp(device.device_pointer(), expected.data(), expected.size()) == 0);
    }
  }

  TEST_CASE("partial: a partial load reads no byte of the storages it leaves out") {
    for (const char* file : {"model.pt", "model.safetensors"}) {
      CAPTURE(file);
      const auto bytes = read_file(kFixtures / file);
      ProtectedCopy copy(bytes);
      const pthload::LoadOptions chosen{.copy_cpu_storages = true,
                                        .only = {"layers.0.bias", "layers.1.*"}};
      // Expected values and the storages' places, before anything is protected.
      const auto expected = checksums_of(pthload::load(copy.bytes(), chosen));
      const auto whole = pthload::open(copy.bytes());
      const auto kept = pthload::open(copy.bytes(), chosen);
      std::set<std::string> kept_keys;
      for (const auto& storage : kept.storages())
        kept_keys.emplace(storage->key());
      std::uint64_t protected_bytes = 0;
      for (const auto& storage : whole.storages()) {
        if (kept_keys.contains(std::string(storage->key()))) continue;
        const auto [begin, end] = file_range_of(*storage);
        protected_bytes += copy.protect(begin, end);
      }
      CHECK(protected_bytes >= 100 * 1024);  // embed.weight and layers.0.weight, but their edges
      // Copies (not views) so that every chosen byte is really read.
      const auto loaded = pthload::load(copy.bytes(), chosen);
      CHECK(checksums_of(loaded) == expected);
      CHECK(pthload::internal::Access::state(loaded).placed_bytes == 8 * 1024 + 128 * 1024 + 6000);
      // The control: a whole load does touch the protected pages, and dies of it.
      CHECK(crashes([&] { (void)pthload::load(copy.bytes(), {.copy_cpu_storages = true}); }));
    }
  }

  TEST_CASE("partial: load_slice gives torch's narrow() of rows and columns") {
    // Both I/O strategies: each SUBCASE runs the case once more.
    IoStrategy io = IoStrategy::kMap;
    SUBCASE("io=map") {}
    SUBCASE("io=read") {
      io = IoStrategy::kRead;
    }
    const auto slices = manifest("slice");
    REQUIRE(slices.size() == 16);
    for (const auto& row : slices) {
      const auto& file = row[0];
      const auto& name = row[1];
      const int dim = std::stoi(row[2]);
      const auto begin = std::stoll(row[3]);
      const auto end = std::stoll(row[4]);
      CAPTURE(file);
      CAPTURE(name);
      CAPTURE(dim);
      CAPTURE(begin);
      const auto opened = open_with(io, kFixtures / file);
      const auto slice = pthload::load_slice(opened, name, dim, begin, end);
      CHECK(fmt::format("{:016x}", slice.content_checksum()) == row[5]);
      CHECK(slice.is_contiguous());
      CHECK(slice.storage().is_placed());
      const auto& whole = opened.tensor(name);
      const auto axis =
          static_cast<std::size_t>(dim < 0 ? dim + static_cast<int>(whole.dim()) : dim);
      CHECK(slice.sizes()[axis] == end - begin);
      // From a loaded checkpoint (the storage on the CPU, here a copy) the same.
      const auto loaded = load_with(io, kFixtures / file, {.copy_cpu_storages = true});
      CHECK(pthload::load_slice(loaded, name, dim, begin, end).content_checksum() ==
            slice.content_checksum());
      // Through the pipeline onto a (host-backend) GPU: the same bytes.
      auto backend = std::make_shared<pthload::device::HostBackend>();
      const auto on_device = pthload::device::load_slice(opened, name, dim, begin, end,
                                                         pthload::Device::cuda(0), {}, backend);
      CHECK(on_device.device() == pthload::Device::cuda(0));
      const auto host = slice.contiguous_bytes();
      if (!host.empty()) {
        REQUIRE(on_device.storage().device_pointer() != nullptr);
        CHECK(std::memcmp(on_device.storage().device_pointer(), host.data(), host.size()) == 0);
      }
    }
  }

  TEST_CASE("partial: load_slice refuses other dimensions, ranges and tensors it cannot slice") {
    const auto opened = pthload::open(kFixtures / "model.pt");
    const auto code = [&](const char* name, int dim, std::int64_t begin, std::int64_t end) {
      return error_code_of([&] { (void)pthload::load_slice(opened, name, dim, begin, end); });
    };
    CHECK(code("embed.weight", 0, 0, 17) == Errc::kSliceBadRange);
    CHECK(code("embed.weight", 0, 5, 4) == Errc::kSliceBadRange);
    CHECK(code("embed.weight", 0, -1, 4) == Errc::kSliceBadRange);   // [15, 4)
    CHECK(code("embed.weight", 0, -17, 4) == Errc::kSliceBadRange);  // before the start
    CHECK(code("embed.weight", 0, 0, -17) == Errc::kSliceBadRange);
    // Negative bounds count from the end, as Python's t[-12:-4] does.
    for (const int dim : {0, -1}) {
      const std::int64_t extent = dim == 0 ? 16 : 1024;
      CHECK(pthload::load_slice(opened, "embed.weight", dim, -12, -4).content_checksum() ==
            pthload::load_slice(opened, "embed.weight", dim, extent - 12, extent - 4)
                .content_checksum());
      CHECK(pthload::load_slice(opened, "embed.weight", dim, -extent, extent).content_checksum() ==
            pthload::load(kFixtures / "model.pt").tensor("embed.weight").content_checksum());
    }
    CHECK(code("embed.weight", 2, 0, 1) == Errc::kSliceBadRange);
    CHECK(code("embed.weight", -3, 0, 1) == Errc::kSliceBadRange);
    CHECK(code("nothing", 0, 0, 1) == Errc::kTorchNameNotFound);
    CHECK(error_code_of([&] {
            (void)pthload::load_slice(opened, "embed.weight", 0, 0, 1, pthload::kSkipStorage);
          }) == Errc::kSliceBadRange);
    // A row slice of a view that is contiguous works (layers.0.upper: rows 0-3 of
    // layers.0.weight) and equals the same rows of the tensor it views.
    CHECK(pthload::load_slice(opened, "layers.0.upper", 0, 1, 3).content_checksum() ==
          pthload::load_slice(opened, "layers.0.weight", 0, 1, 3).content_checksum());
  }

  TEST_CASE("partial: a slice reads only its own bytes of the tensor") {
    for (const char* file : {"model.pt", "model.safetensors"}) {
      CAPTURE(file);
      struct Case {
        std::string name;
        int dim;
        std::int64_t begin;
        std::int64_t end;
      };
      const std::vector<Case> cases{{"embed.weight", 0, 4, 12},
                                    {"layers.1.weight", -1, 1000, 1001},
                                    {"layers.1.weight", 1, 4000, 4096},
                                    {"layers.1.weight", 0, 1, 3}};
      for (const Case& c : cases) {
        const std::string& name = c.name;
        const int dim = c.dim;
        const std::int64_t begin = c.begin;
        const std::int64_t end = c.end;
        CAPTURE(name);
        CAPTURE(begin);
        const auto bytes = read_file(kFixtures / file);
        ProtectedCopy copy(bytes);
        const auto opened = pthload::open(copy.bytes());
        const auto expected = pthload::load_slice(opened, name, dim, begin, end).content_checksum();
        const auto& tensor = opened.tensor(name);
        const auto range = file_range_of(tensor.storage());
        const std::uint64_t first = range.first;
        const std::uint64_t last = range.second;
        const std::uint64_t element = pthload::element_size(tensor.dtype());
        const auto rows = static_cast<std::uint64_t>(tensor.sizes()[0]);
        const auto row = static_cast<std::uint64_t>(tensor.sizes()[1]) * element;
        std::uint64_t protected_bytes = 0;
        if (dim == 0) {
          protected_bytes += copy.protect(first, first + static_cast<std::uint64_t>(begin) * row);
          protected_bytes += copy.protect(first + static_cast<std::uint64_t>(end) * row, last);
        } else {
          // Every row: what lies before the slice's columns and after them.
          for (std::uint64_t r = 0; r < rows; ++r) {
            const auto row_start = first + r * row;
            protected_bytes +=
                copy.protect(row_start, row_start + static_cast<std::uint64_t>(begin) * element);
            protected_bytes += copy.protect(row_start + static_cast<std::uint64_t>(end) * element,
                                            row_start + row);
          }
        }
        CHECK(protected_bytes * 3 >= last - first);  // most of the tensor is unreadable
        CHECK(pthload::load_slice(opened, name, dim, begin, end).content_checksum() == expected);
        // The control: reading the whole tensor from the protected copy dies.
        CHECK(crashes([&] {
          (void)pthload::load(copy.bytes(), {.copy_cpu_storages = true, .only = {name}});
        }));
      }
    }
  }

  TEST_CASE("partial: select and rename_prefix give a Lightning checkpoint's state dict") {
    // Both I/O strategies: each SUBCASE runs the case once more.
    IoStrategy io = IoStrategy::kMap;
    SUBCASE("io=map") {}
    SUBCASE("io=read") {
      io = IoStrategy::kRead;
    }
    const auto path = kFixtures / "lightning.ckpt";
    const auto loaded =
        load_with(io, path, {.select = "state_dict", .rename_prefix = {{"module.", ""}}});
    CHECK(names_of(loaded) ==
          std::vector<std::string>{"decoder.weight", "encoder.bias", "encoder.weight"});
    CHECK(loaded.storages().size() == 3);  // the optimizer's and ema's are not placed
    for (const auto& row : manifest("tensor")) {
      CAPTURE(row[1]);
      CHECK(fmt::format("{:016x}", loaded.tensor(row[1]).content_checksum()) == row[2]);
    }
    const auto ema = open_with(io, path, {.select = "ema", .only = {"encoder.*"}});
    CHECK(names_of(ema) == std::vector<std::string>{"encoder.bias", "encoder.weight"});
    CHECK(error_code_of([&] { (void)open_with(io, path, {.select = "model"}); }) ==
          Errc::kSelectNotFound);
    CHECK(error_code_of([&] {
            (void)open_with(
                io, path,
                {.select = "state_dict",
                 .rename_prefix = {{"module.encoder.weight", "w"}, {"module.encoder.bias", "w"}}});
          }) == Errc::kSelectNameCollision);
    // Renaming without select: every tensor keeps its place, some get new names.
    const auto renamed = open_with(io, path, {.rename_prefix = {{"state_dict.module.", "m."}}});
    CHECK(renamed.tensors().size() == open_with(io, path).tensors().size());
    CHECK_NOTHROW((void)renamed.tensor("m.encoder.weight"));
  }

  TEST_CASE("partial: a sharded checkpoint opens only the shards holding chosen tensors") {
    // Both I/O strategies: each SUBCASE runs the case once more.
    IoStrategy io = IoStrategy::kMap;
    SUBCASE("io=map") {}
    SUBCASE("io=read") {
      io = IoStrategy::kRead;
    }
    // A copy of the sharded folder without its first and last shards: what only needs the
    // second loads; what needs another fails on the missing file.
    const auto folder = fs::temp_directory_path() / fmt::format("pthload_partial_{}", ::getpid());
    fs::remove_all(folder);
    fs::copy(kFixtures / "sharded", folder);
    fs::remove(folder / "model-00001-of-00003.safetensors");
    fs::remove(folder / "model-00003-of-00003.safetensors");
    const auto whole = load_with(io, kFixtures / "model.safetensors");
    const auto part = load_with(io, folder, {.only = {"layers.0.*"}});
    CHECK(names_of(part) == std::vector<std::string>{"layers.0.bias", "layers.0.weight"});
    CHECK(pthload::internal::Access::state(part).shards.size() == 1);
    for (const auto& named : part.tensors())
      CHECK(named.tensor.content_checksum() == whole.tensor(named.name).content_checksum());
    // io=read maps neither the index nor a shard; io=map maps both.
    CHECK(maps_file(*pthload::internal::Access::state(part).file) == (io == IoStrategy::kMap));
    for (const auto& storage : part.storages()) {
      const auto& range = pthload::internal::Access::state(*storage).file_range;
      REQUIRE(range != nullptr);
      CHECK(maps_file(*range->file) == (io == IoStrategy::kMap));
    }
    CHECK(open_with(io, folder, {.exclude = {"embed.*", "layers.1.*"}}).tensors().size() == 2);
    // Nothing chosen: no shard opened, an empty checkpoint of the index's format.
    const auto none = open_with(io, folder, {.only = {"nothing"}});
    CHECK(none.tensors().empty());
    CHECK(none.format() == pthload::Format::kSafetensors);
    const auto bin_index = fs::path(PTHLOAD_FIXTURES_DIR) / "shards" / "bin";
    CHECK(open_with(io, bin_index, {.only = {"nothing"}}).format() == pthload::Format::kZip);
    CHECK(pthload::internal::Access::state(open_with(io, bin_index, {.only = {"lm_head.weight"}}))
              .shards.size() == 1);
    CHECK(open_with(
              io, folder,
              {.rename_prefix = {{"layers.", "model.layers."}}, .only = {"model.layers.0.bias"}})
              .tensors()
              .size() == 1);
    CHECK(error_code_of([&] { (void)open_with(io, folder, {.only = {"embed.weight"}}); }) ==
          Errc::kIoOpenFailed);
    CHECK(error_code_of([&] { (void)open_with(io, folder, {.select = "model"}); }) ==
          Errc::kSelectNotFound);
    // All of it, from the fixture itself: every shard opened.
    CHECK(pthload::internal::Access::state(open_with(io, kFixtures / "sharded")).shards.size() ==
          3);
    fs::remove_all(folder);
  }
}
