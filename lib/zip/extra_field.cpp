// Extra fields of zip headers: tagged blocks of (id, size, data) (APPNOTE 4.5.1-4.5.3).
#include "zip/extra_field.hpp"

#include "common/byte_reader.hpp"

namespace pthload::zip {

std::optional<std::span<const std::byte>> find_extra_field(std::span<const std::byte> extra,
                                                           std::uint16_t id) noexcept {
  std::size_t position = 0;
  while (extra.size() - position >= 4) {
    const auto field_id = common::load_le<std::uint16_t>(extra.data() + position);
    const std::size_t field_size = common::load_le<std::uint16_t>(extra.data() + position + 2);
    position += 4;
    if (field_size > extra.size() - position) return std::nullopt;
    if (field_id == id) return extra.subspan(position, field_size);
    position += field_size;
  }
  return std::nullopt;
}

}  // namespace pthload::zip
