// SPDX-License-Identifier: BSD-3-Clause

package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include -O2 -std=gnu11 -Wall -Wextra
#include <stdlib.h>
#include "capi.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime/debug"
	"sync/atomic"
	"unsafe"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/cudadrv"
)

// Values shared with include/cucopy.h must agree: each line fails to
// compile (uint8 overflow) unless the two constants are equal.
const (
	_ = uint8(255 + (core.OK-C.CUCOPY_OK)*(core.OK-C.CUCOPY_OK))
	_ = uint8(255 + (core.InProgress-C.CUCOPY_INPROGRESS)*(core.InProgress-C.CUCOPY_INPROGRESS))
	_ = uint8(255 + (core.ErrInvalid-C.CUCOPY_ERR_INVALID_PARAM)*(core.ErrInvalid-C.CUCOPY_ERR_INVALID_PARAM))
	_ = uint8(255 + (core.ErrHandle-C.CUCOPY_ERR_INVALID_HANDLE)*(core.ErrHandle-C.CUCOPY_ERR_INVALID_HANDLE))
	_ = uint8(255 + (core.ErrNoMemory-C.CUCOPY_ERR_NO_MEMORY)*(core.ErrNoMemory-C.CUCOPY_ERR_NO_MEMORY))
	_ = uint8(255 + (core.ErrNoResource-C.CUCOPY_ERR_NO_RESOURCE)*(core.ErrNoResource-C.CUCOPY_ERR_NO_RESOURCE))
	_ = uint8(255 + (core.ErrBusy-C.CUCOPY_ERR_BUSY)*(core.ErrBusy-C.CUCOPY_ERR_BUSY))
	_ = uint8(255 + (core.ErrUnsupport-C.CUCOPY_ERR_UNSUPPORTED)*(core.ErrUnsupport-C.CUCOPY_ERR_UNSUPPORTED))
	_ = uint8(255 + (core.ErrNoDevice-C.CUCOPY_ERR_NO_DEVICE)*(core.ErrNoDevice-C.CUCOPY_ERR_NO_DEVICE))
	_ = uint8(255 + (core.ErrNoDriver-C.CUCOPY_ERR_NO_DRIVER)*(core.ErrNoDriver-C.CUCOPY_ERR_NO_DRIVER))
	_ = uint8(255 + (core.ErrCUDA-C.CUCOPY_ERR_CUDA)*(core.ErrCUDA-C.CUCOPY_ERR_CUDA))
	_ = uint8(255 + (core.ErrForked-C.CUCOPY_ERR_FORKED)*(core.ErrForked-C.CUCOPY_ERR_FORKED))
	_ = uint8(255 + (core.ErrInternal-C.CUCOPY_ERR_INTERNAL)*(core.ErrInternal-C.CUCOPY_ERR_INTERNAL))
	_ = uint8(255 + (core.ErrOutOfRange-C.CUCOPY_ERR_OUT_OF_RANGE)*(core.ErrOutOfRange-C.CUCOPY_ERR_OUT_OF_RANGE))
	_ = uint8(255 + (core.ErrAlreadyExists-C.CUCOPY_ERR_ALREADY_EXISTS)*(core.ErrAlreadyExists-C.CUCOPY_ERR_ALREADY_EXISTS))
	_ = uint8(255 + (core.ErrCanceled-C.CUCOPY_ERR_CANCELED)*(core.ErrCanceled-C.CUCOPY_ERR_CANCELED))
	_ = uint8(255 + (core.ThreadMulti-C.CUCOPY_THREAD_MODE_MULTI)*(core.ThreadMulti-C.CUCOPY_THREAD_MODE_MULTI))
	_ = uint8(255 + (core.LogTrace-C.CUCOPY_LOG_TRACE)*(core.LogTrace-C.CUCOPY_LOG_TRACE))
	_ = uint8(255 + (core.EventSendComp-C.CUCOPY_EVENT_SEND_COMP)*(core.EventSendComp-C.CUCOPY_EVENT_SEND_COMP))
	_ = uint8(255 + (core.MaxIOV - core.MaxIOV))
)

// core.IOV is read in place from the caller's cucopy_iov_t array.
var (
	_ [unsafe.Sizeof(core.IOV{}) - C.sizeof_cucopy_iov_t]struct{}
	_ [C.sizeof_cucopy_iov_t - unsafe.Sizeof(core.IOV{})]struct{}
	_ [unsafe.Offsetof(core.IOV{}.Length) - unsafe.Offsetof(C.cucopy_iov_t{}.length)]struct{}
	_ [unsafe.Offsetof(C.cucopy_iov_t{}.length) - unsafe.Offsetof(core.IOV{}.Length)]struct{}
)

var (
	contexts = newHandleTable[core.Context]("context", 1024)
	ifaces   = newHandleTable[core.Iface]("iface", 4096)
	eps      = newHandleTable[core.Ep]("ep", 1<<16)
)

const (
	contextParamsKnown = C.CUCOPY_CONTEXT_PARAM_DRIVER_PATH | C.CUCOPY_CONTEXT_PARAM_LOG_LEVEL
	ifaceParamsKnown   = C.CUCOPY_IFACE_PARAM_THREAD_MODE | C.CUCOPY_IFACE_PARAM_MAX_POLL | C.CUCOPY_IFACE_PARAM_MAX_EVENTS
	ifaceAttrKnown     = C.CUCOPY_IFACE_ATTR_CAP_FLAGS | C.CUCOPY_IFACE_ATTR_MAX_IOV | C.CUCOPY_IFACE_ATTR_MAX_POLL |
		C.CUCOPY_IFACE_ATTR_MAX_EVENTS | C.CUCOPY_IFACE_ATTR_THREAD_MODE | C.CUCOPY_IFACE_ATTR_DEVICE_COUNT
)

func setLastError(msg string) {
	if msg == "" {
		return
	}
	C.cucopy_set_last_error((*C.char)(unsafe.Pointer(unsafe.StringData(msg))), C.size_t(len(msg)))
}

// fail records err as the thread's last error and returns its status.
func fail(err error) C.int {
	setLastError(err.Error())
	return C.int(core.StatusOf(err))
}

func failf(st core.Status, op, format string, args ...any) C.int {
	return fail(&core.Error{Status: st, Op: op, Msg: fmt.Sprintf(format, args...)})
}

// result maps a core (status, error) pair to the C return value.
func result(st core.Status, err error) C.int {
	if err != nil {
		return fail(err)
	}
	return C.int(st)
}

// internalError turns a panic inside an export into CUCOPY_ERR_INTERNAL and
// poisons the handle in use, so that the bug cannot spread silently.
func internalError(op string, r any, poison interface{ Store(bool) }) C.int {
	if poison != nil {
		poison.Store(true)
	}
	fmt.Fprintf(os.Stderr, "cucopy error: internal error in %s: %v\n%s", op, r, debug.Stack())
	return failf(core.ErrInternal, op, "internal error: %v (the handle is now unusable)", r)
}

// call runs f on the live object of handle h. A panic inside becomes
// CUCOPY_ERR_INTERNAL and poisons the handle, so that the bug cannot
// spread silently; f does not escape, so the hot path does not allocate.
func call[T any](t *handleTable[T], h C.uint64_t, op string, f func(obj *T) C.int) (rc C.int) {
	return invoke(t, h, op, false, f)
}

// closing is call for the functions that end a handle: they run on a
// poisoned handle too, so that its resources can still be given back.
func closing[T any](t *handleTable[T], h C.uint64_t, op string, f func(obj *T) C.int) (rc C.int) {
	return invoke(t, h, op, true, f)
}

func invoke[T any](t *handleTable[T], h C.uint64_t, op string, poisonedOK bool, f func(obj *T) C.int) (rc C.int) {
	e := t.entry(uint64(h))
	if e == nil {
		return failf(core.ErrHandle, op, "invalid %s handle (NULL, closed or destroyed)", t.kind)
	}
	if e.poisoned.Load() && !poisonedOK {
		return failf(core.ErrHandle, op, "%s handle unusable after an earlier internal error", t.kind)
	}
	defer func() {
		if r := recover(); r != nil {
			rc = internalError(op, r, &e.poisoned)
		}
	}()
	return f(e.obj)
}

// getenv reads the C environment: Go's os.Getenv sees a copy taken when the
// library loaded, and a program may setenv before cucopy_context_create.
func getenv(name string) string {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if v := C.getenv(cname); v != nil {
		return C.GoString(v)
	}
	return ""
}

// testFaultSink keeps the deliberate nil dereferences of CUCOPY_TEST_FAULT
// from being optimized away; testFaultProgress arms the one in the next
// iface_progress (CUCOPY_TEST_FAULT=progress_nil_deref).
var (
	testFaultSink     int
	testFaultProgress atomic.Bool
)

//export cucopyGoContextCreate
func cucopyGoContextCreate(params *C.cucopy_context_params_t, haveOut C.int, out *C.uint64_t) (rc C.int) {
	const op = "context_create"
	defer func() {
		if r := recover(); r != nil {
			rc = internalError(op, r, nil)
		}
	}()
	if haveOut == 0 {
		return failf(core.ErrInvalid, op, "ctx_p is NULL")
	}
	if initErr != nil {
		return fail(initErr)
	}
	cfg, err := core.LoadConfig(getenv)
	if err != nil {
		return fail(&core.Error{Status: core.ErrInvalid, Op: op, Msg: err.Error()})
	}
	if params != nil {
		mask := uint64(params.field_mask)
		if mask&^contextParamsKnown != 0 {
			return failf(core.ErrInvalid, op, "unknown field_mask bits 0x%x", mask&^contextParamsKnown)
		}
		if mask&C.CUCOPY_CONTEXT_PARAM_DRIVER_PATH != 0 {
			if params.driver_path == nil || *params.driver_path == 0 {
				return failf(core.ErrInvalid, op, "driver_path is NULL or empty")
			}
			cfg.DriverPath = C.GoString(params.driver_path)
		}
		if mask&C.CUCOPY_CONTEXT_PARAM_LOG_LEVEL != 0 {
			lvl := core.LogLevel(params.log_level)
			if lvl < core.LogError || lvl > core.LogTrace {
				return failf(core.ErrInvalid, op, "log_level %d: want 0 (error) to 4 (trace)", int(lvl))
			}
			cfg.LogLevel = lvl
		}
	}
	core.SetLogLevel(cfg.LogLevel)
	drv, err := cudadrv.Open(cfg.DriverPath)
	if err != nil {
		st := core.ErrNoDriver
		if _, ok := err.(*cudadrv.LoadError); !ok {
			st = core.ErrInvalid // a second, different driver path
		}
		return fail(&core.Error{Status: st, Op: op, Err: err})
	}
	if getenv("CUCOPY_TEST_FAULT") == "progress_nil_deref" {
		testFaultProgress.Store(true)
	}
	if getenv("CUCOPY_TEST_FAULT") == "nil_deref" {
		var p *int
		testFaultSink = *p // test hook: a fault inside the library must come back as a status
	}
	ctx, err := core.NewContext(drv, cfg)
	if err != nil {
		return fail(err)
	}
	h := contexts.add(ctx)
	if h == 0 {
		return failf(core.ErrNoResource, op, "too many contexts")
	}
	*out = C.uint64_t(h)
	return 0
}

//export cucopyGoContextDestroy
func cucopyGoContextDestroy(h C.uint64_t) C.int {
	return closing(contexts, h, "context_destroy", func(ctx *core.Context) C.int {
		if err := ctx.Destroy(); err != nil {
			return fail(err)
		}
		contexts.remove(uint64(h))
		return 0
	})
}

//export cucopyGoDeviceCount
func cucopyGoDeviceCount(h C.uint64_t, count *C.int) C.int {
	const op = "device_count"
	return call(contexts, h, op, func(ctx *core.Context) C.int {
		if count == nil {
			return failf(core.ErrInvalid, op, "count is NULL")
		}
		*count = C.int(ctx.DeviceCount())
		return 0
	})
}

// ifaceParams applies the caller's params over the context's configuration.
func ifaceParams(cfg core.Config, params *C.cucopy_iface_params_t) (core.IfaceParams, error) {
	const op = "iface_open"
	p := core.IfaceParams{ThreadMode: core.ThreadSingle, MaxPoll: cfg.MaxPoll, MaxEvents: cfg.MaxEvents, Lanes: cfg.Lanes}
	if params == nil {
		return p, nil
	}
	mask := uint64(params.field_mask)
	if mask&^ifaceParamsKnown != 0 {
		return p, &core.Error{Status: core.ErrInvalid, Op: op, Msg: fmt.Sprintf("unknown field_mask bits 0x%x", mask&^ifaceParamsKnown)}
	}
	if mask&C.CUCOPY_IFACE_PARAM_THREAD_MODE != 0 {
		p.ThreadMode = core.ThreadMode(params.thread_mode)
		if p.ThreadMode != core.ThreadSingle && p.ThreadMode != core.ThreadMulti {
			return p, &core.Error{Status: core.ErrInvalid, Op: op, Msg: fmt.Sprintf("thread_mode %d: want SINGLE (0) or MULTI (1)", int(p.ThreadMode))}
		}
	}
	if mask&C.CUCOPY_IFACE_PARAM_MAX_POLL != 0 {
		p.MaxPoll = uint32(params.max_poll)
	}
	if mask&C.CUCOPY_IFACE_PARAM_MAX_EVENTS != 0 {
		p.MaxEvents = uint32(params.max_events)
	}
	return p, nil
}

//export cucopyGoIfaceOpen
func cucopyGoIfaceOpen(h C.uint64_t, params *C.cucopy_iface_params_t, haveOut C.int, out *C.uint64_t) C.int {
	const op = "iface_open"
	return call(contexts, h, op, func(ctx *core.Context) C.int {
		if haveOut == 0 {
			return failf(core.ErrInvalid, op, "iface_p is NULL")
		}
		p, err := ifaceParams(ctx.Config(), params)
		if err != nil {
			return fail(err)
		}
		iface, err := ctx.OpenIface(p)
		if err != nil {
			return fail(err)
		}
		ih := ifaces.add(iface)
		if ih == 0 {
			iface.Close()
			return failf(core.ErrNoResource, op, "too many ifaces")
		}
		*out = C.uint64_t(ih)
		return 0
	})
}

//export cucopyGoIfaceClose
func cucopyGoIfaceClose(h C.uint64_t) C.int {
	return closing(ifaces, h, "iface_close", func(iface *core.Iface) C.int {
		if err := iface.Close(); err != nil {
			return fail(err) // still open: close can be called again
		}
		ifaces.remove(uint64(h))
		eps.removeIf(func(ep *core.Ep) bool { return ep.Iface() == iface })
		return 0
	})
}

//export cucopyGoIfaceQuery
func cucopyGoIfaceQuery(h C.uint64_t, attr *C.cucopy_iface_attr_t) C.int {
	const op = "iface_query"
	return call(ifaces, h, op, func(iface *core.Iface) C.int {
		if attr == nil {
			return failf(core.ErrInvalid, op, "attr is NULL")
		}
		mask := uint64(attr.field_mask)
		if mask&^ifaceAttrKnown != 0 {
			return failf(core.ErrInvalid, op, "unknown field_mask bits 0x%x", mask&^ifaceAttrKnown)
		}
		p := iface.Params()
		if mask&C.CUCOPY_IFACE_ATTR_CAP_FLAGS != 0 {
			caps := uint64(C.CUCOPY_IFACE_CAP_PUT_SHORT | C.CUCOPY_IFACE_CAP_GET_SHORT | C.CUCOPY_IFACE_CAP_PUT_ZCOPY |
				C.CUCOPY_IFACE_CAP_GET_ZCOPY | C.CUCOPY_IFACE_CAP_EVENT_FD | C.CUCOPY_IFACE_CAP_CROSS_DEVICE)
			if iface.Context().Driver().HasCtxID() {
				caps |= C.CUCOPY_IFACE_CAP_CONTEXT_ID
			}
			attr.cap_flags = C.uint64_t(caps)
		}
		if mask&C.CUCOPY_IFACE_ATTR_MAX_IOV != 0 {
			attr.max_iov = core.MaxIOV
		}
		if mask&C.CUCOPY_IFACE_ATTR_MAX_POLL != 0 {
			attr.max_poll = C.unsigned(p.MaxPoll)
		}
		if mask&C.CUCOPY_IFACE_ATTR_MAX_EVENTS != 0 {
			attr.max_events = C.unsigned(p.MaxEvents)
		}
		if mask&C.CUCOPY_IFACE_ATTR_THREAD_MODE != 0 {
			attr.thread_mode = C.cucopy_thread_mode_t(p.ThreadMode)
		}
		if mask&C.CUCOPY_IFACE_ATTR_DEVICE_COUNT != 0 {
			attr.device_count = C.int(iface.Context().DeviceCount())
		}
		return 0
	})
}

// complete runs one completion's callback (cucopy_complete, in C).
func complete(comp uintptr, st core.Status) { C.cucopy_complete(C.uintptr_t(comp), C.int(st)) }

//export cucopyGoIfaceProgress
func cucopyGoIfaceProgress(h C.uint64_t) C.int {
	return call(ifaces, h, "iface_progress", func(iface *core.Iface) C.int {
		if testFaultProgress.Load() && testFaultProgress.CompareAndSwap(true, false) {
			var p *int
			testFaultSink = *p // test hook: a fault inside an export with a handle
		}
		n, err := iface.Progress()
		if err != nil {
			return fail(err)
		}
		// Completions run one at a time, in order, outside the iface's
		// locks: a callback may call back into the library.
		iface.RunCallbacks(complete)
		return C.int(n)
	})
}

//export cucopyGoIfaceFlush
func cucopyGoIfaceFlush(h C.uint64_t, flags C.unsigned, comp C.uintptr_t) C.int {
	const op = "iface_flush"
	return call(ifaces, h, op, func(iface *core.Iface) C.int {
		if flags != 0 {
			return failf(core.ErrInvalid, op, "unknown flags 0x%x", uint(flags))
		}
		return result(iface.Flush(op, uintptr(comp)))
	})
}

//export cucopyGoIfaceEventFd
func cucopyGoIfaceEventFd(h C.uint64_t, fd *C.int) C.int {
	const op = "iface_event_fd"
	return call(ifaces, h, op, func(iface *core.Iface) C.int {
		if fd == nil {
			return failf(core.ErrInvalid, op, "fd_p is NULL")
		}
		n, err := iface.EventFD()
		if err != nil {
			return fail(err)
		}
		*fd = C.int(n)
		return 0
	})
}

//export cucopyGoIfaceEventArm
func cucopyGoIfaceEventArm(h C.uint64_t, events C.unsigned) C.int {
	return call(ifaces, h, "iface_event_arm", func(iface *core.Iface) C.int {
		st, err := iface.Arm(uint32(events))
		if err == nil && st == core.ErrBusy {
			setLastError("iface_event_arm: completions are ready; call cucopy_iface_progress")
		}
		return result(st, err)
	})
}

//export cucopyGoIfaceReleaseContext
func cucopyGoIfaceReleaseContext(h C.uint64_t, id C.uint64_t) C.int {
	return call(ifaces, h, "iface_release_context", func(iface *core.Iface) C.int {
		return result(core.OK, iface.ReleaseContext(uint64(id)))
	})
}

//export cucopyGoEpCreate
func cucopyGoEpCreate(h C.uint64_t, haveOut C.int, out *C.uint64_t) C.int {
	const op = "ep_create"
	return call(ifaces, h, op, func(iface *core.Iface) C.int {
		if haveOut == 0 {
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
		return result(ep.Flush(uintptr(comp)))
	})
}

var memhs = newHandleTable[core.Registration]("memh", 1<<16)

const (
	deviceAttrKnown = C.CUCOPY_DEVICE_ATTR_NAME | C.CUCOPY_DEVICE_ATTR_UUID | C.CUCOPY_DEVICE_ATTR_PCI_BUS_ID |
		C.CUCOPY_DEVICE_ATTR_NUMA_NODE | C.CUCOPY_DEVICE_ATTR_MEMORY | C.CUCOPY_DEVICE_ATTR_COMPUTE_CAPABILITY |
		C.CUCOPY_DEVICE_ATTR_PEERS | C.CUCOPY_DEVICE_ATTR_PRIMARY_ACTIVE
	peerAttrKnown = C.CUCOPY_PEER_ATTR_CAN_ACCESS | C.CUCOPY_PEER_ATTR_ACCESS_SUPPORTED |
		C.CUCOPY_PEER_ATTR_NATIVE_ATOMICS | C.CUCOPY_PEER_ATTR_PERFORMANCE_RANK
	memAttrKnown = C.CUCOPY_MEM_ATTR_MEM_TYPE | C.CUCOPY_MEM_ATTR_PINNED | C.CUCOPY_MEM_ATTR_DEVICE |
		C.CUCOPY_MEM_ATTR_CONTEXT_ID | C.CUCOPY_MEM_ATTR_ALLOCATION | C.CUCOPY_MEM_ATTR_FLAGS | C.CUCOPY_MEM_ATTR_ACCESS
	memAllocParamsKnown = C.CUCOPY_MEM_ALLOC_PARAM_LENGTH | C.CUCOPY_MEM_ALLOC_PARAM_MEM_TYPE |
		C.CUCOPY_MEM_ALLOC_PARAM_DEVICE | C.CUCOPY_MEM_ALLOC_PARAM_FLAGS
)

// Bits shared with the header must agree (uint8 overflow otherwise).
const (
	_ = uint8(255 + (core.DevAttrPrimaryActive-C.CUCOPY_DEVICE_ATTR_PRIMARY_ACTIVE)*(core.DevAttrPrimaryActive-C.CUCOPY_DEVICE_ATTR_PRIMARY_ACTIVE))
	_ = uint8(255 + (core.DevAttrName-C.CUCOPY_DEVICE_ATTR_NAME)*(core.DevAttrName-C.CUCOPY_DEVICE_ATTR_NAME))
	_ = uint8(255 + (core.MemFlagHostLocated-C.CUCOPY_MEM_FLAG_HOST_LOCATED)*(core.MemFlagHostLocated-C.CUCOPY_MEM_FLAG_HOST_LOCATED))
	_ = uint8(255 + (core.MemFlagVMM-C.CUCOPY_MEM_FLAG_VMM)*(core.MemFlagVMM-C.CUCOPY_MEM_FLAG_VMM))
	_ = uint8(255 + (core.MemCUDAManaged-C.CUCOPY_MEMORY_TYPE_CUDA_MANAGED)*(core.MemCUDAManaged-C.CUCOPY_MEMORY_TYPE_CUDA_MANAGED))
	_ = uint8(255 + (core.LocationNone-C.CUCOPY_LOCATION_NONE)*(core.LocationNone-C.CUCOPY_LOCATION_NONE))
)

// cstring copies s, NUL-terminated and truncated to fit, into a C char array.
func cstring(dst []C.char, s string) {
	n := copy(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), len(dst)-1), s)
	dst[n] = 0
}

func boolInt(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

//export cucopyGoDeviceQuery
func cucopyGoDeviceQuery(h C.uint64_t, ordinal C.int, attr *C.cucopy_device_attr_t) C.int {
	const op = "device_query"
	return call(contexts, h, op, func(ctx *core.Context) C.int {
		if attr == nil {
			return failf(core.ErrInvalid, op, "attr is NULL")
		}
		mask := uint64(attr.field_mask)
		if mask&^deviceAttrKnown != 0 {
			return failf(core.ErrInvalid, op, "unknown field_mask bits 0x%x", mask&^deviceAttrKnown)
		}
		a, err := ctx.DeviceQuery(int(ordinal), mask)
		if err != nil {
			return fail(err)
		}
		if mask&C.CUCOPY_DEVICE_ATTR_NAME != 0 {
			cstring(attr.name[:], a.Name)
		}
		if mask&C.CUCOPY_DEVICE_ATTR_UUID != 0 {
			for i, b := range a.UUID {
				attr.uuid[i] = C.uint8_t(b)
			}
		}
		if mask&C.CUCOPY_DEVICE_ATTR_PCI_BUS_ID != 0 {
			cstring(attr.pci_bus_id[:], a.PCIBusID)
		}
		if mask&C.CUCOPY_DEVICE_ATTR_NUMA_NODE != 0 {
			attr.numa_node = C.int(a.NUMANode)
		}
		if mask&C.CUCOPY_DEVICE_ATTR_MEMORY != 0 {
			attr.total_memory = C.uint64_t(a.TotalMemory)
		}
		if mask&C.CUCOPY_DEVICE_ATTR_COMPUTE_CAPABILITY != 0 {
			attr.cc_major, attr.cc_minor = C.int(a.CCMajor), C.int(a.CCMinor)
		}
		if mask&C.CUCOPY_DEVICE_ATTR_PEERS != 0 {
			attr.peer_mask = C.uint64_t(a.PeerMask)
		}
		if mask&C.CUCOPY_DEVICE_ATTR_PRIMARY_ACTIVE != 0 {
			attr.primary_active = boolInt(a.PrimaryActive)
		}
		return 0
	})
}

//export cucopyGoDevicePeerQuery
func cucopyGoDevicePeerQuery(h C.uint64_t, device, peer C.int, attr *C.cucopy_peer_attr_t) C.int {
	const op = "device_peer_query"
	return call(contexts, h, op, func(ctx *core.Context) C.int {
		if attr == nil {
			return failf(core.ErrInvalid, op, "attr is NULL")
		}
		mask := uint64(attr.field_mask)
		if mask&^peerAttrKnown != 0 {
			return failf(core.ErrInvalid, op, "unknown field_mask bits 0x%x", mask&^peerAttrKnown)
		}
		a, err := ctx.PeerQuery(int(device), int(peer))
		if err != nil {
			return fail(err)
		}
		if mask&C.CUCOPY_PEER_ATTR_CAN_ACCESS != 0 {
			attr.can_access = boolInt(a.CanAccess)
		}
		if mask&C.CUCOPY_PEER_ATTR_ACCESS_SUPPORTED != 0 {
			attr.access_supported = boolInt(a.AccessSupported)
		}
		if mask&C.CUCOPY_PEER_ATTR_NATIVE_ATOMICS != 0 {
			attr.native_atomics = boolInt(a.NativeAtomics)
		}
		if mask&C.CUCOPY_PEER_ATTR_PERFORMANCE_RANK != 0 {
			attr.performance_rank = C.int(a.PerformanceRank)
		}
		return 0
	})
}

//export cucopyGoMemQuery
func cucopyGoMemQuery(h C.uint64_t, addr C.uintptr_t, length C.size_t, attr *C.cucopy_mem_attr_t) C.int {
	const op = "mem_query"
	return call(contexts, h, op, func(ctx *core.Context) C.int {
		if attr == nil {
			return failf(core.ErrInvalid, op, "attr is NULL")
		}
		mask := uint64(attr.field_mask)
		if mask&^memAttrKnown != 0 {
			return failf(core.ErrInvalid, op, "unknown field_mask bits 0x%x", mask&^memAttrKnown)
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
func cucopyGoMemAlloc(h C.uint64_t, params *C.cucopy_mem_alloc_params_t, haveOut C.int, out *C.uint64_t) C.int {
	const op = "mem_alloc"
	return call(contexts, h, op, func(ctx *core.Context) C.int {
		if haveOut == 0 {
			return failf(core.ErrInvalid, op, "addr_p is NULL")
		}
		if params == nil {
			return failf(core.ErrInvalid, op, "params is NULL (the length is required)")
		}
		mask := uint64(params.field_mask)
		if mask&^memAllocParamsKnown != 0 {
			return failf(core.ErrInvalid, op, "unknown field_mask bits 0x%x", mask&^memAllocParamsKnown)
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
		return 0
	})
}

//export cucopyGoMemReg
func cucopyGoMemReg(h C.uint64_t, addr C.uintptr_t, length C.size_t, flags C.unsigned, haveOut C.int, out *C.uint64_t) C.int {
	const op = "mem_reg"
	return call(contexts, h, op, func(ctx *core.Context) C.int {
		if haveOut == 0 {
			return failf(core.ErrInvalid, op, "memh_p is NULL")
		}
		reg, err := ctx.MemReg(uint64(addr), uint64(length), uint32(flags))
		if err != nil {
			return fail(err)
		}
		mh := memhs.add(reg)
		if mh == 0 {
			ctx.MemDereg(reg)
			return failf(core.ErrNoResource, op, "too many registrations")
		}
		*out = C.uint64_t(mh)
		return 0
	})
}

//export cucopyGoMemDereg
func cucopyGoMemDereg(h C.uint64_t, memh C.uint64_t) C.int {
	const op = "mem_dereg"
	return call(contexts, h, op, func(ctx *core.Context) C.int {
		return call(memhs, memh, op, func(reg *core.Registration) C.int {
			if err := ctx.MemDereg(reg); err != nil {
				return fail(err) // still registered: the handle stays for a retry
			}
			memhs.remove(uint64(memh))
			return 0
		})
	})
}
