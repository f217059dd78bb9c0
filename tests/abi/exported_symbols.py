"""What libpthload.so exports is what its public headers declare, and nothing else.

usage: exported_symbols.py LIBPTHLOAD_SO INCLUDE_DIR

Reads the shared library's dynamic symbol table (nm -D --defined-only, demangled) and checks:
  - every C symbol is a function pthload.h declares with PTHLOAD_API, and every such function is
    exported (a version script that drops one breaks every C caller);
  - every C++ symbol is in namespace pthload and its first name there is a class or function the
    public headers declare exported (PTHLOAD_API): no internal namespace (pthload::zip,
    pthload::internal...), no standard library template instance (std::vector<pthload::Tensor>'s
    members), no symbol of a dependency;
  - every symbol carries the version node of the soname's major (PTHLOAD_<N>, lib/pthload.map).
Exit status 0 when all hold, 1 with the offenders listed, 77 (skipped) where nm is missing.
"""
import pathlib
import re
import shutil
import subprocess
import sys


def main() -> int:
    library, include_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    if shutil.which("nm") is None:
        print("no nm (binutils) on PATH: skipped")
        return 77
    c_header = (include_dir / "pthload" / "pthload.h").read_text()
    cpp_headers = "\n".join(p.read_text() for p in sorted((include_dir / "pthload").glob("*.hpp"))
                            if p.name != "export.hpp")  # PTHLOAD_API's own definition
    # What may be exported: the classes declared PTHLOAD_API and the functions declared so.
    exported_names = set(re.findall(r"\b(?:class|struct)\s+PTHLOAD_API\s+(\w+)", cpp_headers))
    exported_names |= set(re.findall(r"PTHLOAD_API\s[^;{()]*?\b(\w+)\s*\(", cpp_headers))
    soversion = re.search(r"#define PTHLOAD_SOVERSION (\d+)", c_header).group(1)
    node = f"PTHLOAD_{soversion}"
    declared_c = set(re.findall(r"PTHLOAD_API\s[^;{]*?\b(pthload_\w+)\s*\(", c_header))

    listing = subprocess.run(["nm", "-D", "--defined-only", "--with-symbol-versions", "-C",
                              str(library)], capture_output=True, text=True, check=True).stdout
    problems, exported_c, counts = [], set(), {"C": 0, "C++": 0}
    for line in listing.splitlines():
        parts = line.split(" ", 2)
        if len(parts) < 3:
            continue
        kind, symbol = parts[1], parts[2]
        if kind == "A" and symbol.startswith("PTHLOAD_"):
            continue  # the version node itself
        name, _, version = symbol.partition("@")
        version = version.lstrip("@")
        if version != node:
            problems.append(f"{symbol}: version '{version}', not {node}")
        if re.fullmatch(r"pthload_\w+", name):
            counts["C"] += 1
            exported_c.add(name)
            if name not in declared_c:
                problems.append(f"{name}: exported, but pthload.h declares no such PTHLOAD_API")
            continue
        match = re.fullmatch(r"(?:(?:typeinfo|typeinfo name|vtable) for )?pthload::(\w+)\b(.*)",
                             name)
        if match is None or " " in match.group(2).split("(")[0]:
            problems.append(f"{name}: not part of pthload's API")
            continue
        counts["C++"] += 1
        first = match.group(1)
        if first not in exported_names:
            problems.append(f"{name}: pthload::{first} is no PTHLOAD_API class or function of the "
                            "public headers")
    for name in sorted(declared_c - exported_c):
        problems.append(f"{name}: declared PTHLOAD_API in pthload.h, but not exported")
    print(f"{library.name}: {counts['C']} C symbols, {counts['C++']} C++ symbols, node {node}")
    for problem in problems:
        print("FAIL", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
