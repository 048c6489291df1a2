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
 * Whether the incarnation inc (cudadrv.Incarnation) has ended. For a primary
 * context (primary_dev >= 0): a reset leaves it inactive, or active again
 * under a new id; its handle persists, so asking it for its id is safe. A
 * context the program owns (primary_dev < 0) is not checked: the program
 * says it goes away with cucopy_iface_release_context. Drivers without
 * cuCtxGetId: the canary tells the generation, for every context. Only
 * device-level calls, that id query and the canary's pointer query are made:
 * never anything on the dead incarnation's streams or events. A
 * deinitialized driver ends everything.
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
