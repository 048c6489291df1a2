// SPDX-License-Identifier: BSD-3-Clause

package cudadrv

// The slot: one CUDA context's resources as the copy path reads them
// (struct cd_slot), its lock word, and the stream kinds it holds.

/*
#include "cd_shim.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Stream kinds: the zcopy directions (first NumAsyncKinds) and the short
// stream (CD_KIND_*).
const (
	KindH2D       = C.CD_KIND_H2D
	KindD2H       = C.CD_KIND_D2H
	KindD2D       = C.CD_KIND_D2D  // both buffers in one context
	KindPeer      = C.CD_KIND_PEER // device buffers of two different contexts
	NumAsyncKinds = C.CD_NUM_ASYNC_KINDS
	KindShort     = C.CD_KIND_SHORT
	NumKinds      = C.CD_NUM_KINDS
	MaxPeers      = C.CD_MAX_PEERS
)

// KindName names a stream kind for messages and statistics.
func KindName(kind int) string {
	switch kind {
	case KindH2D:
		return "h2d"
	case KindD2H:
		return "d2h"
	case KindD2D:
		return "d2d"
	case KindPeer:
		return "peer"
	case KindShort:
		return "short"
	}
	return fmt.Sprintf("kind%d", kind)
}

// Slot is one CUDA context's resources as the copy hot path needs them. It
// mirrors struct cd_slot (layout.go checks the layout). The core owns and
// writes it; Copy reads it during a call, as the copy protocol (copy.go)
// says: on single-thread ifaces the core writes it only between calls; on
// multi-thread ifaces Copy matches CtxID, Ctx and Lane without a lock (the
// core writes them with SetIdentity) and reads the rest under the slot's
// lock word (CopyLock).
type Slot struct {
	CtxID  uint64
	Ctx    Context
	Stream [NumKinds]Stream
	Event  Event // the next free event, 0 if none
	Peer   [MaxPeers]Context
	// Drivers without cuCtxGetId: a 1-byte allocation in the context and its
	// BUFFER_ID, the context's generation (see Incarnation).
	Canary   uint64
	CanaryID uint64
	Device   int32
	NPeers   int32
	lock     int32 // see Lock
	users    int32 // short copies running on the slot's streams without the lock
	// Lane: multi-thread ifaces keep one slot per (context, lane), and an
	// endpoint's copies use its lane (CopyOp.Lane). Set with SetIdentity.
	Lane int32
	// Fence: bit k set, Stream[k] must wait for the iface's fence before
	// its next copy (CopyNeedFence). Written under the slot's lock.
	Fence uint32
	// Queried[k]: the entries of the context's queue k, by sequence number
	// from 1, that progress has queried: a piece never re-records their
	// events (CopyReuse), since progress may pop them.
	Queried [NumAsyncKinds]uint64
	// Issued[k]: the newest entry of the context's queue k, by sequence
	// number (written under the slot's lock when a piece is booked): a
	// piece joins only that entry (CopyReuse), so that every entry of a
	// queue is last recorded after every earlier one's.
	Issued [NumAsyncKinds]uint64
	// Scratch[k], ScratchSize[k] (k KindH2D, KindD2H): the device buffer of
	// the pack path of 2-D copies on Stream[k] (copy.go, 2-D pieces), 0
	// until made; bit k of ScratchOff: none could be made, 2-D copies of
	// that kind are plain ones. Written by the core under the slot's lock.
	Scratch     [2]uint64
	ScratchSize [2]uint64
	ScratchOff  uint32
	_           uint32
	// Counts[k]: the statistics of direction k (core's stats.go): added to
	// by the copy path, Go's and the C steady state's, with atomics.
	Counts [NumAsyncKinds]Counts
	// The free events besides Event, a stack in C memory (PushFree,
	// PopFree), and the inbox of the pieces the C steady state queued
	// (Drain). Both under the slot's lock on multi-thread ifaces.
	freeEv  *Event
	nfree   int32
	freeCap int32
	inbox   *inbox
}

// ReserveFree makes room on the free stack for n events: the core keeps
// it at least as large as the events the slot made (a cgo call, cold:
// when the slot makes one), so that a push, Go's or the C steady state's,
// never needs to grow it.
func (s *Slot) ReserveFree(n int) {
	if int32(n) <= s.freeCap {
		return
	}
	if C.cd_slot_grow_free((*C.cd_slot)(unsafe.Pointer(s)), C.int32_t(max(n, 2*int(s.freeCap), 16))) != 0 {
		panic("cucopy: out of memory for a slot's free events")
	}
}

// PushFree puts a free event on the slot's stack.
func (s *Slot) PushFree(ev Event) {
	if s.nfree == s.freeCap {
		s.ReserveFree(int(s.nfree) + 1) // not reached while the core keeps ReserveFree's rule
	}
	unsafe.Slice(s.freeEv, s.freeCap)[s.nfree] = ev
	s.nfree++
}

// PopFree takes a free event off the stack, 0 if none.
func (s *Slot) PopFree() Event {
	if s.nfree == 0 {
		return 0
	}
	s.nfree--
	return unsafe.Slice(s.freeEv, s.freeCap)[s.nfree]
}

// FreeEvents is the stack, oldest first, until the next push or pop;
// KeepFree(n) keeps its first n (after the caller compacted it in place).
func (s *Slot) FreeEvents() []Event { return unsafe.Slice(s.freeEv, s.nfree) }
func (s *Slot) KeepFree(n int)      { s.nfree = int32(n) }

// MakeInbox gives the slot its inbox (cold: when the core makes the
// slot's resources); without one the C steady state issues nothing there.
func (s *Slot) MakeInbox() {
	if C.cd_slot_make_inbox((*C.cd_slot)(unsafe.Pointer(s))) != 0 {
		panic("cucopy: out of memory for a slot's inbox")
	}
}

// Booking is a piece the C steady state queued on the slot (struct
// cd_booking), never detached: its event, its completion, its queue (kind).
type Booking struct {
	Event Event
	Comp  uintptr
	Kind  int32
	_     int32
}

// inbox mirrors struct cd_inbox.
type inbox struct {
	head, count int32
	b           [C.CD_INBOX_CAP]Booking
}

// Drain hands the slot's bookings to book, oldest first, and empties the
// inbox.
func (s *Slot) Drain(book func(b *Booking)) {
	in := s.inbox
	if in == nil {
		return
	}
	for in.count > 0 {
		book(&in.b[in.head])
		in.head = (in.head + 1) % C.CD_INBOX_CAP
		in.count--
	}
}

// Lock takes the slot's lock word, shared with cd_copy (C atomics on the
// same word): it guards the slot and its context's queues and event pool on
// multi-thread ifaces. Copy hands it over held on CopyQueued and CopyJoined.
func (s *Slot) Lock() {
	for spins := 0; !s.TryLock(); spins++ {
		if spins >= 64 {
			runtime.Gosched()
		}
	}
}

// TryLock takes the slot's lock word if it is free.
func (s *Slot) TryLock() bool {
	return atomic.LoadInt32(&s.lock) == 0 && atomic.CompareAndSwapInt32(&s.lock, 0, 1)
}

// Unlock releases the slot's lock word.
func (s *Slot) Unlock() { atomic.StoreInt32(&s.lock, 0) }

// Identity is the context and lane the slot belongs to (context 0, 0 for
// none), read as a lock-free lookup does.
func (s *Slot) Identity() (uint64, Context, int32) {
	return atomic.LoadUint64(&s.CtxID), Context(atomic.LoadUintptr((*uintptr)(&s.Ctx))), atomic.LoadInt32(&s.Lane)
}

// SetIdentity gives the slot to a context's lane, or with (0, 0, 0) hides
// it from every lookup. On multi-thread ifaces the caller holds the slot's
// lock.
func (s *Slot) SetIdentity(id uint64, ctx Context, lane int32) {
	atomic.StoreInt32(&s.Lane, lane)
	atomic.StoreUint64(&s.CtxID, id)
	atomic.StoreUintptr((*uintptr)(&s.Ctx), uintptr(ctx))
}

// AddUser and DoneUser count a copy that runs on the slot without its lock:
// a short copy (fake drivers; cd_copy does the same in C) and a detached
// zcopy piece, whose caller counts itself out (copy.go, step 8).
func (s *Slot) AddUser()  { atomic.AddInt32(&s.users, 1) }
func (s *Slot) DoneUser() { atomic.AddInt32(&s.users, -1) }

// WaitUsers waits until no copy runs on the slot unlocked: a slot hidden from
// lookups (SetIdentity(0, 0, 0)) then has no copy in flight outside its queues.
func (s *Slot) WaitUsers() {
	for atomic.LoadInt32(&s.users) != 0 {
		runtime.Gosched()
	}
}

// LoadPrimary and StorePrimary read and write an entry of the primary-context
// table passed to Copy: multi-thread ifaces change it while copies read it.
func LoadPrimary(primary []Context, dev int) Context {
	return Context(atomic.LoadUintptr((*uintptr)(&primary[dev])))
}

func StorePrimary(primary []Context, dev int, ctx Context) {
	atomic.StoreUintptr((*uintptr)(&primary[dev]), uintptr(ctx))
}
