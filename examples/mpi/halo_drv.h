/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The raw CUDA driver steps of the halo examples that are not cucopy's job:
 * making device 0's primary context current (as a CUDA program does at
 * start), device and pinned host allocation, and the check that the program's
 * current context is still the one it set.
 *
 * The driver is loaded from $CUCOPY_CUDA_DRIVER or libcuda.so.1 (testdrv.h),
 * exactly like cucopy loads it, so the same binaries run on the fake driver
 * and on real GPUs. Every function is callable from Fortran through
 * bind(C) (plain C types, no structs). The int-returning functions other
 * than halo_drv_init return 1 on success and 0 on failure (with a message on
 * stderr).
 */
#ifndef CUCOPY_HALO_DRV_H
#define CUCOPY_HALO_DRV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Load the driver, retain device 0's primary context and make it current on
 * the calling thread. Returns the device count (>= 1), or -1 with a message
 * on stderr. */
int halo_drv_init(void);

/* 1 when device 0's primary context is the calling thread's current
 * context, else 0. */
int halo_drv_check_current(void);

/* cuMemAlloc of bytes in device dev's primary context (retained on first use
 * and kept until halo_drv_fini). Returns the device address, 0 on failure. */
uint64_t halo_drv_dev_alloc(int dev, size_t bytes);
int halo_drv_dev_free(int dev, uint64_t addr);

/* Pinned, portable host memory (cuMemHostAlloc). NULL on failure. */
void *halo_drv_host_alloc(size_t bytes);
int halo_drv_host_free(void *ptr);

/* Release the primary contexts retained here (device 0's last). The calling
 * thread's current context is left as cuDevicePrimaryCtxRelease leaves it. */
int halo_drv_fini(void);

#ifdef __cplusplus
}
#endif

#endif
