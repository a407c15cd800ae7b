# Front door for building, testing and the demo. Everything builds with CMake + Ninja.
#   make            build epq (Release) into build/
#   make test       build, run every test, then build the unit tests with ASan/UBSan and run them
#   make demo       run the trained demo model (demo/) paged under a kernel-enforced budget
#   make bench      kernel benchmarks (docs/PERFORMANCE.md); scripts/bench_results.sh for the rest
#   make fuzz       fuzz every parser for 5 minutes each (clang + libFuzzer; scripts/fuzz.sh)

JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all build build-asan test test-release test-asan demo bench fuzz clean

all: build

build:
	cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	ninja -C build -j $(JOBS)

build-asan:
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEPQ_SANITIZE=ON $(CMAKE_FLAGS) >/dev/null
	ninja -C build-asan -j $(JOBS) epq_unit_tests

test-release: build
	cd build && ctest --output-on-failure -j 2

test-asan: build-asan
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j 2 -L unit

test: test-release test-asan

demo: build
	./scripts/demo.sh

bench: build
	./build/bench/epq_kernel_bench --benchmark_min_time=1

fuzz:
	./scripts/fuzz.sh 300

clean:
	rm -rf build build-asan build-fuzz
