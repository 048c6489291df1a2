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
# linux/arm64: the cross build (cmake/toolchain-aarch64-linux-gnu.cmake) and
# its tests under qemu-user. `make test` ends with test-arm64 on an x86-64
# host unless TEST_ARM64=0.
ARM64_BUILD_DIR ?= $(BUILD_DIR)-arm64
ARM64_SYSROOT   ?= /usr/aarch64-linux-gnu
ARM64_QEMU      ?= qemu-aarch64 -L $(ARM64_SYSROOT)
ARM64_GO_ENV    := GOOS=linux GOARCH=arm64 CGO_ENABLED=1 CC=aarch64-linux-gnu-gcc
ARM64_APT       := gcc-aarch64-linux-gnu g++-aarch64-linux-gnu gfortran-aarch64-linux-gnu qemu-user
TEST_ARM64      ?= 1

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
.PHONY: help build test demo test-gpu bench clean prereqs install prereqs-arm64 build-arm64 test-arm64

help: ## list the targets
	@echo "cucopy — make targets:"
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z0-9-]+):.*## /  \1\t/' | expand -t 16

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

prereqs-arm64: prereqs ## install what the arm64 cross build needs (aarch64 cross gcc/g++/gfortran, qemu-user)
	@command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 && \
	 command -v aarch64-linux-gnu-gfortran >/dev/null 2>&1 && command -v qemu-aarch64 >/dev/null 2>&1 || { \
	  echo "prereqs-arm64: installing the aarch64 cross compilers and qemu-user (apt-get)"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(ARM64_APT) >/dev/null 2>&1 || { \
	    $(SUDO) apt-get update -qq && \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(ARM64_APT) >/dev/null; }; }

$(BUILD_DIR)/CMakeCache.txt: | prereqs
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

build: prereqs $(BUILD_DIR)/CMakeCache.txt ## configure (./build) and build library, fake driver, tests, tools
	cmake --build $(BUILD_DIR) -j$(JOBS)

test: build ## Go vet + tests (race on core, cudadrv), the CTest suite (fake driver), then test-arm64
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
	@if [ "$(TEST_ARM64)" = 0 ]; then echo "test: test-arm64 skipped (TEST_ARM64=0)"; \
	elif [ "$$(uname -m)" != x86_64 ]; then echo "test: test-arm64 skipped (it cross-builds from x86-64; this is $$(uname -m))"; \
	else $(MAKE) test-arm64; fi

$(ARM64_BUILD_DIR)/CMakeCache.txt: | prereqs-arm64
	cmake -S . -B $(ARM64_BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DCMAKE_TOOLCHAIN_FILE=$(CURDIR)/cmake/toolchain-aarch64-linux-gnu.cmake >/dev/null

build-arm64: prereqs-arm64 $(ARM64_BUILD_DIR)/CMakeCache.txt ## cross-build everything for linux/arm64 (./build-arm64; no MPI parts)
	cmake --build $(ARM64_BUILD_DIR) -j$(JOBS)

# The Go tests run under qemu against the arm64 fake driver; not under -race:
# the race detector's arm64 runtime needs a 48-bit address space, and
# qemu-user on x86-64 (47-bit) gives its guest 39 bits. Then the CTest suite
# (CTest runs each binary through qemu; tests/c/CMakeLists.txt lists what the
# emulator disables or shortens).
test-arm64: build-arm64 ## Go tests and the CTest suite for linux/arm64 under qemu-aarch64 (fake driver)
	@set -x; \
	env $(ARM64_GO_ENV) CUCOPY_CUDA_DRIVER=$(abspath $(ARM64_BUILD_DIR))/fakecuda/libcuda.so.1 \
	  $(GO) test -exec '$(ARM64_QEMU)' ./...
	ctest --test-dir $(ARM64_BUILD_DIR) --output-on-failure -j2
	@cat $(ARM64_BUILD_DIR)/glibc-floor.txt 2>/dev/null || true

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

clean: ## remove the build trees (x86-64, arm64) and Go's test cache
	rm -rf $(BUILD_DIR) $(ARM64_BUILD_DIR)
	-$(GO) clean -testcache
