// Inflating deflated records (APPNOTE 4.4.5 method 8; RFC 1951) with libdeflate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/aligned_buffer.hpp"
#include "pthload/limits.hpp"

namespace pthload::zip {

/// The most bytes deflate can produce per compressed byte: a 258-byte match costs at least
/// two bits (RFC 1951 3.2.5; zlib's "maximum compression factor" note).
inline constexpr std::uint64_t kMaxDeflateRatio = 1032;

/// Inflates the raw deflate stream `compressed` into a new buffer of exactly
/// `uncompressed_size` bytes. Sizes the stream cannot produce and sizes above
/// `limits.max_inflated_record_bytes` are refused before allocating. Error offsets are
/// `compressed_offset` (the payload's file offset). Throws FormatError
/// (kZipImplausibleCompressionRatio, kZipLimitExceeded, kZipInflateFailed,
/// kZipInflatedSizeMismatch) and std::bad_alloc.
[[nodiscard]] common::AlignedBuffer inflate(std::span<const std::byte> compressed,
                                            std::uint64_t uncompressed_size, const Limits& limits,
                                            std::uint64_t compressed_offset);

}  // namespace pthload::zip
