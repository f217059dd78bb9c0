#!/usr/bin/env python3
"""pthinspect's scan, stat, diff, export and verify, end to end: the binary on fixtures and on
checkpoints written by hand (tests/tools/ckpt.py) with known values in every dtype; output and
exit status checked. No torch, no numpy: exported bytes are wrapped back into a checkpoint and
hashed by `ls --json --checksum`, against the original's hashes."""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt  # noqa: E402

PTHINSPECT, FIXTURES = sys.argv[1], sys.argv[2]
TORCH_FIXTURES = os.path.join(FIXTURES, "torch", "torch-2.15.0")
failures = []
checks = 0


def run(*args, env=None):
    return subprocess.run([PTHINSPECT, *args], capture_output=True, timeout=120, env=env)


def check(condition, what):
    global checks
    checks += 1
    if not condition:
        failures.append(what)


def f32(*values):
    return struct.pack(f"<{len(values)}f", *values)


def bf16(*values):
    return b"".join(struct.pack("<f", v)[2:] for v in values)


NAN, INF = float("nan"), float("inf")
STORAGES = {
    "0": ("float32", f32(1.0, -2.0, 0.0, NAN, INF, -INF, 3.0, 4.0)),
    "1": ("float16", struct.pack("<4e", 0.5, -1.5, 0.0, 65504.0)),
    "2": ("bfloat16", bf16(1.0, -3.0, 0.0, 2.5)),
    "3": ("float8_e4m3fn", bytes([0x38, 0xC0, 0x7F, 0x00])),  # 1, -2, NaN, 0
    "4": ("float8_e5m2", bytes([0x3C, 0x7C, 0xFC, 0x40])),    # 1, +Inf, -Inf, 2
    "5": ("complex64", f32(3.0, 4.0, 0.0, 0.0)),                # |3+4j| = 5, 0
    "6": ("int64", struct.pack("<3q", -5, 7, 0)),
    "7": ("float32", f32(1, 2, 3, 4, 5, 6)),                    # viewed transposed
    "8": ("bool", bytes([1, 0, 1])),
    "9": ("float8_e4m3fnuz", bytes([0x40, 0x80, 0x00, 0xC0])),  # 1, NaN, 0, -1
}
TENSORS = [
    ("f32", "0", 0, [8], [1]),
    ("tied", "0", 0, [8], [1]),
    ("f16", "1", 0, [4], [1]),
    ("bf16", "2", 0, [2, 2], [2, 1]),
    ("e4m3", "3", 0, [4], [1]),
    ("e5m2", "4", 0, [4], [1]),
    ("c64", "5", 0, [2], [1]),
    ("i64", "6", 0, [3], [1]),
    ("view", "7", 0, [3, 2], [1, 3]),
    ("tail", "7", 2, [2], [2]),
    ("flags", "8", 0, [3], [1]),
    ("e4m3fnuz", "9", 0, [4], [1]),
]
EXPECTED_STATS = {  # name: (min, max, mean, nan, +inf, -inf, zeros)
    "f32": (-2.0, 4.0, 1.2, 1, 1, 1, 1),
    "f16": (-1.5, 65504.0, (0.5 - 1.5 + 65504) / 4, 0, 0, 0, 1),
    "bf16": (-3.0, 2.5, 0.125, 0, 0, 0, 1),
    "e4m3": (-2.0, 1.0, -1 / 3, 1, 0, 0, 1),
    "e5m2": (1.0, 2.0, 1.5, 0, 1, 1, 0),
    "c64": (0.0, 5.0, 2.5, 0, 0, 0, 1),
    "i64": (-5.0, 7.0, 2 / 3, 0, 0, 0, 1),
    "view": (1.0, 6.0, 3.5, 0, 0, 0, 0),
    "tail": (3.0, 5.0, 4.0, 0, 0, 0, 0),
    "flags": (0.0, 1.0, 2 / 3, 0, 0, 0, 1),
    "e4m3fnuz": (-1.0, 1.0, 0.0, 1, 0, 0, 1),
}

tmp = tempfile.mkdtemp(prefix="pthinspect-commands-")
known = os.path.join(tmp, "known.pt")
with open(known, "wb") as f:
    f.write(ckpt.checkpoint(TENSORS, STORAGES))


def checksums(path):
    result = run("ls", "--json", "--checksum", path)
    assert result.returncode == 0, f"ls --checksum {path}: {result.stderr!r}"
    return {t["name"]: t for t in json.loads(result.stdout)["tensors"]}


# ---- stat ----
result = run("stat", "--json", known)
check(result.returncode == 0, f"stat known.pt: exit {result.returncode}: {result.stderr!r}")
if result.returncode == 0:
    stats = {t["name"]: t for t in json.loads(result.stdout)["tensors"]}
    for name, (lo, hi, mean, nan, pinf, ninf, zeros) in EXPECTED_STATS.items():
        s = stats.get(name, {})
        got = (s.get("min"), s.get("max"), s.get("mean"), s.get("nan"), s.get("posinf"),
               s.get("neginf"), s.get("zeros"))
        ok = (None not in got and math.isclose(got[0], lo) and math.isclose(got[1], hi) and
              math.isclose(got[2], mean, abs_tol=1e-12) and got[3:] == (nan, pinf, ninf, zeros))
        check(ok, f"stat {name}: got {got}, expected {(lo, hi, mean, nan, pinf, ninf, zeros)}")
    check(math.isclose(stats["view"]["std"], math.sqrt(35 / 12)), f"stat view std {stats['view']}")
    check(stats["c64"].get("of") == "magnitude", f"complex stat not by magnitude: {stats['c64']}")
result = run("stat", known, "c64", "view")
check(result.returncode == 0 and result.stdout.count(b"\n") == 3 and b"c64" in result.stdout,
      f"stat NAME...: {result.stdout!r}")
result = run("stat", known, "no.such.tensor")
check(result.returncode == 1 and b"no.such.tensor" in result.stderr, f"stat unknown name: {result}")
# Every dtype of the torch fixtures, including the exotic ones, in one pass each.
for fixture in ("dtypes.pt", "dtypes_exotic.pt", "quantized.pt", "views.pt"):
    result = run("stat", "--json", os.path.join(TORCH_FIXTURES, fixture))
    check(result.returncode == 0, f"stat {fixture}: exit {result.returncode}: {result.stderr!r}")

# ---- export --to safetensors: the structure, and the bytes hashed as the original's views ----
original = checksums(known)


def rewrap(files, out):
    """The tensors of safetensors `files` as a zip checkpoint (their bytes as storages)."""
    storages, tensors = {}, []
    for path in files:
        header, data = ckpt.read_safetensors(path)
        check(header.get("__metadata__") == {"format": "pt"}, f"{path}: metadata {header}")
        spans = sorted((v["data_offsets"], k) for k, v in header.items() if k != "__metadata__")
        position = 0
        for (begin, end), name in spans:
            check(begin == position, f"{path}: '{name}' starts at {begin}, not {position}")
            position = end
            info = header[name]
            dtype = ckpt.SAFETENSORS[info["dtype"]]
            size = ckpt.STORAGE[dtype][1]
            numel = math.prod(info["shape"])
            check(end - begin == numel * size, f"{path}: '{name}' holds {end - begin} bytes")
            check(begin % size == 0, f"{path}: '{name}' at {begin} is not aligned to {size}")
            key = str(len(storages))
            storages[key] = (dtype, data[begin:end])
            tensors.append((name, key, 0, info["shape"], ckpt.contiguous_strides(info["shape"])))
        check(position == len(data), f"{path}: data is {len(data)} bytes, tensors end at {position}")
    with open(out, "wb") as f:
        f.write(ckpt.checkpoint(tensors, storages))
    return {name for name, *_ in tensors}


out = os.path.join(tmp, "known.safetensors")
result = run("export", known, "--to", "safetensors", out)
check(result.returncode == 0, f"export known.pt: exit {result.returncode}: {result.stderr!r}")
if result.returncode == 0:
    names = rewrap([out], os.path.join(tmp, "known.rewrapped.pt"))
    # safetensors' own order (by its dtype enum, last first, then by name): what save_file writes.
    header, _ = ckpt.read_safetensors(out)
    check(list(header) == ["__metadata__", "i64", "c64", "f32", "tail", "tied", "view", "bf16",
                           "f16", "e4m3fnuz", "e4m3", "e5m2", "flags"] and
          sorted(header.values(), key=lambda v: v.get("data_offsets", [-1])) == list(header.values()),
          f"export order: {list(header)}")
    back = checksums(os.path.join(tmp, "known.rewrapped.pt"))
    check(names == set(original), f"exported names {names} != {set(original)}")
    for name in names:
        check(back[name]["xxh3"] == original[name]["xxh3"],
              f"export: '{name}' hashes {back[name]['xxh3']}, the original {original[name]['xxh3']}")

# Every zip fixture of torch 2.15 (views, tied weights, every dtype safetensors has), with the
# tensors safetensors cannot hold skipped and named.
for fixture in sorted(os.listdir(TORCH_FIXTURES)):
    if not fixture.endswith(".pt") or fixture.startswith("legacy_") or fixture == "cuda.pt":
        continue
    path = os.path.join(TORCH_FIXTURES, fixture)
    out = os.path.join(tmp, fixture + ".safetensors")
    result = run("export", "--skip-unsupported", path, "--to", "safetensors", out)
    check(result.returncode == 0, f"export {fixture}: exit {result.returncode}: {result.stderr!r}")
    if result.returncode != 0:
        continue
    names = rewrap([out], out + ".pt")
    if not names:
        continue
    want, back = checksums(path), checksums(out + ".pt")
    for name in names:
        check(back[name]["xxh3"] == want[name]["xxh3"], f"export {fixture}: '{name}' differs")

# Unsupported tensors are named, never silently dropped.
quantized = os.path.join(TORCH_FIXTURES, "quantized.pt")
result = run("export", quantized, "--to", "safetensors", os.path.join(tmp, "q.safetensors"))
check(result.returncode == 1 and b"quantized tensor" in result.stderr and
      b"--skip-unsupported" in result.stderr, f"export quantized.pt: {result}")
result = run("export", "--skip-unsupported", quantized, "--to", "safetensors",
             os.path.join(tmp, "q.safetensors"))
check(result.returncode == 0 and b"skipped" in result.stderr, f"--skip-unsupported: {result}")

# An output that is the checkpoint itself (by its name or through a hard link) is refused before
# anything is written: writing it would truncate the file being read and lose the checkpoint.
with open(known, "rb") as f:
    known_bytes = f.read()
itself = os.path.join(tmp, "itself.pt")
linked = os.path.join(tmp, "linked.safetensors")
for args in (["--to", "safetensors", itself], ["--to", "safetensors", linked],
             ["--to", "safetensors", "--max-shard-size", "40B", itself[:-3]]):
    for path in (itself, linked):
        if os.path.exists(path):
            os.remove(path)
    with open(itself, "wb") as f:
        f.write(known_bytes)
    os.link(itself, linked)
    if "--max-shard-size" in args:  # the first shard's name is the input's
        os.rename(linked, itself[:-3] + "-00001-of-00005.safetensors")
    result = run("export", "--skip-unsupported", itself, *args)
    with open(itself, "rb") as f:
        kept = f.read() == known_bytes
    check(result.returncode == 1 and b"is the checkpoint being exported" in result.stderr and kept,
          f"export {args} over its input: {result.returncode} {result.stderr!r}, input kept: {kept}")

# Two tensors under one name (a repeated dict key; a TorchScript attribute and constant could
# meet the same way) are refused, not written twice under one key; so are two names that one
# .npy file name stands for.
clashing = os.path.join(tmp, "clashing.pt")
with open(clashing, "wb") as f:
    f.write(ckpt.checkpoint([("w", "0", 0, [8], [1]), ("a/b", "6", 0, [3], [1]),
                             ("w", "7", 0, [6], [1]), ("a_b", "8", 0, [3], [1])], STORAGES))
result = run("export", clashing, "--to", "safetensors", os.path.join(tmp, "clash.safetensors"))
check(result.returncode == 1 and b"two tensors are named 'w'" in result.stderr and
      not os.path.exists(os.path.join(tmp, "clash.safetensors")), f"export clash: {result}")
result = run("export", clashing, "--to", "npy", os.path.join(tmp, "clash-npy"))
check(result.returncode == 1 and b"two tensors are named 'w'" in result.stderr,
      f"export --to npy clash: {result}")
result = run("load", clashing, "--only", "w")
check(result.returncode == 1 and b"two tensors are named 'w' in the file" in result.stderr,
      f"load --only on a repeated name: {result}")
with open(clashing, "wb") as f:
    f.write(ckpt.checkpoint([("a/b", "6", 0, [3], [1]), ("a_b", "8", 0, [3], [1])], STORAGES))
result = run("export", clashing, "--to", "npy", os.path.join(tmp, "clash-npy"))
check(result.returncode == 1 and b"'a/b' and 'a_b' would both be written to a_b.npy" in
      result.stderr, f"export --to npy file clash: {result}")

# A tensor named __metadata__ would take the header's metadata key: refused, or left out.
metadata_named = os.path.join(tmp, "metadata_named.pt")
with open(metadata_named, "wb") as f:
    f.write(ckpt.checkpoint([("__metadata__", "0", 0, [8], [1]), ("w", "6", 0, [3], [1])],
                            STORAGES))
out = os.path.join(tmp, "metadata_named.safetensors")
result = run("export", metadata_named, "--to", "safetensors", out)
check(result.returncode == 1 and b"'__metadata__' (safetensors keeps that name" in result.stderr
      and not os.path.exists(out), f"export of a tensor named __metadata__: {result}")
result = run("export", "--skip-unsupported", metadata_named, "--to", "safetensors", out)
check(result.returncode == 0 and b"skipped '__metadata__'" in result.stderr,
      f"--skip-unsupported of a tensor named __metadata__: {result}")
if result.returncode == 0:
    header, _ = ckpt.read_safetensors(out)
    check(header.get("__metadata__") == {"format": "pt"} and set(header) == {"__metadata__", "w"},
          f"export without __metadata__: {header}")

# A NUL in a name (Python allows it) is no end of the .npy file's name.
nul_named = os.path.join(tmp, "nul_named.pt")
with open(nul_named, "wb") as f:
    f.write(ckpt.checkpoint([("a\0x", "0", 0, [8], [1]), ("a\0y", "6", 0, [3], [1]),
                             ("a_y", "8", 0, [3], [1])], STORAGES))
nul_dir = os.path.join(tmp, "nul-npy")
result = run("export", nul_named, "--to", "npy", nul_dir)
check(result.returncode == 1 and (not os.path.exists(nul_dir) or not os.listdir(nul_dir)),
      f"export --to npy of 'a\\0y' beside 'a_y': {result}")
with open(nul_named, "wb") as f:
    f.write(ckpt.checkpoint([("a\0x", "0", 0, [8], [1]), ("a\0y", "6", 0, [3], [1])], STORAGES))
result = run("export", nul_named, "--to", "npy", nul_dir)
check(result.returncode == 0 and sorted(os.listdir(nul_dir)) == ["a_x.npy", "a_y.npy"],
      f"export --to npy of names with NUL: {result} {os.listdir(nul_dir)}")

# A key with a lone surrogate (Python allows it; pickle writes it with 'surrogatepass') is no
# valid UTF-8: JSON shows U+FFFD for each of its three bytes, as stat and scan do, instead of an
# internal error.
surrogate = os.path.join(tmp, "surrogate.pt")
with open(surrogate, "wb") as f:
    f.write(ckpt.checkpoint([("a\ud800b", "0", 0, [8], [1]), ("ok", "6", 0, [3], [1])], STORAGES))
result = run("ls", "--json", "--checksum", surrogate)
names = [t["name"] for t in json.loads(result.stdout)["tensors"]] if result.returncode == 0 else []
check(names == ["a\ufffd\ufffd\ufffdb", "ok"], f"ls --json of a lone surrogate: {result.returncode} {names} "
      f"{result.stderr[:200]!r}")

# Shards and transformers' index.
sharded = os.path.join(tmp, "shards", "model.safetensors")
os.makedirs(os.path.dirname(sharded))
result = run("export", known, "--to", "safetensors", "--max-shard-size", "40B", sharded)
check(result.returncode == 0, f"export --max-shard-size: {result}")
if result.returncode == 0:
    with open(sharded + ".index.json") as f:
        index = json.load(f)
    files = sorted(set(index["weight_map"].values()))
    check(len(files) > 1 and all(f.startswith("model-0000") and f.endswith(
        f"-of-{len(files):05d}.safetensors") for f in files), f"shard names {files}")
    check(set(index["weight_map"]) == set(original), f"weight_map {index['weight_map']}")
    total = sum(t["nbytes"] for t in original.values())
    check(index["metadata"]["total_size"] == total, f"total_size {index['metadata']} != {total}")
    names = rewrap([os.path.join(os.path.dirname(sharded), f) for f in files],
                   os.path.join(tmp, "sharded.pt"))
    back = checksums(os.path.join(tmp, "sharded.pt"))
    for name in names:
        check(back[name]["xxh3"] == original[name]["xxh3"], f"sharded '{name}' differs")
result = run("export", known, "--to", "safetensors", "--max-shard-size", "lots", sharded)
check(result.returncode == 1 and b"--max-shard-size" in result.stderr, f"bad size: {result}")
result = run("export", known, "--to", "safetensors", "--max-shard-size", "999999999999TB", sharded)
check(result.returncode == 1 and b"2^64 bytes or more" in result.stderr, f"huge size: {result}")

# ---- export --to npy ----
npy_dir = os.path.join(tmp, "npy")
result = run("export", "--skip-unsupported", known, "--to", "npy", npy_dir)
check(result.returncode == 0, f"export --to npy: {result}")
check(b"'bf16'" in result.stderr and b"numpy" in result.stderr, f"npy skips bf16: {result.stderr}")
if result.returncode == 0:
    import ast
    descr = {"<f4": ("float32", 4), "<f2": ("float16", 2), "<i8": ("int64", 8),
             "<c8": ("complex64", 8), "|b1": ("bool", 1)}
    storages, tensors = {}, []
    for file in sorted(os.listdir(npy_dir)):
        with open(os.path.join(npy_dir, file), "rb") as f:
            blob = f.read()
        check(blob[:8] == b"\x93NUMPY\x01\x00", f"{file}: magic {blob[:8]!r}")
        (n,) = struct.unpack("<H", blob[8:10])
        check((10 + n) % 64 == 0 and blob[10 + n - 1:10 + n] == b"\n", f"{file}: header size {n}")
        header = ast.literal_eval(blob[10:10 + n].decode())
        dtype, size = descr[header["descr"]]
        check(header["fortran_order"] is False, f"{file}: {header}")
        data = blob[10 + n:]
        check(len(data) == math.prod(header["shape"]) * size, f"{file}: {len(data)} bytes")
        key = str(len(storages))
        storages[key] = (dtype, data)
        tensors.append((file[:-4], key, 0, list(header["shape"]),
                        ckpt.contiguous_strides(list(header["shape"]))))
    with open(os.path.join(tmp, "npy.pt"), "wb") as f:
        f.write(ckpt.checkpoint(tensors, storages))
    back = checksums(os.path.join(tmp, "npy.pt"))
    check({"f32", "view", "c64", "flags"} <= set(back), f"npy files {sorted(back)}")
    for name in back:
        check(back[name]["xxh3"] == original[name]["xxh3"], f"npy '{name}' differs")

# ---- diff ----
result = run("diff", known, known)
check(result.returncode == 0 and b"0 changed, 0 added, 0 removed" in result.stdout,
      f"diff A A: {result}")
changed = dict(STORAGES)
changed["0"] = ("float32", f32(1.0, -2.0, 0.5, NAN, INF, -INF, 3.0, 4.0))  # 0 -> 0.5
changed["6"] = ("int32", struct.pack("<3i", -5, 7, 0))                    # int64 -> int32
other_tensors = [t for t in TENSORS if t[0] != "flags"] + [("extra", "8", 0, [3], [1])]
other = os.path.join(tmp, "other.pt")
with open(other, "wb") as f:
    f.write(ckpt.checkpoint(other_tensors, changed))
result = run("diff", "--json", known, other)
check(result.returncode == 1, f"diff A B: exit {result.returncode}: {result.stderr!r}")
if result.returncode == 1:
    d = json.loads(result.stdout)
    by_name = {c["name"]: c for c in d["changed"]}
    check(d["equal"] is False and d["added"] == ["extra"] and d["removed"] == ["flags"], f"{d}")
    check(set(by_name) == {"f32", "tied", "i64"}, f"changed {sorted(by_name)}")
    check(by_name["f32"].get("max_abs_diff") == 0.5 and by_name["f32"].get("max_rel_diff") == 1.0,
          f"f32 diff {by_name['f32']}")
    check(by_name["i64"].get("dtype") == ["int64", "int32"] and
          by_name["i64"].get("max_abs_diff") == 0.0, f"i64 diff {by_name['i64']}")
result = run("diff", known, os.path.join(tmp, "missing.pt"))
check(result.returncode == 2 and b"missing.pt" in result.stderr, f"diff missing file: {result}")

# ---- views larger than one chunk (4 MiB): read box by box in storage order ----
rows, cols = 1024, 2048
values = [float((i * 7919) % 1000) - 500.0 for i in range(rows * cols)]
big_storage = struct.pack(f"<{rows * cols}f", *values)
transposed = [values[r * cols + c] for c in range(cols) for r in range(rows)]
big_a = os.path.join(tmp, "big_a.pt")
with open(big_a, "wb") as f:
    f.write(ckpt.checkpoint([("t", "0", 0, [cols, rows], [1, cols]),
                             ("s", "0", 1, [rows, cols // 2], [cols, 2])],
                            {"0": ("float32", big_storage)}))
changed_t = list(transposed)
changed_t[-5] += 0.25
big_b = os.path.join(tmp, "big_b.pt")
with open(big_b, "wb") as f:
    f.write(ckpt.checkpoint([("t", "0", 0, [cols, rows], [rows, 1]),
                             ("s", "1", 0, [rows, cols // 2], [cols // 2, 1])],
                            {"0": ("float32", struct.pack(f"<{rows * cols}f", *changed_t)),
                             "1": ("float32", struct.pack(
                                 f"<{rows * cols // 2}f",
                                 *[values[r * cols + 1 + 2 * c] for r in range(rows)
                                   for c in range(cols // 2)]))}))
result = run("diff", "--json", big_a, big_b)
check(result.returncode == 1, f"diff big: exit {result.returncode}: {result.stderr!r}")
if result.returncode == 1:
    d = json.loads(result.stdout)
    check(d["same"] == 1 and [c["name"] for c in d["changed"]] == ["t"] and
          d["changed"][0].get("max_abs_diff") == 0.25, f"diff big: {d}")
out = os.path.join(tmp, "big.safetensors")
result = run("export", big_a, "--to", "safetensors", out)
check(result.returncode == 0, f"export big: {result}")
if result.returncode == 0:
    rewrap([out], out + ".pt")
    want, back = checksums(big_a), checksums(out + ".pt")
    for name in ("t", "s"):
        check(back[name]["xxh3"] == want[name]["xxh3"], f"export big: '{name}' differs")
    with open(out, "rb") as f:
        header, data = ckpt.read_safetensors(out)
    begin, end = header["t"]["data_offsets"]
    check(data[begin:end] == struct.pack(f"<{rows * cols}f", *transposed),
          "export big: the transposed view's bytes are not its row-major elements")
result = run("stat", "--json", big_a, "t")
if result.returncode == 0:
    s = json.loads(result.stdout)["tensors"][0]
    exact_mean = math.fsum(values) / len(values)
    exact_std = math.sqrt(math.fsum((v - exact_mean) ** 2 for v in values) / len(values))
    check(math.isclose(s["mean"], exact_mean, rel_tol=1e-12, abs_tol=1e-12) and
          math.isclose(s["std"], exact_std, rel_tol=1e-12) and
          s["min"] == min(values) and s["max"] == max(values), f"stat big: {s}")

# A real torch.save (1.13) of torch.zeros(1).expand(2**20, 2**20): 2^40 elements over 4 bytes.
# stat, export and diff refuse it at once, naming the file and the tensor, as ls --checksum does
# (diff through the same batched checksums as ls).
expanded = os.path.join(FIXTURES, "..", "..", "fuzz", "regressions", "load",
                        "stride0_view_2_to_40_elements.pt")
for args, status in ((["stat", expanded], 1),
                     (["export", expanded, "--to", "safetensors", os.path.join(tmp, "e.st")], 1),
                     (["diff", expanded, expanded], 2)):
    result = run(*args)
    check(result.returncode == status and b"tensor 'expanded'" in result.stderr and
          b"overlaps itself" in result.stderr, f"{args[0]} expanded view: {result}")
    check(b"stride0_view_2_to_40_elements.pt" in result.stderr, f"{args[0]}: no file named")

# An export that fails half-way leaves nothing behind: no half-written file, an older file of
# that name untouched, no shard of a set whose index was never written.
stale = os.path.join(tmp, "stale.safetensors")
with open(stale, "wb") as f:
    f.write(b"an older export")
result = run("export", expanded, "--to", "safetensors", stale)
with open(stale, "rb") as f:
    check(result.returncode == 1 and f.read() == b"an older export" and
          os.listdir(tmp).count("stale.safetensors") == 1 and
          not [n for n in os.listdir(tmp) if n.endswith(".partial")],
          f"failed export over an older file: {result} {sorted(os.listdir(tmp))}")
# A symlinked output is written through: the link stays, the file it names gets the export.
os.makedirs(os.path.join(tmp, "elsewhere"))
linked_to = os.path.join(tmp, "elsewhere", "real.safetensors")
with open(linked_to, "wb") as f:
    f.write(b"an older export")
os.symlink(linked_to, os.path.join(tmp, "link.safetensors"))
result = run("export", known, "--to", "safetensors", os.path.join(tmp, "link.safetensors"))
check(result.returncode == 0 and os.path.islink(os.path.join(tmp, "link.safetensors")) and
      ckpt.read_safetensors(linked_to)[0].get("__metadata__") == {"format": "pt"},
      f"export through a symlink: {result}")
halfway = os.path.join(tmp, "halfway")
os.makedirs(halfway)
# 'ok' fills the first shard; the second shard's name is no UTF-8, which only its header finds.
result = run("export", surrogate, "--to", "safetensors", "--max-shard-size", "30B",
             os.path.join(halfway, "model.safetensors"))
check(result.returncode == 1 and b"not valid UTF-8" in result.stderr and not os.listdir(halfway),
      f"failed sharded export: {result} left {os.listdir(halfway)}")
result = run("export", expanded, "--to", "npy", halfway)
check(result.returncode == 1 and not os.listdir(halfway),
      f"failed npy export: {result} left {os.listdir(halfway)}")

# ---- verify ----
result = run("verify", os.path.join(FIXTURES, "sample.pt"))
check(result.returncode == 0 and b"ok" in result.stdout, f"verify sample.pt: {result}")
result = run("verify", os.path.join(TORCH_FIXTURES, "legacy_views.pt"))
check(result.returncode == 0 and b"no checksums" in result.stdout, f"verify legacy: {result}")
with open(known, "rb") as f:
    corrupt = bytearray(f.read())
where = corrupt.index(f32(1, 2, 3, 4, 5, 6))
corrupt[where] ^= 0xFF
bad = os.path.join(tmp, "corrupt.pt")
with open(bad, "wb") as f:
    f.write(corrupt)
result = run("verify", bad)
lines = result.stderr.decode().strip().split("\n")
check(result.returncode == 1 and len(lines) == 1 and "archive/data/7" in lines[0] and
      "CRC-32" in lines[0], f"verify corrupt record: {result}")

# ---- scan: the hand-written malicious files, and every ordinary fixture ----
with open(os.path.join(FIXTURES, "scan", "EXPECTED.txt")) as f:
    expected = [line.rstrip("\n").split("\t") for line in f if not line.startswith("#")]
status = {"safe": 0, "unknown": 1, "dangerous": 2, "not a checkpoint": 3}
for name, verdict in expected:
    result = run("scan", "--json", os.path.join(FIXTURES, "scan", name))
    got = json.loads(result.stdout)["files"][0] if result.stdout else {}
    check(result.returncode == status[verdict] and got.get("verdict") == verdict,
          f"scan {name}: exit {result.returncode}, {got.get('verdict')}, expected {verdict}: "
          f"{got.get('findings')} {[g for g in got.get('globals', []) if g['verdict'] != 'safe']}")
ordinary = [os.path.join(FIXTURES, "sample.pt")]
for version in os.listdir(os.path.join(FIXTURES, "torch")):
    folder = os.path.join(FIXTURES, "torch", version)
    # Ordinary: what torch.load reads (a committed expected JSON); protocols-*/p0_*.pt are files
    # torch.save writes and torch.load refuses, as pthload does.
    ordinary += [os.path.join(folder, f) for f in sorted(os.listdir(folder))
                 if f.endswith(".pt") and os.path.exists(os.path.join(folder, f[:-3] + ".expected.json"))
                 or f.endswith(".pt") and os.path.exists(os.path.join(folder, f[:-3] + ".expected.json.gz"))]
# What torch.load(weights_only=True) of torch 2.x did with every fixture, recorded by
# tools/scan_crosscheck.py --record (CI has no torch): scan's second answer must be the same.
with open(os.path.join(FIXTURES, "weights_only_torch.txt")) as f:
    torch_answers = dict(line.rstrip("\n").split("\t") for line in f if not line.startswith("#"))
for rel, answer in sorted(torch_answers.items()):
    result = run("scan", "--json", os.path.join(FIXTURES, rel))
    got = json.loads(result.stdout)["files"][0] if result.stdout else {}
    said = "accepted" if got.get("weights_only", {}).get("accepted") else "refused"
    check(said == answer, f"scan {rel}: weights_only {said}, torch {answer}: {got.get('weights_only')}")
for path in ordinary:
    # Ordinary checkpoints: safe exactly where torch's weights-only loader accepts them (a pickled
    # nn.Module class, numpy arrays, protocol 0/1 or 4/5 opcodes are refused there: unknown).
    rel = os.path.relpath(path, FIXTURES)
    result = run("scan", "--json", path)
    got = json.loads(result.stdout)["files"][0] if result.stdout else {}
    want = "safe" if torch_answers.get(rel) == "accepted" else "unknown"
    check(rel in torch_answers, f"{rel}: no recorded torch answer in weights_only_torch.txt")
    check(got.get("verdict") == want and result.returncode == status[want],
          f"scan {rel}: {got.get('verdict')}, expected {want}: "
          f"{got.get('findings')} {[g for g in got.get('globals', []) if g['verdict'] != 'safe']}")
    check(not any(g["verdict"] == "dangerous" for g in got.get("globals", [])),
          f"scan {path}: a dangerous global in an ordinary fixture")
result = run("scan", os.path.join(FIXTURES, "scan", "zip_os_system.pt"), known)
check(result.returncode == 2 and b"os.system (called)" in result.stdout, f"scan two files: {result}")
# Over several files a dangerous one decides the exit status, even beside one that is no
# checkpoint (exit 3 alone); the text output gives the weights-only answer on its own line.
result = run("scan", os.path.join(FIXTURES, "scan", "not_a_checkpoint.txt"),
             os.path.join(FIXTURES, "scan", "zip_os_system.pt"))
check(result.returncode == 2, f"scan: a dangerous file beside no checkpoint: {result}")
result = run("scan", os.path.join(FIXTURES, "scan", "zip_defaultdict.pt"))
check(result.returncode == 1 and b"weights_only=True: refused: Unsupported global" in result.stdout
      and b"collections.defaultdict (called)" in result.stdout, f"scan text output: {result}")

# Hostile files: scan --json of every fuzz regression input ends in a verdict (exit 0-3) and
# valid JSON, never an internal error or a crash, whatever bytes the names hold.
regressions = os.path.join(FIXTURES, "..", "..", "fuzz", "regressions")
for folder, _, files in os.walk(regressions):
    for file in files:
        result = run("scan", "--json", os.path.join(folder, file))
        ok = result.returncode in (0, 1, 2, 3) and b"internal error" not in result.stderr
        if ok:
            try:
                json.loads(result.stdout)
            except ValueError:
                ok = False
        check(ok, f"scan {file}: exit {result.returncode}: {result.stderr[:200]!r}")

# ---- colour: never in a pipe (on a terminal: pthinspect_terminal_test.py); --help ----
scan_args = ["scan", os.path.join(FIXTURES, "scan", "zip_os_system.pt")]
check(b"\x1b[" not in run(*scan_args).stdout, "colour in a pipe")
result = run("--help")
check(result.returncode == 0 and b"Exit status" in result.stdout and b"not a checkpoint" in
      result.stdout, f"--help exit codes: {result.stdout[-400:]!r}")

print(f"{checks} checks, {len(failures)} failed")
for failure in failures:
    print("FAIL:", failure)
sys.exit(1 if failures else 0)
