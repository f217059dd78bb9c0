#include "common/phase_marks.hpp"

#include <atomic>

namespace pthload::common::phases {
namespace {

std::atomic<Recorder> installed{nullptr};

}  // namespace

void set_recorder(Recorder recorder) noexcept {
  installed.store(recorder, std::memory_order_release);
}

void end(const char* phase) noexcept {
  if (const Recorder recorder = installed.load(std::memory_order_acquire)) recorder(phase);
}

}  // namespace pthload::common::phases
