// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"fmt"
	"math"
	"sync"

	"github.com/cucopy/cucopy/cudadrv"
)

// MemType mirrors cucopy_memory_type_t.
type MemType int32

const (
	MemHost        MemType = 0
	MemCUDA        MemType = 1
	MemCUDAManaged MemType = 2
)

// MemFlag bits mirror CUCOPY_MEM_FLAG_*.
const (
	MemFlagVMM         = 1 << 0
	MemFlagPool        = 1 << 1
	MemFlagRegistered  = 1 << 2
	MemFlagAllocated   = 1 << 3
	MemFlagPreferred   = 1 << 4
	MemFlagHostLocated = 1 << 5
)

// Preferred-location values besides device ordinals (CUCOPY_LOCATION_*).
const (
	LocationHost = -1
	LocationNone = -2
)

// MemAttr is what a range of memory is (cucopy_mem_attr_t).
type MemAttr struct {
	Type              MemType
	Pinned            bool
	Device            int
	ContextID         uint64
	Base              uint64
	Length            uint64
	Flags             uint64
	PreferredLocation int
	AccessMask        uint64
}

// memDomain is the context's record of what cucopy allocated and pinned.
type memDomain struct {
	mu      sync.Mutex
	allocs  map[uint64]*allocation
	regs    map[*Registration]struct{}
	handles map[*MemHandle]struct{} // MemDescribe's (registrations are in regs)
}

type allocation struct {
	kind        cudadrv.MemKind
	ctx         cudadrv.Context
	ctxID       uint64
	device      int
	length      uint64
	primary     bool // ctx is the device's primary context
	ownsPrimary bool // a primary-context retain held until free
}

// Registration is a host range pinned by MemReg. It is unpinned through
// whatever context is live at MemDereg: PORTABLE registrations are visible
// to every context, and the registering one may be gone by then.
type Registration struct {
	addr, length uint64
	device       int
	ownsPrimary  bool // a retain on device's primary context, held until MemDereg
}

func allDevices(n int) uint64 {
	if n >= 64 {
		return math.MaxUint64
	}
	return 1<<uint(n) - 1
}

// MemQuery says what [addr, addr+length) is. It never changes the calling
// thread's current context.
func (c *Context) MemQuery(addr, length uint64) (MemAttr, error) {
	const api = "mem_query"
	if length > 0 && addr > math.MaxUint64-length {
		return MemAttr{}, errorf(ErrInvalid, api, "range 0x%x + %d overflows", addr, length)
	}
	info, err := c.drv.MemQuery(addr, c.devices)
	if err != nil {
		return MemAttr{}, driverError(api, fmt.Sprintf("querying 0x%x", addr), err)
	}
	a := MemAttr{Device: -1, PreferredLocation: LocationNone, ContextID: info.CtxID, Base: info.Start, Length: info.Size}
	switch {
	case info.Managed != 0:
		a.Type = MemCUDAManaged
		a.Device = int(info.Ordinal)
		a.AccessMask = allDevices(c.devices)
		switch p := int(info.Preferred); {
		case p == cudadrv.DeviceCPU:
			a.PreferredLocation, a.Flags = LocationHost, a.Flags|MemFlagPreferred
		case p >= 0:
			a.PreferredLocation, a.Flags = p, a.Flags|MemFlagPreferred
		}
	case info.Type == cudadrv.MemoryTypeDevice || info.VMM != 0: // host-located VMM reads as HOST
		a.Type = MemCUDA
		a.Device = int(info.Ordinal)
		switch {
		case info.Pool != 0:
			a.Flags |= MemFlagPool
			a.AccessMask = info.AccessMask
		case info.VMM != 0:
			a.Flags |= MemFlagVMM
			a.AccessMask = info.AccessMask
			if info.VMMLocationType == cudadrv.MemLocationDevice {
				a.Device = int(info.VMMLocationID)
			} else {
				a.Flags |= MemFlagHostLocated
				a.Device = -1
			}
		case a.Device >= 0:
			a.AccessMask = 1 << uint(a.Device)
		}
	case info.Type == cudadrv.MemoryTypeHost:
		a.Type = MemHost
		a.Pinned = true
		a.Device = int(info.Ordinal)
		a.AccessMask = allDevices(c.devices)
	default: // unknown to CUDA: pageable host memory (or freed CUDA memory)
		a.Type = MemHost
		a.ContextID, a.Base, a.Length = 0, 0, 0
	}
	if a.Device < 0 {
		a.Device = -1 // the driver's "no device" values (-2 for host-located memory) read as none
	}
	if a.Type != MemHost || a.Pinned {
		if a.Length > 0 && length > 0 && (addr < a.Base || length > a.Length-(addr-a.Base)) {
			return a, errorf(ErrOutOfRange, api, "range [0x%x, +%d) crosses the end of its allocation [0x%x, +%d)", addr, length, a.Base, a.Length)
		}
	}
	c.mem.mu.Lock()
	if _, ok := c.mem.allocs[a.Base]; ok && a.Base != 0 {
		a.Flags |= MemFlagAllocated
	}
	for r := range c.mem.regs {
		if addr >= r.addr && addr-r.addr < r.length {
			a.Flags |= MemFlagRegistered
			a.Pinned = true
		}
	}
	c.mem.mu.Unlock()
	return a, nil
}

// allocContext picks the context an allocation or registration runs in:
// the caller's current context when it is on the wanted device (or no
// device is wanted), else the device's primary context if it is active or
// activate allows retaining it. owns says a retain was taken.
func (c *Context) allocContext(api string, device int, activate bool) (ctx cudadrv.Context, dev int, owns bool, err error) {
	cur, err := c.drv.CurrentContext()
	if err != nil {
		return 0, 0, false, driverError(api, "reading the current context", err)
	}
	if cur != 0 {
		curDev, err := c.drv.ContextDevice(cur)
		if err != nil {
			return 0, 0, false, driverError(api, "the current context's device", err)
		}
		if device < 0 || device == curDev {
			return cur, curDev, false, nil
		}
	}
	if device < 0 {
		// No device asked for and no current context: the first device whose
		// primary context the program activated.
		for d := 0; d < c.devices && device < 0; d++ {
			if active, err := c.drv.PrimaryActive(d); err == nil && active {
				device = d
			}
		}
		if device < 0 {
			return 0, 0, false, errorf(ErrNoDevice, api, "no current CUDA context, no device given and no active primary context")
		}
	}
	if device >= c.devices {
		return 0, 0, false, errorf(ErrInvalid, api, "device %d: the driver shows %d device(s)", device, c.devices)
	}
	active, err := c.drv.PrimaryActive(device)
	if err != nil {
		return 0, 0, false, driverError(api, fmt.Sprintf("primary context state of device %d", device), err)
	}
	if !active && !activate {
		return 0, 0, false, errorf(ErrNoDevice, api, "the primary context of device %d is not active; cucopy does not activate it without CUCOPY_MEM_ALLOC_FLAG_ACTIVATE", device)
	}
	ctx, err = c.drv.PrimaryRetain(device)
	if err != nil {
		return 0, 0, false, driverError(api, fmt.Sprintf("retaining the primary context of device %d", device), err)
	}
	return ctx, device, true, nil
}

func (c *Context) releasePrimary(dev int) {
	if err := c.drv.PrimaryRelease(dev); err != nil {
		logf(LogWarn, "releasing the primary context of device %d: %v", dev, err)
	}
}

// MemAlloc allocates length bytes of typ on device (-1: the current
// context's device).
func (c *Context) MemAlloc(typ MemType, device int, activate bool, length uint64) (uint64, error) {
	const api = "mem_alloc"
	if length == 0 {
		return 0, errorf(ErrInvalid, api, "length 0")
	}
	kind := map[MemType]cudadrv.MemKind{MemCUDA: cudadrv.MemDevice, MemCUDAManaged: cudadrv.MemManaged, MemHost: cudadrv.MemHost}[typ]
	ctx, dev, owns, err := c.allocContext(api, device, activate)
	if err != nil {
		return 0, err
	}
	ptr, err := c.drv.MemAlloc(ctx, kind, length)
	if err != nil {
		if owns {
			c.releasePrimary(dev)
		}
		if resultIs(err, cudadrv.ErrorOutOfMemory) {
			return 0, &Error{Status: ErrNoMemory, Op: api, Msg: fmt.Sprintf("%d bytes on device %d", length, dev), Err: err}
		}
		return 0, driverError(api, fmt.Sprintf("%d bytes on device %d", length, dev), err)
	}
	a := &allocation{kind: kind, ctx: ctx, device: dev, length: length, primary: owns, ownsPrimary: owns}
	if !owns {
		a.primary, _ = c.isPrimary(ctx, dev) // unknown: no liveness check at free
	}
	if a.primary {
		if a.ctxID, err = c.drv.ContextID(ctx); err != nil {
			a.primary = false
		}
	}
	c.mem.mu.Lock()
	destroyed := c.destroyed
	if !destroyed {
		c.mem.allocs[ptr] = a
	}
	c.mem.mu.Unlock()
	if destroyed {
		// Destroyed by another thread meanwhile: nothing may outlive it.
		if err := c.drv.MemFree(a.ctx, a.kind, ptr); err != nil {
			logf(LogWarn, "mem_alloc: freeing 0x%x after a racing context_destroy: %v", ptr, err)
		}
		if a.ownsPrimary {
			c.releasePrimary(dev)
		}
		return 0, errorf(ErrHandle, api, "the context was destroyed during the call")
	}
	return ptr, nil
}

// isPrimary says whether ctx, a live context of dev, is dev's primary context.
func (c *Context) isPrimary(ctx cudadrv.Context, dev int) (bool, error) {
	active, err := c.drv.PrimaryActive(dev)
	if err != nil || !active {
		return false, err
	}
	p, err := c.drv.PrimaryRetain(dev) // active: no activation
	if err != nil {
		return false, err
	}
	c.releasePrimary(dev)
	return p == ctx, nil
}

// primaryGone says whether dev's primary context is no longer the
// incarnation (ctx, id) seen earlier: a reset leaves it inactive, or active
// under a new id. Only device-level calls and calls on the live handle are
// made. A failed query is no answer: not gone (the caller's own call then
// reports the failure).
func (c *Context) primaryGone(dev int, ctx cudadrv.Context, id uint64) bool {
	primary, err := c.isPrimary(ctx, dev)
	if err != nil {
		return false
	}
	if !primary {
		return true
	}
	now, err := c.drv.ContextID(ctx)
	return err == nil && now != id
}

// MemFree frees memory from MemAlloc.
func (c *Context) MemFree(addr uint64) error {
	const api = "mem_free"
	// The record is taken out first, so that a racing free of the same
	// address finds nothing instead of freeing twice.
	c.mem.mu.Lock()
	a, ok := c.mem.allocs[addr]
	delete(c.mem.allocs, addr)
	c.mem.mu.Unlock()
	if !ok {
		return errorf(ErrInvalid, api, "0x%x was not returned by cucopy_mem_alloc on this context (or is already freed)", addr)
	}
	if a.primary && c.primaryGone(a.device, a.ctx, a.ctxID) {
		logf(LogInfo, "mem_free: 0x%x went with the reset of device %d's primary context", addr, a.device)
	} else if err := c.drv.MemFree(a.ctx, a.kind, addr); err != nil {
		// Still allocated: the record goes back, so the call can be repeated.
		c.mem.mu.Lock()
		c.mem.allocs[addr] = a
		c.mem.mu.Unlock()
		return driverError(api, fmt.Sprintf("0x%x on device %d", addr, a.device), err)
	}
	c.mem.mu.Lock()
	c.freeHandles(addr, a.length) // only once the memory is gone: a failed free keeps them
	c.mem.mu.Unlock()
	if a.ownsPrimary {
		c.releasePrimary(a.device) // allowed after a reset too
	}
	return nil
}

// MemReg pins a host range for every context; the handle also describes
// it for copies.
func (c *Context) MemReg(addr, length uint64, flags uint32) (*MemHandle, error) {
	const api = "mem_reg"
	if flags != 0 {
		return nil, errorf(ErrInvalid, api, "unknown flags 0x%x", flags)
	}
	if addr == 0 || length == 0 || addr > math.MaxUint64-length {
		return nil, errorf(ErrInvalid, api, "range 0x%x + %d is empty or overflows", addr, length)
	}
	info, err := c.drv.MemQuery(addr, c.devices)
	if err != nil {
		return nil, driverError(api, fmt.Sprintf("querying 0x%x", addr), err)
	}
	if info.Managed != 0 || info.Type == cudadrv.MemoryTypeDevice {
		return nil, errorf(ErrInvalid, api, "0x%x is device or managed memory; only host memory can be registered", addr)
	}
	if info.Type == cudadrv.MemoryTypeHost {
		return nil, errorf(ErrAlreadyExists, api, "0x%x is already pinned (cuMemHostAlloc or registered)", addr)
	}
	ctx, dev, owns, err := c.allocContext(api, -1, false)
	if err != nil {
		return nil, err
	}
	if err := c.drv.HostRegister(ctx, addr, length); err != nil {
		if owns {
			c.releasePrimary(dev)
		}
		if resultIs(err, cudadrv.ErrorHostMemoryAlreadyRegistered) {
			return nil, &Error{Status: ErrAlreadyExists, Op: api, Msg: fmt.Sprintf("[0x%x, +%d) overlaps a registered range", addr, length), Err: err}
		}
		return nil, driverError(api, fmt.Sprintf("[0x%x, +%d)", addr, length), err)
	}
	reg := &Registration{addr: addr, length: length, device: dev, ownsPrimary: owns}
	c.mem.mu.Lock()
	destroyed := c.destroyed
	if !destroyed {
		c.mem.regs[reg] = struct{}{}
	}
	c.mem.mu.Unlock()
	if destroyed {
		if err := c.unregister(api, reg); err != nil {
			logf(LogWarn, "mem_reg: unregistering 0x%x after a racing context_destroy: %v", addr, err)
		}
		if owns {
			c.releasePrimary(dev)
		}
		return nil, errorf(ErrHandle, api, "the context was destroyed during the call")
	}
	// What the driver now says of the range: host memory of ctx.
	desc := cudadrv.MemDesc{Ctx: ctx, Type: cudadrv.MemoryTypeHost, Ordinal: int32(dev), PrimaryDevice: -1}
	return &MemHandle{ctx: c, addr: addr, length: length, desc: desc, reg: reg}, nil
}

// dereg unpins a range from MemReg. A registration that is already gone
// (its context reset or destroyed) is forgotten without error.
func (c *Context) dereg(reg *Registration) error {
	const api = "mem_dereg"
	c.mem.mu.Lock()
	_, ok := c.mem.regs[reg]
	delete(c.mem.regs, reg) // taken out first, as in MemFree
	c.mem.mu.Unlock()
	if !ok {
		return errorf(ErrInvalid, api, "the registration is not held by this context: it was made through another cucopy context, or another thread is releasing it")
	}
	if err := c.unregister(api, reg); err != nil {
		// Still registered: the record goes back, the call can be repeated.
		c.mem.mu.Lock()
		c.mem.regs[reg] = struct{}{}
		c.mem.mu.Unlock()
		return err
	}
	if reg.ownsPrimary {
		c.releasePrimary(reg.device) // allowed after a reset too
	}
	return nil
}

// unregister unpins reg's range through a live context, never the
// registering one: the program may have destroyed or reset it, and then the
// registration went with it (no live context, or NOT_REGISTERED: done).
func (c *Context) unregister(api string, reg *Registration) error {
	ctx, dev, owns, err := c.allocContext(api, -1, false)
	if StatusOf(err) == ErrNoDevice {
		logf(LogInfo, "mem_dereg: no live context; [0x%x, +%d) went with its context", reg.addr, reg.length)
		return nil
	}
	if err != nil {
		return err
	}
	if owns {
		defer c.releasePrimary(dev)
	}
	err = c.drv.HostUnregister(ctx, reg.addr)
	if resultIs(err, cudadrv.ErrorHostMemoryNotRegistered) {
		logf(LogInfo, "mem_dereg: [0x%x, +%d) was no longer registered (its context is gone)", reg.addr, reg.length)
		return nil
	}
	if err != nil {
		return driverError(api, fmt.Sprintf("[0x%x, +%d)", reg.addr, reg.length), err)
	}
	return nil
}
