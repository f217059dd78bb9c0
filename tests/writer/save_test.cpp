// save() from the caller's memory and from loaded checkpoints: sharing, nesting, options, the
// file written atomically, progress, determinism.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "pthload/records.hpp"
#include "pthload/save.hpp"
#include "support/files.hpp"
#include "writer/saved_bytes.hpp"

namespace pthload::test {
namespace {

std::span<const std::byte> bytes_of(const std::vector<float>& values) {
  return std::as_bytes(std::span(values));
}

std::vector<float> floats_of(const Tensor& tensor) {
  const auto bytes = tensor.contiguous_bytes();
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

std::vector<std::int64_t> vec(std::span<const std::int64_t> values) {
  return {values.begin(), values.end()};
}

TEST_CASE("tensors in the caller's memory: views and tied names share one storage") {
  const std::vector<float> weights{0, 1, 2, 3, 4, 5};
  const std::vector<float> bias{7, 8};
  const std::vector<MemoryTensor> tensors{
      {.name = "w", .sizes = {2, 3}, .storage = bytes_of(weights)},
      {.name = "tied", .sizes = {2, 3}, .storage = bytes_of(weights)},
      {.name = "column",
       .sizes = {2},
       .strides = {3},
       .storage_offset = 1,
       .storage = bytes_of(weights)},
      {.name = "b", .sizes = {2}, .storage = bytes_of(bias), .requires_grad = true},
  };
  std::vector<std::byte> bytes;
  const SaveReport report = save(
      [&](std::span<const std::byte> chunk) {
        bytes.insert(bytes.end(), chunk.begin(), chunk.end());
      },
      std::span(tensors));
  CHECK(report.tensors == 4);
  CHECK(report.storages == 2);
  CHECK(report.bytes == bytes.size());
  const Checkpoint loaded = reload(bytes);
  REQUIRE(loaded.tensors().size() == 4);
  CHECK(floats_of(loaded.tensor("w")) == weights);
  CHECK(floats_of(loaded.tensor("column")) == std::vector<float>{1, 4});
  CHECK(vec(loaded.tensor("column").strides()) == std::vector<std::int64_t>{3});
  CHECK(loaded.tensor("column").storage_offset() == 1);
  CHECK(&loaded.tensor("w").storage() == &loaded.tensor("tied").storage());
  CHECK(&loaded.tensor("w").storage() == &loaded.tensor("column").storage());
  CHECK(loaded.tensor("b").requires_grad());
  CHECK(loaded.storages().size() == 2);
}

TEST_CASE("compact_views writes each view's elements alone, contiguous") {
  const std::vector<float> weights{0, 1, 2, 3, 4, 5};
  const std::vector<MemoryTensor> tensors{
      {.name = "t", .sizes = {3, 2}, .strides = {1, 3}, .storage = bytes_of(weights)},
      {.name = "one", .sizes = {1}, .storage_offset = 5, .storage = bytes_of(weights)},
  };
  const auto bytes = saved_bytes(tensors, {.compact_views = true});
  const Checkpoint loaded = reload(bytes);
  CHECK(floats_of(loaded.tensor("t")) == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(vec(loaded.tensor("t").strides()) == std::vector<std::int64_t>{2, 1});
  CHECK(loaded.tensor("t").storage().nbytes() == 24);
  CHECK(loaded.tensor("one").storage().nbytes() == 4);
  CHECK(loaded.tensor("one").storage_offset() == 0);
  // Without it, as torch: both views keep the whole 24-byte storage.
  const Checkpoint whole = reload(saved_bytes(tensors));
  CHECK(whole.tensor("one").storage().nbytes() == 24);
  CHECK(whole.tensor("one").storage_offset() == 5);
}

TEST_CASE("nest_dotted_names writes nested dicts that read back under the same names") {
  const std::vector<float> values{1, 2};
  const std::vector<MemoryTensor> tensors{
      {.name = "enc.0.w", .sizes = {2}, .storage = bytes_of(values)},
      {.name = "enc.1.w", .sizes = {1}, .storage_offset = 1, .storage = bytes_of(values)},
      {.name = "head", .sizes = {2}, .storage = bytes_of(values)},
  };
  const auto nested = saved_bytes(tensors, {.nest_dotted_names = true});
  const auto flat = saved_bytes(tensors);
  CHECK(nested != flat);
  const Checkpoint loaded = reload(nested);
  REQUIRE(loaded.tensors().size() == 3);
  CHECK(std::string_view(loaded.tensors()[0].name) == "enc.0.w");
  CHECK(std::string_view(loaded.tensors()[1].name) == "enc.1.w");
  CHECK(std::string_view(loaded.tensors()[2].name) == "head");
  // The pickle holds the nesting: "enc" is a key of the root dict, "enc.0.w" is not.
  const auto pickle =
      RecordReader::open(std::span<const std::byte>(nested)).read("archive/data.pkl");
  const std::string_view text(reinterpret_cast<const char*>(pickle.data()), pickle.size());
  CHECK(text.find("enc.0.w") == std::string_view::npos);
  CHECK(text.find("enc") != std::string_view::npos);
}

// torch.load's calculate_storage_offsets predicts data/0 first, then each record in the order
// the pickle first names its storage: a file must keep that order even when nesting regroups
// the names, and a tied name met before its first must still be one object.
void check_records_in_pickle_order(std::span<const std::byte> bytes) {
  const Checkpoint opened = open(bytes);
  const auto records = RecordReader::open(bytes);
  std::uint64_t last = 0;
  for (std::size_t i = 0; i < opened.storages().size(); ++i) {
    const auto& storage = *opened.storages()[i];
    CHECK(storage.key() == std::to_string(i));
    const RecordInfo* record = records.find("archive/data/" + std::string(storage.key()));
    REQUIRE(record != nullptr);
    CHECK(record->payload_offset > last);
    last = record->payload_offset;
  }
}

TEST_CASE("nesting regroups names: storages are numbered and written in the pickle's order") {
  const std::vector<float> a{1, 2};
  const std::vector<float> b{3, 4};
  const std::vector<float> c{5, 6};
  const std::vector<MemoryTensor> tensors{
      {.name = "x.a", .sizes = {2}, .storage = bytes_of(a)},
      {.name = "b", .sizes = {2}, .storage = bytes_of(b)},
      {.name = "x.c", .sizes = {2}, .storage = bytes_of(c)},
      {.name = "x.tied_b", .sizes = {2}, .storage = bytes_of(b)},
  };
  for (const bool nest : {false, true}) {
    CAPTURE(nest);
    const auto bytes = saved_bytes(tensors, {.nest_dotted_names = nest});
    check_records_in_pickle_order(bytes);
    const Checkpoint loaded = reload(bytes);
    CHECK(floats_of(loaded.tensor("x.c")) == c);
    CHECK(floats_of(loaded.tensor("b")) == b);
    CHECK(&loaded.tensor("b").storage() == &loaded.tensor("x.tied_b").storage());
    CHECK(loaded.storages().size() == 3);
  }
}

TEST_CASE("every dtype torch writes comes back, the new ones through UntypedStorage") {
  const std::array<std::byte, 16> storage{};
  for (const Dtype dtype : {Dtype::kFloat64,        Dtype::kFloat32,        Dtype::kFloat16,
                            Dtype::kBFloat16,       Dtype::kComplex32,      Dtype::kComplex64,
                            Dtype::kComplex128,     Dtype::kBool,           Dtype::kInt8,
                            Dtype::kInt16,          Dtype::kInt32,          Dtype::kInt64,
                            Dtype::kUInt8,          Dtype::kUInt16,         Dtype::kUInt32,
                            Dtype::kUInt64,         Dtype::kFloat8E5M2,     Dtype::kFloat8E4M3FN,
                            Dtype::kFloat8E5M2FNUZ, Dtype::kFloat8E4M3FNUZ, Dtype::kFloat8E8M0FNU,
                            Dtype::kFloat4E2M1FNx2, Dtype::kBits8,          Dtype::kBits16,
                            Dtype::kBits1x8,        Dtype::kBits2x4,        Dtype::kBits4x2}) {
    CAPTURE(dtype_name(dtype));
    const std::vector<MemoryTensor> tensors{
        {.name = "x",
         .dtype = dtype,
         .sizes = {1},
         .storage = std::span(storage).first(element_size(dtype))}};
    const Checkpoint loaded = reload(saved_bytes(tensors));
    CHECK(loaded.tensor("x").dtype() == dtype);
    CHECK(loaded.tensor("x").storage().nbytes() == element_size(dtype));
  }
}

TEST_CASE("one tensor named \"\" is written as the root object, as torch.save(tensor)") {
  const std::vector<float> values{3, 4};
  const std::vector<MemoryTensor> tensors{{.name = "", .sizes = {2}, .storage = bytes_of(values)}};
  const auto bytes = saved_bytes(tensors);
  const auto pickle =
      RecordReader::open(std::span<const std::byte>(bytes)).read("archive/data.pkl");
  CHECK(pickle[2] == std::byte{'c'});  // GLOBAL torch._utils _rebuild_tensor_v2, no dict
  const Checkpoint loaded = reload(bytes);
  REQUIRE(loaded.tensors().size() == 1);
  CHECK(std::string_view(loaded.tensors()[0].name).empty());
}

TEST_CASE("the same tensors give the same bytes") {
  const std::vector<float> values{1, 2, 3};
  const std::vector<MemoryTensor> tensors{{.name = "a", .sizes = {3}, .storage = bytes_of(values)}};
  CHECK(saved_bytes(tensors) == saved_bytes(tensors));
  // ... and other contents another serialization id.
  const std::vector<float> other{1, 2, 4};
  const std::vector<MemoryTensor> changed{{.name = "a", .sizes = {3}, .storage = bytes_of(other)}};
  const auto a = saved_bytes(tensors);
  const auto b = saved_bytes(changed);
  const auto id = [](const std::vector<std::byte>& file) {
    return RecordReader::open(std::span<const std::byte>(file))
        .read("archive/.data/serialization_id");
  };
  CHECK(id(a) != id(b));
  CHECK(id(a).size() == 40);
}

TEST_CASE("alignment and location tags") {
  const std::vector<float> values{1, 2, 3};
  const std::vector<MemoryTensor> tensors{
      {.name = "a", .sizes = {3}, .storage = bytes_of(values)},
      {.name = "b", .sizes = {1}, .storage = bytes_of(values).first(4)}};
  const auto bytes = saved_bytes(tensors, {.alignment = 4096, .location = "cuda:1"});
  const auto records = RecordReader::open(std::span<const std::byte>(bytes));
  for (const RecordInfo& record : records.list()) {
    CAPTURE(record.name);
    CHECK(record.payload_offset % 4096 == 0);
  }
  const auto alignment = records.read("archive/.storage_alignment");
  CHECK(std::string(reinterpret_cast<const char*>(alignment.data()), alignment.size()) == "4096");
  const Checkpoint opened = open(std::span<const std::byte>(bytes));
  REQUIRE(opened.storages().size() == 2);
  for (const auto& storage : opened.storages())
    CHECK(storage->location() == "cuda:1");
}

TEST_CASE("save to a path: the file appears whole, replacing what was there, with progress") {
  const auto folder = TempPath::folder();
  const auto path = folder / "model.pt";
  write_file(path, "old contents");
  const std::vector<float> values(100000, 1.5f);
  const std::vector<MemoryTensor> tensors{
      {.name = "big", .sizes = {100000}, .storage = bytes_of(values)}};
  std::uint64_t last = 0;
  std::uint64_t total = 0;
  int calls = 0;
  SaveOptions options;
  options.progress = [&](std::uint64_t written, std::uint64_t of) {
    CHECK(written >= last);
    last = written;
    total = of;
    ++calls;
  };
  const SaveReport report = save(path, std::span(tensors), options);
  CHECK(calls >= 2);
  CHECK(last == total);
  CHECK(total == report.bytes);
  CHECK(std::filesystem::file_size(path) == report.bytes);
  // Only the file: no temporary left beside it. Its archive folder is the file's stem.
  CHECK(std::distance(std::filesystem::directory_iterator(folder.path()),
                      std::filesystem::directory_iterator()) == 1);
  const Checkpoint loaded = load(path);
  CHECK(floats_of(loaded.tensor("big")) == values);
  CHECK(RecordReader::open(path).find("model/data.pkl") != nullptr);
}

TEST_CASE("a symbolic link is written through, as torch.save's open(); a file keeps its mode") {
  const auto folder = TempPath::folder();
  const std::vector<float> values{1, 2, 3};
  const std::vector<MemoryTensor> tensors{{.name = "w", .sizes = {3}, .storage = bytes_of(values)}};
  std::filesystem::create_directory(folder / "runs");
  write_file(folder / "runs" / "step-1000.pt", "the previous checkpoint");
  ::chmod((folder / "runs" / "step-1000.pt").c_str(), 0640);
  // latest.pt -> last.pt -> runs/step-1000.pt, relative links resolved from their own folders.
  std::filesystem::create_symlink("runs/step-1000.pt", folder / "last.pt");
  std::filesystem::create_symlink("last.pt", folder / "latest.pt");

  save(folder / "latest.pt", std::span(tensors));
  CHECK(std::filesystem::is_symlink(folder / "latest.pt"));
  CHECK(std::filesystem::is_symlink(folder / "last.pt"));
  const auto target = folder / "runs" / "step-1000.pt";
  CHECK(floats_of(load(target).tensor("w")) == values);
  CHECK((std::filesystem::status(target).permissions() & std::filesystem::perms::all) ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
         std::filesystem::perms::group_read));
  // The archive is named after the path the caller gave, as torch names it.
  CHECK(RecordReader::open(target).find("latest/data.pkl") != nullptr);
  // No temporary file is left in either folder.
  CHECK(std::distance(std::filesystem::directory_iterator(folder / "runs"),
                      std::filesystem::directory_iterator()) == 1);
  CHECK(std::distance(std::filesystem::directory_iterator(folder.path()),
                      std::filesystem::directory_iterator()) == 3);

  // A link to nothing yet: the file is created where it points.
  std::filesystem::create_symlink("runs/new.pt", folder / "dangling.pt");
  save(folder / "dangling.pt", std::span(tensors));
  CHECK(std::filesystem::is_symlink(folder / "dangling.pt"));
  CHECK(floats_of(load(folder / "runs" / "new.pt").tensor("w")) == values);

  // A loop of links is an IoError naming the path, and writes nothing.
  std::filesystem::create_symlink("loop-b.pt", folder / "loop-a.pt");
  std::filesystem::create_symlink("loop-a.pt", folder / "loop-b.pt");
  try {
    save(folder / "loop-a.pt", std::span(tensors));
    FAIL("a loop of links was written through");
  } catch (const IoError& e) {
    CHECK(e.code() == Errc::kSaveWriteFailed);
    CHECK(e.context().path == (folder / "loop-a.pt").string());
    CHECK(std::string(e.what()).find("ELOOP") != std::string::npos);
  }
}

TEST_CASE("a checkpoint's large stored records are copied with their own CRC-32, unread") {
  const auto folder = TempPath::folder();
  std::vector<float> big(1 << 19);  // 2 MiB: copied in the kernel, its CRC taken from the source
  for (std::size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<float>(i % 1000) * 0.5f;
  const std::vector<float> small{1, 2, 3};
  const std::vector<MemoryTensor> tensors{
      {.name = "big", .sizes = {static_cast<std::int64_t>(big.size())}, .storage = bytes_of(big)},
      {.name = "small", .sizes = {3}, .storage = bytes_of(small)}};
  const auto source_path = folder / "source.pt";
  save(source_path, std::span(tensors));
  const auto big_record = [&](const RecordReader& records, const std::string& archive) {
    const RecordInfo* record = records.find(archive + "/data/0");
    REQUIRE(record != nullptr);
    REQUIRE(record->size == big.size() * sizeof(float));
    return *record;
  };

  // The copy path, the sink's read path and a save of the same tensors (computing every
  // CRC-32) give the same bytes.
  {
    const Checkpoint source = load(source_path);
    const auto copied_path = folder / "copied.pt";
    save(copied_path, source);
    const auto sunk = saved_bytes(source, {.archive_name = "copied"});
    const auto computed = saved_bytes(source.tensors(), {.archive_name = "copied"});
    const std::string copied = folder.read("copied.pt");
    CHECK(copied.size() == sunk.size());
    CHECK(std::memcmp(copied.data(), sunk.data(), sunk.size()) == 0);
    CHECK(sunk == computed);
    CHECK(RecordReader::open(copied_path).verify_all().empty());
  }

  // A source corrupted after it was written: the copy keeps the CRC-32 the source declares, so
  // the corruption stays detectable, where a save from the tensors certifies the bad bytes.
  std::string corrupted = folder.read("source.pt");
  const RecordInfo record = big_record(RecordReader::open(source_path), "source");
  corrupted[static_cast<std::size_t>(record.payload_offset) + 12345] ^= 0x40;
  write_file(source_path, corrupted);
  const Checkpoint source = load(source_path);
  save(folder / "copied.pt", source);
  const RecordReader copied = RecordReader::open(folder / "copied.pt");
  CHECK(big_record(copied, "copied").crc32 == record.crc32);
  const auto problems = copied.verify_all();
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].record == "copied/data/0");
  const auto computed = saved_bytes(source.tensors());
  CHECK(RecordReader::open(std::span<const std::byte>(computed)).verify_all().empty());
}

TEST_SUITE("fixtures") {
  TEST_CASE("keep_locations keeps a file's tags; default writes cpu") {
    const Checkpoint source =
        load(fixture_path("torch/torch-2.15.0/cuda.pt"), {.map_location = map_to("cpu")});
    const Checkpoint kept =
        open(std::span<const std::byte>(saved_bytes(source, {.keep_locations = true})));
    const Checkpoint plain = open(std::span<const std::byte>(saved_bytes(source)));
    REQUIRE(kept.storages().size() == source.storages().size());
    bool any_cuda = false;
    for (std::size_t i = 0; i < kept.storages().size(); ++i) {
      any_cuda |= kept.storages()[i]->location().starts_with("cuda");
      CHECK(plain.storages()[i]->location() == "cpu");
    }
    CHECK(any_cuda);
  }
}

}  // namespace
}  // namespace pthload::test
