// The memo's dense part: slots for keys 0..size(), in pages allocated when first written.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "common/bump_arena.hpp"
#include "pickle/value.hpp"

namespace pthload::pickle {

/// Memo slots in pages of 4096 allocated as keys reach them, so that growing moves nothing and
/// touches no memory ahead of use: a vector doubling its size (the machine's schedule for
/// moving sparse keys in) held about twice the slots a pickle used, all zeroed, and copied them
/// at each step — for the 675 000 memoized values of a 100 000-tensor pickle, 16 MiB written
/// for 5 MiB of slots. The pages come from an arena. Empty slots read as null.
class MemoPages {
 public:
  /// Keys below this have slots (null until set).
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// The value at `key` (below size()), or null.
  [[nodiscard]] Value* get(std::size_t key) const noexcept {
    Value* const* page = pages_[key >> kPageBits];
    return page != nullptr ? page[key & (kPageSlots - 1)] : nullptr;
  }
  /// The slot of `key` (below size()) if its page is allocated, else null.
  [[nodiscard]] Value** allocated_slot(std::size_t key) const noexcept {
    Value** page = pages_[key >> kPageBits];
    return page != nullptr ? page + (key & (kPageSlots - 1)) : nullptr;
  }
  /// The slot of `key` (below size()), its page allocated if it has none. Throws bad_alloc.
  [[nodiscard]] Value*& slot(std::size_t key) {
    Value**& page = pages_[key >> kPageBits];
    if (page == nullptr) {
      page = static_cast<Value**>(arena_.allocate(kPageSlots * sizeof(Value*), alignof(Value*)));
      std::fill_n(page, kPageSlots, nullptr);
    }
    return page[key & (kPageSlots - 1)];
  }
  /// Slots for keys below `size`, if it is more than size(). Throws std::bad_alloc.
  void grow_to(std::size_t size) {
    if (size <= size_) return;
    pages_.resize((size + kPageSlots - 1) >> kPageBits);
    size_ = size;
  }

 private:
  static constexpr unsigned kPageBits = 12;
  static constexpr std::size_t kPageSlots = std::size_t{1} << kPageBits;
  std::vector<Value**> pages_;
  common::BumpArena arena_;
  std::size_t size_ = 0;
};

}  // namespace pthload::pickle
