/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Many zcopies interleaved across devices (both when there are two) and
 * directions (H2D, D2H, D2D on one device, D2D across devices), issued on two
 * endpoints, each with its own completion that counts how often it fired:
 *  - iface flush with a completion: every op completion fires exactly once,
 *    the flush completion after all of them;
 *  - ep flush with a completion on each endpoint: after all ops of that ep;
 *  - flush with NULL, called again until OK: all op completions have fired;
 *  - ops of one endpoint with the same (context, direction) complete in issue
 *    order (the header's ordering rule);
 *  - flush with nothing outstanding returns OK and leaves its completion alone.
 * All copied data is verified.
 */
#define _GNU_SOURCE
#include "check.h"
#include "mem.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 40
#define SLOT 16384
#define MAX_TYPES 8
#define MAX_OPS (ROUNDS * MAX_TYPES)
#define FILL 0xc3
#define TIMEOUT_S 60.0

enum dir_kind { H2D, D2H, D2D };

struct op_type {
    enum dir_kind dir;
    int src_dev; /* -1: host */
    int dst_dev; /* -1: host */
};

static const struct op_type types_2dev[] = {
    {H2D, -1, 0}, {H2D, -1, 1}, {D2H, 0, -1}, {D2H, 1, -1},
    {D2D, 0, 1},  {D2D, 1, 0},  {D2D, 0, 0},  {D2D, 1, 1},
};
static const struct op_type types_1dev[] = {{H2D, -1, 0}, {D2H, 0, -1}, {D2D, 0, 0}};
static const size_t op_sizes[] = {8, 1000, 4096, SLOT};

struct op {
    const struct op_type *type;
    int ep;
    int get;
    size_t len;
    size_t slot;
    int immediate; /* zcopy returned OK */
    struct tc_comp c;
};

static const struct op_type *types;
static int ntypes;
static int nops;
static struct op ops[MAX_OPS];
static struct tc_buf host_src; /* pinned */
static struct tc_buf host_dst; /* pageable */
static struct tc_buf dev_src[2];
static struct tc_buf dev_dst[2];
static cucopy_iface_h iface;
static cucopy_ep_h eps[2];

static const struct tc_buf *src_buf(const struct op *o)
{
    return o->type->src_dev < 0 ? &host_src : &dev_src[o->type->src_dev];
}

static const struct tc_buf *dst_buf(const struct op *o)
{
    return o->type->dst_dev < 0 ? &host_dst : &dev_dst[o->type->dst_dev];
}

static const unsigned char *op_data(int k, int seed)
{
    return tc_pattern(SLOT) + (size_t)(k * 7 + seed) % 256;
}

/* Fill sources with data for this seed, destinations with FILL. */
static void prepare(int seed)
{
    for (int k = 0; k < nops; k++)
        tc_buf_write(src_buf(&ops[k]), ops[k].slot, op_data(k, seed), ops[k].len);
    tc_buf_set(&host_dst, 0, FILL, host_dst.size);
    for (int d = 0; d < 2 && d < td.device_count; d++)
        tc_buf_set(&dev_dst[d], 0, FILL, dev_dst[d].size);
}

static void issue(int k)
{
    struct op *o = &ops[k];
    uint64_t src = tc_buf_addr(src_buf(o), o->slot);
    uint64_t dst = tc_buf_addr(dst_buf(o), o->slot);
    cucopy_iov_t iov = {(void *)(uintptr_t)(o->get ? dst : src), o->len};
    tc_comp_init(&o->c, 1);
    o->immediate = 0;
    double deadline = tc_now() + TIMEOUT_S;
    for (;;) {
        cucopy_status_t s = o->get ? cucopy_ep_get_zcopy(eps[o->ep], &iov, 1, src, &o->c.comp)
                                   : cucopy_ep_put_zcopy(eps[o->ep], &iov, 1, dst, &o->c.comp);
        if (s == CUCOPY_ERR_NO_RESOURCE && tc_now() < deadline) {
            CHECK(cucopy_iface_progress(iface) >= 0);
            continue;
        }
        if (s == CUCOPY_OK)
            o->immediate = 1;
        else
            CHECKF(s == CUCOPY_INPROGRESS, "op %d: zcopy returned %s: %s", k, tc_status_name(s),
                   cucopy_last_error());
        return;
    }
}

static void issue_all(void)
{
    for (int k = 0; k < nops; k++)
        issue(k);
}

static int all_fired(void)
{
    for (int k = 0; k < nops; k++)
        if (!ops[k].immediate && ops[k].c.fired == 0)
            return 0;
    return 1;
}

static void progress_until(struct tc_comp *c1, struct tc_comp *c2)
{
    double deadline = tc_now() + TIMEOUT_S;
    while ((c1->fired == 0 || (c2 != NULL && c2->fired == 0)) && tc_now() < deadline) {
        int n = cucopy_iface_progress(iface);
        if (!CHECKF(n >= 0, "progress returned %s: %s", tc_status_name(n), cucopy_last_error()))
            return;
    }
}

/* Every op completed exactly once with OK, in issue order per (ep, context,
 * direction), and no completion fires again. */
static void check_ops(const char *what)
{
    for (int i = 0; i < 3; i++)
        CHECKF(cucopy_iface_progress(iface) == 0, "%s: progress after everything finished "
                                                  "reports completions", what);
    int bad = 0;
    for (int k = 0; k < nops; k++) {
        struct op *o = &ops[k];
        if (o->immediate) {
            bad += !CHECKF(o->c.fired == 0, "%s: op %d returned OK but its completion fired",
                           what, k);
            continue;
        }
        bad += !CHECKF(o->c.fired == 1 && o->c.comp.count == 0 && o->c.comp.status == CUCOPY_OK,
                       "%s: op %d completion fired %d times, count %d, status %s", what, k,
                       o->c.fired, o->c.comp.count, tc_status_name(o->c.comp.status));
    }
    for (int k = 0; k < nops; k++) {
        for (int j = k + 1; j < nops; j++) {
            const struct op *a = &ops[k];
            const struct op *b = &ops[j];
            /* Same op type: same context (source's, or the device side's)
             * and same direction, and the same destination device. */
            if (a->immediate || b->immediate || a->ep != b->ep || a->type != b->type ||
                a->c.fired != 1 || b->c.fired != 1)
                continue;
            if (a->c.order > b->c.order) {
                bad += !CHECKF(0, "%s: op %d completed before op %d issued earlier on the same "
                                  "(ep, context, direction)", what, j, k);
                j = nops; /* one message per op */
            }
        }
    }
    CHECKF(bad == 0, "%s: %d op(s) wrong", what, bad);
}

static void verify_data(int seed, const char *what)
{
    unsigned char back[SLOT];
    int bad = 0;
    for (int k = 0; k < nops; k++) {
        struct op *o = &ops[k];
        tc_buf_read(dst_buf(o), o->slot, back, SLOT);
        if (memcmp(back, op_data(k, seed), o->len) != 0) {
            if (bad++ < 5)
                CHECKF(0, "%s: op %d data differs", what, k);
            continue;
        }
        for (size_t i = o->len; i < SLOT; i++) {
            if (back[i] != FILL) {
                if (bad++ < 5)
                    CHECKF(0, "%s: op %d wrote past its end", what, k);
                break;
            }
        }
    }
    CHECKF(bad == 0, "%s: %d op(s) with wrong data", what, bad);
}

static void iface_flush_with_completion(void)
{
    prepare(1);
    issue_all();
    struct tc_comp f;
    tc_comp_init(&f, 1);
    cucopy_status_t s = cucopy_iface_flush(iface, 0, &f.comp);
    if (s == CUCOPY_OK) {
        CHECKF(all_fired(), "iface flush returned OK while op completions are still pending");
        CHECKF(f.fired == 0, "iface flush returned OK and fired its completion too");
    } else {
        CHECK_STATUS(s, CUCOPY_INPROGRESS);
        progress_until(&f, NULL);
        CHECKF(f.fired == 1, "iface flush completion fired %d times", f.fired);
        CHECKF(f.comp.status == CUCOPY_OK, "iface flush completion status %s",
               tc_status_name(f.comp.status));
        int late = 0;
        for (int k = 0; k < nops; k++)
            if (!ops[k].immediate && (ops[k].c.fired == 0 || ops[k].c.order > f.order))
                late++;
        CHECKF(late == 0, "%d op completion(s) fired after (or not before) the iface flush "
                          "completion", late);
    }
    check_ops("iface flush");
    verify_data(1, "iface flush");
}

static void ep_flush_with_completion(void)
{
    prepare(2);
    issue_all();
    struct tc_comp f[2];
    for (int e = 0; e < 2; e++) {
        tc_comp_init(&f[e], 1);
        cucopy_status_t s = cucopy_ep_flush(eps[e], 0, &f[e].comp);
        if (s == CUCOPY_OK) {
            int pending = 0;
            for (int k = 0; k < nops; k++)
                pending += ops[k].ep == e && !ops[k].immediate && ops[k].c.fired == 0;
            CHECKF(pending == 0, "ep %d flush returned OK with %d op completion(s) pending", e,
                   pending);
            f[e].fired = 1;
            f[e].order = tc_next_seq();
        } else {
            CHECK_STATUS(s, CUCOPY_INPROGRESS);
        }
    }
    progress_until(&f[0], &f[1]);
    for (int e = 0; e < 2; e++) {
        CHECKF(f[e].fired == 1, "ep %d flush completion fired %d times", e, f[e].fired);
        int late = 0;
        for (int k = 0; k < nops; k++)
            if (ops[k].ep == e && !ops[k].immediate &&
                (ops[k].c.fired == 0 || ops[k].c.order > f[e].order))
                late++;
        CHECKF(late == 0, "ep %d: %d op completion(s) fired after its flush completion", e, late);
    }
    check_ops("ep flush");
    verify_data(2, "ep flush");
}

static void flush_without_completion(void)
{
    prepare(3);
    issue_all();
    double deadline = tc_now() + TIMEOUT_S;
    cucopy_status_t s;
    int calls = 0;
    while ((s = cucopy_iface_flush(iface, 0, NULL)) == CUCOPY_INPROGRESS && tc_now() < deadline) {
        calls++;
        CHECK(cucopy_iface_progress(iface) >= 0);
    }
    CHECK_STATUS(s, CUCOPY_OK);
    CHECKF(all_fired(), "iface flush(NULL) returned OK while op completions are pending");
    check_ops("flush NULL");
    verify_data(3, "flush NULL");

    prepare(4);
    issue_all();
    for (int e = 0; e < 2; e++) {
        deadline = tc_now() + TIMEOUT_S;
        while ((s = cucopy_ep_flush(eps[e], 0, NULL)) == CUCOPY_INPROGRESS && tc_now() < deadline)
            CHECK(cucopy_iface_progress(iface) >= 0);
        CHECK_STATUS(s, CUCOPY_OK);
        int pending = 0;
        for (int k = 0; k < nops; k++)
            pending += ops[k].ep == e && !ops[k].immediate && ops[k].c.fired == 0;
        CHECKF(pending == 0, "ep %d flush(NULL) returned OK with %d completion(s) pending", e,
               pending);
    }
    check_ops("ep flush NULL");
    verify_data(4, "ep flush NULL");
}

static void flush_idle(void)
{
    struct tc_comp f;
    tc_comp_init(&f, 1);
    CHECK_STATUS(cucopy_iface_flush(iface, 0, &f.comp), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_flush(iface, 0, NULL), CUCOPY_OK);
    CHECK_STATUS(cucopy_ep_flush(eps[0], 0, &f.comp), CUCOPY_OK);
    CHECK_STATUS(cucopy_ep_flush(eps[1], 0, NULL), CUCOPY_OK);
    CHECK(cucopy_iface_progress(iface) == 0);
    CHECKF(f.fired == 0 && f.comp.count == 1, "idle flush touched its completion");
}

int main(void)
{
    tc_init("test_interleave_flush");
    int devices = td.device_count;
    if (devices < 1)
        tc_skip("no CUDA device");
    if (devices >= 2) {
        types = types_2dev;
        ntypes = (int)(sizeof(types_2dev) / sizeof(types_2dev[0]));
    } else {
        printf("test_interleave_flush: one device: no cross-device ops\n");
        types = types_1dev;
        ntypes = (int)(sizeof(types_1dev) / sizeof(types_1dev[0]));
    }
    nops = ROUNDS * ntypes;
    for (int k = 0; k < nops; k++) {
        ops[k].type = &types[k % ntypes];
        ops[k].ep = (k / ntypes + k) % 2;
        ops[k].get = (k / ntypes) % 2;
        ops[k].len = op_sizes[(k / ntypes + k) % 4];
        ops[k].slot = (size_t)k * SLOT;
    }
    size_t region = (size_t)nops * SLOT;
    tc_pattern(SLOT);
    tc_buf_alloc(&host_src, TC_MEM_PINNED, region);
    tc_buf_alloc(&host_dst, TC_MEM_PAGEABLE, region);
    for (int d = 0; d < 2 && d < devices; d++) {
        tc_buf_alloc(&dev_src[d], d == 0 ? TC_MEM_DEV0 : TC_MEM_DEV1, region);
        tc_buf_alloc(&dev_dst[d], d == 0 ? TC_MEM_DEV0 : TC_MEM_DEV1, region);
    }

    cucopy_context_h ctx = NULL;
    REQUIRE_OK(cucopy_context_create(NULL, &ctx));
    REQUIRE_OK(cucopy_iface_open(ctx, NULL, &iface));
    REQUIRE_OK(cucopy_ep_create(iface, &eps[0]));
    REQUIRE_OK(cucopy_ep_create(iface, &eps[1]));

    flush_idle(); /* nothing ever issued */
    iface_flush_with_completion();
    ep_flush_with_completion();
    flush_without_completion();
    flush_idle();

    CHECK_STATUS(cucopy_ep_destroy(eps[0]), CUCOPY_OK);
    CHECK_STATUS(cucopy_ep_destroy(eps[1]), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);
    CHECK_STATUS(cucopy_context_destroy(ctx), CUCOPY_OK);
    tc_buf_free(&host_src);
    tc_buf_free(&host_dst);
    for (int d = 0; d < 2 && d < devices; d++) {
        tc_buf_free(&dev_src[d]);
        tc_buf_free(&dev_dst[d]);
    }
    return tc_finish();
}
