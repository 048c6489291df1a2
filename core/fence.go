// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"fmt"

	"github.com/cucopy/cucopy/cudadrv"
)

// The fence (cucopy_iface_fence, cucopy_ep_fence): every operation issued
// after it starts only after every operation issued before it has finished
// its data movement, on every stream, lane, context and device. The caller
// never waits at the fence:
//
//   - Fence records, for every queue with pieces in flight, its last piece
//     (a queueTarget, as flush does), and marks every stream of every slot
//     (cudadrv.Slot.Fence). With nothing in flight it records and marks
//     nothing: a scan of the queues.
//   - A marked stream's next copy answers CopyNeedFence (one bit test in
//     the driver layer): waitFence makes the stream wait
//     (cuStreamWaitEvent, across contexts and devices) for the last event
//     of every target not reached yet, clears the mark, and the copy goes
//     on. Streams created while targets are pending are marked at creation.
//   - A host copy on the CPU cannot wait on a stream: with targets pending
//     it synchronizes their streams first (the one case a fence blocks).
//
// Short copies and CPU copies issued before the fence have finished when
// their call returned, so they need no target. A target is dropped once
// its queue has popped it; events of a context found reset are not waited
// for (its pieces are canceled).

// Fence orders the operations issued on the iface after it behind those
// issued before it. Under mu.
func (i *Iface) Fence(api string) error {
	i.mu.lock()
	defer i.mu.unlock()
	if i.closed.Load() {
		return errorf(ErrHandle, api, "iface is closed")
	}
	i.counters.fences.Add(1)
	i.pruneFence()
	added := false
	i.eachBusyQueue(func(t queueTarget) bool {
		i.addFenceTarget(t)
		added = true
		return true
	})
	if !added {
		return nil
	}
	i.nfence.Store(int32(len(i.fenceTargets)))
	for s := range int(i.nslots.Load()) {
		if i.res[s].dead {
			continue
		}
		slot := &i.slots[s]
		i.lockSlot(s)
		for k, stream := range slot.Stream {
			if stream != 0 {
				slot.Fence |= 1 << k
			}
		}
		i.unlockSlot(s)
	}
	return nil
}

// Fence is the iface's fence: the endpoint's operations share the iface's
// queues, so it orders everything issued on the iface (a superset).
func (e *Ep) Fence() error { return e.iface.Fence("ep_fence") }

// addFenceTarget records t; a queue's older target is replaced (its pieces
// complete in order, so the newer one covers it). Under mu.
func (i *Iface) addFenceTarget(t queueTarget) {
	for k := range i.fenceTargets {
		if f := &i.fenceTargets[k]; f.slot == t.slot && f.kind == t.kind {
			f.seq = t.seq
			return
		}
	}
	i.fenceTargets = append(i.fenceTargets, t)
}

// pruneFence drops the targets whose pieces have been popped. Under mu.
func (i *Iface) pruneFence() {
	kept := i.fenceTargets[:0]
	for _, t := range i.fenceTargets {
		if !i.reached(t) {
			kept = append(kept, t)
		}
	}
	i.fenceTargets = kept
	i.nfence.Store(int32(len(kept)))
}

// waitFence makes stream kind of slot s wait for every pending target and
// clears its mark (CopyNeedFence). Under mu.
func (i *Iface) waitFence(api string, s, kind int) error {
	i.pruneFence()
	r := &i.res[s]
	stream := i.slots[s].Stream[kind]
	for _, t := range i.fenceTargets {
		if t.slot == s && t.kind == kind {
			continue // the stream's own earlier work: in order anyway
		}
		if err := i.waitTarget(t, func(ev cudadrv.Event) error {
			return i.drv.StreamWaitEvent(r.ctx, stream, ev)
		}); err != nil {
			return driverError(api, fmt.Sprintf("ordering the %s stream of device %d behind a fence", cudadrv.KindName(kind), r.device), err)
		}
	}
	i.lockSlot(s)
	i.slots[s].Fence &^= 1 << kind
	i.unlockSlot(s)
	return nil
}

// waitTarget calls wait with the event of target t's last piece, unless it
// was popped or its context's incarnation ended. The slot's lock is held
// meanwhile, so the event is not popped and recorded again under it (wait
// only enqueues). Under mu.
func (i *Iface) waitTarget(t queueTarget, wait func(cudadrv.Event) error) error {
	r := &i.res[t.slot]
	if r.dead || (r.ownsPrimary || i.slots[t.slot].Canary != 0) && i.drv.Gone(i.incarnation(t.slot)) {
		return nil
	}
	i.lockSlot(t.slot)
	defer i.unlockSlot(t.slot)
	ev, queued := r.queues[t.kind].eventAt(t.seq)
	if !queued {
		return nil
	}
	return wait(ev)
}

// waitFenceCPU waits until the pending targets' copies finished, for a host
// copy issued after a fence: it synchronizes each target's stream (which
// may also wait for later work on it), under mu, and then drops the
// targets, whose work is done: later host copies and marked streams need
// not wait for them again. A target in a context with a sticky error is
// done too (its copies failed; progress reports them). Takes mu.
func (i *Iface) waitFenceCPU(api string) error {
	i.mu.lock()
	defer i.mu.unlock()
	i.pruneFence()
	for k, t := range i.fenceTargets {
		r := &i.res[t.slot]
		stream := i.slots[t.slot].Stream[t.kind]
		if r.dead || stream == 0 || (r.ownsPrimary || i.slots[t.slot].Canary != 0) && i.drv.Gone(i.incarnation(t.slot)) {
			continue
		}
		if err := i.drv.StreamSynchronize(r.ctx, stream); err != nil && !deinitialized(err) && !sticky(err) {
			i.fenceTargets = append(i.fenceTargets[:0], i.fenceTargets[k:]...) // the waited ones are done
			i.nfence.Store(int32(len(i.fenceTargets)))
			return driverError(api, fmt.Sprintf("waiting for the copies before a fence on device %d", r.device), err)
		}
	}
	i.fenceTargets = i.fenceTargets[:0]
	i.nfence.Store(0)
	return nil
}
