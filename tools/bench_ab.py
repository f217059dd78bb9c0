#!/usr/bin/env python3
"""Is a change faster? Paired whole-process runs of two pthbench builds (or of one build under
two environments), the way the performance notes measure: on this project's 2-core virtual
machines a single run of the 100 000-tensor load varies by +-10 ms, more than most changes
save, so medians of separate runs mislead and only pairs tell.

Each pair runs `pthbench once MODE FILE` once with each side, in a fresh process, the order
alternating from pair to pair (a side that always ran second would inherit a warmer machine).
For each side it prints the medians of wall time (spawn to wait4), CPU time and minor page faults
(wait4's rusage) and peak RSS; then the median of the paired differences new - base, how many
pairs the new side won, and the two-sided sign test's p-value for that count: p >= 0.05 means no
difference the runs can show, however the medians look. `--phases` adds PTHBENCH_PHASES's
per-phase medians (where a process spends its time; the phases of one process do not add up to
its wall time, which is the figure a user sees).

Back to back, each process reuses the memory the one before it freed. `--pause S` sleeps S seconds
before every run, so that each meets memory as a process started once meets it: on a virtual
machine whose balloon reports free memory to its host (this project's), a free 2 MiB block is
handed back within a second, and the next process to take it as a huge page pays the host's
faults (see lib/common/fresh_memory.hpp). Measure a change to how memory is got both ways.

Usage:
  bench_ab.py --base OLD/pthbench --new NEW/pthbench [--mode view] [--pairs 31] FILE...
  bench_ab.py --base build/tools/pthbench/pthbench --new-env PTHLOAD_X=1 FILE...  (one build)
  bench_ab.py --base OLD --new NEW --pause 3 FILE...  (each run after 3 s idle: a one-shot run)
  --json OUT writes every run and the summaries.
"""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

PHASE_LINE = re.compile(r"phase (.*?)\s+([\d.]+) ms\s+cpu\s+([\d.]+) ms.*?([+-][\d.]+) MiB")
# pthbench's own last line: its peak RSS (VmHWM). wait4's ru_maxrss would carry the spawning
# Python's peak across exec.
PEAK = re.compile(r", [\d.]+ ms, peak (\d+) KiB")


def run_once(binary, mode, path, env):
    """One whole process: wall ms, CPU ms and minor faults (all threads), peak RSS MiB, and its
    phases."""
    start = time.perf_counter()
    process = subprocess.Popen([binary, "once", mode, path], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = (time.perf_counter() - start) * 1e3
    process.stdout.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{binary} once {mode} {path} failed:\n{output}")
    peak = PEAK.search(output)
    if not peak:
        raise SystemExit(f"{binary} once {mode} {path} printed no peak RSS:\n{output}")
    phases = {}
    for line in output.splitlines():
        match = PHASE_LINE.match(line)
        if match:
            phases[match.group(1)] = {"ms": float(match.group(2)), "cpu_ms": float(match.group(3)),
                                      "mib": float(match.group(4))}
    return {"ms": wall, "cpu_ms": (usage.ru_utime + usage.ru_stime) * 1e3,
            "faults": usage.ru_minflt, "peak_mib": int(peak.group(1)) / 1024, "phases": phases}


def sign_test_p(wins, losses):
    """Two-sided exact sign test: how likely a split at least this uneven is by chance."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def summarize(runs):
    """Per side medians, and the paired differences new - base."""
    sides = {}
    for side in ("base", "new"):
        rows = [pair[side] for pair in runs]
        sides[side] = {key: statistics.median(row[key] for row in rows)
                       for key in ("ms", "cpu_ms", "faults", "peak_mib")}
    paired = {}
    for key in ("ms", "cpu_ms"):
        deltas = [pair["new"][key] - pair["base"][key] for pair in runs]
        wins = sum(delta < 0 for delta in deltas)
        losses = sum(delta > 0 for delta in deltas)
        paired[key] = {"median_delta": statistics.median(deltas), "new_lower": wins,
                       "pairs": len(deltas), "sign_test_p": sign_test_p(wins, losses)}
    phases = {}
    names = list(runs[0]["base"]["phases"]) if runs else []
    for name in names:
        entry = {}
        for side in ("base", "new"):
            values = [pair[side]["phases"][name] for pair in runs
                      if name in pair[side]["phases"]]
            entry[side] = {key: statistics.median(value[key] for value in values)
                           for key in ("ms", "cpu_ms", "mib")} if values else None
        phases[name] = entry
    return {"sides": sides, "paired": paired, "phases": phases}


def verdict(paired, lower="faster", higher="slower"):
    """What the pairs show, in words: a difference only where the sign test finds one."""
    if paired["sign_test_p"] >= 0.05:
        return "no difference these runs can show"
    return f"new {lower}" if paired["median_delta"] < 0 else f"new {higher}"


def print_summary(path, mode, summary, phases_wanted):
    print(f"{os.path.basename(path)}, {mode}, {summary['paired']['ms']['pairs']} pairs")
    print(f"  {'':6} {'wall ms':>9} {'cpu ms':>9} {'faults':>8} {'peak MiB':>9}")
    for side in ("base", "new"):
        s = summary["sides"][side]
        print(f"  {side:6} {s['ms']:9.2f} {s['cpu_ms']:9.2f} {s['faults']:8.0f} "
              f"{s['peak_mib']:9.1f}")
    for key, what, words in (("ms", "wall", ("faster", "slower")),
                             ("cpu_ms", "cpu", ("lower", "higher"))):
        p = summary["paired"][key]
        print(f"  paired {what}: {p['median_delta']:+.2f} ms, new lower in {p['new_lower']}/"
              f"{p['pairs']}, sign test p = {p['sign_test_p']:.3f}: {verdict(p, *words)}")
    if phases_wanted:
        for name, entry in summary["phases"].items():
            base, new = entry["base"], entry["new"]
            if base is None or new is None:
                print(f"  phase {name}: not in every run")
                continue
            print(f"  phase {name:<24} wall {base['ms']:7.2f} -> {new['ms']:7.2f}   cpu "
                  f"{base['cpu_ms']:7.2f} -> {new['cpu_ms']:7.2f}   MiB {base['mib']:+6.1f} -> "
                  f"{new['mib']:+6.1f}")


def parse_env(assignments):
    env = dict(os.environ)
    for assignment in assignments:
        name, equals, value = assignment.partition("=")
        if not equals or not name:
            raise SystemExit(f"--new-env/--base-env take NAME=VALUE, not {assignment!r}")
        env[name] = value
    return env


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="the reference pthbench")
    parser.add_argument("--new", help="the changed pthbench (default: --base)")
    parser.add_argument("--base-env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--new-env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--mode", default="view",
                        help="pthbench once's mode: open, view, copy, checksum, ...")
    parser.add_argument("--pairs", type=int, default=31)
    parser.add_argument("--phases", action="store_true", help="per-phase medians too")
    parser.add_argument("--pause", type=float, default=0.0, metavar="SECONDS",
                        help="sleep this long before every run (memory as a one-shot run meets it)")
    parser.add_argument("--json", help="write every run and the summaries here")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    if args.pause < 0:
        parser.error("--pause must not be negative")
    new_binary = args.new or args.base
    if new_binary == args.base and args.new_env == args.base_env:
        print("base and new are the same build in the same environment: an A/A run, which "
              "shows the noise floor", file=sys.stderr)
    sides = {"base": (args.base, parse_env(args.base_env)),
             "new": (new_binary, parse_env(args.new_env))}
    if args.phases:
        for _, env in sides.values():
            env["PTHBENCH_PHASES"] = "1"
    report = {"mode": args.mode, "base": args.base, "new": new_binary,
              "base_env": args.base_env, "new_env": args.new_env, "pause_s": args.pause,
              "files": {}}

    def run_side(side, path):
        if args.pause > 0:
            time.sleep(args.pause)
        return run_once(sides[side][0], args.mode, path, sides[side][1])

    for path in args.files:
        runs = []
        for pair in range(args.pairs):
            order = ("base", "new") if pair % 2 == 0 else ("new", "base")
            runs.append({side: run_side(side, path) for side in order})
        summary = summarize(runs)
        print_summary(path, args.mode, summary, args.phases)
        report["files"][path] = {"runs": runs, **summary}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(report, out, indent=1)


if __name__ == "__main__":
    main()
