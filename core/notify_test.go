// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/cudadrv/fakedrv"
)

// Arm on a context with a sticky error answers BUSY, not an error: the
// failed query is progress's work, which fails the pieces.
func TestArmStickyContextIsBusy(t *testing.T) {
	r := newRig(t, 2)
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 1))
	r.drv.Poison(r.drv.Primary(0), fakedrv.ErrIllegalAddress)
	st, err := r.ifc.Arm(core.EventSendComp)
	require.NoError(t, err)
	assert.Equal(t, core.ErrBusy, st)
	_, comps := r.progress()
	assert.Equal(t, []done{{1, core.ErrCUDA}}, comps)
}

func TestArm(t *testing.T) {
	r := newRig(t, 2)
	fd, err := r.ifc.EventFD()
	require.NoError(t, err)
	require.GreaterOrEqual(t, fd, 0)
	fd2, err := r.ifc.EventFD()
	require.NoError(t, err)
	assert.Equal(t, fd, fd2, "one eventfd per iface")

	st, err := r.ifc.Arm(core.EventSendComp)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st, "armed with nothing in flight")
	st, err = r.ifc.Arm(1 << 5)
	errStatus(t, core.ErrInvalid, err)
	assert.Equal(t, core.ErrInvalid, st)

	dev0, dev1, host := r.drv.AllocDevice(0, 64), r.drv.AllocDevice(1, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev0, 8, 1))
	require.Equal(t, core.InProgress, r.put(host, dev1, 8, 2))
	st, err = r.ifc.Arm(core.EventSendComp)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st)
	assert.False(t, readable(t, fd), "nothing finished yet")
	r.drv.Step(1)
	assert.True(t, readable(t, fd), "device 0's work finished")

	// finished in the driver, not yet progressed: busy
	st, err = r.ifc.Arm(core.EventSendComp)
	require.NoError(t, err)
	assert.Equal(t, core.ErrBusy, st)
	_, err = r.ifc.Progress()
	require.NoError(t, err)
	// completion waiting to run: busy, even for events == 0
	st, err = r.ifc.Arm(core.EventSendComp)
	require.NoError(t, err)
	assert.Equal(t, core.ErrBusy, st)
	st, err = r.ifc.Arm(0)
	require.NoError(t, err)
	assert.Equal(t, core.ErrBusy, st)
	assert.Equal(t, []done{{1, 0}}, r.ready())

	st, err = r.ifc.Arm(core.EventSendComp)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st)
	assert.False(t, readable(t, fd))
	r.drv.Run()
	assert.True(t, readable(t, fd))
	_, comps := r.progress()
	assert.Equal(t, []done{{2, 0}}, comps)
	// 2 queues armed, then device 0's head found complete (busy), then device 1's queue
	assert.Equal(t, 4, r.drv.Calls("Arm"))
}

// Arm drains the fd: a stale wake-up does not survive a new arm.
func TestArmDrainsFD(t *testing.T) {
	r := newRig(t, 1)
	fd, err := r.ifc.EventFD()
	require.NoError(t, err)
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 1))
	st, _ := r.ifc.Arm(core.EventSendComp)
	require.Equal(t, core.OK, st)
	r.drv.Run()
	_, comps := r.progress()
	require.Equal(t, []done{{1, 0}}, comps)
	st, _ = r.ifc.Arm(core.EventSendComp)
	require.Equal(t, core.OK, st)
	assert.False(t, readable(t, fd))
}

func TestArmDriverError(t *testing.T) {
	r := newRig(t, 1)
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 1))
	r.drv.Fail("Arm", 1, fakedrv.ErrIllegalAddress)
	st, err := r.ifc.Arm(core.EventSendComp)
	errStatus(t, core.ErrCUDA, err)
	assert.Equal(t, core.ErrCUDA, st)
	st, err = r.ifc.Arm(core.EventSendComp)
	require.NoError(t, err)
	assert.Equal(t, core.OK, st)
}

// Arm on a reset context reports the canceled work as ready.
func TestArmAfterReset(t *testing.T) {
	r := newRig(t, 1)
	dev, host := r.drv.AllocDevice(0, 64), r.drv.Pageable(64)
	require.Equal(t, core.InProgress, r.put(host, dev, 8, 1))
	r.drv.ResetPrimary(0)
	st, err := r.ifc.Arm(core.EventSendComp)
	require.NoError(t, err)
	assert.Equal(t, core.ErrBusy, st)
	assert.Equal(t, []done{{1, core.ErrCanceled}}, r.ready())
	assert.Empty(t, r.drv.Violations())
}
