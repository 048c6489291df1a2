/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal declarations shared by the fake driver's files, one section per
 * file, in the order a call meets them.
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

/* ---- fakecuda_init.c: configuration, load and exit, cuInit -------------- */

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
extern pthread_mutex_t fk_lock;
extern atomic_int fk_initialized; /* cuInit succeeded */
extern atomic_int fk_forked;      /* this process is a forked child */

/* ---- fakecuda_faults.c: call accounting, fault injection, violations ---- */

/* Every entry point starts with FK_ENTER (counts the call, applies injected
 * faults, checks cuInit) or FK_ENTER_NOINIT. */
cdResult fk_enter(enum fk_entry_id id, int needs_init);
#define FK_ENTER_AS(name, needs_init)                               \
    do {                                                            \
        cdResult fk_rc_ = fk_enter(FK_ID_##name, (needs_init));     \
        if (fk_rc_ != CD_SUCCESS)                                   \
            return fk_rc_;                                          \
    } while (0)
#define FK_ENTER(name) FK_ENTER_AS(name, 1)
#define FK_ENTER_NOINIT(name) FK_ENTER_AS(name, 0)

/* Counts a violation and prints it on stderr; returns @p code so callers can
 * write `return fk_violation(CD_ERROR_..., "...")`. */
cdResult fk_violation(cdResult code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Adds the faults of a FAKECUDA_FAIL value (name:nth:code[,...]); 0 when it
 * is malformed or names an unknown entry. */
int fk_faults_parse(const char *spec);

/* ---- fakecuda_handles.c: handle tables ---------------------------------- */

/* Objects live at fixed addresses and are never freed, so a handle of a
 * destroyed object is still recognized (and reported) later. Handle values
 * are addresses inside a PROT_NONE reservation: unique, never a Go heap
 * address, and a library that dereferences one segfaults. */
struct fk_table {
    size_t obj_size;
    uintptr_t base; /* the reservation handles are taken from */
    atomic_uint count;
    void **chunks;
};
void fk_tables_setup(void); /* at load */
/* Under fk_lock: a zeroed object and its handle; NULL when the table is full. */
void *fk_table_new(struct fk_table *t, const void **handle);
void *fk_table_find(struct fk_table *t, const void *handle); /* NULL: not a handle */
void *fk_table_at(struct fk_table *t, unsigned index);
extern struct fk_table fk_ctx_table;    /* fakecuda_ctx.c */
extern struct fk_table fk_stream_table; /* fakecuda_stream.c */
extern struct fk_table fk_event_table;  /* fakecuda_stream.c */
extern struct fk_table fk_pool_table;   /* fakecuda_pool.c */
extern struct fk_table fk_module_table; /* fakecuda_module.c */
extern struct fk_table fk_func_table;   /* fakecuda_module.c */

/* ---- fakecuda_device.c: devices ---------------------------------------- */

int fk_device_valid(int dev); /* an ordinal of one of the fk_cfg.devices devices */

/* ---- fakecuda_ctx.c: contexts ------------------------------------------- */

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

extern atomic_long fk_ctx_creation_count;
void fk_ctx_setup(void);
struct fk_ctx *fk_ctx_find(cdContext handle);
struct fk_ctx *fk_ctx_current(void);
int fk_ctx_alive(const struct fk_ctx *c, unsigned long long id);
/* The current context for a call that needs one: INVALID_CONTEXT when there
 * is none, CONTEXT_IS_DESTROYED (a violation) when it is dead, the sticky
 * error when @p poison_applies and it has one. */
cdResult fk_ctx_require_current(struct fk_ctx **out, const char *api, int poison_applies);
/* The checks of a handle @p h to an object a context owns (a stream, event,
 * module or function), once its table knew it: @p ended_by names the call
 * that destroyed or unloaded it (NULL: it did not), and the incarnation
 * @p ctx_id of its context @p c must be alive. Violations name it @p kind. */
cdResult fk_ctx_owned_check(const char *api, const char *kind, const void *h,
                            const char *ended_by, const struct fk_ctx *c,
                            unsigned long long ctx_id);
/* Gives the incarnation @p id of @p c the sticky error @p code (0 clears
 * it); nothing when that incarnation is no longer alive. Takes fk_lock. */
int fk_ctx_set_poison(struct fk_ctx *c, unsigned long long id, int code);

/* ---- fakecuda_mem.c: memory and the allocation table -------------------- */

enum fk_mem_kind {
    FK_MEM_DEVICE,
    FK_MEM_MANAGED,
    FK_MEM_HOST_ALLOC,
    FK_MEM_HOST_REGISTERED,
    FK_MEM_POOL, /* cuMemAllocAsync: device memory of a pool, no owning context */
    FK_MEM_VMM,  /* one cuMemMap mapping of a cuMemCreate allocation */
};

struct fk_pool; /* fakecuda_pool.c */
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

/* The rwlock guards the table, the reserved address ranges and VMM state. */
extern pthread_rwlock_t fk_mem_lock;
struct fk_alloc *fk_alloc_new(enum fk_mem_kind kind, struct fk_ctx *c, int device, size_t bytes);
void fk_alloc_unref(struct fk_alloc *a);
int fk_alloc_live(const struct fk_alloc *a);
/* Maps the memory of a new FK_MEM_DEVICE, FK_MEM_POOL, FK_MEM_MANAGED or
 * FK_MEM_HOST_ALLOC entry and enters it in the table; on failure @p a is
 * gone. Takes the write lock. */
cdResult fk_mem_add(struct fk_alloc *a);
/* Removes the entry starting exactly at @p base whose kind is one of
 * @p kinds (a bit mask); returns it, or NULL. Takes the write lock. */
struct fk_alloc *fk_mem_take(uintptr_t base, unsigned kinds);
struct fk_alloc *fk_mem_find_locked(uintptr_t addr);   /* the live or dead entry holding addr */
size_t fk_mem_lower_bound_locked(uintptr_t addr);      /* index of the first entry >= addr */
size_t fk_mem_count_locked(void);
struct fk_alloc *fk_mem_at_locked(size_t index);
struct fk_alloc *fk_mem_remove_at_locked(size_t index);
int fk_mem_insert_locked(struct fk_alloc *a);          /* 0, or -1: overlap or no memory */
/* What the reserved range holding @p addr holds ("device memory of device
 * 0", ...), or NULL outside them. Under fk_mem_lock. */
const char *fk_va_what_locked(uintptr_t addr);
/* Carves cuMemAddressReserve space: @p bytes aligned to @p align (a power
 * of two) with a guard page after. Under the write lock. */
cdResult fk_vmm_va_carve_locked(size_t bytes, size_t align, uintptr_t *out);
/* Back to a reserved hole: the address stays unusable for good. */
void fk_unmap_to_hole(uintptr_t base, size_t size);
/* Fresh device memory holds garbage on a GPU; the fake writes a pattern
 * into (the start of) new memory so code that expects zeros fails here. */
void fk_fill_garbage(char *cpu, size_t size);
long fk_mem_count_live(void);       /* fakecuda_live_allocations() */
long fk_mem_count_registered(void); /* fakecuda_registered_ranges() */

/* ---- fakecuda_vmm.c: the virtual memory management API ------------------ */

void fk_vmm_unref(struct fk_vmm *v); /* a mapping's reference; lock-free */
long fk_vmm_count_live_locked(void); /* allocations whose memory still exists */

/* ---- fakecuda_pool.c: stream-ordered pool memory ------------------------ */

struct CUmemPoolHandle_st *fk_pool_handle(const struct fk_pool *p);

/* ---- fakecuda_stream.c: streams, events and their workers --------------- */

/* Each stream's worker runs its FIFO of operations. */
enum fk_op_kind {
    FK_OP_COPY,
    FK_OP_MEMSET,
    FK_OP_RECORD,
    FK_OP_HOST_FN,
    FK_OP_KERNEL, /* value: the kernel faults (fakecuda_module.c) */
    FK_OP_WAIT,   /* cuStreamWaitEvent: until event reached record seq */
    FK_OP_COPY2D, /* cuMemcpy2DAsync: height rows of bytes, at the pitches */
};

struct fk_event;

struct fk_op {
    struct fk_op *next;
    enum fk_op_kind kind;
    char *dst;
    const char *src;
    size_t bytes;
    size_t height;    /* FK_OP_COPY2D: rows of bytes */
    size_t dst_pitch; /* FK_OP_COPY2D */
    size_t src_pitch;
    int value;
    struct fk_alloc *refs[2]; /* keep the memory mapped until the op ran */
    struct fk_event *event;
    unsigned long long seq; /* the event's record number */
    cdHostFn fn;
    void *user_data;
};

extern atomic_uint fk_delay_us;
extern pthread_mutex_t fk_done_lock;
extern pthread_cond_t fk_done_cond;
/* Set on a stream worker while it runs a host function: CUDA calls from
 * there are forbidden by the driver's documentation. */
extern _Thread_local int fk_in_host_fn;

struct fk_op *fk_op_new(enum fk_op_kind kind); /* NULL: out of memory */
void fk_op_discard(struct fk_op *op);          /* an op never queued */
int fk_is_default_handle(cdStream h);
/* Under fk_lock: the stream work is queued on. The real driver requires the
 * stream's own context to be current (violations otherwise). */
cdResult fk_stream_for_work_locked(cdStream h, const char *api, struct fk_stream **out);
/* Under fk_lock: the default stream of @p c, created on first use. */
cdResult fk_default_stream_locked(struct fk_ctx *c, struct fk_stream **out);
/* Under fk_lock: queues @p op on @p s; returns its ticket for
 * fk_stream_wait(). */
unsigned long long fk_enqueue_locked(struct fk_stream *s, struct fk_op *op);
/* Waits (without fk_lock) until the op of @p ticket on @p s ran. */
void fk_stream_wait(struct fk_stream *s, unsigned long long ticket);
/* The context (and its incarnation) a stream belongs to. */
struct fk_ctx *fk_stream_owner(const struct fk_stream *s, unsigned long long *ctx_id);
/* The context of a stream given for work (fk_stream_for_work_locked's
 * checks); takes fk_lock. */
cdResult fk_stream_ctx(cdStream stream, const char *api, struct fk_ctx **out);
void fk_streams_kill_ctx_locked(struct fk_ctx *c, struct fk_stream ***stopped, int *nstopped);
void fk_streams_join(struct fk_stream **stopped, int nstopped);
void fk_streams_atexit(void);
int fk_count_live_streams(struct fk_ctx *c);
int fk_count_live_events(struct fk_ctx *c);

/* fakecuda_copy.c (the copy engine) and fakecuda_module.c (modules and
 * kernel launches) export entry points only. */

#endif
