/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The memory domain's driver calls: what an address is, allocation, host
 * registration. Cold paths: one C function per request, context pushed only
 * where the driver needs one and popped before returning.
 */
#include <stdint.h>
#include <string.h>

#include "cd_internal.h"

#define CD_FAIL(err_, idx_, r_)                                                        \
    do {                                                                               \
        (err_)->entry = (idx_);                                                        \
        (err_)->result = (r_);                                                         \
    } while (0)

/* VMM memory: the allocation's location, and which devices may access it. */
static void query_vmm(uint64_t ptr, int32_t ndevices, cd_mem_info *info)
{
    cdMemHandle handle = 0;
    if (cd.cuMemRetainAllocationHandle == NULL ||
        cd.cuMemRetainAllocationHandle(&handle, (void *)(uintptr_t)ptr) != CD_SUCCESS)
        return;
    info->vmm = 1;
    struct cd_mem_alloc_prop prop;
    memset(&prop, 0, sizeof(prop));
    if (cd.cuMemGetAllocationPropertiesFromHandle != NULL &&
        cd.cuMemGetAllocationPropertiesFromHandle(&prop, handle) == CD_SUCCESS) {
        info->vmm_location_type = (int32_t)prop.location.type;
        info->vmm_location_id = prop.location.id;
    }
    if (cd.cuMemRelease != NULL)
        (void)cd.cuMemRelease(handle);
    for (int32_t d = 0; d < ndevices && d < 64 && cd.cuMemGetAccess != NULL; d++) {
        struct cd_mem_location loc = {CD_MEM_LOCATION_TYPE_DEVICE, d};
        unsigned long long flags = 0;
        if (cd.cuMemGetAccess(&flags, &loc, ptr) == CD_SUCCESS && flags != CD_MEM_ACCESS_FLAGS_PROT_NONE)
            info->access_mask |= 1ull << d;
    }
}

static void query_pool(int32_t ndevices, cd_mem_info *info)
{
    for (int32_t d = 0; d < ndevices && d < 64 && cd.cuMemPoolGetAccess != NULL; d++) {
        struct cd_mem_location loc = {CD_MEM_LOCATION_TYPE_DEVICE, d};
        unsigned int flags = 0;
        if (cd.cuMemPoolGetAccess(&flags, (struct CUmemPoolHandle_st *)info->pool, &loc) ==
                CD_SUCCESS &&
            flags != CD_MEM_ACCESS_FLAGS_PROT_NONE)
            info->access_mask |= 1ull << d;
    }
}

int cd_mem_query(uint64_t ptr, int32_t ndevices, cd_mem_info *info, cd_err *err)
{
    static unsigned int attrs[8] = {
        CD_POINTER_ATTRIBUTE_MEMORY_TYPE,      CD_POINTER_ATTRIBUTE_CONTEXT,
        CD_POINTER_ATTRIBUTE_DEVICE_ORDINAL,   CD_POINTER_ATTRIBUTE_IS_MANAGED,
        CD_POINTER_ATTRIBUTE_RANGE_START_ADDR, CD_POINTER_ATTRIBUTE_RANGE_SIZE,
        CD_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,   CD_POINTER_ATTRIBUTE_BUFFER_ID,
    };
    cdContext ctx = NULL;
    size_t size = 0;
    void *data[8] = {&info->type, &ctx,  &info->ordinal, &info->managed,
                     &info->start, &size, &info->pool,    &info->buffer_id};
    memset(info, 0, sizeof(*info));
    info->ordinal = -1;
    info->preferred = CD_DEVICE_INVALID;
    err->entry = -1;
    err->result = CD_SUCCESS;
    cdResult r = cd.cuPointerGetAttributes(8, attrs, data, ptr);
    if (r != CD_SUCCESS) {
        CD_FAIL(err, CD_IDX_cuPointerGetAttributes, r);
        return -1;
    }
    info->ctx = (uintptr_t)ctx;
    info->size = size;
    if (ctx != NULL && cd.cuCtxGetId != NULL &&
        (r = cd.cuCtxGetId(ctx, (unsigned long long *)&info->ctx_id)) != CD_SUCCESS) {
        CD_FAIL(err, CD_IDX_cuCtxGetId, r);
        return -1;
    }
    if (info->managed) {
        int pushed = 0;
        int32_t preferred = CD_DEVICE_INVALID;
        if (ctx != NULL && cd_enter(ctx, &pushed, err) != CD_SUCCESS)
            return -1;
        r = cd.cuMemRangeGetAttribute(&preferred, sizeof(preferred),
                                      CD_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, ptr, 1);
        if (r != CD_SUCCESS)
            CD_FAIL(err, CD_IDX_cuMemRangeGetAttribute, r);
        info->preferred = preferred;
        int ok = err->result == CD_SUCCESS;
        cd_leave(pushed, err);
        return ok ? 0 : -1;
    }
    /* No owner: pool or VMM memory; host-located VMM memory reads as HOST. */
    if (ctx == NULL && (info->type == CD_MEMORYTYPE_DEVICE || info->type == CD_MEMORYTYPE_HOST)) {
        if (info->pool != 0)
            query_pool(ndevices, info);
        else
            query_vmm(ptr, ndevices, info);
    }
    return 0;
}

int cd_mem_alloc(uintptr_t ctx, int32_t kind, uint64_t bytes, uint64_t *ptr, cd_err *err)
{
    int pushed = 0;
    cdResult r;
    void *host = NULL;
    err->entry = -1;
    err->result = CD_SUCCESS;
    if (cd_enter((cdContext)ctx, &pushed, err) != CD_SUCCESS)
        return -1;
    switch (kind) {
    case CD_MEM_DEVICE:
        if ((r = cd.cuMemAlloc((cdDevicePtr *)ptr, (size_t)bytes)) != CD_SUCCESS)
            CD_FAIL(err, CD_IDX_cuMemAlloc, r);
        break;
    case CD_MEM_MANAGED:
        if ((r = cd.cuMemAllocManaged((cdDevicePtr *)ptr, (size_t)bytes, CD_MEM_ATTACH_GLOBAL)) !=
            CD_SUCCESS)
            CD_FAIL(err, CD_IDX_cuMemAllocManaged, r);
        break;
    default:
        if ((r = cd.cuMemHostAlloc(&host, (size_t)bytes, CD_MEMHOSTALLOC_PORTABLE)) != CD_SUCCESS)
            CD_FAIL(err, CD_IDX_cuMemHostAlloc, r);
        *ptr = (uint64_t)(uintptr_t)host;
        break;
    }
    int ok = err->result == CD_SUCCESS;
    cd_leave(pushed, err); /* a failed pop does not undo the allocation */
    return ok ? 0 : -1;
}

static cdResult free_kind(int32_t kind, uint64_t ptr)
{
    return kind == CD_MEM_HOST ? cd.cuMemFreeHost((void *)(uintptr_t)ptr) : cd.cuMemFree(ptr);
}

int cd_mem_free(uintptr_t ctx, int32_t kind, uint64_t ptr, cd_err *err)
{
    CD_IN_CTX(ctx, err, kind == CD_MEM_HOST ? CD_IDX_cuMemFreeHost : CD_IDX_cuMemFree,
              free_kind(kind, ptr));
}

int cd_host_register(uintptr_t ctx, uint64_t ptr, uint64_t bytes, cd_err *err)
{
    CD_IN_CTX(ctx, err, CD_IDX_cuMemHostRegister,
              cd.cuMemHostRegister((void *)(uintptr_t)ptr, (size_t)bytes,
                                   CD_MEMHOSTREGISTER_PORTABLE));
}

int cd_host_unregister(uintptr_t ctx, uint64_t ptr, cd_err *err)
{
    CD_IN_CTX(ctx, err, CD_IDX_cuMemHostUnregister, cd.cuMemHostUnregister((void *)(uintptr_t)ptr));
}
