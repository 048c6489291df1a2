/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers shared by the memory-domain and topology tests (test_mem_query,
 * test_mem_alloc, test_mem_reg, test_device_query):
 *  - MT_CALL(expr): evaluate a cucopy call and check that the calling
 *    thread's current context is unchanged and (on the fake driver) that no
 *    context was created or activated by it;
 *  - primary-context state, retain/release/reset and context ids through the
 *    raw driver;
 *  - the fake driver's accounting, looked up with dlsym (NULL on a real GPU);
 *  - a copy of len bytes between two buffers in each of the four ways, with
 *    the data verified.
 */
#ifndef CUCOPY_TEST_MEMTEST_H
#define CUCOPY_TEST_MEMTEST_H

#include "check.h"
#include "mem.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mt_fake {
    long (*ctx_creations)(void);
    long (*live_allocations)(void);
    long (*registered_ranges)(void);
    long (*violations)(void);
};
static struct mt_fake mt_fake;

static inline void mt_init_fake(void)
{
    mt_fake.ctx_creations = (long (*)(void))testdrv_fake_sym("fakecuda_ctx_creations");
    mt_fake.live_allocations = (long (*)(void))testdrv_fake_sym("fakecuda_live_allocations");
    mt_fake.registered_ranges = (long (*)(void))testdrv_fake_sym("fakecuda_registered_ranges");
    mt_fake.violations = (long (*)(void))testdrv_fake_sym("fakecuda_violations");
}

static inline long mt_ctx_creations(void)
{
    return mt_fake.ctx_creations != NULL ? mt_fake.ctx_creations() : 0;
}

static _Thread_local cdContext mt_snap_ctx;
static _Thread_local long mt_snap_creations;
static _Thread_local const char *mt_snap_what;
/* Set to 1 around calls that are allowed to activate a primary context. */
static _Thread_local int mt_may_activate;

static inline int mt_snap(const char *what)
{
    mt_snap_what = what;
    mt_snap_ctx = tc_current();
    mt_snap_creations = mt_ctx_creations();
    return 0;
}

static inline int mt_after(int status, const char *file, int line)
{
    cdContext now = tc_current();
    tc_check(now == mt_snap_ctx, file, line, "%s changed the current context from %p to %p",
             mt_snap_what, (void *)mt_snap_ctx, (void *)now);
    if (mt_fake.ctx_creations != NULL && !mt_may_activate) {
        long created = mt_ctx_creations() - mt_snap_creations;
        tc_check(created == 0, file, line, "%s created or activated %ld context(s)",
                 mt_snap_what, created);
    }
    return status;
}

#define MT_CALL(expr) (mt_snap(#expr), mt_after((int)(expr), __FILE__, __LINE__))

static inline int mt_primary_active(int dev)
{
    cdDevice d;
    unsigned int flags = 0;
    int active = 0;
    TD_CHECK(td.cuDeviceGet(&d, dev));
    TD_CHECK(td.cuDevicePrimaryCtxGetState(d, &flags, &active));
    return active;
}

/* The program's own retain, release and reset of device dev's primary context. */
static inline cdContext mt_prim_retain(int dev)
{
    cdDevice d;
    cdContext c = NULL;
    TD_CHECK(td.cuDeviceGet(&d, dev));
    TD_CHECK(td.cuDevicePrimaryCtxRetain(&c, d));
    return c;
}

static inline void mt_prim_release(int dev)
{
    cdDevice d;
    TD_CHECK(td.cuDeviceGet(&d, dev));
    TD_CHECK(td.cuDevicePrimaryCtxRelease(d));
}

static inline void mt_prim_reset(int dev)
{
    cdDevice d;
    TD_CHECK(td.cuDeviceGet(&d, dev));
    TD_CHECK(td.cuDevicePrimaryCtxReset(d));
}

/* The context's id (cuCtxGetId), 0 where the driver lacks it. */
static inline uint64_t mt_ctx_id(cdContext c)
{
    unsigned long long id = 0;
    if (td.cuCtxGetId == NULL || c == NULL)
        return 0;
    TD_CHECK(td.cuCtxGetId(c, &id));
    return id;
}

/* A tc_buf view of memory the test manages itself (VMM, pool, cucopy
 * memory): read and written with the raw driver in @p ctx (host memory:
 * directly). Never pass it to tc_buf_free. */
static inline struct tc_buf mt_view(enum tc_mem_kind kind, cdContext ctx, uint64_t addr,
                                    size_t size, int host)
{
    struct tc_buf b;
    memset(&b, 0, sizeof(b));
    b.kind = kind;
    b.ctx = ctx;
    b.dptr = addr;
    b.size = size;
    b.host = host ? (unsigned char *)(uintptr_t)addr : NULL;
    return b;
}

/* Wait for a zcopy that returned s; progress calls go through MT_CALL. */
static inline void mt_wait(cucopy_iface_h iface, int s, struct tc_comp *c)
{
    CHECKF(s == CUCOPY_OK || s == CUCOPY_INPROGRESS, "zcopy returned %s: %s", tc_status_name(s),
           cucopy_last_error());
    double deadline = tc_now() + 30;
    while (s == CUCOPY_INPROGRESS && c->fired == 0 && tc_now() < deadline) {
        int n = MT_CALL(cucopy_iface_progress(iface));
        if (!CHECKF(n >= 0, "progress returned %s: %s", tc_status_name(n), cucopy_last_error()))
            break;
    }
    if (s == CUCOPY_INPROGRESS)
        CHECKF(c->fired == 1 && c->comp.status == CUCOPY_OK, "completion fired %d, status %s",
               c->fired, tc_status_name(c->comp.status));
}

/* Copy len bytes src -> dst with put/get x short/zcopy, one case each. */
static inline void mt_copy_all_ways(cucopy_iface_h iface, cucopy_ep_h ep, const struct tc_buf *src,
                                    const struct tc_buf *dst, size_t len, const char *what)
{
    static unsigned seed;
    unsigned char *back = malloc(len);
    REQUIRE(back != NULL);
    for (int zcopy = 0; zcopy < 2; zcopy++) {
        for (int get = 0; get < 2; get++) {
            const unsigned char *data = tc_pattern(len) + (seed++ % 256);
            tc_case_begin("copy %s: %s %s", what, get ? "get" : "put", zcopy ? "zcopy" : "short");
            tc_buf_write(src, 0, data, len);
            tc_buf_set(dst, 0, 0x5a, len);
            void *sp = (void *)(uintptr_t)src->dptr;
            void *dp = (void *)(uintptr_t)dst->dptr;
            if (!zcopy) {
                if (get)
                    CHECK_STATUS(MT_CALL(cucopy_ep_get_short(ep, dp, len, src->dptr)), CUCOPY_OK);
                else
                    CHECK_STATUS(MT_CALL(cucopy_ep_put_short(ep, sp, len, dst->dptr)), CUCOPY_OK);
            } else {
                cucopy_iov_t iov = {get ? dp : sp, len};
                struct tc_comp c;
                tc_comp_init(&c, 1);
                int s = get ? MT_CALL(cucopy_ep_get_zcopy(ep, &iov, 1, src->dptr, &c.comp))
                            : MT_CALL(cucopy_ep_put_zcopy(ep, &iov, 1, dst->dptr, &c.comp));
                mt_wait(iface, s, &c);
            }
            tc_buf_read(dst, 0, back, len);
            CHECKF(memcmp(back, data, len) == 0, "data differs");
            tc_case_end();
        }
    }
    free(back);
}

/* Flush everything outstanding on the iface. */
static inline void mt_flush(cucopy_iface_h iface)
{
    double deadline = tc_now() + 30;
    int s;
    while ((s = MT_CALL(cucopy_iface_flush(iface, 0, NULL))) == CUCOPY_INPROGRESS &&
           tc_now() < deadline)
        MT_CALL(cucopy_iface_progress(iface));
    CHECK_STATUS(s, CUCOPY_OK);
}

#endif
