/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory handles (cucopy_mem_describe, cucopy_mem_reg's handles, the _memh
 * copies) and cucopy_ep_copy_batch:
 *  - a handle for every memory kind (pageable, pinned, device 0 and 1,
 *    managed, a program-created context's memory, cucopy_mem_reg'ed): put
 *    and get, short and zcopy, with handles on the buffer, the remote range
 *    or both, data verified, at offsets inside the handle's range;
 *  - bad input: describe NULL, length 0, overflow, NULL memh_p; a device
 *    range crossing its allocation's end (OUT_OF_RANGE); a copy whose range
 *    leaves its handle's (INVALID_PARAM), a released handle, a handle of
 *    another cucopy context, memory freed through cucopy_mem_free
 *    (INVALID_HANDLE): nothing copied in each case;
 *  - cross-context: device 0's handle with device 1's buffer (outside the
 *    range); a reset primary context: its memory's handle fails cleanly
 *    (INVALID_HANDLE), with the primary context inactive and active again;
 *  - context_destroy is BUSY while a described handle is held;
 *  - the batch: every direction in one call, host-host entries, mixed
 *    handles, zero-length entries, completion exactly once, OK without
 *    completion for host-only batches; bad input (count 0 or > max_iov,
 *    NULL copies, a NULL address, an invalid handle); NO_RESOURCE with
 *    nothing issued when the events are in use, then a retry that copies.
 */
#define _GNU_SOURCE
#include "calls.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEN ((size_t)64 << 10)
#define CLEN ((size_t)4096)

static cucopy_context_h ctx;
static cucopy_iface_h iface;
static cucopy_ep_h ep;
static int ndev;

static cucopy_memh_h describe(const struct tc_buf *b, size_t off, size_t len)
{
    cucopy_memh_h h = NULL;
    REQUIRE_OK(cucopy_mem_describe(ctx, (void *)(uintptr_t)tc_buf_addr(b, off), len, &h));
    REQUIRE(h != NULL);
    return h;
}

static void fill(const struct tc_buf *b, unsigned seed)
{
    tc_buf_write(b, 0, tc_pattern(b->size) + seed, b->size);
}

/* b's bytes [off, off+len) equal seed's pattern at src_off. */
static int same(const struct tc_buf *b, size_t off, unsigned seed, size_t src_off, size_t len)
{
    unsigned char *got = malloc(len);
    REQUIRE(got != NULL);
    tc_buf_read(b, off, got, len);
    int ok = memcmp(got, tc_pattern(src_off + len) + seed + src_off, len) == 0;
    free(got);
    return ok;
}

static void wait_on(cucopy_iface_h on, int st, struct tc_comp *c, const char *what)
{
    CHECKF(st == CUCOPY_OK || st == CUCOPY_INPROGRESS, "%s: %s: %s", what, tc_status_name(st),
           cucopy_last_error());
    if (st == CUCOPY_INPROGRESS)
        CHECKF(tc_wait(on, c, 10.0), "%s: completion did not fire", what);
}

static void wait_zcopy(int st, struct tc_comp *c, const char *what)
{
    wait_on(iface, st, c, what);
}

/* Copy CLEN bytes between a and b with handles in every combination and
 * every call, checking the data each time. */
static void copies_with_handles(struct tc_buf *a, struct tc_buf *b)
{
    cucopy_memh_h ha = describe(a, 0, a->size), hb = describe(b, 0, b->size);
    const size_t aoff = 512, boff = 1024;
    for (int combo = 0; combo < 4; combo++) {
        cucopy_memh_h ma = (combo & 1) ? ha : NULL, mb = (combo & 2) ? hb : NULL;
        for (int way = 0; way < 4; way++) {
            int put = way & 1, zcopy = way & 2;
            unsigned seed = (unsigned)(combo * 4 + way + 1);
            /* put: a -> b; get: b -> a (the local buffer is always a) */
            const struct tc_buf *src = put ? a : b, *dst = put ? b : a;
            size_t soff = put ? aoff : boff, doff = put ? boff : aoff;
            fill(src, seed);
            tc_buf_set(dst, 0, 0xee, dst->size);
            tc_case_begin("%s -> %s, %s %s, memh on %s%s", tc_mem_kind_name(src->kind),
                          tc_mem_kind_name(dst->kind), put ? "put" : "get",
                          zcopy ? "zcopy" : "short", ma ? "buffer " : "",
                          mb ? "remote" : (ma ? "" : "neither"));
            void *local = (void *)(uintptr_t)tc_buf_addr(a, aoff);
            uint64_t remote = tc_buf_addr(b, boff);
            int st;
            if (zcopy) {
                struct tc_comp c;
                tc_comp_init(&c, 1);
                cucopy_iov_memh_t iov[2] = {{local, CLEN / 2, ma},
                                            {(char *)local + CLEN / 2, CLEN / 2, ma}};
                st = put ? cucopy_ep_put_zcopy_memh(ep, iov, 2, remote, mb, &c.comp)
                         : cucopy_ep_get_zcopy_memh(ep, iov, 2, remote, mb, &c.comp);
                wait_zcopy(st, &c, "zcopy");
            } else {
                st = put ? cucopy_ep_put_short_memh(ep, local, ma, CLEN, remote, mb)
                         : cucopy_ep_get_short_memh(ep, local, ma, CLEN, remote, mb);
                CHECKF(st == CUCOPY_OK, "short: %s: %s", tc_status_name(st), cucopy_last_error());
            }
            CHECKF(same(dst, doff, seed, soff, CLEN), "data differs");
            unsigned char before;
            tc_buf_read(dst, doff - 1, &before, 1);
            CHECKF(before == 0xee, "a byte before the range was written");
            tc_case_end();
        }
    }
    CHECK_STATUS(cucopy_mem_dereg(ctx, ha), CUCOPY_OK);
    CHECK_STATUS(cucopy_mem_dereg(ctx, hb), CUCOPY_OK);
}

static void phase_kinds(void)
{
    struct tc_buf dev0, other;
    tc_buf_alloc(&dev0, TC_MEM_DEV0, LEN);
    const enum tc_mem_kind kinds[] = {TC_MEM_PAGEABLE, TC_MEM_PINNED, TC_MEM_DEV0, TC_MEM_DEV1,
                                      TC_MEM_MANAGED};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        if (kinds[k] == TC_MEM_DEV1 && ndev < 2)
            continue;
        tc_buf_alloc(&other, kinds[k], LEN);
        copies_with_handles(&other, &dev0);
        tc_buf_free(&other);
    }
    /* A program-created context's memory. */
    cdContext user = NULL;
    REQUIRE(td.cuCtxCreate(&user, 0, 0) == CD_SUCCESS);
    cdContext popped = NULL;
    REQUIRE(td.cuCtxPopCurrent(&popped) == CD_SUCCESS);
    tc_buf_alloc_in(&other, user, LEN);
    struct tc_buf host;
    tc_buf_alloc(&host, TC_MEM_PAGEABLE, LEN);
    copies_with_handles(&host, &other);
    tc_flush(iface);
    CHECK_STATUS(cucopy_iface_release_context(iface, tc_ctx_id(user)), CUCOPY_OK);
    tc_buf_free(&other);
    REQUIRE(td.cuCtxDestroy(user) == CD_SUCCESS);
    /* cucopy_mem_reg's handle describes its range too. */
    cucopy_memh_h reg = NULL;
    tc_push(tc_primary(0));
    REQUIRE_OK(cucopy_mem_reg(ctx, host.host, LEN, 0, &reg));
    tc_pop(tc_primary(0));
    fill(&host, 9);
    tc_case_begin("mem_reg's handle: put_short host -> dev0");
    CHECK_STATUS(cucopy_ep_put_short_memh(ep, host.host + 64, reg, CLEN, tc_buf_addr(&dev0, 0),
                                          NULL),
                 CUCOPY_OK);
    CHECK(same(&dev0, 0, 9, 64, CLEN));
    tc_case_end();
    CHECK_STATUS(cucopy_mem_dereg(ctx, reg), CUCOPY_OK);
    tc_buf_free(&host);
    tc_buf_free(&dev0);
}

static void phase_bad_input(void)
{
    struct tc_buf dev0, dev1, host;
    tc_buf_alloc(&dev0, TC_MEM_DEV0, LEN);
    tc_buf_alloc(&dev1, ndev > 1 ? TC_MEM_DEV1 : TC_MEM_DEV0, LEN);
    tc_buf_alloc(&host, TC_MEM_PAGEABLE, LEN);
    cucopy_memh_h h = NULL;
    CHECK_STATUS(cucopy_mem_describe(ctx, NULL, 64, &h), CUCOPY_ERR_INVALID_PARAM);
    CHECK(h == NULL);
    CHECK_STATUS(cucopy_mem_describe(ctx, host.host, 0, &h), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_mem_describe(ctx, (void *)(uintptr_t)-64, 128, &h),
                 CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_mem_describe(ctx, host.host, 64, NULL), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_mem_describe(NULL, host.host, 64, &h), CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(cucopy_mem_describe(ctx, (void *)(uintptr_t)tc_buf_addr(&dev0, 64), LEN, &h),
                 CUCOPY_ERR_OUT_OF_RANGE);

    /* Ranges outside the handle's: nothing copied. */
    cucopy_memh_h hd = describe(&dev0, 4096, 8192), hh = describe(&host, 0, LEN);
    fill(&host, 3);
    tc_buf_set(&dev0, 0, 0xee, LEN);
    void *src = host.host;
    CHECK_STATUS(cucopy_ep_put_short_memh(ep, src, hh, 64, tc_buf_addr(&dev0, 0), hd),
                 CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_ep_put_short_memh(ep, src, hh, 8192, tc_buf_addr(&dev0, 8192), hd),
                 CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_ep_put_short_memh(ep, host.host + LEN - 32, hh, 64,
                                          tc_buf_addr(&dev0, 4096), hd),
                 CUCOPY_ERR_INVALID_PARAM);
    cucopy_iov_memh_t iov[2] = {{src, 64, hh}, {host.host + 64, 64, hd}};
    struct tc_comp c;
    tc_comp_init(&c, 1);
    CHECK_STATUS(cucopy_ep_put_zcopy_memh(ep, iov, 2, tc_buf_addr(&dev0, 4096), hd, &c.comp),
                 CUCOPY_ERR_INVALID_PARAM); /* iov[1]: host memory with dev0's handle */
    CHECK_STATUS(cucopy_ep_put_zcopy_memh(ep, iov, 1, tc_buf_addr(&dev0, 8192 + 4096 - 32), hd,
                                          &c.comp),
                 CUCOPY_ERR_INVALID_PARAM);
    /* Cross-context: device 0's handle for device 1's buffer. */
    CHECK_STATUS(cucopy_ep_put_short_memh(ep, src, NULL, 64, tc_buf_addr(&dev1, 4096), hd),
                 CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_ep_put_zcopy_memh(ep, iov, 1, 0, hd, &c.comp), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_ep_put_zcopy_memh(NULL, iov, 1, tc_buf_addr(&dev0, 4096), hd, &c.comp),
                 CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(cucopy_ep_put_zcopy_memh(ep, NULL, 1, tc_buf_addr(&dev0, 4096), hd, &c.comp),
                 CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_ep_put_zcopy_memh(ep, iov, 0, tc_buf_addr(&dev0, 4096), hd, &c.comp),
                 CUCOPY_ERR_INVALID_PARAM);

    /* Released, invented and another context's handles. */
    cucopy_memh_h gone = describe(&host, 0, 128);
    CHECK_STATUS(cucopy_mem_dereg(ctx, gone), CUCOPY_OK);
    CHECK_STATUS(cucopy_mem_dereg(ctx, gone), CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(cucopy_ep_put_short_memh(ep, src, gone, 64, tc_buf_addr(&dev0, 4096), NULL),
                 CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(cucopy_ep_put_short_memh(ep, src, (cucopy_memh_h)(uintptr_t)0x12345, 64,
                                          tc_buf_addr(&dev0, 4096), NULL),
                 CUCOPY_ERR_INVALID_HANDLE);
    cucopy_context_h ctx2 = NULL;
    REQUIRE_OK(cucopy_context_create(NULL, &ctx2));
    cucopy_memh_h foreign = NULL;
    REQUIRE_OK(cucopy_mem_describe(ctx2, host.host, LEN, &foreign));
    CHECK_STATUS(cucopy_ep_put_short_memh(ep, src, foreign, 64, tc_buf_addr(&dev0, 4096), NULL),
                 CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(cucopy_mem_dereg(ctx, foreign), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_context_destroy(ctx2), CUCOPY_ERR_BUSY);
    CHECK_STATUS(cucopy_mem_dereg(ctx2, foreign), CUCOPY_OK);
    CHECK_STATUS(cucopy_context_destroy(ctx2), CUCOPY_OK);

    /* Freed through cucopy_mem_free. */
    cucopy_mem_alloc_params_t ap = {.field_mask = CUCOPY_MEM_ALLOC_PARAM_LENGTH |
                                                  CUCOPY_MEM_ALLOC_PARAM_DEVICE |
                                                  CUCOPY_MEM_ALLOC_PARAM_FLAGS,
                                    .length = LEN,
                                    .device = 0,
                                    .flags = CUCOPY_MEM_ALLOC_FLAG_ACTIVATE};
    void *mine = NULL;
    REQUIRE_OK(cucopy_mem_alloc(ctx, &ap, &mine));
    cucopy_memh_h hm = NULL;
    REQUIRE_OK(cucopy_mem_describe(ctx, (char *)mine + 64, 128, &hm));
    CHECK_STATUS(cucopy_ep_put_short_memh(ep, src, NULL, 64, (uint64_t)(uintptr_t)mine + 64, hm),
                 CUCOPY_OK);
    CHECK_STATUS(cucopy_mem_free(ctx, mine), CUCOPY_OK);
    CHECK_STATUS(cucopy_ep_put_short_memh(ep, src, NULL, 64, (uint64_t)(uintptr_t)mine + 64, hm),
                 CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(cucopy_mem_dereg(ctx, hm), CUCOPY_OK);

    tc_case_begin("nothing was copied by the refused calls");
    unsigned char got[8192];
    tc_buf_read(&dev0, 0, got, sizeof(got));
    int untouched = 1;
    for (size_t i = 0; i < sizeof(got); i++)
        untouched &= got[i] == 0xee;
    CHECK(untouched);
    tc_case_end();
    tc_flush(iface);
    CHECK_STATUS(cucopy_mem_dereg(ctx, hd), CUCOPY_OK);
    CHECK_STATUS(cucopy_mem_dereg(ctx, hh), CUCOPY_OK);
    tc_buf_free(&host);
    tc_buf_free(&dev1);
    tc_buf_free(&dev0);
}

/* The program resets device 0's primary context: handles to its memory
 * fail cleanly, whether the context stays inactive or is active again. */
static void phase_reset(void)
{
    struct tc_buf host;
    tc_buf_alloc(&host, TC_MEM_PAGEABLE, LEN);
    for (int again = 0; again < 2; again++) {
        if (!tc_primary_active(0))
            (void)tc_primary_retain(0); /* the program activates it again */
        struct tc_buf dev0;
        tc_buf_alloc(&dev0, TC_MEM_DEV0, LEN);
        cucopy_memh_h h = describe(&dev0, 0, LEN);
        CHECK_STATUS(cucopy_ep_put_short_memh(ep, host.host, NULL, 64, tc_buf_addr(&dev0, 0), h),
                     CUCOPY_OK);
        tc_flush(iface);
        uint64_t addr = tc_buf_addr(&dev0, 0);
        tc_primary_reset(0); /* frees dev0's memory with the context */
        if (again)
            (void)tc_primary_retain(0); /* active again, under a new id */
        CHECK_STATUS(cucopy_ep_put_short_memh(ep, host.host, NULL, 64, addr, h),
                     CUCOPY_ERR_INVALID_HANDLE);
        struct tc_comp c;
        tc_comp_init(&c, 1);
        cucopy_iov_memh_t iov = {host.host, 64, NULL};
        CHECK_STATUS(cucopy_ep_put_zcopy_memh(ep, &iov, 1, addr, h, &c.comp),
                     CUCOPY_ERR_INVALID_HANDLE);
        CHECK(c.fired == 0);
        CHECK_STATUS(cucopy_mem_dereg(ctx, h), CUCOPY_OK);
    }
    tc_buf_free(&host);
}

static void phase_batch(void)
{
    struct tc_buf dev0, dev1, host, host2;
    tc_buf_alloc(&dev0, TC_MEM_DEV0, LEN);
    tc_buf_alloc(&dev1, ndev > 1 ? TC_MEM_DEV1 : TC_MEM_DEV0, LEN);
    tc_buf_alloc(&host, TC_MEM_PAGEABLE, LEN);
    tc_buf_alloc(&host2, TC_MEM_PINNED, LEN);
    fill(&host, 5);
    tc_buf_set(&dev0, 0, 0xee, LEN);
    tc_buf_set(&dev1, 0, 0xee, LEN);
    tc_buf_set(&host2, 0, 0xee, LEN);
    cucopy_memh_h h0 = describe(&dev0, 0, LEN);
    /* 16 x 8 B host -> dev0 (one run), dev0 -> dev1, dev0 -> host2, a
     * host -> host2 entry, a zero-length one; handles on some. */
    cucopy_copy_t cp[24];
    int n = 0;
    for (int i = 0; i < 16; i++)
        cp[n++] = (cucopy_copy_t){(void *)(uintptr_t)tc_buf_addr(&dev0, 64 * (size_t)i),
                                  host.host + 8 * i, 8, (i & 1) ? h0 : NULL, NULL};
    cp[n++] = (cucopy_copy_t){NULL, NULL, 0, NULL, NULL};
    cp[n++] = (cucopy_copy_t){(void *)(uintptr_t)tc_buf_addr(&dev1, 0),
                              (void *)(uintptr_t)tc_buf_addr(&dev0, 0), 8, NULL, h0};
    cp[n++] = (cucopy_copy_t){host2.host + 128, (void *)(uintptr_t)tc_buf_addr(&dev0, 64), 8,
                              NULL, h0};
    cp[n++] = (cucopy_copy_t){host2.host + 256, host.host + 1000, 100, NULL, NULL};
    struct tc_comp c;
    tc_comp_init(&c, 1);
    int st = cucopy_ep_copy_batch(ep, cp, (size_t)n, &c.comp);
    wait_zcopy(st, &c, "batch");
    /* The later entries read dev0, which earlier entries of the same batch
     * write: not allowed in one batch (no set order); they are checked after
     * a second batch below instead. Here: the host -> dev0 entries. */
    tc_case_begin("batch: 16 x 8 B host -> dev0");
    int ok = 1;
    for (int i = 0; i < 16; i++)
        ok &= same(&dev0, 64 * (size_t)i, 5, 8 * (size_t)i, 8);
    CHECK(ok);
    CHECK(same(&host2, 256, 5, 1000, 100));
    tc_case_end();
    for (int k = 0; k < 3; k++)
        cucopy_iface_progress(iface);
    CHECKF(c.fired == 1, "completion fired %d times", c.fired);

    tc_case_begin("batch: dev0 -> dev1 and dev0 -> pinned host, after the batch that wrote dev0");
    tc_comp_init(&c, 1);
    st = cucopy_ep_copy_batch(ep, cp + 17, 2, &c.comp);
    wait_zcopy(st, &c, "batch 2");
    CHECK(same(&dev1, 0, 5, 0, 8));
    CHECK(same(&host2, 128, 5, 8, 8));
    tc_case_end();

    tc_case_begin("batch: host-only entries finish at once");
    tc_comp_init(&c, 1);
    CHECK_STATUS(cucopy_ep_copy_batch(ep, cp + 19, 1, &c.comp), CUCOPY_OK);
    CHECK(c.fired == 0);
    CHECK_STATUS(cucopy_ep_copy_batch(ep, cp + 16, 1, &c.comp), CUCOPY_OK);
    tc_case_end();

    /* Bad input: nothing issued. */
    cucopy_iface_attr_t attr = {.field_mask = CUCOPY_IFACE_ATTR_MAX_IOV};
    REQUIRE_OK(cucopy_iface_query(iface, &attr));
    cucopy_copy_t bad[2] = {cp[0], {(void *)(uintptr_t)tc_buf_addr(&dev0, 0), NULL, 8, NULL, NULL}};
    CHECK_STATUS(cucopy_ep_copy_batch(ep, cp, 0, &c.comp), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_ep_copy_batch(ep, NULL, 1, &c.comp), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_ep_copy_batch(ep, cp, attr.max_iov + 1, &c.comp),
                 CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_ep_copy_batch(ep, bad, 2, &c.comp), CUCOPY_ERR_INVALID_PARAM);
    bad[1] = cp[1];
    bad[1].dst_memh = (cucopy_memh_h)(uintptr_t)0x999;
    CHECK_STATUS(cucopy_ep_copy_batch(ep, bad, 2, &c.comp), CUCOPY_ERR_INVALID_HANDLE);
    bad[1].dst_memh = h0;
    bad[1].dst = (void *)(uintptr_t)tc_buf_addr(&dev1, 0); /* outside h0 */
    CHECK_STATUS(cucopy_ep_copy_batch(ep, bad, 2, &c.comp), CUCOPY_ERR_INVALID_PARAM);
    CHECK(c.fired == 0);

    CHECK_STATUS(cucopy_mem_dereg(ctx, h0), CUCOPY_OK);
    tc_buf_free(&host2);
    tc_buf_free(&host);
    tc_buf_free(&dev1);
    tc_buf_free(&dev0);
}

/* A batch on an iface whose one event per context is in use: NO_RESOURCE
 * with nothing issued, then after progress the retry copies. */
static void phase_batch_no_resource(void)
{
    cucopy_iface_params_t p = {.field_mask = CUCOPY_IFACE_PARAM_MAX_EVENTS, .max_events = 1};
    cucopy_iface_h small = NULL;
    cucopy_ep_h sep = NULL;
    REQUIRE_OK(cucopy_iface_open(ctx, &p, &small));
    REQUIRE_OK(cucopy_ep_create(small, &sep));
    struct tc_buf dev0, host;
    tc_buf_alloc(&dev0, TC_MEM_DEV0, LEN);
    tc_buf_alloc(&host, TC_MEM_PINNED, LEN);
    fill(&host, 7);
    tc_buf_set(&dev0, 0, 0xee, LEN);
    struct tc_comp first, c;
    tc_comp_init(&first, 1);
    cucopy_iov_t big = {host.host, LEN / 2};
    int st = cucopy_ep_put_zcopy(sep, &big, 1, tc_buf_addr(&dev0, 0), &first.comp);
    CHECK_STATUS(st, CUCOPY_INPROGRESS);
    cucopy_copy_t cp[2] = {
        {(void *)(uintptr_t)tc_buf_addr(&dev0, LEN / 2), host.host + LEN / 2, 8, NULL, NULL},
        {(void *)(uintptr_t)tc_buf_addr(&dev0, LEN / 2 + 64), host.host + LEN / 2 + 64, 8, NULL,
         NULL}};
    tc_comp_init(&c, 1);
    int tries = 0;
    while ((st = cucopy_ep_copy_batch(sep, cp, 2, &c.comp)) == CUCOPY_ERR_NO_RESOURCE) {
        if (tries++ == 0) {
            tc_case_begin("batch: NO_RESOURCE issued nothing");
            CHECK(c.fired == 0);
            CHECK(!same(&dev0, LEN / 2, 7, LEN / 2, 8) || first.fired);
            tc_case_end();
        }
        cucopy_iface_progress(small);
    }
    CHECKF(tries > 0 || tc_fake.violations == NULL, "the batch never met the limit (%d)", tries);
    wait_on(small, st, &c, "batch retried");
    if (st == CUCOPY_INPROGRESS || st == CUCOPY_OK) {
        tc_case_begin("batch: the retry copied");
        CHECK(same(&dev0, LEN / 2, 7, LEN / 2, 8));
        CHECK(same(&dev0, LEN / 2 + 64, 7, LEN / 2 + 64, 8));
        tc_case_end();
    }
    CHECK(tc_wait(small, &first, 10.0));
    CHECK_STATUS(cucopy_iface_close(small), CUCOPY_OK);
    tc_buf_free(&host);
    tc_buf_free(&dev0);
}

int main(void)
{
    ndev = tc_begin("test_memh", CUCOPY_MAX_DEVICES);
    REQUIRE_OK(cucopy_context_create(NULL, &ctx));
    REQUIRE_OK(cucopy_iface_open(ctx, NULL, &iface));
    REQUIRE_OK(cucopy_ep_create(iface, &ep));

    phase_kinds();
    phase_bad_input();
    phase_batch();
    phase_batch_no_resource();
    phase_reset();

    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);
    CHECK_STATUS(cucopy_context_destroy(ctx), CUCOPY_OK);
    if (tc_fake.violations != NULL)
        CHECKF(tc_fake.violations() == 0, "%ld fake-driver violation(s)", tc_fake.violations());
    return tc_finish();
}
