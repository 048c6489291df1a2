/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Completion order on a CUCOPY_THREAD_MODE_MULTI iface (docs/semantics.md,
 * "Ordering" and "Threads"): T threads (default 4), each with its own
 * endpoint, issue N zcopies each (default 5000; TEST_ORDER_OPS overrides)
 * host -> device (thread t to device t % ndev, two threads per device when
 * there are fewer devices than threads), window W in flight, and every
 * thread progresses the iface. Each operation's completion object records
 * its sequence number; the callback, wherever it runs, checks that it is
 * the next one of its thread: an endpoint's operations on one (context,
 * direction) complete in issue order, so their callbacks must run in issue
 * order too, also when another thread's progress runs them. The objects are
 * reused in a ring as soon as their callback ran, as a program with a fixed
 * window does. Every third operation has two iov entries: it goes through
 * Go while the others run in the C steady state, so both kinds share the
 * queues (the C side's bookings must come first). At the end every operation completed exactly once, and every
 * device buffer holds its thread's last data.
 * Prints "test_callback_order: T threads, N operations in order".
 */
#define _GNU_SOURCE
#include "check.h"
#include "mem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucopy.h"

#define MAX_THREADS 16
#define W 8
#define LEN 64
#define TIMEOUT_S 120.0

struct ocomp {
    cucopy_completion_t comp; /* first: the callback casts back */
    struct worker *w;
    long seq;
};

struct worker {
    int t, dev;
    pthread_t thread;
    struct tc_buf host, dst;
    atomic_long fired;   /* callbacks run, in order */
    atomic_long misorder; /* callbacks that were not the next one */
    atomic_long wrong;   /* callbacks with a status other than OK */
    struct ocomp ring[W];
};

static cucopy_iface_h iface;
static int nthreads = 4, ndev;
static long nops;
static atomic_int errors_seen;
static double deadline;

static void fired(cucopy_completion_t *c)
{
    struct ocomp *o = (struct ocomp *)c;
    struct worker *w = o->w;
    long want = atomic_load(&w->fired);
    if (o->seq != want && atomic_fetch_add(&w->misorder, 1) < 5)
        fprintf(stderr, "test_callback_order: thread %d: callback of operation %ld ran when "
                        "%ld was next\n", w->t, o->seq, want);
    if (c->status != CUCOPY_OK)
        atomic_fetch_add(&w->wrong, 1);
    atomic_fetch_add(&w->fired, 1);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    cucopy_ep_h ep = NULL;
    if (cucopy_ep_create(iface, &ep) != CUCOPY_OK) {
        (void)FAIL_IF(1, "thread %d: ep_create: %s", w->t, cucopy_last_error());
        return NULL;
    }
    long issued = 0;
    while (atomic_load(&w->fired) < nops) {
        if (tc_now() > deadline) {
            (void)FAIL_IF(1, "thread %d: %ld of %ld issued, %ld completed at the deadline", w->t,
                          issued, nops, atomic_load(&w->fired));
            break;
        }
        while (issued < nops && issued - atomic_load(&w->fired) < W) {
            /* The host buffer holds the data of operation issued % 256.
             * Every third operation is two iov entries: those go through
             * Go, the others run in the C steady state, on the same queue. */
            uint64_t from = tc_buf_addr(&w->host, (size_t)(issued % 256));
            size_t niov = issued % 3 == 2 ? 2 : 1;
            cucopy_iov_t iov[2] = {{(void *)(uintptr_t)from, niov == 2 ? LEN / 2 : LEN},
                                   {(void *)(uintptr_t)(from + LEN / 2), LEN - LEN / 2}};
            struct ocomp *o = &w->ring[issued % W];
            o->w = w;
            o->seq = issued;
            o->comp.func = fired;
            o->comp.count = 1;
            o->comp.status = CUCOPY_OK;
            int s = cucopy_ep_put_zcopy(ep, iov, niov, tc_buf_addr(&w->dst, 0), &o->comp);
            if (s != CUCOPY_INPROGRESS) {
                if (atomic_fetch_add(&errors_seen, 1) < 10)
                    (void)FAIL_IF(1, "thread %d: put_zcopy %ld returned %s: %s", w->t, issued,
                                  tc_status_name(s), cucopy_last_error());
                goto out;
            }
            issued++;
        }
        int n = cucopy_iface_progress(iface);
        if (n < 0) {
            (void)FAIL_IF(1, "thread %d: progress returned %s: %s", w->t, tc_status_name(n),
                          cucopy_last_error());
            break;
        }
    }
out:
    if (cucopy_ep_destroy(ep) != CUCOPY_OK)
        (void)FAIL_IF(1, "thread %d: ep_destroy: %s", w->t, cucopy_last_error());
    return NULL;
}

int main(void)
{
    ndev = tc_begin("test_callback_order", CUCOPY_MAX_DEVICES);
    const char *e = getenv("TEST_ORDER_OPS");
    nops = e != NULL ? atol(e) : 5000;
    REQUIRE(nops >= 1);
    struct worker *ws = calloc((size_t)nthreads, sizeof(*ws));
    REQUIRE(ws != NULL);
    const unsigned char *pat = tc_pattern(256 + LEN);
    for (int t = 0; t < nthreads; t++) {
        struct worker *w = &ws[t];
        w->t = t;
        w->dev = t % ndev;
        tc_buf_alloc(&w->host, TC_MEM_PINNED, 256 + LEN);
        tc_buf_write(&w->host, 0, pat, 256 + LEN);
        tc_buf_alloc_in(&w->dst, tc_primary(w->dev), LEN);
        tc_buf_set(&w->dst, 0, 0, LEN);
    }
    cucopy_context_h cctx;
    REQUIRE_OK(cucopy_context_create(NULL, &cctx));
    cucopy_iface_params_t p;
    memset(&p, 0, sizeof(p));
    p.field_mask = CUCOPY_IFACE_PARAM_THREAD_MODE;
    p.thread_mode = CUCOPY_THREAD_MODE_MULTI;
    REQUIRE_OK(cucopy_iface_open(cctx, &p, &iface));
    printf("test_callback_order: %s driver, %d threads on %d device(s), %ld operations each, "
           "window %d\n",
           td.is_fake ? "fake" : "real", nthreads, ndev, nops, W);

    deadline = tc_now() + TIMEOUT_S;
    for (int t = 0; t < nthreads; t++)
        REQUIRE(pthread_create(&ws[t].thread, NULL, worker_main, &ws[t]) == 0);
    for (int t = 0; t < nthreads; t++)
        pthread_join(ws[t].thread, NULL);
    /* Callbacks another thread is still running finish before this progress
     * can run any: drain what is left. */
    for (int k = 0; k < 10; k++)
        CHECK(cucopy_iface_progress(iface) >= 0);

    long total = 0;
    for (int t = 0; t < nthreads; t++) {
        struct worker *w = &ws[t];
        tc_case_begin("thread %d: every callback once, in issue order, with OK", t);
        CHECKF(atomic_load(&w->fired) == nops, "%ld of %ld callbacks ran",
               atomic_load(&w->fired), nops);
        CHECKF(atomic_load(&w->misorder) == 0, "%ld callback(s) out of order",
               atomic_load(&w->misorder));
        CHECKF(atomic_load(&w->wrong) == 0, "%ld callback(s) without OK", atomic_load(&w->wrong));
        tc_case_end();
        unsigned char got[LEN];
        tc_buf_read(&w->dst, 0, got, LEN);
        CHECKF(memcmp(got, pat + (nops - 1) % 256, LEN) == 0,
               "thread %d: device %d does not hold the last operation's data", t, w->dev);
        total += atomic_load(&w->fired);
    }
    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);
    CHECK_STATUS(cucopy_context_destroy(cctx), CUCOPY_OK);
    for (int t = 0; t < nthreads; t++) {
        tc_buf_free(&ws[t].host);
        tc_buf_free(&ws[t].dst);
    }
    free(ws);
    printf("test_callback_order: %d threads, %ld operations in order\n", nthreads, total);
    return tc_finish();
}
