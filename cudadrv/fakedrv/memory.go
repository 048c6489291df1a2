// SPDX-License-Identifier: BSD-3-Clause

package fakedrv

// The simulated memory: the allocation table the copies use, the test
// helpers that allocate (Alloc*, Pageable) and look at it (Bytes), and the
// memory domain of cudadrv.Interface (MemQuery, MemAlloc, registration).

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cucopy/cucopy/cudadrv"
)

const (
	memTypeHost   = cudadrv.MemoryTypeHost
	memTypeDevice = cudadrv.MemoryTypeDevice
	allocAlign    = 1 << 12
	// Device memory has fake addresses, with an unmapped gap after every
	// allocation. Memory the CPU may touch (pageable, pinned, registered,
	// managed) is real Go memory at its own address, as the caller's CPU
	// copy (cudadrv.CopyCPU) needs, with hostTail bytes of it after the
	// allocation that belong to none.
	allocGap          = 1 << 16
	hostTail          = allocAlign
	deviceBase uint64 = 1 << 44
)

type alloc struct {
	base    uint64
	data    []byte
	typ     uint32 // 0 pageable, memTypeHost, memTypeDevice
	ctx     cudadrv.Context
	dev     int
	managed bool
	// preferred is managed memory's preferred location (cudadrv.DeviceCPU,
	// a device, or cudadrv.DeviceInvalid).
	preferred int32
	id        uint64 // BUFFER_ID: unique per allocation
	ctxGen    uint64 // the owning context's incarnation when allocated (memory dies with it)
	gap       uint64 // the addresses after data that still belong to it
	foreign   bool   // the caller's own memory, registered (HostRegister): gone at unregistration
}

// cpu says whether the CPU may touch the allocation's memory.
func (a *alloc) cpu() bool { return a.typ != memTypeDevice || a.managed }

// alloc records a: device memory at the next address of rangeBase, memory
// the CPU may touch in Go memory (which d.allocs keeps alive; rangeBase 0).
func (d *Driver) alloc(rangeBase uint64, n int, a *alloc) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a.cpu() {
		mem := make([]byte, max(n, 1)+hostTail)
		a.base, a.data, a.gap = uint64(uintptr(unsafe.Pointer(&mem[0]))), mem[:n], hostTail
	} else {
		addr := d.next[rangeBase]
		if addr == 0 {
			addr = rangeBase
		}
		size := (uint64(max(n, 1)) + allocAlign - 1) &^ (allocAlign - 1)
		d.next[rangeBase] = addr + size + allocGap
		a.base, a.data, a.gap = addr, make([]byte, n), allocGap
	}
	d.nextBuffer++
	a.id = d.nextBuffer
	d.allocs = append(d.allocs, a)
	return a.base
}

func devRange(dev int, sub uint64) uint64 { return deviceBase*uint64(dev+1) + sub<<40 }

// AllocDevice allocates device memory owned by dev's primary context, which
// it activates the way the CUDA runtime's cudaMalloc does (a program retain).
func (d *Driver) AllocDevice(dev, n int) uint64 {
	ctx := d.ActivatePrimary(dev)
	return d.alloc(devRange(dev, 0), n, &alloc{typ: memTypeDevice, ctx: ctx, dev: dev})
}

// AllocCtx allocates device memory owned by ctx (e.g. a CreateContext context).
func (d *Driver) AllocCtx(ctx cudadrv.Context, n int) uint64 {
	d.mu.Lock()
	dev := d.ctxs[ctx].dev
	d.mu.Unlock()
	return d.alloc(devRange(dev, 1), n, &alloc{typ: memTypeDevice, ctx: ctx, dev: dev})
}

// AllocVMM allocates device memory of dev with no owning context (VMM, pools).
func (d *Driver) AllocVMM(dev, n int) uint64 {
	return d.alloc(devRange(dev, 2), n, &alloc{typ: memTypeDevice, dev: dev})
}

// AllocManaged allocates managed memory owned by dev's primary context (activated).
func (d *Driver) AllocManaged(dev, n int) uint64 {
	ctx := d.ActivatePrimary(dev)
	return d.alloc(0, n, &alloc{typ: memTypeDevice, ctx: ctx, dev: dev, managed: true, preferred: cudadrv.DeviceInvalid})
}

// AllocManagedUnowned allocates managed memory with neither context nor device.
func (d *Driver) AllocManagedUnowned(n int) uint64 {
	return d.alloc(0, n, &alloc{typ: memTypeDevice, dev: -1, managed: true, preferred: cudadrv.DeviceInvalid})
}

// AllocHost allocates host memory CUDA knows, pinned or registered (the
// fake does not tell them apart).
func (d *Driver) AllocHost(n int, pinned bool) uint64 {
	return d.alloc(0, n, &alloc{typ: memTypeHost, dev: -1})
}

// Pageable allocates plain host memory the driver does not know.
func (d *Driver) Pageable(n int) uint64 {
	return d.alloc(0, n, &alloc{dev: -1})
}

func (d *Driver) find(addr uint64) *alloc {
	for _, a := range d.allocs { // an address in the gap after an allocation belongs to it
		if addr >= a.base && addr < a.base+uint64(len(a.data))+a.gap && !d.vanished(a) {
			return a
		}
	}
	return nil
}

// span is the backing of [addr, addr+n), nil when it leaves its allocation.
func (d *Driver) span(addr uint64, n uint64) []byte {
	a := d.find(addr)
	if a == nil || addr-a.base > uint64(len(a.data)) || n > uint64(len(a.data))-(addr-a.base) {
		return nil
	}
	return a.data[addr-a.base : addr-a.base+n]
}

// Bytes is the backing memory of [addr, addr+n): fill it, check it. It
// panics when the range is not inside one allocation.
func (d *Driver) Bytes(addr uint64, n int) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.span(addr, uint64(n))
	if b == nil {
		panic(fmt.Sprintf("fakedrv: [0x%x, +%d) is not allocated", addr, n))
	}
	return b
}

// MemQuery is cd_mem_query.
func (d *Driver) MemQuery(ptr uint64, devices int) (cudadrv.MemInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	info := cudadrv.MemInfo{Ordinal: -1, Preferred: cudadrv.DeviceInvalid}
	if code := d.enter("MemQuery"); code != 0 {
		return info, result("cuPointerGetAttributes", code)
	}
	a := d.find(ptr)
	if a == nil || a.typ == 0 {
		return info, nil
	}
	info.Type, info.Ctx, info.Ordinal = a.typ, a.ctx, int32(a.dev)
	info.Start, info.Size, info.BufferID = a.base, uint64(len(a.data)), a.id
	if c := d.ctxs[a.ctx]; c != nil && d.hasCtxID {
		info.CtxID = c.id
	}
	switch {
	case a.managed:
		info.Managed = 1
		info.Preferred = a.preferred
	case a.typ == memTypeDevice && a.ctx == 0:
		info.VMM, info.VMMLocationType, info.VMMLocationID = 1, cudadrv.MemLocationDevice, int32(a.dev)
		info.AccessMask = 1 << uint(a.dev)
	}
	return info, nil
}

// SetPreferred sets managed memory's preferred location (cuMemAdvise).
func (d *Driver) SetPreferred(ptr uint64, loc int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.find(ptr).preferred = int32(loc)
}

// MemAlloc is cd_mem_alloc.
func (d *Driver) MemAlloc(ctx cudadrv.Context, kind cudadrv.MemKind, bytes uint64) (uint64, error) {
	d.mu.Lock()
	c, err := d.live("MemAlloc", ctx)
	if err == nil {
		if code := d.fault("MemAlloc"); code != 0 {
			err = result("cuMemAlloc", code)
		}
	}
	d.mu.Unlock()
	if err != nil {
		return 0, err
	}
	switch kind {
	case cudadrv.MemDevice:
		return d.alloc(devRange(c.dev, 0), int(bytes), &alloc{typ: memTypeDevice, ctx: ctx, dev: c.dev, ctxGen: c.id}), nil
	case cudadrv.MemManaged:
		return d.alloc(0, int(bytes), &alloc{typ: memTypeDevice, ctx: ctx, dev: c.dev, managed: true, preferred: cudadrv.DeviceInvalid}), nil
	}
	return d.alloc(0, int(bytes), &alloc{typ: memTypeHost, ctx: ctx, dev: c.dev}), nil
}

// MemFree is cd_mem_free: the range reads as unknown memory afterwards.
func (d *Driver) MemFree(ctx cudadrv.Context, kind cudadrv.MemKind, ptr uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.live("MemFree", ctx); err != nil {
		return err
	}
	for i, a := range d.allocs {
		if a.base == ptr && a.typ != 0 {
			d.allocs = append(d.allocs[:i], d.allocs[i+1:]...)
			if a.cpu() {
				d.freed = append(d.freed, a.data)
			}
			return nil
		}
	}
	return result("cuMemFree", ErrInvalidValue)
}

// HostRegister is cd_host_register over memory from Pageable, or over
// memory the caller mapped itself (core's staging pool): that must be
// mapped (mincore), and is known to the fake until it is unregistered.
func (d *Driver) HostRegister(ctx cudadrv.Context, ptr, bytes uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.live("HostRegister", ctx); err != nil {
		return err
	}
	a := d.find(ptr)
	switch {
	case a == nil && d.registerForeign(ctx, ptr, bytes):
		return nil
	case a == nil:
		return result("cuMemHostRegister", ErrInvalidValue)
	case a.typ != 0:
		return result("cuMemHostRegister", cudadrv.ErrorHostMemoryAlreadyRegistered)
	}
	a.typ, a.ctx, a.dev = memTypeHost, ctx, d.ctxs[ctx].dev
	return nil
}

// HostUnregister is cd_host_unregister.
func (d *Driver) HostUnregister(ctx cudadrv.Context, ptr uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.ctxs[ctx]; c == nil || !c.alive {
		return d.violate(ErrContextDestroyed, "HostUnregister of 0x%x under dead or unknown context 0x%x", ptr, ctx)
	}
	a := d.find(ptr)
	if a == nil || a.typ != memTypeHost || a.base != ptr {
		return result("cuMemHostUnregister", cudadrv.ErrorHostMemoryNotRegistered)
	}
	a.typ, a.ctx, a.dev = 0, 0, -1
	if a.foreign { // the caller's memory again: unknown to the driver
		for k, b := range d.allocs {
			if b == a {
				d.allocs = append(d.allocs[:k], d.allocs[k+1:]...)
				break
			}
		}
	}
	return nil
}

// vanished says whether a is a registration of the caller's memory whose
// context incarnation ended: it went with it, the memory is the caller's
// again (and may be unmapped).
func (d *Driver) vanished(a *alloc) bool {
	c := d.ctxs[a.ctx]
	return a.foreign && (c == nil || !c.alive || c.id != a.ctxGen)
}

// Foreign counts the live registrations of memory the fake did not hand
// out (HostRegister).
func (d *Driver) Foreign() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, a := range d.allocs {
		if a.foreign && !d.vanished(a) {
			n++
		}
	}
	return n
}

// registerForeign records [ptr, +bytes), memory the fake did not hand out,
// as registered host memory of ctx if it is page-aligned and mapped.
func (d *Driver) registerForeign(ctx cudadrv.Context, ptr, bytes uint64) bool {
	page := uint64(unix.Getpagesize())
	if ptr == 0 || bytes == 0 || ptr%page != 0 {
		return false
	}
	vec := make([]byte, (bytes+page-1)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(ptr), uintptr(bytes), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return false // not mapped
	}
	d.nextBuffer++
	// The address's bits as a pointer (memory Go does not own; go vet's
	// uintptr-to-pointer check stays quiet).
	data := unsafe.Slice(*(**byte)(unsafe.Pointer(&ptr)), bytes)
	kept := d.allocs[:0]
	for _, a := range d.allocs {
		if !d.vanished(a) {
			kept = append(kept, a)
		}
	}
	d.allocs = append(kept, &alloc{base: ptr, data: data,
		typ: memTypeHost, ctx: ctx, dev: d.ctxs[ctx].dev, id: d.nextBuffer, foreign: true, ctxGen: d.ctxs[ctx].id})
	return true
}
