// SPDX-License-Identifier: BSD-3-Clause

package fakedrv

// The Go port of cd_copy (cudadrv/cd_copy.c), which keeps the copy protocol
// (cudadrv/copy.go), and of progress and arm (cudadrv/cd_progress.c:
// cd_query_slots, cd_arm, cd_incarnation_gone). conformance_test.go holds
// Copy against cd_copy on the C fake driver.

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cucopy/cucopy/cudadrv"
)

// mem is cd_mem: what one pointer is.
type mem struct {
	typ     uint32
	ctx     cudadrv.Context
	ordinal int
	managed bool
	start   uint64
	size    uint64
}

// host is cd_is_host. cd_is_host also calls HOST memory without an owning
// context (host-located VMM) device-side; the fake has no such memory, and
// its AllocHost memory, which has no context, is host memory.
func (m *mem) host() bool { return !m.managed && m.typ != memTypeDevice }

// pageable is cd_pageable: host memory CUDA does not know.
func (m *mem) pageable() bool { return m.host() && m.typ == 0 }

// crossesEnd is cd_crosses_end.
func (m *mem) crossesEnd(ptr, n uint64) bool {
	if m.host() || m.size == 0 || ptr < m.start {
		return false
	}
	off := ptr - m.start
	return off >= m.size || n > m.size-off
}

func (d *Driver) classify(ptr uint64) (mem, bool) {
	a := d.find(ptr)
	if a == nil {
		return mem{ordinal: -1}, false
	}
	m := mem{typ: a.typ, ctx: a.ctx, ordinal: a.dev, managed: a.managed}
	if a.typ != 0 {
		m.start, m.size = a.base, uint64(len(a.data))
	}
	return m, true
}

// side is cd_side: a memory handle's description, else classify.
func (d *Driver) side(ptr uint64, mems []cudadrv.MemDesc, idx int32) (mem, bool) {
	if idx <= 0 {
		return d.classify(ptr)
	}
	m := &mems[idx-1]
	return mem{typ: m.Type, ctx: m.Ctx, ordinal: int(m.Ordinal), managed: m.Managed != 0, start: m.Start, size: m.Size}, true
}

// descStale is cd_desc_stale: a described side of a primary context reset
// since.
func (d *Driver) descStale(m *mem, mems []cudadrv.MemDesc, idx int32) bool {
	if idx <= 0 || m.ctx == 0 || mems[idx-1].PrimaryDevice < 0 || !d.hasCtxID {
		return false
	}
	c := d.ctxs[m.ctx]
	return c == nil || !c.alive || c.id != mems[idx-1].CtxID
}

// Describe is cd_describe.
func (d *Driver) Describe(ptr uint64) (cudadrv.MemDesc, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if code := d.enter("Describe"); code != 0 {
		return cudadrv.MemDesc{PrimaryDevice: -1}, result("cuPointerGetAttributes", code)
	}
	m, ok := d.classify(ptr)
	if !ok {
		return cudadrv.MemDesc{PrimaryDevice: -1}, result("cuPointerGetAttributes", ErrInvalidValue)
	}
	desc := cudadrv.MemDesc{Start: m.start, Size: m.size, Ctx: m.ctx, CtxID: uint64(m.ctx), Type: m.typ,
		Ordinal: int32(m.ordinal), PrimaryDevice: -1}
	if m.managed {
		desc.Managed = 1
	}
	if m.ctx != 0 && d.hasCtxID {
		c := d.ctxs[m.ctx]
		if c == nil || !c.alive {
			return desc, result("cuCtxGetId", ErrContextDestroyed)
		}
		desc.CtxID = c.id
	}
	return desc, nil
}

// knownCtx is cd_known_ctx.
func knownCtx(m *mem, primary []cudadrv.Context, ndevices int32) cudadrv.Context {
	if m.ctx != 0 {
		return m.ctx
	}
	if m.ordinal >= 0 && m.ordinal < int(ndevices) {
		return cudadrv.LoadPrimary(primary, m.ordinal)
	}
	return 0
}

// execCtx is cd_exec_ctx.
func (d *Driver) execCtx(m *mem, primary []cudadrv.Context, op *cudadrv.CopyOp, status *cudadrv.CopyStatus) cudadrv.Context {
	if c := knownCtx(m, primary, op.NDevices); c != 0 {
		return c
	}
	if m.managed && op.Flags&cudadrv.CopyFallbackCtx != 0 && op.Ctx != 0 {
		return op.Ctx
	}
	if m.managed && d.current != 0 {
		return d.current
	}
	op.Device = int32(m.ordinal)
	if m.managed {
		op.Device = -1
	}
	op.SeenPrimary = 0
	*status = cudadrv.CopyNeedPrimary
	return 0
}

// extendRun is cd_extend_run: how many pieces of more run with a piece of
// (kind, ctx, peer) whose buffers are src and dst, and whether one of those
// has pageable memory. The run stops before a piece its own call stages
// (op.StageMin, op.StageSmall); with gather (the footprint of a piece that
// small staging takes) it takes only pieces small staging takes, while
// their footprint fits op.StageSmall.
func (d *Driver) extendRun(more []cudadrv.Piece, mems []cudadrv.MemDesc, op *cudadrv.CopyOp, src, dst *mem, primary []cudadrv.Context, kind int32, ctx, peer cudadrv.Context, gather uint64) (n int, pageable bool) {
	ndevices, stageMin := op.NDevices, op.StageMin
	if src.managed || dst.managed {
		return 0, false
	}
	if len(more) > cudadrv.MaxRun-1 {
		more = more[:cudadrv.MaxRun-1]
	}
	for n, p := range more {
		if p.Height != 0 { // a 2-D piece: its own call issues it
			return n, pageable
		}
		if (p.SrcMem > 0 && p.SrcMem != op.SrcMem) || (p.DstMem > 0 && p.DstMem != op.DstMem) {
			return n, pageable // a described side joins only on the same description
		}
		s, ok1 := d.side(p.Src, mems, p.SrcMem)
		t, ok2 := d.side(p.Dst, mems, p.DstMem)
		if !ok1 || !ok2 || s.managed || t.managed || s.crossesEnd(p.Src, p.Len) || t.crossesEnd(p.Dst, p.Len) ||
			d.span(p.Src, p.Len) == nil || d.span(p.Dst, p.Len) == nil {
			return n, pageable
		}
		var k int32
		var c, pc cudadrv.Context
		switch {
		case s.host() && t.host():
			return n, pageable
		case s.host():
			k, c = cudadrv.KindH2D, knownCtx(&t, primary, ndevices)
		case t.host():
			k, c = cudadrv.KindD2H, knownCtx(&s, primary, ndevices)
		default:
			c, pc = knownCtx(&s, primary, ndevices), knownCtx(&t, primary, ndevices)
			k = cudadrv.KindPeer
			if pc == c {
				k, pc = cudadrv.KindD2D, 0
			}
		}
		if k != kind || c != ctx || pc != peer {
			return n, pageable
		}
		if stageMin != 0 && p.Len >= stageMin && (s.pageable() || t.pageable()) {
			return n, pageable
		}
		small := stagesSmall(op.StageSmall, k, &t, p.Len)
		if gather != 0 {
			if !small || gather+cudadrv.StageSpan(p.Len) > op.StageSmall {
				return n, pageable
			}
			gather += cudadrv.StageSpan(p.Len)
		} else if small {
			return n, pageable
		}
		pageable = pageable || s.pageable() || t.pageable()
	}
	return len(more), pageable
}

// stagesSmall is cd_stages_small: small staging takes a contiguous D2H
// piece of n bytes into dst (cudadrv/copy.go, step 7).
func stagesSmall(stageSmall uint64, kind int32, dst *mem, n uint64) bool {
	return stageSmall != 0 && kind == cudadrv.KindD2H && dst.pageable() && n <= stageSmall && cudadrv.StageSpan(n) <= stageSmall
}

func driverErr(op *cudadrv.CopyOp, entry cudadrv.Entry, code uint32) cudadrv.CopyStatus {
	op.Err = cudadrv.CallError{Entry: entry, Result: code}
	return cudadrv.CopyDriverError
}

// Copy is cd_copy.
func (d *Driver) Copy(slots []cudadrv.Slot, primary []cudadrv.Context, op *cudadrv.CopyOp, more []cudadrv.Piece, mems []cudadrv.MemDesc) cudadrv.CopyStatus {
	d.mu.Lock()
	if f := d.onCopy; f != nil {
		d.mu.Unlock()
		f()
		d.mu.Lock()
	}
	defer d.mu.Unlock()
	locked := false
	st := d.copy(slots, primary, op, more, mems, &locked)
	if locked && st != cudadrv.CopyQueued && st != cudadrv.CopyJoined {
		slots[op.Slot].Unlock()
	}
	return st
}

// copy is Copy under d.mu; *locked says it took the slot's lock (CopyLock).
func (d *Driver) copy(slots []cudadrv.Slot, primary []cudadrv.Context, op *cudadrv.CopyOp, more []cudadrv.Piece, mems []cudadrv.MemDesc, locked *bool) cudadrv.CopyStatus {
	d.enter("Copy")
	op.NDevices = int32(len(primary))
	op.Err = cudadrv.CallError{Entry: cudadrv.EntryNone}
	op.Slot = -1
	op.Taken, op.Detached = 0, 0
	src, ok1 := d.side(op.Src, mems, op.SrcMem)
	dst, ok2 := d.side(op.Dst, mems, op.DstMem)
	if !ok1 || !ok2 {
		return driverErr(op, cudadrv.EntryPointerGetAttributes, ErrInvalidValue) // an address the fake never handed out
	}
	if d.descStale(&src, mems, op.SrcMem) {
		op.Side = 0
		return cudadrv.CopyStaleMemh
	}
	if d.descStale(&dst, mems, op.DstMem) {
		op.Side = 1
		return cudadrv.CopyStaleMemh
	}
	// A 2-D piece's sides span (Height-1)*pitch + Len bytes (cudadrv/copy.go).
	srcSpan, dstSpan := op.Len, op.Len
	if op.Height != 0 {
		srcSpan += (op.Height - 1) * op.SrcPitch
		dstSpan += (op.Height - 1) * op.DstPitch
	}
	if src.crossesEnd(op.Src, srcSpan) {
		op.Side = 0
		return cudadrv.CopyOutOfRange
	}
	if dst.crossesEnd(op.Dst, dstSpan) {
		op.Side = 1
		return cudadrv.CopyOutOfRange
	}
	// Stricter than cd_copy, which leaves such a host range to the copy
	// (a fault, or a CPU copy past the end): a violation.
	from, to := d.span(op.Src, srcSpan), d.span(op.Dst, dstSpan)
	if from == nil || to == nil {
		d.violate(ErrIllegalAddress, "Copy: host range [0x%x -> 0x%x, +%d) leaves its allocation", op.Src, op.Dst, op.Len)
		return driverErr(op, cudadrv.EntryMemcpyAsync, ErrIllegalAddress)
	}
	if (src.host() && dst.host()) || op.Flags&cudadrv.CopyForceCPU != 0 {
		return cudadrv.CopyCPU // the caller copies (real Go memory: see alloc)
	}

	status := cudadrv.CopyDone
	var kind int32
	var ctx, peer cudadrv.Context
	execMem := op.SrcMem
	switch {
	case src.host():
		kind, ctx = cudadrv.KindH2D, d.execCtx(&dst, primary, op, &status)
		execMem = op.DstMem
	case dst.host():
		kind, ctx = cudadrv.KindD2H, d.execCtx(&src, primary, op, &status)
	default:
		ctx = d.execCtx(&src, primary, op, &status)
		if ctx != 0 {
			peer = d.execCtx(&dst, primary, op, &status)
		}
		kind = cudadrv.KindPeer
		if peer == ctx {
			kind = cudadrv.KindD2D
		}
	}
	if ctx == 0 || (kind == cudadrv.KindPeer && peer == 0) {
		return status
	}
	id := uint64(ctx)
	if execMem > 0 && mems[execMem-1].Ctx == ctx && ctx != 0 {
		id = mems[execMem-1].CtxID // checked above if it is a primary context's
	} else if d.hasCtxID {
		c := d.ctxs[ctx]
		if c == nil || !c.alive {
			// cuCtxGetId: a reset primary context is answered (the handle
			// persists); any other dead context is a violation.
			if c == nil || !c.primary {
				d.violate(ErrContextDestroyed, "Copy: memory of dead context 0x%x", ctx)
			}
			for dev := 0; dev < int(op.NDevices); dev++ {
				if cudadrv.LoadPrimary(primary, dev) == ctx {
					op.Device, op.SeenPrimary = int32(dev), ctx
					return cudadrv.CopyNeedPrimary
				}
			}
			return driverErr(op, cudadrv.EntryCtxGetId, ErrContextDestroyed)
		}
		id = c.id
	}
	sync := op.Flags&cudadrv.CopySync != 0
	run, blocking := 0, src.pageable() || dst.pageable()
	stage := blocking && op.StageMin != 0 && op.Len >= op.StageMin
	stage = stage && op.Height == 0
	gather := uint64(0)
	if !stage && op.Height == 0 && stagesSmall(op.StageSmall, kind, &dst, op.Len) {
		stage, gather = true, cudadrv.StageSpan(op.Len)
	}
	if !sync && len(more) > 0 && (!stage || gather != 0) && op.Height == 0 {
		runPeer := cudadrv.Context(0)
		if kind == cudadrv.KindPeer {
			runPeer = peer
		}
		var pageable bool
		run, pageable = d.extendRun(more, mems, op, &src, &dst, primary, kind, ctx, runPeer, gather)
		blocking = blocking || pageable
	}
	if gather != 0 && run == 0 {
		stage = false // a piece alone is as fast on the driver's path
	}
	s := -1
	for i := range slots {
		if sid, sctx, lane := slots[i].Identity(); sid == id && sctx == ctx && lane == op.Lane {
			s = i
			break
		}
	}
	op.Ctx, op.CtxID, op.Kind, op.Dir = ctx, id, kind, kind
	if sync {
		op.Kind = cudadrv.KindShort
	}
	if s < 0 {
		op.Device = -1
		return cudadrv.CopyNeedSlot
	}
	op.Slot = int32(s)
	slot := &slots[s]
	if op.Flags&cudadrv.CopyLock != 0 {
		// Step 6 of the protocol. Never spin on the lock holding d.mu: its
		// holder may need the driver meanwhile.
		d.mu.Unlock()
		slot.Lock()
		d.mu.Lock()
		if sid, sctx, lane := slot.Identity(); sid != id || sctx != ctx || lane != op.Lane { // emptied meanwhile
			slot.Unlock()
			op.Slot, op.Device = -1, -1
			return cudadrv.CopyNeedSlot
		}
		*locked = true
	}
	if !d.hasCtxID && slot.Canary != 0 && d.gone(cudadrv.Incarnation{Ctx: ctx, Canary: slot.Canary, CanaryID: slot.CanaryID, PrimaryDevice: -1}) {
		return cudadrv.CopyStale
	}
	if kind == cudadrv.KindPeer {
		tried := false
		for i := int32(0); i < slot.NPeers; i++ {
			tried = tried || slot.Peer[i] == peer
		}
		if !tried {
			op.PeerCtx = peer
			return cudadrv.CopyNeedPeer
		}
	}
	stream := slot.Stream[op.Kind]
	if stream == 0 {
		return cudadrv.CopyNeedStream
	}
	if slot.Fence&(1<<op.Kind) != 0 {
		return cudadrv.CopyNeedFence
	}
	if stage { // also when planning: a staged piece takes no event
		op.Taken = int32(run)        // small staging's run; 0 for a large piece
		return cudadrv.CopyNeedStage // the caller stages it (core/stage.go)
	}
	var scratch uint64 // the pack path (cudadrv/copy.go, 2-D pieces)
	if packs(op, kind, &src, &dst) && slot.ScratchOff&(1<<op.Kind) == 0 {
		if slot.ScratchSize[op.Kind] < op.Len*op.Height {
			return cudadrv.CopyNeedScratch
		}
		scratch = slot.Scratch[op.Kind]
	}
	if !sync && op.Flags&cudadrv.CopyPlan != 0 {
		op.Taken = int32(run)
		return cudadrv.CopyPlanned
	}
	// Step 8 of the protocol: a zcopy with pageable memory detaches.
	detach := *locked && !sync && blocking
	joined := !sync && !detach && op.Flags&cudadrv.CopyReuse != 0 && op.ReuseSlot == int32(s) && op.ReuseKind == op.Kind &&
		op.ReuseSeq > slot.Queried[op.Kind] && op.ReuseSeq == slot.Issued[op.Kind]
	event := slot.Event
	if joined {
		event = op.ReuseEvent
	}
	if !sync && event == 0 {
		return cudadrv.CopyNeedEvent
	}
	if sync && *locked {
		// Step 8 of the protocol: a short copy runs as a user, unlocked.
		slot.AddUser()
		defer slot.DoneUser()
		slot.Unlock()
		*locked = false
	}
	if detach {
		// The caller counts itself out; the lock comes back for a
		// queued piece, as cd_copy's. Never spin on it holding d.mu.
		slot.Event = 0
		slot.AddUser()
		slot.Unlock()
		*locked = false
		op.Detached, op.Event = 1, event
		if f := d.onDetached; f != nil {
			d.mu.Unlock()
			f()
			d.mu.Lock()
		}
		defer func() {
			if op.Err.Entry == cudadrv.EntryNone {
				f := d.onDetachedIssued
				d.mu.Unlock()
				if f != nil {
					f()
				}
				slot.Lock()
				d.mu.Lock()
				*locked = true
			}
		}()
	}
	o, ok := d.streams[stream]
	if err := d.owned("Copy", ctx, o, ok, "stream", uintptr(stream)); err != nil {
		return driverErr(op, cudadrv.EntryMemcpyAsync, err.(*cudadrv.Result).Code)
	}
	if code := d.fault("Copy"); code != 0 {
		return driverErr(op, cudadrv.EntryMemcpyAsync, code)
	}
	if code := d.ctxs[ctx].poison; code != 0 {
		return driverErr(op, cudadrv.EntryMemcpyAsync, code)
	}
	w := &work{stream: stream, run: func() { copy(to, from) }}
	if op.Height != 0 {
		// cuMemcpy2DAsync, with the C fake's checks.
		if code := d.fault("Copy2D"); code != 0 {
			return driverErr(op, cudadrv.EntryMemcpy2DAsync, code)
		}
		if op.Height > 1 && (op.SrcPitch < op.Len || op.DstPitch < op.Len) {
			return driverErr(op, cudadrv.EntryMemcpy2DAsync, ErrInvalidValue)
		}
		d.calls["Copy2D"]++
		rows, n, sp, dp := op.Height, op.Len, op.SrcPitch, op.DstPitch
		w.run = func() {
			for r := uint64(0); r < rows; r++ {
				copy(to[r*dp:r*dp+n], from[r*sp:r*sp+n])
			}
		}
		if scratch != 0 {
			// Through the scratch (its rows packed), then one contiguous
			// copy: the same bytes land, the scratch must be device memory
			// of the context.
			buf := d.span(scratch, n*rows)
			if a := d.find(scratch); buf == nil || a.typ != memTypeDevice || a.ctx != ctx {
				d.violate(ErrIllegalAddress, "Copy: scratch 0x%x is not %d bytes of device memory of context 0x%x", scratch, n*rows, ctx)
				return driverErr(op, cudadrv.EntryMemcpy2DAsync, ErrIllegalAddress)
			}
			d.calls["Pack"]++
			d2h := kind == cudadrv.KindD2H
			w.run = func() {
				if !d2h {
					copy(buf, from[:n*rows])
				}
				for r := uint64(0); r < rows; r++ {
					if d2h {
						copy(buf[r*n:r*n+n], from[r*sp:r*sp+n])
					} else {
						copy(to[r*dp:r*dp+n], buf[r*n:r*n+n])
					}
				}
				if d2h {
					copy(to[:n*rows], buf)
				}
			}
		}
	}
	if run > 0 {
		// One batch (cd_copy on a driver with cuMemcpyBatchAsync): all or
		// nothing, as the C fake's.
		d.calls["CopyRun"]++
		pieces := more[:run]
		spans := make([][2][]byte, run)
		for k, p := range pieces {
			spans[k] = [2][]byte{d.span(p.Dst, p.Len), d.span(p.Src, p.Len)}
		}
		w.run = func() {
			copy(to, from)
			for _, sp := range spans {
				copy(sp[0], sp[1])
			}
		}
	}
	d.pending = append(d.pending, w)
	if sync {
		d.syncStream(stream)
		op.Event = event // as cd_copy: the slot's free event, untouched
		return cudadrv.CopyDone
	}
	e, err := d.eventCall("Copy", ctx, event)
	if err != nil {
		d.syncStream(stream)
		return driverErr(op, cudadrv.EntryEventRecord, err.(*cudadrv.Result).Code)
	}
	e.item = w
	w.events = append(w.events, event)
	op.Event = event
	op.Taken = int32(run)
	if joined {
		return cudadrv.CopyJoined
	}
	return cudadrv.CopyQueued
}

// packs is cd_packs: a 2-D piece for the pack path.
func packs(op *cudadrv.CopyOp, kind int32, src, dst *mem) bool {
	if op.Height < 2 || op.Len >= op.PackBelow || op.Flags&(cudadrv.CopySync|cudadrv.CopyNoPack) != 0 {
		return false
	}
	switch kind {
	case cudadrv.KindD2H:
		return !src.managed && !dst.pageable() && op.DstPitch == op.Len
	case cudadrv.KindH2D:
		return !dst.managed && !src.pageable() && op.SrcPitch == op.Len
	}
	return false
}

// gone is cd_incarnation_gone: device-level state and the primary
// handle's id only.
func (d *Driver) gone(inc cudadrv.Incarnation) bool {
	if inc.PrimaryDevice >= 0 && !d.ctxs[d.primary[inc.PrimaryDevice]].alive {
		return true
	}
	if !d.hasCtxID { // the canary's allocation is the generation
		if inc.Canary == 0 {
			return false
		}
		a := d.find(inc.Canary)
		c := d.ctxs[inc.Ctx]
		return a == nil || a.id != inc.CanaryID || a.ctx != inc.Ctx || !c.alive || c.id != a.ctxGen
	}
	return inc.PrimaryDevice >= 0 && d.ctxs[inc.Ctx].id != inc.ID
}

// Gone is cd_incarnation_gone.
func (d *Driver) Gone(inc cudadrv.Incarnation) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gone(inc)
}

// QuerySlots is cd_query_slots. It counts one "QuerySlots" call, one
// "QueryEvents" per queue it queries (Fail("QueryEvents", n) fails the nth
// queue's query, as cd_query_slots fails a queue whose context cannot be
// entered or whose head event's query fails) and one "cuEventQuery" per
// event it asks about; "cuCtxPopCurrent" fails the restore at the end.
func (d *Driver) QuerySlots(slots []cudadrv.SlotQuery, first int32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls["QuerySlots"]++
	queried := false
	for s := first; s >= 0; s = slots[s].Next {
		sq := &slots[s]
		sq.Gone = 0
		for k := range sq.Queue {
			sq.Queue[k].Done, sq.Queue[k].Err = 0, cudadrv.CallError{Entry: cudadrv.EntryNone}
		}
		if d.gone(sq.Inc) {
			sq.Gone = 1
			continue
		}
		for k := range sq.Queue {
			if q := &sq.Queue[k]; q.N > 0 {
				q.Done, q.Err = d.queryQueue(sq.Inc.Ctx, q)
				queried = true
			}
		}
	}
	if queried {
		return d.popFault()
	}
	return nil
}

// queryQueue is cd_query_queue: the newest event answers for the segment
// once its head is done, unless the segment says QueryInOrder.
func (d *Driver) queryQueue(ctx cudadrv.Context, q *cudadrv.QueueQuery) (int32, cudadrv.CallError) {
	c, err := d.live("QueryEvents", ctx)
	if err != nil {
		return 0, callError(err)
	}
	events := unsafe.Slice(q.Events, q.N)
	query := func(ev cudadrv.Event) (bool, cudadrv.CallError) {
		d.calls["cuEventQuery"]++
		e, err := d.eventCall("QueryEvents", ctx, ev)
		if err != nil {
			return false, callError(err)
		}
		if c.poison != 0 {
			return false, cudadrv.CallError{Entry: cudadrv.EntryEventQuery, Result: c.poison}
		}
		return e.item == nil, cudadrv.CallError{Entry: cudadrv.EntryNone}
	}
	n := int32(0)
	if q.N > 2 && q.Flags&cudadrv.QueryInOrder == 0 {
		ok, cerr := query(events[0])
		if !ok {
			return 0, cerr
		}
		if ok, _ := query(events[q.N-1]); ok {
			return q.N, cudadrv.CallError{Entry: cudadrv.EntryNone}
		}
		n = 1
	}
	for ; n < q.N; n++ {
		if ok, cerr := query(events[n]); !ok {
			return n, cerr
		}
	}
	return n, cudadrv.CallError{Entry: cudadrv.EntryNone}
}

// callError is a fake's *cudadrv.Result as the C side reports it.
func callError(err error) cudadrv.CallError {
	r := err.(*cudadrv.Result)
	return cudadrv.CallError{Entry: r.Entry, Result: r.Code}
}

// popFault is Fail("cuCtxPopCurrent", ...): cd_query_slots reports a failed
// restore of the caller's context after the queries, their answers unchanged.
func (d *Driver) popFault() error {
	if code := d.enter("cuCtxPopCurrent"); code != 0 {
		return result("cuCtxPopCurrent", code)
	}
	return nil
}

// Arm is cd_arm.
func (d *Driver) Arm(inc cudadrv.Incarnation, stream cudadrv.Stream, head cudadrv.Event, fd int) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gone(inc) {
		return false, cudadrv.ErrContextGone
	}
	ctx := inc.Ctx
	c, err := d.live("Arm", ctx)
	if err != nil {
		return false, err
	}
	e, err := d.eventCall("Arm", ctx, head)
	if err != nil {
		return false, err
	}
	if c.poison != 0 {
		return false, result("cuEventQuery", c.poison)
	}
	if e.item == nil {
		return true, nil
	}
	o, ok := d.streams[stream]
	if err := d.owned("Arm", ctx, o, ok, "stream", uintptr(stream)); err != nil {
		return false, err
	}
	if w := d.last(stream); w != nil {
		w.fds = append(w.fds, fd)
	} else {
		var one = [8]byte{1}
		_, _ = unix.Write(fd, one[:])
	}
	return false, nil
}
