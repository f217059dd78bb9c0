#!/usr/bin/env python3
"""pthinspect, end to end: `records --json --verify` against the zip fixtures' manifest, `cat`,
`tree` and `globals`, the exit status and one-line message of each kind of failure, and
`export --to pt` (pthload::save) read back by `ls`."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

PTHINSPECT, FIXTURES = sys.argv[1], sys.argv[2]
failures = []
checks = 0


def run(*args):
    return subprocess.run([PTHINSPECT, *args], capture_output=True, timeout=60)


def check(condition, what):
    global checks
    checks += 1
    if not condition:
        failures.append(what)


def manifest():
    files, current = {}, None
    with open(os.path.join(FIXTURES, "zip", "MANIFEST.txt")) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if fields[0] == "file":
                current = files.setdefault(fields[1], [])
            elif fields[0] == "record":
                name, size, csize, method, crc = fields[1:]
                current.append({"name": name, "size": int(size), "compressed_size": int(csize),
                                "compressed": method == "8", "crc32": crc})
    return files


for path, expected in manifest().items():
    result = run("records", "--json", "--verify", os.path.join(FIXTURES, path))
    check(result.returncode == 0, f"{path}: exit {result.returncode}: {result.stderr!r}")
    if result.returncode == 0:
        listed = json.loads(result.stdout)
        got = [{k: r[k] for k in ("name", "size", "compressed_size", "compressed", "crc32")}
               for r in listed["records"]]
        check(listed["format"] == "zip", f"{path}: format {listed['format']}")
        check(got == expected, f"{path}: records differ:\n  got      {got}\n  expected {expected}")

sample = os.path.join(FIXTURES, "sample.pt")
result = run("records", sample)
check(result.returncode == 0 and b"sample/data.pkl" in result.stdout, "records table of sample.pt")
result = run("cat", sample, "sample/version")
check(result.returncode == 0 and result.stdout == b"3\n", f"cat sample/version: {result.stdout!r}")

# tree and globals: the audit view. module.pt pickles a whole nn.Sequential, so its module
# classes are opaque; quantized.pt names only globals pthload interprets.
torch_fixtures = os.path.join(FIXTURES, "torch", "torch-2.15.0")
module_pt = os.path.join(torch_fixtures, "module.pt")
result = run("globals", "--json", module_pt)
check(result.returncode == 0, f"globals module.pt: exit {result.returncode}: {result.stderr!r}")
if result.returncode == 0:
    listed = json.loads(result.stdout)
    opaque = {(g["module"], g["name"]) for g in listed["globals"] if not g["interpreted"]}
    check(("torch.nn.modules.linear", "Linear") in opaque, f"Linear not opaque: {listed}")
    check(listed["opaque"] == len(opaque), f"opaque count {listed['opaque']} != {len(opaque)}")
    check(all(g["interpreted"] for g in listed["globals"] if g["module"] == "torch._utils"),
          f"a torch._utils rebuild reported opaque: {listed}")
result = run("globals", "--fail-on-opaque", module_pt)
check(result.returncode == 4 and b"OPAQUE" in result.stdout,
      f"globals --fail-on-opaque module.pt: exit {result.returncode}")
result = run("globals", "--fail-on-opaque", os.path.join(torch_fixtures, "quantized.pt"))
check(result.returncode == 0 and b" 0 opaque" in result.stdout,
      f"globals --fail-on-opaque quantized.pt: exit {result.returncode}: {result.stdout!r}")
result = run("tree", "--depth", "4", module_pt)
check(result.returncode == 0 and b"torch.nn.modules.linear.Linear" in result.stdout
      and b"torch._utils._rebuild_parameter(" in result.stdout,
      f"tree module.pt: exit {result.returncode}: {result.stdout[:300]!r}")
result = run("tree", "--items", "0", module_pt)
check(result.returncode == 0 and b"more)" in result.stdout, f"tree --items 0: {result.stdout!r}")

# A real torch.save (1.13) of torch.zeros(1).expand(2**20, 2**20): 2^40 elements over 4 bytes.
# Listing it is fine; its checksum is refused at once, naming the file, the record and the tensor.
expanded = os.path.join(FIXTURES, "..", "..", "fuzz", "regressions", "load",
                        "stride0_view_2_to_40_elements.pt")
result = run("ls", "--json", expanded)
check(result.returncode == 0 and json.loads(result.stdout)["tensors"][0]["shape"] == [2**20, 2**20],
      f"ls expanded view: exit {result.returncode}: {result.stdout[:200]!r}")
result = run("ls", "--json", "--checksum", expanded)
lines = result.stderr.decode().strip().splitlines()
check(result.returncode == 1 and len(lines) == 1 and "tensor 'expanded'" in lines[0]
      and "data/0" in lines[0] and "overlaps itself" in lines[0],
      f"ls --checksum expanded view: exit {result.returncode}: {lines}")

# Failures: one line on stderr naming the file, a non-zero exit, never a crash.
with tempfile.TemporaryDirectory() as tmp:
    not_zip = os.path.join(tmp, "not_zip.pt")
    with open(not_zip, "wb") as f:
        f.write(b"this is not a checkpoint" * 10)
    truncated = os.path.join(tmp, "truncated.pt")
    with open(sample, "rb") as f, open(truncated, "wb") as g:
        g.write(f.read()[:-30])
    for args, status in [(("records", not_zip), 1), (("records", truncated), 1),
                         (("records", os.path.join(tmp, "missing.pt")), 1),
                         (("cat", sample, "sample/nope"), 1), (("records",), 2),
                         (("tree", not_zip), 1), (("globals", truncated), 1),
                         (("tree", sample, "--depth", "x"), 2),
                         (("frobnicate", sample), 2)]:
        result = run(*args)
        lines = result.stderr.decode().strip().splitlines()
        check(result.returncode == status, f"{args}: exit {result.returncode}, expected {status}")
        if status == 1:
            check(len(lines) == 1 and lines[0].startswith("pthinspect: error: ")
                  and args[1] in lines[0], f"{args}: stderr {lines}")

# load --map-location's tag renames: every comma separates two TAG=DEVICE pairs, and each tag is
# renamed once (a repeated tag went to its first device; a trailing comma was ignored).
for spec in ("cpu=meta,cpu=cuda:0", "cpu=meta,", ",cpu=meta", "a=b,,c=d", "cpu=meta:01"):
    result = run("load", "--map-location", spec, sample)
    lines = result.stderr.decode().strip().splitlines()
    check(result.returncode == 1 and len(lines) == 1 and lines[0].startswith("pthinspect: error: "),
          f"load --map-location {spec}: exit {result.returncode}: {lines}")
result = run("load", "--map-location", "cpu=meta", sample)
check(result.returncode == 0 and b"meta" in result.stdout,
      f"load --map-location cpu=meta: exit {result.returncode}: {result.stdout!r} {result.stderr!r}")

# ls --checksum prints the same checksums as a table as it does as JSON.
sample_pt = os.path.join(FIXTURES, "sample.pt")
listed = json.loads(run("ls", "--json", "--checksum", sample_pt).stdout)
table = run("ls", "--checksum", sample_pt).stdout.decode().splitlines()
check(table and table[0].split()[-1] == "xxh3", f"ls --checksum header: {table[:1]}")
by_name = {line.split()[0]: line.split()[-1] for line in table[1:-1]}
for tensor in listed["tensors"]:
    check(by_name.get(tensor["name"]) == tensor["xxh3"],
          f"ls --checksum table: {tensor['name']} {by_name.get(tensor['name'])} != {tensor['xxh3']}")

# ls --json writes its document a tensor at a time, most entries by hand: every fixture's
# document must read exactly as a JSON library lays it out (indent 1, keys sorted). Documents
# with floats (a quantized tensor's scale) are left out: Python and nlohmann print some doubles
# differently.
laid_out = 0
for folder, _, files in os.walk(FIXTURES):
    for file in sorted(files):
        if not file.endswith((".pt", ".pth", ".bin", ".ckpt", ".safetensors")):
            continue
        result = run("ls", "--json", "--checksum", os.path.join(folder, file))
        if result.returncode != 0:
            continue
        text = result.stdout.decode()
        floats = []
        document = json.loads(text, parse_float=lambda number: floats.append(number) or 0.0)
        if floats:
            continue
        expected = json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        check(text == expected, f"ls --json {file}: not laid out as json.dumps(indent=1) lays it out")
        laid_out += 1
check(laid_out >= 100, f"ls --json layout: only {laid_out} fixtures compared")

# ---- export --to pt: a torch.save file that pthload lists exactly as it lists the source ----
LISTED = ("name", "dtype", "shape", "stride", "storage_offset", "xxh3")


def listing(path, *options, fields=LISTED):
    result = run("ls", "--json", *options, path)
    if result.returncode != 0:
        return None
    return [{k: t.get(k) for k in fields} for t in json.loads(result.stdout)["tensors"]]


def sound_zip(path):
    """Whether python's zipfile reads every record of `path` with its CRC-32 right."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip() is None
    except zipfile.BadZipFile:
        return False


with tempfile.TemporaryDirectory() as tmp:
    torch_2 = os.path.join(FIXTURES, "torch", "torch-2.15.0")
    exported = 0
    for source in [os.path.join(torch_2, f"{name}.pt") for name in
                   ("views", "tied", "dtypes", "dtypes_exotic", "module", "lone_view",
                    "legacy_views")] + [sample, os.path.join(FIXTURES, "safetensors",
                                                                "layers.safetensors")]:
        name = os.path.basename(source)
        out = os.path.join(tmp, name + ".pt")
        result = run("export", source, "--to", "pt", out)
        check(result.returncode == 0, f"export --to pt {name}: exit {result.returncode}: "
              f"{result.stderr!r}")
        if result.returncode != 0:
            continue
        exported += 1
        want = listing(source, "--checksum") or []
        check(result.stdout.decode().startswith(f"exported {len(want)} tensors (")
              and result.stdout.decode().rstrip().endswith(f" to {out}"),
              f"export --to pt {name}: summary {result.stdout!r}")
        check(sound_zip(out), f"export --to pt {name}: zipfile's testzip finds a bad record")
        got = listing(out, "--checksum")
        check(got == want, f"export --to pt {name}: ls of the output differs:\n  got  {got}\n"
              f"  want {want}")
    check(exported == 9, f"export --to pt: only {exported} of 9 fixtures exported")

    views = os.path.join(torch_2, "views.pt")
    tied = os.path.join(torch_2, "tied.pt")
    # --compact: each tensor its own storage of exactly its elements; the values are the same.
    out = os.path.join(tmp, "compact.pt")
    result = run("export", views, "--to", "pt", "--compact", out)
    check(result.returncode == 0 and sound_zip(out), f"export --compact: {result}")
    values = ("name", "dtype", "shape", "xxh3")
    got = listing(out, "--checksum", fields=values + ("storage_offset", "storage"))
    want = listing(views, "--checksum", fields=values)
    check(got is not None and [{k: t[k] for k in values} for t in got] == want,
          f"export --compact: values differ: {got} {want}")
    check(got is not None and all(t["storage_offset"] == 0 for t in got)
          and len({t["storage"] for t in got}) == len(got),
          f"export --compact: views kept: {got}")
    # --nest: nested dicts, read back under the same names.
    out = os.path.join(tmp, "nested.pt")
    result = run("export", tied, "--to", "pt", "--nest", out)
    check(result.returncode == 0 and sound_zip(out), f"export --nest: {result}")
    got = listing(out, "--checksum")
    want = listing(tied, "--checksum")
    check(got is not None and sorted(got, key=lambda t: t["name"])
          == sorted(want, key=lambda t: t["name"]), f"export --nest: {got} != {want}")
    # --alignment: every storage's payload starts at a multiple of it.
    out = os.path.join(tmp, "aligned.pt")
    result = run("export", views, "--to", "pt", "--alignment", "4096", out)
    check(result.returncode == 0, f"export --alignment 4096: {result}")
    if result.returncode == 0:
        records = json.loads(run("records", "--json", out).stdout)["records"]
        data = [r for r in records if "/data/" in r["name"]]
        check(data and all(r["offset"] % 4096 == 0 for r in data),
              f"export --alignment 4096: payloads at {[r['offset'] for r in data]}")
    result = run("export", views, "--to", "pt", "--alignment", "100", out)
    check(result.returncode == 1 and result.stderr.decode().count("\n") == 1,
          f"export --alignment 100: {result}")
    # --location: the tag of every storage; --keep-locations: each storage's own, from the file.
    out = os.path.join(tmp, "tagged.pt")
    result = run("export", sample, "--to", "pt", "--location", "cuda:0", out)
    check(result.returncode == 0, f"export --location cuda:0: {result}")
    tags = listing(out, fields=("location",))
    check(tags and all(t["location"] == "cuda:0" for t in tags), f"export --location: {tags}")
    cuda = os.path.join(torch_2, "cuda.pt")
    result = run("export", cuda, "--to", "pt", "--keep-locations", out)
    check(result.returncode == 0, f"export --keep-locations: {result}")
    kept = listing(out, fields=("name", "location"))
    check(kept == listing(cuda, fields=("name", "location")), f"export --keep-locations: {kept}")
    # The choosing options, as ls and load have them.
    out = os.path.join(tmp, "chosen.pt")
    result = run("export", tied, "--to", "pt", "--exclude", "list.*", "--rename-prefix",
                 "encoder.=enc.", out)
    names = [t["name"] for t in listing(out) or []]
    check(result.returncode == 0 and "enc.weight" in names and "decoder.weight" in names
          and not any(n.startswith("list.") for n in names),
          f"export --to pt --exclude --rename-prefix: {result} {names}")
    # A quantized tensor: refused, named, with the way out; --skip-unsupported names it instead.
    quantized = os.path.join(torch_2, "quantized.pt")
    out = os.path.join(tmp, "quantized.pt")
    result = run("export", quantized, "--to", "pt", out)
    lines = result.stderr.decode().strip().splitlines()
    check(result.returncode == 1 and len(lines) == 1 and "--skip-unsupported" in lines[0]
          and not os.path.exists(out), f"export --to pt quantized.pt: {result}")
    result = run("export", "--skip-unsupported", quantized, "--to", "pt", out)
    check(result.returncode == 0 and b"pthinspect: skipped " in result.stderr and sound_zip(out),
          f"export --to pt --skip-unsupported quantized.pt: {result}")
    # The options of --to pt with another target are refused, before anything is written.
    for option in (["--nest"], ["--compact"], ["--alignment", "4096"], ["--location", "cpu"],
                   ["--keep-locations"]):
        out = os.path.join(tmp, "other.safetensors")
        result = run("export", views, "--to", "safetensors", *option, out)
        check(result.returncode == 1 and b"applies to --to pt only" in result.stderr
              and not os.path.exists(out), f"export --to safetensors {option}: {result}")
    # Onto the checkpoint being exported: refused, the input kept as it was.
    itself = os.path.join(tmp, "itself.pt")
    shutil.copyfile(sample, itself)
    before = open(itself, "rb").read()
    result = run("export", itself, "--to", "pt", itself)
    check(result.returncode == 1 and b"is the checkpoint being exported" in result.stderr
          and open(itself, "rb").read() == before, f"export --to pt onto its input: {result}")

for failure in failures:
    print("FAIL:", failure)
print(f"pthinspect: {checks - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
