#!/usr/bin/env python3
"""tools/bench_compare.py's summary of the issue's targets, on made-up measurements: every subset
of rows that --rows can leave (a view load without a copy load, a copy load alone, no pthload
row at all) gives the lines of what was measured, and the ratios in them are right."""
import importlib.util
import sys

spec = importlib.util.spec_from_file_location("bench_compare", sys.argv[1])
bench_compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_compare)

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)


def row(mode, ms, cpu_ms, rss_kib=20_000, name=None):
    return {"mode": mode, "name": name or mode, "ms": ms, "inproc_ms": ms, "cpu_ms": cpu_ms,
            "rss_kib": rss_kib, "gbps": None}


def summary(*rows):
    return bench_compare.summary({"rows": list(rows), "tensor_bytes": 1 << 20}, 5 * 1024)


torch = row("torch", 3000.0, 2900.0, name="torch.load")
torch_wo = row("torch-wo", 6000.0, 5900.0, name="torch.load weights_only")
view = row("view", 60.0, 100.0)
copy = row("copy", 100.0, 0.0)  # too short for the CPU accounting: no CPU ratio

lines = summary(torch, torch_wo, view)
speed = [line for line in lines if line.startswith("faster torch.load")]
check(len(speed) == 1, f"view without copy: one speed line, got {lines}")
check(speed and "= 50.0x" in speed[0] and "copy" not in speed[0], f"view ratio: {speed}")
check(speed and "29.0x (view)" in speed[0], f"view CPU ratio: {speed}")
check(any("view +15 MiB" in line for line in lines), f"view RSS above the tiny file: {lines}")

lines = summary(torch, copy)
speed = [line for line in lines if line.startswith("faster torch.load")]
check(speed and "copy load (whole process, 100.0 ms) = 30.0x" in speed[0], f"copy: {speed}")
check(speed and "- (copy)" in speed[0], f"no CPU ratio from 0 ms: {speed}")
check(any(line.startswith("copy load peak RSS") for line in lines), f"copy RSS line: {lines}")

lines = summary(torch, view, copy)
speed = [line for line in lines if line.startswith("faster torch.load")]
check(speed and "50.0x" in speed[0] and "30.0x" in speed[0], f"both loads: {speed}")

check(not any(line.startswith("faster") for line in summary(torch, torch_wo)),
      "no pthload load: no speed line")
check(not any(line.startswith("faster") for line in summary(view)), "no torch row: no speed line")

floor = row("read-index", 20.0, 19.0)
lines = summary(torch, torch_wo, view, floor)
floors = [line for line in lines if line.startswith("view load / index floor")]
check(floors and "20.0 ms) = 3.00x" in floors[0], f"view over the floor: {floors}")
check(floors and "the floor is 150x the faster torch.load" in floors[0], f"floor/torch: {floors}")
check(not any(line.startswith("view load / index floor") for line in summary(torch, floor)),
      "no view load: no floor line")
floors = [line for line in summary(view, floor) if line.startswith("view load / index floor")]
check(floors and "torch" not in floors[0], f"no torch row: the floor line alone: {floors}")

for failure in failures:
    print(f"FAIL: {failure}")
sys.exit(1 if failures else 0)
