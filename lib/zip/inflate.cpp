// Inflating deflated records (APPNOTE 4.4.5 method 8; RFC 1951) with libdeflate.
#include "zip/inflate.hpp"

#include <limits>
#include <memory>
#include <new>

#include <fmt/format.h>
#include <libdeflate.h>

#include "common/checked.hpp"
#include "pthload/error.hpp"

namespace pthload::zip {
namespace {

struct FreeDecompressor {
  void operator()(libdeflate_decompressor* d) const noexcept { libdeflate_free_decompressor(d); }
};

/// Slack for the stream's fixed overhead on tiny records; the ratio bound is what matters.
constexpr std::uint64_t kRatioSlack = 64;

}  // namespace

common::AlignedBuffer inflate(std::span<const std::byte> compressed,
                              std::uint64_t uncompressed_size, const Limits& limits,
                              std::uint64_t compressed_offset) {
  // A declared size is only a claim; checking it against what the compressed bytes could
  // possibly yield stops a 1 KB record from reserving terabytes.
  const auto producible = common::checked_add(
      common::checked_mul(compressed.size(), kMaxDeflateRatio).value_or(UINT64_MAX), kRatioSlack);
  if (uncompressed_size > producible.value_or(UINT64_MAX)) {
    throw FormatError(Errc::kZipImplausibleCompressionRatio,
                      fmt::format("{} compressed bytes cannot inflate to the declared {} bytes",
                                  compressed.size(), uncompressed_size),
                      {.offset = compressed_offset});
  }
  if (uncompressed_size > limits.max_inflated_record_bytes ||
      uncompressed_size > std::numeric_limits<std::size_t>::max()) {
    throw FormatError(Errc::kZipLimitExceeded,
                      fmt::format("record inflates to {} bytes, more than the limit of {}",
                                  uncompressed_size, limits.max_inflated_record_bytes),
                      {.offset = compressed_offset});
  }
  const std::unique_ptr<libdeflate_decompressor, FreeDecompressor> decompressor(
      libdeflate_alloc_decompressor());
  if (!decompressor) throw std::bad_alloc();
  common::AlignedBuffer out(static_cast<std::size_t>(uncompressed_size));
  std::size_t actual_in = 0;
  std::size_t actual_out = 0;
  // Bytes after the end of the final block are tolerated, as zlib does.
  const libdeflate_result result =
      libdeflate_deflate_decompress_ex(decompressor.get(), compressed.data(), compressed.size(),
                                       out.data(), out.size(), &actual_in, &actual_out);
  switch (result) {
    case LIBDEFLATE_SUCCESS:
      if (actual_out != uncompressed_size) break;
      return out;
    case LIBDEFLATE_INSUFFICIENT_SPACE:
      throw FormatError(
          Errc::kZipInflatedSizeMismatch,
          fmt::format("record inflates to more than its declared {} bytes", uncompressed_size),
          {.offset = compressed_offset});
    default:
      throw FormatError(
          Errc::kZipInflateFailed,
          fmt::format("invalid deflate data (libdeflate result {})", static_cast<int>(result)),
          {.offset = compressed_offset});
  }
  throw FormatError(Errc::kZipInflatedSizeMismatch,
                    fmt::format("record inflates to {} bytes, not its declared {}", actual_out,
                                uncompressed_size),
                    {.offset = compressed_offset});
}

}  // namespace pthload::zip
