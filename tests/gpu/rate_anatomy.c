/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where a small zcopy's time goes, on the real driver, without cucopy: the
 * raw window loop of cucopy_perftest (8-byte H2D from pinned memory, 8 in
 * flight on one stream, cuMemcpyAsync + cuEventRecord per op, the oldest
 * event polled), then the same loop with the driver calls cucopy's copy
 * path adds, one group at a time:
 *   classify  two cuPointerGetAttributes (6 attributes) per issue
 *   ctx       cuCtxGetId + cuCtxGetCurrent per issue
 *   live      per poll: cuDevicePrimaryCtxGetState + cuCtxGetId +
 *             cuCtxGetCurrent (the incarnation check of progress)
 *   all       the three together (cucopy's driver calls per op)
 *   newest    the polling order of cucopy's progress (cd_query_queue): with
 *             more than two in flight, the oldest event, then the newest
 *             (done: all are), then in order from the second
 *   all+newest  cucopy's driver calls and its polling order
 * Each variant's rate is printed with its ratio to the plain loop and its
 * event queries per op, and the cost of each call alone (ns). No Go, no
 * cucopy: what the driver charges.
 *
 *   gcc -O2 -std=gnu11 -I cudadrv -I tests/common tests/gpu/rate_anatomy.c \
 *       tests/common/testdrv.c -ldl -o rate_anatomy && ./rate_anatomy
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "testdrv.h"

#define W 8

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum { CLASSIFY = 1, CTX = 2, LIVE = 4, NEWEST = 8 };

static cdContext ctx;
static cdStream stream;
static cdEvent ev[W];
static cdDevicePtr dev;
static void *pinned;

static void classify(cdDevicePtr p)
{
    unsigned int attrs[6] = {
        CD_POINTER_ATTRIBUTE_MEMORY_TYPE,      CD_POINTER_ATTRIBUTE_CONTEXT,
        CD_POINTER_ATTRIBUTE_DEVICE_ORDINAL,   CD_POINTER_ATTRIBUTE_IS_MANAGED,
        CD_POINTER_ATTRIBUTE_RANGE_START_ADDR, CD_POINTER_ATTRIBUTE_RANGE_SIZE,
    };
    unsigned int type = 0, managed = 0;
    cdContext c = NULL;
    int ordinal = 0;
    cdDevicePtr start = 0;
    size_t size = 0;
    void *data[6] = {&type, &c, &ordinal, &managed, &start, &size};
    TD_CHECK(td.cuPointerGetAttributes(6, attrs, data, p));
}

static void ctx_calls(void)
{
    unsigned long long id = 0;
    cdContext cur = NULL;
    TD_CHECK(td.cuCtxGetId(ctx, &id));
    TD_CHECK(td.cuCtxGetCurrent(&cur));
}

static void live_calls(void)
{
    unsigned int flags = 0;
    int active = 0;
    TD_CHECK(td.cuDevicePrimaryCtxGetState(0, &flags, &active));
    ctx_calls();
}

static long queries; /* cuEventQuery calls of the loops */

static cdResult query(long k)
{
    queries++;
    return td.cuEventQuery(ev[k % W]);
}

/* The polling of one loop turn: the leading done events of [done, issued),
 * oldest first (the plain loop), or in cd_query_queue's order (NEWEST). */
static long poll(long done, long issued, unsigned mask)
{
    long n = issued - done, k = 0;
    if ((mask & NEWEST) && n > 2) {
        cdResult r = query(done);
        if (r == CD_ERROR_NOT_READY)
            return done;
        TD_CHECK(r);
        if ((r = query(issued - 1)) == CD_SUCCESS)
            return issued;
        k = 1;
    }
    for (; k < n; k++) {
        cdResult r = query(done + k);
        if (r == CD_ERROR_NOT_READY)
            break;
        TD_CHECK(r);
    }
    return done + k;
}

/* Million ops per second of n ops with the extra calls of mask; *qpo: event
 * queries per op. */
static double loop(long n, unsigned mask, double *qpo)
{
    long issued = 0, done = 0;
    queries = 0;
    double t0 = now_s();
    while (done < n) {
        if (mask & LIVE)
            live_calls();
        done = poll(done, issued, mask);
        while (issued < n && issued - done < W) {
            if (mask & CLASSIFY) {
                classify((cdDevicePtr)(uintptr_t)pinned);
                classify(dev);
            }
            if (mask & CTX)
                ctx_calls();
            TD_CHECK(td.cuMemcpyAsync(dev, (cdDevicePtr)(uintptr_t)pinned, 8, stream));
            TD_CHECK(td.cuEventRecord(ev[issued % W], stream));
            issued++;
        }
    }
    double secs = now_s() - t0;
    if (qpo != NULL)
        *qpo = (double)queries / (double)n;
    return (double)n / secs / 1e6;
}

static double each_ns(void (*f)(void), long n)
{
    double t0 = now_s();
    for (long i = 0; i < n; i++)
        f();
    return (now_s() - t0) / (double)n * 1e9;
}

static void f_classify(void) { classify(dev); }
static void f_getid(void)
{
    unsigned long long id;
    TD_CHECK(td.cuCtxGetId(ctx, &id));
}
static void f_state(void)
{
    unsigned int flags;
    int active;
    TD_CHECK(td.cuDevicePrimaryCtxGetState(0, &flags, &active));
}
static void f_query_done(void) { (void)td.cuEventQuery(ev[0]); }
static void f_push_pop(void)
{
    cdContext p;
    TD_CHECK(td.cuCtxPushCurrent(ctx));
    TD_CHECK(td.cuCtxPopCurrent(&p));
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 200000;
    if (testdrv_load() != 0)
        return 1;
    TD_CHECK(td.cuDevicePrimaryCtxRetain(&ctx, 0));
    TD_CHECK(td.cuCtxSetCurrent(ctx));
    TD_CHECK(td.cuMemAlloc(&dev, 4096));
    TD_CHECK(td.cuMemHostAlloc(&pinned, 4096, CD_MEMHOSTALLOC_PORTABLE));
    TD_CHECK(td.cuStreamCreate(&stream, CD_STREAM_NON_BLOCKING));
    for (int i = 0; i < W; i++)
        TD_CHECK(td.cuEventCreate(&ev[i], CD_EVENT_DISABLE_TIMING));
    (void)loop(n / 10, 0, NULL); /* warm */
    static const struct {
        const char *name;
        unsigned mask;
    } v[] = {{"plain", 0},       {"+classify", CLASSIFY},    {"+ctx", CTX},
             {"+live", LIVE},    {"+classify+ctx", CLASSIFY | CTX}, {"all", CLASSIFY | CTX | LIVE},
             {"newest", NEWEST}, {"all+newest", CLASSIFY | CTX | LIVE | NEWEST}};
    for (int round = 0; round < 2; round++) {
        double base = 0;
        for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++) {
            double qpo = 0;
            double r = loop(n, v[k].mask, &qpo);
            if (k == 0)
                base = r;
            printf("rate_anatomy round %d: %-15s %.4f Mops/s  %.2f of plain  %.2f queries/op\n",
                   round, v[k].name, r, r / base, qpo);
        }
    }
    TD_CHECK(td.cuStreamSynchronize(stream));
    printf("rate_anatomy: cuPointerGetAttributes(6, device) %.0f ns, cuCtxGetId %.0f ns, "
           "cuDevicePrimaryCtxGetState %.0f ns, cuEventQuery (done) %.0f ns, push+pop %.0f ns\n",
           each_ns(f_classify, 100000), each_ns(f_getid, 100000), each_ns(f_state, 100000),
           each_ns(f_query_done, 100000), each_ns(f_push_pop, 100000));
    return 0;
}
