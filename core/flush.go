// SPDX-License-Identifier: BSD-3-Clause

package core

// Flush snapshots, for every queue with pieces in flight, the sequence
// number of its last piece; the flush's completion becomes ready (with the
// operations' completions, progress.go) once every snapshot is reached.

// flushReq is a flush waiting for its targets.
type flushReq struct {
	comp    uintptr
	targets []queueTarget
}

// Flush returns OK when nothing is outstanding, else InProgress, with comp
// (if non-zero) completed once everything issued before has completed.
// An operation has completed when its completion callback has returned:
// a flush that finds every piece finished but completions still ready or
// running (on another thread of a multi-thread iface) is not done yet, and
// its comp is made ready behind them, so it runs after they returned.
// fromCallback says the caller is one of this iface's completion callbacks
// (capi knows it from cucopy_complete): the flush then cannot wait for
// callbacks, its own or those queued behind it on its thread, and covers
// the copies only.
func (i *Iface) Flush(api string, comp uintptr, fromCallback bool) (Status, error) {
	i.mu.lock()
	defer i.mu.unlock()
	if i.closed.Load() {
		return ErrHandle, errorf(ErrHandle, api, "iface is closed")
	}
	i.counters.flushes.Add(1)
	var targets []queueTarget
	busy := false
	i.eachBusyQueue(func(t queueTarget) bool {
		busy = true
		if comp != 0 {
			targets = append(targets, t)
		}
		return comp != 0 // without a completion nothing is recorded: polling allocates nothing
	})
	if busy && comp == 0 {
		return InProgress, nil
	}
	if len(targets) > 0 {
		i.flushMu.lock()
		i.flushes = append(i.flushes, flushReq{comp: comp, targets: targets})
		i.nflushes.Store(int32(len(i.flushes)))
		i.flushMu.unlock()
		return InProgress, nil
	}
	if fromCallback || i.nready.Load()+i.nrunning.Load() == 0 {
		return OK, nil
	}
	if comp != 0 {
		i.makeReady(comp, OK) // behind the completions it covers
	}
	return InProgress, nil
}

// Flush flushes the endpoint. Its operations share the iface's queues, so
// this waits for everything issued on the iface before it: a superset of
// the endpoint's operations.
func (e *Ep) Flush(comp uintptr, fromCallback bool) (Status, error) {
	return e.iface.Flush("ep_flush", comp, fromCallback)
}

// completeFlushes makes ready the flushes whose targets are reached. A
// released or dropped slot popped all of its pieces, so its targets are
// reached too.
func (i *Iface) completeFlushes() {
	if i.nflushes.Load() == 0 {
		return
	}
	i.flushMu.lock()
	defer i.flushMu.unlock()
	kept := i.flushes[:0]
	for _, f := range i.flushes {
		if i.allReached(f.targets) {
			i.makeReady(f.comp, OK)
		} else {
			kept = append(kept, f)
		}
	}
	i.flushes = kept
	i.nflushes.Store(int32(len(kept)))
}

// allReached says whether every target's queue has popped its pieces.
func (i *Iface) allReached(targets []queueTarget) bool {
	for _, t := range targets {
		if !i.reached(t) {
			return false
		}
	}
	return true
}
