/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test buffers of every memory kind, allocated and read/written through the
 * raw driver (testdrv.h), never through cucopy, in the contexts of ctx.h.
 * Device and managed memory are only touched with cuMemcpy/cuMemset (device
 * memory is not CPU accessible, on a real GPU or on the fake driver).
 */
#ifndef CUCOPY_TEST_MEM_H
#define CUCOPY_TEST_MEM_H

#include "ctx.h"
#include "testdrv.h"

#include <stddef.h>
#include <stdint.h>

enum tc_mem_kind {
    TC_MEM_PAGEABLE, /* malloc */
    TC_MEM_PINNED,   /* cuMemHostAlloc(PORTABLE) in device 0's primary context */
    TC_MEM_DEV0,     /* cuMemAlloc in device 0's primary context */
    TC_MEM_DEV1,     /* cuMemAlloc in device 1's primary context */
    TC_MEM_MANAGED,  /* cuMemAllocManaged in device 0's primary context */
    TC_MEM_KINDS
};

struct tc_buf {
    enum tc_mem_kind kind;
    cdContext ctx;     /* context used for driver calls on it (NULL: pageable) */
    unsigned char *host; /* CPU pointer for host kinds, else NULL */
    cdDevicePtr dptr;  /* address (host kinds: the same as host) */
    size_t size;
};

const char *tc_mem_kind_name(enum tc_mem_kind kind);

/* Device of a device kind (DEV0 -> 0, DEV1 -> 1), -1 for the others. */
int tc_mem_kind_device(enum tc_mem_kind kind);

/* Allocate; ends the test on failure. */
void tc_buf_alloc(struct tc_buf *b, enum tc_mem_kind kind, size_t size);

/* Allocate device memory in a given context (e.g. one from cuCtxCreate). */
void tc_buf_alloc_in(struct tc_buf *b, cdContext ctx, size_t size);
void tc_buf_free(struct tc_buf *b);

/* A tc_buf view of memory the test manages itself (VMM, pool, cucopy
 * memory): read and written with the raw driver in @p ctx (host memory:
 * directly). Never pass it to tc_buf_free. */
struct tc_buf tc_buf_view(enum tc_mem_kind kind, cdContext ctx, uint64_t addr, size_t size,
                          int host);

/* Address of byte off, as cucopy takes it. */
uint64_t tc_buf_addr(const struct tc_buf *b, size_t off);

void tc_buf_write(const struct tc_buf *b, size_t off, const void *src, size_t len);
void tc_buf_read(const struct tc_buf *b, size_t off, void *dst, size_t len);
void tc_buf_set(const struct tc_buf *b, size_t off, unsigned char value, size_t len);

/* A fixed pseudo-random byte sequence of at least len + 256 bytes; data for
 * seed s (0..255) is tc_pattern(len) + s. */
const unsigned char *tc_pattern(size_t len);

#endif
