// SPDX-License-Identifier: BSD-3-Clause

// Compile-time checks that the Go values and layouts which cross the C
// boundary equal include/cucopy.h's. Every value core hands to C, or reads
// from C, as a plain number is listed here.

package main

/*
#include "capi.h"
*/
import "C"

import (
	"unsafe"

	"github.com/cucopy/cucopy/core"
)

// Each line indexes a one-element array with a Go value minus the header's:
// the build fails unless the difference is 0 ("index 1 out of bounds",
// "must not be negative", or for sizes and offsets "overflows uintptr").
// One line checks both directions. (The idiom of golang.org/x/tools'
// stringer.) That no status of the header is missing here and in core is
// internal/abicheck's test: Go cannot list a C enum's members.
func _() {
	var x [1]struct{}

	// cucopy_status_t
	_ = x[core.OK-C.CUCOPY_OK]
	_ = x[core.InProgress-C.CUCOPY_INPROGRESS]
	_ = x[core.ErrInvalid-C.CUCOPY_ERR_INVALID_PARAM]
	_ = x[core.ErrHandle-C.CUCOPY_ERR_INVALID_HANDLE]
	_ = x[core.ErrNoMemory-C.CUCOPY_ERR_NO_MEMORY]
	_ = x[core.ErrNoResource-C.CUCOPY_ERR_NO_RESOURCE]
	_ = x[core.ErrBusy-C.CUCOPY_ERR_BUSY]
	_ = x[core.ErrUnsupport-C.CUCOPY_ERR_UNSUPPORTED]
	_ = x[core.ErrNoDevice-C.CUCOPY_ERR_NO_DEVICE]
	_ = x[core.ErrNoDriver-C.CUCOPY_ERR_NO_DRIVER]
	_ = x[core.ErrCUDA-C.CUCOPY_ERR_CUDA]
	_ = x[core.ErrForked-C.CUCOPY_ERR_FORKED]
	_ = x[core.ErrInternal-C.CUCOPY_ERR_INTERNAL]
	_ = x[core.ErrOutOfRange-C.CUCOPY_ERR_OUT_OF_RANGE]
	_ = x[core.ErrAlreadyExists-C.CUCOPY_ERR_ALREADY_EXISTS]
	_ = x[core.ErrCanceled-C.CUCOPY_ERR_CANCELED]

	// cucopy_log_level_t
	_ = x[core.LogError-C.CUCOPY_LOG_ERROR]
	_ = x[core.LogWarn-C.CUCOPY_LOG_WARN]
	_ = x[core.LogInfo-C.CUCOPY_LOG_INFO]
	_ = x[core.LogDebug-C.CUCOPY_LOG_DEBUG]
	_ = x[core.LogTrace-C.CUCOPY_LOG_TRACE]

	// cucopy_thread_mode_t
	_ = x[core.ThreadSingle-C.CUCOPY_THREAD_MODE_SINGLE]
	_ = x[core.ThreadMulti-C.CUCOPY_THREAD_MODE_MULTI]

	// event bits
	_ = x[core.EventSendComp-C.CUCOPY_EVENT_SEND_COMP]

	// cucopy_dir_t and the arrays of cucopy_iface_stats_t
	_ = x[core.DirH2D-C.CUCOPY_DIR_H2D]
	_ = x[core.DirD2H-C.CUCOPY_DIR_D2H]
	_ = x[core.DirD2D-C.CUCOPY_DIR_D2D]
	_ = x[core.DirPeer-C.CUCOPY_DIR_PEER]
	_ = x[core.DirHost-C.CUCOPY_DIR_HOST]
	_ = x[core.NumDirs-C.CUCOPY_DIR_COUNT]
	_ = x[len(C.cucopy_iface_stats_t{}.dir_pieces)-C.CUCOPY_DIR_COUNT]
	_ = x[len(C.cucopy_iface_stats_t{}.device_pieces)-C.CUCOPY_MAX_DEVICES*C.CUCOPY_DIR_COUNT]

	// cucopy_incarnation_stats_t: its arrays are the GPU directions
	_ = x[len(C.cucopy_incarnation_stats_t{}.pieces)-len(core.IncarnationStats{}.Dir)]
	_ = x[core.IncarnationLive-C.CUCOPY_INCARNATION_LIVE]
	_ = x[core.IncarnationReleased-C.CUCOPY_INCARNATION_RELEASED]
	_ = x[core.IncarnationReset-C.CUCOPY_INCARNATION_RESET]
	_ = x[core.MaxEndedIncarnations-C.CUCOPY_MAX_ENDED_INCARNATIONS]

	// cucopy_memory_type_t
	_ = x[core.MemHost-C.CUCOPY_MEMORY_TYPE_HOST]
	_ = x[core.MemCUDA-C.CUCOPY_MEMORY_TYPE_CUDA]
	_ = x[core.MemCUDAManaged-C.CUCOPY_MEMORY_TYPE_CUDA_MANAGED]

	// cucopy_mem_attr_t.flags and .preferred_location
	_ = x[core.MemFlagVMM-C.CUCOPY_MEM_FLAG_VMM]
	_ = x[core.MemFlagPool-C.CUCOPY_MEM_FLAG_POOL]
	_ = x[core.MemFlagRegistered-C.CUCOPY_MEM_FLAG_REGISTERED]
	_ = x[core.MemFlagAllocated-C.CUCOPY_MEM_FLAG_ALLOCATED]
	_ = x[core.MemFlagPreferred-C.CUCOPY_MEM_FLAG_PREFERRED]
	_ = x[core.MemFlagHostLocated-C.CUCOPY_MEM_FLAG_HOST_LOCATED]
	_ = x[core.LocationHost-C.CUCOPY_LOCATION_HOST]
	_ = x[core.LocationNone-C.CUCOPY_LOCATION_NONE]

	// cucopy_device_attr_t field bits (the mask goes to core as it is)
	_ = x[core.DevAttrName-C.CUCOPY_DEVICE_ATTR_NAME]
	_ = x[core.DevAttrUUID-C.CUCOPY_DEVICE_ATTR_UUID]
	_ = x[core.DevAttrPCIBusID-C.CUCOPY_DEVICE_ATTR_PCI_BUS_ID]
	_ = x[core.DevAttrNUMANode-C.CUCOPY_DEVICE_ATTR_NUMA_NODE]
	_ = x[core.DevAttrMemory-C.CUCOPY_DEVICE_ATTR_MEMORY]
	_ = x[core.DevAttrComputeCapability-C.CUCOPY_DEVICE_ATTR_COMPUTE_CAPABILITY]
	_ = x[core.DevAttrPeers-C.CUCOPY_DEVICE_ATTR_PEERS]
	_ = x[core.DevAttrPrimaryActive-C.CUCOPY_DEVICE_ATTR_PRIMARY_ACTIVE]

	// the performance model: cucopy_path_t and the host "device"
	_ = x[core.PathCPU-C.CUCOPY_PATH_CPU]
	_ = x[core.PathPCIe-C.CUCOPY_PATH_PCIE]
	_ = x[core.PathPCIeStaged-C.CUCOPY_PATH_PCIE_STAGED]
	_ = x[core.PathDevice-C.CUCOPY_PATH_DEVICE]
	_ = x[core.PathNVLink-C.CUCOPY_PATH_NVLINK]
	_ = x[core.PathPCIePeer-C.CUCOPY_PATH_PCIE_PEER]
	_ = x[core.PathHostStaged-C.CUCOPY_PATH_HOST_STAGED]
	_ = x[core.NUMAAny-C.CUCOPY_NUMA_ANY]

	// cucopy_iov_t: core.IOV is read in place from the caller's array.
	_ = x[unsafe.Sizeof(core.IOV{})-C.sizeof_cucopy_iov_t]
	_ = x[unsafe.Offsetof(core.IOV{}.Buffer)-unsafe.Offsetof(C.cucopy_iov_t{}.buffer)]
	_ = x[unsafe.Offsetof(core.IOV{}.Length)-unsafe.Offsetof(C.cucopy_iov_t{}.length)]
	// cucopy_iov_memh_t and cucopy_copy_t, read in place (ep.go).
	_ = x[unsafe.Sizeof(iovMemh{})-C.sizeof_cucopy_iov_memh_t]
	_ = x[unsafe.Offsetof(iovMemh{}.length)-unsafe.Offsetof(C.cucopy_iov_memh_t{}.length)]
	_ = x[unsafe.Offsetof(iovMemh{}.memh)-unsafe.Offsetof(C.cucopy_iov_memh_t{}.memh)]
	_ = x[unsafe.Sizeof(copyEntry{})-C.sizeof_cucopy_copy_t]
	_ = x[unsafe.Offsetof(copyEntry{}.src)-unsafe.Offsetof(C.cucopy_copy_t{}.src)]
	_ = x[unsafe.Offsetof(copyEntry{}.length)-unsafe.Offsetof(C.cucopy_copy_t{}.length)]
	_ = x[unsafe.Offsetof(copyEntry{}.dstMemh)-unsafe.Offsetof(C.cucopy_copy_t{}.dst_memh)]
	_ = x[unsafe.Offsetof(copyEntry{}.srcMemh)-unsafe.Offsetof(C.cucopy_copy_t{}.src_memh)]
	// cucopy_copy_2d_t, read in place (ep.go).
	_ = x[unsafe.Sizeof(copy2DEntry{})-C.sizeof_cucopy_copy_2d_t]
	_ = x[unsafe.Offsetof(copy2DEntry{}.dstPitch)-unsafe.Offsetof(C.cucopy_copy_2d_t{}.dst_pitch)]
	_ = x[unsafe.Offsetof(copy2DEntry{}.src)-unsafe.Offsetof(C.cucopy_copy_2d_t{}.src)]
	_ = x[unsafe.Offsetof(copy2DEntry{}.srcPitch)-unsafe.Offsetof(C.cucopy_copy_2d_t{}.src_pitch)]
	_ = x[unsafe.Offsetof(copy2DEntry{}.width)-unsafe.Offsetof(C.cucopy_copy_2d_t{}.width)]
	_ = x[unsafe.Offsetof(copy2DEntry{}.height)-unsafe.Offsetof(C.cucopy_copy_2d_t{}.height)]
	_ = x[unsafe.Offsetof(copy2DEntry{}.dstMemh)-unsafe.Offsetof(C.cucopy_copy_2d_t{}.dst_memh)]
	_ = x[unsafe.Offsetof(copy2DEntry{}.srcMemh)-unsafe.Offsetof(C.cucopy_copy_2d_t{}.src_memh)]
}
