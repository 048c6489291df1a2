/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Crossings between C and Go per operation, measured through the C ABI
 * (docs/design.md, "Completion, progress, flush"): the test build of the
 * library (testhooks/libcucopy.so.0, on LD_LIBRARY_PATH) counts every call
 * of a public function into Go and reports the Go runtime's count of calls
 * out of Go (cucopy_test_crossings, found with dlsym: the release library
 * has none). For 8-byte H2D zcopies from pinned memory, one at a time,
 * 8 in flight on one queue, 8 in flight over every device and both
 * directions, and 16-entry iovs, each with a completion callback: the
 * crossings of the issuing calls and of the progress calls to completion,
 * printed per operation and per progress call, with the fake's driver calls
 * per progress call. The copies are given time to finish before progress
 * is called, so that a progress call is mostly productive; unproductive
 * calls are counted apart.
 *
 * Short copies (put and get, plain and with memory handles on both sides,
 * on a single- and a multi-thread iface) run in the C steady state once
 * their context's slot and stream exist: no crossing at all, and the data
 * arrives (read back and compared). So do zcopies whose iov entries form
 * one run (one entry, or 16 here): the C side books them for Go, which takes
 * them at its next progress call; eight at a time they cost at most one
 * crossing per operation. An iov that is not one run goes through Go. On the
 * fake, a driver failure of such a copy is reported once by Go, and not
 * retried.
 *
 * Bounds (what the library achieves; a regression fails): a short copy
 * and a zcopy that is one run cross nothing (through Go: one call in and
 * one out); a progress call is one call in,
 * and out one query of every slot plus, when completions are ready, one
 * call running their callbacks. On the fake: at most one
 * cuDevicePrimaryCtxGetState per device per progress call, and two event
 * queries for a finished queue of 8.
 */
#define _GNU_SOURCE
#include "check.h"
#include "fake.h"
#include "mem.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cucopy.h"

typedef void (*crossings_fn)(uint64_t *c_to_go, uint64_t *go_to_c);
static crossings_fn crossings;
/* CUCOPY_C_STEADY=off: every call goes through Go (one call in and one out
 * per short copy and per zcopy). */
static int go_only;

struct count {
    uint64_t in, out; /* C -> Go, Go -> C */
};

static struct count now(void)
{
    struct count c;
    crossings(&c.in, &c.out);
    return c;
}

static struct count since(struct count a)
{
    struct count b = now();
    return (struct count){b.in - a.in, b.out - a.out};
}

static void add(struct count *to, struct count c)
{
    to->in += c.in;
    to->out += c.out;
}

/* The fake's driver calls by name, 0 on a real driver. */
static long calls(const char *name)
{
    return tc_fake.calls != NULL ? tc_fake.calls(name) : 0;
}

#define ROUNDS 50
#define WARMUP 4
#define MAXOPS 16

struct target {
    struct tc_buf *dev;
    int put;         /* 1: host -> device, 0: device -> host */
    cucopy_ep_h ep;  /* NULL: the case's endpoint */
};

struct result {
    struct count issue, progress;
    long ops, progress_calls, productive, states, event_queries;
    long whole, whole_queries; /* progress calls that completed a whole round, their event queries */
};

/* One round: ops zcopies of iovcnt 8-byte entries each over targets in
 * turn, then progress until all completed. */
static void round_of(cucopy_iface_h iface, cucopy_ep_h ep, struct tc_buf *host,
                     const struct target *targets, int ntargets, int ops, int iovcnt,
                     struct result *res)
{
    struct tc_comp comps[MAXOPS];
    cucopy_iov_t iov[16];
    for (int k = 0; k < ops; k++) {
        const struct target *t = &targets[k % ntargets];
        for (int j = 0; j < iovcnt; j++)
            iov[j] = (cucopy_iov_t){(void *)(uintptr_t)tc_buf_addr(host, (size_t)(64 * j)), 8};
        tc_comp_init(&comps[k], 1);
        cucopy_ep_h e = t->ep != NULL ? t->ep : ep;
        struct count c = now();
        int st = t->put ? cucopy_ep_put_zcopy(e, iov, (size_t)iovcnt, tc_buf_addr(t->dev, 0),
                                              &comps[k].comp)
                        : cucopy_ep_get_zcopy(e, iov, (size_t)iovcnt, tc_buf_addr(t->dev, 0),
                                              &comps[k].comp);
        add(&res->issue, since(c));
        REQUIRE(st == CUCOPY_INPROGRESS);
    }
    /* Let the copies finish on the device before the first progress call
     * (the query counts below assume it; a sleep alone was not enough under
     * emulation): the driver's own wait, not counted as a crossing. */
    for (int k = 0; k < ntargets && k < ops; k++) {
        cdContext c = tc_primary(tc_mem_kind_device(targets[k].dev->kind));
        tc_push(c);
        TD_CHECK(td.cuCtxSynchronize());
        tc_pop(c);
    }
    int left = ops;
    double deadline = tc_now() + 30;
    while (left > 0) {
        nanosleep(&(struct timespec){0, 200000}, NULL); /* let the copies finish */
        long states = calls("cuDevicePrimaryCtxGetState"), queries = calls("cuEventQuery");
        struct count c = now();
        int n = cucopy_iface_progress(iface);
        add(&res->progress, since(c));
        REQUIRE(n >= 0);
        res->progress_calls++;
        res->productive += n > 0;
        if (n > 0) {
            res->states += calls("cuDevicePrimaryCtxGetState") - states;
            res->event_queries += calls("cuEventQuery") - queries;
        }
        if (n == ops) {
            res->whole++;
            res->whole_queries += calls("cuEventQuery") - queries;
        }
        left -= n;
        REQUIRE(tc_now() < deadline);
    }
    for (int k = 0; k < ops; k++)
        FAIL_IF(comps[k].fired != 1 || comps[k].comp.status != CUCOPY_OK,
                "operation %d: fired %d, status %d", k, comps[k].fired, comps[k].comp.status);
    res->ops += ops;
}

static void measure(const char *name, cucopy_iface_h iface, cucopy_ep_h ep, struct tc_buf *host,
                    const struct target *targets, int ntargets, int ops, int iovcnt, int ndev)
{
    struct result warm = {0}, res = {0};
    for (int r = 0; r < WARMUP; r++) /* streams, events and rings get made */
        round_of(iface, ep, host, targets, ntargets, ops, iovcnt, &warm);
    for (int r = 0; r < ROUNDS; r++)
        round_of(iface, ep, host, targets, ntargets, ops, iovcnt, &res);
    double n = (double)res.ops;
    long unproductive = res.progress_calls - res.productive;
    printf("test_crossings: %-28s per operation: C->Go %.3f, Go->C %.3f (issue %.3f / %.3f, "
           "progress %.3f / %.3f); %.2f progress calls per round (%ld of %ld unproductive)",
           name, (double)(res.issue.in + res.progress.in) / n,
           (double)(res.issue.out + res.progress.out) / n, (double)res.issue.in / n,
           (double)res.issue.out / n, (double)res.progress.in / n, (double)res.progress.out / n,
           (double)res.progress_calls / ROUNDS, unproductive, res.progress_calls);
    if (tc_fake.calls != NULL)
        printf("; per productive progress call: %.2f cuDevicePrimaryCtxGetState, %.2f cuEventQuery",
               (double)res.states / (double)res.productive,
               (double)res.event_queries / (double)res.productive);
    printf("\n");
    /* A zcopy whose entries form one run (here: all of them) runs in the C
     * steady state; through Go it is one call in and one out. */
    uint64_t issue = !go_only ? 0 : (uint64_t)res.ops;
    (void)iovcnt;
    tc_case_begin("%s: crossings within bounds", name);
    CHECKF(res.issue.in == issue && res.issue.out == issue,
           "%s: issue crossings %lu in / %lu out for %ld zcopies: want %lu each", name,
           (unsigned long)res.issue.in, (unsigned long)res.issue.out, res.ops,
           (unsigned long)issue);
    /* Issue 12's goal: at most one crossing per operation, amortized, for
     * zcopies eight at a time. */
    if (ops == 8 && !go_only)
        CHECKF(res.issue.in + res.issue.out + res.progress.in + res.progress.out <=
                   (uint64_t)res.ops,
               "%s: %lu crossings for %ld zcopies: want at most one per operation", name,
               (unsigned long)(res.issue.in + res.issue.out + res.progress.in + res.progress.out),
               res.ops);
    CHECKF(res.progress.in == (uint64_t)res.progress_calls,
           "%s: %lu calls into Go for %ld progress calls: want one each", name,
           (unsigned long)res.progress.in, res.progress_calls);
    CHECKF(res.progress.out <= (uint64_t)(res.progress_calls + res.productive),
           "%s: %lu calls out of Go for %ld progress calls (%ld productive): want at most one "
           "query per call and one callback batch per productive call",
           name, (unsigned long)res.progress.out, res.progress_calls, res.productive);
    if (tc_fake.calls != NULL) {
        CHECKF(res.states <= res.productive * ndev,
               "%s: %ld cuDevicePrimaryCtxGetState in %ld productive progress calls over %d "
               "device(s): want at most one per device per call",
               name, res.states, res.productive, ndev);
        if (ops == 8 && ntargets == 1)
            CHECKF(res.whole_queries == 2 * res.whole,
                   "%s: %ld event queries in %ld progress calls that completed all 8: want two "
                   "(head, newest) each",
                   name, res.whole_queries, res.whole);
    }
    tc_case_end();
}

/* SHORTS short copies of 8 bytes each way, with memory handles (memh_host,
 * memh_dev) or without: no crossing, once one of each made the context's
 * slot and stream; each round trip's bytes come back. */
#define SHORTS 200
static void measure_short(const char *name, cucopy_ep_h ep, struct tc_buf *host,
                          struct tc_buf *dev, cucopy_memh_h memh_host, cucopy_memh_h memh_dev)
{
    void *out = (void *)(uintptr_t)tc_buf_addr(host, 0), *back = (void *)(uintptr_t)tc_buf_addr(host, 64);
    uint64_t remote = tc_buf_addr(dev, 128);
    struct count total = {0, 0};
    long wrong = 0;
    for (int k = -1; k < SHORTS; k++) { /* k = -1: the warm-up, not counted */
        uint64_t v = 0x5eed0000u + (uint64_t)k, got = 0;
        tc_buf_write(host, 0, &v, sizeof(v));
        tc_buf_write(host, 64, &got, sizeof(got));
        struct count c = now();
        int put = memh_host != NULL
                      ? cucopy_ep_put_short_memh(ep, out, memh_host, 8, remote, memh_dev)
                      : cucopy_ep_put_short(ep, out, 8, remote);
        int get = memh_host != NULL
                      ? cucopy_ep_get_short_memh(ep, back, memh_host, 8, remote, memh_dev)
                      : cucopy_ep_get_short(ep, back, 8, remote);
        struct count d = since(c);
        REQUIRE(put == CUCOPY_OK && get == CUCOPY_OK);
        tc_buf_read(host, 64, &got, sizeof(got));
        wrong += got != v;
        if (k >= 0)
            add(&total, d);
    }
    printf("test_crossings: %-28s per short copy: C->Go %.3f, Go->C %.3f\n", name,
           (double)total.in / (2.0 * SHORTS), (double)total.out / (2.0 * SHORTS));
    uint64_t want = go_only ? 2 * SHORTS : 0;
    tc_case_begin("%s: short copies cross %s", name, go_only ? "once each way" : "nothing");
    CHECKF(wrong == 0, "%s: %ld of %d round trips did not bring the value back", name, wrong,
           SHORTS);
    CHECKF(total.in == want && total.out == want,
           "%s: %lu calls into Go and %lu out of it for %d short copies: want %lu each", name,
           (unsigned long)total.in, (unsigned long)total.out, 2 * SHORTS, (unsigned long)want);
    tc_case_end();
}

/* On the fake: a short copy or a zcopy that the driver fails in the C
 * steady state is reported by Go (one call in), with the failed call named,
 * and not tried again (a failed zcopy never completes); one whose restore
 * of the caller's context fails is done (a zcopy: in flight, completing
 * once), and Go logs it. The next copy runs in C again. */
static void fast_failures(cucopy_iface_h iface, cucopy_ep_h ep, struct tc_buf *host,
                          struct tc_buf *dev)
{
    if (tc_fake.fail == NULL || go_only)
        return;
    void *out = (void *)(uintptr_t)tc_buf_addr(host, 0);
    uint64_t remote = tc_buf_addr(dev, 256), v = 0xfa11, got = 0;
    tc_buf_write(host, 0, &v, sizeof(v));
    REQUIRE_OK(cucopy_ep_put_short(ep, out, 8, remote)); /* slot and stream made */

    tc_case_begin("a short copy the driver fails is reported once, not retried");
    long copies = calls("cuMemcpyAsync");
    tc_fake.fail("cuMemcpyAsync", 1, 1 /* CUDA_ERROR_INVALID_VALUE */);
    struct count c = now();
    int st = cucopy_ep_put_short(ep, out, 8, remote);
    struct count d = since(c);
    CHECKF(st == CUCOPY_ERR_CUDA, "status %d, want CUCOPY_ERR_CUDA", st);
    CHECKF(strstr(cucopy_last_error(), "cuMemcpyAsync") != NULL, "message: %s",
           cucopy_last_error());
    CHECKF(calls("cuMemcpyAsync") - copies == 1, "%ld cuMemcpyAsync calls: want 1 (no retry)",
           calls("cuMemcpyAsync") - copies);
    CHECKF(d.in == 1, "%lu calls into Go: want 1 (the report)", (unsigned long)d.in);
    tc_case_end();

    tc_case_begin("a short copy whose context restore fails is done, and Go logs it");
    REQUIRE(tc_current() == NULL); /* so that the copy pushes its context, and pops it */
    v = 0x900d;
    tc_buf_write(host, 0, &v, sizeof(v));
    tc_fake.fail("cuCtxPopCurrent", 1, 1);
    c = now();
    st = cucopy_ep_put_short(ep, out, 8, remote);
    d = since(c);
    CHECKF(st == CUCOPY_OK, "status %d (%s), want CUCOPY_OK", st, cucopy_last_error());
    CHECKF(d.in == 1, "%lu calls into Go: want 1 (the warning)", (unsigned long)d.in);
    REQUIRE_OK(cucopy_ep_get_short(ep, (void *)(uintptr_t)tc_buf_addr(host, 64), 8, remote));
    tc_buf_read(host, 64, &got, sizeof(got));
    CHECKF(got == v, "read back 0x%lx, want 0x%lx", (unsigned long)got, (unsigned long)v);
    c = now();
    REQUIRE_OK(cucopy_ep_put_short(ep, out, 8, remote));
    d = since(c);
    CHECKF(d.in == 0 && d.out == 0, "the next copy crossed %lu in, %lu out: want none",
           (unsigned long)d.in, (unsigned long)d.out);
    tc_case_end();

    /* The failed pop left the copy's context on this thread's stack. */
    if (tc_current() != NULL)
        tc_pop(tc_current());
    tc_case_begin("a zcopy the driver fails is reported once, not retried, and never completes");
    cucopy_iov_t iov = {out, 8};
    struct tc_comp comp;
    tc_comp_init(&comp, 1);
    copies = calls("cuMemcpyAsync");
    tc_fake.fail("cuMemcpyAsync", 1, 1);
    c = now();
    st = cucopy_ep_put_zcopy(ep, &iov, 1, remote, &comp.comp);
    d = since(c);
    CHECKF(st == CUCOPY_ERR_CUDA, "status %d, want CUCOPY_ERR_CUDA", st);
    CHECKF(strstr(cucopy_last_error(), "ep_put_zcopy") != NULL &&
               strstr(cucopy_last_error(), "cuMemcpyAsync") != NULL,
           "message: %s", cucopy_last_error());
    CHECKF(calls("cuMemcpyAsync") - copies == 1, "%ld cuMemcpyAsync calls: want 1 (no retry)",
           calls("cuMemcpyAsync") - copies);
    CHECKF(d.in == 1, "%lu calls into Go: want 1 (the report)", (unsigned long)d.in);
    for (int k = 0; k < 10; k++)
        REQUIRE(cucopy_iface_progress(iface) >= 0);
    CHECKF(comp.fired == 0, "the failed zcopy's completion fired %d times", comp.fired);
    tc_case_end();

    tc_case_begin("a zcopy whose context restore fails is in flight, and completes once");
    REQUIRE(tc_current() == NULL);
    v = 0x2c0b;
    tc_buf_write(host, 0, &v, sizeof(v));
    tc_comp_init(&comp, 1);
    tc_fake.fail("cuCtxPopCurrent", 1, 1);
    st = cucopy_ep_put_zcopy(ep, &iov, 1, remote, &comp.comp);
    CHECKF(st == CUCOPY_INPROGRESS, "status %d (%s), want CUCOPY_INPROGRESS", st,
           cucopy_last_error());
    double deadline = tc_now() + 10;
    while (st == CUCOPY_INPROGRESS && comp.fired == 0 && tc_now() < deadline)
        REQUIRE(cucopy_iface_progress(iface) >= 0);
    CHECKF(comp.fired == 1 && comp.comp.status == CUCOPY_OK, "fired %d, status %d", comp.fired,
           comp.comp.status);
    if (tc_current() != NULL)
        tc_pop(tc_current());
    got = 0;
    REQUIRE_OK(cucopy_ep_get_short(ep, (void *)(uintptr_t)tc_buf_addr(host, 64), 8, remote));
    tc_buf_read(host, 64, &got, sizeof(got));
    CHECKF(got == v, "read back 0x%lx, want 0x%lx", (unsigned long)got, (unsigned long)v);
    tc_case_end();
}

/* An iov whose entries do not form one run (pinned host memory and device
 * memory of another device, into device 0) goes through Go, one call each
 * way, and completes once with both entries' data. */
static void not_one_run(cucopy_iface_h iface, cucopy_ep_h ep, struct tc_buf *host,
                        struct tc_buf *dev, int ndev)
{
    if (ndev < 2)
        return;
    tc_case_begin("an iov that is not one run goes through Go and completes once");
    uint64_t a = 0xa11, b = 0xb22, got[2] = {0, 0};
    tc_buf_write(host, 512, &a, 8);
    tc_buf_write(&dev[1], 512, &b, 8);
    cucopy_iov_t iov[2] = {{(void *)(uintptr_t)tc_buf_addr(host, 512), 8},
                           {(void *)(uintptr_t)tc_buf_addr(&dev[1], 512), 8}};
    struct tc_comp comp;
    tc_comp_init(&comp, 1);
    struct count c = now();
    int st = cucopy_ep_put_zcopy(ep, iov, 2, tc_buf_addr(&dev[0], 1024), &comp.comp);
    struct count d = since(c);
    CHECKF(st == CUCOPY_INPROGRESS, "status %d (%s)", st, cucopy_last_error());
    CHECKF(d.in == 1 && d.out >= 1, "issue crossed %lu in, %lu out: want one call into Go",
           (unsigned long)d.in, (unsigned long)d.out);
    CHECKF(tc_wait(iface, &comp, 10) && comp.fired == 1, "fired %d", comp.fired);
    tc_buf_read(&dev[0], 1024, got, 16);
    CHECKF(got[0] == a && got[1] == b, "read 0x%lx 0x%lx", (unsigned long)got[0],
           (unsigned long)got[1]);
    tc_case_end();
}

/* measure_short with and without memory handles on both sides. */
static void measure_shorts(const char *name, cucopy_context_h ctx, cucopy_ep_h ep,
                           struct tc_buf *host, struct tc_buf *dev)
{
    char what[64];
    cucopy_memh_h mh, md;
    REQUIRE_OK(cucopy_mem_describe(ctx, (void *)(uintptr_t)tc_buf_addr(host, 0), host->size, &mh));
    REQUIRE_OK(cucopy_mem_describe(ctx, (void *)(uintptr_t)tc_buf_addr(dev, 0), dev->size, &md));
    snprintf(what, sizeof(what), "%s, short", name);
    measure_short(what, ep, host, dev, NULL, NULL);
    snprintf(what, sizeof(what), "%s, short memh", name);
    measure_short(what, ep, host, dev, mh, md);
    REQUIRE_OK(cucopy_mem_dereg(ctx, mh));
    REQUIRE_OK(cucopy_mem_dereg(ctx, md));
}

int main(void)
{
    int ndev = tc_begin("test_crossings", 2);
    const char *steady = getenv("CUCOPY_C_STEADY");
    go_only = steady != NULL && strcmp(steady, "off") == 0;
    crossings = (crossings_fn)dlsym(RTLD_DEFAULT, "cucopy_test_crossings");
    if (crossings == NULL)
        tc_fatal(__FILE__, __LINE__,
                 "cucopy_test_crossings not found: run with the test build of the library "
                 "(LD_LIBRARY_PATH=BUILD_DIR/testhooks)");
    cucopy_context_h ctx;
    cucopy_iface_h iface;
    cucopy_ep_h ep;
    REQUIRE_OK(cucopy_context_create(NULL, &ctx));
    REQUIRE_OK(cucopy_iface_open(ctx, NULL, &iface));
    REQUIRE_OK(cucopy_ep_create(iface, &ep));
    struct tc_buf host, dev[2];
    tc_buf_alloc(&host, TC_MEM_PINNED, 4096);
    for (int d = 0; d < ndev; d++)
        tc_buf_alloc(&dev[d], d == 0 ? TC_MEM_DEV0 : TC_MEM_DEV1, 4096);

    struct count a = now(), b = since(a);
    CHECKF(b.in == 0 && b.out == 0, "reading the counters crosses nothing (%lu, %lu)",
           (unsigned long)b.in, (unsigned long)b.out);

    struct target one = {&dev[0], 1, NULL};
    struct target spread[4];
    int nspread = 0;
    for (int d = 0; d < ndev; d++) {
        spread[nspread++] = (struct target){&dev[d], 1, NULL};
        spread[nspread++] = (struct target){&dev[d], 0, NULL};
    }
    measure("single", iface, ep, &host, &one, 1, 1, 1, ndev);
    measure("window 8", iface, ep, &host, &one, 1, 8, 1, ndev);
    char name[64];
    snprintf(name, sizeof(name), "window 8, %d queues", nspread);
    measure(name, iface, ep, &host, spread, nspread, 8, 1, ndev);
    measure("iov 16", iface, ep, &host, &one, 1, 1, 16, ndev);
    measure("iov 16, window 8", iface, ep, &host, &one, 1, 8, 16, ndev);
    measure_shorts("single-thread", ctx, ep, &host, &dev[0]);
    fast_failures(iface, ep, &host, &dev[0]);
    not_one_run(iface, ep, &host, dev, ndev);
    REQUIRE_OK(cucopy_ep_destroy(ep));
    REQUIRE_OK(cucopy_iface_close(iface));

    /* A multi-thread iface: four endpoints on four lanes (CUCOPY_LANES,
     * default 4), all on device 0: four slots of one context and device,
     * one liveness check and one context entry per progress call. */
    cucopy_iface_params_t mp = {.field_mask = CUCOPY_IFACE_PARAM_THREAD_MODE,
                                .thread_mode = CUCOPY_THREAD_MODE_MULTI};
    cucopy_ep_h eps[4];
    struct target lanes[4];
    REQUIRE_OK(cucopy_iface_open(ctx, &mp, &iface));
    for (int k = 0; k < 4; k++) {
        REQUIRE_OK(cucopy_ep_create(iface, &eps[k]));
        lanes[k] = (struct target){&dev[0], 1, eps[k]};
    }
    measure("multi, window 8, 4 lanes", iface, eps[0], &host, lanes, 4, 8, 1, 1);
    measure_shorts("multi", ctx, eps[1], &host, &dev[0]);
    for (int k = 0; k < 4; k++)
        REQUIRE_OK(cucopy_ep_destroy(eps[k]));
    REQUIRE_OK(cucopy_iface_close(iface));
    for (int d = 0; d < ndev; d++)
        tc_buf_free(&dev[d]);
    tc_buf_free(&host);
    REQUIRE_OK(cucopy_context_destroy(ctx));
    return tc_finish();
}
