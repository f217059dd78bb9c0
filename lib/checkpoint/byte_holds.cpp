// One registry of live holds, keyed by storage: a storage with no hold pays nothing (no member,
// no allocation) and 100 000-storage checkpoints stay as small as they are. The lock is taken
// only by holds being made or dropped and by Checkpoint::to(): never on a load's path.
#include "checkpoint/byte_holds.hpp"

#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

#include "checkpoint/access.hpp"

namespace pthload::internal {
namespace {

struct Hold;

struct Registry {
  std::mutex mutex;
  std::unordered_map<const StorageState*, std::weak_ptr<Hold>> holds;
};

Registry& registry() {
  // Deliberately never destroyed (the usual idiom for a static that is not trivially
  // destructible): a DLPack consumer may drop its hold during static destruction.
  static Registry& instance = *new Registry;
  return instance;
}

// Every copy of one hold pins the placement its storage had when the hold was made: the
// placement itself while it is current, afterwards the moved-out object in `replaced`.
struct Hold {
  explicit Hold(std::shared_ptr<const Storage> held) : storage(std::move(held)) {}
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;
  ~Hold() {
    auto& r = registry();
    const std::lock_guard lock(r.mutex);
    const auto found = r.holds.find(&Access::state(*storage));
    // The entry may be a newer hold's: one made after this one expired, or after a move.
    if (found != r.holds.end() && found->second.expired()) r.holds.erase(found);
  }
  // Destroyed after the destructor's body, outside the lock: a CUDA placement frees device
  // memory, which must not wait on other holds.
  std::shared_ptr<const Storage> storage;
  std::optional<Placement> replaced;  // written under the registry's lock
};

}  // namespace

std::shared_ptr<const void> hold_placement(std::shared_ptr<const Storage> storage) {
  auto& r = registry();
  const StorageState* key = &Access::state(*storage);
  const std::lock_guard lock(r.mutex);
  auto& entry = r.holds[key];
  if (auto live = entry.lock()) return live;
  auto made = std::make_shared<Hold>(std::move(storage));
  entry = made;
  return made;
}

void replace_placement(StorageState& storage, Placement replacement) {
  auto& r = registry();
  std::shared_ptr<Hold> hold;  // released after the lock: it may be the last copy
  {
    const std::lock_guard lock(r.mutex);
    if (!r.holds.empty()) {
      const auto found = r.holds.find(&storage);
      if (found != r.holds.end()) hold = found->second.lock();
    }
    if (hold) {
      hold->replaced.emplace(std::move(storage.placement));
      // That hold pins the bytes it was taken on; the next one pins the new placement.
      r.holds.erase(&storage);
    }
  }
  storage.placement = std::move(replacement);
}

}  // namespace pthload::internal
