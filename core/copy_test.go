// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/cudadrv/fakedrv"
)

func TestHostToHostIsCPUCopy(t *testing.T) {
	mem := map[string]func(d *fakedrv.Driver, n int) uint64{
		"pageable":   func(d *fakedrv.Driver, n int) uint64 { return d.Pageable(n) },
		"pinned":     func(d *fakedrv.Driver, n int) uint64 { return d.AllocHost(n, true) },
		"registered": func(d *fakedrv.Driver, n int) uint64 { return d.AllocHost(n, false) },
	}
	for sn, src := range mem {
		for dn, dst := range mem {
			t.Run(sn+"->"+dn, func(t *testing.T) {
				r := newRig(t, 2)
				a, b := src(r.drv, 300), dst(r.drv, 300)
				want := fill(r.drv, a, 300, 3)
				assert.Equal(t, core.OK, r.put(a, b, 300, 1))
				eqBytes(t, want, r.drv.Bytes(b, 300))
				want = fill(r.drv, b, 100, 9)
				assert.Equal(t, core.OK, r.get(a+10, b, 100, 2)) // remote b -> local a+10
				eqBytes(t, want, r.drv.Bytes(a+10, 100))
				require.NoError(t, r.ep.Short(true, uintptr(a), 50, b+200))
				eqBytes(t, r.drv.Bytes(a, 50), r.drv.Bytes(b+200, 50))

				n, comps := r.progress()
				assert.Zero(t, n)
				assert.Empty(t, comps, "an OK zcopy has no completion")
				assert.Zero(t, r.drv.Pending())
				assert.Zero(t, r.drv.LiveStreams())
				assert.Zero(t, r.drv.LiveEvents())
				for _, m := range []string{"ContextDevice", "ContextID", "PrimaryActive", "PrimaryRetain", "StreamCreate", "EventCreate"} {
					assert.Zero(t, r.drv.Calls(m), m)
				}
				assert.Zero(t, r.drv.PrimaryRetains(0))
				st, err := r.ifc.Flush("iface_flush", 5, false)
				require.NoError(t, err)
				assert.Equal(t, core.OK, st)
			})
		}
	}
}

// Every direction: InProgress, nothing moves before the driver runs,
// exactly one completion with the bytes in place after.
func TestZcopyDirections(t *testing.T) {
	type setup func(d *fakedrv.Driver) (local, remote uint64, put bool)
	cases := map[string]setup{
		"h2d-pageable": func(d *fakedrv.Driver) (uint64, uint64, bool) { return d.Pageable(4096), d.AllocDevice(0, 4096), true },
		"h2d-pinned": func(d *fakedrv.Driver) (uint64, uint64, bool) {
			return d.AllocHost(4096, true), d.AllocDevice(1, 4096), true
		},
		"d2h": func(d *fakedrv.Driver) (uint64, uint64, bool) { return d.Pageable(4096), d.AllocDevice(0, 4096), false },
		"d2h-put": func(d *fakedrv.Driver) (uint64, uint64, bool) {
			return d.AllocDevice(1, 4096), d.AllocHost(4096, true), true
		},
		"d2d": func(d *fakedrv.Driver) (uint64, uint64, bool) {
			return d.AllocDevice(0, 4096), d.AllocDevice(0, 4096), true
		},
		"peer-put": func(d *fakedrv.Driver) (uint64, uint64, bool) {
			return d.AllocDevice(0, 4096), d.AllocDevice(1, 4096), true
		},
		"peer-get": func(d *fakedrv.Driver) (uint64, uint64, bool) {
			return d.AllocDevice(0, 4096), d.AllocDevice(1, 4096), false
		},
		"managed-h2d": func(d *fakedrv.Driver) (uint64, uint64, bool) { return d.Pageable(4096), d.AllocManaged(1, 4096), true },
		"managed-d2d": func(d *fakedrv.Driver) (uint64, uint64, bool) {
			return d.AllocManaged(0, 4096), d.AllocDevice(0, 4096), true
		},
		"user-ctx": func(d *fakedrv.Driver) (uint64, uint64, bool) {
			return d.Pageable(4096), d.AllocCtx(d.CreateContext(1), 4096), true
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, 2)
			local, remote, put := mk(r.drv)
			src, dst := local, remote
			if !put {
				src, dst = remote, local
			}
			want := fill(r.drv, src+64, 1000, 5)
			before := append([]byte(nil), r.drv.Bytes(dst+64, 1000)...)
			st, err := r.zcopy(put, []core.IOV{{Buffer: uintptr(local + 64), Length: 1000}}, remote+64, 77)
			require.NoError(t, err)
			require.Equal(t, core.InProgress, st)
			eqBytes(t, before, r.drv.Bytes(dst+64, 1000), "copied before the stream ran")

			n, comps := r.progress()
			assert.Zero(t, n)
			assert.Empty(t, comps)

			assert.Equal(t, 1, r.drv.Run())
			eqBytes(t, want, r.drv.Bytes(dst+64, 1000))
			n, comps = r.progress()
			assert.Equal(t, 1, n)
			assert.Equal(t, []done{{77, core.OK}}, comps)
			n, comps = r.progress()
			assert.Zero(t, n)
			assert.Empty(t, comps, "completed twice")
			assert.Equal(t, 1, r.drv.LiveStreams(), "one stream for one direction")
			assert.Equal(t, 1, r.drv.LiveEvents())
			assert.Zero(t, r.drv.Activations(), "the library activated a primary context")
		})
	}
}

func TestPeerAccessEnabledOnce(t *testing.T) {
	r := newRig(t, 2)
	a, b := r.drv.AllocDevice(0, 256), r.drv.AllocDevice(1, 256)
	for k := 0; k < 3; k++ {
		require.Equal(t, core.InProgress, r.put(a, b, 256, uintptr(k+1)))
	}
	assert.Equal(t, 1, r.drv.Calls("EnablePeer"))
	assert.True(t, r.drv.PeerEnabled(r.drv.Primary(0), r.drv.Primary(1)), "peer access from the source's context")
	r.drv.Run()
	_, comps := r.progress()
	assert.Equal(t, []done{{1, core.OK}, {2, core.OK}, {3, core.OK}}, comps)
}

func TestZcopyIOV(t *testing.T) {
	r := newRigEnv(t, 2, perPiece)
	dev := r.drv.AllocDevice(1, 1<<16)
	host := r.drv.Pageable(1 << 16)
	lens := []int{100, 0, 4096, 1, 333}
	iov := make([]core.IOV, len(lens))
	var want []byte
	off := 0
	for k, n := range lens {
		iov[k] = core.IOV{Buffer: uintptr(host + uint64(off)*2), Length: uint64(n)}
		if n > 0 {
			want = append(want, fill(r.drv, host+uint64(off)*2, n, byte(k))...)
		}
		off += n + 10
	}
	st, err := r.zcopy(true, iov, dev+8, 9)
	require.NoError(t, err)
	require.Equal(t, core.InProgress, st)
	assert.Equal(t, 4, r.drv.Pending(), "one copy per non-empty entry")
	assert.Equal(t, 1, r.drv.Step(1))
	n, comps := r.progress()
	assert.Zero(t, n, "one piece of four is not the operation")
	assert.Empty(t, comps)
	r.drv.Run()
	n, comps = r.progress()
	assert.Equal(t, 1, n, "Progress counts operations")
	assert.Equal(t, []done{{9, core.OK}}, comps)
	eqBytes(t, want, r.drv.Bytes(dev+8, len(want)), "pieces land back to back")

	// get: remote pieces back into the entries
	for k := range iov {
		if iov[k].Length > 0 {
			clear(r.drv.Bytes(uint64(iov[k].Buffer), int(iov[k].Length)))
		}
	}
	require.Equal(t, core.InProgress, func() core.Status { s, _ := r.zcopy(false, iov, dev+8, 10); return s }())
	r.drv.Run()
	_, comps = r.progress()
	assert.Equal(t, []done{{10, core.OK}}, comps)
	var got []byte
	for _, v := range iov {
		got = append(got, r.drv.Bytes(uint64(v.Buffer), int(v.Length))...)
	}
	eqBytes(t, want, got)
}

// With runs (the default, CUCOPY_IOV_BATCH=auto) consecutive entries on
// one context and stream go to the driver layer in one call and to the
// stream as one batch with one event; the operation and the statistics
// still see every entry.
func TestZcopyIOVRun(t *testing.T) {
	r := newRig(t, 2)
	dev := r.drv.AllocDevice(1, 1<<16)
	host := r.drv.Pageable(1 << 16)
	lens := []int{100, 0, 4096, 1, 333}
	iov := make([]core.IOV, len(lens))
	var want []byte
	for k, off := 0, 0; k < len(lens); k++ {
		iov[k] = core.IOV{Buffer: uintptr(host + uint64(off)), Length: uint64(lens[k])}
		want = append(want, fill(r.drv, host+uint64(off), lens[k], byte(k))...)
		off += lens[k] + 10
	}
	st, err := r.zcopy(true, iov, dev+8, 9)
	require.NoError(t, err)
	require.Equal(t, core.InProgress, st)
	assert.Equal(t, 1, r.drv.Pending(), "one batch for the four entries")
	assert.Equal(t, 1, r.drv.Calls("CopyRun"))
	assert.Equal(t, 1, r.drv.Calls("EventCreate"), "one event for the run")
	r.drv.Run()
	n, comps := r.progress()
	assert.Equal(t, 1, n)
	assert.Equal(t, []done{{9, core.OK}}, comps)
	eqBytes(t, want, r.drv.Bytes(dev+8, len(want)), "pieces land back to back")
	s := r.ifc.Stats().Dir[core.DirH2D]
	assert.Equal(t, core.DirStats{Operations: 1, Pieces: 4, Bytes: uint64(len(want))}, s, "every entry counted")
}

// Runs end where the context, the direction or the kind of copy changes:
// a put of entries on devices 0, 0, 1, 1, the host and 0 to host memory is
// two batches, a CPU copy and a single copy, one completion after all.
func TestZcopyIOVRunsSplit(t *testing.T) {
	r := newRig(t, 2)
	const n = 256
	d0, d1, h := r.drv.AllocDevice(0, 3*n), r.drv.AllocDevice(1, 2*n), r.drv.Pageable(n)
	remote := r.drv.Pageable(6 * n)
	bufs := []uint64{d0, d0 + n, d1, d1 + n, h, d0 + 2*n}
	var iov []core.IOV
	var want []byte
	for k, b := range bufs {
		iov = append(iov, core.IOV{Buffer: uintptr(b), Length: n})
		want = append(want, fill(r.drv, b, n, byte(k+1))...)
	}
	st, err := r.zcopy(true, iov, remote, 5)
	require.NoError(t, err)
	require.Equal(t, core.InProgress, st)
	assert.Equal(t, 3, r.drv.Pending(), "device 0's run, device 1's run, device 0's last entry")
	assert.Equal(t, 2, r.drv.Calls("CopyRun"))
	r.drv.Step(2)
	_, comps := r.progress()
	assert.Empty(t, comps, "not before the last piece")
	r.drv.Run()
	_, comps = r.progress()
	assert.Equal(t, []done{{5, core.OK}}, comps)
	eqBytes(t, want, r.drv.Bytes(remote, 6*n))
	s := r.ifc.Stats()
	assert.Equal(t, core.DirStats{Operations: 1, Pieces: 5, Bytes: 5 * n}, s.Dir[core.DirD2H])
	assert.Equal(t, core.DirStats{Pieces: 1, Bytes: n}, s.Dir[core.DirHost])
}

// A run that fails leaves nothing of itself in flight, the runs before it
// are waited for, and the operation fails whole.
func TestDriverErrorMidRun(t *testing.T) {
	r := newRig(t, 2)
	const n = 1000
	d0, d1, host := r.drv.AllocDevice(0, 2*n), r.drv.AllocDevice(1, 2*n), r.drv.Pageable(4*n)
	want := fill(r.drv, d0, 2*n, 4)
	fill(r.drv, d1, 2*n, 5)
	r.drv.Fail("Copy", 2, fakedrv.ErrIllegalAddress)
	iov := []core.IOV{{uintptr(d0), n}, {uintptr(d0 + n), n}, {uintptr(d1), n}, {uintptr(d1 + n), n}}
	st, err := r.zcopy(true, iov, host, 7)
	errStatus(t, core.ErrCUDA, err)
	assert.Equal(t, core.ErrCUDA, st)
	assert.Zero(t, r.drv.Pending(), "the first run was synchronized, the second never queued")
	eqBytes(t, want, r.drv.Bytes(host, 2*n), "the first run was copied")
	eqBytes(t, make([]byte, 2*n), r.drv.Bytes(host+2*n, 2*n), "the failed run copied nothing")
	r.drv.Run()
	_, comps := r.progress()
	assert.Empty(t, comps, "a failed operation has no completion")
}

// Pieces on different queues (a CPU piece, an H2D and a D2D piece) still
// make one completion, after the last of them.
func TestZcopyIOVMixedKinds(t *testing.T) {
	r := newRig(t, 2)
	remote := r.drv.AllocDevice(0, 3000)
	host := r.drv.Pageable(1000)
	dev := r.drv.AllocDevice(0, 1000)
	w1 := fill(r.drv, host, 1000, 1)
	w2 := fill(r.drv, dev, 1000, 2)
	st, _ := r.zcopy(true, []core.IOV{{uintptr(host), 1000}, {uintptr(dev), 1000}}, remote, 4)
	require.Equal(t, core.InProgress, st)
	assert.Equal(t, 2, r.drv.LiveStreams(), "h2d and d2d streams")
	r.drv.Step(1)
	_, comps := r.progress()
	assert.Empty(t, comps)
	r.drv.Run()
	n, comps := r.progress()
	assert.Equal(t, 1, n)
	assert.Equal(t, []done{{4, core.OK}}, comps)
	eqBytes(t, append(w1, w2...), r.drv.Bytes(remote, 2000))
}

func TestZeroLength(t *testing.T) {
	r := newRig(t, 2)
	dev := r.drv.AllocDevice(0, 64)
	host := r.drv.Pageable(64)
	st, err := r.zcopy(true, []core.IOV{{uintptr(host), 0}, {0, 0}}, dev, 1)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st)
	st, err = r.zcopy(false, []core.IOV{{0, 0}}, 0, 1)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st)
	require.NoError(t, r.ep.Short(true, 0, 0, 0))
	require.NoError(t, r.ep.Short(false, uintptr(host), 0, dev))
	assert.Zero(t, r.drv.Calls("Copy"))
	_, comps := r.progress()
	assert.Empty(t, comps)
}

func TestShort(t *testing.T) {
	r := newRig(t, 2)
	dev := r.drv.AllocDevice(1, 512)
	host := r.drv.AllocHost(512, true)
	want := fill(r.drv, host, 512, 11)
	require.NoError(t, r.ep.Short(true, uintptr(host), 512, dev))
	eqBytes(t, want, r.drv.Bytes(dev, 512), "put_short is synchronous")
	assert.Zero(t, r.drv.Pending())
	clear(r.drv.Bytes(host, 512))
	require.NoError(t, r.ep.Short(false, uintptr(host), 512, dev))
	eqBytes(t, want, r.drv.Bytes(host, 512), "get_short is synchronous")
	assert.Equal(t, 1, r.drv.LiveStreams(), "one short stream, shared by both directions")
	assert.Zero(t, r.drv.LiveEvents(), "short copies need no event")
	_, comps := r.progress()
	assert.Empty(t, comps)

	// A short copy between devices.
	dev0 := r.drv.AllocDevice(0, 512)
	require.NoError(t, r.ep.Short(true, uintptr(dev), 512, dev0))
	eqBytes(t, want, r.drv.Bytes(dev0, 512))
}

func TestBadInput(t *testing.T) {
	r := newRig(t, 2)
	dev := r.drv.AllocDevice(0, 4096)
	host := r.drv.Pageable(4096)
	big := make([]core.IOV, core.MaxIOV+1)
	for k := range big {
		big[k] = core.IOV{uintptr(host), 1}
	}
	cases := []struct {
		name   string
		iov    []core.IOV
		remote uint64
		want   core.Status
	}{
		{"no iov", nil, dev, core.ErrInvalid},
		{"too many", big, dev, core.ErrInvalid},
		{"null buffer", []core.IOV{{0, 8}}, dev, core.ErrInvalid},
		{"null remote", []core.IOV{{uintptr(host), 8}}, 0, core.ErrInvalid},
		{"buffer overflows", []core.IOV{{math.MaxUint64 - 4, 8}}, dev, core.ErrInvalid},
		{"total overflows", []core.IOV{{uintptr(host), math.MaxUint64 / 2}, {uintptr(host), math.MaxUint64 / 2}, {uintptr(host), 8}}, dev, core.ErrInvalid},
		{"remote overflows", []core.IOV{{uintptr(host), 16}}, math.MaxUint64 - 8, core.ErrInvalid},
		{"dst crosses end", []core.IOV{{uintptr(host), 4096}}, dev + 1, core.ErrOutOfRange},
		{"unknown address", []core.IOV{{uintptr(host), 8}}, 0x42_0000, core.ErrCUDA},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, err := r.zcopy(true, c.iov, c.remote, 1)
			errStatus(t, c.want, err)
			assert.Equal(t, c.want, st)
			assert.Zero(t, r.drv.Pending(), "nothing may be in flight after an error")
		})
	}
	// get with the source (remote) crossing the end
	st, err := r.zcopy(false, []core.IOV{{uintptr(host), 4096}}, dev+8, 1)
	errStatus(t, core.ErrOutOfRange, err)
	assert.Equal(t, core.ErrOutOfRange, st)
	assert.Contains(t, err.Error(), "source")

	errStatus(t, core.ErrInvalid, r.ep.Short(true, 0, 8, dev))
	errStatus(t, core.ErrInvalid, r.ep.Short(true, uintptr(host), 8, 0))
	errStatus(t, core.ErrInvalid, r.ep.Short(true, uintptr(host), math.MaxUint64, dev))
	errStatus(t, core.ErrOutOfRange, r.ep.Short(false, uintptr(host), 4097, dev))
	assert.Zero(t, r.drv.Pending())
	_, comps := r.progress()
	assert.Empty(t, comps, "failed operations have no completion")
}

// Memory with no owning context runs on its device's primary context, which
// the library retains when the program activated it and never activates.
func TestNoOwningContextUsesPrimary(t *testing.T) {
	r := newRig(t, 2)
	vmm := r.drv.AllocVMM(1, 1024)
	host := r.drv.Pageable(1024)
	want := fill(r.drv, host, 1024, 4)

	st, err := r.zcopy(true, []core.IOV{{uintptr(host), 1024}}, vmm, 1)
	errStatus(t, core.ErrNoDevice, err)
	assert.Equal(t, core.ErrNoDevice, st)
	errStatus(t, core.ErrNoDevice, r.ep.Short(false, uintptr(host), 8, vmm))
	assert.Zero(t, r.drv.Activations(), "the library activated a primary context")
	assert.Zero(t, r.drv.PrimaryRetains(1))
	assert.Zero(t, r.drv.Pending())

	r.drv.ActivatePrimary(1) // the program does
	st, err = r.zcopy(true, []core.IOV{{uintptr(host), 1024}}, vmm, 2)
	require.NoError(t, err)
	require.Equal(t, core.InProgress, st)
	assert.Greater(t, r.drv.PrimaryRetains(1), 1, "the library holds its own retain")
	r.drv.Run()
	_, comps := r.progress()
	assert.Equal(t, []done{{2, core.OK}}, comps)
	eqBytes(t, want, r.drv.Bytes(vmm, 1024))

	// VMM memory of device 1 to device 1's own memory: one context, d2d.
	dev := r.drv.AllocDevice(1, 1024)
	require.Equal(t, core.InProgress, r.put(vmm, dev, 1024, 3))
	assert.Zero(t, r.drv.Calls("EnablePeer"))
	r.drv.Run()
	_, comps = r.progress()
	assert.Equal(t, []done{{3, core.OK}}, comps)
	eqBytes(t, want, r.drv.Bytes(dev, 1024))

	r.close()
	assert.Equal(t, 2, r.drv.PrimaryRetains(1), "close releases the library's retain only (AllocDevice retained once more)")
	assert.Zero(t, r.drv.Activations())
}

// Managed memory whose device is unknown: the current context, else the
// first active primary, else a CPU copy.
func TestManagedWithoutOwner(t *testing.T) {
	t.Run("cpu", func(t *testing.T) {
		r := newRig(t, 2)
		m, host := r.drv.AllocManagedUnowned(256), r.drv.Pageable(256)
		want := fill(r.drv, host, 256, 1)
		assert.Equal(t, core.OK, r.put(host, m, 256, 1))
		eqBytes(t, want, r.drv.Bytes(m, 256))
		assert.Zero(t, r.drv.LiveStreams())
		assert.Zero(t, r.drv.Activations())
	})
	t.Run("current", func(t *testing.T) {
		r := newRig(t, 2)
		c := r.drv.CreateContext(1)
		r.drv.SetCurrent(c)
		m, host := r.drv.AllocManagedUnowned(256), r.drv.Pageable(256)
		want := fill(r.drv, host, 256, 2)
		require.Equal(t, core.InProgress, r.put(host, m, 256, 1))
		r.drv.Run()
		_, comps := r.progress()
		assert.Equal(t, []done{{1, core.OK}}, comps)
		eqBytes(t, want, r.drv.Bytes(m, 256))
	})
	t.Run("first-active-primary", func(t *testing.T) {
		r := newRig(t, 2)
		r.drv.ActivatePrimary(1)
		m, host := r.drv.AllocManagedUnowned(256), r.drv.Pageable(256)
		want := fill(r.drv, host, 256, 3)
		require.Equal(t, core.InProgress, r.put(host, m, 256, 1))
		r.drv.Run()
		_, comps := r.progress()
		assert.Equal(t, []done{{1, core.OK}}, comps)
		eqBytes(t, want, r.drv.Bytes(m, 256))
		assert.Greater(t, r.drv.PrimaryRetains(1), 1, "the library holds its own retain")
		assert.Zero(t, r.drv.Activations())
		assert.Zero(t, r.drv.PrimaryRetains(0), "an inactive primary is never retained")
		r.close()
		assert.Equal(t, 1, r.drv.PrimaryRetains(1), "close gives every retain back")
	})
}

// Without cuCtxGetId contexts are keyed by handle.
func TestNoCtxID(t *testing.T) {
	r := newRig(t, 2)
	r.drv.SetHasCtxID(false)
	a, b := r.drv.AllocDevice(0, 128), r.drv.AllocDevice(1, 128)
	host := r.drv.Pageable(128)
	want := fill(r.drv, host, 128, 8)
	require.Equal(t, core.InProgress, r.put(host, a, 128, 1))
	require.Equal(t, core.InProgress, r.put(host, b, 128, 2))
	require.Equal(t, core.InProgress, r.put(host, a, 128, 3))
	assert.Equal(t, 2, r.drv.Calls("ContextDevice"), "one slot per context")
	r.drv.Run()
	_, comps := r.progress()
	assert.ElementsMatch(t, []done{{1, core.OK}, {2, core.OK}, {3, core.OK}}, comps)
	eqBytes(t, want, r.drv.Bytes(a, 128))
	eqBytes(t, want, r.drv.Bytes(b, 128))
}
