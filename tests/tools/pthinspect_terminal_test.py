#!/usr/bin/env python3
"""pthinspect on a terminal: colour appears there, and not with NO_COLOR (in a pipe:
pthinspect_commands_test.py). Runs pthinspect on a pseudo-terminal; where none can be opened (no
/dev/pts mounted, as in a bare chroot or container) it says so and exits 77, which meson counts
as skipped.

usage: pthinspect_terminal_test.py PTHINSPECT FIXTURES_DIR
"""
import os
import subprocess
import sys

PTHINSPECT, FIXTURES = sys.argv[1], sys.argv[2]


def on_terminal(args, env):
    """pthinspect's output with stdin, stdout and stderr on a new pseudo-terminal."""
    controller, terminal = os.openpty()
    with subprocess.Popen([PTHINSPECT, *args], stdin=terminal, stdout=terminal, stderr=terminal,
                          env=env, start_new_session=True) as process:
        os.close(terminal)
        output = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: the program has exited and closed the terminal
                break
            if not chunk:
                break
            output += chunk
    os.close(controller)
    return output


try:
    for end in os.openpty():
        os.close(end)
except OSError as e:
    print(f"no pseudo-terminal can be opened ({e}): colour on a terminal is not checked")
    sys.exit(77)

failures = []
env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
scan_args = ["scan", os.path.join(FIXTURES, "scan", "zip_os_system.pt")]
if b"\x1b[" not in on_terminal(scan_args, env):
    failures.append("no colour on a terminal")
if b"\x1b[" in on_terminal(scan_args, {**env, "NO_COLOR": "1"}):
    failures.append("colour on a terminal with NO_COLOR set")
print(f"2 checks, {len(failures)} failed")
for failure in failures:
    print("FAIL:", failure)
sys.exit(1 if failures else 0)
