// SPDX-License-Identifier: BSD-3-Clause

// Package fakedrv is a Go fake of cudadrv.Interface for the core's unit
// tests: N devices with simulated memory backed by Go byte slices, primary
// and user contexts with ids, streams whose work runs only when the test says
// so (Run, Step), fault injection, accounting and strictness checks.
//
// Copy is a port of cudadrv/cd_copy.c and keeps the copy protocol
// (cudadrv/copy.go); conformance_test.go holds it against the C original.
// Device memory has fake addresses; memory the CPU may touch is real Go
// memory, which the caller copies itself on cudadrv.CopyCPU. Every buffer a
// test copies must come from one of the Alloc* helpers or Pageable: an
// address the fake never handed out is a driver error, where the real
// driver would call it host memory.
//
// Files: fakedrv.go the Driver; contexts.go, memory.go, execution.go and
// faults.go the simulated state and its test helpers; interface.go and
// copy.go the cudadrv.Interface methods (copy.go: the port of cd_copy).
package fakedrv

import (
	"sync"

	"github.com/cucopy/cucopy/cudadrv"
)

// Driver is the fake. All methods are safe for concurrent use.
type Driver struct {
	mu       sync.Mutex
	devices  int
	hasCtxID bool
	allocs   []*alloc
	// freed keeps the Go memory behind freed CPU-visible allocations
	// referenced, so that its addresses are never handed out again: a use
	// after free reads as unknown memory, never as a newer allocation.
	freed            [][]byte
	next             map[uint64]uint64 // range base -> next free address
	ctxs             map[cudadrv.Context]*context
	primary          []cudadrv.Context
	nextID           uint64
	nextHandle       uintptr
	current          cudadrv.Context
	streams          map[cudadrv.Stream]owner
	events           map[cudadrv.Event]*event
	pending          []*work // issued, not yet executed, oldest first
	peers            map[[2]cudadrv.Context]bool
	calls            map[string]int
	faults           map[string][]fault
	onCopy           func() // OnCopy
	onDetached       func() // OnDetached
	onDetachedIssued func() // OnDetachedIssued
	activations      int
	violations       []string
	nextBuffer       uint64 // BUFFER_ID of the last allocation
}

var _ cudadrv.Interface = (*Driver)(nil)

// New makes a fake with the given number of devices, all primary contexts inactive.
func New(devices int) *Driver {
	d := &Driver{
		devices: devices, hasCtxID: true, next: map[uint64]uint64{},
		ctxs: map[cudadrv.Context]*context{}, streams: map[cudadrv.Stream]owner{},
		events: map[cudadrv.Event]*event{}, peers: map[[2]cudadrv.Context]bool{},
		calls: map[string]int{}, faults: map[string][]fault{}, nextHandle: 0x1000,
	}
	for dev := 0; dev < devices; dev++ {
		c := &context{handle: d.handle(), dev: dev, primary: true}
		d.ctxs[c.handle] = c
		d.primary = append(d.primary, c.handle)
	}
	return d
}

func (d *Driver) handle() cudadrv.Context { d.nextHandle += 0x10; return cudadrv.Context(d.nextHandle) }

func (d *Driver) newID() uint64 { d.nextID++; return d.nextID }
