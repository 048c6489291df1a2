// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/cudadrv/fakedrv"
)

// Several goroutines issue zcopies on their own endpoints while others run
// the driver and progress; every operation completes exactly once with the
// right bytes. Run it under -race.
func TestMultiThread(t *testing.T) {
	const (
		workers = 6
		perW    = 200
		size    = 64
	)
	r := newRig(t, 3, func(p *core.IfaceParams) {
		p.ThreadMode = core.ThreadMulti
		p.Lanes = core.DefaultLanes
		p.MaxEvents = 8 // hit back-pressure
	})
	type buf struct{ host, dev uint64 }
	bufs := make([]buf, workers)
	for w := range bufs {
		bufs[w] = buf{r.drv.Pageable(size * perW), r.drv.AllocDevice(w%3, size*perW)}
		fill(r.drv, bufs[w].host, size*perW, byte(w))
	}
	eps := make([]*core.Ep, workers)
	for w := range eps {
		ep, err := r.ifc.NewEp()
		require.NoError(t, err)
		eps[w] = ep
	}

	var seen [workers * perW]atomic.Int32
	var failed atomic.Int32
	var completed atomic.Int64
	stop := make(chan struct{})
	var pollers sync.WaitGroup
	for p := 0; p < 2; p++ {
		pollers.Add(1)
		go func() {
			defer pollers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r.drv.Step(3)
				if _, err := r.ifc.Progress(); err != nil {
					failed.Add(1)
					return
				}
				r.ifc.RunCallbacks(func(comp uintptr, st core.Status) {
					if st != core.OK || comp == 0 || comp > workers*perW {
						failed.Add(1)
						return
					}
					seen[comp-1].Add(1)
					completed.Add(1)
				})
			}
		}()
	}
	var issuers sync.WaitGroup
	for w := 0; w < workers; w++ {
		issuers.Add(1)
		go func(w int) {
			defer issuers.Done()
			for k := 0; k < perW; k++ {
				off := uint64(k * size)
				iov := []core.IOV{{uintptr(bufs[w].host + off), size / 2}, {uintptr(bufs[w].host + off + size/2), size / 2}}
				for {
					st, err := eps[w].Zcopy(true, iov, bufs[w].dev+off, uintptr(w*perW+k+1))
					if st == core.ErrNoResource {
						_, _ = r.ifc.Progress() // make room; completions go to the pollers
						continue
					}
					if err != nil || st != core.InProgress {
						failed.Add(1)
					}
					break
				}
				if k%50 == 0 {
					if _, err := eps[w].Flush(0, false); err != nil {
						failed.Add(1)
					}
				}
			}
		}(w)
	}
	issuers.Wait()
	for completed.Load() < workers*perW && failed.Load() == 0 {
		r.drv.Run()
		_, _ = r.ifc.Progress()
		r.ifc.RunCallbacks(func(comp uintptr, st core.Status) {
			if st == core.OK && comp > 0 && comp <= workers*perW {
				seen[comp-1].Add(1)
				completed.Add(1)
			} else {
				failed.Add(1)
			}
		})
	}
	close(stop)
	pollers.Wait()
	require.Zero(t, failed.Load())
	for k := range seen {
		require.Equal(t, int32(1), seen[k].Load(), "operation %d", k+1)
	}
	for w := range bufs {
		eqBytes(t, r.drv.Bytes(bufs[w].host, size*perW), r.drv.Bytes(bufs[w].dev, size*perW), "worker %d", w)
	}
	st, err := r.ifc.Flush("iface_flush", 1, false)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st)
	assert.LessOrEqual(t, r.drv.LiveEvents(), 3*core.DefaultLanes*8, "event cap per context and lane")
}

// A multi-thread iface issues without its lock, so progress can run between
// two pieces of one zcopy. Here it does, deterministically: it completes
// the first piece before the second is issued. The operation must not end
// early (its second piece is still to be issued), and the second piece
// must not re-record the first piece's event, which progress already
// queried and popped: folded into it, the operation would complete before
// its second piece ran.
func TestMultiProgressBetweenPieces(t *testing.T) {
	between := 0
	r, st, want, dev := betweenPieces(t, core.DefaultMaxEvents, func(r *rig) {
		r.drv.Run()
		n, err := r.ifc.Progress()
		assert.NoError(t, err)
		between = n
	})
	assert.Equal(t, 0, between, "progress completed the operation while its pieces were being issued")
	require.Equal(t, core.InProgress, st, "the operation ended before its second piece ran")
	assert.Empty(t, r.ready())
	r.drv.Run()
	nDone, got := r.progress()
	assert.Equal(t, 1, nDone)
	assert.Equal(t, []done{{2, core.OK}}, got)
	eqBytes(t, want, r.drv.Bytes(dev, len(want)))
	_, got = r.progress()
	assert.Empty(t, got)
}

// betweenPieces warms up a one-device multi-thread rig (slot, stream,
// event), then issues a two-piece zcopy with completion 2, running between
// just before its second piece is issued. It returns the rig, the zcopy's
// status, and what the device buffer dev must hold once it completed.
func betweenPieces(t *testing.T, maxEvents uint32, between func(*rig)) (*rig, core.Status, []byte, uint64) {
	t.Helper()
	r := newRigEnv(t, 1, perPiece, func(p *core.IfaceParams) {
		p.ThreadMode = core.ThreadMulti
		p.MaxEvents = maxEvents
	})
	const n = 4096
	// Pinned: pageable memory would be issued detached, which never joins.
	host, dev := r.drv.AllocHost(n, true), r.drv.AllocDevice(0, n)
	want := fill(r.drv, host, n, 3)
	require.Equal(t, core.InProgress, r.put(host, dev, 16, 1))
	r.drv.Run()
	_, got := r.progress()
	require.Equal(t, []done{{1, core.OK}}, got)
	calls := 0
	r.drv.OnCopy(func() {
		if calls++; calls == 2 {
			between(r)
		}
	})
	st, err := r.zcopy(true, []core.IOV{{uintptr(host), n / 2}, {uintptr(host + n/2), n / 2}}, dev, 2)
	r.drv.OnCopy(nil)
	require.NoError(t, err)
	return r, st, want, dev
}

// Contexts released (cucopy_iface_release_context) while other goroutines
// issue zcopies and short copies to them and progress, flush and arm: every
// operation completes exactly once with OK, every byte arrives, and the
// driver never sees a released stream or event used (the rig checks).
func TestMultiReleaseWhileCopying(t *testing.T) {
	const (
		workers = 4
		perW    = 300
		size    = 96
	)
	r := newRig(t, 2, func(p *core.IfaceParams) {
		p.ThreadMode = core.ThreadMulti
		p.Lanes = 2
		p.MaxEvents = 16
	})
	type buf struct{ host, dev, back uint64 }
	bufs := make([]buf, workers)
	want := make([][]byte, workers)
	for w := range bufs {
		bufs[w] = buf{r.drv.Pageable(size * perW), r.drv.AllocDevice(w%2, size*perW), r.drv.Pageable(size * perW)}
		want[w] = fill(r.drv, bufs[w].host, size*perW, byte(w+1))
	}
	ids := []uint64{r.drv.ID(r.drv.Primary(0)), r.drv.ID(r.drv.Primary(1))}
	fd, err := r.ifc.EventFD()
	require.NoError(t, err)

	var seen [workers * perW]atomic.Int32
	var failed atomic.Int32
	fail := func(format string, args ...any) {
		if failed.Add(1) < 5 {
			t.Errorf(format, args...)
		}
	}
	take := func() {
		r.ifc.RunCallbacks(func(comp uintptr, st core.Status) {
			switch {
			case comp > workers*perW: // a flush
			case st != core.OK || comp == 0:
				fail("completion %d: status %d", comp, st)
			default:
				seen[comp-1].Add(1)
			}
		})
	}

	stop := make(chan struct{})
	var helpers sync.WaitGroup
	helpers.Add(2)
	go func() { // progress, arm and flush, as an event loop would
		defer helpers.Done()
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			default:
			}
			r.drv.Step(5)
			if _, err := r.ifc.Progress(); err != nil {
				fail("progress: %v", err)
				return
			}
			take()
			if k%7 == 0 {
				if st, err := r.ifc.Arm(core.EventSendComp); err != nil || (st != core.OK && st != core.ErrBusy) {
					fail("arm: %d %v", st, err)
				}
				readable(t, fd)
			}
			if k%11 == 0 {
				if _, err := r.ifc.Flush("iface_flush", uintptr(workers*perW+1), false); err != nil {
					fail("flush: %v", err)
				}
			}
		}
	}()
	released := 0
	go func() { // the program releasing its contexts now and then
		defer helpers.Done()
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := r.ifc.ReleaseContext(ids[k%2]); err != nil {
				fail("release_context: %v", err)
				return
			}
			released++
			runtime.Gosched()
		}
	}()
	var issuers sync.WaitGroup
	for w := 0; w < workers; w++ {
		issuers.Add(1)
		go func(w int) {
			defer issuers.Done()
			ep, err := r.ifc.NewEp()
			if err != nil {
				fail("ep: %v", err)
				return
			}
			b := bufs[w]
			for k := 0; k < perW; k++ {
				off := uint64(k * size)
				if k%3 == 2 { // a short copy there and back
					if err := ep.Short(true, uintptr(b.host+off), size, b.dev+off); err != nil {
						fail("put_short: %v", err)
					}
					if err := ep.Short(false, uintptr(b.back+off), size, b.dev+off); err != nil {
						fail("get_short: %v", err)
					}
					seen[w*perW+k].Add(1)
					continue
				}
				third := uint64(size / 3)
				iov := []core.IOV{{uintptr(b.host + off), third}, {uintptr(b.host + off + third), third}, {uintptr(b.host + off + 2*third), size - 2*third}}
				for {
					st, err := ep.Zcopy(true, iov, b.dev+off, uintptr(w*perW+k+1))
					if st == core.ErrNoResource {
						runtime.Gosched()
						continue
					}
					if err != nil || st != core.InProgress {
						fail("zcopy: %d %v", st, err)
					}
					break
				}
			}
		}(w)
	}
	issuers.Wait()
	for pending := true; pending && failed.Load() == 0; {
		r.drv.Run()
		_, _ = r.ifc.Progress()
		take()
		pending = false
		for k := range seen {
			pending = pending || seen[k].Load() == 0
		}
	}
	close(stop)
	helpers.Wait()
	require.Zero(t, failed.Load())
	for k := range seen {
		require.Equal(t, int32(1), seen[k].Load(), "operation %d", k+1)
	}
	// The zcopies landed; the short copies went there and back.
	for w, b := range bufs {
		eqBytes(t, want[w], r.drv.Bytes(b.dev, size*perW), "worker %d device", w)
		for k := 2; k < perW; k += 3 {
			eqBytes(t, want[w][k*size:(k+1)*size], r.drv.Bytes(b.back+uint64(k*size), size), "worker %d short %d", w, k)
		}
	}
	assert.Positive(t, released)
	r.close()
	assert.Zero(t, r.drv.LiveStreams())
	assert.Zero(t, r.drv.LiveEvents())
}

// Endpoints of a multi-thread iface are dealt round robin to its lanes:
// two endpoints copying to one context use two streams (and a third shares
// the first one's), so threads with their own endpoints do not queue on one
// stream. Each lane's pieces complete in order. A single-thread iface has
// one lane.
func TestMultiLanes(t *testing.T) {
	for _, mode := range []core.ThreadMode{core.ThreadSingle, core.ThreadMulti} {
		r := newRig(t, 1, func(p *core.IfaceParams) {
			p.ThreadMode = mode
			p.Lanes = 2
		})
		host, dev := r.drv.Pageable(64), r.drv.AllocDevice(0, 64)
		eps := []*core.Ep{r.ep}
		for k := 0; k < 2; k++ {
			ep, err := r.ifc.NewEp()
			require.NoError(t, err)
			eps = append(eps, ep)
		}
		for k, ep := range eps {
			st, err := ep.Zcopy(true, []core.IOV{{uintptr(host), 64}}, dev, uintptr(k+1))
			require.NoError(t, err)
			require.Equal(t, core.InProgress, st)
		}
		want := map[core.ThreadMode]int{core.ThreadSingle: 1, core.ThreadMulti: 2}[mode]
		assert.Equal(t, want, r.drv.LiveStreams(), "h2d streams, mode %d", mode)
		r.drv.Run()
		_, got := r.progress()
		assert.ElementsMatch(t, []done{{1, core.OK}, {2, core.OK}, {3, core.OK}}, got)
		// release_context takes every lane of the context.
		require.NoError(t, r.ifc.ReleaseContext(r.drv.ID(r.drv.Primary(0))))
		assert.Zero(t, r.drv.LiveStreams())
	}
}

// More lanes than the limit is refused.
func TestLanesLimit(t *testing.T) {
	r := newRig(t, 1)
	_, err := r.ctx.OpenIface(core.IfaceParams{ThreadMode: core.ThreadMulti, MaxPoll: 1, MaxEvents: 1, Lanes: core.MaxLanes + 1})
	errStatus(t, core.ErrInvalid, err)
}

// Progress querying an operation's first piece while it still runs, between
// the operation's two pieces, must not cost the operation a second event:
// once progress has popped what finished, the pieces still queued may be
// joined again. With max_events 1 a refused join would be NO_RESOURCE.
func TestMultiJoinAfterUnfinishedQuery(t *testing.T) {
	polled := 0
	r, st, want, dev := betweenPieces(t, 1, func(r *rig) { // the first piece still runs
		n, err := r.ifc.Progress()
		assert.NoError(t, err)
		polled += n + 1
	})
	require.Equal(t, 1, polled, "progress ran between the pieces and completed nothing")
	require.Equal(t, core.InProgress, st)
	r.drv.Run()
	_, got := r.progress()
	assert.Equal(t, []done{{2, core.OK}}, got)
	eqBytes(t, want, r.drv.Bytes(dev, len(want)))
}

// A zcopy with pageable host memory on a multi-thread iface is enqueued
// without the slot's lock (the real driver stages such a copy inside the
// enqueue call, for milliseconds): while it is "blocked" there, another
// thread issues on the same slot, and progress completes that thread's copy.
// Both operations complete once, every byte lands and every event comes back.
func TestMultiPageableEnqueueHoldsNoLock(t *testing.T) {
	r := newRig(t, 1, func(p *core.IfaceParams) { p.ThreadMode = core.ThreadMulti })
	const n = 4096
	pageable, pinned, dev := r.drv.Pageable(n), r.drv.AllocHost(n, true), r.drv.AllocDevice(0, 2*n)
	want := append(fill(r.drv, pageable, n, 1), fill(r.drv, pinned, n, 2)...)
	// Three in flight: the slot, its stream and three events exist, one
	// the slot's free event and two in its pool, so the copy issued during
	// the enqueue refills the slot from the pool.
	for k := uintptr(7); k < 10; k++ {
		require.Equal(t, core.InProgress, r.put(pinned, dev+n, n, k))
	}
	r.drv.Run()
	_, got := r.progress()
	require.Equal(t, []done{{7, core.OK}, {8, core.OK}, {9, core.OK}}, got)

	var inside []done
	hook := sync.Once{}
	r.drv.OnDetached(func() {
		hook.Do(func() {
			finished := make(chan core.Status, 1)
			go func() { finished <- r.put(pinned, dev+n, n, 2) }() // same context and lane: same slot
			select {
			case st := <-finished:
				assert.Equal(t, core.InProgress, st)
			case <-time.After(10 * time.Second):
				t.Fatal("a copy on the slot waited for the detached enqueue")
			}
			r.drv.Run()
			_, inside = r.progress()
		})
	})
	require.Equal(t, core.InProgress, r.put(pageable, dev, n, 1))
	r.drv.OnDetached(nil)
	assert.Equal(t, []done{{2, core.OK}}, inside, "progress ran on the slot during the enqueue")
	r.drv.Run()
	_, got = r.progress()
	assert.Equal(t, []done{{1, core.OK}}, got)
	eqBytes(t, want, r.drv.Bytes(dev, 2*n))
	assert.Equal(t, 3, r.drv.Calls("EventCreate"), "no event was lost or created since")
	r.close()
	assert.Zero(t, r.drv.LiveEvents(), "every event came back and was destroyed")
}

// A release of the context while a detached enqueue runs waits for it to be
// booked, then waits for the copy: the operation completes OK and no stream
// or event is used after it was destroyed (the rig counts violations).
func TestMultiReleaseDuringDetachedEnqueue(t *testing.T) {
	r := newRig(t, 1, func(p *core.IfaceParams) { p.ThreadMode = core.ThreadMulti })
	const n = 4096
	pageable, dev := r.drv.Pageable(n), r.drv.AllocDevice(0, n)
	want := fill(r.drv, pageable, n, 5)
	released := make(chan error, 1)
	r.drv.OnDetached(func() {
		go func() { released <- r.ifc.ReleaseContext(r.drv.ID(r.drv.Primary(0))) }()
		select {
		case err := <-released:
			t.Errorf("the release returned (%v) while the piece was not booked yet", err)
		case <-time.After(50 * time.Millisecond):
		}
	})
	require.Equal(t, core.InProgress, r.put(pageable, dev, n, 3))
	r.drv.OnDetached(nil)
	r.drv.Run()
	select {
	case err := <-released:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the release never returned")
	}
	_, got := r.progress()
	assert.Equal(t, []done{{3, core.OK}}, got)
	eqBytes(t, want, r.drv.Bytes(dev, n))
}

// A detached enqueue that fails gives its event back: the next copy needs
// no new one.
func TestMultiDetachedFailureGivesEventBack(t *testing.T) {
	r := newRig(t, 1, func(p *core.IfaceParams) { p.ThreadMode = core.ThreadMulti })
	const n = 4096
	pageable, dev := r.drv.Pageable(n), r.drv.AllocDevice(0, n)
	want := fill(r.drv, pageable, n, 6)
	r.drv.Fail("Copy", 1, fakedrv.ErrIllegalAddress)
	st, err := r.ep.Zcopy(true, []core.IOV{{Buffer: uintptr(pageable), Length: n}}, dev, 4)
	errStatus(t, core.ErrCUDA, err)
	assert.Equal(t, core.ErrCUDA, st)
	created := r.drv.Calls("EventCreate")
	require.Equal(t, core.InProgress, r.put(pageable, dev, n, 5))
	assert.Equal(t, created, r.drv.Calls("EventCreate"), "the failed piece's event was reused")
	r.drv.Run()
	_, got := r.progress()
	assert.Equal(t, []done{{5, core.OK}}, got)
	eqBytes(t, want, r.drv.Bytes(dev, n))
}
