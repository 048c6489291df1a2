// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/cudadrv/fakedrv"
)

// rig is one context, iface and endpoint over a fake driver.
type rig struct {
	t      *testing.T
	drv    *fakedrv.Driver
	ctx    *core.Context
	ifc    *core.Iface
	ep     *core.Ep
	closed bool
}

func defaultParams() core.IfaceParams {
	return core.IfaceParams{ThreadMode: core.ThreadSingle, MaxPoll: core.DefaultMaxPoll, MaxEvents: core.DefaultMaxEvents, Lanes: 1}
}

func newRig(t *testing.T, devices int, edit ...func(*core.IfaceParams)) *rig {
	t.Helper()
	return newRigEnv(t, devices, nil, edit...)
}

// perPiece is the environment of a rig whose zcopies issue one piece per
// driver-layer call (CUCOPY_IOV_BATCH=off): the path where consecutive
// pieces join one event by re-recording it.
var perPiece = map[string]string{"CUCOPY_IOV_BATCH": "off"}

// newRigEnv is newRig with CUCOPY_* variables set in env. Small staging
// is off unless env sets CUCOPY_STAGE_SMALL: the rigs' tests take the
// fake's pageable memory as their host side, and small staging would
// finish their device-to-host copies in the call instead of queueing them
// (stage_test.go tests it).
func newRigEnv(t *testing.T, devices int, env map[string]string, edit ...func(*core.IfaceParams)) *rig {
	t.Helper()
	drv := fakedrv.New(devices)
	cfg, err := core.LoadConfig(func(k string) string {
		if v, ok := env[k]; ok || k != "CUCOPY_STAGE_SMALL" {
			return v
		}
		return "0"
	})
	require.NoError(t, err)
	ctx, err := core.NewContext(drv, cfg)
	require.NoError(t, err)
	p := defaultParams()
	for _, e := range edit {
		e(&p)
	}
	ifc, err := ctx.OpenIface(p)
	require.NoError(t, err)
	ep, err := ifc.NewEp()
	require.NoError(t, err)
	r := &rig{t: t, drv: drv, ctx: ctx, ifc: ifc, ep: ep}
	t.Cleanup(func() {
		if !r.closed {
			assert.NoError(t, ifc.Close())
		}
		assert.Empty(t, drv.Violations(), "driver misuse")
	})
	return r
}

func (r *rig) close() {
	r.t.Helper()
	r.closed = true
	require.NoError(r.t, r.ifc.Close())
}

type done struct {
	comp uintptr
	st   core.Status
}

// progress runs Progress once and takes every ready completion.
func (r *rig) progress() (int, []done) {
	r.t.Helper()
	n, err := r.ifc.Progress()
	require.NoError(r.t, err)
	return n, r.ready()
}

func (r *rig) ready() []done {
	var out []done
	r.ifc.RunCallbacks(func(comp uintptr, st core.Status) { out = append(out, done{comp, st}) })
	return out
}

// zcopy issues one zcopy and checks that status and error agree.
func (r *rig) zcopy(put bool, iov []core.IOV, remote uint64, comp uintptr) (core.Status, error) {
	r.t.Helper()
	st, err := r.ep.Zcopy(put, iov, remote, comp)
	if err == nil {
		assert.Contains(r.t, []core.Status{core.OK, core.InProgress}, st)
	} else {
		assert.Equal(r.t, st, core.StatusOf(err), "status %d vs error %v", st, err)
	}
	return st, err
}

// put is a one-entry put zcopy: local -> remote.
func (r *rig) put(local, remote uint64, n int, comp uintptr) core.Status {
	r.t.Helper()
	st, _ := r.zcopy(true, []core.IOV{{Buffer: uintptr(local), Length: uint64(n)}}, remote, comp)
	return st
}

// get is a one-entry get zcopy: remote -> local.
func (r *rig) get(local, remote uint64, n int, comp uintptr) core.Status {
	r.t.Helper()
	st, _ := r.zcopy(false, []core.IOV{{Buffer: uintptr(local), Length: uint64(n)}}, remote, comp)
	return st
}

// fill writes a pattern depending on seed and returns a copy of it.
func fill(drv *fakedrv.Driver, addr uint64, n int, seed byte) []byte {
	b := drv.Bytes(addr, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return append([]byte(nil), b...)
}

// eqBytes compares byte slices and reports the first difference only.
func eqBytes(t *testing.T, want, got []byte, msgAndArgs ...any) bool {
	t.Helper()
	if bytes.Equal(want, got) {
		return true
	}
	k := 0
	for k < len(want) && k < len(got) && want[k] == got[k] {
		k++
	}
	return assert.Fail(t, fmt.Sprintf("bytes differ at offset %d (len want %d, got %d)", k, len(want), len(got)), msgAndArgs...)
}

func readable(t *testing.T, fd int) bool {
	t.Helper()
	var buf [8]byte
	n, err := unix.Read(fd, buf[:])
	if err == unix.EAGAIN {
		return false
	}
	require.NoError(t, err)
	require.Equal(t, 8, n)
	return true
}

func errStatus(t *testing.T, want core.Status, err error) {
	t.Helper()
	require.Error(t, err)
	assert.Equal(t, want, core.StatusOf(err), "error: %v", err)
}
