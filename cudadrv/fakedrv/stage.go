// SPDX-License-Identifier: BSD-3-Clause

package fakedrv

import "github.com/cucopy/cucopy/cudadrv"

// StageStep is cd_stage_step: with wait, the stream's queued work runs
// first; then, with n > 0, the copy of n bytes is queued on it. Both ranges
// must lie inside allocations the fake knows (the bounce buffer is memory
// the caller registered: HostRegister). Fail("StageStep", nth, code) fails
// the nth enqueue, after which the stream is synchronized, as
// cd_stage_step does for a failed cuMemcpyAsync.
func (d *Driver) StageStep(ctx cudadrv.Context, s cudadrv.Stream, wait bool, dst, src, n uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls["StageStep"]++
	o, ok := d.streams[s]
	if err := d.owned("StageStep", ctx, o, ok, "stream", uintptr(s)); err != nil {
		return err
	}
	if code := d.ctxs[ctx].poison; code != 0 {
		if wait {
			return result("cuStreamSynchronize", code)
		}
		return result("cuMemcpyAsync", code)
	}
	if wait {
		d.syncStream(s)
	}
	if n == 0 {
		return nil
	}
	if code := d.fault("StageStep"); code != 0 {
		d.syncStream(s)
		return result("cuMemcpyAsync", code)
	}
	to, from := d.span(dst, n), d.span(src, n)
	if to == nil || from == nil {
		return d.violate(ErrIllegalAddress, "StageStep: range [0x%x -> 0x%x, +%d) leaves its allocation", src, dst, n)
	}
	d.pending = append(d.pending, &work{stream: s, run: func() { copy(to, from) }})
	return nil
}
