/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Blocking collectives (issue 13): MPI_Bcast, Allreduce, Reduce, Reduce_local,
 * Allgather, Gather, Scatter, Alltoall, Scan, Exscan, Reduce_scatter_block,
 * Reduce_scatter, Gatherv, Scatterv, Allgatherv, Alltoallv and Alltoallw, and
 * their large-count MPI_X_c forms on an MPI-4 library. MPI_Barrier has no
 * buffer and is not wrapped.
 *
 * Staged as point-to-point is: each device buffer that the standard makes
 * significant on this rank is copied to pinned host memory before the call
 * when MPI reads it (send buffers, Bcast's buffer at the root, MPI_IN_PLACE
 * buffers), PMPI gets the host pointers, and what MPI wrote is copied back
 * to the device after it returns. Arguments the standard ignores on this
 * rank (Gather's recvbuf off the root, Scatter's sendbuf off the root,
 * Reduce's recvbuf off the root) go to PMPI untouched and unclassified.
 *
 * What each call stages is decided by its shim_coll_X function (shim.h),
 * which the nonblocking wrappers (shim_icoll.c) share; the copy back of a
 * blocking call is shim_coll_end, right after PMPI returns.
 *
 * The v and w forms (MPI_Gatherv, Scatterv, Allgatherv, Alltoallv, Alltoallw
 * and their _c forms; shim_coll_gatherv & co.) stage the span of a buffer's
 * blocks and move only the blocks, in and back (c->pieces): the bytes between
 * blocks are never written on the device.
 *
 * A non-contiguous datatype on device memory is staged packed (shim_types.c),
 * except where PMPI must see the user's own datatype: a reduction packing
 * cannot run (coll_reduction: a user-defined op, host memory in the call,
 * several basic types, per-rank counts) and Alltoallw's per-peer types
 * (v_span) are staged layout-preserving.
 *
 * On an intercommunicator a buffer holds blocks for the remote group's
 * ranks (c->peers), the root side is the MPI_ROOT rank (MPI_PROC_NULL ranks
 * go straight through), and MPI_IN_PLACE is MPI's to refuse. A reduction's
 * send vector is the local group's (Reduce_scatter_block: size x recvcount,
 * Reduce_scatter: the sum of the local recvcounts), as MPICH and Open MPI
 * read the standard.
 */
#include "shim.h"

#include <stdlib.h>
#include <string.h>

/* ---- one collective call: up to two staged buffers --------------------------------- */

/*
 * Start call @p call on @p comm (MPI_COMM_NULL: MPI_Reduce_local). @p root:
 * the root argument of a rooted call, or MPI_UNDEFINED. 0 when the call goes
 * straight to PMPI: an invalid communicator (MPI reports it), or an
 * intercommunicator's MPI_PROC_NULL rank (no buffer is significant).
 */
static int coll_begin(struct shim_coll *c, const char *call, MPI_Comm comm, int root)
{
    c->call = call;
    c->comm = comm;
    c->inter = 0;
    c->rank = 0;
    c->size = 1;
    c->peers = 1;
    c->root = 0;
    c->b[0].staged = c->b[1].staged = 0;
    c->dir[0] = c->dir[1] = 0;
    c->out[0] = c->out[1] = 0;
    c->pieces[0] = c->pieces[1] = NULL;
    c->npieces[0] = c->npieces[1] = 0;
    c->in_pieces[0] = c->in_pieces[1] = NULL;
    c->nin_pieces[0] = c->nin_pieces[1] = -1;
    c->present[0] = c->present[1] = 0;
    c->rtype = MPI_DATATYPE_NULL;
    c->rcount = 0;
    if (comm == MPI_COMM_NULL)
        return 1;
    if (PMPI_Comm_test_inter(comm, &c->inter) != MPI_SUCCESS ||
        PMPI_Comm_rank(comm, &c->rank) != MPI_SUCCESS ||
        PMPI_Comm_size(comm, &c->size) != MPI_SUCCESS)
        return 0;
    c->peers = c->size;
    if (c->inter && PMPI_Comm_remote_size(comm, &c->peers) != MPI_SUCCESS)
        return 0;
    if (c->inter) {
        if (root == MPI_PROC_NULL)
            return 0;
        c->root = root == MPI_ROOT;
    } else {
        c->root = root == c->rank;
    }
    return 1;
}

void shim_coll_release(struct shim_coll *c)
{
    for (int i = 0; i < 2; i++) {
        shim_release(&c->b[i]);
        free(c->pieces[i]);
        c->pieces[i] = NULL;
        free(c->in_pieces[i]);
        c->in_pieces[i] = NULL;
    }
}
/*
 * Stage buffer @p i: @p blocks x @p count elements of @p dt at @p buf,
 * copied in for SHIM_TO_MPI; @p out_elems of them (from the start) copied
 * back after the call for SHIM_FROM_MPI. On an error the buffers staged
 * before are released.
 */
static int coll_stage(struct shim_coll *c, int i, const void *buf, MPI_Count blocks,
                      MPI_Count count, MPI_Datatype dt, int dir, MPI_Count out_elems)
{
    c->b[i].staged = 0;
    c->dir[i] = dir;
    if (buf == MPI_IN_PLACE || blocks <= 0 || count <= 0)
        return MPI_SUCCESS;
    c->present[i] = 1;
    MPI_Count lb = 0, ext = 0;
    if (PMPI_Type_get_extent_x(dt, &lb, &ext) != MPI_SUCCESS)
        return MPI_SUCCESS; /* a bad type is MPI's to report */
    c->ext[i] = ext;
    int rc;
    if (count > ((MPI_Count)1 << 62) / blocks) {
        rc = shim_error(c->comm, MPI_ERR_COUNT, c->call, "count * communicator size overflows");
    } else {
        rc = shim_stage(c->call, buf, blocks * count, dt, c->comm, dir, &c->b[i]);
    }
    if (rc != MPI_SUCCESS) {
        shim_coll_release(c);
        return rc;
    }
    if (c->b[i].staged) {
        size_t per = c->b[i].bytes / (size_t)(blocks * count);
        c->out[i] = (size_t)out_elems * per;
        if (c->b[i].layout != NULL)
            c->ext[i] = (MPI_Count)per; /* packed: elements back to back */
    }
    return MPI_SUCCESS;
}

int shim_coll_staged(const struct shim_coll *c)
{
    return c->b[0].staged || c->b[1].staged;
}

/* The pointer PMPI gets for buffer @p i (the user's when not staged). */
void *shim_coll_arg(const struct shim_coll *c, int i, const void *buf)
{
    return c->b[i].staged ? shim_host_arg(&c->b[i]) : (void *)buf;
}

/* MPI_IN_PLACE of Gather and Allgather: only this rank's block of the
 * receive buffer is MPI's input; copy just it in. */
static int coll_copy_in_block(struct shim_coll *c, int i, MPI_Count block_elems)
{
    struct shim_buf *b = &c->b[i];
    if (!b->staged)
        return MPI_SUCCESS;
    size_t off = (size_t)c->rank * (size_t)block_elems * (size_t)c->ext[i];
    size_t len = (size_t)block_elems * (size_t)c->ext[i];
    if (off >= b->bytes)
        return MPI_SUCCESS;
    struct shim_buf part = shim_buf_part(b, off, len);
    int rc = shim_restage(c->call, &part, c->comm);
    if (rc == MPI_SUCCESS && (c->in_pieces[i] = malloc(sizeof *c->in_pieces[i])) == NULL)
        rc = shim_error(c->comm, MPI_ERR_NO_MEM, c->call, "no memory for the block list");
    if (rc != MPI_SUCCESS) {
        shim_coll_release(c);
        return rc;
    }
    c->in_pieces[i][0] = (struct shim_piece){off, part.bytes};
    c->nin_pieces[i] = 1;
    return MPI_SUCCESS;
}

/* After PMPI returned @p rc: copy back what MPI wrote (when it succeeded),
 * release the staging memory. The call's result. */
int shim_coll_unstage(const char *call, struct shim_buf *b, size_t out,
                      const struct shim_piece *pieces, int npieces, MPI_Comm comm)
{
    if (pieces == NULL)
        return shim_unstage(call, b, out, comm);
    int rc = MPI_SUCCESS;
    for (int k = 0; k < npieces && rc == MPI_SUCCESS; k++) {
        struct shim_buf part = shim_buf_part(b, pieces[k].off, pieces[k].len);
        rc = shim_unstage(call, &part, part.bytes, comm);
    }
    return rc;
}

int shim_coll_end(struct shim_coll *c, int rc)
{
    for (int i = 0; i < 2; i++) {
        if (c->b[i].staged && (c->dir[i] & SHIM_FROM_MPI) && rc == MPI_SUCCESS)
            rc = shim_coll_unstage(c->call, &c->b[i], c->out[i], c->pieces[i], c->npieces[i],
                                   c->comm);
    }
    shim_coll_release(c);
    return rc;
}

/* ---- what each call stages ------------------------------------------------------- */

#define STAGE_OR_RETURN(expr)        \
    do {                             \
        int rc_ = (expr);            \
        if (rc_ != MPI_SUCCESS)      \
            return rc_;              \
    } while (0)

/* The predefined operations of a reduction. */
static int op_predefined(MPI_Op op)
{
    return op == MPI_MAX || op == MPI_MIN || op == MPI_SUM || op == MPI_PROD ||
           op == MPI_LAND || op == MPI_BAND || op == MPI_LOR || op == MPI_BOR ||
           op == MPI_LXOR || op == MPI_BXOR || op == MPI_MINLOC || op == MPI_MAXLOC;
}

/*
 * Stage buffer @p i of a reduction as coll_stage does, but copy nothing in
 * yet (coll_reduction does, once it chose how a non-contiguous one is staged).
 */
static int coll_stage_red(struct shim_coll *c, int i, const void *buf, MPI_Count blocks,
                          MPI_Count count, MPI_Datatype dt, int dir, MPI_Count out_elems)
{
    int rc = coll_stage(c, i, buf, blocks, count, dt, dir & ~SHIM_TO_MPI, out_elems);
    c->dir[i] = dir;
    return rc;
}

/*
 * The end of a reduction's staging (@p rc: its result; @p count: the count
 * argument, -1 for Reduce_scatter's array; @p dt, @p op: the call's). A
 * non-contiguous datatype on device memory is staged packed when a
 * predefined op can run on the packed bytes: PMPI gets count x k elements of
 * its one basic type B (MPICH and Open MPI refuse a predefined op on a
 * derived type, MPI_ERR_OP, measured, even on host memory), which needs
 * the map to be k elements of B, every buffer of the call that MPI touches
 * here to be such a staged one (a host buffer would be read with the user's
 * type, the packed ones with B), one count, and count x k to fit an int.
 * Otherwise (a user-defined op, which must see its own datatype; host memory
 * in the call; several basic types, pair types; per-rank counts; more
 * elements) every such buffer is staged layout-preserving (shim_types_span):
 * PMPI gets the user's count, datatype and op on host memory of the same
 * layout, so MPI does exactly what it does on host buffers. Then what MPI
 * reads is copied in.
 */
static int coll_reduction(struct shim_coll *c, int rc, MPI_Count count, MPI_Datatype dt,
                          MPI_Op op)
{
    if (rc != MPI_SUCCESS)
        return rc;
    int noncontig = 0, packed = op_predefined(op) && count >= 0;
    MPI_Datatype basic = MPI_DATATYPE_NULL;
    MPI_Count k = 0;
    for (int i = 0; i < 2; i++) {
        noncontig |= c->b[i].staged && c->b[i].layout != NULL;
        if (c->present[i] && (!c->b[i].staged || c->b[i].layout == NULL ||
                              !shim_types_basic(c->b[i].layout, &basic, &k)))
            packed = 0;
    }
    if (noncontig && packed && count <= 0x7fffffff / k) {
        c->rtype = basic;
        c->rcount = count * k;
    } else if (noncontig) {
        for (int i = 0; i < 2 && rc == MPI_SUCCESS; i++)
            if (c->b[i].staged && c->b[i].layout != NULL)
                rc = shim_types_span(c->call, &c->b[i], dt, c->comm);
    }
    for (int i = 0; i < 2 && rc == MPI_SUCCESS; i++)
        if (c->b[i].staged && (c->dir[i] & SHIM_TO_MPI))
            rc = shim_restage(c->call, &c->b[i], c->comm);
    if (rc != MPI_SUCCESS)
        shim_coll_release(c);
    return rc;
}

int shim_coll_bcast(struct shim_coll *c, const char *call, void *buf, MPI_Count count,
                    MPI_Datatype dt, int root, MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, root) || count == 0)
        return MPI_SUCCESS;
    return coll_stage(c, 0, buf, 1, count, dt, c->root ? SHIM_TO_MPI : SHIM_FROM_MPI, count);
}

/* Allreduce, Scan: MPI_IN_PLACE makes recvbuf the input too. */
int shim_coll_reduce_all(struct shim_coll *c, const char *call, const void *sendbuf,
                         void *recvbuf, MPI_Count count, MPI_Datatype dt, MPI_Op op,
                         MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, MPI_UNDEFINED) || count == 0)
        return MPI_SUCCESS;
    int in_place = sendbuf == MPI_IN_PLACE;
    STAGE_OR_RETURN(coll_stage_red(c, 0, sendbuf, 1, count, dt, SHIM_TO_MPI, 0));
    return coll_reduction(c,
                          coll_stage_red(c, 1, recvbuf, 1, count, dt,
                                         in_place ? SHIM_BOTH : SHIM_FROM_MPI, count),
                          count, dt, op);
}

/* Exscan: recvbuf of rank 0 is undefined after the call: left as it was (with
 * MPI_IN_PLACE only read, else neither read nor written back). */
int shim_coll_exscan(struct shim_coll *c, const char *call, const void *sendbuf, void *recvbuf,
                     MPI_Count count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, MPI_UNDEFINED) || count == 0)
        return MPI_SUCCESS;
    int in_place = sendbuf == MPI_IN_PLACE;
    int out = c->rank == 0 ? 0 : SHIM_FROM_MPI;
    STAGE_OR_RETURN(coll_stage_red(c, 0, sendbuf, 1, count, dt, SHIM_TO_MPI, 0));
    return coll_reduction(c,
                          coll_stage_red(c, 1, recvbuf, 1, count, dt,
                                         out | (in_place ? SHIM_TO_MPI : 0), count),
                          count, dt, op);
}

/* Reduce: recvbuf is significant at the root only (MPI_IN_PLACE: the root's
 * input too). */
int shim_coll_reduce(struct shim_coll *c, const char *call, const void *sendbuf, void *recvbuf,
                     MPI_Count count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, root) || count == 0)
        return MPI_SUCCESS;
    int in_place = sendbuf == MPI_IN_PLACE;
    if (!(c->inter && c->root))
        STAGE_OR_RETURN(coll_stage_red(c, 0, sendbuf, 1, count, dt, SHIM_TO_MPI, 0));
    if (c->root)
        STAGE_OR_RETURN(coll_stage_red(c, 1, recvbuf, 1, count, dt,
                                       in_place ? SHIM_BOTH : SHIM_FROM_MPI, count));
    return coll_reduction(c, MPI_SUCCESS, count, dt, op);
}

/* Reduce_local: no communicator; errors go to MPI_COMM_WORLD's handler. */
int shim_coll_reduce_local(struct shim_coll *c, const char *call, const void *inbuf,
                           void *inoutbuf, MPI_Count count, MPI_Datatype dt, MPI_Op op)
{
    if (!coll_begin(c, call, MPI_COMM_NULL, MPI_UNDEFINED) || count == 0)
        return MPI_SUCCESS;
    STAGE_OR_RETURN(coll_stage_red(c, 0, inbuf, 1, count, dt, SHIM_TO_MPI, 0));
    return coll_reduction(c, coll_stage_red(c, 1, inoutbuf, 1, count, dt, SHIM_BOTH, count),
                          count, dt, op);
}

/* Reduce_scatter_block: size x recvcount in, recvcount out (MPI_IN_PLACE:
 * both in recvbuf). */
int shim_coll_reduce_scatter_block(struct shim_coll *c, const char *call, const void *sendbuf,
                                   void *recvbuf, MPI_Count count, MPI_Datatype dt, MPI_Op op,
                                   MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, MPI_UNDEFINED) || count == 0)
        return MPI_SUCCESS;
    int in_place = sendbuf == MPI_IN_PLACE;
    /* The local group's size x recvcount, on an intercommunicator too (the
     * reductions between the groups then need equal products: MPICH's and
     * Open MPI's reading of the standard). */
    STAGE_OR_RETURN(coll_stage_red(c, 0, sendbuf, c->size, count, dt, SHIM_TO_MPI, 0));
    return coll_reduction(c,
                          coll_stage_red(c, 1, recvbuf, in_place ? c->size : 1, count, dt,
                                         in_place ? SHIM_BOTH : SHIM_FROM_MPI, count),
                          count, dt, op);
}

/* Reduce_scatter: the sum of recvcounts in, recvcounts[rank] out (MPI_IN_PLACE:
 * both in recvbuf). A negative count, or a sum out of range, is MPI's to
 * report (nothing staged). int and MPI_Count arrays. */
#define COLL_REDUCE_SCATTER(NAME, COUNT_T)                                                   \
    int NAME(struct shim_coll *c, const char *call, const void *sendbuf, void *recvbuf,      \
             const COUNT_T counts[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm)              \
    {                                                                                        \
        if (!coll_begin(c, call, comm, MPI_UNDEFINED))                                       \
            return MPI_SUCCESS;                                                              \
        MPI_Count total = 0;                                                                 \
        for (int i = 0; i < c->size; i++) {                                                  \
            if (counts[i] < 0 || (MPI_Count)counts[i] > ((MPI_Count)1 << 62) - total)        \
                return MPI_SUCCESS;                                                          \
            total += counts[i];                                                              \
        }                                                                                    \
        int in_place = sendbuf == MPI_IN_PLACE;                                              \
        STAGE_OR_RETURN(coll_stage_red(c, 0, sendbuf, 1, total, dt, SHIM_TO_MPI, 0));        \
        return coll_reduction(c, coll_stage_red(c, 1, recvbuf, 1,                            \
                                                in_place ? total : counts[c->rank], dt,      \
                                                in_place ? SHIM_BOTH : SHIM_FROM_MPI,        \
                                                counts[c->rank]),                            \
                              -1, dt, op);                                                   \
    }

COLL_REDUCE_SCATTER(shim_coll_reduce_scatter, int)
#if SHIM_LARGE_COUNT
COLL_REDUCE_SCATTER(shim_coll_reduce_scatter_c, MPI_Count)
#endif

/* Gather and Allgather: sendbuf when @p send, recvbuf (size x recvcount) when
 * @p recv; with MPI_IN_PLACE only this rank's block of recvbuf is MPI's
 * input (copied in so that copying back keeps it). */
static int coll_gather_into(struct shim_coll *c, int send, int recv, const void *sendbuf,
                            MPI_Count scount, MPI_Datatype stype, void *recvbuf,
                            MPI_Count rcount, MPI_Datatype rtype)
{
    if (send)
        STAGE_OR_RETURN(coll_stage(c, 0, sendbuf, 1, scount, stype, SHIM_TO_MPI, 0));
    if (!recv)
        return MPI_SUCCESS;
    STAGE_OR_RETURN(coll_stage(c, 1, recvbuf, c->peers, rcount, rtype, SHIM_FROM_MPI,
                               (MPI_Count)c->peers * rcount));
    if (sendbuf == MPI_IN_PLACE)
        return coll_copy_in_block(c, 1, rcount);
    return MPI_SUCCESS;
}

/* Allgather, Alltoall: recvbuf holds size x recvcount. MPI_IN_PLACE:
 * Allgather reads this rank's block of recvbuf, Alltoall all of it. */
int shim_coll_allgather(struct shim_coll *c, const char *call, const void *sendbuf,
                        MPI_Count scount, MPI_Datatype stype, void *recvbuf, MPI_Count rcount,
                        MPI_Datatype rtype, MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, MPI_UNDEFINED))
        return MPI_SUCCESS;
    return coll_gather_into(c, 1, 1, sendbuf, scount, stype, recvbuf, rcount, rtype);
}

int shim_coll_alltoall(struct shim_coll *c, const char *call, const void *sendbuf,
                       MPI_Count scount, MPI_Datatype stype, void *recvbuf, MPI_Count rcount,
                       MPI_Datatype rtype, MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, MPI_UNDEFINED))
        return MPI_SUCCESS;
    int in_place = sendbuf == MPI_IN_PLACE;
    STAGE_OR_RETURN(coll_stage(c, 0, sendbuf, c->peers, scount, stype, SHIM_TO_MPI, 0));
    return coll_stage(c, 1, recvbuf, c->peers, rcount, rtype, in_place ? SHIM_BOTH : SHIM_FROM_MPI,
                      (MPI_Count)c->peers * rcount);
}

/* Gather: recvbuf at the root only (an intercommunicator's root sends nothing). */
int shim_coll_gather(struct shim_coll *c, const char *call, const void *sendbuf,
                     MPI_Count scount, MPI_Datatype stype, void *recvbuf, MPI_Count rcount,
                     MPI_Datatype rtype, int root, MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, root))
        return MPI_SUCCESS;
    return coll_gather_into(c, !(c->inter && c->root), c->root, sendbuf, scount, stype, recvbuf,
                            rcount, rtype);
}

/* Scatter: sendbuf (size x sendcount) at the root only; MPI_IN_PLACE as the
 * root's recvbuf leaves its block where it is. */
int shim_coll_scatter(struct shim_coll *c, const char *call, const void *sendbuf,
                      MPI_Count scount, MPI_Datatype stype, void *recvbuf, MPI_Count rcount,
                      MPI_Datatype rtype, int root, MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, root))
        return MPI_SUCCESS;
    if (c->root)
        STAGE_OR_RETURN(coll_stage(c, 0, sendbuf, c->peers, scount, stype, SHIM_TO_MPI, 0));
    if (!(c->inter && c->root))
        STAGE_OR_RETURN(coll_stage(c, 1, recvbuf, 1, rcount, rtype, SHIM_FROM_MPI, rcount));
    return MPI_SUCCESS;
}

/* ---- the v and w forms ------------------------------------------------------------- */

/*
 * A buffer of a v or w call is a list of blocks, one per peer: counts[q]
 * elements at displacement displs[q], in extents of its datatype (in bytes,
 * with a datatype per peer, for Alltoallw). The span from the lowest block's
 * first byte to the highest block's last one is classified and staged as one
 * piece of pool memory, and only the blocks move (adjacent blocks in one
 * copy): in at the call where MPI reads them, back after it where MPI wrote
 * them (c->pieces). Bytes between the blocks are never written on the device.
 */
struct coll_vspec {
    int n; /* blocks */
    struct shim_array counts, displs;
    MPI_Datatype type;         /* the datatype of every block */
    const MPI_Datatype *types; /* or (Alltoallw) one per block, displs in bytes */
};

/* Which blocks a copy moves: none, all, all but block k, block k only. */
enum { V_NONE, V_ALL, V_EXCEPT, V_ONLY };

struct coll_vpick {
    int mode, k;
};

static const struct coll_vpick v_none = {V_NONE, 0}, v_all = {V_ALL, 0};

static int v_picked(struct coll_vpick p, int q)
{
    return p.mode == V_ALL || (p.mode == V_EXCEPT && q != p.k) || (p.mode == V_ONLY && q == p.k);
}

/* One block: bytes [lo, lo + len) from the user's buf (len 0: empty). */
struct coll_vblock {
    MPI_Count lo, len;
    int dense; /* its type map is one contiguous run of len bytes */
};

/* A datatype's size, true lower bound, true extent and extent; 0 when MPI
 * does not know it (a bad type: MPI's to report). */
struct coll_vtype {
    MPI_Count size, tlb, text, ext;
};

static int v_type(MPI_Datatype dt, struct coll_vtype *t)
{
    MPI_Count lb = 0;
    return PMPI_Type_size_x(dt, &t->size) == MPI_SUCCESS && t->size != MPI_UNDEFINED &&
           t->size >= 0 && PMPI_Type_get_true_extent_x(dt, &t->tlb, &t->text) == MPI_SUCCESS &&
           PMPI_Type_get_extent_x(dt, &lb, &t->ext) == MPI_SUCCESS;
}

#define COLL_LIMIT ((MPI_Count)1 << 62)

/* Block q of @p s into *b. 1: done; 0: MPI's to report (a negative count or a
 * bad type: nothing is staged); -1: out of range. A datatype is looked at only
 * once a block uses it (a zero count's may be MPI_DATATYPE_NULL). */
static int v_block(const struct coll_vspec *s, int q, struct coll_vtype *one, int *have_one,
                   struct coll_vblock *b)
{
    MPI_Count count = shim_array_at(s->counts, q);
    struct coll_vtype t;
    b->lo = b->len = 0;
    b->dense = 1;
    if (count < 0)
        return 0;
    if (count == 0)
        return 1;
    if (s->types != NULL) {
        if (!v_type(s->types[q], &t))
            return 0;
    } else {
        if (!*have_one && !(*have_one = v_type(s->type, one)))
            return 0;
        t = *one;
    }
    if (t.size == 0)
        return 1;
    /* Element j starts (true lower bound) at at + j x extent, j < count
     * (downwards for a negative extent), and is text bytes long. */
    MPI_Count d = shim_array_at(s->displs, q), unit = s->types != NULL ? 1 : t.ext, at, step;
    if (__builtin_mul_overflow(d, unit, &at) || __builtin_add_overflow(at, t.tlb, &at) ||
        __builtin_mul_overflow(count - 1, t.ext, &step) || at > COLL_LIMIT ||
        at < -COLL_LIMIT || step > COLL_LIMIT || step < -COLL_LIMIT || t.text > COLL_LIMIT)
        return -1;
    b->dense = t.size == t.text && (count == 1 || t.ext == t.size);
    b->lo = step < 0 ? at + step : at;
    b->len = b->dense ? count * t.size : (step < 0 ? -step : step) + t.text;
    return 1;
}

/* The blocks @p p picks as runs (adjacent blocks merged), offsets from the
 * span's first byte @p lo, into runs[]: their number. */
static int v_runs(const struct coll_vblock *blk, int n, struct coll_vpick p, MPI_Count lo,
                  struct shim_piece *runs)
{
    int nr = 0;
    for (int q = 0; q < n; q++) {
        if (!v_picked(p, q) || blk[q].len == 0)
            continue;
        size_t off = (size_t)(blk[q].lo - lo), len = (size_t)blk[q].len;
        if (nr > 0 && runs[nr - 1].off + runs[nr - 1].len == off)
            runs[nr - 1].len += len;
        else
            runs[nr++] = (struct shim_piece){off, len};
    }
    return nr;
}

#define COLL_VSTACK 16

/*
 * Buffer @p i of a v form whose datatype is not one contiguous block, its
 * span on device memory (b staged as bytes, released here): staged packed
 * instead (shim_types.c), elements emin .. emax of the type from the lowest
 * block's first element to the highest's last one, and the blocks become
 * byte ranges of the packed staging, block q at (displs[q] - emin) x size
 * (PMPI gets the signature type, of extent == size, at host - emin x size:
 * its displacements in elements land there). *lo: emin x size. (Alltoallw's
 * per-peer types are staged layout-preserving instead: coll_stage_v.)
 */
static int v_packed(struct shim_coll *c, int i, const void *buf, const struct coll_vspec *s,
                    struct coll_vblock *blk, MPI_Count *lo)
{
    struct shim_buf *b = &c->b[i];
    shim_release(b);
    struct coll_vtype t;
    if (!v_type(s->type, &t) || t.size <= 0 || t.ext < t.size)
        return shim_error(c->comm, MPI_ERR_TYPE, c->call,
                          "a non-contiguous datatype on device memory whose extent is below "
                          "its size in a v collective is not supported");
    MPI_Count emin = 0, emax = 0;
    int any = 0;
    for (int q = 0; q < s->n; q++) {
        MPI_Count n = shim_array_at(s->counts, q), d = shim_array_at(s->displs, q);
        blk[q].len = 0;
        if (n <= 0)
            continue;
        blk[q].lo = d * t.size; /* in range: d x ext is (v_block) */
        blk[q].len = n * t.size;
        emin = any && emin < d ? emin : d;
        emax = any && emax > d + n ? emax : d + n;
        any = 1;
    }
    int rc = shim_stage(c->call, (const char *)buf + (intptr_t)(emin * t.ext), emax - emin,
                        s->type, c->comm, 0, b);
    *lo = emin * t.size;
    return rc;
}

/*
 * Buffer @p i of Alltoallw whose blocks are not all one contiguous run, its
 * span [lo, ...) on device memory staged as bytes: made layout-preserving
 * (shim_types_span_blocks), the span mirrored on host memory and only the
 * blocks' type maps copied, in now when @p in picks the blocks and back
 * after the call (c->out: all of them) when @p out does (Alltoallw's picks
 * are all or none). PMPI gets the user's types and displacements at
 * host - lo.
 */
static int v_span(struct shim_coll *c, int i, const struct coll_vspec *s, struct coll_vpick in,
                  struct coll_vpick out, MPI_Count lo)
{
    struct shim_buf *b = &c->b[i];
    b->tlb = (MPI_Aint)lo;
    int rc = shim_types_span_blocks(c->call, b, s->n, s->counts, s->displs, s->types, c->comm);
    if (rc == MPI_SUCCESS && in.mode != V_NONE)
        rc = shim_restage(c->call, b, c->comm);
    c->out[i] = out.mode != V_NONE ? b->bytes : 0;
    return rc;
}

/*
 * Stage buffer @p i of a v or w form: the blocks of @p s at @p buf, those
 * @p in picks copied in now, those @p out picks copied back after the call.
 * Device memory reached through MPI_BOTTOM (absolute displacements)
 * is refused. Blocks whose type map is not one contiguous run are staged
 * packed (v_packed: one datatype) or layout-preserving (v_span: Alltoallw).
 * On an error the buffers staged before are released.
 */
static int coll_stage_v(struct shim_coll *c, int i, const void *buf, const struct coll_vspec *s,
                        struct coll_vpick in, struct coll_vpick out)
{
    struct shim_buf *b = &c->b[i];
    b->staged = 0;
    c->dir[i] = (in.mode != V_NONE ? SHIM_TO_MPI : 0) | (out.mode != V_NONE ? SHIM_FROM_MPI : 0);
    if (buf == MPI_IN_PLACE || s->n <= 0)
        return MPI_SUCCESS;
    struct coll_vblock stack[COLL_VSTACK], *blk = stack;
    struct shim_piece *runs = NULL;
    int rc = MPI_SUCCESS;
    if (s->n > COLL_VSTACK && (blk = malloc(sizeof *blk * (size_t)s->n)) == NULL) {
        blk = stack;
        rc = shim_error(c->comm, MPI_ERR_NO_MEM, c->call, "no memory for the block list");
    }
    struct coll_vtype one = {0};
    int have_one = 0, any = 0, dense = 1, span = 0;
    MPI_Count lo = 0, hi = 0;
    for (int q = 0; q < s->n && rc == MPI_SUCCESS; q++) {
        int r = v_block(s, q, &one, &have_one, &blk[q]);
        if (r == 0)
            goto done; /* MPI's to report: not staged */
        if (r < 0) {
            rc = shim_error(c->comm, MPI_ERR_COUNT, c->call,
                            "counts and displacements out of range");
        } else if (blk[q].len > 0) {
            MPI_Count end = blk[q].lo + blk[q].len;
            lo = any && lo < blk[q].lo ? lo : blk[q].lo;
            hi = any && hi > end ? hi : end;
            dense &= blk[q].dense;
            any = 1;
        }
    }
    /* Classify the span (no copy yet); with MPI_BOTTOM the addresses are
     * absolute. Blocks that are not all one contiguous run are staged even
     * where CUCOPY_MPI_STAGE=types leaves the call's contiguous buffers to the
     * MPI (shim_types_only: the span of bytes would pass through). */
    if (rc == MPI_SUCCESS && any) {
        int types_only = shim_types_only;
        shim_types_only = types_only && dense;
        rc = shim_stage(c->call, (const void *)((uintptr_t)buf + (uintptr_t)(intptr_t)lo),
                        hi - lo, MPI_BYTE, c->comm, 0, b);
        shim_types_only = types_only;
    }
    if (rc == MPI_SUCCESS && b->staged) {
        if (buf == MPI_BOTTOM)
            rc = shim_error(c->comm, MPI_ERR_BUFFER, c->call,
                            "MPI_BOTTOM with a datatype that reaches device memory "
                            "is not supported");
        else if (!dense && s->types != NULL)
            span = 1;
        else if (!dense)
            rc = v_packed(c, i, buf, s, blk, &lo);
        if (rc == MPI_SUCCESS && !span && (runs = malloc(sizeof *runs * (size_t)s->n)) == NULL)
            rc = shim_error(c->comm, MPI_ERR_NO_MEM, c->call, "no memory for the block list");
    }
    if (rc == MPI_SUCCESS && span) {
        rc = v_span(c, i, s, in, out, lo);
    } else if (rc == MPI_SUCCESS && b->staged) {
        b->tlb = (MPI_Aint)lo; /* PMPI gets host - lo: the staging of displacement 0 */
        int nr = v_runs(blk, s->n, in, lo, runs);
        for (int k = 0; k < nr && rc == MPI_SUCCESS; k++) {
            struct shim_buf part = shim_buf_part(b, runs[k].off, runs[k].len);
            rc = shim_restage(c->call, &part, c->comm);
        }
        if (rc == MPI_SUCCESS && in.mode != V_NONE && nr > 0 &&
            (c->in_pieces[i] = malloc(sizeof *runs * (size_t)nr)) == NULL)
            rc = shim_error(c->comm, MPI_ERR_NO_MEM, c->call, "no memory for the block list");
        if (rc == MPI_SUCCESS && in.mode != V_NONE) {
            if (nr > 0)
                memcpy(c->in_pieces[i], runs, sizeof *runs * (size_t)nr);
            c->nin_pieces[i] = nr; /* what MPI_Start copies in again (persistent) */
        }
        if (rc == MPI_SUCCESS && out.mode != V_NONE) {
            c->npieces[i] = v_runs(blk, s->n, out, lo, runs);
            c->pieces[i] = runs; /* freed by shim_coll_release or the request record */
            runs = NULL;
        }
    }
done:
    free(runs);
    if (blk != stack)
        free(blk);
    if (rc != MPI_SUCCESS)
        shim_coll_release(c);
    return rc;
}


/* Gatherv: recvbuf's blocks at the root only (recvcounts and displs are not
 * read elsewhere); with MPI_IN_PLACE the root's own block is neither read nor
 * written. */
int shim_coll_gatherv(struct shim_coll *c, const char *call, const void *sendbuf,
                      MPI_Count scount, MPI_Datatype stype, void *recvbuf,
                      struct shim_array rcounts, struct shim_array displs, MPI_Datatype rtype,
                      int root, MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, root))
        return MPI_SUCCESS;
    if (!(c->inter && c->root))
        STAGE_OR_RETURN(coll_stage(c, 0, sendbuf, 1, scount, stype, SHIM_TO_MPI, 0));
    if (!c->root)
        return MPI_SUCCESS;
    struct coll_vspec rs = {c->peers, rcounts, displs, rtype, NULL};
    struct coll_vpick out = {sendbuf == MPI_IN_PLACE ? V_EXCEPT : V_ALL, c->rank};
    return coll_stage_v(c, 1, recvbuf, &rs, v_none, out);
}

/* Scatterv: sendbuf's blocks at the root only (sendcounts and displs are not
 * read elsewhere); MPI_IN_PLACE as the root's recvbuf leaves its own block
 * unread. */
int shim_coll_scatterv(struct shim_coll *c, const char *call, const void *sendbuf,
                       struct shim_array scounts, struct shim_array displs, MPI_Datatype stype,
                       void *recvbuf, MPI_Count rcount, MPI_Datatype rtype, int root,
                       MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, root))
        return MPI_SUCCESS;
    if (c->root) {
        struct coll_vspec ss = {c->peers, scounts, displs, stype, NULL};
        struct coll_vpick in = {recvbuf == MPI_IN_PLACE ? V_EXCEPT : V_ALL, c->rank};
        STAGE_OR_RETURN(coll_stage_v(c, 0, sendbuf, &ss, in, v_none));
    }
    if (!(c->inter && c->root))
        STAGE_OR_RETURN(coll_stage(c, 1, recvbuf, 1, rcount, rtype, SHIM_FROM_MPI, rcount));
    return MPI_SUCCESS;
}

/* Allgatherv: MPI_IN_PLACE reads this rank's block of recvbuf and writes the
 * others. */
int shim_coll_allgatherv(struct shim_coll *c, const char *call, const void *sendbuf,
                         MPI_Count scount, MPI_Datatype stype, void *recvbuf,
                         struct shim_array rcounts, struct shim_array displs,
                         MPI_Datatype rtype, MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, MPI_UNDEFINED))
        return MPI_SUCCESS;
    int in_place = sendbuf == MPI_IN_PLACE;
    STAGE_OR_RETURN(coll_stage(c, 0, sendbuf, 1, scount, stype, SHIM_TO_MPI, 0));
    struct coll_vspec rs = {c->peers, rcounts, displs, rtype, NULL};
    struct coll_vpick in = {in_place ? V_ONLY : V_NONE, c->rank};
    struct coll_vpick out = {in_place ? V_EXCEPT : V_ALL, c->rank};
    return coll_stage_v(c, 1, recvbuf, &rs, in, out);
}

/* Alltoallv and Alltoallw: MPI_IN_PLACE reads and writes every block of
 * recvbuf (the send arrays are not read). */
static int coll_alltoall_vw(struct shim_coll *c, const void *sendbuf, const struct coll_vspec *ss,
                            void *recvbuf, const struct coll_vspec *rs)
{
    STAGE_OR_RETURN(coll_stage_v(c, 0, sendbuf, ss, v_all, v_none));
    return coll_stage_v(c, 1, recvbuf, rs, sendbuf == MPI_IN_PLACE ? v_all : v_none, v_all);
}

int shim_coll_alltoallv(struct shim_coll *c, const char *call, const void *sendbuf,
                        struct shim_array scounts, struct shim_array sdispls,
                        MPI_Datatype stype, void *recvbuf, struct shim_array rcounts,
                        struct shim_array rdispls, MPI_Datatype rtype, MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, MPI_UNDEFINED))
        return MPI_SUCCESS;
    struct coll_vspec ss = {c->peers, scounts, sdispls, stype, NULL};
    struct coll_vspec rs = {ss.n, rcounts, rdispls, rtype, NULL};
    return coll_alltoall_vw(c, sendbuf, &ss, recvbuf, &rs);
}

int shim_coll_alltoallw(struct shim_coll *c, const char *call, const void *sendbuf,
                        struct shim_array scounts, struct shim_array sdispls,
                        const MPI_Datatype stypes[], void *recvbuf, struct shim_array rcounts,
                        struct shim_array rdispls, const MPI_Datatype rtypes[], MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, MPI_UNDEFINED))
        return MPI_SUCCESS;
    struct coll_vspec ss = {c->peers, scounts, sdispls, MPI_DATATYPE_NULL, stypes};
    struct coll_vspec rs = {ss.n, rcounts, rdispls, MPI_DATATYPE_NULL, rtypes};
    return coll_alltoall_vw(c, sendbuf, &ss, recvbuf, &rs);
}

int shim_coll_start(struct shim_coll *c, const char *call, MPI_Comm comm)
{
    return coll_begin(c, call, comm, MPI_UNDEFINED);
}

int shim_coll_stage_blocks(struct shim_coll *c, int i, const void *buf, int n,
                           struct shim_array counts, struct shim_array displs, MPI_Datatype type,
                           const MPI_Datatype types[], int dir)
{
    struct coll_vspec s = {
        .n = n, .counts = counts, .displs = displs, .type = type, .types = types};
    return coll_stage_v(c, i, buf, &s, dir & SHIM_TO_MPI ? v_all : v_none,
                        dir & SHIM_FROM_MPI ? v_all : v_none);
}

/* ---- the wrappers -------------------------------------------------------------------- */

/* A blocking wrapper: the staging, PMPI with host pointers, the copy back.
 * Its class: coll, or reduce for a reduction. */
#define COLL_CLASS_MOVE SHIM_CLASS_COLL
#define COLL_CLASS_REDUCTION SHIM_CLASS_REDUCE
#define COLL_RUN(KIND, PREP, PMPI_CALL_USER, PMPI_CALL_HOST)  \
    SHIM_COLL_BEGIN(COLL_CLASS_##KIND, PREP, PMPI_CALL_USER); \
    return shim_coll_end(&c, PMPI_CALL_HOST)

/* Reduce_local has no nonblocking or persistent form. */
#define REDUCE_LOCAL_WRAPPER(SFX, COUNT_T)                                                        \
    SHIM_EXPORT int MPI_Reduce_local##SFX(const void *inbuf, void *inoutbuf, COUNT_T count,       \
                                          MPI_Datatype dt, MPI_Op op)                             \
    {                                                                                             \
        COLL_RUN(REDUCTION,                                                                       \
                 shim_coll_reduce_local(&c, "MPI_Reduce_local" #SFX, inbuf, inoutbuf, count, dt,  \
                                        op),                                                      \
                 PMPI_Reduce_local##SFX(inbuf, inoutbuf, count, dt, op),                          \
                 PMPI_Reduce_local##SFX(SHIM_COLL_ARG(0, inbuf), SHIM_COLL_ARG(1, inoutbuf),      \
                                        SHIM_COLL_RCOUNT(count), SHIM_COLL_RTYPE(dt), op));       \
    }

#define COLL_NM(UPPER, LOWER) UPPER

SHIM_COLL_FAMILY(COLL_NM, , , int, COLL_RUN, SHIM_NONE, SHIM_NONE)
SHIM_COLL_V_FAMILY(COLL_NM, , , int, int, COLL_RUN, SHIM_NONE, SHIM_NONE)
REDUCE_LOCAL_WRAPPER(, int)
SHIM_COLL_ALLTOALLW(COLL_NM, , , int, int, COLL_RUN, SHIM_NONE, SHIM_NONE)

#if SHIM_LARGE_COUNT
SHIM_COLL_FAMILY(COLL_NM, , _c, MPI_Count, COLL_RUN, SHIM_NONE, SHIM_NONE)
SHIM_COLL_V_FAMILY(COLL_NM, , _c, MPI_Count, MPI_Aint, COLL_RUN, SHIM_NONE, SHIM_NONE)
REDUCE_LOCAL_WRAPPER(_c, MPI_Count)
SHIM_COLL_ALLTOALLW(COLL_NM, , _c, MPI_Count, MPI_Aint, COLL_RUN, SHIM_NONE, SHIM_NONE)
#endif
