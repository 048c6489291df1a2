// SPDX-License-Identifier: BSD-3-Clause

package cudadrv

// The memory domain's values: what the driver says of an address
// (MemInfo), the memory kinds MemAlloc makes, and the CUDA enum values
// they use, derived from cd_types.h and cd_shim.h.

/*
#include "cd_shim.h"
*/
import "C"

// MemInfo is what the driver says of one address (struct cd_mem_info).
type MemInfo struct {
	Start, Size     uint64  // the allocation, 0 if unknown
	Ctx             Context // owning context, 0 if none
	Pool            uintptr // memory pool, 0 if none
	CtxID           uint64  // cuCtxGetId of Ctx, 0 without either
	AccessMask      uint64  // VMM and pool memory: bit d, device d has access
	BufferID        uint64  // CU_POINTER_ATTRIBUTE_BUFFER_ID, 0 if unknown
	Type            uint32  // MemoryType*, 0 when CUDA does not know the address
	Managed         uint32
	Ordinal         int32 // DEVICE_ORDINAL
	Preferred       int32 // managed: preferred location (device, DeviceCPU, DeviceInvalid)
	VMM             int32 // 1: cuMemCreate + cuMemMap memory
	VMMLocationType int32 // MemLocation*
	VMMLocationID   int32
	_               int32
}

// CUmemorytype values and the managed-memory location sentinels.
const (
	MemoryTypeHost    = C.CD_MEMORYTYPE_HOST
	MemoryTypeDevice  = C.CD_MEMORYTYPE_DEVICE
	DeviceCPU         = C.CD_DEVICE_CPU
	DeviceInvalid     = C.CD_DEVICE_INVALID
	MemLocationDevice = C.CD_MEM_LOCATION_TYPE_DEVICE
)

// MemKind is what MemAlloc allocates (CD_MEM_*).
type MemKind int32

const (
	MemDevice  MemKind = C.CD_MEM_DEVICE
	MemManaged MemKind = C.CD_MEM_MANAGED
	MemHost    MemKind = C.CD_MEM_HOST // pinned, portable
)
