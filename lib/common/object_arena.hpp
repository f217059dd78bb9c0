// Memory for many objects made together whose lifetimes then part: a checkpoint's storages,
// which tensors may keep after the checkpoint is gone. A BumpArena that lives until its last
// owner and the last object made in it are released.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "common/bump_arena.hpp"

namespace pthload::common {

/// A BumpArena for objects made with std::allocate_shared through ObjectArena::Allocator: each
/// such object keeps the arena alive, so the arena goes once its owners (the pointers make()
/// returns, and their copies) and every object made in it are released. Releasing an object
/// frees none of its bytes (they go with the arena).
///
/// Objects are made on one thread at a time, which holds an owner while it makes them (the
/// arena is not thread-safe); they may be released on any thread. An object costs no atomic
/// operation to make and one to release: a shared_ptr to the arena in each object would cost
/// one of each, and one in the allocator, which std::allocate_shared copies several times per
/// object, cost about six (against that, a load of 100 000 tensors takes 8.9 ms less CPU time
/// and 3.3 ms less wall time).
class ObjectArena {
  struct Key {};

 public:
  /// Use make().
  explicit ObjectArena(Key /*key*/) noexcept {}
  ObjectArena(const ObjectArena&) = delete;
  ObjectArena& operator=(const ObjectArena&) = delete;
  ~ObjectArena() = default;

  /// A new, empty arena and its first owner. Throws std::bad_alloc.
  [[nodiscard]] static std::shared_ptr<ObjectArena> make();

  /// See BumpArena::expect.
  void expect(std::size_t bytes) noexcept { memory_.expect(bytes); }
  /// Bytes obtained from the system so far.
  [[nodiscard]] std::size_t bytes_reserved() const noexcept { return memory_.bytes_reserved(); }

  /// The allocator for std::allocate_shared: a pointer to the arena, copied freely.
  template <typename T>
  struct Allocator {
    using value_type = T;

    explicit Allocator(const std::shared_ptr<ObjectArena>& owner) noexcept : arena(owner.get()) {}
    template <typename U>
    explicit(false) Allocator(const Allocator<U>& other) noexcept : arena(other.arena) {}

    [[nodiscard]] T* allocate(std::size_t count) {
      static_assert(alignof(T) <= 16);
      if (count > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
      return static_cast<T*>(arena->allocate(count * sizeof(T), alignof(T)));
    }
    void deallocate(T* /*object*/, std::size_t /*count*/) noexcept { release(arena); }

    template <typename U>
    friend bool operator==(const Allocator& a, const Allocator<U>& b) noexcept {
      return a.arena == b.arena;
    }

    ObjectArena* arena;
  };

 private:
  // The deleter of the owners' shared_ptr: the arena goes now if every object is released, else
  // with the last one.
  struct Retire {
    void operator()(ObjectArena* arena) const noexcept;
  };

  void* allocate(std::size_t size, std::size_t alignment) {
    void* bytes = memory_.allocate(size, alignment);
    ++made_;
    return bytes;
  }
  // One object is released; destroys `arena` if it was the last thing keeping it.
  static void release(ObjectArena* arena) noexcept;

  BumpArena memory_;
  // Objects made: written only by the thread making them, while it holds an owner, so Retire,
  // which runs after every owner's release, reads the final count.
  std::size_t made_ = 0;
  // Objects released, less made_ once the owners are gone (Retire): the arena goes when that
  // sum reaches zero, which it cannot before Retire (it only grows from zero until then).
  std::atomic<std::int64_t> balance_{0};
};

}  // namespace pthload::common
