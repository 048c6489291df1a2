/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include "mem.h"

#include "check.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t pattern_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char *pattern;
static size_t pattern_len;

const char *tc_mem_kind_name(enum tc_mem_kind kind)
{
    switch (kind) {
    case TC_MEM_PAGEABLE: return "pageable";
    case TC_MEM_PINNED: return "pinned";
    case TC_MEM_DEV0: return "dev0";
    case TC_MEM_DEV1: return "dev1";
    case TC_MEM_MANAGED: return "managed";
    default: return "?";
    }
}

int tc_mem_kind_device(enum tc_mem_kind kind)
{
    return kind == TC_MEM_DEV0 ? 0 : kind == TC_MEM_DEV1 ? 1 : -1;
}

void tc_buf_alloc(struct tc_buf *b, enum tc_mem_kind kind, size_t size)
{
    memset(b, 0, sizeof(*b));
    b->kind = kind;
    b->size = size;
    size_t bytes = size > 0 ? size : 1;
    switch (kind) {
    case TC_MEM_PAGEABLE:
        b->host = malloc(bytes);
        REQUIRE(b->host != NULL);
        break;
    case TC_MEM_PINNED: {
        void *p = NULL;
        b->ctx = tc_primary(0);
        tc_push(b->ctx);
        TD_CHECK(td.cuMemHostAlloc(&p, bytes, CD_MEMHOSTALLOC_PORTABLE));
        tc_pop(b->ctx);
        b->host = p;
        break;
    }
    case TC_MEM_DEV0:
    case TC_MEM_DEV1:
        b->ctx = tc_primary(tc_mem_kind_device(kind));
        tc_push(b->ctx);
        TD_CHECK(td.cuMemAlloc(&b->dptr, bytes));
        tc_pop(b->ctx);
        break;
    case TC_MEM_MANAGED:
        b->ctx = tc_primary(0);
        tc_push(b->ctx);
        TD_CHECK(td.cuMemAllocManaged(&b->dptr, bytes, CD_MEM_ATTACH_GLOBAL));
        tc_pop(b->ctx);
        break;
    default:
        REQUIRE(0);
    }
    if (b->host != NULL)
        b->dptr = (cdDevicePtr)(uintptr_t)b->host;
}

void tc_buf_alloc_in(struct tc_buf *b, cdContext ctx, size_t size)
{
    memset(b, 0, sizeof(*b));
    b->kind = TC_MEM_DEV0;
    b->ctx = ctx;
    b->size = size;
    tc_push(ctx);
    TD_CHECK(td.cuMemAlloc(&b->dptr, size > 0 ? size : 1));
    tc_pop(ctx);
}

void tc_buf_free(struct tc_buf *b)
{
    if (b->kind == TC_MEM_PAGEABLE) {
        free(b->host);
    } else if (b->kind == TC_MEM_PINNED) {
        tc_push(b->ctx);
        TD_CHECK(td.cuMemFreeHost(b->host));
        tc_pop(b->ctx);
    } else {
        tc_push(b->ctx);
        TD_CHECK(td.cuMemFree(b->dptr));
        tc_pop(b->ctx);
    }
    memset(b, 0, sizeof(*b));
}

struct tc_buf tc_buf_view(enum tc_mem_kind kind, cdContext ctx, uint64_t addr, size_t size,
                          int host)
{
    struct tc_buf b;
    memset(&b, 0, sizeof(b));
    b.kind = kind;
    b.ctx = ctx;
    b.dptr = addr;
    b.size = size;
    b.host = host ? (unsigned char *)(uintptr_t)addr : NULL;
    return b;
}

uint64_t tc_buf_addr(const struct tc_buf *b, size_t off)
{
    return (uint64_t)b->dptr + off;
}

void tc_buf_write(const struct tc_buf *b, size_t off, const void *src, size_t len)
{
    REQUIRE(off + len <= b->size);
    if (len == 0)
        return;
    if (b->host != NULL) {
        memcpy(b->host + off, src, len);
        return;
    }
    tc_push(b->ctx);
    TD_CHECK(td.cuMemcpyHtoD(b->dptr + off, src, len));
    /* From pageable memory cuMemcpyHtoD may return before the DMA reached
     * the device; the library's copies run on its own (non-blocking)
     * streams, which do not wait for it. */
    TD_CHECK(td.cuCtxSynchronize());
    tc_pop(b->ctx);
}

void tc_buf_read(const struct tc_buf *b, size_t off, void *dst, size_t len)
{
    REQUIRE(off + len <= b->size);
    if (len == 0)
        return;
    if (b->host != NULL) {
        memcpy(dst, b->host + off, len);
        return;
    }
    tc_push(b->ctx);
    TD_CHECK(td.cuMemcpyDtoH(dst, b->dptr + off, len));
    tc_pop(b->ctx);
}

void tc_buf_set(const struct tc_buf *b, size_t off, unsigned char value, size_t len)
{
    REQUIRE(off + len <= b->size);
    if (len == 0)
        return;
    if (b->host != NULL) {
        memset(b->host + off, value, len);
        return;
    }
    tc_push(b->ctx);
    TD_CHECK(td.cuMemsetD8(b->dptr + off, value, len));
    TD_CHECK(td.cuCtxSynchronize());
    tc_pop(b->ctx);
}

const unsigned char *tc_pattern(size_t len)
{
    pthread_mutex_lock(&pattern_lock);
    if (pattern_len < len + 256) {
        size_t n = len + 256;
        unsigned char *p = realloc(pattern, n);
        REQUIRE(p != NULL);
        uint64_t x = 0x9e3779b97f4a7c15ull;
        for (size_t i = 0; i < n; i++) {
            /* xorshift64 */
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            p[i] = (unsigned char)(x >> 32);
        }
        pattern = p;
        pattern_len = n;
    }
    const unsigned char *p = pattern;
    pthread_mutex_unlock(&pattern_lock);
    return p;
}
