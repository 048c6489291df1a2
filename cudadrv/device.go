// SPDX-License-Identifier: BSD-3-Clause

package cudadrv

// Device and peer attributes the library and tools read, derived from
// cd_types.h.

/*
#include "cd_types.h"
*/
import "C"

// Device attributes (CUdevice_attribute).
const (
	AttrMultiprocessorCount  = C.CD_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
	AttrPCIBusID             = C.CD_DEVICE_ATTRIBUTE_PCI_BUS_ID
	AttrMemoryClockRate      = C.CD_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE       // kHz, peak
	AttrGlobalMemoryBusWidth = C.CD_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH // bits
	AttrUnifiedAddressing    = C.CD_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING
	AttrComputeCapabilityMaj = C.CD_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	AttrComputeCapabilityMin = C.CD_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
	AttrManagedMemory        = C.CD_DEVICE_ATTRIBUTE_MANAGED_MEMORY
)

// P2P attributes (CUdevice_P2PAttribute).
const (
	P2PPerformanceRank = C.CD_P2P_ATTRIBUTE_PERFORMANCE_RANK
	P2PAccessSupported = C.CD_P2P_ATTRIBUTE_ACCESS_SUPPORTED
	P2PNativeAtomics   = C.CD_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED
)
