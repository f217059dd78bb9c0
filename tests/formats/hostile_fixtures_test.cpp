// Every committed fixture (zip, legacy and TorchScript files of both torch versions, the hand-made
// zips, sample.pt) truncated at a spread of offsets, and with random bits flipped (fixed seeds).
// Each fixture runs in one guarded child that loops over its damaged copies.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "formats/hostile_cases.hpp"
#include "formats/hostile_guard.hpp"
#include "formats/hostile_load_outcome.hpp"
#include "support/files.hpp"

namespace fs = std::filesystem;
using pthload::test::guard::Bounds;
using pthload::test::guard::SharedReport;
using namespace pthload::test::hostile;

namespace {

/// Every file a checkpoint reader might be handed: *.pt and *.zip anywhere under the fixtures,
/// and the legacy stream sample. Sorted, so the order (and each seed) is stable.
std::vector<fs::path> checkpoint_fixtures() {
  return pthload::test::fixture_files("", [](const fs::path& path) {
    const auto ext = path.extension();
    return ext == ".pt" || ext == ".zip" || path.filename() == "torch_legacy_stream.bin";
  });
}

std::string short_name(const fs::path& path) {
  return fs::relative(path, PTHLOAD_FIXTURES_DIR).string();
}

/// Where to cut a file of `size` bytes: every offset in the first and last 64 bytes (headers,
/// end records) and 64 spread evenly over the rest. Never the full size (that is the file).
std::vector<std::size_t> truncation_offsets(std::size_t size) {
  std::set<std::size_t> offsets;
  for (std::size_t i = 0; i < 64 && i < size; ++i) {
    offsets.insert(i);
    offsets.insert(size - 1 - i);
  }
  for (std::size_t k = 0; k < 64; ++k)
    offsets.insert(size * k / 64);
  return {offsets.begin(), offsets.end()};
}

/// FNV-1a of the fixture's name: a seed that is the same on every platform and run.
std::uint32_t seed_of(const std::string& name) {
  std::uint32_t hash = 2166136261u;
  for (const char c : name) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 16777619u;
  }
  return hash;
}

/// Files so large that loading a damaged copy hundreds of times would dominate the suite
/// (many_20000.pt: 5.6 MB, 20 000 tensors) get fewer flips.
constexpr std::size_t kLargeFixture = 1 << 20;

}  // namespace

TEST_SUITE_BEGIN("hostile");

TEST_CASE("formats hostile: every fixture truncated at a spread of offsets is a pthload::Error") {
  for (const auto& path : checkpoint_fixtures()) {
    const auto name = short_name(path);
    const auto original = pthload::test::file_bytes(path);
    check_guarded(name, pthload::test::guard::bounds_for(original.size()),
                  [&](SharedReport& report) {
                    for (const auto size : truncation_offsets(original.size())) {
                      report.at(name + " cut at " + std::to_string(size));
                      expect_some_error(std::span(original).first(size));
                    }
                  });
  }
}

TEST_CASE("formats hostile: every fixture with random bits flipped loads or is a pthload::Error") {
  for (const auto& path : checkpoint_fixtures()) {
    const auto name = short_name(path);
    const auto original = pthload::test::file_bytes(path);
    const int rounds = original.size() > kLargeFixture ? 8 : 200;
    check_guarded(
        name, pthload::test::guard::bounds_for(original.size()), [&](SharedReport& report) {
          std::mt19937 random(seed_of(name));
          auto damaged = original;
          for (int round = 0; round < rounds; ++round) {
            // One to three flips: single flips find the checks, several find their interplay.
            const int flips = 1 + static_cast<int>(random() % 3);
            std::string label = name + " flipped at";
            std::vector<std::pair<std::size_t, std::byte>> undo;
            for (int f = 0; f < flips; ++f) {
              const std::size_t at = random() % damaged.size();
              const auto bit = static_cast<std::byte>(1u << (random() % 8));
              undo.emplace_back(at, damaged[at]);
              damaged[at] ^= bit;
              label += " " + std::to_string(at) + "^" + std::to_string(std::to_integer<int>(bit));
            }
            report.at(label);
            expect_load_or_error(damaged);
            for (auto it = undo.rbegin(); it != undo.rend(); ++it)
              damaged[it->first] = it->second;
          }
        });
  }
}

TEST_SUITE_END();
