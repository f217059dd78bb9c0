#!/usr/bin/env python3
"""Counts the C++ API's public names, for comparing two versions of the library (issue 55's note).

  tools/public_names.py BUILD/lib/libpthload.so include/ [--list]

Type names: the classes, structs, enums and aliases declared at namespace scope in
include/pthload/*.hpp (namespace internal excepted). Functions: the distinct names of the
exported C++ functions (nm -D --defined-only, demangled), free (pthload::name) or member
(pthload::Class::name; constructors, destructors and operators counted apart), overloads once.
"""
import re
import subprocess
import sys
from pathlib import Path


def type_names(include: Path) -> set[str]:
    names = set()
    for header in sorted((include / "pthload").glob("*.hpp")):
        text = re.sub(r"//[^\n]*", "", header.read_text())
        in_internal = 0
        depth_at_internal = None
        depth = 0
        for line in text.splitlines():
            if re.match(r"namespace internal\b", line):
                depth_at_internal = depth
            m = re.match(r"(?:struct|class|enum class|enum|using)\s+(?:PTHLOAD_API\s+)?(\w+)", line)
            if m and depth_at_internal is None and not line.startswith(" "):
                names.add(m.group(1))
            depth += line.count("{") - line.count("}")
            if depth_at_internal is not None and depth <= depth_at_internal and "}" in line:
                depth_at_internal = None
    return names


def functions(library: str) -> tuple[set[str], set[str], set[str]]:
    out = subprocess.run(["nm", "-D", "--defined-only", "-C", library], check=True,
                         capture_output=True, text=True).stdout
    free, members, special = set(), set(), set()
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) < 3 or parts[1] not in "TtWw":
            continue
        symbol = parts[2]
        m = re.match(r"pthload::((?:\w+::)*)(~?\w+|operator\S*?)\(", symbol)
        if not m or "internal::" in m.group(1):
            continue
        scope, name = m.group(1).rstrip(":"), m.group(2)
        if not scope:
            free.add(name)
        elif name.startswith("operator") or name.startswith("~") or scope.split("::")[-1] == name:
            special.add(f"{scope}::{name}")
        else:
            members.add(f"{scope}::{name}")
    return free, members, special


def main() -> None:
    library, include = sys.argv[1], Path(sys.argv[2])
    types = type_names(include)
    free, members, special = functions(library)
    print(f"type names: {len(types)}")
    print(f"exported free-function names: {len(free)}")
    print(f"exported member-function names: {len(members)} "
          f"(+ {len(special)} constructors, destructors, operators)")
    if "--list" in sys.argv:
        for title, names in (("types", types), ("free", free), ("members", members),
                             ("special", special)):
            print(f"\n{title}:\n  " + "\n  ".join(sorted(names)))


if __name__ == "__main__":
    main()
