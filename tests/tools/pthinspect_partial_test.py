#!/usr/bin/env python3
"""pthinspect ls/load with --only, --exclude, --select and --rename-prefix on the partial
fixtures (tests/fixtures/make_partial_fixtures.py): the tensors listed, their checksums against
the whole file's, a sharded folder missing the shards nothing chosen is in, and usage errors."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

PTHINSPECT, FIXTURES = sys.argv[1], os.path.join(sys.argv[2], "partial")
failures = []
checks = 0


def run(*args):
    return subprocess.run([PTHINSPECT, *args], capture_output=True, timeout=120, text=True)


def check(condition, what):
    global checks
    checks += 1
    if not condition:
        failures.append(what)


def listing(*args):
    result = run("ls", "--json", "--checksum", *args)
    check(result.returncode == 0, f"ls {args}: exit {result.returncode}: {result.stderr}")
    if result.returncode != 0:
        return {}
    return {t["name"]: t["xxh3"] for t in json.loads(result.stdout)["tensors"]}


model = os.path.join(FIXTURES, "model.pt")
whole = listing(model)
check(len(whole) == 7, f"model.pt lists {len(whole)} tensors")
part = listing("--only", "layers.*", "--only", "embed.weight", "--exclude", "*.bias", model)
check(sorted(part) == ["embed.weight", "layers.0.upper", "layers.0.weight", "layers.1.scale",
                       "layers.1.weight"], f"--only/--exclude listed {sorted(part)}")
check(all(whole[n] == h for n, h in part.items()), "partial checksums differ from the whole's")

result = run("load", "--only", "head.weight", model)
check(result.returncode == 0 and "loaded 1 tensors in 1 storages" in result.stdout,
      f"load --only head.weight: {result.stdout} {result.stderr}")

ckpt = os.path.join(FIXTURES, "lightning.ckpt")
renamed = listing("--select", "state_dict", "--rename-prefix", "module.=", ckpt)
check(sorted(renamed) == ["decoder.weight", "encoder.bias", "encoder.weight"],
      f"--select/--rename-prefix listed {sorted(renamed)}")
with open(os.path.join(FIXTURES, "MANIFEST.txt")) as f:
    for line in f:
        kind, *fields = line.rstrip("\n").split("\t")
        if kind == "tensor":
            check(renamed.get(fields[1]) == fields[2], f"{fields[1]}: checksum")
result = run("load", "--select", "state_dict", "--rename-prefix", "module.=x.", ckpt)
check(result.returncode == 0 and "loaded 3 tensors in 3 storages" in result.stdout,
      f"load --select: {result.stdout} {result.stderr}")
result = run("ls", "--select", "nothing", ckpt)
check(result.returncode == 1 and "select 'nothing'" in result.stderr,
      f"--select nothing: exit {result.returncode}: {result.stderr}")
result = run("ls", "--rename-prefix", "module.", ckpt)
check(result.returncode == 2 and "FROM=TO" in result.stderr,
      f"--rename-prefix without '=': exit {result.returncode}: {result.stderr}")

with tempfile.TemporaryDirectory() as folder:
    shards = os.path.join(folder, "model")
    shutil.copytree(os.path.join(FIXTURES, "sharded"), shards)
    os.remove(os.path.join(shards, "model-00001-of-00003.safetensors"))
    part = listing("--only", "layers.1.*", shards)
    check(sorted(part) == ["layers.1.scale", "layers.1.weight"],
          f"sharded --only listed {sorted(part)}")
    check(all(whole[n] == h for n, h in part.items()), "sharded checksums differ")
    result = run("ls", shards)
    check(result.returncode == 1 and "model-00001-of-00003.safetensors" in result.stderr,
          f"sharded without a shard: exit {result.returncode}: {result.stderr}")

# load --slice: every slice of the manifest, as written and with negative or empty bounds, gives
# torch's narrow() checksum, under both I/O strategies.
slices = []
with open(os.path.join(FIXTURES, "MANIFEST.txt")) as f:
    for line in f:
        kind, *fields = line.rstrip("\n").split("\t")
        if kind == "slice":
            slices.append(fields)
sizes = {}
for name, dims in [("embed.weight", (16, 1024)), ("layers.1.weight", (4, 4096)),
                   ("layers.0.bias", (2048,)), ("layers.0.weight", (8, 2048))]:
    sizes[name] = dims
check(len(slices) == 16, f"{len(slices)} slices in the manifest")
for file, name, dim, begin, end, xxh3 in slices:
    extent = sizes[name][int(dim)]
    spellings = {f"{begin}:{end}", f"{int(begin) - extent}:{int(end) - extent if int(end) < extent else ''}"}
    if begin == "0":
        spellings.add(f":{end}")
    for io in ("map", "read"):
        for spelling in spellings:
            spec = f"{name}:{dim}:{spelling}"
            result = run("load", "--io", io, "--slice", spec, os.path.join(FIXTURES, file))
            check(result.returncode == 0 and f"xxh3 {xxh3}" in result.stdout,
                  f"load --slice {spec} {file} --io {io}: {result.stdout} {result.stderr}")
result = run("load", "--slice", "embed.weight:0:1", model)
check(result.returncode == 2 and "NAME:DIM:BEGIN:END" in result.stderr,
      f"--slice without END: exit {result.returncode}: {result.stderr}")
result = run("load", "--slice", "embed.weight:0:-17:", model)
check(result.returncode == 1 and "outside" in result.stderr,
      f"--slice past the start: exit {result.returncode}: {result.stderr}")

# --map-location auto puts a slice where it puts a whole load: the first GPU, else the CPU (it
# always sliced onto the CPU).
whole = run("load", "--map-location", "auto", model)
auto_devices = {line.split()[0] for line in whole.stdout.splitlines()[1:]
                if "storages" in line and "views" not in line}
result = run("load", "--map-location", "auto", "--slice", "embed.weight:0:0:2", model)
check(result.returncode == 0 and len(auto_devices) == 1
      and f" on {auto_devices.pop()}," in result.stdout,
      f"--slice with auto: {whole.stdout} {result.stdout} {result.stderr}")

print(f"{checks} checks, {len(failures)} failures")
for failure in failures:
    print("FAIL:", failure)
sys.exit(1 if failures else 0)
