// Choosing what to load (issue 14): LoadOptions::filter's only/exclude/predicate, select and
// rename_prefix, on files the real torch wrote (tests/fixtures/make_partial_fixtures.py). That a
// partial load reads only the chosen bytes is shown twice: by the bytes placement counts, and by
// loading from a copy of the file whose pages holding nothing chosen are unreadable (PROT_NONE),
// where any read of them kills the process — and a control that does read them crashes.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/access.hpp"
#include "checkpoint/select.hpp"
#include "checkpoint/state.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/error_code.hpp"
#include "support/files.hpp"
#include "support/partial_loads.hpp"

using pthload::Errc;
using pthload::IoStrategy;
using pthload::test::crashes;
using pthload::test::error_code_of;
using pthload::test::file_range_of;
using pthload::test::load_with;
using pthload::test::names_of;
using pthload::test::open_with;
using pthload::test::ProtectedCopy;

namespace {

const auto& kFixtures = pthload::test::kPartialFixtures;

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

}  // namespace

TEST_CASE("checkpoint: globs match as fnmatch without special dots") {
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

TEST_CASE(
    "checkpoint: select strips the sub-tree's name, then the first matching prefix is renamed") {
  pthload::LoadOptions options{
      .filter = {.select = "state_dict",
                 .rename_prefix = {{"module.", ""}, {"module.x", "never"}}}};
  CHECK(pthload::internal::renamed(options, "state_dict.module.x.weight") == "x.weight");
  CHECK(pthload::internal::renamed(options, "state_dict.head") == "head");
  CHECK_FALSE(pthload::internal::renamed(options, "state_dictx.head").has_value());
  CHECK_FALSE(pthload::internal::renamed(options, "state_dict").has_value());
  CHECK_FALSE(pthload::internal::renamed(options, "ema.head").has_value());
  options.filter.only = {"x.*", "head"};
  options.filter.exclude = {"*.bias"};
  options.filter.predicate = [](std::string_view name) { return name != "x.skip"; };
  CHECK(pthload::internal::chosen(options, "x.weight"));
  CHECK(pthload::internal::chosen(options, "head"));
  CHECK_FALSE(pthload::internal::chosen(options, "x.bias"));
  CHECK_FALSE(pthload::internal::chosen(options, "x.skip"));
  CHECK_FALSE(pthload::internal::chosen(options, "y.weight"));
}

TEST_SUITE("fixtures") {
  TEST_CASE(
      "checkpoint: only, exclude and a predicate keep the chosen tensors and their storages") {
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

      const auto part =
          load_with(io, path, {.filter = {.only = {"layers.0.*"}, .exclude = {"*.bias"}}});
      const bool tied = std::string(file) == "model.pt";
      CHECK(names_of(part) == (tied ? std::vector<std::string>{"layers.0.upper", "layers.0.weight"}
                                    : std::vector<std::string>{"layers.0.weight"}));
      // layers.0.upper views layers.0.weight's storage: one storage,
      // placed once.
      REQUIRE(part.storages().size() == 1);
      CHECK(part.storages()[0]->is_placed());
      CHECK(pthload::internal::Access::state(part).placed_bytes == 8 * 2048 * 4);
      // Not structured bindings: doctest's CHECK is a lambda, and
      // clang 14 cannot capture them.
      for (const auto& entry : checksums_of(part))
        CHECK(entry.second == all.at(entry.first));

      const auto by_predicate = load_with(
          io, path,
          {.filter = {.predicate = [](std::string_view name) { return name.ends_with(".bias"); }}});
      CHECK(names_of(by_predicate) == std::vector<std::string>{"layers.0.bias"});
      CHECK(pthload::internal::Access::state(by_predicate).placed_bytes == 2048 * 4);

      // open() chooses too: a listing of the chosen tensors reads no
      // tensor byte.
      const auto listed = open_with(io, path, {.filter = {.only = {"embed.weight", "layers.1.*"}}});
      CHECK(names_of(listed) ==
            std::vector<std::string>{"embed.weight", "layers.1.scale", "layers.1.weight"});
      CHECK(listed.storages().size() == 3);
      for (const auto& storage : listed.storages())
        CHECK_FALSE(storage->is_placed());
      // The file's unused storages are still the file's: none here.
      CHECK(listed.unused_storages().empty());
    }
  }

  TEST_CASE("checkpoint: a storage tied to a left-out tensor is placed once for the kept one") {
    // Both I/O strategies: each SUBCASE runs the case once more.
    IoStrategy io = IoStrategy::kMap;
    SUBCASE("io=map") {}
    SUBCASE("io=read") {
      io = IoStrategy::kRead;
    }
    const auto path = kFixtures / "model.pt";
    const auto whole = load_with(io, path, {.map_location = pthload::map_to("cpu")});
    const auto head = load_with(io, path, {.filter = {.only = {"head.weight"}}});
    CHECK(names_of(head) == std::vector<std::string>{"head.weight"});
    REQUIRE(head.storages().size() == 1);
    CHECK(pthload::internal::Access::state(head).placed_bytes == 16 * 1024 * 4);
    CHECK(head.tensor("head.weight").content_checksum() ==
          whole.tensor("embed.weight").content_checksum());
    CHECK(error_code_of([&] { (void)head.tensor("embed.weight"); }) == Errc::kTorchNameNotFound);
  }

  TEST_CASE("checkpoint: a partial load reads no byte of the storages it leaves out") {
    for (const char* file : {"model.pt", "model.safetensors"}) {
      CAPTURE(file);
      const auto bytes = pthload::test::file_bytes(kFixtures / file);
      ProtectedCopy copy(bytes);
      const pthload::LoadOptions chosen{.copy_cpu_storages = true,
                                        .filter = {.only = {"layers.0.bias", "layers.1.*"}}};
      // Expected values and the storages' places, before anything is
      // protected.
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
      CHECK(protected_bytes >= 100 * 1024);  // embed.weight and layers.0.weight, but
                                             // their edges
      // Copies (not views) so that every chosen byte is really read.
      const auto loaded = pthload::load(copy.bytes(), chosen);
      CHECK(checksums_of(loaded) == expected);
      CHECK(pthload::internal::Access::state(loaded).placed_bytes == 8 * 1024 + 128 * 1024 + 6000);
      // The control: a whole load does touch the protected pages, and
      // dies of it.
      CHECK(crashes([&] { (void)pthload::load(copy.bytes(), {.copy_cpu_storages = true}); }));
    }
  }

  TEST_CASE("checkpoint: select and rename_prefix give a Lightning checkpoint's state dict") {
    // Both I/O strategies: each SUBCASE runs the case once more.
    IoStrategy io = IoStrategy::kMap;
    SUBCASE("io=map") {}
    SUBCASE("io=read") {
      io = IoStrategy::kRead;
    }
    const auto path = kFixtures / "lightning.ckpt";
    const auto loaded = load_with(
        io, path, {.filter = {.select = "state_dict", .rename_prefix = {{"module.", ""}}}});
    CHECK(names_of(loaded) ==
          std::vector<std::string>{"decoder.weight", "encoder.bias", "encoder.weight"});
    CHECK(loaded.storages().size() == 3);  // the optimizer's and ema's are not placed
    for (const auto& row : pthload::test::partial_manifest("tensor")) {
      CAPTURE(row[1]);
      CHECK(fmt::format("{:016x}", loaded.tensor(row[1]).content_checksum()) == row[2]);
    }
    const auto ema = open_with(io, path, {.filter = {.select = "ema", .only = {"encoder.*"}}});
    CHECK(names_of(ema) == std::vector<std::string>{"encoder.bias", "encoder.weight"});
    CHECK(error_code_of([&] { (void)open_with(io, path, {.filter = {.select = "model"}}); }) ==
          Errc::kSelectNotFound);
    CHECK(error_code_of([&] {
            (void)open_with(io, path,
                            {.filter = {.select = "state_dict",
                                        .rename_prefix = {{"module.encoder.weight", "w"},
                                                          {"module.encoder.bias", "w"}}}});
          }) == Errc::kSelectNameCollision);
    // Renaming without select: every tensor keeps its place, some get
    // new names.
    const auto renamed =
        open_with(io, path, {.filter = {.rename_prefix = {{"state_dict.module.", "m."}}}});
    CHECK(renamed.tensors().size() == open_with(io, path).tensors().size());
    CHECK_NOTHROW((void)renamed.tensor("m.encoder.weight"));
  }
}
