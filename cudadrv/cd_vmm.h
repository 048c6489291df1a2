/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef CUCOPY_CD_VMM_H
#define CUCOPY_CD_VMM_H

/*
 * Structs of the virtual memory API, of cuMemcpyBatchAsync and of
 * cuMemcpy2DAsync. cuda.h defines them under its own tags, so these use the
 * project's tags; tests/gpu/check_cuda_h.c proves size and every offset
 * equal to CUmemLocation, CUmemAllocationProp, CUmemAccessDesc,
 * CUmemcpyAttributes, CUDA_MEMCPY2D.
 */
struct cd_mem_location {
    unsigned int type; /* CD_MEM_LOCATION_TYPE_* */
    int id;
};
struct cd_mem_alloc_prop {
    unsigned int type;                   /* CD_MEM_ALLOCATION_TYPE_PINNED */
    unsigned int requested_handle_types; /* 0: none */
    struct cd_mem_location location;
    void *win32_handle_meta_data;
    struct {
        unsigned char compression_type;
        unsigned char gpu_direct_rdma_capable;
        unsigned short usage;
        unsigned char reserved[4];
    } alloc_flags;
};
struct cd_mem_access_desc {
    struct cd_mem_location location;
    unsigned int flags; /* CD_MEM_ACCESS_FLAGS_PROT_* */
};
/* CUmemcpyAttributes: passed to cuMemcpyBatchAsync as the opaque
 * struct CUmemcpyAttributes_st of its prototype (entry_points.h). */
struct cd_memcpy_attr {
    unsigned int src_access_order; /* CD_MEMCPY_SRC_ACCESS_ORDER_* */
    struct cd_mem_location src_loc_hint;
    struct cd_mem_location dst_loc_hint;
    unsigned int flags;
};
/* CUDA_MEMCPY2D (its _v2 ABI, the one cuMemcpy2DAsync_v2 takes): row i of
 * the copy moves width bytes from src + i * src_pitch to dst + i * dst_pitch.
 * A side of type CD_MEMORYTYPE_HOST is given by its host pointer, one of
 * type CD_MEMORYTYPE_DEVICE or _UNIFIED by its device pointer; arrays are
 * not used (NULL). */
struct cd_memcpy2d {
    size_t src_x_in_bytes;
    size_t src_y;
    unsigned int src_memory_type; /* CD_MEMORYTYPE_* */
    const void *src_host;
    unsigned long long src_device;
    struct CUarray_st *src_array;
    size_t src_pitch;
    size_t dst_x_in_bytes;
    size_t dst_y;
    unsigned int dst_memory_type;
    void *dst_host;
    unsigned long long dst_device;
    struct CUarray_st *dst_array;
    size_t dst_pitch;
    size_t width_in_bytes;
    size_t height;
};

#endif
