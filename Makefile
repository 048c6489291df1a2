# SPDX-License-Identifier: BSD-3-Clause
#
# Front door. The real build is CMake (CMakeLists.txt) and `go`; this file
# installs missing prerequisites and runs them. `make help` lists the targets.

SHELL       := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
export PATH := /usr/local/go/bin:$(PATH)

BUILD_DIR   ?= build
BUILD_TYPE  ?= RelWithDebInfo
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)
GO          ?= go
# Go packages tested under the race detector (pure Go core and the binding):
# import paths matching this extended regex.
RACE_PKGS   ?= /(core|cudadrv)(/|$$)
PERFTEST    := $(BUILD_DIR)/bin/cucopy_perftest
DEMO_ITERS  ?= 20
BENCH_ARGS  ?= --devices all --sizes 8,4K,64K,1M,16M,64M
FAKE_DRIVER := $(BUILD_DIR)/fakecuda/libcuda.so.1
PREFIX      ?= /usr/local

# Without HOME (some CI runners) Go has no cache directory: use the build tree,
# as CMakeLists.txt does.
ifeq ($(HOME)$(GOCACHE),)
export GOCACHE := $(CURDIR)/$(BUILD_DIR)/go/cache
export GOPATH  := $(CURDIR)/$(BUILD_DIR)/go/path
export GOFLAGS += -modcacherw
endif

SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

MAKEFLAGS   += --no-print-directory
.DEFAULT_GOAL := help
.PHONY: help build test demo test-gpu bench clean prereqs install

help: ## list the targets
	@echo "cucopy — make targets:"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## /  \1\t/' | expand -t 12

prereqs: ## install what is missing (cmake via apt-get; checks go and a C compiler)
	@command -v cmake >/dev/null 2>&1 || { \
	  echo "prereqs: installing cmake (apt-get)"; \
	  $(SUDO) apt-get install -y -qq cmake >/dev/null 2>&1 || { \
	    $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq cmake >/dev/null; }; }
	@command -v $(GO) >/dev/null 2>&1 || { \
	  echo "prereqs: go not found on PATH or in /usr/local/go/bin; install Go 1.26" >&2; exit 1; }
	@command -v cc >/dev/null 2>&1 && command -v c++ >/dev/null 2>&1 || { \
	  echo "prereqs: installing gcc/g++ (apt-get)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq build-essential >/dev/null; }
	@command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1 || { \
	  echo "prereqs: installing Open MPI and gfortran for examples/mpi (apt-get)"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev gfortran >/dev/null 2>&1 || { \
	    $(SUDO) apt-get update -qq && \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev gfortran >/dev/null; }; }
	@command -v mpicc.mpich >/dev/null 2>&1 && command -v mpiexec.mpich >/dev/null 2>&1 || { \
	  echo "prereqs: installing MPICH for libcucopy_mpi_mpich.so (apt-get; mpicc/mpirun stay Open MPI's)"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mpich libmpich-dev >/dev/null 2>&1 || { \
	    $(SUDO) apt-get update -qq && \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mpich libmpich-dev >/dev/null; }; }
	@command -v gfortran >/dev/null 2>&1 && command -v pkg-config >/dev/null 2>&1 || { \
	  echo "prereqs: installing gfortran and pkg-config for the install tests (apt-get)"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gfortran pkg-config >/dev/null 2>&1 || { \
	    $(SUDO) apt-get update -qq && \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gfortran pkg-config >/dev/null; }; }

$(BUILD_DIR)/CMakeCache.txt: | prereqs
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

build: prereqs $(BUILD_DIR)/CMakeCache.txt ## configure (./build) and build library, fake driver, tests, tools
	cmake --build $(BUILD_DIR) -j$(JOBS)

test: build ## Go vet + tests (race on core, cudadrv), then the CTest suite (fake driver)
	@all=$$($(GO) list -e ./... 2>/dev/null); \
	race=$$(grep -E '$(RACE_PKGS)' <<<"$$all" || true); \
	rest=$$(grep -vE '$(RACE_PKGS)' <<<"$$all" || true); \
	if [ -z "$$all" ]; then echo "test: no Go packages yet"; exit 0; fi; \
	set -x; \
	$(GO) vet ./...; $(GO) vet -tags cucopy_testhooks ./capi; \
	if [ -n "$$race" ]; then $(GO) test -race $$race; fi; \
	if [ -n "$$rest" ]; then $(GO) test $$rest; fi
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j2
	@cat $(BUILD_DIR)/glibc-floor.txt 2>/dev/null || true

# Real GPUs when nvidia-smi lists one, else the fake two-GPU driver (said so).
PICK_DRIVER = if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then \
	  echo "$@: real GPUs found (nvidia-smi -L); using the installed CUDA driver"; \
	else \
	  echo "$@: no GPU found; using the fake two-GPU driver $(FAKE_DRIVER) (its numbers mean nothing)"; \
	  export CUCOPY_CUDA_DRIVER=$$PWD/$(FAKE_DRIVER) FAKECUDA_DEVICES=2; \
	fi

demo: build ## device info and a short multi-device perftest (real GPUs if present, else fake 2-GPU driver)
	@$(PICK_DRIVER); \
	set -x; \
	$(BUILD_DIR)/bin/cucopy_info; \
	$(PERFTEST) --devices all --sizes 8,4K,1M,16M --iters $(DEMO_ITERS)

test-gpu: build ## run the C suite's binaries against the real driver (tests/run-gpu.sh)
	tests/run-gpu.sh $(BUILD_DIR)

bench: build ## perftest on every device: CSV (build/bench.csv), a table, then the multi-thread rate (cucopy_mtrate)
	@$(PICK_DRIVER); \
	set -x; \
	$(PERFTEST) $(BENCH_ARGS) --format csv | tee $(BUILD_DIR)/bench.csv; \
	$(PERFTEST) $(BENCH_ARGS) --format table; \
	$(BUILD_DIR)/bin/cucopy_mtrate

install: build ## install into $(PREFIX) (default /usr/local; DESTDIR=... stages)
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)

clean: ## remove the build tree and Go's test cache
	rm -rf $(BUILD_DIR)
	-$(GO) clean -testcache
