// Transparent huge pages for memory pthload fills at once: one page fault per 2 MiB instead of
// one per 4 KiB, which is most of what filling fresh memory costs on virtual machines — where
// huge pages are cheap. On a virtual machine whose balloon reports free memory to its host
// (virtio-balloon free page reporting, as on this project's Firecracker machines), the host
// discards a free 2 MiB block within a second or so, and the first touch of such a block costs
// the host 512 faults of its own. Measured there: 4 KiB pages cost 0.42-0.50 ms per MiB whatever
// came before; huge pages 0.12 ms per MiB right after another process freed them, and 5-8 ms per
// MiB (a 1 GB copy load 3 s instead of 0.1 s) once idle for a second. A few hot huge pages are
// usually left even then, so one early probe does not tell: every huge page pthload asks for is
// faulted in at once and timed, and the first that proves dearer than small pages sends the
// rest of the process to small pages.
#pragma once

#include <chrono>
#include <cstddef>

namespace pthload::common {

/// The huge page size the advice is for (x86-64 and aarch64 with 4 KiB base pages).
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

/// Faults in the whole huge pages inside [begin, begin + size) for writing, now, on this thread
/// (MADV_POPULATE_WRITE, Linux 5.14), as huge pages (MADV_HUGEPAGE) while they are cheap here,
/// timing each. Once one takes longer than the threshold, huge pages are dear for the rest of
/// the process: the rest of this range, and every range after it, is advised MADV_NOHUGEPAGE
/// and left to fault in, 4 KiB at a time, as it is filled. Bytes before the first 2 MiB boundary
/// and after the last are left alone. The range must be fresh, writable memory this thread is
/// about to fill: its contents do not change, but every byte of those huge pages is resident
/// afterwards. Returns whether the whole huge pages were faulted in; false where huge pages are
/// dear or the kernel cannot populate (then, as where transparent huge pages are off, the range
/// faults in as it is filled). Safe to call from several threads.
bool fault_in_huge_pages(std::byte* begin, std::size_t size) noexcept;

/// Whether a fault_in_huge_pages call found huge pages dear in this process.
[[nodiscard]] bool huge_pages_dear() noexcept;

/// How long faulting in one huge page may take before huge pages count as dear: 2 ms, about what
/// 2 MiB of small pages cost on the slowest machine measured (1 GB/s); a hot huge page took
/// 0.25 ms there, one the host had discarded 10-16 ms.
inline constexpr std::chrono::nanoseconds kDearHugePage = std::chrono::milliseconds(2);

/// For tests: forgets the verdict and sets the threshold (kDearHugePage by default; zero makes
/// the first huge page found dear, a minute none). Not for use while another thread faults in.
void reset_huge_page_verdict(std::chrono::nanoseconds threshold = kDearHugePage) noexcept;

/// Faults in the pages of [begin, begin + size) for writing, without writing them
/// (MADV_POPULATE_WRITE, Linux 5.14), in whatever page size the range is advised: the cost of
/// fresh memory — the kernel zeroing it — is then paid by this thread, now, not by the one that
/// fills it later. Contents never change, so another thread may be filling the range meanwhile.
/// `begin` must be page-aligned and the range mapped writable. False where the kernel cannot
/// (then nothing was done, and asking again is useless).
bool populate_for_writing(std::byte* begin, std::size_t size) noexcept;

}  // namespace pthload::common
