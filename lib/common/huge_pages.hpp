// Transparent huge pages for memory pthload fills at once: one page fault per 2 MiB instead of
// one per 4 KiB, which is most of what filling fresh memory costs on virtual machines.
#pragma once

#include <cstddef>

namespace pthload::common {

/// The huge page size the advice is for (x86-64 and aarch64 with 4 KiB base pages).
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

/// Advises the whole huge pages inside [begin, begin + size) as MADV_HUGEPAGE; bytes before the
/// first 2 MiB boundary and after the last stay in small pages, so memory that is not filled
/// at once (scattered headers, a partly used block) is not rounded up to 2 MiB. Advice only:
/// where transparent huge pages are off, nothing changes.
void advise_huge_pages(std::byte* begin, std::size_t size) noexcept;

/// Faults in the pages of [begin, begin + size) for writing, without writing them
/// (MADV_POPULATE_WRITE, Linux 5.14): the cost of fresh memory — the kernel zeroing it — is
/// then paid by this thread, now, not by the one that fills it later. Contents never change, so
/// another thread may be filling the range meanwhile. `begin` must be page-aligned and the range
/// mapped writable. False where the kernel cannot (then nothing was done, and asking again is
/// useless).
bool populate_for_writing(std::byte* begin, std::size_t size) noexcept;

}  // namespace pthload::common
