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
	st, err := r.ifc.Flush("iface_flush", 9, false)
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
