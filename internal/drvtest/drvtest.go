// SPDX-License-Identifier: BSD-3-Clause

// Package drvtest gives Go tests raw access to the CUDA driver the library
// loads ($CUCOPY_CUDA_DRIVER): device memory to copy to, and the driver's
// own entry points outside cudadrv.Interface. It wraps tests/common/testdrv,
// the C helper of the C suite. Only tests import it.
package drvtest

/*
#cgo CFLAGS: -I${SRCDIR}/../../cudadrv -I${SRCDIR}/../../tests/common -std=gnu11
#cgo LDFLAGS: -ldl
#include "testdrv.c"

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
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
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
