// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/cudadrv/fakedrv"
)

func TestFlush(t *testing.T) {
	r := newRig(t, 2)
	st, err := r.ifc.Flush("iface_flush", 100, false)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st, "idle flush")
	st, err = r.ep.Flush(101, false)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st)

	dev0, dev1, host := r.drv.AllocDevice(0, 64), r.drv.AllocDevice(1, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev0, 8, 1))
	require.Equal(t, core.InProgress, r.get(host, dev1, 8, 2))
	require.Equal(t, core.InProgress, r.put(dev0, dev1, 8, 3))
	st, err = r.ifc.Flush("iface_flush", 100, false)
	require.NoError(t, err)
	assert.Equal(t, core.InProgress, st)
	st, err = r.ep.Flush(0, false) // no completion wanted
	require.NoError(t, err)
	assert.Equal(t, core.InProgress, st)
	// issued after the flush: not waited for
	require.Equal(t, core.InProgress, r.put(host, dev0, 8, 4))
	st, err = r.ep.Flush(101, false)
	require.NoError(t, err)
	assert.Equal(t, core.InProgress, st)

	r.drv.Step(2)
	_, comps := r.progress()
	assert.Equal(t, []done{{1, 0}, {2, 0}}, comps, "flush waits for op 3")
	r.drv.Step(1)
	_, comps = r.progress()
	assert.Equal(t, []done{{3, 0}, {100, 0}}, comps, "flush completes after every earlier op")
	r.drv.Run()
	_, comps = r.progress()
	assert.Equal(t, []done{{4, 0}, {101, 0}}, comps)
	_, comps = r.progress()
	assert.Empty(t, comps, "flush completed once")
	st, err = r.ep.Flush(102, false)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st)
}

// Flush counts a failed piece as finished.
func TestFlushAfterFailure(t *testing.T) {
	r := newRig(t, 2)
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 1))
	st, _ := r.ifc.Flush("iface_flush", 50, false)
	require.Equal(t, core.InProgress, st)
	r.drv.Poison(r.drv.Primary(0), fakedrv.ErrIllegalAddress)
	_, comps := r.progress()
	assert.Equal(t, []done{{1, core.ErrCUDA}, {50, core.OK}}, comps)
}

// A flush is done only when the callbacks it covers have returned: while
// another thread runs a completion's callback, a flush without a completion
// says INPROGRESS, and a flush's completion runs after that callback. From
// inside a callback a flush covers the copies only (it cannot wait for
// itself).
func TestFlushWaitsForRunningCallbacks(t *testing.T) {
	r := newRig(t, 1, func(p *core.IfaceParams) { p.ThreadMode = core.ThreadMulti })
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 1))
	r.drv.Run()
	n, err := r.ifc.Progress()
	require.NoError(t, err)
	require.Equal(t, 1, n)

	entered, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var order []uintptr
	go func() {
		defer close(done)
		r.ifc.RunCallbacks(func(comp uintptr, _ core.Status) {
			order = append(order, comp)
			if comp == 1 {
				close(entered)
				<-release
			}
		})
	}()
	<-entered
	st, err := r.ifc.Flush("iface_flush", 0, false)
	require.NoError(t, err)
	assert.Equal(t, core.InProgress, st, "the callback of a covered operation is still running")
	st, err = r.ifc.Flush("iface_flush", 2, false)
	require.NoError(t, err)
	assert.Equal(t, core.InProgress, st)
	st, err = r.ifc.Flush("iface_flush", 0, true)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st, "from a callback: the copies only")
	close(release)
	<-done
	assert.Equal(t, []uintptr{1, 2}, order, "the flush's completion runs after the callback it covers")
	st, err = r.ifc.Flush("iface_flush", 0, false)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st)
}
