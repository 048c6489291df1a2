// SPDX-License-Identifier: BSD-3-Clause

// The context's handle table and exports: cucopy_context_create (load the
// driver, build the memory domain) and cucopy_context_destroy.

package main

/*
#include <stdlib.h>
#include "capi.h"
*/
import "C"

import (
	"unsafe"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/cudadrv"
)

var contexts = newHandleTable[core.Context]("context", 1024)

const contextParamsKnown = C.CUCOPY_CONTEXT_PARAM_DRIVER_PATH | C.CUCOPY_CONTEXT_PARAM_LOG_LEVEL

// getenv reads the C environment: Go's os.Getenv sees a copy taken when the
// library loaded, and a program may setenv before cucopy_context_create.
func getenv(name string) string {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if v := C.getenv(cname); v != nil {
		return C.GoString(v)
	}
	return ""
}

//export cucopyGoContextCreate
func cucopyGoContextCreate(params *C.cucopy_context_params_t, wantOut C.int, out *C.uint64_t) (rc C.int) {
	const op = "context_create"
	defer func() {
		if r := recover(); r != nil {
			rc = internalError(op, r, nil)
		}
	}()
	if wantOut == 0 {
		return failf(core.ErrInvalid, op, "ctx_p is NULL")
	}
	if initErr != nil {
		return fail(initErr)
	}
	cfg, err := core.LoadConfig(getenv)
	if err != nil {
		return fail(&core.Error{Status: core.ErrInvalid, Op: op, Msg: err.Error()})
	}
	if params != nil {
		mask := uint64(params.field_mask)
		if err := checkMask(op, mask, contextParamsKnown); err != nil {
			return fail(err)
		}
		if mask&C.CUCOPY_CONTEXT_PARAM_DRIVER_PATH != 0 {
			if params.driver_path == nil || *params.driver_path == 0 {
				return failf(core.ErrInvalid, op, "driver_path is NULL or empty")
			}
			cfg.DriverPath = C.GoString(params.driver_path)
		}
		if mask&C.CUCOPY_CONTEXT_PARAM_LOG_LEVEL != 0 {
			lvl := core.LogLevel(params.log_level)
			if lvl < core.LogError || lvl > core.LogTrace {
				return failf(core.ErrInvalid, op, "log_level %d: want 0 (error) to 4 (trace)", int(lvl))
			}
			cfg.LogLevel = lvl
		}
	}
	core.SetLogLevel(cfg.LogLevel)
	drv, err := cudadrv.Open(cfg.DriverPath)
	if err != nil {
		st := core.ErrNoDriver
		if _, ok := err.(*cudadrv.LoadError); !ok {
			st = core.ErrInvalid // a second, different driver path
		}
		return fail(&core.Error{Status: st, Op: op, Err: err})
	}
	testFaultsAtContextCreate()
	ctx, err := core.NewContext(drv, cfg)
	if err != nil {
		return fail(err)
	}
	h := contexts.add(ctx)
	if h == 0 {
		return failf(core.ErrNoResource, op, "too many contexts")
	}
	*out = C.uint64_t(h)
	return 0
}

//export cucopyGoContextDestroy
func cucopyGoContextDestroy(h C.uint64_t) C.int {
	return closing(contexts, h, "context_destroy", func(ctx *core.Context) C.int {
		if err := ctx.Destroy(); err != nil {
			return fail(err)
		}
		contexts.remove(uint64(h))
		return 0
	})
}
