// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"testing"

	"github.com/cucopy/cucopy/cudadrv"
)

// neverFits counts the runs an operation needs in one slot, not the events
// its pieces happened to take: a piece refused an event because it could
// not join its run (progress had queried the run's event meanwhile, on
// another thread; not reachable deterministically through the API) is a
// NO_RESOURCE to retry, not an operation that can never fit.
func TestNeverFitsCountsRuns(t *testing.T) {
	h2d := func(slot int32) pieceRef { return pieceRef{slot: slot, kind: cudadrv.KindH2D, id: uint64(slot + 1)} }
	peer := func(slot int32) pieceRef { return pieceRef{slot: slot, kind: cudadrv.KindPeer, id: uint64(slot + 1)} }
	req := func(p pieceRef) *cudadrv.CopyOp {
		return &cudadrv.CopyOp{Slot: p.slot, Kind: p.kind, CtxID: p.id}
	}
	cases := []struct {
		name      string
		maxEvents uint32
		queued    []pieceRef
		refused   pieceRef
		never     bool
	}{
		{"first piece", 1, nil, h2d(0), false},
		{"same run, join refused", 1, []pieceRef{h2d(0)}, h2d(0), false},
		{"second run", 1, []pieceRef{h2d(0)}, peer(0), true},
		{"back after another slot", 1, []pieceRef{h2d(0), h2d(1)}, h2d(0), true},
		{"two runs of two", 2, []pieceRef{h2d(0), h2d(1)}, h2d(0), false},
		{"three runs of two", 2, []pieceRef{h2d(0), peer(0), h2d(1)}, h2d(0), true},
		{"other slot's runs do not count", 1, []pieceRef{h2d(1), peer(1)}, h2d(0), false},
	}
	for _, c := range cases {
		i := &Iface{params: IfaceParams{MaxEvents: c.maxEvents}}
		if got := i.neverFits(c.queued, req(c.refused)); got != c.never {
			t.Errorf("%s: neverFits %v, want %v", c.name, got, c.never)
		}
	}
}
