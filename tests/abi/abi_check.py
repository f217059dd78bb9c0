"""libpthload.so's ABI against the baseline committed beside this script (libpthload.abi.gz,
written by tools/abi_baseline.sh with libabigail's abidw: the exported interfaces and the types
they reach).

usage: abi_check.py LIBPTHLOAD_SO BASELINE SUPPRESSIONS

The policy (docs/compatibility.md): a change that a program built against the baseline's headers
cannot survive (a function removed or its signature changed, a public struct or class changed in
size or layout, an enumerator renumbered) fails here, unless the same commit raises the soname's
major (pthload_soversion in meson.build) and writes the baseline again. What the policy allows
passes: functions and enumerators added (abidiff --no-added-syms; added enumerators are harmless
to abidiff), members added at the end of the C structs that begin with struct_size, and changes
inside pthload's internal namespaces (SUPPRESSIONS: allowed_changes.suppr). Exit status 0 when
compatible, 1 when not or when the baseline's soname is not the library's, 77 (skipped) where
abidiff is missing (scripts/bootstrap installs abigail-tools).
"""
import gzip
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ABIDIFF_ERROR, ABIDIFF_USAGE_ERROR, ABIDIFF_ABI_CHANGE, ABIDIFF_INCOMPATIBLE = 1, 2, 4, 8


def soname_of(library: pathlib.Path) -> str:
    dynamic = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True,
                             check=True).stdout
    match = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", dynamic)
    return match.group(1) if match else ""


def main() -> int:
    library, baseline, suppressions = (pathlib.Path(a) for a in sys.argv[1:4])
    if shutil.which("abidiff") is None or shutil.which("readelf") is None:
        print("no abidiff (Debian's abigail-tools) or readelf on PATH: skipped")
        return 77
    if not baseline.is_file():
        print(f"FAIL no baseline at {baseline}: write it with tools/abi_baseline.sh and commit it")
        return 1
    baseline_text = gzip.decompress(baseline.read_bytes()).decode()
    match = re.search(r"<abi-corpus [^>]*soname='([^']+)'", baseline_text)
    baseline_soname = match.group(1) if match else ""
    soname = soname_of(library)
    if soname != baseline_soname:
        print(f"FAIL the library's soname is {soname}, the baseline's {baseline_soname}: a soname "
              "change comes with a new baseline in the same commit (tools/abi_baseline.sh)")
        return 1
    with tempfile.TemporaryDirectory() as scratch:
        baseline_xml = pathlib.Path(scratch) / "libpthload.abi"
        baseline_xml.write_text(baseline_text)
        # Without debug information abidiff would compare symbol names only and pass a changed
        # layout: refused. ~/.abignore and the like must not decide either.
        run = subprocess.run(["abidiff", "--exported-interfaces-only", "--no-added-syms",
                              "--fail-no-debug-info", "--no-default-suppression",
                              "--suppressions", str(suppressions), "--no-show-locs",
                              str(baseline_xml), str(library)], capture_output=True, text=True)
    report = (run.stdout + run.stderr).strip()
    if run.returncode & (ABIDIFF_ERROR | ABIDIFF_USAGE_ERROR):
        print(f"FAIL abidiff could not compare (exit {run.returncode}):\n{report}")
        return 1
    if run.returncode & (ABIDIFF_INCOMPATIBLE | ABIDIFF_ABI_CHANGE):
        print(f"FAIL {soname}: a change that breaks programs built against the baseline:\n{report}"
              "\nEither undo it, or raise pthload_soversion in meson.build (with PTHLOAD_SOVERSION "
              "in pthload.h and the node in lib/pthload.map) and write the baseline again "
              "(tools/abi_baseline.sh), in the same commit.")
        return 1
    print(f"{soname}: compatible with the baseline (additions are not listed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
