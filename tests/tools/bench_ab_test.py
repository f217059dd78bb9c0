#!/usr/bin/env python3
"""tools/bench_ab.py: its sign test against exact binomial tails, and an A/A run of pthbench on a
fixture (pairs in alternating order, every run's figures and phases in the JSON, the summary's
counts consistent); a run that fails stops it with the failing command's output.

Usage: bench_ab_test.py BENCH_AB_PY PTHBENCH FIXTURES_DIR"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

script, pthbench, fixtures = sys.argv[1], sys.argv[2], sys.argv[3]
spec = importlib.util.spec_from_file_location("bench_ab", script)
bench_ab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_ab)

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)


# Exact two-sided tails: 2 * P(X <= k), X ~ Binomial(n, 1/2), at most 1.
check(bench_ab.sign_test_p(0, 0) == 1.0, "no decided pair: p = 1")
check(bench_ab.sign_test_p(10, 0) == 2 / 1024, f"10 of 10: {bench_ab.sign_test_p(10, 0)}")
check(bench_ab.sign_test_p(0, 10) == 2 / 1024, "0 of 10 is as uneven as 10 of 10")
check(bench_ab.sign_test_p(5, 5) == 1.0, "5 of 10: p capped at 1")
p_24_of_31 = bench_ab.sign_test_p(24, 7)
check(abs(p_24_of_31 - 0.00331) < 1e-4, f"24 of 31: {p_24_of_31}")
check(bench_ab.sign_test_p(33, 28) > 0.05, "33 of 61 is noise")
check(bench_ab.verdict({"sign_test_p": 0.5, "median_delta": -3.0}) ==
      "no difference these runs can show", "a large median with p = 0.5 is no difference")
check(bench_ab.verdict({"sign_test_p": 0.001, "median_delta": -3.0}) == "new faster", "faster")
check(bench_ab.verdict({"sign_test_p": 0.001, "median_delta": 2.0}) == "new slower", "slower")
check(bench_ab.verdict({"sign_test_p": 0.001, "median_delta": 2.0}, "lower", "higher") ==
      "new higher", "CPU time is higher, not slower")

fixture = os.path.join(fixtures, "sample.pt")
with tempfile.TemporaryDirectory() as scratch:
    out = os.path.join(scratch, "ab.json")
    result = subprocess.run([sys.executable, script, "--base", pthbench, "--new", pthbench,
                             "--new-env", "PTHLOAD_BENCH_AB_TEST=1", "--pairs", "4", "--phases",
                             "--json", out, fixture], capture_output=True, text=True)
    check(result.returncode == 0, f"A/A run failed: {result.stderr}")
    check("sample.pt, view, 4 pairs" in result.stdout, f"summary header: {result.stdout}")
    check("phase run the pickle" in result.stdout, f"phases printed: {result.stdout}")
    if result.returncode == 0:
        with open(out, encoding="utf-8") as f:
            report = json.load(f)
        entry = report["files"][fixture]
        runs = entry["runs"]
        check(len(runs) == 4, f"4 pairs, got {len(runs)}")
        # Alternating order: base first in even pairs, new first in odd ones.
        check([list(pair) for pair in runs] == [["base", "new"], ["new", "base"]] * 2,
              f"order: {[list(pair) for pair in runs]}")
        for pair in runs:
            for side in ("base", "new"):
                run = pair[side]
                check(run["ms"] > 0 and run["cpu_ms"] >= 0 and run["faults"] > 0,
                      f"figures: {run}")
                check(0 < run["peak_mib"] < 1024, f"peak RSS from pthbench's own line: {run}")
                check("run the pickle" in run["phases"], f"phases: {run['phases']}")
        for key in ("ms", "cpu_ms"):
            paired = entry["paired"][key]
            check(paired["pairs"] == 4 and 0 <= paired["new_lower"] <= 4, f"counts: {paired}")
            check(0 < paired["sign_test_p"] <= 1, f"p: {paired}")
        check(report["new_env"] == ["PTHLOAD_BENCH_AB_TEST=1"], "environment recorded")

    missing = subprocess.run([sys.executable, script, "--base", pthbench, "--pairs", "1",
                              os.path.join(scratch, "missing.pt")], capture_output=True,
                             text=True)
    check(missing.returncode != 0 and "missing.pt" in missing.stderr,
          f"a failing run stops it, saying which: {missing.returncode} {missing.stderr}")

for failure in failures:
    print(f"FAIL: {failure}")
if not failures:
    print("bench_ab: all checks passed")
sys.exit(1 if failures else 0)
