/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The copy engine: cuMemcpyAsync, cuMemcpyBatchAsync, cuMemcpy2DAsync, the synchronous
 * cuMemcpyHtoD/DtoH/DtoD and cuMemsetD8. Every range is translated through
 * the allocation table (fakecuda_mem.c) to the CPU view a stream's worker
 * copies with, and checked as the GPU would: freed memory, a range past the
 * end of its allocation, a dead context's memory, or VMM memory the issuing
 * context's device has no access to is a violation. A queued copy holds
 * references that keep its memory mapped until it ran.
 */
#include "fakecuda_internal.h"

#include <stdlib.h>

/* ---- address translation ----------------------------------------------------------- */

/* A copy issued by a context of @p device may touch VMM memory only with the
 * access cuMemSetAccess gave that device; the real GPU faults otherwise. */
static cdResult fk_check_vmm_access_locked(const struct fk_alloc *a, cdDevicePtr addr,
                                           int device, int write, const char *api)
{
    unsigned flags = device >= 0 && device < FK_MAX_DEVICES ? a->access[device] : 0;
    int ok = write ? flags == CD_MEM_ACCESS_FLAGS_PROT_READWRITE
                   : (flags & CD_MEM_ACCESS_FLAGS_PROT_READ) != 0;
    if (ok)
        return CD_SUCCESS;
    return fk_violation(CD_ERROR_INVALID_VALUE,
                        "%s: a context of device %d %s VMM memory at %#llx (mapping [%#llx, +%zu)) "
                        "without %s access (cuMemSetAccess gave it %u)",
                        api, device, write ? "writes" : "reads", addr,
                        (unsigned long long)a->base, a->size, write ? "read-write" : "read",
                        flags);
}

/* A range translated for a copy. */
struct fk_span {
    char *cpu;
    struct fk_alloc *ref; /* NULL for pageable host memory */
};

/* Translates [addr, addr + bytes) for a copy issued by a context of
 * @p device; @p write: the copy writes the range (VMM access checks). A
 * translated range holds a reference to its allocation. */
static cdResult fk_mem_translate(cdDevicePtr addr, size_t bytes, const char *api, int device,
                                 int write, struct fk_span *out)
{
    if (addr == 0 || addr + bytes < addr)
        return CD_ERROR_INVALID_VALUE;
    cdResult rc = CD_SUCCESS;
    out->cpu = NULL;
    out->ref = NULL;
    pthread_rwlock_rdlock(&fk_mem_lock);
    struct fk_alloc *a = fk_mem_find_locked(addr);
    const char *what = NULL;
    if (a != NULL && fk_alloc_live(a)) {
        size_t room = a->size - (size_t)(addr - a->base);
        if (bytes > room) {
            rc = fk_violation(CD_ERROR_INVALID_VALUE,
                              "%s: [%#llx, +%zu) runs past the end of its allocation [%#llx, "
                              "+%zu) by %zu bytes",
                              api, addr, bytes, (unsigned long long)a->base, a->size,
                              bytes - room);
        } else if (a->kind == FK_MEM_VMM &&
                   (rc = fk_check_vmm_access_locked(a, addr, device, write, api)) != CD_SUCCESS) {
            /* reported */
        } else {
            atomic_fetch_add(&a->refs, 1);
            out->cpu = a->cpu + (addr - a->base);
            out->ref = a;
        }
    } else if (a != NULL && a->kind != FK_MEM_HOST_REGISTERED) {
        rc = fk_violation(CD_ERROR_INVALID_VALUE,
                          "%s: %#llx belongs to memory whose context (last id %llu) died", api,
                          addr, a->ctx_id);
    } else if ((what = fk_va_what_locked(addr)) != NULL) {
        rc = fk_violation(CD_ERROR_INVALID_VALUE,
                          "%s: %#llx is in the %s but not allocated or mapped (freed?)", api, addr,
                          what);
    } else {
        /* Pageable host memory: nothing cheap can check it. */
        out->cpu = (char *)(uintptr_t)addr;
    }
    pthread_rwlock_unlock(&fk_mem_lock);
    return rc;
}

/* ---- copy operations ------------------------------------------------------------------------- */

/* Builds a copy or memset op (@p src unused for a memset), translating its
 * ranges. Errors leave nothing behind. */
static cdResult fk_copy_op(enum fk_op_kind kind, cdDevicePtr dst, cdDevicePtr src, size_t bytes,
                           int value, const char *api, const struct fk_stream *on,
                           struct fk_op **out)
{
    struct fk_op *op = fk_op_new(kind);
    if (op == NULL)
        return CD_ERROR_OUT_OF_MEMORY;
    unsigned long long ctx_id = 0;
    int device = fk_stream_owner(on, &ctx_id)->device;
    /* Empty until translated: an overflowing range fails before
     * fk_mem_translate() writes them. */
    struct fk_span d = {NULL, NULL};
    struct fk_span s = {NULL, NULL};
    cdResult rc = fk_mem_translate(dst, bytes, api, device, 1, &d);
    if (rc == CD_SUCCESS) {
        op->dst = d.cpu;
        op->refs[0] = d.ref;
        op->bytes = bytes;
        op->value = value;
    }
    if (rc == CD_SUCCESS && kind == FK_OP_COPY) {
        rc = fk_mem_translate(src, bytes, api, device, 0, &s);
        op->src = s.cpu;
        op->refs[1] = s.ref;
    }
    if (rc != CD_SUCCESS) {
        fk_op_discard(op);
        return rc;
    }
    *out = op;
    return CD_SUCCESS;
}

cdResult cuMemcpyAsync(cdDevicePtr dst, cdDevicePtr src, size_t bytes, cdStream stream)
{
    FK_ENTER(cuMemcpyAsync);
    pthread_mutex_lock(&fk_lock);
    struct fk_stream *s = NULL;
    struct fk_op *op = NULL;
    cdResult rc = fk_stream_for_work_locked(stream, "cuMemcpyAsync", &s);
    if (rc == CD_SUCCESS && bytes > 0 && src == 0)
        rc = CD_ERROR_INVALID_VALUE;
    if (rc == CD_SUCCESS && bytes > 0)
        rc = fk_copy_op(FK_OP_COPY, dst, src, bytes, 0, "cuMemcpyAsync", s, &op);
    if (op != NULL)
        fk_enqueue_locked(s, op);
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

cdResult cuMemcpyBatchAsync_v2(cdDevicePtr *dsts, cdDevicePtr *srcs, size_t *sizes, size_t count,
                               struct CUmemcpyAttributes_st *attrs, size_t *attr_idxs,
                               size_t num_attrs, cdStream stream)
{
    FK_ENTER(cuMemcpyBatchAsync);
    /* The driver's checks: arrays present, attribute indices start at 0 and
     * rise, and never the legacy default stream. */
    if (count == 0 || dsts == NULL || srcs == NULL || sizes == NULL || attrs == NULL ||
        attr_idxs == NULL || num_attrs == 0 || num_attrs > count || attr_idxs[0] != 0 ||
        fk_is_default_handle(stream))
        return CD_ERROR_INVALID_VALUE;
    for (size_t i = 1; i < num_attrs; i++) {
        if (attr_idxs[i] <= attr_idxs[i - 1] || attr_idxs[i] >= count)
            return CD_ERROR_INVALID_VALUE;
    }
    /* Every attribute needs a source access order (0 is
     * CU_MEMCPY_SRC_ACCESS_ORDER_INVALID) and location hints of known types. */
    const struct cd_memcpy_attr *a = (const struct cd_memcpy_attr *)attrs;
    for (size_t i = 0; i < num_attrs; i++) {
        if (a[i].src_access_order < CD_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
            a[i].src_access_order > CD_MEMCPY_SRC_ACCESS_ORDER_STREAM + 2 ||
            a[i].src_loc_hint.type > CD_MEM_LOCATION_TYPE_HOST_NUMA ||
            a[i].dst_loc_hint.type > CD_MEM_LOCATION_TYPE_HOST_NUMA)
            return CD_ERROR_INVALID_VALUE;
    }
    struct fk_op **ops = calloc(count, sizeof *ops);
    if (ops == NULL)
        return CD_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&fk_lock);
    struct fk_stream *s = NULL;
    cdResult rc = fk_stream_for_work_locked(stream, "cuMemcpyBatchAsync", &s);
    for (size_t i = 0; i < count && rc == CD_SUCCESS; i++) {
        if (sizes[i] == 0)
            continue;
        rc = srcs[i] == 0 ? CD_ERROR_INVALID_VALUE
                          : fk_copy_op(FK_OP_COPY, dsts[i], srcs[i], sizes[i], 0,
                                       "cuMemcpyBatchAsync", s, &ops[i]);
    }
    /* All or nothing: a bad entry queues none of the batch. */
    for (size_t i = 0; i < count; i++) {
        if (ops[i] != NULL && rc == CD_SUCCESS)
            fk_enqueue_locked(s, ops[i]);
        else if (ops[i] != NULL)
            fk_op_discard(ops[i]);
    }
    pthread_mutex_unlock(&fk_lock);
    free(ops);
    return rc;
}

/* One side of a 2-D copy: its address (the driver's X and Y offsets
 * applied), and the check of its memory type against what the range is:
 * HOST names memory the CPU reaches (pageable, cuMemHostAlloc,
 * cuMemHostRegister), DEVICE device-side memory, UNIFIED either. Arrays are
 * not emulated. */
static cdResult fk_2d_side(unsigned type, const void *host, cdDevicePtr dev, const void *array,
                           size_t x, size_t y, size_t pitch, cdDevicePtr *addr)
{
    if (array != NULL || type == CD_MEMORYTYPE_ARRAY)
        return fk_violation(CD_ERROR_NOT_SUPPORTED, "cuMemcpy2DAsync: the fake has no CUDA arrays");
    if (type != CD_MEMORYTYPE_HOST && type != CD_MEMORYTYPE_DEVICE && type != CD_MEMORYTYPE_UNIFIED)
        return CD_ERROR_INVALID_VALUE;
    cdDevicePtr base = type == CD_MEMORYTYPE_HOST ? (cdDevicePtr)(uintptr_t)host : dev;
    if (base == 0 || (y != 0 && pitch > (UINT64_MAX - x) / y))
        return CD_ERROR_INVALID_VALUE;
    *addr = base + y * pitch + x;
    return *addr < base ? CD_ERROR_INVALID_VALUE : CD_SUCCESS;
}

/* The translated range of a 2-D side holds the kind of memory its type says. */
static cdResult fk_2d_kind(unsigned type, const struct fk_span *sp, cdDevicePtr addr)
{
    const struct fk_alloc *a = sp->ref;
    int host = a == NULL || a->kind == FK_MEM_HOST_ALLOC || a->kind == FK_MEM_HOST_REGISTERED;
    if (type == CD_MEMORYTYPE_HOST && !host)
        return fk_violation(CD_ERROR_INVALID_VALUE,
                            "cuMemcpy2DAsync: %#llx is device-side memory given as "
                            "CU_MEMORYTYPE_HOST",
                            addr);
    if (type == CD_MEMORYTYPE_DEVICE && a == NULL)
        return fk_violation(CD_ERROR_INVALID_VALUE,
                            "cuMemcpy2DAsync: %#llx is pageable host memory given as "
                            "CU_MEMORYTYPE_DEVICE",
                            addr);
    return CD_SUCCESS;
}

cdResult cuMemcpy2DAsync_v2(const struct cd_memcpy2d *c, cdStream stream)
{
    FK_ENTER(cuMemcpy2DAsync);
    if (c == NULL)
        return CD_ERROR_INVALID_VALUE;
    size_t w = c->width_in_bytes, h = c->height;
    /* The driver's checks: each pitch holds a row (for more than one row),
     * and the spans [p, p + (h - 1) * pitch + w) do not wrap. */
    if (h > 1 && (c->src_pitch < w || c->dst_pitch < w))
        return CD_ERROR_INVALID_VALUE;
    if (h > 1 &&
        (c->src_pitch > (SIZE_MAX - w) / (h - 1) || c->dst_pitch > (SIZE_MAX - w) / (h - 1)))
        return CD_ERROR_INVALID_VALUE;
    cdDevicePtr dst = 0, src = 0;
    cdResult rc = fk_2d_side(c->src_memory_type, c->src_host, c->src_device, c->src_array,
                             c->src_x_in_bytes, c->src_y, c->src_pitch, &src);
    if (rc == CD_SUCCESS)
        rc = fk_2d_side(c->dst_memory_type, c->dst_host, c->dst_device, c->dst_array,
                        c->dst_x_in_bytes, c->dst_y, c->dst_pitch, &dst);
    if (rc != CD_SUCCESS)
        return rc;
    pthread_mutex_lock(&fk_lock);
    struct fk_stream *s = NULL;
    struct fk_op *op = NULL;
    rc = fk_stream_for_work_locked(stream, "cuMemcpy2DAsync", &s);
    if (rc == CD_SUCCESS && w > 0 && h > 0 && (op = fk_op_new(FK_OP_COPY2D)) == NULL)
        rc = CD_ERROR_OUT_OF_MEMORY;
    if (op != NULL) {
        unsigned long long ctx_id = 0;
        int device = fk_stream_owner(s, &ctx_id)->device;
        struct fk_span d = {NULL, NULL};
        struct fk_span sp = {NULL, NULL};
        rc = fk_mem_translate(dst, (h - 1) * c->dst_pitch + w, "cuMemcpy2DAsync", device, 1, &d);
        op->dst = d.cpu;
        op->refs[0] = d.ref;
        if (rc == CD_SUCCESS) {
            rc = fk_mem_translate(src, (h - 1) * c->src_pitch + w, "cuMemcpy2DAsync", device, 0,
                                  &sp);
            op->src = sp.cpu;
            op->refs[1] = sp.ref;
        }
        if (rc == CD_SUCCESS)
            rc = fk_2d_kind(c->dst_memory_type, &d, dst);
        if (rc == CD_SUCCESS)
            rc = fk_2d_kind(c->src_memory_type, &sp, src);
        op->bytes = w;
        op->height = h;
        op->dst_pitch = c->dst_pitch;
        op->src_pitch = c->src_pitch;
        if (rc == CD_SUCCESS)
            fk_enqueue_locked(s, op);
        else
            fk_op_discard(op);
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* The synchronous copies and memset: queued on the current context's default
 * stream and waited for. */
static cdResult fk_sync_op(enum fk_op_kind kind, cdDevicePtr dst, cdDevicePtr src, size_t bytes,
                           int value, const char *api)
{
    pthread_mutex_lock(&fk_lock);
    struct fk_ctx *c = NULL;
    struct fk_stream *s = NULL;
    struct fk_op *op = NULL;
    unsigned long long ticket = 0;
    cdResult rc = fk_ctx_require_current(&c, api, 1);
    if (rc == CD_SUCCESS)
        rc = fk_default_stream_locked(c, &s);
    if (rc == CD_SUCCESS && bytes > 0)
        rc = fk_copy_op(kind, dst, src, bytes, value, api, s, &op);
    if (op != NULL)
        ticket = fk_enqueue_locked(s, op);
    pthread_mutex_unlock(&fk_lock);
    if (op == NULL)
        return rc;
    fk_stream_wait(s, ticket);
    return (cdResult)atomic_load(&c->poison);
}

cdResult cuMemcpyHtoD_v2(cdDevicePtr dst, const void *src, size_t bytes)
{
    FK_ENTER(cuMemcpyHtoD);
    if (bytes > 0 && src == NULL)
        return CD_ERROR_INVALID_VALUE;
    return fk_sync_op(FK_OP_COPY, dst, (cdDevicePtr)(uintptr_t)src, bytes, 0, "cuMemcpyHtoD");
}

cdResult cuMemcpyDtoH_v2(void *dst, cdDevicePtr src, size_t bytes)
{
    FK_ENTER(cuMemcpyDtoH);
    if (bytes > 0 && src == 0)
        return CD_ERROR_INVALID_VALUE;
    return fk_sync_op(FK_OP_COPY, (cdDevicePtr)(uintptr_t)dst, src, bytes, 0, "cuMemcpyDtoH");
}

cdResult cuMemcpyDtoD_v2(cdDevicePtr dst, cdDevicePtr src, size_t bytes)
{
    FK_ENTER(cuMemcpyDtoD);
    if (bytes > 0 && src == 0)
        return CD_ERROR_INVALID_VALUE;
    return fk_sync_op(FK_OP_COPY, dst, src, bytes, 0, "cuMemcpyDtoD");
}

cdResult cuMemsetD8_v2(cdDevicePtr dst, unsigned char value, size_t count)
{
    FK_ENTER(cuMemsetD8);
    return fk_sync_op(FK_OP_MEMSET, dst, 0, count, value, "cuMemsetD8");
}

