/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The copy hot path: cd_copy runs one piece of a copy in one call, as the
 * copy protocol says (cudadrv/copy.go): classify both buffers, choose the
 * context and slot, and issue, or say what is missing.
 */
#include <stdint.h>
#include <string.h>

#include "cd_internal.h"

/* What one pointer is. */
typedef struct cd_mem {
    unsigned int type; /* CD_MEMORYTYPE_*, 0 for memory CUDA does not know */
    cdContext ctx;     /* owning context, NULL for VMM/pool memory and plain host memory */
    int ordinal;       /* device ordinal */
    unsigned int managed;
    cdDevicePtr start; /* allocation start, 0 if unknown */
    size_t size;       /* allocation size, 0 if unknown */
} cd_mem;

static cdResult cd_classify(cdDevicePtr ptr, cd_mem *m)
{
    static unsigned int attrs[6] = {
        CD_POINTER_ATTRIBUTE_MEMORY_TYPE,      CD_POINTER_ATTRIBUTE_CONTEXT,
        CD_POINTER_ATTRIBUTE_DEVICE_ORDINAL,   CD_POINTER_ATTRIBUTE_IS_MANAGED,
        CD_POINTER_ATTRIBUTE_RANGE_START_ADDR, CD_POINTER_ATTRIBUTE_RANGE_SIZE,
    };
    void *data[6] = {&m->type, &m->ctx, &m->ordinal, &m->managed, &m->start, &m->size};
    memset(m, 0, sizeof(*m));
    m->ordinal = -1;
    return cd.cuPointerGetAttributes(6, attrs, data, ptr);
}

/* One side of a piece: its memory handle's description (mems[idx - 1]),
 * else (idx 0) the driver's answer. */
static cdResult cd_side(cdDevicePtr ptr, const cd_mdesc *mems, int32_t idx, cd_mem *m)
{
    if (idx <= 0)
        return cd_classify(ptr, m);
    const cd_mdesc *d = &mems[idx - 1];
    m->type = d->type;
    m->ctx = (cdContext)d->ctx;
    m->ordinal = d->ordinal;
    m->managed = d->managed;
    m->start = d->start;
    m->size = d->size;
    return CD_SUCCESS;
}

int cd_describe(uint64_t ptr, cd_mdesc *d, cd_err *err)
{
    cd_mem m;
    memset(d, 0, sizeof(*d));
    d->primary_dev = -1;
    CD_CALL(err, CD_IDX_cuPointerGetAttributes, cd_classify(ptr, &m));
    d->start = m.start;
    d->size = m.size;
    d->ctx = (uintptr_t)m.ctx;
    d->ctx_id = (uint64_t)(uintptr_t)m.ctx;
    d->type = m.type;
    d->managed = m.managed;
    d->ordinal = m.ordinal;
    if (m.ctx != NULL && cd.cuCtxGetId != NULL) {
        unsigned long long id = 0;
        CD_CALL(err, CD_IDX_cuCtxGetId, cd.cuCtxGetId(m.ctx, &id));
        d->ctx_id = id;
    }
    return 0;
out:
    return -1;
}

/* A described side whose owning context is its device's primary context
 * outlives the context's handle only as long as its incarnation: a reset
 * frees the memory (cudadrv.MemDesc). 1 when that happened. */
static int cd_desc_stale(const cd_mem *m, const cd_mdesc *mems, int32_t idx, cd_copy_op *op)
{
    if (idx <= 0 || m->ctx == NULL || mems[idx - 1].primary_dev < 0 || cd.cuCtxGetId == NULL)
        return 0;
    unsigned long long now = 0;
    cdResult r = cd.cuCtxGetId(m->ctx, &now);
    if (r == CD_SUCCESS)
        return now != mems[idx - 1].ctx_id;
    if (r == CD_ERROR_CONTEXT_IS_DESTROYED)
        return 1;
    op->err.entry = CD_IDX_cuCtxGetId;
    op->err.result = r;
    return -1;
}

/* Host memory as the protocol defines it (copy.go, step 1): host-located VMM
 * memory (HOST, no context) may be closed to the CPU, so a GPU copies it. */
static int cd_is_host(const cd_mem *m)
{
    if (m->managed || m->type == CD_MEMORYTYPE_DEVICE)
        return 0;
    return m->type != CD_MEMORYTYPE_HOST || m->ctx != NULL;
}

/* Device-side memory whose range must lie inside its allocation. */
static int cd_crosses_end(const cd_mem *m, uint64_t ptr, uint64_t len)
{
    if (cd_is_host(m) || m->size == 0 || ptr < m->start)
        return 0;
    uint64_t off = ptr - m->start; /* the driver's range holds ptr; if not, refuse */
    return off >= m->size || len > m->size - off;
}

/* The lookup takes no lock: Go may be filling or emptying a slot meanwhile
 * (multi-thread ifaces), so a match is only a candidate until it is checked
 * again under the slot's lock. */
static int cd_find_slot(const cd_slot *slots, int32_t nslots, uint64_t id, uintptr_t ctx,
                        int32_t lane)
{
    for (int32_t i = 0; i < nslots; i++)
        if (__atomic_load_n(&slots[i].ctx, __ATOMIC_RELAXED) == ctx &&
            __atomic_load_n(&slots[i].ctx_id, __ATOMIC_RELAXED) == id &&
            __atomic_load_n(&slots[i].lane, __ATOMIC_RELAXED) == lane)
            return i;
    return -1;
}

/* primary[d], which Go changes under its iface lock while copies run. */
static uintptr_t cd_primary(const uintptr_t *primary, int32_t d)
{
    return __atomic_load_n(&primary[d], __ATOMIC_ACQUIRE);
}

static int cd_peer_tried(const cd_slot *s, uintptr_t peer)
{
    for (int32_t i = 0; i < s->npeers; i++)
        if (s->peer[i] == peer)
            return 1;
    return 0;
}

/* The context a device-side buffer runs on without the caller's help: its
 * owning context, else its device's retained primary context; 0 if neither. */
static uintptr_t cd_known_ctx(const cd_mem *m, const uintptr_t *primary, int32_t ndevices)
{
    if (m->ctx != NULL)
        return (uintptr_t)m->ctx;
    if (m->ordinal >= 0 && m->ordinal < ndevices)
        return cd_primary(primary, m->ordinal);
    return 0;
}

/* The context a device-side buffer runs on (copy.go, step 3); 0 with
 * *status set when Go must help first. */
static uintptr_t cd_exec_ctx(const cd_mem *m, const uintptr_t *primary, cd_copy_op *op,
                             int *status)
{
    uintptr_t known = cd_known_ctx(m, primary, op->ndevices);
    if (known != 0)
        return known;
    if (m->managed && (op->flags & CD_COPY_FALLBACK_CTX) && op->ctx != 0)
        return op->ctx;
    if (m->managed) {
        cdContext cur = NULL;
        if (cd.cuCtxGetCurrent(&cur) == CD_SUCCESS && cur != NULL)
            return (uintptr_t)cur;
    }
    op->device = m->managed ? -1 : m->ordinal;
    op->seen_primary = 0;
    *status = CD_COPY_NEED_PRIMARY;
    return 0;
}

/* The run of a zcopy piece (copy.go, step 7): the pieces of more[] that
 * follow it on the same context, kind and peer, up to the first that does
 * not (or that is managed memory, crosses its allocation's end, or fails to
 * classify: its own call reports it), with the location hints of a batch. */
typedef struct cd_run {
    const cd_piece *more;
    int32_t n;
    int32_t blocking; /* a piece has pageable host memory: the enqueue may block */
    int32_t stage;    /* the piece goes to the library's staging (CD_COPY_NEED_STAGE) */
    struct cd_memcpy_attr attr;
    uint64_t stage_min; /* cd_copy_op.stage_min */
    uint64_t stage_small; /* cd_copy_op.stage_small */
    uint64_t gather;    /* small staging: the run's footprint in the bounce buffer so far, else 0 */
    cd_mem src;         /* the piece's own sides (a 2-D piece's memory types) */
    cd_mem dst;
    int32_t pack;       /* a 2-D piece for the pack path, if the slot has scratch (copy.go) */
} cd_run;

/* Host memory CUDA does not know: a copy from or to it is staged by the
 * driver inside the enqueue call, which can take milliseconds. */
static int cd_pageable(const cd_mem *m)
{
    return cd_is_host(m) && m->type == 0;
}

/* A piece's room in a bounce buffer under small staging (CD_STAGE_ALIGN). */
static uint64_t cd_stage_span(uint64_t len)
{
    return (len + CD_STAGE_ALIGN - 1) & ~(uint64_t)(CD_STAGE_ALIGN - 1);
}

/* Small staging (copy.go, step 7): a contiguous D2H piece into pageable
 * host memory whose footprint fits op->stage_small. */
static int cd_stages_small(uint64_t stage_small, int kind, const cd_mem *dst, uint64_t len)
{
    return stage_small != 0 && kind == CD_KIND_D2H && cd_pageable(dst) &&
           len <= stage_small && cd_stage_span(len) <= stage_small;
}

static struct cd_mem_location cd_location(const cd_mem *m)
{
    struct cd_mem_location l = {CD_MEM_LOCATION_TYPE_HOST, 0};
    if (!cd_is_host(m)) {
        l.type = CD_MEM_LOCATION_TYPE_DEVICE;
        l.id = m->ordinal;
    }
    return l;
}

static void cd_extend_run(cd_run *run, const cd_piece *more, int32_t nmore, const cd_mdesc *mems,
                          const cd_copy_op *op, const cd_mem *src, const cd_mem *dst,
                          const uintptr_t *primary, int kind, uintptr_t ctx, uintptr_t peer)
{
    int32_t ndevices = op->ndevices, src_mem = op->src_mem, dst_mem = op->dst_mem;
    run->more = more;
    run->n = 0;
    run->blocking = cd_pageable(src) || cd_pageable(dst);
    run->attr = (struct cd_memcpy_attr){CD_MEMCPY_SRC_ACCESS_ORDER_STREAM, cd_location(src),
                                        cd_location(dst), 0};
    if (src->managed || dst->managed)
        return;
    if (nmore > CD_MAX_RUN - 1)
        nmore = CD_MAX_RUN - 1;
    for (; run->n < nmore; run->n++) {
        const cd_piece *p = &more[run->n];
        cd_mem s, d;
        /* A described side joins only on the same description: its context
         * was checked once, for this piece's. */
        if (p->height != 0) /* a 2-D piece: its own call issues it */
            return;
        if ((p->src_mem > 0 && p->src_mem != src_mem) || (p->dst_mem > 0 && p->dst_mem != dst_mem) ||
            cd_side(p->src, mems, p->src_mem, &s) != CD_SUCCESS ||
            cd_side(p->dst, mems, p->dst_mem, &d) != CD_SUCCESS || s.managed || d.managed ||
            cd_crosses_end(&s, p->src, p->len) || cd_crosses_end(&d, p->dst, p->len))
            return;
        int k;
        uintptr_t c, pc = 0;
        if (cd_is_host(&s) && cd_is_host(&d)) {
            return;
        } else if (cd_is_host(&s)) {
            k = CD_KIND_H2D;
            c = cd_known_ctx(&d, primary, ndevices);
        } else if (cd_is_host(&d)) {
            k = CD_KIND_D2H;
            c = cd_known_ctx(&s, primary, ndevices);
        } else {
            c = cd_known_ctx(&s, primary, ndevices);
            pc = cd_known_ctx(&d, primary, ndevices);
            k = pc == c ? CD_KIND_D2D : CD_KIND_PEER;
            if (k == CD_KIND_D2D)
                pc = 0;
        }
        if (k != kind || c != ctx || pc != peer)
            return;
        if (run->stage_min != 0 && p->len >= run->stage_min && (cd_pageable(&s) || cd_pageable(&d)))
            return; /* staged by its own call */
        int small = cd_stages_small(run->stage_small, k, &d, p->len);
        if (run->gather != 0) { /* a staged run takes only what fits its bounce buffer */
            if (!small || run->gather + cd_stage_span(p->len) > run->stage_small)
                return;
            run->gather += cd_stage_span(p->len);
        } else if (small) {
            return; /* staged by its own call */
        }
        run->blocking |= cd_pageable(&s) || cd_pageable(&d);
    }
}

/* One side of a 2-D copy: host memory by its host pointer, device-side
 * memory (managed and host-located VMM memory too) by its unified address. */
static void cd_2d_side(const cd_mem *m, uint64_t ptr, unsigned int *type, const void **host,
                       unsigned long long *dev)
{
    if (cd_is_host(m)) {
        *type = CD_MEMORYTYPE_HOST;
        *host = (const void *)(uintptr_t)ptr;
    } else {
        *type = CD_MEMORYTYPE_UNIFIED;
        *dev = ptr;
    }
}

/* Enqueue op's 2-D piece (op->height rows) on stream: one cuMemcpy2DAsync. */
static cdResult cd_memcpy2d(const cd_copy_op *op, const cd_run *run, cdStream stream)
{
    struct cd_memcpy2d c;
    const void *dst_host = NULL;
    memset(&c, 0, sizeof c);
    cd_2d_side(&run->src, op->src, &c.src_memory_type, &c.src_host, &c.src_device);
    cd_2d_side(&run->dst, op->dst, &c.dst_memory_type, &dst_host, &c.dst_device);
    c.dst_host = (void *)(uintptr_t)dst_host;
    c.src_pitch = (size_t)op->src_pitch;
    c.dst_pitch = (size_t)op->dst_pitch;
    c.width_in_bytes = (size_t)op->len;
    c.height = (size_t)op->height;
    return cd.cuMemcpy2DAsync(&c, stream);
}

/* The pack path (copy.go, 2-D pieces): a 2-D piece between device memory
 * and packed CUDA-known host memory moves its narrow rows inside the device,
 * through scratch, and crosses to or from the host as one contiguous copy,
 * all on stream. A failure after the first copy synchronizes the stream. */
static void cd_memcpy_packed(cd_copy_op *op, const cd_run *run, cdStream stream,
                             uint64_t scratch)
{
    struct cd_memcpy2d c;
    size_t bytes = (size_t)(op->len * op->height);
    memset(&c, 0, sizeof c);
    c.width_in_bytes = (size_t)op->len;
    c.height = (size_t)op->height;
    cdResult r;
    if (op->kind == CD_KIND_D2H) {
        const void *unused = NULL;
        cd_2d_side(&run->src, op->src, &c.src_memory_type, &unused, &c.src_device);
        c.src_pitch = (size_t)op->src_pitch;
        c.dst_memory_type = CD_MEMORYTYPE_DEVICE;
        c.dst_device = scratch;
        c.dst_pitch = (size_t)op->len;
        r = cd.cuMemcpy2DAsync(&c, stream);
        if (r != CD_SUCCESS) {
            op->err.entry = CD_IDX_cuMemcpy2DAsync;
            op->err.result = r;
            return;
        }
        r = cd.cuMemcpyAsync(op->dst, scratch, bytes, stream);
        if (r != CD_SUCCESS) {
            op->err.entry = CD_IDX_cuMemcpyAsync;
            op->err.result = r;
            (void)cd.cuStreamSynchronize(stream);
        }
        return;
    }
    r = cd.cuMemcpyAsync(scratch, op->src, bytes, stream);
    if (r != CD_SUCCESS) {
        op->err.entry = CD_IDX_cuMemcpyAsync;
        op->err.result = r;
        return;
    }
    const void *unused = NULL;
    c.src_memory_type = CD_MEMORYTYPE_DEVICE;
    c.src_device = scratch;
    c.src_pitch = (size_t)op->len;
    cd_2d_side(&run->dst, op->dst, &c.dst_memory_type, &unused, &c.dst_device);
    c.dst_pitch = (size_t)op->dst_pitch;
    r = cd.cuMemcpy2DAsync(&c, stream);
    if (r != CD_SUCCESS) {
        op->err.entry = CD_IDX_cuMemcpy2DAsync;
        op->err.result = r;
        (void)cd.cuStreamSynchronize(stream);
    }
}

/* Enqueue op's piece and its run on stream: one cuMemcpyAsync, or one
 * cuMemcpyBatchAsync for a run where the driver has it (unless
 * CD_COPY_RUN_LOOP, or the run copies device to pageable host memory: the
 * driver's batch stages those copies about five times slower than single
 * ones on an H200, docs/gpu-validation.md), else one cuMemcpyAsync per
 * piece. If a run fails
 * part-way the stream is synchronized: nothing stays in flight on the
 * caller's buffers behind an error. */
static void cd_memcpy_run(cd_copy_op *op, const cd_run *run, cdStream stream, uint64_t scratch)
{
    cdResult r;
    int32_t n = run->n + 1;
    if (scratch != 0) {
        cd_memcpy_packed(op, run, stream, scratch);
        return;
    } else if (op->height != 0) {
        r = cd_memcpy2d(op, run, stream);
        if (r != CD_SUCCESS) {
            op->err.entry = CD_IDX_cuMemcpy2DAsync;
            op->err.result = r;
        }
        return;
    } else if (n == 1) {
        r = cd.cuMemcpyAsync(op->dst, op->src, (size_t)op->len, stream);
    } else if (cd.cuMemcpyBatchAsync != NULL && !(op->flags & CD_COPY_RUN_LOOP) &&
               !(run->blocking && op->kind == CD_KIND_D2H)) {
        cdDevicePtr dsts[CD_MAX_RUN], srcs[CD_MAX_RUN];
        size_t sizes[CD_MAX_RUN];
        dsts[0] = op->dst;
        srcs[0] = op->src;
        sizes[0] = (size_t)op->len;
        for (int32_t i = 1; i < n; i++) {
            dsts[i] = run->more[i - 1].dst;
            srcs[i] = run->more[i - 1].src;
            sizes[i] = (size_t)run->more[i - 1].len;
        }
        struct cd_memcpy_attr attr = run->attr;
        size_t first = 0;
        r = cd.cuMemcpyBatchAsync(dsts, srcs, sizes, (size_t)n,
                                  (struct CUmemcpyAttributes_st *)&attr, &first, 1, stream);
        if (r != CD_SUCCESS) {
            op->err.entry = CD_IDX_cuMemcpyBatchAsync;
            op->err.result = r;
            (void)cd.cuStreamSynchronize(stream); /* the driver does not say how much it queued */
        }
        return;
    } else {
        r = cd.cuMemcpyAsync(op->dst, op->src, (size_t)op->len, stream);
        for (int32_t i = 0; r == CD_SUCCESS && i < run->n; i++) {
            const cd_piece *p = &run->more[i];
            r = cd.cuMemcpyAsync(p->dst, p->src, (size_t)p->len, stream);
            if (r != CD_SUCCESS)
                (void)cd.cuStreamSynchronize(stream);
        }
    }
    if (r != CD_SUCCESS) {
        op->err.entry = CD_IDX_cuMemcpyAsync;
        op->err.result = r;
    }
}

/* The rest of cd_copy once the slot is known, under its lock if *locked:
 * steps 7 and 8 of the protocol (copy.go). */
static int cd_issue(cd_slot *slot, int s, uintptr_t ctx, int kind, uintptr_t peer,
                    const cd_run *run, cd_copy_op *op, int *locked)
{
    /* Without cuCtxGetId the key is the handle, which a reset primary context
     * keeps and a new context may reuse: check the slot's generation. */
    if (cd.cuCtxGetId == NULL && slot->canary != 0 &&
        cd_canary_gone(ctx, slot->canary, slot->canary_id))
        return CD_COPY_STALE;
    if (kind == CD_KIND_PEER && !cd_peer_tried(slot, peer)) {
        op->peer_ctx = peer;
        return CD_COPY_NEED_PEER;
    }
    cdStream stream = (cdStream)slot->stream[op->kind];
    if (stream == NULL)
        return CD_COPY_NEED_STREAM;
    if (slot->fence & (1u << op->kind))
        return CD_COPY_NEED_FENCE;
    int sync = (op->flags & CD_COPY_SYNC) != 0;
    if (run->stage) { /* also when planning: a staged piece takes no event */
        op->taken = run->n; /* small staging's run; 0 for a large piece */
        return CD_COPY_NEED_STAGE; /* Go stages it on this stream (copy.go, step 7) */
    }
    uint64_t scratch = 0;
    if (run->pack && !(slot->scratch_off & (1u << op->kind))) {
        if (slot->scratch_size[op->kind] < op->len * op->height)
            return CD_COPY_NEED_SCRATCH; /* Go makes (or grows) it; also when planning */
        scratch = slot->scratch[op->kind];
    }
    if (!sync && (op->flags & CD_COPY_PLAN)) {
        op->taken = run->n; /* where the piece and its run would go; nothing issued */
        return CD_COPY_PLANNED;
    }
    /* A zcopy whose enqueue may block detaches (copy.go, step 8): it never
     * joins (progress may query that entry meanwhile) and takes the event. */
    int detach = *locked && !sync && run->blocking;
    /* The C steady state books what it queues in the slot's inbox
     * (cd_fast.c), under the lock it holds from this check on: without
     * room there, it leaves the copy to Go. (A piece that would detach never
     * gets here: cd_copy declined it before taking the lock.) */
    if ((op->flags & CD_COPY_BOOK_C) && (slot->inbox == NULL || slot->inbox->count >= CD_INBOX_CAP))
        return CD_COPY_NEED_BOOKING;
    /* Join only the newest entry of the queue, while progress has not queried
     * it (copy.go, step 7). */
    int joined = !sync && !detach && (op->flags & CD_COPY_REUSE) && op->reuse_slot == s &&
                 op->reuse_kind == op->kind && op->reuse_seq > slot->queried[op->kind] &&
                 op->reuse_seq == slot->issued[op->kind];
    cdEvent event = joined ? (cdEvent)op->reuse_event : (cdEvent)slot->event;
    if (!sync && event == NULL)
        return CD_COPY_NEED_EVENT;
    if (detach)
        slot->event = 0; /* this piece's now: Go refills the slot */
    if ((sync || detach) && *locked) {
        __atomic_add_fetch(&slot->users, 1, __ATOMIC_RELAXED);
        cd_slot_unlock(slot);
        *locked = 0;
        op->detached = detach;
    }

    int pushed = 0;
    if (cd_enter((cdContext)ctx, &pushed, &op->err) == CD_SUCCESS) {
        cd_memcpy_run(op, run, stream, scratch); /* a failure leaves nothing in flight */
        cdResult r = op->err.result;
        if (r == CD_SUCCESS && sync) {
            r = cd.cuStreamSynchronize(stream);
            if (r != CD_SUCCESS) {
                op->err.entry = CD_IDX_cuStreamSynchronize;
                op->err.result = r;
            }
        } else if (r == CD_SUCCESS) {
            r = cd.cuEventRecord(event, stream);
            if (r != CD_SUCCESS) {
                /* The copy is in flight without an event: wait for it so that an
                 * error return never leaves a copy running on the caller's buffers. */
                op->err.entry = CD_IDX_cuEventRecord;
                op->err.result = r;
                (void)cd.cuStreamSynchronize(stream);
            }
        }
        int ok = op->err.result == CD_SUCCESS;
        cd_leave(pushed, &op->err); /* a failed pop does not undo the issued copy */
        if (ok) {
            op->event = (uintptr_t)event;
            op->taken = run->n;
            if (sync && (op->flags & CD_COPY_LOCK))
                __atomic_sub_fetch(&slot->users, 1, __ATOMIC_RELEASE);
            if (detach) { /* booked under the lock; Go counts the user out after */
                cd_slot_lock(slot);
                *locked = 1;
            }
            return sync ? CD_COPY_DONE : joined ? CD_COPY_JOINED : CD_COPY_QUEUED;
        }
    }
    if (sync && (op->flags & CD_COPY_LOCK))
        __atomic_sub_fetch(&slot->users, 1, __ATOMIC_RELEASE);
    if (detach)
        op->event = (uintptr_t)event; /* for Go to give back, then count the user out */
    return CD_COPY_DRIVER_ERROR;
}

/* A 2-D piece for the pack path (copy.go, 2-D pieces): narrow rows between
 * device memory (not managed) and CUDA-known host memory whose rows are
 * packed (pitch == width), in a zcopy. */
static int cd_packs(const cd_copy_op *op, int kind, const cd_mem *src, const cd_mem *dst)
{
    if (op->height < 2 || op->len >= op->pack_below ||
        (op->flags & (CD_COPY_SYNC | CD_COPY_NO_PACK)))
        return 0;
    if (kind == CD_KIND_D2H)
        return !src->managed && !cd_pageable(dst) && op->dst_pitch == op->len;
    if (kind == CD_KIND_H2D)
        return !dst->managed && !cd_pageable(src) && op->src_pitch == op->len;
    return 0;
}

int cd_copy(cd_slot *slots, int32_t nslots, const uintptr_t *primary, cd_copy_op *op,
            const cd_piece *more, int32_t nmore, const cd_mdesc *mems)
{
    cd_mem src;
    cd_mem dst;
    op->err.entry = -1;
    op->err.result = CD_SUCCESS;
    op->slot = -1;
    op->taken = 0;
    op->detached = 0;
    CD_CALL(&op->err, CD_IDX_cuPointerGetAttributes, cd_side(op->src, mems, op->src_mem, &src));
    CD_CALL(&op->err, CD_IDX_cuPointerGetAttributes, cd_side(op->dst, mems, op->dst_mem, &dst));
    for (int side = 0; side < 2; side++) {
        int stale = side == 0 ? cd_desc_stale(&src, mems, op->src_mem, op)
                              : cd_desc_stale(&dst, mems, op->dst_mem, op);
        if (stale < 0)
            goto out;
        if (stale) {
            op->side = side;
            return CD_COPY_STALE_MEMH;
        }
    }
    /* A 2-D piece's sides span (height - 1) * pitch + len bytes (the core
     * checked that this does not overflow). */
    uint64_t src_span = op->len, dst_span = op->len;
    if (op->height != 0) {
        src_span += (op->height - 1) * op->src_pitch;
        dst_span += (op->height - 1) * op->dst_pitch;
    }
    if (cd_crosses_end(&src, op->src, src_span)) {
        op->side = 0;
        return CD_COPY_OUT_OF_RANGE;
    }
    if (cd_crosses_end(&dst, op->dst, dst_span)) {
        op->side = 1;
        return CD_COPY_OUT_OF_RANGE;
    }

    /* Both sides CPU-accessible: the caller copies (copy.go, step 2). */
    if ((cd_is_host(&src) && cd_is_host(&dst)) || (op->flags & CD_COPY_FORCE_CPU))
        return CD_COPY_CPU;

    int status = CD_COPY_DONE;
    int kind;
    uintptr_t ctx;
    uintptr_t peer = 0;
    const cd_mdesc *exec_desc = op->src_mem > 0 ? &mems[op->src_mem - 1] : NULL;
    if (cd_is_host(&src)) {
        kind = CD_KIND_H2D;
        ctx = cd_exec_ctx(&dst, primary, op, &status);
        exec_desc = op->dst_mem > 0 ? &mems[op->dst_mem - 1] : NULL;
    } else if (cd_is_host(&dst)) {
        kind = CD_KIND_D2H;
        ctx = cd_exec_ctx(&src, primary, op, &status);
    } else {
        ctx = cd_exec_ctx(&src, primary, op, &status);
        if (ctx != 0)
            peer = cd_exec_ctx(&dst, primary, op, &status);
        kind = peer == ctx ? CD_KIND_D2D : CD_KIND_PEER;
    }
    if (ctx == 0 || (kind == CD_KIND_PEER && peer == 0))
        return status;

    uint64_t id = (uint64_t)ctx;
    if (exec_desc != NULL && exec_desc->ctx == ctx && exec_desc->ctx != 0) {
        id = exec_desc->ctx_id; /* checked above if it is a primary context's */
    } else if (cd.cuCtxGetId != NULL) {
        cdResult r = cd.cuCtxGetId((cdContext)ctx, (unsigned long long *)&id);
        if (r == CD_ERROR_CONTEXT_IS_DESTROYED) {
            /* A retained primary context, reset since (copy.go, step 4). */
            for (int32_t d = 0; d < op->ndevices; d++)
                if (cd_primary(primary, d) == ctx) {
                    op->device = d;
                    op->seen_primary = ctx;
                    return CD_COPY_NEED_PRIMARY;
                }
        }
        CD_CALL(&op->err, CD_IDX_cuCtxGetId, r);
    }
    /* The run is found before the slot's lock is taken: its pointer queries
     * cost about as much as the issue itself. */
    cd_run run = {NULL, 0, cd_pageable(&src) || cd_pageable(&dst), 0, {0}, op->stage_min,
                  op->stage_small, 0, src, dst, cd_packs(op, kind, &src, &dst)};
    run.stage = run.blocking && op->stage_min != 0 && op->len >= op->stage_min && op->height == 0;
    if (!run.stage && op->height == 0 && cd_stages_small(op->stage_small, kind, &dst, op->len)) {
        run.stage = 1; /* with the D2H pieces after it that fit the same bounce buffer */
        run.gather = cd_stage_span(op->len);
    }
    if (!(op->flags & CD_COPY_SYNC) && nmore > 0 && (!run.stage || run.gather != 0) &&
        op->height == 0)
        cd_extend_run(&run, more, nmore, mems, op, &src, &dst, primary, kind, ctx,
                      kind == CD_KIND_PEER ? peer : 0);
    if (run.gather != 0 && run.n == 0)
        run.stage = 0; /* a piece alone is as fast on the driver's path (copy.go, step 7) */
    /* The C steady state books an operation as one queue entry, under the
     * slot's lock throughout: all of its pieces must form this run, and the
     * run must not detach (pageable host memory with the lock: it would let
     * the lock go during its enqueue, and another thread could take the
     * inbox's room); else Go issues it (cd_fast.c). */
    if ((op->flags & CD_COPY_BOOK_C) &&
        (run.n != nmore || ((op->flags & CD_COPY_LOCK) && run.blocking)))
        return CD_COPY_NEED_BOOKING;
    int s = cd_find_slot(slots, nslots, id, ctx, op->lane);
    op->ctx = ctx;
    op->ctx_id = id;
    op->dir = kind;
    op->kind = (op->flags & CD_COPY_SYNC) ? CD_KIND_SHORT : kind;
    if (s < 0) {
        op->device = -1;
        return CD_COPY_NEED_SLOT;
    }
    op->slot = s;
    cd_slot *slot = &slots[s];
    int locked = (op->flags & CD_COPY_LOCK) != 0;
    if (locked) {
        cd_slot_lock(slot);
        if (slot->ctx_id != id || slot->ctx != ctx || slot->lane != op->lane) { /* emptied meanwhile */
            cd_slot_unlock(slot);
            op->slot = -1;
            op->device = -1;
            return CD_COPY_NEED_SLOT;
        }
    }
    int st = cd_issue(slot, s, ctx, kind, peer, &run, op, &locked);
    if (locked && st != CD_COPY_QUEUED && st != CD_COPY_JOINED)
        cd_slot_unlock(slot);
    return st;
out:
    return CD_COPY_DRIVER_ERROR;
}
