/* SPDX-License-Identifier: BSD-3-Clause */
#include "halo_drv.h"

#include "testdrv.h"

#include <stdio.h>

#define HALO_MAX_DEVICES 64

static cdContext primary[HALO_MAX_DEVICES];

static int drv_ok(cdResult r, const char *what)
{
    if (r == CD_SUCCESS)
        return 1;
    fprintf(stderr, "halo_drv: %s failed: %s\n", what, testdrv_error_name(r));
    return 0;
}

static cdContext retain(int dev)
{
    if (dev < 0 || dev >= td.device_count || dev >= HALO_MAX_DEVICES) {
        fprintf(stderr, "halo_drv: no device %d (%d visible)\n", dev, td.device_count);
        return NULL;
    }
    if (primary[dev] == NULL) {
        cdDevice d;
        if (!drv_ok(td.cuDeviceGet(&d, dev), "cuDeviceGet") ||
            !drv_ok(td.cuDevicePrimaryCtxRetain(&primary[dev], d), "cuDevicePrimaryCtxRetain"))
            primary[dev] = NULL;
    }
    return primary[dev];
}

int halo_drv_init(void)
{
    if (testdrv_load() != 0)
        return -1;
    if (td.device_count < 1) {
        fprintf(stderr, "halo_drv: the driver shows no device\n");
        return -1;
    }
    cdContext c0 = retain(0);
    if (c0 == NULL || !drv_ok(td.cuCtxSetCurrent(c0), "cuCtxSetCurrent"))
        return -1;
    return td.device_count;
}

int halo_drv_check_current(void)
{
    cdContext cur = NULL;
    if (td.lib == NULL || primary[0] == NULL ||
        !drv_ok(td.cuCtxGetCurrent(&cur), "cuCtxGetCurrent"))
        return 0;
    return cur == primary[0];
}

/* Run one driver call with dev's primary context pushed. */
#define IN_CONTEXT(dev, what, call)                                                     \
    do {                                                                                \
        cdContext c_ = retain(dev);                                                     \
        cdContext popped_;                                                              \
        if (c_ == NULL || !drv_ok(td.cuCtxPushCurrent(c_), "cuCtxPushCurrent"))         \
            return 0;                                                                   \
        int ok_ = drv_ok((call), what);                                                 \
        if (!drv_ok(td.cuCtxPopCurrent(&popped_), "cuCtxPopCurrent"))                   \
            ok_ = 0;                                                                    \
        if (!ok_)                                                                       \
            return 0;                                                                   \
    } while (0)

uint64_t halo_drv_dev_alloc(int dev, size_t bytes)
{
    cdDevicePtr p = 0;
    IN_CONTEXT(dev, "cuMemAlloc", td.cuMemAlloc(&p, bytes));
    return p;
}

int halo_drv_dev_free(int dev, uint64_t addr)
{
    IN_CONTEXT(dev, "cuMemFree", td.cuMemFree(addr));
    return 1;
}

void *halo_drv_host_alloc(size_t bytes)
{
    void *p = NULL;
    cdContext c_ = retain(0);
    cdContext popped;
    if (c_ == NULL || !drv_ok(td.cuCtxPushCurrent(c_), "cuCtxPushCurrent"))
        return NULL;
    if (!drv_ok(td.cuMemHostAlloc(&p, bytes, CD_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc"))
        p = NULL;
    if (!drv_ok(td.cuCtxPopCurrent(&popped), "cuCtxPopCurrent"))
        return NULL;
    return p;
}

int halo_drv_host_free(void *ptr)
{
    IN_CONTEXT(0, "cuMemFreeHost", td.cuMemFreeHost(ptr));
    return 1;
}

int halo_drv_fini(void)
{
    int ok = 1;
    for (int dev = HALO_MAX_DEVICES - 1; dev >= 0; dev--) {
        if (primary[dev] == NULL)
            continue;
        cdDevice d;
        if (!drv_ok(td.cuDeviceGet(&d, dev), "cuDeviceGet") ||
            !drv_ok(td.cuDevicePrimaryCtxRelease(d), "cuDevicePrimaryCtxRelease"))
            ok = 0;
        primary[dev] = NULL;
    }
    return ok;
}
