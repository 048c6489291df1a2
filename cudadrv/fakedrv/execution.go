// SPDX-License-Identifier: BSD-3-Clause

package fakedrv

// Execution: the work streams queue, which runs only when a test says so
// (Run, Step), or when a stream is synchronized or destroyed.

import (
	"golang.org/x/sys/unix"

	"github.com/cucopy/cucopy/cudadrv"
)

type work struct {
	stream cudadrv.Stream
	run    func()
	events []cudadrv.Event
	fds    []int
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
	items := d.pending[:n:n]
	d.pending = d.pending[n:]
	for _, w := range items {
		d.execute(w)
	}
	return n
}

// Pending is the number of queued work items.
func (d *Driver) Pending() int { d.mu.Lock(); defer d.mu.Unlock(); return len(d.pending) }

func (d *Driver) execute(w *work) {
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

// syncStream executes the queued work of one stream.
func (d *Driver) syncStream(s cudadrv.Stream) {
	kept := d.pending[:0]
	var run []*work
	for _, w := range d.pending {
		if w.stream == s {
			run = append(run, w)
		} else {
			kept = append(kept, w)
		}
	}
	d.pending = kept
	for _, w := range run {
		d.execute(w)
	}
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
