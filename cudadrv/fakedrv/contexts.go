// SPDX-License-Identifier: BSD-3-Clause

package fakedrv

// Contexts: primary contexts (retain, release, reset), user contexts, and
// the test helpers that drive them.

import (
	"github.com/cucopy/cucopy/cudadrv"
)

type context struct {
	handle  cudadrv.Context
	id      uint64
	dev     int
	primary bool
	alive   bool // user: not destroyed; primary: active
	retains int  // primary only
	poison  uint32
}

// owner identifies a context incarnation: a reset primary keeps its handle
// but gets a new id.
type owner struct {
	ctx cudadrv.Context
	id  uint64
}

// ActivatePrimary is the program retaining dev's primary context (activating
// it when inactive). It does not count as an activation by the library.
func (d *Driver) ActivatePrimary(dev int) cudadrv.Context {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.retain(dev, false)
}

func (d *Driver) retain(dev int, byLibrary bool) cudadrv.Context {
	c := d.ctxs[d.primary[dev]]
	if !c.alive {
		c.alive, c.id = true, d.newID()
		if byLibrary {
			d.activations++
		}
	}
	c.retains++
	return c.handle
}

// ReleasePrimary is the program releasing one retain; the last one deactivates the context.
func (d *Driver) ReleasePrimary(dev int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.release(dev)
}

func (d *Driver) release(dev int) error {
	c := d.ctxs[d.primary[dev]]
	if c.retains == 0 {
		return d.violate(ErrInvalidContext, "PrimaryRelease(%d) without a retain", dev)
	}
	if c.retains--; c.retains == 0 {
		c.alive, c.poison = false, 0
	}
	return nil
}

// ResetPrimary is cuDevicePrimaryCtxReset: the context loses every resource and
// becomes inactive; retains stay, the next activation gives it a new id.
func (d *Driver) ResetPrimary(dev int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.ctxs[d.primary[dev]]
	c.alive, c.poison, c.id = false, 0, 0
}

// PrimaryRetains is the retain count of dev's primary context.
func (d *Driver) PrimaryRetains(dev int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ctxs[d.primary[dev]].retains
}

// Activations counts primary contexts activated through the Interface (PrimaryRetain).
func (d *Driver) Activations() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.activations
}

// Primary is the handle of dev's primary context (active or not).
func (d *Driver) Primary(dev int) cudadrv.Context { return d.primary[dev] }

// CreateContext is cuCtxCreate on dev.
func (d *Driver) CreateContext(dev int) cudadrv.Context {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := &context{handle: d.handle(), id: d.newID(), dev: dev, alive: true}
	d.ctxs[c.handle] = c
	return c.handle
}

// DestroyContext is cuCtxDestroy: its streams and events die with it.
func (d *Driver) DestroyContext(ctx cudadrv.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ctxs[ctx].alive = false
}

// ID is the current id of a context.
func (d *Driver) ID(ctx cudadrv.Context) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ctxs[ctx].id
}

// SetCurrent sets the context CurrentContext reports (one for the whole fake).
func (d *Driver) SetCurrent(ctx cudadrv.Context) { d.mu.Lock(); d.current = ctx; d.mu.Unlock() }

// SetHasCtxID simulates a driver without cuCtxGetId (contexts keyed by handle).
func (d *Driver) SetHasCtxID(has bool) { d.mu.Lock(); d.hasCtxID = has; d.mu.Unlock() }

// Poison gives ctx a sticky error: its copies, queries and arms fail with code.
func (d *Driver) Poison(ctx cudadrv.Context, code uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ctxs[ctx].poison = code
}
