// ObjectArena: objects made in it keep it alive, released in any order, on any thread.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/object_arena.hpp"

namespace pthload::common {
namespace {

using Strings = std::vector<std::shared_ptr<std::string>>;

// Strings too long for the small-string buffer: each owns heap memory, which LeakSanitizer
// reports if its object is never destroyed.
Strings make_strings(const std::shared_ptr<ObjectArena>& arena, int count) {
  Strings strings;
  for (int i = 0; i < count; ++i) {
    strings.push_back(
        std::allocate_shared<std::string>(ObjectArena::Allocator<std::string>(arena),
                                          "a string too long for the SSO " + std::to_string(i)));
  }
  return strings;
}

}  // namespace

TEST_CASE("common: objects made in an ObjectArena keep it alive after its owners are gone") {
  auto arena = ObjectArena::make();
  Strings strings = make_strings(arena, 10'000);
  // The allocator is a pointer: neither it nor the objects are owners.
  const ObjectArena::Allocator<std::string> allocator(arena);
  const ObjectArena::Allocator<int> rebound = allocator;
  CHECK(rebound == allocator);
  CHECK(arena.use_count() == 1);
  CHECK(arena->bytes_reserved() > 0);
  arena.reset();
  // Released out of order; the last one takes the arena with it (ASan checks the reads,
  // LeakSanitizer that the arena went).
  CHECK(*strings[9'999] == "a string too long for the SSO 9999");
  strings.erase(strings.begin(), strings.begin() + 5'000);
  CHECK(*strings.front() == "a string too long for the SSO 5000");
  strings.clear();
}

TEST_CASE("common: an ObjectArena goes with its last owner once its objects are released") {
  auto arena = ObjectArena::make();
  Strings strings = make_strings(arena, 100);
  const std::shared_ptr<ObjectArena> second_owner = arena;
  strings.clear();
  arena.reset();
  // The objects went first: the last owner, released at the end of this case, takes the arena.
  CHECK(second_owner.use_count() == 1);
  // An arena that never made an object goes with its owner too.
  const auto empty = ObjectArena::make();
  CHECK(empty->bytes_reserved() == 0);
}

TEST_CASE("common: objects of an ObjectArena may be released on several threads at once") {
  for (int round = 0; round < 20; ++round) {
    auto arena = ObjectArena::make();
    Strings first = make_strings(arena, 2'000);
    Strings second = make_strings(arena, 2'000);
    // The owner goes while the other threads release: any of the three may be the last.
    std::thread release_first([&first] { first.clear(); });
    std::thread release_second([&second] { second.clear(); });
    arena.reset();
    release_first.join();
    release_second.join();
  }
}

}  // namespace pthload::common
