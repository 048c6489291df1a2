/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal declarations shared by the fake driver's files.
 *
 * Locking (outermost first): fk_lock (contexts, stream/event state, handle
 * tables) -> a stream's queue lock -> fk_done_lock (completion counters).
 * The memory table has its own rwlock, taken after fk_lock when both are
 * held. Nobody sleeps or waits for a stream while holding fk_lock: waits
 * happen on fk_done_cond with only fk_done_lock held.
 */
#ifndef FAKECUDA_INTERNAL_H
#define FAKECUDA_INTERNAL_H

#define _GNU_SOURCE

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cd_types.h"
#include "fakecuda.h"

#define FK_EXPORT __attribute__((visibility("default")))

/* Prototypes of every entry point, generated from the one list: a definition
 * whose parameters differ from entry_points.h is a compile error. */
#define CD_ENTRY(name, symbol, version, use, params) FK_EXPORT cdResult symbol params;
#include "entry_points.h"
#undef CD_ENTRY

FK_EXPORT cdResult cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version,
                                       cdU64 flags, unsigned int *symbol_status);
FK_EXPORT cdResult cuGetProcAddress(const char *symbol, void **pfn, int cuda_version,
                                    cdU64 flags);

/* Index of each entry in the call counters and fault list. */
enum fk_entry_id {
#define CD_ENTRY(name, symbol, version, use, params) FK_ID_##name,
#include "entry_points.h"
#undef CD_ENTRY
    FK_ID_cuGetProcAddress,
    FK_ID_COUNT
};

#define FK_MAX_DEVICES 16
#define FK_MAX_PEERS 64
#define FK_MAX_STACK 64

/* cuda.h's special stream handles; all mean "the current context's default
 * stream" here. */
#define FK_STREAM_LEGACY ((cdStream)0x1)
#define FK_STREAM_PER_THREAD ((cdStream)0x2)

struct fk_config {
    int devices;
    int driver_version;
    int no_peer;
    int no_ctx_getid;
    int strict_exit;
    int quiet;
    int bad; /* an environment value was invalid: cuInit fails */
};

extern struct fk_config fk_cfg;
extern atomic_uint fk_delay_us;
extern pthread_mutex_t fk_lock;
extern pthread_mutex_t fk_done_lock;
extern pthread_cond_t fk_done_cond;
extern atomic_long fk_ctx_creation_count;
/* Set on a stream worker while it runs a host function: CUDA calls from
 * there are forbidden by the driver's documentation. */
extern _Thread_local int fk_in_host_fn;

/* fakecuda.c: every entry point starts with FK_ENTER (counts the call,
 * applies injected faults, checks cuInit) or FK_ENTER_NOINIT. */
cdResult fk_enter(enum fk_entry_id id, int needs_init);
#define FK_ENTER(name)                                      \
    do {                                                    \
        cdResult fk_rc_ = fk_enter(FK_ID_##name, 1);        \
        if (fk_rc_ != CD_SUCCESS)                           \
            return fk_rc_;                                  \
    } while (0)
#define FK_ENTER_NOINIT(name)                               \
    do {                                                    \
        cdResult fk_rc_ = fk_enter(FK_ID_##name, 0);        \
        if (fk_rc_ != CD_SUCCESS)                           \
            return fk_rc_;                                  \
    } while (0)

/* Counts a violation and prints it on stderr; returns @p code so callers can
 * write `return fk_violation(CD_ERROR_..., "...")`. */
cdResult fk_violation(cdResult code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Handle tables: objects live at fixed addresses and are never freed, so a
 * handle of a destroyed object is still recognized (and reported) later.
 * Handle values are addresses inside a PROT_NONE reservation: unique, never
 * a Go heap address, and a library that dereferences one segfaults. */
struct fk_table {
    size_t obj_size;
    uintptr_t base; /* the reservation handles are taken from */
    atomic_uint count;
    void **chunks;
};
/* Under fk_lock: a zeroed object and its handle; NULL when the table is full. */
void *fk_table_new(struct fk_table *t, const void **handle);
void *fk_table_find(struct fk_table *t, const void *handle); /* NULL: not a handle */
void *fk_table_at(struct fk_table *t, unsigned index);
extern struct fk_table fk_ctx_table;    /* fakecuda_ctx.c */
extern struct fk_table fk_stream_table; /* fakecuda_stream.c */
extern struct fk_table fk_event_table;  /* fakecuda_stream.c */

/* Contexts (fakecuda_ctx.c). */
struct fk_stream;

struct fk_ctx {
    cdContext handle;
    int device;
    int primary;
    /* Id of the live incarnation, 0 while dead. Atomic because the copy
     * engine and the memory table read it without fk_lock. */
    atomic_ullong live_id;
    unsigned long long last_id; /* kept after death, for messages */
    int retain;                 /* primary contexts only */
    atomic_int poison;          /* sticky error of the live incarnation */
    unsigned long long peers[FK_MAX_PEERS]; /* ids of peer contexts enabled */
    int npeers;
    struct fk_stream *default_stream; /* lazily, per incarnation */
};

void fk_ctx_setup(void);
struct fk_ctx *fk_ctx_find(cdContext handle);
struct fk_ctx *fk_ctx_current(void);
int fk_ctx_alive(const struct fk_ctx *c, unsigned long long id);
/* The current context for a call that needs one: INVALID_CONTEXT when there
 * is none, CONTEXT_IS_DESTROYED (a violation) when it is dead, the sticky
 * error when @p poison_applies and it has one. */
cdResult fk_ctx_require_current(struct fk_ctx **out, const char *api, int poison_applies);

/* Memory (fakecuda_mem.c). */
enum fk_mem_kind {
    FK_MEM_DEVICE,
    FK_MEM_MANAGED,
    FK_MEM_HOST_ALLOC,
    FK_MEM_HOST_REGISTERED,
};

struct fk_alloc {
    uintptr_t base;
    size_t size;     /* as requested */
    size_t map_size; /* page-rounded */
    enum fk_mem_kind kind;
    int device;
    struct fk_ctx *ctx;
    unsigned long long ctx_id;
    char *cpu;       /* the CPU view: the private alias for device memory */
    atomic_int refs; /* the table's reference plus one per queued operation */
};

/* A range translated for the copy engine. */
struct fk_span {
    char *cpu;
    struct fk_alloc *ref; /* NULL for pageable host memory */
};

cdResult fk_mem_translate(cdDevicePtr addr, size_t bytes, const char *api, struct fk_span *out);
void fk_alloc_unref(struct fk_alloc *a);

/* Streams and events (fakecuda_stream.c). */
void fk_streams_kill_ctx_locked(struct fk_ctx *c, struct fk_stream ***stopped, int *nstopped);
void fk_streams_join(struct fk_stream **stopped, int nstopped);
void fk_streams_atexit(void);
int fk_count_live_streams(struct fk_ctx *c);
int fk_count_live_events(struct fk_ctx *c);

#endif
