#!/usr/bin/env bash
# Runs each libFuzzer target of build-asan for a bounded time on a copy of its
# seed corpus (tests/fuzz/corpus/<target>, copied to build-asan/fuzz/corpus so
# the repo is never modified), JOBS targets at a time, then prints one line per
# target: "fuzz <target>: N executions, C crashes". Exit status 1 when any
# target crashed (its log and the crashing input stay in build-asan/fuzz/).
#
#   tests/fuzz/run_fuzzers.sh [SECONDS [JOBS [TARGET...]]]
set -u
cd "$(dirname "$0")/../.."
SECONDS_EACH=${1:-25}
JOBS=${2:-2}
shift 2 2>/dev/null || shift $#
TARGETS=${*:-json_tensor json_b64_stream safetensors program config http}
OUT=build-asan/fuzz

# UBSan findings abort (the preset also compiles with -fno-sanitize-recover);
# BLAS stays on the fuzzer's thread.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export OPENBLAS_NUM_THREADS=1

run_one() {
  local t=$1 secs=$2 out=$3
  local dict=tests/fuzz/json.dict
  [ "$t" = http ] && dict=tests/fuzz/http.dict
  rm -rf "$out/corpus/$t" "$out/artifacts/$t"
  mkdir -p "$out/corpus/$t" "$out/artifacts/$t"
  cp tests/fuzz/corpus/"$t"/* "$out/corpus/$t/"
  "$out/${t}_fuzz" "$out/corpus/$t" -dict="$dict" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$out/artifacts/$t/" > "$out/$t.log" 2>&1
  echo $? > "$out/$t.rc"
}
export -f run_one

for t in $TARGETS; do
  if [ ! -x "$OUT/${t}_fuzz" ]; then
    echo "fuzz $t: $OUT/${t}_fuzz is not built" >&2
    exit 1
  fi
done
printf '%s\n' $TARGETS | xargs -P "$JOBS" -I{} bash -c "run_one {} $SECONDS_EACH $OUT"

status=0
for t in $TARGETS; do
  rc=$(cat "$OUT/$t.rc" 2>/dev/null || echo 1)
  runs=$(sed -n 's/^Done \([0-9]*\) runs in .*/\1/p' "$OUT/$t.log" | tail -1)
  crashes=$(find "$OUT/artifacts/$t" -type f | wc -l)
  if [ "$rc" != 0 ] && [ "$crashes" = 0 ]; then crashes=1; fi
  echo "fuzz $t: ${runs:-?} executions, $crashes crashes"
  if [ "$rc" != 0 ] || [ -z "$runs" ]; then
    status=1
    echo "---- $OUT/$t.log (last 60 lines; inputs in $OUT/artifacts/$t/)" >&2
    tail -n 60 "$OUT/$t.log" >&2
  fi
done
exit $status
