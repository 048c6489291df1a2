/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every (source, destination) memory pair x {put/get short, put/get zcopy
 * with one iov entry, put/get zcopy with three scattered iov entries} x
 * sizes {0, 1, 8, 4 KiB, 1 MiB, 64 MiB}. Data is checked byte for byte,
 * bytes around the destination (guards, gaps between iov pieces) must stay
 * untouched, and the caller's current context must be unchanged.
 *
 * put(ep, buffer = src, remote_addr = dst); get(ep, buffer = dst,
 * remote_addr = src). With one device the pairs with device 1 are skipped.
 */
#define _GNU_SOURCE
#include "check.h"
#include "mem.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64    /* untouched bytes before and after the data */
#define GAP 40      /* untouched bytes between iov pieces */
#define FILL 0xa5   /* what untouched bytes hold */
#define MAX_SIZE ((size_t)64 << 20)
#define CAPACITY (MAX_SIZE + 2 * GUARD + 3 * GAP)
#define ZCOPY_TIMEOUT_S 60.0

enum method { M_SHORT, M_ZCOPY, M_ZCOPY_IOV3, M_COUNT };
enum direction { D_PUT, D_GET };

static const char *const method_names[M_COUNT] = {"short", "zcopy", "zcopy-iov3"};
static const size_t sizes[] = {0, 1, 8, 4096, (size_t)1 << 20, MAX_SIZE};

struct piece {
    size_t off; /* in the buffer */
    size_t len;
};

struct layout {
    int count;
    struct piece piece[3];
};

static struct tc_buf src_bufs[TC_MEM_KINDS];
static struct tc_buf dst_bufs[TC_MEM_KINDS];
static unsigned char *scratch;
static cucopy_iface_h iface;
static cucopy_ep_h ep;
static long case_index;

static struct layout contiguous(size_t len)
{
    struct layout l = {1, {{GUARD, len}}};
    return l;
}

static struct layout scattered(size_t len)
{
    size_t l0 = len / 3;
    size_t l1 = len / 3 + 1;
    size_t l2 = len - l0 - l1;
    struct layout l = {3,
                       {{GUARD, l0},
                        {GUARD + l0 + GAP, l1},
                        {GUARD + l0 + l1 + 2 * GAP, l2}}};
    return l;
}

static size_t layout_end(const struct layout *l)
{
    const struct piece *last = &l->piece[l->count - 1];
    return last->off + last->len;
}

/* Write the data stream into the pieces of l. */
static void fill_source(const struct tc_buf *b, const struct layout *l, const unsigned char *data)
{
    size_t pos = 0;
    for (int i = 0; i < l->count; i++) {
        tc_buf_write(b, l->piece[i].off, data + pos, l->piece[i].len);
        pos += l->piece[i].len;
    }
}

/* Check that the pieces of l hold the data stream and every other byte of
 * [0, end + GUARD) still holds FILL. */
static void verify_destination(const struct tc_buf *b, const struct layout *l,
                               const unsigned char *data)
{
    size_t span = layout_end(l) + GUARD;
    tc_buf_read(b, 0, scratch, span);
    size_t pos = 0;
    size_t cursor = 0;
    for (int i = 0; i <= l->count; i++) {
        size_t gap_end = i < l->count ? l->piece[i].off : span;
        for (size_t j = cursor; j < gap_end; j++) {
            if (scratch[j] != FILL) {
                CHECKF(0, "byte %zu outside the copied range changed: 0x%02x", j, scratch[j]);
                break;
            }
        }
        if (i == l->count)
            break;
        const struct piece *p = &l->piece[i];
        if (memcmp(scratch + p->off, data + pos, p->len) != 0) {
            size_t k = 0;
            while (scratch[p->off + k] == data[pos + k])
                k++;
            CHECKF(0, "piece %d: data differs at byte %zu of %zu (got 0x%02x, want 0x%02x)", i, k,
                   p->len, scratch[p->off + k], data[pos + k]);
        }
        pos += p->len;
        cursor = p->off + p->len;
    }
}

static int is_host(enum tc_mem_kind k)
{
    return k == TC_MEM_PAGEABLE || k == TC_MEM_PINNED;
}

static void run_zcopy(enum direction dir, const struct layout *local, uint64_t remote,
                      const struct tc_buf *local_buf, int expect_immediate)
{
    cucopy_iov_t iov[3];
    for (int i = 0; i < local->count; i++) {
        iov[i].buffer = (void *)(uintptr_t)tc_buf_addr(local_buf, local->piece[i].off);
        iov[i].length = local->piece[i].len;
    }
    struct tc_comp c;
    tc_comp_init(&c, 1);
    cucopy_status_t s = dir == D_PUT
                            ? cucopy_ep_put_zcopy(ep, iov, (size_t)local->count, remote, &c.comp)
                            : cucopy_ep_get_zcopy(ep, iov, (size_t)local->count, remote, &c.comp);
    if (s == CUCOPY_OK) {
        CHECKF(c.fired == 0 && c.comp.count == 1,
               "zcopy returned OK but touched the completion (fired %d, count %d)", c.fired,
               c.comp.count);
        return;
    }
    if (!CHECKF(s == CUCOPY_INPROGRESS, "zcopy returned %s; last error: %s", tc_status_name(s),
                cucopy_last_error()))
        return;
    CHECKF(!expect_immediate, "zero-length or host-to-host zcopy returned INPROGRESS, not OK");
    if (!CHECKF(tc_wait(iface, &c, ZCOPY_TIMEOUT_S), "zcopy completion never fired"))
        return;
    CHECKF(c.comp.status == CUCOPY_OK, "completion status %s", tc_status_name(c.comp.status));
    CHECKF(c.comp.count == 0, "completion count %d after firing", c.comp.count);
    int n = cucopy_iface_progress(iface);
    CHECKF(n == 0, "extra progress returned %d", n);
    CHECKF(c.fired == 1, "completion fired %d times", c.fired);
}

static void run_case(enum tc_mem_kind sk, enum tc_mem_kind dk, enum method m, enum direction dir,
                     size_t len, cdContext caller_ctx)
{
    const struct tc_buf *src = &src_bufs[sk];
    const struct tc_buf *dst = &dst_bufs[dk];
    size_t seed = (size_t)(case_index++ * 37) % 256;
    const unsigned char *data = tc_pattern(MAX_SIZE) + seed;
    struct layout local = m == M_ZCOPY_IOV3 ? scattered(len) : contiguous(len);
    struct layout remote = contiguous(len);
    const struct layout *src_layout = dir == D_PUT ? &local : &remote;
    const struct layout *dst_layout = dir == D_PUT ? &remote : &local;
    const struct tc_buf *local_buf = dir == D_PUT ? src : dst;
    const struct tc_buf *remote_buf = dir == D_PUT ? dst : src;
    uint64_t remote_addr = tc_buf_addr(remote_buf, GUARD);

    tc_case_begin("%s %s %s -> %s, %zu bytes", dir == D_PUT ? "put" : "get", method_names[m],
                  tc_mem_kind_name(sk), tc_mem_kind_name(dk), len);
    fill_source(src, src_layout, data);
    tc_buf_set(dst, 0, FILL, layout_end(dst_layout) + GUARD);

    if (m == M_SHORT) {
        void *local_ptr = (void *)(uintptr_t)tc_buf_addr(local_buf, GUARD);
        if (dir == D_PUT)
            CHECK_STATUS(cucopy_ep_put_short(ep, local_ptr, len, remote_addr), CUCOPY_OK);
        else
            CHECK_STATUS(cucopy_ep_get_short(ep, local_ptr, len, remote_addr), CUCOPY_OK);
    } else {
        run_zcopy(dir, &local, remote_addr, local_buf, len == 0 || (is_host(sk) && is_host(dk)));
    }
    CHECKF(tc_current() == caller_ctx, "the caller's current context changed");
    verify_destination(dst, dst_layout, data);
    tc_case_end();
}

int main(void)
{
    int devices = tc_begin("test_copy_matrix", CUCOPY_MAX_DEVICES);
    if (devices < 2)
        printf("test_copy_matrix: one device: pairs with device 1 are skipped\n");

    scratch = malloc(CAPACITY);
    REQUIRE(scratch != NULL);
    tc_pattern(MAX_SIZE);
    for (int k = 0; k < TC_MEM_KINDS; k++) {
        if (k == TC_MEM_DEV1 && devices < 2)
            continue;
        tc_buf_alloc(&src_bufs[k], (enum tc_mem_kind)k, CAPACITY);
        tc_buf_alloc(&dst_bufs[k], (enum tc_mem_kind)k, CAPACITY);
    }

    /* A typical caller: device 0's primary context is current. */
    cdContext caller_ctx = tc_primary(0);
    TD_CHECK(td.cuCtxSetCurrent(caller_ctx));

    cucopy_context_h ctx = NULL;
    REQUIRE_OK(cucopy_context_create(NULL, &ctx));
    REQUIRE_OK(cucopy_iface_open(ctx, NULL, &iface));
    REQUIRE_OK(cucopy_ep_create(iface, &ep));

    double start = tc_now();
    for (int sk = 0; sk < TC_MEM_KINDS; sk++) {
        for (int dk = 0; dk < TC_MEM_KINDS; dk++) {
            if (devices < 2 && (sk == TC_MEM_DEV1 || dk == TC_MEM_DEV1))
                continue;
            for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
                for (int m = 0; m < M_COUNT; m++) {
                    if (m == M_ZCOPY_IOV3 && sizes[si] < 8)
                        continue;
                    for (int dir = D_PUT; dir <= D_GET; dir++)
                        run_case((enum tc_mem_kind)sk, (enum tc_mem_kind)dk, (enum method)m,
                                 (enum direction)dir, sizes[si], caller_ctx);
                }
            }
        }
    }
    printf("test_copy_matrix: %ld copies in %.1f s\n", case_index, tc_now() - start);

    CHECK_STATUS(cucopy_iface_flush(iface, 0, NULL), CUCOPY_OK);
    CHECK_STATUS(cucopy_ep_destroy(ep), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);
    CHECK_STATUS(cucopy_context_destroy(ctx), CUCOPY_OK);
    CHECK(tc_current() == caller_ctx);

    TD_CHECK(td.cuCtxSetCurrent(NULL));
    for (int k = 0; k < TC_MEM_KINDS; k++) {
        if (src_bufs[k].size > 0) {
            tc_buf_free(&src_bufs[k]);
            tc_buf_free(&dst_bufs[k]);
        }
    }
    free(scratch);
    return tc_finish();
}
