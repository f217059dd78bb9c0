#!/usr/bin/env bash
# Writes tests/abi/libpthload.abi.gz, the ABI baseline tests/abi/abi_check.py compares the built
# library with: libabigail's abidw over a built libpthload.so, its exported interfaces and the
# types they reach. Run it when the soname's major changes (pthload_soversion in meson.build) and
# at each release, and commit the result (docs/compatibility.md).
#   tools/abi_baseline.sh [BUILD_DIR]   (default: build; a build with debug information)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
library=$(readlink -f "$build_dir/lib/libpthload.so")
if ! readelf -S "$library" | grep -q '\.debug_info'; then
  echo "abi_baseline: $library has no debug information (build with -g: debugoptimized)" >&2
  exit 1
fi
# Only the exported interfaces and the types they reach (about 0.75 MB of XML, 55 kB gzipped).
abidw --drop-undefined-syms --exported-interfaces-only --no-corpus-path --no-comp-dir-path \
  --no-show-locs "$library" |
  gzip -9n > tests/abi/libpthload.abi.gz
echo "tests/abi/libpthload.abi.gz: $(zgrep -c '<elf-symbol ' tests/abi/libpthload.abi.gz)" \
  "exported symbols, $(zgrep -o "soname='[^']*'" tests/abi/libpthload.abi.gz | head -1)"
