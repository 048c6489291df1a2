// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
)

// Stats count operations (once, under their first piece's direction),
// pieces and bytes per device and direction, the rare events, and keep a
// released or reset context's counts.
func TestStats(t *testing.T) {
	r := newRig(t, 2, func(p *core.IfaceParams) { p.MaxEvents = 1 })
	host, host2 := r.drv.Pageable(4096), r.drv.Pageable(4096)
	dev0, dev0b, dev1 := r.drv.AllocDevice(0, 4096), r.drv.AllocDevice(0, 4096), r.drv.AllocDevice(1, 4096)

	// One operation, two pieces (one run), host -> device 0.
	st, err := r.zcopy(true, []core.IOV{{uintptr(host), 100}, {uintptr(host + 100), 28}}, dev0, 1)
	require.NoError(t, err)
	require.Equal(t, core.InProgress, st)
	// Device 0's only event is in flight: NO_RESOURCE.
	st, _ = r.zcopy(true, []core.IOV{{uintptr(host), 8}}, dev0+1024, 2)
	require.Equal(t, core.ErrNoResource, st)
	r.drv.Run()
	r.progress()
	require.NoError(t, r.ep.Short(false, uintptr(host2), 64, dev1))        // device 1 -> host
	require.NoError(t, r.ep.Short(true, uintptr(host), 16, uint64(host2))) // host -> host (CPU)
	require.NoError(t, r.ifc.Fence("iface_fence"))
	require.Equal(t, core.InProgress, r.put(dev0, dev0b, 256, 3)) // device 0 -> device 0
	r.drv.Run()
	r.progress()
	require.Equal(t, core.InProgress, r.put(dev0, dev1, 512, 4)) // device 0 -> device 1
	r.drv.Run()
	r.progress()
	_, err = r.ifc.Flush("iface_flush", 0, false)
	require.NoError(t, err)

	s := r.ifc.Stats()
	assert.Equal(t, core.DirStats{Operations: 1, Pieces: 2, Bytes: 128}, s.Device[0][core.DirH2D])
	assert.Equal(t, core.DirStats{Operations: 1, Pieces: 1, Bytes: 256}, s.Device[0][core.DirD2D])
	assert.Equal(t, core.DirStats{Operations: 1, Pieces: 1, Bytes: 512}, s.Device[0][core.DirPeer])
	assert.Equal(t, core.DirStats{Operations: 1, Pieces: 1, Bytes: 64}, s.Device[1][core.DirD2H])
	assert.Equal(t, core.DirStats{Operations: 1, Pieces: 1, Bytes: 16}, s.Dir[core.DirHost])
	assert.Equal(t, core.DirStats{Operations: 1, Pieces: 2, Bytes: 128}, s.Dir[core.DirH2D])
	assert.Equal(t, uint64(1), s.NoResource)
	assert.Equal(t, uint64(1), s.Fences)
	assert.Equal(t, uint64(1), s.Flushes)
	assert.Equal(t, uint64(2), s.ContextsSeen)

	// Released and reset contexts keep their counts.
	require.NoError(t, r.ifc.ReleaseContext(r.drv.ID(r.drv.Primary(1))))
	require.Equal(t, core.InProgress, r.put(host, dev0, 8, 5))
	r.drv.ResetPrimary(0)
	r.progress()
	s = r.ifc.Stats()
	assert.Equal(t, core.DirStats{Operations: 1, Pieces: 1, Bytes: 64}, s.Device[1][core.DirD2H], "released")
	assert.Equal(t, core.DirStats{Operations: 2, Pieces: 3, Bytes: 136}, s.Device[0][core.DirH2D], "reset")
	assert.Equal(t, uint64(1), s.ContextsReleased)
	assert.Equal(t, uint64(1), s.ContextsReset)
}

// Every life of a (context, lane) is listed with its own counts, in the
// order the iface started using them: a released context used again and a
// reset primary context recreated are new lives, the ended ones keep what
// they counted.
func TestStatsPerIncarnation(t *testing.T) {
	r := newRig(t, 2)
	host := r.drv.Pageable(4096)
	dev0, dev1 := r.drv.AllocDevice(0, 4096), r.drv.AllocDevice(1, 4096)
	id0, id1 := r.drv.ID(r.drv.Primary(0)), r.drv.ID(r.drv.Primary(1))
	copyTo := func(dev uint64, n int) {
		t.Helper()
		require.Equal(t, core.InProgress, r.put(host, dev, n, 1))
		r.drv.Run()
		r.progress()
	}
	copyTo(dev0, 100)                             // life 1: device 0
	copyTo(dev1, 200)                             // life 2: device 1
	require.NoError(t, r.ifc.ReleaseContext(id1)) // life 2 released
	copyTo(dev1, 300)                             // life 3: device 1 again
	require.Equal(t, core.InProgress, r.put(host, dev0, 8, 2))
	r.drv.ResetPrimary(0)
	_, comps := r.progress() // life 1 found reset, its copy in flight canceled
	require.Equal(t, []done{{2, core.ErrCanceled}}, comps)
	dev0 = r.drv.AllocDevice(0, 4096)
	copyTo(dev0, 400) // life 4: device 0's new primary context
	id0b := r.drv.ID(r.drv.Primary(0))
	require.NotEqual(t, id0, id0b)

	lives, dropped := r.ifc.Incarnations()
	h2d := func(n uint64) [4]core.DirStats {
		var d [4]core.DirStats
		d[core.DirH2D] = core.DirStats{Operations: 1, Pieces: 1, Bytes: n}
		return d
	}
	life1 := h2d(100)
	life1[core.DirH2D] = core.DirStats{Operations: 2, Pieces: 2, Bytes: 108}
	assert.Zero(t, dropped)
	assert.Equal(t, []core.IncarnationStats{
		{Serial: 1, ContextID: id0, Device: 0, State: core.IncarnationReset, Dir: life1},
		{Serial: 2, ContextID: id1, Device: 1, State: core.IncarnationReleased, Dir: h2d(200)},
		{Serial: 3, ContextID: id1, Device: 1, State: core.IncarnationLive, Dir: h2d(300)},
		{Serial: 4, ContextID: id0b, Device: 0, State: core.IncarnationLive, Dir: h2d(400)},
	}, lives)
}

// The iface keeps the latest MaxEndedIncarnations ended lives and counts
// the ones it dropped; the totals keep everything.
func TestStatsEndedIncarnationsBounded(t *testing.T) {
	r := newRig(t, 1)
	host, dev := r.drv.Pageable(64), r.drv.AllocDevice(0, 64)
	id := r.drv.ID(r.drv.Primary(0))
	const lives = core.MaxEndedIncarnations + 3
	for k := 0; k < lives; k++ {
		require.NoError(t, r.ep.Short(true, uintptr(host), 8, dev))
		require.NoError(t, r.ifc.ReleaseContext(id))
	}
	got, dropped := r.ifc.Incarnations()
	assert.Equal(t, uint64(3), dropped)
	require.Len(t, got, core.MaxEndedIncarnations)
	assert.Equal(t, uint64(4), got[0].Serial, "the oldest went first")
	assert.Equal(t, uint64(lives), got[len(got)-1].Serial)
	assert.Equal(t, uint64(lives), r.ifc.Stats().Device[0][core.DirH2D].Pieces, "the totals keep every life")
}
