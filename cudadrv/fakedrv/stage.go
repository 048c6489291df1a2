// SPDX-License-Identifier: BSD-3-Clause

package fakedrv

import "github.com/cucopy/cucopy/cudadrv"

// StageStep is cd_stage_step: with StageWaitBefore, the stream's queued
// work runs first; then the copies of pieces are queued on it; then with
// StageWaitAfter the stream's work runs again. Every range must lie inside
// allocations the fake knows (the bounce buffer is memory the caller
// registered: HostRegister). Fail("StageStep", nth, code) fails the nth
// call that enqueues, after which the stream is synchronized, as
// cd_stage_step does for a failed enqueue; nothing of that call is queued.
func (d *Driver) StageStep(ctx cudadrv.Context, s cudadrv.Stream, flags uint32, device, kind int32, pieces []cudadrv.Piece) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls["StageStep"]++
	o, ok := d.streams[s]
	if err := d.owned("StageStep", ctx, o, ok, "stream", uintptr(s)); err != nil {
		return err
	}
	if kind != cudadrv.KindH2D && kind != cudadrv.KindD2H {
		return d.violate(ErrInvalidValue, "StageStep: kind %d is not H2D or D2H", kind)
	}
	if code := d.ctxs[ctx].poison; code != 0 {
		if flags&cudadrv.StageWaitBefore != 0 {
			return result("cuStreamSynchronize", code)
		}
		return result("cuMemcpyAsync", code)
	}
	if flags&cudadrv.StageWaitBefore != 0 {
		d.syncStream(s)
	}
	if len(pieces) > 0 {
		if code := d.fault("StageStep"); code != 0 {
			d.syncStream(s)
			return result("cuMemcpyAsync", code)
		}
		for _, p := range pieces {
			if d.span(p.Dst, p.Len) == nil || d.span(p.Src, p.Len) == nil {
				return d.violate(ErrIllegalAddress, "StageStep: range [0x%x -> 0x%x, +%d) leaves its allocation", p.Src, p.Dst, p.Len)
			}
		}
		for _, p := range pieces {
			to, from := d.span(p.Dst, p.Len), d.span(p.Src, p.Len)
			d.pending = append(d.pending, &work{stream: s, run: func() { copy(to, from) }})
		}
	}
	if flags&cudadrv.StageWaitAfter != 0 {
		d.syncStream(s)
	}
	return nil
}
