// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cucopy/cucopy/cudadrv"
)

// Pageable staging (docs/design.md, "Pageable staging"). The driver copies
// pageable host memory through its own pinned buffers with one CPU thread;
// a piece of at least CUCOPY_STAGE_THRESHOLD bytes between pageable memory
// and a GPU is staged here instead, through a pair of pinned bounce buffers
// of the iface: CPU copies (on up to CUCOPY_STAGE_THREADS threads) and DMAs
// (on the piece's own slot stream, so it stays in order with the
// endpoint's earlier copies) alternate between the two buffers, so that
// chunk i's DMA runs while chunk i+1 is copied on the CPU. Copy answers
// CopyNeedStage for such a piece (cudadrv/copy.go, step 7); stagePiece
// runs it to its end before it returns: a staged piece is done, as a CPU
// copy is. Driver calls (StageStep: push, synchronize, enqueue, pop) are
// made by the calling goroutine only; the goroutines copy memory.
//
// Small staging: two or more consecutive device-to-pageable pieces of an
// operation whose room fits CUCOPY_STAGE_SMALL bytes go through one bounce
// buffer in one step (runSmall): every DMA, then one wait, then the CPU
// copies out. The driver's own path for such copies returns only once each
// is done, one copy at a time.

// stager is an iface's staging settings and its pool of bounce-buffer
// pairs. The pool's lock is a leaf.
type stager struct {
	min     uint64 // cudadrv.CopyOp.StageMin: 0 off
	small   uint64 // cudadrv.CopyOp.StageSmall: 0 off
	chunk   uint64 // one bounce buffer's size
	threads int
	pool    int  // pairs at most per context, in use or free
	memmove bool // CPU copies with goCopy (CUCOPY_STAGE_CPU=memmove), else cpuCopy

	mu     sync.Mutex
	free   []*bounce
	sets   map[poolKey]int // buffers that exist, per context id and kind
	noPool map[uint64]bool // context ids whose pool could not be made: the driver's path
}

// poolKey names one of a context's two pools: pairs of chunks for large
// copies, buffers of CUCOPY_STAGE_SMALL bytes for small staging.
type poolKey struct {
	id    uint64
	small bool
}

// bounce is a pair of bounce buffers: 2 × chunk bytes of our own mmap,
// registered (cuMemHostRegister PORTABLE) in one context. Only copies on
// that context use it, so it never outlives the context it is pinned in:
// it is unregistered before that context is released and just unmapped
// when it was reset (the registration went with it). Memory we map
// ourselves stays mapped whatever happens to the registration, so a DMA
// never touches memory that vanished (cuMemHostAlloc memory would).
type bounce struct {
	mem     []byte
	ctx     cudadrv.Context
	id      uint64
	small   bool // small staging's buffer of stager.smallSize bytes, else a pair of chunks
	suspect bool // a stream wait failed: a DMA may still use it; freed only with its context
}

// init sets the iface's staging up from cfg; nothing is allocated.
func (st *stager) init(cfg Stage) {
	st.chunk, st.threads, st.pool, st.memmove = cfg.Chunk, int(cfg.Threads), int(cfg.Pool), cfg.Memmove
	if !cfg.Off {
		st.min, st.small = cfg.Threshold, cfg.Small
	}
}

// stagePiece runs b.req, which Copy answered CopyNeedStage for, with the
// run that small staging took with it: CopyDone when it was staged (and
// counted; req.Taken still says how many of the operation's pieces went
// with it; a small run without a bounce buffer is copied straight into the
// caller's memory); CopyNeedStage with req.StageMin and req.StageSmall 0
// when a large piece gets no bounce buffer (the caller retries on the
// driver's path);
// CopyNeedSlot when the slot changed meanwhile (the caller retries); an
// error with nothing left in flight.
func (i *Iface) stagePiece(api string, ib *issueBuf, first bool, run []cudadrv.Piece) (cudadrv.CopyStatus, error) {
	req := &ib.req
	if req.Dir == cudadrv.KindH2D && i.nfence.Load() > 0 {
		// The CPU reads the source before any stream could wait: as for a
		// host to host copy, the work before a fence finishes first.
		if err := i.waitFenceCPU(api); err != nil {
			return cudadrv.CopyDriverError, err
		}
	}
	s := int(req.Slot)
	stream := i.pinSlot(s, req)
	if stream == 0 {
		return cudadrv.CopyNeedSlot, nil
	}
	if i.multi {
		defer i.slots[s].DoneUser()
	}
	small := req.Len < req.StageMin  // small staging's run (cudadrv/copy.go, step 7)
	device := int32(i.res[s].device) // the slot is ours (pinSlot) until we return
	b := i.stage.take(i.drv, req.Ctx, req.CtxID, small)
	var err error
	switch {
	case small: // without a buffer too: it takes no event, as the reservation planned
		err = i.runSmall(api, ib, run, stream, device, b)
	case b == nil:
		req.StageMin, req.StageSmall = 0, 0
		return cudadrv.CopyNeedStage, nil
	default:
		err = i.runStaged(api, req, stream, device, b)
	}
	if b != nil {
		i.stage.put(b)
	}
	if err != nil {
		return cudadrv.CopyDriverError, err
	}
	i.countCopy(req, first, run)
	return cudadrv.CopyDone, nil
}

// runSmall copies ib.req and its run, device to pageable memory, on
// stream in one step: each piece's DMA into b (piece k at the sum of the
// earlier pieces' StageSpans, cudadrv/copy.go step 7), one wait for them
// all, then each piece copied out on the CPU. Without a buffer (b nil:
// none could be had) the DMAs go straight into the caller's memory, one
// cuMemcpyAsync each (the driver's batch stages pageable copies slowly),
// and the wait. Whatever fails, no DMA is left running when it returns,
// except behind a failed wait (then b is suspect).
func (i *Iface) runSmall(api string, ib *issueBuf, run []cudadrv.Piece, stream cudadrv.Stream, device int32, b *bounce) error {
	req := &ib.req
	dma := ib.staged[:len(run)+1]
	dma[0] = cudadrv.Piece{Dst: req.Dst, Src: req.Src, Len: req.Len}
	for k := range run {
		dma[k+1] = cudadrv.Piece{Dst: run[k].Dst, Src: run[k].Src, Len: run[k].Len}
	}
	flags := uint32(cudadrv.StageWaitAfter | cudadrv.StageLoop)
	if b != nil {
		if i.runFlags&cudadrv.CopyRunLoop == 0 { // CUCOPY_IOV_BATCH=loop: one cuMemcpyAsync each
			flags = cudadrv.StageWaitAfter
		}
		base, off := uint64(uintptr(unsafe.Pointer(&b.mem[0]))), uint64(0)
		for k := range dma {
			dma[k].Dst = base + off
			off += cudadrv.StageSpan(dma[k].Len)
		}
		if off > uint64(len(b.mem)) { // Copy keeps a run within StageSmall, the buffer's size
			return errorf(ErrInternal, api, "a small staged run of %d bytes exceeds its bounce buffer of %d", off, len(b.mem))
		}
	}
	if err := i.drv.StageStep(req.Ctx, stream, flags, device, cudadrv.KindD2H, dma); err != nil {
		if b != nil {
			b.suspect = true // the wait may have failed: do not reuse b before its context is gone
		}
		return driverError(api, fmt.Sprintf("staging %d copies to pageable memory", len(dma)), err)
	}
	if b == nil {
		return nil
	}
	if err := i.stage.copy(api, req.Dst, dma[0].Dst, req.Len); err != nil {
		return err
	}
	for k := range run {
		if err := i.stage.copy(api, run[k].Dst, dma[k+1].Dst, run[k].Len); err != nil {
			return err
		}
	}
	return nil
}

// pinSlot returns the stream of req's kind on slot s and, on multi-thread
// ifaces, counts the caller a user of the slot (Slot.AddUser: a release
// waits for it); 0 when the slot is no longer req's context's.
func (i *Iface) pinSlot(s int, req *cudadrv.CopyOp) cudadrv.Stream {
	slot := &i.slots[s]
	i.lockSlot(s)
	defer i.unlockSlot(s)
	if id, ctx, lane := slot.Identity(); id != req.CtxID || ctx != req.Ctx || lane != req.Lane {
		return 0
	}
	stream := slot.Stream[req.Kind]
	if stream != 0 && i.multi {
		slot.AddUser()
	}
	return stream
}

// runStaged copies req through b on stream: H2D fills one buffer on the
// CPU while the other one's DMA runs, D2H the reverse. Whatever fails, no
// DMA is left running when it returns, except behind a failed stream wait
// (then b is suspect).
func (i *Iface) runStaged(api string, req *cudadrv.CopyOp, stream cudadrv.Stream, device int32, b *bounce) error {
	st := &i.stage
	base := uint64(uintptr(unsafe.Pointer(&b.mem[0])))
	buf := [2]uint64{base, base + st.chunk}
	chunk := st.chunkFor(req.Len)
	n := req.Len
	step := func(wait bool, dst, src, len uint64) error {
		flags := uint32(0)
		if wait {
			flags = cudadrv.StageWaitBefore
		}
		p := [1]cudadrv.Piece{{Dst: dst, Src: src, Len: len}}
		np := 0
		if len > 0 {
			np = 1
		}
		if err := i.drv.StageStep(req.Ctx, stream, flags, device, req.Dir, p[:np]); err != nil {
			b.suspect = true // the wait may have failed: do not reuse b before its context is gone
			return driverError(api, fmt.Sprintf("staging a pageable copy of %d bytes", n), err)
		}
		return nil
	}
	if req.Dir == cudadrv.KindH2D {
		inflight := false
		for off, k := uint64(0), 0; off < n; off, k = off+chunk, k^1 {
			c := min(chunk, n-off)
			if err := st.copy(api, buf[k], req.Src+off, c); err != nil {
				if inflight {
					_ = step(true, 0, 0, 0) // the previous chunk's DMA reads the other buffer
				}
				return err
			}
			// Wait for the previous chunk's DMA (it read buf[k^1], which
			// the next CPU copy fills), then start this one's.
			if err := step(inflight, req.Dst+off, buf[k], c); err != nil {
				return err
			}
			inflight = true
		}
		return step(true, 0, 0, 0)
	}
	if err := step(false, buf[0], req.Src, min(chunk, n)); err != nil {
		return err
	}
	for off, k := uint64(0), 0; off < n; off, k = off+chunk, k^1 {
		c, next := min(chunk, n-off), off+chunk
		nc := uint64(0)
		if next < n {
			nc = min(chunk, n-next)
		}
		// Wait for this chunk's DMA, start the next one's into the other
		// buffer (its CPU copy finished in the previous round), and copy
		// this chunk out meanwhile.
		if err := step(true, buf[k^1], req.Src+next, nc); err != nil {
			return err
		}
		if err := st.copy(api, req.Dst+off, buf[k], c); err != nil {
			if nc > 0 {
				_ = step(true, 0, 0, 0)
			}
			return err
		}
	}
	return nil
}

// chunkFor is the chunk of a piece of n bytes: a quarter of it (64 KiB
// multiples) so that a piece near the threshold still pipelines, at most
// the configured chunk.
func (st *stager) chunkFor(n uint64) uint64 {
	c := (n/4 + minStageChunk - 1) &^ (minStageChunk - 1)
	return max(min(c, st.chunk), minStageChunk)
}

// minCopyPart is the least a CPU copy thread is given.
const minCopyPart = 256 << 10

// copy copies n bytes on the CPU on up to st.threads goroutines (the
// caller's included); a fault on an unmapped address is ErrInvalid. The
// kernel's copy (cpuCopy) works whatever fault handlers the program
// installed; memmove (goCopy, CUCOPY_STAGE_CPU=memmove) is faster but
// relies on cucopy's fault dispatcher being in place (capi/signals.c).
func (st *stager) copy(api string, dst, src, n uint64) error {
	parts := min(uint64(st.threads), max(n/minCopyPart, 1))
	if parts > 1 {
		return st.copyParts(api, dst, src, n, parts)
	}
	if st.memmove {
		return goCopy(api, dst, src, n)
	}
	return cpuCopy(api, dst, src, n) // on this goroutine: nothing allocated (small staging's path)
}

// copyParts is copy on parts goroutines.
func (st *stager) copyParts(api string, dst, src, n, parts uint64) error {
	one := cpuCopy
	if st.memmove {
		one = goCopy
	}
	per := (n/parts + 63) &^ 63
	var errs [maxStageThreads]error
	var wg sync.WaitGroup
	for p := uint64(1); p < parts && p*per < n; p++ {
		lo := p * per
		hi := min(lo+per, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[p] = one(api, dst+lo, src+lo, hi-lo)
		}()
	}
	errs[0] = one(api, dst, src, min(per, n))
	wg.Wait()
	for _, err := range errs[:parts] {
		if err != nil {
			return err
		}
	}
	return nil
}

// take hands out a free pair registered in context (ctx, id), or with
// small a buffer for small staging, making one while that pool has room;
// nil when none can be had (logged once per context when the pool cannot
// be made there).
func (st *stager) take(drv cudadrv.Interface, ctx cudadrv.Context, id uint64, small bool) *bounce {
	key := poolKey{id, small}
	st.mu.Lock()
	for k, b := range st.free {
		if b.id == id && b.small == small && !b.suspect {
			st.free = append(st.free[:k], st.free[k+1:]...)
			st.mu.Unlock()
			return b
		}
	}
	if st.sets[key] >= st.pool || st.noPool[id] {
		st.mu.Unlock()
		return nil // full: this copy takes the driver's path
	}
	if st.sets == nil {
		st.sets = map[poolKey]int{}
	}
	st.sets[key]++
	st.mu.Unlock()
	size := 2 * st.chunk
	if small {
		size = st.smallSize()
	}
	b, err := newBounce(drv, ctx, id, size)
	if err != nil {
		logf(LogInfo, "pageable staging off in context id %d, the driver stages its pageable copies: %v", id, err)
		st.mu.Lock()
		st.sets[key]--
		if st.noPool == nil {
			st.noPool = map[uint64]bool{}
		}
		st.noPool[id] = true
		st.mu.Unlock()
		return nil
	}
	b.small = small
	return b
}

// smallSize is the size of small staging's buffers: CUCOPY_STAGE_SMALL
// rounded up to whole pages.
func (st *stager) smallSize() uint64 {
	page := uint64(unix.Getpagesize())
	return (st.small + page - 1) &^ (page - 1)
}

// put gives a pair back.
func (st *stager) put(b *bounce) {
	st.mu.Lock()
	st.free = append(st.free, b)
	st.mu.Unlock()
}

func newBounce(drv cudadrv.Interface, ctx cudadrv.Context, id, size uint64) (*bounce, error) {
	mem, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mapping %d bytes of bounce buffers: %w", size, err)
	}
	if err := drv.HostRegister(ctx, uint64(uintptr(unsafe.Pointer(&mem[0]))), size); err != nil {
		_ = unix.Munmap(mem)
		return nil, fmt.Errorf("pinning %d bytes of bounce buffers: %w", size, err)
	}
	return &bounce{mem: mem, ctx: ctx, id: id}, nil
}

// stageRetire frees the pairs of slot s's context before the slot ends
// (under mu, no copy running on the slot): unregistered while the context
// is alive, only unmapped when it ended (its registrations went with it).
// Pairs that copies on the context's other lanes hold come back to the pool
// and are freed when those lanes' slots end. A context id forgets a failed
// pool, so a new attempt is made if it is used again.
func (i *Iface) stageRetire(s int, alive bool) {
	st := &i.stage
	id := i.res[s].id
	st.mu.Lock()
	var gone []*bounce
	kept := st.free[:0]
	for _, b := range st.free {
		if b.id == id {
			gone = append(gone, b)
			key := poolKey{id, b.small}
			if st.sets[key]--; st.sets[key] <= 0 {
				delete(st.sets, key)
			}
		} else {
			kept = append(kept, b)
		}
	}
	st.free = kept
	delete(st.noPool, id)
	st.mu.Unlock()
	for _, b := range gone {
		if alive {
			if err := i.drv.HostUnregister(b.ctx, uint64(uintptr(unsafe.Pointer(&b.mem[0])))); err != nil && !deinitialized(err) && !sticky(err) {
				// Still pinned: unmapping it could hand the pinned range
				// to a later mapping. Left mapped, never used again.
				logf(LogWarn, "unpinning %d bytes of staging buffers of context id %d: %v; left mapped", len(b.mem), id, err)
				continue
			}
		}
		_ = unix.Munmap(b.mem)
	}
}
