#!/usr/bin/env bash
# clang-tidy (the checkout's .clang-tidy, warnings as errors) over the
# project's own .cpp files in a build's compile_commands.json, N at a time.
#   scripts/run-tidy.sh [build dir, default build] [jobs, default nproc]
# Checked: the sources of the server's layers (SRC_DIRS) and, through them,
# their headers. A file whose key (scripts/tidy_keys.py: the file
# preprocessed, its flags, .clang-tidy, the tool's version) was clean before
# is not checked again: the keys of clean files are kept in
# $TENSORD_TIDY_CACHE (default ~/.cache/tensord/tidy); TIDY_ALL=1 checks all. Not checked: tests and benchmarks (gtest's and Google
# Benchmark's macros), CUDA sources (.cu: nvcc's flags are not clang's),
# third-party and system headers.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
jobs="${2:-$(nproc)}"
db="$build/compile_commands.json"
if [ ! -f "$db" ]; then
  echo "run-tidy: $db not found (configure first: cmake --preset release)" >&2
  exit 2
fi
SRC_DIRS="api|graphs|metrics|ops|scheduler|server|streams"
files=$(sed -n 's/^ *"file": "\(.*\)",\{0,1\}$/\1/p' "$db" | grep -E "^$PWD/($SRC_DIRS)/.*\.cpp$" | sort -u)
n=$(echo "$files" | wc -l)
start=$(date +%s)
log=$(mktemp)
keys=$(mktemp)
trap 'rm -f "$log" "$keys"' EXIT
cache="${TENSORD_TIDY_CACHE:-$HOME/.cache/tensord/tidy}"
mkdir -p "$cache"
echo "$files" | TIDY_EXTRA_KEY="$SRC_DIRS" /usr/bin/python3 scripts/tidy_keys.py "$db" "$PWD" "$jobs" > "$keys"
todo=""
while read -r key path; do
  if [ "${TIDY_ALL:-0}" = 1 ] || [ "$key" = uncached ] || [ ! -e "$cache/$key" ]; then todo="$todo $path"; fi
done < "$keys"
checked=$(echo $todo | wc -w)
# -Wno-unknown-warning-option: gcc-only flags (-Wno-restrict) in the
# database; -Wno-error: the compiler's own warnings are gcc's to enforce.
# One file per call, so that a clean one's key is kept.
rc=0
export build PWD SRC_DIRS cache keys
if [ -n "$todo" ]; then
  echo $todo | tr ' ' '\n' | xargs -P "$jobs" -n 1 sh -c '
    clang-tidy -p "$build" --quiet --extra-arg=-Wno-unknown-warning-option --extra-arg=-Wno-error \
      "--header-filter=^$PWD/($SRC_DIRS)/" "$0" || exit 1
    k=$(awk -v p="$0" "\$2 == p { print \$1; exit }" "$keys")
    [ -z "$k" ] || [ "$k" = uncached ] || touch "$cache/$k"' > "$log" 2>&1 || rc=$?
fi
# clang-tidy reports each file's suppressed warning count on stderr: noise.
grep -v -E "^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$" "$log" || true
echo "run-tidy: $n files ($checked checked, $(( n - checked )) clean before), $jobs jobs, $(( $(date +%s) - start )) s"
if [ $rc -ne 0 ]; then
  echo "run-tidy: findings above (warnings are errors: fix them, or NOLINT with a reason)"
  exit 1
fi
