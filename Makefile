# The two commands of README.md:
#   make run    installs what is missing, builds Release, runs the bundled examples
#   make test   installs what is missing, builds, runs every test with CTest
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: run test deps build format clean update-goldens

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@ETC=$(BUILD)/apps/etc/etc scripts/run-example.sh

test: build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

update-goldens: build
	@bash test/golden/run_goldens.sh $(BUILD)/apps/etc/etc $(CURDIR) --update

format:
	@find src apps test bench -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null | xargs -r clang-format -i

clean:
	@rm -rf $(BUILD)
