// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"math"

	"github.com/cucopy/cucopy/cudadrv"
)

// Copy2D (cucopy_ep_copy_2d): strided copies, each entry Height rows of
// Width bytes, row i at Src + i*SrcPitch and Dst + i*DstPitch, issued as
// one operation with one completion, as Batch issues its entries. An entry
// becomes one piece: a contiguous one when it is one row or when both
// pitches equal the width (then it may join a run and be staged like any
// zcopy piece), else a 2-D piece that the driver layer issues as one
// cuMemcpy2DAsync (cudadrv/copy.go, 2-D pieces).

// Copy2DEntry is one entry of Copy2D (cucopy_copy_2d_t).
type Copy2DEntry struct {
	Dst, DstPitch uint64
	Src, SrcPitch uint64
	Width, Height uint64
	DstH, SrcH    *MemHandle
}

// span2D is the extent of height rows of width bytes at pitch, [p, p +
// (height-1)*pitch + width), or false when that overflows; height >= 1.
func span2D(width, height, pitch uint64) (uint64, bool) {
	if height == 1 {
		return width, true
	}
	if pitch != 0 && height-1 > (math.MaxUint64-width)/pitch {
		return 0, false
	}
	return (height-1)*pitch + width, true
}

// rowBytes is the payload of a piece of rows rows of n bytes (0 rows: a
// contiguous piece of n bytes).
func rowBytes(n, rows uint64) uint64 {
	if rows == 0 {
		return n
	}
	return n * rows
}

// check2D checks entry n of a Copy2D call and returns its spans.
func (i *Iface) check2D(api string, n int, c *Copy2DEntry) (dstSpan, srcSpan uint64, err error) {
	if c.Dst == 0 || c.Src == 0 {
		return 0, 0, errorf(ErrInvalid, api, "copies[%d]: NULL address with width %d and height %d", n, c.Width, c.Height)
	}
	if c.Height > 1 && (c.DstPitch < c.Width || c.SrcPitch < c.Width) {
		return 0, 0, errorf(ErrInvalid, api, "copies[%d]: a pitch is below the width %d (dst_pitch %d, src_pitch %d): rows would overlap", n, c.Width, c.DstPitch, c.SrcPitch)
	}
	dstSpan, ok1 := span2D(c.Width, c.Height, c.DstPitch)
	srcSpan, ok2 := span2D(c.Width, c.Height, c.SrcPitch)
	if !ok1 || !ok2 || c.Dst > math.MaxUint64-dstSpan || c.Src > math.MaxUint64-srcSpan ||
		(c.Height > 1 && c.Width > math.MaxUint64/c.Height) {
		return 0, 0, errorf(ErrInvalid, api, "copies[%d]: %d rows of %d bytes at pitches %d (dst) and %d (src) overflow the address space", n, c.Height, c.Width, c.DstPitch, c.SrcPitch)
	}
	if err := i.checkHandle(api, "copies[%d].dst", n, c.DstH, c.Dst, dstSpan); err != nil {
		return 0, 0, err
	}
	if err := i.checkHandle(api, "copies[%d].src", n, c.SrcH, c.Src, srcSpan); err != nil {
		return 0, 0, err
	}
	return dstSpan, srcSpan, nil
}

// piece2D is the piece that issues entry c: contiguous when it is one row,
// or when its rows are back to back on both sides.
func piece2D(c *Copy2DEntry, dstMem, srcMem int32) cudadrv.Piece {
	p := cudadrv.Piece{Dst: c.Dst, Src: c.Src, Len: c.Width, DstMem: dstMem, SrcMem: srcMem}
	switch {
	case c.Height == 1:
	case c.DstPitch == c.Width && c.SrcPitch == c.Width:
		p.Len = c.Width * c.Height // checked not to overflow
	default:
		p.Height, p.DstPitch, p.SrcPitch = c.Height, c.DstPitch, c.SrcPitch
	}
	return p
}

// Copy2D issues strided copies as one operation with one completion: the
// contract of Batch (return values, NO_RESOURCE, ordering, entries running
// in no set order among themselves, which must not overlap).
func (e *Ep) Copy2D(copies []Copy2DEntry, comp uintptr) (Status, error) {
	const api = "ep_copy_2d"
	if len(copies) == 0 || len(copies) > MaxIOV {
		return ErrInvalid, errorf(ErrInvalid, api, "count %d: want 1 to %d", len(copies), MaxIOV)
	}
	i := e.iface
	nonEmpty := 0
	for n := range copies {
		c := &copies[n]
		if c.Width == 0 || c.Height == 0 {
			continue
		}
		if _, _, err := i.check2D(api, n, c); err != nil {
			return StatusOf(err), err
		}
		nonEmpty++
	}
	if nonEmpty == 0 {
		return OK, nil
	}
	return e.issueEntries(api, comp, func(b *issueBuf) int {
		np := 0
		for n := range copies {
			c := &copies[n]
			if c.Width == 0 || c.Height == 0 {
				continue
			}
			b.pieces[np] = piece2D(c, b.mem.index(c.DstH), b.mem.index(c.SrcH))
			np++
		}
		return np
	})
}

// cpuCopyRows is cpuCopy of a request's rows: one range for a contiguous
// piece, Height rows for a 2-D one.
func cpuCopyRows(api string, req *cudadrv.CopyOp) error {
	if req.Height == 0 {
		return cpuCopy(api, req.Dst, req.Src, req.Len)
	}
	for r := uint64(0); r < req.Height; r++ {
		if err := cpuCopy(api, req.Dst+r*req.DstPitch, req.Src+r*req.SrcPitch, req.Len); err != nil {
			return err
		}
	}
	return nil
}
