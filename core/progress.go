// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"runtime"

	"github.com/cucopy/cucopy/cudadrv"
)

// The completing half of the data path, top to bottom: Progress claims
// each slot's queues in turn; poll asks the driver layer, per queue, how
// many leading pieces finished (querySegments, then QueryEvents: one cgo
// crossing per non-empty queue, nothing held meanwhile); popFinished pops
// them, gives their events back and counts their operations down
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
	for s := range int(i.nslots.Load()) {
		if !i.tryClaim(s) {
			continue
		}
		if inc, ended := i.poll(s); ended {
			i.dropEnded(s, inc)
		}
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

// poll completes the finished pieces of slot s, which the caller claimed;
// it gives the claim back (also if it panics: capi recovers panics, and a
// claim or slot lock left set would hang every later call). The slot's lock
// is taken twice, around the driver's queries, not during them. ended says
// that the slot's incarnation inc ended: the caller drops the slot.
func (i *Iface) poll(s int) (inc cudadrv.Incarnation, ended bool) {
	defer i.unclaim(s)
	segs, n := i.querySegments(s)
	if n == 0 {
		return inc, false
	}
	// Without the lock, the segments stay valid (only the claim's holder
	// pops; a push writes past the queued pieces or into a new ring), and
	// so does the incarnation (it changes only under the claim).
	inc = i.incarnation(s)
	var done [cudadrv.NumAsyncKinds]int
	var errs [cudadrv.NumAsyncKinds]error
	for k, seg := range segs {
		if len(seg) == 0 {
			continue
		}
		done[k], errs[k] = i.drv.QueryEvents(inc, seg)
		if errs[k] == cudadrv.ErrContextGone {
			return inc, true
		}
	}
	dev, id := i.popFinished(s, &done, &errs)
	for k, err := range errs {
		switch {
		case err == nil:
		case leavingFailed(err):
			// The events were counted correctly; only leaving the context
			// failed.
			logf(LogWarn, "progress on device %d (context id %d): %v", dev, id, err)
		default:
			logf(LogWarn, "copy on device %d (context id %d, %s stream) failed: %v",
				dev, id, cudadrv.KindName(k), err)
		}
	}
	return inc, false
}

// querySegments is, per queue of slot s, the leading events progress asks
// the driver about, and their number; 0 also when a copy holds the slot's
// lock (progress looks again next time rather than wait: the issuer comes
// back to progress).
func (i *Iface) querySegments(s int) (segs [cudadrv.NumAsyncKinds][]cudadrv.Event, n int) {
	if i.multi && !i.slots[s].TryLock() {
		return segs, 0
	}
	defer i.unlockSlot(s)
	r := &i.res[s]
	if r.dead {
		return segs, 0
	}
	for k := range r.queues {
		q := &r.queues[k]
		segs[k] = q.segment(int(i.params.MaxPoll))
		n += len(segs[k])
		// Until they are popped, these pieces' events are not re-recorded
		// by a later piece of their operation (cudadrv.CopyReuse): the
		// driver's answer must stay true.
		i.slots[s].Queried[k] = max(i.slots[s].Queried[k], q.done+uint64(len(segs[k])))
	}
	return segs, n
}

// popFinished pops what the driver reported finished (done) or failed
// (errs, a failed query fails the head piece) from slot s's queues, and
// returns the slot's device and context id for messages.
func (i *Iface) popFinished(s int, done *[cudadrv.NumAsyncKinds]int, errs *[cudadrv.NumAsyncKinds]error) (int, uint64) {
	var b readyBatch
	i.lockSlot(s)
	defer i.unlockSlot(s)
	defer b.publish(i) // under the slot's lock (and the claim): in order with the next poll's
	r := &i.res[s]
	for k := range r.queues {
		q := &r.queues[k]
		for j := 0; j < done[k]; j++ {
			i.popPiece(s, q, OK, &b)
		}
		if errs[k] != nil && !leavingFailed(errs[k]) {
			// The head piece's query failed (e.g. a sticky error in this
			// context) or its context cannot be entered: fail that piece;
			// the other contexts go on.
			i.popPiece(s, q, ErrCUDA, &b)
		}
		// The pieces still queued may be joined again: the next query
		// raises Queried first (only the claim's holder queries).
		i.slots[s].Queried[k] = q.done
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
	i.res[s].free = append(i.res[s].free, ev)
}

// readyComp is a completion to run and the status it gets.
type readyComp struct {
	comp   uintptr
	status Status
}

// readyBatch collects the operations one poll completes, so that they are
// counted and made ready under one lock, in order.
type readyBatch struct {
	n, completed int
	comps        [64]readyComp
}

func (b *readyBatch) add(i *Iface, op *operation) {
	if !op.abandoned {
		b.completed++
		if op.comp != 0 {
			if b.n == len(b.comps) {
				b.publish(i)
			}
			b.comps[b.n] = readyComp{comp: op.comp, status: Status(op.status.Load())}
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
	i.ready = append(i.ready, readyComp{comp: comp, status: st})
	i.nready.Add(1)
	i.readyMu.unlock()
}

// RunCallbacks runs every completion made ready (by progress, or by a
// release or a reset), oldest first, with run. On a multi-thread iface one
// thread at a time does, so that they run one at a time and in the order
// the operations completed; a thread that finds another one running them
// leaves them to it. A callback may call back in: a progress it calls
// leaves the completions it readies to this loop.
func (i *Iface) RunCallbacks(run func(comp uintptr, st Status)) {
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

// runBatches is RunCallbacks' loop, for the one thread running callbacks.
func (i *Iface) runBatches(run func(comp uintptr, st Status)) {
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
		for k, rc := range batch {
			batch[k] = readyComp{}
			i.nrunning.Add(1) // before nready drops: a flush sees it one way or the other
			i.nready.Add(-1)
			run(rc.comp, rc.status)
			i.nrunning.Add(-1)
		}
		i.batch = batch[:0]
	}
}
