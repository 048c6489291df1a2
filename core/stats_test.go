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
