/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The v and w blocking collectives (issue 13): MPI_Gatherv, Scatterv,
 * Allgatherv, Alltoallv, Alltoallw, and their large-count MPI_X_c forms on an
 * MPI-4 library.
 *
 * A buffer of these calls is a list of blocks, one per peer: counts[i]
 * elements at displacement displs[i] (in extents of the datatype; in bytes,
 * with a datatype per peer, for Alltoallw). Each device buffer the standard
 * makes significant on this rank is classified over its span (from the
 * lowest block's first byte to the highest block's last one), one piece of
 * staging memory of that span is taken, and only the blocks are copied: in
 * before the call where MPI reads them, back to the device after it where
 * MPI wrote them (adjacent blocks in one copy). Bytes between the blocks are
 * never written on the device: a gap keeps whatever the program or a kernel
 * put there. Arguments the standard ignores on this rank (recvbuf, recvcounts
 * and displs of Gatherv off the root; sendbuf, sendcounts and displs of
 * Scatterv off the root) are not looked at.
 *
 * MPI_IN_PLACE: Gatherv's root and Scatterv's root leave their own block
 * where it is (neither copied in nor back); Allgatherv copies in only this
 * rank's block of recvbuf and copies back all the others; Alltoallv and
 * Alltoallw copy every block of recvbuf in and back.
 *
 * Device memory takes datatypes whose type map is one contiguous block only
 * (as shim_coll.c): any other gets MPI_ERR_TYPE naming the call, on the rank
 * whose device buffer it describes. An intercommunicator passes through when
 * its buffers are host memory; a device buffer on one gets MPI_ERR_COMM.
 */
#include "shim.h"

#include <stdlib.h>

/* ---- one buffer: its blocks and the staged span ------------------------------------ */

struct vblock {
    MPI_Aint lo; /* first byte of the block, from the user's buf */
    size_t len;  /* bytes of the block (0: empty); its span for a non-dense type */
    int dense;   /* the type map of the block is one contiguous run of len bytes */
};

#define VB_STACK 16

struct vbuf {
    struct shim_buf b; /* the span [buf + lo, buf + hi) */
    MPI_Aint lo;
    int n;
    struct vblock *blk;
    struct vblock stack[VB_STACK];
};

/* Which blocks a copy moves: all, none, all but block k, block k only. */
enum { VB_NONE, VB_ALL, VB_EXCEPT, VB_ONLY };

struct vpick {
    int mode, k;
};

static int vb_picked(struct vpick p, int i)
{
    return p.mode == VB_ALL || (p.mode == VB_EXCEPT && i != p.k) || (p.mode == VB_ONLY && i == p.k);
}

/*
 * The shape of one buffer argument: n blocks. counts: int[] or (wide)
 * MPI_Count[]; NULL: one block of one_count elements at displacement 0.
 * displs: int[] or (wide) MPI_Aint[], in extents of type, or in bytes with
 * one datatype per block in types[] (Alltoallw).
 */
struct vspec {
    int n;
    int wide;
    const void *counts;
    MPI_Count one_count;
    const void *displs;
    MPI_Datatype type;
    const MPI_Datatype *types;
};

static MPI_Count vs_count(const struct vspec *s, int i)
{
    if (s->counts == NULL)
        return s->one_count;
    return s->wide ? ((const MPI_Count *)s->counts)[i] : ((const int *)s->counts)[i];
}

static MPI_Aint vs_displ(const struct vspec *s, int i)
{
    if (s->displs == NULL)
        return 0;
    return s->wide ? ((const MPI_Aint *)s->displs)[i] : ((const int *)s->displs)[i];
}

/* The type's size, true lower bound, true extent and extent; 0 when MPI
 * does not know it (a bad type: MPI's to report). */
struct vtype {
    MPI_Count size, tlb, text, ext;
};

static int vtype_get(MPI_Datatype dt, struct vtype *t)
{
    MPI_Count lb = 0;
    return PMPI_Type_size_x(dt, &t->size) == MPI_SUCCESS && t->size != MPI_UNDEFINED &&
           t->size >= 0 && PMPI_Type_get_true_extent_x(dt, &t->tlb, &t->text) == MPI_SUCCESS &&
           PMPI_Type_get_extent_x(dt, &lb, &t->ext) == MPI_SUCCESS;
}

/* Limit of any byte count or offset the shim computes (as shim_coll.c). */
#define VB_LIMIT ((MPI_Count)1 << 62)

/*
 * Block i of @p s into *blk. 1: done; 0: pass the call through (a negative
 * count or a bad type: MPI reports it); -1: out of range.
 */
static int vb_block(const struct vspec *s, int i, struct vtype *one, int *have_one,
                    struct vblock *blk)
{
    MPI_Count count = vs_count(s, i);
    struct vtype t;
    blk->len = 0;
    blk->lo = 0;
    blk->dense = 1;
    if (count < 0)
        return 0;
    if (count == 0)
        return 1;
    /* The one datatype of a v call is looked at only once a block uses it
     * (a zero count's type may be MPI_DATATYPE_NULL). */
    if (s->types != NULL) {
        if (!vtype_get(s->types[i], &t))
            return 0;
    } else {
        if (!*have_one && !(*have_one = vtype_get(s->type, one)))
            return 0;
        t = *one;
    }
    if (t.size == 0)
        return 1;
    MPI_Count d = vs_displ(s, i), unit = s->types != NULL ? 1 : t.ext, at, span;
    /* The bytes touched: (count - 1) extents and one true extent from the
     * true lower bound (a dense type: count x size). */
    if (__builtin_mul_overflow(d, unit, &at) || __builtin_add_overflow(at, t.tlb, &at) ||
        __builtin_mul_overflow(count - 1, t.ext < 0 ? -t.ext : t.ext, &span) ||
        __builtin_add_overflow(span, t.text, &span) || at > VB_LIMIT || at < -VB_LIMIT ||
        span > VB_LIMIT || span < 0)
        return -1;
    blk->dense = t.size == t.text && (count == 1 || t.ext == t.size);
    blk->lo = (MPI_Aint)at;
    blk->len = (size_t)(blk->dense ? count * t.size : span);
    return 1;
}

static void vb_release(struct vbuf *v)
{
    shim_release(&v->b);
    if (v->blk != v->stack)
        free(v->blk);
    v->blk = v->stack;
    v->n = 0;
}

/* Copy the picked blocks between the device and the staging memory
 * (@p to_device: after the call), adjacent blocks in one copy. */
static int vb_copy(struct shim_coll *c, struct vbuf *v, struct vpick p, int to_device)
{
    if (p.mode == VB_NONE || !v->b.staged)
        return MPI_SUCCESS;
    MPI_Aint run_lo = 0;
    size_t run_len = 0;
    for (int i = 0; i <= v->n; i++) {
        int take = i < v->n && vb_picked(p, i) && v->blk[i].len > 0;
        if (take && run_len > 0 && v->blk[i].lo == run_lo + (MPI_Aint)run_len) {
            run_len += v->blk[i].len;
            continue;
        }
        if (run_len > 0) {
            struct shim_buf part = v->b;
            size_t off = (size_t)(run_lo - v->lo);
            part.first += off;
            part.host += off;
            part.bytes = run_len;
            int rc = to_device ? shim_unstage(c->call, &part, run_len, c->comm)
                               : shim_restage(c->call, &part, c->comm);
            if (rc != MPI_SUCCESS)
                return rc;
        }
        run_lo = take ? v->blk[i].lo : 0;
        run_len = take ? v->blk[i].len : 0;
    }
    return MPI_SUCCESS;
}

/*
 * Stage buffer @p buf of shape @p s for call @p c, copying in the blocks
 * @p in picks. MPI_SUCCESS with v->b.staged 0: pass the user's pointer
 * (host memory, nothing significant, or input MPI reports). With
 * v->b.staged 1: shim_vb_arg() is PMPI's pointer. Otherwise an error code,
 * raised on c->comm. @p pass is set to 1 when the whole call must go to
 * PMPI unchanged (input for MPI to report).
 */
static int vb_stage(struct shim_coll *c, struct vbuf *v, const void *buf, const struct vspec *s,
                    struct vpick in, int *pass)
{
    v->b.staged = 0;
    v->blk = v->stack;
    v->n = 0;
    if (buf == MPI_IN_PLACE || s->n <= 0)
        return MPI_SUCCESS;
    struct vtype one = {0};
    int have_one = 0;
    if (s->n > VB_STACK) {
        v->blk = malloc(sizeof *v->blk * (size_t)s->n);
        if (v->blk == NULL) {
            v->blk = v->stack;
            return shim_error(c->comm, MPI_ERR_NO_MEM, c->call, "no memory for the block list");
        }
    }
    v->n = s->n;
    MPI_Aint lo = 0, hi = 0;
    int any = 0, dense = 1;
    for (int i = 0; i < s->n; i++) {
        int r = vb_block(s, i, &one, &have_one, &v->blk[i]);
        if (r == 0) {
            *pass = 1;
            vb_release(v);
            return MPI_SUCCESS;
        }
        if (r < 0) {
            vb_release(v);
            return shim_error(c->comm, MPI_ERR_COUNT, c->call,
                              "counts and displacements out of range");
        }
        if (v->blk[i].len == 0)
            continue;
        MPI_Aint end = v->blk[i].lo + (MPI_Aint)v->blk[i].len;
        lo = any && lo < v->blk[i].lo ? lo : v->blk[i].lo;
        hi = any && hi > end ? hi : end;
        dense &= v->blk[i].dense;
        any = 1;
    }
    if (!any) {
        vb_release(v);
        return MPI_SUCCESS;
    }
    /* Classify the span (no copy yet). */
    int rc = shim_stage(c->call, (const char *)buf + lo, (MPI_Count)(hi - lo), MPI_BYTE, c->comm,
                        0, &v->b);
    if (rc == MPI_SUCCESS && v->b.staged) {
        if (c->inter)
            rc = shim_error(c->comm, MPI_ERR_COMM, c->call,
                            "device buffers on an intercommunicator are not supported (yet)");
        else if (buf == MPI_BOTTOM)
            rc = shim_error(c->comm, MPI_ERR_BUFFER, c->call,
                            "MPI_BOTTOM with a datatype that reaches device memory "
                            "is not supported");
        else if (!dense)
            rc = shim_error(c->comm, MPI_ERR_TYPE, c->call,
                            "a datatype that is not one contiguous block on device memory "
                            "is not supported (yet)");
    }
    v->lo = lo;
    if (rc == MPI_SUCCESS)
        rc = vb_copy(c, v, in, 0);
    if (rc != MPI_SUCCESS || !v->b.staged)
        vb_release(v);
    return rc;
}

/* The pointer PMPI gets for @p buf: the staging memory's counterpart of the
 * user's buf (its displacements still apply), or buf itself. */
static void *vb_arg(const struct vbuf *v, const void *buf)
{
    return v->b.staged ? (void *)(v->b.host - v->lo) : (void *)buf;
}

/* After PMPI returned @p rc: copy back the blocks @p out picks of the
 * receive buffer (when it succeeded), release both buffers. The call's
 * result. */
static int vb_end(struct shim_coll *c, struct vbuf *send, struct vbuf *recv, struct vpick out, int rc)
{
    if (rc == MPI_SUCCESS)
        rc = vb_copy(c, recv, out, 1);
    vb_release(send);
    vb_release(recv);
    return rc;
}

/* The number of blocks of a per-peer array: the remote group's size on an
 * intercommunicator. */
static int vb_peers(const struct shim_coll *c)
{
    int n = c->size;
    if (c->inter && PMPI_Comm_remote_size(c->comm, &n) != MPI_SUCCESS)
        n = 0;
    return n;
}

static const struct vpick vb_all = {VB_ALL, 0}, vb_none = {VB_NONE, 0};

/* ---- the wrappers -------------------------------------------------------------------- */

/*
 * Every wrapper: the cached check, begin, the send buffer's shape (ss) and
 * the receive buffer's (rs) with what is copied in (sin, rin) and back
 * (rout); PMPI with the user's arguments when nothing was staged, else with
 * the staging pointers.
 */
#define VB_RUN(PMPI_CALL_USER, PMPI_CALL_HOST)                                  \
    do {                                                                        \
        struct vbuf sv, rv;                                                     \
        int pass = 0;                                                           \
        int rc = vb_stage(&c, &sv, sendbuf, &ss, sin, &pass);                   \
        if (rc != MPI_SUCCESS)                                                  \
            return rc;                                                          \
        if (!pass) {                                                            \
            rc = vb_stage(&c, &rv, recvbuf, &rs, rin, &pass);                   \
            if (rc != MPI_SUCCESS) {                                            \
                vb_release(&sv);                                                \
                return rc;                                                      \
            }                                                                   \
        } else {                                                                \
            rv.b.staged = 0;                                                    \
            rv.blk = rv.stack;                                                  \
        }                                                                       \
        if (pass || (!sv.b.staged && !rv.b.staged)) {                           \
            vb_release(&sv);                                                    \
            vb_release(&rv);                                                    \
            return PMPI_CALL_USER;                                              \
        }                                                                       \
        void *sarg = vb_arg(&sv, sendbuf), *rarg = vb_arg(&rv, recvbuf);        \
        return vb_end(&c, &sv, &rv, rout, PMPI_CALL_HOST);                      \
    } while (0)

#define COLLV_WRAPPERS(SFX, COUNT_T, DISP_T, WIDE)                                                \
    /* Gatherv: recvbuf at the root only; MPI_IN_PLACE leaves the root's block. */              \
    SHIM_EXPORT int MPI_Gatherv##SFX(const void *sendbuf, COUNT_T scount, MPI_Datatype stype,     \
                                     void *recvbuf, const COUNT_T rcounts[],                      \
                                     const DISP_T displs[], MPI_Datatype rtype, int root,         \
                                     MPI_Comm comm)                                               \
    {                                                                                             \
        struct shim_coll c;                                                                            \
        if (SHIM_LIKELY(!shim_active()) || !coll_begin(&c, "MPI_Gatherv" #SFX, comm, root))       \
            return PMPI_Gatherv##SFX(sendbuf, scount, stype, recvbuf, rcounts, displs, rtype,     \
                                     root, comm);                                                 \
        int in_place = sendbuf == MPI_IN_PLACE;                                                   \
        struct vspec ss = {.n = c.inter && c.root ? 0 : 1, .one_count = scount, .type = stype};   \
        struct vspec rs = {.n = c.root ? vb_peers(&c) : 0, .wide = WIDE, .counts = rcounts,      \
                           .displs = displs, .type = rtype};                                      \
        struct vpick sin = vb_all, rin = vb_none;                                                 \
        struct vpick rout = {in_place ? VB_EXCEPT : VB_ALL, c.rank};                              \
        VB_RUN(PMPI_Gatherv##SFX(sendbuf, scount, stype, recvbuf, rcounts, displs, rtype, root,   \
                                 comm),                                                           \
               PMPI_Gatherv##SFX(sarg, scount, stype, rarg, rcounts, displs, rtype, root, comm)); \
    }                                                                                             \
                                                                                                  \
    /* Scatterv: sendbuf at the root only; MPI_IN_PLACE as the root's recvbuf                     \
     * leaves its block of sendbuf unread. */                                                     \
    SHIM_EXPORT int MPI_Scatterv##SFX(const void *sendbuf, const COUNT_T scounts[],               \
                                      const DISP_T displs[], MPI_Datatype stype, void *recvbuf,   \
                                      COUNT_T rcount, MPI_Datatype rtype, int root,               \
                                      MPI_Comm comm)                                              \
    {                                                                                             \
        struct shim_coll c;                                                                            \
        if (SHIM_LIKELY(!shim_active()) || !coll_begin(&c, "MPI_Scatterv" #SFX, comm, root))      \
            return PMPI_Scatterv##SFX(sendbuf, scounts, displs, stype, recvbuf, rcount, rtype,    \
                                      root, comm);                                                \
        int in_place = recvbuf == MPI_IN_PLACE;                                                   \
        struct vspec ss = {.n = c.root ? vb_peers(&c) : 0, .wide = WIDE, .counts = scounts,      \
                           .displs = displs, .type = stype};                                      \
        struct vspec rs = {.n = c.inter && c.root ? 0 : 1, .one_count = rcount, .type = rtype};   \
        struct vpick sin = {in_place ? VB_EXCEPT : VB_ALL, c.rank}, rin = vb_none;                \
        struct vpick rout = vb_all;                                                               \
        VB_RUN(PMPI_Scatterv##SFX(sendbuf, scounts, displs, stype, recvbuf, rcount, rtype, root,  \
                                  comm),                                                          \
               PMPI_Scatterv##SFX(sarg, scounts, displs, stype, rarg, rcount, rtype, root,        \
                                  comm));                                                         \
    }                                                                                             \
                                                                                                  \
    /* Allgatherv: MPI_IN_PLACE reads this rank's block of recvbuf, writes the others. */         \
    SHIM_EXPORT int MPI_Allgatherv##SFX(const void *sendbuf, COUNT_T scount, MPI_Datatype stype,  \
                                        void *recvbuf, const COUNT_T rcounts[],                   \
                                        const DISP_T displs[], MPI_Datatype rtype,                \
                                        MPI_Comm comm)                                            \
    {                                                                                             \
        struct shim_coll c;                                                                            \
        if (SHIM_LIKELY(!shim_active()) ||                                                        \
            !coll_begin(&c, "MPI_Allgatherv" #SFX, comm, MPI_UNDEFINED))                          \
            return PMPI_Allgatherv##SFX(sendbuf, scount, stype, recvbuf, rcounts, displs, rtype,  \
                                        comm);                                                    \
        int in_place = sendbuf == MPI_IN_PLACE;                                                   \
        struct vspec ss = {.n = 1, .one_count = scount, .type = stype};                           \
        struct vspec rs = {.n = vb_peers(&c), .wide = WIDE, .counts = rcounts, .displs = displs,  \
                           .type = rtype};                                                        \
        struct vpick sin = vb_all, rin = {in_place ? VB_ONLY : VB_NONE, c.rank};                  \
        struct vpick rout = {in_place ? VB_EXCEPT : VB_ALL, c.rank};                              \
        VB_RUN(PMPI_Allgatherv##SFX(sendbuf, scount, stype, recvbuf, rcounts, displs, rtype,      \
                                    comm),                                                        \
               PMPI_Allgatherv##SFX(sarg, scount, stype, rarg, rcounts, displs, rtype, comm));    \
    }                                                                                             \
                                                                                                  \
    /* Alltoallv: MPI_IN_PLACE reads and writes every block of recvbuf. */                        \
    SHIM_EXPORT int MPI_Alltoallv##SFX(const void *sendbuf, const COUNT_T scounts[],              \
                                       const DISP_T sdispls[], MPI_Datatype stype, void *recvbuf, \
                                       const COUNT_T rcounts[], const DISP_T rdispls[],           \
                                       MPI_Datatype rtype, MPI_Comm comm)                         \
    {                                                                                             \
        struct shim_coll c;                                                                            \
        if (SHIM_LIKELY(!shim_active()) ||                                                        \
            !coll_begin(&c, "MPI_Alltoallv" #SFX, comm, MPI_UNDEFINED))                           \
            return PMPI_Alltoallv##SFX(sendbuf, scounts, sdispls, stype, recvbuf, rcounts,        \
                                       rdispls, rtype, comm);                                     \
        int in_place = sendbuf == MPI_IN_PLACE;                                                   \
        int n = vb_peers(&c);                                                                     \
        struct vspec ss = {.n = n, .wide = WIDE, .counts = scounts, .displs = sdispls,            \
                           .type = stype};                                                        \
        struct vspec rs = {.n = n, .wide = WIDE, .counts = rcounts, .displs = rdispls,            \
                           .type = rtype};                                                        \
        struct vpick sin = vb_all, rin = in_place ? vb_all : vb_none, rout = vb_all;              \
        VB_RUN(PMPI_Alltoallv##SFX(sendbuf, scounts, sdispls, stype, recvbuf, rcounts, rdispls,   \
                                   rtype, comm),                                                  \
               PMPI_Alltoallv##SFX(sarg, scounts, sdispls, stype, rarg, rcounts, rdispls, rtype,  \
                                   comm));                                                        \
    }                                                                                             \
                                                                                                  \
    /* Alltoallw: displacements in bytes, a datatype per peer; MPI_IN_PLACE as                    \
     * Alltoallv. */                                                                              \
    SHIM_EXPORT int MPI_Alltoallw##SFX(const void *sendbuf, const COUNT_T scounts[],              \
                                       const DISP_T sdispls[], const MPI_Datatype stypes[],       \
                                       void *recvbuf, const COUNT_T rcounts[],                    \
                                       const DISP_T rdispls[], const MPI_Datatype rtypes[],       \
                                       MPI_Comm comm)                                             \
    {                                                                                             \
        struct shim_coll c;                                                                            \
        if (SHIM_LIKELY(!shim_active()) ||                                                        \
            !coll_begin(&c, "MPI_Alltoallw" #SFX, comm, MPI_UNDEFINED))                           \
            return PMPI_Alltoallw##SFX(sendbuf, scounts, sdispls, stypes, recvbuf, rcounts,       \
                                       rdispls, rtypes, comm);                                    \
        int in_place = sendbuf == MPI_IN_PLACE;                                                   \
        int n = vb_peers(&c);                                                                     \
        struct vspec ss = {.n = n, .wide = WIDE, .counts = scounts, .displs = sdispls,            \
                           .types = stypes};                                                      \
        struct vspec rs = {.n = n, .wide = WIDE, .counts = rcounts, .displs = rdispls,            \
                           .types = rtypes};                                                      \
        struct vpick sin = vb_all, rin = in_place ? vb_all : vb_none, rout = vb_all;              \
        VB_RUN(PMPI_Alltoallw##SFX(sendbuf, scounts, sdispls, stypes, recvbuf, rcounts, rdispls,  \
                                   rtypes, comm),                                                 \
               PMPI_Alltoallw##SFX(sarg, scounts, sdispls, stypes, rarg, rcounts, rdispls,        \
                                   rtypes, comm));                                                \
    }

COLLV_WRAPPERS(, int, int, 0)

#if SHIM_LARGE_COUNT
COLLV_WRAPPERS(_c, MPI_Count, MPI_Aint, 1)
#endif
