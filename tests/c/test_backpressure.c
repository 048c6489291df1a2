/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Back-pressure, not failure (brief §4): when a configured limit is reached
 * an operation returns CUCOPY_ERR_NO_RESOURCE, progress frees room, the retry
 * succeeds, and nothing is lost or completed twice.
 *  - phase A: max_events = M as an iface param: exactly M single-piece zcopies
 *    are accepted on one CUDA context (events are given back only by
 *    progress), the next ones (put and get, any stream of that context) get
 *    NO_RESOURCE with their completion untouched and nothing copied; the
 *    other device has its own pool and still accepts M; short copies need no
 *    event and still work; after progress the rejected op succeeds on retry,
 *    and the pool holds M again (no event lost), never more than M events;
 *  - phase B: CUCOPY_MAX_EVENTS in the environment applies to contexts
 *    created after it is set (an iface param overrides it); 0 is rejected as
 *    an env value and as a param;
 *  - phase C: an operation needs one event per run of consecutive pieces on
 *    one stream: an iov of 8 pieces to one device goes through with
 *    max_events = 1 (put and get); a 2-run iov needs 2 (with 1 it can never
 *    be issued: INVALID_PARAM naming max_events, not a NO_RESOURCE to retry
 *    forever, and the pool is not leaked by it);
 *  - phase D: thousands of mixed zcopies (put/get, H2D/D2H/D2D/peer, 1-4
 *    pieces, some iovs spanning two contexts) with max_events = 4 in a
 *    progress/retry loop: every operation completes exactly once with OK,
 *    every byte lands where it should and nowhere else.
 * TEST_BACKPRESSURE_OPS overrides the number of phase D operations.
 */
#define _GNU_SOURCE
#include "calls.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FILL 0x5a
#define M 8
#define TIMEOUT_S 60.0

static cucopy_context_h cctx;
static int devices;
static size_t stride; /* bytes per op region */
static struct tc_buf hsrc, hdst; /* pinned source, pageable destination */
static struct tc_buf dsrc[2], ddst[2];

/* Flush with NULL until OK: one case. */
static void flush_all(cucopy_iface_h iface)
{
    double deadline = tc_now() + TIMEOUT_S;
    int s;
    while ((s = TC_LOOP_CALL(cucopy_iface_flush(iface, 0, NULL))) == CUCOPY_INPROGRESS &&
           tc_now() < deadline)
        TC_LOOP_CALL(cucopy_iface_progress(iface));
    CHECK_STATUS(s, CUCOPY_OK);
}

static void *ptr(const struct tc_buf *b, size_t off)
{
    return (void *)(uintptr_t)(b->dptr + off);
}

static cucopy_iface_h open_iface(cucopy_context_h c, int max_events)
{
    cucopy_iface_params_t p;
    memset(&p, 0, sizeof(p));
    if (max_events > 0) {
        p.field_mask = CUCOPY_IFACE_PARAM_MAX_EVENTS;
        p.max_events = (unsigned)max_events;
    }
    cucopy_iface_h iface = NULL;
    REQUIRE_OK(cucopy_iface_open(c, max_events > 0 ? &p : NULL, &iface));
    return iface;
}

static unsigned query_max_events(cucopy_iface_h iface)
{
    cucopy_iface_attr_t a;
    memset(&a, 0, sizeof(a));
    a.field_mask = CUCOPY_IFACE_ATTR_MAX_EVENTS;
    REQUIRE_OK(cucopy_iface_query(iface, &a));
    return a.max_events;
}

static void reset_buffers(void)
{
    tc_buf_set(&hdst, 0, FILL, hdst.size);
    for (int d = 0; d < devices; d++)
        tc_buf_set(&ddst[d], 0, FILL, ddst[d].size);
}

/* Progress until every completion in c[0..n) whose status is INPROGRESS
 * fired; returns 0 on a time-out or progress error. */
static int progress_all(cucopy_iface_h iface, struct tc_comp *c, const int *st, int n)
{
    double deadline = tc_now() + TIMEOUT_S;
    for (;;) {
        int pending = 0;
        for (int i = 0; i < n; i++)
            pending += st[i] == CUCOPY_INPROGRESS && c[i].fired == 0;
        if (pending == 0)
            return 1;
        if (FAIL_IF(tc_now() > deadline, "%d completion(s) did not fire within %.0f s", pending,
                    TIMEOUT_S))
            return 0;
        int r = TC_LOOP_CALL(cucopy_iface_progress(iface));
        if (FAIL_IF(r < 0, "progress returned %s: %s", tc_status_name(r), cucopy_last_error()))
            return 0;
    }
}

static int region_is(const struct tc_buf *b, size_t off, size_t len, const unsigned char *want,
                     unsigned char fill)
{
    unsigned char *back = malloc(len);
    REQUIRE(back != NULL);
    tc_buf_read(b, off, back, len);
    int ok = 1;
    for (size_t i = 0; i < len && ok; i++)
        ok = back[i] == (want != NULL ? want[i] : fill);
    free(back);
    return ok;
}

/* Issues single-piece put_zcopy host -> dst region i, i = first.. until
 * NO_RESOURCE or limit; returns how many were accepted. */
static int fill_pool(cucopy_ep_h ep, const struct tc_buf *dst, struct tc_comp *c, int *st,
                     int first, int limit)
{
    int n = 0;
    for (int i = first; i < first + limit; i++) {
        cucopy_iov_t iov = {ptr(&hsrc, i * stride), stride};
        tc_comp_init(&c[i], 1);
        st[i] = TC_CALL(cucopy_ep_put_zcopy(ep, &iov, 1, tc_buf_addr(dst, i * stride), &c[i].comp));
        if (st[i] == CUCOPY_ERR_NO_RESOURCE)
            break;
        CHECKF(st[i] == CUCOPY_INPROGRESS, "put_zcopy %d returned %s: %s", i,
               tc_status_name(st[i]), cucopy_last_error());
        n++;
    }
    return n;
}

/* ---- phase A ------------------------------------------------------------------ */

static void phase_a(void)
{
    long v0 = tc_violations();
    const unsigned char *pat = tc_pattern(hsrc.size);
    cucopy_iface_h iface = open_iface(cctx, M);
    cucopy_ep_h ep;
    REQUIRE_OK(cucopy_ep_create(iface, &ep));
    CHECKF(query_max_events(iface) == M, "iface_query max_events %u, param %d",
           query_max_events(iface), M);
    reset_buffers();

    enum { N = 4 * M + 8 };
    struct tc_comp c[N];
    int st[N];
    memset(st, 0, sizeof(st));
    memset(c, 0, sizeof(c));

    /* Device 0: exactly M accepted, then NO_RESOURCE. */
    int n0 = fill_pool(ep, &ddst[0], c, st, 0, M + 1);
    CHECKF(n0 == M, "phase A: device 0 accepted %d single-piece zcopies before NO_RESOURCE, "
                    "max_events %d", n0, M);
    int rej = n0; /* the rejected op's index */
    CHECK_STATUS(st[rej], CUCOPY_ERR_NO_RESOURCE);
    CHECKF(c[rej].fired == 0 && c[rej].comp.count == 1 && c[rej].comp.status == CUCOPY_OK,
           "phase A: rejected op touched its completion (fired %d, count %d, status %s)",
           c[rej].fired, c[rej].comp.count, tc_status_name(c[rej].comp.status));
    CHECKF(strstr(cucopy_last_error(), "progress") != NULL ||
               strstr(cucopy_last_error(), "event") != NULL,
           "phase A: NO_RESOURCE's last_error does not say what ran out: \"%s\"",
           cucopy_last_error());

    /* A get on another stream of the same context: same pool. */
    struct tc_comp cg;
    tc_comp_init(&cg, 1);
    cucopy_iov_t giov = {ptr(&hdst, 0), stride};
    CHECK_STATUS(TC_CALL(cucopy_ep_get_zcopy(ep, &giov, 1, tc_buf_addr(&dsrc[0], 0), &cg.comp)),
                 CUCOPY_ERR_NO_RESOURCE);
    CHECK(cg.fired == 0 && cg.comp.count == 1 && cg.comp.status == CUCOPY_OK);
    /* A device -> device copy on device 0's context: same pool. */
    cucopy_iov_t diov = {ptr(&dsrc[0], 0), stride};
    CHECK_STATUS(TC_CALL(cucopy_ep_put_zcopy(ep, &diov, 1, tc_buf_addr(&hdst, stride), &cg.comp)),
                 CUCOPY_ERR_NO_RESOURCE);
    CHECK(cg.fired == 0 && cg.comp.count == 1);

    /* The other device has its own pool. */
    int base1 = 2 * M;
    if (devices > 1) {
        int n1 = fill_pool(ep, &ddst[1], c, st, base1, M + 1);
        CHECKF(n1 == M, "phase A: device 1 accepted %d while device 0 was full, expected %d", n1,
               M);
        CHECK_STATUS(st[base1 + n1], CUCOPY_ERR_NO_RESOURCE);
    }
    if (tc_fake.live_events != NULL) {
        CHECKF(tc_fake.live_events(tc_primary(0)) == M, "phase A: %d events on device 0, cap %d",
               tc_fake.live_events(tc_primary(0)), M);
    }

    /* Short copies need no event. */
    size_t soff = (size_t)(N - 1) * stride;
    CHECK_STATUS(TC_CALL(cucopy_ep_put_short(ep, ptr(&hsrc, soff), stride,
                                             tc_buf_addr(&ddst[0], soff))),
                 CUCOPY_OK);
    CHECKF(region_is(&ddst[0], soff, stride, pat + soff, 0),
           "phase A: put_short while the event pool was full: data differs");

    /* Progress: all accepted ops complete once; the rejected one copied
     * nothing. */
    int last = devices > 1 ? base1 + M + 1 : rej + 1;
    progress_all(iface, c, st, last);
    for (int i = 0; i < last; i++) {
        if (st[i] == CUCOPY_INPROGRESS)
            (void)FAIL_IF(c[i].fired != 1 || c[i].comp.status != CUCOPY_OK,
                    "phase A: op %d fired %d time(s), status %s", i, c[i].fired,
                    tc_status_name(c[i].comp.status));
        else
            (void)FAIL_IF(c[i].fired != 0, "phase A: rejected op %d fired", i);
    }
    CHECKF(c[rej].fired == 0 && c[rej].comp.count == 1,
           "phase A: the rejected op completed (fired %d)", c[rej].fired);
    CHECKF(region_is(&ddst[0], rej * stride, stride, NULL, FILL),
           "phase A: the rejected op's destination was written");
    for (int i = 0; i < n0; i++)
        (void)FAIL_IF(!region_is(&ddst[0], i * stride, stride, pat + i * stride, 0),
                "phase A: op %d: data differs", i);

    /* Retry the rejected op: it succeeds now. */
    cucopy_iov_t riov = {ptr(&hsrc, rej * stride), stride};
    st[rej] = TC_CALL(cucopy_ep_put_zcopy(ep, &riov, 1, tc_buf_addr(&ddst[0], rej * stride),
                                          &c[rej].comp));
    CHECK_STATUS(st[rej], CUCOPY_INPROGRESS);
    progress_all(iface, c, st, rej + 1);
    CHECKF(c[rej].fired == 1 && c[rej].comp.status == CUCOPY_OK,
           "phase A: retried op fired %d time(s), status %s", c[rej].fired,
           tc_status_name(c[rej].comp.status));
    CHECKF(region_is(&ddst[0], rej * stride, stride, pat + rej * stride, 0),
           "phase A: retried op: data differs");

    /* The pool holds M again: nothing lost to the rejections. */
    int base2 = 3 * M + 2;
    int again = fill_pool(ep, &ddst[0], c, st, base2, M + 1);
    CHECKF(again == M, "phase A: after progress device 0 accepted %d, expected %d", again, M);
    if (tc_fake.live_events != NULL)
        CHECKF(tc_fake.live_events(tc_primary(0)) == M, "phase A: %d events on device 0, cap %d",
               tc_fake.live_events(tc_primary(0)), M);
    progress_all(iface, c, st, base2 + M + 1);
    for (int i = base2; i < base2 + M + 1; i++)
        if (st[i] == CUCOPY_INPROGRESS)
            (void)FAIL_IF(c[i].fired != 1, "phase A (again): op %d fired %d time(s)", i, c[i].fired);
    for (int k = 0; k < 5; k++)
        CHECK(TC_CALL(cucopy_iface_progress(iface)) >= 0);
    for (int i = 0; i < base2 + M + 1; i++)
        (void)FAIL_IF(c[i].fired > 1, "phase A: op %d fired %d times", i, c[i].fired);
    printf("test_backpressure: phase A: max_events %d: device 0 accepted %d then NO_RESOURCE, "
           "%d again after progress\n", M, n0, again);
    flush_all(iface);
    CHECK_STATUS(cucopy_ep_destroy(ep), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);
    if (tc_fake.violations != NULL)
        CHECKF(tc_violations() == v0, "phase A: %ld driver misuse(s)", tc_violations() - v0);
}

/* ---- phase B ------------------------------------------------------------------ */

static void phase_b(void)
{
    long v0 = tc_violations();
    const char *old = getenv("CUCOPY_MAX_EVENTS");
    char *saved = old != NULL ? strdup(old) : NULL;

    /* Invalid env value: an error at context create. */
    REQUIRE(setenv("CUCOPY_MAX_EVENTS", "0", 1) == 0);
    cucopy_context_h bad = NULL;
    CHECK_STATUS(cucopy_context_create(NULL, &bad), CUCOPY_ERR_INVALID_PARAM);
    if (bad != NULL)
        cucopy_context_destroy(bad);

    REQUIRE(setenv("CUCOPY_MAX_EVENTS", "5", 1) == 0);
    cucopy_context_h c2 = NULL;
    REQUIRE_OK(cucopy_context_create(NULL, &c2));
    /* The env is read at context create: restoring it changes nothing for c2. */
    if (saved != NULL)
        setenv("CUCOPY_MAX_EVENTS", saved, 1);
    else
        unsetenv("CUCOPY_MAX_EVENTS");

    struct tc_comp c[16];
    int st[16];
    cucopy_iface_h iface = open_iface(c2, 0);
    cucopy_ep_h ep;
    REQUIRE_OK(cucopy_ep_create(iface, &ep));
    CHECKF(query_max_events(iface) == 5, "phase B: CUCOPY_MAX_EVENTS=5: iface max_events %u",
           query_max_events(iface));
    reset_buffers();
    int n = fill_pool(ep, &ddst[0], c, st, 0, 8);
    CHECKF(n == 5, "phase B: CUCOPY_MAX_EVENTS=5: %d accepted before NO_RESOURCE", n);
    progress_all(iface, c, st, n + 1);
    flush_all(iface);
    CHECK_STATUS(cucopy_ep_destroy(ep), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);

    /* The param overrides the env. */
    iface = open_iface(c2, 3);
    REQUIRE_OK(cucopy_ep_create(iface, &ep));
    CHECKF(query_max_events(iface) == 3, "phase B: param 3 over env 5: max_events %u",
           query_max_events(iface));
    n = fill_pool(ep, &ddst[0], c, st, 0, 8);
    CHECKF(n == 3, "phase B: param 3 over env 5: %d accepted before NO_RESOURCE", n);
    progress_all(iface, c, st, n + 1);
    flush_all(iface);
    CHECK_STATUS(cucopy_ep_destroy(ep), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);

    /* The first context kept what it read at its create. */
    iface = open_iface(cctx, 0);
    unsigned want = saved != NULL ? (unsigned)strtoul(saved, NULL, 10) : 4096;
    CHECKF(query_max_events(iface) == want,
           "phase B: a context created before CUCOPY_MAX_EVENTS=5 reports max_events %u, "
           "expected %u", query_max_events(iface), want);
    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);

    /* max_events 0 as a param: invalid. */
    cucopy_iface_params_t p;
    memset(&p, 0, sizeof(p));
    p.field_mask = CUCOPY_IFACE_PARAM_MAX_EVENTS;
    p.max_events = 0;
    cucopy_iface_h none = NULL;
    CHECK_STATUS(cucopy_iface_open(c2, &p, &none), CUCOPY_ERR_INVALID_PARAM);
    if (none != NULL)
        cucopy_iface_close(none);
    CHECK_STATUS(cucopy_context_destroy(c2), CUCOPY_OK);
    free(saved);
    if (tc_fake.violations != NULL)
        CHECKF(tc_violations() == v0, "phase B: %ld driver misuse(s)", tc_violations() - v0);
}

/* ---- phase C ------------------------------------------------------------------ */

static void phase_c(void)
{
    long v0 = tc_violations();
    const unsigned char *pat = tc_pattern(hsrc.size);
    enum { P = 8 };
    size_t piece = stride / 2;
    cucopy_iface_h iface = open_iface(cctx, 1);
    cucopy_ep_h ep;
    REQUIRE_OK(cucopy_ep_create(iface, &ep));
    reset_buffers();

    /* put: 8 host pieces (every other half-region) -> one device range. */
    cucopy_iov_t iov[P];
    unsigned char *want = malloc(P * piece);
    REQUIRE(want != NULL);
    for (int k = 0; k < P; k++) {
        iov[k].buffer = ptr(&hsrc, (size_t)k * stride);
        iov[k].length = piece;
        memcpy(want + k * piece, pat + (size_t)k * stride, piece);
    }
    struct tc_comp c[4];
    int st[4];
    tc_comp_init(&c[0], 1);
    st[0] = TC_CALL(cucopy_ep_put_zcopy(ep, iov, P, tc_buf_addr(&ddst[0], 0), &c[0].comp));
    CHECKF(st[0] == CUCOPY_INPROGRESS, "phase C: 8-piece put_zcopy to one device with "
                                       "max_events 1 returned %s: %s",
           tc_status_name(st[0]), cucopy_last_error());
    /* Its one event is in use: a second op on device 0 waits for progress. */
    tc_comp_init(&c[1], 1);
    cucopy_iov_t one = {ptr(&hsrc, 0), piece};
    st[1] = TC_CALL(cucopy_ep_put_zcopy(ep, &one, 1, tc_buf_addr(&ddst[0], P * piece), &c[1].comp));
    CHECK_STATUS(st[1], CUCOPY_ERR_NO_RESOURCE);
    CHECK(c[1].fired == 0 && c[1].comp.count == 1);
    progress_all(iface, c, st, 2);
    CHECKF(c[0].fired == 1 && c[0].comp.status == CUCOPY_OK, "phase C: 8-piece put fired %d, %s",
           c[0].fired, tc_status_name(c[0].comp.status));
    CHECKF(region_is(&ddst[0], 0, P * piece, want, 0), "phase C: 8-piece put: data differs");

    /* get: one device range -> 8 host pieces. */
    for (int k = 0; k < P; k++)
        iov[k].buffer = ptr(&hdst, (size_t)k * stride);
    tc_comp_init(&c[2], 1);
    st[2] = TC_CALL(cucopy_ep_get_zcopy(ep, iov, P, tc_buf_addr(&ddst[0], 0), &c[2].comp));
    CHECKF(st[2] == CUCOPY_INPROGRESS, "phase C: 8-piece get_zcopy from one device with "
                                       "max_events 1 returned %s: %s",
           tc_status_name(st[2]), cucopy_last_error());
    st[0] = st[1] = 0;
    progress_all(iface, c, st, 3);
    CHECK(c[2].fired == 1 && c[2].comp.status == CUCOPY_OK);
    int ok = 1;
    for (int k = 0; k < P; k++) {
        ok &= region_is(&hdst, (size_t)k * stride, piece, want + k * piece, 0);
        ok &= region_is(&hdst, (size_t)k * stride + piece, stride - piece, NULL, FILL);
    }
    CHECKF(ok, "phase C: 8-piece get: data differs");

    /* Two runs on device 0 (host -> dev0 on one stream, dev0 -> dev0 on
     * another): needs 2 events; with 1 it can never be issued. */
    cucopy_iov_t two[2] = {{ptr(&hsrc, 0), piece}, {ptr(&dsrc[0], piece), piece}};
    tc_comp_init(&c[3], 1);
    st[3] = TC_CALL(cucopy_ep_put_zcopy(ep, two, 2, tc_buf_addr(&ddst[0], 2 * stride), &c[3].comp));
    CHECK_STATUS(st[3], CUCOPY_ERR_INVALID_PARAM);
    CHECKF(strstr(cucopy_last_error(), "max_events") != NULL,
           "phase C: the never-fitting op's message does not name max_events: \"%s\"",
           cucopy_last_error());
    CHECKF(c[3].fired == 0 && c[3].comp.count == 1 && c[3].comp.status == CUCOPY_OK,
           "phase C: rejected 2-run op touched its completion");
    /* The pool is not leaked by the rejected op: a single-piece op goes
     * through once progress ran. */
    double deadline = tc_now() + TIMEOUT_S;
    int s;
    tc_comp_init(&c[0], 1);
    while ((s = TC_LOOP_CALL(cucopy_ep_put_zcopy(ep, &one, 1, tc_buf_addr(&ddst[0], 3 * stride),
                                            &c[0].comp))) == CUCOPY_ERR_NO_RESOURCE &&
           tc_now() < deadline)
        TC_LOOP_CALL(cucopy_iface_progress(iface));
    CHECKF(s == CUCOPY_INPROGRESS, "phase C: after a rejected 2-run op a single piece got %s",
           tc_status_name(s));
    st[0] = s;
    st[3] = 0;
    progress_all(iface, c, st, 1);
    CHECK(c[0].fired == 1 && c[0].comp.status == CUCOPY_OK && c[3].fired == 0);
    flush_all(iface);
    CHECK_STATUS(cucopy_ep_destroy(ep), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);

    /* With 2 events the 2-run op goes through. */
    iface = open_iface(cctx, 2);
    REQUIRE_OK(cucopy_ep_create(iface, &ep));
    tc_comp_init(&c[3], 1);
    st[3] = TC_CALL(cucopy_ep_put_zcopy(ep, two, 2, tc_buf_addr(&ddst[0], 4 * stride), &c[3].comp));
    CHECKF(st[3] == CUCOPY_INPROGRESS, "phase C: 2-run op with max_events 2 returned %s: %s",
           tc_status_name(st[3]), cucopy_last_error());
    progress_all(iface, c + 3, st + 3, 1);
    CHECK(c[3].fired == 1 && c[3].comp.status == CUCOPY_OK);
    memcpy(want, pat, piece);
    memcpy(want + piece, pat + piece, piece); /* dsrc[0] holds the pattern too */
    CHECKF(region_is(&ddst[0], 4 * stride, 2 * piece, want, 0), "phase C: 2-run op: data differs");
    flush_all(iface);
    CHECK_STATUS(cucopy_ep_destroy(ep), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);
    free(want);
    if (tc_fake.violations != NULL)
        CHECKF(tc_violations() == v0, "phase C: %ld driver misuse(s)", tc_violations() - v0);
}

/* ---- phase D ------------------------------------------------------------------ */

struct sop {
    struct tc_comp c;
    int st;
    const struct tc_buf *dst; /* where its bytes land */
    size_t len;
};

static uint64_t rng = 0x2545f4914f6cdd1dull;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)((rng >> 16) % n);
}

static void phase_d(int nops)
{
    long v0 = tc_violations();
    const unsigned char *pat = tc_pattern(hsrc.size);
    const int maxev = 4;
    cucopy_iface_h iface = open_iface(cctx, maxev);
    cucopy_ep_h ep;
    REQUIRE_OK(cucopy_ep_create(iface, &ep));
    reset_buffers();
    struct sop *ops = calloc((size_t)nops, sizeof(*ops));
    REQUIRE(ops != NULL);
    long rejected = 0, pieces = 0, untouched_bad = 0, immediate = 0;
    double t0 = tc_now(), deadline = t0 + 10 * TIMEOUT_S;
    int issued = 0;

    for (int i = 0; i < nops && tc_now() < deadline; i++, issued++) {
        struct sop *o = &ops[i];
        size_t off = (size_t)i * stride;
        o->len = 1 + rnd((unsigned)stride);
        int get = rnd(2);
        /* source and destination: host (-1) or a device */
        int sdev = (int)rnd((unsigned)devices + 1) - 1;
        int ddev = (int)rnd((unsigned)devices + 1) - 1;
        if (sdev < 0 && ddev < 0)
            ddev = (int)rnd((unsigned)devices);
        const struct tc_buf *src = sdev < 0 ? &hsrc : &dsrc[sdev];
        o->dst = ddev < 0 ? &hdst : &ddst[ddev];
        /* Pieces: 1 to 4; for a put, a mixed iov alternates the local
         * source between hsrc and dsrc[0] (same pattern): two contexts. */
        int np = 1 + (int)rnd(4);
        if ((size_t)np > o->len)
            np = (int)o->len;
        int mixed = !get && np > 1 && rnd(3) == 0;
        cucopy_iov_t iov[4];
        size_t at = 0;
        for (int k = 0; k < np; k++) {
            size_t l = k == np - 1 ? o->len - at : o->len / (size_t)np;
            const struct tc_buf *lb = get ? o->dst : (mixed && k % 2 ? &dsrc[0] : src);
            iov[k].buffer = ptr(lb, off + at);
            iov[k].length = l;
            at += l;
        }
        uint64_t remote = get ? tc_buf_addr(src, off) : tc_buf_addr(o->dst, off);
        pieces += np;
        for (;;) {
            tc_comp_init(&o->c, 1);
            o->st = get ? cucopy_ep_get_zcopy(ep, iov, (size_t)np, remote, &o->c.comp)
                        : cucopy_ep_put_zcopy(ep, iov, (size_t)np, remote, &o->c.comp);
            if (o->st != CUCOPY_ERR_NO_RESOURCE)
                break;
            rejected++;
            untouched_bad += o->c.fired != 0 || o->c.comp.count != 1 ||
                             o->c.comp.status != CUCOPY_OK;
            int r = cucopy_iface_progress(iface);
            if (FAIL_IF(r < 0, "progress returned %s: %s", tc_status_name(r), cucopy_last_error()))
                break;
            if (FAIL_IF(tc_now() > deadline, "op %d: NO_RESOURCE for %.0f s", i, 10 * TIMEOUT_S))
                break;
        }
        immediate += o->st == CUCOPY_OK;
        (void)FAIL_IF(o->st != CUCOPY_INPROGRESS && o->st != CUCOPY_OK, "op %d returned %s: %s", i,
                tc_status_name(o->st), cucopy_last_error());
        if (rnd(16) == 0)
            (void)FAIL_IF(cucopy_iface_progress(iface) < 0, "progress failed");
    }
    /* Drain. */
    for (;;) {
        int pending = 0;
        for (int i = 0; i < nops; i++)
            pending += ops[i].st == CUCOPY_INPROGRESS && ops[i].c.fired == 0;
        if (pending == 0)
            break;
        if (FAIL_IF(tc_now() > deadline, "phase D: %d completion(s) never fired", pending))
            break;
        if (FAIL_IF(cucopy_iface_progress(iface) < 0, "progress failed"))
            break;
    }
    for (int k = 0; k < 5; k++)
        CHECK(cucopy_iface_progress(iface) >= 0);
    CHECKF(untouched_bad == 0, "phase D: %ld rejected op(s) touched their completion",
           untouched_bad);
    CHECKF(rejected > 0, "phase D: max_events %d never pushed back in %d ops", maxev, nops);
    /* Ops never issued (deadline) would pass the checks below untouched. */
    CHECKF(issued == nops, "phase D: only %d of %d ops issued before the deadline", issued, nops);

    tc_case_begin("phase D: %d ops: completions exactly once with OK", nops);
    long bad = 0;
    for (int i = 0; i < nops; i++) {
        const struct sop *o = &ops[i];
        int want = o->st == CUCOPY_INPROGRESS;
        if (o->c.fired != want || (want && o->c.comp.status != CUCOPY_OK)) {
            if (bad++ < 10)
                (void)FAIL_IF(1, "op %d: returned %s, fired %d time(s), status %s", i,
                        tc_status_name(o->st), o->c.fired, tc_status_name(o->c.comp.status));
        }
    }
    CHECKF(bad == 0, "phase D: %ld op(s) completed wrongly", bad);
    tc_case_end();

    tc_case_begin("phase D: every byte where it belongs and nowhere else");
    const struct tc_buf *dsts[3] = {&hdst, &ddst[0], devices > 1 ? &ddst[1] : NULL};
    size_t total = (size_t)nops * stride;
    unsigned char *back = malloc(total);
    REQUIRE(back != NULL);
    long wrong = 0;
    for (int b = 0; b < 3; b++) {
        if (dsts[b] == NULL)
            continue;
        tc_buf_read(dsts[b], 0, back, total);
        for (int i = 0; i < nops; i++) {
            const unsigned char *got = back + (size_t)i * stride;
            size_t n = ops[i].dst == dsts[b] ? ops[i].len : 0;
            int ok = memcmp(got, pat + (size_t)i * stride, n) == 0;
            for (size_t j = n; j < stride && ok; j++)
                ok = got[j] == FILL;
            if (!ok && wrong++ < 10)
                (void)FAIL_IF(1, "op %d (%zu bytes): destination buffer %d region differs", i,
                        ops[i].len, b);
        }
    }
    CHECKF(wrong == 0, "phase D: %ld region(s) differ", wrong);
    free(back);
    tc_case_end();
    printf("test_backpressure: phase D: %d ops (%ld pieces, %ld immediate), max_events %d, "
           "%ld NO_RESOURCE retries, %.2f s\n",
           nops, pieces, immediate, maxev, rejected, tc_now() - t0);
    flush_all(iface);
    CHECK_STATUS(cucopy_ep_destroy(ep), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);
    free(ops);
    if (tc_fake.violations != NULL)
        CHECKF(tc_violations() == v0, "phase D: %ld driver misuse(s)", tc_violations() - v0);
}

int main(void)
{
    /* Copies into pageable memory (hdst) must take events here: small
     * staging would finish them in the call (test_stage tests it). */
    setenv("CUCOPY_STAGE_SMALL", "0", 1);
    devices = tc_begin("test_backpressure", 2);
    const char *e = getenv("TEST_BACKPRESSURE_OPS");
    int nops = e != NULL ? atoi(e) : td.is_fake ? 4000 : 20000;
    REQUIRE(nops >= 1);
    stride = td.is_fake ? 256 : 4096;
    size_t size = (size_t)(nops > 64 ? nops : 64) * stride;
    tc_pattern(size);
    tc_buf_alloc(&hsrc, TC_MEM_PINNED, size);
    tc_buf_alloc(&hdst, TC_MEM_PAGEABLE, size);
    for (int d = 0; d < devices; d++) {
        tc_buf_alloc_in(&dsrc[d], tc_primary(d), size);
        tc_buf_alloc_in(&ddst[d], tc_primary(d), size);
        tc_buf_write(&dsrc[d], 0, tc_pattern(size), size);
    }
    tc_buf_write(&hsrc, 0, tc_pattern(size), size);
    REQUIRE_OK(cucopy_context_create(NULL, &cctx));
    printf("test_backpressure: %d device(s), %s driver\n", devices, td.is_fake ? "fake" : "real");
    long v0 = tc_violations();

    phase_a();
    phase_b();
    phase_c();
    phase_d(nops);

    CHECK_STATUS(cucopy_context_destroy(cctx), CUCOPY_OK);
    if (tc_fake.violations != NULL)
        CHECKF(tc_violations() == v0, "%ld driver misuse(s) in the whole test",
               tc_violations() - v0);
    tc_buf_free(&hsrc);
    tc_buf_free(&hdst);
    for (int d = 0; d < devices; d++) {
        tc_buf_free(&dsrc[d]);
        tc_buf_free(&ddst[d]);
    }
    return tc_finish();
}
