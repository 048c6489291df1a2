/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The devices of an MPI test program that gets its device memory from the
 * driver directly (testdrv: $CUCOPY_CUDA_DRIVER, the fake under CTest), as
 * p2p_device.c and the collective tests (coll_prog.h) do: up to two devices'
 * primary contexts, and pushing one of them around a driver call.
 */
#ifndef CUCOPY_MPI_DEV_PROG_H
#define CUCOPY_MPI_DEV_PROG_H

#include <mpi.h>
#include <stdio.h>

#include "testdrv.h"

static int ndev;             /* 1 or 2 */
static cdContext primary[2]; /* primary[1] is primary[0] with one device */

/* After MPI_Init: the test driver and up to two devices' primary contexts,
 * device 0's current (as a CUDA program does at start). Aborts the job,
 * naming @p prog, without a driver or a device. */
static inline void dev_prog_init(const char *prog)
{
    if (testdrv_load() != 0)
        MPI_Abort(MPI_COMM_WORLD, 3);
    ndev = td.device_count < 2 ? td.device_count : 2;
    if (ndev < 1) {
        fprintf(stderr, "%s: no device\n", prog);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    for (int d = 0; d < ndev; d++) {
        cdDevice dev;
        TD_CHECK(td.cuDeviceGet(&dev, d));
        TD_CHECK(td.cuDevicePrimaryCtxRetain(&primary[d], dev));
    }
    if (ndev == 1)
        primary[1] = primary[0];
    TD_CHECK(td.cuCtxSetCurrent(primary[0]));
}

static inline void push(int dev)
{
    TD_CHECK(td.cuCtxPushCurrent(primary[dev]));
}

static inline void pop(void)
{
    cdContext c;
    TD_CHECK(td.cuCtxPopCurrent(&c));
}

#endif
