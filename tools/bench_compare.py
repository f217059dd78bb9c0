#!/usr/bin/env python3
"""pthload beside torch.load and safetensors, in one run, on the same tensors (issue 15).

    tools/bench_compare.py                      # generate the files, run everything, print a table
    tools/bench_compare.py --venv /opt/torch2   # use a venv that already has torch + safetensors
    tools/bench_compare.py my_model.pt --json   # also a checkpoint of yours; JSON for machines

What it does, from a fresh clone:
  1. A Python with torch, safetensors and numpy: --venv PATH, else ~/.cache/pthload-bench-venv,
     created with `python3 -m venv` and filled from PyPI by pip the first time. Where that fails,
     the torch and safetensors rows are skipped, saying so (pthload and the ceilings still run on
     the files named on the command line).
  2. pthbench: --pthbench PATH, else built with meson and ninja in --build (default
     build-bench/, buildtype release; CUDA if this machine has it).
  3. The files, in --dir (default ~/.cache/pthload-bench-data; made once, kept): llm.pt, a ~1 GB
     LLM-like state dict (bf16 embeddings and blocks, fp16 and fp32 norms, the output head tied to
     the embedding), and optim.pt, an AdamW-like optimizer state dict of 100 000 small tensors;
     plus any checkpoints named on the command line. Each is also exported to safetensors (tied
     weights as separate copies: safetensors allows no aliasing; the optimizer's nested names
     flattened with dots).
  4. Every loader in a fresh child process, --runs times (default 5), medians; time and the
     child's peak RSS. pthload (pthbench once MODE) is timed as a WHOLE
     PROCESS by this script's clock: exec, load, exit; its in-process time is printed too.
     torch and safetensors are timed IN-PROCESS around the call, `import torch` excluded; their
     peak RSS includes the interpreter and torch (the "before" column says how much). Peak RSS
     is the child's own VmHWM, read by it at its end: wait4's ru_maxrss would do, but Linux
     carries the spawning Python's peak across exec into it.
     Page cache warm (the file is read once before the runs); cold too (--cold) when this user
     can write /proc/sys/vm/drop_caches, which it is asked to do before each cold run.
  5. The ceilings of the machine in the same run: the file read once in 1 MiB chunks into one
     reused buffer (copy bandwidth), the same into one fresh buffer of the file's size (page
     faults included), and on a GPU a pinned host-to-device copy of the file's size. For a zip
     checkpoint, the floor of any load of it (`pthbench once read-index`): its end records,
     central directory, local headers and data.pkl read as pthload reads them, the pickle's
     opcodes walked once without making values. A file of many small tensors is bound by this,
     not by bandwidth; the summary says how far the view load is above it.

The table gives time (median; "in-proc": pthload's own clock around the load inside its
process), CPU ms (user + system of every thread: pthload's whole process from wait4, torch's call
from time.process_time; steadier than time on a busy machine), GB/s (tensor bytes / time; file bytes for the ceilings), peak RSS,
and ratio = this row's time / pthload's (>1: pthload is faster) against the pthload row that does
the same job: views against pthload's view load, copies against its copy load, GPU loads against
its CUDA load.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

MAKE_LLM = r"""
import sys, torch
torch.manual_seed(0)
vocab, dim, hidden, layers = 32000, 2048, 5632, 8
sd = {}
sd["model.embed_tokens.weight"] = torch.randn(vocab, dim, dtype=torch.bfloat16)
for i in range(layers):
    p = f"model.layers.{i}."
    for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
        sd[p + "self_attn." + name + ".weight"] = torch.randn(dim, dim, dtype=torch.bfloat16)
    sd[p + "mlp.gate_proj.weight"] = torch.randn(hidden, dim, dtype=torch.bfloat16)
    sd[p + "mlp.up_proj.weight"] = torch.randn(hidden, dim, dtype=torch.bfloat16)
    sd[p + "mlp.down_proj.weight"] = torch.randn(dim, hidden, dtype=torch.bfloat16)
    sd[p + "input_layernorm.weight"] = torch.ones(dim, dtype=torch.float32)
    sd[p + "post_attention_layernorm.weight"] = torch.ones(dim, dtype=torch.float16)
    sd[p + "self_attn.rotary_emb.inv_freq"] = torch.rand(dim // 32, dtype=torch.float32)
sd["model.norm.weight"] = torch.ones(dim, dtype=torch.float32)
sd["lm_head.weight"] = sd["model.embed_tokens.weight"]      # tied, as in many LLMs
torch.save(sd, sys.argv[1])
"""

MAKE_OPTIM = r"""
import sys, torch
torch.manual_seed(0)
params = 25_000                          # 4 tensors each: 100 000 tensors
state = {i: {"step": torch.tensor(float(i)), "exp_avg": torch.randn(4),
             "exp_avg_sq": torch.rand(4), "max_exp_avg_sq": torch.rand(4)} for i in range(params)}
groups = [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01,
           "amsgrad": True, "params": list(range(params))}]
torch.save({"state": state, "param_groups": groups}, sys.argv[1])
"""

# Exports every tensor of a checkpoint to safetensors: names flattened with dots, shared storages
# cloned (safetensors refuses aliasing), non-tensor values left out.
EXPORT = r"""
import sys, torch
from safetensors.torch import save_file
obj = torch.load(sys.argv[1], map_location="cpu", weights_only=False)
flat = {}
def walk(prefix, v):
    if isinstance(v, torch.Tensor):
        flat[prefix] = v.detach().contiguous().clone()
    elif isinstance(v, dict):
        for k, x in v.items():
            walk(f"{prefix}.{k}" if prefix else str(k), x)
    elif isinstance(v, (list, tuple)):
        for k, x in enumerate(v):
            walk(f"{prefix}.{k}" if prefix else str(k), x)
walk("", obj)
save_file(flat, sys.argv[2])
"""

# One in-process timing of one loader; `import torch` and the import of safetensors are outside.
# Prints JSON: the call's milliseconds and the RSS peak before the call.
TORCH_ONCE = r"""
import json, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
import torch
if mode.startswith("safetensors"):
    from safetensors.torch import load_file
cuda = mode.endswith("cuda")
if cuda:
    torch.zeros(1, device="cuda"); torch.cuda.synchronize()     # context creation is not loading
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
cpu = time.process_time()
t = time.perf_counter()
if mode == "torch-wo":
    out = torch.load(path, map_location="cpu", weights_only=True)
elif mode == "torch":
    out = torch.load(path, map_location="cpu", weights_only=False)
elif mode == "torch-mmap-wo":
    out = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
elif mode == "torch-mmap":
    out = torch.load(path, map_location="cpu", weights_only=False, mmap=True)
elif mode == "torch-cuda":
    out = torch.load(path, map_location="cuda:0", weights_only=True)
elif mode == "safetensors":
    out = load_file(path)
elif mode == "safetensors-cuda":
    out = load_file(path, device="cuda:0")
elif mode == "h2d-cuda":
    import os
    n = os.path.getsize(path)
    host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(n, dtype=torch.uint8, device="cuda:0")
    dev.copy_(host, non_blocking=True); torch.cuda.synchronize()    # warm-up
    t = time.perf_counter()
    cpu = time.process_time()
    dev.copy_(host, non_blocking=True)
if cuda:
    torch.cuda.synchronize()
ms = (time.perf_counter() - t) * 1e3
cpu_ms = (time.process_time() - cpu) * 1e3
peak = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1])
print(json.dumps({"ms": ms, "cpu_ms": cpu_ms, "rss_before_kib": before, "peak_kib": peak}))
"""

# (label, runner, mode, compared with, what it is)
PTHLOAD_ROWS = [
    ("pthload open", "pthload", "open", None, "structure only (names, dtypes, shapes)"),
    ("pthload view load", "pthload", "view", None, "CPU, zero-copy views of the mapped file"),
    ("pthload copy load", "pthload", "copy", None, "CPU, owned copies"),
    ("pthload load+checksum", "pthload", "checksum", None, "view load, XXH3 of every tensor"),
]
CUDA_PTHLOAD = [("pthload cuda load", "pthload", "cuda", None, "to cuda:0")]
TORCH_ROWS = [
    ("torch.load", "torch", "torch", "copy", "map_location cpu, weights_only=False"),
    ("torch.load weights_only", "torch", "torch-wo", "copy", "map_location cpu, weights_only=True"),
    ("torch.load mmap", "torch", "torch-mmap", "view", "mmap=True, weights_only=False"),
    ("torch.load mmap weights_only", "torch", "torch-mmap-wo", "view",
     "mmap=True, weights_only=True"),
    ("safetensors load_file", "torch", "safetensors", "view", "the same tensors, .safetensors"),
]
CUDA_TORCH = [
    ("torch.load cuda", "torch", "torch-cuda", "cuda", "map_location cuda:0, weights_only=True"),
    ("safetensors load_file cuda", "torch", "safetensors-cuda", "cuda", "device cuda:0"),
]
CEILINGS = [
    ("read, 1 MiB chunks, reused buf", "pthload", "read-chunked", "copy",
     "ceiling: copy bandwidth from the page cache"),
    ("read into one fresh buffer", "pthload", "read-fresh", "copy",
     "ceiling: the same, page faults of fresh memory included"),
    ("read index, walk opcodes", "pthload", "read-index", "view",
     "floor of a zip load: end records, directory, local headers, data.pkl; no values"),
]
CUDA_CEILING = [("pinned H2D copy", "torch", "h2d-cuda", "cuda",
                 "ceiling: pinned host buffer of the file's size to cuda:0")]


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def python_has(python, modules):
    code = "import " + ", ".join(modules)
    return subprocess.run([python, "-c", code], capture_output=True).returncode == 0


def find_python(args):
    """A Python with torch, safetensors and numpy, or None (with the reason logged)."""
    venv = os.path.expanduser(args.venv)
    python = os.path.join(venv, "bin", "python")
    needed = ["torch", "safetensors", "numpy"]
    if os.path.exists(python) and python_has(python, needed):
        return python
    if args.no_install:
        log(f"skip: {venv} has no torch/safetensors/numpy and --no-install was given")
        return None
    try:
        if not os.path.exists(python):
            log(f"creating a virtual environment in {venv}")
            subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        log("installing torch, safetensors and numpy from PyPI into it (a few GB; once)")
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", "torch", "safetensors", "numpy"],
                       check=True)
    except (subprocess.CalledProcessError, OSError) as e:
        log(f"skip: cannot make a venv with torch in {venv} ({e}); torch.load and safetensors "
            "rows are left out, and only the files named on the command line are measured")
        return None
    return python if python_has(python, needed) else None


def find_pthbench(args):
    if args.pthbench:
        return args.pthbench
    build = os.path.abspath(args.build)
    binary = os.path.join(build, "tools", "pthbench", "pthbench")
    if not os.path.exists(os.path.join(build, "build.ninja")):
        log(f"configuring pthload in {build} (release)")
        subprocess.run(["meson", "setup", build, "--buildtype=release", "-Dtests=disabled"],
                       cwd=ROOT, check=True)
    log("building pthbench")
    subprocess.run(["ninja", "-C", build, "tools/pthbench/pthbench"], check=True,
                   stdout=subprocess.DEVNULL)
    return binary


def make_files(args, python):
    """[(label, .pt path, .safetensors path or None)]"""
    data = os.path.expanduser(args.dir)
    os.makedirs(data, exist_ok=True)
    files = []
    if python and not args.only_named:
        for name, script in (("llm.pt", MAKE_LLM), ("optim.pt", MAKE_OPTIM)):
            path = os.path.join(data, name)
            if not os.path.exists(path):
                log(f"generating {path}")
                subprocess.run([python, "-c", script, path + ".tmp"], check=True)
                os.replace(path + ".tmp", path)
            files.append(path)
    elif not python and not args.only_named:
        log("skip: no torch, so the generated files (1 GB state dict, 100 000 tensors) are not made")
    files += [os.path.abspath(f) for f in args.checkpoints]
    out = []
    for path in files:
        st = None
        if python:
            st = os.path.join(data, os.path.basename(path).rsplit(".", 1)[0] + ".safetensors")
            if path.endswith(".safetensors"):
                st = path
            elif not os.path.exists(st) or os.path.getmtime(st) < os.path.getmtime(path):
                log(f"exporting {path} to {st}")
                if subprocess.run([python, "-c", EXPORT, path, st + ".tmp"]).returncode == 0:
                    os.replace(st + ".tmp", st)
                else:
                    log(f"skip: {path} could not be exported to safetensors")
                    st = None
        out.append((os.path.basename(path), path, st))
    return out


def warm(path):
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def drop_caches():
    subprocess.run(["sync"], check=False)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def child(argv):
    """Runs argv; returns (wall ms, peak RSS KiB, stdout, CPU ms: user + system, all threads).
    Wall time from spawn to reaping."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        pid = os.posix_spawn(argv[0], argv, os.environ,
                             file_actions=[(os.POSIX_SPAWN_DUP2, out.fileno(), 1),
                                           (os.POSIX_SPAWN_DUP2, err.fileno(), 2)])
        _, status, usage = os.wait4(pid, 0)
        wall = (time.perf_counter() - start) * 1e3
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {err.read().decode(errors='replace')}")
        cpu = (usage.ru_utime + usage.ru_stime) * 1e3
        return wall, usage.ru_maxrss, out.read().decode(), cpu


def measure(runner, mode, path, args, tools, cold):
    """Median over args.runs fresh processes: {"ms", "inproc_ms", "rss_kib", ...}."""
    walls, inner, rss, before, cpus = [], [], [], [], []
    for _ in range(args.runs):
        if cold:
            drop_caches()
        if args.pause:
            time.sleep(args.pause)
        if runner == "pthload":
            wall, peak, out, cpu = child([tools["pthbench"], "once", mode, path])
            walls.append(wall)
            cpus.append(cpu)
            timed = re.search(r", ([0-9.]+) ms, peak ([0-9]+) KiB", out)
            inner.append(float(timed.group(1)))
            peak = int(timed.group(2)) or peak
        else:
            wall, peak, out, _ = child([tools["python"], "-c", TORCH_ONCE, mode, path])
            result = json.loads(out.strip().splitlines()[-1])
            cpus.append(result["cpu_ms"])
            peak = result["peak_kib"]
            walls.append(result["ms"])       # in-process, import excluded
            inner.append(result["ms"])
            before.append(result["rss_before_kib"])
        rss.append(peak)
    row = {"ms": statistics.median(walls), "inproc_ms": statistics.median(inner),
           "cpu_ms": statistics.median(cpus),
           "rss_kib": statistics.median(rss), "runs": len(walls),
           "timed": "whole process" if runner == "pthload" else "in-process"}
    if before:
        row["rss_before_kib"] = statistics.median(before)
    return row


def gpu_present(python):
    if not python:
        return False
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    return subprocess.run([python, "-c", code], capture_output=True).returncode == 0


def tensor_bytes(pthbench, path):
    out = child([pthbench, "once", "open", path])[2]
    return int(out.split(": ", 1)[1].split()[0])


def run_file(label, path, st, args, tools, gpu, cold):
    rows = PTHLOAD_ROWS + (CUDA_PTHLOAD if gpu else [])
    if tools["python"]:
        rows = rows + TORCH_ROWS + (CUDA_TORCH if gpu else [])
    rows = rows + CEILINGS + (CUDA_CEILING if gpu else [])
    nbytes = tensor_bytes(tools["pthbench"], path)
    file_bytes = os.path.getsize(path)
    results = []
    for name, runner, mode, against, what in rows:
        if args.rows and not re.search(args.rows, mode):
            continue
        target = st if mode.startswith("safetensors") else path
        if target is None:
            log(f"skip: {name} on {label}: no safetensors export")
            continue
        if not cold:
            warm(target)
        log(f"  {label}: {name}{' (cold)' if cold else ''}")
        try:
            row = measure(runner, mode, target, args, tools, cold)
        except RuntimeError as e:
            log(f"skip: {name} on {label}: {str(e).strip().splitlines()[-1]}")
            continue
        # read-index reads the file's structure, not its tensors: like the loads, it is given
        # the tensor bytes.
        whole_file = mode.startswith(("read", "h2d")) and mode != "read-index"
        bytes_moved = os.path.getsize(target) if whole_file else nbytes
        row.update(name=name, mode=mode, what=what, against=against, bytes=bytes_moved,
                   gbps=bytes_moved / 1e9 / (row["ms"] / 1e3) if row["ms"] > 0 else None)
        results.append(row)
    by_mode = {r["mode"]: r for r in results if r["timed"] == "whole process"}
    for r in results:
        ref = by_mode.get(r["against"]) if r["against"] else None
        # GPU loads are compared in-process on both sides, each with its CUDA context made
        # before its clock starts: a whole pthload process also pays the driver's start-up
        # (hundreds of ms), which the torch rows leave out with their import.
        ref_ms = (ref["inproc_ms"] if r["against"] == "cuda" else ref["ms"]) if ref else 0
        r["ratio"] = r["ms"] / ref_ms if ref_ms > 0 else None
        r["ratio_to"] = (f"pthload {r['against']}" +
                         (" (in-proc)" if r["against"] == "cuda" else "")) if ref else None
    return {"file": label, "path": path, "file_bytes": file_bytes, "tensor_bytes": nbytes,
            "cache": "cold" if cold else "warm", "rows": results}


def tiny_baseline(pthbench, runs):
    """Peak RSS (KiB) of `pthbench once view` on the repository's smallest fixture: what the
    process costs before any checkpoint's size counts."""
    tiny = os.path.join(ROOT, "tests", "fixtures", "sample.pt")
    if not os.path.exists(tiny):
        return None
    peaks = []
    for _ in range(runs):
        out = child([pthbench, "once", "view", tiny])[2]
        peaks.append(int(re.search(r"peak ([0-9]+) KiB", out).group(1)))
    return statistics.median(peaks)


def summary(table, baseline_kib=None):
    """The issue's targets, as measured."""
    rows = {r["mode"]: r for r in table["rows"]}
    lines = []
    if baseline_kib:
        above = {m: (rows[m]["rss_kib"] - baseline_kib) / 1024 for m in ("open", "view")
                 if m in rows}
        if above:
            lines.append("peak RSS above a tiny file's (" + f"{baseline_kib / 1024:.0f} MiB): " +
                         ", ".join(f"{m} +{v:.0f} MiB" for m, v in above.items()))
    torch_modes = [rows[m] for m in ("torch", "torch-wo") if m in rows]
    # --rows may have left out either pthload load: each ratio is given for what was measured.
    loads = [(m, rows[m]) for m in ("view", "copy") if m in rows]
    if torch_modes and loads:
        fastest = min(torch_modes, key=lambda r: r["ms"])
        times = "; ".join(f"/ pthload {m} load (whole process, {r['ms']:.1f} ms) = "
                          f"{fastest['ms'] / r['ms']:.1f}x" for m, r in loads)
        # A process too short for the kernel's CPU accounting reads 0 ms: no ratio then.
        cpu = " and ".join(f"{fastest['cpu_ms'] / r['cpu_ms']:.1f}x ({m})" if r["cpu_ms"] > 0
                           else f"- ({m})" for m, r in loads)
        lines.append(f"faster torch.load without mmap ({fastest['name']}, {fastest['ms']:.1f} ms) "
                     f"{times}; in CPU time (pthload's whole process, torch's call) {cpu}")
    if "view" in rows and "read-index" in rows:
        floor = rows["read-index"]
        line = (f"view load / index floor (what any load of the zip must read and walk, "
                f"{floor['ms']:.1f} ms) = {rows['view']['ms'] / floor['ms']:.2f}x")
        if torch_modes:
            fastest = min(torch_modes, key=lambda r: r["ms"])
            line += f"; the floor is {fastest['ms'] / floor['ms']:.0f}x the faster torch.load"
        lines.append(line)
    if "copy" in rows and "read-chunked" in rows:
        lines.append(f"copy load / chunked read-once = "
                     f"{rows['copy']['ms'] / rows['read-chunked']['ms']:.2f}x (in-process: "
                     f"{rows['copy']['inproc_ms'] / rows['read-chunked']['inproc_ms']:.2f}x)")
    if "cuda" in rows:
        gpu = rows["cuda"]
        gbps = table["tensor_bytes"] / 1e9 / (gpu["inproc_ms"] / 1e3)
        line = (f"pthload cuda load {gpu['inproc_ms']:.1f} ms in-process ({gbps:.2f} GB/s; "
                f"{gpu['ms']:.1f} ms as a whole process, the CUDA context's start included)")
        if "h2d-cuda" in rows:
            ceiling = rows["h2d-cuda"]
            line += (f"; pinned H2D ceiling {ceiling['gbps']:.2f} GB/s: "
                     f"{100 * gbps / ceiling['gbps']:.0f}% of it")
        lines.append(line)
        for mode in ("torch-cuda", "safetensors-cuda"):
            if mode in rows:
                lines.append(f"{rows[mode]['name']} / pthload cuda load (in-process) = "
                             f"{rows[mode]['ms'] / gpu['inproc_ms']:.1f}x")
    if "copy" in rows:
        lines.append(f"copy load peak RSS {rows['copy']['rss_kib'] / 1024:.0f} MiB for "
                     f"{table['tensor_bytes'] / 2**20:.0f} MiB of tensors")
    return lines


def print_table(tables, meta):
    print(f"pthload vs torch.load vs safetensors — {meta['machine']}")
    print(f"torch {meta.get('torch', 'not available')}, safetensors "
          f"{meta.get('safetensors', 'not available')}; medians of {meta['runs']} fresh processes; "
          "pthload timed as a whole process (exec to exit), torch/safetensors in-process "
          "(import excluded); ratio = time / pthload's time for the same job (>1: pthload faster)")
    for table in tables:
        print(f"\n{table['file']}: {table['file_bytes'] / 1e6:.1f} MB file, "
              f"{table['tensor_bytes'] / 1e6:.1f} MB of tensors, page cache {table['cache']}")
        print(f"  {'loader':<32}{'time ms':>10}{'in-proc':>10}{'CPU ms':>10}{'GB/s':>8}{'peak RSS':>10}"
              f"{'(before)':>10}{'ratio':>8}  against")
        for r in table["rows"]:
            gbps = f"{r['gbps']:.2f}" if r["gbps"] is not None else "-"
            before = f"{r['rss_before_kib'] / 1024:.0f}M" if "rss_before_kib" in r else ""
            ratio = f"{r['ratio']:.1f}x" if r["ratio"] is not None else ""
            print(f"  {r['name']:<32}{r['ms']:>10.1f}{r['inproc_ms']:>10.1f}{r['cpu_ms']:>10.1f}{gbps:>8}"
                  f"{r['rss_kib'] / 1024:>9.0f}M{before:>10}{ratio:>8}  {r['ratio_to'] or ''}")
        for line in table["summary"]:
            print(f"  {line}")
    for note in meta["notes"]:
        print(f"note: {note}")


def versions(python):
    if not python:
        return {}
    code = "import json, torch, safetensors; print(json.dumps({'torch': torch.__version__, " \
           "'safetensors': safetensors.__version__}))"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else {}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="*", help="more checkpoints to measure")
    parser.add_argument("--venv", default="~/.cache/pthload-bench-venv",
                        help="venv with torch/safetensors/numpy (made and filled if missing)")
    parser.add_argument("--no-install", action="store_true", help="never create or fill a venv")
    parser.add_argument("--pthbench", help="a built pthbench (default: build it in --build)")
    parser.add_argument("--build", default=os.path.join(ROOT, "build-bench"))
    parser.add_argument("--dir", default="~/.cache/pthload-bench-data", help="generated files")
    parser.add_argument("--only-named", action="store_true",
                        help="measure only the checkpoints named, generate nothing")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pause", type=float, default=0, metavar="SECONDS",
                        help="sleep this long before every run, so that each meets memory as a "
                             "process started once does (docs/performance.md: \"The memory "
                             "policy\"); default 0: runs back to back")
    parser.add_argument("--cold", action="store_true",
                        help="also cold page cache runs (drops the caches of the whole machine)")
    parser.add_argument("--rows", metavar="REGEX",
                        help="only the loaders whose mode matches (open, view, copy, checksum, "
                             "cuda, torch, torch-wo, torch-mmap, torch-mmap-wo, torch-cuda, "
                             "safetensors, safetensors-cuda, read-chunked, read-fresh, read-index, "
                             "h2d-cuda)")
    parser.add_argument("--json", action="store_true", help="JSON on stdout instead of the table")
    parser.add_argument("--save", metavar="FILE", help="also write the JSON to FILE")
    args = parser.parse_args()

    python = find_python(args)
    tools = {"pthbench": os.path.abspath(find_pthbench(args)), "python": python}
    files = make_files(args, python)
    if not files:
        log("nothing to measure: name a checkpoint, or let torch generate the files")
        return 1
    gpu = gpu_present(python)
    meta = {"runs": args.runs, "notes": [], **versions(python),
            "machine": f"{os.cpu_count()} CPUs, {os.uname().machine}, "
                       f"{'a CUDA GPU' if gpu else 'no CUDA GPU'}",
            "load_average": os.getloadavg()}
    if not python:
        meta["notes"].append("torch.load and safetensors rows skipped: no Python with them")
    if not gpu:
        meta["notes"].append("CUDA rows skipped: no CUDA GPU visible to torch")
    cold_ok = os.access("/proc/sys/vm/drop_caches", os.W_OK)
    if args.cold and not cold_ok:
        meta["notes"].append("cold runs skipped: /proc/sys/vm/drop_caches is not writable "
                             "(needs root)")
    if not args.cold:
        meta["notes"].append("page cache warm only (--cold adds cold runs" +
                             ("" if cold_ok else "; needs root") + ")")
    meta["notes"].append(f"{args.pause:g} s pause before every run" if args.pause else
                         "runs back to back (--pause S sleeps before each)")
    la = meta["load_average"]
    meta["notes"].append(f"load average at start {la[0]:.2f} {la[1]:.2f} {la[2]:.2f} on "
                         f"{os.cpu_count()} CPUs")
    meta["tiny_rss_kib"] = tiny_baseline(tools["pthbench"], args.runs)
    tables = []
    for label, path, st in files:
        log(f"measuring {path}")
        tables.append(run_file(label, path, st, args, tools, gpu, cold=False))
        if args.cold and cold_ok:
            tables.append(run_file(label, path, st, args, tools, gpu, cold=True))
    for table in tables:
        table["summary"] = summary(table, meta["tiny_rss_kib"])
    if args.save:
        with open(args.save, "w") as f:
            json.dump({"meta": meta, "files": tables}, f, indent=1)
    if args.json:
        json.dump({"meta": meta, "files": tables}, sys.stdout, indent=1)
        print()
    else:
        print_table(tables, meta)
    return 0


if __name__ == "__main__":
    sys.exit(main())
