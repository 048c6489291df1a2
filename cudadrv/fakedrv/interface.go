// SPDX-License-Identifier: BSD-3-Clause

package fakedrv

// The cudadrv.Interface methods other than the copy path (copy.go) and the
// memory domain (memory.go): device queries, contexts, streams, events.

import (
	"fmt"

	"github.com/cucopy/cucopy/cudadrv"
)

func (d *Driver) Path() string                       { return "fakedrv" }
func (d *Driver) Version() int                       { return 13000 }
func (d *Driver) Capabilities() []cudadrv.Capability { return nil }
func (d *Driver) HasCtxID() bool                     { d.mu.Lock(); defer d.mu.Unlock(); return d.hasCtxID }

func (d *Driver) Error(e cudadrv.CallError) error {
	if e.Result == 0 {
		return nil
	}
	return result(e.Entry.String(), e.Result)
}

func (d *Driver) devCall(method string, dev int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if code := d.enter(method); code != 0 {
		return result(method, code)
	}
	if dev < 0 || dev >= d.devices {
		return result(method, cudadrv.ErrorInvalidDevice)
	}
	return nil
}

func (d *Driver) DeviceCount() (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if code := d.enter("DeviceCount"); code != 0 {
		return 0, result("cuDeviceGetCount", code)
	}
	return d.devices, nil
}

func (d *Driver) DeviceName(dev int) (string, error) {
	return fmt.Sprintf("Fake GPU %d", dev), d.devCall("DeviceName", dev)
}

// DeviceAttribute answers 1, except for the memory interface: an H200's
// HBM3e (3201 MHz, 6144 bits), which the performance model reads.
func (d *Driver) DeviceAttribute(dev, attr int) (int, error) {
	switch attr {
	case cudadrv.AttrMemoryClockRate:
		return 3201000, d.devCall("DeviceAttribute", dev)
	case cudadrv.AttrGlobalMemoryBusWidth:
		return 6144, d.devCall("DeviceAttribute", dev)
	}
	return 1, d.devCall("DeviceAttribute", dev)
}
func (d *Driver) DeviceTotalMem(dev int) (uint64, error) {
	return 80 << 30, d.devCall("DeviceTotalMem", dev)
}
func (d *Driver) DevicePCIBusID(dev int) (string, error) {
	return fmt.Sprintf("0000:%02x:00.0", dev+1), d.devCall("DevicePCIBusID", dev)
}
func (d *Driver) CanAccessPeer(dev, peer int) (bool, error) {
	return dev != peer, d.devCall("CanAccessPeer", dev)
}

func (d *Driver) CurrentContext() (cudadrv.Context, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if code := d.enter("CurrentContext"); code != 0 {
		return 0, result("cuCtxGetCurrent", code)
	}
	return d.current, nil
}

// live returns ctx when it is alive; otherwise it records a violation.
func (d *Driver) live(method string, ctx cudadrv.Context) (*context, error) {
	if code := d.enter(method); code != 0 {
		return nil, result(method, code)
	}
	c := d.ctxs[ctx]
	if c == nil || !c.alive {
		return nil, d.violate(ErrContextDestroyed, "%s on dead or unknown context 0x%x", method, ctx)
	}
	return c, nil
}

func (d *Driver) ContextID(ctx cudadrv.Context) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.live("ContextID", ctx)
	if err != nil {
		return 0, err
	}
	return c.id, nil
}

func (d *Driver) ContextDevice(ctx cudadrv.Context) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.live("ContextDevice", ctx)
	if err != nil {
		return -1, err
	}
	return c.dev, nil
}

func (d *Driver) PrimaryActive(dev int) (bool, error) {
	if err := d.devCall("PrimaryActive", dev); err != nil {
		return false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ctxs[d.primary[dev]].alive, nil
}

func (d *Driver) PrimaryRetain(dev int) (cudadrv.Context, error) {
	if err := d.devCall("PrimaryRetain", dev); err != nil {
		return 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.retain(dev, true), nil
}

func (d *Driver) PrimaryRelease(dev int) error {
	if err := d.devCall("PrimaryRelease", dev); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.release(dev)
}

func (d *Driver) EnablePeer(ctx, peer cudadrv.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.live("EnablePeer", ctx); err != nil {
		return err
	}
	d.peers[[2]cudadrv.Context{ctx, peer}] = true
	return nil
}

// PeerEnabled says whether EnablePeer(ctx, peer) succeeded.
func (d *Driver) PeerEnabled(ctx, peer cudadrv.Context) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peers[[2]cudadrv.Context{ctx, peer}]
}

// owned checks that a handle's context is the live incarnation of ctx.
func (d *Driver) owned(method string, ctx cudadrv.Context, o owner, ok bool, what string, h uintptr) error {
	if !ok {
		return d.violate(ErrInvalidHandle, "%s: unknown %s 0x%x", method, what, h)
	}
	c := d.ctxs[o.ctx]
	if !c.alive || c.id != o.id {
		return d.violate(ErrContextDestroyed, "%s: %s 0x%x of a released/destroyed context (id %d)", method, what, h, o.id)
	}
	if o.ctx != ctx {
		return d.violate(ErrInvalidHandle, "%s: %s 0x%x used under context 0x%x, it belongs to 0x%x", method, what, h, ctx, o.ctx)
	}
	return nil
}

func (d *Driver) StreamCreate(ctx cudadrv.Context) (cudadrv.Stream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.live("StreamCreate", ctx)
	if err != nil {
		return 0, err
	}
	s := cudadrv.Stream(d.handle())
	d.streams[s] = owner{ctx, c.id}
	return s, nil
}

func (d *Driver) streamCall(method string, ctx cudadrv.Context, s cudadrv.Stream) error {
	if code := d.enter(method); code != 0 {
		return result(method, code)
	}
	o, ok := d.streams[s]
	return d.owned(method, ctx, o, ok, "stream", uintptr(s))
}

func (d *Driver) StreamDestroy(ctx cudadrv.Context, s cudadrv.Stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.streamCall("StreamDestroy", ctx, s); err != nil {
		return err
	}
	d.syncStream(s) // the driver lets queued work finish
	delete(d.streams, s)
	return nil
}

func (d *Driver) StreamSynchronize(ctx cudadrv.Context, s cudadrv.Stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.streamCall("StreamSynchronize", ctx, s); err != nil {
		return err
	}
	d.syncStream(s)
	return nil
}

// StreamWaitEvent is cuStreamWaitEvent: later work on s runs after the
// work ev's last record waits for; ev may belong to another live context.
func (d *Driver) StreamWaitEvent(ctx cudadrv.Context, s cudadrv.Stream, ev cudadrv.Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.streamCall("StreamWaitEvent", ctx, s); err != nil {
		return err
	}
	e, ok := d.events[ev]
	if !ok {
		return d.violate(ErrInvalidHandle, "StreamWaitEvent: unknown event 0x%x", ev)
	}
	if c := d.ctxs[e.ctx]; !c.alive || c.id != e.id {
		return d.violate(ErrContextDestroyed, "StreamWaitEvent: event 0x%x of a released/destroyed context (id %d)", ev, e.id)
	}
	if e.item != nil {
		d.pending = append(d.pending, &work{stream: s, run: func() {}, after: []*work{e.item}})
	}
	return nil
}

func (d *Driver) EventCreate(ctx cudadrv.Context) (cudadrv.Event, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.live("EventCreate", ctx)
	if err != nil {
		return 0, err
	}
	e := cudadrv.Event(d.handle())
	d.events[e] = &event{owner: owner{ctx, c.id}}
	return e, nil
}

func (d *Driver) eventCall(method string, ctx cudadrv.Context, ev cudadrv.Event) (*event, error) {
	e, ok := d.events[ev]
	var o owner
	if ok {
		o = e.owner
	}
	return e, d.owned(method, ctx, o, ok, "event", uintptr(ev))
}

func (d *Driver) EventDestroy(ctx cudadrv.Context, ev cudadrv.Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if code := d.enter("EventDestroy"); code != 0 {
		return result("EventDestroy", code)
	}
	if _, err := d.eventCall("EventDestroy", ctx, ev); err != nil {
		return err
	}
	delete(d.events, ev)
	return nil
}

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
		return 0, result("cuDeviceGetP2PAttribute", cudadrv.ErrorInvalidDevice)
	}
	if attr == cudadrv.P2PPerformanceRank {
		return 0, nil
	}
	return 1, nil
}
