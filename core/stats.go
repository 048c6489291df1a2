// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"cmp"
	"fmt"
	"os"
	"runtime/metrics"
	"slices"
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

// dirCounters is DirStats as the copy path adds to it: a slot's live in
// its C memory (cudadrv.Slot.Counts), where the C steady state adds too.
type dirCounters = cudadrv.Counts

func loadCounts(c *dirCounters) DirStats {
	return DirStats{c.Operations.Load(), c.Pieces.Load(), c.Bytes.Load()}
}

// takeCounts reads and zeroes the counters, atomically each: a short copy
// ends (and counts itself) after it stopped being a user of its slot, so
// its count may come after the slot was retired; it then goes to the
// slot's next life rather than being lost or racing.
func takeCounts(c *dirCounters) DirStats {
	return DirStats{c.Operations.Swap(0), c.Pieces.Swap(0), c.Bytes.Swap(0)}
}

// ifaceCounters are the iface's own counters.
type ifaceCounters struct {
	cpu                         dirCounters
	noResource, flushes, fences atomic.Uint64
	seen, released, reset       uint64              // under mu
	retired                     [][gpuDirs]DirStats // per device: retired slots' counts; under mu
	ended                       []IncarnationStats  // the latest MaxEndedIncarnations ended lives; under mu
	endedDropped                uint64              // ended lives no longer in ended; under mu
}

// IncarnationState is how far one life of a (CUDA context, lane) went
// (CUCOPY_INCARNATION_*).
type IncarnationState int

const (
	IncarnationLive     IncarnationState = iota // the iface holds resources in it now
	IncarnationReleased                         // released: release_context, close, reclaim of an idle slot
	IncarnationReset                            // found ended (reset, driver deinitialized) and dropped
)

func (s IncarnationState) String() string {
	switch s {
	case IncarnationLive:
		return "live"
	case IncarnationReleased:
		return "released"
	}
	return "reset"
}

// MaxEndedIncarnations is how many ended lives an iface keeps for its
// statistics (the oldest go first; their counts stay in the totals).
const MaxEndedIncarnations = 1024

// IncarnationStats is what the copies of one life of a (CUDA context, lane)
// counted: a slot from the time the iface gave it to that context until it
// was released or found reset. A context released and used again, or reset
// and recreated, is a new life with a new serial.
type IncarnationStats struct {
	Serial    uint64 // 1, 2, ...: the order the iface started using them
	ContextID uint64
	Device    int
	Lane      int
	State     IncarnationState
	Dir       [gpuDirs]DirStats
}

// countCopy adds one copy piece to the statistics; first says it is its
// operation's first.
func (i *Iface) countCopy(req *cudadrv.CopyOp, first bool, run []cudadrv.Piece) {
	c := &i.counters.cpu
	if req.Slot >= 0 {
		c = &i.slots[req.Slot].Counts[req.Dir]
	}
	if first {
		c.Operations.Add(1)
	}
	bytes := rowBytes(req.Len, req.Height)
	for _, p := range run {
		bytes += rowBytes(p.Len, p.Height)
	}
	c.Pieces.Add(uint64(1 + len(run)))
	c.Bytes.Add(bytes)
}

// countNoResource counts a NO_RESOURCE answer and passes err on.
func (i *Iface) countNoResource(err error) error {
	if StatusOf(err) == ErrNoResource {
		i.counters.noResource.Add(1)
	}
	return err
}

// retireCounts folds slot s's counters into its device's totals and keeps
// them as an ended incarnation; under mu, before the slot is emptied.
func (i *Iface) retireCounts(s int, how IncarnationState) {
	r := &i.res[s]
	life := i.incarnationStats(s, how)
	for k := range i.slots[s].Counts {
		taken := takeCounts(&i.slots[s].Counts[k])
		life.Dir[k] = taken
		if r.device >= 0 && r.device < len(i.counters.retired) {
			i.counters.retired[r.device][k].add(taken)
		}
	}
	c := &i.counters
	if len(c.ended) == MaxEndedIncarnations {
		c.ended = append(c.ended[:0], c.ended[1:]...)
		c.endedDropped++
	}
	c.ended = append(c.ended, life)
}

// incarnationStats is slot s's life without its counts; under mu.
func (i *Iface) incarnationStats(s int, how IncarnationState) IncarnationStats {
	r := &i.res[s]
	return IncarnationStats{Serial: r.serial, ContextID: r.id, Device: r.device, Lane: int(r.lane), State: how}
}

// Incarnations lists every life of a (CUDA context, lane) the iface kept,
// in serial order: the ended ones it still keeps, then the live ones, and
// how many ended ones it no longer keeps.
func (i *Iface) Incarnations() (lives []IncarnationStats, dropped uint64) {
	i.mu.lock()
	defer i.mu.unlock()
	return i.incarnations(), i.counters.endedDropped
}

// incarnations is Incarnations under mu.
func (i *Iface) incarnations() []IncarnationStats {
	lives := append([]IncarnationStats(nil), i.counters.ended...)
	for s := range int(i.nslots.Load()) {
		if i.res[s].dead {
			continue
		}
		life := i.incarnationStats(s, IncarnationLive)
		for k := range i.slots[s].Counts {
			life.Dir[k] = loadCounts(&i.slots[s].Counts[k])
		}
		lives = append(lives, life)
	}
	slices.SortFunc(lives, func(a, b IncarnationStats) int { return cmp.Compare(a.Serial, b.Serial) })
	return lives
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
		for k := range i.slots[s].Counts {
			st.Device[r.device][k].add(loadCounts(&i.slots[s].Counts[k]))
		}
	}
	for d := range st.Device {
		for k := range st.Device[d] {
			st.Dir[k].add(st.Device[d][k])
		}
	}
	st.Dir[DirHost] = loadCounts(&i.counters.cpu)
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
	lives := i.incarnations()
	if n := i.counters.endedDropped; n > 0 {
		fmt.Fprintf(&b, "  (%d earlier ended context lives not kept)\n", n)
	}
	const shown = 32
	for k, life := range lives {
		if k == shown {
			fmt.Fprintf(&b, "  ... %d more context lives\n", len(lives)-shown)
			break
		}
		line(fmt.Sprintf("  life %d: device %d, context id %d, lane %d, %s", life.Serial, life.Device, life.ContextID, life.Lane, life.State),
			life.Dir[:], DirName)
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
