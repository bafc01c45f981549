#!/usr/bin/env bash
# On a lent CUDA machine (no Debian archive there): unpack the archive that
# scripts/device-deps.sh made here, build tensord with CUDA, run the gpu test
# label, then bench/cuda.py. Logs go to $OUT (or ./device-out).
#
#   bash scripts/device-gpu.sh [STAGES]   STAGES: any of build,test,ordered,bench (default all);
#   the environment passes through to bench/cuda.py's server (TENSORD_CUDA_STREAM_ORDERED=1);
#   DEVICE_TARGETS names what ninja builds (default: the server and the two
#   executables of the gpu label; "all" builds everything).
set -uo pipefail

OUT=${OUT:-$PWD/device-out}
STAGES=${1:-build,test,ordered,bench}
mkdir -p "$OUT"
log() { echo "[device-gpu $(date +%T)] $*" | tee -a "$OUT/summary.txt"; }

{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
  nvcc --version | tail -2
  g++ --version | head -1
  cmake --version | head -1
  grep PRETTY /etc/os-release
  nproc
} >"$OUT/machine.txt" 2>&1
log "machine: $(tr '\n' ' ' <"$OUT/machine.txt")"

if [ -f .device/debdeps.tar.xz ]; then
  tar -C / --skip-old-files -xJf .device/debdeps.tar.xz && log "Debian deps unpacked"
  ldconfig
  # civetweb-targets.cmake (found through prometheus-cpp's config) names its server binary.
  [ -e /usr/bin/civetweb ] || touch /usr/bin/civetweb
fi

NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [[ $STAGES == *build* ]]; then
  t0=$(date +%s)
  # Warnings are errors on Debian's gcc 12 (CI); this machine's gcc and nvcc
  # may be newer and warn about new things: report them, do not stop on them.
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTENSORD_CUDA=ON \
    -DCMAKE_CUDA_COMPILER="$NVCC" -DTENSORD_WERROR=OFF -DCMAKE_CXX_FLAGS=-g1 -DTENSORD_BOOST_VERSION=$(sed -n "s/#define BOOST_LIB_VERSION \"\(.*\)\"/\1/p" /usr/include/boost/version.hpp | tr _ .) >"$OUT/configure.log" 2>&1 ||
    { log "configure failed"; tail -30 "$OUT/configure.log"; exit 1; }
  targets=${DEVICE_TARGETS:-tensord cuda_tests conformance_tests}
  [ "$targets" = all ] && targets=
  # shellcheck disable=SC2086 # a list of targets
  ninja -C build -k 0 $targets >"$OUT/build.log" 2>&1
  rc=$?
  log "build rc=$rc in $(($(date +%s) - t0)) s; $(grep -c 'error' "$OUT/build.log") lines with 'error'"
  grep -E "error|FAILED" "$OUT/build.log" | head -40
fi

if [[ $STAGES == *test* ]] && [ -x build/tests/cuda_tests ]; then
  # One process per test (ctest): a crash fails its test, not the rest.
  timeout 300 env -u TENSORD_CUDA_STREAM_ORDERED ctest --test-dir build -L gpu -j4 --timeout 120 --output-on-failure \
    >"$OUT/gpu-tests.log" 2>&1
  log "gpu label rc=$? $(grep -E 'tests passed|tests failed' "$OUT/gpu-tests.log")"
  grep -E "\*\*\*|Failure|Expected|Which is|actual" "$OUT/gpu-tests.log" | head -60
  # A backtrace of each crashed test (cuda-gdb also debugs host code; the
  # build has line tables).
  for t in $(grep -E "Test +#[0-9]+: .*\*\*\*(Failed|Exception)" "$OUT/gpu-tests.log" | sed -E 's/.*: ([^ ]+) .*/\1/' | head -8); do
    if grep -E -A30 "Test +#[0-9]+: $t " "$OUT/gpu-tests.log" | grep -q "Segmentation"; then
      timeout 90 cuda-gdb -q -batch -ex run -ex bt -ex "info threads" --args ./build/tests/cuda_tests --gtest_filter="$t" \
        >/tmp/bt.log 2>&1; { echo "== $t"; cat /tmp/bt.log; } >>"$OUT/backtraces.log"
      log "backtrace of $t:"
      grep -E "^#|signal" /tmp/bt.log | head -25
    fi
  done
fi

# The opt-in stream-ordered allocator and copies (ops/cuda/cuda_backend.cu).
if [[ $STAGES == *ordered* ]] && [ -x build/tests/cuda_tests ]; then
  TENSORD_CUDA_STREAM_ORDERED=1 timeout 300 ctest --test-dir build -L gpu -j4 --timeout 120 --output-on-failure \
    >"$OUT/gpu-tests-ordered.log" 2>&1
  log "gpu label, TENSORD_CUDA_STREAM_ORDERED=1: rc=$? $(grep -E 'tests passed|tests failed' "$OUT/gpu-tests-ordered.log")"
  grep -E "\*\*\*|Failure|Expected|Which is|actual" "$OUT/gpu-tests-ordered.log" | head -30
fi

if [[ $STAGES == *bench* ]] && [ -x build/tensord ]; then
  PYTHONUNBUFFERED=1 timeout 240 python3 bench/cuda.py --build build --reps "${BENCH_REPS:-5}" >"$OUT/bench-cuda.log" 2>&1
  log "bench/cuda.py rc=$?"
  cat "$OUT/bench-cuda.log" | tail -40
fi
