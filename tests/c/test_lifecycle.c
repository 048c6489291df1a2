/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Contexts that go away (brief §4): the library never makes a driver call on
 * a destroyed or reset context and never crashes because of one.
 *  - phase A: the program releases device 0's primary context while cucopy
 *    holds resources (and copies in flight) in it; cucopy's retain keeps it
 *    alive, and iface_close gives the last retain back;
 *  - phase B: device 0's primary context is reset (not re-activated) between
 *    operations and before iface_close; host and device-1 work goes on;
 *    release_context of the dead incarnation makes no call on it;
 *  - phase C: reset, then re-activated by the program: copies afterwards run
 *    in the new incarnation; release_context of the old id touches nothing
 *    (also on pre-12 drivers, where the library keys by handle, which the
 *    primary context keeps, and tells incarnations apart by a canary);
 *  - phase D: reset while zcopies are in flight on device 0 and device 1:
 *    device-0 completions fire exactly once with CANCELED or OK, device-1
 *    work completes OK with its data, a flush registered before the reset
 *    completes;
 *  - phase E: the same with the event-fd protocol: arm returns BUSY or OK
 *    and the protocol never hangs;
 *  - phase F: a user context (cuCtxCreate) with copies in flight;
 *    cucopy_iface_release_context waits for them (data in place when it
 *    returns), its streams and events are gone, an unknown id is OK; then
 *    cuCtxDestroy and copies on other memory work;
 *  - phase G: a user context destroyed after iface_close;
 *    release_context on a closed iface is CUCOPY_ERR_INVALID_HANDLE.
 * (An iface closed after the driver was deinitialized is not tested here.)
 * Each phase uses a fresh iface. After every cucopy call the caller's current
 * context is unchanged and no context was created or activated (TC_CALL);
 * on the fake driver fakecuda_violations() does not change in any phase
 * (FAKECUDA_STRICT_EXIT=1 also fails the process on one).
 */
#define _GNU_SOURCE
#include "calls.h"

#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEN 4096
#define NCH 4 /* zcopies in flight per device */
#define FAKE_SLOW_US 20000 /* per stream operation on the fake while work must be in flight */

static cucopy_context_h cctx;
static int devices;
static size_t big; /* bytes in flight per device: 64 MiB on a GPU, 1 MiB on the fake */
static unsigned base_delay_us;
static struct tc_buf host_a, host_b;

static void check_violations(long before, const char *phase)
{
    if (tc_fake.violations != NULL)
        CHECKF(tc_violations() == before, "%s: %ld driver misuse(s) (calls on a dead context?)",
               phase, tc_violations() - before);
}

static void slow_fake(int on)
{
    if (tc_fake.set_delay_us != NULL)
        tc_fake.set_delay_us(on ? FAKE_SLOW_US : base_delay_us);
}


/* The id cucopy_iface_release_context takes. */
static uint64_t ctx_key(cdContext c)
{
    return td.cuCtxGetId != NULL ? tc_ctx_id(c) : (uint64_t)(uintptr_t)c;
}

static void *ptr(const struct tc_buf *b, size_t off)
{
    return (void *)(uintptr_t)(b->dptr + off);
}

static void open_iface(cucopy_iface_h *iface, cucopy_ep_h *ep)
{
    REQUIRE(TC_CALL(cucopy_iface_open(cctx, NULL, iface)) == CUCOPY_OK);
    REQUIRE(TC_CALL(cucopy_ep_create(*iface, ep)) == CUCOPY_OK);
}

static void close_iface(cucopy_iface_h iface, cucopy_ep_h ep, const char *phase)
{
    CHECK_STATUS(TC_CALL(cucopy_ep_destroy(ep)), CUCOPY_OK);
    CHECK_STATUS(TC_CALL(cucopy_iface_close(iface)), CUCOPY_OK);
    if (tc_fake.live_streams != NULL) {
        CHECKF(tc_fake.live_streams(NULL) == 0, "%s: %d stream(s) alive after iface_close", phase,
               tc_fake.live_streams(NULL));
        CHECKF(tc_fake.live_events(NULL) == 0, "%s: %d event(s) alive after iface_close", phase,
               tc_fake.live_events(NULL));
    }
}

/* Host <-> host copies, all four ways each direction. */
static void host_copies(cucopy_iface_h iface, cucopy_ep_h ep, const char *phase)
{
    char what[128];
    snprintf(what, sizeof(what), "%s: pageable -> pageable", phase);
    tc_copy_all_ways(iface, ep, &host_a, &host_b, LEN, what);
}

/* Host <-> device buffer d, all four ways each direction. */
static void dev_copies(cucopy_iface_h iface, cucopy_ep_h ep, const struct tc_buf *d,
                       const char *phase)
{
    char what[128];
    snprintf(what, sizeof(what), "%s: pageable -> device", phase);
    tc_copy_all_ways(iface, ep, &host_a, d, LEN, what);
    snprintf(what, sizeof(what), "%s: device -> pageable", phase);
    tc_copy_all_ways(iface, ep, d, &host_b, LEN, what);
}

/* Zcopies in flight: NCH put_zcopy pieces src -> dst (same size). */
struct flight {
    struct tc_comp c[NCH];
    int st[NCH];
    const unsigned char *data;
};

static void issue_flight(cucopy_ep_h ep, const struct tc_buf *src, const struct tc_buf *dst,
                         struct flight *f, unsigned seed)
{
    size_t ch = src->size / NCH;
    f->data = tc_pattern(src->size) + seed % 256;
    tc_buf_write(src, 0, f->data, src->size);
    tc_buf_set(dst, 0, 0x5a, dst->size);
    for (int i = 0; i < NCH; i++) {
        cucopy_iov_t iov = {ptr(src, i * ch), ch};
        tc_comp_init(&f->c[i], 1);
        f->st[i] = TC_CALL(cucopy_ep_put_zcopy(ep, &iov, 1, dst->dptr + i * ch, &f->c[i].comp));
        CHECKF(f->st[i] == CUCOPY_INPROGRESS || f->st[i] == CUCOPY_OK,
               "put_zcopy piece %d returned %s: %s", i, tc_status_name(f->st[i]),
               cucopy_last_error());
    }
}

/* Completions of f still expected. */
static int flight_pending(const struct flight *f)
{
    int n = 0;
    for (int i = 0; i < NCH; i++)
        n += f->st[i] == CUCOPY_INPROGRESS && f->c[i].fired == 0;
    return n;
}

/* Each INPROGRESS piece fired exactly once (others never) with a status in
 * {ok1, ok2}; returns how many fired with ok2. */
static int flight_check(const struct flight *f, int ok1, int ok2, const char *what)
{
    int second = 0;
    for (int i = 0; i < NCH; i++) {
        int expect = f->st[i] == CUCOPY_INPROGRESS;
        CHECKF(f->c[i].fired == expect, "%s: piece %d fired %d time(s), expected %d", what, i,
               f->c[i].fired, expect);
        if (expect && f->c[i].fired == 1) {
            int s = f->c[i].comp.status;
            CHECKF(s == ok1 || s == ok2, "%s: piece %d completed with %s", what, i,
                   tc_status_name(s));
            second += s == ok2 && ok2 != ok1;
        }
    }
    return second;
}

static void flight_check_data(const struct flight *f, const struct tc_buf *dst, const char *what)
{
    unsigned char *back = malloc(dst->size);
    REQUIRE(back != NULL);
    tc_buf_read(dst, 0, back, dst->size);
    CHECKF(memcmp(back, f->data, dst->size) == 0, "%s: data differs", what);
    free(back);
}

/* Progress until none of the flights has a pending completion and (if given)
 * the extra completion fired; deadline 60 s. */
static void progress_until(cucopy_iface_h iface, struct flight **fl, int nfl, struct tc_comp *extra)
{
    double deadline = tc_now() + 60;
    for (;;) {
        int pending = extra != NULL && extra->fired == 0;
        for (int i = 0; i < nfl; i++)
            pending += flight_pending(fl[i]);
        if (pending == 0)
            break;
        if (FAIL_IF(tc_now() > deadline, "%d completion(s) did not fire within 60 s", pending))
            break;
        int n = TC_CALL(cucopy_iface_progress(iface));
        if (FAIL_IF(n < 0, "progress returned %s: %s", tc_status_name(n), cucopy_last_error()))
            break;
    }
}

/* A few more progress calls: nothing fires twice. */
static void progress_more(cucopy_iface_h iface)
{
    for (int i = 0; i < 5; i++)
        CHECK(TC_CALL(cucopy_iface_progress(iface)) >= 0);
}

/* ---- phase A ------------------------------------------------------------------ */

static void phase_a_program_releases_primary(void)
{
    long v0 = tc_violations();
    CHECKF(!tc_primary_active(0), "phase A: device 0's primary context active at the start");
    cdContext p = tc_primary_retain(0);
    struct tc_buf src, dst;
    tc_buf_alloc_in(&src, p, big);
    tc_buf_alloc_in(&dst, p, big);
    cucopy_iface_h iface;
    cucopy_ep_h ep;
    open_iface(&iface, &ep);

    slow_fake(1);
    struct flight f;
    issue_flight(ep, &src, &dst, &f, 1);
    /* The program lets go of its only retain; cucopy's keeps the context. */
    tc_primary_release(0);
    tc_case_begin("phase A: primary released by the program with copies in flight");
    CHECKF(tc_primary_active(0), "device 0's primary context died although cucopy holds a retain");
    struct flight *fl[] = {&f};
    progress_until(iface, fl, 1, NULL);
    flight_check(&f, CUCOPY_OK, CUCOPY_OK, "phase A");
    flight_check_data(&f, &dst, "phase A");
    tc_case_end();
    slow_fake(0);

    dev_copies(iface, ep, &src, "phase A (program released the primary)");
    CHECK(TC_CALL(cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP)) == CUCOPY_OK);
    tc_flush(iface);
    close_iface(iface, ep, "phase A");
    CHECKF(!tc_primary_active(0),
           "phase A: device 0's primary context still active after iface_close (a retain kept)");
    /* src and dst died with the context. */
    check_violations(v0, "phase A");
}

/* ---- phase B ------------------------------------------------------------------ */

static void phase_b_reset_no_reactivation(int between)
{
    const char *phase = between ? "phase B (reset between operations)"
                                : "phase B (reset right before iface_close)";
    long v0 = tc_violations();
    cdContext p0 = tc_primary_retain(0);
    cdContext p1 = NULL;
    struct tc_buf d0, d1;
    memset(&d1, 0, sizeof(d1));
    tc_buf_alloc_in(&d0, p0, LEN);
    if (devices > 1) {
        p1 = tc_primary_retain(1);
        tc_buf_alloc_in(&d1, p1, LEN);
    }
    cucopy_iface_h iface;
    cucopy_ep_h ep;
    open_iface(&iface, &ep);
    dev_copies(iface, ep, &d0, phase);
    if (devices > 1)
        dev_copies(iface, ep, &d1, phase);

    uint64_t old_key = ctx_key(p0);
    tc_primary_reset(0); /* d0 is gone with it */
    CHECKF(!tc_primary_active(0), "%s: primary still active after the reset", phase);
    if (between) {
        char what[160];
        /* Releasing the dead incarnation: dropped without a call on it. */
        CHECK_STATUS(TC_CALL(cucopy_iface_release_context(iface, old_key)), CUCOPY_OK);
        CHECK(TC_CALL(cucopy_iface_progress(iface)) >= 0);
        CHECK_STATUS(TC_CALL(cucopy_iface_flush(iface, 0, NULL)), CUCOPY_OK);
        CHECK_STATUS(TC_CALL(cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP)), CUCOPY_OK);
        host_copies(iface, ep, phase);
        if (devices > 1) {
            snprintf(what, sizeof(what), "%s, device 1", phase);
            dev_copies(iface, ep, &d1, what);
        }
        tc_flush(iface);
        CHECKF(!tc_primary_active(0), "%s: cucopy re-activated the reset primary context", phase);
    }
    close_iface(iface, ep, phase);
    CHECKF(!tc_primary_active(0), "%s: cucopy re-activated the reset primary context", phase);
    tc_primary_release(0); /* "safe ... even after resetting" */
    if (devices > 1) {
        tc_buf_free(&d1);
        tc_primary_release(1);
    }
    check_violations(v0, phase);
}

/* ---- phase C ------------------------------------------------------------------ */

static void phase_c_reset_reactivated(int between)
{
    const char *phase = between ? "phase C (reset + re-activation between operations)"
                                : "phase C (reset + re-activation right before iface_close)";
    long v0 = tc_violations();
    cdContext p = tc_primary_retain(0);
    uint64_t old_id = tc_ctx_id(p);
    struct tc_buf d, d2;
    memset(&d2, 0, sizeof(d2));
    tc_buf_alloc_in(&d, p, LEN);
    cucopy_iface_h iface;
    cucopy_ep_h ep;
    open_iface(&iface, &ep);
    dev_copies(iface, ep, &d, phase);

    tc_primary_reset(0);
    cdContext p2 = tc_primary_retain(0); /* the program re-activates it */
    uint64_t new_id = tc_ctx_id(p2);
    /* Without cuCtxGetId the "id" is the handle, which a primary context
     * keeps across a reset: the library tells the incarnations apart itself. */
    CHECKF(td.cuCtxGetId == NULL || new_id != old_id,
           "%s: the re-activated primary context kept id %llu", phase, (unsigned long long)old_id);
    if (between) {
        char what[160];
        /* Releasing the dead incarnation by its id: no call on it, and the
         * new incarnation (same handle) is not touched. */
        CHECK_STATUS(TC_CALL(cucopy_iface_release_context(iface, old_id)), CUCOPY_OK);
        CHECKF(tc_primary_active(0), "%s: release_context of the old id ended the new one",
               phase);
        tc_buf_alloc_in(&d2, p2, LEN);
        snprintf(what, sizeof(what), "%s, new incarnation", phase);
        dev_copies(iface, ep, &d2, what);
        /* Device -> device inside the new incarnation, and a current
         * context the library must leave alone. */
        struct tc_buf d3;
        tc_buf_alloc_in(&d3, p2, LEN);
        TD_CHECK(td.cuCtxSetCurrent(p2));
        snprintf(what, sizeof(what), "%s, new incarnation dev0 -> dev0 (it current)", phase);
        tc_copy_all_ways(iface, ep, &d2, &d3, LEN, what);
        TD_CHECK(td.cuCtxSetCurrent(NULL));
        CHECK(TC_CALL(cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP)) == CUCOPY_OK);
        tc_flush(iface);
        tc_buf_free(&d3);
    }
    close_iface(iface, ep, phase);
    if (between)
        tc_buf_free(&d2);
    /* Two retains by the program (before and after the reset). */
    tc_primary_release(0);
    if (tc_primary_active(0))
        tc_primary_release(0);
    CHECKF(!tc_primary_active(0), "%s: primary still active after every release", phase);
    check_violations(v0, phase);
}

/* ---- phases D and E ----------------------------------------------------------- */

static void phase_de_reset_in_flight(int use_arm)
{
    const char *phase = use_arm ? "phase E (reset in flight, event-fd protocol)"
                                : "phase D (reset in flight, progress)";
    long v0 = tc_violations();
    cdContext p0 = tc_primary_retain(0);
    cdContext p1 = NULL;
    struct tc_buf s0, t0, s1, t1;
    memset(&s1, 0, sizeof(s1));
    memset(&t1, 0, sizeof(t1));
    tc_buf_alloc_in(&s0, p0, big);
    tc_buf_alloc_in(&t0, p0, big);
    if (devices > 1) {
        p1 = tc_primary_retain(1);
        tc_buf_alloc_in(&s1, p1, big);
        tc_buf_alloc_in(&t1, p1, big);
    }
    cucopy_iface_h iface;
    cucopy_ep_h ep;
    open_iface(&iface, &ep);
    int fd = -1;
    if (use_arm)
        CHECK_STATUS(TC_CALL(cucopy_iface_event_fd(iface, &fd)), CUCOPY_OK);

    slow_fake(1);
    struct flight f0, f1;
    memset(&f1, 0, sizeof(f1));
    for (int i = 0; i < NCH; i++)
        f1.st[i] = CUCOPY_OK; /* nothing expected when there is no device 1 */
    issue_flight(ep, &s0, &t0, &f0, 2);
    if (devices > 1)
        issue_flight(ep, &s1, &t1, &f1, 3);
    struct tc_comp fc;
    tc_comp_init(&fc, 1);
    int fs = TC_CALL(cucopy_iface_flush(iface, 0, &fc.comp));
    CHECKF(fs == CUCOPY_INPROGRESS || fs == CUCOPY_OK, "%s: flush returned %s", phase,
           tc_status_name(fs));

    tc_primary_reset(0); /* s0 and t0 are gone with it */

    tc_case_begin("%s: completions", phase);
    struct flight *fl[] = {&f0, &f1};
    if (!use_arm) {
        progress_until(iface, fl, 2, fs == CUCOPY_INPROGRESS ? &fc : NULL);
    } else {
        int arms = 0, busy = 0, wakeups = 0, first = 1;
        double deadline = tc_now() + 60;
        for (;;) {
            int pending = flight_pending(&f0) + flight_pending(&f1) +
                          (fs == CUCOPY_INPROGRESS && fc.fired == 0);
            if (pending == 0)
                break;
            if (FAIL_IF(tc_now() > deadline,
                        "%d completion(s) did not fire within 60 s of arm/poll/progress",
                        pending))
                break;
            int s = TC_CALL(cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP));
            if (first) {
                printf("test_lifecycle: %s: first arm after the reset: %s\n", phase,
                       tc_status_name(s));
                first = 0;
            }
            arms++;
            if (FAIL_IF(s != CUCOPY_OK && s != CUCOPY_ERR_BUSY, "event_arm returned %s: %s",
                        tc_status_name(s), cucopy_last_error()))
                break;
            if (s == CUCOPY_ERR_BUSY) {
                busy++;
            } else {
                struct pollfd pfd = {fd, POLLIN, 0};
                int r = poll(&pfd, 1, 20000);
                if (FAIL_IF(r == 0, "armed with %d completion(s) pending, the fd stayed "
                                    "quiet for 20 s (a hang)",
                            pending))
                    break;
                wakeups += r > 0;
            }
            int n = TC_CALL(cucopy_iface_progress(iface));
            if (FAIL_IF(n < 0, "progress returned %s", tc_status_name(n)))
                break;
        }
        printf("test_lifecycle: %s: %d arm(s), %d BUSY, %d wake-up(s)\n", phase, arms, busy,
               wakeups);
    }
    progress_more(iface);
    int canceled = flight_check(&f0, CUCOPY_OK, CUCOPY_ERR_CANCELED, "device 0 (reset)");
    printf("test_lifecycle: %s: device 0: %d of %d piece(s) canceled\n", phase, canceled, NCH);
    /* The fake's copies are still running at the reset (its delay); a real
     * GPU may finish some first, which is why OK is allowed above. */
    if (td.is_fake)
        CHECKF(canceled == NCH, "%s: %d of %d pieces canceled by the reset", phase, canceled, NCH);
    if (devices > 1) {
        flight_check(&f1, CUCOPY_OK, CUCOPY_OK, "device 1");
        flight_check_data(&f1, &t1, "device 1");
    }
    if (fs == CUCOPY_INPROGRESS) {
        CHECKF(fc.fired == 1, "flush registered before the reset fired %d time(s)", fc.fired);
        CHECKF(fc.comp.status == CUCOPY_OK || fc.comp.status == CUCOPY_ERR_CANCELED,
               "flush completed with %s", tc_status_name(fc.comp.status));
    }
    CHECKF(!tc_primary_active(0), "cucopy re-activated the reset primary context");
    tc_case_end();
    slow_fake(0);

    /* The iface goes on. */
    char what[160];
    snprintf(what, sizeof(what), "%s, after", phase);
    host_copies(iface, ep, what);
    if (devices > 1)
        dev_copies(iface, ep, &s1, what);
    tc_flush(iface);
    CHECK_STATUS(TC_CALL(cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP)), CUCOPY_OK);
    close_iface(iface, ep, phase);
    tc_primary_release(0);
    if (devices > 1) {
        tc_buf_free(&s1);
        tc_buf_free(&t1);
        tc_primary_release(1);
    }
    check_violations(v0, phase);
}

/* ---- phase F ------------------------------------------------------------------ */

static void check_ctx_clean(cdContext c, const char *what)
{
    if (tc_fake.live_streams == NULL)
        return;
    CHECKF(tc_fake.live_streams(c) == 0, "%s: %d stream(s) left in the context", what,
           tc_fake.live_streams(c));
    CHECKF(tc_fake.live_events(c) == 0, "%s: %d event(s) left in the context", what,
           tc_fake.live_events(c));
}

static void phase_f_release_context(void)
{
    const char *phase = "phase F (user context, release_context)";
    long v0 = tc_violations();
    cdDevice dev0;
    cdContext user = NULL;
    TD_CHECK(td.cuDeviceGet(&dev0, 0));
    TD_CHECK(td.cuCtxCreate(&user, CD_CTX_SCHED_AUTO, dev0)); /* now current */
    uint64_t key = ctx_key(user);
    struct tc_buf us, ut;
    tc_buf_alloc_in(&us, user, big);
    tc_buf_alloc_in(&ut, user, big);
    cucopy_iface_h iface;
    cucopy_ep_h ep;
    open_iface(&iface, &ep);

    if (td.cuCtxGetId != NULL) {
        cucopy_mem_attr_t a;
        memset(&a, 0, sizeof(a));
        a.field_mask = CUCOPY_MEM_ATTR_CONTEXT_ID;
        CHECK_STATUS(TC_CALL(cucopy_mem_query(cctx, ptr(&us, 0), LEN, &a)), CUCOPY_OK);
        CHECKF(a.context_id == key, "mem_query context_id %llu, cuCtxGetId %llu",
               (unsigned long long)a.context_id, (unsigned long long)key);
    }

    /* Copies in flight; release_context (user current) waits for them. */
    slow_fake(1);
    struct flight f;
    issue_flight(ep, &us, &ut, &f, 4);
    tc_case_begin("%s: release with copies in flight (user current)", phase);
    CHECK_STATUS(TC_CALL(cucopy_iface_release_context(iface, key)), CUCOPY_OK);
    slow_fake(0);
    flight_check_data(&f, &ut, "data right after release_context");
    check_ctx_clean(user, "after release_context");
    struct flight *fl[] = {&f};
    progress_until(iface, fl, 1, NULL);
    progress_more(iface);
    flight_check(&f, CUCOPY_OK, CUCOPY_OK, "completions after release_context");
    tc_case_end();

    CHECK_STATUS(TC_CALL(cucopy_iface_release_context(iface, key ^ 0x5a5a5a5a00000000ull)),
                 CUCOPY_OK);
    CHECK_STATUS(TC_CALL(cucopy_iface_release_context(iface, key)), CUCOPY_OK); /* again */
    CHECK_STATUS(TC_CALL(cucopy_iface_release_context(iface, 0)), CUCOPY_OK);

    /* Used again after the release: resources come back, and go again
     * (this time with no context current). */
    dev_copies(iface, ep, &us, "phase F, user context used again");
    cdContext popped = NULL;
    TD_CHECK(td.cuCtxPopCurrent(&popped));
    REQUIRE(popped == user);
    dev_copies(iface, ep, &us, "phase F, user context used again (none current)");
    tc_flush(iface);
    CHECK_STATUS(TC_CALL(cucopy_iface_release_context(iface, key)), CUCOPY_OK);
    check_ctx_clean(user, "after the second release_context");

    tc_buf_free(&us);
    tc_buf_free(&ut);
    TD_CHECK(td.cuCtxDestroy(user));

    /* Later copies on other memory work. */
    cdContext p0 = tc_primary_retain(0);
    struct tc_buf d0;
    tc_buf_alloc_in(&d0, p0, LEN);
    host_copies(iface, ep, "phase F after cuCtxDestroy");
    dev_copies(iface, ep, &d0, "phase F after cuCtxDestroy, device 0 primary");
    if (devices > 1) {
        cdContext p1 = tc_primary_retain(1);
        struct tc_buf d1;
        tc_buf_alloc_in(&d1, p1, LEN);
        dev_copies(iface, ep, &d1, "phase F after cuCtxDestroy, device 1 primary");
        tc_copy_all_ways(iface, ep, &d0, &d1, LEN, "phase F after cuCtxDestroy, dev0 -> dev1");
        tc_flush(iface);
        tc_buf_free(&d1);
        /* the iface still holds device 1's primary: release_context it */
        CHECK_STATUS(TC_CALL(cucopy_iface_release_context(iface, ctx_key(p1))), CUCOPY_OK);
        check_ctx_clean(p1, "device 1 primary after release_context");
        tc_primary_release(1);
        CHECKF(!tc_primary_active(1),
               "device 1's primary context still active after release_context and the "
               "program's release (cucopy kept a retain)");
    }
    CHECK_STATUS(TC_CALL(cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP)), CUCOPY_OK);
    tc_flush(iface);
    close_iface(iface, ep, phase);
    tc_buf_free(&d0);
    tc_primary_release(0);
    check_violations(v0, phase);
}

/* ---- phase G ------------------------------------------------------------------ */

static void phase_g_destroy_after_close(void)
{
    const char *phase = "phase G (user context destroyed after iface_close)";
    long v0 = tc_violations();
    cdDevice d0;
    cdContext user = NULL;
    TD_CHECK(td.cuDeviceGet(&d0, 0));
    TD_CHECK(td.cuCtxCreate(&user, CD_CTX_SCHED_AUTO, d0));
    cdContext popped = NULL;
    TD_CHECK(td.cuCtxPopCurrent(&popped));
    REQUIRE(popped == user);
    struct tc_buf us, ut;
    tc_buf_alloc_in(&us, user, big);
    tc_buf_alloc_in(&ut, user, big);
    cucopy_iface_h iface;
    cucopy_ep_h ep;
    open_iface(&iface, &ep);
    dev_copies(iface, ep, &us, phase);

    /* Copies still in flight at iface_close: close waits for them. */
    slow_fake(1);
    struct flight f;
    issue_flight(ep, &us, &ut, &f, 5);
    close_iface(iface, ep, phase);
    slow_fake(0);
    flight_check_data(&f, &ut, "phase G: data after iface_close");
    check_ctx_clean(user, "phase G after iface_close");
    CHECK_STATUS(TC_CALL(cucopy_iface_release_context(iface, ctx_key(user))),
                 CUCOPY_ERR_INVALID_HANDLE);
    tc_buf_free(&us);
    tc_buf_free(&ut);
    TD_CHECK(td.cuCtxDestroy(user));
    check_violations(v0, phase);
}

int main(void)
{
    devices = tc_begin("test_lifecycle", CUCOPY_MAX_DEVICES);
    if (td.is_fake)
        REQUIRE(tc_fake.violations != NULL && tc_fake.live_streams != NULL &&
                tc_fake.live_events != NULL && tc_fake.set_delay_us != NULL);
    const char *delay = getenv("FAKECUDA_DELAY_US");
    base_delay_us = delay != NULL ? (unsigned)strtoul(delay, NULL, 10) : 0;
    big = td.is_fake ? (size_t)1 << 20 : (size_t)64 << 20;
    tc_pattern(big);
    tc_buf_alloc(&host_a, TC_MEM_PAGEABLE, LEN);
    tc_buf_alloc(&host_b, TC_MEM_PAGEABLE, LEN);
    REQUIRE_OK(cucopy_context_create(NULL, &cctx));
    printf("test_lifecycle: %d device(s), %s driver%s\n", devices, td.is_fake ? "fake" : "real",
           td.cuCtxGetId == NULL ? " without cuCtxGetId (pre-12)" : "");
    if (devices < 2)
        printf("test_lifecycle: one device: the device-1 parts are skipped\n");
    long v0 = tc_violations();

    phase_a_program_releases_primary();
    phase_b_reset_no_reactivation(1);
    phase_b_reset_no_reactivation(0);
    phase_c_reset_reactivated(1);
    phase_c_reset_reactivated(0);
    phase_de_reset_in_flight(0);
    phase_de_reset_in_flight(1);
    phase_f_release_context();
    phase_g_destroy_after_close();

    CHECK_STATUS(TC_CALL(cucopy_context_destroy(cctx)), CUCOPY_OK);
    CHECK(tc_current() == NULL);
    check_violations(v0, "whole test");
    tc_buf_free(&host_a);
    tc_buf_free(&host_b);
    return tc_finish();
}
