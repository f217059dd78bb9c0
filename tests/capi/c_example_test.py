"""The C example (examples/list_tensors.c, compiled by the C compiler) on torch.save fixtures: its
names, dtypes, shapes and XXH3-64 checksums must equal what torch.load saw when the fixture was
made (tests/fixtures/torch/*/NAME.expected.json, written by tools/torch_dump.py).

usage: c_example_test.py LIST_TENSORS FIXTURES_DIR
"""
import json
import pathlib
import subprocess
import sys

FIXTURES = ["views", "dtypes", "module", "tied", "cuda", "legacy_views"]


def main() -> int:
    program, fixtures_dir = sys.argv[1], pathlib.Path(sys.argv[2])
    failures = 0
    checked = 0
    for version_dir in sorted((fixtures_dir / "torch").iterdir()):
        for name in FIXTURES:
            checkpoint = version_dir / f"{name}.pt"
            expected_path = version_dir / f"{name}.expected.json"
            if not checkpoint.exists() or not expected_path.exists():
                continue
            expected = json.loads(expected_path.read_text())["tensors"]
            run = subprocess.run([program, str(checkpoint)], capture_output=True, text=True)
            if run.returncode != 0:
                print(f"FAIL {checkpoint}: exit {run.returncode}: {run.stderr}")
                failures += 1
                continue
            got = [line.split("\t") for line in run.stdout.splitlines()]
            want = [[t["name"], t["dtype"], ",".join(str(s) for s in t["shape"]), t["xxh3"]]
                    for t in expected]
            if got != want:
                print(f"FAIL {checkpoint}:")
                for g, w in zip(got, want):
                    if g != w:
                        print(f"  got  {g}\n  want {w}")
                if len(got) != len(want):
                    print(f"  {len(got)} lines, expected {len(want)}")
                failures += 1
            checked += 1
    if checked < 8:
        print(f"FAIL: only {checked} fixtures found under {fixtures_dir}")
        return 1
    print(f"{checked} fixtures: {'FAILED' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
