/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cudadrv's C side as Go sees it: the driver table and one C function per
 * operation (cd_copy.c, cd_progress.c, cd_cold.c, cd_mem.c; cd_load.c loads).
 *
 * Go calls these with integer arguments and pointers to Go structs that hold
 * no Go pointers. Every function that needs a CUDA context pushes it only when
 * it is not already current and always pops it before returning, so the
 * calling thread's current context is unchanged. A whole operation (choose the
 * context, push, copy, record, pop) is one call: one cgo crossing.
 */
#ifndef CUCOPY_CD_SHIM_H
#define CUCOPY_CD_SHIM_H

#include <stdint.h>

#include "cd_types.h"

/* Index of every entry point: CD_IDX_cuInit, ... */
enum {
#define CD_ENTRY(name, symbol, version, use, params) CD_IDX_##name,
#include "entry_points.h"
#undef CD_ENTRY
    CD_NUM_ENTRIES
};

/* The driver table. */
struct cd_table {
#define CD_ENTRY(name, symbol, version, use, params) cdResult(*name) params;
#include "entry_points.h"
#undef CD_ENTRY
};
extern struct cd_table cd;

extern const char *const cd_entry_name[CD_NUM_ENTRIES];
extern const int cd_entry_use[CD_NUM_ENTRIES];

/* Load results. */
enum {
    CD_LOAD_OK = 0,
    CD_LOAD_DLOPEN = 1,  /* dlopen failed; message in err */
    CD_LOAD_MISSING = 2, /* a required entry point is missing; its name in err */
    CD_LOAD_INIT = 3     /* cuInit or cuDriverGetVersion failed; *result says why */
};
int cd_load(const char *path, int *driver_version, cdResult *result, char *err, int errlen);
int cd_entry_present(int idx);

/* A failed driver call: which entry point, and its CUresult. */
typedef struct cd_err {
    int32_t entry;
    uint32_t result;
} cd_err;

/*
 * Stream kinds. The first CD_NUM_ASYNC_KINDS carry zcopy operations with
 * events; CD_KIND_SHORT carries the synchronous short operations.
 */
enum {
    CD_KIND_H2D = 0,
    CD_KIND_D2H = 1,
    CD_KIND_D2D = 2,  /* both buffers in the same context */
    CD_KIND_PEER = 3, /* device buffers of two different contexts */
    CD_NUM_ASYNC_KINDS = 4,
    CD_KIND_SHORT = 4,
    CD_NUM_KINDS = 5
};

#define CD_MAX_PEERS 16

/* The statistics of one direction of a slot (cudadrv.Counts): operations,
 * pieces and bytes, added to with atomics by whichever thread copied. */
typedef struct cd_counts {
    uint64_t operations;
    uint64_t pieces;
    uint64_t bytes;
} cd_counts;

/* One CUDA context's resources as the copy path reads them: cudadrv.Slot
 * (cudadrv/slot.go), which says who writes what and when. */
typedef struct cd_slot {
    uint64_t ctx_id;                   /* cuCtxGetId, or the handle without it */
    uintptr_t ctx;                     /* CUcontext */
    uintptr_t stream[CD_NUM_KINDS];    /* 0 until created */
    uintptr_t event;                   /* the next free event, 0 if none */
    uintptr_t peer[CD_MAX_PEERS];      /* contexts peer access was tried for */
    uint64_t canary;                   /* drivers without cuCtxGetId: a 1-byte allocation */
    uint64_t canary_id;                /* in the context, and its BUFFER_ID (generation) */
    int32_t device;                    /* the context's device ordinal */
    int32_t npeers;
    int32_t lock;  /* spin lock word shared with Go (Slot.Lock) */
    int32_t users; /* short copies running without the lock */
    int32_t lane;  /* multi-thread ifaces: one slot per (context, lane) */
    uint32_t fence; /* bit k: stream k waits for a fence before its next copy */
    uint64_t queried[CD_NUM_ASYNC_KINDS]; /* per async kind: last queue entry progress queried */
    uint64_t issued[CD_NUM_ASYNC_KINDS];  /* per async kind: the newest queue entry (joins need it) */
    /* The pack path of 2-D copies (copy.go): per kind H2D, D2H, a device
     * buffer of the context used only on that kind's stream, 0 until made. */
    uint64_t scratch[2];
    uint64_t scratch_size[2];
    uint32_t scratch_off; /* bit k: kind k has no scratch (allocation failed): plain 2-D */
    uint32_t pad;
    cd_counts counts[CD_NUM_ASYNC_KINDS]; /* statistics per direction (cudadrv.Counts) */
    /* The slot's free events besides `event`: a stack of nfree in free_ev
     * (C memory of free_cap entries, at least the events the slot created:
     * cudadrv.Slot.PushFree grows it). */
    uintptr_t *free_ev;
    int32_t nfree;
    int32_t free_cap;
    struct cd_inbox *inbox; /* pieces the C steady state queued, for core to book; NULL until made */
} cd_slot;

/* A zcopy the C steady state queued on a slot (cd_fast_zcopy): its pieces,
 * one run, are one queue entry with one event, issued under the slot's
 * lock throughout (never detached); the booking names the event, the
 * completion and the queue; core books it as an operation with one entry
 * in flight (cudadrv.Booking, core's drainInbox) before it reads or pushes
 * the slot's queues. */
typedef struct cd_booking {
    uintptr_t event;
    uintptr_t comp;
    int32_t kind;
    int32_t pad;
} cd_booking;

/* The bookings of one slot, oldest first, written and read under the
 * slot's lock (multi-thread ifaces); full, the C steady state leaves the
 * copy to Go (CD_COPY_NEED_BOOKING), as it does a piece that would detach. */
#define CD_INBOX_CAP 128
typedef struct cd_inbox {
    int32_t head;
    int32_t count;
    cd_booking b[CD_INBOX_CAP];
} cd_inbox;

/* Grow slot's free_ev to hold n events (0, or -1 out of memory); cold. */
int cd_slot_grow_free(cd_slot *slot, int32_t n);
/* Make slot's inbox (0, or -1 out of memory); cold. */
int cd_slot_make_inbox(cd_slot *slot);
/* Free the free stacks and inboxes of slots[0..n). */
void cd_slots_free_buffers(cd_slot *slots, int32_t n);

/* The copy protocol: its flags, results and request are explained once,
 * in cudadrv/copy.go (CopySync, ..., CopyDone, ..., CopyOp). */
enum {
    CD_COPY_SYNC = 1u << 0,
    CD_COPY_FORCE_CPU = 1u << 1,
    CD_COPY_FALLBACK_CTX = 1u << 2,
    CD_COPY_REUSE = 1u << 3,
    CD_COPY_LOCK = 1u << 4,
    CD_COPY_RUN_LOOP = 1u << 5,
    CD_COPY_PLAN = 1u << 6,
    CD_COPY_NO_PACK = 1u << 7,
    CD_COPY_BOOK_C = 1u << 8
};

/* The most pieces one run issues (core.MaxIOV). */
#define CD_MAX_RUN 64

enum {
    CD_COPY_DONE = 0,
    CD_COPY_QUEUED = 1,
    CD_COPY_NEED_SLOT = 2,
    CD_COPY_NEED_STREAM = 3,
    CD_COPY_NEED_EVENT = 4,
    CD_COPY_NEED_PRIMARY = 5,
    CD_COPY_NEED_PEER = 6,
    CD_COPY_OUT_OF_RANGE = 7,
    CD_COPY_DRIVER_ERROR = 8,
    CD_COPY_JOINED = 9,
    CD_COPY_CPU = 10,
    CD_COPY_STALE = 11,
    CD_COPY_NEED_FENCE = 12,
    CD_COPY_PLANNED = 13,
    CD_COPY_STALE_MEMH = 14,
    CD_COPY_NEED_STAGE = 15,
    CD_COPY_NEED_SCRATCH = 16,
    CD_COPY_NEED_BOOKING = 17
};

/* A range classified once, by a memory handle (cudadrv.MemDesc): what
 * cd_classify would say of any address in it, plus the owning context's id
 * and whether that is its device's primary context. A copy whose piece
 * names one makes no pointer query for that side. */
typedef struct cd_mdesc {
    uint64_t start;      /* the allocation, 0 if unknown */
    uint64_t size;
    uintptr_t ctx;       /* owning context, 0 if none */
    uint64_t ctx_id;     /* its cuCtxGetId (the handle without it) */
    uint32_t type;       /* CD_MEMORYTYPE_*, 0 for memory CUDA does not know */
    uint32_t managed;
    int32_t ordinal;     /* device ordinal, -1 if none */
    int32_t primary_dev; /* >= 0: ctx is this device's primary context */
} cd_mdesc;

typedef struct cd_copy_op {
    /* in */
    uint64_t dst;
    uint64_t src;
    uint64_t len;
    uint32_t flags;
    int32_t ndevices;
    int32_t reuse_slot;
    int32_t reuse_kind;
    uintptr_t reuse_event;
    uint64_t reuse_seq;
    int32_t lane;
    int32_t dir; /* out: the direction kind, also of a short copy (kind is SHORT then) */
    int32_t src_mem; /* in: 0 to classify the source, else its cd_mdesc is mems[src_mem - 1] */
    int32_t dst_mem; /* in: the destination's */
    /* out */
    int32_t taken;    /* pieces of `more` issued in the run of this one */
    int32_t detached; /* issued without the slot's lock, as a user of the slot (copy.go) */
    int32_t slot;
    int32_t kind;
    int32_t device;
    int32_t side;
    uintptr_t ctx;
    uint64_t ctx_id;
    uintptr_t peer_ctx;
    uintptr_t event;
    uintptr_t seen_primary;
    cd_err err;
    uint64_t stage_min; /* in: NEED_STAGE from this length on (pageable host memory); 0 off */
    /* in: a 2-D piece (height > 0): height rows of len bytes, row i at
     * src + i * src_pitch and dst + i * dst_pitch (copy.go, 2-D pieces) */
    uint64_t height;
    uint64_t src_pitch;
    uint64_t dst_pitch;
    uint64_t pack_below; /* in: pack 2-D rows narrower than this (copy.go); 0 never */
    uint64_t stage_small; /* in: NEED_STAGE for D2H runs into pageable memory of at most this footprint (copy.go); 0 off */
} cd_copy_op;

/* Small staging's layout of a run in a bounce buffer (copy.go, step 7):
 * each piece at the sum of the earlier pieces' lengths, each rounded up to
 * this. */
#define CD_STAGE_ALIGN 64

/* A piece that may join the run of cd_copy's (cudadrv.Piece). */
typedef struct cd_piece {
    uint64_t dst;
    uint64_t src;
    uint64_t len;
    int32_t src_mem; /* as cd_copy_op's */
    int32_t dst_mem;
    uint64_t height; /* as cd_copy_op's: 0 for a contiguous piece */
    uint64_t src_pitch;
    uint64_t dst_pitch;
} cd_piece;

int cd_copy(cd_slot *slots, int32_t nslots, const uintptr_t *primary, cd_copy_op *op,
            const cd_piece *more, int32_t nmore, const cd_mdesc *mems);
/* Classify ptr as the copy path does, once, for a memory handle. */
int cd_describe(uint64_t ptr, cd_mdesc *d, cd_err *err);

/* The C steady state (cd_fast.c, cudadrv/fast.go): what a call of the C ABI
 * reads to run without entering Go. core owns it: it fills it when the iface
 * opens and keeps nslots; the slot and primary tables are C memory, so that
 * C code may read them outside a call from Go. */
#define CD_FAST_LANES 16 /* core.MaxLanes */
typedef struct cd_fast_iface {
    cd_slot *slots;     /* the iface's slot table (cap entries) */
    uintptr_t *primary; /* per device: the retained primary context, or 0 */
    /* Per slot, what progress asks cd_query_slots (core's Iface.pq): C
     * memory, because its entries point into the event rings, and cgo's
     * pointer check would scan the whole of a Go array holding pointers
     * on every progress call. */
    struct cd_slot_query *queries;
    int32_t nslots;     /* atomic: slots in use (core's Iface.nslots) */
    int32_t cap;
    int32_t ndevices;
    int32_t multi;      /* a multi-thread iface: copies take the slots' locks */
    int32_t open;       /* atomic: 1 while the C steady state may run (core's Iface.Close clears it) */
    uint32_t run_flags; /* core's Iface.runFlags (CD_COPY_RUN_LOOP or 0) */
    int32_t runs;       /* core's Iface.runs: an operation's pieces may form runs */
    int32_t pad;
    uint64_t stage_min; /* cd_copy_op.stage_min */
    uint64_t pack_below;
    uint64_t ctx_serial; /* the cucopy context's (core.Context.Serial): a memory handle must be of it */
    uint64_t stage_small; /* cd_copy_op.stage_small */
    /* Per lane (an endpoint's), the C ABI calls inside the C steady state
     * now: atomics, each on a cache line of its own, so that threads on
     * their own lanes share none. */
    struct {
        int32_t n;
        char pad[60];
    } users[CD_FAST_LANES];
} cd_fast_iface;

/* A zeroed cd_fast_iface with its tables, NULL when out of memory; the
 * record itself is never freed (a C ABI call may still read it after its
 * iface closed: open tells it), cd_fast_iface_free_tables frees the tables. */
cd_fast_iface *cd_fast_iface_new(int32_t cap, int32_t ndevices);
void cd_fast_iface_free_tables(cd_fast_iface *f);

/* A short copy of the C steady state: piece (its src_mem and dst_mem index
 * mems, 0 to classify). DONE: copied and counted. DECLINED: nothing was
 * issued or counted; the caller runs the Go export, which does the whole
 * call. FAILED: the driver failed it (*err, as cd_copy reports it;
 * nothing is left in flight) and DONE_WARN: copied and counted, but
 * restoring the caller's context failed (*err): Go reports either
 * (core.FastOutcome). */
enum { CD_FAST_DONE = 0, CD_FAST_DECLINED = 1, CD_FAST_FAILED = 2, CD_FAST_DONE_WARN = 3 };
int cd_fast_short(cd_fast_iface *f, int32_t lane, const cd_piece *piece, const cd_mdesc *mems,
                  cd_err *err);

/* A zcopy in the C steady state: the operation's n non-empty pieces (their
 * src_mem and dst_mem index mems, 0 to classify), with completion comp,
 * issued as one run on one queue or not at all. DONE means queued and
 * booked in the slot's inbox (the call returns CUCOPY_INPROGRESS), the
 * others as cd_fast_short's. */
int cd_fast_zcopy(cd_fast_iface *f, int32_t lane, const cd_piece *pieces, int32_t n,
                  const cd_mdesc *mems, uintptr_t comp, cd_err *err);

/* Progress and event fd (cd_progress.c). */
/* cd_err.entry of a context whose incarnation ended (reset, driver gone):
 * nothing was called on it. */
#define CD_ENTRY_GONE (-2)
/* One life of a context (cudadrv.Incarnation). */
typedef struct cd_inc {
    uintptr_t ctx;
    uint64_t id;
    uint64_t canary;
    uint64_t canary_id;
    int32_t primary_dev; /* >= 0: ctx is this device's primary context */
    int32_t pad;
} cd_inc;
int cd_incarnation_gone(const cd_inc *inc);

/* One queue's segment for cd_query_slots (cudadrv.QueueQuery). */
enum { CD_QUERY_IN_ORDER = 1 }; /* the newest-first shortcut is not sound for this segment */
typedef struct cd_queue_query {
    const uintptr_t *events; /* the segment, oldest first (C memory: cudadrv.NewEventRing) */
    int32_t n;
    int32_t flags;
    int32_t done; /* out: leading events complete */
    int32_t pad;
    cd_err err; /* out: the query (or entering the context) that failed */
} cd_queue_query;

/* One slot's queues for cd_query_slots (cudadrv.SlotQuery). */
typedef struct cd_slot_query {
    cd_inc inc;
    int32_t next; /* the index of the next slot to query, -1 after the last */
    int32_t gone; /* out: the incarnation ended; nothing was queried */
    cd_queue_query queue[CD_NUM_ASYNC_KINDS];
} cd_slot_query;

/* Query the slots slots[first], slots[slots[first].next], ... (cudadrv.Interface.QuerySlots);
 * returns 0, or -1 with *err the failed restore of the caller's context at the end. */
int cd_query_slots(cd_slot_query *slots, int32_t first, cd_err *err);
int32_t cd_arm(const cd_inc *inc, uintptr_t stream, uintptr_t head_event, int32_t fd, cd_err *err);

/* Cold paths: resources and queries (cd_cold.c). Each returns 0 or sets *err
 * and returns -1. */
int cd_ctx_current(uintptr_t *ctx, cd_err *err);
int cd_ctx_id(uintptr_t ctx, uint64_t *id, cd_err *err);
int cd_ctx_device(uintptr_t ctx, int32_t *device, cd_err *err);
int cd_primary_state(int32_t device, int32_t *active, cd_err *err);
int cd_primary_retain(int32_t device, uintptr_t *ctx, cd_err *err);
int cd_primary_release(int32_t device, cd_err *err);
int cd_enable_peer(uintptr_t ctx, uintptr_t peer, cd_err *err);
int cd_stream_create(uintptr_t ctx, uintptr_t *stream, cd_err *err);
int cd_stream_destroy(uintptr_t ctx, uintptr_t stream, cd_err *err);
int cd_stream_sync(uintptr_t ctx, uintptr_t stream, cd_err *err);
int cd_stream_wait_event(uintptr_t ctx, uintptr_t stream, uintptr_t event, cd_err *err);
int cd_event_create(uintptr_t ctx, uintptr_t *event, cd_err *err);
int cd_event_destroy(uintptr_t ctx, uintptr_t event, cd_err *err);
int cd_device_count(int32_t *count, cd_err *err);
int cd_device_name(int32_t device, char *name, int32_t len, cd_err *err);
int cd_device_attr(int32_t device, uint32_t attr, int32_t *value, cd_err *err);
int cd_device_total_mem(int32_t device, uint64_t *bytes, cd_err *err);
int cd_device_pci_bus_id(int32_t device, char *bus_id, int32_t len, cd_err *err);
int cd_can_access_peer(int32_t device, int32_t peer, int32_t *can, cd_err *err);
const char *cd_error_name(uint32_t result);
int cd_device_uuid(int32_t device, uint8_t *uuid, cd_err *err);
int cd_p2p_attr(int32_t device, int32_t peer, uint32_t attr, int32_t *value, cd_err *err);

/* Memory domain (cd_mem.c). */

/* What the driver says of one address (cd_mem_query). */
typedef struct cd_mem_info {
    uint64_t start;       /* allocation start, 0 if unknown */
    uint64_t size;        /* allocation size, 0 if unknown */
    uintptr_t ctx;        /* owning context, 0 if none */
    uintptr_t pool;       /* memory pool, 0 if none */
    uint64_t ctx_id;      /* cuCtxGetId of ctx (0 without ctx or cuCtxGetId) */
    uint64_t access_mask; /* VMM and pool memory: devices with access */
    uint64_t buffer_id;   /* CU_POINTER_ATTRIBUTE_BUFFER_ID, 0 if unknown */
    uint32_t type;        /* CD_MEMORYTYPE_*, 0 unknown to CUDA */
    uint32_t managed;
    int32_t ordinal;      /* DEVICE_ORDINAL attribute */
    int32_t preferred;    /* managed: preferred location (device, CD_DEVICE_CPU, CD_DEVICE_INVALID) */
    int32_t vmm;          /* 1 for cuMemCreate/cuMemMap memory */
    int32_t vmm_location_type;
    int32_t vmm_location_id;
    int32_t pad;
} cd_mem_info;

int cd_mem_query(uint64_t ptr, int32_t ndevices, cd_mem_info *info, cd_err *err);

/* Memory kinds of cd_mem_alloc / cd_mem_free. */
enum { CD_MEM_DEVICE = 0, CD_MEM_MANAGED = 1, CD_MEM_HOST = 2 };
int cd_mem_alloc(uintptr_t ctx, int32_t kind, uint64_t bytes, uint64_t *ptr, cd_err *err);
int cd_mem_free(uintptr_t ctx, int32_t kind, uint64_t ptr, cd_err *err);
int cd_host_register(uintptr_t ctx, uint64_t ptr, uint64_t bytes, cd_err *err);
int cd_host_unregister(uintptr_t ctx, uint64_t ptr, cd_err *err);

/* One step of a copy staged through pinned bounce buffers (cd_stage.c):
 * with CD_STAGE_WAIT_BEFORE the stream is synchronized first, then the n
 * pieces (contiguous: dst, src, len) are enqueued (one batch for several
 * unless CD_STAGE_LOOP), then with
 * CD_STAGE_WAIT_AFTER the stream is synchronized again. device is the
 * ordinal of the device-side memory (a batch's location hint). */
enum { CD_STAGE_WAIT_BEFORE = 1, CD_STAGE_WAIT_AFTER = 2, CD_STAGE_LOOP = 4 /* no batch */ };
int cd_stage_step(uintptr_t ctx, uintptr_t stream, int32_t flags, int32_t device, int32_t kind,
                  const cd_piece *pieces, int32_t n, cd_err *err);

#endif
