#!/usr/bin/env python3
"""How fast pthload writes a checkpoint, beside cp and torch.save, in one run (issue 54).

    tools/bench_save.py                                  # the 0.95 GB state dict, 5 runs
    tools/bench_save.py --file optim                     # 100 000 small tensors
    tools/bench_save.py --file llm --file my_model.pt --runs 9 --json out.json

What it does:
  1. The files: `llm` (default), bench_compare.py's ~0.95 GB LLM-like state dict, and `optim`,
     its AdamW-like optimizer state of 100 000 small tensors, generated with its own generators
     (MAKE_LLM, MAKE_OPTIM) by a Python with torch into --dir (default
     ~/.cache/pthload-bench-data, shared with bench_compare.py; made once, kept); or any
     checkpoint named with --file PATH. Each is read once first: page cache warm, nothing is
     dropped.
  2. Per run (--runs, default 5, medians), one after another on the same file, each writing into
     --out-dir (default DIR/out: the source's filesystem) and its output deleted after it:
     (a) `cp SRC DST`: the copy ceiling, a whole process;
     (b) `pthinspect export SRC --to pt DST [--flags]`: pthload's writer, a whole process (exec to
         exit) by this script's clock;
     (c) torch.save of the same tensors ({name: tensor}, named as pthinspect names them, tied
         tensors kept tied) in a fresh Python: the file torch.load-ed first (owned tensors in
         memory), and only the torch.save call timed; that process's RSS with the tensors
         loaded and its peak during the save (VmHWM reset through /proc/self/clear_refs before
         the call) are reported separately;
     (d) `pthinspect export` of a tiny file (tests/fixtures/sample.pt): its peak RSS is what
         the process costs before any checkpoint's size counts (the issue's bound: the writer's
         peak at most 64 MiB above it).
     pthload's writer fsyncs its file before renaming it into place; cp and torch.save do not.
     So the rows "cp + fsync" and "torch.save + fsync" add an fsync of their output (timed
     right after, in the same run) for the like-for-like comparison (--no-fsync leaves them
     out).
  3. Peak RSS of the whole processes (cp, pthinspect) is GNU time's %M (`/usr/bin/time`, a
     small process, so the spawning Python's peak, which Linux carries across exec into
     wait4's ru_maxrss, does not count); without /usr/bin/time, wait4's figure, marked.

The table: median seconds, GB/s (bytes of the file written / time), ratio of the row's time to
cp's and to torch.save's (both without fsync; "export / ... + fsync" in the summary), peak RSS
in MiB; the machine (CPUs, memory, filesystem) and the torch version are named above it.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bench_compare import MAKE_LLM, MAKE_OPTIM, warm  # noqa: E402
from save_crosscheck import DEFAULT_PTHINSPECT, default_torch2, torch_version  # noqa: E402

GENERATED = {"llm": ("llm.pt", MAKE_LLM), "optim": ("optim.pt", MAKE_OPTIM)}
TINY = os.path.join(ROOT, "tests", "fixtures", "sample.pt")
GNU_TIME = "/usr/bin/time"

# One torch.save, in-process: load the tensors (owned, in memory), name them as pthinspect
# does for dicts and lists of tensors (dotted paths; the same tensor under two names stays one
# storage), reset the peak RSS, time torch.save, then the fsync of what it wrote.
TORCH_SAVE = r"""
import gc, json, os, sys, time
src, dst = sys.argv[1], sys.argv[2]
import torch
try:
    obj = torch.load(src, map_location="cpu", weights_only=True)
except Exception:
    obj = torch.load(src, map_location="cpu", weights_only=False)
flat = {}
def walk(prefix, v):
    if isinstance(v, torch.Tensor):
        flat[prefix] = v
    elif isinstance(v, dict):
        for k, x in v.items():
            walk(f"{prefix}.{k}" if prefix else str(k), x)
    elif isinstance(v, (list, tuple)):
        for k, x in enumerate(v):
            walk(f"{prefix}.{k}" if prefix else str(k), x)
walk("", obj)
del obj
gc.collect()
def status(key):
    return int(next(l for l in open("/proc/self/status") if l.startswith(key)).split()[1])
rss_loaded = status("VmRSS:")
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5\n")          # VmHWM := VmRSS
    reset = True
except OSError:
    reset = False
t = time.perf_counter()
torch.save(flat, dst)
save_s = time.perf_counter() - t
peak = status("VmHWM:")
t = time.perf_counter()
fd = os.open(dst, os.O_RDONLY)
os.fsync(fd)
os.close(fd)
fsync_s = time.perf_counter() - t
print(json.dumps({"save_s": save_s, "fsync_s": fsync_s, "rss_loaded_kib": rss_loaded,
                  "peak_kib": peak, "peak_reset": reset, "tensors": len(flat),
                  "bytes": os.path.getsize(dst), "torch": torch.__version__}))
"""


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def run_timed(argv):
    """(wall s, peak RSS KiB, user+sys s, exact RSS?) of one whole process, by GNU time."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        exact = os.access(GNU_TIME, os.X_OK)
        full = [GNU_TIME, "-f", "%M %U %S", "-o", report.name] + argv if exact else argv
        start = time.perf_counter()
        pid = os.posix_spawn(full[0], full, os.environ,
                             file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
        _, status, usage = os.wait4(pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {os.waitstatus_to_exitcode(status)}")
        if exact:
            words = report.read().split()
            return wall, int(words[-3]), float(words[-2]) + float(words[-1]), True
        return wall, usage.ru_maxrss, usage.ru_utime + usage.ru_stime, False


def fsync_path(path):
    t = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t


def remove(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def build_type(binary):
    """The meson buildtype of the build folder holding binary, or None."""
    folder = os.path.dirname(os.path.abspath(binary))
    while folder != os.path.dirname(folder):
        intro = os.path.join(folder, "meson-info", "intro-buildoptions.json")
        if os.path.exists(intro):
            try:
                with open(intro) as f:
                    return next((o["value"] for o in json.load(f) if o["name"] == "buildtype"),
                                None)
            except (OSError, ValueError):
                return None
        folder = os.path.dirname(folder)
    return None


def machine(out_dir):
    mem = next((int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal:")), 0)
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                  if l.startswith("model name")), platform.machine())
    fs = subprocess.run(["stat", "-f", "-c", "%T", out_dir], capture_output=True, text=True)
    return (f"{os.cpu_count()} CPUs ({model}), {mem / 2**20:.1f} GiB memory, "
            f"{fs.stdout.strip() or '?'} filesystem at {out_dir}, Linux {platform.release()}")


def resolve_files(args, python):
    data = os.path.expanduser(args.dir)
    os.makedirs(data, exist_ok=True)
    paths = []
    for f in args.file or ["llm"]:
        if f in GENERATED:
            name, script = GENERATED[f]
            path = os.path.join(data, name)
            if not os.path.exists(path):
                if not python:
                    raise SystemExit(f"cannot generate {path}: no Python with torch (--python)")
                log(f"generating {path} (bench_compare.py's generator)")
                subprocess.run([python, "-c", script, path + ".tmp"], check=True)
                os.replace(path + ".tmp", path)
            paths.append(path)
        else:
            paths.append(os.path.abspath(f))
    return paths


def bench_file(src, args, python):
    out_dir = os.path.abspath(os.path.expanduser(args.out_dir or os.path.join(args.dir, "out")))
    os.makedirs(out_dir, exist_ok=True)
    notes = []
    if os.stat(out_dir).st_dev != os.stat(src).st_dev:
        notes.append(f"{out_dir} is not on {src}'s filesystem")
    stem = os.path.splitext(os.path.basename(src))[0]
    dst = os.path.join(out_dir, f"{stem}.pt")
    flags = args.flags.split()
    log(f"{src}: reading it once (page cache warm)")
    warm(src)
    rows = {k: {"s": [], "rss": [], "cpu": [], "bytes": []} for k in
            ("cp", "cp + fsync", "export", "torch.save", "torch.save + fsync")}
    loaded, exact = [], True
    torch_ver = None
    for run in range(args.runs):
        log(f"  run {run + 1}/{args.runs}")
        if args.pause:
            time.sleep(args.pause)
        # (a) cp, then its fsync
        remove(dst)
        wall, rss, cpu, ok = run_timed(["/bin/cp", src, dst])
        exact &= ok
        size = os.path.getsize(dst)
        sync = fsync_path(dst) if args.fsync else 0.0
        for k, s in (("cp", wall), ("cp + fsync", wall + sync)):
            rows[k]["s"].append(s)
            rows[k]["rss"].append(rss)
            rows[k]["cpu"].append(cpu)
            rows[k]["bytes"].append(size)
        remove(dst)
        # (b) pthinspect export
        if args.pause:
            time.sleep(args.pause)
        wall, rss, cpu, ok = run_timed([args.pthinspect, "export", src, "--to", "pt", dst] + flags)
        exact &= ok
        rows["export"]["s"].append(wall)
        rows["export"]["rss"].append(rss)
        rows["export"]["cpu"].append(cpu)
        rows["export"]["bytes"].append(os.path.getsize(dst))
        remove(dst)
        # (c) torch.save, in-process, tensors already in memory
        if python:
            if args.pause:
                time.sleep(args.pause)
            proc = subprocess.run([python, "-c", TORCH_SAVE, src, dst], capture_output=True,
                                  text=True)
            remove(dst)
            if proc.returncode != 0:
                raise RuntimeError(f"torch.save run failed: {proc.stderr.strip()[-500:]}")
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            torch_ver = r["torch"]
            for k, s in (("torch.save", r["save_s"]),
                         ("torch.save + fsync", r["save_s"] + r["fsync_s"])):
                rows[k]["s"].append(s)
                rows[k]["rss"].append(r["peak_kib"])
                rows[k]["bytes"].append(r["bytes"])
            loaded.append(r["rss_loaded_kib"])
            if not r["peak_reset"]:
                notes.append("torch.save's peak RSS includes the load's: /proc/self/clear_refs "
                             "could not reset it")
    if not args.fsync:
        rows.pop("cp + fsync")
        rows.pop("torch.save + fsync")
    if not python:
        rows.pop("torch.save")
        rows.pop("torch.save + fsync", None)
    table = {}
    for k, r in rows.items():
        if not r["s"]:
            continue
        s = statistics.median(r["s"])
        nbytes = statistics.median(r["bytes"])
        table[k] = {"s": s, "gbps": nbytes / 1e9 / s if s > 0 else None, "bytes": nbytes,
                    "rss_mib": statistics.median(r["rss"]) / 1024,
                    "cpu_s": statistics.median(r["cpu"]) if r["cpu"] else None,
                    "runs": r["s"]}
    for k, row in table.items():
        row["vs_cp"] = row["s"] / table["cp"]["s"] if table["cp"]["s"] > 0 else None
        ts = table.get("torch.save")
        row["vs_torch_save"] = row["s"] / ts["s"] if ts and ts["s"] > 0 else None
    result = {"file": src, "file_bytes": os.path.getsize(src), "rows": table, "notes": notes,
              "exact_rss": exact, "torch": torch_ver}
    if loaded:
        result["torch_rss_loaded_mib"] = statistics.median(loaded) / 1024
    return result


def tiny_rss(args):
    out_dir = os.path.abspath(os.path.expanduser(args.out_dir or os.path.join(args.dir, "out")))
    dst = os.path.join(out_dir, "tiny.pt")
    peaks = []
    for _ in range(args.runs):
        remove(dst)
        _, rss, _, _ = run_timed([args.pthinspect, "export", TINY, "--to", "pt", dst] +
                                 args.flags.split())
        peaks.append(rss)
        remove(dst)
    return statistics.median(peaks) / 1024


def print_report(results, meta):
    print(f"pthload's writer beside cp and torch.save — {meta['machine']}")
    print(f"torch {meta.get('torch') or 'not available'}; pthinspect {meta['pthinspect']}"
          f"{' ' + meta['flags'] if meta['flags'] else ''}; medians of {meta['runs']} runs; "
          "page cache warm (the source read once first, nothing dropped); outputs deleted "
          "after each run; cp and export timed as whole processes (exec to exit), torch.save "
          "in-process (import and load excluded); export fsyncs, cp and torch.save do not "
          "(the + fsync rows add it)")
    for res in results:
        print(f"\n{os.path.basename(res['file'])}: {res['file_bytes'] / 1e6:.1f} MB "
              f"({res['file']})")
        print(f"  {'':<22}{'median s':>10}{'GB/s':>8}{'/ cp':>8}{'/ torch.save':>14}"
              f"{'peak RSS MiB':>14}")
        for k, r in res["rows"].items():
            vs_cp = f"{r['vs_cp']:.3g}x" if r["vs_cp"] is not None else "-"
            vs_ts = f"{r['vs_torch_save']:.3g}x" if r["vs_torch_save"] is not None else "-"
            gbps = f"{r['gbps']:.3g}" if r["gbps"] is not None else "-"
            print(f"  {k:<22}{r['s']:>10.3f}{gbps:>8}{vs_cp:>8}{vs_ts:>14}{r['rss_mib']:>14.0f}")
        rows = res["rows"]
        lines = []
        if "torch_rss_loaded_mib" in res:
            lines.append(f"torch.save's process held {res['torch_rss_loaded_mib']:.0f} MiB with "
                         "the tensors loaded; its peak RSS above is the peak during the save")
        ex = rows["export"]
        if meta.get("tiny_mib") is not None:
            above = ex["rss_mib"] - meta["tiny_mib"]
            lines.append(f"export peak RSS {ex['rss_mib']:.0f} MiB = tiny file's "
                         f"{meta['tiny_mib']:.0f} MiB + {above:.0f} MiB (bound: + 64 MiB)")
        for k in ("cp + fsync", "torch.save + fsync"):
            if k in rows:
                lines.append(f"export (fsyncs) / {k} = {ex['s'] / rows[k]['s']:.2f}x")
        if ex.get("cpu_s") is not None:
            lines.append(f"export CPU (user + sys) {ex['cpu_s']:.3f} s")
        la = meta["load_average"]
        lines.append(f"load average at start {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}")
        for line in lines + res["notes"]:
            print(f"  {line}")
        if not res["exact_rss"]:
            print("  note: no /usr/bin/time: peak RSS is wait4's, which includes this "
                  "Python's peak (apt-get install time)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--file", action="append", metavar="llm|optim|PATH",
                        help="the workload (repeatable; default llm)")
    parser.add_argument("--pthinspect", default=DEFAULT_PTHINSPECT)
    parser.add_argument("--flags", default="", metavar="'FLAGS'",
                        help="more pthinspect export flags, e.g. --flags='--alignment 4096'")
    parser.add_argument("--python", help="a Python with torch (default: as save_crosscheck.py "
                        "finds one); without one, no torch.save rows")
    parser.add_argument("--no-torch", action="store_true", help="leave out torch.save")
    parser.add_argument("--dir", default="~/.cache/pthload-bench-data")
    parser.add_argument("--out-dir", help="where outputs go (default DIR/out)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pause", type=float, default=0, metavar="SECONDS",
                        help="sleep before every timed process (default 0)")
    parser.add_argument("--no-fsync", dest="fsync", action="store_false",
                        help="leave out the cp + fsync and torch.save + fsync rows")
    parser.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    args = parser.parse_args(argv)
    args.dir = os.path.expanduser(args.dir)
    args.pthinspect = os.path.abspath(args.pthinspect)
    if not os.access(args.pthinspect, os.X_OK):
        parser.error(f"{args.pthinspect}: not an executable pthinspect")
    python = None if args.no_torch else (args.python or default_torch2())
    if python and not torch_version(python):
        log(f"{python}: no torch; torch.save rows left out")
        python = None
    files = resolve_files(args, python)
    out_dir = os.path.abspath(os.path.expanduser(args.out_dir or os.path.join(args.dir, "out")))
    os.makedirs(out_dir, exist_ok=True)
    kind = build_type(args.pthinspect)
    meta = {"machine": machine(out_dir), "runs": args.runs, "flags": args.flags,
            "pthinspect": args.pthinspect + (f" ({kind} build)" if kind else ""),
            "load_average": os.getloadavg()}
    meta["tiny_mib"] = tiny_rss(args) if os.path.exists(TINY) else None
    results = [bench_file(f, args, python) for f in files]
    meta["torch"] = next((r["torch"] for r in results if r["torch"]), None)
    print_report(results, meta)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "files": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
