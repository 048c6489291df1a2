// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"sync"
	"sync/atomic"

	"github.com/cucopy/cucopy/cudadrv"
)

// Context is a cucopy context: the loaded driver and the memory domain.
type Context struct {
	drv     cudadrv.Interface
	cfg     Config
	devices int
	serial  uint64 // unique in the process, never 0 (Serial)

	mu        sync.Mutex
	ifaces    int  // open ifaces
	destroyed bool // under mu and mem.mu: set by a successful Destroy

	mem memDomain
}

// NewContext creates a context over a loaded driver.
func NewContext(drv cudadrv.Interface, cfg Config) (*Context, error) {
	n, err := drv.DeviceCount()
	if err != nil {
		// No device is not an error for host-only use; the driver says 0.
		return nil, driverError("context_create", "counting devices", err)
	}
	return &Context{drv: drv, cfg: cfg, devices: n, serial: contextSerials.Add(1), mem: memDomain{allocs: map[uint64]*allocation{}, regs: map[*Registration]struct{}{}, handles: map[*MemHandle]struct{}{}}}, nil
}

// contextSerials numbers the contexts of the process, from 1.
var contextSerials atomic.Uint64

// Serial is the context's number, unique in the process and never 0: what
// capi's C side keeps with a memory handle, to tell whose it is.
func (c *Context) Serial() uint64 { return c.serial }

// Driver is the context's driver.
func (c *Context) Driver() cudadrv.Interface { return c.drv }

// Config is the effective configuration.
func (c *Context) Config() Config { return c.cfg }

// DeviceCount is the number of devices the driver shows.
func (c *Context) DeviceCount() int { return c.devices }

// Destroy fails with ErrBusy while ifaces are open on the context or memory
// allocated or registered through it is held; a call racing with it on
// another thread then fails with ErrHandle.
func (c *Context) Destroy() error {
	const api = "context_destroy"
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ifaces > 0 {
		return errorf(ErrBusy, api, "%d iface(s) still open on this context", c.ifaces)
	}
	c.mem.mu.Lock()
	defer c.mem.mu.Unlock()
	if n, m, h := len(c.mem.allocs), len(c.mem.regs), len(c.mem.handles); n+m+h > 0 {
		return errorf(ErrBusy, api, "%d allocation(s), %d registration(s) and %d memory description(s) still held; free or release them first", n, m, h)
	}
	c.destroyed = true
	return nil
}
