// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/internal/drvtest"
)

// A run of 16 entries is one cuMemcpyBatchAsync, except device to pageable
// host memory, which the driver's batch stages about five times slower than
// single copies (measured on an H200): one cuMemcpyAsync per entry there.
// Counted by the C fake driver.
func TestRunBatchExceptD2HPageable(t *testing.T) {
	_, iface, ep, dev := openOnDriver(t, core.IfaceParams{ThreadMode: core.ThreadSingle, MaxPoll: 16, MaxEvents: 64})
	if !drvtest.IsFake() {
		t.Skip("counts the fake driver's calls")
	}
	pinned, err := drvtest.AllocHost(0, 4096)
	require.NoError(t, err)
	pageable := make([]byte, 4096)
	for _, c := range []struct {
		name             string
		put              bool
		host             uintptr
		batches, singles int64
	}{
		{"h2d pageable", true, uintptr(unsafe.Pointer(&pageable[0])), 1, 0},
		{"d2h pinned", false, uintptr(pinned), 1, 0},
		{"d2h pageable", false, uintptr(unsafe.Pointer(&pageable[0])), 0, 16},
	} {
		var iov [16]core.IOV
		for k := range iov {
			iov[k] = core.IOV{Buffer: c.host + uintptr(64*k), Length: 8}
		}
		if _, err := ep.Zcopy(c.put, iov[:1], dev, 0); err != nil { // the slot, stream and event
			t.Fatal(err)
		}
		for n, _ := iface.Progress(); n == 0; n, _ = iface.Progress() {
		}
		b, s := drvtest.CallCount("cuMemcpyBatchAsync"), drvtest.CallCount("cuMemcpyAsync")
		st, err := ep.Zcopy(c.put, iov[:], dev, 0)
		require.NoError(t, err, c.name)
		assert.Equal(t, core.InProgress, st, c.name)
		assert.Equal(t, c.batches, drvtest.CallCount("cuMemcpyBatchAsync")-b, "%s: batches", c.name)
		assert.Equal(t, c.singles, drvtest.CallCount("cuMemcpyAsync")-s, "%s: single copies", c.name)
		for n, _ := iface.Progress(); n == 0; n, _ = iface.Progress() {
		}
	}
}
