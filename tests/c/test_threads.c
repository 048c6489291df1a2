/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Threads (brief §4): one CUCOPY_THREAD_MODE_MULTI iface used at once by
 *  - T worker threads (default 8), each with its own endpoint, each issuing
 *    N operations per device (default 2000; TEST_THREADS_OPS overrides, e.g.
 *    100000 on GPUs) to its own disjoint regions on every device: a random mix
 *    of put/get x short/zcopy (zcopy with 1-3 iov pieces) in the directions
 *    H2D, D2H, D2D on one device and D2D across devices (peer), each zcopy
 *    with its own completion, progressing themselves too; some workers keep a
 *    CUDA context of their own current, which must stay current;
 *  - one thread with no current CUDA context doing only event_fd / arm /
 *    poll / progress;
 *  - one thread calling iface_flush and ep_flush with completions
 *    periodically (and progress while it waits);
 *  - one thread releasing, every few milliseconds, the resources the iface
 *    holds in one device's primary context (iface_release_context) while
 *    copies to it are issued: they go on in fresh resources, and the
 *    driver must never see a released stream or event used.
 * At the end every zcopy that returned INPROGRESS fired exactly once with OK
 * (those that returned OK never), every flush completion fired exactly once,
 * every destination byte holds what its operation copied and every byte no
 * operation wrote still holds the fill value. Completion callbacks may run on
 * any thread that progresses, so the counters are atomic.
 * Prints "test_threads: T threads, D devices, N operations verified, C
 * completions" (C: operation and flush completions that fired).
 */
#define _GNU_SOURCE
#include "calls.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FILL 0x5a
#define MAX_DEV 8
#define MAX_THREADS 64
#define MAX_OUTSTANDING 512 /* per worker before it progresses to catch up */
#define TIMEOUT_S 300.0

struct top {
    cucopy_completion_t comp; /* first: the callback casts back */
    atomic_int fired;
    int st;            /* what the call returned */
    unsigned len;      /* bytes */
    signed char dst;   /* destination buffer: -1 host, else device */
    unsigned char how; /* 0 put_short, 1 get_short, 2 put_zcopy, 3 get_zcopy */
    unsigned char owner;
};

struct fcomp {
    cucopy_completion_t comp;
    atomic_int fired;
};

static cucopy_context_h cctx;
static cucopy_iface_h iface;
static int nthreads = 8, ndev, nper; /* nper: ops per thread per device */
static size_t total, stride;
static struct top *ops;
static struct tc_buf hsrc, hdst; /* pageable source, pinned destination */
static struct tc_buf dsrc[MAX_DEV], ddst[MAX_DEV];
static atomic_long op_completions, flush_completions, errors_seen;
static atomic_long outstanding[MAX_THREADS];
static atomic_int workers_done;
static atomic_int stop_aux;
static double deadline;

static void op_fired(cucopy_completion_t *self)
{
    struct top *o = (struct top *)((char *)self - offsetof(struct top, comp));
    atomic_fetch_add(&o->fired, 1);
    atomic_fetch_sub(&outstanding[o->owner], 1);
    atomic_fetch_add(&op_completions, 1);
}

static void flush_fired(cucopy_completion_t *self)
{
    struct fcomp *f = (struct fcomp *)((char *)self - offsetof(struct fcomp, comp));
    atomic_fetch_add(&f->fired, 1);
    atomic_fetch_add(&flush_completions, 1);
}

static const struct tc_buf *buf_of(int which, int src)
{
    if (which < 0)
        return src ? &hsrc : &hdst;
    return src ? &dsrc[which] : &ddst[which];
}

/* Only failures count, from any thread. */
static int progress_checked(cdContext expect_current)
{
    int n = cucopy_iface_progress(iface);
    if (n < 0 && atomic_fetch_add(&errors_seen, 1) < 10)
        (void)FAIL_IF(1, "progress returned %s: %s", tc_status_name(n), cucopy_last_error());
    cdContext now = tc_current();
    if (now != expect_current && atomic_fetch_add(&errors_seen, 1) < 10)
        (void)FAIL_IF(1, "progress changed the current context from %p to %p",
                      (void *)expect_current, (void *)now);
    return n;
}

struct worker {
    int t;
    pthread_t thread;
    uint64_t rng;
    long issued, shorts, zcopies, retries;
};

static unsigned rnd(struct worker *w, unsigned n)
{
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    return (unsigned)((w->rng >> 16) % n);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    int t = w->t;
    cucopy_ep_h ep = NULL;
    if (cucopy_ep_create(iface, &ep) != CUCOPY_OK) {
        (void)FAIL_IF(1, "worker %d: ep_create: %s", t, cucopy_last_error());
        return NULL;
    }
    /* Every third worker keeps a context of its own current. */
    cdContext mine = t % 3 == 1 ? tc_primary(t % ndev) : NULL;
    tc_push(mine);
    long base = (long)t * ndev * nper;
    for (long j = 0; j < (long)ndev * nper; j++) {
        long g = base + j;
        struct top *o = &ops[g];
        int d = (int)(j % ndev);
        int kind = (int)rnd(w, 5);
        int s, dd; /* source and destination buffers: -1 host */
        switch (kind) {
        case 0: s = -1, dd = d; break;                  /* H2D */
        case 1: s = d, dd = -1; break;                  /* D2H */
        case 2: s = d, dd = d; break;                   /* D2D on one device */
        case 3: s = d, dd = (d + 1) % ndev; break;      /* peer (D2D when one device) */
        default: s = (d + 1) % ndev, dd = d; break;     /* peer the other way */
        }
        o->dst = (signed char)dd;
        o->owner = (unsigned char)t;
        o->len = 1 + rnd(w, (unsigned)stride);
        o->how = (unsigned char)rnd(w, 4);
        const struct tc_buf *sb = buf_of(s, 1), *db = buf_of(dd, 0);
        size_t off = (size_t)g * stride;
        int get = o->how & 1;
        const struct tc_buf *lb = get ? db : sb, *rb = get ? sb : db;
        if (o->how < 2) {
            o->st = get ? cucopy_ep_get_short(ep, (void *)(uintptr_t)tc_buf_addr(lb, off), o->len,
                                              tc_buf_addr(rb, off))
                        : cucopy_ep_put_short(ep, (void *)(uintptr_t)tc_buf_addr(lb, off), o->len,
                                              tc_buf_addr(rb, off));
            w->shorts++;
        } else {
            cucopy_iov_t iov[3];
            int np = 1 + (int)rnd(w, 3);
            if ((unsigned)np > o->len)
                np = (int)o->len;
            size_t at = 0;
            for (int k = 0; k < np; k++) {
                size_t l = k == np - 1 ? o->len - at : o->len / (size_t)np;
                iov[k].buffer = (void *)(uintptr_t)tc_buf_addr(lb, off + at);
                iov[k].length = l;
                at += l;
            }
            o->comp.func = op_fired;
            o->comp.status = CUCOPY_OK;
            for (;;) {
                o->comp.count = 1;
                atomic_fetch_add(&outstanding[t], 1);
                o->st = get ? cucopy_ep_get_zcopy(ep, iov, (size_t)np, tc_buf_addr(rb, off),
                                                  &o->comp)
                            : cucopy_ep_put_zcopy(ep, iov, (size_t)np, tc_buf_addr(rb, off),
                                                  &o->comp);
                if (o->st != CUCOPY_INPROGRESS)
                    atomic_fetch_sub(&outstanding[t], 1);
                if (o->st != CUCOPY_ERR_NO_RESOURCE)
                    break;
                w->retries++;
                if (FAIL_IF(atomic_load(&o->fired) != 0 || o->comp.count != 1,
                            "op %ld: NO_RESOURCE but its completion was touched", g))
                    break;
                progress_checked(mine);
                if (FAIL_IF(tc_now() > deadline, "op %ld: NO_RESOURCE until the deadline", g))
                    break;
            }
            w->zcopies++;
        }
        w->issued++;
        if (o->st != CUCOPY_OK && o->st != CUCOPY_INPROGRESS &&
            atomic_fetch_add(&errors_seen, 1) < 10)
            (void)FAIL_IF(1, "worker %d op %ld (how %d, %d -> %d, %u bytes) returned %s: %s", t, g,
                          o->how, s, dd, o->len, tc_status_name(o->st), cucopy_last_error());
        if (tc_current() != mine && atomic_fetch_add(&errors_seen, 1) < 10)
            (void)FAIL_IF(1, "worker %d: an operation changed the current context", t);
        if (j % 8 == 7)
            progress_checked(mine);
        while (atomic_load(&outstanding[t]) > MAX_OUTSTANDING && tc_now() < deadline)
            progress_checked(mine);
    }
    /* Drain this worker's own operations (others may run their callbacks). */
    while (atomic_load(&outstanding[t]) > 0) {
        if (FAIL_IF(tc_now() > deadline, "worker %d: %ld operation(s) never completed", t,
                    (long)atomic_load(&outstanding[t])))
            break;
        progress_checked(mine);
    }
    if (cucopy_ep_destroy(ep) != CUCOPY_OK)
        (void)FAIL_IF(1, "worker %d: ep_destroy: %s", t, cucopy_last_error());
    tc_pop(mine);
    atomic_fetch_add(&workers_done, 1);
    return NULL;
}

/* The thread with no CUDA context: event fd, arm, poll, progress. */
struct evstats {
    long arms, busy, wakeups, polls, progress_calls;
};

static void *event_main(void *arg)
{
    struct evstats *es = arg;
    if (FAIL_IF(tc_current() != NULL, "the event thread starts with a current context"))
        return NULL;
    int fd = -1;
    int s = cucopy_iface_event_fd(iface, &fd);
    if (FAIL_IF(s != CUCOPY_OK, "event_fd returned %s: %s", tc_status_name(s),
                cucopy_last_error()))
        return NULL;
    while (!atomic_load(&stop_aux)) {
        s = cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP);
        es->arms++;
        if (s == CUCOPY_ERR_BUSY) {
            es->busy++;
        } else if (s == CUCOPY_OK) {
            struct pollfd pfd = {fd, POLLIN, 0};
            int r = poll(&pfd, 1, 5);
            es->polls++;
            es->wakeups += r > 0;
        } else if (atomic_fetch_add(&errors_seen, 1) < 10) {
            (void)FAIL_IF(1, "event_arm returned %s: %s", tc_status_name(s), cucopy_last_error());
        }
        progress_checked(NULL);
        es->progress_calls++;
        if (tc_current() != NULL && atomic_fetch_add(&errors_seen, 1) < 10)
            (void)FAIL_IF(1, "the event thread got a current context");
    }
    return NULL;
}

/* The flushing thread. */
struct flstats {
    struct fcomp *comps;
    int *st;
    int cap, n, inprogress;
};

static void *flush_main(void *arg)
{
    struct flstats *fs = arg;
    cucopy_ep_h ep = NULL;
    if (cucopy_ep_create(iface, &ep) != CUCOPY_OK) {
        (void)FAIL_IF(1, "flush thread: ep_create: %s", cucopy_last_error());
        return NULL;
    }
    while (!atomic_load(&stop_aux) && fs->n < fs->cap) {
        struct fcomp *f = &fs->comps[fs->n];
        f->comp.func = flush_fired;
        f->comp.count = 1;
        f->comp.status = CUCOPY_OK;
        atomic_store(&f->fired, 0);
        int s = fs->n % 2 ? cucopy_ep_flush(ep, 0, &f->comp) : cucopy_iface_flush(iface, 0, &f->comp);
        fs->st[fs->n++] = s;
        if (s == CUCOPY_INPROGRESS) {
            fs->inprogress++;
            while (atomic_load(&f->fired) == 0 && tc_now() < deadline) {
                if (fs->n % 4 == 1)
                    progress_checked(NULL); /* else: others progress */
                else
                    usleep(100);
            }
        } else if (s != CUCOPY_OK && atomic_fetch_add(&errors_seen, 1) < 10) {
            (void)FAIL_IF(1, "flush returned %s: %s", tc_status_name(s), cucopy_last_error());
        }
        usleep(2000);
    }
    if (cucopy_ep_destroy(ep) != CUCOPY_OK)
        (void)FAIL_IF(1, "flush thread: ep_destroy: %s", cucopy_last_error());
    return NULL;
}

/* The releasing thread: iface_release_context on each device in turn. */
struct relstats {
    uint64_t key[MAX_DEV];
    long n;
};

static void *release_main(void *arg)
{
    struct relstats *rs = arg;
    while (!atomic_load(&stop_aux)) {
        int s = cucopy_iface_release_context(iface, rs->key[rs->n % ndev]);
        if (s != CUCOPY_OK && atomic_fetch_add(&errors_seen, 1) < 10)
            (void)FAIL_IF(1, "release_context returned %s: %s", tc_status_name(s),
                          cucopy_last_error());
        rs->n++;
        usleep(td.is_fake ? 1000 : 5000);
    }
    return NULL;
}

static void verify(void)
{
    const unsigned char *pat = tc_pattern(total * stride);
    unsigned char *back = malloc(total * stride);
    REQUIRE(back != NULL);
    tc_case_begin("every byte of every destination");
    long wrong = 0;
    for (int b = -1; b < ndev; b++) {
        tc_buf_read(buf_of(b, 0), 0, back, total * stride);
        for (size_t g = 0; g < total; g++) {
            const unsigned char *got = back + g * stride;
            size_t n = ops[g].dst == b ? ops[g].len : 0;
            int ok = memcmp(got, pat + g * stride, n) == 0;
            for (size_t j = n; j < stride && ok; j++)
                ok = got[j] == FILL;
            if (!ok && wrong++ < 10)
                (void)FAIL_IF(1, "op %zu (worker %d, how %d, %u bytes to %d): region of "
                                 "destination %d differs",
                              g, ops[g].owner, ops[g].how, ops[g].len, ops[g].dst, b);
        }
    }
    CHECKF(wrong == 0, "%ld region(s) differ", wrong);
    tc_case_end();
    free(back);
}

int main(void)
{
    ndev = tc_begin("test_threads", MAX_DEV);
    const char *e = getenv("TEST_THREADS_OPS");
    nper = e != NULL ? atoi(e) : 2000;
    e = getenv("TEST_THREADS_THREADS");
    if (e != NULL)
        nthreads = atoi(e);
    REQUIRE(nper >= 1 && nthreads >= 1 && nthreads <= MAX_THREADS);
    total = (size_t)nthreads * ndev * nper;
    /* Small pieces on the fake; on GPUs up to 256 MiB per buffer. */
    stride = 128;
    if (!td.is_fake)
        while (stride < 65536 && total * stride * 2 <= ((size_t)256 << 20))
            stride *= 2;
    size_t size = total * stride;
    tc_pattern(size);
    ops = calloc(total, sizeof(*ops));
    REQUIRE(ops != NULL);
    tc_buf_alloc(&hsrc, TC_MEM_PAGEABLE, size);
    tc_buf_alloc(&hdst, TC_MEM_PINNED, size);
    tc_buf_write(&hsrc, 0, tc_pattern(size), size);
    tc_buf_set(&hdst, 0, FILL, size);
    for (int d = 0; d < ndev; d++) {
        tc_buf_alloc_in(&dsrc[d], tc_primary(d), size);
        tc_buf_alloc_in(&ddst[d], tc_primary(d), size);
        tc_buf_write(&dsrc[d], 0, tc_pattern(size), size);
        tc_buf_set(&ddst[d], 0, FILL, size);
    }
    REQUIRE_OK(cucopy_context_create(NULL, &cctx));
    cucopy_iface_params_t p;
    memset(&p, 0, sizeof(p));
    p.field_mask = CUCOPY_IFACE_PARAM_THREAD_MODE;
    p.thread_mode = CUCOPY_THREAD_MODE_MULTI;
    REQUIRE_OK(cucopy_iface_open(cctx, &p, &iface));
    cucopy_iface_attr_t a;
    memset(&a, 0, sizeof(a));
    a.field_mask = CUCOPY_IFACE_ATTR_THREAD_MODE | CUCOPY_IFACE_ATTR_CAP_FLAGS;
    CHECK_STATUS(cucopy_iface_query(iface, &a), CUCOPY_OK);
    CHECK(a.thread_mode == CUCOPY_THREAD_MODE_MULTI);
    printf("test_threads: %s driver, %d worker(s) x %d device(s) x %d op(s), %zu-byte regions\n",
           td.is_fake ? "fake" : "real", nthreads, ndev, nper, stride);
    long v0 = tc_fake.violations != NULL ? tc_fake.violations() : 0;

    double t0 = tc_now();
    deadline = t0 + TIMEOUT_S;
    struct worker w[MAX_THREADS];
    memset(w, 0, sizeof(w));
    struct evstats es;
    memset(&es, 0, sizeof(es));
    struct flstats fs;
    memset(&fs, 0, sizeof(fs));
    fs.cap = 100000;
    fs.comps = calloc((size_t)fs.cap, sizeof(*fs.comps));
    fs.st = calloc((size_t)fs.cap, sizeof(*fs.st));
    REQUIRE(fs.comps != NULL && fs.st != NULL);
    struct relstats rs;
    memset(&rs, 0, sizeof(rs));
    for (int d = 0; d < ndev; d++) /* the key release_context takes (see test_faults) */
        rs.key[d] = (a.cap_flags & CUCOPY_IFACE_CAP_CONTEXT_ID) ? tc_ctx_id(tc_primary(d))
                                                                : (uint64_t)(uintptr_t)tc_primary(d);
    pthread_t evt, flt, rlt;
    REQUIRE(pthread_create(&evt, NULL, event_main, &es) == 0);
    REQUIRE(pthread_create(&flt, NULL, flush_main, &fs) == 0);
    REQUIRE(pthread_create(&rlt, NULL, release_main, &rs) == 0);
    for (int t = 0; t < nthreads; t++) {
        w[t].t = t;
        w[t].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(t + 1);
        REQUIRE(pthread_create(&w[t].thread, NULL, worker_main, &w[t]) == 0);
    }
    for (int t = 0; t < nthreads; t++)
        pthread_join(w[t].thread, NULL);
    atomic_store(&stop_aux, 1);
    pthread_join(evt, NULL);
    pthread_join(flt, NULL);
    pthread_join(rlt, NULL);
    double secs = tc_now() - t0;
    CHECKF(atomic_load(&workers_done) == nthreads, "%d of %d workers finished",
           atomic_load(&workers_done), nthreads);

    /* Everything settles: flush with NULL until OK, then more progress. */
    int s;
    while ((s = cucopy_iface_flush(iface, 0, NULL)) == CUCOPY_INPROGRESS && tc_now() < deadline)
        progress_checked(NULL);
    CHECK_STATUS(s, CUCOPY_OK);
    for (int k = 0; k < 5; k++)
        progress_checked(NULL);

    tc_case_begin("every zcopy completion fired exactly once with OK");
    long shorts = 0, zc = 0, inprog = 0, bad = 0, retries = 0;
    for (int t = 0; t < nthreads; t++) {
        shorts += w[t].shorts;
        zc += w[t].zcopies;
        retries += w[t].retries;
    }
    for (size_t g = 0; g < total; g++) {
        const struct top *o = &ops[g];
        int fired = atomic_load(&o->fired);
        int want = o->st == CUCOPY_INPROGRESS;
        inprog += want;
        if (o->how >= 2 && (fired != want || (want && o->comp.status != CUCOPY_OK)) &&
            bad++ < 10)
            (void)FAIL_IF(1, "op %zu: returned %s, fired %d time(s), status %s", g,
                          tc_status_name(o->st), fired, tc_status_name(o->comp.status));
    }
    CHECKF(bad == 0, "%ld zcopy completion(s) wrong", bad);
    CHECKF(atomic_load(&op_completions) == inprog, "%ld operation completions for %ld INPROGRESS",
           (long)atomic_load(&op_completions), inprog);
    tc_case_end();

    tc_case_begin("every flush completion fired exactly once");
    long fbad = 0;
    for (int i = 0; i < fs.n; i++) {
        int fired = atomic_load(&fs.comps[i].fired);
        int want = fs.st[i] == CUCOPY_INPROGRESS;
        if (fired != want && fbad++ < 10)
            (void)FAIL_IF(1, "flush %d: returned %s, fired %d time(s)", i, tc_status_name(fs.st[i]),
                          fired);
    }
    CHECKF(fbad == 0, "%ld flush completion(s) wrong", fbad);
    CHECKF(atomic_load(&flush_completions) == fs.inprogress,
           "%ld flush completions for %d INPROGRESS", (long)atomic_load(&flush_completions),
           fs.inprogress);
    tc_case_end();

    verify();
    CHECKF(es.arms > 0 && es.progress_calls > 0, "the event thread never armed or progressed");
    CHECKF(rs.n > 0, "the releasing thread never released");
    printf("test_threads: %.2f s; %ld short, %ld zcopy (%ld in progress, %ld NO_RESOURCE "
           "retries); event thread: %ld arm(s), %ld BUSY, %ld poll(s), %ld wake-up(s); "
           "%d flush(es), %d in progress; %ld context release(s)\n",
           secs, shorts, zc, inprog, retries, es.arms, es.busy, es.polls, es.wakeups, fs.n,
           fs.inprogress, rs.n);

    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);
    CHECK_STATUS(cucopy_context_destroy(cctx), CUCOPY_OK);
    if (tc_fake.violations != NULL)
        CHECKF(tc_fake.violations() == v0, "%ld driver misuse(s)", tc_fake.violations() - v0);
    printf("test_threads: %d threads, %d devices, %zu operations verified, %ld completions\n",
           nthreads, ndev, total, (long)(atomic_load(&op_completions) +
                                         atomic_load(&flush_completions)));
    tc_buf_free(&hsrc);
    tc_buf_free(&hdst);
    for (int d = 0; d < ndev; d++) {
        tc_buf_free(&dsrc[d]);
        tc_buf_free(&ddst[d]);
    }
    free(ops);
    free(fs.comps);
    free(fs.st);
    return tc_finish();
}
