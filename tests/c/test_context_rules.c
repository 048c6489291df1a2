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
#include "calls.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEN 4096

static void flush_and_close(cucopy_iface_h iface, cucopy_ep_h ep)
{
    tc_flush(iface);
    CHECK_STATUS(TC_CALL(cucopy_ep_destroy(ep)), CUCOPY_OK);
    CHECK_STATUS(TC_CALL(cucopy_iface_close(iface)), CUCOPY_OK);
    if (tc_fake.live_streams != NULL) {
        CHECKF(tc_fake.live_streams(NULL) == 0, "%d stream(s) alive after iface_close",
               tc_fake.live_streams(NULL));
        CHECKF(tc_fake.live_events(NULL) == 0, "%d event(s) alive after iface_close",
               tc_fake.live_events(NULL));
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
    REQUIRE(TC_CALL(cucopy_iface_open(ctx, NULL, iface)) == CUCOPY_OK);
    REQUIRE(TC_CALL(cucopy_ep_create(*iface, ep)) == CUCOPY_OK);
}

static void phase0_nothing_active(void)
{
    int active_before[2] = {0, 0};
    for (int d = 0; d < devices && d < 2; d++)
        active_before[d] = tc_primary_active(d);
    if (active_before[0] || active_before[1])
        printf("test_context_rules: a primary context is active before the test; phase 0 "
               "checks only the inactive ones\n");
    CHECK(tc_current() == NULL);

    int n = 0;
    CHECK_STATUS(TC_CALL(cucopy_context_create(NULL, &ctx)), CUCOPY_OK);
    REQUIRE(ctx != NULL);
    CHECK_STATUS(TC_CALL(cucopy_device_count(ctx, &n)), CUCOPY_OK);
    CHECKF(n == devices, "device_count %d, driver shows %d", n, devices);

    cucopy_iface_h iface = NULL;
    cucopy_ep_h ep = NULL;
    open_iface(&iface, &ep);
    cucopy_iface_attr_t attr;
    memset(&attr, 0, sizeof(attr));
    attr.field_mask = CUCOPY_IFACE_ATTR_CAP_FLAGS | CUCOPY_IFACE_ATTR_DEVICE_COUNT;
    CHECK_STATUS(TC_CALL(cucopy_iface_query(iface, &attr)), CUCOPY_OK);
    tc_copy_all_ways(iface, ep, &host_a, &host_b, LEN, "phase 0 pageable -> pageable");
    int fd = -1;
    CHECK_STATUS(TC_CALL(cucopy_iface_event_fd(iface, &fd)), CUCOPY_OK);
    CHECK_STATUS(TC_CALL(cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP)), CUCOPY_OK);
    CHECK(TC_CALL(cucopy_iface_progress(iface)) >= 0);
    struct tc_comp c;
    tc_comp_init(&c, 1);
    CHECK_STATUS(TC_CALL(cucopy_ep_flush(ep, 0, &c.comp)), CUCOPY_OK);
    flush_and_close(iface, ep);

    for (int d = 0; d < devices && d < 2; d++)
        if (!active_before[d])
            CHECKF(!tc_primary_active(d),
                   "device %d's primary context became active through host-only work", d);
}

static void phase1_only_dev0(void)
{
    /* The program activates device 0 only. */
    tc_buf_alloc(&pinned, TC_MEM_PINNED, LEN);
    tc_buf_alloc(&dev0, TC_MEM_DEV0, LEN);
    tc_buf_alloc(&dev0b, TC_MEM_DEV0, LEN);
    int dev1_was_active = devices > 1 && tc_primary_active(1);
    CHECK(tc_current() == NULL);

    cucopy_iface_h iface = NULL;
    cucopy_ep_h ep = NULL;
    open_iface(&iface, &ep);
    tc_copy_all_ways(iface, ep, &pinned, &host_a, LEN, "phase 1 pinned -> pageable");
    tc_copy_all_ways(iface, ep, &host_a, &pinned, LEN, "phase 1 pageable -> pinned");
    tc_copy_all_ways(iface, ep, &host_a, &dev0, LEN, "phase 1 pageable -> dev0 (none current)");
    tc_copy_all_ways(iface, ep, &dev0, &host_b, LEN, "phase 1 dev0 -> pageable (none current)");
    tc_copy_all_ways(iface, ep, &pinned, &dev0, LEN, "phase 1 pinned -> dev0 (none current)");
    tc_copy_all_ways(iface, ep, &dev0, &pinned, LEN, "phase 1 dev0 -> pinned (none current)");
    if (devices > 1 && !dev1_was_active)
        CHECKF(!tc_primary_active(1), "device 1's primary context became active");
    flush_and_close(iface, ep);
    if (devices > 1 && !dev1_was_active)
        CHECKF(!tc_primary_active(1), "device 1's primary context active after iface_close");
}

static void phase2_other_current(void)
{
    cucopy_iface_h iface = NULL;
    cucopy_ep_h ep = NULL;
    tc_buf_alloc(&dev1, TC_MEM_DEV1, LEN);
    open_iface(&iface, &ep);

    TD_CHECK(td.cuCtxSetCurrent(dev1.ctx));
    tc_copy_all_ways(iface, ep, &host_a, &dev0, LEN, "phase 2 pageable -> dev0 (dev1 current)");
    tc_copy_all_ways(iface, ep, &dev0, &pinned, LEN, "phase 2 dev0 -> pinned (dev1 current)");
    tc_copy_all_ways(iface, ep, &dev0, &dev0b, LEN, "phase 2 dev0 -> dev0 (dev1 current)");
    tc_copy_all_ways(iface, ep, &dev0, &dev1, LEN, "phase 2 dev0 -> dev1 (dev1 current)");

    TD_CHECK(td.cuCtxSetCurrent(dev0.ctx));
    tc_copy_all_ways(iface, ep, &pinned, &dev1, LEN, "phase 2 pinned -> dev1 (dev0 current)");
    tc_copy_all_ways(iface, ep, &dev1, &host_b, LEN, "phase 2 dev1 -> pageable (dev0 current)");
    tc_copy_all_ways(iface, ep, &dev1, &dev0, LEN, "phase 2 dev1 -> dev0 (dev0 current)");

    /* A stack two deep: dev1 pushed over dev0. */
    tc_push(dev1.ctx);
    tc_copy_all_ways(iface, ep, &dev0, &host_b, LEN, "phase 2 dev0 -> pageable (dev1 over dev0)");
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
    tc_copy_all_ways(iface, ep, &host_a, &dev0, LEN, "phase 3 pageable -> dev0 (new thread)");
    tc_copy_all_ways(iface, ep, &dev0, &pinned, LEN, "phase 3 dev0 -> pinned (new thread)");
    tc_copy_all_ways(iface, ep, &pinned, &host_b, LEN, "phase 3 pinned -> pageable (new thread)");
    if (devices > 1) {
        tc_copy_all_ways(iface, ep, &host_a, &dev1, LEN, "phase 3 pageable -> dev1 (new thread)");
        tc_copy_all_ways(iface, ep, &dev1, &dev0, LEN, "phase 3 dev1 -> dev0 (new thread)");
        tc_copy_all_ways(iface, ep, &dev0, &dev1, LEN, "phase 3 dev0 -> dev1 (new thread)");
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
    tc_copy_all_ways(iface, ep, &host_a, &ubuf, LEN, "phase 4 pageable -> user ctx (user current)");
    tc_copy_all_ways(iface, ep, &ubuf, &pinned, LEN, "phase 4 user ctx -> pinned (user current)");
    tc_copy_all_ways(iface, ep, &dev0, &ubuf, LEN,
                     "phase 4 dev0 primary -> user ctx (user current)");
    tc_copy_all_ways(iface, ep, &ubuf, &dev0, LEN,
                     "phase 4 user ctx -> dev0 primary (user current)");
    tc_copy_all_ways(iface, ep, &pinned, &dev0, LEN,
                     "phase 4 pinned -> dev0 primary (user current)");
    if (devices > 1)
        tc_copy_all_ways(iface, ep, &dev1, &host_b, LEN, "phase 4 dev1 -> pageable (user current)");

    cdContext popped = NULL;
    TD_CHECK(td.cuCtxPopCurrent(&popped));
    REQUIRE(popped == user);
    CHECK(tc_current() == NULL);
    tc_copy_all_ways(iface, ep, &host_a, &ubuf, LEN, "phase 4 pageable -> user ctx (none current)");
    tc_copy_all_ways(iface, ep, &ubuf, &host_b, LEN, "phase 4 user ctx -> pageable (none current)");
    if (devices > 1) {
        TD_CHECK(td.cuCtxSetCurrent(dev1.ctx));
        tc_copy_all_ways(iface, ep, &ubuf, &dev1, LEN, "phase 4 user ctx -> dev1 (dev1 current)");
        TD_CHECK(td.cuCtxSetCurrent(NULL));
    }
    flush_and_close(iface, ep);
    tc_buf_free(&ubuf);
    TD_CHECK(td.cuCtxDestroy(user));
}

int main(void)
{
    devices = tc_begin("test_context_rules", CUCOPY_MAX_DEVICES);
    if (td.is_fake)
        REQUIRE(tc_fake.ctx_creations != NULL && tc_fake.live_streams != NULL &&
                tc_fake.live_events != NULL);
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

    CHECK_STATUS(TC_CALL(cucopy_context_destroy(ctx)), CUCOPY_OK);
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
