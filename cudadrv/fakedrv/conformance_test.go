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
	"golang.org/x/sys/unix"

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
	path := drvtest.DriverPath()
	if path == "" {
		t.Skip("the C fake driver is not built: make build makes build/fakecuda/libcuda.so.1 (or set CUCOPY_CUDA_DRIVER)")
	}
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
			name: "C " + path, drv: drv, strict: drvtest.IsFake(), devices: drvtest.DeviceCount(),
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
	Ctx, CtxID, PeerCtx      string
	Event, SeenPrimary       string
	Err                      string // the failed entry point, "" for none
	Code                     uint32
	Locked                   bool // a slot's lock is held after the call
}

// run is one case on one backend: its slot table, primary table, and the
// streams and events it created.
type run struct {
	*env
	t       *testing.T
	slots   []cudadrv.Slot
	primary []cudadrv.Context
	names   map[uintptr]string
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
func (r *run) copy(op cudadrv.CopyOp) outcome {
	st := r.drv.Copy(r.slots, r.primary, &op)
	o := outcome{
		Status: st, Slot: op.Slot, Kind: op.Kind, Device: op.Device, Side: op.Side,
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

// inc is the incarnation of device dev's primary context.
func (r *run) inc(dev int) cudadrv.Incarnation {
	return cudadrv.Incarnation{Ctx: r.ctx[dev], ID: r.id[dev], PrimaryDevice: int32(dev)}
}

func h2d(e *env) cudadrv.CopyOp { return cudadrv.CopyOp{Src: e.h0, Dst: e.d0a, Len: 64} }

// copying is a case that copies 64 bytes from src to dst and nothing else.
func copying(buffers func(e *env) (src, dst uint64)) func(r *run) outcome {
	return func(r *run) outcome {
		src, dst := buffers(r.env)
		return r.copy(cudadrv.CopyOp{Src: src, Dst: dst, Len: 64})
	}
}

// A case builds its slots, runs Copy (once or more) and returns the last
// outcome; want is what both drivers must say.
type copyCase struct {
	name            string
	twoGPUs, strict bool // needs a second device / a fake driver
	run             func(r *run) outcome
	want            outcome
}

func cases() []copyCase {
	needSlot := func(kind int32, ctx, id string) outcome {
		return outcome{Status: cudadrv.CopyNeedSlot, Slot: -1, Kind: kind, Device: -1, Ctx: ctx, CtxID: id}
	}
	at0 := func(st cudadrv.CopyStatus, kind int32) outcome {
		return outcome{Status: st, Slot: 0, Kind: kind, Ctx: "ctx0", CtxID: "id0"}
	}
	with := func(o outcome, f func(*outcome)) outcome { f(&o); return o }
	reuse := func(r *run, queried uint64, free string, op cudadrv.CopyOp) outcome {
		s := r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
		first := r.copy(h2d(r.env))
		require.Equal(r.t, cudadrv.CopyQueued, first.Status)
		// As the core books a queued piece: the event leaves the slot.
		prev := s.Event
		s.Event = 0
		if free != "" {
			s.Event = r.event(r.ctx[0], free)
		}
		s.Queried[cudadrv.KindH2D] = queried
		op.Flags |= cudadrv.CopyReuse
		op.ReuseEvent, op.ReuseSeq = prev, 1
		return r.copy(op)
	}
	reuseOp := func(e *env, slot, kind int32) cudadrv.CopyOp {
		op := h2d(e)
		op.Src, op.ReuseSlot, op.ReuseKind = e.h0+64, slot, kind
		return op
	}
	return []copyCase{
		// Host to host: the caller copies on the CPU, no context touched.
		{name: "host/pageable-pageable", run: copying(func(e *env) (uint64, uint64) { return e.h0, e.h1 }), want: outcome{Status: cudadrv.CopyCPU, Slot: -1}},
		{name: "host/pinned-pageable", run: copying(func(e *env) (uint64, uint64) { return e.p0, e.h0 }), want: outcome{Status: cudadrv.CopyCPU, Slot: -1}},
		{name: "host/pageable-pinned", run: copying(func(e *env) (uint64, uint64) { return e.h0, e.p0 }), want: outcome{Status: cudadrv.CopyCPU, Slot: -1}},
		{name: "host/force-cpu-managed", run: func(r *run) outcome {
			return r.copy(cudadrv.CopyOp{Src: r.m0, Dst: r.h0, Len: 64, Flags: cudadrv.CopyForceCPU})
		}, want: outcome{Status: cudadrv.CopyCPU, Slot: -1}},

		// No slot for the context yet.
		{name: "no-slot/h2d", run: func(r *run) outcome { return r.copy(h2d(r.env)) },
			want: needSlot(cudadrv.KindH2D, "ctx0", "id0")},
		{name: "no-slot/d2h", run: copying(func(e *env) (uint64, uint64) { return e.d0a, e.h0 }), want: needSlot(cudadrv.KindD2H, "ctx0", "id0")},
		{name: "no-slot/d2d", run: copying(func(e *env) (uint64, uint64) { return e.d0a, e.d0b }), want: needSlot(cudadrv.KindD2D, "ctx0", "id0")},
		{name: "no-slot/peer", twoGPUs: true, run: copying(func(e *env) (uint64, uint64) { return e.d0a, e.d1 }), want: needSlot(cudadrv.KindPeer, "ctx0", "id0")},
		{name: "no-slot/peer-d2h-side", twoGPUs: true, run: copying(func(e *env) (uint64, uint64) { return e.d1, e.d0a }), want: needSlot(cudadrv.KindPeer, "ctx1", "id1")},
		{name: "no-slot/pinned-h2d", twoGPUs: true, run: copying(func(e *env) (uint64, uint64) { return e.p0, e.d1 }), want: needSlot(cudadrv.KindH2D, "ctx1", "id1")},
		{name: "no-slot/managed", run: copying(func(e *env) (uint64, uint64) { return e.h0, e.m0 }), want: needSlot(cudadrv.KindH2D, "ctx0", "id0")},
		{name: "no-slot/two-contexts-one-device", run: copying(func(e *env) (uint64, uint64) { return e.d0a, e.du }), want: needSlot(cudadrv.KindPeer, "ctx0", "id0")},
		{name: "no-slot/user-context", run: copying(func(e *env) (uint64, uint64) { return e.h0, e.du }), want: needSlot(cudadrv.KindH2D, "user", "idU")},
		{name: "no-slot/short", run: func(r *run) outcome {
			op := h2d(r.env)
			op.Flags = cudadrv.CopySync
			return r.copy(op)
		}, want: needSlot(cudadrv.KindShort, "ctx0", "id0")},
		{name: "no-slot/other-context-only", twoGPUs: true, run: func(r *run) outcome {
			r.full(0, r.ctx[1], cudadrv.KindH2D, "ev1")
			return r.copy(h2d(r.env))
		}, want: needSlot(cudadrv.KindH2D, "ctx0", "id0")},

		// A slot, but not everything in it.
		{name: "no-stream/h2d", run: func(r *run) outcome {
			r.slot(0, r.ctx[0], 0)
			return r.copy(h2d(r.env))
		}, want: at0(cudadrv.CopyNeedStream, cudadrv.KindH2D)},
		{name: "no-stream/other-kind-only", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindD2H, "ev0")
			return r.copy(h2d(r.env))
		}, want: at0(cudadrv.CopyNeedStream, cudadrv.KindH2D)},
		{name: "no-stream/short", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			op := h2d(r.env)
			op.Flags = cudadrv.CopySync
			return r.copy(op)
		}, want: at0(cudadrv.CopyNeedStream, cudadrv.KindShort)},
		{name: "no-peer/not-tried", twoGPUs: true, run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindPeer, "ev0")
			return r.copy(cudadrv.CopyOp{Src: r.d0a, Dst: r.d1, Len: 64})
		}, want: with(at0(cudadrv.CopyNeedPeer, cudadrv.KindPeer), func(o *outcome) { o.PeerCtx = "ctx1" })},
		{name: "no-peer/before-stream", twoGPUs: true, run: func(r *run) outcome {
			r.slot(0, r.ctx[0], 0)
			return r.copy(cudadrv.CopyOp{Src: r.d0a, Dst: r.d1, Len: 64})
		}, want: with(at0(cudadrv.CopyNeedPeer, cudadrv.KindPeer), func(o *outcome) { o.PeerCtx = "ctx1" })},
		{name: "no-stream/peer-tried", twoGPUs: true, run: func(r *run) outcome {
			s := r.slot(0, r.ctx[0], 0)
			s.Peer[0], s.NPeers = r.ctx[1], 1
			return r.copy(cudadrv.CopyOp{Src: r.d0a, Dst: r.d1, Len: 64})
		}, want: at0(cudadrv.CopyNeedStream, cudadrv.KindPeer)},
		{name: "no-event/h2d", run: func(r *run) outcome {
			r.slot(0, r.ctx[0], 0).Stream[cudadrv.KindH2D] = r.stream(r.ctx[0])
			return r.copy(h2d(r.env))
		}, want: at0(cudadrv.CopyNeedEvent, cudadrv.KindH2D)},

		// Everything there: issued.
		{name: "queued/h2d", run: func(r *run) outcome {
			s := r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			o := r.copy(h2d(r.env))
			// The piece completes, and progress and arm say so.
			require.NoError(r.t, r.drv.StreamSynchronize(r.ctx[0], s.Stream[cudadrv.KindH2D]))
			n, err := r.drv.QueryEvents(r.inc(0), []cudadrv.Event{s.Event})
			assert.NoError(r.t, err)
			assert.Equal(r.t, 1, n, "QueryEvents")
			fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
			require.NoError(r.t, err)
			defer unix.Close(fd)
			busy, err := r.drv.Arm(r.inc(0), s.Stream[cudadrv.KindH2D], s.Event, fd)
			assert.NoError(r.t, err)
			assert.True(r.t, busy, "Arm on a completed head")
			assert.False(r.t, r.drv.Gone(r.inc(0)), "Gone")
			assert.False(r.t, r.drv.Gone(cudadrv.Incarnation{Ctx: r.user, ID: r.userID, PrimaryDevice: -1}), "Gone (user context)")
			return o
		}, want: with(at0(cudadrv.CopyQueued, cudadrv.KindH2D), func(o *outcome) { o.Event = "ev0" })},
		{name: "queued/d2h", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindD2H, "ev0")
			return r.copy(cudadrv.CopyOp{Src: r.d0a, Dst: r.h0, Len: 64})
		}, want: with(at0(cudadrv.CopyQueued, cudadrv.KindD2H), func(o *outcome) { o.Event = "ev0" })},
		{name: "queued/d2d", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindD2D, "ev0")
			return r.copy(cudadrv.CopyOp{Src: r.d0a, Dst: r.d0b, Len: 64})
		}, want: with(at0(cudadrv.CopyQueued, cudadrv.KindD2D), func(o *outcome) { o.Event = "ev0" })},
		{name: "queued/peer", twoGPUs: true, run: func(r *run) outcome {
			s := r.full(0, r.ctx[0], cudadrv.KindPeer, "ev0")
			s.Peer[0], s.NPeers = r.ctx[1], 1
			return r.copy(cudadrv.CopyOp{Src: r.d0a, Dst: r.d1, Len: 64})
		}, want: with(at0(cudadrv.CopyQueued, cudadrv.KindPeer), func(o *outcome) { o.Event = "ev0" })},
		{name: "queued/second-slot", twoGPUs: true, run: func(r *run) outcome {
			r.full(0, r.ctx[1], cudadrv.KindH2D, "ev1")
			r.full(1, r.ctx[0], cudadrv.KindH2D, "ev0")
			return r.copy(h2d(r.env))
		}, want: with(at0(cudadrv.CopyQueued, cudadrv.KindH2D), func(o *outcome) { o.Slot, o.Event = 1, "ev0" })},
		{name: "done/short", run: func(r *run) outcome {
			r.slot(0, r.ctx[0], 0).Stream[cudadrv.KindShort] = r.stream(r.ctx[0])
			for i := range r.hb0 {
				r.hb0[i], r.hb1[i] = byte(i*7+1), 0
			}
			up := cudadrv.CopyOp{Src: r.h0, Dst: r.d0a, Len: bufSize, Flags: cudadrv.CopySync}
			require.Equal(r.t, cudadrv.CopyDone, r.copy(up).Status)
			o := r.copy(cudadrv.CopyOp{Src: r.d0a, Dst: r.h1, Len: bufSize, Flags: cudadrv.CopySync})
			assert.Equal(r.t, r.hb0, r.hb1, "a short copy is synchronous: the bytes are back")
			return o
		}, want: outcome{Status: cudadrv.CopyDone, Slot: 0, Kind: cudadrv.KindShort, Ctx: "ctx0", CtxID: "id0"}},
		{name: "done/short-leaves-free-event", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindShort, "ev0")
			op := h2d(r.env)
			op.Flags = cudadrv.CopySync
			return r.copy(op)
		}, want: outcome{Status: cudadrv.CopyDone, Slot: 0, Kind: cudadrv.KindShort, Ctx: "ctx0", CtxID: "id0", Event: "ev0"}},

		// The next piece of an operation on the same queue (CopyReuse).
		{name: "reuse/joined", run: func(r *run) outcome { return reuse(r, 0, "", reuseOp(r.env, 0, cudadrv.KindH2D)) },
			want: with(at0(cudadrv.CopyJoined, cudadrv.KindH2D), func(o *outcome) { o.Event = "ev0" })},
		{name: "reuse/queried-needs-event", run: func(r *run) outcome { return reuse(r, 1, "", reuseOp(r.env, 0, cudadrv.KindH2D)) },
			want: at0(cudadrv.CopyNeedEvent, cudadrv.KindH2D)},
		{name: "reuse/queried-queued", run: func(r *run) outcome { return reuse(r, 1, "ev1", reuseOp(r.env, 0, cudadrv.KindH2D)) },
			want: with(at0(cudadrv.CopyQueued, cudadrv.KindH2D), func(o *outcome) { o.Event = "ev1" })},
		{name: "reuse/other-kind", run: func(r *run) outcome { return reuse(r, 0, "", reuseOp(r.env, 0, cudadrv.KindD2H)) },
			want: at0(cudadrv.CopyNeedEvent, cudadrv.KindH2D)},
		{name: "reuse/other-slot", run: func(r *run) outcome { return reuse(r, 0, "", reuseOp(r.env, 1, cudadrv.KindH2D)) },
			want: at0(cudadrv.CopyNeedEvent, cudadrv.KindH2D)},
		{name: "reuse/short-never-joins", run: func(r *run) outcome {
			s := r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			s.Stream[cudadrv.KindShort] = r.stream(r.ctx[0])
			op := reuseOp(r.env, 0, cudadrv.KindShort)
			op.Flags = cudadrv.CopySync | cudadrv.CopyReuse
			op.ReuseEvent, op.ReuseSeq = s.Event, 1
			return r.copy(op)
		}, want: outcome{Status: cudadrv.CopyDone, Slot: 0, Kind: cudadrv.KindShort, Ctx: "ctx0", CtxID: "id0", Event: "ev0"}},

		// Memory without an owning context runs on its device's primary context.
		{name: "primary/none-retained", twoGPUs: true, run: copying(func(e *env) (uint64, uint64) { return e.h0, e.v1 }), want: outcome{Status: cudadrv.CopyNeedPrimary, Slot: -1, Device: 1}},
		{name: "primary/none-retained-d2d", twoGPUs: true, run: copying(func(e *env) (uint64, uint64) { return e.d1, e.v1 }), want: outcome{Status: cudadrv.CopyNeedPrimary, Slot: -1, Device: 1}},
		{name: "primary/retained", twoGPUs: true, run: func(r *run) outcome {
			cudadrv.StorePrimary(r.primary, 1, r.ctx[1])
			return r.copy(cudadrv.CopyOp{Src: r.v1, Dst: r.h0, Len: 64})
		}, want: needSlot(cudadrv.KindD2H, "ctx1", "id1")},
		{name: "primary/retained-d2d", twoGPUs: true, run: func(r *run) outcome {
			cudadrv.StorePrimary(r.primary, 1, r.ctx[1])
			return r.copy(cudadrv.CopyOp{Src: r.d1, Dst: r.v1, Len: 64})
		}, want: needSlot(cudadrv.KindD2D, "ctx1", "id1")},

		// A range crossing its allocation's end.
		{name: "range/src", run: func(r *run) outcome {
			return r.copy(cudadrv.CopyOp{Src: r.d0a + bufSize - 100, Dst: r.h0, Len: 200})
		}, want: outcome{Status: cudadrv.CopyOutOfRange, Slot: -1, Side: 0}},
		{name: "range/dst", run: func(r *run) outcome {
			return r.copy(cudadrv.CopyOp{Src: r.h0, Dst: r.d0a + bufSize - 100, Len: 200})
		}, want: outcome{Status: cudadrv.CopyOutOfRange, Slot: -1, Side: 1}},
		{name: "range/both-src-first", run: func(r *run) outcome {
			return r.copy(cudadrv.CopyOp{Src: r.d0a + bufSize - 1, Dst: r.d0b + bufSize - 1, Len: 2})
		}, want: outcome{Status: cudadrv.CopyOutOfRange, Slot: -1, Side: 0}},
		{name: "range/managed", run: func(r *run) outcome {
			return r.copy(cudadrv.CopyOp{Src: r.h0, Dst: r.m0 + bufSize - 8, Len: 64})
		}, want: outcome{Status: cudadrv.CopyOutOfRange, Slot: -1, Side: 1}},
		{name: "range/exact-end-fits", run: func(r *run) outcome {
			return r.copy(cudadrv.CopyOp{Src: r.h0, Dst: r.d0a + bufSize - 64, Len: 64})
		}, want: needSlot(cudadrv.KindH2D, "ctx0", "id0")},

		// CopyLock: the slot's lock comes back held on Queued and Joined only.
		{name: "lock/queued-held", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			op := h2d(r.env)
			op.Flags = cudadrv.CopyLock
			return r.copy(op)
		}, want: with(at0(cudadrv.CopyQueued, cudadrv.KindH2D), func(o *outcome) { o.Event, o.Locked = "ev0", true })},
		{name: "lock/joined-held", run: func(r *run) outcome {
			op := reuseOp(r.env, 0, cudadrv.KindH2D)
			op.Flags = cudadrv.CopyLock
			return reuse(r, 0, "", op)
		}, want: with(at0(cudadrv.CopyJoined, cudadrv.KindH2D), func(o *outcome) { o.Event, o.Locked = "ev0", true })},
		{name: "lock/need-event-released", run: func(r *run) outcome {
			r.slot(0, r.ctx[0], 0).Stream[cudadrv.KindH2D] = r.stream(r.ctx[0])
			op := h2d(r.env)
			op.Flags = cudadrv.CopyLock
			return r.copy(op)
		}, want: at0(cudadrv.CopyNeedEvent, cudadrv.KindH2D)},
		{name: "lock/need-stream-released", run: func(r *run) outcome {
			r.slot(0, r.ctx[0], 0)
			op := h2d(r.env)
			op.Flags = cudadrv.CopyLock
			return r.copy(op)
		}, want: at0(cudadrv.CopyNeedStream, cudadrv.KindH2D)},
		{name: "lock/need-peer-released", twoGPUs: true, run: func(r *run) outcome {
			r.slot(0, r.ctx[0], 0)
			return r.copy(cudadrv.CopyOp{Src: r.d0a, Dst: r.d1, Len: 64, Flags: cudadrv.CopyLock})
		}, want: with(at0(cudadrv.CopyNeedPeer, cudadrv.KindPeer), func(o *outcome) { o.PeerCtx = "ctx1" })},
		{name: "lock/short-released", run: func(r *run) outcome {
			r.slot(0, r.ctx[0], 0).Stream[cudadrv.KindShort] = r.stream(r.ctx[0])
			op := h2d(r.env)
			op.Flags = cudadrv.CopyLock | cudadrv.CopySync
			return r.copy(op)
		}, want: outcome{Status: cudadrv.CopyDone, Slot: 0, Kind: cudadrv.KindShort, Ctx: "ctx0", CtxID: "id0"}},
		{name: "lock/no-slot", run: func(r *run) outcome {
			op := h2d(r.env)
			op.Flags = cudadrv.CopyLock
			return r.copy(op)
		}, want: needSlot(cudadrv.KindH2D, "ctx0", "id0")},

		// Lanes: a slot is (context, lane).
		{name: "lane/mismatch", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0").SetIdentity(r.id[0], r.ctx[0], 1)
			return r.copy(h2d(r.env))
		}, want: needSlot(cudadrv.KindH2D, "ctx0", "id0")},
		{name: "lane/match", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			s := r.full(1, r.ctx[0], cudadrv.KindH2D, "ev1")
			s.SetIdentity(r.id[0], r.ctx[0], 1)
			op := h2d(r.env)
			op.Lane = 1
			return r.copy(op)
		}, want: with(at0(cudadrv.CopyQueued, cudadrv.KindH2D), func(o *outcome) { o.Slot, o.Event = 1, "ev1" })},

		// Driver errors (fake drivers: the real one has undefined behaviour).
		{name: "error/stream-of-other-context", twoGPUs: true, strict: true, run: func(r *run) outcome {
			s := r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			s.Stream[cudadrv.KindH2D] = r.stream(r.ctx[1])
			before := r.violations()
			o := r.copy(h2d(r.env))
			assert.Equal(r.t, before+1, r.violations(), "one violation")
			return o
		}, want: with(at0(cudadrv.CopyDriverError, cudadrv.KindH2D), func(o *outcome) {
			o.Err, o.Code = "cuMemcpyAsync", cudadrv.ErrorInvalidHandle
		})},
		{name: "error/event-of-other-context", twoGPUs: true, strict: true, run: func(r *run) outcome {
			s := r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			s.Event = r.event(r.ctx[1], "ev1")
			before := r.violations()
			o := r.copy(h2d(r.env))
			assert.Equal(r.t, before+1, r.violations(), "one violation")
			return o
		}, want: with(at0(cudadrv.CopyDriverError, cudadrv.KindH2D), func(o *outcome) {
			o.Err, o.Code = "cuEventRecord", cudadrv.ErrorInvalidHandle
		})},
		{name: "error/sticky", strict: true, run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			r.poison(r.ctx[0], cudadrv.ErrorIllegalAddress)
			defer r.poison(r.ctx[0], 0)
			return r.copy(h2d(r.env))
		}, want: with(at0(cudadrv.CopyDriverError, cudadrv.KindH2D), func(o *outcome) {
			o.Err, o.Code = "cuMemcpyAsync", cudadrv.ErrorIllegalAddress
		})},

		// Last: it resets device 1's primary context for good. A primary
		// context retained into primary[] and reset since answers
		// cuCtxGetId with CONTEXT_IS_DESTROYED (its handle persists).
		{name: "primary/reset-since", twoGPUs: true, strict: true, run: func(r *run) outcome {
			r.reset(1)
			cudadrv.StorePrimary(r.primary, 1, r.ctx[1])
			return r.copy(cudadrv.CopyOp{Src: r.h0, Dst: r.v1, Len: 64})
		}, want: outcome{Status: cudadrv.CopyNeedPrimary, Slot: -1, Device: 1, SeenPrimary: "ctx1"}},
	}
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
				assert.Equal(t, c.want, o)
			})
		}
	}
	for _, c := range cases() {
		if o := got[c.name]; len(o) == 2 {
			assert.Equal(t, o[0], o[1], "%s: fakedrv and cd_copy disagree", c.name)
		}
	}
}
