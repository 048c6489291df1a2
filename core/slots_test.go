// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/cudadrv"
)

func TestCloseReleasesEverything(t *testing.T) {
	r := newRig(t, 3)
	dev0, dev1, host := r.drv.AllocDevice(0, 4096), r.drv.AllocDevice(1, 4096), r.drv.Pageable(4096)
	user := r.drv.CreateContext(2)
	udev := r.drv.AllocCtx(user, 4096)
	vmm := r.drv.AllocVMM(2, 4096)
	r.drv.ActivatePrimary(2)
	fill(r.drv, host, 4096, 1)
	require.Equal(t, core.InProgress, r.put(host, dev0, 4096, 1))
	require.Equal(t, core.InProgress, r.get(host, dev1, 16, 2))
	require.Equal(t, core.InProgress, r.put(dev0, dev1, 16, 3))
	require.Equal(t, core.InProgress, r.put(host, udev, 4096, 4))
	require.Equal(t, core.InProgress, r.put(host, vmm, 16, 5))
	require.NoError(t, r.ep.Short(true, uintptr(host), 8, dev1+8))
	r.drv.Run()
	_, comps := r.progress()
	require.Len(t, comps, 5)
	want := append([]byte(nil), r.drv.Bytes(host, 4096)...)
	clear(r.drv.Bytes(dev0, 4096))
	require.Equal(t, core.InProgress, r.put(host, dev0, 4096, 6)) // in flight at close
	assert.Positive(t, r.drv.LiveStreams())
	assert.Positive(t, r.drv.LiveEvents())

	errStatus(t, core.ErrBusy, r.ctx.Destroy())
	r.close()
	assert.Zero(t, r.drv.LiveStreams())
	assert.Zero(t, r.drv.LiveEvents())
	assert.Zero(t, r.drv.Pending())
	eqBytes(t, want, r.drv.Bytes(dev0, 4096), "close waits for copies in flight")
	assert.Equal(t, 1, r.drv.PrimaryRetains(0), "only the program's retains remain")
	assert.Equal(t, 1, r.drv.PrimaryRetains(1))
	assert.Equal(t, 1, r.drv.PrimaryRetains(2))
	assert.Zero(t, r.drv.Activations())
	require.NoError(t, r.ctx.Destroy())

	// a closed iface answers ErrHandle everywhere
	_, err := r.ifc.Progress()
	errStatus(t, core.ErrHandle, err)
	st, err := r.ifc.Flush("iface_flush", 1, false)
	errStatus(t, core.ErrHandle, err)
	assert.Equal(t, core.ErrHandle, st)
	st, err = r.ep.Flush(1, false)
	errStatus(t, core.ErrHandle, err)
	assert.Equal(t, core.ErrHandle, st)
	st, err = r.ifc.Arm(core.EventSendComp)
	errStatus(t, core.ErrHandle, err)
	assert.Equal(t, core.ErrHandle, st)
	_, err = r.ifc.EventFD()
	errStatus(t, core.ErrHandle, err)
	_, err = r.ifc.NewEp()
	errStatus(t, core.ErrHandle, err)
	st, err = r.ep.Zcopy(true, []core.IOV{{uintptr(host), 8}}, dev0, 1)
	errStatus(t, core.ErrHandle, err)
	assert.Equal(t, core.ErrHandle, st)
	errStatus(t, core.ErrHandle, r.ep.Short(true, uintptr(host), 8, dev0))
	errStatus(t, core.ErrHandle, r.ifc.Close())
	_, comps = r.progress2()
	assert.Empty(t, comps, "pending completions are dropped at close")
}

// progress2 takes completions without requiring Progress to succeed.
func (r *rig) progress2() (int, []done) {
	n, _ := r.ifc.Progress()
	return n, r.ready()
}

func TestCloseToleratesDeinitialized(t *testing.T) {
	r := newRig(t, 1)
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 1))
	r.drv.Fail("StreamSynchronize", 1, cudadrv.ErrorDeinitialized)
	r.drv.Fail("EventDestroy", 1, cudadrv.ErrorDeinitialized)
	r.close() // no error
	r2 := newRig(t, 1)
	dev, host = r2.drv.AllocDevice(0, 64), r2.drv.Pageable(64)
	require.Equal(t, core.InProgress, r2.put(host, dev, 8, 1))
	r2.drv.Fail("StreamDestroy", 1, 2)
	err := r2.ifc.Close()
	r2.closed = true
	errStatus(t, core.ErrCUDA, err)
}

// The program drops its retain of a primary context the iface uses: the
// library's retain keeps it alive until close.
func TestProgramReleasesPrimary(t *testing.T) {
	r := newRig(t, 1)
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 1))
	r.drv.ReleasePrimary(0)
	r.drv.Run()
	_, comps := r.progress()
	assert.Equal(t, []done{{1, 0}}, comps)
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 2))
	r.drv.Run()
	_, comps = r.progress()
	assert.Equal(t, []done{{2, 0}}, comps)
	r.close()
	assert.Zero(t, r.drv.PrimaryRetains(0))
}

// Brief §4 "Contexts that go away": a context the program created is
// released through ReleaseContext before the program destroys it; then
// nothing is ever called on it again.
func TestDestroyedUserContextNotTouched(t *testing.T) {
	r := newRig(t, 2)
	user := r.drv.CreateContext(1)
	udev, host := r.drv.AllocCtx(user, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, udev, 8, 1))
	r.drv.Run()
	_, comps := r.progress()
	require.Equal(t, []done{{1, 0}}, comps)
	streams := r.drv.LiveStreams()
	require.NoError(t, r.ifc.ReleaseContext(r.drv.ID(user)))
	assert.Equal(t, streams-1, r.drv.LiveStreams(), "the released context's stream is destroyed")
	r.drv.DestroyContext(user)
	dev0 := r.drv.AllocDevice(0, 64)
	require.Equal(t, core.InProgress, r.put(host, dev0, 8, 2))
	r.drv.Run()
	_, comps = r.progress()
	assert.Equal(t, []done{{2, 0}}, comps)
	assert.Empty(t, r.drv.Violations(), "progress touched the destroyed context")
	r.closed = true
	_ = r.ifc.Close()
	assert.Empty(t, r.drv.Violations(), "close touched the destroyed context")
}

// Brief §4: a reset primary context gets a new id; the stale resources are
// never used and the new incarnation gets fresh ones.
func TestResetPrimaryNotTouched(t *testing.T) {
	r := newRig(t, 1)
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 1))
	r.drv.Run()
	_, comps := r.progress()
	require.Equal(t, []done{{1, 0}}, comps)
	r.drv.ResetPrimary(0)
	dev = r.drv.AllocDevice(0, 64) // the program allocates again: reactivates
	want := fill(r.drv, host, 64, 9)
	require.Equal(t, core.InProgress, r.put(host, dev, 64, 2))
	r.drv.Run()
	_, comps = r.progress()
	assert.Equal(t, []done{{2, 0}}, comps)
	eqBytes(t, want, r.drv.Bytes(dev, 64))
	r.closed = true
	_ = r.ifc.Close()
	assert.Empty(t, r.drv.Violations())
}

// A reset with pieces in flight cancels them: their operations complete with
// ErrCanceled, nothing is called on the dead incarnation, other devices go on.
func TestResetCancelsPiecesInFlight(t *testing.T) {
	r := newRig(t, 2)
	dev0, dev1, host := r.drv.AllocDevice(0, 64), r.drv.AllocDevice(1, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev0, 8, 1))
	require.Equal(t, core.InProgress, r.put(host, dev1, 8, 2))
	st, err := r.ifc.Flush("iface_flush", 3, false)
	require.NoError(t, err)
	require.Equal(t, core.InProgress, st)
	require.Equal(t, 2, r.drv.PrimaryRetains(0), "the program's retain and the library's")
	r.drv.ResetPrimary(0)
	r.drv.Run()
	n, comps := r.progress()
	assert.Equal(t, 2, n)
	assert.ElementsMatch(t, []done{{1, core.ErrCanceled}, {2, core.OK}, {3, core.OK}}, comps)
	assert.Equal(t, done{3, core.OK}, comps[len(comps)-1], "the flush completes after both operations")
	assert.Empty(t, r.drv.Violations())
	assert.Equal(t, 1, r.drv.PrimaryRetains(0), "the library's retain on the reset primary was given back")

	// The program brings device 0 back: a fresh slot in the new incarnation.
	dev0 = r.drv.AllocDevice(0, 64)
	require.Equal(t, core.InProgress, r.put(host, dev0, 8, 4))
	r.drv.Run()
	_, comps = r.progress()
	assert.Equal(t, []done{{4, core.OK}}, comps)
}

// ReleaseContext with pieces in flight waits for them: they complete OK,
// a flush that named the context completes, and the slot is reused.
func TestReleaseContextInFlight(t *testing.T) {
	r := newRig(t, 2)
	user := r.drv.CreateContext(1)
	udev, host := r.drv.AllocCtx(user, 64), r.drv.Pageable(64)
	want := fill(r.drv, host, 64, 5)
	require.Equal(t, core.InProgress, r.put(host, udev, 64, 1))
	st, err := r.ifc.Flush("iface_flush", 2, false)
	require.NoError(t, err)
	require.Equal(t, core.InProgress, st)
	require.NoError(t, r.ifc.ReleaseContext(r.drv.ID(user)))
	eqBytes(t, want, r.drv.Bytes(udev, 64), "the copy finished before the release returned")
	assert.Equal(t, []done{{1, core.OK}, {2, core.OK}}, r.ready())
	assert.Zero(t, r.drv.LiveEvents()+r.drv.LiveStreams(), "everything of the context is gone")
	require.NoError(t, r.ifc.ReleaseContext(12345), "an unknown id is not an error")
	r.drv.DestroyContext(user)

	dev0 := r.drv.AllocDevice(0, 64)
	require.Equal(t, core.InProgress, r.put(host, dev0, 8, 3))
	r.drv.Run()
	_, comps := r.progress()
	assert.Equal(t, []done{{3, core.OK}}, comps)
}

// Without cuCtxGetId (CUDA < 12) a context is keyed by handle, and a reset
// primary context keeps its handle: the canary's generation tells the
// incarnations apart, in progress and in the copy path.
func TestPre12ResetWithReactivation(t *testing.T) {
	r := newRig(t, 1)
	r.drv.SetHasCtxID(false)
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 1))
	r.drv.ResetPrimary(0)
	dev = r.drv.AllocDevice(0, 64) // re-activated: same handle, new incarnation
	want := fill(r.drv, host, 64, 7)
	require.Equal(t, core.InProgress, r.put(host, dev, 64, 2))
	r.drv.Run()
	_, comps := r.progress()
	assert.ElementsMatch(t, []done{{1, core.ErrCanceled}, {2, core.OK}}, comps)
	eqBytes(t, want, r.drv.Bytes(dev, 64))
	assert.Empty(t, r.drv.Violations(), "the dead incarnation's stream was used")
}

// An iface holds resources in at most core.MaxSlots contexts: one more
// gets NO_RESOURCE with a message that says what to do, and releasing one
// makes room (its slot is reused).
func TestContextLimit(t *testing.T) {
	r := newRig(t, 1)
	host := r.drv.Pageable(64)
	ctxs := make([]cudadrv.Context, core.MaxSlots+1)
	devs := make([]uint64, len(ctxs))
	for k := range ctxs {
		ctxs[k] = r.drv.CreateContext(0)
		devs[k] = r.drv.AllocCtx(ctxs[k], 64)
	}
	for k := 0; k < core.MaxSlots; k++ {
		require.NoError(t, r.ep.Short(true, uintptr(host), 64, devs[k]), "context %d", k)
	}
	err := r.ep.Short(true, uintptr(host), 64, devs[core.MaxSlots])
	errStatus(t, core.ErrNoResource, err)
	assert.Contains(t, err.Error(), "cucopy_iface_release_context")
	assert.Contains(t, err.Error(), fmt.Sprintf("device 0: %d slot(s) of contexts the program created (context ids ", core.MaxSlots))
	require.NoError(t, r.ifc.ReleaseContext(r.drv.ID(ctxs[5])))
	require.NoError(t, r.ep.Short(true, uintptr(host), 64, devs[core.MaxSlots]))
	assert.Equal(t, core.InProgress, r.put(host, devs[core.MaxSlots], 64, 1))
	r.drv.Run()
	_, got := r.progress()
	assert.Equal(t, []done{{1, core.OK}}, got)
}

// A full table makes room by releasing an idle slot of a live primary
// context the iface retains (its resources come back when it is used
// again): the table is not a hard wall for primary contexts.
func TestFullTableReclaimsIdlePrimarySlots(t *testing.T) {
	r := newRig(t, core.MaxSlots+2)
	host := r.drv.Pageable(64)
	devs := make([]uint64, core.MaxSlots+2)
	for d := range devs {
		devs[d] = r.drv.AllocDevice(d, 64)
	}
	for d := range devs {
		require.NoError(t, r.ep.Short(true, uintptr(host), 64, devs[d]), "device %d", d)
	}
	require.Equal(t, core.InProgress, r.put(host, devs[0], 8, 1), "device 0 again, after its slot was reclaimed")
	r.drv.Run()
	_, got := r.progress()
	assert.Equal(t, []done{{1, core.OK}}, got)
	assert.Equal(t, 1, r.drv.PrimaryRetains(1), "device 1's slot was reclaimed: the program's retain only")
	assert.Equal(t, 2, r.drv.PrimaryRetains(core.MaxSlots+1), "the last device's slot is live: the program's and the iface's")
}

// A full table of idle slots whose primary contexts were reset since:
// the next new context takes one of them (dropped without a call on the
// dead context), rather than NO_RESOURCE forever (progress polls only
// slots with pieces in flight, so it would never drop them).
func TestFullTableReclaimsResetSlots(t *testing.T) {
	r := newRig(t, core.MaxSlots+1)
	host := r.drv.Pageable(64)
	devs := make([]uint64, core.MaxSlots+1)
	for d := range devs {
		devs[d] = r.drv.AllocDevice(d, 64)
	}
	for d := 0; d < core.MaxSlots; d++ {
		require.NoError(t, r.ep.Short(true, uintptr(host), 64, devs[d]), "device %d", d)
	}
	for d := 0; d < core.MaxSlots; d++ {
		r.drv.ResetPrimary(d)
	}
	r.progress()
	require.NoError(t, r.ep.Short(true, uintptr(host), 64, devs[core.MaxSlots]))
	assert.Equal(t, uint64(1), r.ifc.Stats().ContextsReset)
}
