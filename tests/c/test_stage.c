/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pageable staging (docs/design.md, "Pageable staging") through the public
 * ABI: a copy between pageable host memory and a GPU of at least
 * CUCOPY_STAGE_THRESHOLD bytes goes through the library's pinned bounce
 * buffers and is finished when zcopy returns (CUCOPY_OK); a smaller one, or
 * any with CUCOPY_STAGE=off, takes the driver's path (CUCOPY_INPROGRESS).
 * The test reads the same variables to know which to expect, so it runs
 * with CTest's small settings, with CUCOPY_STAGE=off, and with the defaults
 * on a GPU:
 *  - data both ways, sizes around and far above the threshold, unaligned
 *    offsets and lengths, the bytes around the range untouched; short copies;
 *  - order: a staged copy after a (slowed) copy of the same endpoint still
 *    in flight, same context and direction, lands after it;
 *  - a multi-thread iface with several threads staging at once (more of them
 *    than bounce-buffer pairs);
 *  - an unmapped pageable buffer: an error, not a crash;
 *  - a program-created context: its bounce buffers are unpinned by
 *    release_context, before the program destroys it;
 *  - fault injection (fake driver): pinning the pool fails -> the driver's
 *    path, data right, tried once; a bounce DMA fails -> an error, no
 *    completion, nothing in flight, the next copy right;
 *  - small staging (CUCOPY_STAGE_SMALL): device-to-pageable batch entries
 *    whose room fits that size, two or more, are finished in the call in
 *    one driver batch; a copy alone (one-entry zcopy, short copy) and
 *    host-to-device ones take the driver's path; the batch's DMA fails, or
 *    pinning the pool fails, with the same rules as above.
 */
#define _GNU_SOURCE
#include "check.h"
#include "ctx.h"
#include "fake.h"
#include "mem.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#define TIMEOUT_S 120.0
#define FILL 0xa5
#define FAKE_OOM 2 /* CUDA_ERROR_OUT_OF_MEMORY */
#define THREADS 4
#define ROUNDS 3

static cucopy_context_h cctx;
static size_t threshold; /* CUCOPY_STAGE_THRESHOLD as the library reads it */
static size_t chunk;     /* CUCOPY_STAGE_CHUNK */
static int staging;      /* CUCOPY_STAGE is not off */
static size_t small_max; /* CUCOPY_STAGE_SMALL, 0 when staging is off */
static int loop_runs;    /* CUCOPY_IOV_BATCH=loop: no driver batches */
static unsigned base_delay_us;

/* A size variable as core/config.go reads it (an integer, optional K/M/G). */
static size_t env_size(const char *name, size_t def)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0')
        return def;
    char *end = NULL;
    unsigned long long n = strtoull(v, &end, 10);
    switch (*end) {
    case 'k':
    case 'K':
        n <<= 10;
        break;
    case 'm':
    case 'M':
        n <<= 20;
        break;
    case 'g':
    case 'G':
        n <<= 30;
        break;
    }
    return (size_t)n;
}

static int staged(size_t n)
{
    return staging && n >= threshold;
}

static void open_iface(cucopy_thread_mode_t mode, cucopy_iface_h *iface, cucopy_ep_h *ep)
{
    cucopy_iface_params_t p;
    memset(&p, 0, sizeof(p));
    p.field_mask = CUCOPY_IFACE_PARAM_THREAD_MODE;
    p.thread_mode = mode;
    REQUIRE_OK(cucopy_iface_open(cctx, &p, iface));
    REQUIRE_OK(cucopy_ep_create(*iface, ep));
}

static void close_iface(cucopy_iface_h iface, cucopy_ep_h ep)
{
    CHECK_STATUS(cucopy_ep_destroy(ep), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);
}

/* Start one zcopy of n bytes (put: local -> remote); c is initialized. */
static cucopy_status_t start(cucopy_ep_h ep, int put, uint64_t local, uint64_t remote, size_t n,
                             struct tc_comp *c)
{
    cucopy_iov_t iov = {(void *)(uintptr_t)local, n};
    tc_comp_init(c, 1);
    return put ? cucopy_ep_put_zcopy(ep, &iov, 1, remote, &c->comp)
               : cucopy_ep_get_zcopy(ep, &iov, 1, remote, &c->comp);
}

/* One zcopy to its end: OK when staged, else through progress; checks the
 * status the size asks for (either, with pooled: more threads stage at once
 * than the iface has bounce buffers, and the others take the driver's path). */
static void zcopy_to_end(cucopy_iface_h iface, cucopy_ep_h ep, int put, uint64_t local,
                         uint64_t remote, size_t n, int pooled)
{
    struct tc_comp c;
    cucopy_status_t s = start(ep, put, local, remote, n, &c);
    CHECKF(s == (staged(n) ? CUCOPY_OK : CUCOPY_INPROGRESS) ||
               (pooled && staged(n) && s == CUCOPY_INPROGRESS),
           "%s of %zu bytes: %s (%s)", put ? "put" : "get", n, tc_status_name(s),
           cucopy_last_error());
    if (s == CUCOPY_INPROGRESS) {
        CHECKF(tc_wait(iface, &c, TIMEOUT_S) && c.comp.status == CUCOPY_OK,
               "completion: fired %d, %s", c.fired, tc_status_name(c.comp.status));
    } else {
        CHECKF(c.fired == 0, "a staged copy does not complete through its completion");
    }
}

static void zcopy(cucopy_iface_h iface, cucopy_ep_h ep, int put, uint64_t local, uint64_t remote,
                  size_t n)
{
    zcopy_to_end(iface, ep, put, local, remote, n, 0);
}

/* dst[off, off+n) holds data and the 8 bytes on either side are FILL. */
static void check_range(const struct tc_buf *dst, size_t off, size_t n, const unsigned char *data,
                        const char *what)
{
    unsigned char *back = malloc(n + 16);
    REQUIRE(back != NULL);
    tc_buf_read(dst, off - 8, back, n + 16);
    size_t bad = 0;
    while (bad < n && back[8 + bad] == data[bad])
        bad++;
    CHECKF(bad == n, "%s: bytes differ at offset %zu of %zu", what, bad, n);
    int around = 1;
    for (int k = 0; k < 8; k++)
        around &= back[k] == FILL && back[8 + n + k] == FILL;
    CHECKF(around, "%s: a byte outside the range was written", what);
    free(back);
}

static void data_case(cucopy_iface_h iface, cucopy_ep_h ep, size_t n, size_t off, int put,
                      int short_copy)
{
    const char *how = short_copy ? "short" : "zcopy";
    tc_case_begin("%s %s of %zu bytes at offset %zu (%s)", put ? "put" : "get", how, n, off,
                  staged(n) ? "staged" : "driver's path");
    struct tc_buf host, dev;
    tc_buf_alloc(&host, TC_MEM_PAGEABLE, n + off + 16);
    tc_buf_alloc(&dev, TC_MEM_DEV0, n + off + 16);
    const struct tc_buf *src = put ? &host : &dev;
    const struct tc_buf *dst = put ? &dev : &host;
    const unsigned char *data = tc_pattern(n) + (n + off) % 251;
    tc_buf_set(dst, 0, FILL, n + off + 16);
    tc_buf_write(src, off + 8, data, n);
    uint64_t local = tc_buf_addr(&host, off + 8), remote = tc_buf_addr(&dev, off + 8);
    if (short_copy)
        CHECK_STATUS(put ? cucopy_ep_put_short(ep, (void *)(uintptr_t)local, n, remote)
                         : cucopy_ep_get_short(ep, (void *)(uintptr_t)local, n, remote),
                     CUCOPY_OK);
    else
        zcopy(iface, ep, put, local, remote, n);
    check_range(dst, off + 8, n, data, how);
    tc_buf_free(&host);
    tc_buf_free(&dev);
    tc_case_end();
}

static void data_cases(void)
{
    cucopy_iface_h iface;
    cucopy_ep_h ep;
    open_iface(CUCOPY_THREAD_MODE_SINGLE, &iface, &ep);
    size_t sizes[] = {threshold - 1, threshold, threshold + 13, 5 * chunk + 1,
                      3 * threshold + 77};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
        for (size_t off = 0; off < 4; off += 3)
            for (int put = 0; put < 2; put++)
                data_case(iface, ep, sizes[k], off, put, 0);
    data_case(iface, ep, 2 * threshold + 5, 1, 1, 1);
    data_case(iface, ep, 2 * threshold + 5, 1, 0, 1);
    close_iface(iface, ep);
}

/* The first copy (below the threshold, and for a get above small
 * staging's limit: queued; slowed down by the fake) is in flight when the
 * staged one is issued on the same endpoint, context and direction: the
 * staged bytes must be the ones that stay. */
static void order_case(int put)
{
    tc_case_begin("a staged %s after an earlier copy still in flight", put ? "put" : "get");
    cucopy_iface_h iface;
    cucopy_ep_h ep;
    open_iface(CUCOPY_THREAD_MODE_SINGLE, &iface, &ep);
    size_t small = put || small_max == 0 ? 4096 : small_max + 1, big = 2 * threshold + 5;
    REQUIRE(small < threshold);
    struct tc_buf target, first, second;
    tc_buf_alloc(&target, put ? TC_MEM_DEV0 : TC_MEM_PAGEABLE, big);
    tc_buf_alloc(&first, put ? TC_MEM_PAGEABLE : TC_MEM_DEV0, small);
    tc_buf_alloc(&second, put ? TC_MEM_PAGEABLE : TC_MEM_DEV0, big);
    tc_buf_write(&first, 0, tc_pattern(small) + 1, small);
    const unsigned char *data = tc_pattern(big) + 2;
    tc_buf_write(&second, 0, data, big);
    uint64_t t = tc_buf_addr(&target, 0);
    struct tc_comp c1, c2;
    if (tc_fake.set_delay_us != NULL)
        tc_fake.set_delay_us(200000);
    cucopy_status_t s = put ? start(ep, 1, tc_buf_addr(&first, 0), t, small, &c1)
                            : start(ep, 0, t, tc_buf_addr(&first, 0), small, &c1);
    CHECK_STATUS(s, CUCOPY_INPROGRESS);
    if (tc_fake.set_delay_us != NULL) {
        usleep(20000); /* the stream's worker sleeps in the first copy now */
        tc_fake.set_delay_us(base_delay_us);
    }
    s = put ? start(ep, 1, tc_buf_addr(&second, 0), t, big, &c2)
            : start(ep, 0, t, tc_buf_addr(&second, 0), big, &c2);
    CHECK_STATUS(s, staged(big) ? CUCOPY_OK : CUCOPY_INPROGRESS);
    if (s == CUCOPY_INPROGRESS)
        CHECK(tc_wait(iface, &c2, TIMEOUT_S));
    CHECK(tc_wait(iface, &c1, TIMEOUT_S));
    unsigned char *back = malloc(big);
    REQUIRE(back != NULL);
    tc_buf_read(&target, 0, back, big);
    CHECKF(memcmp(back, data, big) == 0, "the earlier copy's bytes overwrote the staged ones");
    free(back);
    tc_buf_free(&target);
    tc_buf_free(&first);
    tc_buf_free(&second);
    close_iface(iface, ep);
    tc_case_end();
}

struct worker {
    pthread_t thread;
    cucopy_iface_h iface;
    cucopy_ep_h ep;
    int id;
    int wrong;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    size_t n = 2 * threshold + 11 + (size_t)w->id * 4;
    struct tc_buf host, back, dev;
    tc_buf_alloc(&host, TC_MEM_PAGEABLE, n);
    tc_buf_alloc(&back, TC_MEM_PAGEABLE, n);
    tc_buf_alloc(&dev, TC_MEM_DEV0, n);
    unsigned char *got = malloc(n);
    for (int r = 0; r < ROUNDS && got != NULL; r++) {
        const unsigned char *data = tc_pattern(n) + w->id * ROUNDS + r;
        tc_buf_write(&host, 0, data, n);
        tc_buf_set(&back, 0, FILL, n);
        zcopy_to_end(w->iface, w->ep, 1, tc_buf_addr(&host, 0), tc_buf_addr(&dev, 0), n, 1);
        zcopy_to_end(w->iface, w->ep, 0, tc_buf_addr(&back, 0), tc_buf_addr(&dev, 0), n, 1);
        tc_buf_read(&back, 0, got, n);
        w->wrong += memcmp(got, data, n) != 0;
    }
    free(got);
    tc_buf_free(&host);
    tc_buf_free(&back);
    tc_buf_free(&dev);
    return NULL;
}

static void threads_case(void)
{
    tc_case_begin("%d threads staging at once on a multi-thread iface", THREADS);
    cucopy_iface_h iface;
    cucopy_ep_h shared;
    open_iface(CUCOPY_THREAD_MODE_MULTI, &iface, &shared);
    (void)tc_pattern(2 * threshold + 11 + THREADS * 4); /* grown here, not under the workers */
    struct worker w[THREADS];
    for (int k = 0; k < THREADS; k++) {
        w[k] = (struct worker){.iface = iface, .ep = shared, .id = k};
        if (k % 2 == 0)
            REQUIRE_OK(cucopy_ep_create(iface, &w[k].ep));
        REQUIRE(pthread_create(&w[k].thread, NULL, work, &w[k]) == 0);
    }
    int wrong = 0;
    for (int k = 0; k < THREADS; k++) {
        pthread_join(w[k].thread, NULL);
        wrong += w[k].wrong;
        if (k % 2 == 0)
            CHECK_STATUS(cucopy_ep_destroy(w[k].ep), CUCOPY_OK);
    }
    CHECKF(wrong == 0, "%d of %d round trips delivered wrong data", wrong, THREADS * ROUNDS);
    close_iface(iface, shared);
    tc_case_end();
}

/* A staged-size copy from memory the CPU cannot read is an error. */
static void unmapped_case(void)
{
    if (!staging)
        return; /* the driver's path: what it does with a bad pointer is its own */
    tc_case_begin("staged put from inaccessible memory");
    cucopy_iface_h iface;
    cucopy_ep_h ep;
    open_iface(CUCOPY_THREAD_MODE_SINGLE, &iface, &ep);
    size_t n = 2 * threshold;
    /* PROT_NONE rather than unmapped: nothing else can be mapped there meanwhile. */
    void *gone = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(gone != MAP_FAILED);
    struct tc_buf dev;
    tc_buf_alloc(&dev, TC_MEM_DEV0, n);
    struct tc_comp c;
    cucopy_status_t s = start(ep, 1, (uint64_t)(uintptr_t)gone, tc_buf_addr(&dev, 0), n, &c);
    CHECK_STATUS(s, CUCOPY_ERR_INVALID_PARAM);
    CHECK(c.fired == 0);
    munmap(gone, n);
    tc_buf_free(&dev);
    close_iface(iface, ep);
    tc_case_end();
}

/* A context the program created: release_context unpins its bounce buffers
 * while it is alive; then the program destroys it. */
static void user_context_case(void)
{
    if (!staging || tc_fake.registered_ranges == NULL)
        return;
    tc_case_begin("bounce buffers of a program-created context");
    cdDevice dev0;
    cdContext user = NULL;
    TD_CHECK(td.cuDeviceGet(&dev0, 0));
    TD_CHECK(td.cuCtxCreate(&user, CD_CTX_SCHED_AUTO, dev0));
    TD_CHECK(td.cuCtxSetCurrent(NULL));
    size_t n = 2 * threshold;
    struct tc_buf host, dev;
    tc_buf_alloc(&host, TC_MEM_PAGEABLE, n);
    tc_buf_alloc_in(&dev, user, n);
    cucopy_iface_h iface;
    cucopy_ep_h ep;
    open_iface(CUCOPY_THREAD_MODE_SINGLE, &iface, &ep);
    long before = tc_fake.registered_ranges();
    const unsigned char *data = tc_pattern(n) + 3;
    tc_buf_write(&host, 0, data, n);
    zcopy(iface, ep, 1, tc_buf_addr(&host, 0), tc_buf_addr(&dev, 0), n);
    CHECKF(tc_fake.registered_ranges() == before + 1, "one pair pinned: %ld -> %ld", before,
           tc_fake.registered_ranges());
    uint64_t key = td.cuCtxGetId != NULL ? tc_ctx_id(user) : (uint64_t)(uintptr_t)user;
    CHECK_STATUS(cucopy_iface_release_context(iface, key), CUCOPY_OK);
    CHECKF(tc_fake.registered_ranges() == before, "unpinned by release_context: %ld -> %ld",
           before, tc_fake.registered_ranges());
    unsigned char *back = malloc(n);
    REQUIRE(back != NULL);
    tc_buf_read(&dev, 0, back, n);
    CHECK(memcmp(back, data, n) == 0);
    free(back);
    tc_buf_free(&dev);
    TD_CHECK(td.cuCtxDestroy(user));
    tc_buf_free(&host);
    close_iface(iface, ep);
    tc_case_end();
}

/* Pinning the pool fails: the driver's path, the data right, not retried. */
static void pool_fault_case(void)
{
    if (!staging || tc_fake.fail == NULL)
        return;
    tc_case_begin("pinning the bounce buffers fails: the driver's path");
    cucopy_iface_h iface;
    cucopy_ep_h ep;
    open_iface(CUCOPY_THREAD_MODE_SINGLE, &iface, &ep);
    size_t n = 3 * threshold + 1;
    struct tc_buf host, dev;
    tc_buf_alloc(&host, TC_MEM_PAGEABLE, n);
    tc_buf_alloc(&dev, TC_MEM_DEV0, n);
    long reg0 = tc_fake.calls("cuMemHostRegister");
    tc_fake.fail("cuMemHostRegister", 1, FAKE_OOM);
    for (int k = 0; k < 2; k++) {
        const unsigned char *data = tc_pattern(n) + 10 + k;
        tc_buf_write(&host, 0, data, n);
        struct tc_comp c;
        CHECK_STATUS(start(ep, 1, tc_buf_addr(&host, 0), tc_buf_addr(&dev, 0), n, &c),
                     CUCOPY_INPROGRESS);
        CHECK(tc_wait(iface, &c, TIMEOUT_S) && c.comp.status == CUCOPY_OK);
        unsigned char *back = malloc(n);
        REQUIRE(back != NULL);
        tc_buf_read(&dev, 0, back, n);
        CHECKF(memcmp(back, data, n) == 0, "copy %d after the failed pinning: wrong data", k);
        free(back);
    }
    CHECKF(tc_fake.calls("cuMemHostRegister") == reg0 + 1, "pinning tried %ld times",
           tc_fake.calls("cuMemHostRegister") - reg0);
    tc_buf_free(&host);
    tc_buf_free(&dev);
    close_iface(iface, ep);
    tc_case_end();
}

/* A bounce DMA fails part-way: an error, no completion, nothing in flight
 * (a flush completes at once), and the next copy is right. */
static void dma_fault_case(int put)
{
    if (!staging || tc_fake.fail == NULL)
        return;
    tc_case_begin("a bounce DMA of a staged %s fails", put ? "put" : "get");
    cucopy_iface_h iface;
    cucopy_ep_h ep;
    open_iface(CUCOPY_THREAD_MODE_SINGLE, &iface, &ep);
    size_t n = 6 * chunk + 9;
    if (n < threshold)
        n = threshold + 9;
    struct tc_buf host, dev;
    tc_buf_alloc(&host, TC_MEM_PAGEABLE, n);
    tc_buf_alloc(&dev, TC_MEM_DEV0, n);
    tc_fake.fail("cuMemcpyAsync", 3, FAKE_OOM);
    struct tc_comp c;
    CHECK_STATUS(start(ep, put, tc_buf_addr(&host, 0), tc_buf_addr(&dev, 0), n, &c),
                 CUCOPY_ERR_CUDA);
    tc_fake.fail("cuMemcpyAsync", 0, 0);
    struct tc_comp f;
    tc_comp_init(&f, 1);
    cucopy_status_t s = cucopy_iface_flush(iface, 0, &f.comp);
    CHECKF(s == CUCOPY_OK, "flush after the failed copy: %s (something in flight)",
           tc_status_name(s));
    for (int k = 0; k < 10; k++)
        CHECK(cucopy_iface_progress(iface) >= 0);
    CHECK(c.fired == 0);
    const struct tc_buf *src = put ? &host : &dev;
    const struct tc_buf *dst = put ? &dev : &host;
    const unsigned char *data = tc_pattern(n) + 20;
    tc_buf_write(src, 0, data, n);
    zcopy(iface, ep, put, tc_buf_addr(&host, 0), tc_buf_addr(&dev, 0), n);
    unsigned char *back = malloc(n);
    REQUIRE(back != NULL);
    tc_buf_read(dst, 0, back, n);
    CHECKF(memcmp(back, data, n) == 0, "the copy after the failed one: wrong data");
    free(back);
    tc_buf_free(&host);
    tc_buf_free(&dev);
    close_iface(iface, ep);
    tc_case_end();
}

/* A get zcopy and a short get of n bytes into pageable memory, and a put
 * zcopy and a short put of the same size: copies alone, never small-staged
 * (the driver's path, CUCOPY_INPROGRESS for the zcopies). */
static void small_data_case(size_t n)
{
    tc_case_begin("small staging: a copy alone of %zu bytes", n);
    cucopy_iface_h iface;
    cucopy_ep_h ep;
    open_iface(CUCOPY_THREAD_MODE_SINGLE, &iface, &ep);
    struct tc_buf host, dev;
    tc_buf_alloc(&host, TC_MEM_PAGEABLE, n + 16);
    tc_buf_alloc(&dev, TC_MEM_DEV0, n + 16);
    for (int put = 0; put < 2; put++) {
        for (int short_copy = 0; short_copy < 2; short_copy++) {
            const struct tc_buf *src = put ? &host : &dev;
            const struct tc_buf *dst = put ? &dev : &host;
            const unsigned char *data = tc_pattern(n) + 7 + put + 2 * short_copy;
            tc_buf_set(dst, 0, FILL, n + 16);
            tc_buf_write(src, 8, data, n);
            uint64_t local = tc_buf_addr(&host, 8), remote = tc_buf_addr(&dev, 8);
            if (short_copy) {
                CHECK_STATUS(put ? cucopy_ep_put_short(ep, (void *)(uintptr_t)local, n, remote)
                                 : cucopy_ep_get_short(ep, (void *)(uintptr_t)local, n, remote),
                             CUCOPY_OK);
            } else {
                struct tc_comp c;
                cucopy_status_t st = start(ep, put, local, remote, n, &c);
                CHECKF(st == CUCOPY_INPROGRESS,
                       "%s zcopy of %zu bytes: %s (%s)", put ? "put" : "get", n,
                       tc_status_name(st), cucopy_last_error());
                if (st == CUCOPY_INPROGRESS)
                    CHECK(tc_wait(iface, &c, TIMEOUT_S) && c.comp.status == CUCOPY_OK);
                else
                    CHECKF(c.fired == 0, "a staged copy does not complete through its completion");
            }
            check_range(dst, 8, n, data, short_copy ? "short" : "zcopy");
        }
    }
    tc_buf_free(&host);
    tc_buf_free(&dev);
    close_iface(iface, ep);
    tc_case_end();
}

#define SMALL_BATCH 16

/* A batch of SMALL_BATCH copies of n bytes from device memory into
 * pageable memory; checks the status staging asks for (fail: the fake
 * fails the first call of that entry point with OOM, after which the batch
 * must be an error, or take the driver's path when the pool cannot be
 * pinned) and every destination. */
static void small_batch_case(size_t n, const char *fail)
{
    tc_case_begin("small staging: a batch of %d x %zu bytes to pageable memory%s%s", SMALL_BATCH,
                  n, fail ? ", failing " : "", fail ? fail : "");
    cucopy_iface_h iface;
    cucopy_ep_h ep;
    open_iface(CUCOPY_THREAD_MODE_SINGLE, &iface, &ep);
    struct tc_buf host[SMALL_BATCH], dev;
    cucopy_copy_t copies[SMALL_BATCH];
    tc_buf_alloc(&dev, TC_MEM_DEV0, SMALL_BATCH * (n + 8));
    const unsigned char *data = tc_pattern(SMALL_BATCH * (n + 8)) + 3;
    tc_buf_write(&dev, 0, data, SMALL_BATCH * (n + 8));
    for (int k = 0; k < SMALL_BATCH; k++) {
        tc_buf_alloc(&host[k], TC_MEM_PAGEABLE, n + 16);
        tc_buf_set(&host[k], 0, FILL, n + 16);
        memset(&copies[k], 0, sizeof(copies[k]));
        copies[k].dst = (void *)(uintptr_t)tc_buf_addr(&host[k], 8);
        copies[k].src = (const void *)(uintptr_t)tc_buf_addr(&dev, (size_t)k * (n + 8));
        copies[k].length = n;
    }
    /* Staged in steps of as many entries as small_max has room for, each
     * of two or more; an entry left alone takes the driver's path. */
    size_t per = small_max / ((n + 63) & ~(size_t)63);
    int batched = per >= 2 && SMALL_BATCH % per != 1;
    long steps = per < 2 ? 0 : SMALL_BATCH / per + (SMALL_BATCH % per >= 2);
    long batches0 = tc_fake.calls ? tc_fake.calls("cuMemcpyBatchAsync") : 0;
    long syncs0 = tc_fake.calls ? tc_fake.calls("cuStreamSynchronize") : 0;
    if (fail)
        tc_fake.fail(fail, 1, FAKE_OOM);
    struct tc_comp c;
    tc_comp_init(&c, 1);
    cucopy_status_t st = cucopy_ep_copy_batch(ep, copies, SMALL_BATCH, &c.comp);
    if (fail && strcmp(fail, "cuMemHostRegister") != 0) { /* the step's enqueue fails */
        CHECKF(st == CUCOPY_ERR_CUDA, "the failed staging step: %s", tc_status_name(st));
        tc_fake.fail(fail, 0, 0);
        struct tc_comp f;
        tc_comp_init(&f, 1);
        CHECK_STATUS(cucopy_iface_flush(iface, 0, &f.comp), CUCOPY_OK);
        for (int k = 0; k < 10; k++)
            CHECK(cucopy_iface_progress(iface) >= 0);
        CHECK(c.fired == 0);
        tc_comp_init(&c, 1);
        st = cucopy_ep_copy_batch(ep, copies, SMALL_BATCH, &c.comp);
        CHECKF(st == CUCOPY_OK, "the batch after the failed one: %s", tc_status_name(st));
    } else {
        /* Without a buffer (fail: pinning it fails) the same steps go
         * straight into the caller's memory, one cuMemcpyAsync each. */
        CHECKF(st == (batched ? CUCOPY_OK : CUCOPY_INPROGRESS), "batch: %s (%s)",
               tc_status_name(st), cucopy_last_error());
        if (tc_fake.calls != NULL) {
            long batches = tc_fake.calls("cuMemcpyBatchAsync") - batches0;
            long syncs = tc_fake.calls("cuStreamSynchronize") - syncs0;
            CHECKF(batches == (fail || loop_runs ? 0 : steps), "%ld driver batches, want %ld", batches,
                   fail || loop_runs ? 0 : steps);
            CHECKF(syncs == steps, "%ld stream waits for %ld staging steps", syncs, steps);
        }
        if (st == CUCOPY_INPROGRESS)
            CHECK(tc_wait(iface, &c, TIMEOUT_S) && c.comp.status == CUCOPY_OK);
        if (fail)
            tc_fake.fail(fail, 0, 0);
    }
    for (int k = 0; k < SMALL_BATCH; k++) {
        char what[32];
        snprintf(what, sizeof(what), "entry %d", k);
        check_range(&host[k], 8, n, data + (size_t)k * (n + 8), what);
        tc_buf_free(&host[k]);
    }
    tc_buf_free(&dev);
    close_iface(iface, ep);
    tc_case_end();
}

static void small_cases(void)
{
    size_t sizes[] = {1, 8, 1000};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
        small_data_case(sizes[k]);
    small_data_case(64 << 10);
    small_data_case((64 << 10) + 1);
    small_batch_case(8, NULL);
    small_batch_case(4096, NULL); /* 64 KiB in all: one step */
    small_batch_case(4097, NULL); /* rounded up: 15 in one step, the last alone */
    small_batch_case(40000, NULL); /* one per step: all alone */
    if (small_max != 0 && tc_fake.fail != NULL) {
        small_batch_case(8, loop_runs ? "cuMemcpyAsync" : "cuMemcpyBatchAsync");
        small_batch_case(8, "cuMemHostRegister");
    }
}

int main(void)
{
    tc_begin("test_stage", 1);
    const char *mode = getenv("CUCOPY_STAGE");
    staging = mode == NULL || strcasecmp(mode, "off") != 0;
    /* The sizes the cases are built around are set here when the
     * environment does not set them, so that they never depend on (and
     * drift from) the library's defaults, which the Go tests check. */
    setenv("CUCOPY_STAGE_THRESHOLD", "4M", 0);
    setenv("CUCOPY_STAGE_CHUNK", "8M", 0);
    setenv("CUCOPY_STAGE_SMALL", "64K", 0);
    threshold = env_size("CUCOPY_STAGE_THRESHOLD", 0);
    chunk = env_size("CUCOPY_STAGE_CHUNK", 0);
    small_max = staging ? env_size("CUCOPY_STAGE_SMALL", 0) : 0;
    const char *runs = getenv("CUCOPY_IOV_BATCH");
    loop_runs = runs != NULL && strcasecmp(runs, "loop") == 0;
    base_delay_us = (unsigned)env_size("FAKECUDA_DELAY_US", 0);
    printf("test_stage: staging %s, threshold %zu, chunk %zu, small %zu\n",
           staging ? "auto" : "off", threshold, chunk, small_max);
    long reg0 = tc_fake.registered_ranges != NULL ? tc_fake.registered_ranges() : 0;
    REQUIRE_OK(cucopy_context_create(NULL, &cctx));

    data_cases();
    order_case(1);
    order_case(0);
    threads_case();
    unmapped_case();
    user_context_case();
    pool_fault_case();
    dma_fault_case(1);
    dma_fault_case(0);
    small_cases();
    if (tc_fake.calls != NULL)
        CHECKF((tc_fake.calls("cuMemHostRegister") > 0) == staging,
               "bounce buffers pinned %ld times with staging %s",
               tc_fake.calls("cuMemHostRegister"), staging ? "on" : "off");
    if (tc_fake.registered_ranges != NULL)
        CHECKF(tc_fake.registered_ranges() == reg0, "%ld ranges left pinned after close",
               tc_fake.registered_ranges() - reg0);

    CHECK_STATUS(cucopy_context_destroy(cctx), CUCOPY_OK);
    return tc_finish();
}
