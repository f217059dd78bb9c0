#!/usr/bin/env python3
"""Compares what torch.load sees in checkpoints with what pthinspect sees.

    torch_crosscheck.py --pthinspect PATH [--expected-only] FILE...

For each FILE, torch's view is tools/torch_dump.py's JSON: computed in-process when torch can be
imported (and --expected-only is not given), else read from the committed
`<FILE without .pt>.expected.json` (or `.expected.json.gz`) next to it. pthinspect's view is the
output of `PATH ls --json --checksum FILE` (the schema in DESIGN.md). The two must list the same
tensor names in the same order, and for each tensor the same dtype, shape, stride,
storage_offset, storage key, location, nbytes and xxh3; the tensors must also fall into the same
groups by storage (checked separately from the keys, so the report says which it is).
Fields pthinspect prints beyond the schema are ignored.

Prints one readable line per difference (at most --max-diffs per file), then `N passed, M failed`
(counting files), and exits 1 if any file failed (2 for a usage error).

The comparison is `compare(torch_view, pthinspect_view)`, which returns a list of difference
lines; tests/tools/fixtures_crosscheck_test.py imports it with `load_expected` and `run_pthinspect`.
"""

import argparse
import gzip
import json
import os
import subprocess
import sys

FIELDS = ("dtype", "shape", "stride", "storage_offset", "storage", "location", "nbytes", "xxh3",
          "source", "subclass")


def expected_path(pt_path):
    """The committed expected JSON of a checkpoint, or None."""
    stem = pt_path[:-3] if pt_path.endswith(".pt") else pt_path
    for candidate in (stem + ".expected.json", stem + ".expected.json.gz"):
        if os.path.exists(candidate):
            return candidate
    return None


def load_expected(pt_path):
    path = expected_path(pt_path)
    if path is None:
        raise FileNotFoundError(f"{pt_path}: no .expected.json next to it")
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def torch_view(pt_path, expected_only=False):
    """torch_dump's JSON for the file: live when torch is importable, else the committed one."""
    if not expected_only:
        here = os.path.dirname(os.path.abspath(__file__))
        if here not in sys.path:
            sys.path.insert(0, here)
        try:
            import torch_dump  # noqa: F401  (imports torch)
        except ImportError:
            pass
        else:
            return torch_dump.dump(pt_path)
    return load_expected(pt_path)


def run_pthinspect(pthinspect, pt_path, timeout=300, options=()):
    """(view, error): pthinspect's parsed JSON, or None and a one-line reason. `options` go to
    `pthinspect ls` before the path (--only, --select, ...)."""
    try:
        proc = subprocess.run([pthinspect, "ls", "--json", "--checksum", *options, pt_path],
                              capture_output=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"could not run pthinspect: {e}"
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        return None, f"pthinspect ls exited {proc.returncode}: {err[0] if err else '(no message)'}"
    try:
        return json.loads(proc.stdout), None
    except ValueError as e:
        return None, f"pthinspect ls printed invalid JSON: {e}"


def _fmt(value):
    return json.dumps(value)


def _groups(tensors):
    """The partition of tensor positions by storage key (tensors without a key are left out)."""
    by_key = {}
    for i, t in enumerate(tensors):
        if t.get("storage") is not None:
            by_key.setdefault(t["storage"], []).append(i)
    return by_key


def compare(expected, actual):
    """Difference lines between torch's view (expected) and pthinspect's (actual); [] if equal."""
    diffs = []
    if not isinstance(actual, dict) or not isinstance(actual.get("tensors"), list):
        return ["pthinspect's JSON has no \"tensors\" list"]
    if expected.get("format") != actual.get("format"):
        diffs.append(f"format: torch {_fmt(expected.get('format'))}, "
                     f"pthinspect {_fmt(actual.get('format'))}")
    if "unused_storages" in expected:
        # torch_dump gives keys; pthinspect gives {key, record, nbytes} objects.
        got = sorted(str(s.get("key")) for s in actual.get("unused_storages", []))
        if got != sorted(expected["unused_storages"]):
            diffs.append(f"unused storages: torch {expected['unused_storages']}, pthinspect {got}")
    exp, act = expected["tensors"], actual["tensors"]
    exp_names = [t["name"] for t in exp]
    act_names = [t.get("name") for t in act]
    if exp_names != act_names:
        diffs.append(f"tensor names: torch lists {len(exp_names)}, pthinspect {len(act_names)}")
        for i, (e, a) in enumerate(zip(exp_names, act_names)):
            if e != a:
                diffs.append(f"  first difference at #{i}: torch {_fmt(e)}, pthinspect {_fmt(a)}")
                break
        missing = [n for n in exp_names if n not in set(act_names)]
        extra = [n for n in act_names if n not in set(exp_names)]
        if missing:
            diffs.append(f"  only torch has: {', '.join(map(_fmt, missing[:10]))}"
                         + (f" (+{len(missing) - 10} more)" if len(missing) > 10 else ""))
        if extra:
            diffs.append(f"  only pthinspect has: {', '.join(map(_fmt, extra[:10]))}"
                         + (f" (+{len(extra) - 10} more)" if len(extra) > 10 else ""))
    # Field by field for tensors matched by (name, occurrence): robust when the lists shift.
    act_by_name = {}
    for i, t in enumerate(act):
        act_by_name.setdefault(t.get("name"), []).append(i)
    seen = {}
    pairs = []
    for i, e in enumerate(exp):
        n = seen.get(e["name"], 0)
        seen[e["name"]] = n + 1
        candidates = act_by_name.get(e["name"], [])
        if n < len(candidates):
            pairs.append((i, candidates[n]))
    for i, j in pairs:
        e, a = exp[i], act[j]
        for field in FIELDS:
            if field not in e:
                continue  # e.g. sparse entries: name, dtype, shape only
            if field not in a:
                diffs.append(f"tensor {_fmt(e['name'])} (#{i}): {field}: torch {_fmt(e[field])}, "
                             f"pthinspect has no {field}")
            elif e[field] != a[field]:
                diffs.append(f"tensor {_fmt(e['name'])} (#{i}): {field}: torch {_fmt(e[field])}, "
                             f"pthinspect {_fmt(a[field])}")
    # The same partition into storages (meaningful when the names line up).
    if exp_names == act_names:
        exp_groups = {tuple(v) for v in _groups(exp).values()}
        act_groups = {tuple(v) for v in _groups(act).values()}
        if exp_groups != act_groups:
            for group in sorted(exp_groups - act_groups):
                names = ", ".join(_fmt(exp_names[k]) for k in group[:6])
                diffs.append(f"storage sharing: torch has one storage for {{{names}"
                             + (", ..." if len(group) > 6 else "") + "}, pthinspect does not")
            for group in sorted(act_groups - exp_groups):
                names = ", ".join(_fmt(act_names[k]) for k in group[:6])
                diffs.append(f"storage sharing: pthinspect has one storage for {{{names}"
                             + (", ..." if len(group) > 6 else "") + "}, torch does not")
    return diffs


def check_file(pthinspect, pt_path, expected_only=False):
    """Difference lines for one file (an unreadable side counts as a difference)."""
    try:
        expected = torch_view(pt_path, expected_only)
    except Exception as e:
        return [f"torch's view unavailable: {type(e).__name__}: {e}"]
    actual, error = run_pthinspect(pthinspect, pt_path)
    if error:
        return [error]
    return compare(expected, actual)


def report(pt_path, diffs, max_diffs, out=sys.stdout):
    if not diffs:
        return
    print(f"FAIL {pt_path}", file=out)
    for line in diffs[:max_diffs]:
        print(f"  {line}", file=out)
    if len(diffs) > max_diffs:
        print(f"  ... and {len(diffs) - max_diffs} more differences", file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pthinspect", required=True, help="the pthinspect executable")
    parser.add_argument("--expected-only", action="store_true",
                        help="use the committed .expected.json even when torch is importable")
    parser.add_argument("--max-diffs", type=int, default=20, help="differences shown per file")
    parser.add_argument("files", nargs="+", metavar="FILE")
    args = parser.parse_args(argv)
    passed = failed = 0
    for path in args.files:
        diffs = check_file(args.pthinspect, path, args.expected_only)
        report(path, diffs, args.max_diffs)
        if diffs:
            failed += 1
        else:
            passed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
