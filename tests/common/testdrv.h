/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Raw CUDA driver access for tests and tools: allocation, data set-up and
 * checks, contexts, and the "raw driver" baseline of cucopy_perftest.
 *
 * Loads $CUCOPY_CUDA_DRIVER (or libcuda.so.1) itself, exactly like the library,
 * and resolves every entry of cudadrv/entry_points.h through cuGetProcAddress,
 * so the same binaries run on the fake driver and on real GPUs.
 */
#ifndef CUCOPY_TESTDRV_H
#define CUCOPY_TESTDRV_H

#include "cd_types.h"

struct testdrv {
    void *lib;
    int driver_version;
    int device_count;
    int is_fake;
#define CD_ENTRY(name, symbol, version, use, params) cdResult(*name) params;
#include "entry_points.h"
#undef CD_ENTRY
};

/* The driver table, filled by testdrv_load(). */
extern struct testdrv td;

/* Load the driver, cuInit(0), resolve every entry. The library's required
 * entries must exist; optional and tests-only ones stay NULL on drivers that
 * predate them (e.g. cuMemAdvise_v2 before 12.2): check before use.
 * Returns 0, or -1 with a message on stderr. Idempotent. */
int testdrv_load(void);

/* The fake driver's control API (tests/fakecuda/fakecuda.h), or NULL on a
 * real driver. */
void *testdrv_fake_sym(const char *name);

/* Name of a CUresult ("CUDA_ERROR_INVALID_VALUE"). */
const char *testdrv_error_name(cdResult r);

/* Abort the test with file:line and the error name when r is not success. */
#define TD_CHECK(call)                                                              \
    do {                                                                            \
        cdResult td_r_ = (call);                                                    \
        if (td_r_ != CD_SUCCESS)                                                    \
            testdrv_fail(__FILE__, __LINE__, #call, td_r_);                         \
    } while (0)

void testdrv_fail(const char *file, int line, const char *what, cdResult r);

#endif
