/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One C function per operation. The rule every function keeps: push the
 * context it needs only when that context is not current, pop it before
 * returning, on every path.
 */
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "cd_shim.h"

#define CD_CALL(err_, idx_, call_)                                                     \
    do {                                                                               \
        cdResult cd_r_ = (call_);                                                      \
        if (cd_r_ != CD_SUCCESS) {                                                     \
            (err_)->entry = (idx_);                                                    \
            (err_)->result = cd_r_;                                                    \
            goto out;                                                                  \
        }                                                                              \
    } while (0)

/* Make ctx current if it is not; *pushed says whether a pop is owed. */
cdResult cd_enter(cdContext ctx, int *pushed, cd_err *err)
{
    cdContext cur = NULL;
    cdResult r = cd.cuCtxGetCurrent(&cur);
    *pushed = 0;
    if (r != CD_SUCCESS) {
        err->entry = CD_IDX_cuCtxGetCurrent;
        err->result = r;
        return r;
    }
    if (cur == ctx)
        return CD_SUCCESS;
    r = cd.cuCtxPushCurrent(ctx);
    if (r != CD_SUCCESS) {
        err->entry = CD_IDX_cuCtxPushCurrent;
        err->result = r;
        return r;
    }
    *pushed = 1;
    return CD_SUCCESS;
}

/* Pop what cd_enter pushed. A failing pop is reported unless an earlier error is. */
void cd_leave(int pushed, cd_err *err)
{
    if (!pushed)
        return;
    cdContext popped = NULL;
    cdResult r = cd.cuCtxPopCurrent(&popped);
    if (r != CD_SUCCESS && err->result == CD_SUCCESS) {
        err->entry = CD_IDX_cuCtxPopCurrent;
        err->result = r;
    }
}

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

/* Host memory: CPU-accessible, no GPU needed for a host-to-host copy.
 * CUDA-known host memory always has an owning context (cuMemHostAlloc,
 * cuMemHostRegister), except host-located VMM memory, which the CPU may not
 * be allowed to touch: that one is copied by a GPU. */
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

static inline void cd_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* The slot lock word, shared with Go (sync/atomic on the same int32). Its
 * holders keep it for a driver enqueue or a few queue updates: spin a while,
 * then give the CPU away (the holder may be descheduled). */
static void cd_slot_lock(cd_slot *slot)
{
    unsigned spins = 0;
    while (__atomic_exchange_n(&slot->lock, 1, __ATOMIC_ACQUIRE) != 0)
        while (__atomic_load_n(&slot->lock, __ATOMIC_RELAXED) != 0) {
            if (++spins < 128) /* a few microseconds: about one driver enqueue */
                cd_cpu_relax();
            else
                sched_yield();
        }
}

static void cd_slot_unlock(cd_slot *slot)
{
    __atomic_store_n(&slot->lock, 0, __ATOMIC_RELEASE);
}

static int cd_peer_tried(const cd_slot *s, uintptr_t peer)
{
    for (int32_t i = 0; i < s->npeers; i++)
        if (s->peer[i] == peer)
            return 1;
    return 0;
}

/* Drivers without cuCtxGetId: the generation of a context is the BUFFER_ID of
 * a tiny allocation (the canary) made in it. A reset or destroy frees it; a
 * pointer query is defined on any address, and buffer ids are never reused. */
static int cd_canary_gone(uintptr_t ctx, uint64_t canary, uint64_t canary_id)
{
    static unsigned int attrs[2] = {CD_POINTER_ATTRIBUTE_CONTEXT, CD_POINTER_ATTRIBUTE_BUFFER_ID};
    cdContext owner = NULL;
    unsigned long long id = 0;
    void *data[2] = {&owner, &id};
    cdResult r = cd.cuPointerGetAttributes(2, attrs, data, canary);
    if (r != CD_SUCCESS) /* no answer: gone only if the driver itself is */
        return r == CD_ERROR_DEINITIALIZED;
    return (uintptr_t)owner != ctx || id != canary_id;
}

/*
 * The context a device-side buffer runs on: its owning context, else the
 * primary context of its device (VMM, pools), else for managed memory the
 * caller's current context. 0 with *status set when Go must help first.
 */
static uintptr_t cd_exec_ctx(const cd_mem *m, const uintptr_t *primary, cd_copy_op *op,
                             int *status)
{
    if (m->ctx != NULL)
        return (uintptr_t)m->ctx;
    if (m->ordinal >= 0 && m->ordinal < op->ndevices) {
        uintptr_t p = cd_primary(primary, m->ordinal);
        if (p != 0)
            return p;
    }
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

/*
 * The rest of cd_copy once the slot is known, under its lock if *locked. The
 * lock stays held on QUEUED and JOINED (Go books the piece, then releases
 * it); a short copy gives it up before copying, counted in slot->users so
 * that Go's release of the slot waits for it.
 */
static int cd_issue(cd_slot *slot, int s, uintptr_t ctx, int kind, uintptr_t peer,
                    cd_copy_op *op, int *locked)
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
    int sync = (op->flags & CD_COPY_SYNC) != 0;
    /* Re-recording the previous piece's event is only safe while progress
     * has not looked at it: once queried complete, it may be popped. */
    int joined = !sync && (op->flags & CD_COPY_REUSE) && op->reuse_slot == s &&
                 op->reuse_kind == op->kind && op->reuse_seq > slot->queried[op->kind];
    cdEvent event = joined ? (cdEvent)op->reuse_event : (cdEvent)slot->event;
    if (!sync && event == NULL)
        return CD_COPY_NEED_EVENT;
    if (sync && *locked) {
        __atomic_add_fetch(&slot->users, 1, __ATOMIC_RELAXED);
        cd_slot_unlock(slot);
        *locked = 0;
    }

    int pushed = 0;
    if (cd_enter((cdContext)ctx, &pushed, &op->err) == CD_SUCCESS) {
        cdResult r = cd.cuMemcpyAsync(op->dst, op->src, (size_t)op->len, stream);
        if (r != CD_SUCCESS) {
            op->err.entry = CD_IDX_cuMemcpyAsync;
            op->err.result = r;
        } else if (sync) {
            r = cd.cuStreamSynchronize(stream);
            if (r != CD_SUCCESS) {
                op->err.entry = CD_IDX_cuStreamSynchronize;
                op->err.result = r;
            }
        } else {
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
            if (sync && (op->flags & CD_COPY_LOCK))
                __atomic_sub_fetch(&slot->users, 1, __ATOMIC_RELEASE);
            return sync ? CD_COPY_DONE : joined ? CD_COPY_JOINED : CD_COPY_QUEUED;
        }
    }
    if (sync && (op->flags & CD_COPY_LOCK))
        __atomic_sub_fetch(&slot->users, 1, __ATOMIC_RELEASE);
    return CD_COPY_DRIVER_ERROR;
}

int cd_copy(cd_slot *slots, int32_t nslots, const uintptr_t *primary, cd_copy_op *op)
{
    cd_mem src;
    cd_mem dst;
    op->err.entry = -1;
    op->err.result = CD_SUCCESS;
    op->slot = -1;
    CD_CALL(&op->err, CD_IDX_cuPointerGetAttributes, cd_classify(op->src, &src));
    CD_CALL(&op->err, CD_IDX_cuPointerGetAttributes, cd_classify(op->dst, &dst));
    if (cd_crosses_end(&src, op->src, op->len)) {
        op->side = 0;
        return CD_COPY_OUT_OF_RANGE;
    }
    if (cd_crosses_end(&dst, op->dst, op->len)) {
        op->side = 1;
        return CD_COPY_OUT_OF_RANGE;
    }

    /* Both sides CPU-accessible: the caller copies on the CPU (in Go, where
     * a fault on an unmapped or freed address becomes an error, not a crash);
     * no context is touched. */
    if ((cd_is_host(&src) && cd_is_host(&dst)) || (op->flags & CD_COPY_FORCE_CPU))
        return CD_COPY_CPU;

    int status = CD_COPY_DONE;
    int kind;
    uintptr_t ctx;
    uintptr_t peer = 0;
    if (cd_is_host(&src)) {
        kind = CD_KIND_H2D;
        ctx = cd_exec_ctx(&dst, primary, op, &status);
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
    if (cd.cuCtxGetId != NULL) {
        cdResult r = cd.cuCtxGetId((cdContext)ctx, (unsigned long long *)&id);
        if (r == CD_ERROR_CONTEXT_IS_DESTROYED) {
            /* A primary context Go retained, since reset and not activated
             * again (its handle persists): Go looks at the device again. */
            for (int32_t d = 0; d < op->ndevices; d++)
                if (cd_primary(primary, d) == ctx) {
                    op->device = d;
                    op->seen_primary = ctx;
                    return CD_COPY_NEED_PRIMARY;
                }
        }
        CD_CALL(&op->err, CD_IDX_cuCtxGetId, r);
    }
    int s = cd_find_slot(slots, nslots, id, ctx, op->lane);
    op->ctx = ctx;
    op->ctx_id = id;
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
    int st = cd_issue(slot, s, ctx, kind, peer, op, &locked);
    if (locked && st != CD_COPY_QUEUED && st != CD_COPY_JOINED)
        cd_slot_unlock(slot);
    return st;
out:
    return CD_COPY_DRIVER_ERROR;
}

/*
 * Whether the incarnation (ctx, id) of device dev's primary context has ended
 * (dev < 0: a context the program owns; it says so with
 * cucopy_iface_release_context, nothing is checked). A reset leaves the
 * primary context inactive, or active again under a new id; the primary
 * context's handle itself persists, so asking it for its id is safe. Only
 * device-level calls and that one are made: never anything on the dead
 * incarnation's streams or events. A deinitialized driver ends everything.
 */
int cd_incarnation_gone(const cd_inc *inc)
{
    unsigned int flags = 0;
    int active = 0;
    unsigned long long now = 0;
    cdResult r;
    /* Gone only on the driver's answer; a failed query is no answer (the
     * operation that follows reports the failure), except that a
     * deinitialized driver ends every context. */
    if (inc->primary_dev >= 0) {
        r = cd.cuDevicePrimaryCtxGetState(inc->primary_dev, &flags, &active);
        if (r != CD_SUCCESS)
            return r == CD_ERROR_DEINITIALIZED;
        if (!active)
            return 1;
    }
    if (cd.cuCtxGetId == NULL) /* pre-12: the canary tells the generation, for every context */
        return inc->canary != 0 && cd_canary_gone(inc->ctx, inc->canary, inc->canary_id);
    if (inc->primary_dev < 0)
        return 0;
    r = cd.cuCtxGetId((cdContext)inc->ctx, &now);
    if (r != CD_SUCCESS) /* reset between the two calls: destroyed */
        return r == CD_ERROR_DEINITIALIZED || r == CD_ERROR_CONTEXT_IS_DESTROYED;
    return now != inc->id;
}

static int32_t cd_gone(cd_err *err)
{
    err->entry = CD_ENTRY_GONE;
    err->result = CD_ERROR_CONTEXT_IS_DESTROYED;
    return -1;
}

int32_t cd_query_events(const cd_inc *inc, const uintptr_t *events, int32_t n, cd_err *err)
{
    int pushed = 0;
    int32_t done = 0;
    uintptr_t ctx = inc->ctx;
    err->entry = -1;
    err->result = CD_SUCCESS;
    if (cd_incarnation_gone(inc)) {
        cd_gone(err);
        return 0;
    }
    if (cd_enter((cdContext)ctx, &pushed, err) != CD_SUCCESS)
        return 0;
    for (; done < n; done++) {
        cdResult r = cd.cuEventQuery((cdEvent)events[done]);
        if (r == CD_ERROR_NOT_READY)
            break;
        if (r != CD_SUCCESS) {
            err->entry = CD_IDX_cuEventQuery;
            err->result = r;
            break;
        }
    }
    cd_leave(pushed, err);
    return done;
}

/* Runs on a driver thread when the stream reaches it: only wakes the eventfd. */
static void cd_notify_fd(void *user_data)
{
    uint64_t one = 1;
    ssize_t n = write((int)(intptr_t)user_data, &one, sizeof(one));
    (void)n; /* EAGAIN: the counter is already non-zero, the fd already readable */
}

int32_t cd_arm(const cd_inc *inc, uintptr_t stream, uintptr_t head_event, int32_t fd, cd_err *err)
{
    int pushed = 0;
    int32_t busy = 0;
    uintptr_t ctx = inc->ctx;
    err->entry = -1;
    err->result = CD_SUCCESS;
    if (cd_incarnation_gone(inc))
        return cd_gone(err);
    if (cd_enter((cdContext)ctx, &pushed, err) != CD_SUCCESS)
        return -1;
    cdResult r = cd.cuEventQuery((cdEvent)head_event);
    if (r == CD_SUCCESS) {
        busy = 1;
    } else if (r != CD_ERROR_NOT_READY) {
        err->entry = CD_IDX_cuEventQuery;
        err->result = r;
    } else {
        r = cd.cuLaunchHostFunc((cdStream)stream, cd_notify_fd, (void *)(intptr_t)fd);
        if (r != CD_SUCCESS) {
            err->entry = CD_IDX_cuLaunchHostFunc;
            err->result = r;
        }
    }
    int32_t rc = err->result != CD_SUCCESS ? -1 : busy;
    cd_leave(pushed, err); /* a failed pop does not undo the arm */
    return rc;
}

/* Cold paths. */

#define CD_SIMPLE(err_, idx_, call_)                                                   \
    do {                                                                               \
        (err_)->entry = -1;                                                            \
        (err_)->result = CD_SUCCESS;                                                   \
        CD_CALL(err_, idx_, call_);                                                    \
        return 0;                                                                      \
    out:                                                                               \
        return -1;                                                                     \
    } while (0)

int cd_ctx_current(uintptr_t *ctx, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuCtxGetCurrent, cd.cuCtxGetCurrent((cdContext *)ctx));
}

int cd_ctx_id(uintptr_t ctx, uint64_t *id, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuCtxGetId, cd.cuCtxGetId((cdContext)ctx, (unsigned long long *)id));
}

int cd_ctx_device(uintptr_t ctx, int32_t *device, cd_err *err)
{
    CD_IN_CTX(ctx, err, CD_IDX_cuCtxGetDevice, cd.cuCtxGetDevice((cdDevice *)device));
}

int cd_primary_state(int32_t device, int32_t *active, cd_err *err)
{
    unsigned int flags = 0;
    CD_SIMPLE(err, CD_IDX_cuDevicePrimaryCtxGetState,
              cd.cuDevicePrimaryCtxGetState(device, &flags, (int *)active));
}

int cd_primary_retain(int32_t device, uintptr_t *ctx, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuDevicePrimaryCtxRetain,
              cd.cuDevicePrimaryCtxRetain((cdContext *)ctx, device));
}

int cd_primary_release(int32_t device, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuDevicePrimaryCtxRelease, cd.cuDevicePrimaryCtxRelease(device));
}

int cd_enable_peer(uintptr_t ctx, uintptr_t peer, cd_err *err)
{
    CD_IN_CTX(ctx, err, CD_IDX_cuCtxEnablePeerAccess, cd.cuCtxEnablePeerAccess((cdContext)peer, 0));
}

int cd_stream_create(uintptr_t ctx, uintptr_t *stream, cd_err *err)
{
    CD_IN_CTX(ctx, err, CD_IDX_cuStreamCreate,
              cd.cuStreamCreate((cdStream *)stream, CD_STREAM_NON_BLOCKING));
}

int cd_stream_destroy(uintptr_t ctx, uintptr_t stream, cd_err *err)
{
    CD_IN_CTX(ctx, err, CD_IDX_cuStreamDestroy, cd.cuStreamDestroy((cdStream)stream));
}

int cd_stream_sync(uintptr_t ctx, uintptr_t stream, cd_err *err)
{
    CD_IN_CTX(ctx, err, CD_IDX_cuStreamSynchronize, cd.cuStreamSynchronize((cdStream)stream));
}

int cd_event_create(uintptr_t ctx, uintptr_t *event, cd_err *err)
{
    CD_IN_CTX(ctx, err, CD_IDX_cuEventCreate,
              cd.cuEventCreate((cdEvent *)event, CD_EVENT_DISABLE_TIMING));
}

int cd_event_destroy(uintptr_t ctx, uintptr_t event, cd_err *err)
{
    CD_IN_CTX(ctx, err, CD_IDX_cuEventDestroy, cd.cuEventDestroy((cdEvent)event));
}

int cd_device_count(int32_t *count, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuDeviceGetCount, cd.cuDeviceGetCount((int *)count));
}

int cd_device_name(int32_t device, char *name, int32_t len, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuDeviceGetName, cd.cuDeviceGetName(name, len, device));
}

int cd_device_attr(int32_t device, uint32_t attr, int32_t *value, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuDeviceGetAttribute, cd.cuDeviceGetAttribute((int *)value, attr, device));
}

int cd_device_total_mem(int32_t device, uint64_t *bytes, cd_err *err)
{
    size_t b = 0;
    err->entry = -1;
    err->result = CD_SUCCESS;
    CD_CALL(err, CD_IDX_cuDeviceTotalMem, cd.cuDeviceTotalMem(&b, device));
    *bytes = b;
    return 0;
out:
    return -1;
}

int cd_device_pci_bus_id(int32_t device, char *bus_id, int32_t len, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuDeviceGetPCIBusId, cd.cuDeviceGetPCIBusId(bus_id, len, device));
}

int cd_can_access_peer(int32_t device, int32_t peer, int32_t *can, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuDeviceCanAccessPeer, cd.cuDeviceCanAccessPeer((int *)can, device, peer));
}

int cd_device_uuid(int32_t device, uint8_t *uuid, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuDeviceGetUuid, cd.cuDeviceGetUuid((struct CUuuid_st *)uuid, device));
}

int cd_p2p_attr(int32_t device, int32_t peer, uint32_t attr, int32_t *value, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuDeviceGetP2PAttribute,
              cd.cuDeviceGetP2PAttribute((int *)value, attr, device, peer));
}
