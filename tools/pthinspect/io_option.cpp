// --io: map (zero-copy views, copies read with pread) or read (never mapped; see IoStrategy).
#include "io_option.hpp"

namespace pthinspect {

void add_io_option(CLI::App& command, std::string& value) {
  command
      .add_option("--io", value,
                  "map: memory-map the file (views; copies read with pread) | read: never map "
                  "it, read with pread into owned memory (a file truncated meanwhile is an "
                  "error, never a crash)")
      ->check(CLI::IsMember({"map", "read"}))
      ->capture_default_str();
}

pthload::IoStrategy io_strategy(std::string_view value) noexcept {
  return value == "read" ? pthload::IoStrategy::kRead : pthload::IoStrategy::kMap;
}

}  // namespace pthinspect
