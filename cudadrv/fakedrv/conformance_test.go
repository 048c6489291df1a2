// SPDX-License-Identifier: BSD-3-Clause

package fakedrv_test

// fakedrv.Copy is a Go port of cd_copy (cudadrv/cd_copy.c), and the core's
// unit tests trust it. This test holds the port against the original: the
// same copy cases run through fakedrv and through the real binding
// (cudadrv.Open) on the C fake driver (build/fakecuda/libcuda.so.1, or
// $CUCOPY_CUDA_DRIVER), and each must give the same outcome on both. The
// test logic drives both through cudadrv.Interface (slots built here,
// streams and events from StreamCreate and EventCreate); only memory
// allocation differs (fakedrv's Alloc* helpers, internal/drvtest).

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/cudadrv"
	"github.com/cucopy/cucopy/cudadrv/fakedrv"
	"github.com/cucopy/cucopy/internal/drvtest"
)

const bufSize = 4096

// backend is one driver behind cudadrv.Interface and its way to allocate.
type backend struct {
	name string
	drv  cudadrv.Interface
	// strict: a fake driver, whose violations and sticky errors a case can
	// count and set.
	strict     bool
	devices    int
	pageable   func(n int) (uint64, []byte) // host memory CUDA does not know
	pinned     func(dev, n int) uint64      // CUDA-known host memory
	device     func(dev, n int) uint64      // owned by dev's primary context
	managed    func(dev, n int) uint64      // owned by dev's primary context
	noOwner    func(dev, n int) uint64      // device memory without an owning context (VMM, pool)
	userCtx    func(dev int) cudadrv.Context
	allocIn    func(ctx cudadrv.Context, n int) uint64
	violations func() int
	poison     func(ctx cudadrv.Context, code uint32)
	reset      func(dev int)
}

func goBackend() *backend {
	d := fakedrv.New(2)
	return &backend{
		name: "fakedrv", drv: d, strict: true, devices: 2,
		pageable: func(n int) (uint64, []byte) { a := d.Pageable(n); return a, d.Bytes(a, n) },
		pinned:   func(_, n int) uint64 { return d.AllocHost(n, true) },
		device:   d.AllocDevice,
		managed:  d.AllocManaged,
		noOwner:  d.AllocVMM,
		userCtx:  d.CreateContext,
		allocIn:  d.AllocCtx,
		violations: func() int {
			return len(d.Violations())
		},
		poison: d.Poison,
		reset:  d.ResetPrimary,
	}
}

var (
	cOnce    sync.Once
	cDriver  *backend
	cFailure error
	cKeep    [][]byte // Go memory the C driver copies to and from
)

// cBackend is the binding on the C driver: one per process, as the binding
// itself (the C fake's knobs are environment variables read at load).
func cBackend(t *testing.T) *backend {
	path := drvtest.PathOrSkip(t)
	cOnce.Do(func() {
		if os.Getenv("FAKECUDA_QUIET") == "" {
			os.Setenv("FAKECUDA_QUIET", "1") // the violation cases count, not print
		}
		if cFailure = drvtest.Load(path); cFailure != nil {
			return
		}
		drv, err := cudadrv.Open(path)
		if cFailure = err; err != nil {
			return
		}
		must := func(p uint64, err error) uint64 {
			if err != nil && cFailure == nil {
				cFailure = err
			}
			return p
		}
		cDriver = &backend{
			name: "cd_copy", drv: drv, strict: drvtest.IsFake(), devices: drvtest.DeviceCount(),
			pageable: func(n int) (uint64, []byte) {
				b := make([]byte, n)
				cKeep = append(cKeep, b)
				return uint64(uintptr(unsafe.Pointer(&b[0]))), b
			},
			pinned:  func(dev, n int) uint64 { return must(drvtest.AllocHost(dev, n)) },
			device:  func(dev, n int) uint64 { return must(drvtest.AllocDevice(dev, n)) },
			managed: func(dev, n int) uint64 { return must(drvtest.AllocManaged(dev, n)) },
			noOwner: func(dev, n int) uint64 { return must(drvtest.AllocPool(dev, n)) },
			userCtx: func(dev int) cudadrv.Context {
				ctx, err := drvtest.CreateContext(dev)
				must(0, err)
				return cudadrv.Context(ctx)
			},
			allocIn:    func(ctx cudadrv.Context, n int) uint64 { return must(drvtest.AllocIn(uintptr(ctx), n)) },
			violations: drvtest.Violations,
			poison:     func(ctx cudadrv.Context, code uint32) { drvtest.Poison(uintptr(ctx), int(code)) },
			reset:      func(dev int) { must(0, drvtest.ResetPrimary(dev)) },
		}
	})
	require.NoError(t, cFailure)
	t.Logf("cd_copy on %s", path)
	return cDriver
}

// env is a backend's contexts and buffers, shared by the cases.
type env struct {
	*backend
	ctx      [2]cudadrv.Context // primary contexts of devices 0 and 1
	id       [2]uint64
	user     cudadrv.Context // a context the program created on device 0
	userID   uint64
	h0, h1   uint64 // pageable
	hb0, hb1 []byte
	p0       uint64 // pinned
	d0a, d0b uint64 // device 0
	d1       uint64 // device 1
	m0       uint64 // managed, device 0
	v1       uint64 // no owning context, device 1
	du       uint64 // device 0, owned by user
}

func newEnv(t *testing.T, b *backend) *env {
	e := &env{backend: b}
	e.h0, e.hb0 = b.pageable(bufSize)
	e.h1, e.hb1 = b.pageable(bufSize)
	e.p0 = b.pinned(0, bufSize)
	e.d0a, e.d0b = b.device(0, bufSize), b.device(0, bufSize)
	e.m0 = b.managed(0, bufSize)
	e.user = b.userCtx(0)
	e.du = b.allocIn(e.user, bufSize)
	for dev := 0; dev < min(b.devices, 2); dev++ {
		ctx, err := b.drv.PrimaryRetain(dev)
		require.NoError(t, err)
		e.ctx[dev] = ctx
		e.id[dev], err = b.drv.ContextID(ctx)
		require.NoError(t, err)
	}
	if b.devices >= 2 {
		e.d1 = b.device(1, bufSize)
		e.v1 = b.noOwner(1, bufSize)
	}
	var err error
	e.userID, err = b.drv.ContextID(e.user)
	require.NoError(t, err)
	return e
}

// outcome is what one Copy call said, handles named by their role.
type outcome struct {
	Status                   cudadrv.CopyStatus
	Slot, Kind, Device, Side int32
	Dir                      int32 // compared between the drivers, not with the case's want
	Ctx, CtxID, PeerCtx      string
	Event, SeenPrimary       string
	Err                      string // the failed entry point, "" for none
	Code                     uint32
	Locked                   bool  // a slot's lock is held after the call
	Taken                    int32 // pieces of more in the run
	Detached                 int32 // issued without the slot's lock
}

// run is one case on one backend: its slot table, primary table, and the
// streams and events it created.
type run struct {
	*env
	t       *testing.T
	slots   []cudadrv.Slot
	primary []cudadrv.Context
	names   map[uintptr]string
	mems    []cudadrv.MemDesc // the descriptions Copy gets (CopyOp.SrcMem, DstMem)
	streams []ownedStream
	events  []ownedEvent
}

type ownedStream struct {
	ctx cudadrv.Context
	s   cudadrv.Stream
}

type ownedEvent struct {
	ctx cudadrv.Context
	e   cudadrv.Event
}

func newRun(t *testing.T, e *env) *run {
	r := &run{env: e, t: t, slots: make([]cudadrv.Slot, 4), primary: make([]cudadrv.Context, e.devices),
		names: map[uintptr]string{}}
	r.names[uintptr(e.ctx[0])], r.names[uintptr(e.ctx[1])], r.names[uintptr(e.user)] = "ctx0", "ctx1", "user"
	t.Cleanup(func() {
		for _, s := range r.streams {
			assert.NoError(t, e.drv.StreamSynchronize(s.ctx, s.s))
			assert.NoError(t, e.drv.StreamDestroy(s.ctx, s.s))
		}
		for _, ev := range r.events {
			assert.NoError(t, e.drv.EventDestroy(ev.ctx, ev.e))
		}
	})
	return r
}

// slot gives slots[i] to ctx's lane.
func (r *run) slot(i int, ctx cudadrv.Context, lane int32) *cudadrv.Slot {
	id, err := r.drv.ContextID(ctx)
	require.NoError(r.t, err)
	s := &r.slots[i]
	s.SetIdentity(id, ctx, lane)
	return s
}

func (r *run) stream(ctx cudadrv.Context) cudadrv.Stream {
	s, err := r.drv.StreamCreate(ctx)
	require.NoError(r.t, err)
	r.streams = append(r.streams, ownedStream{ctx, s})
	return s
}

func (r *run) event(ctx cudadrv.Context, name string) cudadrv.Event {
	ev, err := r.drv.EventCreate(ctx)
	require.NoError(r.t, err)
	r.events = append(r.events, ownedEvent{ctx, ev})
	r.names[uintptr(ev)] = name
	return ev
}

// full gives slots[i] to ctx (lane 0) with a stream of kind and a free event.
func (r *run) full(i int, ctx cudadrv.Context, kind int, event string) *cudadrv.Slot {
	s := r.slot(i, ctx, 0)
	s.Stream[kind] = r.stream(ctx)
	s.Event = r.event(ctx, event)
	return s
}

func (r *run) name(h uintptr) string {
	if h == 0 {
		return ""
	}
	if n, ok := r.names[h]; ok {
		return n
	}
	return fmt.Sprintf("?%#x", h)
}

func (r *run) idName(id uint64) string {
	switch {
	case id == 0:
		return ""
	case id == r.id[0]:
		return "id0"
	case id == r.id[1]:
		return "id1"
	case id == r.userID:
		return "idU"
	}
	return fmt.Sprintf("?%d", id)
}

// copy runs op through the backend's Copy and names what it said; a slot
// lock that came back held is released (the caller's part).
func (r *run) copy(op cudadrv.CopyOp) outcome { return r.copyRun(op, nil) }

// copyRun is copy with more pieces that may join op's run.
func (r *run) copyRun(op cudadrv.CopyOp, more []cudadrv.Piece) outcome {
	st := r.drv.Copy(r.slots, r.primary, &op, more, r.mems)
	if op.Detached != 0 {
		r.slots[op.Slot].DoneUser() // the caller's part (copy.go, step 8)
	}
	o := outcome{Taken: op.Taken, Detached: op.Detached,
		Status: st, Slot: op.Slot, Kind: op.Kind, Device: op.Device, Side: op.Side, Dir: op.Dir,
		Ctx: r.name(uintptr(op.Ctx)), CtxID: r.idName(op.CtxID), PeerCtx: r.name(uintptr(op.PeerCtx)),
		Event: r.name(uintptr(op.Event)), SeenPrimary: r.name(uintptr(op.SeenPrimary)), Code: op.Err.Result,
	}
	if op.Err.Entry != cudadrv.EntryNone {
		o.Err = op.Err.Entry.String()
	}
	for i := range r.slots {
		if !r.slots[i].TryLock() {
			o.Locked = true
		}
		r.slots[i].Unlock()
		r.slots[i].WaitUsers() // a short copy counted itself out again
	}
	return o
}

// describe adds the driver's description of ptr to the run's mems and
// returns its CopyOp index.
func (r *run) describe(ptr uint64, edit func(*cudadrv.MemDesc)) int32 {
	d, err := r.drv.Describe(ptr)
	require.NoError(r.t, err)
	if edit != nil {
		edit(&d)
	}
	r.mems = append(r.mems, d)
	return int32(len(r.mems))
}

// inc is the incarnation of device dev's primary context.
func (r *run) inc(dev int) cudadrv.Incarnation {
	return cudadrv.Incarnation{Ctx: r.ctx[dev], ID: r.id[dev], PrimaryDevice: int32(dev)}
}

// query asks QuerySlots about events as one H2D queue of device 0's
// primary context, once in order and once newest first: both must say how
// many leading ones completed.
func (r *run) query(events []cudadrv.Event) []int32 {
	ring := cudadrv.NewEventRing(len(events))
	defer cudadrv.FreeEventRing(ring)
	copy(ring, events)
	var got []int32
	for _, flags := range []int32{cudadrv.QueryInOrder, 0} {
		sq := []cudadrv.SlotQuery{{Inc: r.inc(0), Next: -1}}
		sq[0].Queue[cudadrv.KindH2D] = cudadrv.QueueQuery{Events: &ring[0], N: int32(len(ring)), Flags: flags}
		assert.NoError(r.t, r.drv.QuerySlots(sq, 0))
		assert.Zero(r.t, sq[0].Gone)
		assert.Equal(r.t, cudadrv.EntryNone, sq[0].Queue[cudadrv.KindH2D].Err.Entry)
		if flags == 0 && len(got) > 0 && got[0] == sq[0].Queue[cudadrv.KindH2D].Done {
			continue // the same answer both ways
		}
		got = append(got, sq[0].Queue[cudadrv.KindH2D].Done)
	}
	return got
}

// TestCopyConformance runs every case on fakedrv and on the binding over
// the C driver: each outcome must be the case's, on both.
func TestCopyConformance(t *testing.T) {
	backends := []*backend{goBackend(), cBackend(t)}
	got := map[string][]outcome{}
	for _, b := range backends {
		e := newEnv(t, b)
		for _, c := range cases() {
			t.Run(b.name+"/"+c.name, func(t *testing.T) {
				if c.twoGPUs && b.devices < 2 {
					t.Skip("needs two devices")
				}
				if c.strict && !b.strict {
					t.Skip("needs a fake driver's strictness")
				}
				o := c.run(newRun(t, e))
				got[c.name] = append(got[c.name], o)
				want := c.want
				want.Dir = o.Dir
				assert.Equal(t, want, o)
			})
		}
	}
	for _, c := range cases() {
		if o := got[c.name]; len(o) == 2 {
			assert.Equal(t, o[0], o[1], "%s: fakedrv and cd_copy disagree", c.name)
		}
	}
}
