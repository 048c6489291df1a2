/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The library leaves the caller's CUDA context as it found it, never creates
 * or activates a context, and picks the context from the buffers:
 *  - phase 0: no context active anywhere; host-only work and an iface
 *    open/close activate no primary context;
 *  - phase 1: only device 0 active, no context current; copies touching
 *    device 0 and host memory leave device 1's primary context inactive;
 *  - phase 2: another device's primary context is current;
 *  - phase 3: a new thread with no current context;
 *  - phase 4: a context made with cuCtxCreate is current; memory allocated in
 *    it is copied with and without it current.
 * After every cucopy call the thread's current context (cuCtxGetCurrent) is
 * what it was before; on the fake driver fakecuda_ctx_creations() does not
 * change across any cucopy call, and no stream or event outlives iface_close.
 */
#define _GNU_SOURCE
#include "check.h"
#include "mem.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEN 4096
#define FILL 0x5a

static long (*fake_ctx_creations)(void);
static int (*fake_live_streams)(cdContext);
static int (*fake_live_events)(cdContext);

static _Thread_local cdContext snap_ctx;
static _Thread_local long snap_creations;
static _Thread_local const char *snap_what;

static long ctx_creations(void)
{
    return fake_ctx_creations != NULL ? fake_ctx_creations() : 0;
}

static int snap(const char *what)
{
    snap_what = what;
    snap_ctx = tc_current();
    snap_creations = ctx_creations();
    return 0;
}

static int after_call(int status, const char *file, int line)
{
    cdContext now = tc_current();
    tc_check(now == snap_ctx, file, line, "%s changed the current context from %p to %p",
             snap_what, (void *)snap_ctx, (void *)now);
    if (fake_ctx_creations != NULL) {
        long created = ctx_creations() - snap_creations;
        tc_check(created == 0, file, line, "%s created or activated %ld context(s)", snap_what,
                 created);
    }
    return status;
}

/* Evaluate a cucopy call, check the context rules around it, yield its
 * status. */
#define CALL(expr) (snap(#expr), after_call((int)(expr), __FILE__, __LINE__))

static int primary_active(int dev)
{
    cdDevice d;
    unsigned int flags = 0;
    int active = 0;
    TD_CHECK(td.cuDeviceGet(&d, dev));
    TD_CHECK(td.cuDevicePrimaryCtxGetState(d, &flags, &active));
    return active;
}

static void *ptr(const struct tc_buf *b)
{
    return (void *)(uintptr_t)b->dptr;
}

/* Copy LEN bytes src -> dst with put or get, short or zcopy, and check the
 * data; every cucopy call goes through CALL. */
static void copy_check(cucopy_iface_h iface, cucopy_ep_h ep, const struct tc_buf *src,
                       const struct tc_buf *dst, int zcopy, int get, const char *what)
{
    static unsigned seed;
    const unsigned char *data = tc_pattern(LEN) + (seed++ % 256);
    unsigned char back[LEN];
    tc_case_begin("%s: %s %s", what, get ? "get" : "put", zcopy ? "zcopy" : "short");
    tc_buf_write(src, 0, data, LEN);
    tc_buf_set(dst, 0, FILL, LEN);
    if (!zcopy) {
        if (get)
            CHECK_STATUS(CALL(cucopy_ep_get_short(ep, ptr(dst), LEN, src->dptr)), CUCOPY_OK);
        else
            CHECK_STATUS(CALL(cucopy_ep_put_short(ep, ptr(src), LEN, dst->dptr)), CUCOPY_OK);
    } else {
        cucopy_iov_t iov = {get ? ptr(dst) : ptr(src), LEN};
        struct tc_comp c;
        tc_comp_init(&c, 1);
        int s = get ? CALL(cucopy_ep_get_zcopy(ep, &iov, 1, src->dptr, &c.comp))
                    : CALL(cucopy_ep_put_zcopy(ep, &iov, 1, dst->dptr, &c.comp));
        CHECKF(s == CUCOPY_OK || s == CUCOPY_INPROGRESS, "zcopy returned %s: %s",
               tc_status_name(s), cucopy_last_error());
        double deadline = tc_now() + 30;
        while (s == CUCOPY_INPROGRESS && c.fired == 0 && tc_now() < deadline) {
            int n = CALL(cucopy_iface_progress(iface));
            CHECKF(n >= 0, "progress returned %s: %s", tc_status_name(n), cucopy_last_error());
            if (n < 0)
                break;
        }
        if (s == CUCOPY_INPROGRESS)
            CHECKF(c.fired == 1 && c.comp.status == CUCOPY_OK, "completion fired %d, status %s",
                   c.fired, tc_status_name(c.comp.status));
    }
    tc_buf_read(dst, 0, back, LEN);
    CHECKF(memcmp(back, data, LEN) == 0, "data differs");
    tc_case_end();
}

/* All four ways (put/get x short/zcopy) from src to dst. */
static void copy_all_ways(cucopy_iface_h iface, cucopy_ep_h ep, const struct tc_buf *src,
                          const struct tc_buf *dst, const char *what)
{
    for (int zcopy = 0; zcopy < 2; zcopy++)
        for (int get = 0; get < 2; get++)
            copy_check(iface, ep, src, dst, zcopy, get, what);
}

static void flush_and_close(cucopy_iface_h iface, cucopy_ep_h ep)
{
    double deadline = tc_now() + 30;
    int s;
    while ((s = CALL(cucopy_iface_flush(iface, 0, NULL))) == CUCOPY_INPROGRESS &&
           tc_now() < deadline)
        CALL(cucopy_iface_progress(iface));
    CHECK_STATUS(s, CUCOPY_OK);
    CHECK_STATUS(CALL(cucopy_ep_destroy(ep)), CUCOPY_OK);
    CHECK_STATUS(CALL(cucopy_iface_close(iface)), CUCOPY_OK);
    if (fake_live_streams != NULL) {
        CHECKF(fake_live_streams(NULL) == 0, "%d stream(s) alive after iface_close",
               fake_live_streams(NULL));
        CHECKF(fake_live_events(NULL) == 0, "%d event(s) alive after iface_close",
               fake_live_events(NULL));
    }
}

static cucopy_context_h ctx;
static struct tc_buf host_a;
static struct tc_buf host_b;
static struct tc_buf pinned;
static struct tc_buf dev0;
static struct tc_buf dev0b; /* a second device-0 buffer for dev0 -> dev0 */
static struct tc_buf dev1;
static int devices;

static void open_iface(cucopy_iface_h *iface, cucopy_ep_h *ep)
{
    REQUIRE(CALL(cucopy_iface_open(ctx, NULL, iface)) == CUCOPY_OK);
    REQUIRE(CALL(cucopy_ep_create(*iface, ep)) == CUCOPY_OK);
}

static void phase0_nothing_active(void)
{
    int active_before[2] = {0, 0};
    for (int d = 0; d < devices && d < 2; d++)
        active_before[d] = primary_active(d);
    if (active_before[0] || active_before[1])
        printf("test_context_rules: a primary context is active before the test; phase 0 "
               "checks only the inactive ones\n");
    CHECK(tc_current() == NULL);

    int n = 0;
    CHECK_STATUS(CALL(cucopy_context_create(NULL, &ctx)), CUCOPY_OK);
    REQUIRE(ctx != NULL);
    CHECK_STATUS(CALL(cucopy_device_count(ctx, &n)), CUCOPY_OK);
    CHECKF(n == devices, "device_count %d, driver shows %d", n, devices);

    cucopy_iface_h iface = NULL;
    cucopy_ep_h ep = NULL;
    open_iface(&iface, &ep);
    cucopy_iface_attr_t attr;
    memset(&attr, 0, sizeof(attr));
    attr.field_mask = CUCOPY_IFACE_ATTR_CAP_FLAGS | CUCOPY_IFACE_ATTR_DEVICE_COUNT;
    CHECK_STATUS(CALL(cucopy_iface_query(iface, &attr)), CUCOPY_OK);
    copy_all_ways(iface, ep, &host_a, &host_b, "phase 0 pageable -> pageable");
    int fd = -1;
    CHECK_STATUS(CALL(cucopy_iface_event_fd(iface, &fd)), CUCOPY_OK);
    CHECK_STATUS(CALL(cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP)), CUCOPY_OK);
    CHECK(CALL(cucopy_iface_progress(iface)) >= 0);
    struct tc_comp c;
    tc_comp_init(&c, 1);
    CHECK_STATUS(CALL(cucopy_ep_flush(ep, 0, &c.comp)), CUCOPY_OK);
    flush_and_close(iface, ep);

    for (int d = 0; d < devices && d < 2; d++)
        if (!active_before[d])
            CHECKF(!primary_active(d),
                   "device %d's primary context became active through host-only work", d);
}

static void phase1_only_dev0(void)
{
    /* The program activates device 0 only. */
    tc_buf_alloc(&pinned, TC_MEM_PINNED, LEN);
    tc_buf_alloc(&dev0, TC_MEM_DEV0, LEN);
    tc_buf_alloc(&dev0b, TC_MEM_DEV0, LEN);
    int dev1_was_active = devices > 1 && primary_active(1);
    CHECK(tc_current() == NULL);

    cucopy_iface_h iface = NULL;
    cucopy_ep_h ep = NULL;
    open_iface(&iface, &ep);
    copy_all_ways(iface, ep, &pinned, &host_a, "phase 1 pinned -> pageable");
    copy_all_ways(iface, ep, &host_a, &pinned, "phase 1 pageable -> pinned");
    copy_all_ways(iface, ep, &host_a, &dev0, "phase 1 pageable -> dev0 (none current)");
    copy_all_ways(iface, ep, &dev0, &host_b, "phase 1 dev0 -> pageable (none current)");
    copy_all_ways(iface, ep, &pinned, &dev0, "phase 1 pinned -> dev0 (none current)");
    copy_all_ways(iface, ep, &dev0, &pinned, "phase 1 dev0 -> pinned (none current)");
    if (devices > 1 && !dev1_was_active)
        CHECKF(!primary_active(1), "device 1's primary context became active");
    flush_and_close(iface, ep);
    if (devices > 1 && !dev1_was_active)
        CHECKF(!primary_active(1), "device 1's primary context active after iface_close");
}

static void phase2_other_current(void)
{
    cucopy_iface_h iface = NULL;
    cucopy_ep_h ep = NULL;
    tc_buf_alloc(&dev1, TC_MEM_DEV1, LEN);
    open_iface(&iface, &ep);

    TD_CHECK(td.cuCtxSetCurrent(dev1.ctx));
    copy_all_ways(iface, ep, &host_a, &dev0, "phase 2 pageable -> dev0 (dev1 current)");
    copy_all_ways(iface, ep, &dev0, &pinned, "phase 2 dev0 -> pinned (dev1 current)");
    copy_all_ways(iface, ep, &dev0, &dev0b, "phase 2 dev0 -> dev0 (dev1 current)");
    copy_all_ways(iface, ep, &dev0, &dev1, "phase 2 dev0 -> dev1 (dev1 current)");

    TD_CHECK(td.cuCtxSetCurrent(dev0.ctx));
    copy_all_ways(iface, ep, &pinned, &dev1, "phase 2 pinned -> dev1 (dev0 current)");
    copy_all_ways(iface, ep, &dev1, &host_b, "phase 2 dev1 -> pageable (dev0 current)");
    copy_all_ways(iface, ep, &dev1, &dev0, "phase 2 dev1 -> dev0 (dev0 current)");

    /* A stack two deep: dev1 pushed over dev0. */
    tc_push(dev1.ctx);
    copy_all_ways(iface, ep, &dev0, &host_b, "phase 2 dev0 -> pageable (dev1 over dev0)");
    flush_and_close(iface, ep);
    tc_pop(dev1.ctx);
    CHECK(tc_current() == dev0.ctx);
    TD_CHECK(td.cuCtxSetCurrent(NULL));
}

static void *phase3_thread(void *arg)
{
    (void)arg;
    CHECKF(tc_current() == NULL, "a new thread has a current context");
    cucopy_iface_h iface = NULL;
    cucopy_ep_h ep = NULL;
    open_iface(&iface, &ep);
    copy_all_ways(iface, ep, &host_a, &dev0, "phase 3 pageable -> dev0 (new thread)");
    copy_all_ways(iface, ep, &dev0, &pinned, "phase 3 dev0 -> pinned (new thread)");
    copy_all_ways(iface, ep, &pinned, &host_b, "phase 3 pinned -> pageable (new thread)");
    if (devices > 1) {
        copy_all_ways(iface, ep, &host_a, &dev1, "phase 3 pageable -> dev1 (new thread)");
        copy_all_ways(iface, ep, &dev1, &dev0, "phase 3 dev1 -> dev0 (new thread)");
        copy_all_ways(iface, ep, &dev0, &dev1, "phase 3 dev0 -> dev1 (new thread)");
    }
    flush_and_close(iface, ep);
    CHECK(tc_current() == NULL);
    return NULL;
}

static void phase4_user_context(void)
{
    cdDevice d0;
    cdContext user = NULL;
    struct tc_buf ubuf;
    TD_CHECK(td.cuDeviceGet(&d0, 0));
    TD_CHECK(td.cuCtxCreate(&user, CD_CTX_SCHED_AUTO, d0)); /* now current */
    tc_buf_alloc_in(&ubuf, user, LEN);
    CHECK(tc_current() == user);

    cucopy_iface_h iface = NULL;
    cucopy_ep_h ep = NULL;
    open_iface(&iface, &ep);
    copy_all_ways(iface, ep, &host_a, &ubuf, "phase 4 pageable -> user ctx (user current)");
    copy_all_ways(iface, ep, &ubuf, &pinned, "phase 4 user ctx -> pinned (user current)");
    copy_all_ways(iface, ep, &dev0, &ubuf, "phase 4 dev0 primary -> user ctx (user current)");
    copy_all_ways(iface, ep, &ubuf, &dev0, "phase 4 user ctx -> dev0 primary (user current)");
    copy_all_ways(iface, ep, &pinned, &dev0, "phase 4 pinned -> dev0 primary (user current)");
    if (devices > 1)
        copy_all_ways(iface, ep, &dev1, &host_b, "phase 4 dev1 -> pageable (user current)");

    cdContext popped = NULL;
    TD_CHECK(td.cuCtxPopCurrent(&popped));
    REQUIRE(popped == user);
    CHECK(tc_current() == NULL);
    copy_all_ways(iface, ep, &host_a, &ubuf, "phase 4 pageable -> user ctx (none current)");
    copy_all_ways(iface, ep, &ubuf, &host_b, "phase 4 user ctx -> pageable (none current)");
    if (devices > 1) {
        TD_CHECK(td.cuCtxSetCurrent(dev1.ctx));
        copy_all_ways(iface, ep, &ubuf, &dev1, "phase 4 user ctx -> dev1 (dev1 current)");
        TD_CHECK(td.cuCtxSetCurrent(NULL));
    }
    flush_and_close(iface, ep);
    tc_buf_free(&ubuf);
    TD_CHECK(td.cuCtxDestroy(user));
}

int main(void)
{
    tc_init("test_context_rules");
    devices = td.device_count;
    if (devices < 1)
        tc_skip("no CUDA device");
    fake_ctx_creations = (long (*)(void))testdrv_fake_sym("fakecuda_ctx_creations");
    fake_live_streams = (int (*)(cdContext))testdrv_fake_sym("fakecuda_live_streams");
    fake_live_events = (int (*)(cdContext))testdrv_fake_sym("fakecuda_live_events");
    if (td.is_fake)
        REQUIRE(fake_ctx_creations != NULL && fake_live_streams != NULL &&
                fake_live_events != NULL);
    tc_pattern(LEN);
    tc_buf_alloc(&host_a, TC_MEM_PAGEABLE, LEN);
    tc_buf_alloc(&host_b, TC_MEM_PAGEABLE, LEN);

    phase0_nothing_active();
    phase1_only_dev0();
    if (devices > 1)
        phase2_other_current();
    else
        printf("test_context_rules: one device: phase 2 (another device current) skipped\n");
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, phase3_thread, NULL) == 0);
    REQUIRE(pthread_join(thread, NULL) == 0);
    phase4_user_context();

    CHECK_STATUS(CALL(cucopy_context_destroy(ctx)), CUCOPY_OK);
    CHECK(tc_current() == NULL);
    tc_buf_free(&pinned);
    tc_buf_free(&dev0);
    tc_buf_free(&dev0b);
    if (devices > 1)
        tc_buf_free(&dev1);
    tc_buf_free(&host_a);
    tc_buf_free(&host_b);
    return tc_finish();
}
