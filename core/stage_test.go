// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/cudadrv"
	"github.com/cucopy/cucopy/cudadrv/fakedrv"
)

// Pageable staging (stage.go) on the fake driver: small settings so that
// pieces of a few chunks are staged.
const stageMin = 100000

var staging = map[string]string{
	"CUCOPY_STAGE_THRESHOLD": fmt.Sprint(stageMin),
	"CUCOPY_STAGE_CHUNK":     "64K",
	"CUCOPY_STAGE_THREADS":   "3",
	"CUCOPY_STAGE_POOL":      "2",
}

func withEnv(base map[string]string, kv ...string) map[string]string {
	m := map[string]string{}
	for k, v := range base {
		m[k] = v
	}
	for k := 0; k+1 < len(kv); k += 2 {
		m[kv[k]] = kv[k+1]
	}
	return m
}

// finish runs what the fake queued and completes what is in flight.
func (r *rig) finish() []done {
	r.t.Helper()
	r.drv.Run()
	_, out := r.progress()
	return out
}

// A piece from the threshold on is staged and done when the call returns
// (OK, no completion); one below it goes to the driver. Data verified both
// ways at unaligned offsets and lengths.
func TestStageData(t *testing.T) {
	r := newRigEnv(t, 1, staging)
	for _, n := range []int{stageMin - 1, stageMin, stageMin + 13, 64<<10*5 + 1, 1<<20 + 77} {
		for _, off := range []int{0, 3} {
			for _, put := range []bool{true, false} {
				name := fmt.Sprintf("n=%d off=%d put=%v", n, off, put)
				host := r.drv.Pageable(n + off + 5)
				dev := r.drv.AllocDevice(0, n+off+5)
				src, dst := host+uint64(off), dev+uint64(off)
				if !put {
					src, dst = dev+uint64(off), host+uint64(off)
				}
				want := fill(r.drv, src, n, byte(n+off))
				steps := r.drv.Calls("StageStep")
				var st core.Status
				if put {
					st = r.put(host+uint64(off), dev+uint64(off), n, 1)
				} else {
					st = r.get(host+uint64(off), dev+uint64(off), n, 1)
				}
				if n >= stageMin {
					assert.Equal(t, core.OK, st, name)
					assert.Greater(t, r.drv.Calls("StageStep"), steps+2, name+": staged in chunks")
					assert.Zero(t, r.drv.Pending(), name+": nothing left in flight")
				} else {
					assert.Equal(t, core.InProgress, st, name)
					assert.Equal(t, steps, r.drv.Calls("StageStep"), name+": the driver's path")
					assert.Len(t, r.finish(), 1, name)
				}
				eqBytes(t, want, r.drv.Bytes(dst, n), name)
			}
		}
	}
	assert.Equal(t, 1, r.drv.Foreign(), "one pair of bounce buffers, reused")
	r.close()
	assert.Zero(t, r.drv.Foreign(), "unregistered at close")
}

// CUCOPY_STAGE_CPU=memmove: the same data through the user-space copy.
func TestStageMemmove(t *testing.T) {
	r := newRigEnv(t, 1, withEnv(staging, "CUCOPY_STAGE_CPU", "memmove"))
	n := 5*64<<10 + 3
	host, dev, back := r.drv.Pageable(n), r.drv.AllocDevice(0, n), r.drv.Pageable(n)
	want := fill(r.drv, host, n, 8)
	assert.Equal(t, core.OK, r.put(host, dev, n, 1))
	assert.Equal(t, core.OK, r.get(back, dev, n, 1))
	eqBytes(t, want, r.drv.Bytes(back, n))
}

// A short copy is staged too.
func TestStageShort(t *testing.T) {
	r := newRigEnv(t, 1, staging)
	n := 300001
	host, dev := r.drv.Pageable(n), r.drv.AllocDevice(0, n)
	want := fill(r.drv, host, n, 9)
	require.NoError(t, r.ep.Short(true, uintptr(host), uint64(n), dev))
	eqBytes(t, want, r.drv.Bytes(dev, n))
	back := r.drv.Pageable(n)
	require.NoError(t, r.ep.Short(false, uintptr(back), uint64(n), dev))
	eqBytes(t, want, r.drv.Bytes(back, n))
	assert.Positive(t, r.drv.Calls("StageStep"))
}

// CUCOPY_STAGE=off: the driver's path, whatever the size.
func TestStageOff(t *testing.T) {
	r := newRigEnv(t, 1, withEnv(staging, "CUCOPY_STAGE", "off"))
	n := 1 << 20
	host, dev := r.drv.Pageable(n), r.drv.AllocDevice(0, n)
	want := fill(r.drv, host, n, 4)
	assert.Equal(t, core.InProgress, r.put(host, dev, n, 1))
	assert.Len(t, r.finish(), 1)
	eqBytes(t, want, r.drv.Bytes(dev, n))
	assert.Zero(t, r.drv.Calls("StageStep"))
	assert.Zero(t, r.drv.Calls("HostRegister"))
}

// A staged copy runs after the endpoint's earlier copy of the same context
// and direction, still in flight: it goes on the same stream.
func TestStageOrder(t *testing.T) {
	r := newRigEnv(t, 1, staging)
	const small, big = 4096, 3 * stageMin
	// H2D: both write dev; the staged (later) one's bytes must stay.
	dev := r.drv.AllocDevice(0, big)
	h1, h2 := r.drv.Pageable(small), r.drv.Pageable(big)
	fill(r.drv, h1, small, 1)
	want := fill(r.drv, h2, big, 2)
	require.Equal(t, core.InProgress, r.put(h1, dev, small, 1))
	require.Equal(t, core.OK, r.put(h2, dev, big, 2))
	assert.Len(t, r.finish(), 1)
	eqBytes(t, want, r.drv.Bytes(dev, big), "h2d")
	// D2H: both write host; same.
	host := r.drv.Pageable(big)
	d1, d2 := r.drv.AllocDevice(0, small), r.drv.AllocDevice(0, big)
	fill(r.drv, d1, small, 3)
	want = fill(r.drv, d2, big, 4)
	require.Equal(t, core.InProgress, r.get(host, d1, small, 1))
	require.Equal(t, core.OK, r.get(host, d2, big, 2))
	assert.Len(t, r.finish(), 1)
	eqBytes(t, want, r.drv.Bytes(host, big), "d2h")
}

// After a fence, a staged H2D copy reads its source only once the copies
// before the fence finished: here one that writes that source.
func TestStageFence(t *testing.T) {
	r := newRigEnv(t, 1, staging)
	const n = 2 * stageMin
	host, d1, d2 := r.drv.Pageable(n), r.drv.AllocDevice(0, n), r.drv.AllocDevice(0, n)
	fill(r.drv, host, n, 1)
	want := fill(r.drv, d1, n, 2)
	// A D2H below the threshold (in flight), the fence, then the staged put.
	require.Equal(t, core.InProgress, r.get(host, d1, stageMin-1, 1))
	require.NoError(t, r.ifc.Fence("ep_fence"))
	require.Equal(t, core.OK, r.put(host, d2, n, 2))
	eqBytes(t, want[:stageMin-1], r.drv.Bytes(d2, stageMin-1), "the staged copy read what the D2H before the fence wrote")
	assert.Len(t, r.finish(), 1)
}

// The pool cannot be pinned: the copy takes the driver's path, correctly,
// and the context is not tried again.
func TestStagePoolFailure(t *testing.T) {
	r := newRigEnv(t, 1, staging)
	r.drv.Fail("HostRegister", 1, cudadrv.ErrorOutOfMemory)
	n := 3 * stageMin
	for k := range 2 {
		host, dev := r.drv.Pageable(n), r.drv.AllocDevice(0, n)
		want := fill(r.drv, host, n, byte(k))
		assert.Equal(t, core.InProgress, r.put(host, dev, n, 1))
		assert.Len(t, r.finish(), 1)
		eqBytes(t, want, r.drv.Bytes(dev, n))
	}
	assert.Equal(t, 1, r.drv.Calls("HostRegister"), "tried once")
	assert.Zero(t, r.drv.Calls("StageStep"))
	assert.Zero(t, r.drv.Foreign())
}

// A bounce DMA fails part-way: the copy is an error, nothing is left in
// flight, no completion comes; the next copy stages correctly (another pair).
func TestStageDMAFailure(t *testing.T) {
	for _, put := range []bool{true, false} {
		t.Run(fmt.Sprint("put=", put), func(t *testing.T) {
			r := newRigEnv(t, 1, staging)
			n := 64<<10*6 + 9
			host, dev := r.drv.Pageable(n), r.drv.AllocDevice(0, n)
			r.drv.Fail("StageStep", 3, fakedrv.ErrIllegalAddress)
			var err error
			if put {
				_, err = r.zcopy(true, []core.IOV{{Buffer: uintptr(host), Length: uint64(n)}}, dev, 1)
			} else {
				_, err = r.zcopy(false, []core.IOV{{Buffer: uintptr(host), Length: uint64(n)}}, dev, 1)
			}
			errStatus(t, core.ErrCUDA, err)
			assert.Zero(t, r.drv.Pending(), "nothing in flight after the error")
			assert.Empty(t, r.finish(), "no completion")
			src, dst := host, dev
			if !put {
				src, dst = dev, host
			}
			want := fill(r.drv, src, n, 7)
			if put {
				assert.Equal(t, core.OK, r.put(host, dev, n, 2))
			} else {
				assert.Equal(t, core.OK, r.get(host, dev, n, 2))
			}
			eqBytes(t, want, r.drv.Bytes(dst, n))
			assert.Equal(t, 2, r.drv.Foreign(), "the failed pair is not reused")
			r.close()
			assert.Zero(t, r.drv.Foreign(), "both unregistered at close")
		})
	}
}

// Contexts that go: a released context's pairs are unregistered while it
// lives; a reset one's are dropped without a call on it (the strict fake
// calls an unregistration under a dead context a violation).
func TestStageContextsGo(t *testing.T) {
	r := newRigEnv(t, 1, staging)
	n := 2 * stageMin
	host := r.drv.Pageable(n)
	want := fill(r.drv, host, n, 5)
	user := r.drv.CreateContext(0)
	d := r.drv.AllocCtx(user, n)
	require.Equal(t, core.OK, r.put(host, d, n, 1))
	eqBytes(t, want, r.drv.Bytes(d, n))
	require.Equal(t, 1, r.drv.Foreign())
	require.NoError(t, r.ifc.ReleaseContext(r.drv.ID(user)))
	assert.Zero(t, r.drv.Foreign(), "unregistered at release, before the program destroys it")
	r.drv.DestroyContext(user)

	d0 := r.drv.AllocDevice(0, n)
	require.Equal(t, core.OK, r.put(host, d0, n, 1))
	require.Equal(t, 1, r.drv.Foreign())
	r.drv.ResetPrimary(0)
	assert.Zero(t, r.drv.Foreign(), "went with the context")
	r.close() // drops the reset context's slot: no call on it
	assert.Zero(t, r.drv.Foreign())
}

// Multi-thread iface: threads stage at once, with their own endpoints and
// on shared ones, more of them than pairs (the rest take the driver's
// path); every byte arrives.
func TestStageMultiThread(t *testing.T) {
	const workers, rounds = 6, 8
	n := 2*stageMin + 11
	r := newRigEnv(t, 2, staging, func(p *core.IfaceParams) {
		p.ThreadMode = core.ThreadMulti
		p.Lanes = core.DefaultLanes
	})
	var completed [workers * rounds * 2]atomic.Bool
	// A copy that took the driver's path: progress (any thread's) completes it.
	wait := func(comp uintptr) {
		for !completed[comp-1].Load() {
			r.drv.Run()
			_, err := r.ifc.Progress()
			assert.NoError(t, err)
			r.ifc.RunCallbacks(func(comp uintptr, st core.Status) {
				assert.Equal(t, core.OK, st)
				completed[comp-1].Store(true)
			})
			runtime.Gosched()
		}
	}
	shared := r.ep
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ep := shared
			if w%2 == 0 {
				var err error
				ep, err = r.ifc.NewEp()
				if !assert.NoError(t, err) {
					return
				}
			}
			host, back, dev := r.drv.Pageable(n), r.drv.Pageable(n), r.drv.AllocDevice(w%2, n)
			for k := range rounds {
				want := fill(r.drv, host, n, byte(w*rounds+k))
				for dir, put := range []bool{true, false} {
					buf := host
					if !put {
						buf = back
					}
					comp := uintptr(1 + (w*rounds+k)*2 + dir)
					st, err := ep.Zcopy(put, []core.IOV{{Buffer: uintptr(buf), Length: uint64(n)}}, dev, comp)
					if !assert.NoError(t, err) {
						return
					}
					if st == core.InProgress {
						wait(comp)
					}
				}
				eqBytes(t, want, r.drv.Bytes(back, n), "worker %d round %d", w, k)
			}
		}()
	}
	wg.Wait()
	assert.Positive(t, r.drv.Calls("StageStep"))
	assert.LessOrEqual(t, r.drv.Foreign(), 2*2, "the pool is bounded: 2 pairs per context, 2 contexts")
}

// A plan counts no event for a staged piece: staged H2D entries alternating
// with small D2H ones on one slot need one event (the D2H pieces join), and
// an iface with max_events 2 takes the batch (found in review: the plan
// counted a stretch per staged piece and refused it as needing 6).
func TestStagedPiecesNeedNoEventInThePlan(t *testing.T) {
	r := newRigEnv(t, 1, staging, func(p *core.IfaceParams) { p.MaxEvents = 2 })
	var b []core.BatchCopy
	var want [][]byte
	var dsts []uint64
	for k := 0; k < 3; k++ {
		host := r.drv.Pageable(stageMin)
		dev := r.drv.AllocDevice(0, stageMin)
		want = append(want, fill(r.drv, host, stageMin, byte(k)))
		dsts = append(dsts, dev)
		b = append(b, core.BatchCopy{Dst: dev, Src: host, Len: stageMin}) // staged H2D
		h2 := r.drv.Pageable(64)
		d2 := r.drv.AllocDevice(0, 64)
		b = append(b, core.BatchCopy{Dst: h2, Src: d2, Len: 64}) // small D2H
	}
	st, err := r.ep.Batch(b, 1)
	require.NoError(t, err)
	assert.Contains(t, []core.Status{core.OK, core.InProgress}, st)
	r.finish()
	for k := range dsts {
		eqBytes(t, want[k], r.drv.Bytes(dsts[k], stageMin), "staged entry %d", k)
	}
}

// The pool is bounded per context: with CUCOPY_STAGE_POOL 2 and three
// devices, every device stages (found in review: a pool shared by all
// contexts left the third device on the driver's path for good).
func TestStagePoolPerContext(t *testing.T) {
	r := newRigEnv(t, 3, staging)
	for round := 0; round < 2; round++ {
		for d := 0; d < 3; d++ {
			host := r.drv.Pageable(stageMin)
			dev := r.drv.AllocDevice(d, stageMin)
			assert.Equal(t, core.OK, r.put(host, dev, stageMin, 1), "round %d, device %d: staged (OK), not the driver's path", round, d)
			r.finish()
		}
	}
}

// Small staging (stage.go, runSmall): the fake's defaults but for
// CUCOPY_STAGE_SMALL.
var smallStaging = withEnv(staging, "CUCOPY_STAGE_SMALL", "4K")

// A copy alone (a zcopy of one entry, a short copy) is never small-staged,
// whatever its size and memory: the driver's path is as fast for it. Data
// verified.
func TestStageSmallAlone(t *testing.T) {
	r := newRigEnv(t, 1, smallStaging)
	for _, c := range []struct {
		n           int
		pinned, put bool
		name        string
	}{
		{1, false, false, "1 B d2h"},
		{8, false, false, "8 B d2h"},
		{4096, false, false, "4 KiB d2h"},
		{4097, false, false, "4 KiB + 1 d2h"},
		{8, true, false, "8 B d2h pinned"},
		{8, false, true, "8 B h2d"},
	} {
		host := r.drv.Pageable(c.n+3) + 3
		if c.pinned {
			host = r.drv.AllocHost(c.n+3, true) + 3
		}
		dev := r.drv.AllocDevice(0, c.n+3) + 1
		src, dst := dev, host
		if c.put {
			src, dst = host, dev
		}
		want := fill(r.drv, src, c.n, byte(c.n))
		var st core.Status
		if c.put {
			st = r.put(host, dev, c.n, 1)
		} else {
			st = r.get(host, dev, c.n, 1)
		}
		assert.Equal(t, core.InProgress, st, c.name)
		assert.Len(t, r.finish(), 1, c.name)
		eqBytes(t, want, r.drv.Bytes(dst, c.n), c.name)
		fill(r.drv, dst, c.n, 0)
		require.NoError(t, r.ep.Short(c.put, uintptr(host), uint64(c.n), dev), c.name+" short")
		eqBytes(t, want, r.drv.Bytes(dst, c.n), c.name+" short")
	}
	assert.Zero(t, r.drv.Calls("StageStep"), "the driver's path")
}

// A batch of device-to-pageable copies is one staging step while their
// room (each rounded up to cudadrv.StageAlign) fits CUCOPY_STAGE_SMALL and
// holds two copies or more: 16 x 8 B in one step; 3 x 1500 B is one step of
// two (4 KiB holds two) and one copy alone on the driver's path; a pinned
// entry in the middle splits the batch (it is queued). Every byte verified.
func TestStageSmallRuns(t *testing.T) {
	cases := []struct {
		name   string
		lens   []int
		pinned int // the entry into pinned memory, or -1
		steps  int
		st     core.Status
	}{
		{"16x8B", []int{8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8}, -1, 1, core.OK},
		{"2x8B", []int{8, 8}, -1, 1, core.OK},
		{"3x1500B", []int{1500, 1500, 1500}, -1, 1, core.InProgress},
		{"4x1500B", []int{1500, 1500, 1500, 1500}, -1, 2, core.OK},
		{"4096+1", []int{4096, 1}, -1, 0, core.InProgress},
		{"aligned", []int{4032, 64}, -1, 1, core.OK},
		{"pinned in the middle", []int{8, 8, 8, 8, 8}, 2, 2, core.InProgress},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRigEnv(t, 1, smallStaging)
			var b []core.BatchCopy
			var want [][]byte
			for k, n := range c.lens {
				dev := r.drv.AllocDevice(0, n+1) + 1
				want = append(want, fill(r.drv, dev, n, byte(10+k)))
				host := r.drv.Pageable(n)
				if k == c.pinned {
					host = r.drv.AllocHost(n, true)
				}
				b = append(b, core.BatchCopy{Dst: host, Src: dev, Len: uint64(n)})
			}
			st, err := r.ep.Batch(b, 1)
			require.NoError(t, err)
			assert.Equal(t, c.steps, r.drv.Calls("StageStep"), "staging steps")
			assert.Equal(t, c.st, st)
			if st == core.OK {
				assert.Empty(t, r.finish(), "no completion")
			} else {
				assert.Len(t, r.finish(), 1, "one completion")
			}
			for k := range b {
				eqBytes(t, want[k], r.drv.Bytes(b[k].Dst, c.lens[k]), "entry %d", k)
			}
		})
	}
}

// CUCOPY_STAGE_SMALL=0, and CUCOPY_STAGE=off: the driver's path.
func TestStageSmallOff(t *testing.T) {
	for _, env := range []map[string]string{withEnv(smallStaging, "CUCOPY_STAGE_SMALL", "0"), withEnv(smallStaging, "CUCOPY_STAGE", "off")} {
		r := newRigEnv(t, 1, env)
		host, dev := r.drv.Pageable(16), r.drv.AllocDevice(0, 16)
		want := fill(r.drv, dev, 16, 5)
		st, err := r.ep.Batch([]core.BatchCopy{{Dst: host, Src: dev, Len: 8}, {Dst: host + 8, Src: dev + 8, Len: 8}}, 1)
		require.NoError(t, err)
		assert.Equal(t, core.InProgress, st)
		assert.Len(t, r.finish(), 1)
		eqBytes(t, want, r.drv.Bytes(host, 16))
		assert.Zero(t, r.drv.Calls("StageStep"))
	}
}

// The staging step fails (its DMAs are refused): the batch is an error,
// nothing is left in flight and no completion comes; the pair is not
// reused and the next batch stages correctly. Without a buffer (the pool
// cannot be pinned) the copies go straight into the caller's memory.
func TestStageSmallFailures(t *testing.T) {
	batch := func(r *rig) ([]core.BatchCopy, [][]byte) {
		var b []core.BatchCopy
		var want [][]byte
		for k := range 4 {
			dev := r.drv.AllocDevice(0, 16)
			want = append(want, fill(r.drv, dev, 16, byte(k+1)))
			b = append(b, core.BatchCopy{Dst: r.drv.Pageable(16), Src: dev, Len: 16})
		}
		return b, want
	}
	r := newRigEnv(t, 1, smallStaging)
	r.drv.Fail("StageStep", 1, fakedrv.ErrIllegalAddress)
	b, _ := batch(r)
	_, err := r.ep.Batch(b, 1)
	errStatus(t, core.ErrCUDA, err)
	assert.Zero(t, r.drv.Pending(), "nothing in flight after the error")
	assert.Empty(t, r.finish(), "no completion")
	b, want := batch(r)
	st, err := r.ep.Batch(b, 2)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st)
	for k := range b {
		eqBytes(t, want[k], r.drv.Bytes(b[k].Dst, 16), "entry %d", k)
	}
	assert.Equal(t, 2, r.drv.Foreign(), "the failed pair is not reused")
	r.close()
	assert.Zero(t, r.drv.Foreign())

	r = newRigEnv(t, 1, smallStaging)
	r.drv.Fail("HostRegister", 1, cudadrv.ErrorOutOfMemory)
	b, want = batch(r)
	st, err = r.ep.Batch(b, 1)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st, "straight into the caller's memory, done in the call")
	assert.Empty(t, r.finish())
	for k := range b {
		eqBytes(t, want[k], r.drv.Bytes(b[k].Dst, 16), "entry %d", k)
	}
	assert.Equal(t, 1, r.drv.Calls("StageStep"), "one step without a buffer")
	assert.Zero(t, r.drv.Foreign(), "nothing pinned")
}

// The reservation counts no event for a small-staged run, so a run that
// finds no buffer must not take one either (found in review: with the
// driver's path as fallback, a batch met max_events part-way and returned
// NO_RESOURCE with entries copied).
func TestStageSmallPlanHolds(t *testing.T) {
	r := newRigEnv(t, 1, smallStaging, func(p *core.IfaceParams) { p.MaxEvents = 3 })
	r.drv.Fail("HostRegister", 1, cudadrv.ErrorOutOfMemory)
	var b []core.BatchCopy
	var want [][]byte
	for k := range 3 {
		d := r.drv.AllocDevice(0, 128)
		want = append(want, fill(r.drv, d, 128, byte(k+1)))
		h := r.drv.Pageable(128)
		b = append(b, core.BatchCopy{Dst: h, Src: d, Len: 64}, core.BatchCopy{Dst: h + 64, Src: d + 64, Len: 64})
		p := r.drv.AllocHost(8, true)
		want = append(want, fill(r.drv, p, 8, byte(k+7)))
		b = append(b, core.BatchCopy{Dst: r.drv.AllocDevice(0, 8), Src: p, Len: 8})
	}
	st, err := r.ep.Batch(b, 1)
	require.NoError(t, err)
	assert.Equal(t, core.InProgress, st)
	assert.Len(t, r.finish(), 1)
	for k := 0; k < len(b); k += 3 {
		eqBytes(t, want[2*k/3], r.drv.Bytes(b[k].Dst, 128), "staged pair %d", k/3)
		eqBytes(t, want[2*k/3+1], r.drv.Bytes(b[k+2].Dst, 8), "h2d entry %d", k/3)
	}
}

// Threads of a multi-thread iface stage small runs at once, more of them
// than buffers (CUCOPY_STAGE_POOL 1): those without one copy straight into
// their memory; every batch is done in its call with its data.
func TestStageSmallThreads(t *testing.T) {
	r := newRigEnv(t, 1, withEnv(smallStaging, "CUCOPY_STAGE_POOL", "1"), func(p *core.IfaceParams) {
		p.ThreadMode, p.Lanes = core.ThreadMulti, 4
	})
	const threads, rounds = 4, 50
	var wg sync.WaitGroup
	for th := range threads {
		ep, err := r.ifc.NewEp()
		require.NoError(t, err)
		d := r.drv.AllocDevice(0, 64)
		want := fill(r.drv, d, 64, byte(th+1))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				h := r.drv.Pageable(64)
				st, err := ep.Batch([]core.BatchCopy{{Dst: h, Src: d, Len: 32}, {Dst: h + 32, Src: d + 32, Len: 32}}, 1)
				if !assert.NoError(t, err) || !assert.Equal(t, core.OK, st) {
					return
				}
				eqBytes(t, want, r.drv.Bytes(h, 64), "thread %d", th)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, threads*rounds, r.drv.Calls("StageStep"))
	assert.LessOrEqual(t, r.drv.Foreign(), 1, "CUCOPY_STAGE_POOL 1: one buffer")
}

// A small staged batch runs after the endpoint's earlier copy on the same
// stream (the same context and direction), still in flight: both write the
// same host bytes and the staged (later) ones must stay.
func TestStageSmallOrder(t *testing.T) {
	r := newRigEnv(t, 1, smallStaging)
	const big = 8192 // too large for small staging: queued
	host := r.drv.Pageable(big)
	d1, d2 := r.drv.AllocDevice(0, big), r.drv.AllocDevice(0, 64)
	fill(r.drv, d1, big, 1)
	want := fill(r.drv, d2, 64, 2)
	require.Equal(t, core.InProgress, r.get(host, d1, big, 1))
	st, err := r.ep.Batch([]core.BatchCopy{{Dst: host, Src: d2, Len: 32}, {Dst: host + 32, Src: d2 + 32, Len: 32}}, 2)
	require.NoError(t, err)
	require.Equal(t, core.OK, st)
	assert.Equal(t, 1, r.drv.Calls("StageStep"))
	assert.Len(t, r.finish(), 1)
	eqBytes(t, want, r.drv.Bytes(host, 64))
}
