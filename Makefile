# The commands people type (DuckDB style). Everything goes through CMake
# presets (each names its generator, Ninja); Python means Debian's
# /usr/bin/python3 (numpy, torch, pytest live there) or the test venv built
# over it (TEST_PY).
PY        ?= /usr/bin/python3
JOBS      ?= $(shell nproc)
ARGS      ?=
export CCACHE_DIR ?= $(HOME)/.ccache
# Paths relative to the checkout in ccache's keys: a fresh clone elsewhere
# (CI) reuses the objects an earlier build of the same sources left.
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1

# The Python that runs the integration suite: the test venv (Debian's
# python3 and its packages, plus tritonclient and perf_analyzer from PyPI,
# pinned: scripts/install-pytools.sh).
TEST_PY   ?= $(CURDIR)/build/venv/bin/python

.PHONY: all deps pytools build debug run test test-all unit unit-ci release-ci gpu-ci integration asan asan-build tsan fuzz bench clean gpu help format format-check tidy typecheck torch-venv

all: build

help:
	@echo "make run [ARGS=...]   install deps, build Release, start on 127.0.0.1:8080"
	@echo "make test             what CI runs: format-check, typecheck (mypy), tidy, the Release server and the unit and gpu"
	@echo "                      tests asan does not run, the clang ASan+UBSan build (server, unit tests, fuzz targets) with the"
	@echo "                      integration suite against its server, TSan unit tests, the fuzzers"
	@echo "make test-all         make test, then the integration suite again against the Release server"
	@echo "make unit | integration (Release server) | asan | tsan | fuzz | gpu | debug | clean"
	@echo "make bench            the benchmarks (bench/*.py) against torch 2.15 from PyPI and Debian's 1.13"
	@echo "make pytools | torch-venv   the test venvs from PyPI (tritonclient, perf_analyzer, mypy, ...; torch 2.15)"
	@echo "make format | format-check | tidy   clang-format, its check and the file-size check, clang-tidy"

deps:
	@bash scripts/install-deps.sh

pytools: deps
	@bash scripts/install-pytools.sh

# torch 2.15 from PyPI in build/torch-venv (scripts/install-torch.sh): the
# peer of bench/ and PyTorch's flight-recorder analyzer (fr_trace) for the
# integration suite.
torch-venv: deps
	@bash scripts/install-torch.sh

build/build.ninja:
	cmake --preset release

build: deps build/build.ninja
	cmake --build build -j$(JOBS)

build-debug/build.ninja:
	cmake --preset debug

debug: deps build-debug/build.ninja
	cmake --build build-debug -j$(JOBS)

run: build
	./build/tensord $(ARGS)

unit: build
	ctest --test-dir build --output-on-failure -j$(JOBS) -L unit
	@./build/tests/conformance_tests --gtest_filter='ConformanceSummary.*' 2>/dev/null | grep '^conformance:'

# make test's share of the Release build: the server, the benchmarks, and the
# test binaries the asan stage does not run. The api, graphs, scheduler and
# server tests run there, instrumented (ASAN_UNIT): in CI once is enough, and
# their Release compile was a fifth of a cold make test's build time. make
# unit still builds and runs them all in Release.
# The test executables are read from the build (every <name>_tests but
# those), so a new test folder runs here without being listed.
ASAN_UNIT = api graphs scheduler server
ASAN_UNIT_RE = ($(subst $(eval) ,|,$(ASAN_UNIT)))
release-ci: deps build/build.ninja
	cmake --build build -j$(JOBS) --target tensord bench/all \
	  $$(ninja -C build -t targets all | sed -n 's/^\([a-z0-9_]*_tests\): phony$$/\1/p' | grep -v -x -E 'cmake_.*|$(ASAN_UNIT_RE)_tests')

unit-ci: release-ci
	ctest --test-dir build --output-on-failure -j$(JOBS) -L unit -LE '^unit_$(ASAN_UNIT_RE)$$'
	@./build/tests/conformance_tests --gtest_filter='ConformanceSummary.*' 2>/dev/null | grep '^conformance:'

# The gpu label: CUDA tests; they skip, saying why, where no device answers.
GPU_CTEST = @ctest --test-dir build -V -L gpu > build/gpu-tests.log 2>&1; rc=$$?; \
	  grep -E "Test +\#|Skipped|no CUDA|tests passed|Failed" build/gpu-tests.log; exit $$rc
gpu: build
	$(GPU_CTEST)

gpu-ci: release-ci
	$(GPU_CTEST)

# The integration suite against the Release server (make test runs it once,
# against the ASan server: see asan).
integration: build pytools torch-venv
	cd tests/integration && TENSORD_BIN=$(CURDIR)/build/tensord $(TEST_PY) -m pytest -q -p no:cacheprovider

# One clang build with ASan + UBSan and libFuzzer's coverage (the asan
# preset): the server, the parser-heavy unit tests and the fuzz targets share
# its objects. The preset's -fsanitize-ignorelist= names an absolute path,
# which would keep ccache from reusing objects across checkouts
# (CCACHE_BASEDIR does not rewrite it): left out of the hash
# (tests/fuzz/sanitizer_ignorelist.txt rarely changes; after editing it,
# rebuild with CCACHE_RECACHE=1).
build-asan/build.ninja:
	cmake --preset asan

asan-build: deps build-asan/build.ninja
	CCACHE_IGNOREOPTIONS='-fsanitize-ignorelist=*' cmake --build build-asan -j$(JOBS) \
	  --target tensord api_tests graphs_tests scheduler_tests server_tests fuzz_targets

# The unit tests above, then the whole integration suite against the
# instrumented server (leaks fail it: the fixture checks the exit status
# after SIGTERM, and sanitizer reports in its stderr).
asan: asan-build pytools torch-venv
	for t in api graphs scheduler server; do ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp ./build-asan/tests/$${t}_tests --gtest_brief=1 || exit 1; done
	cd tests/integration && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp TENSORD_BIN=$(CURDIR)/build-asan/tensord TENSORD_SANITIZED=1 \
	  $(TEST_PY) -m pytest -q -p no:cacheprovider

build-tsan/build.ninja:
	cmake --preset tsan

TSAN_TESTS = scheduler graphs streams dist server
tsan: deps build-tsan/build.ninja
	cmake --build build-tsan -j$(JOBS) --target $(addsuffix _tests,$(TSAN_TESTS))
	for t in $(TSAN_TESTS); do TSAN_OPTIONS=halt_on_error=1:suppressions=$(CURDIR)/tests/tsan.supp \
	  ./build-tsan/tests/$${t}_tests --gtest_brief=1 || exit 1; done

# libFuzzer targets (tests/fuzz, built by asan-build): each runs FUZZ_SECONDS
# on a copy of its seed corpus; a crash fails (input in build-asan/fuzz/artifacts/).
FUZZ_SECONDS ?= 25
fuzz: asan-build
	tests/fuzz/run_fuzzers.sh $(FUZZ_SECONDS) $(JOBS)

# mypy --strict over the Python client (it ships py.typed), from the tools
# venv (scripts/install-pytools.sh); its cache under build/.
typecheck: pytools
	build/tools-venv/bin/mypy --strict --cache-dir build/mypy-cache clients/python/tensord

# Each stage's wall time goes to build/test-times.txt (printed at the end).
STAGES = format-check typecheck tidy unit-ci gpu-ci asan tsan fuzz
test: deps
	@mkdir -p build; : > build/test-times.txt; t0=$$(date +%s); \
	for s in $(STAGES); do \
	  ts=$$(date +%s); $(MAKE) --no-print-directory $$s || exit 1; \
	  echo "make test: $$s $$(( $$(date +%s) - ts )) s" >> build/test-times.txt; \
	done; \
	cat build/test-times.txt; echo "make test: all stages passed in $$(( $$(date +%s) - t0 )) s"

test-all: test integration

# The benchmarks race today's torch (PyPI's 2.15, build/torch-venv) with
# Debian's 1.13 beside it as the old column (bench/benchlib.py torch_peers).
bench: build torch-venv
	cmake --build build -j$(JOBS) --target bench/all
	@for b in bench/*.py; do case $$b in */benchlib.py|*/torch_peer.py) continue;; esac; \
	  $(PY) $$b || true; done

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')

# Tools hold the line (STYLE.md 13): every C++ file clang-format clean, and
# none over 600 lines without a "Long file:" comment saying why
# (scripts/check-file-size.sh, Python and shell included).
format-check: deps
	@bad=""; rc=0; \
	for f in $$(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh'); do \
	  clang-format --dry-run -Werror "$$f" >/dev/null 2>&1 || bad="$$bad $$f"; \
	done; \
	if [ -n "$$bad" ]; then echo "format-check: not clang-format clean (run make format):$$bad"; rc=1; \
	else echo "format-check: $$(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | wc -l) files clean"; fi; \
	scripts/check-file-size.sh || rc=1; \
	if ! git ls-files '*.py' | xargs /usr/bin/python3 -c 'import sys; [compile(open(f).read(), f, "exec") for f in sys.argv[1:]]'; then \
	  echo "format-check: a Python file does not compile (above)"; rc=1; \
	else echo "format-check: $$(git ls-files '*.py' | wc -l) Python files compile"; fi; \
	exit $$rc

# clang-tidy's curated set (.clang-tidy: bugprone, performance, the naming
# rules of STYLE.md), warnings as errors, over the project's .cpp files in
# the Release build's compile database (scripts/run-tidy.sh says which).
# About 4 s of CPU per file: ~5 minutes on 2 cores, for the files whose
# key changed (scripts/tidy_keys.py; the rest were clean before).
tidy: deps build/build.ninja
	@scripts/run-tidy.sh build $(JOBS)

clean:
	rm -rf build build-debug build-asan build-tsan
