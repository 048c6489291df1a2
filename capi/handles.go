// SPDX-License-Identifier: BSD-3-Clause

// The handle tables: the opaque handles C holds, mapped to Go objects.

package main

import (
	"sync"
	"sync/atomic"
)

// handleTable maps the opaque handles given to C to Go objects. A handle is
// generation<<32 | (index+1): never 0, and a stale handle (its object
// removed, the index reused) fails the generation check. Lookups are
// lock-free; only adding and removing take the mutex.
type handleTable[T any] struct {
	kind  string
	slots []atomic.Pointer[handleEntry[T]]
	// mirror, if set, keeps a C copy of the table for the C steady state
	// (capi/fast.c): called under mu with each handle added, and with h 0
	// (obj nil) when index idx stops naming a usable object: removed, or
	// poisoned by an internal error.
	mirror func(idx uint32, h uint64, obj *T)

	mu   sync.Mutex
	free []uint32
	used uint32
	gen  uint32
}

type handleEntry[T any] struct {
	obj      *T
	gen      uint32
	poisoned atomic.Bool
}

func newHandleTable[T any](kind string, capacity int) *handleTable[T] {
	return &handleTable[T]{kind: kind, slots: make([]atomic.Pointer[handleEntry[T]], capacity)}
}

// add returns a handle for obj, or 0 when the table is full.
func (t *handleTable[T]) add(obj *T) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var idx uint32
	switch {
	case len(t.free) > 0:
		idx = t.free[len(t.free)-1]
		t.free = t.free[:len(t.free)-1]
	case int(t.used) < len(t.slots):
		idx = t.used
		t.used++
	default:
		return 0
	}
	t.gen++
	if t.gen == 0 {
		t.gen = 1
	}
	t.slots[idx].Store(&handleEntry[T]{obj: obj, gen: t.gen})
	h := uint64(t.gen)<<32 | uint64(idx+1)
	if t.mirror != nil {
		t.mirror(idx, h, obj)
	}
	return h
}

// entry finds a live handle's entry, or nil.
func (t *handleTable[T]) entry(h uint64) *handleEntry[T] {
	idx := uint32(h) - 1
	if uint32(h) == 0 || int(idx) >= len(t.slots) {
		return nil
	}
	e := t.slots[idx].Load()
	if e == nil || e.gen != uint32(h>>32) {
		return nil
	}
	return e
}

// remove forgets a handle; it reports whether it was live.
func (t *handleTable[T]) remove(h uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(h)
	if e == nil {
		return false
	}
	idx := uint32(h) - 1
	t.unmirror(idx)
	t.slots[idx].Store(nil)
	t.free = append(t.free, idx)
	return true
}

// unmirror takes index idx out of the C mirror; under mu.
func (t *handleTable[T]) unmirror(idx uint32) {
	if t.mirror != nil {
		t.mirror(idx, 0, nil)
	}
}

// poison marks handle h's entry e unusable, in the C mirror too.
func (t *handleTable[T]) poison(h uint64, e *handleEntry[T]) {
	e.poisoned.Store(true)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.entry(h) == e {
		t.unmirror(uint32(h) - 1)
	}
}

// unmirrorIf takes the handles whose object matches out of the C mirror
// (e.g. memory handles whose memory was freed): they stay handles, and
// their calls go through Go, which reports what is wrong with them.
func (t *handleTable[T]) unmirrorIf(match func(*T) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for idx := uint32(0); idx < t.used; idx++ {
		if e := t.slots[idx].Load(); e != nil && match(e.obj) {
			t.unmirror(idx)
		}
	}
}

// removeIf forgets every handle whose object matches (e.g. the endpoints of
// an iface being closed). Cold path: a scan of the table.
func (t *handleTable[T]) removeIf(match func(*T) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for idx := uint32(0); idx < t.used; idx++ {
		if e := t.slots[idx].Load(); e != nil && match(e.obj) {
			t.unmirror(idx)
			t.slots[idx].Store(nil)
			t.free = append(t.free, idx)
		}
	}
}
