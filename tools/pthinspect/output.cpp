// Output helpers for pthinspect.
#include "output.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>
#include <unistd.h>

namespace pthinspect {

std::string human_bytes(std::uint64_t bytes) {
  static constexpr std::array<const char*, 6> kUnits{"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < kUnits.size()) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

bool use_colour(int fd) {
  return std::getenv("NO_COLOR") == nullptr && ::isatty(fd) == 1;
}

std::string coloured(std::string_view text, std::string_view code, bool colour) {
  if (!colour) return std::string(text);
  return fmt::format("\x1b[{}m{}\x1b[0m", code, text);
}

namespace {
// Below this a bar would flash for an instant: not worth drawing.
constexpr std::uint64_t kMinProgressBytes = std::uint64_t{64} << 20;
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);
}  // namespace

Progress::Progress(std::string label, std::uint64_t total)
    : label_(std::move(label)),
      total_(total),
      enabled_(total >= kMinProgressBytes && ::isatty(2) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() {
  clear();
}

void Progress::clear() {
  if (!drawn_) return;
  std::fputs("\r\x1b[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

void Progress::advance(std::uint64_t bytes) {
  done_ += bytes;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < kRedrawInterval && done_ < total_) return;
  last_draw_ = now;
  draw();
}

void Progress::draw() {
  constexpr int kWidth = 30;
  const double fraction =
      total_ == 0 ? 1.0
                  : static_cast<double>(std::min(done_, total_)) / static_cast<double>(total_);
  const double seconds = std::chrono::duration<double>(last_draw_ - start_).count();
  const double rate = seconds > 0 ? static_cast<double>(done_) / seconds : 0.0;
  const double left = rate > 0 ? static_cast<double>(total_ - std::min(done_, total_)) / rate : 0.0;
  const int filled = static_cast<int>(fraction * kWidth);
  std::fputs(
      fmt::format("\r{} [{}{}] {} / {}  {}/s  {:.0f} s left\x1b[K", label_,
                  std::string(static_cast<std::size_t>(filled), '#'),
                  std::string(static_cast<std::size_t>(kWidth - filled), '.'), human_bytes(done_),
                  human_bytes(total_), human_bytes(static_cast<std::uint64_t>(rate)), left)
          .c_str(),
      stderr);
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace pthinspect
