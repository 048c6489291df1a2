// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"errors"
	"io"
	"os"
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

// An iov whose second piece fails: error returned, no completion, the first
// piece synchronized before the return, the third never issued.
func TestDriverErrorMidIOV(t *testing.T) {
	r := newRigEnv(t, 2, perPiece)
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
	out := captureStderr(t, func() { require.NoError(t, i.Close()) })
	assert.Empty(t, drv.Violations())
	assert.Contains(t, out, "cucopy stats: iface closed; 0 NO_RESOURCE, 0 flushes, 0 fences; contexts: 1 seen, 1 released, 0 reset\n")
	assert.Contains(t, out, "  host (CPU copies): host 1 ops 1 pieces 8 bytes\n")
	assert.Contains(t, out, "  device 0: h2d 1 ops 1 pieces 8 bytes\n")
	assert.Contains(t, out, "Go runtime while open:")
}

// captureStderr runs f with os.Stderr going to a pipe and returns what it wrote.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	rd, wr, err := os.Pipe()
	require.NoError(t, err)
	saved := os.Stderr
	os.Stderr = wr
	defer func() { os.Stderr = saved }()
	f()
	require.NoError(t, wr.Close())
	b, err := io.ReadAll(rd)
	require.NoError(t, err)
	return string(b)
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

// An operation that needs more events in one context than max_events can
// never be issued: a clear CUCOPY_ERR_INVALID_PARAM, not NO_RESOURCE (which
// asks for a retry that would fail forever). An operation refused only
// because other operations hold the events stays NO_RESOURCE.
func TestOperationThatNeverFits(t *testing.T) {
	r := newRig(t, 2, func(p *core.IfaceParams) { p.MaxEvents = 1 })
	dev0, dev1, host := r.drv.AllocDevice(0, 64), r.drv.AllocDevice(1, 64), r.drv.Pageable(64)
	// A put gathering device 0, device 1, device 0 into host memory: two
	// separate stretches on device 0, so two events there.
	iov := []core.IOV{{uintptr(dev0), 8}, {uintptr(dev1), 8}, {uintptr(dev0 + 8), 8}}
	for try := 0; try < 3; try++ {
		st, err := r.zcopy(true, iov, host, 1)
		errStatus(t, core.ErrInvalid, err)
		assert.Equal(t, core.ErrInvalid, st, "try %d", try)
		assert.Contains(t, err.Error(), "max_events")
		r.drv.Run()
		_, comps := r.progress()
		assert.Empty(t, comps, "a failed operation has no completion")
	}

	// Device 0's only event held by another operation: retry later.
	st, err := r.zcopy(true, iov[:1], host, 2)
	require.NoError(t, err)
	require.Equal(t, core.InProgress, st)
	st, err = r.zcopy(true, iov[2:], host+8, 3)
	errStatus(t, core.ErrNoResource, err)
	assert.Equal(t, core.ErrNoResource, st)
	r.drv.Run()
	_, comps := r.progress()
	require.Equal(t, []done{{2, core.OK}}, comps)
	st, err = r.zcopy(true, iov[2:], host+8, 3)
	require.NoError(t, err)
	assert.Equal(t, core.InProgress, st)
	r.drv.Run()
	_, comps = r.progress()
	assert.Equal(t, []done{{3, core.OK}}, comps)
}
