"""The C example of saving (examples/save_tensors.c, compiled by the C compiler): it saves two
tensors from its memory with pthload_save and checks what pthload_load reads back; here the file
it wrote must also be a sound zip (every CRC-32 right) laid out as torch.save lays one out, and
list_tensors (the listing example) must list it as save_tensors did. Where torch is installed,
torch.load(weights_only=True) must read the same values.

usage: c_save_example_test.py SAVE_TENSORS LIST_TENSORS
"""
import pathlib
import subprocess
import sys
import tempfile
import zipfile

EXPECTED = [  # name, dtype, shape: what save_tensors.c saves
    ("layer.weight", "float32", "2,3"),
    ("steps", "int64", "4"),
]


def main() -> int:
    save_tensors, list_tensors = sys.argv[1], sys.argv[2]
    failures = []
    with tempfile.TemporaryDirectory() as scratch:
        out = pathlib.Path(scratch) / "two.pt"
        run = subprocess.run([save_tensors, str(out)], capture_output=True, text=True)
        if run.returncode != 0:
            print(f"FAIL save_tensors: exit {run.returncode}: {run.stderr}")
            return 1
        saved = [line.split("\t") for line in run.stdout.splitlines()]
        if [tuple(fields[:3]) for fields in saved] != EXPECTED:
            failures.append(f"save_tensors printed {saved}, expected {EXPECTED} and checksums")

        with zipfile.ZipFile(out) as archive:
            bad = archive.testzip()
            if bad is not None:
                failures.append(f"{out.name}: record {bad} fails its CRC-32")
            names = archive.namelist()
            # torch.save's layout: one top folder named after the file, data.pkl, the storages.
            if not all(name.startswith("two/") for name in names):
                failures.append(f"records outside the archive folder 'two/': {names}")
            for required in ("two/data.pkl", "two/version", "two/data/0", "two/data/1"):
                if required not in names:
                    failures.append(f"no record {required} in {names}")

        listed = subprocess.run([list_tensors, str(out)], capture_output=True, text=True)
        if listed.returncode != 0:
            failures.append(f"list_tensors: exit {listed.returncode}: {listed.stderr}")
        elif [line.split("\t") for line in listed.stdout.splitlines()] != saved:
            failures.append(f"list_tensors listed {listed.stdout!r}, save_tensors {run.stdout!r}")

        try:
            import torch  # noqa: PLC0415 (optional: most machines running the tests lack it)
        except ImportError:
            torch = None
        if torch is not None:
            state = torch.load(out, weights_only=True)
            want = {
                "layer.weight": torch.tensor([[0.5, -1.0, 2.25], [3.0, -4.5, 6.0]]),
                "steps": torch.tensor([1, 10, 100, -1000], dtype=torch.int64),
            }
            if list(state) != list(want):
                failures.append(f"torch.load: keys {list(state)}")
            for name, tensor in want.items():
                if name in state and not torch.equal(state[name], tensor):
                    failures.append(f"torch.load: {name} is {state[name]}, expected {tensor}")
            if "layer.weight" in state and not state["layer.weight"].requires_grad:
                failures.append("torch.load: layer.weight lost requires_grad")

    for failure in failures:
        print("FAIL", failure)
    print(f"save example: {'FAILED' if failures else 'ok'}"
          f"{'' if torch is not None else ' (torch not installed: torch.load not tried)'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
