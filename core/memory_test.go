// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/cudadrv"
)

func TestMemQueryKinds(t *testing.T) {
	r := newRig(t, 2)
	dev1 := r.drv.AllocDevice(1, 4096)
	managed := r.drv.AllocManaged(0, 4096)
	r.drv.SetPreferred(managed, 1)
	pinned := r.drv.AllocHost(4096, true)
	pageable := r.drv.Pageable(4096)
	vmm := r.drv.AllocVMM(1, 4096)

	a, err := r.ctx.MemQuery(dev1+100, 100)
	require.NoError(t, err)
	assert.Equal(t, core.MemCUDA, a.Type)
	assert.Equal(t, 1, a.Device)
	assert.Equal(t, r.drv.ID(r.drv.Primary(1)), a.ContextID)
	assert.Equal(t, dev1, a.Base, "an interior pointer resolves to its allocation")
	assert.Equal(t, uint64(4096), a.Length)
	assert.Equal(t, uint64(1<<1), a.AccessMask)

	a, err = r.ctx.MemQuery(managed, 8)
	require.NoError(t, err)
	assert.Equal(t, core.MemCUDAManaged, a.Type)
	assert.Equal(t, 1, a.PreferredLocation)
	assert.NotZero(t, a.Flags&core.MemFlagPreferred)

	a, err = r.ctx.MemQuery(pinned, 8)
	require.NoError(t, err)
	assert.Equal(t, core.MemHost, a.Type)
	assert.True(t, a.Pinned)

	a, err = r.ctx.MemQuery(pageable, 8)
	require.NoError(t, err)
	assert.Equal(t, core.MemHost, a.Type)
	assert.False(t, a.Pinned)
	assert.Zero(t, a.Base)

	a, err = r.ctx.MemQuery(vmm, 8)
	require.NoError(t, err)
	assert.Equal(t, core.MemCUDA, a.Type)
	assert.NotZero(t, a.Flags&core.MemFlagVMM)
	assert.Zero(t, a.ContextID, "VMM memory has no owning context")
	assert.Equal(t, 1, a.Device)

	_, err = r.ctx.MemQuery(dev1+4000, 200)
	errStatus(t, core.ErrOutOfRange, err)
}

func TestMemAllocContextChoice(t *testing.T) {
	r := newRig(t, 2)
	// No current context, device 1's primary inactive: refused, nothing activated.
	_, err := r.ctx.MemAlloc(core.MemCUDA, 1, false, 64)
	errStatus(t, core.ErrNoDevice, err)
	_, err = r.ctx.MemAlloc(core.MemCUDA, -1, false, 64)
	errStatus(t, core.ErrNoDevice, err)
	assert.Zero(t, r.drv.Activations(), "the library activated a primary context")

	// With ACTIVATE: retained until free.
	p, err := r.ctx.MemAlloc(core.MemCUDA, 1, true, 64)
	require.NoError(t, err)
	assert.Equal(t, 1, r.drv.PrimaryRetains(1))
	a, err := r.ctx.MemQuery(p, 64)
	require.NoError(t, err)
	assert.Equal(t, 1, a.Device)
	assert.NotZero(t, a.Flags&core.MemFlagAllocated)
	require.NoError(t, r.ctx.MemFree(p))
	assert.Zero(t, r.drv.PrimaryRetains(1))
	a, err = r.ctx.MemQuery(p, 8)
	require.NoError(t, err)
	assert.Equal(t, core.MemHost, a.Type, "freed memory is never device memory")

	// The current context is used when it is on the requested device.
	user := r.drv.CreateContext(0)
	r.drv.SetCurrent(user)
	p, err = r.ctx.MemAlloc(core.MemCUDAManaged, 0, false, 64)
	require.NoError(t, err)
	a, err = r.ctx.MemQuery(p, 64)
	require.NoError(t, err)
	assert.Equal(t, r.drv.ID(user), a.ContextID)
	assert.Equal(t, core.MemCUDAManaged, a.Type)
	require.NoError(t, r.ctx.MemFree(p))
	h, err := r.ctx.MemAlloc(core.MemHost, -1, false, 64)
	require.NoError(t, err)
	a, err = r.ctx.MemQuery(h, 64)
	require.NoError(t, err)
	assert.True(t, a.Pinned)
	require.NoError(t, r.ctx.MemFree(h))
	r.drv.SetCurrent(0)

	errStatus(t, core.ErrInvalid, r.ctx.MemFree(h))
	_, err = r.ctx.MemAlloc(core.MemCUDA, 7, true, 64)
	errStatus(t, core.ErrInvalid, err)
	_, err = r.ctx.MemAlloc(core.MemCUDA, 0, true, 0)
	errStatus(t, core.ErrInvalid, err)
}

// A context is busy while memory it allocated or registered is held, and
// nothing can be opened on it or allocated through it once destroyed.
func TestDestroyWithMemoryHeld(t *testing.T) {
	r := newRig(t, 1)
	r.close()
	p, err := r.ctx.MemAlloc(core.MemCUDA, 0, true, 64)
	require.NoError(t, err)
	buf := r.drv.Pageable(4096)
	reg, err := r.ctx.MemReg(buf, 4096, 0)
	require.NoError(t, err)
	errStatus(t, core.ErrBusy, r.ctx.Destroy())
	require.NoError(t, r.ctx.MemFree(p))
	errStatus(t, core.ErrBusy, r.ctx.Destroy())
	require.NoError(t, r.ctx.MemDereg(reg))
	require.NoError(t, r.ctx.Destroy())
	assert.Zero(t, r.drv.PrimaryRetains(0), "the allocation's primary retain went with the free")

	_, err = r.ctx.OpenIface(core.IfaceParams{ThreadMode: core.ThreadSingle, MaxPoll: 16, MaxEvents: 64})
	errStatus(t, core.ErrHandle, err)
	_, err = r.ctx.MemAlloc(core.MemCUDA, 0, true, 64)
	errStatus(t, core.ErrHandle, err)
	r.drv.ActivatePrimary(0) // the program's: a context for the registration
	_, err = r.ctx.MemReg(buf, 4096, 0)
	errStatus(t, core.ErrHandle, err)
	// Nothing left behind by the refused calls: the allocation was freed,
	// the range is not pinned, the primary retain given back.
	assert.Equal(t, 2, r.drv.Calls("MemAlloc"))
	assert.Equal(t, 2, r.drv.Calls("MemFree"))
	a, err := r.ctx.MemQuery(buf, 8)
	require.NoError(t, err)
	assert.False(t, a.Pinned)
	assert.Equal(t, 1, r.drv.PrimaryRetains(0), "only the program's retain")
}

func TestMemRegDereg(t *testing.T) {
	r := newRig(t, 2)
	buf := r.drv.Pageable(8192)
	_, err := r.ctx.MemReg(buf, 8192, 0)
	errStatus(t, core.ErrNoDevice, err) // no context at all: never activates one

	r.drv.ActivatePrimary(0)
	reg, err := r.ctx.MemReg(buf, 8192, 0)
	require.NoError(t, err)
	a, err := r.ctx.MemQuery(buf+100, 8)
	require.NoError(t, err)
	assert.True(t, a.Pinned)
	assert.NotZero(t, a.Flags&core.MemFlagRegistered)

	_, err = r.ctx.MemReg(buf, 8192, 0)
	errStatus(t, core.ErrAlreadyExists, err)
	_, err = r.ctx.MemReg(r.drv.AllocDevice(0, 64), 64, 0)
	errStatus(t, core.ErrInvalid, err)
	_, err = r.ctx.MemReg(buf, 8192, 4)
	errStatus(t, core.ErrInvalid, err)
	_, err = r.ctx.MemReg(0, 8, 0)
	errStatus(t, core.ErrInvalid, err)

	require.NoError(t, r.ctx.MemDereg(reg))
	// Not held any more (through the C API the handle itself is gone then,
	// and the call fails with ErrHandle before reaching here).
	errStatus(t, core.ErrInvalid, r.ctx.MemDereg(reg))
	a, err = r.ctx.MemQuery(buf, 8)
	require.NoError(t, err)
	assert.False(t, a.Pinned)

	// A registration that vanished with its context: dereg still succeeds.
	reg, err = r.ctx.MemReg(buf, 8192, 0)
	require.NoError(t, err)
	require.NoError(t, r.drv.HostUnregister(r.drv.Primary(0), buf))
	assert.NoError(t, r.ctx.MemDereg(reg))
}

func TestDeviceAndPeerQuery(t *testing.T) {
	r := newRig(t, 2)
	a, err := r.ctx.DeviceQuery(1, ^uint64(0))
	require.NoError(t, err)
	assert.NotEmpty(t, a.Name)
	assert.Equal(t, byte(1), a.UUID[15])
	assert.Equal(t, uint64(1), a.PeerMask, "device 1 reaches device 0")
	assert.False(t, a.PrimaryActive)
	assert.Equal(t, -1, a.NUMANode, "no such PCI device in sysfs")
	_, err = r.ctx.DeviceQuery(2, ^uint64(0))
	errStatus(t, core.ErrInvalid, err)

	p, err := r.ctx.PeerQuery(0, 1)
	require.NoError(t, err)
	assert.True(t, p.CanAccess && p.AccessSupported && p.NativeAtomics)
	_, err = r.ctx.PeerQuery(1, 1)
	errStatus(t, core.ErrInvalid, err)
	r.drv.Fail("P2PAttribute", 1, 1)
	_, err = r.ctx.PeerQuery(0, 1)
	errStatus(t, core.ErrCUDA, err)
	var res *cudadrv.Result
	assert.ErrorAs(t, err, &res)
}

// Memory of a primary context the program reset went with it: freeing it
// makes no call on the dead incarnation.
func TestMemFreeAfterReset(t *testing.T) {
	r := newRig(t, 2)
	r.drv.ActivatePrimary(1)
	p, err := r.ctx.MemAlloc(core.MemCUDA, 1, false, 64)
	require.NoError(t, err)
	r.drv.ResetPrimary(1)
	frees := r.drv.Calls("MemFree")
	require.NoError(t, r.ctx.MemFree(p))
	assert.Equal(t, frees, r.drv.Calls("MemFree"), "cuMemFree on a reset context")
}
