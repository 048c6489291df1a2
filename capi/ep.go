// SPDX-License-Identifier: BSD-3-Clause

// The endpoint's handle table and exports: create, destroy, put/get short
// and zcopy, flush.

package main

/*
#include "capi.h"
*/
import "C"

import (
	"unsafe"

	"github.com/cucopy/cucopy/core"
)

var eps = newHandleTable[core.Ep]("ep", 1<<16)

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

//export cucopyGoEpShort
func cucopyGoEpShort(h C.uint64_t, put C.int, buffer C.uintptr_t, length C.size_t, remote C.uint64_t) C.int {
	op := core.OpName(put != 0, true)
	return call(eps, h, op, func(ep *core.Ep) C.int {
		if err := ep.Short(put != 0, uintptr(buffer), uint64(length), uint64(remote)); err != nil {
			return fail(err)
		}
		return 0
	})
}

//export cucopyGoEpZcopy
func cucopyGoEpZcopy(h C.uint64_t, put C.int, iov *C.cucopy_iov_t, iovcnt C.size_t, remote C.uint64_t, comp C.uintptr_t) C.int {
	op := core.OpName(put != 0, false)
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
