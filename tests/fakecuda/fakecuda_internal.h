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
extern struct fk_table fk_pool_table;   /* fakecuda_vmm.c */
extern struct fk_table fk_module_table; /* fakecuda_module.c */
extern struct fk_table fk_func_table;   /* fakecuda_module.c */

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
/* Gives the incarnation @p id of @p c the sticky error @p code (0 clears
 * it); nothing when that incarnation is no longer alive. Takes fk_lock. */
int fk_ctx_set_poison(struct fk_ctx *c, unsigned long long id, int code);

/* Memory (fakecuda_mem.c). */
enum fk_mem_kind {
    FK_MEM_DEVICE,
    FK_MEM_MANAGED,
    FK_MEM_HOST_ALLOC,
    FK_MEM_HOST_REGISTERED,
    FK_MEM_POOL, /* cuMemAllocAsync: device memory of a pool, no owning context */
    FK_MEM_VMM,  /* one cuMemMap mapping of a cuMemCreate allocation */
};

struct fk_pool; /* fakecuda_vmm.c */
struct fk_vmm;  /* fakecuda_vmm.c: a cuMemCreate allocation */

struct fk_alloc {
    uintptr_t base;
    size_t size;     /* as requested */
    size_t map_size; /* page-rounded */
    enum fk_mem_kind kind;
    int device;      /* CD_DEVICE_INVALID for host-located VMM memory */
    struct fk_ctx *ctx; /* NULL: no owning context (pool, VMM) */
    unsigned long long ctx_id;
    unsigned long long buffer_id; /* CU_POINTER_ATTRIBUTE_BUFFER_ID: unique, never reused */
    char *cpu;       /* the CPU view: the private alias for device memory */
    atomic_int refs; /* the table's reference plus one per queued operation */
    int preferred;   /* managed: cuMemAdvise's preferred location, CD_DEVICE_* */
    struct fk_pool *pool; /* FK_MEM_POOL */
    struct fk_vmm *vmm;   /* FK_MEM_VMM: the mapped allocation */
    /* FK_MEM_VMM: cuMemSetAccess flags per device and for the host; under
     * fk_mem_lock (the copy engine reads them under the read lock). */
    unsigned char access[FK_MAX_DEVICES];
    unsigned char host_access;
};

/* A range translated for the copy engine. */
struct fk_span {
    char *cpu;
    struct fk_alloc *ref; /* NULL for pageable host memory */
};

/* Translates [addr, addr + bytes) for a copy issued by a context of
 * @p device; @p write: the copy writes the range (VMM access checks). */
cdResult fk_mem_translate(cdDevicePtr addr, size_t bytes, const char *api, int device, int write,
                          struct fk_span *out);
void fk_alloc_unref(struct fk_alloc *a);

/* The allocation table, for fakecuda_vmm.c. The rwlock guards the table,
 * the VA ranges and VMM state. */
extern pthread_rwlock_t fk_mem_lock;
struct fk_alloc *fk_alloc_new(enum fk_mem_kind kind, struct fk_ctx *c, int device, size_t bytes);
struct fk_alloc *fk_mem_find_locked(uintptr_t addr);   /* the live or dead entry holding addr */
size_t fk_mem_lower_bound_locked(uintptr_t addr);      /* index of the first entry >= addr */
size_t fk_mem_count_locked(void);
struct fk_alloc *fk_mem_at_locked(size_t index);
struct fk_alloc *fk_mem_remove_at_locked(size_t index);
int fk_mem_insert_locked(struct fk_alloc *a);          /* 0, or -1: overlap or no memory */
cdResult fk_mem_map_device_locked(struct fk_alloc *a); /* carve and map device memory */
struct fk_alloc *fk_mem_take(uintptr_t base, unsigned kinds);
int fk_alloc_live(const struct fk_alloc *a);
size_t fk_page_round(size_t bytes);

/* Reserved address ranges handed out by a bump pointer, never reused. */
struct fk_va {
    const char *what;
    uintptr_t base;
    size_t span;
    size_t next;
};
extern struct fk_va fk_vmm_va; /* cuMemAddressReserve */
int fk_va_holds(const struct fk_va *v, uintptr_t addr);
/* Carves @p bytes aligned to @p align (a power of two) with a guard page after. */
cdResult fk_va_carve_locked(struct fk_va *v, size_t bytes, size_t align, uintptr_t *out);

/* VMM (fakecuda_vmm.c). */
void fk_vmm_unref(struct fk_vmm *v);    /* a mapping's reference; lock-free */
struct CUmemPoolHandle_st *fk_pool_handle(const struct fk_pool *p);
long fk_vmm_count_live_locked(void);    /* allocations whose memory still exists */
cdResult fk_stream_ctx(cdStream stream, const char *api, struct fk_ctx **out); /* stream.c */

/* Modules (fakecuda_module.c). Under fk_lock: the function @p f of a loaded
 * module whose context is alive; its context incarnation and whether the
 * kernel faults when it runs (fakecuda.h: the "cucopy_fault" marker). */
cdResult fk_function_check_locked(struct CUfunc_st *f, const char *api, struct fk_ctx **ctx,
                                  unsigned long long *ctx_id, int *faults);

/* Streams and events (fakecuda_stream.c). */
void fk_streams_kill_ctx_locked(struct fk_ctx *c, struct fk_stream ***stopped, int *nstopped);
void fk_streams_join(struct fk_stream **stopped, int nstopped);
void fk_streams_atexit(void);
int fk_count_live_streams(struct fk_ctx *c);
int fk_count_live_events(struct fk_ctx *c);

#endif
