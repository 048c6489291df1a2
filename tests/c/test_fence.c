/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cucopy_iface_fence and cucopy_ep_fence order operations across streams,
 * contexts and devices without waits in between:
 *  - a chain host -> GPU 0 -> GPU 1 -> host (GPU 0 -> GPU 0 with one
 *    device), issued with a fence between the steps and no wait, many
 *    rounds, every byte verified (under CTest the fake driver's streams are
 *    slow, FAKECUDA_DELAY_US, so a missing order shows as stale data);
 *  - the same chain ending in a host to host copy on the CPU, which waits
 *    for the copies before the fence;
 *  - a short copy after a fence reads what the zcopy before it wrote;
 *  - bad input: unknown flags, NULL handles;
 *  - the cost of a fence with nothing in flight and with work in flight
 *    (printed, not asserted).
 */
#define _GNU_SOURCE
#include "check.h"
#include "mem.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define SIZE 65536
#define ROUNDS 50
#define FILL 0x5a
#define TIMEOUT_S 60.0

static cucopy_iface_h iface;
static cucopy_ep_h ep;
static struct tc_buf src;  /* pinned */
static struct tc_buf dev0; /* GPU 0 */
static struct tc_buf dev1; /* GPU 1, or a second buffer on GPU 0 */
static struct tc_buf mid;  /* pageable */
static struct tc_buf dst;  /* pageable */

static void wait_all(struct tc_comp *c, int n)
{
    double deadline = tc_now() + TIMEOUT_S;
    for (;;) {
        int pending = 0;
        for (int k = 0; k < n; k++)
            pending += c[k].fired == 0;
        if (pending == 0 || tc_now() > deadline)
            break;
        int r = cucopy_iface_progress(iface);
        if (FAIL_IF(r < 0, "progress: %s: %s", tc_status_name(r), cucopy_last_error()))
            return;
    }
    for (int k = 0; k < n; k++)
        CHECKF(c[k].fired == 1 && c[k].comp.status == CUCOPY_OK, "step %d: fired %d, status %s",
               k, c[k].fired, tc_status_name(c[k].comp.status));
}

/* One zcopy of SIZE bytes from one buffer to another (put: local -> remote). */
static void step(const struct tc_buf *from, const struct tc_buf *to, struct tc_comp *c)
{
    cucopy_iov_t iov = {(void *)(uintptr_t)tc_buf_addr(from, 0), SIZE};
    tc_comp_init(c, 1);
    cucopy_status_t s = cucopy_ep_put_zcopy(ep, &iov, 1, tc_buf_addr(to, 0), &c->comp);
    if (s == CUCOPY_OK)
        c->fired = 1; /* host to host: done at once */
    else
        CHECK_STATUS(s, CUCOPY_INPROGRESS);
}

static void fence(int use_ep)
{
    CHECK_STATUS(use_ep ? cucopy_ep_fence(ep, 0) : cucopy_iface_fence(iface, 0), CUCOPY_OK);
}

static void chain_rounds(void)
{
    unsigned char back[SIZE];
    int wrong = 0;
    tc_case_begin("fenced chain host -> GPU 0 -> GPU 1 -> host, %d rounds", ROUNDS);
    for (int r = 0; r < ROUNDS; r++) {
        const unsigned char *data = tc_pattern(SIZE) + r;
        struct tc_comp c[3];
        tc_buf_write(&src, 0, data, SIZE);
        tc_buf_set(&dst, 0, FILL, SIZE);
        step(&src, &dev0, &c[0]);
        fence(r % 2);
        step(&dev0, &dev1, &c[1]);
        fence(r % 2);
        step(&dev1, &dst, &c[2]);
        wait_all(c, 3);
        tc_buf_read(&dst, 0, back, SIZE);
        wrong += memcmp(back, data, SIZE) != 0;
    }
    CHECKF(wrong == 0, "%d of %d fenced chains delivered wrong data", wrong, ROUNDS);
    tc_case_end();
}

static void chain_to_cpu_copy(void)
{
    unsigned char back[SIZE];
    int wrong = 0;
    tc_case_begin("fenced chain ending in a CPU copy, %d rounds", ROUNDS);
    for (int r = 0; r < ROUNDS; r++) {
        const unsigned char *data = tc_pattern(SIZE) + 100 + r;
        struct tc_comp c[3];
        tc_buf_write(&src, 0, data, SIZE);
        tc_buf_set(&mid, 0, FILL, SIZE);
        tc_buf_set(&dst, 0, FILL, SIZE);
        step(&src, &dev0, &c[0]);
        fence(0);
        step(&dev0, &mid, &c[1]);
        fence(0);
        step(&mid, &dst, &c[2]); /* pageable to pageable: on the CPU */
        CHECKF(c[2].fired == 1, "the host to host copy did not finish at once");
        tc_buf_read(&dst, 0, back, SIZE);
        wrong += memcmp(back, data, SIZE) != 0;
        wait_all(c, 2);
    }
    CHECKF(wrong == 0, "%d of %d CPU copies after a fence read stale data", wrong, ROUNDS);
    tc_case_end();
}

static void short_after_fence(void)
{
    unsigned char back[SIZE];
    const unsigned char *data = tc_pattern(SIZE) + 200;
    struct tc_comp c;
    tc_case_begin("short copy after a fence");
    tc_buf_write(&src, 0, data, SIZE);
    tc_buf_set(&dst, 0, FILL, SIZE);
    step(&src, &dev0, &c);
    fence(1);
    CHECK_STATUS(cucopy_ep_get_short(ep, dst.host, SIZE, tc_buf_addr(&dev0, 0)), CUCOPY_OK);
    tc_buf_read(&dst, 0, back, SIZE);
    CHECKF(memcmp(back, data, SIZE) == 0, "the short copy read what the zcopy had not written");
    wait_all(&c, 1);
    tc_case_end();
}

static void bad_input(void)
{
    CHECK_STATUS(cucopy_iface_fence(iface, 1), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_ep_fence(ep, 0x10), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_iface_fence(NULL, 0), CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(cucopy_ep_fence(NULL, 0), CUCOPY_ERR_INVALID_HANDLE);
}

/* Printed for docs/gpu-validation.md; never asserted (shared machines). */
static void cost(void)
{
    enum { N = 100000 };
    double t0 = tc_now();
    for (int k = 0; k < N; k++)
        cucopy_iface_fence(iface, 0);
    double idle_ns = (tc_now() - t0) / N * 1e9;

    enum { M = 200 };
    struct tc_comp c[2];
    double fence_s = 0;
    double fenced_s = 0;
    double plain_s = 0;
    for (int k = 0; k < 2 * M; k++) {
        int fenced = k % 2;
        step(&src, &dev0, &c[0]);
        double t1 = tc_now();
        if (fenced)
            cucopy_iface_fence(iface, 0);
        double t2 = tc_now();
        step(&dev0, &dev1, &c[1]); /* after a fence: pays the stream wait */
        double t3 = tc_now();
        fence_s += fenced ? t2 - t1 : 0;
        *(fenced ? &fenced_s : &plain_s) += t3 - t2;
        wait_all(c, 2);
    }
    printf("test_fence: fence with nothing in flight %.0f ns; with one copy in flight %.2f us; "
           "the next copy %.2f us after a fence, %.2f us without one\n",
           idle_ns, fence_s / M * 1e6, fenced_s / M * 1e6, plain_s / M * 1e6);
}

int main(void)
{
    int devices = tc_begin("test_fence", 2);
    tc_buf_alloc(&src, TC_MEM_PINNED, SIZE);
    tc_buf_alloc(&dev0, TC_MEM_DEV0, SIZE);
    tc_buf_alloc(&dev1, devices >= 2 ? TC_MEM_DEV1 : TC_MEM_DEV0, SIZE);
    tc_buf_alloc(&mid, TC_MEM_PAGEABLE, SIZE);
    tc_buf_alloc(&dst, TC_MEM_PAGEABLE, SIZE);
    if (devices < 2)
        printf("test_fence: one device: the chain's middle step is GPU 0 -> GPU 0\n");

    cucopy_context_h ctx = NULL;
    REQUIRE_OK(cucopy_context_create(NULL, &ctx));
    REQUIRE_OK(cucopy_iface_open(ctx, NULL, &iface));
    REQUIRE_OK(cucopy_ep_create(iface, &ep));

    CHECK_STATUS(cucopy_iface_fence(iface, 0), CUCOPY_OK); /* nothing ever issued */
    chain_rounds();
    chain_to_cpu_copy();
    short_after_fence();
    bad_input();
    cost();

    CHECK_STATUS(cucopy_ep_destroy(ep), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);
    CHECK_STATUS(cucopy_context_destroy(ctx), CUCOPY_OK);
    tc_buf_free(&src);
    tc_buf_free(&dev0);
    tc_buf_free(&dev1);
    tc_buf_free(&mid);
    tc_buf_free(&dst);
    return tc_finish();
}
