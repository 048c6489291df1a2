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
 *  - an ep destroyed with ops outstanding: they still complete (iface flush);
 *  - a completion callback that issues the next zcopy;
 *  - a completion callback that flushes with NULL until OK (and progresses
 *    meanwhile): it returns OK once the copies are done, although the
 *    callback itself, and any queued behind it, has not returned; also
 *    from a callback of a second iface that the first iface's callback
 *    progressed (nested callbacks);
 *  - flush with nothing outstanding returns OK and leaves its completion alone.
 * All copied data is verified.
 */
#define _GNU_SOURCE
#include "check.h"
#include "mem.h"

#include <stddef.h>
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
    int status;    /* what zcopy returned */
    int immediate; /* zcopy returned OK */
    char error[200];
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
    double deadline = tc_now() + TIMEOUT_S;
    for (;;) {
        o->status = o->get ? cucopy_ep_get_zcopy(eps[o->ep], &iov, 1, src, &o->c.comp)
                           : cucopy_ep_put_zcopy(eps[o->ep], &iov, 1, dst, &o->c.comp);
        if (o->status != CUCOPY_ERR_NO_RESOURCE || tc_now() > deadline)
            break;
        int n = cucopy_iface_progress(iface);
        if (FAIL_IF(n < 0, "progress: %s: %s", tc_status_name(n), cucopy_last_error()))
            break;
    }
    o->immediate = o->status == CUCOPY_OK;
    if (o->status != CUCOPY_OK && o->status != CUCOPY_INPROGRESS)
        snprintf(o->error, sizeof(o->error), "%s", cucopy_last_error());
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
        if (FAIL_IF(n < 0, "progress: %s: %s", tc_status_name(n), cucopy_last_error()))
            return;
    }
}

static const char *const dir_names[] = {"H2D", "D2H", "D2D"};

/* One case per op: issued, completed exactly once with OK, not before an op
 * issued earlier on the same (ep, context, direction), data in place and
 * nothing written past it. */
static void check_ops(const char *what, int seed)
{
    unsigned char back[SLOT];
    int n = 0;
    for (int i = 0; i < 3; i++)
        n += cucopy_iface_progress(iface);
    CHECKF(n == 0, "%s: progress after everything finished reports %d completion(s)", what, n);
    for (int k = 0; k < nops; k++) {
        const struct op *o = &ops[k];
        tc_case_begin("%s: op %d (%s %s dev %d -> dev %d, %zu bytes, ep %d)", what, k,
                      o->get ? "get" : "put", dir_names[o->type->dir], o->type->src_dev,
                      o->type->dst_dev, o->len, o->ep);
        CHECKF(o->status == CUCOPY_OK || o->status == CUCOPY_INPROGRESS,
               "zcopy returned %s: %s", tc_status_name(o->status), o->error);
        if (o->immediate)
            CHECKF(o->c.fired == 0, "returned OK but its completion fired");
        else
            CHECKF(o->c.fired == 1 && o->c.comp.count == 0 && o->c.comp.status == CUCOPY_OK,
                   "completion fired %d times, count %d, status %s", o->c.fired,
                   o->c.comp.count, tc_status_name(o->c.comp.status));
        for (int j = 0; j < k; j++) {
            const struct op *a = &ops[j];
            /* Same op type: same context (the source's, or the device
             * side's), same direction, same destination device. */
            if (a->immediate || o->immediate || a->ep != o->ep || a->type != o->type ||
                a->c.fired != 1 || o->c.fired != 1)
                continue;
            if (a->c.order > o->c.order) {
                CHECKF(0, "completed before op %d, issued earlier on the same (ep, context, "
                          "direction)", j);
                break;
            }
        }
        tc_buf_read(dst_buf(o), o->slot, back, SLOT);
        CHECKF(memcmp(back, op_data(k, seed), o->len) == 0, "data differs");
        size_t i = o->len;
        while (i < SLOT && back[i] == FILL)
            i++;
        CHECKF(i == SLOT, "byte %zu past the end was written", i - o->len);
        tc_case_end();
    }
}

static void iface_flush_with_completion(void)
{
    prepare(1);
    issue_all();
    struct tc_comp f;
    tc_comp_init(&f, 1);
    tc_case_begin("iface flush with a completion");
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
    tc_case_end();
    check_ops("iface flush", 1);
}

static void ep_flush_with_completion(void)
{
    prepare(2);
    issue_all();
    struct tc_comp f[2];
    tc_case_begin("ep flush with a completion");
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
    tc_case_end();
    check_ops("ep flush", 2);
}

static void flush_without_completion(void)
{
    prepare(3);
    issue_all();
    double deadline = tc_now() + TIMEOUT_S;
    cucopy_status_t s;
    int n = 0;
    tc_case_begin("iface flush(NULL) until OK");
    while ((s = cucopy_iface_flush(iface, 0, NULL)) == CUCOPY_INPROGRESS && tc_now() < deadline)
        if (FAIL_IF((n = cucopy_iface_progress(iface)) < 0, "progress: %s", tc_status_name(n)))
            break;
    CHECK_STATUS(s, CUCOPY_OK);
    CHECKF(all_fired(), "iface flush(NULL) returned OK while op completions are pending");
    tc_case_end();
    check_ops("flush NULL", 3);

    prepare(4);
    issue_all();
    tc_case_begin("ep flush(NULL) until OK");
    for (int e = 0; e < 2; e++) {
        deadline = tc_now() + TIMEOUT_S;
        while ((s = cucopy_ep_flush(eps[e], 0, NULL)) == CUCOPY_INPROGRESS && tc_now() < deadline)
            if (FAIL_IF((n = cucopy_iface_progress(iface)) < 0, "progress: %s",
                        tc_status_name(n)))
                break;
        CHECK_STATUS(s, CUCOPY_OK);
        int pending = 0;
        for (int k = 0; k < nops; k++)
            pending += ops[k].ep == e && !ops[k].immediate && ops[k].c.fired == 0;
        CHECKF(pending == 0, "ep %d flush(NULL) returned OK with %d completion(s) pending", e,
               pending);
    }
    tc_case_end();
    check_ops("ep flush NULL", 4);
}

/* ep_destroy with copies outstanding: they still complete through the iface. */
static void ep_destroyed_with_ops_outstanding(void)
{
    prepare(5);
    issue_all();
    struct tc_comp f;
    tc_comp_init(&f, 1);
    tc_case_begin("ep destroyed with ops outstanding, then iface flush");
    CHECK_STATUS(cucopy_ep_destroy(eps[1]), CUCOPY_OK);
    eps[1] = NULL;
    cucopy_status_t s = cucopy_iface_flush(iface, 0, &f.comp);
    if (s == CUCOPY_OK) {
        CHECKF(all_fired(), "iface flush returned OK while op completions are still pending");
    } else {
        CHECK_STATUS(s, CUCOPY_INPROGRESS);
        progress_until(&f, NULL);
        CHECKF(f.fired == 1, "iface flush completion fired %d times", f.fired);
    }
    tc_case_end();
    check_ops("destroyed ep", 5);
    REQUIRE_OK(cucopy_ep_create(iface, &eps[1]));
}

/* A completion callback issues the next copy (callbacks may call cucopy). */
struct chain {
    struct tc_comp first;
    struct tc_comp next;
    cucopy_iov_t iov;
    uint64_t remote;
    int status;
    char error[200];
};

static void chain_fired(cucopy_completion_t *self)
{
    struct chain *ch = (struct chain *)((char *)self - offsetof(struct chain, first.comp));
    ch->first.fired++;
    ch->first.order = tc_next_seq();
    ch->status = cucopy_ep_put_zcopy(eps[0], &ch->iov, 1, ch->remote, &ch->next.comp);
    snprintf(ch->error, sizeof(ch->error), "%s", cucopy_last_error());
}

static void zcopy_from_callback(void)
{
    /* host_src slot 0 -> device 0 dst slot 0, then from the callback
     * device 0 dst slot 0 -> the last device's dst slot 1. */
    const struct tc_buf *mid = &dev_dst[0];
    const struct tc_buf *last = &dev_dst[td.device_count > 1 ? 1 : 0];
    const unsigned char *data = op_data(0, 6);
    unsigned char back[SLOT];
    struct chain ch;
    memset(&ch, 0, sizeof(ch));
    tc_comp_init(&ch.first, 1);
    tc_comp_init(&ch.next, 1);
    ch.first.comp.func = chain_fired;
    ch.iov.buffer = (void *)(uintptr_t)tc_buf_addr(mid, 0);
    ch.iov.length = SLOT;
    ch.remote = tc_buf_addr(last, SLOT);
    tc_buf_write(&host_src, 0, data, SLOT);
    tc_buf_set(mid, 0, FILL, 2 * SLOT);
    tc_buf_set(last, 0, FILL, 2 * SLOT);

    tc_case_begin("zcopy issued from a completion callback");
    cucopy_iov_t iov = {host_src.host, SLOT};
    cucopy_status_t s = cucopy_ep_put_zcopy(eps[0], &iov, 1, tc_buf_addr(mid, 0), &ch.first.comp);
    if (s == CUCOPY_OK)
        chain_fired(&ch.first.comp); /* finished at once: issue the next one here */
    else if (CHECK_STATUS(s, CUCOPY_INPROGRESS))
        progress_until(&ch.first, NULL);
    CHECKF(ch.first.fired == 1, "first completion fired %d times", ch.first.fired);
    CHECKF(ch.status == CUCOPY_OK || ch.status == CUCOPY_INPROGRESS,
           "zcopy from the callback returned %s: %s", tc_status_name(ch.status), ch.error);
    if (ch.status == CUCOPY_INPROGRESS)
        progress_until(&ch.next, NULL);
    else
        ch.next.fired = 1;
    CHECKF(ch.next.fired == 1 && ch.next.comp.status == CUCOPY_OK,
           "chained completion fired %d times, status %s", ch.next.fired,
           tc_status_name(ch.next.comp.status));
    tc_buf_read(last, SLOT, back, SLOT);
    CHECKF(memcmp(back, data, SLOT) == 0, "chained copy: data differs");
    tc_case_end();
}

/* A callback that flushes with NULL until OK, progressing in between: from
 * inside a callback a flush covers the copies only (it cannot wait for the
 * callback running it, nor for those queued behind it on this thread). */
struct flush_in_callback {
    struct tc_comp first;
    struct tc_comp second;
    cucopy_status_t iface_status;
    cucopy_status_t ep_status;
};

static void flush_from_callback_fired(cucopy_completion_t *self)
{
    struct flush_in_callback *f =
        (struct flush_in_callback *)((char *)self - offsetof(struct flush_in_callback, first.comp));
    f->first.fired++;
    double deadline = tc_now() + 10.0;
    while ((f->iface_status = cucopy_iface_flush(iface, 0, NULL)) == CUCOPY_INPROGRESS &&
           tc_now() < deadline)
        cucopy_iface_progress(iface); /* pops the second piece; its callback waits for us */
    f->ep_status = cucopy_ep_flush(eps[0], 0, NULL);
}

static void flush_from_callback(void)
{
    const unsigned char *data1 = op_data(0, 7);
    const unsigned char *data2 = op_data(1, 7);
    struct flush_in_callback f;
    memset(&f, 0, sizeof(f));
    tc_comp_init(&f.first, 1);
    tc_comp_init(&f.second, 1);
    f.first.comp.func = flush_from_callback_fired;
    tc_buf_write(&host_src, 0, data1, SLOT);
    tc_buf_write(&host_src, SLOT, data2, SLOT);

    tc_case_begin("flush(NULL) until OK from a completion callback");
    cucopy_iov_t iov1 = {host_src.host, SLOT};
    cucopy_iov_t iov2 = {(char *)host_src.host + SLOT, SLOT};
    cucopy_status_t s1 =
        cucopy_ep_put_zcopy(eps[0], &iov1, 1, tc_buf_addr(&dev_dst[0], 0), &f.first.comp);
    cucopy_status_t s2 =
        cucopy_ep_put_zcopy(eps[0], &iov2, 1, tc_buf_addr(&dev_dst[0], SLOT), &f.second.comp);
    CHECK_STATUS(s1, CUCOPY_INPROGRESS);
    CHECK_STATUS(s2, CUCOPY_INPROGRESS);
    progress_until(&f.first, &f.second);
    CHECKF(f.first.fired == 1 && f.second.fired == 1, "completions fired %d and %d times",
           f.first.fired, f.second.fired);
    CHECK_STATUS(f.iface_status, CUCOPY_OK);
    CHECK_STATUS(f.ep_status, CUCOPY_OK);
    CHECKF(f.second.order > f.first.order, "the second callback ran before the first returned");
    unsigned char back[SLOT];
    tc_buf_read(&dev_dst[0], 0, back, SLOT);
    CHECKF(memcmp(back, data1, SLOT) == 0, "first copy: data differs");
    tc_buf_read(&dev_dst[0], SLOT, back, SLOT);
    CHECKF(memcmp(back, data2, SLOT) == 0, "second copy: data differs");
    tc_case_end();
}

/* Nested: iface A's callback progresses iface B; B's callback flushes A with
 * NULL until OK. A's callback is still running below it on this thread, so
 * that flush too must cover the copies only. */
static struct {
    struct tc_comp a;
    struct tc_comp b;
    cucopy_iface_h ib;
    cucopy_status_t st;
} nest;

static void nested_b_fired(cucopy_completion_t *self)
{
    (void)self;
    nest.b.fired++;
    double deadline = tc_now() + 10.0;
    while ((nest.st = cucopy_iface_flush(iface, 0, NULL)) == CUCOPY_INPROGRESS &&
           tc_now() < deadline)
        cucopy_iface_progress(iface);
}

static void nested_a_fired(cucopy_completion_t *self)
{
    (void)self;
    nest.a.fired++;
    double deadline = tc_now() + 10.0;
    while (nest.b.fired == 0 && tc_now() < deadline)
        cucopy_iface_progress(nest.ib);
}

static void flush_from_nested_callback(cucopy_context_h ctx)
{
    cucopy_ep_h eb = NULL;
    tc_case_begin("flush(NULL) until OK from a nested callback of another iface");
    REQUIRE_OK(cucopy_iface_open(ctx, NULL, &nest.ib));
    REQUIRE_OK(cucopy_ep_create(nest.ib, &eb));
    tc_comp_init(&nest.a, 1);
    tc_comp_init(&nest.b, 1);
    nest.a.comp.func = nested_a_fired;
    nest.b.comp.func = nested_b_fired;
    cucopy_iov_t iov1 = {host_src.host, SLOT};
    cucopy_iov_t iov2 = {(char *)host_src.host + SLOT, SLOT};
    CHECK_STATUS(cucopy_ep_put_zcopy(eps[0], &iov1, 1, tc_buf_addr(&dev_dst[0], 0), &nest.a.comp),
                 CUCOPY_INPROGRESS);
    CHECK_STATUS(cucopy_ep_put_zcopy(eb, &iov2, 1, tc_buf_addr(&dev_dst[0], SLOT), &nest.b.comp),
                 CUCOPY_INPROGRESS);
    progress_until(&nest.a, NULL);
    CHECKF(nest.a.fired == 1 && nest.b.fired == 1, "completions fired %d and %d times",
           nest.a.fired, nest.b.fired);
    CHECK_STATUS(nest.st, CUCOPY_OK);
    CHECK_STATUS(cucopy_ep_destroy(eb), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_close(nest.ib), CUCOPY_OK);
    tc_case_end();
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
    int devices = tc_begin("test_interleave_flush", CUCOPY_MAX_DEVICES);
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
    ep_destroyed_with_ops_outstanding();
    zcopy_from_callback();
    flush_from_callback();
    flush_from_nested_callback(ctx);
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
