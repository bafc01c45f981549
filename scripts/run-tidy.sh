#!/usr/bin/env bash
# clang-tidy (the checkout's .clang-tidy, warnings as errors) over the
# project's own .cpp files in a build's compile_commands.json, N at a time.
#   scripts/run-tidy.sh [build dir, default build] [jobs, default nproc]
# Checked: the sources of the server's layers (SRC_DIRS) and, through them,
# their headers. Not checked: tests and benchmarks (gtest's and Google
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
trap 'rm -f "$log"' EXIT
# -Wno-unknown-warning-option: gcc-only flags (-Wno-restrict) in the
# database; -Wno-error: the compiler's own warnings are gcc's to enforce.
rc=0
echo "$files" | xargs -P "$jobs" -n 4 clang-tidy -p "$build" --quiet \
  --extra-arg=-Wno-unknown-warning-option --extra-arg=-Wno-error \
  "--header-filter=^$PWD/($SRC_DIRS)/" > "$log" 2>&1 || rc=$?
# clang-tidy reports each file's suppressed warning count on stderr: noise.
grep -v -E "^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$" "$log" || true
echo "run-tidy: $n files, $jobs jobs, $(( $(date +%s) - start )) s"
if [ $rc -ne 0 ]; then
  echo "run-tidy: findings above (warnings are errors: fix them, or NOLINT with a reason)"
  exit 1
fi
