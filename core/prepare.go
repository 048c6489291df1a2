// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"fmt"

	"github.com/cucopy/cucopy/cudadrv"
)

// The cold half of issuing: when the driver layer's Copy answers a NEED_*
// status (cudadrv.CopyStatus), it issued nothing and says what is missing —
// a slot, a stream, a free event, a primary context, a peer-access attempt
// — or that a slot is stale. prepare does that work under mu and
// issuePiece (ep.go) calls Copy again.

// prepare does the cold work a copy asked for (st), under mu: the copy is
// then tried again. What another thread did meanwhile is looked at first:
// the copy may simply find it done.
func (i *Iface) prepare(api string, st cudadrv.CopyStatus, req *cudadrv.CopyOp) error {
	i.mu.lock()
	defer i.mu.unlock()
	if i.closed.Load() {
		return errorf(ErrHandle, api, "iface is closed")
	}
	switch st {
	case cudadrv.CopyNeedSlot:
		if i.findSlot(req.CtxID, req.Ctx, req.Lane) >= 0 {
			return nil
		}
		_, err := i.addSlot(api, req.Ctx, req.CtxID, req.Lane)
		return err
	case cudadrv.CopyNeedPrimary:
		return i.needPrimary(api, req)
	}
	s := int(req.Slot)
	if id, ctx, lane := i.slots[s].Identity(); id != req.CtxID || ctx != req.Ctx || lane != req.Lane {
		return nil // the slot was released or reused meanwhile: look again
	}
	switch st {
	case cudadrv.CopyStale:
		i.dropSlot(s, ErrCanceled) // then the context gets a fresh slot
		return nil
	case cudadrv.CopyNeedStream:
		return i.addStream(api, s, int(req.Kind))
	case cudadrv.CopyNeedEvent:
		return i.addEvent(api, s)
	case cudadrv.CopyNeedPeer:
		i.tryPeer(s, req.PeerCtx)
		return nil
	case cudadrv.CopyNeedFence:
		return i.waitFence(api, s, int(req.Kind))
	case cudadrv.CopyNeedScratch:
		i.addScratch(s, req)
		return nil
	}
	return errorf(ErrInternal, api, "unexpected copy status %d", st)
}

// addStream creates slot s's stream of kind, unless it exists.
func (i *Iface) addStream(api string, s, kind int) error {
	r := &i.res[s]
	slot := &i.slots[s]
	if slot.Stream[kind] != 0 {
		return nil
	}
	stream, err := i.drv.StreamCreate(r.ctx)
	if err != nil {
		return driverError(api, fmt.Sprintf("creating the %s stream on device %d", cudadrv.KindName(kind), r.device), err)
	}
	i.pruneFence()
	i.lockSlot(s)
	slot.Stream[kind] = stream
	if len(i.fenceTargets) > 0 {
		slot.Fence |= 1 << kind // created after a fence with work before it still in flight
	}
	i.unlockSlot(s)
	return nil
}

// addEvent gives slot s a free event: one from its pool, else a new one
// while the pool is below max_events, else ErrNoResource (back-pressure:
// progress frees events).
func (i *Iface) addEvent(api string, s int) error {
	slot := &i.slots[s]
	i.lockSlot(s)
	if slot.Event == 0 {
		slot.Event = slot.PopFree()
	}
	has := slot.Event != 0
	i.unlockSlot(s)
	if has {
		return nil
	}
	return i.createEvent(api, s)
}

// createEvent adds a new event to slot s (its free event if it has none,
// else its pool) while it has fewer than max_events, else ErrNoResource;
// under mu.
func (i *Iface) createEvent(api string, s int) error {
	r := &i.res[s]
	slot := &i.slots[s]
	i.lockSlot(s)
	events := r.events
	i.unlockSlot(s)
	if events >= int(i.params.MaxEvents) {
		return errorf(ErrNoResource, api, "all %d events of device %d (context id %d) are in flight; call progress and retry", i.params.MaxEvents, r.device, r.id)
	}
	ev, err := i.drv.EventCreate(r.ctx)
	if err != nil {
		return driverError(api, fmt.Sprintf("creating an event on device %d", r.device), err)
	}
	i.lockSlot(s)
	r.events++
	slot.ReserveFree(r.events)
	if slot.Event == 0 {
		slot.Event = ev
	} else {
		slot.PushFree(ev)
	}
	i.unlockSlot(s)
	i.noteEvents(s)
	return nil
}

// tryPeer enables peer access from slot s's context to peer, once: a
// failure leaves the driver's staged path. The slot remembers the last
// MaxPeers contexts tried.
func (i *Iface) tryPeer(s int, peer cudadrv.Context) {
	r := &i.res[s]
	slot := &i.slots[s]
	for _, p := range slot.Peer[:slot.NPeers] {
		if p == peer {
			return
		}
	}
	if err := i.drv.EnablePeer(r.ctx, peer); err != nil {
		logf(LogInfo, "peer access from device %d not enabled (%v); the driver stages the copy", r.device, err)
	}
	i.lockSlot(s)
	if slot.NPeers == cudadrv.MaxPeers {
		copy(slot.Peer[:], slot.Peer[1:])
		slot.NPeers--
	}
	slot.Peer[slot.NPeers] = peer
	slot.NPeers++
	i.unlockSlot(s)
}

// needPrimary finds a context for memory without an owning context; under mu.
func (i *Iface) needPrimary(api string, req *cudadrv.CopyOp) error {
	if dev := int(req.Device); dev >= 0 {
		if dev >= len(i.primary) {
			return errorf(ErrNoDevice, api, "the driver reports memory on device %d of %d", dev, len(i.primary))
		}
		if i.primary[dev] != req.SeenPrimary {
			return nil // another thread retained it meanwhile: look again
		}
		return i.usePrimary(api, dev)
	}
	if req.Flags&(cudadrv.CopyFallbackCtx|cudadrv.CopyForceCPU) != 0 {
		// Asked again although a context was given: no driver answer
		// tells the memory's device. Never spin here.
		return errorf(ErrNoDevice, api, "no CUDA context can run a copy of this memory (its device is unknown)")
	}
	ctx, err := i.firstActivePrimary(api)
	if err != nil {
		return err
	}
	if ctx == 0 {
		req.Flags |= cudadrv.CopyForceCPU
	} else {
		req.Flags |= cudadrv.CopyFallbackCtx
		req.Ctx = ctx
	}
	return nil
}

// usePrimary retains the primary context of dev for memory that has no
// owning context, if the program has activated it; under mu.
func (i *Iface) usePrimary(api string, dev int) error {
	if i.primary[dev] != 0 {
		// Ours, but the driver reports the context destroyed: the program
		// reset it. The retain outlives a reset; give it back (allowed
		// after a reset) and look at the device afresh.
		if err := i.drv.PrimaryRelease(dev); err != nil && !deinitialized(err) {
			logf(LogInfo, "releasing the primary context of device %d after its reset: %v", dev, err)
		}
		cudadrv.StorePrimary(i.primary, dev, 0)
	}
	active, err := i.drv.PrimaryActive(dev)
	if err != nil {
		return driverError(api, fmt.Sprintf("primary context state of device %d", dev), err)
	}
	if !active {
		return errorf(ErrNoDevice, api, "memory of device %d has no owning context and the device's primary context is not active; cucopy does not activate it", dev)
	}
	ctx, err := i.drv.PrimaryRetain(dev)
	if err != nil {
		return driverError(api, fmt.Sprintf("retaining the primary context of device %d", dev), err)
	}
	cudadrv.StorePrimary(i.primary, dev, ctx)
	return nil
}

// firstActivePrimary is the context for managed memory whose device is
// unknown when the caller has no current context; 0 if none is active.
func (i *Iface) firstActivePrimary(api string) (cudadrv.Context, error) {
	for dev := range i.primary {
		if i.primary[dev] != 0 {
			return i.primary[dev], nil
		}
		if active, err := i.drv.PrimaryActive(dev); err == nil && active {
			if err := i.usePrimary(api, dev); err != nil {
				return 0, err
			}
			return i.primary[dev], nil
		}
	}
	return 0, nil
}
