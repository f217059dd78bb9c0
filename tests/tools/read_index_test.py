#!/usr/bin/env python3
"""`pthbench once read-index`, the floor row of tools/bench_compare.py: it walks every zip
fixture to its pickle's STOP (protocols 1-5, torch 1.13 and 2.x), refuses what it cannot walk with
a line that says why (a legacy stream, a deflated data.pkl), and never dies of a signal on a
truncated or bit-flipped file, whose reads it must keep inside the bytes it read.

Usage: read_index_test.py PTHBENCH FIXTURES_DIR"""
import os
import random
import re
import subprocess
import sys
import tempfile
import zipfile

pthbench, fixtures = sys.argv[1], sys.argv[2]
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)


def read_index(path):
    return subprocess.run([pthbench, "once", "read-index", path], capture_output=True, text=True,
                          timeout=60)


def stored_pickle(path):
    with zipfile.ZipFile(path) as archive:
        pickles = [i for i in archive.infolist() if i.filename.endswith("/data.pkl")]
        return bool(pickles) and pickles[0].compress_type == zipfile.ZIP_STORED


zips, others = [], []
for folder, _, names in os.walk(fixtures):
    for name in sorted(names):
        if name.endswith((".pt", ".zip")):
            path = os.path.join(folder, name)
            (zips if zipfile.is_zipfile(path) and stored_pickle(path) else others).append(path)
check(len(zips) > 50, f"only {len(zips)} zip fixtures found under {fixtures}")

for path in zips:
    run = read_index(path)
    check(run.returncode == 0, f"{path}: exit {run.returncode}: {run.stderr.strip()}")
    match = re.search(r": ([0-9]+) bytes, ", run.stdout)
    check(match and int(match.group(1)) > 0, f"{path}: no bytes read: {run.stdout!r}")

for path in others:
    run = read_index(path)
    check(run.returncode == 1 and "read-index: " in run.stderr,
          f"{path}: exit {run.returncode}, expected a refusal: {run.stderr.strip()}")

# Damaged copies of a few fixtures: any exit but a signal.
rng = random.Random(15)
with tempfile.TemporaryDirectory() as scratch:
    damaged = os.path.join(scratch, "damaged.pt")
    for path in zips[:: max(1, len(zips) // 8)]:
        data = open(path, "rb").read()
        variants = [data[:cut] for cut in (len(data) // 2, len(data) - 1, len(data) - 30)]
        # Anywhere, and in the last quarter, where the central directory and end records lie.
        for first in [0] * 20 + [len(data) * 3 // 4] * 20:
            flipped = bytearray(data)
            for _ in range(4):
                flipped[rng.randrange(first, len(flipped))] ^= 1 << rng.randrange(8)
            variants.append(bytes(flipped))
        for variant in variants:
            with open(damaged, "wb") as f:
                f.write(variant)
            run = read_index(damaged)
            check(run.returncode in (0, 1), f"{path} damaged: exit {run.returncode} "
                                            f"{run.stderr.strip()[-200:]}")

for failure in failures:
    print(f"FAIL: {failure}")
print(f"{len(zips)} zip fixtures walked, {len(others)} refused")
sys.exit(1 if failures else 0)
