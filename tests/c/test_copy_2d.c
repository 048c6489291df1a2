/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Strided copies (cucopy_ep_copy_2d), through the C ABI:
 *  - data for every pair of memory kinds (pageable, pinned, device 0,
 *    device 1: peer, managed; host-host runs on the CPU), rows of 1, 8, 31,
 *    32, 33, 64 and 2048 bytes (around CUCOPY_2D_PACK_BELOW's default), both
 *    sides strided, one side packed (pitch == width: an MPI gather or
 *    scatter), both packed (a contiguous copy), and one row with a pitch
 *    below the width; every byte of the destination buffer is checked, so
 *    the holes between rows and the bytes around the span keep their canary;
 *  - several entries in one call, zero-sized entries skipped, completion
 *    exactly once, OK without completion for host-only calls;
 *  - bad input, nothing copied and no completion: NULL copies, count 0 or
 *    above max_iov, a NULL address, a pitch below the width, spans that
 *    overflow, an invalid handle, another cucopy context's handle, a handle
 *    whose range does not hold the
 *    span, a span past the end of its device allocation;
 *  - NO_RESOURCE with nothing issued when the events are in use, then a
 *    retry that copies;
 *  - a fault injected on cuMemcpy2DAsync (fake driver): the call fails, no
 *    completion, the destination untouched;
 *  - the pack path (rows below CUCOPY_2D_PACK_BELOW between device and
 *    packed pinned memory, counted with the fake's call counters in every
 *    case above): its scratch buffer made once and freed at iface close;
 *    when cuMemAlloc fails, plain 2-D copies with the same data, and no
 *    second attempt. CTest runs it again with CUCOPY_2D_PACK_BELOW=0.
 */
#define _GNU_SOURCE
#include "calls.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF ((size_t)48 << 10)
#define CANARY 0xee

static cucopy_context_h ctx;
static cucopy_iface_h iface;
static cucopy_ep_h ep;
static int ndev;

static void *at(const struct tc_buf *b, size_t off)
{
    return (void *)(uintptr_t)tc_buf_addr(b, off);
}

static void wait_on(cucopy_iface_h on, int st, struct tc_comp *c, const char *what)
{
    CHECKF(st == CUCOPY_OK || st == CUCOPY_INPROGRESS, "%s: %s: %s", what, tc_status_name(st),
           cucopy_last_error());
    if (st == CUCOPY_INPROGRESS)
        CHECKF(tc_wait(on, c, 10.0), "%s: completion did not fire", what);
}

/* The whole of dst (BUF bytes) is what a copy of e (offsets doff, soff into
 * dst and src, src filled with seed's pattern) leaves in a CANARY-filled
 * buffer: the rows copied, every other byte CANARY. */
static int verify(const struct tc_buf *dst, size_t doff, size_t soff, const cucopy_copy_2d_t *e,
                  unsigned seed)
{
    unsigned char *got = malloc(BUF);
    REQUIRE(got != NULL);
    tc_buf_read(dst, 0, got, BUF);
    const unsigned char *pat = tc_pattern(BUF) + seed;
    int bad = 0;
    for (size_t r = 0; r < e->height && !bad; r++)
        bad = memcmp(got + doff + r * e->dst_pitch, pat + soff + r * e->src_pitch, e->width) != 0;
    /* Clear the rows; everything left must be the canary. */
    for (size_t r = 0; r < e->height && !bad; r++)
        memset(got + doff + r * e->dst_pitch, CANARY, e->width);
    for (size_t i = 0; i < BUF && !bad; i++)
        bad = got[i] != CANARY;
    free(got);
    return !bad;
}

/* CUCOPY_2D_PACK_BELOW as the library reads it (default 32). */
static size_t pack_below = 32;

/* A strided entry takes the pack path: rows narrower than pack_below
 * between device memory (not managed) and pinned host memory whose rows
 * are packed. */
static int packs(enum tc_mem_kind dst, size_t dpitch, enum tc_mem_kind src, size_t spitch,
                 size_t width)
{
    int dev_src = src == TC_MEM_DEV0 || src == TC_MEM_DEV1;
    int dev_dst = dst == TC_MEM_DEV0 || dst == TC_MEM_DEV1;
    if (width >= pack_below)
        return 0;
    return (dev_src && dst == TC_MEM_PINNED && dpitch == width) ||
           (dev_dst && src == TC_MEM_PINNED && spitch == width);
}

/* dst's bytes [off, off + len) all hold the canary. */
static int untouched(const struct tc_buf *dst, size_t off, size_t len)
{
    unsigned char *got = malloc(len);
    REQUIRE(got != NULL);
    tc_buf_read(dst, off, got, len);
    int same = 1;
    for (size_t i = 0; i < len; i++)
        same &= got[i] == CANARY;
    free(got);
    return same;
}

/* One entry from src (at soff) to dst (at doff), checked byte for byte. */
static int copy_one(const struct tc_buf *dst, size_t doff, size_t dpitch, const struct tc_buf *src,
                    size_t soff, size_t spitch, size_t width, size_t height, unsigned seed)
{
    tc_buf_write(src, 0, tc_pattern(BUF) + seed, BUF);
    tc_buf_set(dst, 0, CANARY, BUF);
    cucopy_copy_2d_t e = {at(dst, doff), dpitch, at(src, soff), spitch, width, height, NULL, NULL};
    struct tc_comp c;
    tc_comp_init(&c, 1);
    long calls2d = tc_fake.calls != NULL ? tc_fake.calls("cuMemcpy2DAsync") : 0;
    long calls1d = tc_fake.calls != NULL ? tc_fake.calls("cuMemcpyAsync") : 0;
    int st = cucopy_ep_copy_2d(ep, &e, 1, &c.comp);
    wait_on(iface, st, &c, "copy_2d");
    if (tc_fake.calls != NULL) {
        /* One cuMemcpy2DAsync for strided rows between GPU-side memory, plus
         * one cuMemcpyAsync on the pack path; a contiguous entry (one row,
         * or both pitches the width) is a plain copy, host-host rows a CPU
         * copy. */
        int cpu = src->kind <= TC_MEM_PINNED && dst->kind <= TC_MEM_PINNED;
        int flat = height == 1 || (dpitch == width && spitch == width);
        int pack = !cpu && !flat && packs(dst->kind, dpitch, src->kind, spitch, width);
        long want2d = cpu || flat ? 0 : 1;
        long want1d = flat && !cpu ? 1 : pack;
        long got2d = tc_fake.calls("cuMemcpy2DAsync") - calls2d;
        long got1d = tc_fake.calls("cuMemcpyAsync") - calls1d;
        FAIL_IF(got2d != want2d || got1d != want1d,
                "%s -> %s, %zu x %zu B: %ld cuMemcpy2DAsync and %ld cuMemcpyAsync calls, want "
                "%ld and %ld",
                tc_mem_kind_name(src->kind), tc_mem_kind_name(dst->kind), height, width, got2d,
                got1d, want2d, want1d);
    }
    if (st == CUCOPY_OK)
        CHECKF(c.fired == 0, "an OK copy fired its completion");
    for (int k = 0; k < 2; k++)
        cucopy_iface_progress(iface);
    CHECKF(st != CUCOPY_INPROGRESS || c.fired == 1, "completion fired %d times", c.fired);
    int ok = verify(dst, doff, soff, &e, seed);
    return FAIL_IF(!ok, "%zu x %zu B, pitches dst %zu src %zu: data or canary differs", height,
                   width, dpitch, spitch) == 0;
}

static const size_t widths[] = {1, 8, 31, 32, 33, 64, 2048};

static void phase_matrix(void)
{
    enum tc_mem_kind kinds[] = {TC_MEM_PAGEABLE, TC_MEM_PINNED, TC_MEM_DEV0, TC_MEM_DEV1,
                                TC_MEM_MANAGED};
    struct tc_buf bufs[2][5];
    int nk = 0;
    for (int k = 0; k < 5; k++) {
        if (kinds[k] == TC_MEM_DEV1 && ndev < 2)
            continue;
        kinds[nk] = kinds[k];
        tc_buf_alloc(&bufs[0][nk], kinds[k], BUF);
        tc_buf_alloc(&bufs[1][nk], kinds[k], BUF);
        nk++;
    }
    unsigned seed = 1;
    for (int s = 0; s < nk; s++)
        for (int d = 0; d < nk; d++) {
            const struct tc_buf *src = &bufs[0][s], *dst = &bufs[1][d];
            tc_case_begin("copy_2d %s -> %s", tc_mem_kind_name(kinds[s]),
                          tc_mem_kind_name(kinds[d]));
            for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
                size_t wd = widths[w];
                size_t h = wd >= 2048 ? 5 : 33;
                seed = (seed + 7) % 200;
                copy_one(dst, 16, wd + 24, src, 40, wd + 8, wd, h, seed);    /* both strided */
                copy_one(dst, 0, wd, src, 8, 3 * wd + 5, wd, h, seed + 1);   /* gather */
                copy_one(dst, 24, 2 * wd + 1, src, 0, wd, wd, h, seed + 2);  /* scatter */
                copy_one(dst, 8, wd, src, 16, wd, wd, h, seed + 3);          /* contiguous */
                copy_one(dst, 100, 0, src, 50, wd / 2, wd, 1, seed + 4);     /* one row */
            }
            tc_case_end();
        }
    for (int k = 0; k < nk; k++) {
        tc_buf_free(&bufs[0][k]);
        tc_buf_free(&bufs[1][k]);
    }
}

/* Several entries in one call, in every direction, with zero-sized ones. */
static void phase_entries(void)
{
    struct tc_buf dev0, dev1, pinned, host, out;
    tc_buf_alloc(&dev0, TC_MEM_DEV0, BUF);
    tc_buf_alloc(&dev1, ndev > 1 ? TC_MEM_DEV1 : TC_MEM_DEV0, BUF);
    tc_buf_alloc(&pinned, TC_MEM_PINNED, BUF);
    tc_buf_alloc(&host, TC_MEM_PAGEABLE, BUF);
    tc_buf_alloc(&out, TC_MEM_PINNED, BUF);
    tc_buf_write(&dev0, 0, tc_pattern(BUF) + 3, BUF);
    tc_buf_write(&host, 0, tc_pattern(BUF) + 3, BUF);
    tc_buf_set(&dev1, 0, CANARY, BUF);
    tc_buf_set(&pinned, 0, CANARY, BUF);
    tc_buf_set(&out, 0, CANARY, BUF);
    /* Disjoint destinations: dev0 -> dev1 (peer), dev0 -> pinned, host ->
     * out (CPU), two skipped entries. */
    cucopy_copy_2d_t e[5] = {
        {at(&dev1, 0), 64, at(&dev0, 0), 256, 8, 100, NULL, NULL},
        {NULL, 0, NULL, 0, 0, 7, NULL, NULL},
        {at(&pinned, 0), 8, at(&dev0, 0), 256, 8, 100, NULL, NULL},
        {at(&out, 0), 128, at(&host, 0), 100, 100, 50, NULL, NULL},
        {NULL, 0, NULL, 0, 9, 0, NULL, NULL},
    };
    struct tc_comp c;
    tc_comp_init(&c, 1);
    int st = cucopy_ep_copy_2d(ep, e, 5, &c.comp);
    wait_on(iface, st, &c, "entries");
    for (int k = 0; k < 3; k++)
        cucopy_iface_progress(iface);
    tc_case_begin("copy_2d: three entries in one call (peer, D2H, host-host), skipped entries");
    CHECK_STATUS(st, CUCOPY_INPROGRESS);
    CHECKF(c.fired == 1, "completion fired %d times", c.fired);
    CHECK(verify(&dev1, 0, 0, &e[0], 3));
    CHECK(verify(&pinned, 0, 0, &e[2], 3));
    CHECK(verify(&out, 0, 0, &e[3], 3));
    tc_case_end();

    /* A plain zcopy after 2-D calls on the same endpoint: the last 7 bytes of
     * an allocation (a 2-D entry's rows or pitches left behind in the
     * library's reused issue buffer made its range cross the allocation's
     * end: seen through the MPI interposer). */
    tc_case_begin("copy_2d: a zcopy after a 2-D copy (the last bytes of an allocation)");
    tc_comp_init(&c, 1);
    cucopy_iov_t iov = {at(&out, 0), 7};
    st = cucopy_ep_get_zcopy(ep, &iov, 1, tc_buf_addr(&dev0, BUF - 7), &c.comp);
    wait_on(iface, st, &c, "zcopy after copy_2d");
    unsigned char tail[7];
    tc_buf_read(&out, 0, tail, sizeof tail);
    CHECK(memcmp(tail, tc_pattern(BUF) + 3 + BUF - 7, sizeof tail) == 0);
    tc_case_end();

    tc_case_begin("copy_2d: host-only and empty calls finish at once");
    tc_comp_init(&c, 1);
    CHECK_STATUS(cucopy_ep_copy_2d(ep, e + 3, 1, &c.comp), CUCOPY_OK);
    CHECK_STATUS(cucopy_ep_copy_2d(ep, e + 4, 1, &c.comp), CUCOPY_OK);
    CHECK_STATUS(cucopy_ep_copy_2d(ep, e + 1, 1, NULL), CUCOPY_OK);
    cucopy_iface_progress(iface);
    CHECK(c.fired == 0);
    tc_case_end();
    tc_buf_free(&out);
    tc_buf_free(&host);
    tc_buf_free(&pinned);
    tc_buf_free(&dev1);
    tc_buf_free(&dev0);
}

/* A bad call: the status, a message naming what is wrong, no completion,
 * dst untouched. */
static void bad_call(const cucopy_copy_2d_t *e, size_t count, int expected, const char *needle,
                     const struct tc_buf *dst, const char *what)
{
    struct tc_comp c;
    tc_comp_init(&c, 1);
    tc_case_begin("copy_2d bad input: %s", what);
    CHECK_STATUS(cucopy_ep_copy_2d(ep, e, count, &c.comp), expected);
    if (needle != NULL)
        CHECKF(strstr(cucopy_last_error(), needle) != NULL, "message \"%s\" lacks \"%s\"",
               cucopy_last_error(), needle);
    cucopy_iface_progress(iface);
    CHECK(c.fired == 0);
    CHECKF(untouched(dst, 0, BUF), "the destination was written");
    tc_case_end();
}

static void phase_bad_input(void)
{
    struct tc_buf dev0, host;
    tc_buf_alloc(&dev0, TC_MEM_DEV0, BUF);
    tc_buf_alloc(&host, TC_MEM_PINNED, BUF);
    tc_buf_set(&dev0, 0, CANARY, BUF);
    tc_buf_write(&host, 0, tc_pattern(BUF), BUF);
    cucopy_iface_attr_t attr = {.field_mask = CUCOPY_IFACE_ATTR_MAX_IOV};
    REQUIRE_OK(cucopy_iface_query(iface, &attr));
    const cucopy_copy_2d_t good = {at(&dev0, 0), 64, host.host, 64, 8, 10, NULL, NULL};
    cucopy_copy_2d_t e[2] = {good, good};
    cucopy_copy_2d_t many[65];
    for (int i = 0; i < 65; i++)
        many[i] = good;

    bad_call(e, 0, CUCOPY_ERR_INVALID_PARAM, "count", &dev0, "count 0");
    bad_call(NULL, 1, CUCOPY_ERR_INVALID_PARAM, "NULL", &dev0, "NULL copies");
    REQUIRE(attr.max_iov < 65);
    bad_call(many, attr.max_iov + 1, CUCOPY_ERR_INVALID_PARAM, "count", &dev0, "count > max_iov");
    e[1].src = NULL;
    bad_call(e, 2, CUCOPY_ERR_INVALID_PARAM, "copies[1]", &dev0, "NULL source");
    e[1] = good;
    e[1].dst = NULL;
    bad_call(e, 2, CUCOPY_ERR_INVALID_PARAM, "NULL", &dev0, "NULL destination");
    e[1] = good;
    e[1].dst_pitch = 7;
    bad_call(e, 2, CUCOPY_ERR_INVALID_PARAM, "pitch", &dev0, "dst_pitch below the width");
    e[1] = good;
    e[1].src_pitch = 0;
    bad_call(e, 2, CUCOPY_ERR_INVALID_PARAM, "pitch", &dev0, "src_pitch 0 with 10 rows");
    e[1] = good;
    e[1].height = (size_t)1 << 40;
    e[1].src_pitch = (size_t)1 << 40;
    bad_call(e, 2, CUCOPY_ERR_INVALID_PARAM, "overflow", &dev0, "span overflows");
    e[1] = good;
    e[1].dst = (void *)(uintptr_t)(UINT64_MAX - 200);
    bad_call(e, 2, CUCOPY_ERR_INVALID_PARAM, "overflow", &dev0, "end of the address space");
    e[1] = good;
    e[1].width = SIZE_MAX / 2;
    e[1].height = 3;
    e[1].dst_pitch = e[1].src_pitch = SIZE_MAX / 2;
    bad_call(e, 2, CUCOPY_ERR_INVALID_PARAM, "overflow", &dev0, "width * height overflows");
    e[1] = good;
    e[1].src_memh = (cucopy_memh_h)(uintptr_t)0x999;
    bad_call(e, 2, CUCOPY_ERR_INVALID_HANDLE, NULL, &dev0, "an invalid handle");
    /* A handle of another cucopy context. */
    cucopy_context_h ctx2 = NULL;
    REQUIRE_OK(cucopy_context_create(NULL, &ctx2));
    cucopy_memh_h foreign = NULL;
    REQUIRE_OK(cucopy_mem_describe(ctx2, host.host, BUF, &foreign));
    e[1] = good;
    e[1].src_memh = foreign;
    bad_call(e, 2, CUCOPY_ERR_INVALID_HANDLE, NULL, &dev0, "a handle of another cucopy context");
    CHECK_STATUS(cucopy_mem_dereg(ctx2, foreign), CUCOPY_OK);
    CHECK_STATUS(cucopy_context_destroy(ctx2), CUCOPY_OK);
    /* A handle whose range holds the first row but not the span. */
    cucopy_memh_h h = NULL;
    REQUIRE_OK(cucopy_mem_describe(ctx, at(&dev0, 0), 256, &h));
    e[1] = good;
    e[1].dst_memh = h;
    bad_call(e, 2, CUCOPY_ERR_INVALID_PARAM, NULL, &dev0, "the span leaves its handle's range");
    e[1].height = 4; /* [0, 3 * 64 + 8): inside */
    tc_case_begin("copy_2d: a handle whose range holds the span");
    struct tc_comp c;
    tc_comp_init(&c, 1);
    int st = cucopy_ep_copy_2d(ep, e + 1, 1, &c.comp);
    wait_on(iface, st, &c, "memh");
    CHECK(verify(&dev0, 0, 0, &e[1], 0));
    tc_case_end();
    CHECK_STATUS(cucopy_mem_dereg(ctx, h), CUCOPY_OK);
    tc_buf_set(&dev0, 0, CANARY, BUF);
    /* Device rows past the end of the allocation: refused, not faulted. */
    e[1] = good;
    e[1].dst = at(&dev0, BUF - 2048);
    e[1].dst_pitch = 1024;
    bad_call(e + 1, 1, CUCOPY_ERR_OUT_OF_RANGE, "allocation", &dev0,
             "the destination span crosses its allocation's end");
    tc_buf_free(&host);
    tc_buf_free(&dev0);
}

/* An iface whose one event per context is in use: NO_RESOURCE with nothing
 * issued, then after progress the retry copies. */
static void phase_no_resource(void)
{
    cucopy_iface_params_t p = {.field_mask = CUCOPY_IFACE_PARAM_MAX_EVENTS, .max_events = 1};
    cucopy_iface_h small = NULL;
    cucopy_ep_h sep = NULL;
    REQUIRE_OK(cucopy_iface_open(ctx, &p, &small));
    REQUIRE_OK(cucopy_ep_create(small, &sep));
    struct tc_buf dev0, host, first_dst;
    tc_buf_alloc(&dev0, TC_MEM_DEV0, BUF);
    tc_buf_alloc(&first_dst, TC_MEM_DEV0, BUF);
    tc_buf_alloc(&host, TC_MEM_PINNED, BUF);
    tc_buf_write(&host, 0, tc_pattern(BUF) + 9, BUF);
    tc_buf_set(&dev0, 0, CANARY, BUF);
    struct tc_comp first, c;
    tc_comp_init(&first, 1);
    cucopy_iov_t big = {host.host, BUF};
    CHECK_STATUS(cucopy_ep_put_zcopy(sep, &big, 1, tc_buf_addr(&first_dst, 0), &first.comp),
                 CUCOPY_INPROGRESS);
    cucopy_copy_2d_t e[2] = {{at(&dev0, 0), 100, host.host, 300, 10, 20, NULL, NULL},
                             {at(&dev0, 4096), 10, host.host + 8192, 64, 10, 20, NULL, NULL}};
    tc_comp_init(&c, 1);
    int tries = 0, st;
    while ((st = cucopy_ep_copy_2d(sep, e, 2, &c.comp)) == CUCOPY_ERR_NO_RESOURCE) {
        if (tries++ == 0) {
            tc_case_begin("copy_2d: NO_RESOURCE issued nothing");
            CHECK(c.fired == 0);
            CHECK(untouched(&dev0, 0, 16));
            tc_case_end();
        }
        cucopy_iface_progress(small);
    }
    CHECKF(tries > 0 || tc_fake.violations == NULL, "the call never met the limit (%d)", tries);
    wait_on(small, st, &c, "retried");
    tc_case_begin("copy_2d: the retry copied, completion once");
    for (int k = 0; k < 3; k++)
        cucopy_iface_progress(small);
    CHECKF(c.fired == 1, "completion fired %d times", c.fired);
    unsigned char *got = malloc(BUF);
    REQUIRE(got != NULL);
    tc_buf_read(&dev0, 0, got, BUF);
    const unsigned char *pat = tc_pattern(BUF) + 9;
    int ok = 1;
    for (size_t r = 0; r < 20; r++) {
        ok &= memcmp(got + r * 100, pat + r * 300, 10) == 0;
        ok &= memcmp(got + 4096 + r * 10, pat + 8192 + r * 64, 10) == 0;
        ok &= got[r * 100 + 10] == CANARY;
    }
    CHECK(ok);
    free(got);
    tc_case_end();
    tc_wait(small, &first, 10.0);
    CHECK_STATUS(cucopy_ep_destroy(sep), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_close(small), CUCOPY_OK);
    tc_buf_free(&host);
    tc_buf_free(&first_dst);
    tc_buf_free(&dev0);
}

/* cuMemcpy2DAsync fails (fake driver): the call reports it, nothing is
 * claimed copied. The first entry of a two-entry call is issued, the second
 * fails: the call returns the error after waiting for the first. */
static void phase_fault(void)
{
    if (tc_fake.fail == NULL)
        return;
    struct tc_buf dev0, host;
    tc_buf_alloc(&dev0, TC_MEM_DEV0, BUF);
    tc_buf_alloc(&host, TC_MEM_PINNED, BUF);
    tc_buf_write(&host, 0, tc_pattern(BUF) + 11, BUF);
    tc_buf_set(&dev0, 0, CANARY, BUF);
    cucopy_copy_2d_t e = {at(&dev0, 0), 100, host.host, 300, 100, 20, NULL, NULL};
    long before = tc_fake.calls("cuMemcpy2DAsync");
    tc_fake.fail("cuMemcpy2DAsync", 1, CD_ERROR_INVALID_VALUE);
    bad_call(&e, 1, CUCOPY_ERR_CUDA, "cuMemcpy2DAsync", &dev0, "cuMemcpy2DAsync fails");
    CHECKF(tc_fake.calls("cuMemcpy2DAsync") == before + 1, "cuMemcpy2DAsync called %ld times",
           tc_fake.calls("cuMemcpy2DAsync") - before);

    tc_case_begin("copy_2d: the second of two entries fails");
    cucopy_copy_2d_t two[2] = {e, {at(&dev0, 8192), 100, host.host, 300, 100, 20, NULL, NULL}};
    tc_fake.fail("cuMemcpy2DAsync", 2, CD_ERROR_INVALID_VALUE);
    struct tc_comp c;
    tc_comp_init(&c, 1);
    CHECK_STATUS(cucopy_ep_copy_2d(ep, two, 2, &c.comp), CUCOPY_ERR_CUDA);
    for (int k = 0; k < 3; k++)
        cucopy_iface_progress(iface);
    CHECK(c.fired == 0);
    CHECK(untouched(&dev0, 8192, 100));
    tc_case_end();

    tc_case_begin("copy_2d: after the faults, copies work again");
    tc_buf_set(&dev0, 0, CANARY, BUF);
    tc_comp_init(&c, 1);
    int st = cucopy_ep_copy_2d(ep, &e, 1, &c.comp);
    wait_on(iface, st, &c, "after fault");
    CHECK(verify(&dev0, 0, 0, &e, 11));
    tc_case_end();
    tc_buf_free(&host);
    tc_buf_free(&dev0);
}

/* The pack path's scratch buffers: made on first use, freed at iface
 * close; when cuMemAlloc fails (fake driver), the copies are plain 2-D ones
 * with the same data, and the allocation is not tried again. */
static void phase_scratch(void)
{
    if (tc_fake.calls == NULL || tc_fake.live_allocations == NULL || pack_below <= 8)
        return;
    struct tc_buf dev0, host;
    tc_buf_alloc(&dev0, TC_MEM_DEV0, BUF);
    tc_buf_alloc(&host, TC_MEM_PINNED, BUF);
    for (int fail = 0; fail < 2; fail++) {
        long live = tc_fake.live_allocations();
        cucopy_iface_h fi = NULL;
        cucopy_ep_h fep = NULL;
        REQUIRE_OK(cucopy_iface_open(ctx, NULL, &fi));
        REQUIRE_OK(cucopy_ep_create(fi, &fep));
        if (fail)
            tc_fake.fail("cuMemAlloc", 1, CD_ERROR_OUT_OF_MEMORY);
        tc_case_begin("copy_2d pack path%s", fail ? ": cuMemAlloc fails, plain 2-D copies" : "");
        for (int round = 0; round < 2; round++) {
            tc_buf_write(&dev0, 0, tc_pattern(BUF) + 20 + round, BUF);
            tc_buf_set(&host, 0, CANARY, BUF);
            cucopy_copy_2d_t e = {host.host, 8, at(&dev0, 0), 256, 8, 150, NULL, NULL};
            long allocs = tc_fake.calls("cuMemAlloc"), c1 = tc_fake.calls("cuMemcpyAsync");
            struct tc_comp c;
            tc_comp_init(&c, 1);
            int st = cucopy_ep_copy_2d(fep, &e, 1, &c.comp);
            wait_on(fi, st, &c, "gather");
            CHECK(verify(&host, 0, 0, &e, 20 + round));
            long want_allocs = round == 0 ? 1 : 0; /* made (or tried) once */
            CHECKF(tc_fake.calls("cuMemAlloc") - allocs == want_allocs,
                   "round %d: %ld cuMemAlloc calls, want %ld", round,
                   tc_fake.calls("cuMemAlloc") - allocs, want_allocs);
            CHECKF(tc_fake.calls("cuMemcpyAsync") - c1 == (fail ? 0 : 1),
                   "round %d: %ld contiguous copies", round, tc_fake.calls("cuMemcpyAsync") - c1);
        }
        CHECK_STATUS(cucopy_ep_destroy(fep), CUCOPY_OK);
        CHECK_STATUS(cucopy_iface_close(fi), CUCOPY_OK);
        CHECKF(tc_fake.live_allocations() == live, "%ld allocations left after close",
               tc_fake.live_allocations() - live);
        tc_case_end();
    }
    tc_buf_free(&host);
    tc_buf_free(&dev0);
}

int main(void)
{
    ndev = tc_begin("test_copy_2d", CUCOPY_MAX_DEVICES);
    const char *pb = getenv("CUCOPY_2D_PACK_BELOW");
    if (pb != NULL && *pb != '\0')
        pack_below = (size_t)strtoull(pb, NULL, 10);
    REQUIRE_OK(cucopy_context_create(NULL, &ctx));
    REQUIRE_OK(cucopy_iface_open(ctx, NULL, &iface));
    REQUIRE_OK(cucopy_ep_create(iface, &ep));

    phase_matrix();
    phase_entries();
    phase_bad_input();
    phase_no_resource();
    phase_fault();
    phase_scratch();

    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);
    CHECK_STATUS(cucopy_context_destroy(ctx), CUCOPY_OK);
    if (tc_fake.violations != NULL)
        CHECKF(tc_fake.violations() == 0, "%ld fake-driver violation(s)", tc_fake.violations());
    return tc_finish();
}
