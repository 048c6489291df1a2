/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The project's own declarations of the CUDA driver ABI subset it uses.
 *
 * No CUDA header exists on the build machine, so the types, enum values and
 * prototypes are written here by hand. Opaque handle types use the same
 * struct tags as cuda.h (struct CUctx_st, ...), so pointers to them are
 * compatible with the real declarations; tests/gpu/check_cuda_h.c includes
 * this file together with the real cuda.h and proves every value, name and
 * prototype equal (it runs on a GPU machine, where cuda.h exists).
 */
#ifndef CUCOPY_CD_TYPES_H
#define CUCOPY_CD_TYPES_H

#include <stddef.h>

typedef unsigned int cdResult; /* CUresult: an enum, unsigned int in C */
typedef int cdDevice;
typedef unsigned long long cdDevicePtr;
typedef unsigned long long cdU64;
typedef struct CUctx_st *cdContext;
typedef struct CUstream_st *cdStream;
typedef struct CUevent_st *cdEvent;
typedef void (*cdHostFn)(void *user_data);
typedef unsigned long long cdMemHandle; /* CUmemGenericAllocationHandle */
struct CUmemcpyAttributes_st;
struct CUarray_st;         /* CUarray is a pointer to it (CUDA_MEMCPY2D) */
struct CUmemPoolHandle_st; /* CUmemoryPool is a pointer to it */
struct CUuuid_st;          /* 16 bytes */
struct CUmod_st;           /* CUmodule is a pointer to it */
struct CUfunc_st;          /* CUfunction is a pointer to it */

/* The virtual memory API's structs (cd_vmm.h). tests/gpu/check_cuda_h.c
 * defines CD_VMM_FROM_CUDA_H to check the prototypes against cuda.h's own. */
#ifndef CD_VMM_FROM_CUDA_H
#include "cd_vmm.h"
#endif

/* CUresult values the project names (cudadrv/results.go derives its Go
 * constants from these). */
#define CD_SUCCESS                          0
#define CD_ERROR_INVALID_VALUE              1
#define CD_ERROR_OUT_OF_MEMORY              2
#define CD_ERROR_NOT_INITIALIZED            3
#define CD_ERROR_DEINITIALIZED              4
#define CD_ERROR_NO_DEVICE                  100
#define CD_ERROR_INVALID_DEVICE             101
#define CD_ERROR_INVALID_IMAGE              200
#define CD_ERROR_INVALID_CONTEXT            201
#define CD_ERROR_PEER_ACCESS_UNSUPPORTED    217
#define CD_ERROR_INVALID_HANDLE             400
#define CD_ERROR_NOT_FOUND                  500
#define CD_ERROR_NOT_READY                  600
#define CD_ERROR_ILLEGAL_ADDRESS            700
#define CD_ERROR_PEER_ACCESS_ALREADY_ENABLED 704
#define CD_ERROR_PEER_ACCESS_NOT_ENABLED    705
#define CD_ERROR_PRIMARY_CONTEXT_ACTIVE     708
#define CD_ERROR_CONTEXT_IS_DESTROYED       709
#define CD_ERROR_ASSERT                     710
#define CD_ERROR_TOO_MANY_PEERS             711
#define CD_ERROR_HOST_MEMORY_ALREADY_REGISTERED 712
#define CD_ERROR_HOST_MEMORY_NOT_REGISTERED 713
#define CD_ERROR_HARDWARE_STACK_ERROR       714
#define CD_ERROR_ILLEGAL_INSTRUCTION        715
#define CD_ERROR_MISALIGNED_ADDRESS         716
#define CD_ERROR_INVALID_ADDRESS_SPACE      717
#define CD_ERROR_INVALID_PC                 718
#define CD_ERROR_LAUNCH_FAILED              719
#define CD_ERROR_NOT_PERMITTED              800
#define CD_ERROR_NOT_SUPPORTED              801
#define CD_ERROR_UNKNOWN                    999

/* CUmemorytype */
#define CD_MEMORYTYPE_HOST    1
#define CD_MEMORYTYPE_DEVICE  2
#define CD_MEMORYTYPE_ARRAY   3
#define CD_MEMORYTYPE_UNIFIED 4

/* CUpointer_attribute */
#define CD_POINTER_ATTRIBUTE_CONTEXT        1
#define CD_POINTER_ATTRIBUTE_MEMORY_TYPE    2
#define CD_POINTER_ATTRIBUTE_BUFFER_ID      7
#define CD_POINTER_ATTRIBUTE_IS_MANAGED     8
#define CD_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CD_POINTER_ATTRIBUTE_RANGE_START_ADDR 11
#define CD_POINTER_ATTRIBUTE_RANGE_SIZE     12
#define CD_POINTER_ATTRIBUTE_MEMPOOL_HANDLE 17

/* CUmem_range_attribute */
#define CD_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION 2
/* Device "ordinals" of managed-memory locations */
#define CD_DEVICE_CPU     (-1)
#define CD_DEVICE_INVALID (-2)
/* CUmem_advise */
#define CD_MEM_ADVISE_SET_PREFERRED_LOCATION 3

/* CUmemLocationType */
#define CD_MEM_LOCATION_TYPE_INVALID   0
#define CD_MEM_LOCATION_TYPE_DEVICE    1
#define CD_MEM_LOCATION_TYPE_HOST      2
#define CD_MEM_LOCATION_TYPE_HOST_NUMA 3
/* CUmemcpySrcAccessOrder */
#define CD_MEMCPY_SRC_ACCESS_ORDER_STREAM 1
/* CUmemAllocationType */
#define CD_MEM_ALLOCATION_TYPE_PINNED 1
/* CUmemAccess_flags */
#define CD_MEM_ACCESS_FLAGS_PROT_NONE      0
#define CD_MEM_ACCESS_FLAGS_PROT_READ      1
#define CD_MEM_ACCESS_FLAGS_PROT_READWRITE 3
/* CUmemAllocationGranularity_flags */
#define CD_MEM_ALLOC_GRANULARITY_MINIMUM 0

/* CUdevice_P2PAttribute */
#define CD_P2P_ATTRIBUTE_PERFORMANCE_RANK        1
#define CD_P2P_ATTRIBUTE_ACCESS_SUPPORTED        2
#define CD_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED 3

/* CUdevice_attribute */
#define CD_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT     16
#define CD_DEVICE_ATTRIBUTE_PCI_BUS_ID               33
#define CD_DEVICE_ATTRIBUTE_PCI_DEVICE_ID            34
#define CD_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE        36
#define CD_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH  37
#define CD_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT       40
#define CD_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING       41
#define CD_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID            50
#define CD_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CD_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CD_DEVICE_ATTRIBUTE_MANAGED_MEMORY           83
#define CD_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS 89

/* Flags */
#define CD_STREAM_NON_BLOCKING       0x1
#define CD_EVENT_DISABLE_TIMING      0x2
#define CD_MEMHOSTALLOC_PORTABLE     0x01
#define CD_MEMHOSTREGISTER_PORTABLE  0x01
#define CD_MEM_ATTACH_GLOBAL         0x1
#define CD_CTX_SCHED_AUTO            0x00

/* The `use` column of entry_points.h. */
#define CD_REQUIRED 0
#define CD_OPTIONAL 1
#define CD_TESTS    2

/* cuGetProcAddress */
#define CD_GET_PROC_ADDRESS_DEFAULT  0
#define CD_GET_PROC_ADDRESS_SUCCESS                0
#define CD_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND       1
#define CD_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT 2

typedef cdResult (*cd_pfn_cuGetProcAddress_v2)(const char *symbol, void **pfn,
                                                int cuda_version, cdU64 flags,
                                                unsigned int *symbol_status);
typedef cdResult (*cd_pfn_cuGetProcAddress)(const char *symbol, void **pfn,
                                             int cuda_version, cdU64 flags);

#endif
