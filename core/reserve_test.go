// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
)

// threeRuns is a put from pieces on device 0, device 1 and device 0 again
// to host memory: three runs, two of them on device 0's context (not
// consecutive: two events there).
func threeRuns(r *rig, n int) (iov []core.IOV, host uint64, want []byte) {
	d0, d1 := r.drv.AllocDevice(0, 2*n), r.drv.AllocDevice(1, n)
	for k, p := range []uint64{d0, d1, d0 + uint64(n)} {
		iov = append(iov, core.IOV{Buffer: uintptr(p), Length: uint64(n)})
		want = append(want, fill(r.drv, p, n, byte(k+1))...)
	}
	return iov, r.drv.Pageable(3 * n), want
}

// An operation that does not fit now is refused before anything of it is
// issued (no piece copied, no stream waited for); the retry after progress
// copies everything, once.
func TestReserveRefusesBeforeIssuing(t *testing.T) {
	r := newRig(t, 2, func(p *core.IfaceParams) { p.MaxEvents = 2 })
	const n = 1024
	iov, host, want := threeRuns(r, n)
	other := r.drv.AllocDevice(0, 8)
	require.Equal(t, core.InProgress, r.put(host, other, 8, 1)) // one of device 0's two events in flight
	syncs, pending := r.drv.Calls("StreamSynchronize"), r.drv.Pending()

	st, err := r.ep.Zcopy(true, iov, host, 2)
	errStatus(t, core.ErrNoResource, err)
	assert.Equal(t, core.ErrNoResource, st)
	assert.Equal(t, pending, r.drv.Pending(), "nothing of the refused operation was issued")
	assert.Equal(t, syncs, r.drv.Calls("StreamSynchronize"), "no stream was waited for")

	r.drv.Run()
	_, got := r.progress()
	require.Equal(t, []done{{1, core.OK}}, got)
	st, err = r.ep.Zcopy(true, iov, host, 2)
	require.NoError(t, err)
	require.Equal(t, core.InProgress, st)
	r.drv.Run()
	_, got = r.progress()
	assert.Equal(t, []done{{2, core.OK}}, got)
	eqBytes(t, want, r.drv.Bytes(host, 3*n))
	s := r.ifc.Stats()
	assert.Equal(t, uint64(1), s.NoResource)
	assert.Equal(t, uint64(3), s.Dir[core.DirD2H].Pieces, "each piece copied once")
}

// An operation that needs more events in one context than max_events is
// refused at once, not with a NO_RESOURCE to retry forever, and nothing of
// it is issued.
func TestReserveNeverFits(t *testing.T) {
	r := newRig(t, 2, func(p *core.IfaceParams) { p.MaxEvents = 1 })
	iov, host, _ := threeRuns(r, 256)
	st, err := r.ep.Zcopy(true, iov, host, 3)
	errStatus(t, core.ErrInvalid, err)
	assert.Equal(t, core.ErrInvalid, st)
	assert.Contains(t, err.Error(), "more than max_events (1)")
	assert.Zero(t, r.drv.Pending())
	assert.Zero(t, r.ifc.Stats().NoResource)
}

// Planning costs a second classification of every piece, so it runs only
// when an operation could run out: not while every context can still
// create an operation's worth of events, and from the moment one has
// created events within the operation's piece count of max_events.
func TestReservePlansOnlyNearTheCap(t *testing.T) {
	const maxEvents = 8
	r := newRig(t, 2, func(p *core.IfaceParams) { p.MaxEvents = maxEvents })
	iov, host, _ := threeRuns(r, 64)
	copyCalls := func() int {
		t.Helper()
		before := r.drv.Calls("Copy")
		st, err := r.ep.Zcopy(true, iov, host, 0)
		require.NoError(t, err)
		require.Equal(t, core.InProgress, st)
		r.drv.Run()
		r.progress()
		return r.drv.Calls("Copy") - before
	}
	copyCalls() // the slots, streams and events exist
	assert.Equal(t, 3, copyCalls(), "far from the cap: one call per run, no plan")
	// 6 events in flight on device 0 at once: created events within 3
	// (the operation's pieces) of max_events there.
	small := r.drv.AllocDevice(0, 8)
	for k := 0; k < 6; k++ {
		require.Equal(t, core.InProgress, r.put(host, small, 8, 0))
	}
	r.drv.Run()
	r.progress()
	assert.Equal(t, 6, copyCalls(), "near the cap: each run planned, then issued")
}
