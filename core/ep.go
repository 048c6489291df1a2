// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"math"

	"github.com/cucopy/cucopy/cudadrv"
)

// The issuing half of the data path, top to bottom: an endpoint's Short or
// Zcopy checks its arguments, starts an operation (operation.go), and issues
// each piece with issuePiece, which calls the driver layer's Copy (one cgo
// crossing; the protocol is documented on cudadrv.Interface.Copy) until the
// piece is done, queued or failed, doing the cold work Copy asks for in
// between (prepare.go). A queued piece is booked in its context's queue by
// queuePiece; progress.go completes it.

// IOV mirrors cucopy_iov_t: capi views the caller's C array as []IOV.
type IOV struct {
	Buffer uintptr
	Length uint64
}

// Ep issues copies on its iface, in its lane.
type Ep struct {
	iface *Iface
	lane  int32
	mu    ifaceLock    // free
	free  []*operation // finished operations, for reuse
}

// NewEp creates an endpoint.
func (i *Iface) NewEp() (*Ep, error) {
	i.mu.lock()
	defer i.mu.unlock()
	if i.closed.Load() {
		return nil, errorf(ErrHandle, "ep_create", "iface is closed")
	}
	e := &Ep{iface: i, lane: int32(i.nextLane % i.params.Lanes)}
	e.mu.multi = i.multi
	i.nextLane++
	return e, nil
}

// Iface is the endpoint's iface.
func (e *Ep) Iface() *Iface { return e.iface }

// Lane is the lane the endpoint's copies use.
func (e *Ep) Lane() int32 { return e.lane }

// OpName is the C function an ep operation was called as, without "cucopy_":
// the operation name errors carry; memh: its _memh form.
func OpName(put, short, memh bool) string {
	k := 0
	if put {
		k |= 1
	}
	if short {
		k |= 2
	}
	if memh {
		k |= 4
	}
	return opNames[k]
}

var opNames = [8]string{"ep_get_zcopy", "ep_put_zcopy", "ep_get_short", "ep_put_short",
	"ep_get_zcopy_memh", "ep_put_zcopy_memh", "ep_get_short_memh", "ep_put_short_memh"}

// endpoints orders a piece: put copies local → remote, get remote → local.
func endpoints(put bool, local, remote uint64) (dst, src uint64) {
	if put {
		return remote, local
	}
	return local, remote
}

// Short copies synchronously.
func (e *Ep) Short(put bool, buffer uintptr, length, remote uint64) error {
	return e.short(OpName(put, true, false), put, buffer, nil, length, remote, nil)
}

// ShortMemh is Short with memory handles for the buffer and the remote
// range (either may be nil: classified).
func (e *Ep) ShortMemh(put bool, buffer uintptr, bufH *MemHandle, length, remote uint64, remoteH *MemHandle) error {
	return e.short(OpName(put, true, true), put, buffer, bufH, length, remote, remoteH)
}

func (e *Ep) short(api string, put bool, buffer uintptr, bufH *MemHandle, length, remote uint64, remoteH *MemHandle) error {
	if length == 0 {
		return nil
	}
	if buffer == 0 || remote == 0 {
		return errorf(ErrInvalid, api, "NULL buffer or remote address with length %d", length)
	}
	if uint64(buffer) > math.MaxUint64-length || remote > math.MaxUint64-length {
		return errorf(ErrInvalid, api, "length %d overflows the address space", length)
	}
	i := e.iface
	if err := i.checkHandle(api, "buffer", -1, bufH, uint64(buffer), length); err != nil {
		return err
	}
	if err := i.checkHandle(api, "remote address", -1, remoteH, remote, length); err != nil {
		return err
	}
	if i.closed.Load() {
		return errorf(ErrHandle, api, "iface is closed")
	}
	var holder *operation // multi-thread: an operation, only for its request
	if i.multi {
		holder = i.newOperation(e, 0)
	}
	b := i.request(holder)
	b.mem.n = 0
	req := &b.req
	*req = cudadrv.CopyOp{Len: length, Flags: cudadrv.CopySync, Lane: e.lane}
	req.Dst, req.Src = endpoints(put, uint64(buffer), remote)
	req.DstMem, req.SrcMem = endpointMems(put, b.mem.index(bufH), b.mem.index(remoteH))
	_, err := i.issuePiece(api, b, nil, true, nil)
	if holder != nil {
		i.recycle(holder)
	}
	return i.countNoResource(err)
}

// endpointMems orders the handle indices of a piece as endpoints orders its
// addresses.
func endpointMems(put bool, local, remote int32) (dst, src int32) {
	if put {
		return remote, local
	}
	return local, remote
}

// Zcopy issues every iov entry, back to back from remote. It returns OK
// when no piece went to a GPU stream (CPU copies, zero length), InProgress
// when comp will be completed later (by progress, or by a release or a
// reset that ends its pieces first), or an error with nothing in flight.
func (e *Ep) Zcopy(put bool, iov []IOV, remote uint64, comp uintptr) (Status, error) {
	return e.zcopy(OpName(put, false, false), put, iov, nil, remote, nil, comp)
}

// ZcopyMemh is Zcopy with memory handles: hs[k] (nil, or hs nil: none)
// describes iov[k]'s buffer, remoteH the remote range.
func (e *Ep) ZcopyMemh(put bool, iov []IOV, hs []*MemHandle, remote uint64, remoteH *MemHandle, comp uintptr) (Status, error) {
	return e.zcopy(OpName(put, false, true), put, iov, hs, remote, remoteH, comp)
}

func (e *Ep) zcopy(api string, put bool, iov []IOV, hs []*MemHandle, remote uint64, remoteH *MemHandle, comp uintptr) (Status, error) {
	if len(iov) == 0 || len(iov) > MaxIOV {
		return ErrInvalid, errorf(ErrInvalid, api, "iovcnt %d: want 1 to %d", len(iov), MaxIOV)
	}
	i := e.iface
	var total uint64
	for n, v := range iov {
		if v.Length == 0 {
			continue
		}
		if v.Buffer == 0 {
			return ErrInvalid, errorf(ErrInvalid, api, "iov[%d]: NULL buffer with length %d", n, v.Length)
		}
		if uint64(v.Buffer) > math.MaxUint64-v.Length || total > math.MaxUint64-v.Length {
			return ErrInvalid, errorf(ErrInvalid, api, "iov[%d]: length %d overflows", n, v.Length)
		}
		if hs != nil {
			if err := i.checkHandle(api, "iov[%d]", n, hs[n], uint64(v.Buffer), v.Length); err != nil {
				return StatusOf(err), err
			}
		}
		total += v.Length
	}
	if total == 0 {
		return OK, nil
	}
	if remote == 0 || remote > math.MaxUint64-total {
		return ErrInvalid, errorf(ErrInvalid, api, "remote address 0x%x with length %d is invalid", remote, total)
	}
	if err := i.checkHandle(api, "remote address", -1, remoteH, remote, total); err != nil {
		return StatusOf(err), err
	}

	if i.closed.Load() {
		return ErrHandle, errorf(ErrHandle, api, "iface is closed")
	}
	op := i.newOperation(e, comp)
	b := i.request(op) // not used after endIssue(op): the operation may complete at once
	b.mem.n = 0
	remoteMem := b.mem.index(remoteH)
	np := 0
	off := uint64(0)
	for n, v := range iov {
		if v.Length == 0 {
			continue
		}
		dst, src := endpoints(put, uint64(v.Buffer), remote+off)
		local := int32(0)
		if hs != nil {
			local = b.mem.index(hs[n])
		}
		dstMem, srcMem := endpointMems(put, local, remoteMem)
		// The whole piece: the buffer is reused, and a 2-D operation's
		// rows and pitches must not stay behind (Copy2D).
		b.pieces[np] = cudadrv.Piece{Dst: dst, Src: src, Len: v.Length, DstMem: dstMem, SrcMem: srcMem}
		off += v.Length
		np++
	}
	return i.issueOperation(api, e, op, b, np)
}

// BatchCopy is one entry of Batch (cucopy_copy_t): a copy of Len bytes from
// Src to Dst, with optional memory handles for either side.
type BatchCopy struct {
	Dst, Src, Len uint64
	DstH, SrcH    *MemHandle
}

// Batch issues independent copies as one operation with one completion,
// as Zcopy does its iov entries: consecutive entries on one context,
// direction and peer form one driver batch (cuMemcpyBatchAsync) and one
// event. Entries run in no set order among themselves.
func (e *Ep) Batch(copies []BatchCopy, comp uintptr) (Status, error) {
	const api = "ep_copy_batch"
	if len(copies) == 0 || len(copies) > MaxIOV {
		return ErrInvalid, errorf(ErrInvalid, api, "count %d: want 1 to %d", len(copies), MaxIOV)
	}
	i := e.iface
	nonEmpty := 0
	for n := range copies {
		c := &copies[n]
		if c.Len == 0 {
			continue
		}
		if c.Dst == 0 || c.Src == 0 {
			return ErrInvalid, errorf(ErrInvalid, api, "copies[%d]: NULL address with length %d", n, c.Len)
		}
		if c.Dst > math.MaxUint64-c.Len || c.Src > math.MaxUint64-c.Len {
			return ErrInvalid, errorf(ErrInvalid, api, "copies[%d]: length %d overflows", n, c.Len)
		}
		if err := i.checkHandle(api, "copies[%d].dst", n, c.DstH, c.Dst, c.Len); err != nil {
			return StatusOf(err), err
		}
		if err := i.checkHandle(api, "copies[%d].src", n, c.SrcH, c.Src, c.Len); err != nil {
			return StatusOf(err), err
		}
		nonEmpty++
	}
	if nonEmpty == 0 {
		return OK, nil
	}
	return e.issueEntries(api, comp, func(b *issueBuf) int {
		np := 0
		for n := range copies {
			c := &copies[n]
			if c.Len == 0 {
				continue
			}
			b.pieces[np] = cudadrv.Piece{Dst: c.Dst, Src: c.Src, Len: c.Len, DstMem: b.mem.index(c.DstH), SrcMem: b.mem.index(c.SrcH)}
			np++
		}
		return np
	})
}

// issueEntries is the second half of Batch and Copy2D, whose entries were
// checked: unless the iface is closed, an operation for comp with the
// pieces fill writes into b.pieces (it returns how many).
func (e *Ep) issueEntries(api string, comp uintptr, fill func(b *issueBuf) int) (Status, error) {
	i := e.iface
	if i.closed.Load() {
		return ErrHandle, errorf(ErrHandle, api, "iface is closed")
	}
	op := i.newOperation(e, comp)
	b := i.request(op)
	b.mem.n = 0
	return i.issueOperation(api, e, op, b, fill(b))
}

// pieceRequest is the request that issues piece p (of an operation) in lane
// with flags.
func pieceRequest(p *cudadrv.Piece, lane int32, flags uint32) cudadrv.CopyOp {
	return cudadrv.CopyOp{Dst: p.Dst, Src: p.Src, Len: p.Len, Lane: lane, Flags: flags, SrcMem: p.SrcMem, DstMem: p.DstMem,
		Height: p.Height, SrcPitch: p.SrcPitch, DstPitch: p.DstPitch}
}

// issueOperation issues op's np pieces (b.pieces), the second half of
// Zcopy, Batch and Copy2D.
func (i *Iface) issueOperation(api string, e *Ep, op *operation, b *issueBuf, np int) (Status, error) {
	req, pieces := &b.req, &b.pieces
	if i.mayRunOut(np) {
		if err := i.reserve(api, b, pieces[:np], e.lane); err != nil {
			op.abandoned = true
			i.endIssue(op, 0)
			return StatusOf(err), i.countNoResource(err)
		}
	}
	var queued [MaxIOV]pieceRef
	n := int32(0)
	for k := 0; k < np; {
		p := &pieces[k]
		*req = pieceRequest(p, e.lane, i.runFlags)
		if n > 0 {
			// Consecutive pieces on one stream share one event, so an
			// operation never needs more events than it has runs
			// (cudadrv.CopyReuse).
			last := queued[n-1]
			req.Flags |= cudadrv.CopyReuse
			req.ReuseSlot, req.ReuseKind, req.ReuseEvent, req.ReuseSeq = last.slot, last.kind, last.event, last.seq
		}
		var more []cudadrv.Piece
		if i.runs {
			more = pieces[k+1 : np]
		}
		st, err := i.issuePiece(api, b, op, k == 0, more)
		if err != nil {
			i.waitQueued(queued[:n], e.lane)
			op.abandoned = true
			i.endIssue(op, n)
			return StatusOf(err), i.countNoResource(err)
		}
		if st == cudadrv.CopyQueued {
			queued[n] = pieceRef{slot: req.Slot, kind: req.Kind, id: req.CtxID, event: req.Event, seq: req.ReuseSeq}
			n++
		}
		k += 1 + int(req.Taken)
	}
	i.endIssue(op, n)
	if n == 0 {
		return OK, nil // CPU copies only: done
	}
	return InProgress, nil
}

// issueBuf is what an issuing call fills for the driver layer: the request,
// the operation's pieces (a zcopy's non-empty iov entries) and the
// descriptions of their memory handles.
type issueBuf struct {
	req    cudadrv.CopyOp
	pieces [MaxIOV]cudadrv.Piece
	mem    memSides
	staged [MaxIOV]cudadrv.Piece // small staging's DMAs (stage.go, runSmall)
}

// request is the buffer a copy is issued with: the iface's own on a
// single-thread iface, else op's, which the issuing call owns. (A sync.Pool
// missed about once per 300 copies with 8 threads and 32 Ps: a cgo caller's
// goroutine need not get the same P back on its next call.)
func (i *Iface) request(op *operation) *issueBuf {
	if i.multi {
		return &op.buf
	}
	return &i.single
}

// pieceRef is a queued piece of the operation being issued.
type pieceRef struct {
	slot, kind int32
	id         uint64 // the slot's context id when the piece was queued
	event      cudadrv.Event
	seq        uint64 // its sequence number in its queue
}

// issuePiece runs one copy piece of op (nil for a short copy), with the
// run of more that joins it (req.Taken pieces), doing the cold work the
// driver layer asks for and retrying. It returns CopyDone, CopyQueued (the
// piece and its run are in a queue for op, and req.ReuseSeq is their
// sequence number there), CopyJoined (folded into the previous piece's
// queue entry), or an error. Multi-thread ifaces take no lock here but the
// slot's, which the driver layer hands over on CopyQueued and CopyJoined;
// the cold work takes mu.
func (i *Iface) issuePiece(api string, b *issueBuf, op *operation, first bool, more []cudadrv.Piece) (cudadrv.CopyStatus, error) {
	req := &b.req
	if i.multi {
		req.Flags |= cudadrv.CopyLock
	}
	req.StageMin, req.StageSmall, req.PackBelow = i.stage.min, i.stage.small, i.packBelow
	for {
		st := i.drv.Copy(i.slots[:i.nslots.Load()], i.primary, req, more, b.mem.mems[:b.mem.n])
		if req.Err.Entry >= 0 && st != cudadrv.CopyDriverError {
			warnRestore(api, i.drv.Error(req.Err))
		}
		switch st {
		case cudadrv.CopyDone:
			i.countCopy(req, first, nil)
			return st, nil
		case cudadrv.CopyPlanned:
			return st, nil
		case cudadrv.CopyCPU:
			if req.Flags&cudadrv.CopyPlan != 0 {
				return st, nil // planning: copied when issued
			}
			if i.nfence.Load() > 0 {
				if err := i.waitFenceCPU(api); err != nil {
					return st, err
				}
			}
			if err := cpuCopyRows(api, req); err != nil {
				return st, err
			}
			req.Slot = -1
			i.countCopy(req, first, nil)
			return cudadrv.CopyDone, nil
		case cudadrv.CopyJoined:
			// Folded into the operation's previous piece: its queue entry
			// and event now stand for both.
			i.countCopy(req, first, more[:req.Taken])
			i.unlockSlot(int(req.Slot))
			return st, nil
		case cudadrv.CopyQueued:
			i.queuePiece(req, op, first, more[:req.Taken])
			return st, nil
		case cudadrv.CopyNeedStage: // pageable, large or small D2H: staged here (stage.go), done when it returns
			if req.Flags&cudadrv.CopyPlan != 0 {
				return st, nil // planning: staged when issued, with no event
			}
			if st, err := i.stagePiece(api, b, first, more[:req.Taken]); st == cudadrv.CopyDone || err != nil {
				return st, err
			}
		case cudadrv.CopyOutOfRange:
			which, addr := "source", req.Src
			if req.Side == 1 {
				which, addr = "destination", req.Dst
			}
			return st, errorf(ErrOutOfRange, api, "%s range [0x%x, +%d) crosses the end of its allocation", which, addr, req.Len)
		case cudadrv.CopyStaleMemh:
			which := "source"
			if req.Side == 1 {
				which = "destination"
			}
			return st, errorf(ErrHandle, api, "the %s's memory handle describes memory of a primary context that was reset since: the memory is gone; release the handle", which)
		case cudadrv.CopyDriverError:
			if req.Detached != 0 {
				i.giveBackDetached(req)
			}
			return st, driverError(api, "", i.drv.Error(req.Err))
		default:
			if err := i.prepare(api, st, req); err != nil {
				return st, err
			}
		}
	}
}

// warnRestore logs a copy that was issued, but whose leaving of its
// context failed (cuCtxPopCurrent: err).
func warnRestore(api string, err error) {
	logf(LogWarn, "%s: the copy was issued, but restoring the calling thread's CUDA context failed: %v", api, err)
}

// FastOutcome reports a copy that capi's C steady state ran as api
// (cudadrv/cd_fast.c) on the native driver: failed, the driver failed it
// with ce (the error the Go path returns); else it was issued, but leaving
// its context failed with ce (logged, as the Go path does).
func FastOutcome(api string, failed bool, ce cudadrv.CallError) error {
	if failed {
		return driverError(api, "", cudadrv.NativeError(ce))
	}
	warnRestore(api, cudadrv.NativeError(ce))
	return nil
}

// queuePiece books a piece (and its run) the driver layer queued for op and
// refills the slot's free event, under the slot's lock that Copy handed
// over; it releases it (also if it panics), and then counts a detached
// piece out of the slot's users (cudadrv/copy.go, step 8).
func (i *Iface) queuePiece(req *cudadrv.CopyOp, op *operation, first bool, run []cudadrv.Piece) {
	s := int(req.Slot)
	if req.Detached != 0 {
		defer i.slots[s].DoneUser() // after the unlock: a hidden slot waits for it
	}
	defer i.unlockSlot(s)
	i.drainInbox(s) // the C steady state's pieces on s come first
	q := &i.res[s].queues[req.Kind]
	q.push(req.Event, op, req.Detached != 0)
	req.ReuseSeq = q.issued
	i.slots[s].Issued[req.Kind] = q.issued // joins need the newest entry (cudadrv.CopyReuse)
	// A detached piece took the event while it copied without the lock,
	// and another copy may have had the slot refilled since.
	if i.slots[s].Event == req.Event {
		i.slots[s].Event = 0
	}
	if i.slots[s].Event == 0 {
		i.slots[s].Event = i.slots[s].PopFree()
	}
	i.countCopy(req, first, run)
}

// giveBackDetached returns the event of a detached piece that failed to
// its slot, then counts the piece out of the slot's users.
func (i *Iface) giveBackDetached(req *cudadrv.CopyOp) {
	s := int(req.Slot)
	defer i.slots[s].DoneUser()
	i.lockSlot(s)
	defer i.unlockSlot(s)
	if i.slots[s].Event == 0 {
		i.slots[s].Event = req.Event
	} else {
		i.slots[s].PushFree(req.Event)
	}
}

// waitQueued waits for pieces already issued by an operation that then
// failed, so that an error return never leaves a copy running on the
// caller's buffers. The pieces still complete through progress. A slot
// released meanwhile waited for them itself; one dropped has no copies.
func (i *Iface) waitQueued(queued []pieceRef, lane int32) {
	if len(queued) == 0 {
		return
	}
	i.mu.lock()
	defer i.mu.unlock()
	for _, p := range queued {
		r := &i.res[p.slot]
		stream := i.slots[p.slot].Stream[p.kind]
		if id, ctx, l := i.slots[p.slot].Identity(); id != p.id || ctx != r.ctx || l != lane || stream == 0 {
			continue // released (it waited for them) or dropped, maybe reused since
		}
		if err := i.drv.StreamSynchronize(r.ctx, stream); err != nil {
			logf(LogWarn, "waiting for a failed operation's pieces on device %d: %v", r.device, err)
		}
	}
}
