// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
)

// chain copies host -> device 0 -> device 1 -> host2, optionally with a
// fence between the steps and no wait, runs the fake driver's work newest
// first (as far as stream order and stream waits allow) and returns what
// host2 received.
func chain(t *testing.T, r *rig, fenced bool, seed byte) (want, got []byte) {
	const n = 4096
	host, host2 := r.drv.Pageable(n), r.drv.Pageable(n)
	dev0, dev1 := r.drv.AllocDevice(0, n), r.drv.AllocDevice(1, n)
	want = fill(r.drv, host, n, seed)
	fence := func() {
		if fenced {
			require.NoError(t, r.ifc.Fence("iface_fence"))
		}
	}
	require.Equal(t, core.InProgress, r.put(host, dev0, n, 1))
	fence()
	require.Equal(t, core.InProgress, r.put(dev0, dev1, n, 2))
	fence()
	require.Equal(t, core.InProgress, r.get(host2, dev1, n, 3))
	r.drv.RunNewestFirst()
	for k := 0; k < 3; k++ {
		r.progress()
	}
	return want, append([]byte(nil), r.drv.Bytes(host2, n)...)
}

// A chain host -> GPU 0 -> GPU 1 -> host with a fence between the steps and
// no waits gets the right data, also when the driver runs the newest work
// first; without the fences the same run gets the wrong data (the fake
// makes a missing order visible).
func TestFenceOrdersAChainAcrossDevices(t *testing.T) {
	r := newRig(t, 2)
	want, got := chain(t, r, false, 1)
	assert.NotEqual(t, want, got, "without fences the fake must expose the missing order")
	want, got = chain(t, r, true, 2)
	eqBytes(t, want, got, "fenced chain")
	assert.Equal(t, 1+2, r.drv.Calls("StreamWaitEvent"), "peer stream: one busy queue (h2d); d2h stream: two (h2d, peer)")
}

// A fence with nothing in flight records nothing: the next copies make no
// stream wait. A stream created after a fence, while the work before it is
// in flight, waits too.
func TestFenceIdleAndNewStreams(t *testing.T) {
	r := newRig(t, 2)
	host, dev0, dev1 := r.drv.Pageable(64), r.drv.AllocDevice(0, 64), r.drv.AllocDevice(1, 64)
	require.NoError(t, r.ifc.Fence("iface_fence"))
	require.Equal(t, core.InProgress, r.put(host, dev0, 8, 1))
	assert.Equal(t, 0, r.drv.Calls("StreamWaitEvent"), "idle fence")

	require.NoError(t, r.ifc.Fence("iface_fence"))                 // piece 1 in flight
	require.Equal(t, core.InProgress, r.put(host, dev1, 8, 2))     // device 1: a new slot and stream
	require.NoError(t, r.ep.Short(true, uintptr(host), 8, dev0+8)) // device 0's short stream
	assert.Equal(t, 2, r.drv.Calls("StreamWaitEvent"), "the new stream and the short stream wait")
	r.drv.Run()
	_, comps := r.progress()
	assert.ElementsMatch(t, []done{{1, core.OK}, {2, core.OK}}, comps)

	require.NoError(t, r.ifc.Fence("iface_fence")) // nothing in flight again
	require.Equal(t, core.InProgress, r.put(host, dev0, 8, 3))
	assert.Equal(t, 2, r.drv.Calls("StreamWaitEvent"))
	r.drv.Run()
	r.progress()
}

// A host copy (run on the CPU) issued after a fence waits for the copies
// before it: it reads what a device-to-host copy before the fence wrote.
func TestFenceBeforeACPUCopy(t *testing.T) {
	r := newRig(t, 1)
	const n = 256
	dev, mid, dst := r.drv.AllocDevice(0, n), r.drv.Pageable(n), r.drv.Pageable(n)
	want := fill(r.drv, dev, n, 9)
	require.Equal(t, core.InProgress, r.get(mid, dev, n, 1)) // device -> mid, not run yet
	require.NoError(t, r.ep.Fence())
	require.NoError(t, r.ep.Short(true, uintptr(mid), n, dst)) // mid -> dst on the CPU
	eqBytes(t, want, r.drv.Bytes(dst, n))
	syncs := r.drv.Calls("StreamSynchronize")
	require.NoError(t, r.ep.Short(true, uintptr(mid), n, dst))
	assert.Equal(t, syncs, r.drv.Calls("StreamSynchronize"), "the fence's work was waited for once")
	_, comps := r.progress()
	assert.Equal(t, []done{{1, core.OK}}, comps)
}
