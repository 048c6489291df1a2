// SPDX-License-Identifier: BSD-3-Clause

// The device exports: cucopy_device_count, cucopy_device_query and
// cucopy_device_peer_query, on a context.

package main

/*
#include "capi.h"
*/
import "C"

import (
	"unsafe"

	"github.com/cucopy/cucopy/core"
)

const (
	deviceAttrKnown = C.CUCOPY_DEVICE_ATTR_NAME | C.CUCOPY_DEVICE_ATTR_UUID | C.CUCOPY_DEVICE_ATTR_PCI_BUS_ID |
		C.CUCOPY_DEVICE_ATTR_NUMA_NODE | C.CUCOPY_DEVICE_ATTR_MEMORY | C.CUCOPY_DEVICE_ATTR_COMPUTE_CAPABILITY |
		C.CUCOPY_DEVICE_ATTR_PEERS | C.CUCOPY_DEVICE_ATTR_PRIMARY_ACTIVE
	peerAttrKnown = C.CUCOPY_PEER_ATTR_CAN_ACCESS | C.CUCOPY_PEER_ATTR_ACCESS_SUPPORTED |
		C.CUCOPY_PEER_ATTR_NATIVE_ATOMICS | C.CUCOPY_PEER_ATTR_PERFORMANCE_RANK
)

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

// cstring copies s, NUL-terminated and truncated to fit, into a C char array.
func cstring(dst []C.char, s string) {
	n := copy(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), len(dst)-1), s)
	dst[n] = 0
}

//export cucopyGoDeviceQuery
func cucopyGoDeviceQuery(h C.uint64_t, ordinal C.int, attr *C.cucopy_device_attr_t) C.int {
	const op = "device_query"
	return call(contexts, h, op, func(ctx *core.Context) C.int {
		if attr == nil {
			return failf(core.ErrInvalid, op, "attr is NULL")
		}
		mask := uint64(attr.field_mask)
		if err := checkMask(op, mask, deviceAttrKnown); err != nil {
			return fail(err)
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
		if err := checkMask(op, mask, peerAttrKnown); err != nil {
			return fail(err)
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
