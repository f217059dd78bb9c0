#!/usr/bin/python3
"""Compares pthload's pickle machine with CPython's C unpickler on a large torch data.pkl.

    /usr/bin/python3 tools/bench_pickle.py [--pthbench build/tools/pthbench/pthbench] [--n 100000]

Writes, with Debian's torch 1.13, the optimizer-like checkpoint
{'state': {i: {'step': t, 'exp_avg': t}} for i in range(N)}, a small tensor t per i (N tensor
rebuilds) to /tmp, extracts its
data.pkl, times pickle.Unpickler (find_class returns a stub, persistent_load returns the id: no
tensor is built) on the same bytes, runs `pthbench pickle data.pkl`, and prints both medians and
the ratio. Nothing is written into the repository.
"""

import argparse
import io
import os
import pickle
import re
import statistics
import subprocess
import sys
import time
import zipfile


def make_data_pkl(n, path):
    import torch

    state = {}
    for i in range(n):
        t = torch.zeros(2)
        state[i] = {"step": t, "exp_avg": t}
    buffer = io.BytesIO()
    torch.save({"state": state}, buffer)
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as archive:
        data = archive.read("archive/data.pkl")
    with open(path, "wb") as f:
        f.write(data)
    return data


class StubUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        return Stub

    def persistent_load(self, pid):
        return pid


class Stub:
    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return Stub()

    def __setstate__(self, state):
        pass


def time_python(data, repetitions):
    times = []
    for _ in range(repetitions):
        start = time.perf_counter()
        StubUnpickler(io.BytesIO(data)).load()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pthbench", default="build/tools/pthbench/pthbench")
    parser.add_argument("--n", type=int, default=100000)
    parser.add_argument("--repetitions", type=int, default=15)
    parser.add_argument("--pkl", default="/tmp/pthload_bench_data.pkl")
    args = parser.parse_args()

    data = make_data_pkl(args.n, args.pkl)
    print("data.pkl: %s, %.2f MB" % (args.pkl, len(data) / 1e6))

    python_ms = time_python(data, args.repetitions)
    print("python C unpickler: median %.2f ms" % python_ms)

    out = subprocess.run([args.pthbench, "-n", str(args.repetitions * 2), "pickle", args.pkl],
                         check=True, capture_output=True, text=True).stdout
    sys.stdout.write(out)
    pthload_ms = float(re.search(r"median ([0-9.]+) ms", out).group(1))
    print("pthload Machine::run: median %.2f ms" % pthload_ms)
    print("ratio: pthload is %.1fx faster than CPython's unpickler (target: < 30 ms)"
          % (python_ms / pthload_ms))


if __name__ == "__main__":
    main()
