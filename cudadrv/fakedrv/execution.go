// SPDX-License-Identifier: BSD-3-Clause

package fakedrv

// Execution: the work streams queue, which runs only when a test says so
// (Run, Step, RunNewestFirst), or when a stream is synchronized or
// destroyed. Work runs in stream order, and after the work it waits for
// (StreamWaitEvent), whatever order a test asks for.

import (
	"golang.org/x/sys/unix"

	"github.com/cucopy/cucopy/cudadrv"
)

type work struct {
	stream cudadrv.Stream
	run    func()
	events []cudadrv.Event
	fds    []int
	after  []*work // StreamWaitEvent: work that runs before this one
	done   bool
}

type event struct {
	owner
	item *work // the work item the last record waits for; nil when complete
}

// Run executes all queued work; it returns how many items ran.
func (d *Driver) Run() int { return d.Step(-1) }

// Step executes the n oldest queued work items of all streams (all when n < 0).
func (d *Driver) Step(n int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n < 0 || n > len(d.pending) {
		n = len(d.pending)
	}
	for _, w := range d.pending[:n:n] {
		d.runThrough(w) // what it waits for is older: already run
	}
	d.compact()
	return n
}

// RunNewestFirst executes all queued work, the newest item first, as far
// as stream order and stream waits allow: a test sees what a missing
// dependency across streams does (a copy reading what an older copy on
// another stream has not written yet).
func (d *Driver) RunNewestFirst() {
	d.mu.Lock()
	defer d.mu.Unlock()
	items := append([]*work(nil), d.pending...)
	for k := len(items) - 1; k >= 0; k-- {
		d.runThrough(items[k])
	}
	d.compact()
}

// runThrough executes w after what must run before it: the older work of
// its stream, and the work it waits for. Only older work comes first, so
// the recursion ends.
func (d *Driver) runThrough(w *work) {
	if w.done {
		return
	}
	for _, p := range d.pending {
		if p == w {
			break
		}
		if p.stream == w.stream {
			d.runThrough(p)
		}
	}
	for _, dep := range w.after {
		d.runThrough(dep)
	}
	d.execute(w)
}

// compact drops executed work from the queue.
func (d *Driver) compact() {
	kept := d.pending[:0]
	for _, w := range d.pending {
		if !w.done {
			kept = append(kept, w)
		}
	}
	clear(d.pending[len(kept):])
	d.pending = kept
}

// Pending is the number of queued work items.
func (d *Driver) Pending() int { d.mu.Lock(); defer d.mu.Unlock(); return len(d.pending) }

func (d *Driver) execute(w *work) {
	w.done = true
	w.run()
	for _, ev := range w.events {
		if e := d.events[ev]; e != nil && e.item == w {
			e.item = nil
		}
	}
	var one = [8]byte{1}
	for _, fd := range w.fds {
		_, _ = unix.Write(fd, one[:]) // EAGAIN: already readable
	}
}

// syncStream executes the queued work of one stream (and what it waits for).
func (d *Driver) syncStream(s cudadrv.Stream) {
	var run []*work
	for _, w := range d.pending {
		if w.stream == s {
			run = append(run, w)
		}
	}
	for _, w := range run {
		d.runThrough(w)
	}
	d.compact()
}

func (d *Driver) last(s cudadrv.Stream) *work {
	for i := len(d.pending) - 1; i >= 0; i-- {
		if d.pending[i].stream == s {
			return d.pending[i]
		}
	}
	return nil
}

// OnCopy makes every later Copy call run f first, outside the driver's
// lock (nil: none): a test interleaves progress or a release with the
// pieces of a copy being issued.
func (d *Driver) OnCopy(f func()) { d.mu.Lock(); d.onCopy = f; d.mu.Unlock() }

// OnDetached makes every later detached enqueue (copy.go, step 8: a
// zcopy piece with pageable memory and CopyLock) run f where the real
// driver would block, without the slot's lock or the driver's (nil: none).
func (d *Driver) OnDetached(f func()) { d.mu.Lock(); d.onDetached = f; d.mu.Unlock() }

// OnDetachedIssued makes every later detached enqueue run f once its copy
// is issued and its event recorded, before it takes the slot's lock again
// to be booked (nil: none): another thread's piece booked meanwhile sits
// before it in the queue although recorded after it.
func (d *Driver) OnDetachedIssued(f func()) { d.mu.Lock(); d.onDetachedIssued = f; d.mu.Unlock() }
