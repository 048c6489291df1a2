// SPDX-License-Identifier: BSD-3-Clause

// The memory-domain exports on a context: cucopy_mem_query, mem_alloc,
// mem_free, mem_reg, mem_describe and mem_dereg with the memory handles'
// table.

package main

/*
#include "capi.h"
*/
import "C"

import (
	"unsafe"

	"github.com/cucopy/cucopy/core"
)

var memhs = newHandleTable[core.MemHandle]("memh", C.CAPI_FAST_MEMHS)

// The C steady state checks a memory handle and takes its description from
// the C mirror (capi/fast.c).
func init() {
	memhs.mirror = func(idx uint32, h uint64, mh *core.MemHandle) {
		// A handle whose memory was freed while it was being added
		// (cucopy_mem_free's unmirrorIf ran before the add) stays out:
		// the flag is set before that scan takes the table's lock.
		if h == 0 || mh.Freed() {
			C.capi_fast_clear(1, C.uint32_t(idx))
			return
		}
		addr, length := mh.Range()
		desc := mh.Desc()
		C.capi_fast_memh_set(C.uint32_t(idx), C.uint64_t(h), C.uint64_t(mh.Context().Serial()),
			C.uint64_t(addr), C.uint64_t(length), boolInt(mh.Classified()), unsafe.Pointer(&desc))
	}
}

const (
	memAttrKnown = C.CUCOPY_MEM_ATTR_MEM_TYPE | C.CUCOPY_MEM_ATTR_PINNED | C.CUCOPY_MEM_ATTR_DEVICE |
		C.CUCOPY_MEM_ATTR_CONTEXT_ID | C.CUCOPY_MEM_ATTR_ALLOCATION | C.CUCOPY_MEM_ATTR_FLAGS | C.CUCOPY_MEM_ATTR_ACCESS
	memAllocParamsKnown = C.CUCOPY_MEM_ALLOC_PARAM_LENGTH | C.CUCOPY_MEM_ALLOC_PARAM_MEM_TYPE |
		C.CUCOPY_MEM_ALLOC_PARAM_DEVICE | C.CUCOPY_MEM_ALLOC_PARAM_FLAGS
)

//export cucopyGoMemQuery
func cucopyGoMemQuery(h C.uint64_t, addr C.uintptr_t, length C.size_t, attr *C.cucopy_mem_attr_t) C.int {
	const op = "mem_query"
	return call(contexts, h, op, func(ctx *core.Context) C.int {
		if attr == nil {
			return failf(core.ErrInvalid, op, "attr is NULL")
		}
		mask := uint64(attr.field_mask)
		if err := checkMask(op, mask, memAttrKnown); err != nil {
			return fail(err)
		}
		if addr == 0 {
			return failf(core.ErrInvalid, op, "addr is NULL")
		}
		a, err := ctx.MemQuery(uint64(addr), uint64(length))
		if err != nil {
			return fail(err)
		}
		if mask&C.CUCOPY_MEM_ATTR_MEM_TYPE != 0 {
			attr.mem_type = C.cucopy_memory_type_t(a.Type)
		}
		if mask&C.CUCOPY_MEM_ATTR_PINNED != 0 {
			attr.pinned = boolInt(a.Pinned)
		}
		if mask&C.CUCOPY_MEM_ATTR_DEVICE != 0 {
			attr.device = C.int(a.Device)
		}
		if mask&C.CUCOPY_MEM_ATTR_CONTEXT_ID != 0 {
			attr.context_id = C.uint64_t(a.ContextID)
		}
		if mask&C.CUCOPY_MEM_ATTR_ALLOCATION != 0 {
			attr.base_address, attr.alloc_length = C.uint64_t(a.Base), C.size_t(a.Length)
		}
		if mask&C.CUCOPY_MEM_ATTR_FLAGS != 0 {
			attr.flags = C.uint64_t(a.Flags)
			attr.preferred_location = C.int(a.PreferredLocation)
		}
		if mask&C.CUCOPY_MEM_ATTR_ACCESS != 0 {
			attr.access_mask = C.uint64_t(a.AccessMask)
		}
		return 0
	})
}

//export cucopyGoMemAlloc
func cucopyGoMemAlloc(h C.uint64_t, params *C.cucopy_mem_alloc_params_t, wantOut C.int, out *C.uint64_t) C.int {
	const op = "mem_alloc"
	return call(contexts, h, op, func(ctx *core.Context) C.int {
		if wantOut == 0 {
			return failf(core.ErrInvalid, op, "addr_p is NULL")
		}
		if params == nil {
			return failf(core.ErrInvalid, op, "params is NULL (the length is required)")
		}
		mask := uint64(params.field_mask)
		if err := checkMask(op, mask, memAllocParamsKnown); err != nil {
			return fail(err)
		}
		if mask&C.CUCOPY_MEM_ALLOC_PARAM_LENGTH == 0 || params.length == 0 {
			return failf(core.ErrInvalid, op, "length missing or 0")
		}
		typ, device, activate := core.MemCUDA, -1, false
		if mask&C.CUCOPY_MEM_ALLOC_PARAM_MEM_TYPE != 0 {
			typ = core.MemType(params.mem_type)
			if typ != core.MemHost && typ != core.MemCUDA && typ != core.MemCUDAManaged {
				return failf(core.ErrInvalid, op, "mem_type %d", int(typ))
			}
		}
		if mask&C.CUCOPY_MEM_ALLOC_PARAM_DEVICE != 0 {
			if device = int(params.device); device < 0 {
				return failf(core.ErrInvalid, op, "device %d", device)
			}
		}
		if mask&C.CUCOPY_MEM_ALLOC_PARAM_FLAGS != 0 {
			if params.flags&^C.CUCOPY_MEM_ALLOC_FLAG_ACTIVATE != 0 {
				return failf(core.ErrInvalid, op, "unknown flags 0x%x", uint(params.flags))
			}
			activate = params.flags&C.CUCOPY_MEM_ALLOC_FLAG_ACTIVATE != 0
		}
		p, err := ctx.MemAlloc(typ, device, activate, uint64(params.length))
		if err != nil {
			return fail(err)
		}
		*out = C.uint64_t(p)
		return 0
	})
}

//export cucopyGoMemFree
func cucopyGoMemFree(h C.uint64_t, addr C.uintptr_t) C.int {
	return call(contexts, h, "mem_free", func(ctx *core.Context) C.int {
		if err := ctx.MemFree(uint64(addr)); err != nil {
			return fail(err)
		}
		// The handles inside it now fail in Go, with its message.
		memhs.unmirrorIf((*core.MemHandle).Freed)
		return 0
	})
}

//export cucopyGoMemReg
func cucopyGoMemReg(h C.uint64_t, addr C.uintptr_t, length C.size_t, flags C.unsigned, wantOut C.int, out *C.uint64_t) C.int {
	const op = "mem_reg"
	return call(contexts, h, op, func(ctx *core.Context) C.int {
		if wantOut == 0 {
			return failf(core.ErrInvalid, op, "memh_p is NULL")
		}
		h, err := ctx.MemReg(uint64(addr), uint64(length), uint32(flags))
		return addMemh(op, ctx, h, err, out)
	})
}

//export cucopyGoMemDescribe
func cucopyGoMemDescribe(h C.uint64_t, addr C.uintptr_t, length C.size_t, wantOut C.int, out *C.uint64_t) C.int {
	const op = "mem_describe"
	return call(contexts, h, op, func(ctx *core.Context) C.int {
		if wantOut == 0 {
			return failf(core.ErrInvalid, op, "memh_p is NULL")
		}
		mh, err := ctx.MemDescribe(uint64(addr), uint64(length))
		return addMemh(op, ctx, mh, err, out)
	})
}

// addMemh gives C a handle for a new memory handle.
func addMemh(op string, ctx *core.Context, h *core.MemHandle, err error, out *C.uint64_t) C.int {
	if err != nil {
		return fail(err)
	}
	mh := memhs.add(h)
	if mh == 0 {
		if err := ctx.MemDereg(h); err != nil {
			return fail(err)
		}
		return failf(core.ErrNoResource, op, "too many memory handles")
	}
	*out = C.uint64_t(mh)
	return 0
}

// memhOf is the memory handle h names (0: none) for a copy; what names the
// argument in the message.
func memhOf(op, what string, h C.uint64_t) (*core.MemHandle, error) {
	if h == 0 {
		return nil, nil
	}
	e := memhs.entry(uint64(h))
	if e == nil {
		return nil, &core.Error{Status: core.ErrHandle, Op: op, Msg: what + ": invalid memory handle (released, or never made)"}
	}
	return e.obj, nil
}

//export cucopyGoMemDereg
func cucopyGoMemDereg(h C.uint64_t, memh C.uint64_t) C.int {
	const op = "mem_dereg"
	return call(contexts, h, op, func(ctx *core.Context) C.int {
		return call(memhs, memh, op, func(reg *core.MemHandle) C.int {
			if err := ctx.MemDereg(reg); err != nil {
				return fail(err) // still registered: the handle stays for a retry
			}
			memhs.remove(uint64(memh))
			return 0
		})
	})
}
