// Small output helpers shared by pthinspect's commands.
#pragma once

#include <cstdint>
#include <string>

namespace pthinspect {

/// A byte count for people: "512 B", "1.5 KiB", "3.2 GiB".
std::string human_bytes(std::uint64_t bytes);

}  // namespace pthinspect
