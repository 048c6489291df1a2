/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the driver's own batch call reaches for small copies, without
 * cucopy: the window loop of cucopy_perftest --batch 16 (8 operations in
 * flight on one stream, one event per operation, the oldest polled), each
 * operation 16 copies of 8 bytes, issued two ways:
 *   loop   16 cuMemcpyAsync (the raw baseline of cucopy_perftest --batch)
 *   batch  one cuMemcpyBatchAsync of the 16 (what cucopy's batch call issues)
 * in each direction: h2d from pinned and from pageable memory, d2h into
 * pinned memory, d2d. Prints copies per second and batch/loop: the most a
 * batch call built on cuMemcpyBatchAsync can gain over the raw loop
 * (issue 12's goal for batches: 3x).
 *
 *   gcc -O2 -std=gnu11 -I cudadrv -I tests/common tests/gpu/batch_probe.c \
 *       tests/common/testdrv.c -ldl -o batch_probe && ./batch_probe
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cd_vmm.h"
#include "testdrv.h"

#define W 8
#define N 16
#define SIZE 8

static cdStream stream;
static cdEvent ev[W];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct dir {
    const char *name;
    cdDevicePtr dst, src; /* N copies of SIZE bytes, SIZE * 8 apart */
    struct cd_memcpy_attr attr;
};

static void issue(const struct dir *d, int batch)
{
    cdDevicePtr dsts[N], srcs[N];
    size_t sizes[N];
    for (int i = 0; i < N; i++) {
        dsts[i] = d->dst + (cdDevicePtr)i * SIZE * 8;
        srcs[i] = d->src + (cdDevicePtr)i * SIZE * 8;
        sizes[i] = SIZE;
    }
    if (batch) {
        struct cd_memcpy_attr attr = d->attr;
        size_t first = 0;
        TD_CHECK(td.cuMemcpyBatchAsync(dsts, srcs, sizes, N,
                                       (struct CUmemcpyAttributes_st *)&attr, &first, 1, stream));
    } else {
        for (int i = 0; i < N; i++)
            TD_CHECK(td.cuMemcpyAsync(dsts[i], srcs[i], sizes[i], stream));
    }
}

/* Million copies per second of ops operations of N copies. */
static double loop(const struct dir *d, int batch, long ops)
{
    long issued = 0, done = 0;
    double t0 = now_s();
    while (done < ops) {
        while (issued < ops && issued - done < W) {
            issue(d, batch);
            TD_CHECK(td.cuEventRecord(ev[issued % W], stream));
            issued++;
        }
        cdResult r = td.cuEventQuery(ev[done % W]);
        if (r == CD_SUCCESS)
            done++;
        else if (r != CD_ERROR_NOT_READY)
            TD_CHECK(r);
    }
    return (double)ops * N / (now_s() - t0) / 1e6;
}

int main(int argc, char **argv)
{
    long ops = argc > 1 ? atol(argv[1]) : 20000;
    if (testdrv_load() != 0)
        return 1;
    if (td.cuMemcpyBatchAsync == NULL) {
        printf("batch_probe: the driver has no cuMemcpyBatchAsync\n");
        return 77;
    }
    cdContext ctx;
    TD_CHECK(td.cuDevicePrimaryCtxRetain(&ctx, 0));
    TD_CHECK(td.cuCtxSetCurrent(ctx));
    size_t bytes = (size_t)N * SIZE * 8;
    cdDevicePtr d0, d1;
    void *pinned, *pageable = malloc(bytes);
    TD_CHECK(td.cuMemAlloc(&d0, bytes));
    TD_CHECK(td.cuMemAlloc(&d1, bytes));
    TD_CHECK(td.cuMemHostAlloc(&pinned, bytes, CD_MEMHOSTALLOC_PORTABLE));
    memset(pageable, 1, bytes);
    TD_CHECK(td.cuStreamCreate(&stream, CD_STREAM_NON_BLOCKING));
    for (int i = 0; i < W; i++)
        TD_CHECK(td.cuEventCreate(&ev[i], CD_EVENT_DISABLE_TIMING));
    struct cd_mem_location host = {CD_MEM_LOCATION_TYPE_HOST, 0};
    struct cd_mem_location dev = {CD_MEM_LOCATION_TYPE_DEVICE, 0};
    struct dir dirs[] = {
        {"h2d pinned", d0, (cdDevicePtr)(uintptr_t)pinned, {CD_MEMCPY_SRC_ACCESS_ORDER_STREAM, host, dev, 0}},
        {"h2d pageable", d0, (cdDevicePtr)(uintptr_t)pageable, {CD_MEMCPY_SRC_ACCESS_ORDER_STREAM, host, dev, 0}},
        {"d2h pinned", (cdDevicePtr)(uintptr_t)pinned, d0, {CD_MEMCPY_SRC_ACCESS_ORDER_STREAM, dev, host, 0}},
        {"d2d", d1, d0, {CD_MEMCPY_SRC_ACCESS_ORDER_STREAM, dev, dev, 0}},
    };
    for (size_t k = 0; k < sizeof(dirs) / sizeof(dirs[0]); k++) {
        (void)loop(&dirs[k], 0, ops / 10); /* warm both */
        (void)loop(&dirs[k], 1, ops / 10);
        for (int round = 0; round < 3; round++) {
            double l = loop(&dirs[k], 0, ops), b = loop(&dirs[k], 1, ops);
            printf("batch_probe: %-12s round %d: loop %.3f, batch %.3f Mcopies/s, batch/loop %.2f\n",
                   dirs[k].name, round, l, b, b / l);
        }
    }
    TD_CHECK(td.cuStreamSynchronize(stream));
    for (int i = 0; i < W; i++)
        TD_CHECK(td.cuEventDestroy(ev[i]));
    TD_CHECK(td.cuStreamDestroy(stream));
    TD_CHECK(td.cuMemFreeHost(pinned));
    TD_CHECK(td.cuMemFree(d0));
    TD_CHECK(td.cuMemFree(d1));
    TD_CHECK(td.cuDevicePrimaryCtxRelease(0));
    free(pageable);
    return 0;
}
