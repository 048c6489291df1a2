/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef CUCOPY_CD_VMM_H
#define CUCOPY_CD_VMM_H

/*
 * Structs of the virtual memory API. cuda.h defines them under its own tags,
 * so these use the project's tags; tests/gpu/check_cuda_h.c proves size and
 * every offset equal to CUmemLocation, CUmemAllocationProp, CUmemAccessDesc.
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

#endif
