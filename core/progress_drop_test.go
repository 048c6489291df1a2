// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/cudadrv"
	"github.com/cucopy/cucopy/cudadrv/fakedrv"
)

// slowQuery runs a hook at the start of the next QuerySlots: the window
// between progress claiming its slots and answering them.
type slowQuery struct {
	*fakedrv.Driver
	hook atomic.Pointer[func()]
}

func (s *slowQuery) QuerySlots(slots []cudadrv.SlotQuery, first int32) error {
	if f := s.hook.Swap(nil); f != nil {
		(*f)()
	}
	return s.Driver.QuerySlots(slots, first)
}

// Progress drops a slot whose context was reset only after it gave back the
// claims of every slot it polled: dropping takes mu, and a thread holding mu
// may be waiting for one of those claims (here release_context of the other
// device's context). Found in review: before, the two waited for each other
// forever.
func TestProgressDropsEndedSlotsAfterTheClaims(t *testing.T) {
	fd := fakedrv.New(2)
	drv := &slowQuery{Driver: fd}
	cfg, err := core.LoadConfig(func(string) string { return "" })
	require.NoError(t, err)
	ctx, err := core.NewContext(drv, cfg)
	require.NoError(t, err)
	p := defaultParams()
	p.ThreadMode = core.ThreadMulti
	ifc, err := ctx.OpenIface(p)
	require.NoError(t, err)
	ep, err := ifc.NewEp()
	require.NoError(t, err)
	var devs [2]uint64
	for d := range 2 {
		devs[d] = fd.AllocDevice(d, 64)
	}
	host := fd.AllocHost(64, true)
	for d := range 2 {
		st, err := ep.Zcopy(true, []core.IOV{{Buffer: uintptr(host), Length: 64}}, devs[d], 0)
		require.NoError(t, err)
		require.Equal(t, core.InProgress, st)
	}
	// The device whose primary context sorts first is reset; the other is released meanwhile.
	reset, other := 0, 1
	if fd.Primary(1) < fd.Primary(0) {
		reset, other = 1, 0
	}
	otherID := fd.ID(fd.Primary(other))
	fd.ResetPrimary(reset)
	f := func() {
		go func() { _ = ifc.ReleaseContext(otherID) }()
		time.Sleep(200 * time.Millisecond) // B holds mu and waits for the other slot's claim
	}
	drv.hook.Store(&f)
	done := make(chan struct{})
	go func() { _, _ = ifc.Progress(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Log(string(buf[:n]))
		t.Fatal("deadlock: Progress waits for mu in dropEnded holding the other slot's claim; ReleaseContext holds mu waiting for that claim")
	}
}
