// The index of an archive's record names: which entry has a name, and whether a name repeats
// (APPNOTE 4.3.12 gives names; that no name repeats is pthload's rule, see Archive::parse).
#include "zip/name_index.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <utility>

// Inlined: a torch record name is ~16 bytes, which XXH3 hashes in a few instructions, less than
// the call would cost.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/assert.hpp"
#include "common/fresh_memory.hpp"

namespace pthload::zip {
namespace {

// Slots hold a position plus one in 32 bits; longer lists (past any default limit) are sorted.
constexpr std::size_t kMostInTable = std::numeric_limits<std::uint32_t>::max() - 1;
// Occupied slots passed per name, beyond which names are taken to be crafted to collide. With at
// most half the slots used, random names pass fewer than 2 on average (linear probing, Knuth
// 6.4); the slack covers small tables, where chance has more weight.
constexpr std::size_t kProbesPerName = 16;
constexpr std::size_t kProbeSlack = 1024;

std::uint64_t hash_of(std::string_view name) noexcept {
  return XXH3_64bits(name.data(), name.size());
}

// Sorts by hash, stably (entries with one hash stay in index order). Hashes are uniform, so a
// radix sort of 16-bit digits is linear; small arrays use std::stable_sort, which needs no
// histogram.
template <typename Key, typename Allocator>
void sort_by_hash(std::vector<Key, Allocator>& keys) {
  constexpr std::size_t kRadixFrom = 4096;
  if (keys.size() < kRadixFrom) {
    std::stable_sort(keys.begin(), keys.end(),
                     [](const Key& a, const Key& b) { return a.hash < b.hash; });
    return;
  }
  constexpr unsigned kDigitBits = 16;
  constexpr std::size_t kBuckets = std::size_t{1} << kDigitBits;
  std::vector<Key, Allocator> scratch(keys.size());
  std::vector<std::size_t> starts(kBuckets);
  for (unsigned shift = 0; shift < sizeof(std::uint64_t) * 8; shift += kDigitBits) {
    std::fill(starts.begin(), starts.end(), 0);
    for (const Key& key : keys)
      ++starts[(key.hash >> shift) & (kBuckets - 1)];
    std::size_t total = 0;
    for (std::size_t& start : starts)
      total += std::exchange(start, total);
    for (const Key& key : keys)
      scratch[starts[(key.hash >> shift) & (kBuckets - 1)]++] = key;
    keys.swap(scratch);
  }
}

}  // namespace

NameIndex::NameIndex(std::size_t count) : NameIndex(count, kProbesPerName * count + kProbeSlack) {}

NameIndex::NameIndex(std::size_t count, std::size_t probe_budget) : probes_left_(probe_budget) {
  if (count == 0) return;
  if (count > kMostInTable || probe_budget == 0) {
    sorted_ = true;
    return;
  }
  // At most half full: probe sequences stay short, and one slot is always empty, which ends
  // every search.
  constexpr std::size_t kSmallest = 16;
  const std::size_t slots = std::max(kSmallest, std::bit_ceil(2 * count));
  slots_.resize(slots);
}

NameIndex NameIndex::of(std::span<const Entry> entries) {
  return of(entries, kProbesPerName * entries.size() + kProbeSlack);
}

NameIndex NameIndex::of(std::span<const Entry> entries, std::size_t probe_budget) {
  NameIndex index(entries.size(), probe_budget);
  index.add(entries);
  index.finish(entries);
  return index;
}

void NameIndex::add(std::span<const Entry> entries) {
  PTHLOAD_ASSERT(entries.size() >= added_);
  if (sorted_) {
    added_ = entries.size();
    return;
  }
  PTHLOAD_ASSERT(entries.size() <= slots_.size() / 2);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t index = added_; index < entries.size(); ++index) {
    const std::string_view name = entries[index].name;
    const std::uint64_t hash = hash_of(name);
    const auto tag = static_cast<std::uint32_t>(hash >> 32);
    std::size_t position = hash & mask;
    bool repeats = false;
    for (; slots_[position].entry_plus_one != 0; position = (position + 1) & mask) {
      const Slot& slot = slots_[position];
      if (slot.tag == tag && entries[slot.entry_plus_one - 1].name == name) {
        repeats = true;
        break;
      }
      if (probes_left_ == 0) {
        // Names crafted to collide: finish() sorts them instead, whatever they are.
        sorted_ = true;
        slots_ = {};
        first_repeat_.reset();
        added_ = entries.size();
        return;
      }
      --probes_left_;
    }
    if (repeats) {
      if (!first_repeat_) first_repeat_ = index;
    } else {
      slots_[position] = {tag, static_cast<std::uint32_t>(index + 1)};
    }
  }
  added_ = entries.size();
}

void NameIndex::finish(std::span<const Entry> entries) {
  PTHLOAD_ASSERT(entries.size() == added_);
  if (sorted_) build_sorted_array(entries);
}

void NameIndex::build_sorted_array(std::span<const Entry> entries) {
  sorted_by_hash_.resize(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i)
    sorted_by_hash_[i] = {hash_of(entries[i].name), i};
  sort_by_hash(sorted_by_hash_);
  // Names that share a hash are ordered by name, then position, so that equal names sit side by
  // side, the first first: O(n log n) comparisons however many collide.
  const auto by_name_then_index = [&](const HashedEntry& a, const HashedEntry& b) {
    const std::string_view left = entries[a.index].name;
    const std::string_view right = entries[b.index].name;
    return left != right ? left < right : a.index < b.index;
  };
  for (auto run = sorted_by_hash_.begin(); run != sorted_by_hash_.end();) {
    const auto run_end = std::find_if(run + 1, sorted_by_hash_.end(), [&](const HashedEntry& key) {
      return key.hash != run->hash;
    });
    if (run_end - run > 1) std::sort(run, run_end, by_name_then_index);
    run = run_end;
  }
  // Each later one of equal names repeats an earlier one; the first repeat in list order is the
  // one the hash table, which adds in list order, finds first.
  for (std::size_t i = 1; i < sorted_by_hash_.size(); ++i) {
    const HashedEntry& later = sorted_by_hash_[i];
    const HashedEntry& earlier = sorted_by_hash_[i - 1];
    if (later.hash == earlier.hash && entries[later.index].name == entries[earlier.index].name &&
        (!first_repeat_ || later.index < *first_repeat_)) {
      first_repeat_ = later.index;
    }
  }
}

const Entry* NameIndex::find(std::span<const Entry> entries, std::string_view name) const noexcept {
  const std::uint64_t hash = hash_of(name);
  if (sorted_) {
    auto it = std::lower_bound(
        sorted_by_hash_.begin(), sorted_by_hash_.end(), hash,
        [](const HashedEntry& key, std::uint64_t wanted) { return key.hash < wanted; });
    for (; it != sorted_by_hash_.end() && it->hash == hash; ++it) {
      if (entries[it->index].name == name) return &entries[it->index];
    }
    return nullptr;
  }
  if (slots_.empty()) return nullptr;
  const auto tag = static_cast<std::uint32_t>(hash >> 32);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t position = hash & mask;; position = (position + 1) & mask) {
    const Slot& slot = slots_[position];
    if (slot.entry_plus_one == 0) return nullptr;
    const Entry& entry = entries[slot.entry_plus_one - 1];
    if (slot.tag == tag && entry.name == name) return &entry;
  }
}

}  // namespace pthload::zip
