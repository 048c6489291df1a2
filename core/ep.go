// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"math"
	"sync"

	"github.com/cucopy/cucopy/cudadrv"
)

// IOV mirrors cucopy_iov_t: capi views the caller's C array as []IOV.
type IOV struct {
	Buffer uintptr
	Length uint64
}

// Ep issues copies on its iface, in its lane.
type Ep struct {
	iface *Iface
	lane  int32
	mu    sync.Mutex // multi-thread: free
	free  []*opState // finished operations, for reuse
}

// NewEp creates an endpoint.
func (i *Iface) NewEp() (*Ep, error) {
	i.lock()
	defer i.unlock()
	if i.closed.Load() {
		return nil, errorf(ErrHandle, "ep_create", "iface is closed")
	}
	e := &Ep{iface: i, lane: int32(i.nextLane % i.params.Lanes)}
	i.nextLane++
	return e, nil
}

// Closed says whether the iface is closed.
func (i *Iface) Closed() bool { return i.closed.Load() }

// Iface is the endpoint's iface.
func (e *Ep) Iface() *Iface { return e.iface }

// OpName is the C function an ep operation was called as, without "cucopy_":
// the operation name errors carry.
func OpName(put, short bool) string {
	switch {
	case put && short:
		return "ep_put_short"
	case short:
		return "ep_get_short"
	case put:
		return "ep_put_zcopy"
	}
	return "ep_get_zcopy"
}

// endpoints orders a piece: put copies local → remote, get remote → local.
func endpoints(put bool, local, remote uint64) (dst, src uint64) {
	if put {
		return remote, local
	}
	return local, remote
}

// Short copies synchronously.
func (e *Ep) Short(put bool, buffer uintptr, length, remote uint64) error {
	op := OpName(put, true)
	if length == 0 {
		return nil
	}
	if buffer == 0 || remote == 0 {
		return errorf(ErrInvalid, op, "NULL buffer or remote address with length %d", length)
	}
	if uint64(buffer) > math.MaxUint64-length || remote > math.MaxUint64-length {
		return errorf(ErrInvalid, op, "length %d overflows the address space", length)
	}
	i := e.iface
	if i.closed.Load() {
		return errorf(ErrHandle, op, "iface is closed")
	}
	var req *opState // multi-thread: an operation, only for its request
	if i.multi {
		req = i.newOp(e, 0)
	}
	c := i.copyOp(req)
	*c = cudadrv.CopyOp{Len: length, Flags: cudadrv.CopySync, Lane: e.lane}
	c.Dst, c.Src = endpoints(put, uint64(buffer), remote)
	_, err := i.issue(op, c, nil)
	if req != nil {
		i.recycle(req)
	}
	return err
}

// Zcopy issues every iov entry, back to back from remote. It returns OK
// when no piece went to a GPU stream (CPU copies, zero length), InProgress
// when comp will be completed later (by progress, or by a release or a
// reset that ends its pieces first), or an error with nothing in flight.
func (e *Ep) Zcopy(put bool, iov []IOV, remote uint64, comp uintptr) (Status, error) {
	op := OpName(put, false)
	if len(iov) == 0 || len(iov) > MaxIOV {
		return ErrInvalid, errorf(ErrInvalid, op, "iovcnt %d: want 1 to %d", len(iov), MaxIOV)
	}
	var total uint64
	for n, v := range iov {
		if v.Length == 0 {
			continue
		}
		if v.Buffer == 0 {
			return ErrInvalid, errorf(ErrInvalid, op, "iov[%d]: NULL buffer with length %d", n, v.Length)
		}
		if uint64(v.Buffer) > math.MaxUint64-v.Length || total > math.MaxUint64-v.Length {
			return ErrInvalid, errorf(ErrInvalid, op, "iov[%d]: length %d overflows", n, v.Length)
		}
		total += v.Length
	}
	if total == 0 {
		return OK, nil
	}
	if remote == 0 || remote > math.MaxUint64-total {
		return ErrInvalid, errorf(ErrInvalid, op, "remote address 0x%x with length %d is invalid", remote, total)
	}

	i := e.iface
	if i.closed.Load() {
		return ErrHandle, errorf(ErrHandle, op, "iface is closed")
	}
	zop := i.newOp(e, comp)
	c := i.copyOp(zop) // not used after issued(zop): the operation may complete at once
	var issued [MaxIOV]pieceRef
	n := int32(0)
	off := uint64(0)
	for _, v := range iov {
		if v.Length == 0 {
			continue
		}
		*c = cudadrv.CopyOp{Len: v.Length, Lane: e.lane}
		c.Dst, c.Src = endpoints(put, uint64(v.Buffer), remote+off)
		if n > 0 {
			// Consecutive pieces on one stream share one event, so an
			// operation never needs more events than it has runs. The
			// driver layer joins only while the previous piece is queued
			// and not yet queried by progress.
			last := issued[n-1]
			c.Flags = cudadrv.CopyReuse
			c.ReuseSlot, c.ReuseKind, c.ReuseEvent, c.ReuseSeq = last.slot, last.kind, last.event, last.seq
		}
		st, err := i.issue(op, c, zop)
		if err != nil {
			i.waitQueued(issued[:n], e.lane)
			zop.abandoned = true
			i.issued(zop, n)
			return StatusOf(err), err
		}
		if st == cudadrv.CopyQueued {
			issued[n] = pieceRef{slot: c.Slot, kind: c.Kind, id: c.CtxID, event: c.Event, seq: c.ReuseSeq}
			n++
		}
		off += v.Length
	}
	i.issued(zop, n)
	if n == 0 {
		return OK, nil // CPU copies only: done
	}
	return InProgress, nil
}

// Flush flushes the endpoint. Its operations share the iface's queues, so
// this waits for everything issued on the iface before it: a superset of
// the endpoint's operations.
func (e *Ep) Flush(comp uintptr) (Status, error) {
	return e.iface.Flush("ep_flush", comp)
}
