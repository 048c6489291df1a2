// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/cudadrv"
	"github.com/cucopy/cucopy/cudadrv/fakedrv"
)

// rows2D is what copying e leaves in dst (a copy of it before), src as it is.
func rows2D(dst, src []byte, e core.Copy2DEntry, dstBase, srcBase uint64) []byte {
	want := append([]byte(nil), dst...)
	for r := uint64(0); r < e.Height; r++ {
		d := e.Dst - dstBase + r*e.DstPitch
		s := e.Src - srcBase + r*e.SrcPitch
		copy(want[d:d+e.Width], src[s:s+e.Width])
	}
	return want
}

// How Copy2D plans an entry: one row, or both pitches the width, is a
// contiguous piece (no 2-D driver copy, and consecutive ones form one run);
// other entries are one 2-D driver copy each; host-host entries are CPU
// copies. The data, holes between rows included, is checked every time.
func TestCopy2DPlanning(t *testing.T) {
	const n = 8192
	for _, c := range []struct {
		name                          string
		width, height, dpitch, spitch uint64
		entries                       int
		copy2D, runs                  int // driver calls: 2-D copies, batched runs
	}{
		{"strided both", 8, 100, 24, 64, 1, 1, 0},
		{"gather", 8, 100, 8, 64, 1, 1, 0},
		{"scatter", 16, 50, 40, 16, 1, 1, 0},
		{"contiguous", 32, 20, 32, 32, 1, 0, 0},
		{"one row, pitch below the width", 100, 1, 0, 3, 1, 0, 0},
		{"three strided entries", 8, 30, 16, 32, 3, 3, 0},
		{"three contiguous entries: one run", 8, 30, 8, 8, 3, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, 2)
			host := r.drv.AllocHost(n, true)
			dev := r.drv.AllocDevice(0, n)
			src := fill(r.drv, host, n, 5)
			before := append([]byte(nil), r.drv.Bytes(dev, n)...)
			es := make([]core.Copy2DEntry, c.entries)
			for k := range es {
				off := uint64(k) * 2048
				es[k] = core.Copy2DEntry{Dst: dev + off, DstPitch: c.dpitch, Src: host + off/2, SrcPitch: c.spitch, Width: c.width, Height: c.height}
			}
			copy2D, runs := r.drv.Calls("Copy2D"), r.drv.Calls("CopyRun")
			st, err := r.ep.Copy2D(es, 7)
			require.NoError(t, err)
			assert.Equal(t, core.InProgress, st)
			assert.Equal(t, c.copy2D, r.drv.Calls("Copy2D")-copy2D, "2-D driver copies")
			assert.Equal(t, c.runs, r.drv.Calls("CopyRun")-runs, "batched runs")
			r.drv.Run()
			_, comps := r.progress()
			assert.Equal(t, []done{{7, core.OK}}, comps)
			want := before
			for _, e := range es {
				want = rows2D(want, src, e, dev, host)
			}
			eqBytes(t, want, r.drv.Bytes(dev, n))
		})
	}
}

// Host-host entries are copied row by row on the CPU: OK, no completion.
func TestCopy2DHostHost(t *testing.T) {
	r := newRig(t, 1)
	a, b := r.drv.Pageable(4096), r.drv.AllocHost(4096, true)
	src := fill(r.drv, a, 4096, 1)
	before := append([]byte(nil), r.drv.Bytes(b, 4096)...)
	e := core.Copy2DEntry{Dst: b + 3, DstPitch: 50, Src: a, SrcPitch: 33, Width: 20, Height: 40}
	st, err := r.ep.Copy2D([]core.Copy2DEntry{e}, 9)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st)
	eqBytes(t, rows2D(before, src, e, b, a), r.drv.Bytes(b, 4096))
	_, comps := r.progress()
	assert.Empty(t, comps)
}

// Bad entries are refused before anything is issued.
func TestCopy2DBadInput(t *testing.T) {
	r := newRig(t, 1)
	host := r.drv.AllocHost(4096, true)
	dev := r.drv.AllocDevice(0, 4096)
	good := core.Copy2DEntry{Dst: dev, DstPitch: 64, Src: host, SrcPitch: 64, Width: 8, Height: 10}
	for _, c := range []struct {
		name string
		edit func(e *core.Copy2DEntry)
		want core.Status
	}{
		{"NULL destination", func(e *core.Copy2DEntry) { e.Dst = 0 }, core.ErrInvalid},
		{"pitch below the width", func(e *core.Copy2DEntry) { e.SrcPitch = 7 }, core.ErrInvalid},
		{"span overflows", func(e *core.Copy2DEntry) { e.Height, e.DstPitch = 1<<40, 1<<40 }, core.ErrInvalid},
		{"end of the address space", func(e *core.Copy2DEntry) { e.Src = math.MaxUint64 - 100 }, core.ErrInvalid},
		{"past the allocation", func(e *core.Copy2DEntry) { e.DstPitch = 1024 }, core.ErrOutOfRange},
	} {
		e := good
		c.edit(&e)
		st, err := r.ep.Copy2D([]core.Copy2DEntry{good, e}[1:], 1)
		errStatus(t, c.want, err)
		assert.Equal(t, c.want, st, c.name)
	}
	_, err := r.ep.Copy2D(nil, 1)
	errStatus(t, core.ErrInvalid, err)
	_, err = r.ep.Copy2D(make([]core.Copy2DEntry, core.MaxIOV+1), 1)
	errStatus(t, core.ErrInvalid, err)
	st, err := r.ep.Copy2D([]core.Copy2DEntry{{Width: 5}, {Height: 3}}, 1)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st, "entries of no rows or no width are skipped")
	assert.Zero(t, r.drv.Pending())
	_, comps := r.progress()
	assert.Empty(t, comps)
}

// A failing 2-D driver copy: the error, no completion, nothing left in flight.
func TestCopy2DDriverFault(t *testing.T) {
	r := newRig(t, 1)
	host := r.drv.AllocHost(8192, true)
	dev := r.drv.AllocDevice(0, 8192)
	fill(r.drv, host, 8192, 2)
	r.drv.Fail("Copy2D", 2, fakedrv.ErrInvalidValue)
	es := []core.Copy2DEntry{
		{Dst: dev, DstPitch: 32, Src: host, SrcPitch: 64, Width: 8, Height: 10},
		{Dst: dev + 4096, DstPitch: 32, Src: host, SrcPitch: 64, Width: 8, Height: 10},
	}
	st, err := r.ep.Copy2D(es, 3)
	errStatus(t, core.ErrCUDA, err)
	assert.Equal(t, core.ErrCUDA, st)
	assert.Zero(t, r.drv.Pending(), "the first entry was waited for")
	_, comps := r.progress()
	assert.Empty(t, comps)
}

// The pack path: narrow rows between device memory and packed pinned host
// memory go through one scratch buffer per context and direction, made on
// first use, grown for a larger piece, freed at close; the data and the
// holes between rows are right either way. Wider rows, pageable host
// memory, a strided host side, CUCOPY_2D_PACK_BELOW=0 and a failed
// allocation take the plain 2-D copy.
func TestCopy2DPack(t *testing.T) {
	const n = 1 << 20
	for _, c := range []struct {
		name     string
		env      map[string]string
		pageable bool
		width    uint64
		hostGap  uint64 // added to the host side's pitch
		allocErr bool
		packs    bool
	}{
		{name: "8 B rows", width: 8, packs: true},
		{name: "31 B rows", width: 31, packs: true},
		{name: "32 B rows: plain", width: 32},
		{name: "pageable host: plain", width: 8, pageable: true},
		{name: "strided host side: plain", width: 8, hostGap: 8},
		{name: "CUCOPY_2D_PACK_BELOW=0", env: map[string]string{"CUCOPY_2D_PACK_BELOW": "0"}, width: 8},
		{name: "CUCOPY_2D_PACK_BELOW=128", env: map[string]string{"CUCOPY_2D_PACK_BELOW": "128"}, width: 100, packs: true},
		{name: "allocation fails: plain", width: 8, allocErr: true},
	} {
		for _, mode := range []core.ThreadMode{core.ThreadSingle, core.ThreadMulti} {
			t.Run(fmt.Sprintf("%s, thread mode %d", c.name, mode), func(t *testing.T) {
				r := newRigEnv(t, 1, c.env, func(p *core.IfaceParams) { p.ThreadMode = mode })
				host := r.drv.AllocHost(n, true)
				if c.pageable {
					host = r.drv.Pageable(n)
				}
				dev := r.drv.AllocDevice(0, n)
				if c.allocErr {
					r.drv.Fail("MemAlloc", 1, cudadrv.ErrorOutOfMemory) // D2H's
					r.drv.Fail("MemAlloc", 2, cudadrv.ErrorOutOfMemory) // H2D's
				}
				allocs, frees := r.drv.Calls("MemAlloc"), r.drv.Calls("MemFree")
				for round, rows := range []uint64{100, 30, 2000} { // the third grows the scratch (rows of 33 B and wider)
					for _, d2h := range []bool{true, false} {
						fill(r.drv, dev, n, byte(round))
						fill(r.drv, host, n, byte(round+50))
						e := core.Copy2DEntry{Dst: host, DstPitch: c.width + c.hostGap, Src: dev + 16, SrcPitch: 3*c.width + 1, Width: c.width, Height: rows}
						dstBase, srcBase := host, dev
						if !d2h {
							e = core.Copy2DEntry{Dst: dev + 16, DstPitch: 3*c.width + 1, Src: host, SrcPitch: c.width + c.hostGap, Width: c.width, Height: rows}
							dstBase, srcBase = dev, host
						}
						want := rows2D(r.drv.Bytes(dstBase, n), r.drv.Bytes(srcBase, n), e, dstBase, srcBase)
						packs := r.drv.Calls("Pack")
						st, err := r.ep.Copy2D([]core.Copy2DEntry{e}, 4)
						require.NoError(t, err)
						assert.Equal(t, core.InProgress, st)
						packed := r.drv.Calls("Pack") - packs
						r.drv.Run()
						_, comps := r.progress()
						assert.Equal(t, []done{{4, core.OK}}, comps)
						eqBytes(t, want, r.drv.Bytes(dstBase, n), "%d rows, d2h %v", rows, d2h)
						assert.Equal(t, c.packs, packed == 1, "%d rows, d2h %v: packed", rows, d2h)
					}
				}
				made := r.drv.Calls("MemAlloc") - allocs
				switch {
				case c.packs:
					// D2H and H2D: one each, grown once each where 2000 rows
					// need more than the first (100 rows rounded up to a power
					// of two, 64 KiB at least).
					grows := 0
					if scratchFor(2000*c.width) > scratchFor(100*c.width) {
						grows = 2
					}
					assert.Equal(t, 2+grows, made, "scratch buffers made")
				case c.allocErr:
					assert.Equal(t, 2, made, "one failed attempt per direction, then none")
				default:
					assert.Zero(t, made)
				}
				r.close()
				if c.packs {
					assert.Equal(t, made, r.drv.Calls("MemFree")-frees, "every scratch buffer freed (grown ones at once, the last at close)")
				}
			})
		}
	}
}

// scratchFor is the scratch buffer size core makes for n bytes (pack.go).
func scratchFor(n uint64) uint64 {
	size := uint64(64 << 10)
	for size < n {
		size <<= 1
	}
	return size
}
