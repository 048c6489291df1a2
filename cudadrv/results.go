// SPDX-License-Identifier: BSD-3-Clause

package cudadrv

// Failed driver calls: the CUresult values the project names, derived from
// cd_types.h (the one list; tests/gpu/check_cuda_h.c proves it equal to
// cuda.h), the entry points an error names, and Result, the error type of
// every driver operation, with the predicates the core classifies by.

/*
#include "cd_shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
)

// CUresult values (CD_ERROR_* of cd_types.h).
const (
	Success                          = C.CD_SUCCESS
	ErrorInvalidValue                = C.CD_ERROR_INVALID_VALUE
	ErrorOutOfMemory                 = C.CD_ERROR_OUT_OF_MEMORY
	ErrorNotInitialized              = C.CD_ERROR_NOT_INITIALIZED
	ErrorDeinitialized               = C.CD_ERROR_DEINITIALIZED
	ErrorNoDevice                    = C.CD_ERROR_NO_DEVICE
	ErrorInvalidDevice               = C.CD_ERROR_INVALID_DEVICE
	ErrorInvalidContext              = C.CD_ERROR_INVALID_CONTEXT
	ErrorInvalidHandle               = C.CD_ERROR_INVALID_HANDLE
	ErrorNotFound                    = C.CD_ERROR_NOT_FOUND
	ErrorNotReady                    = C.CD_ERROR_NOT_READY
	ErrorIllegalAddress              = C.CD_ERROR_ILLEGAL_ADDRESS
	ErrorPeerAlreadyEnable           = C.CD_ERROR_PEER_ACCESS_ALREADY_ENABLED
	ErrorContextIsDestroyed          = C.CD_ERROR_CONTEXT_IS_DESTROYED
	ErrorAssert                      = C.CD_ERROR_ASSERT
	ErrorHostMemoryAlreadyRegistered = C.CD_ERROR_HOST_MEMORY_ALREADY_REGISTERED
	ErrorHostMemoryNotRegistered     = C.CD_ERROR_HOST_MEMORY_NOT_REGISTERED
	ErrorHardwareStackError          = C.CD_ERROR_HARDWARE_STACK_ERROR
	ErrorIllegalInstruction          = C.CD_ERROR_ILLEGAL_INSTRUCTION
	ErrorMisalignedAddress           = C.CD_ERROR_MISALIGNED_ADDRESS
	ErrorInvalidAddressSpace         = C.CD_ERROR_INVALID_ADDRESS_SPACE
	ErrorInvalidPC                   = C.CD_ERROR_INVALID_PC
	ErrorLaunchFailed                = C.CD_ERROR_LAUNCH_FAILED
	ErrorNotSupported                = C.CD_ERROR_NOT_SUPPORTED
)

// Entry is a driver entry point: its index in entry_points.h (the C enum
// CD_IDX_*), EntryNone for none.
type Entry int32

// Entry points that errors are classified by.
const (
	EntryNone                 Entry = -1
	EntryCtxGetCurrent        Entry = C.CD_IDX_cuCtxGetCurrent
	EntryCtxPushCurrent       Entry = C.CD_IDX_cuCtxPushCurrent
	EntryCtxPopCurrent        Entry = C.CD_IDX_cuCtxPopCurrent
	EntryCtxGetId             Entry = C.CD_IDX_cuCtxGetId
	EntryPointerGetAttributes Entry = C.CD_IDX_cuPointerGetAttributes
	EntryMemcpyAsync          Entry = C.CD_IDX_cuMemcpyAsync
	EntryMemcpy2DAsync        Entry = C.CD_IDX_cuMemcpy2DAsync
	EntryEventRecord          Entry = C.CD_IDX_cuEventRecord
	EntryEventQuery           Entry = C.CD_IDX_cuEventQuery
	EntryStreamSynchronize    Entry = C.CD_IDX_cuStreamSynchronize
	EntryLaunchHostFunc       Entry = C.CD_IDX_cuLaunchHostFunc
)

// String is the entry point's base name ("cuEventQuery"); it needs no
// loaded driver.
func (e Entry) String() string { return EntryName(int(e)) }

// EntryName names an entry point by its index in entry_points.h.
func EntryName(idx int) string {
	if idx < 0 || idx >= C.CD_NUM_ENTRIES {
		return "driver call"
	}
	return C.GoString(C.cd_entry_name[idx])
}

var (
	entriesOnce sync.Once
	entries     map[string]Entry
)

// EntryOf is the entry point of a base name ("cuEventQuery"), EntryNone for
// a name entry_points.h does not list.
func EntryOf(name string) Entry {
	entriesOnce.Do(func() {
		entries = make(map[string]Entry, C.CD_NUM_ENTRIES)
		for i := 0; i < C.CD_NUM_ENTRIES; i++ {
			entries[EntryName(i)] = Entry(i)
		}
	})
	if e, ok := entries[name]; ok {
		return e
	}
	return EntryNone
}

// Result is a failed CUDA driver call: which call, its CUresult and the
// result's name. It is the error type of every driver operation. Classify
// by Entry, Code and the predicates below; Call is for messages.
type Result struct {
	// Call names the failed call for messages: the entry point's name
	// (fakedrv: also the name of the fake's method for calls that have no
	// single entry point).
	Call string
	// Entry is the entry point that failed, EntryNone when Call is not one
	// of entry_points.h. Core asks, e.g., r.Entry == EntryCtxPopCurrent (the
	// operation succeeded, leaving its context failed) or EntryEventQuery
	// (the queried piece failed).
	Entry Entry
	Code  uint32
	Name  string
}

func (r *Result) Error() string {
	return fmt.Sprintf("%s failed: %s (%d)", r.Call, r.Name, r.Code)
}

// Sticky reports a CUresult after which the driver refuses every later call
// on the context, its releases included, until the program resets or
// destroys it. CUDA's documentation of CUresult says of 700 (illegal
// address), 710 (assert), 714-718 (hardware stack error, illegal
// instruction, misaligned address, invalid address space, invalid PC) and
// 719 (launch failed): "This leaves the process in an inconsistent state
// and any further CUDA work will return the same error." 709 (context is
// destroyed) counts too: a destroyed context, or a primary context reset
// under a retain, likewise answers nothing until the program recreates it.
func (r *Result) Sticky() bool {
	switch r.Code {
	case ErrorIllegalAddress, ErrorContextIsDestroyed, ErrorAssert, ErrorHardwareStackError,
		ErrorIllegalInstruction, ErrorMisalignedAddress, ErrorInvalidAddressSpace,
		ErrorInvalidPC, ErrorLaunchFailed:
		return true
	}
	return false
}

// Deinitialized reports CUDA_ERROR_DEINITIALIZED: the driver is shutting
// down (process exit); nothing is left to release.
func (r *Result) Deinitialized() bool { return r.Code == ErrorDeinitialized }

// errorName is the driver's name of a CUresult, "CUresult N" without one.
func errorName(code uint32) string {
	if name := C.cd_error_name(C.uint32_t(code)); name != nil {
		return C.GoString(name)
	}
	return fmt.Sprintf("CUresult %d", code)
}
