// Small output helpers shared by pthinspect's commands: sizes, colour and the progress bar.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace pthinspect {

/// A byte count for people: "512 B", "1.5 KiB", "3.2 GiB".
std::string human_bytes(std::uint64_t bytes);

/// Whether to colour what goes to stdout (fd 1) or stderr (fd 2): only on a terminal, and never
/// when NO_COLOR is set to anything (https://no-color.org).
[[nodiscard]] bool use_colour(int fd);

/// `text` in the ANSI colour `code` ("31" red, "32" green, "33" yellow) when `colour` is true.
[[nodiscard]] std::string coloured(std::string_view text, std::string_view code, bool colour);

/// A progress bar on stderr for long work, drawn only when stderr is a terminal (and the work is
/// large enough to be worth it): bytes done, rate and time left, redrawn at most 10 times a
/// second, erased when done. Quiet otherwise, so scripts and pipes see nothing.
class Progress {
 public:
  /// `label` names the work ("export"); `total` is the bytes it will go through.
  Progress(std::string label, std::uint64_t total);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  /// Erases the bar.
  ~Progress();
  /// Counts `bytes` more as done.
  void advance(std::uint64_t bytes);
  /// Erases the bar (until the next redraw), before a line goes to the same terminal.
  void clear();

 private:
  void draw();

  std::string label_;
  std::uint64_t total_;
  std::uint64_t done_ = 0;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace pthinspect
