#!/usr/bin/env python3
"""Cross-checks `pthinspect scan`'s weights_only answer against torch itself: for every file given
(folders are walked), whether torch.load(path, weights_only=True, map_location='cpu') accepts it,
beside whether scan says it does. Prints one line per disagreement and the counts.

Needs torch (not in CI): run it with the Python of a virtual environment that has it,
    ~/venv-torch/bin/python tools/scan_crosscheck.py build/tools/pthinspect/pthinspect \\
        tests/fixtures
Exit status 1 when any file disagrees. With --record FILE, also writes torch's answers there, one
"path<TAB>accepted|refused" line per file, paths relative to FILE's folder: what CI, which has no
torch, compares scan with (tests/fixtures/weights_only_torch.txt).

torch.load runs in a child process, so that a file that crashes or hangs it costs that file only
(the child is restarted). weights_only=True never runs a payload unless torch's own rules fail,
which is what this script would then show; run it on hostile files only in a throwaway machine or
container all the same.
"""
import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys, warnings
warnings.filterwarnings("ignore")
import torch
print(json.dumps({"torch": torch.__version__}), flush=True)
for line in sys.stdin:
    path = line.rstrip("\n")
    try:
        torch.load(path, weights_only=True, map_location="cpu")
        result = {"accepted": True}
    except BaseException as e:  # noqa: BLE001 - every refusal counts, SystemExit included
        result = {"accepted": False, "error": f"{type(e).__name__}: {str(e)[:300]}"}
    print(json.dumps(result), flush=True)
"""

SKIP_SUFFIXES = (".json", ".json.gz", ".txt", ".py", ".md")


def files_of(paths):
    for path in paths:
        if os.path.isdir(path):
            for folder, _, names in sorted(os.walk(path)):
                for name in sorted(names):
                    if not name.endswith(SKIP_SUFFIXES):
                        yield os.path.join(folder, name)
        else:
            yield path


class Torch:
    def __init__(self):
        self.child = None
        self.version = None

    def start(self):
        self.child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                      cwd="/tmp")
        self.version = json.loads(self.child.stdout.readline())["torch"]

    def load(self, path):
        if self.child is None:
            self.start()
        self.child.stdin.write(os.path.abspath(path) + "\n")
        self.child.stdin.flush()
        line = self.child.stdout.readline()
        if not line:
            self.child = None
            return {"accepted": False, "error": "torch.load crashed the process"}
        return json.loads(line)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    args = sys.argv[1:]
    record = None
    if args[:1] == ["--record"]:
        record, args = args[1], args[2:]
    pthinspect, paths = args[0], args[1:]
    torch = Torch()
    answers = []
    counts = {"agree": 0, "disagree": 0, "accepted": 0, "refused": 0}
    for path in files_of(paths):
        scan = subprocess.run([pthinspect, "scan", "--json", path], capture_output=True)
        try:
            report = json.loads(scan.stdout)["files"][0]
        except (ValueError, KeyError, IndexError):
            print(f"{path}: scan gave no JSON (exit {scan.returncode})")
            counts["disagree"] += 1
            continue
        said = report.get("weights_only", {}).get("accepted")
        got = torch.load(path)
        answers.append((path, got["accepted"]))
        counts["accepted" if got["accepted"] else "refused"] += 1
        if said == got["accepted"]:
            counts["agree"] += 1
            continue
        counts["disagree"] += 1
        print(f"{path}: scan says {'accepted' if said else 'refused'}"
              f" ({report['weights_only'].get('reason', '')}), torch {torch.version} "
              f"{'accepts' if got['accepted'] else 'refuses: ' + got.get('error', '')}")
    if record:
        base = os.path.dirname(os.path.abspath(record))
        with open(record, "w") as f:
            f.write(f"# torch.load(path, weights_only=True, map_location='cpu') with torch "
                    f"{torch.version} (tools/scan_crosscheck.py --record)\n")
            for path, accepted in sorted(answers):
                rel = os.path.relpath(os.path.abspath(path), base)
                f.write(f"{rel}\t{'accepted' if accepted else 'refused'}\n")
    print(f"torch {torch.version}: {counts['agree']} files agree, {counts['disagree']} disagree "
          f"(torch accepted {counts['accepted']}, refused {counts['refused']})")
    sys.exit(1 if counts["disagree"] else 0)


if __name__ == "__main__":
    main()
