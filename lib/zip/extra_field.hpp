// Extra fields of zip headers: tagged blocks of (id, size, data) (APPNOTE 4.5.1-4.5.3).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace pthload::zip {

/// The data of the first extra field with header `id` in `extra`, a view into `extra`, or
/// nullopt when there is none. Parsing stops at the first field whose size runs past the end:
/// real writers leave such tails (zipalign pads with bare zero bytes), and a field cut off
/// there cannot be trusted anyway.
[[nodiscard]] std::optional<std::span<const std::byte>> find_extra_field(
    std::span<const std::byte> extra, std::uint16_t id) noexcept;

}  // namespace pthload::zip
