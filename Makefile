# The two commands of README.md:
#   make run    installs what is missing, builds Release, runs the bundled examples
#   make test   installs what is missing, builds, runs every test with CTest
# Also: make test-sanitize (ASan+UBSan build of the CPU tests), make fuzz [FUZZ_RUNS=N],
#       make fuzz-long [MINUTES=N], make test-goldens-clang (the golden suite with a
#       clang-built etc),
#       make update-goldens, make format, make device-build (binaries for the GPU check,
#       DEVELOPERS.md)
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: run test deps pyenv build format clean update-goldens test-sanitize fuzz fuzz-long device-build test-goldens-clang torch-fixtures

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@ETC=$(BUILD)/apps/etc/etc scripts/run-example.sh

# The Python references first: the ExecuTorch wheel must be there when the build is
# configured, for etc's ExecuTorch plugin (src/executorch) and its test.
pyenv:
	@scripts/python-env.sh > /dev/null

test: deps pyenv build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer (CI runs it too;
# not the model zoo or the Core ATen suite, which the Release run covers and which would add
# minutes here).
test-sanitize: deps
	@cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DETC_CUDA=OFF -DETC_PIC=OFF -DETC_SANITIZE=address,undefined
	@cmake --build build-asan -j $(JOBS)
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-asan --output-on-failure -j $(JOBS) -L cpu -E "format|tidy|plugin|rehearsed|zoo|core-aten"

# The golden suite again with a clang-built etc (Release, no CUDA): exports must be
# byte-identical whichever compiler built etc (docs/golden-files.md). CI runs it.
test-goldens-clang: deps
	@CC=clang-14 CXX=clang++-14 cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=Release -DETC_CUDA=OFF -DETC_PIC=OFF -DETC_PYTHON=OFF -DETC_BUILD_TESTS=OFF >/dev/null
	@cmake --build build-clang --target etc -j $(JOBS)
	@bash test/golden/run_goldens.sh build-clang/apps/etc/etc $(CURDIR)

# libFuzzer targets (clang-14) for the .pte reader, graph JSON, safetensors and .npy readers.
fuzz: deps
	@scripts/fuzz.sh $(FUZZ_RUNS)

# A fuzzing campaign: MINUTES (default 10) per target with fresh seeds, on the kept corpus.
fuzz-long: deps
	@FUZZ_SECONDS=$$(( $${MINUTES:-10} * 60 )) scripts/fuzz.sh 1

# build-device/: Release sm_90 binaries to carry to a GPU machine (scripts/device-check.sh).
# The PyTorch programs of scripts/make-torch-fixtures.py, exported once with the pinned
# PyTorch into the cache (make test does this too, as a CTest fixture).
torch-fixtures:
	@test/torch/fixtures.sh

device-build:
	@JOBS=$(JOBS) scripts/build-for-device.sh

update-goldens: build
	@bash test/golden/run_goldens.sh $(BUILD)/apps/etc/etc $(CURDIR) --update

format:
	@find src apps test bench fuzz -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null | xargs -r clang-format -i

clean:
	@rm -rf $(BUILD)
