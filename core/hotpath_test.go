// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"runtime/metrics"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/cudadrv"
	"github.com/cucopy/cucopy/internal/drvtest"
)

// cgoCalls is the process's count of Go-to-C calls so far.
func cgoCalls() uint64 {
	s := []metrics.Sample{{Name: "/cgo/go-to-c-calls:calls"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// openOnDriver opens a context, an iface with params p and an endpoint on
// the real binding over a C driver (the build tree's fake one, or
// $CUCOPY_CUDA_DRIVER), and allocates 4 KiB on device 0; the iface is
// closed when the test ends.
func openOnDriver(tb testing.TB, p core.IfaceParams) (*core.Context, *core.Iface, *core.Ep, uint64) {
	tb.Helper()
	// The tests copy from and to Go memory, which the driver sees as
	// pageable: small staging would finish their device-to-host copies
	// in the call instead of queueing them (TestSmallStagingHotPath).
	return openOnDriverEnv(tb, p, map[string]string{"CUCOPY_STAGE_SMALL": "0"})
}

// openOnDriverEnv is openOnDriver with the CUCOPY_* variables of env.
func openOnDriverEnv(tb testing.TB, p core.IfaceParams, env map[string]string) (*core.Context, *core.Iface, *core.Ep, uint64) {
	tb.Helper()
	path := drvtest.PathOrSkip(tb)
	require.NoError(tb, drvtest.Load(path))
	drv, err := cudadrv.Open(path)
	require.NoError(tb, err)
	cfg, err := core.LoadConfig(func(k string) string { return env[k] })
	require.NoError(tb, err)
	ctx, err := core.NewContext(drv, cfg)
	require.NoError(tb, err)
	iface, err := ctx.OpenIface(p)
	require.NoError(tb, err)
	tb.Cleanup(func() { assert.NoError(tb, iface.Close()) })
	ep, err := iface.NewEp()
	require.NoError(tb, err)
	dev, err := drvtest.AllocDevice(0, 4096)
	require.NoError(tb, err)
	return ctx, iface, ep, dev
}

// rateLoop is the perftest's rate loop on core: b.N operations issued by
// issue, 8 in flight, progress polled.
func rateLoop(b *testing.B, iface *core.Iface, issue func() error) {
	inflight := 0
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for inflight == 8 {
			done, err := iface.Progress()
			if err != nil {
				b.Fatal(err)
			}
			inflight -= done
		}
		if err := issue(); err != nil {
			b.Fatal(err)
		}
		inflight++
	}
	for inflight > 0 {
		done, _ := iface.Progress()
		inflight -= done
	}
}

// Small staging's path (stage.go, runSmall), with the defaults: a zcopy of
// two 8-byte entries from the device into Go (pageable) memory is done in
// the call with two cgo crossings (cd_copy, then the staging step) and
// allocates nothing.
func TestSmallStagingHotPath(t *testing.T) {
	_, _, ep, dev := openOnDriverEnv(t, core.IfaceParams{ThreadMode: core.ThreadSingle, MaxPoll: 16, MaxEvents: 64, Lanes: 1}, nil)
	host := make([]byte, 16)
	iov := []core.IOV{{Buffer: uintptr(unsafe.Pointer(&host[0])), Length: 8}, {Buffer: uintptr(unsafe.Pointer(&host[8])), Length: 8}}
	get := func() {
		st, err := ep.Zcopy(false, iov, dev, 0)
		if err != nil || st != core.OK {
			t.Fatalf("zcopy: %v %v", st, err)
		}
	}
	for range 4 { // the slot, stream and bounce buffers
		get()
	}
	before := cgoCalls()
	get()
	assert.Equal(t, uint64(2), cgoCalls()-before, "cgo crossings")
	assert.Zero(t, testing.AllocsPerRun(200, get), "allocations")
}

// The per-operation hot path, measured on the real cudadrv binding and a C
// driver (the fake one from the build tree, or $CUCOPY_CUDA_DRIVER): once a
// context's resources exist, a zcopy or short copy is exactly one cgo
// crossing (so is a zcopy whose iov is one run), a progress call is one
// for all slots and queues, and issuing plus progressing to completion
// allocates nothing, in both thread modes.
func TestHotPathOneCrossingNoAllocation(t *testing.T) {
	t.Run("single", func(t *testing.T) { testHotPath(t, core.ThreadSingle) })
	t.Run("multi", func(t *testing.T) { testHotPath(t, core.ThreadMulti) })
}

func testHotPath(t *testing.T, mode core.ThreadMode) {
	_, iface, ep, dev := openOnDriver(t, core.IfaceParams{ThreadMode: mode, MaxPoll: 16, MaxEvents: 64, Lanes: 2})

	host := make([]byte, 4096)
	buf := uintptr(unsafe.Pointer(&host[0]))
	iov := []core.IOV{{Buffer: buf, Length: 8}}
	issue := func() {
		st, err := ep.Zcopy(true, iov, dev, 0)
		if err != nil || st != core.InProgress {
			t.Fatalf("zcopy: %v %v", st, err)
		}
	}
	drain := func() {
		for n := 0; n == 0; {
			var err error
			if n, err = iface.Progress(); err != nil {
				t.Fatalf("progress: %v", err)
			}
		}
	}
	for i := 0; i < 8; i++ { // first use creates the slot, stream and event
		issue()
		drain()
		require.NoError(t, ep.Short(true, buf, 8, dev))
	}

	before := cgoCalls()
	issue()
	assert.Equal(t, uint64(1), cgoCalls()-before, "cgo crossings per zcopy")
	drain()
	// Progress asks about every slot in one crossing: with pieces in
	// flight on four queues (two directions, two lanes' slots on a
	// multi-thread iface), each progress call is one crossing.
	eps := []*core.Ep{ep}
	if mode == core.ThreadMulti {
		other, err := iface.NewEp() // the next lane: another slot of the context
		require.NoError(t, err)
		eps = append(eps, other)
	}
	for _, e := range eps { // make the D2H streams and events
		st, err := e.Zcopy(false, iov, dev, 0)
		require.NoError(t, err)
		require.Equal(t, core.InProgress, st)
		st, err = e.Zcopy(true, iov, dev, 0)
		require.NoError(t, err)
		require.Equal(t, core.InProgress, st)
	}
	for left := 2 * len(eps); left > 0; {
		n, err := iface.Progress()
		require.NoError(t, err)
		left -= n
	}
	for _, e := range eps {
		for k := 0; k < 4; k++ {
			st, err := e.Zcopy(k%2 == 0, iov, dev, 0)
			require.NoError(t, err)
			require.Equal(t, core.InProgress, st)
		}
	}
	calls := uint64(0)
	before = cgoCalls()
	for left := 4 * len(eps); left > 0; calls++ {
		n, err := iface.Progress()
		require.NoError(t, err)
		left -= n
	}
	assert.Equal(t, calls, cgoCalls()-before, "cgo crossings per progress call (%d calls)", calls)
	before = cgoCalls()
	require.NoError(t, ep.Short(true, buf, 8, dev))
	assert.Equal(t, uint64(1), cgoCalls()-before, "cgo crossings per short copy")

	// An iov of 16 entries on one context and stream is one run: one
	// crossing (one batch on the driver) for the whole operation.
	var iov16 [16]core.IOV
	for k := range iov16 {
		iov16[k] = core.IOV{Buffer: buf + uintptr(64*k), Length: 8}
	}
	issue16 := func() {
		st, err := ep.Zcopy(true, iov16[:], dev, 0)
		if err != nil || st != core.InProgress {
			t.Fatalf("zcopy of 16 entries: %v %v", st, err)
		}
	}
	issue16()
	drain()
	before = cgoCalls()
	issue16()
	assert.Equal(t, uint64(1), cgoCalls()-before, "cgo crossings per zcopy of a 16-entry run")
	drain()

	assert.Zero(t, testing.AllocsPerRun(500, func() { issue(); drain() }), "allocations per zcopy + progress")
	assert.Zero(t, testing.AllocsPerRun(500, func() { issue16(); drain() }), "allocations per 16-entry zcopy + progress")
	assert.Zero(t, testing.AllocsPerRun(500, func() {
		if err := ep.Short(false, buf, 8, dev); err != nil {
			t.Fatal(err)
		}
	}), "allocations per short copy")
}

// BenchmarkZcopyRate is the perftest's rate loop on core directly (no C ABI
// crossing in): 8-byte H2D zcopies, 8 in flight, progress polled.
func BenchmarkZcopyRate(b *testing.B) {
	_, iface, ep, dev := openOnDriver(b, core.IfaceParams{ThreadMode: core.ThreadSingle, MaxPoll: 16, MaxEvents: 64})
	host := make([]byte, 4096)
	iov := []core.IOV{{Buffer: uintptr(unsafe.Pointer(&host[0])), Length: 8}}
	rateLoop(b, iface, func() error { _, err := ep.Zcopy(true, iov, dev, 0); return err })
}
