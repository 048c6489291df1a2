// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"fmt"
	"os"
	"runtime/metrics"
	"strings"

	"github.com/cucopy/cucopy/cudadrv"
)

// Statistics: per slot and stream kind, copies and bytes (atomic, in
// ctxResources); CPU copies per iface; with CUCOPY_STATS, printed at close
// with the Go runtime's allocation and GC counts while the iface was open.

// countCopy adds one copy to the statistics.
func (i *Iface) countCopy(req *cudadrv.CopyOp) {
	if req.Slot < 0 {
		i.cpuOps.Add(1)
		i.cpuBytes.Add(req.Len)
		return
	}
	r := &i.res[req.Slot]
	r.ops[req.Kind].Add(1)
	r.bytes[req.Kind].Add(req.Len)
}

func (i *Iface) printStats() {
	var b strings.Builder
	fmt.Fprintf(&b, "cucopy stats: iface closed; cpu copies %d (%d bytes)\n", i.cpuOps.Load(), i.cpuBytes.Load())
	for s := range int(i.nslots.Load()) {
		r := &i.res[s]
		if r.dead {
			continue
		}
		fmt.Fprintf(&b, "  device %d context id %d", r.device, r.id)
		if i.params.Lanes > 1 {
			fmt.Fprintf(&b, " lane %d", i.slots[s].Lane)
		}
		fmt.Fprintf(&b, ": events %d", r.events)
		for k := 0; k < cudadrv.NumKinds; k++ {
			if n := r.ops[k].Load(); n > 0 {
				fmt.Fprintf(&b, ", %s %d ops %d bytes", cudadrv.KindName(k), n, r.bytes[k].Load())
			}
		}
		b.WriteString("\n")
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
