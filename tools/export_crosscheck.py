#!/usr/bin/env python3
"""Checks `pthinspect export --to safetensors` against torch and safetensors themselves.

    /opt/torch2/bin/python tools/export_crosscheck.py --pthinspect PATH FILE...

For each FILE (a checkpoint torch.load reads), exports it with `PATH export --skip-unsupported
FILE --to safetensors OUT` (and once more with --max-shard-size, into shards + index), then reads
OUT back with safetensors (PyPI) twice — safe_open(framework="pt") and
safetensors.numpy.load_file — and compares every tensor with torch.load's own view of FILE
(tools/torch_dump.py's walk): same names, dtype and shape, and the same XXH3-64 over the
elements in row-major order (tools/torch_dump.py's tensor_bytes / xxh3_hex, the checksum
`ls --json --checksum` prints). Tensors the export skipped must be ones safetensors cannot hold
(named on stderr), and every file written must be byte for byte what safetensors.torch.save
writes for the tensors it holds. Prints one line per difference, then `N passed, M failed`; exits 1 if any
file failed. Needs torch, safetensors, numpy and xxhash (the cross-check environment).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy
import torch
from safetensors import safe_open
from safetensors.numpy import load_file as numpy_load_file
from safetensors.torch import load_file, save

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_dump  # noqa: E402


def torch_view(path):
    """{name: tensor} of what torch.load sees, named as pthinspect names them: dense tensors,
    numpy arrays (as tensors), sparse tensors' parts and nested tensors' components."""
    _, obj, _ = torch_dump.load(path)
    found = {}
    for name, value in torch_dump.walk(obj):
        if isinstance(value, (numpy.ndarray, numpy.generic)):
            found.setdefault(name, torch.from_numpy(numpy.array(value, copy=True)))
        elif value.layout in torch_dump._SPARSE_PARTS:
            for part, get in torch_dump._SPARSE_PARTS[value.layout]:
                found.setdefault(f"{name}.{part}", get(value))
        elif value.is_nested:
            for i, component in enumerate(value.unbind()):
                found.setdefault(f"{name}.{i}", component)
        elif not value.is_meta and type(value) in (torch.Tensor, torch.nn.Parameter):
            found.setdefault(name, value)
    return found


def check_file(pthinspect, path, tmp):
    diffs = []
    try:
        want = torch_view(path)
    except Exception as e:  # noqa: BLE001 - torch itself cannot read it: nothing to compare
        print(f"{path}: skipped: this torch cannot load it ({type(e).__name__}: {e})")
        return None
    for sharded in (False, True):
        out = os.path.join(tmp, os.path.basename(path) + (".sharded" if sharded else "") +
                           ".safetensors")
        args = [pthinspect, "export", "--skip-unsupported", path, "--to", "safetensors", out]
        if sharded:
            args += ["--max-shard-size", "4KB"]
        result = subprocess.run(args, capture_output=True, text=True)
        if result.returncode != 0:
            return [f"export failed: {result.stderr.strip()}"]
        files = [out]
        if os.path.exists(out + ".index.json"):
            with open(out + ".index.json") as f:
                index = json.load(f)
            files = sorted({os.path.join(tmp, v) for v in index["weight_map"].values()})
        got_pt, got_np = {}, {}
        for file in files:
            with open(file, "rb") as f:
                if f.read() != save(load_file(file), metadata={"format": "pt"}):
                    diffs.append(f"{file}: not byte for byte what safetensors writes")
            with safe_open(file, framework="pt") as f:
                if f.metadata() != {"format": "pt"}:
                    diffs.append(f"{file}: metadata {f.metadata()}")
                for key in f.keys():
                    got_pt[key] = f.get_tensor(key)
            try:
                got_np.update(numpy_load_file(file))
            except TypeError as e:  # numpy has no bfloat16 or float8: torch's read covers them
                if "bfloat16" not in str(e) and "float8" not in str(e) and "F8" not in str(e) \
                        and "BF16" not in str(e):
                    diffs.append(f"{file}: numpy cannot read it: {e}")
        skipped = set(want) - set(got_pt)
        for name in sorted(skipped):
            if f"'{name}'" not in result.stderr:
                diffs.append(f"'{name}' missing from the export and not named as skipped")
        for name, tensor in got_pt.items():
            if name not in want:
                diffs.append(f"'{name}' exported but torch.load has no such tensor")
                continue
            reference = want[name]
            if tensor.dtype != reference.dtype or list(tensor.shape) != list(reference.shape):
                diffs.append(f"'{name}': {tensor.dtype}{list(tensor.shape)} != "
                             f"{reference.dtype}{list(reference.shape)}")
                continue
            digest = torch_dump.xxh3_hex(torch_dump.tensor_bytes(tensor))
            if digest != torch_dump.xxh3_hex(torch_dump.tensor_bytes(reference)):
                diffs.append(f"'{name}': content differs from torch.load's (read with torch)")
            if name in got_np:
                array = numpy.ascontiguousarray(got_np[name])
                if torch_dump.xxh3_hex(array.tobytes()) != digest:
                    diffs.append(f"'{name}': numpy's read differs from torch's")
    return diffs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pthinspect", required=True)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in args.files:
            diffs = check_file(args.pthinspect, path, tmp)
            if diffs is None:
                continue
            for diff in diffs:
                print(f"{path}: {diff}")
            passed, failed = (passed + 1, failed) if not diffs else (passed, failed + 1)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
