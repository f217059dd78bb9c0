// fuzz_writer: whatever loads, saved and read back. Property: for any input that loads on the
// CPU, save() either refuses with a pthload::Error (a tensor it cannot write, a name it cannot
// hold) or writes a file that loads to the same tensors — names, dtypes, sizes, strides,
// offsets and contents — plain and with compact_views (then contiguous); and the same tensors
// give the same bytes. abort() otherwise.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <vector>

#include "load_path.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "pthload/save.hpp"

namespace {

// The load path's limits, and a view that overlaps itself bounded to 16 MiB, which both
// compact_views and the checksums read whole.
pthload::LoadOptions writer_options() {
  pthload::LoadOptions options = pthload::fuzz::fuzz_options(true);
  options.limits.max_overlapping_view_bytes = 16 << 20;
  return options;
}

void require(bool condition) {
  if (!condition) std::abort();
}

std::vector<std::byte> save_to_memory(const pthload::Checkpoint& checkpoint,
                                      const pthload::SaveOptions& options,
                                      pthload::SaveReport& report) {
  std::vector<std::byte> bytes;
  report = pthload::save(
      [&](std::span<const std::byte> chunk) {
        bytes.insert(bytes.end(), chunk.begin(), chunk.end());
      },
      checkpoint, options);
  return bytes;
}

void check_round_trip(const pthload::Checkpoint& source, bool compact) {
  const pthload::SaveOptions options{.compact_views = compact};
  pthload::SaveReport report;
  std::vector<std::byte> bytes;
  try {
    bytes = save_to_memory(source, options, report);
  } catch (const pthload::Error&) {
    return;  // refused with a reason: a tensor save() does not write, names it cannot hold
  }
  require(report.bytes == bytes.size());
  pthload::SaveReport again;
  require(save_to_memory(source, options, again) == bytes);
  const pthload::Checkpoint copy = pthload::load(bytes, writer_options());
  const auto before = source.tensors();
  const auto after = copy.tensors();
  require(before.size() == after.size());
  for (std::size_t i = 0; i < before.size(); ++i) {
    const pthload::Tensor& a = before[i].tensor;
    const pthload::Tensor& b = after[i].tensor;
    require(std::string_view(before[i].name) == std::string_view(after[i].name));
    require(a.dtype() == b.dtype());
    require(std::equal(a.sizes().begin(), a.sizes().end(), b.sizes().begin(), b.sizes().end()));
    if (compact) {
      require(b.is_contiguous() && b.storage_offset() == 0);
    } else {
      require(std::equal(a.strides().begin(), a.strides().end(), b.strides().begin(),
                         b.strides().end()));
      require(a.storage_offset() == b.storage_offset());
    }
    std::optional<std::uint64_t> checksum;
    try {
      checksum = a.content_checksum();
    } catch (const pthload::Error&) {
      // Past the overlapping-view limit: the copy's, read the same way, is refused too.
    }
    if (checksum) require(*checksum == b.content_checksum());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<pthload::Checkpoint> source;
  try {
    source.emplace(pthload::load(std::as_bytes(std::span(data, size)), writer_options()));
  } catch (const pthload::Error&) {
    return 0;
  }
  check_round_trip(*source, false);
  check_round_trip(*source, true);
  return 0;
}
