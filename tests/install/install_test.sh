#!/usr/bin/env bash
# Installs this build into a staging tree (meson install --destdir) and builds a tiny consumer
# against it every way a user would: pkg-config (shared, and static), CMake's find_package
# (pthload::pthload, pthload::pthload_static, and from C), Meson's dependency('pthload') on the
# installed tree, and Meson with pthload as a subproject (built from this source tree). Each
# consumer loads a fixture and must print the same line.
#   install_test.sh BUILD_DIR SOURCE_DIR FIXTURE SANITIZE   (SANITIZE: b_sanitize's value)
set -euo pipefail
build_dir=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
fixture=$3
sanitize=$4
consumer_src="$source_dir/tests/install/consumer"
work=$(mktemp -d "${TMPDIR:-/tmp}/pthload-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
jobs=$(nproc 2>/dev/null || echo 2)

# A sanitized libpthload needs sanitized consumers (the runtime must come first).
flags=()
if [ "$sanitize" != "none" ] && [ -n "$sanitize" ]; then flags=("-fsanitize=$sanitize"); fi
export CFLAGS="${flags[*]:-}" CXXFLAGS="${flags[*]:-}" LDFLAGS="${flags[*]:-}"

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

step "meson install --destdir"
meson install -C "$build_dir" --no-rebuild --quiet --destdir "$work/root" >/dev/null
prefix=$(meson introspect "$build_dir" --buildoptions |
  python3 -c 'import json,sys; o={x["name"]: x["value"] for x in json.load(sys.stdin)}; print(o["prefix"])')
libdir=$(meson introspect "$build_dir" --buildoptions |
  python3 -c 'import json,sys; o={x["name"]: x["value"] for x in json.load(sys.stdin)}; print(o["libdir"])')
root="$work/root$prefix"
case $libdir in /*) lib="$work/root$libdir" ;; *) lib="$root/$libdir" ;; esac
for f in "$root/include/pthload/pthload.hpp" "$root/include/pthload/pthload.h" \
         "$root/include/pthload/dlpack.hpp" "$lib/libpthload.so" "$lib/libpthload.a" \
         "$lib/pkgconfig/pthload.pc" "$lib/cmake/pthload/pthloadConfig.cmake" \
         "$lib/cmake/pthload/pthloadConfigVersion.cmake" "$root/bin/pthinspect" \
         "$root/share/man/man1/pthinspect.1"; do
  [ -e "$f" ] || fail "not installed: ${f#"$work/root"}"
done
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$root/bin/pthinspect" ls "$fixture" >/dev/null || fail "the installed pthinspect cannot list $fixture"
# The man page documents every subcommand pthinspect --help lists.
for command in $("$root/bin/pthinspect" --help | awk '/^Subcommands:/ {on = 1; next} on && !NF {exit} on {print $1}'); do
  grep -q "^\.B $command\b" "$root/share/man/man1/pthinspect.1" ||
    fail "pthinspect.1 does not document the subcommand '$command'"
done
if command -v groff >/dev/null; then
  warnings=$(groff -man -Tutf8 -ww -z "$root/share/man/man1/pthinspect.1" 2>&1)
  [ -z "$warnings" ] || fail "pthinspect.1: $warnings"
fi

expected=""
check() {  # check NAME PROGRAM: runs it on the fixture; every consumer must print the same line
  local out
  out=$("$2" "$fixture") || fail "$1 exited with $?"
  [ "$out" == "18 base 276" ] || fail "$1 printed '$out', not '18 base 276'"
  [ -z "$expected" ] && expected=$out
  [ "$out" == "$expected" ] || fail "$1 printed '$out', others '$expected'"
  echo "$1: $out"
}
static_only() {  # the program must not need libpthload.so
  if ldd "$1" | grep -q 'libpthload\.so'; then fail "$1 links libpthload.so"; fi
}

step "pkg-config (relocatable .pc, no prefix override)"
export PKG_CONFIG_PATH="$lib/pkgconfig"
mkdir "$work/pc"
# shellcheck disable=SC2046 # word splitting of pkg-config's flags is intended
c++ -std=c++20 $CXXFLAGS "$consumer_src/consumer.cpp" -o "$work/pc/consumer" \
  $(pkg-config --cflags --libs pthload) $LDFLAGS
# shellcheck disable=SC2046
cc -std=c99 $CFLAGS "$consumer_src/consumer.c" -o "$work/pc/consumer_c" \
  $(pkg-config --cflags --libs pthload) $LDFLAGS
static_libs=$(pkg-config --static --libs pthload | sed 's/-lpthload\b/-l:libpthload.a/')
# shellcheck disable=SC2086
c++ -std=c++20 $CXXFLAGS "$consumer_src/consumer.cpp" -o "$work/pc/consumer_static" \
  $(pkg-config --cflags pthload) $static_libs $LDFLAGS
check "pkg-config C++" "$work/pc/consumer"
check "pkg-config C" "$work/pc/consumer_c"
static_only "$work/pc/consumer_static"
check "pkg-config static" "$work/pc/consumer_static"

step "CMake find_package(pthload)"
# Ninja, which the project builds with: CMake's default generator needs make, which
# scripts/bootstrap does not install (apt's --no-install-recommends leaves it out with cmake).
cmake -G Ninja -S "$consumer_src" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$root" \
  -DCMAKE_BUILD_TYPE=Release >"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log"; fail "cmake configure"; }
cmake --build "$work/cmake" -j "$jobs" >>"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log"; fail "cmake build"; }
check "CMake pthload::pthload" "$work/cmake/consumer"
check "CMake pthload::pthload from C" "$work/cmake/consumer_c"
static_only "$work/cmake/consumer_static"
check "CMake pthload::pthload_static" "$work/cmake/consumer_static"

step "CMake version requests: any release of this soname up to this one"
# The consumer above asks for 0.4 (an older release of this soname). A probe (C only, set up
# once) asks for more: met from the soname's first release to this one, refused outside.
version=$(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --modversion pthload)
mkdir "$work/version-probe"
cat >"$work/version-probe/CMakeLists.txt" <<'PROBE'
cmake_minimum_required(VERSION 3.19)
project(pthload_version_probe C)
find_package(pthload ${REQUEST} QUIET)
if(NOT pthload_FOUND)
  message(FATAL_ERROR "find_package(pthload ${REQUEST}) found no pthload")
endif()
PROBE
request() {  # request VERSION met|refused
  local got=refused
  cmake -S "$work/version-probe" -B "$work/version-probe/build" -DCMAKE_PREFIX_PATH="$root" \
    "-DREQUEST=$1" >/dev/null 2>&1 && got=met
  [ "$got" == "$2" ] || fail "find_package(pthload $1) against $version: $got, expected $2"
}
first=$(sed -n 's/^set(_pthload_first_of_soname "\(.*\)")$/\1/p' \
  "$lib/cmake/pthload/pthloadConfigVersion.cmake")
[ -n "$first" ] || fail "pthloadConfigVersion.cmake names no first release of its soname"
IFS=. read -r major minor _ <<<"$version"
IFS=. read -r first_major first_minor _ <<<"$first"
request "$first" met
request "$major.$minor" met
request "$version" met
request "$first...$version" met
[ "$first_minor" -gt 0 ] && request "$first_major.$((first_minor - 1))" refused
request "$major.$((minor + 1))" refused
request "$((major + 1)).0" refused
request "$first...<$version" refused
echo "find_package(pthload X) against $version: met from $first to $version, refused outside"

step "Meson dependency('pthload'), installed"
meson setup "$work/meson" "$consumer_src" >"$work/meson.log" 2>&1 ||
  { cat "$work/meson.log"; fail "meson setup"; }
ninja -C "$work/meson" >>"$work/meson.log" 2>&1 || { cat "$work/meson.log"; fail "meson build"; }
check "Meson installed C++" "$work/meson/consumer"
check "Meson installed C" "$work/meson/consumer_c"

step "Meson subproject('pthload') from the source tree"
unset PKG_CONFIG_PATH
mkdir -p "$work/subproject/subprojects"
cp -r "$consumer_src/." "$work/subproject/"
ln -s "$source_dir" "$work/subproject/subprojects/pthload"
sanitize_args=()
[ ${#flags[@]} -gt 0 ] && sanitize_args=("-Db_sanitize=$sanitize" "-Db_lundef=false")
CFLAGS="" CXXFLAGS="" LDFLAGS="" meson setup "$work/subproject/build" "$work/subproject" \
  -Dsubproject=true "${sanitize_args[@]}" >"$work/sub.log" 2>&1 ||
  { cat "$work/sub.log"; fail "meson setup (subproject)"; }
ninja -C "$work/subproject/build" -j "$jobs" >>"$work/sub.log" 2>&1 ||
  { cat "$work/sub.log"; fail "meson build (subproject)"; }
static_only "$work/subproject/build/consumer"
check "Meson subproject C++" "$work/subproject/build/consumer"
check "Meson subproject C" "$work/subproject/build/consumer_c"
echo "install: every consumer printed '$expected'"
