// SPDX-License-Identifier: BSD-3-Clause

package fakedrv

// Faults and accounting: injected failures (Fail), call counts, the
// violations the real driver would reject, live streams and events.

import (
	"fmt"

	"github.com/cucopy/cucopy/cudadrv"
)

// CUresult values the fake returns: cudadrv's (cd_types.h), under the
// names the core's tests use.
const (
	ErrInvalidValue     = cudadrv.ErrorInvalidValue
	ErrInvalidContext   = cudadrv.ErrorInvalidContext
	ErrInvalidHandle    = cudadrv.ErrorInvalidHandle
	ErrIllegalAddress   = cudadrv.ErrorIllegalAddress
	ErrContextDestroyed = cudadrv.ErrorContextIsDestroyed
)

// errNames are the names cuGetErrorName gives the codes the fake returns.
var errNames = map[uint32]string{
	cudadrv.ErrorInvalidValue:       "CUDA_ERROR_INVALID_VALUE",
	cudadrv.ErrorOutOfMemory:        "CUDA_ERROR_OUT_OF_MEMORY",
	cudadrv.ErrorDeinitialized:      "CUDA_ERROR_DEINITIALIZED",
	cudadrv.ErrorInvalidContext:     "CUDA_ERROR_INVALID_CONTEXT",
	cudadrv.ErrorInvalidHandle:      "CUDA_ERROR_INVALID_HANDLE",
	cudadrv.ErrorNotReady:           "CUDA_ERROR_NOT_READY",
	cudadrv.ErrorIllegalAddress:     "CUDA_ERROR_ILLEGAL_ADDRESS",
	cudadrv.ErrorContextIsDestroyed: "CUDA_ERROR_CONTEXT_IS_DESTROYED",
}

type fault struct {
	nth  int
	code uint32
}

// Fail makes the nth next call of method (1 = the next one) fail with code.
// "cuCtxPopCurrent" fails the pop at the end of a QueryEvents call: the
// leading completed events are still counted, and the error is returned too.
// For Copy only calls that get as far as issuing the copy count (the failure
// is cuMemcpyAsync's), so NEED_* round trips do not shift nth.
func (d *Driver) Fail(method string, nth int, code uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults[method] = append(d.faults[method], fault{nth, code})
}

// fault counts a call of method toward pending faults; non-zero when it fails.
func (d *Driver) fault(method string) uint32 {
	var code uint32
	fs := d.faults[method][:0]
	for _, f := range d.faults[method] {
		if f.nth--; f.nth == 0 {
			code = f.code
		} else {
			fs = append(fs, f)
		}
	}
	d.faults[method] = fs
	return code
}

func (d *Driver) enter(method string) uint32 {
	d.calls[method]++
	if method == "Copy" {
		return 0
	}
	return d.fault(method)
}

// result is a failed call: call is an entry point's name (its Entry is
// set) or a method of the fake (EntryNone), as Fail names it.
func result(call string, code uint32) error {
	return &cudadrv.Result{Call: call, Entry: cudadrv.EntryOf(call), Code: code, Name: errName(code)}
}

func errName(code uint32) string {
	if n, ok := errNames[code]; ok {
		return n
	}
	return fmt.Sprintf("CUresult %d", code)
}

func (d *Driver) violate(code uint32, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	d.violations = append(d.violations, msg)
	return result("fakedrv", code)
}

// Calls is how many times method was called; "CopyRun" counts the Copy
// calls that issued a run of more than one piece (one batch).
func (d *Driver) Calls(method string) int { d.mu.Lock(); defer d.mu.Unlock(); return d.calls[method] }

// Violations lists uses the real driver would reject or leave undefined.
func (d *Driver) Violations() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.violations...)
}

// LiveStreams and LiveEvents count created, not destroyed handles.
func (d *Driver) LiveStreams() int { d.mu.Lock(); defer d.mu.Unlock(); return len(d.streams) }
func (d *Driver) LiveEvents() int  { d.mu.Lock(); defer d.mu.Unlock(); return len(d.events) }
