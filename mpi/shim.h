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
 *   shim_coll.c      blocking collectives, and what each collective stages
 *                    (shim_coll_*: shared with the nonblocking ones)
 *   shim_icoll.c     nonblocking collectives (MPI_I*) and persistent ones
 *                    (MPI_X_init; Open MPI 4: its MPIX_X_init extension)
 *   shim_complete.c  the completion family (Wait*, Test*, Request_free,
 *                    Cancel, Request_get_status) and Start/Startall
 *   shim_fortran.c   the Fortran entry points (mpif.h, use mpi, use mpi_f08)
 *                    of all of the above and of the blocking collectives
 *                    (shim_coll.c), for MPIs whose Fortran
 *                    bindings call PMPI_* directly (Open MPI 4)
 *   shim_io.c        blocking MPI-IO (staged); nonblocking IO, RMA windows
 *                    and RMA buffers on device memory refused
 *   shim_pipe.c      pipelined large device messages (CUCOPY_MPI_PIPELINE_KB):
 *                    the envelope, the chunk streams, the receive-side check
 *   shim_types.c     non-contiguous datatypes: flattening, the layout cache,
 *                    MPI_Type_free, packing and unpacking on the device,
 *                    layout-preserving staging (reductions, Alltoallw)
 *   shim_held.c      probes with pipelining on: messages probed are held,
 *                    and every receive consults them first
 *   shim_defer.c     nonblocking sends whose copy runs after the call, and
 *                    the blocking calls that post them first
 *   shim_neigh.c     neighborhood collectives (MPI_Neighbor_*, MPI_Ineighbor_*),
 *                    staged as the v forms, the blocks from the topology
 *   shim_pack.c      MPI_Pack, MPI_Unpack and their external forms
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

/* An MPI-4 library (MPICH 4) has the large-count MPI_X_c calls: the wrappers
 * are made once more for them, from the same macros. */
#if MPI_VERSION >= 4
#define SHIM_LARGE_COUNT 1
#else
#define SHIM_LARGE_COUNT 0
#endif

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

/*
 * Classes of operation (CUCOPY_MPI_STAGE, docs/mpi.md): each wrapper belongs
 * to one. shim_classes holds the classes staged: all of them, except in auto
 * mode behind an MPI that reports CUDA support, where it is what
 * CUCOPY_MPI_STAGE lists (set once, by shim_after_init).
 */
enum {
    SHIM_CLASS_P2P = 1,    /* point-to-point, persistent requests included */
    SHIM_CLASS_COLL = 2,   /* blocking collectives that are not reductions */
    SHIM_CLASS_ICOLL = 4,  /* nonblocking and persistent collectives, not reductions */
    SHIM_CLASS_REDUCE = 8, /* reductions: blocking, nonblocking, persistent */
    SHIM_CLASS_IO = 16,    /* MPI-IO and the RMA refusals (shim_io.c) */
    SHIM_CLASS_ALL = 31,
    /* Not a class of calls: non-contiguous datatypes on device memory, staged
     * in every class but io even where the call's class is not listed. */
    SHIM_CLASS_TYPES = 32
};

extern _Atomic unsigned shim_classes;

/* 1 while this thread's wrapper runs only for CUCOPY_MPI_STAGE's types: its
 * own class is not staged, so shim_stage passes contiguous buffers through
 * and a reduction's non-contiguous ones too (shim_coll.c). */
extern _Thread_local int shim_types_only;

/* The hot path's check for a wrapper of class @p cls: one bit test, then
 * shim_active(). A class that is not staged never probes. */
static inline int shim_active_for(unsigned cls)
{
    unsigned staged = atomic_load_explicit(&shim_classes, memory_order_relaxed);
    if (SHIM_UNLIKELY(staged & SHIM_CLASS_TYPES)) {
        shim_types_only = !(staged & cls);
        if (shim_types_only && cls == SHIM_CLASS_IO)
            return 0;
        return shim_active();
    }
    if (!(staged & cls))
        return 0;
    return shim_active();
}

/* Point-to-point's check (C and Fortran wrappers). */
static inline int shim_p2p_active(void)
{
    return shim_active_for(SHIM_CLASS_P2P);
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

/* The flattened type map of a non-contiguous datatype (shim_types.c). */
struct shim_layout;

/* One buffer argument of one call. */
struct shim_buf {
    int staged;      /* 0: pass the user's pointer through */
    char *first;     /* device address of the first byte (buf + true_lb); packed: buf */
    MPI_Aint tlb;    /* true lower bound: PMPI gets host - tlb (packed: 0) */
    size_t bytes;    /* count * type size */
    int device;      /* device ordinal, for stats */
    char *host;      /* staging memory for [first, first + bytes); packed: the packed bytes */
    size_t cap;      /* its pool class size */
    int pinned;      /* from the pinned pool (else a pageable fallback) */
    /* A non-contiguous type (docs/mpi.md "Non-contiguous datatypes"): its
     * layout (a reference, dropped by shim_release), count elements of it,
     * and the signature type PMPI gets instead of the user's. NULL layout:
     * one contiguous block, PMPI gets the user's type. */
    struct shim_layout *layout;
    MPI_Count count;
    MPI_Datatype ptype;
    /* With a layout: 0 packed (above); 1 layout-preserving (a reduction, or
     * Alltoallw's per-peer types): host mirrors the span [first, first +
     * bytes) of the device buffer, only the type map's runs are copied (to the
     * same offsets), PMPI gets host - tlb and the user's own datatype (ptype).
     * The copies' byte counts are in type-map bytes (packed order). */
    int span;
};

/* The datatype to give PMPI for buffer @p b, staged or not: the packed
 * signature type of a staged non-contiguous one, else @p dt. */
static inline MPI_Datatype shim_type_arg(const struct shim_buf *b, MPI_Datatype dt)
{
    return b->staged && b->layout != NULL ? b->ptype : dt;
}

/* Direction of a buffer: what must be copied. */
enum { SHIM_TO_MPI = 1, SHIM_FROM_MPI = 2, SHIM_BOTH = 3 };
/* With SHIM_TO_MPI, for one contiguous block: take the staging memory but
 * do not copy (the caller starts the copy: a deferred send, shim_defer.c). */
enum { SHIM_DEFER_COPY = 4 };

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

/* ---- collectives: what one call stages (shim_coll.c) ---------------------- */

/* A byte range of a staged buffer, from its first byte. */
struct shim_piece {
    size_t off, len;
};

/* An array argument of a v collective (counts, displacements): int for MPI_X,
 * MPI_Count or MPI_Aint for MPI_X_c. */
struct shim_array {
    const void *p;
    size_t elem; /* sizeof an element: 4 or 8 */
};
#define SHIM_ARRAY(a) ((struct shim_array){(a), sizeof *(a)})

static inline MPI_Count shim_array_at(struct shim_array a, int i)
{
    if (a.elem == sizeof(int))
        return ((const int *)a.p)[i];
    int64_t v;
    __builtin_memcpy(&v, (const char *)a.p + (size_t)i * 8, 8);
    return v;
}

/* Bytes [off, off + len) of a staged buffer, as a staged buffer of its own
 * (not to be released). Packed (b->layout): whole elements of the packed
 * bytes, @p off and @p len multiples of the type size. */
struct shim_buf shim_buf_part(const struct shim_buf *b, size_t off, size_t len);

/* One collective call: up to two staged buffers. */
struct shim_coll {
    const char *call;
    MPI_Comm comm;
    int inter; /* an intercommunicator: blocks per remote rank, MPI_ROOT roots */
    int rank, size;
    int peers; /* the processes a buffer holds blocks for: size, the remote size (inter) */
    int root;         /* this rank is the root of a rooted call */
    struct shim_buf b[2];
    int dir[2];       /* SHIM_TO_MPI / SHIM_FROM_MPI / both / 0 */
    size_t out[2];    /* bytes MPI writes from the start of the buffer */
    MPI_Count ext[2]; /* the datatype's extent */
    /* v forms: what MPI writes, block by block (NULL: out[i] bytes from the
     * start); malloc'd, freed by shim_coll_release or by the request record. */
    struct shim_piece *pieces[2];
    int npieces[2];
    int present[2]; /* buffer i is significant here and not MPI_IN_PLACE */
    /* A reduction on a non-contiguous type of one basic type with a
     * predefined op, staged packed: PMPI gets rcount elements of that basic
     * type, rtype (MPI_DATATYPE_NULL: the user's count and type, also for a
     * layout-preserving staging). */
    MPI_Datatype rtype;
    MPI_Count rcount;
    /* What MPI reads of buffer i when that is not all of it: the pieces copied
     * in (MPI_IN_PLACE's own block of Gather and Allgather, the picked blocks
     * of a v form), which a persistent collective's MPI_Start copies in again.
     * nin_pieces[i] -1: no list (SHIM_TO_MPI in dir[i]: all of it). malloc'd,
     * freed by shim_coll_release or by the request record. */
    struct shim_piece *in_pieces[2];
    int nin_pieces[2];
};

/* A reduction's count and datatype for PMPI (in a RUN's HOST call). */
#define SHIM_COLL_RCOUNT(n) (c.rtype != MPI_DATATYPE_NULL ? c.rcount : (n))
#define SHIM_COLL_RTYPE(dt) (c.rtype != MPI_DATATYPE_NULL ? c.rtype : (dt))

/*
 * The staging decisions of one collective, shared by the blocking wrappers
 * (shim_coll.c) and the nonblocking ones (shim_icoll.c): each buffer the
 * standard makes significant on this rank is classified, a device one staged
 * (what MPI reads copied in now, synchronously). MPI_SUCCESS: c describes the
 * staging, and when shim_coll_staged(c) is 0 the call goes to PMPI with the
 * user's arguments. Otherwise an error code already raised on @p comm,
 * nothing held. @p call names the call in messages.
 */
int shim_coll_bcast(struct shim_coll *c, const char *call, void *buf, MPI_Count count,
                    MPI_Datatype dt, int root, MPI_Comm comm);
/* Allreduce and Scan. */
int shim_coll_reduce_all(struct shim_coll *c, const char *call, const void *sendbuf,
                         void *recvbuf, MPI_Count count, MPI_Datatype dt, MPI_Op op,
                         MPI_Comm comm);
int shim_coll_exscan(struct shim_coll *c, const char *call, const void *sendbuf, void *recvbuf,
                     MPI_Count count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm);
int shim_coll_reduce(struct shim_coll *c, const char *call, const void *sendbuf, void *recvbuf,
                     MPI_Count count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm);
int shim_coll_reduce_local(struct shim_coll *c, const char *call, const void *inbuf,
                           void *inoutbuf, MPI_Count count, MPI_Datatype dt, MPI_Op op);
int shim_coll_reduce_scatter_block(struct shim_coll *c, const char *call, const void *sendbuf,
                                   void *recvbuf, MPI_Count count, MPI_Datatype dt, MPI_Op op,
                                   MPI_Comm comm);
int shim_coll_reduce_scatter(struct shim_coll *c, const char *call, const void *sendbuf,
                             void *recvbuf, const int counts[], MPI_Datatype dt, MPI_Op op,
                             MPI_Comm comm);
#if SHIM_LARGE_COUNT
int shim_coll_reduce_scatter_c(struct shim_coll *c, const char *call, const void *sendbuf,
                               void *recvbuf, const MPI_Count counts[], MPI_Datatype dt,
                               MPI_Op op, MPI_Comm comm);
#endif
int shim_coll_allgather(struct shim_coll *c, const char *call, const void *sendbuf,
                        MPI_Count scount, MPI_Datatype stype, void *recvbuf, MPI_Count rcount,
                        MPI_Datatype rtype, MPI_Comm comm);
int shim_coll_alltoall(struct shim_coll *c, const char *call, const void *sendbuf,
                       MPI_Count scount, MPI_Datatype stype, void *recvbuf, MPI_Count rcount,
                       MPI_Datatype rtype, MPI_Comm comm);
int shim_coll_gather(struct shim_coll *c, const char *call, const void *sendbuf,
                     MPI_Count scount, MPI_Datatype stype, void *recvbuf, MPI_Count rcount,
                     MPI_Datatype rtype, int root, MPI_Comm comm);
int shim_coll_scatter(struct shim_coll *c, const char *call, const void *sendbuf,
                      MPI_Count scount, MPI_Datatype stype, void *recvbuf, MPI_Count rcount,
                      MPI_Datatype rtype, int root, MPI_Comm comm);

/* The v and w forms: the blocks of a buffer are (counts[q], displs[q])
 * elements of its type for q < the (remote) group's size; the span from the
 * lowest block to the end of the highest is staged in one piece, and only the
 * blocks are copied, in where MPI reads them and back where it writes them,
 * never the holes between them. */
int shim_coll_gatherv(struct shim_coll *c, const char *call, const void *sendbuf,
                      MPI_Count scount, MPI_Datatype stype, void *recvbuf,
                      struct shim_array rcounts, struct shim_array displs, MPI_Datatype rtype,
                      int root, MPI_Comm comm);
int shim_coll_scatterv(struct shim_coll *c, const char *call, const void *sendbuf,
                       struct shim_array scounts, struct shim_array displs, MPI_Datatype stype,
                       void *recvbuf, MPI_Count rcount, MPI_Datatype rtype, int root,
                       MPI_Comm comm);
int shim_coll_allgatherv(struct shim_coll *c, const char *call, const void *sendbuf,
                         MPI_Count scount, MPI_Datatype stype, void *recvbuf,
                         struct shim_array rcounts, struct shim_array displs,
                         MPI_Datatype rtype, MPI_Comm comm);
int shim_coll_alltoallv(struct shim_coll *c, const char *call, const void *sendbuf,
                        struct shim_array scounts, struct shim_array sdispls,
                        MPI_Datatype stype, void *recvbuf, struct shim_array rcounts,
                        struct shim_array rdispls, MPI_Datatype rtype, MPI_Comm comm);
/* Alltoallw: displacements in bytes, a datatype per block. */
int shim_coll_alltoallw(struct shim_coll *c, const char *call, const void *sendbuf,
                        struct shim_array scounts, struct shim_array sdispls,
                        const MPI_Datatype stypes[], void *recvbuf, struct shim_array rcounts,
                        struct shim_array rdispls, const MPI_Datatype rtypes[], MPI_Comm comm);

/* Copy back to the device what MPI wrote into staged buffer @p b: the
 * @p npieces pieces, or (pieces NULL) its first @p out bytes. */
int shim_coll_unstage(const char *call, struct shim_buf *b, size_t out,
                      const struct shim_piece *pieces, int npieces, MPI_Comm comm);

/* 1 when a buffer of @p c is staged. */
int shim_coll_staged(const struct shim_coll *c);
/* The pointer PMPI gets for buffer @p i (the user's @p buf when not staged). */
void *shim_coll_arg(const struct shim_coll *c, int i, const void *buf);
/* After a blocking call's PMPI returned @p rc: copy back what MPI wrote (when
 * it succeeded), release the staging memory. The call's result. */
int shim_coll_end(struct shim_coll *c, int rc);
/* Release the staging memory (PMPI failed, nothing to copy back). */
void shim_coll_release(struct shim_coll *c);

/* For the neighborhood collectives (shim_neigh.c), which stage their buffers
 * as the v forms do. Start call @p call on intracommunicator @p comm: 0 when
 * it goes straight to PMPI (as the shim_coll_X functions' start). */
int shim_coll_start(struct shim_coll *c, const char *call, MPI_Comm comm);
/* Stage buffer @p i of @p c as @p n blocks, as the v forms do: block q is
 * counts[q] elements of @p type at displs[q] extents of it, or (@p types not
 * NULL, Alltoallw) of types[q] at displs[q] bytes; every block with a count
 * above 0 is copied in now (@p dir SHIM_TO_MPI) or back after the call
 * (SHIM_FROM_MPI), nothing else. On an error the buffers of @p c are
 * released. */
int shim_coll_stage_blocks(struct shim_coll *c, int i, const void *buf, int n,
                           struct shim_array counts, struct shim_array displs, MPI_Datatype type,
                           const MPI_Datatype types[], int dir);
/* The in- and out-degree of @p comm's topology (shim_neigh.c) for call
 * @p call: 1, or 0 when it has none (or is not a valid communicator: MPI's
 * to report; or no memory: raised on @p comm). */
int shim_neigh_degrees(MPI_Comm comm, const char *call, int *in, int *out);

/*
 * The collective wrappers that have blocking, nonblocking and persistent
 * forms, from one list: the blocking MPI_X (shim_coll.c), the nonblocking
 * MPI_IX (shim_icoll.c) and the persistent MPI_X_init (shim_icoll.c).
 * NM(Upper, lower): the call's name (Bcast; I##lower: Ibcast). MID: _init or
 * empty. SFX, COUNT_T: (empty, int) or (_c, MPI_Count). XP() / XA(): the
 * parameters / arguments after comm (", MPI_Request *req" / ", req"; empty:
 * SHIM_NONE). RUN(KIND, PREP, USER, HOST): the wrapper's body, given the
 * call's kind (MOVE, or REDUCTION: each RUN maps it to its SHIM_CLASS_*; a
 * reduction is SHIM_CLASS_REDUCE in every form), the call's staging (on a
 * struct shim_coll c), PMPI with the user's arguments and PMPI with the host
 * pointers (SHIM_COLL_ARG).
 */
#define SHIM_NONE()
#define SHIM_CAT_(a, b, c, d) a##b##c##d
#define SHIM_CAT(a, b, c, d) SHIM_CAT_(a, b, c, d)
#define SHIM_STR_(x) #x
#define SHIM_STR(x) SHIM_STR_(x)
#define SHIM_COLL_ARG(i, buf) shim_coll_arg(&c, i, buf)
/* The datatype PMPI gets for buffer @p i (a packed signature type, or dt). */
#define SHIM_COLL_TYPE(i, dt) shim_type_arg(&c.b[i], dt)

/* The start of every RUN: the one cached check for class CLASS
 * (SHIM_CLASS_*), the call's staging (PREP, on a struct shim_coll c), PMPI
 * with the user's arguments when nothing was staged; after it, c holds the
 * staging and int rc is MPI_SUCCESS. */
#define SHIM_COLL_BEGIN(CLASS, PREP, PMPI_CALL_USER) \
    struct shim_coll c;                              \
    shim_defer_flush_if();                           \
    if (SHIM_LIKELY(!shim_active_for(CLASS)))        \
        return PMPI_CALL_USER;                       \
    int rc = (PREP);                          \
    if (rc != MPI_SUCCESS)                    \
        return rc;                            \
    if (!shim_coll_staged(&c))                \
        return PMPI_CALL_USER

#define SHIM_COLL_FAMILY(NM, MID, SFX, COUNT_T, RUN, XP, XA)                                    \
    SHIM_COLL_BCAST(NM, Bcast, bcast, MID, SFX, COUNT_T, RUN, XP, XA)                            \
    SHIM_COLL_REDUCTION(NM, Allreduce, allreduce, MID, SFX, COUNT_T, RUN, XP, XA,               \
                        shim_coll_reduce_all)                                                   \
    SHIM_COLL_REDUCTION(NM, Scan, scan, MID, SFX, COUNT_T, RUN, XP, XA, shim_coll_reduce_all)   \
    SHIM_COLL_REDUCTION(NM, Exscan, exscan, MID, SFX, COUNT_T, RUN, XP, XA, shim_coll_exscan)   \
    SHIM_COLL_REDUCTION(NM, Reduce_scatter_block, reduce_scatter_block, MID, SFX, COUNT_T, RUN, \
                        XP, XA, shim_coll_reduce_scatter_block)                                 \
    SHIM_COLL_REDUCE(NM, Reduce, reduce, MID, SFX, COUNT_T, RUN, XP, XA)                         \
    SHIM_COLL_REDUCE_SCATTER(NM, Reduce_scatter, reduce_scatter, MID, SFX, COUNT_T, RUN, XP, XA) \
    SHIM_COLL_ALL(NM, Allgather, allgather, MID, SFX, COUNT_T, RUN, XP, XA,                     \
                  shim_coll_allgather)                                                          \
    SHIM_COLL_ALL(NM, Alltoall, alltoall, MID, SFX, COUNT_T, RUN, XP, XA, shim_coll_alltoall)   \
    SHIM_COLL_ROOTED(NM, Gather, gather, MID, SFX, COUNT_T, RUN, XP, XA, shim_coll_gather)      \
    SHIM_COLL_ROOTED(NM, Scatter, scatter, MID, SFX, COUNT_T, RUN, XP, XA, shim_coll_scatter)

/* The names of one call: MPI_X (the wrapper), PMPI_X and "MPI_X". */
#define SHIM_COLL_MPI(NM, U, L, MID, SFX) SHIM_CAT(MPI_, NM(U, L), MID, SFX)
#define SHIM_COLL_PMPI(NM, U, L, MID, SFX) SHIM_CAT(PMPI_, NM(U, L), MID, SFX)
#define SHIM_COLL_NAME(NM, U, L, MID, SFX) SHIM_STR(SHIM_COLL_MPI(NM, U, L, MID, SFX))

#define SHIM_COLL_BCAST(NM, U, L, MID, SFX, COUNT_T, RUN, XP, XA)                               \
    SHIM_EXPORT int SHIM_COLL_MPI(NM, U, L, MID, SFX)(void *buf, COUNT_T count, MPI_Datatype dt, \
                                                      int root, MPI_Comm comm XP())             \
    {                                                                                           \
        RUN(MOVE,                                                                               \
            shim_coll_bcast(&c, SHIM_COLL_NAME(NM, U, L, MID, SFX), buf, count, dt, root, comm), \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(buf, count, dt, root, comm XA()),                \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(SHIM_COLL_ARG(0, buf), count,                    \
                                               SHIM_COLL_TYPE(0, dt), root, comm XA()));        \
    }

/* (sendbuf, recvbuf, count, datatype, op, comm): Allreduce, Scan, Exscan,
 * Reduce_scatter_block; with a root: Reduce. */
#define SHIM_COLL_REDUCTION(NM, U, L, MID, SFX, COUNT_T, RUN, XP, XA, PREP)                     \
    SHIM_EXPORT int SHIM_COLL_MPI(NM, U, L, MID, SFX)(const void *sendbuf, void *recvbuf,       \
                                                      COUNT_T count, MPI_Datatype dt,           \
                                                      MPI_Op op, MPI_Comm comm XP())            \
    {                                                                                           \
        RUN(REDUCTION,                                                                          \
            PREP(&c, SHIM_COLL_NAME(NM, U, L, MID, SFX), sendbuf, recvbuf, count, dt, op, comm), \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(sendbuf, recvbuf, count, dt, op, comm XA()),     \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(SHIM_COLL_ARG(0, sendbuf),                       \
                                               SHIM_COLL_ARG(1, recvbuf),                       \
                                               SHIM_COLL_RCOUNT(count), SHIM_COLL_RTYPE(dt),    \
                                               op, comm XA()));                                 \
    }

#define SHIM_COLL_REDUCE(NM, U, L, MID, SFX, COUNT_T, RUN, XP, XA)                              \
    SHIM_EXPORT int SHIM_COLL_MPI(NM, U, L, MID, SFX)(const void *sendbuf, void *recvbuf,       \
                                                      COUNT_T count, MPI_Datatype dt,           \
                                                      MPI_Op op, int root, MPI_Comm comm XP())  \
    {                                                                                           \
        RUN(REDUCTION,                                                                          \
            shim_coll_reduce(&c, SHIM_COLL_NAME(NM, U, L, MID, SFX), sendbuf, recvbuf, count,   \
                             dt, op, root, comm),                                               \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(sendbuf, recvbuf, count, dt, op, root,           \
                                               comm XA()),                                      \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(SHIM_COLL_ARG(0, sendbuf),                       \
                                               SHIM_COLL_ARG(1, recvbuf),                       \
                                               SHIM_COLL_RCOUNT(count), SHIM_COLL_RTYPE(dt),    \
                                               op, root, comm XA()));                           \
    }

#define SHIM_COLL_REDUCE_SCATTER(NM, U, L, MID, SFX, COUNT_T, RUN, XP, XA)                      \
    SHIM_EXPORT int SHIM_COLL_MPI(NM, U, L, MID, SFX)(const void *sendbuf, void *recvbuf,       \
                                                      const COUNT_T counts[], MPI_Datatype dt,  \
                                                      MPI_Op op, MPI_Comm comm XP())            \
    {                                                                                           \
        RUN(REDUCTION,                                                                          \
            shim_coll_reduce_scatter##SFX(&c, SHIM_COLL_NAME(NM, U, L, MID, SFX), sendbuf,      \
                                          recvbuf, counts, dt, op, comm),                       \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(sendbuf, recvbuf, counts, dt, op, comm XA()),    \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(SHIM_COLL_ARG(0, sendbuf),                       \
                                               SHIM_COLL_ARG(1, recvbuf), counts, dt, op,       \
                                               comm XA()));                                     \
    }

/* (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm):
 * Allgather, Alltoall; with a root before comm: Gather, Scatter. */
#define SHIM_COLL_ALL(NM, U, L, MID, SFX, COUNT_T, RUN, XP, XA, PREP)                           \
    SHIM_EXPORT int SHIM_COLL_MPI(NM, U, L, MID, SFX)(                                          \
        const void *sendbuf, COUNT_T scount, MPI_Datatype stype, void *recvbuf, COUNT_T rcount, \
        MPI_Datatype rtype, MPI_Comm comm XP())                                                 \
    {                                                                                           \
        RUN(MOVE,                                                                               \
            PREP(&c, SHIM_COLL_NAME(NM, U, L, MID, SFX), sendbuf, scount, stype, recvbuf,       \
                 rcount, rtype, comm),                                                          \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(sendbuf, scount, stype, recvbuf, rcount, rtype,  \
                                               comm XA()),                                      \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(SHIM_COLL_ARG(0, sendbuf), scount,               \
                                               SHIM_COLL_TYPE(0, stype),                        \
                                               SHIM_COLL_ARG(1, recvbuf), rcount,               \
                                               SHIM_COLL_TYPE(1, rtype), comm XA()));           \
    }

#define SHIM_COLL_ROOTED(NM, U, L, MID, SFX, COUNT_T, RUN, XP, XA, PREP)                        \
    SHIM_EXPORT int SHIM_COLL_MPI(NM, U, L, MID, SFX)(                                          \
        const void *sendbuf, COUNT_T scount, MPI_Datatype stype, void *recvbuf, COUNT_T rcount, \
        MPI_Datatype rtype, int root, MPI_Comm comm XP())                                       \
    {                                                                                           \
        RUN(MOVE,                                                                               \
            PREP(&c, SHIM_COLL_NAME(NM, U, L, MID, SFX), sendbuf, scount, stype, recvbuf,       \
                 rcount, rtype, root, comm),                                                    \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(sendbuf, scount, stype, recvbuf, rcount, rtype,  \
                                               root, comm XA()),                                \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(SHIM_COLL_ARG(0, sendbuf), scount,               \
                                               SHIM_COLL_TYPE(0, stype),                        \
                                               SHIM_COLL_ARG(1, recvbuf), rcount,               \
                                               SHIM_COLL_TYPE(1, rtype), root, comm XA()));     \
    }

/* The v forms (blocking and nonblocking) from one list too. DISP_T: the
 * displacements' type (int; MPI_Aint for the _c forms). */
#define SHIM_COLL_V_FAMILY(NM, MID, SFX, COUNT_T, DISP_T, RUN, XP, XA)                         \
    SHIM_COLL_GATHERV(NM, Gatherv, gatherv, MID, SFX, COUNT_T, DISP_T, RUN, XP, XA)            \
    SHIM_COLL_SCATTERV(NM, Scatterv, scatterv, MID, SFX, COUNT_T, DISP_T, RUN, XP, XA)         \
    SHIM_COLL_ALLGATHERV(NM, Allgatherv, allgatherv, MID, SFX, COUNT_T, DISP_T, RUN, XP, XA)   \
    SHIM_COLL_ALLTOALLV(NM, Alltoallv, alltoallv, MID, SFX, COUNT_T, DISP_T, RUN, XP, XA)

#define SHIM_COLL_GATHERV(NM, U, L, MID, SFX, COUNT_T, DISP_T, RUN, XP, XA)                     \
    SHIM_EXPORT int SHIM_COLL_MPI(NM, U, L, MID, SFX)(                                          \
        const void *sendbuf, COUNT_T scount, MPI_Datatype stype, void *recvbuf,                 \
        const COUNT_T rcounts[], const DISP_T displs[], MPI_Datatype rtype, int root,           \
        MPI_Comm comm XP())                                                                     \
    {                                                                                           \
        RUN(MOVE,                                                                               \
            shim_coll_gatherv(&c, SHIM_COLL_NAME(NM, U, L, MID, SFX), sendbuf, scount, stype,   \
                              recvbuf, SHIM_ARRAY(rcounts), SHIM_ARRAY(displs), rtype, root,    \
                              comm),                                                            \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(sendbuf, scount, stype, recvbuf, rcounts,        \
                                               displs, rtype, root, comm XA()),                 \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(SHIM_COLL_ARG(0, sendbuf), scount,               \
                                               SHIM_COLL_TYPE(0, stype),                        \
                                               SHIM_COLL_ARG(1, recvbuf), rcounts, displs,      \
                                               SHIM_COLL_TYPE(1, rtype), root, comm XA()));     \
    }

#define SHIM_COLL_SCATTERV(NM, U, L, MID, SFX, COUNT_T, DISP_T, RUN, XP, XA)                    \
    SHIM_EXPORT int SHIM_COLL_MPI(NM, U, L, MID, SFX)(                                          \
        const void *sendbuf, const COUNT_T scounts[], const DISP_T displs[],                    \
        MPI_Datatype stype, void *recvbuf, COUNT_T rcount, MPI_Datatype rtype, int root,        \
        MPI_Comm comm XP())                                                                     \
    {                                                                                           \
        RUN(MOVE,                                                                               \
            shim_coll_scatterv(&c, SHIM_COLL_NAME(NM, U, L, MID, SFX), sendbuf,                 \
                               SHIM_ARRAY(scounts), SHIM_ARRAY(displs), stype, recvbuf, rcount, \
                               rtype, root, comm),                                              \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(sendbuf, scounts, displs, stype, recvbuf,        \
                                               rcount, rtype, root, comm XA()),                 \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(SHIM_COLL_ARG(0, sendbuf), scounts, displs,      \
                                               SHIM_COLL_TYPE(0, stype),                        \
                                               SHIM_COLL_ARG(1, recvbuf), rcount,               \
                                               SHIM_COLL_TYPE(1, rtype), root, comm XA()));     \
    }

#define SHIM_COLL_ALLGATHERV(NM, U, L, MID, SFX, COUNT_T, DISP_T, RUN, XP, XA)                  \
    SHIM_EXPORT int SHIM_COLL_MPI(NM, U, L, MID, SFX)(                                          \
        const void *sendbuf, COUNT_T scount, MPI_Datatype stype, void *recvbuf,                 \
        const COUNT_T rcounts[], const DISP_T displs[], MPI_Datatype rtype,                     \
        MPI_Comm comm XP())                                                                     \
    {                                                                                           \
        RUN(MOVE,                                                                               \
            shim_coll_allgatherv(&c, SHIM_COLL_NAME(NM, U, L, MID, SFX), sendbuf, scount,       \
                                 stype, recvbuf, SHIM_ARRAY(rcounts), SHIM_ARRAY(displs),       \
                                 rtype, comm),                                                  \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(sendbuf, scount, stype, recvbuf, rcounts,        \
                                               displs, rtype, comm XA()),                       \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(SHIM_COLL_ARG(0, sendbuf), scount,               \
                                               SHIM_COLL_TYPE(0, stype),                        \
                                               SHIM_COLL_ARG(1, recvbuf), rcounts, displs,      \
                                               SHIM_COLL_TYPE(1, rtype), comm XA()));           \
    }

#define SHIM_COLL_ALLTOALLV(NM, U, L, MID, SFX, COUNT_T, DISP_T, RUN, XP, XA)                   \
    SHIM_EXPORT int SHIM_COLL_MPI(NM, U, L, MID, SFX)(                                          \
        const void *sendbuf, const COUNT_T scounts[], const DISP_T sdispls[],                   \
        MPI_Datatype stype, void *recvbuf, const COUNT_T rcounts[], const DISP_T rdispls[],     \
        MPI_Datatype rtype, MPI_Comm comm XP())                                                 \
    {                                                                                           \
        RUN(MOVE,                                                                               \
            shim_coll_alltoallv(&c, SHIM_COLL_NAME(NM, U, L, MID, SFX), sendbuf,                \
                                SHIM_ARRAY(scounts), SHIM_ARRAY(sdispls), stype, recvbuf,       \
                                SHIM_ARRAY(rcounts), SHIM_ARRAY(rdispls), rtype, comm),         \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(sendbuf, scounts, sdispls, stype, recvbuf,       \
                                               rcounts, rdispls, rtype, comm XA()),             \
            SHIM_COLL_PMPI(NM, U, L, MID, SFX)(SHIM_COLL_ARG(0, sendbuf), scounts, sdispls,     \
                                               SHIM_COLL_TYPE(0, stype),                        \
                                               SHIM_COLL_ARG(1, recvbuf), rcounts, rdispls,     \
                                               SHIM_COLL_TYPE(1, rtype), comm XA()));           \
    }

/* Alltoallw: displacements in bytes, a datatype per peer (the arrays go to
 * PMPI as they are: the user keeps them valid until a nonblocking call
 * completes; the blocks to copy back are computed at the call). Not in the
 * V family (no datatype per peer there); the blocking and the nonblocking
 * wrappers both come from it. */
#define SHIM_COLL_ALLTOALLW(NM, MID, SFX, COUNT_T, DISP_T, RUN, XP, XA)                         \
    SHIM_EXPORT int SHIM_COLL_MPI(NM, Alltoallw, alltoallw, MID, SFX)(                          \
        const void *sendbuf, const COUNT_T scounts[], const DISP_T sdispls[],                   \
        const MPI_Datatype stypes[], void *recvbuf, const COUNT_T rcounts[],                    \
        const DISP_T rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm XP())                \
    {                                                                                           \
        RUN(MOVE,                                                                               \
            shim_coll_alltoallw(&c, SHIM_COLL_NAME(NM, Alltoallw, alltoallw, MID, SFX), sendbuf, \
                                SHIM_ARRAY(scounts), SHIM_ARRAY(sdispls), stypes, recvbuf,      \
                                SHIM_ARRAY(rcounts), SHIM_ARRAY(rdispls), rtypes, comm),        \
            SHIM_COLL_PMPI(NM, Alltoallw, alltoallw, MID, SFX)(sendbuf, scounts, sdispls,       \
                                                               stypes, recvbuf, rcounts,        \
                                                               rdispls, rtypes, comm XA()),     \
            SHIM_COLL_PMPI(NM, Alltoallw, alltoallw, MID, SFX)(                                 \
                SHIM_COLL_ARG(0, sendbuf), scounts, sdispls, stypes, SHIM_COLL_ARG(1, recvbuf), \
                rcounts, rdispls, rtypes, comm XA()));                                          \
    }

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

/* One asynchronous copy (a pipelined chunk, a deferred send, a receive's copy
 * back started early): a completion
 * whose func marks it done, with its status. */
struct shim_copy {
    cucopy_completion_t comp; /* first: the callback casts back */
    _Atomic int done;
    cucopy_status_t status;
};
/* Start copying @p n bytes from @p src to @p dst. 1: issued (or finished,
 * or failed: k->done is set then), 0: no resource now, retry after progress. */
int shim_copy_start(struct shim_copy *k, const void *src, void *dst, size_t n);

static inline int shim_copy_is_done(struct shim_copy *k)
{
    return atomic_load_explicit(&k->done, memory_order_acquire);
}

struct shim_rec {
    struct shim_rec *next;
    MPI_Request req;     /* the real request (its value is the key) */
    int recv;            /* 1: copy to the device at completion */
    int copied;          /* the copy to the device is done (Request_get_status) */
    int persistent;      /* *_init: the record lives until Request_free */
    int active;          /* persistent: started and not completed yet */
    int detached;        /* Request_free'd while active: freed at completion */
    int coll;            /* a nonblocking collective: buf and buf2, out[] copied back */
    MPI_Comm comm;
    const char *call;
    struct shim_buf buf;
    struct shim_buf buf2; /* a collective's second buffer (recvbuf) */
    size_t out[2];        /* a collective: bytes of buf, buf2 MPI writes (0: none) */
    struct shim_piece *pieces[2]; /* a v collective: what MPI writes, block by block */
    int npieces[2];
    void *owned; /* memory MPI reads until completion, freed with the record (shim_rec_keep) */
    /* A pipelined message received before the completion call that reports
     * it (Request_get_status, shim_batch_early): its count and result, given
     * to that call's status. */
    int pipe_done;
    int pipe_rc;
    MPI_Count pipe_bytes;
    /* A persistent collective: what each MPI_Start copies from the device into
     * buf (i = 0) and buf2 (1) again: nothing (0), all of it (-1), or the
     * nin[i] pieces in_pieces[i] (owned by the record). */
    int nin[2];
    struct shim_piece *in_pieces[2];
    /* A deferred send (shim_defer.c): req is its generalized request, made
     * complete by shim_defer_ready once the PMPI send it posted completed. */
    struct shim_defer *defer;
    /* A staged receive whose copy to the device started while its Waitall
     * waited for other requests (shim_batch_early): back_bytes of it, in
     * back; shim_rec_copy_now waits for it. */
    int back_started;
    size_t back_bytes;
    struct shim_copy back;
};

/* A generalized request (MPI_Grequest_start) whose status the shim sets:
 * a request served from a held message (complete at once) or a deferred
 * send (complete once the PMPI send is). The state is malloc'd by the
 * caller, owned by MPI once started (freed when the request is). */
struct shim_greq {
    MPI_Status st; /* the status MPI reports for the request */
    int error;     /* its error (what MPI_Wait & co. return), MPI_SUCCESS */
};
/* Make *req a generalized request on @p g; on failure @p g is freed. */
int shim_greq_start(struct shim_greq *g, MPI_Request *req);

/* Record a staged nonblocking call whose request PMPI just returned in
 * *req. Without memory for the record, the request is completed here
 * (PMPI_Wait, then the staging is finished: the call became blocking) and
 * *req is MPI_REQUEST_NULL. Returns MPI_SUCCESS or an error code. */
int shim_rec_add(MPI_Request *req, int recv, MPI_Comm comm, const char *call,
                 const struct shim_buf *b);

/* Record a nonblocking collective whose request PMPI just returned in *req,
 * on the staging of @p c (shim_coll_*): at completion what MPI wrote into
 * each staged buffer is copied back (c->out bytes where MPI writes), then the
 * staging memory is released. Without memory for the record, the request is
 * completed here, as shim_rec_add does. */
int shim_rec_add_coll(MPI_Request *req, const struct shim_coll *c);

/* The end of a nonblocking collective's wrapper whose PMPI_IX returned @p rc
 * on the staging of @p c: the request *req recorded (shim_rec_add_coll), or,
 * when PMPI_IX failed, the staging released and @p rc returned. */
static inline int shim_coll_started(struct shim_coll *c, int rc, MPI_Request *req)
{
    if (rc != MPI_SUCCESS) {
        shim_coll_release(c);
        return rc;
    }
    return shim_rec_add_coll(req, c);
}

/* Keep @p mem (malloc'd), which MPI reads until request *req completes,
 * alive until then: it is freed with the request's record, made for it if
 * the request has none. Without memory for a record, the request is
 * completed here (PMPI_Wait: the call became blocking), @p mem freed and
 * *req is MPI_REQUEST_NULL. Returns MPI_SUCCESS or an error code. */
int shim_rec_keep(MPI_Request *req, MPI_Comm comm, const char *call, void *mem);

/* Record a persistent request (*_init) just made on staging memory. Without
 * memory for the record, the request is freed and an error returned. */
int shim_rec_add_persistent(MPI_Request *req, int recv, MPI_Comm comm, const char *call,
                            const struct shim_buf *b);
/* Record a persistent collective (MPI_X_init) whose request PMPI just made
 * on the staging of @p c (shim_coll_*), which the record keeps until
 * MPI_Request_free: each MPI_Start copies in again what MPI reads, each
 * completion copies back what MPI wrote (as shim_rec_add_coll's). Without
 * memory for the record, the request is freed, the staging released and an
 * error returned. */
int shim_rec_add_pcoll(MPI_Request *req, const struct shim_coll *c);
/* MPI_Start(all) of a persistent record: a send copies the device bytes into
 * its staging memory now, a collective what MPI reads of its buffers.
 * MPI_SUCCESS or an error code raised on its comm. */
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
/* Before a Waitall's PMPI_Waitall: while it would wait, each receive that
 * completed meanwhile gets its work started, polled without completing it
 * (MPI_Request_get_status): a pipelined message's stream is received, and a
 * staged message of at least SHIM_EARLY_BACK_MIN bytes starts its copy to
 * the device, overlapping the arrival of the others. */
void shim_batch_early(struct shim_batch *bt);
/* Below this a message's copy back is left to the end of the Waitall: there
 * is little to overlap, and a short copy is cheaper than an asynchronous one. */
#define SHIM_EARLY_BACK_MIN ((size_t)64 << 10)
/* Append the early copies' part of the stats line. */
int shim_early_stats(char *out, size_t len);
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

/* ---- pipelined messages (shim_pipe.c, docs/mpi.md) ------------------------ */

/* Bytes of a pipelined message's envelope (struct pipe_env). */
#define SHIM_PIPE_ENV_BYTES 40

/* Bytes from which a device send is pipelined; 0: pipelining off (set once,
 * when the library is loaded). */
extern size_t shim_pipe_threshold;

static inline int shim_pipe_on(void)
{
    return SHIM_UNLIKELY(shim_pipe_threshold != 0);
}

/* The send mode of a pipelined send (the envelope's); NONE: never pipelined. */
enum { SHIM_PIPE_NONE = 0, SHIM_PIPE_SEND, SHIM_PIPE_SSEND, SHIM_PIPE_ISEND, SHIM_PIPE_ISSEND };

/* CUCOPY_MPI_PIPELINE_KB and _CHUNK_KB: 0, or -1 with @p err set. */
int shim_pipe_configure(char *err, size_t errlen);
/* After PMPI_Init*: the private communicator (pipelining on). */
void shim_pipe_after_init(void);
/* Before PMPI_Finalize: wait for the chunks in flight, free the communicator. */
void shim_pipe_before_finalize(void);

/*
 * A blocking send of @p mode (SHIM_PIPE_SEND, _SSEND) that may be pipelined:
 * 0 when it is not (a host buffer, below the threshold, an
 * intercommunicator, a bad rank: the caller goes on as before); 1 when it
 * was handled, *rc its result. Nonblocking ones: shim_pipe_isend.
 */
int shim_pipe_send(const char *call, int mode, const void *buf, MPI_Count count,
                   MPI_Datatype dt, int dest, int tag, MPI_Comm comm, int *rc);
/* The steps of a pipelined send, which shim_pipe_run takes at once and a
 * deferred Isend (shim_defer.c) one by one:
 * - prepare: 0 when the send is not pipelined (as shim_pipe_send); 1 with
 *   *ps the stream (staged, its first chunk copies started), or *ps NULL
 *   and *rc the staging's error;
 * - envelope: send it in @p mode (SHIM_PIPE_*; *req for the nonblocking
 *   ones) from @p store (SHIM_PIPE_ENV_BYTES, the caller's: alive until the
 *   send completes); its result;
 * - copies_done: 1 when every chunk copy started is done;
 * - step: post the chunks whose copies are done (after the envelope), start
 *   more copies, let MPI progress; 1 when every chunk is posted;
 * - finish: then, hand the stream to the list in flight (reaped when MPI
 *   completed its chunks); the envelope's result, *failed the first chunk
 *   copy that failed. */
struct pipe_stream;
int shim_pipe_prepare(const char *call, const void *buf, MPI_Count count, MPI_Datatype dt,
                      int dest, MPI_Comm comm, struct pipe_stream **ps, int *rc);
int shim_pipe_envelope(struct pipe_stream *ps, int mode, int tag, MPI_Comm comm,
                       MPI_Request *req, void *store);
int shim_pipe_copies_done(const struct pipe_stream *ps);
int shim_pipe_step(struct pipe_stream *ps);
int shim_pipe_finish(struct pipe_stream *ps, cucopy_status_t *failed);
/* All of them at once (the blocking way): envelope, chunks, finish; the
 * send's result (a failed chunk copy reported as shim_pipe_send does). */
int shim_pipe_run(struct pipe_stream *ps, const char *call, int mode, int tag, MPI_Comm comm,
                  MPI_Request *req);
/* A receive completed with @p rc and @p s, its first byte at @p first (host
 * memory): 1 when it got an envelope. */
int shim_pipe_is_envelope(int rc, const MPI_Status *s, const void *first);
/* The receive into @p b (staged: b->host and b->first; host: b->staged 0,
 * b->host the user's first byte) got an envelope there: receive the chunks,
 * set the status's count. MPI_SUCCESS or an error raised on @p comm. */
int shim_pipe_recv(const char *call, struct shim_buf *b, MPI_Status *s, MPI_Comm comm);
/* After a receive into the user's host buffer with result @p rc: if it got
 * an envelope, receive the chunks into it. The call's result. */
int shim_pipe_host_recv(const char *call, int rc, void *buf, MPI_Count count, MPI_Datatype dt,
                        MPI_Comm comm, MPI_Status *s);
/* A host Irecv (Recv_init: @p persistent) PMPI just made: recorded so that
 * its completion checks for an envelope (contiguous buffers of >= the
 * envelope's size). MPI_SUCCESS or an error code. */
int shim_pipe_watch(MPI_Request *req, const char *call, void *buf, MPI_Count count,
                    MPI_Datatype dt, MPI_Comm comm, int persistent);
/* Scatter @p bytes of packed data into @p count elements of @p dt at @p buf:
 * where a pipelined message lands in a non-contiguous receive (MPI_Unpack of
 * host memory; the datatype staging's integration point). */
int shim_pipe_scatter(const void *packed, size_t bytes, void *buf, MPI_Count count,
                      MPI_Datatype dt, MPI_Comm comm);
/* A receive of a Waitall's batch (shim_batch_early) that may have got an
 * envelope: pipelining is on and its buffer can hold one. */
int shim_pipe_early_candidate(const struct shim_rec *r);
/* Receive the stream now if the completed receive @p r (its status @p st)
 * got an envelope: 1 if it did (taken; an error is raised and kept for the
 * status), 0 if it got a plain message. */
int shim_pipe_take_early(struct shim_rec *r, const MPI_Status *st);
/* Append the pipelining part of the stats line. */
int shim_pipe_stats(char *out, size_t len);
/* 1 with *total the message's bytes when @p data (@p bytes) is an envelope. */
int shim_pipe_envelope_total(const void *data, size_t bytes, uint64_t *total);

/* ---- probed messages, held (shim_held.c, docs/mpi.md) --------------------- */

/* Held messages and handed-out message handles: receives consult them first. */
extern _Atomic int shim_held_count;

static inline int shim_held_any(void)
{
    return SHIM_UNLIKELY(atomic_load_explicit(&shim_held_count, memory_order_acquire) != 0);
}

/* From shim_pipe_after_init / shim_pipe_before_finalize (pipelining on). */
void shim_held_after_init(int tag_ub, int world_rank);
void shim_held_before_finalize(void);

struct held;
/* The first held message (comm, source, tag) matches, taken; NULL if none. */
struct held *shim_held_take(MPI_Comm comm, int source, int tag);
/* Receive held message @p h (taken) into (buf, count, dt) and free it: the
 * status is the message's (source, tag) with the count received; blocking
 * (shim_held_recv) or a request complete at once (shim_held_irecv). Errors
 * are raised on @p comm. */
int shim_held_recv(const char *call, struct held *h, void *buf, MPI_Count count,
                   MPI_Datatype dt, MPI_Comm comm, MPI_Status *status);
int shim_held_irecv(const char *call, struct held *h, void *buf, MPI_Count count,
                    MPI_Datatype dt, MPI_Comm comm, MPI_Request *req);
/* PMPI_Mrecv / PMPI_Imrecv that know the message handles MPI_Mprobe handed
 * out for held messages. */
int shim_held_mrecv(void *buf, MPI_Count count, MPI_Datatype dt, MPI_Message *msg,
                    MPI_Status *status);
int shim_held_imrecv(void *buf, MPI_Count count, MPI_Datatype dt, MPI_Message *msg,
                     MPI_Request *req);

/* ---- nonblocking sends with the copy after the call (shim_defer.c) -------- */

/* CUCOPY_MPI_ISEND: 1 async (the default), 0 sync. */
extern int shim_isend_async;
/* Deferred sends not posted yet. */
extern _Atomic int shim_deferred_n;

/* The mode of a deferred send; NONE: never deferred (Ibsend: MPI checks its
 * buffer space in the call). */
enum { SHIM_DEFER_NONE = 0, SHIM_DEFER_ISEND, SHIM_DEFER_ISSEND, SHIM_DEFER_IRSEND };

/* CUCOPY_MPI_ISEND: 0, or -1 with @p err set. */
int shim_defer_configure(char *err, size_t errlen);

/* Post the deferred sends in call order: all (@p wait: waiting for their
 * copies), or up to the first whose copy is not done. */
void shim_defer_flush(int wait);

static inline void shim_defer_flush_if(void)
{
    if (SHIM_UNLIKELY(atomic_load_explicit(&shim_deferred_n, memory_order_acquire) != 0))
        shim_defer_flush(1);
}

/* In a call that polls (Test*, Iprobe): post the deferred sends whose copies
 * are done, as MPI progresses a send in any of its calls. */
static inline void shim_defer_poll(void)
{
    if (SHIM_UNLIKELY(atomic_load_explicit(&shim_deferred_n, memory_order_acquire) != 0))
        shim_defer_flush(0);
}

/* 1 when MPI would take (dest, tag) on @p comm: a deferred send's arguments
 * are checked in the call, as MPI checks them (a bad one goes the plain way:
 * MPI reports it there). */
int shim_defer_args_ok(int dest, int tag, MPI_Comm comm);

struct shim_defer;
/* Send of @p mode from staged buffer @p b (contiguous, staged with
 * SHIM_DEFER_COPY: nothing copied yet), the user's request *req: start the
 * copy, make *req a generalized request, record it (owning @p b) and queue
 * the send; 1. 0 when it cannot (no memory, the copy refused at once):
 * nothing happened, the caller copies and sends as without deferring. */
int shim_defer_isend(const char *call, int mode, struct shim_buf *b, MPI_Count count,
                     MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request *req);
/* Isend/Issend (@p mode SHIM_PIPE_ISEND/ISSEND) that may be pipelined
 * (shim_pipe_prepare): 0 when it is not (the caller goes on as without
 * pipelining); 1 when it was, *rc its result. With CUCOPY_MPI_ISEND=async
 * it is deferred: the first chunk copies started, *req a generalized
 * request, and a later flush posts it in call order, envelope and every
 * chunk at once (a polling one once the copies started are done);
 * otherwise (or without memory for its record) it runs in the call after
 * the deferred sends before it, *req the envelope's request. */
int shim_pipe_isend(const char *call, int mode, const void *buf, MPI_Count count,
                    MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request *req, int *rc);
/* A record's memory, and a deferred send's record made in it (shim_requests.c). */
struct shim_rec *shim_rec_new(void);
void shim_rec_insert_deferred(struct shim_rec *r, MPI_Request req, MPI_Comm comm,
                              const char *call, const struct shim_buf *b, struct shim_defer *d);
/* Before the completion family asks MPI about a deferred send's request:
 * post it, test it (@p wait: wait for it) and complete the generalized
 * request once the PMPI send completed. 1 when it is complete. */
int shim_defer_ready(struct shim_rec *r, int wait);
struct shim_batch;
/* Ready the deferred sends among a batch's taken records (shim_defer_ready,
 * @p wait: waiting for each): how many are still not complete. */
int shim_batch_defer_ready(struct shim_batch *bt, int wait);
/* Free a deferred send's state with its record. */
void shim_defer_drop(struct shim_defer *d);
/* Append the deferred sends' part of the stats line. */
int shim_defer_stats(char *out, size_t len);

/* cucopy's asynchronous copies (shim_state.c): progress, and below one copy
 * (cucopy_ep_put_zcopy with a completion). */
void shim_copy_progress(void);

/* ---- non-contiguous datatypes (shim_types.c) ------------------------------ */

/* Stage @p count elements of non-contiguous @p dt at device buffer @p buf
 * (on @p device) packed, as shim_stage does (whose part this is: the buffer
 * is classified already). MPI_ERR_TYPE, raised, for a type that cannot be. */
int shim_types_stage(const char *call, const void *buf, MPI_Count count, MPI_Datatype dt,
                     MPI_Comm comm, int direction, int device, struct shim_buf *b);
/* Copy the first @p n packed bytes of staged buffer @p b between the device
 * and its packed staging memory (@p to_device: scatter, else gather). */
int shim_types_copy(const char *call, struct shim_buf *b, int to_device, size_t n,
                    MPI_Comm comm);
/* Turn packed staged buffer @p b (shim_types_stage, nothing copied yet) into
 * a layout-preserving one (b->span): host staging of the span of its count
 * elements, PMPI's datatype @p dt (the user's). On an error (raised) @p b is
 * still staged packed. */
int shim_types_span(const char *call, struct shim_buf *b, MPI_Datatype dt, MPI_Comm comm);
/* Make byte-staged span @p b (shim_stage of MPI_BYTE; b->tlb: its first
 * byte's offset from the buffer argument) layout-preserving for blocks of
 * Alltoallw's per-peer datatypes: block q is counts[q] elements of types[q]
 * at byte displacement displs[q] from the buffer argument, q < @p n. Only the blocks' type maps
 * are copied (shim_restage, shim_unstage: all of them). MPI_ERR_TYPE
 * (raised) for a type that cannot be flattened; @p b unchanged then. */
int shim_types_span_blocks(const char *call, struct shim_buf *b, int n, struct shim_array counts,
                           struct shim_array displs, const MPI_Datatype types[], MPI_Comm comm);
/* Drop a reference to a layout (shim_release). */
void shim_types_unref(struct shim_layout *L);
/* 1 when the layout's map is *per_element elements of one predefined type
 * *basic (extent == size) per element of the user's type (a reduction with
 * a predefined op runs on count x that of it). */
int shim_types_basic(const struct shim_layout *L, MPI_Datatype *basic, MPI_Count *per_element);
/* Forget the cached layout of @p dt (MPI_Type_free, C and Fortran). */
void shim_types_forget(MPI_Datatype dt);
/* Whether the type map of one element of @p dt is one run of its size in
 * bytes at its true lower bound, in address order: 1 yes (a predefined type),
 * 0 no (size == true extent does not say it: an hindexed type with
 * descending displacements and no holes is one block of memory whose bytes
 * MPI moves in another order), -1 unknown (the type cannot be flattened). */
int shim_types_in_order(MPI_Datatype dt);

/* One strided run of a flattened type map: @p rows blocks of @p width bytes,
 * the first at @p off from the buffer, @p pitch apart. */
struct shim_run {
    MPI_Aint off;
    size_t width;
    MPI_Aint pitch;
    size_t rows;
};

/* What shim_types.c needs of libcucopy (loaded by shim_state.c). */
struct shim_cucopy_copy {
    cucopy_ep_h ep;
    cucopy_iface_h iface;
    size_t max_iov;
    cucopy_status_t (*ep_copy_2d)(cucopy_ep_h, const cucopy_copy_2d_t *, size_t,
                                  cucopy_completion_t *);
    int (*iface_progress)(cucopy_iface_h);
};
extern struct shim_cucopy_copy shim_cc;

/* A cucopy failure in @p call while doing @p what: the detail on stderr, an
 * MPI_ERR_OTHER code raised on @p comm. */
int shim_cucopy_error(MPI_Comm comm, const char *call, const char *what);

/* ---- stats ---------------------------------------------------------------- */

void shim_stats_add(int to_device, int device, size_t bytes);

#endif
