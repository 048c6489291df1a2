/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libcucopy_mpi.so internals: what the wrapper files share.
 *
 *   shim_state.c     configuration, the libcuda probe, loading libcucopy.so.0,
 *                    classification, staging copies, error codes, stats
 *   shim_pool.c      the pinned staging pool
 *   shim_requests.c  the request table (request -> staging record), detached
 *                    records (Request_free), finishing a record
 *   shim_p2p.c       MPI_Init*, MPI_Finalize, blocking, nonblocking, matched
 *                    and persistent (*_init) point-to-point
 *   shim_complete.c  the completion family (Wait*, Test*, Request_free,
 *                    Cancel, Request_get_status) and Start/Startall
 *   shim_fortran.c   the Fortran entry points (mpif.h, use mpi, use mpi_f08)
 *                    of all of the above, for MPIs whose Fortran bindings
 *                    call PMPI_* directly (Open MPI 4)
 *   shim_io.c        blocking MPI-IO (staged); nonblocking IO, RMA windows
 *                    and RMA buffers on device memory refused
 *
 * A client of include/cucopy.h only: libcucopy.so.0 is dlopen'ed on the first
 * buffer that needs classifying, and only in a process that has already
 * loaded libcuda.so.1; the shim links neither.
 */
#ifndef CUCOPY_MPI_SHIM_H
#define CUCOPY_MPI_SHIM_H

#include <mpi.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cucopy.h"

#define SHIM_EXPORT __attribute__((visibility("default")))
#define SHIM_LIKELY(x) __builtin_expect(!!(x), 1)
#define SHIM_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- state: is the shim doing anything in this process? ------------------- */

enum shim_state {
    SHIM_OFF = 0,      /* pure pass-through: CUCOPY_MPI=off, CUDA-aware MPI, or no libcucopy */
    SHIM_WATCHING = 1, /* libcuda.so.1 not loaded (yet): every buffer is host memory */
    SHIM_ACTIVE = 2    /* libcuda.so.1 loaded: classify buffers */
};

extern _Atomic int shim_state;

/* Slow half of shim_active(): re-probes libcuda.so.1 only when the loader
 * added an object since the last probe (dl_iterate_phdr's dlpi_adds). */
int shim_probe_cuda(void);

/* The one cached check of the hot path: 1 when buffers must be classified.
 * Acquire: seeing SHIM_ACTIVE means seeing the loaded cucopy table too (a
 * plain load on x86). */
static inline int shim_active(void)
{
    int s = atomic_load_explicit(&shim_state, memory_order_acquire);
    if (SHIM_LIKELY(s == SHIM_WATCHING))
        return shim_probe_cuda();
    return s == SHIM_ACTIVE;
}

/* Records (staged requests) alive, detached ones included: completion calls
 * go straight to PMPI while it is 0. */
extern _Atomic long shim_records_live;

static inline int shim_pending(void)
{
    return atomic_load_explicit(&shim_records_live, memory_order_relaxed) != 0;
}

/* Called by MPI_Init* after PMPI_Init*: reports configuration errors
 * (aborting), records the thread level, detects a CUDA-aware MPI. */
void shim_after_init(int provided);
/* Called by MPI_Finalize after PMPI_Finalize: stats, pool, cucopy handles. */
void shim_after_finalize(void);

/* ---- classification and staging ------------------------------------------- */

/* One buffer argument of one call. */
struct shim_buf {
    int staged;      /* 0: pass the user's pointer through */
    char *first;     /* device address of the first byte (buf + true_lb) */
    MPI_Aint tlb;    /* true lower bound: PMPI gets host - tlb */
    size_t bytes;    /* count * type size (the type map is one block) */
    int device;      /* device ordinal, for stats */
    char *host;      /* staging memory for [first, first + bytes) */
    size_t cap;      /* its pool class size */
    int pinned;      /* from the pinned pool (else a pageable fallback) */
};

/* Direction of a buffer: what must be copied. */
enum { SHIM_TO_MPI = 1, SHIM_FROM_MPI = 2, SHIM_BOTH = 3 };

/*
 * Classify @p buf (count elements of @p dt) for call @p call on @p comm.
 * MPI_SUCCESS with b->staged == 0: pass through. MPI_SUCCESS with
 * b->staged == 1: b->host holds staging memory, and for SHIM_TO_MPI /
 * SHIM_BOTH the device bytes are already copied into it. Otherwise an MPI
 * error code, already raised through @p comm's error handler.
 */
int shim_stage(const char *call, const void *buf, MPI_Count count, MPI_Datatype dt,
               MPI_Comm comm, int direction, struct shim_buf *b);

/* The pointer to give PMPI for a staged buffer. */
static inline void *shim_host_arg(const struct shim_buf *b)
{
    return (void *)(b->host - b->tlb);
}

/* Copy the first @p n bytes MPI wrote into the staging memory back to the
 * device (n is clamped to b->bytes). MPI_SUCCESS or an error code raised on
 * @p comm. */
int shim_unstage(const char *call, struct shim_buf *b, size_t n, MPI_Comm comm);

/* Bytes a receive wrote, from its status (0 for a cancelled receive). */
size_t shim_received_bytes(const MPI_Status *st);

/* Copy the device bytes into the existing staging memory again (MPI_Start). */
int shim_restage(const char *call, struct shim_buf *b, MPI_Comm comm);

/* Give the staging memory back to the pool. */
void shim_release(struct shim_buf *b);

/* Raise an error of class @p errclass on @p comm, with a message naming
 * @p call ("cucopy_mpi: MPI_Send: ..."), through MPI_Comm_call_errhandler.
 * Returns the error code (of class @p errclass). */
int shim_error(MPI_Comm comm, int errclass, const char *call, const char *what);

/* ---- pool ------------------------------------------------------------------ */

void shim_pool_configure(size_t cap_bytes);
/* Staging memory of at least @p bytes (> 0): pinned from the pool, else a
 * pageable fallback. NULL when no host memory is left. */
char *shim_pool_get(size_t bytes, size_t *cap, int *pinned);
void shim_pool_put(char *p, size_t cap, int pinned);
void shim_pool_release_all(void);
size_t shim_pool_high_water(void);
long shim_pool_fallbacks(void);

/* cucopy functions the pool needs (loaded by shim_state.c). */
cucopy_status_t shim_cucopy_host_alloc(size_t bytes, void **p);
void shim_cucopy_host_free(void *p);

/* ---- requests ------------------------------------------------------------- */

struct shim_rec {
    struct shim_rec *next;
    MPI_Request req;     /* the real request (its value is the key) */
    int recv;            /* 1: copy to the device at completion */
    int copied;          /* the copy to the device is done (Request_get_status) */
    int persistent;      /* *_init: the record lives until Request_free */
    int active;          /* persistent: started and not completed yet */
    int detached;        /* Request_free'd while active: freed at completion */
    MPI_Comm comm;
    const char *call;
    struct shim_buf buf;
};

/* Record a staged nonblocking call whose request PMPI just returned in
 * *req. Without memory for the record, the request is completed here
 * (PMPI_Wait, then the staging is finished: the call became blocking) and
 * *req is MPI_REQUEST_NULL. Returns MPI_SUCCESS or an error code. */
int shim_rec_add(MPI_Request *req, int recv, MPI_Comm comm, const char *call,
                 const struct shim_buf *b);

/* Record a persistent request (*_init) just made on staging memory. Without
 * memory for the record, the request is freed and an error returned. */
int shim_rec_add_persistent(MPI_Request *req, int recv, MPI_Comm comm, const char *call,
                            const struct shim_buf *b);
/* MPI_Start(all) of a persistent record: a send copies the device bytes into
 * its staging memory now. MPI_SUCCESS or an error code raised on its comm. */
int shim_rec_start(struct shim_rec *r);
/* MPI_Request_free of a record: an inactive persistent request is freed
 * now, anything else detached. */
int shim_rec_free(struct shim_rec *r, MPI_Request *req);

/* A PMPI return code after which the bytes MPI wrote are copied to the
 * device: success, or a truncated receive (the buffer was filled). */
int shim_copy_ok(int rc);
/* Take (remove) the record of @p req out of the table; NULL if none. */
struct shim_rec *shim_rec_take(MPI_Request req);
/* Put a record back (its request did not complete). */
void shim_rec_put_back(struct shim_rec *r);
/* The request completed with @p st (NULL: no status, e.g. error): copy to the
 * device if it is a receive and was not cancelled; then release the staging
 * memory and free the record, or, for a persistent request, mark it inactive
 * and put it back in the table. @p ok: MPI reported no error for it. Returns
 * MPI_SUCCESS or an error code raised on the record's communicator. */
int shim_rec_finish(struct shim_rec *r, const MPI_Status *st, int ok);
/* A receive's device copy now (Request_get_status saw it complete). */
int shim_rec_copy_now(struct shim_rec *r, const MPI_Status *st);
/* Request_free of a staged request: keep it, complete it later. */
void shim_rec_detach(struct shim_rec *r);
/* Test detached records; finish those done. @p wait: wait for all (Finalize). */
void shim_detached_progress(int wait);

/* ---- the records of one array of requests (shim_complete.c) --------------- */

/* Shared by the C completion calls and the Fortran ones (shim_fortran.c),
 * which convert their handles and statuses to C ones first. */
#define SHIM_STACK_REQUESTS 32

struct shim_batch {
    struct shim_rec *stack[SHIM_STACK_REQUESTS];
    struct shim_rec **recs;
    MPI_Status stack_status[SHIM_STACK_REQUESTS];
    MPI_Status *local_status;
    int n;
    int taken;
    int first_error;
};

/* Take the records of reqs[0..n). 0: nothing staged among them; 1: some
 * taken; -1: no memory (error raised; shim_batch_end gives it). */
int shim_batch_take(struct shim_batch *bt, int n, MPI_Request reqs[]);
/* The statuses to give PMPI: @p user, or n local ones when it is
 * MPI_STATUSES_IGNORE. NULL on no memory (error raised). */
MPI_Status *shim_batch_statuses(struct shim_batch *bt, MPI_Status *user);
/* Request i completed with status @p st: finish its record, if any. */
void shim_batch_finish(struct shim_batch *bt, int i, const MPI_Status *st, int ok);
/* After a Waitall/Testall that completed (@p reqs as PMPI left them, status
 * i for request i, @p rc its result): finish every record that completed. */
void shim_batch_finish_all(struct shim_batch *bt, MPI_Request reqs[], const MPI_Status *s,
                           int rc);
/* After a Waitsome/Testsome: finish the records at (0-based) indices[k]. */
void shim_batch_finish_indices(struct shim_batch *bt, int outcount, const int indices[],
                               const MPI_Status *s, int rc);
/* Put back what did not complete, free what was allocated; the call's
 * result (@p rc, else the first staging error). */
int shim_batch_end(struct shim_batch *bt, int rc);

/* After a blocking receive into staging memory with result @p rc and status
 * @p s: copy the bytes MPI wrote to the device, release the staging memory.
 * The call's result. */
int shim_finish_recv(const char *call, int rc, struct shim_buf *b, const MPI_Status *s,
                     MPI_Comm comm);

/* ---- collectives (shim_coll.c; the v and w forms: shim_collv.c) ---------- */

/* MPI-4 libraries have the large-count MPI_X_c forms: they are wrapped too. */
#if MPI_VERSION >= 4
#define SHIM_LARGE_COUNT 1
#else
#define SHIM_LARGE_COUNT 0
#endif

/* One collective call: up to two staged buffers (shim_coll.c's; shim_collv.c
 * uses the communicator fields only). */
struct coll {
    const char *call;
    MPI_Comm comm;
    int inter; /* an intercommunicator: classify only, refuse device buffers */
    int rank, size;
    int root;  /* this rank is the root of a rooted call */
    struct shim_buf b[2];
    int dir[2];       /* SHIM_TO_MPI / SHIM_FROM_MPI / both / 0 */
    size_t out[2];    /* bytes MPI writes from the start of the buffer */
    MPI_Count ext[2]; /* the datatype's extent */
};

/*
 * Start call @p call on @p comm (MPI_COMM_NULL: MPI_Reduce_local). @p root:
 * the root argument of a rooted call, or MPI_UNDEFINED. 0 when the call goes
 * straight to PMPI: an invalid communicator (MPI reports it), or an
 * intercommunicator's MPI_PROC_NULL rank (no buffer is significant).
 */
int coll_begin(struct coll *c, const char *call, MPI_Comm comm, int root);

/* ---- stats ---------------------------------------------------------------- */

void shim_stats_add(int to_device, int device, size_t bytes);

#endif
