// SPDX-License-Identifier: BSD-3-Clause

package cudadrv_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/cudadrv"
	"github.com/cucopy/cucopy/internal/drvtest"
)

// Entry names come from entry_points.h and need no loaded driver; EntryOf
// inverts them.
func TestEntryNames(t *testing.T) {
	named := map[cudadrv.Entry]string{
		cudadrv.EntryCtxGetCurrent:        "cuCtxGetCurrent",
		cudadrv.EntryCtxPushCurrent:       "cuCtxPushCurrent",
		cudadrv.EntryCtxPopCurrent:        "cuCtxPopCurrent",
		cudadrv.EntryCtxGetId:             "cuCtxGetId",
		cudadrv.EntryPointerGetAttributes: "cuPointerGetAttributes",
		cudadrv.EntryMemcpyAsync:          "cuMemcpyAsync",
		cudadrv.EntryEventRecord:          "cuEventRecord",
		cudadrv.EntryEventQuery:           "cuEventQuery",
		cudadrv.EntryStreamSynchronize:    "cuStreamSynchronize",
		cudadrv.EntryLaunchHostFunc:       "cuLaunchHostFunc",
	}
	for e, name := range named {
		assert.Equal(t, name, e.String())
		assert.Equal(t, e, cudadrv.EntryOf(name))
	}
	assert.Equal(t, cudadrv.EntryNone, cudadrv.EntryOf("cuNotAnEntryPoint"))
	assert.Equal(t, "driver call", cudadrv.EntryNone.String())
}

// A Result names the call, the CUresult's name and its number; the
// predicates classify by code.
func TestResult(t *testing.T) {
	r := &cudadrv.Result{Call: "cuEventQuery", Entry: cudadrv.EntryEventQuery, Code: cudadrv.ErrorIllegalAddress, Name: "CUDA_ERROR_ILLEGAL_ADDRESS"}
	assert.Equal(t, "cuEventQuery failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)", r.Error())
	for _, code := range []uint32{700, 709, 710, 714, 715, 716, 717, 718, 719} {
		assert.True(t, (&cudadrv.Result{Code: code}).Sticky(), "%d is sticky", code)
	}
	for _, code := range []uint32{1, 2, 4, 201, 400, 600, 999} {
		assert.False(t, (&cudadrv.Result{Code: code}).Sticky(), "%d is not sticky", code)
	}
	assert.True(t, (&cudadrv.Result{Code: cudadrv.ErrorDeinitialized}).Deinitialized())
	assert.False(t, (&cudadrv.Result{Code: cudadrv.ErrorInvalidValue}).Deinitialized())
}

// Open: a library that cannot be loaded is a LoadError naming it; the C
// fake loads; the same path again is the same driver; another path after
// that is refused (one driver table per process). The loaded driver names
// failed calls and CUresults, and lists its optional entry points.
func TestOpen(t *testing.T) {
	_, err := cudadrv.Open("/nonexistent/libcuda.so.1")
	var le *cudadrv.LoadError
	require.True(t, errors.As(err, &le), "a LoadError: %v", err)
	assert.Equal(t, "/nonexistent/libcuda.so.1", le.Path)
	assert.Contains(t, err.Error(), "/nonexistent/libcuda.so.1")

	path := drvtest.PathOrSkip(t)
	drv, err := cudadrv.Open(path)
	require.NoError(t, err)
	assert.Equal(t, path, drv.Path())
	assert.Positive(t, drv.Version())
	again, err := cudadrv.Open(path)
	require.NoError(t, err)
	assert.Same(t, drv, again)
	_, err = cudadrv.Open(path + ".other")
	require.Error(t, err)
	assert.False(t, errors.As(err, &le), "a second path is not a load failure: %v", err)

	err = drv.Error(cudadrv.CallError{Entry: cudadrv.EntryMemcpyAsync, Result: cudadrv.ErrorIllegalAddress})
	var r *cudadrv.Result
	require.True(t, errors.As(err, &r))
	assert.Equal(t, "cuMemcpyAsync", r.Call)
	assert.Equal(t, cudadrv.EntryMemcpyAsync, r.Entry)
	assert.Equal(t, "CUDA_ERROR_ILLEGAL_ADDRESS", r.Name)
	assert.NoError(t, drv.Error(cudadrv.CallError{Entry: cudadrv.EntryMemcpyAsync}))

	caps := map[string]bool{}
	for _, c := range drv.Capabilities() {
		caps[c.Name] = c.Present
	}
	assert.Contains(t, caps, "cuCtxGetId", "an optional entry point")
	assert.NotContains(t, caps, "cuMemcpyAsync", "a required one is not a capability")
	assert.Equal(t, caps["cuCtxGetId"], drv.HasCtxID())
}
