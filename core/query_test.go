// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
)

// One progress call asks the driver layer about every slot with pieces in
// flight in one call (one cgo crossing on the real binding): here eight
// slots, two devices times four lanes.
func TestProgressOneQueryForAllSlots(t *testing.T) {
	r := newRig(t, 2, func(p *core.IfaceParams) {
		p.ThreadMode = core.ThreadMulti
		p.Lanes = 4
	})
	host := r.drv.AllocHost(4096, true)
	devs := []uint64{r.drv.AllocDevice(0, 4096), r.drv.AllocDevice(1, 4096)}
	eps := []*core.Ep{r.ep}
	for len(eps) < 4 {
		ep, err := r.ifc.NewEp()
		require.NoError(t, err)
		eps = append(eps, ep)
	}
	comp := uintptr(1)
	for round := 0; round < 2; round++ { // the second round with every slot made
		for _, ep := range eps {
			for _, dev := range devs {
				st, err := ep.Zcopy(true, []core.IOV{{Buffer: uintptr(host), Length: 8}}, dev, comp)
				require.NoError(t, err)
				require.Equal(t, core.InProgress, st)
				comp++
			}
		}
		r.drv.Run()
		before := r.drv.Calls("QuerySlots")
		n, got := r.progress()
		assert.Equal(t, 8, n)
		assert.Len(t, got, 8)
		assert.Equal(t, 1, r.drv.Calls("QuerySlots")-before, "driver-layer calls in one progress over 8 slots")
	}
	before := r.drv.Calls("QuerySlots")
	n, _ := r.progress()
	assert.Zero(t, n)
	assert.Equal(t, before, r.drv.Calls("QuerySlots"), "nothing in flight: no call at all")
}

// Once a queue's head is done, its newest event answers for the segment:
// two event queries complete five pieces; a segment done part-way goes on
// in order.
func TestProgressNewestFirst(t *testing.T) {
	r := newRig(t, 1)
	dev, host := r.drv.AllocDevice(0, 4096), r.drv.Pageable(4096)
	for k := uintptr(1); k <= 5; k++ {
		require.Equal(t, core.InProgress, r.put(host, dev, 8, k))
	}
	r.drv.Run()
	before := r.drv.Calls("cuEventQuery")
	_, got := r.progress()
	assert.Equal(t, []done{{1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}}, got)
	assert.Equal(t, 2, r.drv.Calls("cuEventQuery")-before, "event queries for a finished segment of 5")

	for k := uintptr(6); k <= 10; k++ {
		require.Equal(t, core.InProgress, r.put(host, dev, 8, k))
	}
	r.drv.Step(3)
	before = r.drv.Calls("cuEventQuery")
	_, got = r.progress()
	assert.Equal(t, []done{{6, 0}, {7, 0}, {8, 0}}, got)
	// head, newest (not done), then entries 2 to 4 in order
	assert.Equal(t, 5, r.drv.Calls("cuEventQuery")-before, "event queries for a segment done part-way")
	r.drv.Run()
	_, got = r.progress()
	assert.Equal(t, []done{{9, 0}, {10, 0}}, got)
}

// A detached piece (pageable memory on a multi-thread iface: enqueued
// without the slot's lock) records its event before another thread's
// piece that is booked before it: the queue holds [X, B, A] recorded X, A,
// B. With A's copy finished and B's not, the newest event (A's) says
// nothing of B's: progress must not complete B.
func TestProgressNewestFirstNotAfterDetached(t *testing.T) {
	r := newRig(t, 1, func(p *core.IfaceParams) { p.ThreadMode = core.ThreadMulti })
	other, err := r.ifc.NewEp() // lane 0 too (one lane): the same slot
	require.NoError(t, err)
	const n = 4096
	pageable, pinned, dev := r.drv.Pageable(n), r.drv.AllocHost(n, true), r.drv.AllocDevice(0, 3*n)
	require.Equal(t, core.InProgress, r.put(pinned, dev, n, 1)) // X
	var once sync.Once
	r.drv.OnDetachedIssued(func() {
		once.Do(func() {
			// B, from another thread, while A is issued but not booked.
			done := make(chan struct{})
			go func() {
				defer close(done)
				st, err := other.Zcopy(true, []core.IOV{{Buffer: uintptr(pinned), Length: n}}, dev+n, 2)
				assert.NoError(t, err)
				assert.Equal(t, core.InProgress, st)
			}()
			<-done
		})
	})
	require.Equal(t, core.InProgress, r.put(pageable, dev+2*n, n, 3)) // A
	r.drv.OnDetachedIssued(nil)
	r.drv.Step(2) // X and A ran; B did not
	_, got := r.progress()
	assert.Equal(t, []done{{1, core.OK}}, got, "B's copy has not run")
	r.drv.Run()
	_, got = r.progress()
	assert.Equal(t, []done{{2, core.OK}, {3, core.OK}}, got)
}

// A later piece of an operation joins (re-records) its previous piece's
// queue entry only while that entry is the newest of its queue: here
// another thread's piece B is booked between A's two pieces, and a join
// would leave [X, A, B] with A's event recorded after B's. With B's copy
// finished and A's second piece not, the newest event (B's) says nothing
// of A: progress must not complete A.
func TestProgressNewestFirstJoinOnlyNewest(t *testing.T) {
	r := newRigEnv(t, 1, perPiece, func(p *core.IfaceParams) { p.ThreadMode = core.ThreadMulti })
	other, err := r.ifc.NewEp()
	require.NoError(t, err)
	const n = 4096
	pinned, dev := r.drv.AllocHost(2*n, true), r.drv.AllocDevice(0, 4*n)
	want := fill(r.drv, pinned, 2*n, 7)
	// Four events made: every piece below finds one (no NEED_EVENT round trip).
	for k := uintptr(11); k <= 14; k++ {
		require.Equal(t, core.InProgress, r.put(pinned, dev+3*n, n, k))
	}
	r.drv.Run()
	_, got := r.progress()
	require.Len(t, got, 4)
	require.Equal(t, core.InProgress, r.put(pinned, dev+3*n, n, 1)) // X
	calls := 0
	r.drv.OnCopy(func() {
		if calls++; calls == 2 { // between A's two pieces
			st, err := other.Zcopy(true, []core.IOV{{Buffer: uintptr(pinned), Length: n}}, dev+2*n, 2) // B
			assert.NoError(t, err)
			assert.Equal(t, core.InProgress, st)
		}
	})
	iov := []core.IOV{{Buffer: uintptr(pinned), Length: n}, {Buffer: uintptr(pinned + n), Length: n}}
	st, err := r.ep.Zcopy(true, iov, dev, 3) // A: two pieces
	require.NoError(t, err)
	require.Equal(t, core.InProgress, st)
	r.drv.OnCopy(nil)
	r.drv.Step(3) // X, A's first piece and B ran; A's second did not
	_, got = r.progress()
	assert.Equal(t, []done{{1, core.OK}, {2, core.OK}}, got, "A's second piece has not run")
	r.drv.Run()
	_, got = r.progress()
	assert.Equal(t, []done{{3, core.OK}}, got)
	eqBytes(t, want, r.drv.Bytes(dev, 2*n))
}
