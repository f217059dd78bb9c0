#!/usr/bin/env python3
"""pthinspect against torch, on the committed torch.save fixtures, without torch.

    fixtures_crosscheck_test.py PTHINSPECT FIXTURES_DIR

FIXTURES_DIR is tests/fixtures (or tests/fixtures/torch). For every torch/**/*.pt that has a
committed <name>.expected.json(.gz) (written by tests/fixtures/make_torch_fixtures.py with
tools/torch_dump.py), and every safetensors/**/*.safetensors with a committed
<name>.safetensors.expected.json (what Python's safetensors read back, written by
tests/fixtures/make_safetensors_fixtures.py), `PTHINSPECT ls --json --checksum FILE` must print
the same tensors
(tools/torch_crosscheck.py's compare: names in order, dtype, shape, stride, storage_offset,
storage, location, nbytes, xxh3, the same sharing of storages, and where the expected JSON has
"unused_storages", the same keys there). For those files `PTHINSPECT ls FILE` must also warn on
stderr, in one line naming them, exactly when storages are unused.

For files with storages tagged other than 'cpu' (the cuda fixtures: 'cuda:0' and 'cuda:3'), also:
  PTHINSPECT load FILE                                  exits non-zero with one line on stderr
                                                        naming map_location and a tag of the file
  PTHINSPECT load --map-location cpu FILE               exits 0
  PTHINSPECT load --map-location cuda:0=cpu,cuda:3=cpu FILE   exits 0 (every non-cpu tag of the
                                                        file mapped to cpu)

Legacy-format files (expected "format": "legacy") are checked like the others;
PTHLOAD_CHECK_LEGACY=0 in the environment skips them.
Prints one line per failing check, then `N passed, M failed` (files); exits 1 on any failure.
Uses only the committed JSON: the machine running it needs no torch.
"""

import glob
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import torch_crosscheck  # noqa: E402

# The legacy (pre-1.6 stream) files are checked by default; PTHLOAD_CHECK_LEGACY=0 skips them.
CHECK_LEGACY = os.environ.get("PTHLOAD_CHECK_LEGACY", "1") != "0"
SKIPPED_FORMATS = () if CHECK_LEGACY else ("legacy",)


def run(pthinspect, *args):
    return subprocess.run([pthinspect, *args], capture_output=True, timeout=300)


def check_map_location(pthinspect, path, tags):
    """Failure lines for the load / map_location checks of a file whose storages carry tags."""
    failures = []
    proc = run(pthinspect, "load", path)
    err = proc.stderr.decode(errors="replace").strip()
    if proc.returncode == 0:
        failures.append(f"`load` without a map location exited 0 (tags {', '.join(tags)})")
    else:
        if "\n" in err or not err:
            failures.append(f"`load` without a map location: want one line on stderr, got {err!r}")
        if "map_location" not in err:
            failures.append(f"`load` without a map location: message does not mention "
                            f"map_location: {err!r}")
        if not any(t in err for t in tags):
            failures.append(f"`load` without a map location: message names none of the tags "
                            f"{tags}: {err!r}")
    mapping = ",".join(f"{t}=cpu" for t in sorted(set(tags) | {"cuda:0", "cuda:3"}))
    for option in ("cpu", mapping):
        proc = run(pthinspect, "load", "--map-location", option, path)
        if proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip()
            failures.append(f"`load --map-location {option}` exited {proc.returncode}: {err!r}")
    proc = run(pthinspect, "load", "--copy", "--copy-threads", "3", "--map-location", mapping, path)
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()
        failures.append(f"`load --copy --copy-threads 3` exited {proc.returncode}: {err!r}")
    return failures


def check_unused_warning(pthinspect, path, unused):
    """`ls FILE` warns on stderr, in one line naming each key, exactly when storages are unused."""
    proc = run(pthinspect, "ls", path)
    err = proc.stderr.decode(errors="replace").strip()
    if proc.returncode != 0:
        return [f"`ls` exited {proc.returncode}: {err!r}"]
    if not unused:
        return [f"`ls` warned with no unused storage: {err!r}"] if err else []
    if "\n" in err or "used by no listed tensor" not in err or \
            not all(f"'{key}'" in err for key in unused[:8]):
        return [f"`ls` should warn in one line of the unused storages {unused}: {err!r}"]
    return []


def main(argv):
    if len(argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    pthinspect, fixtures = argv[1], argv[2]
    root = os.path.join(fixtures, "torch") if os.path.isdir(os.path.join(fixtures, "torch")) \
        else fixtures
    files = sorted(p for p in glob.glob(os.path.join(root, "**", "*.pt"), recursive=True)
                   if torch_crosscheck.expected_path(p))
    # Files written by Python's safetensors, with what safe_open read back from them
    # (tests/fixtures/make_safetensors_fixtures.py): <name>.safetensors.expected.json.
    files += sorted(p for p in glob.glob(os.path.join(root, "..", "safetensors", "**",
                                                      "*.safetensors"), recursive=True)
                    if torch_crosscheck.expected_path(p))
    if not files:
        print(f"no fixtures with expected JSON under {root}", file=sys.stderr)
        return 1
    passed = failed = skipped = 0
    for path in files:
        expected = torch_crosscheck.load_expected(path)
        if expected.get("format") in SKIPPED_FORMATS:
            skipped += 1
            continue
        actual, error = torch_crosscheck.run_pthinspect(pthinspect, path)
        failures = [error] if error else torch_crosscheck.compare(expected, actual)
        # Meta tensors (storage null, location "meta") have no storage to place.
        tags = sorted({t["location"] for t in expected["tensors"]
                       if t.get("location") not in (None, "cpu") and t.get("storage") is not None})
        if tags:
            failures += check_map_location(pthinspect, path, tags)
        if not error and "unused_storages" in expected:
            failures += check_unused_warning(pthinspect, path, expected["unused_storages"])
        if failures:
            failed += 1
            torch_crosscheck.report(os.path.relpath(path, root), failures, 20)
        else:
            passed += 1
    if skipped:
        print(f"skipped {skipped} files of formats {', '.join(SKIPPED_FORMATS)} "
              f"(unset PTHLOAD_CHECK_LEGACY to include them)")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
