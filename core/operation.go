// SPDX-License-Identifier: BSD-3-Clause

package core

import "sync/atomic"

// operation is one zcopy: its completion, its first error, and how many of
// its pieces are in flight, plus issuingGuard while the zcopy call is still
// issuing. Pieces that finish meanwhile (another thread's progress, a
// release, a reset) count down, and the call adds the pieces it queued
// minus the guard when it is done (endIssue), so the operation completes
// exactly once, in whichever thread brings pending to 0, and never under
// its issuer. No lock: the queues hold *operation, and pending and status
// are atomic.
//
// Life: newOperation (issuing) → endIssue → pieces done → complete (its
// completion made ready, progress.go) → recycle (back on its endpoint's
// free list).
type operation struct {
	ep        *Ep      // whose free list it goes back to
	buf       issueBuf // multi-thread: the issuing call's request (Iface.request)
	comp      uintptr
	pending   atomic.Int32
	status    atomic.Int32 // Status: the first error, else OK
	abandoned bool         // the call failed (or queued nothing): complete silently; written before the issuer's last add
}

const issuingGuard = 1 << 30

// newOperation starts an operation of e, issuing. Operations are reused
// from the endpoint's free list: they come back there from whichever thread
// completes them, so a pool per thread (or per P) would keep missing.
func (i *Iface) newOperation(e *Ep, comp uintptr) *operation {
	var op *operation
	e.mu.lock()
	if n := len(e.free); n > 0 {
		op = e.free[n-1]
		e.free = e.free[:n-1]
	}
	e.mu.unlock()
	if op == nil {
		op = &operation{ep: e}
	}
	op.comp, op.abandoned = comp, false
	op.status.Store(int32(OK))
	op.pending.Store(issuingGuard)
	return op
}

// endIssue ends the issuing of op, which queued `queued` pieces. An
// operation with pieces queued completes through progress, even when they
// all finished (or were canceled) before the call returned; one with none
// (CPU copies only) is over, and recycled silently.
func (i *Iface) endIssue(op *operation, queued int32) {
	op.abandoned = op.abandoned || queued == 0
	if op.pending.Add(queued-issuingGuard) == 0 {
		i.complete(op)
	}
}

// pieceDone counts one finished piece of op, with its status, and says
// whether it was the operation's last: the caller then completes it.
func (op *operation) pieceDone(st Status) bool {
	if st < 0 {
		op.status.CompareAndSwap(int32(OK), int32(st))
	}
	return op.pending.Add(-1) == 0
}

// complete counts op as completed and makes its completion ready, unless
// abandoned; then recycles it. (A poll completes its operations in a
// readyBatch instead.)
func (i *Iface) complete(op *operation) {
	if !op.abandoned {
		i.completed.Add(1)
		if op.comp != 0 {
			i.makeReady(op.comp, Status(op.status.Load()))
		}
	}
	i.recycle(op)
}

// recycle puts op back on its endpoint's free list.
func (i *Iface) recycle(op *operation) {
	e := op.ep
	e.mu.lock()
	e.free = append(e.free, op)
	e.mu.unlock()
}
