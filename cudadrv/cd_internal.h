/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What cudadrv's C files share and Go does not see: recording a failed call,
 * entering and leaving a context, a context's generation on drivers
 * without cuCtxGetId, and the slot's lock word. cd_enter and cd_leave are static inline so that the
 * copy hot path (cd_copy.c) keeps them inlined.
 */
#ifndef CUCOPY_CD_INTERNAL_H
#define CUCOPY_CD_INTERNAL_H

#include <sched.h>

#include "cd_shim.h"

/* Record a failure of entry idx_ in err_ and `goto out`. */
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
static inline cdResult cd_enter(cdContext ctx, int *pushed, cd_err *err)
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
static inline void cd_leave(int pushed, cd_err *err)
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

/* The body of a cold-path function: run `call_` with ctx current (pushed
 * only if needed, popped again), record a failure of entry idx_ in err_,
 * return 0 or -1. The call's own result decides: what it created or freed
 * exists or is gone whatever the pop did; a failed pop is left in err_. */
#define CD_IN_CTX(ctx_, err_, idx_, call_)                                             \
    do {                                                                               \
        int pushed_ = 0;                                                               \
        (err_)->entry = -1;                                                            \
        (err_)->result = CD_SUCCESS;                                                   \
        if (cd_enter((cdContext)(ctx_), &pushed_, (err_)) != CD_SUCCESS)               \
            return -1;                                                                 \
        cdResult r_ = (call_);                                                         \
        if (r_ != CD_SUCCESS) {                                                        \
            (err_)->entry = (idx_);                                                    \
            (err_)->result = r_;                                                       \
        }                                                                              \
        cd_leave(pushed_, (err_));                                                     \
        return r_ == CD_SUCCESS ? 0 : -1; /* a failed pop stays in err_ only */        \
    } while (0)

/* Drivers without cuCtxGetId: the generation of a context is the BUFFER_ID of
 * a tiny allocation (the canary) made in it. A reset or destroy frees it; a
 * pointer query is defined on any address, and buffer ids are never reused. */
static inline int cd_canary_gone(uintptr_t ctx, uint64_t canary, uint64_t canary_id)
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
static inline void cd_slot_lock(cd_slot *slot)
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

static inline void cd_slot_unlock(cd_slot *slot)
{
    __atomic_store_n(&slot->lock, 0, __ATOMIC_RELEASE);
}

#endif
