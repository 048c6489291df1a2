/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Raw driver helpers for the Fortran tests, callable from Fortran through
 * bind(C) interfaces (module ftest, ftest.f90): device memory on a chosen
 * device's primary context, written and read with cuMemcpy, never through
 * cucopy. Built on testdrv (tests/common), so the same binaries run on the
 * fake driver and on real GPUs.
 */
#include "testdrv.h"

#include <stdint.h>
#include <stdio.h>

static cdContext primaries[64];

/* Load the driver; the number of devices, or -1. */
int ftd_init(void)
{
    if (testdrv_load() != 0)
        return -1;
    return td.device_count;
}

int ftd_is_fake(void)
{
    return td.is_fake;
}

static cdContext primary(int dev)
{
    if (dev < 0 || dev >= 64 || dev >= td.device_count)
        return NULL;
    if (primaries[dev] == NULL) {
        cdDevice d;
        if (td.cuDeviceGet(&d, dev) != CD_SUCCESS ||
            td.cuDevicePrimaryCtxRetain(&primaries[dev], d) != CD_SUCCESS) {
            fprintf(stderr, "ftest_drv: cannot retain device %d's primary context\n", dev);
            return NULL;
        }
    }
    return primaries[dev];
}

static int push(int dev)
{
    cdContext ctx = primary(dev);
    if (ctx == NULL)
        return -1;
    cdResult r = td.cuCtxPushCurrent(ctx);
    if (r != CD_SUCCESS) {
        fprintf(stderr, "ftest_drv: cuCtxPushCurrent: %s\n", testdrv_error_name(r));
        return -1;
    }
    return 0;
}

static int pop_and(cdResult r, const char *what)
{
    cdContext popped = NULL;
    td.cuCtxPopCurrent(&popped);
    if (r != CD_SUCCESS) {
        fprintf(stderr, "ftest_drv: %s: %s\n", what, testdrv_error_name(r));
        return -1;
    }
    return 0;
}

/* cuMemAlloc on device dev (its primary context); 0 on failure. */
uint64_t ftd_dev_alloc(int dev, size_t bytes)
{
    cdDevicePtr p = 0;
    if (push(dev) != 0)
        return 0;
    if (pop_and(td.cuMemAlloc(&p, bytes > 0 ? bytes : 1), "cuMemAlloc") != 0)
        return 0;
    return (uint64_t)p;
}

/* cuMemAllocManaged (attached globally) on device dev; 0 on failure. */
uint64_t ftd_managed_alloc(int dev, size_t bytes)
{
    cdDevicePtr p = 0;
    if (push(dev) != 0)
        return 0;
    if (pop_and(td.cuMemAllocManaged(&p, bytes > 0 ? bytes : 1, CD_MEM_ATTACH_GLOBAL),
                "cuMemAllocManaged") != 0)
        return 0;
    return (uint64_t)p;
}

int ftd_dev_free(int dev, uint64_t ptr)
{
    if (push(dev) != 0)
        return -1;
    return pop_and(td.cuMemFree((cdDevicePtr)ptr), "cuMemFree");
}

/* Host -> device, complete when it returns. */
int ftd_htod(int dev, uint64_t dst, const void *src, size_t bytes)
{
    if (push(dev) != 0)
        return -1;
    cdResult r = td.cuMemcpyHtoD((cdDevicePtr)dst, src, bytes);
    if (r == CD_SUCCESS)
        r = td.cuCtxSynchronize();
    return pop_and(r, "cuMemcpyHtoD");
}

/* Device -> host. */
int ftd_dtoh(int dev, void *dst, uint64_t src, size_t bytes)
{
    if (push(dev) != 0)
        return -1;
    return pop_and(td.cuMemcpyDtoH(dst, (cdDevicePtr)src, bytes), "cuMemcpyDtoH");
}

/* 1 when the calling thread has no current context. */
int ftd_no_current(void)
{
    cdContext ctx = NULL;
    if (td.cuCtxGetCurrent(&ctx) != CD_SUCCESS)
        return 0;
    return ctx == NULL;
}
