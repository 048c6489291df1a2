// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"runtime"
	"sync/atomic"

	"github.com/cucopy/cucopy/cudadrv"
)

// The completing half of the data path, top to bottom: Progress claims the
// slots it can and collects, per queue of each, the leading events to ask
// about (collect, under the slot's lock); one call of the driver layer
// answers them all (QuerySlots: one cgo crossing per progress call,
// nothing held meanwhile); finish then pops, per slot, what finished
// (popFinished), gives the events back and counts their operations down
// (operation.go); an operation's last piece makes its completion ready
// (readyBatch); RunCallbacks then runs the ready completions, one at a
// time and in order, outside every lock.

// Progress completes finished pieces on every context and returns how many
// operations (all of their pieces) completed since the last call, here or
// on a context that ended; their completions then run with RunCallbacks.
// On a multi-thread iface it takes no iface-wide lock: threads progressing
// at once share the contexts out (one polls a context's queues, the others
// skip it), and copies go on meanwhile.
func (i *Iface) Progress() (int, error) {
	if i.closed.Load() {
		return 0, errorf(ErrHandle, "iface_progress", "iface is closed")
	}
	// The claimed slots with events to ask about, linked through pq (each
	// entry is its claim's holder's) and ordered by context handle: the
	// driver layer enters each context once (a context's lanes are several
	// slots). Slots come in table order, mostly in context order already.
	first, last := int32(-1), int32(-1)
	for s := range int(i.nslots.Load()) {
		if !i.tryClaim(s) {
			continue
		}
		if !i.collect(s) {
			i.unclaim(s)
			continue
		}
		i.link(&first, &last, int32(s))
	}
	if first >= 0 {
		i.answer(first)
	}
	i.completeFlushes()
	return int(i.completed.Swap(0)), nil
}

// tryClaim, claim and unclaim own slot s's queues for popping: on a
// multi-thread iface one thread at a time polls them, and releasing or
// dropping the slot waits for it. Single-thread ifaces need no claim.
func (i *Iface) tryClaim(s int) bool {
	// Looking before the compare-and-swap keeps the slot's cache line
	// shared while another thread holds the claim.
	return !i.multi || (!i.res[s].polling.Load() && i.res[s].polling.CompareAndSwap(false, true))
}

func (i *Iface) claim(s int) {
	for !i.tryClaim(s) {
		runtime.Gosched()
	}
}

func (i *Iface) unclaim(s int) {
	if i.multi {
		i.res[s].polling.Store(false)
	}
}

// link puts slot s into the list (first, last) of slots to query, after
// the last one of a context handle not above its own.
func (i *Iface) link(first, last *int32, s int32) {
	ctx := i.pq[s].Inc.Ctx
	i.pq[s].Next = -1
	switch {
	case *first < 0:
		*first, *last = s, s
	case i.pq[*last].Inc.Ctx <= ctx:
		i.pq[*last].Next, *last = s, s
	case i.pq[*first].Inc.Ctx > ctx:
		i.pq[s].Next, *first = *first, s
	default:
		p := *first
		for i.pq[i.pq[p].Next].Inc.Ctx <= ctx {
			p = i.pq[p].Next
		}
		i.pq[s].Next, i.pq[p].Next = i.pq[p].Next, s
	}
}

// answer asks the driver layer about the list of slots from first, which
// the caller claimed and collected, and finishes each; every claim is given
// back, also if it panics (capi recovers panics, and a claim left set would
// hang every later call).
func (i *Iface) answer(first int32) {
	// Slots whose incarnation ended are dropped after every claim of the
	// list is given back: dropping takes mu, and a thread holding mu may
	// be waiting for one of those claims (lock order: mu, then a claim).
	// At most a few per call (a reset ends a device's lanes); one found
	// beyond them is found again by the next progress call.
	var ended [8]endedSlot
	nended := 0
	next := first
	defer func() {
		for ; next >= 0; next = i.pq[next].Next {
			i.unclaim(int(next))
		}
		for _, e := range ended[:nended] {
			i.dropEnded(e.slot, e.inc)
		}
	}()
	if err := i.drv.QuerySlots(i.pq, first); err != nil {
		// The events were counted correctly; only restoring the caller's
		// context failed.
		logf(LogWarn, "progress: restoring the calling thread's CUDA context: %v", err)
	}
	for next >= 0 {
		s := int(next)
		gone := i.finish(s)
		next = i.pq[s].Next
		if gone && nended < len(ended) {
			// pq[s] is the next claimer's once unclaimed: copy what the drop needs.
			ended[nended] = endedSlot{slot: s, inc: i.pq[s].Inc}
			nended++
		}
		i.unclaim(s)
	}
}

// endedSlot is a slot answer found ended, to drop once the claims are back.
type endedSlot struct {
	slot int
	inc  cudadrv.Incarnation
}

// collect fills slot s's query (pq[s]) with, per queue, the leading events
// progress asks the driver about, and says whether there is any; none also
// when a copy holds the slot's lock (progress looks again next time rather
// than wait: the issuer comes back to progress). Under the claim.
func (i *Iface) collect(s int) bool {
	if i.multi && !i.slots[s].TryLock() {
		return false
	}
	defer i.unlockSlot(s)
	r := &i.res[s]
	if r.dead {
		return false
	}
	i.drainInbox(s)
	sq := &i.pq[s]
	n := 0
	for k := range r.queues {
		q := &r.queues[k]
		seg, detached := q.segment(int(i.params.MaxPoll))
		qq := &sq.Queue[k]
		qq.N, qq.Flags, qq.Events = int32(len(seg)), 0, nil
		if len(seg) > 0 {
			qq.Events = &seg[0]
		}
		if detached {
			qq.Flags = cudadrv.QueryInOrder
		}
		n += len(seg)
		// Until they are popped, these pieces' events are not re-recorded
		// by a later piece of their operation (cudadrv.CopyReuse): the
		// driver's answer must stay true.
		i.slots[s].Queried[k] = max(i.slots[s].Queried[k], q.done+uint64(len(seg)))
	}
	if n == 0 {
		return false
	}
	// Without the lock, the segments stay valid (only the claim's holder
	// pops; a push writes past the queued pieces or into a new ring, and
	// keeps the old one until popFinished), and so does the incarnation
	// (it changes only under the claim).
	sq.Inc = i.incarnation(s)
	return true
}

// finish pops what the driver layer answered for slot s (pq[s]), and logs
// what failed; ended says the slot's incarnation ended: the caller drops
// the slot. Under the claim.
func (i *Iface) finish(s int) (ended bool) {
	sq := &i.pq[s]
	if sq.Gone != 0 {
		return true
	}
	dev, id := i.popFinished(s, sq)
	for k := range sq.Queue {
		if err := i.drv.Error(sq.Queue[k].Err); err != nil {
			logf(LogWarn, "copy on device %d (context id %d, %s stream) failed: %v",
				dev, id, cudadrv.KindName(k), err)
		}
		sq.Queue[k].Events = nil // into a C ring that may be freed before the next query
	}
	return false
}

// popFinished pops what the driver reported finished (Done) or failed
// (Err: a failed query, or a context that could not be entered, fails the
// head piece) from slot s's queues, and returns the slot's device and
// context id for messages.
func (i *Iface) popFinished(s int, sq *cudadrv.SlotQuery) (int, uint64) {
	var b readyBatch
	i.lockSlot(s)
	defer i.unlockSlot(s)
	defer b.publish(i) // under the slot's lock (and the claim): in order with the next poll's
	r := &i.res[s]
	for k := range r.queues {
		q := &r.queues[k]
		qq := &sq.Queue[k]
		for j := int32(0); j < qq.Done; j++ {
			i.popPiece(s, q, OK, &b)
		}
		if qq.Err.Result != 0 && qq.Done < qq.N {
			// The head piece's query failed (e.g. a sticky error in this
			// context) or its context cannot be entered: fail that piece;
			// the other contexts go on.
			i.popPiece(s, q, ErrCUDA, &b)
		}
		// The pieces still queued may be joined again: the next query
		// raises Queried first (only the claim's holder queries).
		i.slots[s].Queried[k] = q.done
		if len(q.retired) > 0 {
			q.freeRetired() // the query that might read them is over
		}
	}
	return r.device, r.id
}

// popPiece pops q's head piece, which ended with st, gives its event back
// to slot s and completes its operation in b if it was the last piece.
func (i *Iface) popPiece(s int, q *eventQueue, st Status, b *readyBatch) {
	ev, op := q.pop()
	i.releaseEvent(s, ev)
	if op.pieceDone(st) {
		b.add(i, op)
	}
}

// releaseEvent gives a completed piece's event back to its context; under
// the slot's lock.
func (i *Iface) releaseEvent(s int, ev cudadrv.Event) {
	if i.slots[s].Event == 0 {
		i.slots[s].Event = ev
		return
	}
	i.slots[s].PushFree(ev)
}

// ReadyComp is a completion to run and the status it gets; capi hands a
// batch of them to C as an array (its layout is checked there).
type ReadyComp struct {
	Comp   uintptr
	Status Status
	_      int32
}

// readyBatch collects the operations one poll completes, so that they are
// counted and made ready under one lock, in order.
type readyBatch struct {
	n, completed int
	comps        [64]ReadyComp
}

func (b *readyBatch) add(i *Iface, op *operation) {
	if !op.abandoned {
		b.completed++
		if op.comp != 0 {
			if b.n == len(b.comps) {
				b.publish(i)
			}
			b.comps[b.n] = ReadyComp{Comp: op.comp, Status: Status(op.status.Load())}
			b.n++
		}
	}
	i.recycle(op)
}

// publish counts the batch's operations as completed and appends its
// completions to the ready list.
func (b *readyBatch) publish(i *Iface) {
	if b.completed > 0 {
		i.completed.Add(int64(b.completed))
		b.completed = 0
	}
	if b.n == 0 {
		return
	}
	i.readyMu.lock()
	i.ready = append(i.ready, b.comps[:b.n]...)
	i.nready.Add(int64(b.n))
	i.readyMu.unlock()
	b.n = 0
}

// makeReady queues one completion for RunCallbacks.
func (i *Iface) makeReady(comp uintptr, st Status) {
	i.readyMu.lock()
	i.ready = append(i.ready, ReadyComp{Comp: comp, Status: st})
	i.nready.Add(1)
	i.readyMu.unlock()
}

// RunCallbacks runs every completion made ready (by progress, or by a
// release or a reset), oldest first, with run, one at a time; see
// RunCallbackBatches.
func (i *Iface) RunCallbacks(run func(comp uintptr, st Status)) {
	if i.nready.Load() == 0 {
		return
	}
	i.RunCallbackBatches(func(batch []ReadyComp, ready *atomic.Int64) {
		for _, rc := range batch {
			ready.Add(-1)
			run(rc.Comp, rc.Status)
		}
	})
}

// RunCallbackBatches runs every completion made ready (by progress, or by
// a release or a reset), oldest first: run gets them in batches and runs
// each batch's callbacks one at a time, in order, taking one from ready
// (the iface's count of completions ready and not yet run, an atomic that
// capi's C loop decrements with C atomics) before each callback, and
// returns when they all returned (capi: one C call per batch). So a
// callback sees the completions behind it in the batch as ready (event arm
// answers BUSY), and a flush sees them one way or the other. On a multi-thread iface one
// thread at a time does, so that they run one at a time and in the order
// the operations completed; a thread that finds another one running them
// leaves them to it. A callback may call back in: a progress it calls
// leaves the completions it readies to this loop (its next batch). A
// batch's completions count as running (nrunning) until run returns: a
// flush from another thread meanwhile waits for all of them.
func (i *Iface) RunCallbackBatches(run func(batch []ReadyComp, ready *atomic.Int64)) {
	if i.nready.Load() == 0 {
		return
	}
	if !i.multi {
		if !i.cbRunning {
			i.cbRunning = true
			i.runBatches(run)
			i.cbRunning = false
		}
		return
	}
	// Looking again after unlocking: a completion made ready while this
	// thread held the lock, by a thread whose TryLock failed, is not left
	// behind.
	for i.nready.Load() > 0 && i.cbMu.TryLock() {
		i.runBatches(run)
		i.cbMu.Unlock()
	}
}

// runBatches is RunCallbackBatches' loop, for the one thread running
// callbacks.
func (i *Iface) runBatches(run func(batch []ReadyComp, ready *atomic.Int64)) {
	for {
		// Take the whole list in one go; the spare one collects new ones.
		i.readyMu.lock()
		batch := i.ready
		i.ready = i.batch[:0]
		i.readyMu.unlock()
		if len(batch) == 0 {
			i.batch = batch
			return
		}
		n := int64(len(batch))
		i.nrunning.Add(n) // before nready drops (in run): a flush sees them one way or the other
		run(batch, &i.nready)
		i.nrunning.Add(-n)
		clear(batch)
		i.batch = batch[:0]
	}
}
