#include "common/warm_blocks.hpp"

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <new>
#include <system_error>
#include <utility>

#include "common/huge_pages.hpp"

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

// Faults in `block` in small pages (common::write_to_each_page). Not huge pages: a huge page the
// host must back anew takes 10-20 ms to fault in (huge_pages.hpp), all the while stalling the
// loading thread's next mmap or munmap, and every page fault queued behind it. False where it
// was stopped first.
bool fault_in(std::byte* block, std::size_t size, const std::stop_token& stop) {
  constexpr std::size_t kBytesBetweenStopChecks = std::size_t{512} << 10;
  for (std::size_t at = 0; at < size; at += kBytesBetweenStopChecks) {
    if (stop.stop_requested()) return false;
    write_to_each_page(block + at, std::min(kBytesBetweenStopChecks, size - at));
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
