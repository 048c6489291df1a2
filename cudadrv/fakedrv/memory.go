// SPDX-License-Identifier: BSD-3-Clause

package fakedrv

import (
	"github.com/cucopy/cucopy/cudadrv"
)

// The memory domain: device identity, what an address is, allocation and
// host registration, over the same allocation table the copies use.

// DeviceUUID is a stable, distinct UUID per device.
func (d *Driver) DeviceUUID(dev int) ([16]byte, error) {
	var u [16]byte
	if err := d.devCall("DeviceUUID", dev); err != nil {
		return u, err
	}
	u[0], u[15] = 0xfa, byte(dev)
	return u, nil
}

// P2PAttribute answers like two NVLink-connected GPUs.
func (d *Driver) P2PAttribute(dev, peer, attr int) (int, error) {
	if err := d.devCall("P2PAttribute", dev); err != nil {
		return 0, err
	}
	if peer == dev || peer < 0 || peer >= d.devices {
		return 0, result("cuDeviceGetP2PAttribute", 101)
	}
	if attr == cudadrv.P2PPerformanceRank {
		return 0, nil
	}
	return 1, nil
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
		return d.alloc(devRange(c.dev, 3), int(bytes), &alloc{typ: memTypeDevice, ctx: ctx, dev: c.dev, managed: true, preferred: cudadrv.DeviceInvalid}), nil
	}
	return d.alloc(1<<40, int(bytes), &alloc{typ: memTypeHost, ctx: ctx, dev: c.dev}), nil
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
			return nil
		}
	}
	return result("cuMemFree", 1)
}

// HostRegister is cd_host_register over memory from Pageable.
func (d *Driver) HostRegister(ctx cudadrv.Context, ptr, bytes uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.live("HostRegister", ctx); err != nil {
		return err
	}
	a := d.find(ptr)
	switch {
	case a == nil:
		return result("cuMemHostRegister", 1)
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
	a := d.find(ptr)
	if a == nil || a.typ != memTypeHost || a.base != ptr {
		return result("cuMemHostUnregister", cudadrv.ErrorHostMemoryNotRegistered)
	}
	a.typ, a.ctx, a.dev = 0, 0, -1
	return nil
}
