/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory: device, managed, pinned and registered host memory, the allocation
 * table behind cuPointerGetAttributes, and the address translation the copy
 * engine uses.
 *
 * Device memory is not CPU-accessible at its device address, as on a GPU: a
 * memfd is mapped PROT_NONE at the device address and read/write at a private
 * alias only the copy engine knows. A library that dereferences a device
 * pointer on the CPU segfaults, as it would on real hardware.
 *
 * Each device owns a reserved (PROT_NONE) address range; allocations are
 * carved from it by a bump pointer with a guard page after each, and an
 * address is never handed out twice, so a stale device pointer never aliases
 * a newer allocation: it stays unknown memory and faults on the CPU.
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
#define FK_DEV_SPAN_MIN ((size_t)256 << 20)
/* Fresh device memory holds garbage on a GPU; the fake writes a pattern
 * into allocations up to this size so code that expects zeros fails here. */
#define FK_GARBAGE_LIMIT ((size_t)64 << 20)
#define FK_GARBAGE_BYTE 0xcd

static pthread_rwlock_t fk_mem_lock = PTHREAD_RWLOCK_INITIALIZER;
/* Sorted by base; ranges never overlap. */
static struct fk_alloc **fk_allocs;
static size_t fk_nallocs;
static size_t fk_allocs_cap;
static uintptr_t fk_dev_base[FK_MAX_DEVICES];
static size_t fk_dev_span[FK_MAX_DEVICES];
static size_t fk_dev_next[FK_MAX_DEVICES];

static size_t fk_page_round(size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (bytes + page - 1) / page * page;
}

static int fk_alloc_live(const struct fk_alloc *a)
{
    return fk_ctx_alive(a->ctx, a->ctx_id);
}

/* The entry whose range holds @p addr, or -1. Under fk_mem_lock. */
static long fk_find_locked(uintptr_t addr)
{
    size_t lo = 0;
    size_t hi = fk_nallocs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (fk_allocs[mid]->base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    const struct fk_alloc *a = fk_allocs[lo - 1];
    return addr - a->base < a->size ? (long)(lo - 1) : -1;
}

/* The device whose reserved range holds @p addr, or -1. */
static int fk_device_of_addr(uintptr_t addr)
{
    for (int dev = 0; dev < fk_cfg.devices; dev++) {
        if (fk_dev_base[dev] != 0 && addr - fk_dev_base[dev] < fk_dev_span[dev])
            return dev;
    }
    return -1;
}

static struct fk_alloc *fk_remove_locked(size_t index)
{
    struct fk_alloc *a = fk_allocs[index];
    memmove(&fk_allocs[index], &fk_allocs[index + 1],
            (fk_nallocs - index - 1) * sizeof fk_allocs[0]);
    fk_nallocs--;
    return a;
}

/* Inserts @p a; dead entries in its way (host ranges registered in a context
 * that died since) are dropped. Returns 0, or -1 when a live entry overlaps
 * or memory is short. Under the write lock. */
static int fk_insert_locked(struct fk_alloc *a)
{
    for (size_t i = 0; i < fk_nallocs;) {
        struct fk_alloc *b = fk_allocs[i];
        int overlap = b->base < a->base + a->size && a->base < b->base + b->size;
        if (!overlap) {
            i++;
            continue;
        }
        if (fk_alloc_live(b))
            return -1;
        fk_alloc_unref(fk_remove_locked(i));
    }
    if (fk_nallocs == fk_allocs_cap) {
        size_t cap = fk_allocs_cap ? 2 * fk_allocs_cap : 64;
        struct fk_alloc **grown = realloc(fk_allocs, cap * sizeof *grown);
        if (grown == NULL)
            return -1;
        fk_allocs = grown;
        fk_allocs_cap = cap;
    }
    size_t pos = 0;
    while (pos < fk_nallocs && fk_allocs[pos]->base < a->base)
        pos++;
    memmove(&fk_allocs[pos + 1], &fk_allocs[pos], (fk_nallocs - pos) * sizeof fk_allocs[0]);
    fk_allocs[pos] = a;
    fk_nallocs++;
    return 0;
}

static struct fk_alloc *fk_alloc_new(enum fk_mem_kind kind, struct fk_ctx *c, size_t bytes)
{
    struct fk_alloc *a = calloc(1, sizeof *a);
    if (a == NULL)
        return NULL;
    a->kind = kind;
    a->ctx = c;
    a->ctx_id = atomic_load(&c->live_id);
    a->device = c->device;
    a->size = bytes;
    a->map_size = fk_page_round(bytes);
    atomic_store(&a->refs, 1);
    return a;
}

void fk_alloc_unref(struct fk_alloc *a)
{
    if (a == NULL || atomic_fetch_sub(&a->refs, 1) != 1)
        return;
    switch (a->kind) {
    case FK_MEM_DEVICE:
        /* Back to a reserved hole: the address stays unusable for good. */
        mmap((void *)a->base, a->map_size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
        munmap(a->cpu, a->map_size);
        break;
    case FK_MEM_MANAGED:
    case FK_MEM_HOST_ALLOC:
        munmap(a->cpu, a->map_size);
        break;
    case FK_MEM_HOST_REGISTERED:
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
    size_t guard = fk_page_round(1);
    for (size_t span = FK_DEV_SPAN_MAX; fk_dev_base[dev] == 0 && span >= FK_DEV_SPAN_MIN;
         span /= 4) {
        void *range =
            mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (range == MAP_FAILED)
            continue;
        fk_dev_base[dev] = (uintptr_t)range;
        fk_dev_span[dev] = span;
        fk_dev_next[dev] = guard; /* no allocation at the range's first byte */
    }
    if (fk_dev_base[dev] == 0)
        return CD_ERROR_OUT_OF_MEMORY;
    if (a->map_size > fk_dev_span[dev] - guard - fk_dev_next[dev])
        return CD_ERROR_OUT_OF_MEMORY;
    char name[32];
    snprintf(name, sizeof name, "fakecuda-dev%d", dev);
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0)
        return CD_ERROR_OUT_OF_MEMORY;
    uintptr_t base = fk_dev_base[dev] + fk_dev_next[dev];
    void *at_device = MAP_FAILED;
    void *alias = MAP_FAILED;
    if (ftruncate(fd, (off_t)a->map_size) == 0) {
        at_device = mmap((void *)base, a->map_size, PROT_NONE, MAP_SHARED | MAP_FIXED, fd, 0);
        alias = mmap(NULL, a->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    close(fd);
    if (at_device == MAP_FAILED || alias == MAP_FAILED) {
        if (at_device != MAP_FAILED)
            mmap(at_device, a->map_size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
        if (alias != MAP_FAILED)
            munmap(alias, a->map_size);
        return CD_ERROR_OUT_OF_MEMORY;
    }
    fk_dev_next[dev] += a->map_size + guard;
    a->base = base;
    a->cpu = alias;
    memset(a->cpu, FK_GARBAGE_BYTE, a->size < FK_GARBAGE_LIMIT ? a->size : FK_GARBAGE_LIMIT);
    return CD_SUCCESS;
}

/* Maps CPU memory (managed, pinned) for @p a anywhere. */
static cdResult fk_map_host(struct fk_alloc *a)
{
    void *p = mmap(NULL, a->map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return CD_ERROR_OUT_OF_MEMORY;
    a->base = (uintptr_t)p;
    a->cpu = p;
    return CD_SUCCESS;
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
    struct fk_alloc *a = fk_alloc_new(kind, c, bytes);
    if (a == NULL)
        return CD_ERROR_OUT_OF_MEMORY;
    pthread_rwlock_wrlock(&fk_mem_lock);
    rc = kind == FK_MEM_DEVICE ? fk_map_device_locked(a) : fk_map_host(a);
    if (rc == CD_SUCCESS && fk_insert_locked(a) != 0) {
        fk_alloc_unref(a); /* cannot overlap: fresh mappings; only realloc failed */
        a = NULL;
        rc = CD_ERROR_OUT_OF_MEMORY;
    } else if (rc != CD_SUCCESS) {
        free(a);
        a = NULL;
    }
    pthread_rwlock_unlock(&fk_mem_lock);
    *out = a;
    return rc;
}

/* Removes the entry starting exactly at @p base whose kind is one of
 * @p kinds (a bit mask); returns it, or NULL. */
static struct fk_alloc *fk_take(uintptr_t base, unsigned kinds)
{
    struct fk_alloc *a = NULL;
    pthread_rwlock_wrlock(&fk_mem_lock);
    long i = fk_find_locked(base);
    if (i >= 0 && fk_allocs[i]->base == base && (kinds & (1u << fk_allocs[i]->kind)))
        a = fk_remove_locked((size_t)i);
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
    struct fk_alloc *a = fk_take(ptr, 1u << FK_MEM_DEVICE | 1u << FK_MEM_MANAGED);
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
    struct fk_alloc *a = fk_take((uintptr_t)ptr, 1u << FK_MEM_HOST_ALLOC);
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
    struct fk_alloc *a = fk_alloc_new(FK_MEM_HOST_REGISTERED, c, bytes);
    if (a == NULL)
        return CD_ERROR_OUT_OF_MEMORY;
    a->base = (uintptr_t)ptr;
    a->cpu = ptr;
    pthread_rwlock_wrlock(&fk_mem_lock);
    if (fk_insert_locked(a) != 0)
        rc = CD_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    pthread_rwlock_unlock(&fk_mem_lock);
    if (rc != CD_SUCCESS)
        free(a);
    return rc;
}

cdResult cuMemHostUnregister(void *ptr)
{
    FK_ENTER(cuMemHostUnregister);
    struct fk_alloc *a = fk_take((uintptr_t)ptr, 1u << FK_MEM_HOST_REGISTERED);
    if (a == NULL)
        return CD_ERROR_HOST_MEMORY_NOT_REGISTERED;
    fk_alloc_unref(a);
    return CD_SUCCESS;
}

/* ---- pointer attributes --------------------------------------------------------- */

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
    pthread_rwlock_rdlock(&fk_mem_lock);
    long idx = fk_find_locked(ptr);
    if (idx >= 0 && fk_alloc_live(fk_allocs[idx])) {
        const struct fk_alloc *a = fk_allocs[idx];
        ctx = a->ctx->handle;
        type = a->kind == FK_MEM_DEVICE || a->kind == FK_MEM_MANAGED ? CD_MEMORYTYPE_DEVICE
                                                                     : CD_MEMORYTYPE_HOST;
        managed = a->kind == FK_MEM_MANAGED;
        ordinal = a->device;
        start = a->base;
        size = a->size;
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
        default:
            fprintf(stderr, "fakecuda: cuPointerGetAttributes: attribute %u unknown to the fake\n",
                    attributes[i]);
            return CD_ERROR_INVALID_VALUE;
        }
    }
    return CD_SUCCESS;
}

/* ---- the copy engine's view ---------------------------------------------------------- */

cdResult fk_mem_translate(cdDevicePtr addr, size_t bytes, const char *api, struct fk_span *out)
{
    if (addr == 0 || addr + bytes < addr)
        return CD_ERROR_INVALID_VALUE;
    cdResult rc = CD_SUCCESS;
    out->cpu = NULL;
    out->ref = NULL;
    pthread_rwlock_rdlock(&fk_mem_lock);
    long idx = fk_find_locked(addr);
    struct fk_alloc *a = idx >= 0 ? fk_allocs[idx] : NULL;
    if (a != NULL && fk_alloc_live(a)) {
        size_t room = a->size - (size_t)(addr - a->base);
        if (bytes > room) {
            rc = fk_violation(CD_ERROR_INVALID_VALUE,
                              "%s: [%#llx, +%zu) runs past the end of its allocation [%#llx, "
                              "+%zu) by %zu bytes",
                              api, addr, bytes, (unsigned long long)a->base, a->size,
                              bytes - room);
        } else {
            atomic_fetch_add(&a->refs, 1);
            out->cpu = a->cpu + (addr - a->base);
            out->ref = a;
        }
    } else if (a != NULL && a->kind != FK_MEM_HOST_REGISTERED) {
        rc = fk_violation(CD_ERROR_INVALID_VALUE,
                          "%s: %#llx belongs to memory whose context (last id %llu) died", api,
                          addr, a->ctx_id);
    } else if (fk_device_of_addr(addr) >= 0) {
        rc = fk_violation(CD_ERROR_INVALID_VALUE,
                          "%s: %#llx is device memory of device %d that is not allocated (freed?)",
                          api, addr, fk_device_of_addr(addr));
    } else {
        /* Pageable host memory: nothing cheap can check it. */
        out->cpu = (char *)(uintptr_t)addr;
    }
    pthread_rwlock_unlock(&fk_mem_lock);
    return rc;
}
