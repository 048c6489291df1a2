// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"fmt"
	"os"
	"runtime/metrics"
	"strings"
	"sync/atomic"

	"github.com/cucopy/cucopy/cudadrv"
)

// Statistics (cucopy_iface_stats, CUCOPY_STATS): always on, cumulative for
// the iface's life. The copy path adds to counters of the slot it used, per
// direction (atomics on the slot's own cache lines: threads on other
// contexts and lanes do not share them), and host copies to the iface's
// CPU counters; an operation is counted once, under the direction of its
// first piece. A slot's counters are folded into its device's totals when
// it is retired, so released and reset contexts' counts stay. The rare
// events (NO_RESOURCE, flush, fence, contexts) are iface atomics.

// Directions of the statistics (CUCOPY_DIR_*): the four GPU directions are
// cudadrv's zcopy kinds; DirHost is a copy on the CPU.
const (
	DirH2D  = cudadrv.KindH2D
	DirD2H  = cudadrv.KindD2H
	DirD2D  = cudadrv.KindD2D
	DirPeer = cudadrv.KindPeer
	DirHost = cudadrv.NumAsyncKinds
	NumDirs = DirHost + 1
	gpuDirs = cudadrv.NumAsyncKinds
)

// DirStats counts one direction: operations (counted under their first
// piece's direction), pieces (contiguous copies: iov entries and short
// copies) and bytes.
type DirStats struct {
	Operations, Pieces, Bytes uint64
}

func (s *DirStats) add(o DirStats) {
	s.Operations += o.Operations
	s.Pieces += o.Pieces
	s.Bytes += o.Bytes
}

// Stats is what cucopy_iface_stats reports.
type Stats struct {
	Dir              [NumDirs]DirStats
	Device           [][NumDirs]DirStats // per device ordinal; DirHost unused
	NoResource       uint64              // CUCOPY_ERR_NO_RESOURCE returns
	Flushes, Fences  uint64
	ContextsSeen     uint64 // slots given to a (context, lane)
	ContextsReleased uint64 // released: cucopy_iface_release_context, close, reclaim
	ContextsReset    uint64 // found ended (reset, driver deinitialized) and dropped
}

// dirCounters is DirStats as the copy path adds to it.
type dirCounters struct {
	operations, pieces, bytes atomic.Uint64
}

func (c *dirCounters) load() DirStats {
	return DirStats{c.operations.Load(), c.pieces.Load(), c.bytes.Load()}
}

// take reads and zeroes the counters, atomically each: a short copy ends
// (and counts itself) after it stopped being a user of its slot, so its
// count may come after the slot was retired; it then goes to the slot's
// next life rather than being lost or racing.
func (c *dirCounters) take() DirStats {
	return DirStats{c.operations.Swap(0), c.pieces.Swap(0), c.bytes.Swap(0)}
}

// ifaceCounters are the iface's own counters.
type ifaceCounters struct {
	cpu                         dirCounters
	noResource, flushes, fences atomic.Uint64
	seen, released, reset       uint64              // under mu
	retired                     [][gpuDirs]DirStats // per device: retired slots' counts; under mu
}

// countCopy adds one copy piece to the statistics; first says it is its
// operation's first.
func (i *Iface) countCopy(req *cudadrv.CopyOp, first bool, run []cudadrv.Piece) {
	c := &i.counters.cpu
	if req.Slot >= 0 {
		c = &i.res[req.Slot].counters[req.Dir]
	}
	if first {
		c.operations.Add(1)
	}
	bytes := req.Len
	for _, p := range run {
		bytes += p.Len
	}
	c.pieces.Add(uint64(1 + len(run)))
	c.bytes.Add(bytes)
}

// countNoResource counts a NO_RESOURCE answer and passes err on.
func (i *Iface) countNoResource(err error) error {
	if StatusOf(err) == ErrNoResource {
		i.counters.noResource.Add(1)
	}
	return err
}

// retireCounts folds slot s's counters into its device's totals; under mu.
func (i *Iface) retireCounts(s int) {
	r := &i.res[s]
	for k := range r.counters {
		taken := r.counters[k].take()
		if r.device >= 0 && r.device < len(i.counters.retired) {
			i.counters.retired[r.device][k].add(taken)
		}
	}
}

// Stats reads the counters. Copies running meanwhile may or may not be in
// them.
func (i *Iface) Stats() Stats {
	i.mu.lock()
	defer i.mu.unlock()
	return i.stats()
}

// stats is Stats under mu.
func (i *Iface) stats() Stats {
	st := Stats{
		Device:           make([][NumDirs]DirStats, len(i.counters.retired)),
		NoResource:       i.counters.noResource.Load(),
		Flushes:          i.counters.flushes.Load(),
		Fences:           i.counters.fences.Load(),
		ContextsSeen:     i.counters.seen,
		ContextsReleased: i.counters.released,
		ContextsReset:    i.counters.reset,
	}
	for d, dirs := range i.counters.retired {
		for k := range dirs {
			st.Device[d][k] = dirs[k]
		}
	}
	for s := range int(i.nslots.Load()) {
		r := &i.res[s]
		if r.dead || r.device < 0 || r.device >= len(st.Device) {
			continue
		}
		for k := range r.counters {
			st.Device[r.device][k].add(r.counters[k].load())
		}
	}
	for d := range st.Device {
		for k := range st.Device[d] {
			st.Dir[k].add(st.Device[d][k])
		}
	}
	st.Dir[DirHost] = i.counters.cpu.load()
	return st
}

// DirName names a direction of the statistics.
func DirName(k int) string {
	if k == DirHost {
		return "host"
	}
	return cudadrv.KindName(k)
}

// printStats is CUCOPY_STATS at close: Stats, per device and direction;
// under mu.
func (i *Iface) printStats() {
	st := i.stats()
	var b strings.Builder
	fmt.Fprintf(&b, "cucopy stats: iface closed; %d NO_RESOURCE, %d flushes, %d fences; contexts: %d seen, %d released, %d reset\n",
		st.NoResource, st.Flushes, st.Fences, st.ContextsSeen, st.ContextsReleased, st.ContextsReset)
	line := func(what string, dirs []DirStats, names func(int) string) {
		fmt.Fprintf(&b, "  %s:", what)
		sep := " "
		for k, d := range dirs {
			if d.Pieces > 0 {
				fmt.Fprintf(&b, "%s%s %d ops %d pieces %d bytes", sep, names(k), d.Operations, d.Pieces, d.Bytes)
				sep = ", "
			}
		}
		if sep == " " {
			b.WriteString(" none")
		}
		b.WriteString("\n")
	}
	line("host (CPU copies)", st.Dir[DirHost:], func(int) string { return "host" })
	for d := range st.Device {
		line(fmt.Sprintf("device %d", d), st.Device[d][:gpuDirs], DirName)
	}
	now := goActivity()
	fmt.Fprintf(&b, "  Go runtime while open: %d heap allocations, %d GC cycles (process-wide)\n",
		now[0].Value.Uint64()-i.goAtOpen[0].Value.Uint64(), now[1].Value.Uint64()-i.goAtOpen[1].Value.Uint64())
	os.Stderr.WriteString(b.String())
}

// goActivity reads the Go runtime's allocation and GC counters: the noise a
// library adds to a bulk-synchronous HPC code.
func goActivity() [2]metrics.Sample {
	s := [2]metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s[:])
	return s
}
