// --io map|read: how pthinspect's commands have the library read a checkpoint's bytes.
#pragma once

#include <string>
#include <string_view>

#include <CLI/CLI.hpp>
#include <pthload/options.hpp>

namespace pthinspect {

/// Adds `--io map|read` to `command`, stored in `value` ("map" unless given).
void add_io_option(CLI::App& command, std::string& value);

/// The strategy `--io` names ("map" or "read"; the option's check refuses anything else).
[[nodiscard]] pthload::IoStrategy io_strategy(std::string_view value) noexcept;

}  // namespace pthinspect
