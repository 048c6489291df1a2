// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
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
	mu     sync.Mutex
	allocs map[uint64]*allocation
	regs   map[*Registration]struct{}
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
	const op = "mem_query"
	if length > 0 && addr > math.MaxUint64-length {
		return MemAttr{}, errorf(ErrInvalid, op, "range 0x%x + %d overflows", addr, length)
	}
	info, err := c.drv.MemQuery(addr, c.devices)
	if err != nil {
		return MemAttr{}, driverError(op, fmt.Sprintf("querying 0x%x", addr), err)
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
			return a, errorf(ErrOutOfRange, op, "range [0x%x, +%d) crosses the end of its allocation [0x%x, +%d)", addr, length, a.Base, a.Length)
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
func (c *Context) allocContext(op string, device int, activate bool) (ctx cudadrv.Context, dev int, owns bool, err error) {
	cur, err := c.drv.CurrentContext()
	if err != nil {
		return 0, 0, false, driverError(op, "reading the current context", err)
	}
	if cur != 0 {
		curDev, err := c.drv.ContextDevice(cur)
		if err != nil {
			return 0, 0, false, driverError(op, "the current context's device", err)
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
			return 0, 0, false, errorf(ErrNoDevice, op, "no current CUDA context, no device given and no active primary context")
		}
	}
	if device >= c.devices {
		return 0, 0, false, errorf(ErrInvalid, op, "device %d: the driver shows %d device(s)", device, c.devices)
	}
	active, err := c.drv.PrimaryActive(device)
	if err != nil {
		return 0, 0, false, driverError(op, fmt.Sprintf("primary context state of device %d", device), err)
	}
	if !active && !activate {
		return 0, 0, false, errorf(ErrNoDevice, op, "the primary context of device %d is not active; cucopy does not activate it without CUCOPY_MEM_ALLOC_FLAG_ACTIVATE", device)
	}
	ctx, err = c.drv.PrimaryRetain(device)
	if err != nil {
		return 0, 0, false, driverError(op, fmt.Sprintf("retaining the primary context of device %d", device), err)
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
	const op = "mem_alloc"
	if length == 0 {
		return 0, errorf(ErrInvalid, op, "length 0")
	}
	kind := map[MemType]cudadrv.MemKind{MemCUDA: cudadrv.MemDevice, MemCUDAManaged: cudadrv.MemManaged, MemHost: cudadrv.MemHost}[typ]
	ctx, dev, owns, err := c.allocContext(op, device, activate)
	if err != nil {
		return 0, err
	}
	ptr, err := c.drv.MemAlloc(ctx, kind, length)
	if err != nil {
		if owns {
			c.releasePrimary(dev)
		}
		var r *cudadrv.Result
		if errors.As(err, &r) && r.Code == 2 { // CUDA_ERROR_OUT_OF_MEMORY
			return 0, &Error{Status: ErrNoMemory, Op: op, Msg: fmt.Sprintf("%d bytes on device %d", length, dev), Err: err}
		}
		return 0, driverError(op, fmt.Sprintf("%d bytes on device %d", length, dev), err)
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
		return 0, errorf(ErrHandle, op, "the context was destroyed during the call")
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
	const op = "mem_free"
	// The record is taken out first, so that a racing free of the same
	// address finds nothing instead of freeing twice.
	c.mem.mu.Lock()
	a, ok := c.mem.allocs[addr]
	delete(c.mem.allocs, addr)
	c.mem.mu.Unlock()
	if !ok {
		return errorf(ErrInvalid, op, "0x%x was not returned by cucopy_mem_alloc on this context (or is already freed)", addr)
	}
	if a.primary && c.primaryGone(a.device, a.ctx, a.ctxID) {
		logf(LogInfo, "mem_free: 0x%x went with the reset of device %d's primary context", addr, a.device)
	} else if err := c.drv.MemFree(a.ctx, a.kind, addr); err != nil {
		// Still allocated: the record goes back, so the call can be repeated.
		c.mem.mu.Lock()
		c.mem.allocs[addr] = a
		c.mem.mu.Unlock()
		return driverError(op, fmt.Sprintf("0x%x on device %d", addr, a.device), err)
	}
	if a.ownsPrimary {
		c.releasePrimary(a.device) // allowed after a reset too
	}
	return nil
}

// MemReg pins a host range for every context.
func (c *Context) MemReg(addr, length uint64, flags uint32) (*Registration, error) {
	const op = "mem_reg"
	if flags != 0 {
		return nil, errorf(ErrInvalid, op, "unknown flags 0x%x", flags)
	}
	if addr == 0 || length == 0 || addr > math.MaxUint64-length {
		return nil, errorf(ErrInvalid, op, "range 0x%x + %d is empty or overflows", addr, length)
	}
	info, err := c.drv.MemQuery(addr, c.devices)
	if err != nil {
		return nil, driverError(op, fmt.Sprintf("querying 0x%x", addr), err)
	}
	if info.Managed != 0 || info.Type == cudadrv.MemoryTypeDevice {
		return nil, errorf(ErrInvalid, op, "0x%x is device or managed memory; only host memory can be registered", addr)
	}
	if info.Type == cudadrv.MemoryTypeHost {
		return nil, errorf(ErrAlreadyExists, op, "0x%x is already pinned (cuMemHostAlloc or registered)", addr)
	}
	ctx, dev, owns, err := c.allocContext(op, -1, false)
	if err != nil {
		return nil, err
	}
	if err := c.drv.HostRegister(ctx, addr, length); err != nil {
		if owns {
			c.releasePrimary(dev)
		}
		var r *cudadrv.Result
		if errors.As(err, &r) && r.Code == cudadrv.ErrorHostMemoryAlreadyRegistered {
			return nil, &Error{Status: ErrAlreadyExists, Op: op, Msg: fmt.Sprintf("[0x%x, +%d) overlaps a registered range", addr, length), Err: err}
		}
		return nil, driverError(op, fmt.Sprintf("[0x%x, +%d)", addr, length), err)
	}
	reg := &Registration{addr: addr, length: length, device: dev, ownsPrimary: owns}
	c.mem.mu.Lock()
	destroyed := c.destroyed
	if !destroyed {
		c.mem.regs[reg] = struct{}{}
	}
	c.mem.mu.Unlock()
	if destroyed {
		if err := c.unregister(op, reg); err != nil {
			logf(LogWarn, "mem_reg: unregistering 0x%x after a racing context_destroy: %v", addr, err)
		}
		if owns {
			c.releasePrimary(dev)
		}
		return nil, errorf(ErrHandle, op, "the context was destroyed during the call")
	}
	return reg, nil
}

// MemDereg unpins a range from MemReg. A registration that is already gone
// (its context reset or destroyed) is forgotten without error.
func (c *Context) MemDereg(reg *Registration) error {
	const op = "mem_dereg"
	c.mem.mu.Lock()
	_, ok := c.mem.regs[reg]
	delete(c.mem.regs, reg) // taken out first, as in MemFree
	c.mem.mu.Unlock()
	if !ok {
		return errorf(ErrInvalid, op, "the registration is not held by this context: it was made through another cucopy context, or another thread is releasing it")
	}
	if err := c.unregister(op, reg); err != nil {
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
func (c *Context) unregister(op string, reg *Registration) error {
	ctx, dev, owns, err := c.allocContext(op, -1, false)
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
	var r *cudadrv.Result
	if errors.As(err, &r) && r.Code == cudadrv.ErrorHostMemoryNotRegistered {
		logf(LogInfo, "mem_dereg: [0x%x, +%d) was no longer registered (its context is gone)", reg.addr, reg.length)
		return nil
	}
	if err != nil {
		return driverError(op, fmt.Sprintf("[0x%x, +%d)", reg.addr, reg.length), err)
	}
	return nil
}

// DeviceAttr is what one device is (cucopy_device_attr_t).
type DeviceAttr struct {
	Name          string
	UUID          [16]byte
	PCIBusID      string
	NUMANode      int
	TotalMemory   uint64
	CCMajor       int
	CCMinor       int
	PeerMask      uint64
	PrimaryActive bool
}

// Device attribute bits for DeviceQuery (CUCOPY_DEVICE_ATTR_*).
const (
	DevAttrName = 1 << iota
	DevAttrUUID
	DevAttrPCIBusID
	DevAttrNUMANode
	DevAttrMemory
	DevAttrComputeCapability
	DevAttrPeers
	DevAttrPrimaryActive
)

// DeviceQuery reads the fields of mask for device dev.
func (c *Context) DeviceQuery(dev int, mask uint64) (DeviceAttr, error) {
	const op = "device_query"
	var a DeviceAttr
	if dev < 0 || dev >= c.devices {
		return a, errorf(ErrInvalid, op, "device %d: the driver shows %d device(s)", dev, c.devices)
	}
	var err error
	wrap := func(what string, e error) error { return driverError(op, fmt.Sprintf("%s of device %d", what, dev), e) }
	if mask&DevAttrName != 0 {
		if a.Name, err = c.drv.DeviceName(dev); err != nil {
			return a, wrap("name", err)
		}
	}
	if mask&DevAttrUUID != 0 {
		if a.UUID, err = c.drv.DeviceUUID(dev); err != nil {
			return a, wrap("UUID", err)
		}
	}
	if mask&(DevAttrPCIBusID|DevAttrNUMANode) != 0 {
		if a.PCIBusID, err = c.drv.DevicePCIBusID(dev); err != nil {
			return a, wrap("PCI bus id", err)
		}
		a.PCIBusID = strings.ToLower(a.PCIBusID)
		a.NUMANode = numaNode(a.PCIBusID)
	}
	if mask&DevAttrMemory != 0 {
		if a.TotalMemory, err = c.drv.DeviceTotalMem(dev); err != nil {
			return a, wrap("memory size", err)
		}
	}
	if mask&DevAttrComputeCapability != 0 {
		if a.CCMajor, err = c.drv.DeviceAttribute(dev, cudadrv.AttrComputeCapabilityMaj); err != nil {
			return a, wrap("compute capability", err)
		}
		if a.CCMinor, err = c.drv.DeviceAttribute(dev, cudadrv.AttrComputeCapabilityMin); err != nil {
			return a, wrap("compute capability", err)
		}
	}
	if mask&DevAttrPeers != 0 {
		for p := 0; p < c.devices && p < 64; p++ {
			if p == dev {
				continue
			}
			can, err := c.drv.CanAccessPeer(dev, p)
			if err != nil {
				return a, wrap(fmt.Sprintf("peer access to device %d", p), err)
			}
			if can {
				a.PeerMask |= 1 << uint(p)
			}
		}
	}
	if mask&DevAttrPrimaryActive != 0 {
		if a.PrimaryActive, err = c.drv.PrimaryActive(dev); err != nil {
			return a, wrap("primary context state", err)
		}
	}
	return a, nil
}

// numaNode reads the host NUMA node of a PCI device from sysfs; -1 if unknown.
func numaNode(busID string) int {
	b, err := os.ReadFile("/sys/bus/pci/devices/" + busID + "/numa_node")
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// PeerAttr is what the driver says of an ordered device pair (cucopy_peer_attr_t).
type PeerAttr struct {
	CanAccess       bool
	AccessSupported bool
	NativeAtomics   bool
	PerformanceRank int
}

// PeerQuery reads the driver's peer attributes of (dev, peer).
func (c *Context) PeerQuery(dev, peer int) (PeerAttr, error) {
	const op = "device_peer_query"
	var a PeerAttr
	if dev < 0 || dev >= c.devices || peer < 0 || peer >= c.devices || dev == peer {
		return a, errorf(ErrInvalid, op, "device pair (%d, %d): want two different devices of %d", dev, peer, c.devices)
	}
	var err error
	if a.CanAccess, err = c.drv.CanAccessPeer(dev, peer); err != nil {
		return a, driverError(op, "peer access", err)
	}
	attr := func(which int) (int, error) {
		v, err := c.drv.P2PAttribute(dev, peer, which)
		if err != nil {
			return 0, driverError(op, fmt.Sprintf("P2P attribute %d of (%d, %d)", which, dev, peer), err)
		}
		return v, nil
	}
	v, err := attr(cudadrv.P2PAccessSupported)
	if err != nil {
		return a, err
	}
	a.AccessSupported = v != 0
	if v, err = attr(cudadrv.P2PNativeAtomics); err != nil {
		return a, err
	}
	a.NativeAtomics = v != 0
	if a.PerformanceRank, err = attr(cudadrv.P2PPerformanceRank); err != nil {
		return a, err
	}
	return a, nil
}
