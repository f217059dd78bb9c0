#include "common/object_arena.hpp"

namespace pthload::common {

std::shared_ptr<ObjectArena> ObjectArena::make() {
  auto arena = std::make_unique<ObjectArena>(Key{});
  // The shared_ptr's deleter takes over; were the shared_ptr not made, it would run at once.
  return {arena.release(), Retire{}};
}

void ObjectArena::Retire::operator()(ObjectArena* arena) const noexcept {
  const auto made = static_cast<std::int64_t>(arena->made_);
  // Ownership passes from the owners to the objects still alive, if any.
  std::unique_ptr<ObjectArena> owned(arena);
  if (arena->balance_.fetch_sub(made, std::memory_order_acq_rel) != made) (void)owned.release();
}

void ObjectArena::release(ObjectArena* arena) noexcept {
  // -1 before this release: the owners are gone and this was the last object.
  if (arena->balance_.fetch_add(1, std::memory_order_acq_rel) == -1) {
    const std::unique_ptr<ObjectArena> last(arena);
  }
}

}  // namespace pthload::common
