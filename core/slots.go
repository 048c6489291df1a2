// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/cucopy/cucopy/cudadrv"
)

// The slot table: per (CUDA context, lane) the iface has seen, a slot —
// cudadrv.Slot, what the copy hot path reads, and ctxResources, the rest —
// at the same index of two fixed arrays that never move.
//
// A slot's life:
//
//	          addSlot              hideSlot               retireSlot
//	(unused) ────────► live ───────────────► hidden ──────────────────► tombstone
//	                    ▲    (by releaseSlot or dropSlot)                  │
//	                    └───────────── addSlot reuses it ──────────────────┘
//
//   - live: its identity (context id, handle, lane) is set; copies find it
//     without a lock and issue under its lock word.
//   - hidden: no lookup matches it; only the holder of mu (and of its claim)
//     touches it. A release that fails leaves it hidden, for another attempt.
//   - tombstone (ctxResources.dead): empty; its queues' counters stay, so the
//     flushes and sequence numbers that named its pieces stay settled.
//
// Two ways from live to tombstone:
//   - releaseSlot (cucopy_iface_release_context, close): the context is
//     alive; its streams are synchronized, its pieces complete normally, its
//     streams and events are destroyed, the primary retain is given back.
//   - dropSlot (the incarnation ended: a reset, the driver deinitialized, a
//     stale handle on a driver without cuCtxGetId): nothing is called on the
//     dead context; its pieces fail with CUCOPY_ERR_CANCELED. dropEnded is
//     dropSlot for progress, which found the end without mu.

// MaxSlots is how many slots, i.e. (CUDA context, lane) pairs, one iface
// holds resources in at once; a released or ended context's slots are
// reused.
const MaxSlots = 256

// ctxResources is one slot's resources beyond cudadrv.Slot. The identity
// (ctx to dead) changes under mu and the slot's lock, and a live slot dies
// only under its claim too; events, free and queues change under the slot's
// lock, pops only under the claim (and, once the slot is hidden from copies,
// under mu and the claim alone); the statistics are atomic.
type ctxResources struct {
	ctx         cudadrv.Context
	id          uint64
	device      int
	ownsPrimary bool // we hold a retain on ctx, the device's primary context
	dead        bool // a tombstone: the context was released or ended
	events      int  // events created (in queues, free, or in the slot)
	queues      [cudadrv.NumAsyncKinds]eventQueue
	serial      uint64 // this life's number in the iface (stats.go); under mu
	lane        int32
	polling     atomic.Bool // multi-thread: claimed by the thread popping the queues (Iface.tryClaim)
}

// incarnation is slot s's incarnation as the driver layer checks it; under
// mu or the claim.
func (i *Iface) incarnation(s int) cudadrv.Incarnation {
	r := &i.res[s]
	dev := int32(-1)
	if r.ownsPrimary {
		dev = int32(r.device)
	}
	return cudadrv.Incarnation{Ctx: r.ctx, ID: r.id, Canary: i.slots[s].Canary, CanaryID: i.slots[s].CanaryID, PrimaryDevice: dev}
}

// findSlot is the slot of context (id, ctx)'s lane, -1 if none; under mu.
func (i *Iface) findSlot(id uint64, ctx cudadrv.Context, lane int32) int {
	for s := range int(i.nslots.Load()) {
		if sid, sctx, slane := i.slots[s].Identity(); sid == id && sctx == ctx && slane == lane {
			return s
		}
	}
	return -1
}

// addSlot makes a slot for a context's lane seen for the first time; under
// mu. When ctx is its device's primary context, a retain is held so that
// the program releasing its own retain cannot destroy the context under our
// resources.
func (i *Iface) addSlot(api string, ctx cudadrv.Context, id uint64, lane int32) (int, error) {
	s := int(i.nslots.Load())
	for t := range s {
		if i.res[t].dead {
			s = t
			break
		}
	}
	if s == len(i.slots) {
		if s = i.reclaimIdleSlot(); s < 0 {
			return -1, errorf(ErrNoResource, api, "the iface already holds resources in %d CUDA contexts (lanes counted apart), none idle in a live primary context: %s; call cucopy_iface_release_context for contexts the program is done with (before destroying them)", len(i.slots), i.slotSummary())
		}
	}
	dev, err := i.drv.ContextDevice(ctx)
	if err != nil {
		return -1, driverError(api, "querying the device of a context", err)
	}
	owns := false
	if active, err := i.drv.PrimaryActive(dev); err == nil && active {
		if p, err := i.drv.PrimaryRetain(dev); err == nil {
			if p == ctx {
				owns = true
			} else if err := i.drv.PrimaryRelease(dev); err != nil {
				logf(LogWarn, "releasing the primary context of device %d: %v", dev, err)
			}
		}
	}
	var canary, canaryID uint64
	if !i.drv.HasCtxID() {
		canary, canaryID = i.canary(ctx)
	}
	// A slot past nslots is invisible to copies until nslots grows; a
	// tombstone may be looked at, so it is filled under its lock, the
	// identity last.
	i.lockSlot(s)
	r := &i.res[s]
	r.ctx, r.id, r.device, r.ownsPrimary, r.dead = ctx, id, dev, owns, false
	slot := &i.slots[s]
	slot.Device, slot.Canary, slot.CanaryID = int32(dev), canary, canaryID
	if i.fast != nil {
		slot.MakeInbox() // the C steady state books its pieces there (queue.go, drainInbox)
	}
	slot.SetIdentity(id, ctx, lane)
	i.unlockSlot(s)
	if s == int(i.nslots.Load()) {
		i.nslots.Store(int32(s + 1))
	}
	i.counters.seen++
	r.serial, r.lane = i.counters.seen, lane
	logf(LogDebug, "new context: device %d, context id %d, lane %d, slot %d", dev, id, lane, s)
	return s, nil
}

// reclaimIdleSlot makes room in a full table: it releases a slot with
// nothing in flight whose context is a primary context the iface retains,
// so that its resources are created again if that context is used later;
// one reset since is dropped without a call on it (the driver tells that
// without touching a dead handle). Contexts the program created cannot be
// proved alive (a
// destroyed handle must not be touched): their slots stay until the
// program releases them. The search goes round from where the last one
// stopped, so the slots are reclaimed in turn rather than the newest one
// again and again. Returns the freed slot, -1 if none. Under mu.
func (i *Iface) reclaimIdleSlot() int {
	n := int(i.nslots.Load())
	for k := range n {
		s := (i.reclaimFrom + k) % n
		r := &i.res[s]
		// A context reset since is dropped by releaseSlot without a call
		// on it (progress drops only the slots it polls, so an idle one
		// would otherwise stay forever); a busy one progress will drop.
		if r.dead || !r.ownsPrimary || i.busy(s) {
			continue
		}
		dev, id := r.device, r.id
		if errs := i.releaseSlot(s); len(errs) == 0 {
			logf(LogDebug, "slot table full: released idle slot %d (device %d, context id %d)", s, dev, id)
			i.reclaimFrom = s + 1
			return s
		}
	}
	return -1
}

// busy says whether slot s has pieces in flight.
func (i *Iface) busy(s int) bool {
	i.lockSlot(s)
	defer i.unlockSlot(s)
	i.drainInbox(s)
	for k := range i.res[s].queues {
		if i.res[s].queues[k].count > 0 {
			return true
		}
	}
	return false
}

// slotSummary says, per device, which contexts hold the slots, for the
// message of a full table. Under mu.
func (i *Iface) slotSummary() string {
	type holders struct {
		primary, created int
		ids              []string
	}
	perDevice := map[int]*holders{}
	var devices []int
	for s := range int(i.nslots.Load()) {
		r := &i.res[s]
		if r.dead {
			continue
		}
		h := perDevice[r.device]
		if h == nil {
			h = &holders{}
			perDevice[r.device] = h
			devices = append(devices, r.device)
		}
		if r.ownsPrimary {
			h.primary++
			continue
		}
		h.created++
		if len(h.ids) < 6 {
			h.ids = append(h.ids, fmt.Sprint(r.id))
		}
	}
	sort.Ints(devices)
	var parts []string
	for _, d := range devices {
		h := perDevice[d]
		p := fmt.Sprintf("device %d: %d slot(s) of contexts the program created", d, h.created)
		if h.created > 0 {
			p += " (context ids " + strings.Join(h.ids, ", ")
			if h.created > len(h.ids) {
				p += ", ..."
			}
			p += ")"
		}
		if h.primary > 0 {
			p += fmt.Sprintf(", %d of its primary context with copies in flight", h.primary)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

// canary makes the generation marker of a context on drivers without
// cuCtxGetId: a 1-byte allocation whose BUFFER_ID (never reused) lives
// exactly as long as the context's incarnation. Without one (allocation
// failed) the slot is keyed by handle alone, as before.
func (i *Iface) canary(ctx cudadrv.Context) (uint64, uint64) {
	p, err := i.drv.MemAlloc(ctx, cudadrv.MemDevice, 1)
	if err != nil {
		logf(LogWarn, "no generation canary for a context (%v): a reset or a reused handle will not be detected there", err)
		return 0, 0
	}
	info, err := i.drv.MemQuery(p, i.ctx.devices)
	if err != nil || info.BufferID == 0 {
		logf(LogWarn, "no BUFFER_ID for the generation canary (%v)", err)
		_ = i.drv.MemFree(ctx, cudadrv.MemDevice, p)
		return 0, 0
	}
	return p, info.BufferID
}

// ReleaseContext releases, now, everything the iface holds in the context
// with id (cucopy_iface_release_context): call it before destroying a
// context the program created. Copies in flight there complete first. An id
// the iface holds nothing for is not an error.
func (i *Iface) ReleaseContext(id uint64) error {
	const api = "iface_release_context"
	i.mu.lock()
	defer i.mu.unlock()
	if i.closed.Load() {
		return errorf(ErrHandle, api, "iface is closed")
	}
	for s := range int(i.nslots.Load()) {
		if r := &i.res[s]; !r.dead && r.id == id {
			if errs := i.releaseSlot(s); len(errs) > 0 {
				return &Error{Status: ErrCUDA, Op: api, Msg: fmt.Sprintf("context id %d", id), Err: errors.Join(errs...)}
			}
		}
	}
	return nil
}

// releaseSlot takes live (or hidden) slot s to a tombstone through the
// driver: it waits for the slot's copies, completes its pieces, destroys
// its streams and events and gives back its primary-context retain. What
// fails to be released stays recorded, the slot stays hidden, and the
// errors are returned for another attempt. If the context's incarnation
// has ended, nothing is called on it: dropSlot. Under mu.
func (i *Iface) releaseSlot(s int) []error {
	r := &i.res[s]
	if r.dead {
		return nil
	}
	slot := &i.slots[s]
	if (r.ownsPrimary || slot.Canary != 0) && i.drv.Gone(i.incarnation(s)) {
		i.dropSlot(s, ErrCanceled)
		return nil
	}
	i.claim(s)
	defer i.unclaim(s)
	i.hideSlot(s)
	pieces := OK // how the pieces in flight ended
	for _, stream := range slot.Stream {
		// A sick context (a sticky error) cannot be synchronized: its
		// copies failed. That is their status, not a release error.
		if stream != 0 {
			if err := i.drv.StreamSynchronize(r.ctx, stream); err != nil && !deinitialized(err) {
				logf(LogInfo, "synchronizing a stream of device %d (context id %d) before release: %v", r.device, r.id, err)
				pieces = ErrCUDA
			}
		}
	}
	i.endQueued(s, pieces, true) // their streams were synchronized
	i.stageRetire(s, true)       // before the primary retain goes
	if errs := i.destroyResources(s); len(errs) > 0 {
		return errs
	}
	i.retireSlot(s, IncarnationReleased)
	i.counters.released++
	return nil
}

// destroyResources destroys hidden slot s's events, streams and canary and
// gives back its primary retain; what fails stays recorded. Under mu and
// the claim.
func (i *Iface) destroyResources(s int) []error {
	r := &i.res[s]
	slot := &i.slots[s]
	var errs []error
	failed := func(what string, err error) bool {
		if err == nil || deinitialized(err) {
			return false
		}
		if sticky(err) { // released by the program's reset of the sick context
			logf(LogInfo, "%s on device %d (context id %d, sick): %v; left to the context's reset", what, r.device, r.id, err)
			return false
		}
		errs = append(errs, fmt.Errorf("%s on device %d: %w", what, r.device, err))
		return true
	}
	if slot.Event != 0 {
		slot.PushFree(slot.Event)
		slot.Event = 0
	}
	free, kept := slot.FreeEvents(), 0
	for _, ev := range free {
		if failed("destroying an event", i.drv.EventDestroy(r.ctx, ev)) {
			free[kept] = ev
			kept++
		}
	}
	slot.KeepFree(kept)
	r.events = kept // the queues are empty: the kept ones are all it still has
	for k, stream := range slot.Stream {
		if stream != 0 && !failed("destroying a stream", i.drv.StreamDestroy(r.ctx, stream)) {
			slot.Stream[k] = 0
		}
	}
	if slot.Canary != 0 && !failed("freeing the generation canary", i.drv.MemFree(r.ctx, cudadrv.MemDevice, slot.Canary)) {
		slot.Canary = 0
	}
	for k, p := range slot.Scratch { // its stream is gone: nothing uses it
		if p != 0 && !failed("freeing a 2-D scratch buffer", i.drv.MemFree(r.ctx, cudadrv.MemDevice, p)) {
			slot.Scratch[k], slot.ScratchSize[k] = 0, 0
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if r.ownsPrimary && failed("releasing the primary context", i.drv.PrimaryRelease(r.device)) {
		return errs
	}
	return nil
}

// dropSlot takes slot s of a context whose incarnation ended to a
// tombstone without a single call on the context: its pieces in flight
// fail with st, its streams and events die with the context. Under mu.
func (i *Iface) dropSlot(s int, st Status) {
	i.claim(s)
	defer i.unclaim(s)
	r := &i.res[s]
	i.hideSlot(s)
	pieces := i.endQueued(s, st, false)
	i.stageRetire(s, false)
	logf(LogInfo, "context id %d of device %d ended (reset, or the driver deinitialized): %d piece(s) in flight canceled, its streams and events dropped without driver calls", r.id, r.device, pieces)
	if r.ownsPrimary {
		// Allowed after a reset: "it is safe ... to call cuDevicePrimaryCtxRelease() even after resetting".
		if err := i.drv.PrimaryRelease(r.device); err != nil && !deinitialized(err) {
			logf(LogInfo, "releasing the primary context of device %d after its reset: %v", r.device, err)
		}
	}
	i.retireSlot(s, IncarnationReset)
	i.counters.reset++
}

// dropEnded drops slot s, whose incarnation inc progress found ended,
// unless it was dropped (or reused) meanwhile.
func (i *Iface) dropEnded(s int, inc cudadrv.Incarnation) {
	i.mu.lock()
	defer i.mu.unlock()
	if !i.res[s].dead && i.incarnation(s) == inc {
		i.dropSlot(s, ErrCanceled)
	}
}

// hideSlot takes slot s away from copies: no lookup matches it any more,
// and once the short copies running on it without its lock are done, only
// the holder of mu touches it. No later piece joins one of its queued
// pieces. Under mu and the claim.
func (i *Iface) hideSlot(s int) {
	r := &i.res[s]
	slot := &i.slots[s]
	i.lockSlot(s)
	slot.SetIdentity(0, 0, 0)
	i.drainInbox(s) // hidden: the C steady state queues no more there
	for k := range r.queues {
		slot.Queried[k] = r.queues[k].issued
	}
	i.unlockSlot(s)
	if i.multi {
		slot.WaitUsers()
	}
}

// endQueued pops every piece of hidden slot s, ending each with st, and
// returns how many there were; keepEvents keeps their events for
// destruction (a release), else they die with the context (a drop). Under
// mu and the claim.
func (i *Iface) endQueued(s int, st Status, keepEvents bool) int {
	r := &i.res[s]
	pieces := 0
	i.lockSlot(s) // flushes read the queues' counters under it
	for k := range r.queues {
		q := &r.queues[k]
		for q.count > 0 {
			ev, op := q.pop()
			if keepEvents {
				i.slots[s].PushFree(ev)
			}
			if op.pieceDone(st) {
				i.complete(op)
			}
			pieces++
		}
	}
	i.unlockSlot(s)
	return pieces
}

// retireSlot turns hidden slot s into a tombstone that addSlot reuses. Its
// queues' counters stay, so the flushes and sequence numbers that named its
// pieces stay settled; its counts go to the statistics as an ended
// incarnation. Under mu and the claim.
func (i *Iface) retireSlot(s int, how IncarnationState) {
	r := &i.res[s]
	i.lockSlot(s)
	i.retireCounts(s, how)
	slot := &i.slots[s]
	slot.Stream, slot.Event = [cudadrv.NumKinds]cudadrv.Stream{}, 0
	slot.Peer, slot.NPeers = [cudadrv.MaxPeers]cudadrv.Context{}, 0
	slot.Canary, slot.CanaryID, slot.Device, slot.Fence = 0, 0, 0, 0
	slot.Scratch, slot.ScratchSize, slot.ScratchOff = [2]uint64{}, [2]uint64{}, 0 // a dropped context took its memory
	r.ctx, r.id, r.ownsPrimary, r.dead = 0, 0, false, true
	r.events = 0
	slot.KeepFree(0)
	for k := range r.queues {
		r.queues[k] = r.queues[k].emptied()
	}
	i.unlockSlot(s)
	i.completeFlushes()
}
