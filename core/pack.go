// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"github.com/cucopy/cucopy/cudadrv"
)

// The pack path of 2-D copies (cudadrv/copy.go, 2-D pieces): rows narrower
// than CUCOPY_2D_PACK_BELOW between device memory and packed pinned host
// memory are gathered (or scattered) inside the device through a scratch
// buffer and cross the bus as one contiguous copy, on the piece's stream.
// The operation stays asynchronous: the scratch belongs to one slot and
// kind and only that stream uses it, so stream order orders its uses.
//
// Each (slot, kind) has at most one scratch buffer, made on first use on
// the slot's context, grown (never shrunk) to the largest piece seen, at
// most maxScratch; freed with the slot's streams (destroyResources), or
// gone with its context when the slot is dropped. A piece larger than
// maxScratch, or any piece of a (slot, kind) whose allocation failed, is a
// plain 2-D copy.

// maxScratch bounds one scratch buffer: 64 MiB (an x-face of a 2048^3
// double array is 32 MiB).
const maxScratch = 64 << 20

// minScratch is the smallest scratch buffer made.
const minScratch = 64 << 10

// scratchSize is the size of a scratch buffer that holds need bytes: a
// power of two from minScratch to maxScratch, 0 when need is above it.
func scratchSize(need uint64) uint64 {
	if need > maxScratch {
		return 0
	}
	size := uint64(minScratch)
	for size < need {
		size <<= 1
	}
	return size
}

// addScratch gives slot s the scratch buffer of req.Kind that req
// (CopyNeedScratch) needs, or makes req a plain 2-D copy when it cannot:
// a piece above maxScratch skips the pack path (CopyNoPack); a failed
// allocation turns the path off for that slot and kind. Under mu.
func (i *Iface) addScratch(s int, req *cudadrv.CopyOp) {
	r := &i.res[s]
	slot := &i.slots[s]
	k := int(req.Kind)
	size := scratchSize(req.Len * req.Height) // checked not to overflow (check2D)
	if size == 0 {
		req.Flags |= cudadrv.CopyNoPack
		return
	}
	i.lockSlot(s)
	old, have := slot.Scratch[k], slot.ScratchSize[k]
	if have < size {
		// Taken away first: a copy issued from now on asks again and
		// waits for mu, so only those queued before use the old one.
		slot.Scratch[k], slot.ScratchSize[k] = 0, 0
	}
	i.unlockSlot(s)
	if have >= size {
		return // made meanwhile
	}
	if old != 0 {
		// Too small. Copies queued on the stream may still use it.
		if err := i.drv.StreamSynchronize(r.ctx, slot.Stream[k]); err != nil {
			logf(LogInfo, "device %d: waiting for the 2-D copies before growing their scratch buffer: %v; plain 2-D copies from now on", r.device, err)
			i.setScratch(s, k, old, have, true) // freed with the slot
			return
		}
		if err := i.drv.MemFree(r.ctx, cudadrv.MemDevice, old); err != nil {
			logf(LogInfo, "device %d: freeing a 2-D scratch buffer to grow it: %v", r.device, err)
		}
	}
	p, err := i.drv.MemAlloc(r.ctx, cudadrv.MemDevice, size)
	if err != nil {
		logf(LogInfo, "device %d: no %d-byte scratch buffer for narrow 2-D rows (%v): plain 2-D copies of kind %s on this context from now on", r.device, size, err, cudadrv.KindName(k))
		i.setScratch(s, k, 0, 0, true)
		return
	}
	i.setScratch(s, k, p, size, false)
}

// setScratch records slot s's scratch buffer of kind k, under its lock;
// off: the pack path is off for it.
func (i *Iface) setScratch(s, k int, p, size uint64, off bool) {
	slot := &i.slots[s]
	i.lockSlot(s)
	slot.Scratch[k], slot.ScratchSize[k] = p, size
	if off {
		slot.ScratchOff |= 1 << k
	}
	i.unlockSlot(s)
}
