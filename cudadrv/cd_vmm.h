/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef CUCOPY_CD_VMM_H
#define CUCOPY_CD_VMM_H

/*
 * Structs of the virtual memory API and of cuMemcpyBatchAsync. cuda.h
 * defines them under its own tags, so these use the project's tags;
 * tests/gpu/check_cuda_h.c proves size and every offset equal to
 * CUmemLocation, CUmemAllocationProp, CUmemAccessDesc, CUmemcpyAttributes.
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

#endif
