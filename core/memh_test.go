// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/internal/drvtest"
)

// Copies with memory handles and batches keep the hot path's promise (one
// cgo crossing per operation that is one run, nothing allocated), and a
// handle saves the pointer queries: a zcopy with both sides described makes
// no cuPointerGetAttributes call (counted on the C fake driver).
func TestMemhHotPath(t *testing.T) {
	ctx, iface, ep, dev := openOnDriver(t, core.IfaceParams{ThreadMode: core.ThreadSingle, MaxPoll: 16, MaxEvents: 64})
	host := make([]byte, 4096)
	buf := uintptr(unsafe.Pointer(&host[0]))
	hh, err := ctx.MemDescribe(uint64(buf), 4096)
	require.NoError(t, err)
	hd, err := ctx.MemDescribe(dev, 4096)
	require.NoError(t, err)
	defer func() { assert.NoError(t, ctx.MemDereg(hh)); assert.NoError(t, ctx.MemDereg(hd)) }()

	var iov16 [16]core.IOV
	var hs16 [16]*core.MemHandle
	var batch [16]core.BatchCopy
	for k := range iov16 {
		iov16[k] = core.IOV{Buffer: buf + uintptr(64*k), Length: 8}
		hs16[k] = hh
		batch[k] = core.BatchCopy{Dst: dev + uint64(128*k), Src: uint64(buf) + uint64(8*k), Len: 8, DstH: hd, SrcH: hh}
	}
	zcopy := func() {
		st, err := ep.ZcopyMemh(true, iov16[:1], hs16[:1], dev, hd, 0)
		if err != nil || st != core.InProgress {
			t.Fatalf("zcopy: %v %v", st, err)
		}
	}
	zcopy16 := func() {
		st, err := ep.ZcopyMemh(true, iov16[:], hs16[:], dev, hd, 0)
		if err != nil || st != core.InProgress {
			t.Fatalf("zcopy of 16: %v %v", st, err)
		}
	}
	copyBatch := func() {
		st, err := ep.Batch(batch[:], 0)
		if err != nil || st != core.InProgress {
			t.Fatalf("batch: %v %v", st, err)
		}
	}
	drain := func() {
		for n := 0; n == 0; {
			var err error
			if n, err = iface.Progress(); err != nil {
				t.Fatalf("progress: %v", err)
			}
		}
	}
	for range 4 { // the slot, stream and event
		zcopy()
		drain()
	}
	for _, c := range []struct {
		name  string
		issue func()
	}{{"memh zcopy", zcopy}, {"memh zcopy of a 16-entry run", zcopy16}, {"batch of 16", copyBatch}} {
		queries := drvtest.CallCount("cuPointerGetAttributes")
		before := cgoCalls()
		c.issue()
		assert.Equal(t, uint64(1), cgoCalls()-before, "%s: cgo crossings", c.name)
		if drvtest.IsFake() { // the fake counts its calls
			assert.Zero(t, drvtest.CallCount("cuPointerGetAttributes")-queries, "%s: pointer queries", c.name)
		}
		drain()
		assert.Zero(t, testing.AllocsPerRun(200, func() { c.issue(); drain() }), "%s: allocations per operation + progress", c.name)
	}
	require.NoError(t, ep.ShortMemh(true, buf, hh, 8, dev, hd))
	before := cgoCalls()
	require.NoError(t, ep.ShortMemh(true, buf, hh, 8, dev, hd))
	assert.Equal(t, uint64(1), cgoCalls()-before, "short with handles: cgo crossings")
	assert.Zero(t, testing.AllocsPerRun(200, func() {
		if err := ep.ShortMemh(false, buf, hh, 8, dev, hd); err != nil {
			t.Fatal(err)
		}
	}), "allocations per short copy with handles")
}

// BenchmarkZcopyRateMemh is BenchmarkZcopyRate with both sides described:
// core's own cost per operation without the pointer queries.
func BenchmarkZcopyRateMemh(b *testing.B) {
	ctx, iface, ep, dev := openOnDriver(b, core.IfaceParams{ThreadMode: core.ThreadSingle, MaxPoll: 16, MaxEvents: 64})
	host := make([]byte, 4096)
	buf := uintptr(unsafe.Pointer(&host[0]))
	hh, err := ctx.MemDescribe(uint64(buf), 4096)
	require.NoError(b, err)
	hd, err := ctx.MemDescribe(dev, 4096)
	require.NoError(b, err)
	iov := []core.IOV{{Buffer: buf, Length: 8}}
	hs := []*core.MemHandle{hh}
	rateLoop(b, iface, func() error { _, err := ep.ZcopyMemh(true, iov, hs, dev, hd, 0); return err })
}

// A batch of 64 entries with a handle of its own on each side names 128
// descriptions: all of them are carried (found in review: the request's
// array held 65 and the call panicked).
func TestBatchManyDistinctHandles(t *testing.T) {
	r := newRig(t, 1)
	var b [core.MaxIOV]core.BatchCopy
	var hs []*core.MemHandle
	var want [][]byte
	for k := range b {
		host := r.drv.Pageable(64)
		dev := r.drv.AllocDevice(0, 64)
		hh, err := r.ctx.MemDescribe(host, 64)
		require.NoError(t, err)
		hd, err := r.ctx.MemDescribe(dev, 64)
		require.NoError(t, err)
		hs = append(hs, hh, hd)
		want = append(want, fill(r.drv, host, 8, byte(k)))
		b[k] = core.BatchCopy{Dst: dev, Src: host, Len: 8, DstH: hd, SrcH: hh}
	}
	st, err := r.ep.Batch(b[:], 1)
	require.NoError(t, err)
	assert.Equal(t, core.InProgress, st)
	r.finish()
	for k := range b {
		eqBytes(t, want[k], r.drv.Bytes(b[k].Dst, 8), "entry %d", k)
	}
	for _, h := range hs {
		require.NoError(t, r.ctx.MemDereg(h))
	}
}
