// SPDX-License-Identifier: BSD-3-Clause

package core

import "github.com/cucopy/cucopy/cudadrv"

// Reservation: a zcopy of several pieces that could run out of events
// part-way asks the driver layer first where each piece and its run would
// go (cudadrv.CopyPlan: classified, nothing issued), counts the events the
// operation needs in each context, and makes sure they exist before it
// issues anything. An operation that needs more than max_events in one
// context is refused at once (never fits); one that does not fit now gets
// CUCOPY_ERR_NO_RESOURCE with nothing issued, so no copy is done twice.
//
// Planning classifies every piece a second time, so it runs only when an
// operation of np pieces (which needs at most np events in a context)
// could run out: max_events is below np, or a context of the iface has
// created events within np of max_events (maxCreated, the most any has
// created; contexts create events only when more pieces are in flight
// than they have free ones). Below that, every context can create what the
// operation may need.
//
// On a multi-thread iface the events made sure of are not set aside:
// another thread issuing on the same (context, lane) at the same moment
// may still take them, and the operation then meets the limit part-way as
// without the reservation (it waits for its issued pieces and returns
// NO_RESOURCE). Threads with their own endpoints use their own lanes.

// mayRunOut says whether an operation of np pieces should be planned.
func (i *Iface) mayRunOut(np int) bool {
	return np > 1 && int(i.maxCreated.Load())+np > int(i.params.MaxEvents)
}

// slotNeed is how many events an operation needs in one slot.
type slotNeed struct {
	slot int32
	id   uint64
	n    int
}

// reserve plans pieces (an operation's, in req's lane) and makes sure of
// the events they need: nil, or the error the operation fails with before
// anything was issued. b's request is overwritten.
func (i *Iface) reserve(api string, b *issueBuf, pieces []cudadrv.Piece, lane int32) error {
	req := &b.req
	var needs [MaxIOV]slotNeed
	nneeds := 0
	lastSlot, lastKind := int32(-1), int32(-1)
	for k := 0; k < len(pieces); {
		p := &pieces[k]
		*req = pieceRequest(p, lane, i.runFlags|cudadrv.CopyPlan)
		var more []cudadrv.Piece
		if i.runs {
			more = pieces[k+1:]
		}
		st, err := i.issuePiece(api, b, nil, false, more)
		if err != nil {
			return err
		}
		k += 1 + int(req.Taken)
		if st != cudadrv.CopyPlanned {
			continue // a CPU copy or a staged one: no event
		}
		// A run right after one on the same stream joins its event (as
		// Zcopy issues it), so it needs none of its own.
		if req.Slot == lastSlot && req.Kind == lastKind {
			continue
		}
		lastSlot, lastKind = req.Slot, req.Kind
		j := 0
		for j < nneeds && needs[j].slot != req.Slot {
			j++
		}
		if j == nneeds {
			needs[j] = slotNeed{slot: req.Slot, id: req.CtxID}
			nneeds++
		}
		needs[j].n++
	}
	i.mu.lock()
	defer i.mu.unlock()
	for _, need := range needs[:nneeds] {
		if err := i.makeSureOfEvents(api, need); err != nil {
			return err
		}
	}
	return nil
}

// makeSureOfEvents gives slot need.slot at least need.n free events, or
// says why it cannot; under mu.
func (i *Iface) makeSureOfEvents(api string, need slotNeed) error {
	s := int(need.slot)
	r := &i.res[s]
	if id, _, _ := i.slots[s].Identity(); id != need.id || r.dead {
		return nil // released meanwhile: the operation starts a new slot there
	}
	if need.n > int(i.params.MaxEvents) {
		return errorf(ErrInvalid, api, "the operation needs %d events in CUDA context id %d, more than max_events (%d): its iov runs there in %d separate stretches; raise max_events (CUCOPY_MAX_EVENTS) or split the iov",
			need.n, r.id, i.params.MaxEvents, need.n)
	}
	for {
		i.lockSlot(s)
		have := len(i.slots[s].FreeEvents())
		if i.slots[s].Event != 0 {
			have++
		}
		i.unlockSlot(s)
		if have >= need.n {
			return nil
		}
		if err := i.createEvent(api, s); err != nil {
			return err // NO_RESOURCE: all max_events are in flight there
		}
	}
}

// noteEvents keeps maxCreated (mayRunOut) after slot s created an event;
// under mu.
func (i *Iface) noteEvents(s int) {
	if n := int32(i.res[s].events); n > i.maxCreated.Load() {
		i.maxCreated.Store(n)
	}
}
