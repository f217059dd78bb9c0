// Names of zip compression methods, for error messages (APPNOTE 4.4.5).
#pragma once

#include <cstdint>
#include <string_view>

namespace pthload::zip {

/// The method's common name ("deflate64", "bzip2", "zstd", ...) or "" when it has none we know.
/// The returned view is static.
[[nodiscard]] std::string_view method_name(std::uint16_t method) noexcept;

}  // namespace pthload::zip
