/* SPDX-License-Identifier: BSD-3-Clause */
#include "calls.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

_Thread_local int tc_may_activate;

static _Thread_local cdContext snap_ctx;
static _Thread_local long snap_creations;
static _Thread_local const char *snap_what;

int tc_call_before(const char *what)
{
    snap_what = what;
    snap_ctx = tc_current();
    snap_creations = tc_ctx_creations();
    return 0;
}

int tc_call_after(int status, const char *file, int line)
{
    cdContext now = tc_current();
    tc_check(now == snap_ctx, file, line, "%s changed the current context from %p to %p",
             snap_what, (void *)snap_ctx, (void *)now);
    if (tc_fake.ctx_creations != NULL && !tc_may_activate) {
        long created = tc_ctx_creations() - snap_creations;
        tc_check(created == 0, file, line, "%s created or activated %ld context(s)", snap_what,
                 created);
    }
    return status;
}

int tc_loop_call_after(int status, const char *what, const char *file, int line)
{
    cdContext now = tc_current();
    if (now != NULL)
        tc_check(0, file, line, "%s left context %p current", what, (void *)now);
    return status;
}

/* Wait for a zcopy that returned s; progress calls go through TC_CALL. */
static void wait_zcopy(cucopy_iface_h iface, int s, struct tc_comp *c)
{
    CHECKF(s == CUCOPY_OK || s == CUCOPY_INPROGRESS, "zcopy returned %s: %s", tc_status_name(s),
           cucopy_last_error());
    double deadline = tc_now() + 30;
    while (s == CUCOPY_INPROGRESS && c->fired == 0 && tc_now() < deadline) {
        int n = TC_CALL(cucopy_iface_progress(iface));
        if (!CHECKF(n >= 0, "progress returned %s: %s", tc_status_name(n), cucopy_last_error()))
            break;
    }
    if (s == CUCOPY_INPROGRESS)
        CHECKF(c->fired == 1 && c->comp.status == CUCOPY_OK, "completion fired %d, status %s",
               c->fired, tc_status_name(c->comp.status));
}

void tc_copy_all_ways(cucopy_iface_h iface, cucopy_ep_h ep, const struct tc_buf *src,
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
                    CHECK_STATUS(TC_CALL(cucopy_ep_get_short(ep, dp, len, src->dptr)), CUCOPY_OK);
                else
                    CHECK_STATUS(TC_CALL(cucopy_ep_put_short(ep, sp, len, dst->dptr)), CUCOPY_OK);
            } else {
                cucopy_iov_t iov = {get ? dp : sp, len};
                struct tc_comp c;
                tc_comp_init(&c, 1);
                int s = get ? TC_CALL(cucopy_ep_get_zcopy(ep, &iov, 1, src->dptr, &c.comp))
                            : TC_CALL(cucopy_ep_put_zcopy(ep, &iov, 1, dst->dptr, &c.comp));
                wait_zcopy(iface, s, &c);
            }
            tc_buf_read(dst, 0, back, len);
            CHECKF(memcmp(back, data, len) == 0, "data differs");
            tc_case_end();
        }
    }
    free(back);
}

void tc_flush(cucopy_iface_h iface)
{
    double deadline = tc_now() + 30;
    int s;
    while ((s = TC_CALL(cucopy_iface_flush(iface, 0, NULL))) == CUCOPY_INPROGRESS &&
           tc_now() < deadline)
        TC_CALL(cucopy_iface_progress(iface));
    CHECK_STATUS(s, CUCOPY_OK);
}
