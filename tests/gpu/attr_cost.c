/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Cost of the driver queries on cucopy's per-copy path, on the real driver:
 * cuPointerGetAttributes with the 4 attributes the context choice needs and
 * with the 2 range attributes the bounds check adds, per memory kind, plus
 * cuCtxGetCurrent and cuCtxGetId. Informs what the hot path can afford.
 *
 *   gcc -O2 -std=gnu11 -I cudadrv -I tests/common tests/gpu/attr_cost.c \
 *       tests/common/testdrv.c -ldl -o attr_cost && ./attr_cost
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "testdrv.h"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double attrs_ns(cdDevicePtr p, unsigned n)
{
    unsigned int attrs[6] = {
        CD_POINTER_ATTRIBUTE_MEMORY_TYPE,      CD_POINTER_ATTRIBUTE_CONTEXT,
        CD_POINTER_ATTRIBUTE_DEVICE_ORDINAL,   CD_POINTER_ATTRIBUTE_IS_MANAGED,
        CD_POINTER_ATTRIBUTE_RANGE_START_ADDR, CD_POINTER_ATTRIBUTE_RANGE_SIZE,
    };
    unsigned int type = 0;
    cdContext ctx = NULL;
    int ordinal = 0;
    unsigned int managed = 0;
    cdDevicePtr start = 0;
    size_t size = 0;
    void *data[6] = {&type, &ctx, &ordinal, &managed, &start, &size};
    const int iters = 200000;
    double t0 = now_ns();
    for (int i = 0; i < iters; i++)
        TD_CHECK(td.cuPointerGetAttributes(n, attrs, data, p));
    return (now_ns() - t0) / iters;
}

int main(void)
{
    if (testdrv_load() != 0)
        return 1;
    cdContext ctx = NULL;
    cdContext popped = NULL;
    TD_CHECK(td.cuDevicePrimaryCtxRetain(&ctx, 0));
    TD_CHECK(td.cuCtxPushCurrent(ctx));
    cdDevicePtr dev = 0;
    cdDevicePtr managed = 0;
    void *pinned = NULL;
    TD_CHECK(td.cuMemAlloc(&dev, 1 << 20));
    TD_CHECK(td.cuMemAllocManaged(&managed, 1 << 20, CD_MEM_ATTACH_GLOBAL));
    TD_CHECK(td.cuMemHostAlloc(&pinned, 1 << 20, CD_MEMHOSTALLOC_PORTABLE));
    void *pageable = malloc(1 << 20);
    struct {
        const char *name;
        cdDevicePtr p;
    } kinds[] = {{"pageable", (cdDevicePtr)(uintptr_t)pageable},
                 {"pinned", (cdDevicePtr)(uintptr_t)pinned},
                 {"device", dev + 4096},
                 {"managed", managed}};
    for (unsigned k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
        printf("attr_cost: cuPointerGetAttributes %-8s 4 attrs %6.1f ns, 6 attrs %6.1f ns\n",
               kinds[k].name, attrs_ns(kinds[k].p, 4), attrs_ns(kinds[k].p, 6));
    const int iters = 1000000;
    cdContext cur = NULL;
    double t0 = now_ns();
    for (int i = 0; i < iters; i++)
        TD_CHECK(td.cuCtxGetCurrent(&cur));
    printf("attr_cost: cuCtxGetCurrent %.1f ns\n", (now_ns() - t0) / iters);
    if (td.cuCtxGetId != NULL) {
        unsigned long long id = 0;
        t0 = now_ns();
        for (int i = 0; i < iters; i++)
            TD_CHECK(td.cuCtxGetId(ctx, &id));
        printf("attr_cost: cuCtxGetId %.1f ns\n", (now_ns() - t0) / iters);
    }
    TD_CHECK(td.cuMemFree(dev));
    TD_CHECK(td.cuMemFree(managed));
    TD_CHECK(td.cuMemFreeHost(pinned));
    free(pageable);
    TD_CHECK(td.cuCtxPopCurrent(&popped));
    TD_CHECK(td.cuDevicePrimaryCtxRelease(0));
    return 0;
}
