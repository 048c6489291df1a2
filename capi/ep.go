// SPDX-License-Identifier: BSD-3-Clause

// The endpoint's handle table and exports: create, destroy, put/get short
// and zcopy, flush.

package main

/*
#include "capi.h"
#include "cd_shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/cudadrv"
)

var eps = newHandleTable[core.Ep]("ep", C.CAPI_FAST_EPS)

// The C steady state finds an endpoint's iface and lane in the C mirror
// (capi/fast.c).
func init() {
	eps.mirror = func(idx uint32, h uint64, ep *core.Ep) {
		if h == 0 || !ep.Iface().Steady() { // no C steady state for its iface
			C.capi_fast_clear(0, C.uint32_t(idx))
			return
		}
		C.capi_fast_ep_set(C.uint32_t(idx), C.uint64_t(h), unsafe.Pointer(ep.Iface().Fast()), C.int32_t(ep.Lane()))
	}
}

//export cucopyGoEpCreate
func cucopyGoEpCreate(h C.uint64_t, wantOut C.int, out *C.uint64_t) C.int {
	const op = "ep_create"
	return call(ifaces, h, op, func(iface *core.Iface) C.int {
		if wantOut == 0 {
			return failf(core.ErrInvalid, op, "ep_p is NULL")
		}
		ep, err := iface.NewEp()
		if err != nil {
			return fail(err)
		}
		eh := eps.add(ep)
		if eh == 0 {
			return failf(core.ErrNoResource, op, "too many endpoints")
		}
		if iface.Closed() {
			// Closed by another thread between NewEp and add: its close
			// may have swept the table before the add.
			eps.remove(eh)
			return failf(core.ErrHandle, op, "iface is closed")
		}
		*out = C.uint64_t(eh)
		return 0
	})
}

//export cucopyGoEpDestroy
func cucopyGoEpDestroy(h C.uint64_t) C.int {
	// An endpoint holds nothing of its own: its outstanding copies complete
	// through the iface.
	return closing(eps, h, "ep_destroy", func(*core.Ep) C.int {
		eps.remove(uint64(h))
		return 0
	})
}

// cucopyGoEpShort's how: bit 0 put (else get), bit 1 the _memh function.
const (
	shortPut  = 1
	shortMemh = 2
)

//export cucopyGoEpShort
func cucopyGoEpShort(h C.uint64_t, how C.int, buffer C.uintptr_t, memh C.uint64_t, length C.size_t, remote C.uint64_t, remoteMemh C.uint64_t) C.int {
	put := how&shortPut != 0
	op := core.OpName(put, true, how&shortMemh != 0)
	return call(eps, h, op, func(ep *core.Ep) C.int {
		bh, err := memhOf(op, "memh", memh)
		if err != nil {
			return fail(err)
		}
		rh, err := memhOf(op, "remote_memh", remoteMemh)
		if err != nil {
			return fail(err)
		}
		if how&shortMemh == 0 {
			err = ep.Short(put, uintptr(buffer), uint64(length), uint64(remote))
		} else {
			err = ep.ShortMemh(put, uintptr(buffer), bh, uint64(length), uint64(remote), rh)
		}
		if err != nil {
			return fail(err)
		}
		return 0
	})
}

// cucopyGoFastReport reports a copy the C steady state ran (capi/fast.c,
// capi_fast_short's or capi_fast_zcopy's how) and the driver failed (st CD_FAST_FAILED: the call's
// error), or that was issued but left its context with an error
// (CD_FAST_DONE_WARN: logged; a zcopy is then in progress): (entry,
// result) is the driver call. The copy's own outcome, whatever became of
// its endpoint since: no handle is looked up.
//
//export cucopyGoFastReport
func cucopyGoFastReport(how C.int, st C.int, entry C.int32_t, result C.uint32_t) (rc C.int) {
	zcopy := how&C.CAPI_FAST_ZCOPY != 0
	op := core.OpName(how&shortPut != 0, !zcopy, how&shortMemh != 0)
	defer func() {
		if r := recover(); r != nil {
			rc = internalError(op, r, nil)
		}
	}()
	ce := cudadrv.CallError{Entry: cudadrv.Entry(entry), Result: uint32(result)}
	if err := core.FastOutcome(op, st == C.CD_FAST_FAILED, ce); err != nil {
		return fail(err)
	}
	if zcopy {
		return C.int(core.InProgress)
	}
	return 0
}

//export cucopyGoEpZcopy
func cucopyGoEpZcopy(h C.uint64_t, put C.int, iov *C.cucopy_iov_t, iovcnt C.size_t, remote C.uint64_t, comp C.uintptr_t) C.int {
	op := core.OpName(put != 0, false, false)
	return call(eps, h, op, func(ep *core.Ep) C.int {
		if iovcnt == 0 || iovcnt > core.MaxIOV {
			return failf(core.ErrInvalid, op, "iovcnt %d: want 1 to %d", uint64(iovcnt), core.MaxIOV)
		}
		if iov == nil {
			return failf(core.ErrInvalid, op, "iov is NULL")
		}
		v := unsafe.Slice((*core.IOV)(unsafe.Pointer(iov)), int(iovcnt))
		return result(ep.Zcopy(put != 0, v, uint64(remote), uintptr(comp)))
	})
}

// iovMemh is cucopy_iov_memh_t and copyEntry cucopy_copy_t, read in place
// from the caller's array (layouts checked in abi.go); the handles are
// their bits, never Go pointers.
type iovMemh struct {
	buffer uintptr
	length uint64
	memh   uint64
}

type copyEntry struct {
	dst, src         uintptr
	length           uint64
	dstMemh, srcMemh uint64
}

//export cucopyGoEpZcopyMemh
func cucopyGoEpZcopyMemh(h C.uint64_t, put C.int, iov *C.cucopy_iov_memh_t, iovcnt C.size_t, remote C.uint64_t, remoteMemh C.uint64_t, comp C.uintptr_t) C.int {
	op := core.OpName(put != 0, false, true)
	return call(eps, h, op, func(ep *core.Ep) C.int {
		if iovcnt == 0 || iovcnt > core.MaxIOV {
			return failf(core.ErrInvalid, op, "iovcnt %d: want 1 to %d", uint64(iovcnt), core.MaxIOV)
		}
		if iov == nil {
			return failf(core.ErrInvalid, op, "iov is NULL")
		}
		rh, err := memhOf(op, "remote_memh", remoteMemh)
		if err != nil {
			return fail(err)
		}
		var v [core.MaxIOV]core.IOV
		var hs [core.MaxIOV]*core.MemHandle
		for k, e := range unsafe.Slice((*iovMemh)(unsafe.Pointer(iov)), int(iovcnt)) {
			v[k] = core.IOV{Buffer: e.buffer, Length: e.length}
			if hs[k], err = memhOf(op, "iov[].memh", C.uint64_t(e.memh)); err != nil {
				return fail(err)
			}
		}
		return result(ep.ZcopyMemh(put != 0, v[:iovcnt], hs[:iovcnt], uint64(remote), rh, uintptr(comp)))
	})
}

//export cucopyGoEpCopyBatch
func cucopyGoEpCopyBatch(h C.uint64_t, copies *C.cucopy_copy_t, count C.size_t, comp C.uintptr_t) C.int {
	const op = "ep_copy_batch"
	return call(eps, h, op, func(ep *core.Ep) C.int {
		if err := checkEntries(op, count, copies == nil); err != nil {
			return fail(err)
		}
		var b [core.MaxIOV]core.BatchCopy
		var err error
		for k, e := range unsafe.Slice((*copyEntry)(unsafe.Pointer(copies)), int(count)) {
			c := &b[k]
			c.Dst, c.Src, c.Len = uint64(e.dst), uint64(e.src), e.length
			if c.DstH, c.SrcH, err = entryMemhs(op, e.dstMemh, e.srcMemh); err != nil {
				return fail(err)
			}
		}
		return result(ep.Batch(b[:count], uintptr(comp)))
	})
}

// checkEntries checks the array of cucopy_ep_copy_batch or
// cucopy_ep_copy_2d: count entries, NULL or not.
func checkEntries(op string, count C.size_t, null bool) error {
	if count == 0 || count > core.MaxIOV {
		return &core.Error{Status: core.ErrInvalid, Op: op, Msg: fmt.Sprintf("count %d: want 1 to %d", uint64(count), core.MaxIOV)}
	}
	if null {
		return &core.Error{Status: core.ErrInvalid, Op: op, Msg: "copies is NULL"}
	}
	return nil
}

// entryMemhs is the handles of an entry of cucopy_ep_copy_batch or
// cucopy_ep_copy_2d.
func entryMemhs(op string, dst, src uint64) (dh, sh *core.MemHandle, err error) {
	if dh, err = memhOf(op, "copies[].dst_memh", C.uint64_t(dst)); err != nil {
		return nil, nil, err
	}
	sh, err = memhOf(op, "copies[].src_memh", C.uint64_t(src))
	return dh, sh, err
}

// copy2DEntry is cucopy_copy_2d_t, read in place (layout checked in abi.go).
type copy2DEntry struct {
	dst, dstPitch    uintptr
	src, srcPitch    uintptr
	width, height    uint64
	dstMemh, srcMemh uint64
}

//export cucopyGoEpCopy2D
func cucopyGoEpCopy2D(h C.uint64_t, copies *C.cucopy_copy_2d_t, count C.size_t, comp C.uintptr_t) C.int {
	const op = "ep_copy_2d"
	return call(eps, h, op, func(ep *core.Ep) C.int {
		if err := checkEntries(op, count, copies == nil); err != nil {
			return fail(err)
		}
		var b [core.MaxIOV]core.Copy2DEntry
		var err error
		for k, e := range unsafe.Slice((*copy2DEntry)(unsafe.Pointer(copies)), int(count)) {
			c := &b[k]
			c.Dst, c.DstPitch, c.Src, c.SrcPitch = uint64(e.dst), uint64(e.dstPitch), uint64(e.src), uint64(e.srcPitch)
			c.Width, c.Height = e.width, e.height
			if c.DstH, c.SrcH, err = entryMemhs(op, e.dstMemh, e.srcMemh); err != nil {
				return fail(err)
			}
		}
		return result(ep.Copy2D(b[:count], uintptr(comp)))
	})
}

//export cucopyGoEpFlush
func cucopyGoEpFlush(h C.uint64_t, flags C.unsigned, comp C.uintptr_t) C.int {
	const op = "ep_flush"
	return call(eps, h, op, func(ep *core.Ep) C.int {
		if flags != 0 {
			return failf(core.ErrInvalid, op, "unknown flags 0x%x", uint(flags))
		}
		return result(ep.Flush(uintptr(comp), inCallbackOf(ep.Iface())))
	})
}

//export cucopyGoEpFence
func cucopyGoEpFence(h C.uint64_t, flags C.unsigned) C.int {
	const op = "ep_fence"
	return call(eps, h, op, func(ep *core.Ep) C.int {
		if flags != 0 {
			return failf(core.ErrInvalid, op, "unknown flags 0x%x", uint(flags))
		}
		return result(core.OK, ep.Fence())
	})
}
