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
// rest of the process to small pages. There, the first dear page costs 5-30 ms, and a few hot
// pages are seldom worth that risk: small ranges stay in small pages (kProbeWorthyBytes).
#pragma once

#include <chrono>
#include <cstddef>
#include <string_view>

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
///
/// Where the host takes back free memory (host_reclaims_free_memory), a range is left alone
/// (unadvised, false returned) while it, or the whole it is a piece of (`part_of`: a large copy
/// that threads fill piece by piece), is smaller than kProbeWorthyBytes and no range of that
/// size has proved huge pages cheap yet. (Where transparent huge pages are "always", the kernel
/// may still fault such a range in as huge pages.)
bool fault_in_huge_pages(std::byte* begin, std::size_t size, std::size_t part_of = 0) noexcept;

/// The base page size (sysconf(_SC_PAGESIZE); 4 KiB if it cannot say). Read once.
[[nodiscard]] std::size_t page_bytes() noexcept;

/// Faults in [begin, begin + size) for writing, now, on this thread, as a thread about to fill
/// fresh memory (a copy read with pread) wants it: the whole huge pages as fault_in_huge_pages
/// does, then every other page of the range (all of it in small pages where huge pages are dear
/// or not worth timing) with write_to_each_page. A page fault the kernel takes while pread
/// copies into the page costs more than one taken in the caller's write: reading the 0.95 GB
/// state dict into fresh memory in 4 KiB pages, on two threads in 8 MiB pieces, took 190 ms with
/// the pages written first and 239 ms without (medians of four, this project's machines). The
/// range must be memory this thread is about to overwrite, which no other thread uses meanwhile.
void fault_in_for_writing(std::byte* begin, std::size_t size, std::size_t part_of = 0) noexcept;

/// Writes a zero to one byte of each page of [begin, begin + size), which no other thread uses
/// meanwhile: each page becomes resident, and fresh memory (all zero) is unchanged; other memory
/// must be about to be overwritten. Not MADV_POPULATE_WRITE, which holds the process's mmap lock
/// for reading while it faults the pages in: another thread's madvise, mmap or munmap then waits
/// for it, and every page fault queued behind that (a copy load's two threads took turns: 280 ms
/// instead of 220). A write fault takes that lock only for a mapping's first page; the others
/// take the mapping's own lock. (Where transparent huge pages are "always", the first write to
/// each 2 MiB may fault in a huge page.)
void write_to_each_page(std::byte* begin, std::size_t size) noexcept;

/// How large a range must be, where the host takes back free memory, to be worth timing a huge
/// page for. Measured there: 4 KiB pages cost 0.45 ms per MiB and hot huge pages 0.12, so 64 MiB
/// in huge pages save about 21 ms, what one dear page costs (23-27 ms after a few seconds' idling,
/// 5-8 ms at best). A checkpoint of 100 000 small tensors fills ranges of 2-8 MiB, and after idling
/// met 0-15 hot huge pages before a dear one, which the loading thread paid while it read the
/// index: leaving such ranges to small pages made its view load 6 ms faster back to back (13 of
/// 17 pairs, p = 0.049) and after 3 s idle (10 of 17, p = 0.63).
inline constexpr std::size_t kProbeWorthyBytes = std::size_t{64} << 20;

/// Whether this runs as a guest whose host takes back the memory it frees: a virtio balloon
/// with free page reporting (VIRTIO_BALLOON_F_REPORTING, feature bit 5, in
/// /sys/bus/virtio/drivers/virtio_balloon/*/features), as on Firecracker virtual machines. There,
/// a free huge page stays backed only until the guest reports it, a second or so. Read once.
[[nodiscard]] bool host_reclaims_free_memory() noexcept;

/// Whether a virtio device's `features` (sysfs: one '0' or '1' per feature bit, bit 0 first)
/// include free page reporting.
[[nodiscard]] bool reports_free_pages(std::string_view features) noexcept;

/// Whether a fault_in_huge_pages call found huge pages dear in this process.
[[nodiscard]] bool huge_pages_dear() noexcept;

/// How long faulting in one huge page may take before huge pages count as dear: 2 ms, about what
/// 2 MiB of small pages cost on the slowest machine measured (1 GB/s); a hot huge page took
/// 0.25 ms there, one the host had discarded 10-16 ms.
inline constexpr std::chrono::nanoseconds kDearHugePage = std::chrono::milliseconds(2);

/// Where the host is taken to take back free memory: as detected, or as a test says.
enum class HostReclaim { kDetect, kNo, kYes };

/// For tests: forgets the verdict and sets the threshold (kDearHugePage by default; zero makes
/// the first huge page found dear, a minute none) and what host_reclaims_free_memory() answers.
/// Not for use while another thread faults in.
void reset_huge_page_verdict(std::chrono::nanoseconds threshold = kDearHugePage,
                             HostReclaim host = HostReclaim::kDetect) noexcept;

/// Faults in the pages of [begin, begin + size) for writing, without writing them
/// (MADV_POPULATE_WRITE, Linux 5.14), in whatever page size the range is advised: the cost of
/// fresh memory — the kernel zeroing it — is then paid by this thread, now, not by the one that
/// fills it later. Contents never change, so another thread may be filling the range meanwhile.
/// `begin` must be page-aligned and the range mapped writable. False where the kernel cannot
/// (then nothing was done, and asking again is useless).
bool populate_for_writing(std::byte* begin, std::size_t size) noexcept;

}  // namespace pthload::common
