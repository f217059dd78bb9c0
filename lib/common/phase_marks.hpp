// Where open() and load() spend their time, for pthbench (`PTHBENCH_PHASES=1 pthbench once`): the
// loading thread names each phase as it ends. Off unless a tool installs a recorder, and then
// one call per phase (about ten per load), so the marks stay in release builds.
#pragma once

namespace pthload::common::phases {

/// Told the name of each phase as it ends (a static string), on the thread that loads.
using Recorder = void (*)(const char* phase) noexcept;

/// Installs `recorder` (nullptr: none) for every load from now on. Not for libraries: a tool
/// that measures itself sets it before it loads anything.
void set_recorder(Recorder recorder) noexcept;

/// Tells the recorder, if any, that `phase` just ended.
void end(const char* phase) noexcept;

}  // namespace pthload::common::phases
