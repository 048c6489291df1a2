/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Progress and the event fd: whether a context's incarnation ended, the
 * event queries of progress, and arm. Each works from any thread, with the
 * context pushed only when it is not current; nothing is called on an
 * incarnation that ended.
 */
#include <stdint.h>
#include <unistd.h>

#include "cd_internal.h"

/*
 * What one progress call learned of a device's primary context (its state,
 * and the id its persistent handle answers): several slots (the lanes, and a
 * slot not yet dropped after a reset) share one device, and the answer does
 * not change within the call as far as the call can tell.
 */
typedef struct cd_primary_seen {
    int32_t dev;
    int32_t id_known;
    cdResult state_r; /* cuDevicePrimaryCtxGetState */
    int active;
    uintptr_t ctx;    /* the handle id was asked of */
    cdResult id_r;    /* cuCtxGetId */
    unsigned long long id;
} cd_primary_seen;

/* The most devices one call remembers; more are asked again per slot. */
#define CD_SEEN_MAX 16

typedef struct cd_seen {
    int32_t n;
    cd_primary_seen dev[CD_SEEN_MAX];
} cd_seen;

/* The entry of device dev in seen (NULL: not remembered, ask), new if need be. */
static cd_primary_seen *cd_seen_dev(cd_seen *seen, int32_t dev)
{
    if (seen == NULL)
        return NULL;
    for (int32_t k = 0; k < seen->n; k++)
        if (seen->dev[k].dev == dev)
            return &seen->dev[k];
    if (seen->n == CD_SEEN_MAX)
        return NULL;
    cd_primary_seen *p = &seen->dev[seen->n++];
    p->dev = dev;
    p->id_known = 0;
    p->state_r = cd.cuDevicePrimaryCtxGetState(dev, &(unsigned int){0}, &p->active);
    return p;
}

/*
 * Whether the incarnation inc (cudadrv.Incarnation) has ended. For a primary
 * context (primary_dev >= 0): a reset leaves it inactive, or active again
 * under a new id; its handle persists, so asking it for its id is safe. A
 * context the program owns (primary_dev < 0) is not checked: the program
 * says it goes away with cucopy_iface_release_context. Drivers without
 * cuCtxGetId: the canary tells the generation, for every context. Only
 * device-level calls, that id query and the canary's pointer query are made:
 * never anything on the dead incarnation's streams or events. A
 * deinitialized driver ends everything. seen (may be NULL) keeps the
 * device-level answers for the rest of one progress call.
 */
static int cd_gone(const cd_inc *inc, cd_seen *seen)
{
    cdResult r;
    /* Gone only on the driver's answer; a failed query is no answer (the
     * operation that follows reports the failure), except that a
     * deinitialized driver ends every context. */
    cd_primary_seen *p = NULL;
    if (inc->primary_dev >= 0) {
        cd_primary_seen own = {inc->primary_dev, 0, CD_SUCCESS, 0, 0, CD_SUCCESS, 0};
        p = cd_seen_dev(seen, inc->primary_dev);
        if (p == NULL) {
            own.state_r = cd.cuDevicePrimaryCtxGetState(inc->primary_dev, &(unsigned int){0},
                                                        &own.active);
        }
        const cd_primary_seen *q = p != NULL ? p : &own;
        if (q->state_r != CD_SUCCESS)
            return q->state_r == CD_ERROR_DEINITIALIZED;
        if (!q->active)
            return 1;
    }
    if (cd.cuCtxGetId == NULL) /* pre-12: the canary tells the generation, for every context */
        return inc->canary != 0 && cd_canary_gone(inc->ctx, inc->canary, inc->canary_id);
    if (inc->primary_dev < 0)
        return 0;
    unsigned long long now = 0;
    if (p != NULL && p->id_known && p->ctx == inc->ctx) {
        r = p->id_r;
        now = p->id;
    } else {
        r = cd.cuCtxGetId((cdContext)inc->ctx, &now);
        if (p != NULL) {
            p->id_known = 1;
            p->ctx = inc->ctx;
            p->id_r = r;
            p->id = now;
        }
    }
    if (r != CD_SUCCESS) /* reset between the two calls: destroyed */
        return r == CD_ERROR_DEINITIALIZED || r == CD_ERROR_CONTEXT_IS_DESTROYED;
    return now != inc->id;
}

int cd_incarnation_gone(const cd_inc *inc)
{
    return cd_gone(inc, NULL);
}

static int32_t cd_gone_err(cd_err *err)
{
    err->entry = CD_ENTRY_GONE;
    err->result = CD_ERROR_CONTEXT_IS_DESTROYED;
    return -1;
}

/* The leading complete events of one queue's segment, with its context
 * current. Stream order completes all the work captured before an event,
 * and every entry of a queue was (last) recorded after every earlier
 * entry's (docs/design.md, "Completion, progress, flush"), except where the
 * segment says CD_QUERY_IN_ORDER: so once the head is done, a segment of
 * more than two whose newest event is done is done as a whole. */
static int32_t cd_query_queue(const cd_queue_query *q, cd_err *err)
{
    int32_t done = 0;
    if (q->n > 2 && !(q->flags & CD_QUERY_IN_ORDER)) {
        cdResult r = cd.cuEventQuery((cdEvent)q->events[0]);
        if (r != CD_SUCCESS) {
            if (r != CD_ERROR_NOT_READY) {
                err->entry = CD_IDX_cuEventQuery;
                err->result = r;
            }
            return 0;
        }
        if (cd.cuEventQuery((cdEvent)q->events[q->n - 1]) == CD_SUCCESS)
            return q->n;
        /* Not done (or an error, which the queries in order meet again with
         * the right count): go on in order. */
        done = 1;
    }
    for (; done < q->n; done++) {
        cdResult r = cd.cuEventQuery((cdEvent)q->events[done]);
        if (r == CD_ERROR_NOT_READY)
            break;
        if (r != CD_SUCCESS) {
            err->entry = CD_IDX_cuEventQuery;
            err->result = r;
            break;
        }
    }
    return done;
}

/* Every non-empty queue of sq fails with the same error (its context could
 * not be entered): its head piece fails. */
static void cd_fail_queues(cd_slot_query *sq, int32_t entry, cdResult r)
{
    for (int k = 0; k < CD_NUM_ASYNC_KINDS; k++)
        if (sq->queue[k].n > 0) {
            sq->queue[k].err.entry = entry;
            sq->queue[k].err.result = r;
        }
}

/* Pop a context pushed; the first failure of the call goes to err. */
static void cd_pop(cd_err *err)
{
    cdContext popped = NULL;
    cdResult r = cd.cuCtxPopCurrent(&popped);
    if (r != CD_SUCCESS && err->result == CD_SUCCESS) {
        err->entry = CD_IDX_cuCtxPopCurrent;
        err->result = r;
    }
}

/*
 * One progress call's queries (cudadrv.Interface.QuerySlots), one crossing
 * for all slots: per slot the incarnation check (the device-level answers
 * kept for the call), the context entered only when it is not the one
 * current (slots of one context follow each other: Go links them so), the
 * queues' events queried, and the caller's context restored once at the
 * end. A context is entered with one push on the caller's stack, which the
 * next context pops first (a failed pop is reported, and the next push goes
 * on top: as before, when every queue pushed and popped on its own).
 */
int cd_query_slots(cd_slot_query *slots, int32_t first, cd_err *err)
{
    cd_seen seen;
    seen.n = 0;
    err->entry = -1;
    err->result = CD_SUCCESS;
    cdContext caller = NULL, cur = NULL;
    cdResult cur_r = cd.cuCtxGetCurrent(&caller);
    int pushed = 0;
    cur = caller;
    for (int32_t j = first; j >= 0; j = slots[j].next) {
        cd_slot_query *sq = &slots[j];
        for (int k = 0; k < CD_NUM_ASYNC_KINDS; k++) {
            sq->queue[k].done = 0;
            sq->queue[k].err.entry = -1;
            sq->queue[k].err.result = CD_SUCCESS;
        }
        sq->gone = cd_gone(&sq->inc, &seen);
        if (sq->gone)
            continue;
        if (cur_r != CD_SUCCESS) {
            cd_fail_queues(sq, CD_IDX_cuCtxGetCurrent, cur_r);
            continue;
        }
        cdContext ctx = (cdContext)sq->inc.ctx;
        if (ctx != cur && pushed > 0) {
            cd_pop(err); /* failed: logged by Go, as before; the push below goes on top */
            pushed--;
            cur = caller;
        }
        if (ctx != cur) {
            cdResult r = cd.cuCtxPushCurrent(ctx);
            if (r != CD_SUCCESS) {
                cd_fail_queues(sq, CD_IDX_cuCtxPushCurrent, r);
                continue;
            }
            pushed++;
            cur = ctx;
        }
        for (int k = 0; k < CD_NUM_ASYNC_KINDS; k++)
            if (sq->queue[k].n > 0)
                sq->queue[k].done = cd_query_queue(&sq->queue[k], &sq->queue[k].err);
    }
    for (; pushed > 0; pushed--)
        cd_pop(err);
    return err->result == CD_SUCCESS ? 0 : -1;
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
        return cd_gone_err(err);
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
