/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cucopy_iface_stats through the C ABI: operations (once per operation,
 * under its first piece's direction), pieces and bytes per direction and
 * per device, NO_RESOURCE returns, flushes, fences and contexts; the counts
 * of a released context stay, and so do its own in the list of context
 * lives (incarnations); only the fields of field_mask are written;
 * bad input (NULL iface, NULL stats, unknown field_mask bits).
 */
#define _GNU_SOURCE
#include "check.h"
#include "mem.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define N 4096
#define ALL                                                                              \
    (CUCOPY_IFACE_STATS_EVENTS | CUCOPY_IFACE_STATS_DIRECTIONS | CUCOPY_IFACE_STATS_DEVICES | \
     CUCOPY_IFACE_STATS_CONTEXTS)

static cucopy_iface_h iface;

static void wait(struct tc_comp *c)
{
    CHECKF(tc_wait(iface, c, 60.0), "completion did not fire");
}

static cucopy_iface_stats_t stats(uint64_t mask)
{
    cucopy_iface_stats_t s;
    memset(&s, 0xee, sizeof(s)); /* fields outside the mask must stay so */
    s.field_mask = mask;
    CHECK_STATUS(cucopy_iface_stats(iface, &s), CUCOPY_OK);
    return s;
}

static uint64_t dev_field(const uint64_t *a, int dev, int dir)
{
    return a[dev * CUCOPY_DIR_COUNT + dir];
}

int main(void)
{
    int devices = tc_begin("test_stats", 2);
    struct tc_buf host;
    struct tc_buf host2;
    struct tc_buf dev0;
    struct tc_buf dev1;
    tc_buf_alloc(&host, TC_MEM_PAGEABLE, N);
    tc_buf_alloc(&host2, TC_MEM_PAGEABLE, N);
    tc_buf_alloc(&dev0, TC_MEM_DEV0, N);
    tc_buf_alloc(&dev1, devices >= 2 ? TC_MEM_DEV1 : TC_MEM_DEV0, N);
    int d1 = devices >= 2 ? 1 : 0;

    cucopy_context_h ctx = NULL;
    REQUIRE_OK(cucopy_context_create(NULL, &ctx));
    cucopy_iface_params_t p = {.field_mask = CUCOPY_IFACE_PARAM_MAX_EVENTS, .max_events = 1};
    REQUIRE_OK(cucopy_iface_open(ctx, &p, &iface));
    cucopy_ep_h ep = NULL;
    REQUIRE_OK(cucopy_ep_create(iface, &ep));

    cucopy_iface_stats_t s = stats(ALL);
    CHECKF(s.dir_operations[CUCOPY_DIR_H2D] == 0 && s.no_resource == 0 && s.contexts_seen == 0,
           "a new iface's counters are not 0");

    /* One operation of two pieces, host -> device 0, then NO_RESOURCE while
     * its only event is in flight. */
    struct tc_comp c1;
    struct tc_comp c2;
    tc_comp_init(&c1, 1);
    tc_comp_init(&c2, 1);
    cucopy_iov_t two[2] = {{host.host, 100}, {(char *)host.host + 100, 28}};
    CHECK_STATUS(cucopy_ep_put_zcopy(ep, two, 2, tc_buf_addr(&dev0, 0), &c1.comp),
                 CUCOPY_INPROGRESS);
    cucopy_iov_t one = {host.host, 8};
    cucopy_status_t st = cucopy_ep_put_zcopy(ep, &one, 1, tc_buf_addr(&dev0, 1024), &c2.comp);
    CHECKF(st == CUCOPY_ERR_NO_RESOURCE || st == CUCOPY_INPROGRESS, "second zcopy: %s",
           tc_status_name(st));
    wait(&c1);
    if (st == CUCOPY_INPROGRESS)
        wait(&c2);
    uint64_t no_resource = st == CUCOPY_ERR_NO_RESOURCE;
    uint64_t h2d_ops = 1 + (st == CUCOPY_INPROGRESS);
    uint64_t h2d_pieces = 2 + (st == CUCOPY_INPROGRESS);
    uint64_t h2d_bytes = 128 + 8 * (st == CUCOPY_INPROGRESS);

    /* device 1 -> host (short), host -> host (CPU), a fence, a flush. */
    CHECK_STATUS(cucopy_ep_get_short(ep, host2.host, 64, tc_buf_addr(&dev1, 0)), CUCOPY_OK);
    CHECK_STATUS(cucopy_ep_put_short(ep, host.host, 16, tc_buf_addr(&host2, 0)), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_fence(iface, 0), CUCOPY_OK);
    CHECK_STATUS(cucopy_ep_flush(ep, 0, NULL), CUCOPY_OK);

    s = stats(ALL);
    CHECKF(s.dir_operations[CUCOPY_DIR_H2D] == h2d_ops && s.dir_pieces[CUCOPY_DIR_H2D] == h2d_pieces &&
               s.dir_bytes[CUCOPY_DIR_H2D] == h2d_bytes,
           "h2d: %llu ops %llu pieces %llu bytes", (unsigned long long)s.dir_operations[CUCOPY_DIR_H2D],
           (unsigned long long)s.dir_pieces[CUCOPY_DIR_H2D], (unsigned long long)s.dir_bytes[CUCOPY_DIR_H2D]);
    CHECK(s.dir_operations[CUCOPY_DIR_D2H] == 1 && s.dir_bytes[CUCOPY_DIR_D2H] == 64);
    CHECK(s.dir_operations[CUCOPY_DIR_HOST] == 1 && s.dir_bytes[CUCOPY_DIR_HOST] == 16);
    CHECK(s.device_count == devices);
    CHECK(dev_field(s.device_bytes, 0, CUCOPY_DIR_H2D) == h2d_bytes);
    CHECK(dev_field(s.device_bytes, d1, CUCOPY_DIR_D2H) == 64);
    CHECK(s.no_resource == no_resource && s.fences == 1 && s.flushes == 1);
    CHECKF(s.contexts_seen == (uint64_t)(devices >= 2 ? 2 : 1), "contexts_seen %llu",
           (unsigned long long)s.contexts_seen);

    /* Only the masked fields are written. */
    s = stats(CUCOPY_IFACE_STATS_EVENTS);
    CHECKF(s.fences == 1 && s.dir_operations[0] == 0xeeeeeeeeeeeeeeeeull && (uint32_t)s.device_count == 0xeeeeeeeeu,
           "fields outside field_mask were written");

    /* A released context's counts stay. */
    cucopy_mem_attr_t a = {.field_mask = CUCOPY_MEM_ATTR_CONTEXT_ID};
    REQUIRE_OK(cucopy_mem_query(ctx, (void *)(uintptr_t)tc_buf_addr(&dev1, 0), 8, &a));
    CHECK_STATUS(cucopy_iface_release_context(iface, a.context_id), CUCOPY_OK);
    s = stats(ALL);
    CHECK(dev_field(s.device_bytes, d1, CUCOPY_DIR_D2H) == 64);
    CHECK(s.contexts_released >= 1);

    /* The lives: device 1's released one keeps its count. Used again, it is
     * a new life; the count comes first with capacity 0, then the array. */
    CHECK_STATUS(cucopy_ep_get_short(ep, host2.host, 32, tc_buf_addr(&dev1, 0)), CUCOPY_OK);
    s = stats(CUCOPY_IFACE_STATS_INCARNATIONS);
    size_t lives = s.incarnations_count;
    CHECKF(lives == (size_t)(devices >= 2 ? 3 : 2) && s.incarnations_dropped == 0,
           "%zu lives, %llu dropped", lives, (unsigned long long)s.incarnations_dropped);
    cucopy_incarnation_stats_t inc[4];
    memset(inc, 0xee, sizeof(inc));
    s.field_mask = CUCOPY_IFACE_STATS_INCARNATIONS;
    s.incarnations = inc;
    s.incarnations_capacity = 4;
    CHECK_STATUS(cucopy_iface_stats(iface, &s), CUCOPY_OK);
    int released = -1, again = -1;
    for (size_t k = 0; k < lives && k < 4; k++) {
        CHECKF(inc[k].serial == k + 1, "life %zu has serial %llu", k, (unsigned long long)inc[k].serial);
        if (inc[k].context_id == a.context_id && inc[k].state == CUCOPY_INCARNATION_RELEASED)
            released = (int)k;
        if (inc[k].context_id == a.context_id && inc[k].state == CUCOPY_INCARNATION_LIVE)
            again = (int)k;
    }
    CHECKF(released >= 0 && again > released, "device %d's lives: released %d, live again %d", d1,
           released, again);
    if (released >= 0 && again >= 0) {
        CHECK(inc[released].device == d1 && inc[released].bytes[CUCOPY_DIR_D2H] == 64 &&
              inc[released].operations[CUCOPY_DIR_D2H] == 1);
        CHECK(inc[again].bytes[CUCOPY_DIR_D2H] == 32 && inc[again].pieces[CUCOPY_DIR_D2H] == 1);
    }
    /* A smaller array gets the first lives; the count says how many there are. */
    memset(inc, 0xee, sizeof(inc));
    s.incarnations_capacity = 1;
    CHECK_STATUS(cucopy_iface_stats(iface, &s), CUCOPY_OK);
    CHECK(s.incarnations_count == lives && inc[0].serial == 1 && inc[1].serial == 0xeeeeeeeeeeeeeeeeull);
    s.incarnations = NULL;
    CHECK_STATUS(cucopy_iface_stats(iface, &s), CUCOPY_ERR_INVALID_PARAM);

    /* Bad input. */
    CHECK_STATUS(cucopy_iface_stats(NULL, &s), CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(cucopy_iface_stats(iface, NULL), CUCOPY_ERR_INVALID_PARAM);
    s.field_mask = 1u << 20;
    CHECK_STATUS(cucopy_iface_stats(iface, &s), CUCOPY_ERR_INVALID_PARAM);

    CHECK_STATUS(cucopy_ep_destroy(ep), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);
    CHECK_STATUS(cucopy_context_destroy(ctx), CUCOPY_OK);
    tc_buf_free(&host);
    tc_buf_free(&host2);
    tc_buf_free(&dev0);
    tc_buf_free(&dev1);
    return tc_finish();
}
