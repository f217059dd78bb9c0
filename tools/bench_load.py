#!/usr/bin/env python3
"""Loading benchmarks for pthload against torch.load, in one run (issue: tensors from zip
checkpoints). Makes two checkpoints with torch (not committed), then times, on the same files:

  * pthload open + list of a ~1 GB, 300-tensor state dict   (pthbench load: `open` line)
  * pthload copy-mode load of it vs reading the file once  (pthbench load: `copy` vs `read`)
  * pthload load of 100 000 small tensors vs torch.load    (pthbench load vs torch.load here)

Usage: bench_load.py --pthbench build/tools/pthbench/pthbench [--python /opt/torch2/bin/python]
The torch side runs under --python (a venv with torch); this script itself needs no torch.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

MAKE = r"""
import sys, torch
big, many = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
n = (1 << 30) // 300 // 4
torch.save({f"layer{i}.weight": torch.randn(n) for i in range(300)}, big)
torch.save({f"p{i}": torch.full((4,), float(i)) for i in range(100_000)}, many)
"""

TIME_TORCH = r"""
import json, statistics, sys, time, torch
path, runs = sys.argv[1], int(sys.argv[2])
times = []
for _ in range(runs + 1):
    t = time.perf_counter()
    torch.load(path, map_location="cpu", weights_only=False)
    times.append((time.perf_counter() - t) * 1e3)
print(json.dumps({"torch_version": torch.__version__, "median_ms": statistics.median(times[1:])}))
"""


FIRST_TORCH = r"""
import sys, time, torch
t = time.perf_counter()
torch.load(sys.argv[1], map_location="cpu", weights_only=False)
print((time.perf_counter() - t) * 1e3)
"""


def first_loads(pthinspect, python, path, runs):
    """Median of `runs` first loads, each in a fresh process: what a program that loads one
    checkpoint at start-up pays (no allocator has memory to reuse yet)."""
    ours, theirs = [], []
    for _ in range(runs):
        out = subprocess.run([pthinspect, "load", "--copy", "--map-location", "cpu", path],
                             check=True, capture_output=True, text=True).stdout
        ours.append(float(out.split(" in ")[-1].split(" ms")[0].split()[-1]))
        theirs.append(float(subprocess.run([python, "-c", FIRST_TORCH, path], check=True,
                                           capture_output=True, text=True).stdout))
    return sorted(ours)[len(ours) // 2], sorted(theirs)[len(theirs) // 2]


def pthbench(binary, path, runs):
    out = subprocess.run([binary, "-n", str(runs), "load", path], check=True,
                         capture_output=True, text=True).stdout
    # "NAME FILE: ... median X ms ...", NAME possibly several words ("read 1 MiB chunks").
    return {line.split(f" {path}:")[0]: float(line.split("median")[1].split()[0])
            for line in out.splitlines() if "median" in line}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pthbench", required=True)
    parser.add_argument("--pthinspect", help="for first loads in fresh processes (default: "
                        "beside pthbench in the same build)")
    parser.add_argument("--python", default="/opt/torch2/bin/python")
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    big = os.path.join(args.dir, "pthload_bench_1g.pt")
    many = os.path.join(args.dir, "pthload_bench_100k.pt")
    if not (os.path.exists(big) and os.path.exists(many)):
        subprocess.run([args.python, "-c", MAKE, big, many], check=True)

    big_p = pthbench(args.pthbench, big, args.runs)
    many_p = pthbench(args.pthbench, many, args.runs)
    torch_big = json.loads(subprocess.run([args.python, "-c", TIME_TORCH, big, str(args.runs)],
                                          check=True, capture_output=True, text=True).stdout)
    torch_many = json.loads(subprocess.run([args.python, "-c", TIME_TORCH, many, str(args.runs)],
                                           check=True, capture_output=True, text=True).stdout)

    pthinspect = args.pthinspect or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(args.pthbench))), "pthinspect", "pthinspect")
    first_big = first_loads(pthinspect, args.python, big, args.runs)
    first_many = first_loads(pthinspect, args.python, many, args.runs)

    size_gb = os.path.getsize(big) / 1e9
    print(f"torch {torch_big['torch_version']}; medians of {args.runs} runs after a warm-up")
    print(f"{size_gb:.2f} GB, 300 tensors:")
    print(f"  pthload open+list        {big_p['open']:9.3f} ms")
    read = big_p["read 1 MiB chunks"]
    print(f"  read the file once       {read:9.3f} ms  (reference: 1 MiB chunks, reused buffer)")
    print(f"  read into a fresh buffer {big_p['read fresh buffer']:9.3f} ms")
    print(f"  pthload load (copy)      {big_p['copy']:9.3f} ms  = {big_p['copy'] / read:.2f}x reading")
    print(f"  pthload load (view)      {big_p['view']:9.3f} ms")
    print(f"  torch.load               {torch_big['median_ms']:9.3f} ms  = "
          f"{torch_big['median_ms'] / big_p['copy']:.1f}x pthload copy")
    print(f"  first load, fresh process: pthload copy {first_big[0]:.1f} ms, torch.load "
          f"{first_big[1]:.1f} ms = {first_big[1] / first_big[0]:.1f}x")
    print("100 000 small tensors:")
    print(f"  pthload load (view)      {many_p['view']:9.3f} ms")
    print(f"  pthload load (copy)      {many_p['copy']:9.3f} ms")
    print(f"  torch.load               {torch_many['median_ms']:9.3f} ms  = "
          f"{torch_many['median_ms'] / many_p['copy']:.1f}x pthload copy, "
          f"{torch_many['median_ms'] / many_p['view']:.1f}x pthload view")
    print(f"  first load, fresh process: pthload copy {first_many[0]:.1f} ms, torch.load "
          f"{first_many[1]:.1f} ms = {first_many[1] / first_many[0]:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
