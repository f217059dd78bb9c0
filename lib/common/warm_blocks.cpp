#include "common/warm_blocks.hpp"

#include <cstddef>
#include <mutex>
#include <new>
#include <system_error>
#include <utility>

namespace pthload::common {
namespace {

// Every WarmBlocks alive, which take() asks in turn. A list rather than one pool: two loads on
// two threads may each start one, and either may take the other's blocks (memory is memory).
struct Registry {
  std::mutex mutex;
  std::vector<WarmBlocks*> alive;
};

Registry& registry() noexcept {
  static Registry instance;
  return instance;
}

constexpr std::size_t kPageBytes = 4096;

// Faults in `block` in small pages, a write to each. Not MADV_POPULATE_WRITE, nor huge pages:
// populating holds the process's mmap lock for reading, and a huge page the host must back
// anew takes 10-20 ms to fault in (huge_pages.hpp), all the while stalling the loading thread's
// next mmap or munmap, and every page fault queued behind it. A write fault takes that lock only
// for the mapping's first page; the others take the mapping's own lock. (Where transparent huge
// pages are "always", the first write to each 2 MiB may still fault in a huge page.) False
// where it was stopped first.
bool fault_in(std::byte* block, std::size_t size, const std::stop_token& stop) {
  constexpr std::size_t kPagesBetweenStopChecks = 128;
  volatile std::byte* const pages = block;
  for (std::size_t page = 0; page < size / kPageBytes; ++page) {
    if (page % kPagesBetweenStopChecks == 0 && stop.stop_requested()) return false;
    // Fresh memory is zero: writing a zero changes nothing but makes the page resident.
    pages[page * kPageBytes] = std::byte{0};
  }
  return true;
}

}  // namespace

WarmBlocks::WarmBlocks(std::size_t count) noexcept {
  if (count == 0) return;
  try {
    // Reserved now, so that handing a block over never allocates.
    ready_.reserve(count);
    Registry& all = registry();
    const std::lock_guard lock(all.mutex);
    all.alive.push_back(this);
  } catch (const std::bad_alloc&) {
    return;
  }
  try {
    thread_ = std::jthread(
        [this, count](const std::stop_token& stop) noexcept { make_blocks(stop, count); });
  } catch (const std::system_error&) {
    // No thread: nothing is made, and take() finds nothing here.
  }
}

WarmBlocks::~WarmBlocks() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
  std::vector<LargeBlock> untaken;
  {
    Registry& all = registry();
    const std::lock_guard lock(all.mutex);
    std::erase(all.alive, this);
    untaken = std::move(ready_);
  }
  // Unmapped here, outside the lock.
}

void WarmBlocks::make_blocks(const std::stop_token& stop, std::size_t count) noexcept {
  for (std::size_t i = 0; i < count && !stop.stop_requested(); ++i) {
    LargeBlock block;
    try {
      block = make_large_block(kBlockBytes);
    } catch (const std::bad_alloc&) {
      return;
    }
    if (!fault_in(block.get(), kBlockBytes, stop)) return;
    const std::lock_guard lock(registry().mutex);
    ready_.push_back(std::move(block));  // reserved: cannot throw
    ++made_;
  }
}

LargeBlock WarmBlocks::take() noexcept {
  Registry& all = registry();
  const std::lock_guard lock(all.mutex);
  for (WarmBlocks* blocks : all.alive) {
    if (blocks->ready_.empty()) continue;
    LargeBlock block = std::move(blocks->ready_.back());
    blocks->ready_.pop_back();
    ++blocks->taken_;
    return block;
  }
  return {};
}

std::size_t WarmBlocks::made() const noexcept {
  const std::lock_guard lock(registry().mutex);
  return made_;
}

std::size_t WarmBlocks::taken() const noexcept {
  const std::lock_guard lock(registry().mutex);
  return taken_;
}

}  // namespace pthload::common
