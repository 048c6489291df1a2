/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Proves the project's hand-written CUDA declarations (cudadrv/cd_types.h,
 * cudadrv/entry_points.h) equal the real cuda.h. Needs cuda.h, so it is not
 * part of the CMake build; on a machine with the CUDA toolkit:
 *
 *   gcc -std=c11 -Wall -Werror -I<cuda>/include -I cudadrv \
 *       tests/gpu/check_cuda_h.c -o check_cuda_h && ./check_cuda_h
 *
 * Compile time: every CD_* constant equals its CU_* / CUDA_* counterpart
 * (_Static_assert), the handle and scalar types are the same types
 * (_Generic), and every entry point's prototype is compatible with cuda.h's
 * (the type of &name, which cuda.h's macros map to the versioned symbol, is
 * compatible with a pointer to the project's prototype; gcc treats cuda.h's
 * enums as unsigned int, which is why cd_types.h uses unsigned int for them).
 * Run time: for every entry, cuda.h's expansion of `name` (the ELF symbol a
 * program built against this cuda.h would call) equals the `symbol` column.
 * It prints "check_cuda_h: N constants, M entry points agree" and exits 0, or
 * names each disagreement and exits 1.
 *
 * Known, deliberate difference (not an error of entry_points.h):
 *   cuCtxCreate: CUDA 13's cuda.h maps cuCtxCreate to cuCtxCreate_v4
 *   (CUcontext *, CUctxCreateParams *, unsigned, CUdevice) and no longer
 *   declares cuCtxCreate_v2. The project asks cuGetProcAddress for
 *   "cuCtxCreate" at version 3020, which returns the v2 ABI
 *   (CUcontext *, unsigned, CUdevice) that the driver still exports; it is a
 *   CD_TESTS entry. So with CUDA >= 13 neither the prototype nor the symbol
 *   can be compared with cuda.h: the entry is reported as "skipped".
 */
#include <cuda.h>

/*
 * The VMM entries' prototypes name the project's struct tags (cd_vmm.h).
 * Here they name cuda.h's, so the prototype check below compares them
 * exactly; the project's own definitions are then compared member by member
 * (after the #undefs at the end).
 */
#define CD_VMM_FROM_CUDA_H
#define cd_mem_location CUmemLocation_st
#define cd_mem_alloc_prop CUmemAllocationProp_st
#define cd_mem_access_desc CUmemAccessDesc_st
#define cd_memcpy2d CUDA_MEMCPY2D_st
#include "cd_types.h"

#include <stddef.h>

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ constants */

#define SAME(cd, cu) _Static_assert((cd) == (cu), #cd " != " #cu);
#define CONSTANTS(X)                                                           \
    X(CD_SUCCESS, CUDA_SUCCESS)                                                \
    X(CD_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE)                        \
    X(CD_ERROR_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY)                        \
    X(CD_ERROR_NOT_INITIALIZED, CUDA_ERROR_NOT_INITIALIZED)                    \
    X(CD_ERROR_DEINITIALIZED, CUDA_ERROR_DEINITIALIZED)                        \
    X(CD_ERROR_NO_DEVICE, CUDA_ERROR_NO_DEVICE)                                \
    X(CD_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_DEVICE)                      \
    X(CD_ERROR_INVALID_IMAGE, CUDA_ERROR_INVALID_IMAGE)                        \
    X(CD_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_CONTEXT)                    \
    X(CD_ERROR_PEER_ACCESS_UNSUPPORTED, CUDA_ERROR_PEER_ACCESS_UNSUPPORTED)    \
    X(CD_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_HANDLE)                      \
    X(CD_ERROR_NOT_FOUND, CUDA_ERROR_NOT_FOUND)                                \
    X(CD_ERROR_NOT_READY, CUDA_ERROR_NOT_READY)                                \
    X(CD_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_ILLEGAL_ADDRESS)                    \
    X(CD_ERROR_PEER_ACCESS_ALREADY_ENABLED, CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) \
    X(CD_ERROR_PEER_ACCESS_NOT_ENABLED, CUDA_ERROR_PEER_ACCESS_NOT_ENABLED)    \
    X(CD_ERROR_PRIMARY_CONTEXT_ACTIVE, CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE)      \
    X(CD_ERROR_CONTEXT_IS_DESTROYED, CUDA_ERROR_CONTEXT_IS_DESTROYED)          \
    X(CD_ERROR_ASSERT, CUDA_ERROR_ASSERT)                                      \
    X(CD_ERROR_TOO_MANY_PEERS, CUDA_ERROR_TOO_MANY_PEERS)                      \
    X(CD_ERROR_HOST_MEMORY_ALREADY_REGISTERED, CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) \
    X(CD_ERROR_HOST_MEMORY_NOT_REGISTERED, CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED) \
    X(CD_ERROR_HARDWARE_STACK_ERROR, CUDA_ERROR_HARDWARE_STACK_ERROR)          \
    X(CD_ERROR_ILLEGAL_INSTRUCTION, CUDA_ERROR_ILLEGAL_INSTRUCTION)            \
    X(CD_ERROR_MISALIGNED_ADDRESS, CUDA_ERROR_MISALIGNED_ADDRESS)              \
    X(CD_ERROR_INVALID_ADDRESS_SPACE, CUDA_ERROR_INVALID_ADDRESS_SPACE)        \
    X(CD_ERROR_INVALID_PC, CUDA_ERROR_INVALID_PC)                              \
    X(CD_ERROR_LAUNCH_FAILED, CUDA_ERROR_LAUNCH_FAILED)                        \
    X(CD_ERROR_NOT_PERMITTED, CUDA_ERROR_NOT_PERMITTED)                        \
    X(CD_ERROR_NOT_SUPPORTED, CUDA_ERROR_NOT_SUPPORTED)                        \
    X(CD_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN)                                    \
    X(CD_MEMORYTYPE_HOST, CU_MEMORYTYPE_HOST)                                  \
    X(CD_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_DEVICE)                              \
    X(CD_MEMORYTYPE_ARRAY, CU_MEMORYTYPE_ARRAY)                                \
    X(CD_MEMORYTYPE_UNIFIED, CU_MEMORYTYPE_UNIFIED)                            \
    X(CD_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_CONTEXT)              \
    X(CD_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_MEMORY_TYPE)      \
    X(CD_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_IS_MANAGED)        \
    X(CD_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) \
    X(CD_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) \
    X(CD_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_RANGE_SIZE)        \
    X(CD_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) \
    X(CD_DEVICE_ATTRIBUTE_PCI_BUS_ID, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)          \
    X(CD_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)    \
    X(CD_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE) \
    X(CD_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH) \
    X(CD_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT) \
    X(CD_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING) \
    X(CD_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)    \
    X(CD_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) \
    X(CD_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR) \
    X(CD_DEVICE_ATTRIBUTE_MANAGED_MEMORY, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)  \
    X(CD_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) \
    X(CD_STREAM_NON_BLOCKING, CU_STREAM_NON_BLOCKING)                          \
    X(CD_EVENT_DISABLE_TIMING, CU_EVENT_DISABLE_TIMING)                        \
    X(CD_MEMHOSTALLOC_PORTABLE, CU_MEMHOSTALLOC_PORTABLE)                      \
    X(CD_MEMHOSTREGISTER_PORTABLE, CU_MEMHOSTREGISTER_PORTABLE)                \
    X(CD_MEM_ATTACH_GLOBAL, CU_MEM_ATTACH_GLOBAL)                              \
    X(CD_CTX_SCHED_AUTO, CU_CTX_SCHED_AUTO)                                    \
    X(CD_GET_PROC_ADDRESS_DEFAULT, CU_GET_PROC_ADDRESS_DEFAULT)                \
    X(CD_GET_PROC_ADDRESS_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS)                \
    X(CD_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) \
    X(CD_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) \
    X(CD_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE)  \
    X(CD_POINTER_ATTRIBUTE_BUFFER_ID, CU_POINTER_ATTRIBUTE_BUFFER_ID)          \
    X(CD_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION) \
    X(CD_DEVICE_CPU, CU_DEVICE_CPU)                                            \
    X(CD_DEVICE_INVALID, CU_DEVICE_INVALID)                                    \
    X(CD_MEM_ADVISE_SET_PREFERRED_LOCATION, CU_MEM_ADVISE_SET_PREFERRED_LOCATION) \
    X(CD_MEM_LOCATION_TYPE_INVALID, CU_MEM_LOCATION_TYPE_INVALID)              \
    X(CD_MEM_LOCATION_TYPE_DEVICE, CU_MEM_LOCATION_TYPE_DEVICE)                \
    X(CD_MEM_LOCATION_TYPE_HOST, CU_MEM_LOCATION_TYPE_HOST)                    \
    X(CD_MEM_LOCATION_TYPE_HOST_NUMA, CU_MEM_LOCATION_TYPE_HOST_NUMA)          \
    X(CD_MEMCPY_SRC_ACCESS_ORDER_STREAM, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM)    \
    X(CD_MEM_ALLOCATION_TYPE_PINNED, CU_MEM_ALLOCATION_TYPE_PINNED)            \
    X(CD_MEM_ACCESS_FLAGS_PROT_NONE, CU_MEM_ACCESS_FLAGS_PROT_NONE)            \
    X(CD_MEM_ACCESS_FLAGS_PROT_READ, CU_MEM_ACCESS_FLAGS_PROT_READ)            \
    X(CD_MEM_ACCESS_FLAGS_PROT_READWRITE, CU_MEM_ACCESS_FLAGS_PROT_READWRITE)  \
    X(CD_MEM_ALLOC_GRANULARITY_MINIMUM, CU_MEM_ALLOC_GRANULARITY_MINIMUM)      \
    X(CD_P2P_ATTRIBUTE_PERFORMANCE_RANK, CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK) \
    X(CD_P2P_ATTRIBUTE_ACCESS_SUPPORTED, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED) \
    X(CD_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED)

CONSTANTS(SAME)

#define COUNT_ONE(cd, cu) +1
static const int constant_count = 0 CONSTANTS(COUNT_ONE);

/* ---------------------------------------------------------------- types */

#define SAME_TYPE(cd, cu) \
    _Static_assert(_Generic((cu *)0, cd *: 1, default: 0), #cd " is not the type " #cu);
SAME_TYPE(cdResult, CUresult)
SAME_TYPE(cdDevice, CUdevice)
SAME_TYPE(cdDevicePtr, CUdeviceptr)
SAME_TYPE(cdContext, CUcontext)
SAME_TYPE(cdStream, CUstream)
SAME_TYPE(cdEvent, CUevent)
SAME_TYPE(cdHostFn, CUhostFn)
SAME_TYPE(struct CUmod_st *, CUmodule)
SAME_TYPE(struct CUfunc_st *, CUfunction)
SAME_TYPE(struct CUmemcpyAttributes_st, CUmemcpyAttributes)
SAME_TYPE(cdMemHandle, CUmemGenericAllocationHandle)
SAME_TYPE(struct CUuuid_st, CUuuid)
SAME_TYPE(struct CUmemPoolHandle_st *, CUmemoryPool)
_Static_assert(sizeof(cdU64) == sizeof(cuuint64_t), "cdU64 size");
_Static_assert(sizeof(cdResult) == sizeof(CUresult), "cdResult size");

/* ------------------------------------------------------- entry points
 *
 * SKIP_<name> expands to "~, 1" for entries whose cuda.h declaration cannot be
 * compared (see the comment at the top); SKIPPED_FLAG(SKIP_<name>) is then 1,
 * else 0.
 */
#if CUDA_VERSION >= 13000
#define SKIP_cuCtxCreate ~, 1
#endif
#define SECOND(a, b, ...) b
#define SECOND_(...) SECOND(__VA_ARGS__)
/* Takes SKIP_##name pasted inside CD_ENTRY itself: an argument used without
 * ## would already be expanded to cuda.h's versioned name. */
#define SKIPPED_FLAG(skip_macro) SECOND_(skip_macro, 0, ~)
#define IF_0(yes, no) no
#define IF_1(yes, no) yes
#define IF_(c) IF_##c
#define IF(c) IF_(c)

#define STR(x) #x
#define XSTR(x) STR(x) /* expands x first: cuda.h's versioned name */

/* Compile time: the project's prototype is compatible with cuda.h's. The
 * operand of _Generic is not evaluated, so nothing needs libcuda to link. */
#define PROTO_CHECK(name, text, params)                              \
    _Static_assert(_Generic(&name, cdResult(*) params: 1, default: 0), \
                   text ": entry_points.h prototype is not compatible with cuda.h's");
#define CD_ENTRY(name, symbol, version, use, params) \
    IF(SKIPPED_FLAG(SKIP_##name))(, PROTO_CHECK(name, #name, params))
#include "entry_points.h"
#undef CD_ENTRY

/* ------------------------------------------- the project's VMM structs */

#undef cd_mem_location
#undef cd_mem_alloc_prop
#undef cd_mem_access_desc
#undef cd_memcpy2d
#undef CD_VMM_FROM_CUDA_H
#include "cd_vmm.h"

#define SAME_MEMBER(ours, theirs, m_ours, m_theirs)                                    \
    _Static_assert(offsetof(struct ours, m_ours) == offsetof(theirs, m_theirs) &&      \
                       sizeof(((struct ours *)0)->m_ours) == sizeof(((theirs *)0)->m_theirs), \
                   #ours "." #m_ours " differs from " #theirs "." #m_theirs);
#define SAME_SIZE(ours, theirs) \
    _Static_assert(sizeof(struct ours) == sizeof(theirs), #ours " size differs from " #theirs);
SAME_SIZE(cd_mem_location, CUmemLocation)
SAME_MEMBER(cd_mem_location, CUmemLocation, type, type)
SAME_MEMBER(cd_mem_location, CUmemLocation, id, id)
SAME_SIZE(cd_mem_alloc_prop, CUmemAllocationProp)
SAME_MEMBER(cd_mem_alloc_prop, CUmemAllocationProp, type, type)
SAME_MEMBER(cd_mem_alloc_prop, CUmemAllocationProp, requested_handle_types, requestedHandleTypes)
SAME_MEMBER(cd_mem_alloc_prop, CUmemAllocationProp, location, location)
SAME_MEMBER(cd_mem_alloc_prop, CUmemAllocationProp, win32_handle_meta_data, win32HandleMetaData)
SAME_MEMBER(cd_mem_alloc_prop, CUmemAllocationProp, alloc_flags, allocFlags)
SAME_MEMBER(cd_mem_alloc_prop, CUmemAllocationProp, alloc_flags.usage, allocFlags.usage)
SAME_SIZE(cd_mem_access_desc, CUmemAccessDesc)
SAME_MEMBER(cd_mem_access_desc, CUmemAccessDesc, location, location)
SAME_MEMBER(cd_mem_access_desc, CUmemAccessDesc, flags, flags)
SAME_SIZE(cd_memcpy_attr, CUmemcpyAttributes)
SAME_MEMBER(cd_memcpy_attr, CUmemcpyAttributes, src_access_order, srcAccessOrder)
SAME_MEMBER(cd_memcpy_attr, CUmemcpyAttributes, src_loc_hint, srcLocHint)
SAME_MEMBER(cd_memcpy_attr, CUmemcpyAttributes, dst_loc_hint, dstLocHint)
SAME_MEMBER(cd_memcpy_attr, CUmemcpyAttributes, flags, flags)
SAME_SIZE(cd_memcpy2d, CUDA_MEMCPY2D)
SAME_MEMBER(cd_memcpy2d, CUDA_MEMCPY2D, src_x_in_bytes, srcXInBytes)
SAME_MEMBER(cd_memcpy2d, CUDA_MEMCPY2D, src_y, srcY)
SAME_MEMBER(cd_memcpy2d, CUDA_MEMCPY2D, src_memory_type, srcMemoryType)
SAME_MEMBER(cd_memcpy2d, CUDA_MEMCPY2D, src_host, srcHost)
SAME_MEMBER(cd_memcpy2d, CUDA_MEMCPY2D, src_device, srcDevice)
SAME_MEMBER(cd_memcpy2d, CUDA_MEMCPY2D, src_array, srcArray)
SAME_MEMBER(cd_memcpy2d, CUDA_MEMCPY2D, src_pitch, srcPitch)
SAME_MEMBER(cd_memcpy2d, CUDA_MEMCPY2D, dst_x_in_bytes, dstXInBytes)
SAME_MEMBER(cd_memcpy2d, CUDA_MEMCPY2D, dst_y, dstY)
SAME_MEMBER(cd_memcpy2d, CUDA_MEMCPY2D, dst_memory_type, dstMemoryType)
SAME_MEMBER(cd_memcpy2d, CUDA_MEMCPY2D, dst_host, dstHost)
SAME_MEMBER(cd_memcpy2d, CUDA_MEMCPY2D, dst_device, dstDevice)
SAME_MEMBER(cd_memcpy2d, CUDA_MEMCPY2D, dst_array, dstArray)
SAME_MEMBER(cd_memcpy2d, CUDA_MEMCPY2D, dst_pitch, dstPitch)
SAME_MEMBER(cd_memcpy2d, CUDA_MEMCPY2D, width_in_bytes, WidthInBytes)
SAME_MEMBER(cd_memcpy2d, CUDA_MEMCPY2D, height, Height)

struct entry {
    const char *name;
    const char *symbol;     /* entry_points.h */
    const char *cuda_h_sym; /* what cuda.h maps name to */
    int skipped;
};

static const struct entry entries[] = {
#define CD_ENTRY(name, symbol, version, use, params) \
    {#name, #symbol, XSTR(name), SKIPPED_FLAG(SKIP_##name)},
#include "entry_points.h"
#undef CD_ENTRY
};

int main(void)
{
    int n = (int)(sizeof(entries) / sizeof(entries[0]));
    int agree = 0;
    int skipped = 0;
    int bad = 0;
    for (int i = 0; i < n; i++) {
        const struct entry *e = &entries[i];
        if (e->skipped) {
            printf("check_cuda_h: %s: skipped (cuda.h %d maps it to %s; entry_points.h uses %s, "
                   "see the comment in check_cuda_h.c)\n",
                   e->name, CUDA_VERSION, e->cuda_h_sym, e->symbol);
            skipped++;
        } else if (strcmp(e->symbol, e->cuda_h_sym) != 0) {
            printf("check_cuda_h: %s: entry_points.h says symbol %s, cuda.h %d maps it to %s\n",
                   e->name, e->symbol, CUDA_VERSION, e->cuda_h_sym);
            bad++;
        } else {
            agree++;
        }
    }
    printf("check_cuda_h: CUDA_VERSION %d: %d constants, %d entry points agree", CUDA_VERSION,
           constant_count, agree);
    if (skipped > 0)
        printf(", %d skipped", skipped);
    if (bad > 0)
        printf(", %d DISAGREE", bad);
    printf("\n");
    return bad == 0 ? 0 : 1;
}
