/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory: the reserved address ranges, the allocation table behind
 * cuPointerGetAttributes and the copy engine, device, managed, pinned and
 * registered host memory, and managed-memory advice. The table also holds
 * pool memory (fakecuda_pool.c) and VMM mappings (fakecuda_vmm.c).
 *
 * Device memory is not CPU-accessible at its device address, as on a GPU: a
 * memfd is mapped PROT_NONE at the device address and read/write at a private
 * alias only the copy engine knows. A library that dereferences a device
 * pointer on the CPU segfaults, as it would on real hardware.
 *
 * Each device owns a reserved (PROT_NONE) address range; allocations are
 * carved from it by a bump pointer with a guard page after each, and an
 * address is never handed out twice, so a stale device pointer never aliases
 * a newer allocation: it stays unknown memory and faults on the CPU. Managed
 * and pinned host memory come from one more such range (CPU-accessible while
 * allocated) and VMM reservations from another, so a freed range of any kind
 * is recognized: unknown to cuPointerGetAttributes, a violation in a copy.
 */
#include "fakecuda_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Address space reserved per device: 64 GiB, less where the address space
 * is tight (valgrind refuses huge reservations). */
#define FK_DEV_SPAN_MAX ((size_t)64 << 30)
#define FK_HOST_SPAN_MAX ((size_t)16 << 30)
#define FK_SPAN_MIN ((size_t)256 << 20)
/* fk_fill_garbage() writes at most this much. */
#define FK_GARBAGE_LIMIT ((size_t)64 << 20)
#define FK_GARBAGE_BYTE 0xcd

/* Reserved address ranges handed out by a bump pointer, never reused. */
struct fk_va {
    const char *what;
    uintptr_t base;
    size_t span;
    size_t next;
};

pthread_rwlock_t fk_mem_lock = PTHREAD_RWLOCK_INITIALIZER;
/* Sorted by base; ranges never overlap. */
static struct fk_alloc **fk_allocs;
static size_t fk_nallocs;
static size_t fk_allocs_cap;

static struct fk_va fk_dev_va[FK_MAX_DEVICES];
static struct fk_va fk_host_va = {.what = "managed or pinned host memory"};
static struct fk_va fk_vmm_va = {.what = "virtual memory (cuMemAddressReserve) space"};
static const char *const fk_dev_va_names[FK_MAX_DEVICES] = {
    "device memory of device 0",  "device memory of device 1",  "device memory of device 2",
    "device memory of device 3",  "device memory of device 4",  "device memory of device 5",
    "device memory of device 6",  "device memory of device 7",  "device memory of device 8",
    "device memory of device 9",  "device memory of device 10", "device memory of device 11",
    "device memory of device 12", "device memory of device 13", "device memory of device 14",
    "device memory of device 15",
};

static size_t fk_page_round(size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (bytes + page - 1) / page * page;
}

/* ---- reserved address ranges ------------------------------------------------------ */

static int fk_va_holds(const struct fk_va *v, uintptr_t addr)
{
    return v->base != 0 && addr - v->base < v->span;
}

static int fk_va_overlaps(const struct fk_va *v, uintptr_t base, size_t size)
{
    return v->base != 0 && base < v->base + v->span && v->base < base + size;
}

/* Carves @p bytes aligned to @p align (a power of two) with a guard page after. */
static cdResult fk_va_carve_locked(struct fk_va *v, size_t bytes, size_t align, uintptr_t *out)
{
    size_t guard = fk_page_round(1);
    size_t max = v == &fk_host_va || v == &fk_vmm_va ? FK_HOST_SPAN_MAX : FK_DEV_SPAN_MAX;
    for (size_t span = max; v->base == 0 && span >= FK_SPAN_MIN; span /= 4) {
        void *range =
            mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (range == MAP_FAILED)
            continue;
        v->base = (uintptr_t)range;
        v->span = span;
        v->next = guard; /* no allocation at the range's first byte */
    }
    if (v->base == 0)
        return CD_ERROR_OUT_OF_MEMORY;
    if (align < guard)
        align = guard;
    uintptr_t start = (v->base + v->next + align - 1) & ~(uintptr_t)(align - 1);
    size_t used = start - v->base;
    if (used > v->span || bytes > v->span - used || guard > v->span - used - bytes)
        return CD_ERROR_OUT_OF_MEMORY;
    v->next = used + bytes + guard;
    *out = start;
    return CD_SUCCESS;
}

cdResult fk_vmm_va_carve_locked(size_t bytes, size_t align, uintptr_t *out)
{
    return fk_va_carve_locked(&fk_vmm_va, bytes, align, out);
}

const char *fk_va_what_locked(uintptr_t addr)
{
    for (int dev = 0; dev < fk_cfg.devices; dev++) {
        if (fk_va_holds(&fk_dev_va[dev], addr))
            return fk_dev_va[dev].what;
    }
    if (fk_va_holds(&fk_host_va, addr))
        return fk_host_va.what;
    if (fk_va_holds(&fk_vmm_va, addr))
        return fk_vmm_va.what;
    return NULL;
}

static int fk_va_touched(uintptr_t base, size_t size)
{
    for (int dev = 0; dev < fk_cfg.devices; dev++) {
        if (fk_va_overlaps(&fk_dev_va[dev], base, size))
            return 1;
    }
    return fk_va_overlaps(&fk_host_va, base, size) || fk_va_overlaps(&fk_vmm_va, base, size);
}

void fk_unmap_to_hole(uintptr_t base, size_t size)
{
    mmap((void *)base, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
         -1, 0);
}

void fk_fill_garbage(char *cpu, size_t size)
{
    memset(cpu, FK_GARBAGE_BYTE, size < FK_GARBAGE_LIMIT ? size : FK_GARBAGE_LIMIT);
}

/* ---- the table ------------------------------------------------------------------------ */

int fk_alloc_live(const struct fk_alloc *a)
{
    return a->ctx == NULL || fk_ctx_alive(a->ctx, a->ctx_id);
}

size_t fk_mem_lower_bound_locked(uintptr_t addr)
{
    size_t lo = 0;
    size_t hi = fk_nallocs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (fk_allocs[mid]->base < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

size_t fk_mem_count_locked(void)
{
    return fk_nallocs;
}

struct fk_alloc *fk_mem_at_locked(size_t index)
{
    return fk_allocs[index];
}

/* The entry whose range holds @p addr, or -1. Under fk_mem_lock. */
static long fk_find_locked(uintptr_t addr)
{
    size_t lo = fk_mem_lower_bound_locked(addr);
    if (lo < fk_nallocs && fk_allocs[lo]->base == addr)
        return (long)lo;
    if (lo == 0)
        return -1;
    const struct fk_alloc *a = fk_allocs[lo - 1];
    return addr - a->base < a->size ? (long)(lo - 1) : -1;
}

struct fk_alloc *fk_mem_find_locked(uintptr_t addr)
{
    long i = fk_find_locked(addr);
    return i >= 0 ? fk_allocs[i] : NULL;
}

struct fk_alloc *fk_mem_remove_at_locked(size_t index)
{
    struct fk_alloc *a = fk_allocs[index];
    memmove(&fk_allocs[index], &fk_allocs[index + 1],
            (fk_nallocs - index - 1) * sizeof fk_allocs[0]);
    fk_nallocs--;
    return a;
}

static int fk_overlap(const struct fk_alloc *b, uintptr_t base, size_t size)
{
    return b->base < base + size && base < b->base + b->size;
}

/* Whether a live entry overlaps [base, base + size). */
static int fk_overlaps_live_locked(uintptr_t base, size_t size)
{
    for (size_t i = 0; i < fk_nallocs; i++) {
        if (fk_overlap(fk_allocs[i], base, size) && fk_alloc_live(fk_allocs[i]))
            return 1;
    }
    return 0;
}

/* Inserts @p a; dead entries in its way (host ranges registered in a context
 * that died since) are dropped. Returns 0, or -1 when a live entry overlaps
 * or memory is short. Under the write lock. */
int fk_mem_insert_locked(struct fk_alloc *a)
{
    static unsigned long long next_buffer_id;
    if (a->buffer_id == 0)
        a->buffer_id = ++next_buffer_id;
    for (size_t i = 0; i < fk_nallocs;) {
        struct fk_alloc *b = fk_allocs[i];
        if (!fk_overlap(b, a->base, a->size)) {
            i++;
            continue;
        }
        if (fk_alloc_live(b))
            return -1;
        fk_alloc_unref(fk_mem_remove_at_locked(i));
    }
    if (fk_nallocs == fk_allocs_cap) {
        size_t cap = fk_allocs_cap ? 2 * fk_allocs_cap : 64;
        struct fk_alloc **grown = realloc(fk_allocs, cap * sizeof *grown);
        if (grown == NULL)
            return -1;
        fk_allocs = grown;
        fk_allocs_cap = cap;
    }
    size_t pos = fk_mem_lower_bound_locked(a->base);
    memmove(&fk_allocs[pos + 1], &fk_allocs[pos], (fk_nallocs - pos) * sizeof fk_allocs[0]);
    fk_allocs[pos] = a;
    fk_nallocs++;
    return 0;
}

struct fk_alloc *fk_alloc_new(enum fk_mem_kind kind, struct fk_ctx *c, int device, size_t bytes)
{
    struct fk_alloc *a = calloc(1, sizeof *a);
    if (a == NULL)
        return NULL;
    a->kind = kind;
    a->ctx = c;
    a->ctx_id = c ? atomic_load(&c->live_id) : 0;
    a->device = device;
    a->size = bytes;
    a->map_size = fk_page_round(bytes);
    a->preferred = CD_DEVICE_INVALID;
    atomic_store(&a->refs, 1);
    return a;
}

void fk_alloc_unref(struct fk_alloc *a)
{
    if (a == NULL || atomic_fetch_sub(&a->refs, 1) != 1)
        return;
    switch (a->kind) {
    case FK_MEM_DEVICE:
    case FK_MEM_POOL:
        fk_unmap_to_hole(a->base, a->map_size);
        munmap(a->cpu, a->map_size);
        break;
    case FK_MEM_MANAGED:
    case FK_MEM_HOST_ALLOC:
        fk_unmap_to_hole(a->base, a->map_size);
        break;
    case FK_MEM_HOST_REGISTERED:
        break;
    case FK_MEM_VMM:
        /* cuMemUnmap already closed the address; the allocation may live on. */
        fk_vmm_unref(a->vmm);
        break;
    }
    free(a);
}

/* ---- device memory ---------------------------------------------------------- */

/* Maps device memory for @p a at the next free address of its device's
 * range. Under the write lock. */
static cdResult fk_map_device_locked(struct fk_alloc *a)
{
    int dev = a->device;
    struct fk_va *v = &fk_dev_va[dev];
    v->what = fk_dev_va_names[dev];
    uintptr_t base = 0;
    cdResult rc = fk_va_carve_locked(v, a->map_size, 0, &base);
    if (rc != CD_SUCCESS)
        return rc;
    char name[32];
    snprintf(name, sizeof name, "fakecuda-dev%d", dev);
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0)
        return CD_ERROR_OUT_OF_MEMORY;
    void *at_device = MAP_FAILED;
    void *alias = MAP_FAILED;
    if (ftruncate(fd, (off_t)a->map_size) == 0) {
        at_device = mmap((void *)base, a->map_size, PROT_NONE, MAP_SHARED | MAP_FIXED, fd, 0);
        alias = mmap(NULL, a->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    close(fd);
    if (at_device == MAP_FAILED || alias == MAP_FAILED) {
        if (at_device != MAP_FAILED)
            fk_unmap_to_hole(base, a->map_size);
        if (alias != MAP_FAILED)
            munmap(alias, a->map_size);
        return CD_ERROR_OUT_OF_MEMORY;
    }
    a->base = base;
    a->cpu = alias;
    fk_fill_garbage(a->cpu, a->size);
    return CD_SUCCESS;
}

/* Maps CPU memory (managed, pinned) for @p a in the host range. Under the
 * write lock. */
static cdResult fk_map_host_locked(struct fk_alloc *a)
{
    uintptr_t base = 0;
    cdResult rc = fk_va_carve_locked(&fk_host_va, a->map_size, 0, &base);
    if (rc != CD_SUCCESS)
        return rc;
    void *p = mmap((void *)base, a->map_size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED)
        return CD_ERROR_OUT_OF_MEMORY;
    a->base = base;
    a->cpu = p;
    return CD_SUCCESS;
}

cdResult fk_mem_add(struct fk_alloc *a)
{
    pthread_rwlock_wrlock(&fk_mem_lock);
    cdResult rc = a->kind == FK_MEM_DEVICE || a->kind == FK_MEM_POOL ? fk_map_device_locked(a)
                                                                     : fk_map_host_locked(a);
    if (rc == CD_SUCCESS && fk_mem_insert_locked(a) != 0) {
        fk_alloc_unref(a); /* cannot overlap: fresh mappings; only realloc failed */
        rc = CD_ERROR_OUT_OF_MEMORY;
    } else if (rc != CD_SUCCESS) {
        free(a);
    }
    pthread_rwlock_unlock(&fk_mem_lock);
    return rc;
}

/* Allocates @p bytes of @p kind in the current context and enters it in the
 * table. */
static cdResult fk_allocate(enum fk_mem_kind kind, size_t bytes, const char *api,
                            struct fk_alloc **out)
{
    struct fk_ctx *c = NULL;
    cdResult rc = fk_ctx_require_current(&c, api, 1);
    if (rc != CD_SUCCESS)
        return rc;
    if (bytes > FK_DEV_SPAN_MAX / 2)
        return CD_ERROR_OUT_OF_MEMORY;
    struct fk_alloc *a = fk_alloc_new(kind, c, c->device, bytes);
    if (a == NULL)
        return CD_ERROR_OUT_OF_MEMORY;
    rc = fk_mem_add(a);
    *out = rc == CD_SUCCESS ? a : NULL;
    return rc;
}

struct fk_alloc *fk_mem_take(uintptr_t base, unsigned kinds)
{
    struct fk_alloc *a = NULL;
    pthread_rwlock_wrlock(&fk_mem_lock);
    long i = fk_find_locked(base);
    if (i >= 0 && fk_allocs[i]->base == base && (kinds & (1u << fk_allocs[i]->kind)))
        a = fk_mem_remove_at_locked((size_t)i);
    pthread_rwlock_unlock(&fk_mem_lock);
    return a;
}

/* Frees an entry taken from the table. Pending copies hold references, so
 * the mapping goes when the last of them finished (the real cuMemFree
 * synchronizes; the data a pending copy sees is the same). Freeing memory
 * whose context died is an error: the driver already freed it. */
static cdResult fk_release(struct fk_alloc *a)
{
    cdResult rc = fk_alloc_live(a) ? CD_SUCCESS : CD_ERROR_INVALID_VALUE;
    fk_alloc_unref(a);
    return rc;
}

cdResult cuMemAlloc_v2(cdDevicePtr *ptr, size_t bytes)
{
    FK_ENTER(cuMemAlloc);
    if (ptr == NULL || bytes == 0)
        return CD_ERROR_INVALID_VALUE;
    struct fk_alloc *a = NULL;
    cdResult rc = fk_allocate(FK_MEM_DEVICE, bytes, "cuMemAlloc", &a);
    if (rc == CD_SUCCESS)
        *ptr = a->base;
    return rc;
}

cdResult cuMemFree_v2(cdDevicePtr ptr)
{
    FK_ENTER(cuMemFree);
    if (ptr == 0)
        return CD_SUCCESS;
    /* Pool memory may be freed by cuMemFree too (it synchronizes). */
    struct fk_alloc *a =
        fk_mem_take(ptr, 1u << FK_MEM_DEVICE | 1u << FK_MEM_MANAGED | 1u << FK_MEM_POOL);
    return a ? fk_release(a) : CD_ERROR_INVALID_VALUE;
}

cdResult cuMemAllocManaged(cdDevicePtr *ptr, size_t bytes, unsigned int flags)
{
    FK_ENTER(cuMemAllocManaged);
    if (ptr == NULL || bytes == 0 || (flags != 1 && flags != 2))
        return CD_ERROR_INVALID_VALUE;
    struct fk_alloc *a = NULL;
    cdResult rc = fk_allocate(FK_MEM_MANAGED, bytes, "cuMemAllocManaged", &a);
    if (rc == CD_SUCCESS)
        *ptr = a->base;
    return rc;
}

cdResult cuMemHostAlloc(void **ptr, size_t bytes, unsigned int flags)
{
    FK_ENTER(cuMemHostAlloc);
    /* PORTABLE, DEVICEMAP, WRITECOMBINED */
    if (ptr == NULL || bytes == 0 || (flags & ~0x7u) != 0)
        return CD_ERROR_INVALID_VALUE;
    struct fk_alloc *a = NULL;
    cdResult rc = fk_allocate(FK_MEM_HOST_ALLOC, bytes, "cuMemHostAlloc", &a);
    if (rc == CD_SUCCESS)
        *ptr = a->cpu;
    return rc;
}

cdResult cuMemFreeHost(void *ptr)
{
    FK_ENTER(cuMemFreeHost);
    struct fk_alloc *a = fk_mem_take((uintptr_t)ptr, 1u << FK_MEM_HOST_ALLOC);
    return a ? fk_release(a) : CD_ERROR_INVALID_VALUE;
}

cdResult cuMemHostRegister_v2(void *ptr, size_t bytes, unsigned int flags)
{
    FK_ENTER(cuMemHostRegister);
    /* PORTABLE, DEVICEMAP, IOMEMORY, READ_ONLY */
    if (ptr == NULL || bytes == 0 || (flags & ~0xfu) != 0 || (uintptr_t)ptr + bytes < bytes)
        return CD_ERROR_INVALID_VALUE;
    struct fk_ctx *c = NULL;
    cdResult rc = fk_ctx_require_current(&c, "cuMemHostRegister", 1);
    if (rc != CD_SUCCESS)
        return rc;
    struct fk_alloc *a = fk_alloc_new(FK_MEM_HOST_REGISTERED, c, c->device, bytes);
    if (a == NULL)
        return CD_ERROR_OUT_OF_MEMORY;
    a->base = (uintptr_t)ptr;
    a->cpu = ptr;
    pthread_rwlock_wrlock(&fk_mem_lock);
    /* Overlapping memory the driver knows (registered, pinned, managed,
     * device) is "already mapped"; a freed or unallocated range of the fake's
     * reserved address space cannot be pinned at all. */
    if (fk_overlaps_live_locked(a->base, a->size))
        rc = CD_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    else if (fk_va_touched(a->base, a->size))
        rc = CD_ERROR_INVALID_VALUE;
    else if (fk_mem_insert_locked(a) != 0)
        rc = CD_ERROR_OUT_OF_MEMORY;
    pthread_rwlock_unlock(&fk_mem_lock);
    if (rc != CD_SUCCESS)
        free(a);
    return rc;
}

cdResult cuMemHostUnregister(void *ptr)
{
    FK_ENTER(cuMemHostUnregister);
    struct fk_alloc *a = fk_mem_take((uintptr_t)ptr, 1u << FK_MEM_HOST_REGISTERED);
    if (a == NULL)
        return CD_ERROR_HOST_MEMORY_NOT_REGISTERED;
    fk_alloc_unref(a);
    return CD_SUCCESS;
}

/* ---- managed memory advice ------------------------------------------------------ */

/* The live managed allocation holding all of [ptr, ptr + count), or NULL. */
static struct fk_alloc *fk_managed_range_locked(cdDevicePtr ptr, size_t count)
{
    struct fk_alloc *a = fk_mem_find_locked(ptr);
    if (a == NULL || a->kind != FK_MEM_MANAGED || !fk_alloc_live(a) || count == 0 ||
        count > a->size - (ptr - a->base))
        return NULL;
    return a;
}

/* The preferred location is recorded per allocation: advice on part of one
 * applies to all of it (the real driver tracks pages). */
cdResult cuMemAdvise_v2(cdDevicePtr ptr, size_t count, unsigned int advice,
                        struct cd_mem_location location)
{
    FK_ENTER(cuMemAdvise);
    if (advice != CD_MEM_ADVISE_SET_PREFERRED_LOCATION) {
        fprintf(stderr, "fakecuda: cuMemAdvise: advice %u unknown to the fake\n", advice);
        return CD_ERROR_INVALID_VALUE;
    }
    int where;
    if (location.type == CD_MEM_LOCATION_TYPE_DEVICE) {
        if (!fk_device_valid(location.id))
            return CD_ERROR_INVALID_DEVICE;
        where = location.id;
    } else if (location.type == CD_MEM_LOCATION_TYPE_HOST) {
        where = CD_DEVICE_CPU;
    } else {
        fprintf(stderr, "fakecuda: cuMemAdvise: location type %u unknown to the fake\n",
                location.type);
        return CD_ERROR_INVALID_VALUE;
    }
    cdResult rc = CD_SUCCESS;
    pthread_rwlock_wrlock(&fk_mem_lock);
    struct fk_alloc *a = fk_managed_range_locked(ptr, count);
    if (a != NULL)
        a->preferred = where;
    else
        rc = CD_ERROR_INVALID_VALUE;
    pthread_rwlock_unlock(&fk_mem_lock);
    return rc;
}

cdResult cuMemRangeGetAttribute(void *data, size_t data_size, unsigned int attribute,
                                cdDevicePtr ptr, size_t count)
{
    FK_ENTER(cuMemRangeGetAttribute);
    if (attribute != CD_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION) {
        fprintf(stderr, "fakecuda: cuMemRangeGetAttribute: attribute %u unknown to the fake\n",
                attribute);
        return CD_ERROR_INVALID_VALUE;
    }
    if (data == NULL || data_size != sizeof(int))
        return CD_ERROR_INVALID_VALUE;
    cdResult rc = CD_SUCCESS;
    pthread_rwlock_rdlock(&fk_mem_lock);
    const struct fk_alloc *a = fk_managed_range_locked(ptr, count);
    if (a != NULL)
        *(int *)data = a->preferred;
    else
        rc = CD_ERROR_INVALID_VALUE;
    pthread_rwlock_unlock(&fk_mem_lock);
    return rc;
}

/* ---- pointer attributes --------------------------------------------------------- */

/* What the attributes say of each kind (checked against the real driver where
 * the project depends on it):
 *   device       DEVICE, its context, its device
 *   managed      DEVICE, IS_MANAGED 1, its context, the allocating device
 *   host alloc, registered   HOST, the context current at allocation
 *   pool         DEVICE, no context, the pool's device, MEMPOOL_HANDLE
 *   VMM          DEVICE, no context, the location's device, the mapping as
 *                the range; host-located VMM: HOST, no context, ordinal 0
 *                (what driver 580 / CUDA 13.0 answers on H200, seen
 *                2026-11-30)
 *   unknown      0, no context, -2: plain malloc memory, freed memory of any
 *                kind, a dead context's memory */
cdResult cuPointerGetAttributes(unsigned int count, unsigned int *attributes, void **data,
                                cdDevicePtr ptr)
{
    FK_ENTER(cuPointerGetAttributes);
    if (count > 0 && (attributes == NULL || data == NULL))
        return CD_ERROR_INVALID_VALUE;
    for (unsigned int i = 0; i < count; i++) {
        if (data[i] == NULL)
            return CD_ERROR_INVALID_VALUE;
    }
    /* What plain malloc memory answers on the real driver. */
    cdContext ctx = NULL;
    unsigned int type = 0;
    unsigned int managed = 0;
    int ordinal = -2;
    cdDevicePtr start = 0;
    size_t size = 0;
    struct CUmemPoolHandle_st *pool = NULL;
    unsigned long long buffer_id = 0;
    pthread_rwlock_rdlock(&fk_mem_lock);
    const struct fk_alloc *a = fk_mem_find_locked(ptr);
    if (a != NULL && fk_alloc_live(a)) {
        ctx = a->ctx ? a->ctx->handle : NULL;
        type = a->kind == FK_MEM_HOST_ALLOC || a->kind == FK_MEM_HOST_REGISTERED
                   ? CD_MEMORYTYPE_HOST
                   : CD_MEMORYTYPE_DEVICE;
        managed = a->kind == FK_MEM_MANAGED;
        ordinal = a->device;
        if (a->kind == FK_MEM_VMM && a->device == CD_DEVICE_INVALID) {
            type = CD_MEMORYTYPE_HOST;
            ordinal = 0;
        }
        start = a->base;
        size = a->size;
        pool = a->pool ? fk_pool_handle(a->pool) : NULL;
        buffer_id = a->buffer_id;
    }
    pthread_rwlock_unlock(&fk_mem_lock);
    for (unsigned int i = 0; i < count; i++) {
        switch (attributes[i]) {
        case CD_POINTER_ATTRIBUTE_CONTEXT:
            *(cdContext *)data[i] = ctx;
            break;
        case CD_POINTER_ATTRIBUTE_MEMORY_TYPE:
            *(unsigned int *)data[i] = type;
            break;
        case CD_POINTER_ATTRIBUTE_IS_MANAGED:
            *(unsigned int *)data[i] = managed;
            break;
        case CD_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
            *(int *)data[i] = ordinal;
            break;
        case CD_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            *(cdDevicePtr *)data[i] = start;
            break;
        case CD_POINTER_ATTRIBUTE_RANGE_SIZE:
            *(size_t *)data[i] = size;
            break;
        case CD_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
            *(struct CUmemPoolHandle_st **)data[i] = pool;
            break;
        case CD_POINTER_ATTRIBUTE_BUFFER_ID:
            *(unsigned long long *)data[i] = buffer_id;
            break;
        default:
            fprintf(stderr, "fakecuda: cuPointerGetAttributes: attribute %u unknown to the fake\n",
                    attributes[i]);
            return CD_ERROR_INVALID_VALUE;
        }
    }
    return CD_SUCCESS;
}

/* ---- accounting ------------------------------------------------------------------------ */

long fk_mem_count_live(void)
{
    long n = 0;
    pthread_rwlock_rdlock(&fk_mem_lock);
    for (size_t i = 0; i < fk_nallocs; i++) {
        const struct fk_alloc *a = fk_allocs[i];
        n += a->kind != FK_MEM_HOST_REGISTERED && a->kind != FK_MEM_VMM && fk_alloc_live(a);
    }
    n += fk_vmm_count_live_locked();
    pthread_rwlock_unlock(&fk_mem_lock);
    return n;
}

long fk_mem_count_registered(void)
{
    long n = 0;
    pthread_rwlock_rdlock(&fk_mem_lock);
    for (size_t i = 0; i < fk_nallocs; i++)
        n += fk_allocs[i]->kind == FK_MEM_HOST_REGISTERED && fk_alloc_live(fk_allocs[i]);
    pthread_rwlock_unlock(&fk_mem_lock);
    return n;
}
