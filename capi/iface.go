// SPDX-License-Identifier: BSD-3-Clause

// The iface's handle table and exports: open, close, query, progress,
// flush, the event fd and release_context.

package main

/*
#include "capi.h"
*/
import "C"

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/cucopy/cucopy/core"
)

var ifaces = newHandleTable[core.Iface]("iface", 4096)

// cucopy_ready_t is core.ReadyComp, byte for byte (each line compiles only
// when its two sides are equal).
var (
	_ = [1]struct{}{}[unsafe.Sizeof(core.ReadyComp{})-C.sizeof_cucopy_ready_t]
	_ = [1]struct{}{}[unsafe.Offsetof(core.ReadyComp{}.Status)-unsafe.Offsetof(C.cucopy_ready_t{}.status)]
)

const (
	ifaceParamsKnown = C.CUCOPY_IFACE_PARAM_THREAD_MODE | C.CUCOPY_IFACE_PARAM_MAX_POLL | C.CUCOPY_IFACE_PARAM_MAX_EVENTS
	ifaceAttrKnown   = C.CUCOPY_IFACE_ATTR_CAP_FLAGS | C.CUCOPY_IFACE_ATTR_MAX_IOV | C.CUCOPY_IFACE_ATTR_MAX_POLL |
		C.CUCOPY_IFACE_ATTR_MAX_EVENTS | C.CUCOPY_IFACE_ATTR_THREAD_MODE | C.CUCOPY_IFACE_ATTR_DEVICE_COUNT
	ifaceStatsKnown = C.CUCOPY_IFACE_STATS_EVENTS | C.CUCOPY_IFACE_STATS_DIRECTIONS |
		C.CUCOPY_IFACE_STATS_DEVICES | C.CUCOPY_IFACE_STATS_CONTEXTS | C.CUCOPY_IFACE_STATS_INCARNATIONS
)

// ifaceParams applies the caller's params over the context's configuration.
func ifaceParams(cfg core.Config, params *C.cucopy_iface_params_t) (core.IfaceParams, error) {
	const op = "iface_open"
	p := core.IfaceParams{ThreadMode: core.ThreadSingle, MaxPoll: cfg.MaxPoll, MaxEvents: cfg.MaxEvents, Lanes: cfg.Lanes}
	if params == nil {
		return p, nil
	}
	mask := uint64(params.field_mask)
	if err := checkMask(op, mask, ifaceParamsKnown); err != nil {
		return p, err
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
func cucopyGoIfaceOpen(h C.uint64_t, params *C.cucopy_iface_params_t, wantOut C.int, out *C.uint64_t) C.int {
	const op = "iface_open"
	return call(contexts, h, op, func(ctx *core.Context) C.int {
		if wantOut == 0 {
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
		if err := checkMask(op, mask, ifaceAttrKnown); err != nil {
			return fail(err)
		}
		p := iface.Params()
		if mask&C.CUCOPY_IFACE_ATTR_CAP_FLAGS != 0 {
			caps := uint64(C.CUCOPY_IFACE_CAP_PUT_SHORT | C.CUCOPY_IFACE_CAP_GET_SHORT | C.CUCOPY_IFACE_CAP_PUT_ZCOPY |
				C.CUCOPY_IFACE_CAP_GET_ZCOPY | C.CUCOPY_IFACE_CAP_EVENT_FD)
			if iface.Context().DeviceCount() > 1 {
				caps |= C.CUCOPY_IFACE_CAP_CROSS_DEVICE // there is another GPU to copy to
			}
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

//export cucopyGoIfaceProgress
func cucopyGoIfaceProgress(h C.uint64_t) C.int {
	return call(ifaces, h, "iface_progress", func(iface *core.Iface) C.int {
		testFaultAtProgress()
		n, err := iface.Progress()
		if err != nil {
			return fail(err)
		}
		// Completions run one at a time, in order, outside the iface's
		// locks: a callback may call back into the library. One C call
		// runs a whole batch.
		serial := C.uint64_t(iface.Serial())
		iface.RunCallbackBatches(func(batch []core.ReadyComp, ready *atomic.Int64) {
			C.cucopy_complete_batch((*C.cucopy_ready_t)(unsafe.Pointer(&batch[0])), C.int(len(batch)), serial,
				(*C.int64_t)(unsafe.Pointer(ready)))
		})
		return C.int(n)
	})
}

// inCallbackOf says the calling thread is running one of iface's
// completion callbacks, directly or with other ifaces' callbacks nested in
// it.
func inCallbackOf(iface *core.Iface) bool {
	return C.cucopy_in_callback_of(C.uint64_t(iface.Serial())) != 0
}

//export cucopyGoIfaceFlush
func cucopyGoIfaceFlush(h C.uint64_t, flags C.unsigned, comp C.uintptr_t) C.int {
	const op = "iface_flush"
	return call(ifaces, h, op, func(iface *core.Iface) C.int {
		if flags != 0 {
			return failf(core.ErrInvalid, op, "unknown flags 0x%x", uint(flags))
		}
		return result(iface.Flush(op, uintptr(comp), inCallbackOf(iface)))
	})
}

//export cucopyGoIfaceFence
func cucopyGoIfaceFence(h C.uint64_t, flags C.unsigned) C.int {
	const op = "iface_fence"
	return call(ifaces, h, op, func(iface *core.Iface) C.int {
		if flags != 0 {
			return failf(core.ErrInvalid, op, "unknown flags 0x%x", uint(flags))
		}
		return result(core.OK, iface.Fence(op))
	})
}

//export cucopyGoIfaceStats
func cucopyGoIfaceStats(h C.uint64_t, out *C.cucopy_iface_stats_t) C.int {
	const op = "iface_stats"
	return call(ifaces, h, op, func(iface *core.Iface) C.int {
		if out == nil {
			return failf(core.ErrInvalid, op, "stats is NULL")
		}
		mask := uint64(out.field_mask)
		if err := checkMask(op, mask, ifaceStatsKnown); err != nil {
			return fail(err)
		}
		if mask&C.CUCOPY_IFACE_STATS_INCARNATIONS != 0 && out.incarnations == nil && out.incarnations_capacity > 0 {
			return failf(core.ErrInvalid, op, "incarnations is NULL with incarnations_capacity %d", out.incarnations_capacity)
		}
		st := iface.Stats()
		if mask&C.CUCOPY_IFACE_STATS_EVENTS != 0 {
			out.no_resource, out.flushes, out.fences = C.uint64_t(st.NoResource), C.uint64_t(st.Flushes), C.uint64_t(st.Fences)
		}
		if mask&C.CUCOPY_IFACE_STATS_DIRECTIONS != 0 {
			for k, d := range st.Dir {
				out.dir_operations[k], out.dir_pieces[k], out.dir_bytes[k] = C.uint64_t(d.Operations), C.uint64_t(d.Pieces), C.uint64_t(d.Bytes)
			}
		}
		if mask&C.CUCOPY_IFACE_STATS_DEVICES != 0 {
			n := min(len(st.Device), C.CUCOPY_MAX_DEVICES)
			out.device_count = C.int(n)
			for dev := range n {
				for k, d := range st.Device[dev] {
					j := dev*core.NumDirs + k
					out.device_operations[j], out.device_pieces[j], out.device_bytes[j] = C.uint64_t(d.Operations), C.uint64_t(d.Pieces), C.uint64_t(d.Bytes)
				}
			}
		}
		if mask&C.CUCOPY_IFACE_STATS_CONTEXTS != 0 {
			out.contexts_seen, out.contexts_released, out.contexts_reset = C.uint64_t(st.ContextsSeen), C.uint64_t(st.ContextsReleased), C.uint64_t(st.ContextsReset)
		}
		if mask&C.CUCOPY_IFACE_STATS_INCARNATIONS != 0 {
			lives, dropped := iface.Incarnations()
			out.incarnations_count, out.incarnations_dropped = C.size_t(len(lives)), C.uint64_t(dropped)
			if n := min(len(lives), int(out.incarnations_capacity)); n > 0 {
				dst := unsafe.Slice(out.incarnations, n)
				for k := range dst {
					fillIncarnation(&dst[k], &lives[k])
				}
			}
		}
		return 0
	})
}

func fillIncarnation(e *C.cucopy_incarnation_stats_t, l *core.IncarnationStats) {
	*e = C.cucopy_incarnation_stats_t{serial: C.uint64_t(l.Serial), context_id: C.uint64_t(l.ContextID),
		device: C.int(l.Device), lane: C.int(l.Lane), state: C.int(l.State)}
	for k, d := range l.Dir {
		e.operations[k], e.pieces[k], e.bytes[k] = C.uint64_t(d.Operations), C.uint64_t(d.Pieces), C.uint64_t(d.Bytes)
	}
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
