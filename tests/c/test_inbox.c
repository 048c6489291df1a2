/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One-entry zcopies in the C steady state book their pieces in the slot's
 * inbox (docs/design.md, "The C steady state"), which holds 128; core takes
 * them at its next progress call. Without progress in between:
 *
 *  - one thread issues 300 zcopies on one queue, twice (the first round
 *    makes the events; in the second the C side has free ones): those past
 *    the inbox's room go through Go (CD_COPY_NEED_BOOKING), all on one
 *    queue; each completes exactly once, in issue order, and the data of
 *    every one arrives;
 *  - on a multi-thread iface, 8 threads share one endpoint (one slot): the
 *    odd ones copy from pageable memory (pieces that detach, which the C
 *    side leaves to Go), the even ones from pinned memory, 96 each per
 *    round, for ROUNDS rounds; every completion fires exactly once and every
 *    destination holds its value.
 *
 * Runs with FAKECUDA_DELAY_US, so that copies are visibly in flight.
 */
#define _GNU_SOURCE
#include "check.h"
#include "mem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucopy.h"

#define SERIAL 300
#define NT 8
#define PER 96
#define ROUNDS 30

static cucopy_iface_h iface;

/* Completions that record the order they fired in. */
struct ordered {
    cucopy_completion_t comp;
    int seq;
};
static int fired_order[SERIAL], nfired;

static void fired_in_order(cucopy_completion_t *c)
{
    struct ordered *o = (struct ordered *)c;
    if (nfired < SERIAL)
        fired_order[nfired] = o->seq;
    nfired++;
}

/* Progress until every one of n completions fired (count 0), or 10 s. */
static void progress_until(cucopy_completion_t *const *comps, int n)
{
    double deadline = tc_now() + 10;
    for (;;) {
        REQUIRE(cucopy_iface_progress(iface) >= 0);
        int pending = 0;
        for (int k = 0; k < n; k++)
            pending += comps[k]->count > 0;
        if (pending == 0 || tc_now() > deadline)
            return;
    }
}

static void serial_case(cucopy_context_h ctx)
{
    cucopy_ep_h ep;
    struct tc_buf host, dev;
    REQUIRE_OK(cucopy_iface_open(ctx, NULL, &iface));
    REQUIRE_OK(cucopy_ep_create(iface, &ep));
    tc_buf_alloc(&host, TC_MEM_PINNED, 8 * SERIAL);
    tc_buf_alloc(&dev, TC_MEM_DEV0, 8 * SERIAL);
    for (int k = 0; k < SERIAL; k++) {
        uint64_t v = 0x1b0c0000u + (uint64_t)k;
        tc_buf_write(&host, 8 * (size_t)k, &v, 8);
    }
    static struct ordered o[SERIAL];
    static cucopy_completion_t *comps[SERIAL];
    /* Round 0 makes the events (each zcopy that finds none goes through
     * Go); in round 1 the free ones let the C side fill the inbox. */
    for (int round = 0; round < 2; round++) {
        tc_case_begin("round %d: %d zcopies without progress, past the inbox's room through Go, "
                      "in order",
                      round, SERIAL);
        nfired = 0;
        int bad = 0;
        for (int k = 0; k < SERIAL; k++) {
            o[k] = (struct ordered){{fired_in_order, 1, CUCOPY_OK}, k};
            comps[k] = &o[k].comp;
            cucopy_iov_t iov = {(void *)(uintptr_t)tc_buf_addr(&host, 8 * (size_t)k), 8};
            bad += cucopy_ep_put_zcopy(ep, &iov, 1, tc_buf_addr(&dev, 8 * (size_t)k),
                                       &o[k].comp) != CUCOPY_INPROGRESS;
        }
        CHECKF(bad == 0, "%d zcopies did not return CUCOPY_INPROGRESS (%s)", bad,
               cucopy_last_error());
        progress_until(comps, SERIAL);
        CHECKF(nfired == SERIAL, "%d completions fired for %d zcopies", nfired, SERIAL);
        int misordered = 0, wrong = 0;
        for (int k = 0; k < SERIAL && k < nfired; k++)
            misordered += fired_order[k] != k;
        for (int k = 0; k < SERIAL; k++) {
            uint64_t got = 0;
            tc_buf_read(&dev, 8 * (size_t)k, &got, 8);
            wrong += got != 0x1b0c0000u + (uint64_t)k;
            wrong += o[k].comp.count != 0 || o[k].comp.status != CUCOPY_OK;
        }
        CHECKF(misordered == 0, "%d completions out of issue order", misordered);
        CHECKF(wrong == 0, "%d zcopies with wrong data, count or status", wrong);
        tc_case_end();
        tc_buf_set(&dev, 0, 0, 8 * SERIAL);
    }
    REQUIRE_OK(cucopy_ep_destroy(ep));
    REQUIRE_OK(cucopy_iface_close(iface));
    tc_buf_free(&host);
    tc_buf_free(&dev);
}

/* The shared-slot case: NT threads, one endpoint. */
static cucopy_ep_h shared_ep;
static struct tc_buf pinned, dev;
static unsigned char *pageable[NT];
static cucopy_completion_t comps[NT][PER];
static pthread_barrier_t start, end;
static atomic_int stop, not_inprogress;
static int round_no;

static void count_only(cucopy_completion_t *c)
{
    (void)c;
}

static uint64_t value(int t, int k, int r)
{
    return ((uint64_t)r << 32) | ((uint64_t)t << 16) | (uint64_t)k;
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (;;) {
        pthread_barrier_wait(&start);
        if (atomic_load(&stop))
            return NULL;
        for (int k = 0; k < PER; k++) {
            size_t off = 8 * ((size_t)t * PER + (size_t)k);
            uint64_t v = value(t, k, round_no);
            void *src;
            if (t & 1) { /* pageable: its piece would detach, so Go issues it */
                memcpy(pageable[t] + 8 * k, &v, 8);
                src = pageable[t] + 8 * k;
            } else {
                tc_buf_write(&pinned, off, &v, 8);
                src = (void *)(uintptr_t)tc_buf_addr(&pinned, off);
            }
            cucopy_completion_t *c = &comps[t][k];
            *c = (cucopy_completion_t){count_only, 1, CUCOPY_OK};
            cucopy_iov_t iov = {src, 8};
            if (cucopy_ep_put_zcopy(shared_ep, &iov, 1, tc_buf_addr(&dev, off), c) !=
                CUCOPY_INPROGRESS) {
                c->count = 0;
                atomic_fetch_add(&not_inprogress, 1);
            }
        }
        pthread_barrier_wait(&end);
    }
}

static void shared_case(cucopy_context_h ctx)
{
    cucopy_iface_params_t mp = {.field_mask = CUCOPY_IFACE_PARAM_THREAD_MODE,
                                .thread_mode = CUCOPY_THREAD_MODE_MULTI};
    REQUIRE_OK(cucopy_iface_open(ctx, &mp, &iface));
    REQUIRE_OK(cucopy_ep_create(iface, &shared_ep));
    tc_buf_alloc(&pinned, TC_MEM_PINNED, 8 * NT * PER);
    tc_buf_alloc(&dev, TC_MEM_DEV0, 8 * NT * PER);
    for (int t = 0; t < NT; t++) {
        pageable[t] = calloc(PER, 8);
        REQUIRE(pageable[t] != NULL);
    }
    REQUIRE(pthread_barrier_init(&start, NULL, NT + 1) == 0);
    REQUIRE(pthread_barrier_init(&end, NULL, NT + 1) == 0);
    pthread_t th[NT];
    for (int t = 0; t < NT; t++)
        REQUIRE(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0);
    static cucopy_completion_t *all[NT * PER];
    for (int t = 0; t < NT; t++)
        for (int k = 0; k < PER; k++)
            all[t * PER + k] = &comps[t][k];
    tc_case_begin("%d threads on one slot, pinned and pageable, no progress while issuing",
                  NT);
    long lost = 0, twice = 0, wrong = 0;
    for (int r = 0; r < ROUNDS; r++) {
        round_no = r;
        pthread_barrier_wait(&start);
        pthread_barrier_wait(&end);
        progress_until(all, NT * PER);
        for (int t = 0; t < NT; t++)
            for (int k = 0; k < PER; k++) {
                lost += comps[t][k].count > 0;
                twice += comps[t][k].count < 0;
                uint64_t got = 0;
                tc_buf_read(&dev, 8 * ((size_t)t * PER + (size_t)k), &got, 8);
                wrong += got != value(t, k, r);
            }
        if (lost + twice + wrong > 0)
            break; /* the next rounds would wait for the lost ones again */
    }
    atomic_store(&stop, 1);
    pthread_barrier_wait(&start);
    for (int t = 0; t < NT; t++)
        pthread_join(th[t], NULL);
    CHECKF(atomic_load(&not_inprogress) == 0, "%d zcopies did not return CUCOPY_INPROGRESS",
           atomic_load(&not_inprogress));
    CHECKF(lost == 0 && twice == 0, "%ld completions never fired, %ld fired twice", lost, twice);
    CHECKF(wrong == 0, "%ld destinations without their value", wrong);
    tc_case_end();
    REQUIRE_OK(cucopy_ep_destroy(shared_ep));
    REQUIRE_OK(cucopy_iface_close(iface));
    for (int t = 0; t < NT; t++)
        free(pageable[t]);
    tc_buf_free(&pinned);
    tc_buf_free(&dev);
}

int main(void)
{
    tc_begin("test_inbox", 1);
    cucopy_context_h ctx;
    REQUIRE_OK(cucopy_context_create(NULL, &ctx));
    serial_case(ctx);
    shared_case(ctx);
    REQUIRE_OK(cucopy_context_destroy(ctx));
    return tc_finish();
}
