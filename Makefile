# The commands people type (DuckDB style). Everything goes through CMake
# presets; Python always means Debian's /usr/bin/python3 (numpy, torch,
# pytest live there).
PY        ?= /usr/bin/python3
JOBS      ?= $(shell nproc)
ARGS      ?=
export CCACHE_DIR ?= $(HOME)/.ccache
# Paths relative to the checkout in ccache's keys: a fresh clone elsewhere
# (CI) reuses the objects an earlier build of the same sources left.
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1

.PHONY: all deps build run test unit integration asan tsan fuzz bench clean gpu help format format-check tidy

all: build

help:
	@echo "make run [ARGS=...]   install deps, build Release, start on 127.0.0.1:8080"
	@echo "make test             install deps, build, run unit + integration tests, then the ASan run"
	@echo "make unit | integration | asan | tsan | fuzz | gpu | bench | clean"
	@echo "make format | format-check | tidy   clang-format, its check and the file-size check, clang-tidy"

deps:
	@bash scripts/install-deps.sh

build/build.ninja:
	cmake --preset release -G Ninja

build: deps build/build.ninja
	cmake --build build -j$(JOBS)

run: build
	./build/tensord $(ARGS)

unit: build
	ctest --test-dir build --output-on-failure -j$(JOBS) -L unit
	@./build/tests/conformance_tests --gtest_filter='ConformanceSummary.*' 2>/dev/null | grep '^conformance:'

# The gpu label: CUDA tests; they skip, saying why, where no device answers.
gpu: build
	@ctest --test-dir build -V -L gpu > build/gpu-tests.log 2>&1; rc=$$?; \
	  grep -E "Test +#|Skipped|no CUDA|tests passed|Failed" build/gpu-tests.log; exit $$rc

integration: build
	cd tests/integration && TENSORD_BIN=$(CURDIR)/build/tensord $(PY) -m pytest -q -p no:cacheprovider

# ASan + UBSan: the server binary and the parser-heavy unit tests, then the
# whole integration suite against the instrumented binary (leaks fail it:
# the fixture checks the exit status after SIGTERM).
build-asan/build.ninja:
	cmake --preset asan -G Ninja

asan: deps build-asan/build.ninja
	cmake --build build-asan -j$(JOBS) --target tensord api_tests graphs_tests scheduler_tests
	for t in api graphs scheduler; do ASAN_OPTIONS=detect_leaks=1 ./build-asan/tests/$${t}_tests --gtest_brief=1 || exit 1; done
	cd tests/integration && ASAN_OPTIONS=detect_leaks=1 TENSORD_BIN=$(CURDIR)/build-asan/tensord TENSORD_SANITIZED=1 \
	  $(PY) -m pytest -q -p no:cacheprovider

build-tsan/build.ninja:
	cmake --preset tsan -G Ninja

tsan: deps build-tsan/build.ninja
	cmake --build build-tsan -j$(JOBS) --target scheduler_tests graphs_tests streams_tests
	for t in scheduler graphs streams; do TSAN_OPTIONS=halt_on_error=1 ./build-tsan/tests/$${t}_tests --gtest_brief=1 || exit 1; done

# libFuzzer targets (tests/fuzz, clang + ASan + UBSan): each runs FUZZ_SECONDS
# on a copy of its seed corpus; a crash fails (input in build-fuzz/fuzz/artifacts/).
FUZZ_SECONDS ?= 25
build-fuzz/build.ninja:
	cmake --preset fuzz -G Ninja

# The preset's -fsanitize-ignorelist= names an absolute path, which would keep
# ccache from reusing objects across checkouts (CCACHE_BASEDIR does not
# rewrite it): left out of the hash (tests/fuzz/sanitizer_ignorelist.txt
# rarely changes; after editing it, rebuild with CCACHE_RECACHE=1).
fuzz: deps build-fuzz/build.ninja
	CCACHE_IGNOREOPTIONS='-fsanitize-ignorelist=*' cmake --build build-fuzz -j$(JOBS) --target fuzz_targets
	tests/fuzz/run_fuzzers.sh $(FUZZ_SECONDS) $(JOBS)

test: format-check tidy unit gpu integration asan tsan fuzz

bench: build
	@if [ -x build/bench/tensord_bench ]; then ./build/bench/tensord_bench; fi
	@for b in bench/*.py; do [ -f "$$b" ] && $(PY) $$b || true; done

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
# About 4 s of CPU per file: ~5 minutes on 2 cores.
tidy: deps build/build.ninja
	@scripts/run-tidy.sh build $(JOBS)

clean:
	rm -rf build build-debug build-asan build-tsan build-fuzz
