// Damaged pickles: every vector cut at every byte, and bytes replaced by random opcodes (fixed
// seed). Each must give a value or a pthload::Error, never a crash or another exception.
#include <doctest/doctest.h>

#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "pickle/codecs.hpp"
#include "pickle_test_support.hpp"
#include "support/files.hpp"

using namespace std::literals;

namespace {

std::vector<std::string> fixture_pickles() {
  std::vector<std::string> names;
  for (const auto& path :
       pthload::test::fixture_files("pickle", pthload::test::has_extension(".pkl")))
    names.push_back(path.filename().string());
  return names;
}

// Runs and prints; returns whether the run gave a value (false: a pthload::Error).
bool survives(std::string_view pickle, pthload::pickle::Machine& machine) {
  try {
    const auto r = machine.run(pthload::pickle::test::bytes(pickle));
    pthload::pickle::PrintOptions options;
    options.max_items = 20;
    (void)print(*r.root, options);
    (void)pthload::pickle::bytes_of(*r.root);
    return true;
  } catch (const pthload::Error&) {
    return false;
  }
}

// Opcodes and bytes likely to make interesting damage.
constexpr std::string_view kReplacements =
    "(.0123FIJKLMNPQRSTVXabcdeghijlopqrstu}])BCG\x80\x81\x82\x85\x86\x87\x88\x89\x8a\x8b\x8c"
    "\x8d\x8e\x8f\x90\x91\x92\x93\x94\x95\x96\x97\x98\xff\x00\n"sv;

void mutate_and_run(const std::string& original, std::uint32_t seed, int rounds,
                    pthload::pickle::Machine& machine) {
  std::mt19937 random(seed);
  for (int round = 0; round < rounds; ++round) {
    std::string damaged = original;
    const int edits = 1 + static_cast<int>(random() % 3);
    for (int e = 0; e < edits && !damaged.empty(); ++e) {
      const std::size_t at = random() % damaged.size();
      damaged[at] = kReplacements[random() % kReplacements.size()];
    }
    CHECK_NOTHROW((void)survives(damaged, machine));
  }
}

}  // namespace

TEST_CASE("pickle: opcode substitutions in hand-made pickles give a value or an Error") {
  pthload::pickle::Machine machine;
  const std::string samples[] = {
      "\x80\x02}q\x00(X\x01\x00\x00\x00"
      "aq\x01]q\x02(K\x01K\x02"
      "eh\x02u."s,
      "ccollections\nOrderedDict\nq\x00)Rq\x01(X\x01\x00\x00\x00wK\x01u}b."s,
      "(I01\nF1.5\nS'x'\nV\\u00e9\nL5L\nlp0\n."s,
  };
  for (std::size_t i = 0; i < std::size(samples); ++i)
    mutate_and_run(samples[i], 1234 + i, 2000, machine);
}

TEST_SUITE("fixtures") {
  TEST_CASE("pickle: every vector cut at every byte is an Error") {
    pthload::pickle::Machine machine;
    for (const auto& name : fixture_pickles()) {
      CAPTURE(name);
      const std::string pickle = pthload::pickle::test::fixture(name);
      for (std::size_t size = 0; size < pickle.size(); ++size) {
        CAPTURE(size);
        CHECK_FALSE(survives(std::string_view(pickle).substr(0, size), machine));
      }
    }
  }

  TEST_CASE("pickle: random opcode substitutions in every vector give a value or an Error") {
    pthload::pickle::Machine machine;
    std::uint32_t seed = 20240601;
    for (const auto& name : fixture_pickles()) {
      CAPTURE(name);
      mutate_and_run(pthload::pickle::test::fixture(name), seed++, 300, machine);
    }
  }
}
