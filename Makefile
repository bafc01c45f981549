# The commands people type (DuckDB style). Everything goes through CMake
# presets; Python always means Debian's /usr/bin/python3 (numpy, torch,
# pytest live there).
PY        ?= /usr/bin/python3
JOBS      ?= $(shell nproc)
ARGS      ?=
export CCACHE_DIR ?= $(HOME)/.ccache

.PHONY: all deps build run test unit integration asan tsan bench clean gpu help format

all: build

help:
	@echo "make run [ARGS=...]   install deps, build Release, start on 127.0.0.1:8080"
	@echo "make test             install deps, build, run unit + integration tests, then the ASan run"
	@echo "make unit | integration | asan | tsan | gpu | bench | clean"

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

test: unit gpu integration asan tsan

bench: build
	@if [ -x build/bench/tensord_bench ]; then ./build/bench/tensord_bench; fi
	@for b in bench/*.py; do [ -f "$$b" ] && $(PY) $$b || true; done

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')

clean:
	rm -rf build build-debug build-asan build-tsan
