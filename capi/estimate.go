// SPDX-License-Identifier: BSD-3-Clause

// The performance model's export: cucopy_iface_estimate.

package main

/*
#include "capi.h"
*/
import "C"

import (
	"github.com/cucopy/cucopy/core"
)

const (
	estimateFlagsKnown = C.CUCOPY_ESTIMATE_SRC_PINNED | C.CUCOPY_ESTIMATE_DST_PINNED | C.CUCOPY_ESTIMATE_CALIBRATE
	estimateAttrKnown  = C.CUCOPY_ESTIMATE_ATTR_LATENCY | C.CUCOPY_ESTIMATE_ATTR_BANDWIDTH | C.CUCOPY_ESTIMATE_ATTR_TIME |
		C.CUCOPY_ESTIMATE_ATTR_SOURCE | C.CUCOPY_ESTIMATE_ATTR_PATH | C.CUCOPY_ESTIMATE_ATTR_NUMA_REMOTE
)

//export cucopyGoIfaceEstimate
func cucopyGoIfaceEstimate(h C.uint64_t, srcType C.int, srcDev C.int, dstType C.int, dstDev C.int,
	length C.size_t, flags C.unsigned, attr *C.cucopy_estimate_attr_t) C.int {
	const op = "iface_estimate"
	return call(ifaces, h, op, func(iface *core.Iface) C.int {
		if attr == nil {
			return failf(core.ErrInvalid, op, "attr is NULL")
		}
		mask := uint64(attr.field_mask)
		if err := checkMask(op, mask, estimateAttrKnown); err != nil {
			return fail(err)
		}
		if flags&^estimateFlagsKnown != 0 {
			return failf(core.ErrInvalid, op, "unknown flags 0x%x", uint(flags&^estimateFlagsKnown))
		}
		src := core.Place{Type: core.MemType(srcType), Pinned: flags&C.CUCOPY_ESTIMATE_SRC_PINNED != 0, Device: int(srcDev)}
		dst := core.Place{Type: core.MemType(dstType), Pinned: flags&C.CUCOPY_ESTIMATE_DST_PINNED != 0, Device: int(dstDev)}
		e, err := iface.Estimate(src, dst, uint64(length), flags&C.CUCOPY_ESTIMATE_CALIBRATE != 0)
		if err != nil {
			return fail(err)
		}
		if mask&C.CUCOPY_ESTIMATE_ATTR_LATENCY != 0 {
			attr.latency = C.double(e.Latency)
		}
		if mask&C.CUCOPY_ESTIMATE_ATTR_BANDWIDTH != 0 {
			attr.bandwidth = C.double(e.Bandwidth)
		}
		if mask&C.CUCOPY_ESTIMATE_ATTR_TIME != 0 {
			attr.time = C.double(e.Time)
		}
		if mask&C.CUCOPY_ESTIMATE_ATTR_SOURCE != 0 {
			attr.source = C.CUCOPY_ESTIMATE_SOURCE_MODEL
			if e.Calibrated {
				attr.source = C.CUCOPY_ESTIMATE_SOURCE_CALIBRATED
			}
		}
		if mask&C.CUCOPY_ESTIMATE_ATTR_PATH != 0 {
			attr.path = C.cucopy_path_t(e.Path)
			attr.path_gen, attr.path_width = C.int(e.PathGen), C.int(e.PathWidth)
		}
		if mask&C.CUCOPY_ESTIMATE_ATTR_NUMA_REMOTE != 0 {
			attr.numa_remote = boolInt(e.NUMARemote)
		}
		return 0
	})
}
