// SPDX-License-Identifier: BSD-3-Clause

package fakedrv_test

// Cases of the copy protocol that the C fake cannot produce, so that
// TestCopyConformance cannot hold the port to cd_copy there: they are
// checked here against what cd_copy.c does, read from its code.

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cucopy/cucopy/cudadrv"
	"github.com/cucopy/cucopy/cudadrv/fakedrv"
)

// A device range that starts past the end of its allocation (in the
// unmapped gap the fake leaves after it) crosses the end: cd_copy's check
// is on the offset too, so it cannot wrap around into "fits".
func TestPortRangeStartingPastTheEnd(t *testing.T) {
	d := fakedrv.New(1)
	dev, host := d.AllocDevice(0, 64), d.Pageable(64)
	primary := make([]cudadrv.Context, 1)
	op := cudadrv.CopyOp{Src: host, Dst: dev + 64 + 16, Len: 8}
	assert.Equal(t, cudadrv.CopyOutOfRange, d.Copy(nil, primary, &op, nil, nil))
	assert.Equal(t, int32(1), op.Side, "the destination")
	assert.Empty(t, d.Violations())
}

// Managed memory with no owning context and CopyFallbackCtx but no Ctx
// runs on the calling thread's current context, as in cd_exec_ctx (the
// fallback applies only with a context given).
func TestPortFallbackWithoutContextUsesCurrent(t *testing.T) {
	d := fakedrv.New(1)
	ctx := d.ActivatePrimary(0)
	d.SetCurrent(ctx)
	managed, host := d.AllocManagedUnowned(64), d.Pageable(64)
	primary := make([]cudadrv.Context, 1)
	op := cudadrv.CopyOp{Src: host, Dst: managed, Len: 8, Flags: cudadrv.CopyFallbackCtx}
	assert.Equal(t, cudadrv.CopyNeedSlot, d.Copy(nil, primary, &op, nil, nil))
	assert.Equal(t, ctx, op.Ctx, "the current context")
	assert.Empty(t, d.Violations())
}
