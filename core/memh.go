// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/cucopy/cucopy/cudadrv"
)

// Memory handles (cucopy_memh_h): a range classified once, so that copies
// naming the handle make no pointer query for that side. MemDescribe makes
// one for any memory kind; MemReg's registrations are handles too (pinned
// host memory). A copy side with a handle takes the handle's description
// (cudadrv.MemDesc) into the copy request; the driver layer checks, per
// copy, only that a primary context owning device-side memory was not
// reset since (one cuCtxGetId, which the copy path makes anyway).
//
// What a handle cannot see: memory freed behind cucopy's back
// (cuMemFree by the program) is the program's error, as it is with the
// driver; memory freed through MemFree invalidates the handles inside it;
// a context the program created must outlive the handles to its memory
// (it cannot be checked without touching it).

// MemHandle is a described or registered range.
type MemHandle struct {
	ctx          *Context
	addr, length uint64
	desc         cudadrv.MemDesc
	reg          *Registration // MemReg's; nil for MemDescribe's
	classify     bool          // a driver without cuCtxGetId: device-side sides are classified per copy
	freed        atomic.Bool   // its memory went through MemFree
}

// Range is the handle's [addr, addr+length).
func (h *MemHandle) Range() (addr, length uint64) { return h.addr, h.length }

// Context is the cucopy context the handle belongs to.
func (h *MemHandle) Context() *Context { return h.ctx }

// Desc is the handle's description, as copies take it.
func (h *MemHandle) Desc() cudadrv.MemDesc { return h.desc }

// Classified says that copies classify the handle's side anyway (a driver
// without cuCtxGetId: see describe).
func (h *MemHandle) Classified() bool { return h.classify }

// Freed says that the handle's memory went through MemFree.
func (h *MemHandle) Freed() bool { return h.freed.Load() }

// MemDescribe classifies [addr, addr+length) once: any memory kind.
func (c *Context) MemDescribe(addr, length uint64) (*MemHandle, error) {
	const api = "mem_describe"
	if addr == 0 || length == 0 || addr > math.MaxUint64-length {
		return nil, errorf(ErrInvalid, api, "range 0x%x + %d is empty or overflows", addr, length)
	}
	h, err := c.describe(api, addr, length)
	if err != nil {
		return nil, err
	}
	c.mem.mu.Lock()
	defer c.mem.mu.Unlock()
	if c.destroyed {
		return nil, errorf(ErrHandle, api, "the context was destroyed during the call")
	}
	c.mem.handles[h] = struct{}{}
	return h, nil
}

// describe asks the driver what [addr, addr+length) is.
func (c *Context) describe(api string, addr, length uint64) (*MemHandle, error) {
	d, err := c.drv.Describe(addr)
	if err != nil {
		return nil, driverError(api, fmt.Sprintf("classifying 0x%x", addr), err)
	}
	h := &MemHandle{ctx: c, addr: addr, length: length, desc: d}
	host := d.Managed == 0 && d.Type != cudadrv.MemoryTypeDevice && (d.Type != cudadrv.MemoryTypeHost || d.Ctx != 0)
	if !host && d.Size != 0 && (addr < d.Start || addr-d.Start > d.Size || length > d.Size-(addr-d.Start)) {
		return nil, errorf(ErrOutOfRange, api, "[0x%x, +%d) crosses the end of its allocation [0x%x, +%d)", addr, length, d.Start, d.Size)
	}
	if !host && d.Ctx != 0 {
		if !c.drv.HasCtxID() {
			h.classify = true // no id to tell a reset incarnation by
		} else if primary, err := c.isPrimary(d.Ctx, int(d.Ordinal)); err != nil {
			return nil, driverError(api, fmt.Sprintf("0x%x: is its context device %d's primary context", addr, d.Ordinal), err)
		} else if primary {
			h.desc.PrimaryDevice = d.Ordinal
		}
	}
	return h, nil
}

// MemDereg releases a handle: a registration is unpinned, a description
// forgotten.
func (c *Context) MemDereg(h *MemHandle) error {
	if h.ctx != c {
		return errorf(ErrInvalid, "mem_dereg", "the handle belongs to another cucopy context")
	}
	if h.reg != nil {
		return c.dereg(h.reg)
	}
	c.mem.mu.Lock()
	defer c.mem.mu.Unlock()
	if _, ok := c.mem.handles[h]; !ok {
		return errorf(ErrInvalid, "mem_dereg", "the handle is not held by this context (another thread is releasing it)")
	}
	delete(c.mem.handles, h)
	return nil
}

// freeHandles invalidates the handles inside an allocation freed through
// MemFree; under mem.mu.
func (c *Context) freeHandles(addr, length uint64) {
	for h := range c.mem.handles {
		if h.addr >= addr && h.addr-addr < length {
			h.freed.Store(true)
		}
	}
}

// memSides is the handles of one operation's copy request: their
// descriptions, in the order the pieces name them (cudadrv.CopyOp.SrcMem).
// A batch names up to two per entry; a zcopy one per entry and the remote.
type memSides struct {
	mems  [2 * MaxIOV]cudadrv.MemDesc
	owner [2 * MaxIOV]*MemHandle
	n     int32
}

// index is h's 1-based index among the request's descriptions (0 for no
// handle, or one the driver layer must classify anyway); the same handle
// twice in a row gets the same index, so that its pieces still form runs.
func (m *memSides) index(h *MemHandle) int32 {
	if h == nil || h.classify {
		return 0
	}
	if m.n > 0 && m.owner[m.n-1] == h {
		return m.n
	}
	for k := range m.n {
		if m.owner[k] == h {
			return k + 1
		}
	}
	m.mems[m.n], m.owner[m.n] = h.desc, h
	m.n++
	return m.n
}

// checkHandle checks that h may describe [addr, addr+length) of a copy on
// iface i; what names the side in the message (a format of n if n >= 0).
func (i *Iface) checkHandle(api, what string, n int, h *MemHandle, addr, length uint64) error {
	if h == nil || (h.ctx == i.ctx && !h.freed.Load() && addr >= h.addr && addr-h.addr <= h.length && length <= h.length-(addr-h.addr)) {
		return nil
	}
	if n >= 0 {
		what = fmt.Sprintf(what, n)
	}
	switch {
	case h.ctx != i.ctx:
		return errorf(ErrHandle, api, "%s: the memory handle belongs to another cucopy context", what)
	case h.freed.Load():
		return errorf(ErrHandle, api, "%s: the memory handle's memory [0x%x, +%d) was freed (cucopy_mem_free)", what, h.addr, h.length)
	}
	return errorf(ErrInvalid, api, "%s: [0x%x, +%d) is not inside its memory handle's range [0x%x, +%d)", what, addr, length, h.addr, h.length)
}
