/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Stream-ordered pool memory: each device's default pool
 * (cuDeviceGetDefaultMemPool), its peer access (cuMemPoolSetAccess,
 * cuMemPoolGetAccess), and cuMemAllocAsync / cuMemFreeAsync. Pool memory is
 * device memory of the allocation table (fakecuda_mem.c) with no owning
 * context: not CPU-accessible, never handed out twice.
 */
#include "fakecuda_internal.h"

#define FK_POOL_ALLOC_MAX ((size_t)32 << 30)

struct fk_pool {
    struct CUmemPoolHandle_st *handle;
    int device;
    unsigned char access[FK_MAX_DEVICES]; /* under fk_lock; the owner's is implied */
};

struct fk_table fk_pool_table = {.obj_size = sizeof(struct fk_pool)};
static struct fk_pool *fk_default_pool[FK_MAX_DEVICES]; /* under fk_lock */

struct CUmemPoolHandle_st *fk_pool_handle(const struct fk_pool *p)
{
    return p->handle;
}

static cdResult fk_default_pool_locked(int dev, struct fk_pool **out)
{
    if (fk_default_pool[dev] == NULL) {
        const void *handle = NULL;
        struct fk_pool *p = fk_table_new(&fk_pool_table, &handle);
        if (p == NULL)
            return CD_ERROR_OUT_OF_MEMORY;
        p->handle = (struct CUmemPoolHandle_st *)handle;
        p->device = dev;
        fk_default_pool[dev] = p;
    }
    *out = fk_default_pool[dev];
    return CD_SUCCESS;
}

static cdResult fk_pool_check(struct CUmemPoolHandle_st *h, const char *api, struct fk_pool **out)
{
    struct fk_pool *p = fk_table_find(&fk_pool_table, h);
    if (p == NULL)
        return fk_violation(CD_ERROR_INVALID_VALUE, "%s: %p is not a memory pool handle", api,
                            (void *)h);
    *out = p;
    return CD_SUCCESS;
}

cdResult cuDeviceGetDefaultMemPool(struct CUmemPoolHandle_st **pool, cdDevice dev)
{
    FK_ENTER(cuDeviceGetDefaultMemPool);
    if (pool == NULL)
        return CD_ERROR_INVALID_VALUE;
    if (!fk_device_valid(dev))
        return CD_ERROR_INVALID_DEVICE;
    struct fk_pool *p = NULL;
    pthread_mutex_lock(&fk_lock);
    cdResult rc = fk_default_pool_locked(dev, &p);
    pthread_mutex_unlock(&fk_lock);
    if (rc == CD_SUCCESS)
        *pool = p->handle;
    return rc;
}

cdResult cuMemPoolSetAccess(struct CUmemPoolHandle_st *pool, const struct cd_mem_access_desc *map,
                            size_t count)
{
    FK_ENTER(cuMemPoolSetAccess);
    if (map == NULL && count > 0)
        return CD_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fk_lock);
    struct fk_pool *p = NULL;
    cdResult rc = fk_pool_check(pool, "cuMemPoolSetAccess", &p);
    for (size_t i = 0; rc == CD_SUCCESS && i < count; i++) {
        const struct cd_mem_access_desc *d = &map[i];
        if (d->location.type != CD_MEM_LOCATION_TYPE_DEVICE)
            rc = CD_ERROR_INVALID_VALUE;
        else if (!fk_device_valid(d->location.id))
            rc = CD_ERROR_INVALID_DEVICE;
        else if (d->flags != CD_MEM_ACCESS_FLAGS_PROT_NONE &&
                 d->flags != CD_MEM_ACCESS_FLAGS_PROT_READWRITE)
            rc = CD_ERROR_INVALID_VALUE; /* pools know no read-only access */
        else if (d->location.id == p->device && d->flags != CD_MEM_ACCESS_FLAGS_PROT_READWRITE)
            rc = CD_ERROR_INVALID_VALUE; /* the owner keeps its access */
        else if (fk_cfg.no_peer && d->location.id != p->device &&
                 d->flags != CD_MEM_ACCESS_FLAGS_PROT_NONE)
            rc = CD_ERROR_INVALID_DEVICE;
    }
    for (size_t i = 0; rc == CD_SUCCESS && i < count; i++)
        p->access[map[i].location.id] = (unsigned char)map[i].flags;
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

cdResult cuMemPoolGetAccess(unsigned int *flags, struct CUmemPoolHandle_st *pool,
                            struct cd_mem_location *location)
{
    FK_ENTER(cuMemPoolGetAccess);
    if (flags == NULL || location == NULL)
        return CD_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fk_lock);
    struct fk_pool *p = NULL;
    cdResult rc = fk_pool_check(pool, "cuMemPoolGetAccess", &p);
    if (rc == CD_SUCCESS && location->type != CD_MEM_LOCATION_TYPE_DEVICE)
        rc = CD_ERROR_INVALID_VALUE;
    else if (rc == CD_SUCCESS && !fk_device_valid(location->id))
        rc = CD_ERROR_INVALID_DEVICE;
    if (rc == CD_SUCCESS)
        *flags = location->id == p->device ? CD_MEM_ACCESS_FLAGS_PROT_READWRITE
                                           : p->access[location->id];
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* Allocates from the default pool of the stream's device, usable at once
 * (which stream order allows). */
cdResult cuMemAllocAsync(cdDevicePtr *ptr, size_t bytes, cdStream stream)
{
    FK_ENTER(cuMemAllocAsync);
    if (ptr == NULL || bytes == 0)
        return CD_ERROR_INVALID_VALUE;
    struct fk_ctx *c = NULL;
    cdResult rc = fk_stream_ctx(stream, "cuMemAllocAsync", &c);
    if (rc != CD_SUCCESS)
        return rc;
    if (bytes > FK_POOL_ALLOC_MAX)
        return CD_ERROR_OUT_OF_MEMORY;
    struct fk_pool *p = NULL;
    pthread_mutex_lock(&fk_lock);
    rc = fk_default_pool_locked(c->device, &p);
    pthread_mutex_unlock(&fk_lock);
    if (rc != CD_SUCCESS)
        return rc;
    struct fk_alloc *a = fk_alloc_new(FK_MEM_POOL, NULL, c->device, bytes);
    if (a == NULL)
        return CD_ERROR_OUT_OF_MEMORY;
    a->pool = p;
    rc = fk_mem_add(a);
    if (rc == CD_SUCCESS)
        *ptr = a->base;
    return rc;
}

/* Frees at once; copies queued before it still hold the memory until they
 * ran, which is what stream order gives. */
cdResult cuMemFreeAsync(cdDevicePtr ptr, cdStream stream)
{
    FK_ENTER(cuMemFreeAsync);
    struct fk_ctx *c = NULL;
    cdResult rc = fk_stream_ctx(stream, "cuMemFreeAsync", &c);
    if (rc != CD_SUCCESS)
        return rc;
    struct fk_alloc *a = fk_mem_take(ptr, 1u << FK_MEM_POOL);
    if (a == NULL)
        return CD_ERROR_INVALID_VALUE;
    fk_alloc_unref(a);
    return CD_SUCCESS;
}
