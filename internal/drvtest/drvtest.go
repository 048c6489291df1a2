// SPDX-License-Identifier: BSD-3-Clause

// Package drvtest gives Go tests raw access to the CUDA driver the library
// loads ($CUCOPY_CUDA_DRIVER): device memory to copy to, and the driver's
// own entry points outside cudadrv.Interface. It wraps tests/common/testdrv,
// the C helper of the C suite. Only tests import it.
package drvtest

/*
#cgo CFLAGS: -I${SRCDIR}/../../cudadrv -I${SRCDIR}/../../tests/common -I${SRCDIR}/../../tests/fakecuda -std=gnu11
#cgo LDFLAGS: -ldl
#include <stdint.h>
#include <stdlib.h>

#include "testdrv.c"
#include "fakecuda.h"

static int drvtest_load(void) { return testdrv_load(); }

static cdResult drvtest_alloc(int dev, size_t n, unsigned long long *ptr)
{
    cdContext ctx = NULL;
    cdContext popped = NULL;
    cdResult r = td.cuDevicePrimaryCtxRetain(&ctx, dev);
    if (r != CD_SUCCESS)
        return r;
    if ((r = td.cuCtxPushCurrent(ctx)) != CD_SUCCESS)
        return r;
    r = td.cuMemAlloc((cdDevicePtr *)ptr, n);
    td.cuCtxPopCurrent(&popped);
    return r;
}

enum { DRVTEST_HOST = 1, DRVTEST_MANAGED = 2, DRVTEST_POOL = 3, DRVTEST_DEVICE = 4 };

// Allocate n bytes of a kind with ctx current (pushed and popped again).
static cdResult drvtest_alloc_in(uintptr_t ctx, int kind, size_t n, unsigned long long *ptr)
{
    cdContext popped = NULL;
    cdResult r = td.cuCtxPushCurrent((cdContext)ctx);
    if (r != CD_SUCCESS)
        return r;
    switch (kind) {
    case DRVTEST_HOST: {
        void *p = NULL;
        r = td.cuMemHostAlloc(&p, n, CD_MEMHOSTALLOC_PORTABLE);
        *ptr = (unsigned long long)(uintptr_t)p;
        break;
    }
    case DRVTEST_MANAGED:
        r = td.cuMemAllocManaged((cdDevicePtr *)ptr, n, CD_MEM_ATTACH_GLOBAL);
        break;
    case DRVTEST_POOL:
        r = td.cuMemAllocAsync((cdDevicePtr *)ptr, n, NULL);
        if (r == CD_SUCCESS)
            r = td.cuCtxSynchronize();
        break;
    default:
        r = td.cuMemAlloc((cdDevicePtr *)ptr, n);
    }
    td.cuCtxPopCurrent(&popped);
    return r;
}

static cdResult drvtest_primary(int dev, uintptr_t *ctx)
{
    return td.cuDevicePrimaryCtxRetain((cdContext *)ctx, dev);
}

// cuCtxCreate makes the new context current: pop it again.
static cdResult drvtest_ctx_create(int dev, uintptr_t *out)
{
    cdContext ctx = NULL;
    cdContext popped = NULL;
    if (td.cuCtxCreate == NULL)
        return CD_ERROR_NOT_SUPPORTED;
    cdResult r = td.cuCtxCreate(&ctx, CD_CTX_SCHED_AUTO, dev);
    if (r != CD_SUCCESS)
        return r;
    *out = (uintptr_t)ctx;
    return td.cuCtxPopCurrent(&popped);
}

static cdResult drvtest_primary_reset(int dev)
{
    return td.cuDevicePrimaryCtxReset(dev);
}

static int drvtest_is_fake(void) { return td.is_fake; }
static int drvtest_device_count(void) { return td.device_count; }

static long drvtest_violations(void)
{
    fakecuda_counter_fn f = (fakecuda_counter_fn)testdrv_fake_sym("fakecuda_violations");
    return f != NULL ? f() : -1;
}

static long drvtest_calls(const char *name)
{
    fakecuda_calls_fn f = (fakecuda_calls_fn)testdrv_fake_sym("fakecuda_calls");
    return f != NULL ? f(name) : -1;
}

static int drvtest_poison(uintptr_t ctx, int code)
{
    fakecuda_poison_context_fn f =
        (fakecuda_poison_context_fn)testdrv_fake_sym("fakecuda_poison_context");
    if (f == NULL)
        return -1;
    f((cdContext)ctx, code);
    return 0;
}
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"
)

// DriverPath is the driver to test against: $CUCOPY_CUDA_DRIVER, else the
// fake driver of the build tree (build/fakecuda/libcuda.so.1) if it exists.
// "" means none is available.
func DriverPath() string {
	if p := os.Getenv("CUCOPY_CUDA_DRIVER"); p != "" {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "build", "fakecuda", "libcuda.so.1")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// PathOrSkip is DriverPath for a test that needs a C driver: without one it
// skips the test, except under CI (CI set, as in .ci/run), where make test
// builds the fake driver before the Go tests and a missing one means the
// test would prove nothing: it fails.
func PathOrSkip(t testing.TB) string {
	t.Helper()
	p := DriverPath()
	if p == "" {
		const why = "no C driver: make build makes build/fakecuda/libcuda.so.1 (or set CUCOPY_CUDA_DRIVER)"
		if os.Getenv("CI") != "" {
			t.Fatal(why + "; CI is set, so this is a failure, not a skip")
		}
		t.Skip(why)
	}
	return p
}

// Load loads the driver at path for the helpers (the library loads its own
// table; both resolve the same library).
func Load(path string) error {
	// With cgo, os.Setenv also sets the C environment testdrv reads.
	if err := os.Setenv("CUCOPY_CUDA_DRIVER", path); err != nil {
		return err
	}
	if C.drvtest_load() != 0 {
		return fmt.Errorf("drvtest: cannot load %s", path)
	}
	return nil
}

// AllocDevice allocates n bytes on dev in its primary context (retained).
func AllocDevice(dev, n int) (uint64, error) {
	var p C.ulonglong
	if r := C.drvtest_alloc(C.int(dev), C.size_t(n), &p); r != 0 {
		return 0, fmt.Errorf("drvtest: cuMemAlloc on device %d: CUresult %d", dev, int(r))
	}
	return uint64(p), nil
}

const (
	allocHost    = C.DRVTEST_HOST
	allocManaged = C.DRVTEST_MANAGED
	allocPool    = C.DRVTEST_POOL
	allocDevice  = C.DRVTEST_DEVICE
)

func allocIn(ctx uintptr, kind C.int, what string, n int) (uint64, error) {
	var p C.ulonglong
	if r := C.drvtest_alloc_in(C.uintptr_t(ctx), kind, C.size_t(n), &p); r != 0 {
		return 0, fmt.Errorf("drvtest: %s of %d bytes: CUresult %d", what, n, int(r))
	}
	return uint64(p), nil
}

// Primary retains dev's primary context (activating it) and returns it.
func Primary(dev int) (uintptr, error) {
	var ctx C.uintptr_t
	if r := C.drvtest_primary(C.int(dev), &ctx); r != 0 {
		return 0, fmt.Errorf("drvtest: cuDevicePrimaryCtxRetain(%d): CUresult %d", dev, int(r))
	}
	return uintptr(ctx), nil
}

// allocOnPrimary allocates in dev's primary context (retained).
func allocOnPrimary(dev int, kind C.int, what string, n int) (uint64, error) {
	ctx, err := Primary(dev)
	if err != nil {
		return 0, err
	}
	return allocIn(ctx, kind, what, n)
}

// AllocHost allocates n bytes of pinned host memory (cuMemHostAlloc,
// PORTABLE) in dev's primary context (retained).
func AllocHost(dev, n int) (uint64, error) {
	return allocOnPrimary(dev, allocHost, "cuMemHostAlloc", n)
}

// AllocManaged allocates n bytes of managed memory in dev's primary context (retained).
func AllocManaged(dev, n int) (uint64, error) {
	return allocOnPrimary(dev, allocManaged, "cuMemAllocManaged", n)
}

// AllocPool allocates n bytes from dev's default memory pool
// (cuMemAllocAsync): device memory with no owning context.
func AllocPool(dev, n int) (uint64, error) {
	return allocOnPrimary(dev, allocPool, "cuMemAllocAsync", n)
}

// CreateContext is cuCtxCreate on dev; the new context is not left current.
func CreateContext(dev int) (uintptr, error) {
	var ctx C.uintptr_t
	if r := C.drvtest_ctx_create(C.int(dev), &ctx); r != 0 {
		return 0, fmt.Errorf("drvtest: cuCtxCreate(%d): CUresult %d", dev, int(r))
	}
	return uintptr(ctx), nil
}

// AllocIn allocates n bytes of device memory owned by ctx (cuMemAlloc).
func AllocIn(ctx uintptr, n int) (uint64, error) { return allocIn(ctx, allocDevice, "cuMemAlloc", n) }

// ResetPrimary is cuDevicePrimaryCtxReset: dev's primary context loses
// everything it owns and becomes inactive; its handle persists.
func ResetPrimary(dev int) error {
	if r := C.drvtest_primary_reset(C.int(dev)); r != 0 {
		return fmt.Errorf("drvtest: cuDevicePrimaryCtxReset(%d): CUresult %d", dev, int(r))
	}
	return nil
}

// IsFake says whether the loaded driver is the fake one (tests/fakecuda).
func IsFake() bool { return C.drvtest_is_fake() != 0 }

// CallCount is the fake driver's count of calls of entry point name so far
// (-1 on another driver or for an unknown name).
func CallCount(name string) int64 {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	return int64(C.drvtest_calls(cs))
}

// DeviceCount is the loaded driver's device count.
func DeviceCount() int { return int(C.drvtest_device_count()) }

// Violations is the fake driver's violation count (fakecuda_violations), -1
// on a real driver.
func Violations() int { return int(C.drvtest_violations()) }

// Poison gives ctx the fake driver's sticky error code (0 clears it;
// fakecuda_poison_context); false on a real driver.
func Poison(ctx uintptr, code int) bool { return C.drvtest_poison(C.uintptr_t(ctx), C.int(code)) == 0 }
