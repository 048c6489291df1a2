/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A libcucopy with cucopy_ep_copy_2d, for testing the shim's 2-D copy path
 * (mpi/shim_types.c) before libcucopy has the call: CUCOPY_MPI_LIBCUCOPY
 * names this library, which links libcucopy.so.0 (so every other cucopy_*
 * symbol the shim looks up resolves there, dlsym searching the dependencies)
 * and adds cucopy_ep_copy_2d with the contract the shim expects (that of
 * cucopy_ep_copy_batch, one entry per strided run): it checks each entry
 * (1 to 64 of them, height >= 1, pitches >= width, nothing NULL) and copies
 * row by row with cucopy_ep_put_short, synchronously (CUCOPY_OK: finished
 * now, the completion untouched).
 *
 * At exit it prints "fake_copy_2d: C calls, E entries, R rows" on stderr
 * (the CTest requires it: the path was taken), and "fake_copy_2d: REFUSED
 * ..." for an entry it refused.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "cucopy.h"

/* The layout the shim declares (struct shim_copy_2d, mpi/shim.h). */
typedef struct fake_copy_2d {
    void *dst;
    size_t dst_pitch;
    const void *src;
    size_t src_pitch;
    size_t width;
    size_t height;
    cucopy_memh_h dst_memh, src_memh;
} fake_copy_2d_t;

static _Atomic unsigned long calls, entries, rows;

__attribute__((visibility("default"))) cucopy_status_t
cucopy_ep_copy_2d(cucopy_ep_h ep, const fake_copy_2d_t *copies, size_t count,
                  cucopy_completion_t *comp)
{
    (void)comp;
    if (copies == NULL || count == 0 || count > 64) {
        fprintf(stderr, "fake_copy_2d: REFUSED a call of %zu entries\n", count);
        return CUCOPY_ERR_INVALID_PARAM;
    }
    for (size_t i = 0; i < count; i++) {
        const fake_copy_2d_t *e = &copies[i];
        if (e->dst == NULL || e->src == NULL || e->width == 0 || e->height == 0 ||
            e->dst_pitch < e->width || e->src_pitch < e->width) {
            fprintf(stderr,
                    "fake_copy_2d: REFUSED entry %zu: width %zu height %zu pitches %zu %zu\n",
                    i, e->width, e->height, e->dst_pitch, e->src_pitch);
            return CUCOPY_ERR_INVALID_PARAM;
        }
    }
    atomic_fetch_add(&calls, 1);
    atomic_fetch_add(&entries, count);
    for (size_t i = 0; i < count; i++) {
        const fake_copy_2d_t *e = &copies[i];
        for (size_t r = 0; r < e->height; r++) {
            cucopy_status_t st = cucopy_ep_put_short(
                ep, (const char *)e->src + r * e->src_pitch, e->width,
                (uint64_t)(uintptr_t)((char *)e->dst + r * e->dst_pitch));
            if (st != CUCOPY_OK)
                return st;
        }
        atomic_fetch_add(&rows, e->height);
    }
    return CUCOPY_OK;
}

__attribute__((destructor)) static void report(void)
{
    if (atomic_load(&calls) > 0)
        fprintf(stderr, "fake_copy_2d: %lu calls, %lu entries, %lu rows\n", atomic_load(&calls),
                atomic_load(&entries), atomic_load(&rows));
}
