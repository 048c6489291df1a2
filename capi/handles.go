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
	return uint64(t.gen)<<32 | uint64(idx+1)
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
	t.slots[idx].Store(nil)
	t.free = append(t.free, idx)
	return true
}

// removeIf forgets every handle whose object matches (e.g. the endpoints of
// an iface being closed). Cold path: a scan of the table.
func (t *handleTable[T]) removeIf(match func(*T) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for idx := uint32(0); idx < t.used; idx++ {
		if e := t.slots[idx].Load(); e != nil && match(e.obj) {
			t.slots[idx].Store(nil)
			t.free = append(t.free, idx)
		}
	}
}
