// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/cudadrv"
	"github.com/cucopy/cucopy/cudadrv/fakedrv"
)

func TestLazyResources(t *testing.T) {
	r := newRig(t, 2)
	assert.Zero(t, r.drv.LiveStreams(), "open creates nothing")
	assert.Zero(t, r.drv.LiveEvents())
	dev0, dev1 := r.drv.AllocDevice(0, 1024), r.drv.AllocDevice(1, 1024)
	host := r.drv.Pageable(1024)

	require.Equal(t, core.InProgress, r.put(host, dev0, 64, 1)) // h2d
	assert.Equal(t, 1, r.drv.LiveStreams())
	require.Equal(t, core.InProgress, r.put(host, dev0, 64, 2)) // h2d again
	assert.Equal(t, 1, r.drv.LiveStreams())
	assert.Equal(t, 2, r.drv.LiveEvents(), "two events in flight")
	require.Equal(t, core.InProgress, r.get(host, dev0, 64, 3)) // d2h
	assert.Equal(t, 2, r.drv.LiveStreams())
	require.Equal(t, core.InProgress, r.put(dev0, dev0+512, 64, 4)) // d2d
	assert.Equal(t, 3, r.drv.LiveStreams())
	require.NoError(t, r.ep.Short(true, uintptr(host), 64, dev0)) // short
	assert.Equal(t, 4, r.drv.LiveStreams())
	require.Equal(t, core.InProgress, r.put(dev0, dev1, 64, 5)) // peer, on dev0's context
	assert.Equal(t, 5, r.drv.LiveStreams())
	assert.Equal(t, 1, r.drv.Calls("ContextDevice"), "one slot for one context")
	require.Equal(t, core.InProgress, r.put(host, dev1, 64, 6)) // second context
	assert.Equal(t, 6, r.drv.LiveStreams())
	assert.Equal(t, 2, r.drv.Calls("ContextDevice"))
	assert.Equal(t, 6, r.drv.LiveEvents())

	r.drv.Run()
	n, comps := r.progress()
	assert.Equal(t, 6, n)
	assert.ElementsMatch(t, []done{{1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 0}}, comps)
	// events are reused, not created again
	for k := 0; k < 5; k++ {
		require.Equal(t, core.InProgress, r.put(host, dev0, 64, 10))
	}
	assert.Equal(t, 6, r.drv.LiveEvents())
	assert.Equal(t, 6, r.drv.LiveStreams())
}

// Back-pressure: the event cap returns ErrNoResource, queues nothing, and
// progress makes room.
func TestEventCap(t *testing.T) {
	r := newRig(t, 2, func(p *core.IfaceParams) { p.MaxEvents = 2 })
	dev, host := r.drv.AllocDevice(0, 4096), r.drv.Pageable(4096)
	want := fill(r.drv, host, 4096, 6)
	require.Equal(t, core.InProgress, r.put(host, dev, 1024, 1))
	require.Equal(t, core.InProgress, r.put(host+1024, dev+1024, 1024, 2))
	st, err := r.zcopy(true, []core.IOV{{uintptr(host + 2048), 1024}}, dev+2048, 3)
	errStatus(t, core.ErrNoResource, err)
	assert.Equal(t, core.ErrNoResource, st)
	assert.Equal(t, 2, r.drv.Pending(), "the refused copy was not issued")
	assert.Equal(t, 2, r.drv.LiveEvents())

	// other contexts have their own cap
	dev1 := r.drv.AllocDevice(1, 64)
	require.Equal(t, core.InProgress, r.put(host, dev1, 64, 4))

	// progress without the driver running frees nothing
	_, comps := r.progress()
	assert.Empty(t, comps)
	st, _ = r.zcopy(true, []core.IOV{{uintptr(host + 2048), 1024}}, dev+2048, 3)
	assert.Equal(t, core.ErrNoResource, st)

	r.drv.Run()
	_, comps = r.progress()
	assert.Equal(t, []done{{1, core.OK}, {2, core.OK}, {4, core.OK}}, comps)
	require.Equal(t, core.InProgress, r.put(host+2048, dev+2048, 1024, 3))
	require.Equal(t, core.InProgress, r.put(host+3072, dev+3072, 1024, 5))
	assert.Equal(t, 3, r.drv.LiveEvents(), "cap 2 on device 0, 1 on device 1")
	r.drv.Run()
	_, comps = r.progress()
	assert.Equal(t, []done{{3, core.OK}, {5, core.OK}}, comps)
	eqBytes(t, want, r.drv.Bytes(dev, 4096))
	_, comps = r.progress()
	assert.Empty(t, comps)
}

// MaxPoll bounds how many events one queue queries per progress call.
func TestMaxPoll(t *testing.T) {
	r := newRig(t, 1, func(p *core.IfaceParams) { p.MaxPoll = 2 })
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	for k := 1; k <= 5; k++ {
		require.Equal(t, core.InProgress, r.put(host, dev, 8, uintptr(k)))
	}
	r.drv.Run()
	var all []done
	for k := 0; k < 5; k++ {
		n, comps := r.progress()
		assert.LessOrEqual(t, n, 2)
		all = append(all, comps...)
	}
	assert.Equal(t, []done{{1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}}, all)
}

func TestOrderWithinQueue(t *testing.T) {
	r := newRig(t, 2)
	dev, host := r.drv.AllocDevice(0, 4096), r.drv.Pageable(4096)
	for k := 1; k <= 5; k++ {
		require.Equal(t, core.InProgress, r.put(host, dev, 16, uintptr(k)))
	}
	r.drv.Step(2)
	n, comps := r.progress()
	assert.Equal(t, 2, n)
	assert.Equal(t, []done{{1, 0}, {2, 0}}, comps)
	r.drv.Step(1)
	_, comps = r.progress()
	assert.Equal(t, []done{{3, 0}}, comps)
	r.drv.Run()
	_, comps = r.progress()
	assert.Equal(t, []done{{4, 0}, {5, 0}}, comps)

	// different queues complete independently
	require.Equal(t, core.InProgress, r.get(host, dev, 16, 6))                      // d2h
	require.Equal(t, core.InProgress, r.put(host, dev, 16, 7))                      // h2d
	require.Equal(t, core.InProgress, r.put(host, r.drv.AllocDevice(1, 16), 16, 8)) // other device
	r.drv.Step(1)
	_, comps = r.progress()
	assert.Equal(t, []done{{6, 0}}, comps)
	r.drv.Run()
	_, comps = r.progress()
	assert.ElementsMatch(t, []done{{7, 0}, {8, 0}}, comps)
}

func TestRunCallbacksEmpty(t *testing.T) {
	r := newRig(t, 1)
	r.ifc.RunCallbacks(func(uintptr, core.Status) { t.Fatal("a callback with nothing ready") })
}

// A completion run by RunCallbacks is never run again, ready completions
// keep their order across progress calls, and one that a callback makes
// ready (its progress call leaves it to the running loop) runs in the same
// RunCallbacks, after the others.
func TestRunCallbacksOrder(t *testing.T) {
	r := newRig(t, 2)
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	for k := 1; k <= 3; k++ {
		require.Equal(t, core.InProgress, r.put(host, dev, 8, uintptr(k)))
	}
	r.drv.Step(1)
	_, err := r.ifc.Progress()
	require.NoError(t, err)
	r.drv.Run()
	_, err = r.ifc.Progress()
	require.NoError(t, err)
	var got []done
	r.ifc.RunCallbacks(func(comp uintptr, st core.Status) {
		got = append(got, done{comp, st})
		if comp == 1 { // a callback issuing and progressing
			require.Equal(t, core.InProgress, r.put(host, dev, 8, 4))
			r.drv.Run()
			_, err := r.ifc.Progress()
			require.NoError(t, err)
			r.ifc.RunCallbacks(func(uintptr, core.Status) { t.Error("callbacks run inside a callback") })
		}
	})
	assert.Equal(t, []done{{1, 0}, {2, 0}, {3, 0}, {4, 0}}, got)
	assert.Empty(t, r.ready())
}

func TestFlush(t *testing.T) {
	r := newRig(t, 2)
	st, err := r.ifc.Flush("iface_flush", 100)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st, "idle flush")
	st, err = r.ep.Flush(101)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st)

	dev0, dev1, host := r.drv.AllocDevice(0, 64), r.drv.AllocDevice(1, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev0, 8, 1))
	require.Equal(t, core.InProgress, r.get(host, dev1, 8, 2))
	require.Equal(t, core.InProgress, r.put(dev0, dev1, 8, 3))
	st, err = r.ifc.Flush("iface_flush", 100)
	require.NoError(t, err)
	assert.Equal(t, core.InProgress, st)
	st, err = r.ep.Flush(0) // no completion wanted
	require.NoError(t, err)
	assert.Equal(t, core.InProgress, st)
	// issued after the flush: not waited for
	require.Equal(t, core.InProgress, r.put(host, dev0, 8, 4))
	st, err = r.ep.Flush(101)
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
	st, err = r.ep.Flush(102)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st)
}

// Flush counts a failed piece as finished.
func TestFlushAfterFailure(t *testing.T) {
	r := newRig(t, 2)
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 1))
	st, _ := r.ifc.Flush("iface_flush", 50)
	require.Equal(t, core.InProgress, st)
	r.drv.Poison(r.drv.Primary(0), fakedrv.ErrIllegalAddress)
	_, comps := r.progress()
	assert.Equal(t, []done{{1, core.ErrCUDA}, {50, core.OK}}, comps)
}

// Arm on a context with a sticky error answers BUSY, not an error: the
// failed query is progress's work, which fails the pieces.
func TestArmStickyContextIsBusy(t *testing.T) {
	r := newRig(t, 2)
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 1))
	r.drv.Poison(r.drv.Primary(0), fakedrv.ErrIllegalAddress)
	st, err := r.ifc.Arm(core.EventSendComp)
	require.NoError(t, err)
	assert.Equal(t, core.ErrBusy, st)
	_, comps := r.progress()
	assert.Equal(t, []done{{1, core.ErrCUDA}}, comps)
}

func TestArm(t *testing.T) {
	r := newRig(t, 2)
	fd, err := r.ifc.EventFD()
	require.NoError(t, err)
	require.GreaterOrEqual(t, fd, 0)
	fd2, err := r.ifc.EventFD()
	require.NoError(t, err)
	assert.Equal(t, fd, fd2, "one eventfd per iface")

	st, err := r.ifc.Arm(core.EventSendComp)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st, "armed with nothing in flight")
	st, err = r.ifc.Arm(1 << 5)
	errStatus(t, core.ErrInvalid, err)
	assert.Equal(t, core.ErrInvalid, st)

	dev0, dev1, host := r.drv.AllocDevice(0, 64), r.drv.AllocDevice(1, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev0, 8, 1))
	require.Equal(t, core.InProgress, r.put(host, dev1, 8, 2))
	st, err = r.ifc.Arm(core.EventSendComp)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st)
	assert.False(t, readable(t, fd), "nothing finished yet")
	r.drv.Step(1)
	assert.True(t, readable(t, fd), "device 0's work finished")

	// finished in the driver, not yet progressed: busy
	st, err = r.ifc.Arm(core.EventSendComp)
	require.NoError(t, err)
	assert.Equal(t, core.ErrBusy, st)
	_, err = r.ifc.Progress()
	require.NoError(t, err)
	// completion waiting to run: busy, even for events == 0
	st, err = r.ifc.Arm(core.EventSendComp)
	require.NoError(t, err)
	assert.Equal(t, core.ErrBusy, st)
	st, err = r.ifc.Arm(0)
	require.NoError(t, err)
	assert.Equal(t, core.ErrBusy, st)
	assert.Equal(t, []done{{1, 0}}, r.ready())

	st, err = r.ifc.Arm(core.EventSendComp)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st)
	assert.False(t, readable(t, fd))
	r.drv.Run()
	assert.True(t, readable(t, fd))
	_, comps := r.progress()
	assert.Equal(t, []done{{2, 0}}, comps)
	// 2 queues armed, then device 0's head found complete (busy), then device 1's queue
	assert.Equal(t, 4, r.drv.Calls("Arm"))
}

// Arm drains the fd: a stale wake-up does not survive a new arm.
func TestArmDrainsFD(t *testing.T) {
	r := newRig(t, 1)
	fd, err := r.ifc.EventFD()
	require.NoError(t, err)
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 1))
	st, _ := r.ifc.Arm(core.EventSendComp)
	require.Equal(t, core.OK, st)
	r.drv.Run()
	_, comps := r.progress()
	require.Equal(t, []done{{1, 0}}, comps)
	st, _ = r.ifc.Arm(core.EventSendComp)
	require.Equal(t, core.OK, st)
	assert.False(t, readable(t, fd))
}

// A sticky error fails that context's operations; other devices go on.
func TestStickyErrorOneContext(t *testing.T) {
	r := newRig(t, 2)
	dev0, dev1, host := r.drv.AllocDevice(0, 256), r.drv.AllocDevice(1, 256), r.drv.Pageable(256)
	want := fill(r.drv, host, 256, 3)
	require.Equal(t, core.InProgress, r.put(host, dev0, 256, 1))
	require.Equal(t, core.InProgress, r.put(host, dev0, 256, 2))
	require.Equal(t, core.InProgress, r.put(host, dev1, 256, 3))
	r.drv.Poison(r.drv.Primary(0), fakedrv.ErrIllegalAddress)
	r.drv.Run()
	var all []done
	for k := 0; k < 3; k++ {
		_, comps := r.progress()
		all = append(all, comps...)
	}
	assert.ElementsMatch(t, []done{{1, core.ErrCUDA}, {2, core.ErrCUDA}, {3, core.OK}}, all)
	eqBytes(t, want, r.drv.Bytes(dev1, 256))

	// future operations on the sick context fail at once, others work
	st, err := r.zcopy(true, []core.IOV{{uintptr(host), 256}}, dev0, 4)
	errStatus(t, core.ErrCUDA, err)
	assert.Equal(t, core.ErrCUDA, st)
	var res *cudadrv.Result
	require.True(t, errors.As(err, &res), "the driver's result is wrapped: %v", err)
	assert.Equal(t, uint32(fakedrv.ErrIllegalAddress), res.Code)
	require.Equal(t, core.InProgress, r.put(host, dev1, 256, 5))
	r.drv.Run()
	_, comps := r.progress()
	assert.Equal(t, []done{{5, core.OK}}, comps)
}

// A one-off query failure fails the head piece only.
func TestQueryEventsError(t *testing.T) {
	r := newRig(t, 2)
	dev0, dev1, host := r.drv.AllocDevice(0, 64), r.drv.AllocDevice(1, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev0, 8, 1))
	require.Equal(t, core.InProgress, r.put(host, dev0, 8, 2))
	require.Equal(t, core.InProgress, r.put(host, dev1, 8, 3))
	r.drv.Run()
	r.drv.Fail("QueryEvents", 1, fakedrv.ErrIllegalAddress) // the first queue queried: device 0's
	_, comps := r.progress()
	assert.Equal(t, []done{{1, core.ErrCUDA}, {3, core.OK}}, comps)
	_, comps = r.progress()
	assert.Equal(t, []done{{2, core.OK}}, comps)
}

// An iov whose second piece fails: error returned, no completion, the first
// piece synchronized before the return, the third never issued.
func TestDriverErrorMidIOV(t *testing.T) {
	r := newRig(t, 2)
	dev, host := r.drv.AllocDevice(0, 3000), r.drv.Pageable(3000)
	want := fill(r.drv, host, 3000, 2)
	r.drv.Fail("Copy", 2, fakedrv.ErrIllegalAddress)
	iov := []core.IOV{{uintptr(host), 1000}, {uintptr(host + 1000), 1000}, {uintptr(host + 2000), 1000}}
	st, err := r.zcopy(true, iov, dev, 7)
	errStatus(t, core.ErrCUDA, err)
	assert.Equal(t, core.ErrCUDA, st)
	assert.Zero(t, r.drv.Pending(), "the issued piece was synchronized")
	eqBytes(t, want[:1000], r.drv.Bytes(dev, 1000))
	eqBytes(t, make([]byte, 2000), r.drv.Bytes(dev+1000, 2000), "later pieces not copied")
	r.drv.Run()
	_, comps := r.progress()
	assert.Empty(t, comps, "a failed operation has no completion")

	// the iface is still usable and the event came back
	created := r.drv.Calls("EventCreate")
	assert.Equal(t, 1, created, "piece 2 was to re-record piece 1's event: one event in all")
	require.Equal(t, core.InProgress, r.put(host, dev, 3000, 8))
	assert.Equal(t, created, r.drv.Calls("EventCreate"), "the failed operation's event is reused")
	require.Equal(t, core.InProgress, r.put(host, dev, 3000, 9))
	assert.Equal(t, created+1, r.drv.Calls("EventCreate"), "a second operation in flight needs a second event")
	r.drv.Run()
	_, comps = r.progress()
	assert.Equal(t, []done{{8, 0}, {9, 0}}, comps)
	eqBytes(t, want, r.drv.Bytes(dev, 3000))
}

// Failures of the cold paths are CUDA errors with nothing left in flight.
func TestColdPathErrors(t *testing.T) {
	for _, m := range []string{"StreamCreate", "EventCreate", "ContextDevice"} {
		t.Run(m, func(t *testing.T) {
			r := newRig(t, 2)
			dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
			r.drv.Fail(m, 1, 2)
			st, err := r.zcopy(true, []core.IOV{{uintptr(host), 8}}, dev, 1)
			errStatus(t, core.ErrCUDA, err)
			assert.Equal(t, core.ErrCUDA, st)
			assert.Zero(t, r.drv.Pending())
			require.Equal(t, core.InProgress, r.put(host, dev, 8, 2), "works again")
			r.drv.Run()
			_, comps := r.progress()
			assert.Equal(t, []done{{2, 0}}, comps)
		})
	}
	t.Run("EnablePeer", func(t *testing.T) { // not fatal: the driver stages the copy
		r := newRig(t, 2)
		a, b := r.drv.AllocDevice(0, 64), r.drv.AllocDevice(1, 64)
		r.drv.Fail("EnablePeer", 1, 2)
		require.Equal(t, core.InProgress, r.put(a, b, 8, 1))
		require.Equal(t, core.InProgress, r.put(a, b, 8, 2))
		assert.Equal(t, 1, r.drv.Calls("EnablePeer"), "tried once")
		r.drv.Run()
		_, comps := r.progress()
		assert.Equal(t, []done{{1, 0}, {2, 0}}, comps)
	})
	t.Run("Short", func(t *testing.T) {
		r := newRig(t, 2)
		dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
		r.drv.Fail("Copy", 1, fakedrv.ErrIllegalAddress)
		errStatus(t, core.ErrCUDA, r.ep.Short(true, uintptr(host), 8, dev))
	})
}

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
	st, err := r.ifc.Flush("iface_flush", 1)
	errStatus(t, core.ErrHandle, err)
	assert.Equal(t, core.ErrHandle, st)
	st, err = r.ep.Flush(1)
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

func TestNewContextDriverError(t *testing.T) {
	drv := fakedrv.New(2)
	drv.Fail("DeviceCount", 1, 3)
	_, err := core.NewContext(drv, core.Config{})
	errStatus(t, core.ErrCUDA, err)
	var res *cudadrv.Result
	require.True(t, errors.As(err, &res))
	assert.Equal(t, uint32(3), res.Code)

	c, err := core.NewContext(drv, core.Config{MaxEvents: 7})
	require.NoError(t, err)
	assert.Equal(t, 2, c.DeviceCount())
	assert.Equal(t, uint32(7), c.Config().MaxEvents)
	assert.Same(t, drv, c.Driver().(*fakedrv.Driver))
	i, err := c.OpenIface(defaultParams())
	require.NoError(t, err)
	assert.Same(t, c, i.Context())
	assert.Equal(t, defaultParams(), i.Params())
	ep, err := i.NewEp()
	require.NoError(t, err)
	assert.Same(t, i, ep.Iface())
	require.NoError(t, i.Close())
	require.NoError(t, c.Destroy())
}

func TestStatsAtClose(t *testing.T) {
	drv := fakedrv.New(1)
	c, err := core.NewContext(drv, core.Config{Stats: true})
	require.NoError(t, err)
	i, err := c.OpenIface(defaultParams())
	require.NoError(t, err)
	ep, _ := i.NewEp()
	dev, host := drv.AllocDevice(0, 64), drv.Pageable(64)
	st, err := ep.Zcopy(true, []core.IOV{{uintptr(host), 8}}, dev, 1)
	require.NoError(t, err)
	assert.Equal(t, core.InProgress, st)
	require.NoError(t, ep.Short(true, uintptr(host), 8, host+16))
	require.NoError(t, i.Close())
	assert.Empty(t, drv.Violations())
}

// More pieces in flight on one queue than the initial ring holds, with the
// ring wrapped: order and exactly-once survive growth.
func TestQueueRingGrowth(t *testing.T) {
	r := newRig(t, 1)
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	next := uintptr(1)
	issue := func(n int) {
		for k := 0; k < n; k++ {
			require.Equal(t, core.InProgress, r.put(host, dev, 8, next))
			next++
		}
	}
	var got []done
	issue(10)
	r.drv.Step(7)
	_, comps := r.progress()
	got = append(got, comps...)
	issue(40) // wraps the 16-entry ring, then grows it twice
	for r.drv.Pending() > 0 {
		r.drv.Step(3)
		_, comps = r.progress()
		got = append(got, comps...)
	}
	for k := 0; k < 3; k++ {
		_, comps = r.progress()
		got = append(got, comps...)
	}
	require.Len(t, got, 50)
	for k, d := range got {
		require.Equal(t, done{uintptr(k + 1), core.OK}, d, "completion %d", k)
	}
	assert.Equal(t, 43, r.drv.LiveEvents(), "at most 43 events were in flight at once")
}

// A slot remembers at most cudadrv.MaxPeers peers; an evicted peer is
// enabled again (the driver's "already enabled" counts as success).
func TestManyPeers(t *testing.T) {
	r := newRig(t, 2)
	src := r.drv.AllocDevice(0, 64)
	var dsts []uint64
	for k := 0; k <= cudadrv.MaxPeers; k++ {
		dsts = append(dsts, r.drv.AllocCtx(r.drv.CreateContext(1), 64))
	}
	want := fill(r.drv, src, 64, 4)
	for k, d := range dsts {
		require.Equal(t, core.InProgress, r.put(src, d, 64, uintptr(k+1)))
	}
	assert.Equal(t, cudadrv.MaxPeers+1, r.drv.Calls("EnablePeer"))
	require.Equal(t, core.InProgress, r.put(src, dsts[cudadrv.MaxPeers], 64, 100)) // still remembered
	assert.Equal(t, cudadrv.MaxPeers+1, r.drv.Calls("EnablePeer"))
	require.Equal(t, core.InProgress, r.put(src, dsts[0], 64, 101)) // evicted
	assert.Equal(t, cudadrv.MaxPeers+2, r.drv.Calls("EnablePeer"))
	r.drv.Run()
	var comps []done
	for k := 0; k < 3; k++ { // MaxPoll 16 per queue and call
		_, c := r.progress()
		comps = append(comps, c...)
	}
	assert.Len(t, comps, cudadrv.MaxPeers+3)
	for _, d := range dsts {
		eqBytes(t, want, r.drv.Bytes(d, 64))
	}
}

// cd_query_events reports a failed pop of the context after counting every
// event as complete (done == len(events), err != nil). Progress must not
// pop more pieces than the queue holds nor complete anything twice.
func TestQueryEventsPopFailure(t *testing.T) {
	r := newRig(t, 1)
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 1))
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 2))
	r.drv.Run()
	r.drv.Fail("cuCtxPopCurrent", 1, fakedrv.ErrInvalidContext)
	_, comps := r.progress()
	require.Len(t, comps, 2)
	assert.Equal(t, uintptr(1), comps[0].comp)
	assert.Equal(t, uintptr(2), comps[1].comp)
	_, comps = r.progress()
	assert.Empty(t, comps, "completed twice")

	// the queue is still sound
	for k := 3; k <= 5; k++ {
		require.Equal(t, core.InProgress, r.put(host, dev, 8, uintptr(k)))
	}
	r.drv.Run()
	_, comps = r.progress()
	assert.Equal(t, []done{{3, 0}, {4, 0}, {5, 0}}, comps)
	st, err := r.ifc.Flush("iface_flush", 9)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st)
}

// The same failed pop when the queue's head is still running: the running
// piece must not be failed (nor its event reused while the copy is in flight).
func TestQueryEventsPopFailureHeadRunning(t *testing.T) {
	r := newRig(t, 1)
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 1))
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 2))
	r.drv.Step(1)
	r.drv.Fail("cuCtxPopCurrent", 1, fakedrv.ErrInvalidContext)
	_, comps := r.progress()
	assert.Equal(t, []done{{1, core.OK}}, comps, "op 2 is still running")
	r.drv.Run()
	_, comps = r.progress()
	assert.Equal(t, []done{{2, core.OK}}, comps)
}

// An iov with more pieces on one context than MaxEvents: back-pressure must
// let a retry succeed once progress made room (max_events 1 is a valid
// setting and max_iov is 64), not refuse the operation forever.
func TestIOVLongerThanEventCap(t *testing.T) {
	r := newRig(t, 1, func(p *core.IfaceParams) { p.MaxEvents = 2 })
	dev, host := r.drv.AllocDevice(0, 3000), r.drv.Pageable(3000)
	want := fill(r.drv, host, 3000, 5)
	iov := []core.IOV{{uintptr(host), 1000}, {uintptr(host + 1000), 1000}, {uintptr(host + 2000), 1000}}
	var st core.Status
	for try := 0; try < 5; try++ {
		st, _ = r.zcopy(true, iov, dev, 1)
		if st != core.ErrNoResource {
			break
		}
		r.drv.Run()
		r.progress()
	}
	require.Equal(t, core.InProgress, st, "refused on every retry")
	r.drv.Run()
	_, comps := r.progress()
	assert.Equal(t, []done{{1, core.OK}}, comps)
	eqBytes(t, want, r.drv.Bytes(dev, 3000))
}

func TestArmDriverError(t *testing.T) {
	r := newRig(t, 1)
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 1))
	r.drv.Fail("Arm", 1, fakedrv.ErrIllegalAddress)
	st, err := r.ifc.Arm(core.EventSendComp)
	errStatus(t, core.ErrCUDA, err)
	assert.Equal(t, core.ErrCUDA, st)
	st, err = r.ifc.Arm(core.EventSendComp)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st)
}

// A reset with pieces in flight cancels them: their operations complete with
// ErrCanceled, nothing is called on the dead incarnation, other devices go on.
func TestResetCancelsPiecesInFlight(t *testing.T) {
	r := newRig(t, 2)
	dev0, dev1, host := r.drv.AllocDevice(0, 64), r.drv.AllocDevice(1, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev0, 8, 1))
	require.Equal(t, core.InProgress, r.put(host, dev1, 8, 2))
	st, err := r.ifc.Flush("iface_flush", 3)
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

// Arm on a reset context reports the canceled work as ready.
func TestArmAfterReset(t *testing.T) {
	r := newRig(t, 1)
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 1))
	r.drv.ResetPrimary(0)
	st, err := r.ifc.Arm(core.EventSendComp)
	require.NoError(t, err)
	assert.Equal(t, core.ErrBusy, st)
	assert.Equal(t, []done{{1, core.ErrCanceled}}, r.ready())
	assert.Empty(t, r.drv.Violations())
}

// ReleaseContext with pieces in flight waits for them: they complete OK,
// a flush that named the context completes, and the slot is reused.
func TestReleaseContextInFlight(t *testing.T) {
	r := newRig(t, 2)
	user := r.drv.CreateContext(1)
	udev, host := r.drv.AllocCtx(user, 64), r.drv.Pageable(64)
	want := fill(r.drv, host, 64, 5)
	require.Equal(t, core.InProgress, r.put(host, udev, 64, 1))
	st, err := r.ifc.Flush("iface_flush", 2)
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

// Progress counts every operation that finished since the previous call,
// also those finished by ReleaseContext and those without a completion, so
// that "in flight -= progress()" loops end.
func TestProgressCountsOperationsFinishedElsewhere(t *testing.T) {
	r := newRig(t, 1)
	user := r.drv.CreateContext(0)
	udev, host := r.drv.AllocCtx(user, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, udev, 8, 0))
	require.Equal(t, core.InProgress, r.put(host, udev, 8, 7))
	require.NoError(t, r.ifc.ReleaseContext(r.drv.ID(user)))
	n, comps := r.progress()
	assert.Equal(t, 2, n)
	assert.Equal(t, []done{{7, core.OK}}, comps)
	n, _ = r.progress()
	assert.Zero(t, n, "counted once")
	r.drv.DestroyContext(user)
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
	assert.Contains(t, err.Error(), "release")
	require.NoError(t, r.ifc.ReleaseContext(r.drv.ID(ctxs[5])))
	require.NoError(t, r.ep.Short(true, uintptr(host), 64, devs[core.MaxSlots]))
	assert.Equal(t, core.InProgress, r.put(host, devs[core.MaxSlots], 64, 1))
	r.drv.Run()
	_, got := r.progress()
	assert.Equal(t, []done{{1, core.OK}}, got)
}
