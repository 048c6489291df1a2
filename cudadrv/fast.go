// SPDX-License-Identifier: BSD-3-Clause

package cudadrv

// The C steady state's view of an iface (struct cd_fast_iface, cd_fast.c):
// the slot and primary tables in C memory, so that the C ABI can run a copy
// without entering Go, and the words that let core close the iface under
// such calls.

/*
#include <stdlib.h>
#include "cd_shim.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// FastIface mirrors struct cd_fast_iface (layout.go checks the layout). It
// lives in C memory, never freed: a C ABI call may read it after its iface
// closed (Open tells it not to go on).
type FastIface struct {
	slots      *Slot
	primary    *Context
	queries    *SlotQuery
	NSlots     atomic.Int32 // slots in use: the core's count, read by copies
	cap        int32
	ndevices   int32
	multi      int32
	open       atomic.Int32
	runFlags   uint32
	runs       int32
	_          int32
	stageMin   uint64
	packBelow  uint64
	ctxSerial  uint64
	stageSmall uint64
	users      [FastLanes]struct {
		n atomic.Int32
		_ [60]byte
	}
}

// FastLanes is how many lanes the C steady state counts its calls in.
const FastLanes = C.CD_FAST_LANES

// NewFastIface makes an iface's record with a slot table of capacity slots
// and a primary table of ndevices entries, all zero and closed to the C
// steady state; Retire gives the tables back.
func NewFastIface(capacity, ndevices int, multi, runs bool, runFlags uint32, stageMin, stageSmall, packBelow, ctxSerial uint64) *FastIface {
	p := C.cd_fast_iface_new(C.int32_t(capacity), C.int32_t(ndevices))
	if p == nil {
		panic("cucopy: out of memory for an iface's slot table")
	}
	f := (*FastIface)(unsafe.Pointer(p))
	if multi {
		f.multi = 1
	}
	if runs {
		f.runs = 1
	}
	f.runFlags = runFlags
	f.stageMin, f.stageSmall, f.packBelow, f.ctxSerial = stageMin, stageSmall, packBelow, ctxSerial
	return f
}

// Slots is the slot table.
func (f *FastIface) Slots() []Slot { return unsafe.Slice(f.slots, int(f.cap)) }

// Queries is the per-slot progress queries (QuerySlots' slots).
func (f *FastIface) Queries() []SlotQuery { return unsafe.Slice(f.queries, int(f.cap)) }

// Primary is the primary table (LoadPrimary, StorePrimary).
func (f *FastIface) Primary() []Context { return unsafe.Slice(f.primary, int(f.ndevices)) }

// Open lets the C ABI run copies of the iface in C (a native driver only:
// the C steady state calls cd_copy).
func (f *FastIface) Open() { f.open.Store(1) }

// Shut stops new C steady-state calls and waits for those running to
// leave; Open undoes it. A call stuck in the driver (a copy that never
// ends) holds Shut, and so the iface's close, as it would hold a copy
// through Go.
func (f *FastIface) Shut() {
	f.open.Store(0)
	for k := range f.users {
		for f.users[k].n.Load() != 0 {
			runtime.Gosched()
		}
	}
}

// Retire hands the record's tables (with their slots' buffers) to
// FreeRetired: for a cleanup, which runs at a time of the garbage
// collector's choosing and so makes no cgo call (a program measuring its
// calls into C would see it).
func (f *FastIface) Retire() { retire(func() { f.freeTables() }) }

// RetireSlotBuffers hands the free stacks and inboxes of slots in Go memory
// (an iface on a Go fake) to FreeRetired.
func RetireSlotBuffers(slots []Slot) {
	retire(func() {
		if len(slots) > 0 {
			C.cd_slots_free_buffers((*C.cd_slot)(unsafe.Pointer(&slots[0])), C.int32_t(len(slots)))
		}
	})
}

// freeTables shuts the record and frees its tables; the record stays,
// closed.
func (f *FastIface) freeTables() {
	f.Shut()
	C.cd_fast_iface_free_tables((*C.cd_fast_iface)(unsafe.Pointer(f)))
}

// retired is the C memory of ifaces the garbage collector found
// unreachable, freed by the next FreeRetired.
var retired struct {
	mu    sync.Mutex
	frees []func()
}

func retire(free func()) {
	retired.mu.Lock()
	retired.frees = append(retired.frees, free)
	retired.mu.Unlock()
}

// FreeRetired frees what Retire and RetireSlotBuffers handed over: a cold
// call (the core makes it when it opens an iface).
func FreeRetired() {
	retired.mu.Lock()
	frees := retired.frees
	retired.frees = nil
	retired.mu.Unlock()
	for _, free := range frees {
		free()
	}
}

// Native says whether drv runs on the CUDA driver through cudadrv's C side
// (the C steady state calls it directly), not a fake written in Go.
func Native(drv Interface) bool {
	_, ok := drv.(*driver)
	return ok
}

// Counts mirrors struct cd_counts: one direction's statistics of a slot.
type Counts struct {
	Operations, Pieces, Bytes atomic.Uint64
}
