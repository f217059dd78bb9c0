#!/usr/bin/env python3
"""The tools load no shared library at start that the build meant to link into them (see
tools/meson.build): each such library costs every run of pthinspect or pthbench 0.1-0.5 ms, up
to a fifth of a whole `pthinspect ls` of a 1 GB checkpoint. Reads each program's DT_NEEDED entries
with readelf.
  startup_libraries_test.py READELF FORBIDDEN_PREFIXES(comma-separated) PROGRAM..."""
import re
import subprocess
import sys

readelf, forbidden, programs = sys.argv[1], sys.argv[2].split(","), sys.argv[3:]
failures = []
for program in programs:
    dynamic = subprocess.run([readelf, "-d", program], capture_output=True, text=True, check=True)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic.stdout)
    if not needed:
        failures.append(f"{program}: readelf lists no NEEDED entry (is it dynamically linked?)")
    for library in needed:
        if any(library.startswith(prefix) for prefix in forbidden):
            failures.append(f"{program} loads {library} at start")
    print(f"{program}: {', '.join(needed)}")
if failures:
    sys.exit("\n".join(failures))
