// The index of an archive's record names: which entry has a name, and whether a name repeats
// (APPNOTE 4.3.12 gives names; that no name repeats is pthload's rule, see Archive::parse).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "common/fresh_memory.hpp"
#include "zip/entry.hpp"

namespace pthload::zip {

/// Names of a list of entries, hashed. Built one entry at a time as the central directory is
/// read (the name's bytes are then in the cache), it holds indices into that list, not pointers:
/// a copy of the index works for a copy of the list. Copyable.
///
/// A hash table, 16 bytes per entry at most. Names crafted to collide (a hostile file) cannot
/// make it quadratic: past a budget of probes that random names stay far below, it gives way to
/// an array sorted by hash whose equal hashes are sorted by name, O(n log n) whatever the names.
class NameIndex {
 public:
  /// An index of no names.
  NameIndex() = default;
  /// An empty index with room for `count` names (the caller has checked that the file pays for
  /// them). Throws std::bad_alloc.
  explicit NameIndex(std::size_t count);
  /// The index of every name in `entries`. Throws std::bad_alloc.
  [[nodiscard]] static NameIndex of(std::span<const Entry> entries);
  /// As above with `probe_budget` in place of the one random names stay below: 0 gives the
  /// sorted array at once. For tests of that fallback.
  [[nodiscard]] static NameIndex of(std::span<const Entry> entries, std::size_t probe_budget);

  /// Adds the names of the entries of `entries` past the first size(), which were added before
  /// (and are unchanged since). Throws std::bad_alloc.
  void add(std::span<const Entry> entries);
  /// Completes the index once every entry is added: `entries` is the whole list. Throws
  /// std::bad_alloc.
  void finish(std::span<const Entry> entries);

  /// How many entries were added.
  [[nodiscard]] std::size_t size() const noexcept { return added_; }
  /// The position in the list of the first entry whose name an earlier entry has, if any.
  /// Valid after finish().
  [[nodiscard]] std::optional<std::size_t> first_repeat() const noexcept { return first_repeat_; }
  /// The entry of `entries` (the list the index was built over) named exactly `name`, the first
  /// where several are, or nullptr.
  [[nodiscard]] const Entry* find(std::span<const Entry> entries,
                                  std::string_view name) const noexcept;
  /// Whether the index is the sorted array (its fallback) rather than the hash table.
  [[nodiscard]] bool is_sorted_array() const noexcept { return sorted_; }

 private:
  /// A table slot: the hash's high half, and the entry's position plus one (0: empty).
  struct Slot {
    std::uint32_t tag = 0;
    std::uint32_t entry_plus_one = 0;
  };
  /// An element of the sorted array: a name's hash and its entry's position.
  struct HashedEntry {
    std::uint64_t hash;
    std::size_t index;
  };

  NameIndex(std::size_t count, std::size_t probe_budget);
  void build_sorted_array(std::span<const Entry> entries);

  std::vector<Slot, common::LargeArrayAllocator<Slot>> slots_;  ///< size a power of two
  std::vector<HashedEntry, common::LargeArrayAllocator<HashedEntry>> sorted_by_hash_;
  std::size_t added_ = 0;
  std::size_t probes_left_ = 0;
  bool sorted_ = false;
  std::optional<std::size_t> first_repeat_;
};

}  // namespace pthload::zip
