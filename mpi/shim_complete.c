/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The completion family. With no staged request alive (shim_pending() is 0)
 * every call goes straight to PMPI. Otherwise the records of the given
 * requests are taken out of the table (shim_requests.c says why), PMPI runs,
 * and each request it completed is finished before the call returns: a
 * receive's bytes are copied to the device, the staging memory goes back to
 * the pool. A nonblocking request completed when PMPI set its handle to
 * MPI_REQUEST_NULL; a persistent one (whose handle stays) when the call says
 * so (Wait, Test's flag, the index, MPI_ERR_PENDING in Waitall). A status the
 * user ignores is still needed for the received byte count: a local one is
 * used then.
 */
#include "shim.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 0: nothing staged among them; 1: some taken; -1: no memory (error raised). */
int shim_batch_take(struct shim_batch *bt, int n, MPI_Request reqs[])
{
    bt->n = n;
    bt->taken = 0;
    bt->first_error = MPI_SUCCESS;
    bt->local_status = NULL;
    bt->recs = bt->stack;
    if (n <= 0)
        return 0;
    if (n > SHIM_STACK_REQUESTS) {
        bt->recs = calloc((size_t)n, sizeof *bt->recs);
        if (bt->recs == NULL) {
            bt->first_error = shim_error(MPI_COMM_WORLD, MPI_ERR_NO_MEM, "MPI_Wait*",
                                         "no memory for the request batch");
            return -1;
        }
    }
    for (int i = 0; i < n; i++) {
        bt->recs[i] = shim_rec_take(reqs[i]);
        bt->taken += bt->recs[i] != NULL;
    }
    return bt->taken > 0;
}

int shim_batch_defer_ready(struct shim_batch *bt, int wait)
{
    int left = 0;
    for (int i = 0; i < bt->n; i++)
        if (bt->recs[i] != NULL && bt->recs[i]->defer != NULL)
            left += !shim_defer_ready(bt->recs[i], wait);
    return left;
}

/* ---- early work in a Waitall (shim_batch_early) ---------------------------------- */

static _Atomic unsigned long long stat_back_early; /* copies back started by it */

/* A staged receive of the batch whose copy to the device may start early:
 * contiguous staging (a layout scatters, in shim_unstage) of a buffer that
 * can hold SHIM_EARLY_BACK_MIN bytes. */
static int back_candidate(const struct shim_rec *r)
{
    return r != NULL && r->recv && !r->coll && !r->copied && !r->back_started &&
           (!r->persistent || r->active) && r->buf.staged && r->buf.layout == NULL &&
           r->buf.bytes >= SHIM_EARLY_BACK_MIN;
}

/* The work of receive r, which completed with status st (back: copies back
 * start early in this batch): 1 if done with it (started, or nothing to
 * start), 0 to ask again after progress (no resource for the copy now). */
static int early_one(struct shim_rec *r, const MPI_Status *st, int back)
{
    if (shim_pipe_early_candidate(r) && shim_pipe_take_early(r, st))
        return 1;
    if (!back || !back_candidate(r))
        return 1;
    size_t n = shim_received_bytes(st);
    if (n > r->buf.bytes)
        n = r->buf.bytes;
    if (n < SHIM_EARLY_BACK_MIN)
        return 1; /* a short message: copied when the Waitall returns, as without this */
    if (!shim_copy_start(&r->back, r->buf.host, r->buf.first, n)) {
        shim_copy_progress();
        return 0;
    }
    r->back_started = 1;
    r->back_bytes = n;
    atomic_fetch_add_explicit(&stat_back_early, 1, memory_order_relaxed);
    return 1;
}

void shim_batch_early(struct shim_batch *bt)
{
    int npipe = 0, nback = 0;
    for (int i = 0; i < bt->n; i++) {
        npipe += shim_pipe_early_candidate(bt->recs[i]);
        nback += back_candidate(bt->recs[i]);
    }
    /* One staged receive alone has nothing to overlap its copy with. */
    int back = nback >= 2;
    if (npipe == 0 && !back)
        return;
    char stack_seen[SHIM_STACK_REQUESTS];
    char *seen = bt->n <= SHIM_STACK_REQUESTS ? stack_seen : calloc((size_t)bt->n, 1);
    if (seen == NULL)
        return; /* the Waitall takes them, in its order */
    int left = 0; /* the candidates not seen complete yet (a receive may be both kinds) */
    for (int i = 0; i < bt->n; i++) {
        seen[i] = !shim_pipe_early_candidate(bt->recs[i]) && !(back && back_candidate(bt->recs[i]));
        left += !seen[i];
    }
    while (left > 0) {
        int moved = 0;
        for (int i = 0; i < bt->n; i++) {
            struct shim_rec *r = bt->recs[i];
            if (seen[i])
                continue;
            int flag = 0;
            MPI_Status st;
            if (PMPI_Request_get_status(r->req, &flag, &st) != MPI_SUCCESS) {
                left = 0; /* the Waitall reports it */
                break;
            }
            if (!flag || !early_one(r, &st, back))
                continue;
            seen[i] = 1;
            left--;
            moved = 1;
        }
        if (!moved && left > 0)
            sched_yield(); /* MPI's progress happens in the polls */
    }
    if (seen != stack_seen)
        free(seen);
}

int shim_early_stats(char *out, size_t len)
{
    unsigned long long n = atomic_load(&stat_back_early);
    if (n == 0)
        return snprintf(out, len, "%s", "");
    return snprintf(out, len, "; receives copied to the device while their Waitall waited: %llu",
                    n);
}

/* The statuses to give PMPI: the user's, or local ones when ignored. NULL on
 * no memory (error raised, records put back). */
MPI_Status *shim_batch_statuses(struct shim_batch *bt, MPI_Status *user)
{
    if (user != MPI_STATUSES_IGNORE)
        return user;
    bt->local_status = bt->n <= SHIM_STACK_REQUESTS ? bt->stack_status
                                                : malloc((size_t)bt->n * sizeof(MPI_Status));
    if (bt->local_status == NULL)
        bt->first_error = shim_error(MPI_COMM_WORLD, MPI_ERR_NO_MEM, "MPI_Wait*",
                                     "no memory for the statuses");
    return bt->local_status;
}

void shim_batch_finish(struct shim_batch *bt, int i, const MPI_Status *st, int ok)
{
    struct shim_rec *r = bt->recs[i];
    if (r == NULL)
        return;
    bt->recs[i] = NULL;
    int rc = shim_rec_finish(r, st, ok);
    if (rc != MPI_SUCCESS && bt->first_error == MPI_SUCCESS)
        bt->first_error = rc;
}

/* Finish every taken record whose request a Waitall/Testall completed, status
 * i for request i. */
void shim_batch_finish_all(struct shim_batch *bt, MPI_Request reqs[], const MPI_Status *s,
                           int rc)
{
    for (int i = 0; i < bt->n; i++) {
        struct shim_rec *r = bt->recs[i];
        if (r == NULL)
            continue;
        int done = r->persistent ? rc != MPI_ERR_IN_STATUS || s[i].MPI_ERROR != MPI_ERR_PENDING
                                 : reqs[i] == MPI_REQUEST_NULL;
        if (!done)
            continue;
        int ok = rc == MPI_ERR_IN_STATUS ? shim_copy_ok(s[i].MPI_ERROR) : shim_copy_ok(rc);
        shim_batch_finish(bt, i, &s[i], ok);
    }
}

/* Finish the records at indices[0..outcount), status k for indices[k]. */
void shim_batch_finish_indices(struct shim_batch *bt, int outcount, const int indices[],
                                 const MPI_Status *s, int rc)
{
    if (outcount == MPI_UNDEFINED)
        return;
    for (int k = 0; k < outcount; k++) {
        int i = indices[k];
        if (i < 0 || i >= bt->n)
            continue;
        int ok = rc == MPI_ERR_IN_STATUS ? shim_copy_ok(s[k].MPI_ERROR) : shim_copy_ok(rc);
        shim_batch_finish(bt, i, &s[k], ok);
    }
}

/* Put back what did not complete, free what was allocated; the call's result. */
int shim_batch_end(struct shim_batch *bt, int rc)
{
    for (int i = 0; i < bt->n && bt->recs != NULL; i++)
        if (bt->recs[i] != NULL)
            shim_rec_put_back(bt->recs[i]);
    if (bt->recs != bt->stack)
        free(bt->recs);
    if (bt->local_status != NULL && bt->local_status != bt->stack_status)
        free(bt->local_status);
    return rc != MPI_SUCCESS ? rc : bt->first_error;
}

/* ---- one request ---------------------------------------------------------------- */

SHIM_EXPORT int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
    shim_defer_flush_if(); /* blocking: post the deferred sends (shim_defer.c) */
    if (SHIM_LIKELY(!shim_pending()))
        return PMPI_Wait(req, status);
    shim_detached_progress(0);
    struct shim_rec *r = shim_rec_take(*req);
    if (r == NULL)
        return PMPI_Wait(req, status);
    if (r->defer != NULL)
        shim_defer_ready(r, 1);
    MPI_Status local;
    MPI_Status *s = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = PMPI_Wait(req, s);
    if (!r->persistent && *req != MPI_REQUEST_NULL) {
        shim_rec_put_back(r);
        return rc;
    }
    int rc2 = shim_rec_finish(r, s, shim_copy_ok(rc));
    return rc != MPI_SUCCESS ? rc : rc2;
}

SHIM_EXPORT int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
    shim_defer_poll();
    if (SHIM_LIKELY(!shim_pending()))
        return PMPI_Test(req, flag, status);
    shim_detached_progress(0);
    struct shim_rec *r = shim_rec_take(*req);
    if (r == NULL)
        return PMPI_Test(req, flag, status);
    if (r->defer != NULL)
        shim_defer_ready(r, 0);
    MPI_Status local;
    MPI_Status *s = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = PMPI_Test(req, flag, s);
    if (!*flag || (!r->persistent && *req != MPI_REQUEST_NULL)) {
        shim_rec_put_back(r);
        return rc;
    }
    int rc2 = shim_rec_finish(r, s, shim_copy_ok(rc));
    return rc != MPI_SUCCESS ? rc : rc2;
}

/* Non-destructive: a completed receive is copied to the device now (once),
 * its staging memory stays until the request is waited for or freed. */
SHIM_EXPORT int MPI_Request_get_status(MPI_Request req, int *flag, MPI_Status *status)
{
    shim_defer_poll();
    if (SHIM_LIKELY(!shim_pending()))
        return PMPI_Request_get_status(req, flag, status);
    struct shim_rec *r = shim_rec_take(req);
    if (r == NULL)
        return PMPI_Request_get_status(req, flag, status);
    if (r->defer != NULL)
        shim_defer_ready(r, 0);
    MPI_Status local;
    MPI_Status *s = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = PMPI_Request_get_status(req, flag, s);
    int rc2 = MPI_SUCCESS;
    if (shim_copy_ok(rc) && *flag && r->recv && !r->copied && (!r->persistent || r->active))
        rc2 = shim_rec_copy_now(r, s);
    shim_rec_put_back(r);
    return rc != MPI_SUCCESS ? rc : rc2;
}

/* An active request lives on in MPI; the shim completes it later (detached).
 * An inactive persistent one is freed now, with its staging memory. */
SHIM_EXPORT int MPI_Request_free(MPI_Request *req)
{
    if (SHIM_LIKELY(!shim_pending()))
        return PMPI_Request_free(req);
    struct shim_rec *r = shim_rec_take(*req);
    if (r == NULL)
        return PMPI_Request_free(req);
    if (r->defer != NULL)
        shim_defer_flush(1); /* posted now; completed detached */
    return shim_rec_free(r, req);
}

/* ---- persistent requests: start ---------------------------------------------------- */

SHIM_EXPORT int MPI_Start(MPI_Request *req)
{
    shim_defer_flush_if(); /* a persistent send after the deferred ones */
    if (SHIM_LIKELY(!shim_pending()))
        return PMPI_Start(req);
    struct shim_rec *r = shim_rec_take(*req);
    if (r == NULL)
        return PMPI_Start(req);
    int rc = shim_rec_start(r);
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Start(req);
        if (rc != MPI_SUCCESS)
            r->active = 0;
    }
    shim_rec_put_back(r);
    return rc;
}

/* Every staged send is copied before any request starts: a failing copy
 * starts none. */
SHIM_EXPORT int MPI_Startall(int count, MPI_Request reqs[])
{
    shim_defer_flush_if();
    if (SHIM_LIKELY(!shim_pending()))
        return PMPI_Startall(count, reqs);
    struct shim_batch bt;
    int t = shim_batch_take(&bt, count, reqs);
    if (t <= 0)
        return t < 0 ? shim_batch_end(&bt, MPI_SUCCESS) : PMPI_Startall(count, reqs);
    int rc = MPI_SUCCESS;
    for (int i = 0; i < count && rc == MPI_SUCCESS; i++)
        if (bt.recs[i] != NULL)
            rc = shim_rec_start(bt.recs[i]);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Startall(count, reqs);
    if (rc != MPI_SUCCESS)
        for (int i = 0; i < count; i++)
            if (bt.recs[i] != NULL)
                bt.recs[i]->active = 0;
    return shim_batch_end(&bt, rc);
}

/* Forwarded as is: a cancelled receive is noticed at completion
 * (MPI_Test_cancelled) and nothing is copied to the device. */
SHIM_EXPORT int MPI_Cancel(MPI_Request *req)
{
    return PMPI_Cancel(req);
}

/* ---- arrays of requests ------------------------------------------------------------ */

SHIM_EXPORT int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[])
{
    shim_defer_flush_if(); /* blocking: post the deferred sends (shim_defer.c) */
    if (SHIM_LIKELY(!shim_pending()))
        return PMPI_Waitall(count, reqs, statuses);
    shim_detached_progress(0);
    struct shim_batch bt;
    int t = shim_batch_take(&bt, count, reqs);
    if (t <= 0)
        return t < 0 ? shim_batch_end(&bt, MPI_SUCCESS) : PMPI_Waitall(count, reqs, statuses);
    MPI_Status *s = shim_batch_statuses(&bt, statuses);
    if (s == NULL)
        return shim_batch_end(&bt, MPI_SUCCESS);
    shim_batch_defer_ready(&bt, 1);
    shim_batch_early(&bt);
    int rc = PMPI_Waitall(count, reqs, s);
    shim_batch_finish_all(&bt, reqs, s, rc);
    return shim_batch_end(&bt, rc);
}

SHIM_EXPORT int MPI_Testall(int count, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
    shim_defer_poll();
    if (SHIM_LIKELY(!shim_pending()))
        return PMPI_Testall(count, reqs, flag, statuses);
    shim_detached_progress(0);
    struct shim_batch bt;
    int t = shim_batch_take(&bt, count, reqs);
    if (t <= 0)
        return t < 0 ? shim_batch_end(&bt, MPI_SUCCESS) : PMPI_Testall(count, reqs, flag, statuses);
    MPI_Status *s = shim_batch_statuses(&bt, statuses);
    if (s == NULL)
        return shim_batch_end(&bt, MPI_SUCCESS);
    shim_batch_defer_ready(&bt, 0);
    int rc = PMPI_Testall(count, reqs, flag, s);
    if (*flag || rc == MPI_ERR_IN_STATUS)
        shim_batch_finish_all(&bt, reqs, s, rc);
    return shim_batch_end(&bt, rc);
}

SHIM_EXPORT int MPI_Waitany(int count, MPI_Request reqs[], int *index, MPI_Status *status)
{
    shim_defer_flush_if(); /* blocking: post the deferred sends (shim_defer.c) */
    if (SHIM_LIKELY(!shim_pending()))
        return PMPI_Waitany(count, reqs, index, status);
    shim_detached_progress(0);
    struct shim_batch bt;
    int t = shim_batch_take(&bt, count, reqs);
    if (t <= 0)
        return t < 0 ? shim_batch_end(&bt, MPI_SUCCESS) : PMPI_Waitany(count, reqs, index, status);
    MPI_Status local;
    MPI_Status *s = status == MPI_STATUS_IGNORE ? &local : status;
    /* A deferred send's request completes only when the shim says so: poll
     * while one is not complete (PMPI_Waitany would not see it finish). */
    int rc, flag = 0;
    while (shim_batch_defer_ready(&bt, 0) > 0) {
        rc = PMPI_Testany(count, reqs, index, &flag, s);
        if (rc != MPI_SUCCESS || (flag && *index != MPI_UNDEFINED))
            goto done;
        sched_yield();
    }
    rc = PMPI_Waitany(count, reqs, index, s);
done:
    if (*index != MPI_UNDEFINED && *index >= 0 && *index < count)
        shim_batch_finish(&bt, *index, s, shim_copy_ok(rc));
    return shim_batch_end(&bt, rc);
}

SHIM_EXPORT int MPI_Testany(int count, MPI_Request reqs[], int *index, int *flag,
                            MPI_Status *status)
{
    shim_defer_poll();
    if (SHIM_LIKELY(!shim_pending()))
        return PMPI_Testany(count, reqs, index, flag, status);
    shim_detached_progress(0);
    struct shim_batch bt;
    int t = shim_batch_take(&bt, count, reqs);
    if (t <= 0)
        return t < 0 ? shim_batch_end(&bt, MPI_SUCCESS)
                     : PMPI_Testany(count, reqs, index, flag, status);
    MPI_Status local;
    MPI_Status *s = status == MPI_STATUS_IGNORE ? &local : status;
    shim_batch_defer_ready(&bt, 0);
    int rc = PMPI_Testany(count, reqs, index, flag, s);
    if (*flag && *index != MPI_UNDEFINED && *index >= 0 && *index < count)
        shim_batch_finish(&bt, *index, s, shim_copy_ok(rc));
    return shim_batch_end(&bt, rc);
}

SHIM_EXPORT int MPI_Waitsome(int incount, MPI_Request reqs[], int *outcount, int indices[],
                             MPI_Status statuses[])
{
    shim_defer_flush_if(); /* blocking: post the deferred sends (shim_defer.c) */
    if (SHIM_LIKELY(!shim_pending()))
        return PMPI_Waitsome(incount, reqs, outcount, indices, statuses);
    shim_detached_progress(0);
    struct shim_batch bt;
    int t = shim_batch_take(&bt, incount, reqs);
    if (t <= 0)
        return t < 0 ? shim_batch_end(&bt, MPI_SUCCESS)
                     : PMPI_Waitsome(incount, reqs, outcount, indices, statuses);
    MPI_Status *s = shim_batch_statuses(&bt, statuses);
    if (s == NULL)
        return shim_batch_end(&bt, MPI_SUCCESS);
    int rc;
    while (shim_batch_defer_ready(&bt, 0) > 0) { /* as in MPI_Waitany */
        rc = PMPI_Testsome(incount, reqs, outcount, indices, s);
        if (rc != MPI_SUCCESS || (*outcount != MPI_UNDEFINED && *outcount > 0))
            goto done;
        sched_yield();
    }
    rc = PMPI_Waitsome(incount, reqs, outcount, indices, s);
done:
    shim_batch_finish_indices(&bt, *outcount, indices, s, rc);
    return shim_batch_end(&bt, rc);
}

SHIM_EXPORT int MPI_Testsome(int incount, MPI_Request reqs[], int *outcount, int indices[],
                             MPI_Status statuses[])
{
    shim_defer_poll();
    if (SHIM_LIKELY(!shim_pending()))
        return PMPI_Testsome(incount, reqs, outcount, indices, statuses);
    shim_detached_progress(0);
    struct shim_batch bt;
    int t = shim_batch_take(&bt, incount, reqs);
    if (t <= 0)
        return t < 0 ? shim_batch_end(&bt, MPI_SUCCESS)
                     : PMPI_Testsome(incount, reqs, outcount, indices, statuses);
    MPI_Status *s = shim_batch_statuses(&bt, statuses);
    if (s == NULL)
        return shim_batch_end(&bt, MPI_SUCCESS);
    shim_batch_defer_ready(&bt, 0);
    int rc = PMPI_Testsome(incount, reqs, outcount, indices, s);
    shim_batch_finish_indices(&bt, *outcount, indices, s, rc);
    return shim_batch_end(&bt, rc);
}
