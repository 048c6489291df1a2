// SPDX-License-Identifier: BSD-3-Clause

package core

import "github.com/cucopy/cucopy/cudadrv"

// eventQueue is a FIFO of zcopy pieces on one stream, each with its event,
// its operation and whether it was booked detached: three rings of the same
// capacity, grown by doubling. The events' ring is C memory
// (cudadrv.NewEventRing), which the driver layer reads during one progress
// call for all slots (cudadrv.Interface.QuerySlots) without the slot's
// lock: a ring outgrown meanwhile is kept (retired) until the claim's
// holder frees it (freeRetired), when no query reads it; emptied frees all.
// Issuers push under the slot's lock (ep.go); only the holder of the
// slot's claim pops (progress.go, slots.go). A piece's sequence number is
// issued after its push; the counters never go back, not even when the
// slot is reused, so an old sequence number never names a new piece.
type eventQueue struct {
	events       []cudadrv.Event
	ops          []*operation
	detached     []bool // recorded without the slot's lock (ep.go, queuePiece): maybe before an earlier entry
	retired      [][]cudadrv.Event
	head, count  int
	issued, done uint64 // pieces pushed and popped so far
}

func (q *eventQueue) push(ev cudadrv.Event, op *operation, detached bool) {
	if q.count == len(q.events) {
		n := 2 * len(q.events)
		if n == 0 {
			n = 16
		}
		events := cudadrv.NewEventRing(n)
		ops := make([]*operation, n)
		det := make([]bool, n)
		for j := 0; j < q.count; j++ {
			k := (q.head + j) % len(q.events)
			events[j], ops[j], det[j] = q.events[k], q.ops[k], q.detached[k]
		}
		if q.events != nil {
			q.retired = append(q.retired, q.events)
		}
		q.events, q.ops, q.detached, q.head = events, ops, det, 0
	}
	tail := (q.head + q.count) % len(q.events)
	q.events[tail] = ev
	q.ops[tail] = op
	q.detached[tail] = detached
	q.count++
	q.issued++
}

// freeRetired frees the rings the queue outgrew; by the holder of the
// slot's claim, under the slot's lock.
func (q *eventQueue) freeRetired() {
	for k, r := range q.retired {
		cudadrv.FreeEventRing(r)
		q.retired[k] = nil
	}
	q.retired = q.retired[:0]
}

// emptied is the queue of a retired slot: no ring, its counters kept.
// Under the claim.
func (q *eventQueue) emptied() eventQueue {
	q.freeRetired()
	cudadrv.FreeEventRing(q.events)
	return eventQueue{issued: q.issued, done: q.done}
}

// segment is the longest run of queued events, oldest first, that is
// contiguous in the ring, capped at max, and whether its newest entry was
// booked detached.
func (q *eventQueue) segment(max int) ([]cudadrv.Event, bool) {
	n := min(q.count, len(q.events)-q.head, max)
	return q.events[q.head : q.head+n], n > 0 && q.detached[q.head+n-1]
}

// headEvent is the oldest queued piece's event, 0 when the queue is empty.
func (q *eventQueue) headEvent() cudadrv.Event {
	if q.count == 0 {
		return 0
	}
	return q.events[q.head]
}

// eventAt is the event of queued piece seq, false once it was popped (or
// never pushed).
func (q *eventQueue) eventAt(seq uint64) (cudadrv.Event, bool) {
	if seq <= q.done || seq > q.issued {
		return 0, false
	}
	return q.events[(q.head+int(seq-q.done-1))%len(q.events)], true
}

func (q *eventQueue) pop() (cudadrv.Event, *operation) {
	ev, op := q.events[q.head], q.ops[q.head]
	q.ops[q.head] = nil
	q.head = (q.head + 1) % len(q.events)
	q.count--
	q.done++
	return ev, op
}

// drainInbox books the pieces the C steady state queued on slot s
// (cudadrv/cd_fast.c: a zcopy of one piece, its operation not yet made)
// into their queues, oldest first, each as an operation of its own. It
// runs before anything reads or pushes s's queues, so that they hold
// every piece issued on s in issue order; the C side advanced
// Slot.Issued as these pushes advance the queues' counters. Under the
// slot's lock.
func (i *Iface) drainInbox(s int) {
	q := &i.res[s].queues
	i.slots[s].Drain(func(b *cudadrv.Booking) {
		op := i.newOperation(&i.booked, b.Comp)
		op.pending.Store(1) // issued: one piece in flight
		q[b.Kind].push(b.Event, op, false)
	})
}

// queueTarget names a point in one queue: queue kind of slot slot has
// popped its pieces up to sequence number seq (flush and fence wait for
// such points).
type queueTarget struct {
	slot, kind int
	seq        uint64
}

// eachBusyQueue calls f with the last queued piece of every queue with
// pieces in flight, until f returns false. Under mu.
func (i *Iface) eachBusyQueue(f func(t queueTarget) bool) {
	for s := range int(i.nslots.Load()) {
		r := &i.res[s]
		for k := range r.queues {
			q := &r.queues[k]
			i.lockSlot(s)
			i.drainInbox(s)
			count, seq := q.count, q.issued
			i.unlockSlot(s)
			if count > 0 && !f(queueTarget{slot: s, kind: k, seq: seq}) {
				return
			}
		}
	}
}

// reached says whether target t's queue has popped its pieces.
func (i *Iface) reached(t queueTarget) bool {
	i.lockSlot(t.slot)
	done := i.res[t.slot].queues[t.kind].done
	i.unlockSlot(t.slot)
	return done >= t.seq
}
