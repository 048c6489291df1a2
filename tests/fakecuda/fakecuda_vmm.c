/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The virtual memory management API (cuMemCreate, cuMemAddressReserve,
 * cuMemMap, cuMemSetAccess, ...). Stream-ordered pools: fakecuda_pool.c.
 *
 * A VMM allocation is a memfd with a private read/write alias for the copy
 * engine. Reservations are carved from one reserved PROT_NONE range and never
 * handed out twice. cuMemMap maps the memfd PROT_NONE at the reserved
 * address: the memory is not CPU-accessible there (as on a GPU without host
 * access), and every mapping is an entry of the allocation table, so pointer
 * attributes and copies see it. Access flags are kept per mapping; a copy on
 * behalf of a device without access is a violation (the GPU would fault).
 *
 * Host-located VMM memory (location HOST or HOST_NUMA) becomes CPU-accessible
 * at its address once cuMemSetAccess grants the host access, as on the real
 * driver; otherwise it behaves like device memory.
 *
 * Allocation objects are never freed (their memory is, when the last handle
 * reference and the last mapping are gone), so a stale handle is recognized.
 */
#include "fakecuda_internal.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define FK_GRANULARITY ((size_t)2 << 20)
#define FK_VMM_MAX ((size_t)4 << 30) /* per cuMemCreate */
#define FK_VMM_HANDLE_BASE 0xfa4e000000000000ULL /* handle = base + index + 1 */

struct fk_vmm {
    cdMemHandle handle;
    size_t size;
    struct cd_mem_alloc_prop prop;
    int device; /* CD_DEVICE_INVALID when host-located */
    int host_located;
    int fd;
    char *cpu;
    int user_refs;   /* under fk_mem_lock: cuMemCreate + retains - releases */
    atomic_int refs; /* user_refs plus one per mapping; the memory goes at 0 */
};

struct fk_resv {
    uintptr_t base;
    size_t size;
    int live;
};

/* Under fk_mem_lock. */
static struct fk_vmm **fk_vmms;
static size_t fk_nvmms;
static size_t fk_vmms_cap;
static struct fk_resv *fk_resvs;
static size_t fk_nresvs;
static size_t fk_resvs_cap;

static int fk_grow(void **array, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t grown_cap = *cap ? 2 * *cap : 16;
    void *grown = realloc(*array, grown_cap * elem);
    if (grown == NULL)
        return -1;
    *array = grown;
    *cap = grown_cap;
    return 0;
}

static struct fk_vmm *fk_vmm_find_locked(cdMemHandle handle)
{
    if (handle <= FK_VMM_HANDLE_BASE || handle - FK_VMM_HANDLE_BASE > fk_nvmms)
        return NULL;
    return fk_vmms[handle - FK_VMM_HANDLE_BASE - 1];
}

void fk_vmm_unref(struct fk_vmm *v)
{
    if (v == NULL || atomic_fetch_sub(&v->refs, 1) != 1)
        return;
    munmap(v->cpu, v->size);
    close(v->fd);
    v->fd = -1;
}

long fk_vmm_count_live_locked(void)
{
    long n = 0;
    for (size_t i = 0; i < fk_nvmms; i++)
        n += atomic_load(&fk_vmms[i]->refs) > 0;
    return n;
}

/* Checks an allocation property; *device is the location's device, or
 * CD_DEVICE_INVALID for host memory. */
static cdResult fk_prop_check(const struct cd_mem_alloc_prop *prop, int *device, int *host)
{
    if (prop->type != CD_MEM_ALLOCATION_TYPE_PINNED)
        return CD_ERROR_INVALID_VALUE;
    switch (prop->location.type) {
    case CD_MEM_LOCATION_TYPE_DEVICE:
        if (!fk_device_valid(prop->location.id))
            return CD_ERROR_INVALID_DEVICE;
        *device = prop->location.id;
        *host = 0;
        return CD_SUCCESS;
    case CD_MEM_LOCATION_TYPE_HOST_NUMA:
        if (prop->location.id < 0)
            return CD_ERROR_INVALID_VALUE;
        /* fall through */
    case CD_MEM_LOCATION_TYPE_HOST:
        *device = CD_DEVICE_INVALID;
        *host = 1;
        return CD_SUCCESS;
    default:
        return CD_ERROR_INVALID_VALUE;
    }
}

/* ---- physical allocations ------------------------------------------------------- */

cdResult cuMemGetAllocationGranularity(size_t *granularity, const struct cd_mem_alloc_prop *prop,
                                       unsigned int option)
{
    FK_ENTER(cuMemGetAllocationGranularity);
    if (granularity == NULL || prop == NULL || option > 1) /* MINIMUM, RECOMMENDED */
        return CD_ERROR_INVALID_VALUE;
    int device = 0;
    int host = 0;
    cdResult rc = fk_prop_check(prop, &device, &host);
    if (rc == CD_SUCCESS)
        *granularity = FK_GRANULARITY;
    return rc;
}

cdResult cuMemCreate(cdMemHandle *handle, size_t size, const struct cd_mem_alloc_prop *prop,
                     unsigned long long flags)
{
    FK_ENTER(cuMemCreate);
    if (handle == NULL || prop == NULL || flags != 0 || size == 0 || size % FK_GRANULARITY != 0)
        return CD_ERROR_INVALID_VALUE;
    int device = 0;
    int host = 0;
    cdResult rc = fk_prop_check(prop, &device, &host);
    if (rc != CD_SUCCESS)
        return rc;
    struct fk_ctx *c = NULL;
    rc = fk_ctx_require_current(&c, "cuMemCreate", 1);
    if (rc != CD_SUCCESS)
        return rc;
    if (size > FK_VMM_MAX)
        return CD_ERROR_OUT_OF_MEMORY;
    struct fk_vmm *v = calloc(1, sizeof *v);
    if (v == NULL)
        return CD_ERROR_OUT_OF_MEMORY;
    v->size = size;
    v->prop = *prop;
    v->device = device;
    v->host_located = host;
    v->user_refs = 1;
    atomic_store(&v->refs, 1);
    v->fd = memfd_create(host ? "fakecuda-vmm-host" : "fakecuda-vmm", MFD_CLOEXEC);
    void *alias = MAP_FAILED;
    if (v->fd >= 0 && ftruncate(v->fd, (off_t)size) == 0)
        alias = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
    if (alias == MAP_FAILED) {
        if (v->fd >= 0)
            close(v->fd);
        free(v);
        return CD_ERROR_OUT_OF_MEMORY;
    }
    v->cpu = alias;
    fk_fill_garbage(v->cpu, size);
    pthread_rwlock_wrlock(&fk_mem_lock);
    if (fk_grow((void **)&fk_vmms, &fk_vmms_cap, fk_nvmms, sizeof *fk_vmms) == 0) {
        fk_vmms[fk_nvmms++] = v;
        v->handle = FK_VMM_HANDLE_BASE + fk_nvmms;
    } else {
        rc = CD_ERROR_OUT_OF_MEMORY;
    }
    pthread_rwlock_unlock(&fk_mem_lock);
    if (rc != CD_SUCCESS) {
        munmap(v->cpu, size);
        close(v->fd);
        free(v);
        return rc;
    }
    *handle = v->handle;
    return CD_SUCCESS;
}

cdResult cuMemRelease(cdMemHandle handle)
{
    FK_ENTER(cuMemRelease);
    cdResult rc = CD_SUCCESS;
    pthread_rwlock_wrlock(&fk_mem_lock);
    struct fk_vmm *v = fk_vmm_find_locked(handle);
    if (v == NULL)
        rc = CD_ERROR_INVALID_VALUE;
    else if (v->user_refs == 0)
        rc = fk_violation(CD_ERROR_INVALID_VALUE,
                          "cuMemRelease: handle %#llx released more often than created and "
                          "retained",
                          handle);
    else
        v->user_refs--;
    pthread_rwlock_unlock(&fk_mem_lock);
    if (rc == CD_SUCCESS)
        fk_vmm_unref(v);
    return rc;
}

cdResult cuMemGetAllocationPropertiesFromHandle(struct cd_mem_alloc_prop *prop, cdMemHandle handle)
{
    FK_ENTER(cuMemGetAllocationPropertiesFromHandle);
    if (prop == NULL)
        return CD_ERROR_INVALID_VALUE;
    cdResult rc = CD_SUCCESS;
    pthread_rwlock_rdlock(&fk_mem_lock);
    const struct fk_vmm *v = fk_vmm_find_locked(handle);
    if (v != NULL && v->user_refs > 0)
        *prop = v->prop;
    else
        rc = CD_ERROR_INVALID_VALUE;
    pthread_rwlock_unlock(&fk_mem_lock);
    return rc;
}

cdResult cuMemRetainAllocationHandle(cdMemHandle *handle, void *addr)
{
    FK_ENTER(cuMemRetainAllocationHandle);
    if (handle == NULL)
        return CD_ERROR_INVALID_VALUE;
    cdResult rc = CD_SUCCESS;
    pthread_rwlock_wrlock(&fk_mem_lock);
    struct fk_alloc *a = fk_mem_find_locked((uintptr_t)addr);
    if (a != NULL && a->kind == FK_MEM_VMM) {
        a->vmm->user_refs++;
        atomic_fetch_add(&a->vmm->refs, 1);
        *handle = a->vmm->handle;
    } else {
        rc = CD_ERROR_INVALID_VALUE;
    }
    pthread_rwlock_unlock(&fk_mem_lock);
    return rc;
}

/* ---- address reservations and mappings ---------------------------------------------- */

cdResult cuMemAddressReserve(cdDevicePtr *ptr, size_t size, size_t alignment, cdDevicePtr addr,
                             unsigned long long flags)
{
    FK_ENTER(cuMemAddressReserve);
    (void)addr; /* a hint; the fake never honours it */
    if (ptr == NULL || size == 0 || size % FK_GRANULARITY != 0 || flags != 0 ||
        (alignment & (alignment - 1)) != 0)
        return CD_ERROR_INVALID_VALUE;
    if (alignment < FK_GRANULARITY)
        alignment = FK_GRANULARITY;
    pthread_rwlock_wrlock(&fk_mem_lock);
    uintptr_t base = 0;
    cdResult rc = fk_grow((void **)&fk_resvs, &fk_resvs_cap, fk_nresvs, sizeof *fk_resvs) == 0
                      ? fk_vmm_va_carve_locked(size, alignment, &base)
                      : CD_ERROR_OUT_OF_MEMORY;
    if (rc == CD_SUCCESS) {
        fk_resvs[fk_nresvs++] = (struct fk_resv){base, size, 1};
        *ptr = base;
    }
    pthread_rwlock_unlock(&fk_mem_lock);
    return rc;
}

/* The live reservation holding [ptr, ptr + size), or NULL. */
static struct fk_resv *fk_resv_find_locked(uintptr_t ptr, size_t size)
{
    for (size_t i = 0; i < fk_nresvs; i++) {
        struct fk_resv *r = &fk_resvs[i];
        if (r->live && ptr - r->base < r->size && size <= r->size - (ptr - r->base))
            return r;
    }
    return NULL;
}

/* The table entries that exactly cover [ptr, ptr + size) with VMM mappings
 * and nothing else: *first and *n. */
static int fk_vmm_cover_locked(uintptr_t ptr, size_t size, size_t *first, size_t *n)
{
    if (size == 0 || ptr + size < ptr)
        return 0;
    size_t i = fk_mem_lower_bound_locked(ptr);
    if (i > 0) {
        const struct fk_alloc *prev = fk_mem_at_locked(i - 1);
        if (prev->base + prev->size > ptr)
            return 0; /* a mapping straddles the start */
    }
    size_t count = 0;
    uintptr_t at = ptr;
    size_t total = fk_mem_count_locked();
    while (at < ptr + size) {
        if (i + count >= total)
            return 0;
        const struct fk_alloc *a = fk_mem_at_locked(i + count);
        if (a->base != at || a->kind != FK_MEM_VMM || a->size > ptr + size - at)
            return 0;
        at += a->size;
        count++;
    }
    *first = i;
    *n = count;
    return 1;
}

cdResult cuMemAddressFree(cdDevicePtr ptr, size_t size)
{
    FK_ENTER(cuMemAddressFree);
    cdResult rc = CD_SUCCESS;
    pthread_rwlock_wrlock(&fk_mem_lock);
    struct fk_resv *r = fk_resv_find_locked(ptr, size);
    if (r == NULL || r->base != ptr || r->size != size) {
        rc = CD_ERROR_INVALID_VALUE;
    } else {
        size_t i = fk_mem_lower_bound_locked(ptr);
        if (i < fk_mem_count_locked() && fk_mem_at_locked(i)->base < ptr + size)
            rc = fk_violation(CD_ERROR_INVALID_VALUE,
                              "cuMemAddressFree: [%#llx, +%zu) still has mappings (cuMemUnmap "
                              "first)",
                              ptr, size);
        else
            r->live = 0; /* the addresses stay reserved holes for good */
    }
    pthread_rwlock_unlock(&fk_mem_lock);
    return rc;
}

cdResult cuMemMap(cdDevicePtr ptr, size_t size, size_t offset, cdMemHandle handle,
                  unsigned long long flags)
{
    FK_ENTER(cuMemMap);
    if (flags != 0 || size == 0 || ptr % FK_GRANULARITY != 0 || size % FK_GRANULARITY != 0 ||
        offset % FK_GRANULARITY != 0)
        return CD_ERROR_INVALID_VALUE;
    cdResult rc = CD_SUCCESS;
    struct fk_alloc *a = NULL;
    pthread_rwlock_wrlock(&fk_mem_lock);
    struct fk_vmm *v = fk_vmm_find_locked(handle);
    size_t i = fk_mem_lower_bound_locked(ptr);
    size_t total = fk_mem_count_locked();
    int overlap = (i < total && fk_mem_at_locked(i)->base < ptr + size) ||
                  (i > 0 && fk_mem_at_locked(i - 1)->base + fk_mem_at_locked(i - 1)->size > ptr);
    if (fk_resv_find_locked(ptr, size) == NULL || overlap)
        rc = CD_ERROR_INVALID_VALUE; /* not reserved, or already mapped */
    else if (v == NULL || v->user_refs == 0)
        rc = CD_ERROR_INVALID_HANDLE;
    else if (offset > v->size || size > v->size - offset)
        rc = CD_ERROR_INVALID_VALUE;
    else if ((a = fk_alloc_new(FK_MEM_VMM, NULL, v->device, size)) == NULL)
        rc = CD_ERROR_OUT_OF_MEMORY;
    if (rc == CD_SUCCESS &&
        mmap((void *)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, v->fd, (off_t)offset) ==
            MAP_FAILED) {
        rc = CD_ERROR_OUT_OF_MEMORY;
    } else if (rc == CD_SUCCESS) {
        a->base = ptr;
        a->map_size = size;
        a->cpu = v->cpu + offset;
        a->vmm = v;
        atomic_fetch_add(&v->refs, 1);
        if (fk_mem_insert_locked(a) != 0) { /* only a failed realloc */
            fk_unmap_to_hole(ptr, size);
            fk_alloc_unref(a);
            a = NULL;
            rc = CD_ERROR_OUT_OF_MEMORY;
        }
    }
    pthread_rwlock_unlock(&fk_mem_lock);
    if (rc != CD_SUCCESS && a != NULL && a->vmm == NULL)
        free(a);
    return rc;
}

cdResult cuMemUnmap(cdDevicePtr ptr, size_t size)
{
    FK_ENTER(cuMemUnmap);
    size_t first = 0;
    size_t n = 0;
    struct fk_alloc **gone = NULL;
    cdResult rc = CD_SUCCESS;
    pthread_rwlock_wrlock(&fk_mem_lock);
    if (!fk_vmm_cover_locked(ptr, size, &first, &n))
        rc = CD_ERROR_INVALID_VALUE; /* not whole mappings */
    else if ((gone = calloc(n, sizeof *gone)) == NULL)
        rc = CD_ERROR_OUT_OF_MEMORY;
    for (size_t k = 0; rc == CD_SUCCESS && k < n; k++) {
        gone[k] = fk_mem_remove_at_locked(first);
        fk_unmap_to_hole(gone[k]->base, gone[k]->size);
    }
    pthread_rwlock_unlock(&fk_mem_lock);
    /* Queued copies keep the memory until they ran. */
    for (size_t k = 0; rc == CD_SUCCESS && k < n; k++)
        fk_alloc_unref(gone[k]);
    free(gone);
    return rc;
}

/* Validates one access descriptor for mapping @p a. */
static cdResult fk_access_check(const struct cd_mem_access_desc *d, const struct fk_alloc *a)
{
    if (d->flags != CD_MEM_ACCESS_FLAGS_PROT_NONE && d->flags != CD_MEM_ACCESS_FLAGS_PROT_READ &&
        d->flags != CD_MEM_ACCESS_FLAGS_PROT_READWRITE)
        return CD_ERROR_INVALID_VALUE;
    switch (d->location.type) {
    case CD_MEM_LOCATION_TYPE_DEVICE:
        if (!fk_device_valid(d->location.id))
            return CD_ERROR_INVALID_DEVICE;
        /* Without peer access only the memory's own device (or any device,
         * for host memory) can map it. */
        if (fk_cfg.no_peer && !a->vmm->host_located && d->location.id != a->device &&
            d->flags != CD_MEM_ACCESS_FLAGS_PROT_NONE)
            return CD_ERROR_INVALID_DEVICE;
        return CD_SUCCESS;
    case CD_MEM_LOCATION_TYPE_HOST:
    case CD_MEM_LOCATION_TYPE_HOST_NUMA:
        /* Host access exists only for host-located memory. */
        return a->vmm->host_located ? CD_SUCCESS : CD_ERROR_INVALID_VALUE;
    default:
        return CD_ERROR_INVALID_VALUE;
    }
}

cdResult cuMemSetAccess(cdDevicePtr ptr, size_t size, const struct cd_mem_access_desc *desc,
                        size_t count)
{
    FK_ENTER(cuMemSetAccess);
    if (desc == NULL || count == 0)
        return CD_ERROR_INVALID_VALUE;
    size_t first = 0;
    size_t n = 0;
    cdResult rc = CD_SUCCESS;
    pthread_rwlock_wrlock(&fk_mem_lock);
    if (!fk_vmm_cover_locked(ptr, size, &first, &n))
        rc = CD_ERROR_INVALID_VALUE; /* not mapped, or not whole mappings */
    for (size_t k = 0; rc == CD_SUCCESS && k < n; k++) {
        for (size_t j = 0; rc == CD_SUCCESS && j < count; j++)
            rc = fk_access_check(&desc[j], fk_mem_at_locked(first + k));
    }
    for (size_t k = 0; rc == CD_SUCCESS && k < n; k++) {
        struct fk_alloc *a = fk_mem_at_locked(first + k);
        for (size_t j = 0; j < count; j++) {
            if (desc[j].location.type == CD_MEM_LOCATION_TYPE_DEVICE) {
                a->access[desc[j].location.id] = (unsigned char)desc[j].flags;
                continue;
            }
            a->host_access = (unsigned char)desc[j].flags;
            int prot = desc[j].flags == CD_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
                       : desc[j].flags == CD_MEM_ACCESS_FLAGS_PROT_READ    ? PROT_READ
                                                                           : PROT_NONE;
            mprotect((void *)a->base, a->size, prot);
        }
    }
    pthread_rwlock_unlock(&fk_mem_lock);
    return rc;
}

cdResult cuMemGetAccess(unsigned long long *flags, const struct cd_mem_location *location,
                        cdDevicePtr ptr)
{
    FK_ENTER(cuMemGetAccess);
    if (flags == NULL || location == NULL)
        return CD_ERROR_INVALID_VALUE;
    cdResult rc = CD_SUCCESS;
    pthread_rwlock_rdlock(&fk_mem_lock);
    const struct fk_alloc *a = fk_mem_find_locked(ptr);
    if (a == NULL || a->kind != FK_MEM_VMM)
        rc = CD_ERROR_INVALID_VALUE;
    else if (location->type == CD_MEM_LOCATION_TYPE_DEVICE)
        rc = fk_device_valid(location->id) ? CD_SUCCESS : CD_ERROR_INVALID_DEVICE;
    else if (location->type != CD_MEM_LOCATION_TYPE_HOST &&
             location->type != CD_MEM_LOCATION_TYPE_HOST_NUMA)
        rc = CD_ERROR_INVALID_VALUE;
    if (rc == CD_SUCCESS)
        *flags = location->type == CD_MEM_LOCATION_TYPE_DEVICE ? a->access[location->id]
                                                               : a->host_access;
    pthread_rwlock_unlock(&fk_mem_lock);
    return rc;
}
