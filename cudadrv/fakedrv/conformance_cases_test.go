// SPDX-License-Identifier: BSD-3-Clause

package fakedrv_test

// The cases of TestCopyConformance (conformance_test.go): each builds its
// slot table, runs Copy and says what both drivers must answer, step by
// step through the copy protocol (cudadrv/copy.go).

import (
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cucopy/cucopy/cudadrv"
)

func h2d(e *env) cudadrv.CopyOp { return cudadrv.CopyOp{Src: e.h0, Dst: e.d0a, Len: 64} }

// twoD is a 2-D piece of height rows of width bytes.
func twoD(src, srcPitch, dst, dstPitch, width, height uint64) cudadrv.CopyOp {
	return cudadrv.CopyOp{Src: src, SrcPitch: srcPitch, Dst: dst, DstPitch: dstPitch, Len: width, Height: height}
}

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
	// reuseBehind: the next piece of the operation of the queue's entry 1,
	// with `behind` entries pushed after it (by other threads).
	reuseBehind := func(r *run, queried, behind uint64, free string, op cudadrv.CopyOp, more ...cudadrv.Piece) outcome {
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
		s.Issued[cudadrv.KindH2D] = 1 + behind
		op.Flags |= cudadrv.CopyReuse
		op.ReuseEvent, op.ReuseSeq = prev, 1
		return r.copyRun(op, more)
	}
	reuse := func(r *run, queried uint64, free string, op cudadrv.CopyOp, more ...cudadrv.Piece) outcome {
		return reuseBehind(r, queried, 0, free, op, more...)
	}
	// running: an H2D piece (h0 -> d0a) on a full slot 0 with more.
	running := func(more func(e *env) []cudadrv.Piece) func(r *run) outcome {
		return func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			return r.copyRun(h2d(r.env), more(r.env))
		}
	}
	// packing: a 2-D piece of 4 rows of 8 B between d0a (pitch 32) and
	// packed pinned p0 in direction kind, PackBelow 64, on a full slot 0
	// that edit prepares.
	packing := func(kind int, edit func(r *run, s *cudadrv.Slot)) func(r *run) outcome {
		return func(r *run) outcome {
			s := r.full(0, r.ctx[0], kind, "ev0")
			if edit != nil {
				edit(r, s)
			}
			op := twoD(r.d0a, 32, r.p0, 8, 8, 4)
			if kind == cudadrv.KindH2D {
				op = twoD(r.p0, 8, r.d0a, 32, 8, 4)
			}
			op.PackBelow = 64
			return r.copy(op)
		}
	}
	// smallD2H: a D2H piece d0a -> h0 of 64 bytes with StageSmall small
	// and flags on a full slot 0, with more.
	smallD2H := func(small uint64, flags uint32, more func(e *env) []cudadrv.Piece) func(r *run) outcome {
		return func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindD2H, "ev0")
			return r.copyRun(cudadrv.CopyOp{Src: r.d0a, Dst: r.h0, Len: 64, StageSmall: small, Flags: flags}, more(r.env))
		}
	}
	h2dAt := func(e *env, off uint64) cudadrv.Piece {
		return cudadrv.Piece{Src: e.h0 + off, Dst: e.d0a + off, Len: 64}
	}
	// staged: an H2D piece (pageable h0, or pinned p0, -> d0a) with
	// StageMin and flags on a full slot 0, with an H2D piece after it.
	staged := func(stageMin uint64, flags uint32, pinned, withMore bool) func(r *run) outcome {
		return func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			op := h2d(r.env)
			op.StageMin, op.Flags = stageMin, flags
			if pinned {
				op.Src = r.p0
			}
			var more []cudadrv.Piece
			if withMore {
				more = append(more, h2dAt(r.env, 64))
			}
			return r.copyRun(op, more)
		}
	}
	queuedRun := func(taken int32) outcome {
		return with(at0(cudadrv.CopyQueued, cudadrv.KindH2D), func(o *outcome) { o.Event, o.Taken = "ev0", taken })
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
		{name: "fence/h2d-marked", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0").Fence = 1 << cudadrv.KindH2D
			return r.copy(h2d(r.env))
		}, want: at0(cudadrv.CopyNeedFence, cudadrv.KindH2D)},
		{name: "fence/before-event", run: func(r *run) outcome {
			s := r.slot(0, r.ctx[0], 0)
			s.Stream[cudadrv.KindH2D] = r.stream(r.ctx[0])
			s.Fence = 1 << cudadrv.KindH2D
			return r.copy(h2d(r.env))
		}, want: at0(cudadrv.CopyNeedFence, cudadrv.KindH2D)},
		{name: "fence/other-kind-marked", run: func(r *run) outcome {
			s := r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			s.Fence = 1 << cudadrv.KindD2H
			o := r.copy(h2d(r.env))
			return o
		}, want: with(at0(cudadrv.CopyQueued, cudadrv.KindH2D), func(o *outcome) { o.Event = "ev0" })},
		{name: "fence/short-marked", run: func(r *run) outcome {
			s := r.full(0, r.ctx[0], cudadrv.KindShort, "ev0")
			s.Fence = 1 << cudadrv.KindShort
			op := h2d(r.env)
			op.Flags = cudadrv.CopySync
			return r.copy(op)
		}, want: at0(cudadrv.CopyNeedFence, cudadrv.KindShort)},
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
			assert.Equal(r.t, []int32{1}, r.query([]cudadrv.Event{s.Event}), "QuerySlots")
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
		// Only the newest entry of its queue is joined: one pushed since
		// (another thread's) would otherwise be recorded before it.
		{name: "reuse/not-newest-needs-event", run: func(r *run) outcome { return reuseBehind(r, 0, 1, "", reuseOp(r.env, 0, cudadrv.KindH2D)) },
			want: at0(cudadrv.CopyNeedEvent, cudadrv.KindH2D)},
		{name: "reuse/not-newest-queued", run: func(r *run) outcome { return reuseBehind(r, 0, 1, "ev1", reuseOp(r.env, 0, cudadrv.KindH2D)) },
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
		// (Pinned host memory: pageable memory detaches, below.)
		{name: "lock/queued-held", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			op := h2d(r.env)
			op.Src, op.Flags = r.p0, cudadrv.CopyLock
			return r.copy(op)
		}, want: with(at0(cudadrv.CopyQueued, cudadrv.KindH2D), func(o *outcome) { o.Event, o.Locked = "ev0", true })},
		{name: "lock/joined-held", run: func(r *run) outcome {
			op := reuseOp(r.env, 0, cudadrv.KindH2D)
			op.Src, op.Flags = r.p0+64, cudadrv.CopyLock
			return reuse(r, 0, "", op)
		}, want: with(at0(cudadrv.CopyJoined, cudadrv.KindH2D), func(o *outcome) { o.Event, o.Locked = "ev0", true })},

		// Pageable memory with CopyLock detaches: the enqueue runs without
		// the lock, as a user of the slot, with the slot's event taken.
		{name: "lock/pageable-detaches", run: func(r *run) outcome {
			s := r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			op := h2d(r.env)
			op.Flags = cudadrv.CopyLock
			o := r.copy(op)
			assert.Zero(r.t, s.Event, "the piece took the slot's event")
			return o
		}, want: with(at0(cudadrv.CopyQueued, cudadrv.KindH2D), func(o *outcome) { o.Event, o.Locked, o.Detached = "ev0", true, 1 })},
		{name: "lock/pageable-never-joins", run: func(r *run) outcome {
			op := reuseOp(r.env, 0, cudadrv.KindH2D)
			op.Flags = cudadrv.CopyLock
			return reuse(r, 0, "ev1", op)
		}, want: with(at0(cudadrv.CopyQueued, cudadrv.KindH2D), func(o *outcome) { o.Event, o.Locked, o.Detached = "ev1", true, 1 })},
		{name: "lock/pageable-in-run", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			op := h2d(r.env)
			op.Src, op.Flags = r.p0, cudadrv.CopyLock
			return r.copyRun(op, []cudadrv.Piece{h2dAt(r.env, 64)})
		}, want: with(at0(cudadrv.CopyQueued, cudadrv.KindH2D), func(o *outcome) { o.Event, o.Locked, o.Detached, o.Taken = "ev0", true, 1, 1 })},
		{name: "lock/pageable-error-unlocked", strict: true, run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			r.poison(r.ctx[0], cudadrv.ErrorIllegalAddress)
			defer r.poison(r.ctx[0], 0)
			op := h2d(r.env)
			op.Flags = cudadrv.CopyLock
			return r.copy(op)
		}, want: with(at0(cudadrv.CopyDriverError, cudadrv.KindH2D), func(o *outcome) {
			o.Err, o.Code, o.Event, o.Detached = "cuMemcpyAsync", cudadrv.ErrorIllegalAddress, "ev0", 1
		})},
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

		// Staging (copy.go, step 7): a pageable piece of at least StageMin
		// bytes is the caller's to stage, after the stream and fence checks
		// and before the event; nothing issued, no lock held.
		{name: "stage/pageable-at-min", run: staged(64, 0, false, false), want: at0(cudadrv.CopyNeedStage, cudadrv.KindH2D)},
		{name: "stage/below-min", run: staged(65, 0, false, false), want: with(at0(cudadrv.CopyQueued, cudadrv.KindH2D), func(o *outcome) { o.Event = "ev0" })},
		{name: "stage/pinned-never", run: staged(1, 0, true, false), want: with(at0(cudadrv.CopyQueued, cudadrv.KindH2D), func(o *outcome) { o.Event = "ev0" })},
		{name: "stage/d2h-no-event-needed", run: func(r *run) outcome {
			r.slot(0, r.ctx[0], 0).Stream[cudadrv.KindD2H] = r.stream(r.ctx[0])
			return r.copy(cudadrv.CopyOp{Src: r.d0a, Dst: r.h0, Len: 64, StageMin: 64})
		}, want: at0(cudadrv.CopyNeedStage, cudadrv.KindD2H)},
		{name: "stage/after-need-stream", run: func(r *run) outcome {
			r.slot(0, r.ctx[0], 0)
			op := h2d(r.env)
			op.StageMin = 64
			return r.copy(op)
		}, want: at0(cudadrv.CopyNeedStream, cudadrv.KindH2D)},
		{name: "stage/short", run: func(r *run) outcome {
			r.slot(0, r.ctx[0], 0).Stream[cudadrv.KindShort] = r.stream(r.ctx[0])
			op := h2d(r.env)
			op.Flags, op.StageMin = cudadrv.CopyLock|cudadrv.CopySync, 64
			return r.copy(op)
		}, want: at0(cudadrv.CopyNeedStage, cudadrv.KindShort)},
		{name: "stage/lock-released", run: staged(64, cudadrv.CopyLock, false, false), want: at0(cudadrv.CopyNeedStage, cudadrv.KindH2D)},
		{name: "stage/first-takes-no-run", run: staged(64, 0, false, true), want: at0(cudadrv.CopyNeedStage, cudadrv.KindH2D)},
		{name: "stage/before-the-plan", run: staged(64, cudadrv.CopyPlan, false, false), want: at0(cudadrv.CopyNeedStage, cudadrv.KindH2D)},
		{name: "stage/described-pageable", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			op := h2d(r.env)
			op.StageMin = 64
			op.SrcMem = r.describe(op.Src, nil)
			return r.copy(op)
		}, want: at0(cudadrv.CopyNeedStage, cudadrv.KindH2D)},
		{name: "stage/run-stops-before", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			op := h2d(r.env)
			op.Src, op.Len, op.StageMin = r.p0, 32, 64
			return r.copyRun(op, []cudadrv.Piece{{Src: r.p0 + 32, Dst: r.d0a + 32, Len: 32}, {Src: r.h0 + 64, Dst: r.d0a + 64, Len: 64}})
		}, want: queuedRun(1)},

		// Small staging (copy.go, step 7): a D2H piece into pageable memory
		// of at most StageSmall bytes, with its run of such pieces while
		// their spans fit; other runs stop before such a piece.
		{name: "stage/small-alone", run: smallD2H(128, 0, func(e *env) []cudadrv.Piece { return nil }), want: with(at0(cudadrv.CopyQueued, cudadrv.KindD2H), func(o *outcome) { o.Event = "ev0" })},
		{name: "stage/small-two", run: smallD2H(128, 0, func(e *env) []cudadrv.Piece { return []cudadrv.Piece{{Src: e.d0b, Dst: e.h1, Len: 8}} }),
			want: with(at0(cudadrv.CopyNeedStage, cudadrv.KindD2H), func(o *outcome) { o.Taken = 1 })},
		{name: "stage/small-above", run: smallD2H(63, 0, func(e *env) []cudadrv.Piece { return nil }), want: with(at0(cudadrv.CopyQueued, cudadrv.KindD2H), func(o *outcome) { o.Event = "ev0" })},
		{name: "stage/small-pinned-never", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindD2H, "ev0")
			return r.copy(cudadrv.CopyOp{Src: r.d0a, Dst: r.p0, Len: 64, StageSmall: 128})
		}, want: with(at0(cudadrv.CopyQueued, cudadrv.KindD2H), func(o *outcome) { o.Event = "ev0" })},
		{name: "stage/small-h2d-never", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			op := h2d(r.env)
			op.StageSmall = 128
			return r.copy(op)
		}, want: with(at0(cudadrv.CopyQueued, cudadrv.KindH2D), func(o *outcome) { o.Event = "ev0" })},
		{name: "stage/small-run", run: smallD2H(256, 0, func(e *env) []cudadrv.Piece {
			return []cudadrv.Piece{{Src: e.d0b, Dst: e.h1, Len: 8}, {Src: e.d0a + 64, Dst: e.h0 + 64, Len: 64}}
		}), want: with(at0(cudadrv.CopyNeedStage, cudadrv.KindD2H), func(o *outcome) { o.Taken = 2 })},
		{name: "stage/small-run-fits", run: smallD2H(192, 0, func(e *env) []cudadrv.Piece {
			// spans 64 + 64 + 64: the fourth (64 more) does not fit 192
			return []cudadrv.Piece{{Src: e.d0b, Dst: e.h1, Len: 1}, {Src: e.d0a + 64, Dst: e.h0 + 64, Len: 64}, {Src: e.d0a + 128, Dst: e.h0 + 128, Len: 8}}
		}), want: with(at0(cudadrv.CopyNeedStage, cudadrv.KindD2H), func(o *outcome) { o.Taken = 2 })},
		{name: "stage/small-run-stops-at-pinned", run: smallD2H(256, 0, func(e *env) []cudadrv.Piece {
			return []cudadrv.Piece{{Src: e.d0b, Dst: e.h1, Len: 8}, {Src: e.d0b + 8, Dst: e.p0, Len: 8}, {Src: e.d0a + 64, Dst: e.h0 + 64, Len: 8}}
		}), want: with(at0(cudadrv.CopyNeedStage, cudadrv.KindD2H), func(o *outcome) { o.Taken = 1 })},
		{name: "stage/small-run-stops-at-large", run: smallD2H(128, 0, func(e *env) []cudadrv.Piece {
			return []cudadrv.Piece{{Src: e.d0b, Dst: e.h1, Len: 129}}
		}), want: with(at0(cudadrv.CopyQueued, cudadrv.KindD2H), func(o *outcome) { o.Event = "ev0" })}, // alone after all
		{name: "stage/small-short", run: func(r *run) outcome {
			r.slot(0, r.ctx[0], 0).Stream[cudadrv.KindShort] = r.stream(r.ctx[0])
			return r.copyRun(cudadrv.CopyOp{Src: r.d0a, Dst: r.h0, Len: 8, StageSmall: 64, Flags: cudadrv.CopySync},
				[]cudadrv.Piece{{Src: r.d0b, Dst: r.h1, Len: 8}})
		}, want: at0(cudadrv.CopyDone, cudadrv.KindShort)}, // a short copy is alone: never small-staged
		{name: "stage/small-plan", run: smallD2H(128, cudadrv.CopyPlan, func(e *env) []cudadrv.Piece {
			return []cudadrv.Piece{{Src: e.d0b, Dst: e.h1, Len: 8}}
		}), want: with(at0(cudadrv.CopyNeedStage, cudadrv.KindD2H), func(o *outcome) { o.Taken = 1 })},
		{name: "run/stops-before-small-staging", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindD2H, "ev0")
			op := cudadrv.CopyOp{Src: r.d0a, Dst: r.p0, Len: 64, StageSmall: 128}
			return r.copyRun(op, []cudadrv.Piece{{Src: r.d0a + 64, Dst: r.p0 + 64, Len: 64}, {Src: r.d0b, Dst: r.h1, Len: 8}})
		}, want: with(at0(cudadrv.CopyQueued, cudadrv.KindD2H), func(o *outcome) { o.Event, o.Taken = "ev0", 1 })},

		// Runs: the later pieces that go with a zcopy piece (copy.go, step 7).
		{name: "run/three-h2d", run: running(func(e *env) []cudadrv.Piece { return []cudadrv.Piece{h2dAt(e, 64), h2dAt(e, 128)} }),
			want: queuedRun(2)},
		{name: "run/stops-at-d2h", run: running(func(e *env) []cudadrv.Piece {
			return []cudadrv.Piece{h2dAt(e, 64), {Src: e.d0b, Dst: e.h1, Len: 64}, h2dAt(e, 128)}
		}), want: queuedRun(1)},
		{name: "run/stops-at-host-host", run: running(func(e *env) []cudadrv.Piece {
			return []cudadrv.Piece{{Src: e.h0, Dst: e.h1, Len: 64}, h2dAt(e, 64)}
		}), want: queuedRun(0)},
		{name: "run/stops-at-managed", run: running(func(e *env) []cudadrv.Piece {
			return []cudadrv.Piece{h2dAt(e, 64), {Src: e.h0, Dst: e.m0, Len: 64}}
		}), want: queuedRun(1)},
		{name: "run/stops-at-out-of-range", run: running(func(e *env) []cudadrv.Piece {
			return []cudadrv.Piece{{Src: e.h0, Dst: e.d0a + bufSize - 32, Len: 64}, h2dAt(e, 64)}
		}), want: queuedRun(0)},
		{name: "run/stops-at-other-context", run: running(func(e *env) []cudadrv.Piece {
			return []cudadrv.Piece{h2dAt(e, 64), {Src: e.h0, Dst: e.du, Len: 64}}
		}), want: queuedRun(1)},
		{name: "run/stops-at-other-device", twoGPUs: true, run: running(func(e *env) []cudadrv.Piece {
			return []cudadrv.Piece{{Src: e.h0, Dst: e.d1, Len: 64}}
		}), want: queuedRun(0)},
		{name: "run/managed-first-runs-alone", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			return r.copyRun(cudadrv.CopyOp{Src: r.h0, Dst: r.m0, Len: 64}, []cudadrv.Piece{h2dAt(r.env, 64)})
		}, want: queuedRun(0)},
		{name: "run/d2d", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindD2D, "ev0")
			return r.copyRun(cudadrv.CopyOp{Src: r.d0a, Dst: r.d0b, Len: 64},
				[]cudadrv.Piece{{Src: r.d0a + 64, Dst: r.d0b + 64, Len: 64}, {Src: r.d0a + 128, Dst: r.d0b + 128, Len: 8}})
		}, want: with(at0(cudadrv.CopyQueued, cudadrv.KindD2D), func(o *outcome) { o.Event, o.Taken = "ev0", 2 })},
		{name: "run/short-takes-none", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindShort, "ev0")
			op := h2d(r.env)
			op.Flags = cudadrv.CopySync
			return r.copyRun(op, []cudadrv.Piece{h2dAt(r.env, 64)})
		}, want: with(at0(cudadrv.CopyDone, cudadrv.KindShort), func(o *outcome) { o.Event = "ev0" })},
		{name: "run/need-event-takes-none", run: func(r *run) outcome {
			s := r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			s.Event = 0
			return r.copyRun(h2d(r.env), []cudadrv.Piece{h2dAt(r.env, 64)})
		}, want: at0(cudadrv.CopyNeedEvent, cudadrv.KindH2D)},
		{name: "run/joined", run: func(r *run) outcome {
			return reuse(r, 0, "", reuseOp(r.env, 0, cudadrv.KindH2D), h2dAt(r.env, 128))
		}, want: with(at0(cudadrv.CopyJoined, cudadrv.KindH2D), func(o *outcome) { o.Event, o.Taken = "ev0", 1 })},

		// Memory handles (copy.go, steps 1 and 4): a described side is not
		// classified, its context id comes from the description, and a
		// primary context's is checked.
		{name: "memh/described-dst", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			op := h2d(r.env)
			op.DstMem = r.describe(op.Dst, nil)
			return r.copy(op)
		}, want: with(at0(cudadrv.CopyQueued, cudadrv.KindH2D), func(o *outcome) { o.Event = "ev0" })},
		{name: "memh/description-is-trusted", run: func(r *run) outcome {
			op := h2d(r.env) // device memory that the description calls pageable: a CPU copy
			op.DstMem = r.describe(op.Dst, func(d *cudadrv.MemDesc) { *d = cudadrv.MemDesc{Ordinal: -1, PrimaryDevice: -1} })
			return r.copy(op)
		}, want: outcome{Status: cudadrv.CopyCPU, Slot: -1}},
		{name: "memh/id-from-description", run: func(r *run) outcome {
			op := cudadrv.CopyOp{Src: r.h0, Dst: r.du, Len: 64} // the program's context, not checked
			op.DstMem = r.describe(op.Dst, func(d *cudadrv.MemDesc) { d.CtxID = r.id[0] })
			return r.copy(op)
		}, want: needSlot(cudadrv.KindH2D, "user", "id0")},
		{name: "memh/primary-reset-since", run: func(r *run) outcome {
			op := cudadrv.CopyOp{Src: r.d0a, Dst: r.h0, Len: 64}
			op.SrcMem = r.describe(op.Src, func(d *cudadrv.MemDesc) { d.PrimaryDevice, d.CtxID = 0, d.CtxID+1000 })
			return r.copy(op)
		}, want: outcome{Status: cudadrv.CopyStaleMemh, Slot: -1}},
		{name: "memh/primary-checked-live", run: func(r *run) outcome {
			op := cudadrv.CopyOp{Src: r.d0a, Dst: r.h0, Len: 64}
			op.SrcMem = r.describe(op.Src, func(d *cudadrv.MemDesc) { d.PrimaryDevice = 0 })
			return r.copy(op)
		}, want: needSlot(cudadrv.KindD2H, "ctx0", "id0")},
		{name: "memh/stale-destination-side", run: func(r *run) outcome {
			op := h2d(r.env)
			op.DstMem = r.describe(op.Dst, func(d *cudadrv.MemDesc) { d.PrimaryDevice, d.CtxID = 0, d.CtxID+1000 })
			return r.copy(op)
		}, want: outcome{Status: cudadrv.CopyStaleMemh, Slot: -1, Side: 1}},
		{name: "memh/run-same-description", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			op := h2d(r.env)
			op.DstMem = r.describe(op.Dst, nil)
			p := h2dAt(r.env, 64)
			p.DstMem = op.DstMem
			q := h2dAt(r.env, 128) // classified: joins too
			return r.copyRun(op, []cudadrv.Piece{p, q})
		}, want: queuedRun(2)},
		{name: "memh/run-stops-at-other-description", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			op := h2d(r.env)
			op.DstMem = r.describe(op.Dst, nil)
			p := h2dAt(r.env, 64)
			p.DstMem = r.describe(p.Dst, nil) // the same memory, another handle
			return r.copyRun(op, []cudadrv.Piece{h2dAt(r.env, 128), p})
		}, want: queuedRun(1)},

		// Plans (CopyPlan): where the piece and its run would go, nothing
		// issued, no event taken, no lock kept.
		{name: "plan/run", run: func(r *run) outcome {
			s := r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			op := h2d(r.env)
			op.Flags = cudadrv.CopyPlan | cudadrv.CopyLock
			o := r.copyRun(op, []cudadrv.Piece{h2dAt(r.env, 64), h2dAt(r.env, 128)})
			assert.Equal(r.t, "ev0", r.name(uintptr(s.Event)), "the slot keeps its event")
			return o
		}, want: with(at0(cudadrv.CopyPlanned, cudadrv.KindH2D), func(o *outcome) { o.Taken = 2 })},
		{name: "plan/without-event", run: func(r *run) outcome {
			r.slot(0, r.ctx[0], 0).Stream[cudadrv.KindH2D] = r.stream(r.ctx[0])
			op := h2d(r.env)
			op.Flags = cudadrv.CopyPlan
			return r.copy(op)
		}, want: at0(cudadrv.CopyPlanned, cudadrv.KindH2D)},
		{name: "plan/host-host", run: func(r *run) outcome {
			return r.copy(cudadrv.CopyOp{Src: r.h0, Dst: r.h1, Len: 64, Flags: cudadrv.CopyPlan})
		}, want: outcome{Status: cudadrv.CopyCPU, Slot: -1}},
		{name: "plan/short-is-no-plan", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindShort, "ev0")
			op := h2d(r.env)
			op.Flags = cudadrv.CopySync | cudadrv.CopyPlan
			return r.copy(op)
		}, want: with(at0(cudadrv.CopyDone, cudadrv.KindShort), func(o *outcome) { o.Event = "ev0" })},

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

		// 2-D pieces (copy.go, "2-D pieces") and the pack path.
		{name: "2d/h2d", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			return r.copy(twoD(r.h0, 16, r.d0a, 32, 8, 4))
		}, want: queuedRun(0)},
		{name: "2d/span-past-the-end", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			return r.copy(twoD(r.h0, 16, r.d0a+bufSize-100, 32, 8, 4)) // spans 3*32 + 8 = 104 bytes
		}, want: outcome{Status: cudadrv.CopyOutOfRange, Slot: -1, Side: 1}},
		{name: "2d/takes-no-run", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			return r.copyRun(twoD(r.h0, 16, r.d0a, 32, 8, 4), []cudadrv.Piece{h2dAt(r.env, 1024)})
		}, want: queuedRun(0)},
		{name: "2d/no-run-takes-it", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindH2D, "ev0")
			p := cudadrv.Piece{Src: r.h0 + 1024, Dst: r.d0a + 1024, Len: 8, Height: 4, SrcPitch: 16, DstPitch: 32}
			return r.copyRun(h2d(r.env), []cudadrv.Piece{h2dAt(r.env, 512), p})
		}, want: queuedRun(1)},
		{name: "2d/pack-needs-scratch", run: packing(cudadrv.KindD2H, nil), want: at0(cudadrv.CopyNeedScratch, cudadrv.KindD2H)},
		{name: "2d/pack-needs-a-larger-scratch", run: packing(cudadrv.KindH2D, func(r *run, s *cudadrv.Slot) {
			s.Scratch[cudadrv.KindH2D], s.ScratchSize[cudadrv.KindH2D] = r.d0b, 16
		}), want: at0(cudadrv.CopyNeedScratch, cudadrv.KindH2D)},
		{name: "2d/pack-with-scratch", run: packing(cudadrv.KindD2H, func(r *run, s *cudadrv.Slot) {
			s.Scratch[cudadrv.KindD2H], s.ScratchSize[cudadrv.KindD2H] = r.d0b, bufSize
		}), want: with(at0(cudadrv.CopyQueued, cudadrv.KindD2H), func(o *outcome) { o.Event = "ev0" })},
		{name: "2d/pack-off-for-the-slot", run: packing(cudadrv.KindD2H, func(r *run, s *cudadrv.Slot) {
			s.ScratchOff = 1 << cudadrv.KindD2H
		}), want: with(at0(cudadrv.CopyQueued, cudadrv.KindD2H), func(o *outcome) { o.Event = "ev0" })},
		{name: "2d/no-pack-for-pageable-or-strided-host-or-wide-rows", run: func(r *run) outcome {
			r.full(0, r.ctx[0], cudadrv.KindD2H, "ev0")
			for _, op := range []cudadrv.CopyOp{twoD(r.d0a, 32, r.h0, 8, 8, 4), twoD(r.d0a, 32, r.p0, 16, 8, 4), twoD(r.d0a, 128, r.p0, 64, 64, 4)} {
				op.PackBelow = 64
				if o := r.copy(op); o.Status != cudadrv.CopyQueued {
					return o
				}
				r.slots[0].Event = r.event(r.ctx[0], "ev0")
			}
			op := twoD(r.d0a, 32, r.p0, 8, 8, 4) // would pack, but CopyNoPack
			op.Flags, op.PackBelow = cudadrv.CopyNoPack, 64
			return r.copy(op)
		}, want: with(at0(cudadrv.CopyQueued, cudadrv.KindD2H), func(o *outcome) { o.Event = "ev0" })},

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
