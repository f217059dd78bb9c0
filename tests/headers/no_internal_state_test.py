#!/usr/bin/env python3
"""Public headers expose no library state (issue 13): include/pthload/ must never declare or name
anything in a `detail` namespace, and what it names in `internal` (the friend class the library's
layers reach private members through, and the incomplete types behind pimpl pointers) may only be
forward-declared, or named in a private section of a class; and no function is a `set_*` setter.
A user reading a public header sees no state, no constructor from state and no setter.

Usage: no_internal_state_test.py INCLUDE_DIR"""
import pathlib
import re
import sys


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def problems_in(path):
    raw = path.read_text()
    found = []
    for number, line in enumerate(raw.splitlines(), 1):
        if re.search(r"\bdetail\b", line):
            found.append(f"{path.name}:{number}: names `detail`: {line.strip()}")
    code = strip_comments(raw)
    # Public types have no setters (dav1d's rule): options are aggregates, the rest is read-only;
    # the library changes a Tensor through internal::Access.
    for match in re.finditer(r"\bset_\w+\s*\(", code):
        line = code[: match.start()].count("\n") + 1
        found.append(f"{path.name}:{line}: declares a setter: {match.group(0)}")
    # Inside `namespace internal { ... }`: forward declarations only.
    for block in re.finditer(r"namespace\s+internal\s*\{(.*?)\}", code, flags=re.S):
        for decl in filter(None, (d.strip() for d in block.group(1).split(";"))):
            if not re.fullmatch(r"(struct|class)\s+\w+", decl):
                line = code[: block.start()].count("\n") + 1
                found.append(f"{path.name}:{line}: namespace internal defines more than a "
                             f"forward declaration: {decl!r}")
    # Elsewhere `internal::` only in private sections (or as the friend declaration).
    access = []  # one entry per open class/struct: its current access
    depth_of_class = []
    depth = 0
    for number, line in enumerate(code.splitlines(), 1):
        opens_class = re.match(r"\s*(class|struct)\s+(PTHLOAD_API\s+)?\w+[^;]*\{", line)
        if opens_class:
            access.append("private" if opens_class.group(1) == "class" else "public")
            depth_of_class.append(depth)
        label = re.match(r"\s*(public|private|protected)\s*:", line)
        if label and access:
            access[-1] = label.group(1)
        if "internal::" in line and not re.search(r"namespace\s+internal", line):
            is_friend = re.match(r"\s*friend\s+(struct|class)\s+internal::\w+\s*;", line)
            if not is_friend and (not access or access[-1] != "private"):
                found.append(f"{path.name}:{number}: names internal:: outside a private "
                             f"section: {line.strip()}")
        depth += line.count("{") - line.count("}")
        while depth_of_class and depth <= depth_of_class[-1] and not opens_class:
            depth_of_class.pop()
            access.pop()
    return found


def main():
    include = pathlib.Path(sys.argv[1])
    headers = sorted(include.glob("pthload/*.hpp")) + sorted(include.glob("pthload/*.h"))
    if not headers:
        print(f"no public headers under {include}")
        return 1
    problems = [p for header in headers for p in problems_in(header)]
    for problem in problems:
        print(problem)
    print(f"{len(headers)} public headers, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
