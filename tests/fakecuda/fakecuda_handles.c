/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Handle tables: the objects behind context, stream, event, pool, module and
 * function handles. Each table takes its handle values from its own slice of
 * one PROT_NONE reservation, and its objects are never freed, so a stale
 * handle is still recognized (and reported) and a library that dereferences
 * a handle segfaults.
 */
#include "fakecuda_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define FK_NTABLES 6
static struct fk_table *const fk_tables[FK_NTABLES] = {&fk_ctx_table,    &fk_stream_table,
                                                    &fk_event_table,  &fk_pool_table,
                                                    &fk_module_table, &fk_func_table};

#define FK_TABLE_SPAN ((size_t)64 << 20) /* handle address space per kind */
#define FK_HANDLE_STRIDE 16
#define FK_CHUNK_OBJS 1024u
#define FK_MAX_CHUNKS ((unsigned)(FK_TABLE_SPAN / FK_HANDLE_STRIDE / FK_CHUNK_OBJS))

void fk_tables_setup(void)
{
    void *space = mmap(NULL, FK_NTABLES * FK_TABLE_SPAN, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (space == MAP_FAILED) {
        fprintf(stderr, "fakecuda: cannot reserve handle space: %s\n", strerror(errno));
        abort();
    }
    for (int i = 0; i < FK_NTABLES; i++) {
        fk_tables[i]->base = (uintptr_t)space + (size_t)i * FK_TABLE_SPAN;
        fk_tables[i]->chunks = calloc(FK_MAX_CHUNKS, sizeof(void *));
        if (fk_tables[i]->chunks == NULL)
            abort();
    }
}

void *fk_table_at(struct fk_table *t, unsigned index)
{
    char *chunk = t->chunks[index / FK_CHUNK_OBJS];
    return chunk + (size_t)(index % FK_CHUNK_OBJS) * t->obj_size;
}

static const void *fk_table_handle(struct fk_table *t, unsigned index)
{
    return (const void *)(t->base + (uintptr_t)(index + 1) * FK_HANDLE_STRIDE);
}

void *fk_table_new(struct fk_table *t, const void **handle)
{
    unsigned index = atomic_load(&t->count);
    unsigned chunk = index / FK_CHUNK_OBJS;
    if (chunk >= FK_MAX_CHUNKS - 1)
        return NULL;
    if (t->chunks[chunk] == NULL) {
        t->chunks[chunk] = calloc(FK_CHUNK_OBJS, t->obj_size);
        if (t->chunks[chunk] == NULL)
            return NULL;
    }
    /* Release: a lock-free fk_table_find() that sees the new count sees the
     * chunk pointer too. */
    atomic_store_explicit(&t->count, index + 1, memory_order_release);
    *handle = fk_table_handle(t, index);
    return fk_table_at(t, index);
}

void *fk_table_find(struct fk_table *t, const void *handle)
{
    uintptr_t h = (uintptr_t)handle;
    if (h <= t->base || h >= t->base + FK_TABLE_SPAN || (h - t->base) % FK_HANDLE_STRIDE != 0)
        return NULL;
    unsigned index = (unsigned)((h - t->base) / FK_HANDLE_STRIDE) - 1;
    if (index >= atomic_load_explicit(&t->count, memory_order_acquire))
        return NULL;
    return fk_table_at(t, index);
}
