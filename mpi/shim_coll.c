/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Blocking collectives (issue 13, first piece): MPI_Bcast, Allreduce, Reduce,
 * Reduce_local, Allgather, Gather, Scatter, Alltoall, Scan, Exscan,
 * Reduce_scatter_block and Reduce_scatter, and their large-count MPI_X_c forms on an MPI-4
 * library. MPI_Barrier has no buffer and is not wrapped.
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
 * blocking call is shim_coll_end, right after PMPI returns. The v forms
 * (shim_coll_gatherv & co., used by the nonblocking wrappers so far) stage the
 * span of their blocks and copy back only the blocks (c->pieces).
 *
 * An intercommunicator is passed through when its buffers are host memory;
 * a device buffer on one is refused with MPI_ERR_COMM.
 */
#include "shim.h"

#include <stdlib.h>

/* ---- one collective call: up to two staged buffers --------------------------------- */

int coll_begin(struct shim_coll *c, const char *call, MPI_Comm comm, int root)
{
    c->call = call;
    c->comm = comm;
    c->inter = 0;
    c->rank = 0;
    c->size = 1;
    c->root = 0;
    c->b[0].staged = c->b[1].staged = 0;
    c->dir[0] = c->dir[1] = 0;
    c->out[0] = c->out[1] = 0;
    c->pieces[0] = c->pieces[1] = NULL;
    c->npieces[0] = c->npieces[1] = 0;
    if (comm == MPI_COMM_NULL)
        return 1;
    if (PMPI_Comm_test_inter(comm, &c->inter) != MPI_SUCCESS ||
        PMPI_Comm_rank(comm, &c->rank) != MPI_SUCCESS ||
        PMPI_Comm_size(comm, &c->size) != MPI_SUCCESS)
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
    }
}
/*
 * Stage buffer @p i: @p blocks x @p count elements of @p dt at @p buf,
 * copied in for SHIM_TO_MPI; @p out_elems of them (from the start) copied
 * back after the call for SHIM_FROM_MPI. On an intercommunicator the buffer
 * is only classified, and refused when it is device memory. On an error the
 * buffers staged before are released.
 */
static int coll_stage(struct shim_coll *c, int i, const void *buf, MPI_Count blocks, MPI_Count count,
                      MPI_Datatype dt, int dir, MPI_Count out_elems)
{
    c->b[i].staged = 0;
    c->dir[i] = dir;
    if (buf == MPI_IN_PLACE || blocks <= 0 || count <= 0)
        return MPI_SUCCESS;
    MPI_Count lb = 0, ext = 0;
    if (PMPI_Type_get_extent_x(dt, &lb, &ext) != MPI_SUCCESS)
        return MPI_SUCCESS; /* a bad type is MPI's to report */
    c->ext[i] = ext;
    int rc;
    if (c->inter) {
        rc = shim_stage(c->call, buf, 1, dt, c->comm, 0, &c->b[i]);
        if (rc == MPI_SUCCESS && c->b[i].staged) {
            shim_release(&c->b[i]);
            rc = shim_error(c->comm, MPI_ERR_COMM, c->call,
                            "device buffers on an intercommunicator are not supported (yet)");
        }
    } else if (count > ((MPI_Count)1 << 62) / blocks) {
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
    if (rc != MPI_SUCCESS)
        shim_coll_release(c);
    return rc;
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

int shim_coll_bcast(struct shim_coll *c, const char *call, void *buf, MPI_Count count,
                    MPI_Datatype dt, int root, MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, root) || count == 0)
        return MPI_SUCCESS;
    return coll_stage(c, 0, buf, 1, count, dt, c->root ? SHIM_TO_MPI : SHIM_FROM_MPI, count);
}

/* Allreduce, Scan: MPI_IN_PLACE makes recvbuf the input too. */
int shim_coll_reduce_all(struct shim_coll *c, const char *call, const void *sendbuf,
                         void *recvbuf, MPI_Count count, MPI_Datatype dt, MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, MPI_UNDEFINED) || count == 0)
        return MPI_SUCCESS;
    int in_place = sendbuf == MPI_IN_PLACE;
    STAGE_OR_RETURN(coll_stage(c, 0, sendbuf, 1, count, dt, SHIM_TO_MPI, 0));
    return coll_stage(c, 1, recvbuf, 1, count, dt, in_place ? SHIM_BOTH : SHIM_FROM_MPI, count);
}

/* Exscan: recvbuf of rank 0 is undefined after the call: left as it was (with
 * MPI_IN_PLACE only read, else neither read nor written back). */
int shim_coll_exscan(struct shim_coll *c, const char *call, const void *sendbuf, void *recvbuf,
                     MPI_Count count, MPI_Datatype dt, MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, MPI_UNDEFINED) || count == 0)
        return MPI_SUCCESS;
    int in_place = sendbuf == MPI_IN_PLACE;
    int out = c->rank == 0 ? 0 : SHIM_FROM_MPI;
    STAGE_OR_RETURN(coll_stage(c, 0, sendbuf, 1, count, dt, SHIM_TO_MPI, 0));
    return coll_stage(c, 1, recvbuf, 1, count, dt, out | (in_place ? SHIM_TO_MPI : 0), count);
}

/* Reduce: recvbuf is significant at the root only (MPI_IN_PLACE: the root's
 * input too). */
int shim_coll_reduce(struct shim_coll *c, const char *call, const void *sendbuf, void *recvbuf,
                     MPI_Count count, MPI_Datatype dt, int root, MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, root) || count == 0)
        return MPI_SUCCESS;
    int in_place = sendbuf == MPI_IN_PLACE;
    if (!(c->inter && c->root))
        STAGE_OR_RETURN(coll_stage(c, 0, sendbuf, 1, count, dt, SHIM_TO_MPI, 0));
    if (c->root)
        STAGE_OR_RETURN(
            coll_stage(c, 1, recvbuf, 1, count, dt, in_place ? SHIM_BOTH : SHIM_FROM_MPI, count));
    return MPI_SUCCESS;
}

/* Reduce_local: no communicator; errors go to MPI_COMM_WORLD's handler. */
int shim_coll_reduce_local(struct shim_coll *c, const char *call, const void *inbuf,
                           void *inoutbuf, MPI_Count count, MPI_Datatype dt)
{
    if (!coll_begin(c, call, MPI_COMM_NULL, MPI_UNDEFINED) || count == 0)
        return MPI_SUCCESS;
    STAGE_OR_RETURN(coll_stage(c, 0, inbuf, 1, count, dt, SHIM_TO_MPI, 0));
    return coll_stage(c, 1, inoutbuf, 1, count, dt, SHIM_BOTH, count);
}

/* Reduce_scatter_block: size x recvcount in, recvcount out (MPI_IN_PLACE:
 * both in recvbuf). */
int shim_coll_reduce_scatter_block(struct shim_coll *c, const char *call, const void *sendbuf,
                                   void *recvbuf, MPI_Count count, MPI_Datatype dt,
                                   MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, MPI_UNDEFINED) || count == 0)
        return MPI_SUCCESS;
    int in_place = sendbuf == MPI_IN_PLACE;
    STAGE_OR_RETURN(coll_stage(c, 0, sendbuf, c->size, count, dt, SHIM_TO_MPI, 0));
    return coll_stage(c, 1, recvbuf, in_place ? c->size : 1, count, dt,
                      in_place ? SHIM_BOTH : SHIM_FROM_MPI, count);
}

/* Reduce_scatter: the sum of recvcounts in, recvcounts[rank] out (MPI_IN_PLACE:
 * both in recvbuf). A negative count, or a sum out of range, is MPI's to
 * report (nothing staged). int and MPI_Count arrays. */
#define COLL_REDUCE_SCATTER(NAME, COUNT_T)                                                   \
    int NAME(struct shim_coll *c, const char *call, const void *sendbuf, void *recvbuf,      \
             const COUNT_T counts[], MPI_Datatype dt, MPI_Comm comm)                         \
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
        STAGE_OR_RETURN(coll_stage(c, 0, sendbuf, 1, total, dt, SHIM_TO_MPI, 0));            \
        return coll_stage(c, 1, recvbuf, 1, in_place ? total : counts[c->rank], dt,          \
                          in_place ? SHIM_BOTH : SHIM_FROM_MPI, counts[c->rank]);            \
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
    STAGE_OR_RETURN(coll_stage(c, 1, recvbuf, c->size, rcount, rtype, SHIM_FROM_MPI,
                               (MPI_Count)c->size * rcount));
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
    STAGE_OR_RETURN(coll_stage(c, 0, sendbuf, c->size, scount, stype, SHIM_TO_MPI, 0));
    return coll_stage(c, 1, recvbuf, c->size, rcount, rtype, in_place ? SHIM_BOTH : SHIM_FROM_MPI,
                      (MPI_Count)c->size * rcount);
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
        STAGE_OR_RETURN(coll_stage(c, 0, sendbuf, c->size, scount, stype, SHIM_TO_MPI, 0));
    if (!(c->inter && c->root))
        STAGE_OR_RETURN(coll_stage(c, 1, recvbuf, 1, rcount, rtype, SHIM_FROM_MPI, rcount));
    return MPI_SUCCESS;
}

/* ---- the v forms ------------------------------------------------------------------ */

/*
 * Stage buffer @p i of a v form: the span of the blocks (counts[q], displs[q])
 * of @p dt, q < the group's size, copied in whole for SHIM_TO_MPI (with
 * @p in_block >= 0: only that block, the MPI_IN_PLACE input of Allgatherv);
 * for SHIM_FROM_MPI the blocks but @p skip are what MPI writes (c->pieces).
 * On an intercommunicator only the first element is classified.
 */
static int coll_stage_v(struct shim_coll *c, int i, const void *buf, struct shim_array counts,
                        struct shim_array displs, MPI_Datatype dt, int dir, int in_block,
                        int skip)
{
    c->b[i].staged = 0;
    c->dir[i] = dir;
    if (buf == MPI_IN_PLACE)
        return MPI_SUCCESS;
    if (c->inter)
        return coll_stage(c, i, buf, 1, 1, dt, 0, 0);
    const MPI_Count limit = (MPI_Count)1 << 62;
    MPI_Count lo = limit, hi = -limit;
    for (int q = 0; q < c->size; q++) {
        MPI_Count n = shim_array_at(counts, q), d = shim_array_at(displs, q);
        if (n < 0 || n > limit || d > limit || d < -limit)
            return MPI_SUCCESS; /* MPI's to report */
        if (n > 0) {
            lo = d < lo ? d : lo;
            hi = d + n > hi ? d + n : hi;
        }
    }
    MPI_Count tlb = 0, ext = 0;
    if (hi <= lo || PMPI_Type_get_extent_x(dt, &tlb, &ext) != MPI_SUCCESS || ext <= 0)
        return MPI_SUCCESS;
    int copy_all = (dir & SHIM_TO_MPI) && in_block < 0;
    int rc = coll_stage(c, i, (const char *)buf + lo * ext, 1, hi - lo, dt,
                        copy_all ? dir : dir & ~SHIM_TO_MPI, 0);
    if (rc != MPI_SUCCESS || !c->b[i].staged)
        return rc;
    struct shim_buf *b = &c->b[i];
    b->tlb += (MPI_Aint)(lo * ext); /* PMPI gets the address of displacement 0 */
    size_t per = b->bytes / (size_t)(hi - lo);
    if (in_block >= 0 && shim_array_at(counts, in_block) > 0) {
        struct shim_buf part =
            shim_buf_part(b, (size_t)(shim_array_at(displs, in_block) - lo) * per,
                          (size_t)shim_array_at(counts, in_block) * per);
        rc = shim_restage(c->call, &part, c->comm);
    }
    if (rc == MPI_SUCCESS && (dir & SHIM_FROM_MPI)) {
        c->pieces[i] = malloc((size_t)c->size * sizeof *c->pieces[i]);
        if (c->pieces[i] == NULL)
            rc = shim_error(c->comm, MPI_ERR_NO_MEM, c->call, "no memory for the block list");
        for (int q = 0; rc == MPI_SUCCESS && q < c->size; q++) {
            MPI_Count n = shim_array_at(counts, q);
            if (n > 0 && q != skip)
                c->pieces[i][c->npieces[i]++] = (struct shim_piece){
                    (size_t)(shim_array_at(displs, q) - lo) * per, (size_t)n * per};
        }
    }
    if (rc != MPI_SUCCESS)
        shim_coll_release(c);
    return rc;
}

/* Gatherv: recvbuf's blocks at the root only; with MPI_IN_PLACE the root's
 * own block is neither read nor written. */
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
    return coll_stage_v(c, 1, recvbuf, rcounts, displs, rtype, SHIM_FROM_MPI, -1,
                        sendbuf == MPI_IN_PLACE ? c->rank : -1);
}

/* Scatterv: sendbuf's blocks at the root only; MPI_IN_PLACE as the root's
 * recvbuf leaves its block where it is. */
int shim_coll_scatterv(struct shim_coll *c, const char *call, const void *sendbuf,
                       struct shim_array scounts, struct shim_array displs, MPI_Datatype stype,
                       void *recvbuf, MPI_Count rcount, MPI_Datatype rtype, int root,
                       MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, root))
        return MPI_SUCCESS;
    if (c->root)
        STAGE_OR_RETURN(coll_stage_v(c, 0, sendbuf, scounts, displs, stype, SHIM_TO_MPI, -1, -1));
    if (!(c->inter && c->root))
        STAGE_OR_RETURN(coll_stage(c, 1, recvbuf, 1, rcount, rtype, SHIM_FROM_MPI, rcount));
    return MPI_SUCCESS;
}

/* Allgatherv: every rank's recvbuf; MPI_IN_PLACE: this rank's block of it is
 * the input (copied in, not written back). */
int shim_coll_allgatherv(struct shim_coll *c, const char *call, const void *sendbuf,
                         MPI_Count scount, MPI_Datatype stype, void *recvbuf,
                         struct shim_array rcounts, struct shim_array displs,
                         MPI_Datatype rtype, MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, MPI_UNDEFINED))
        return MPI_SUCCESS;
    int in_place = sendbuf == MPI_IN_PLACE;
    STAGE_OR_RETURN(coll_stage(c, 0, sendbuf, 1, scount, stype, SHIM_TO_MPI, 0));
    return coll_stage_v(c, 1, recvbuf, rcounts, displs, rtype,
                        in_place ? SHIM_BOTH : SHIM_FROM_MPI, in_place ? c->rank : -1,
                        in_place ? c->rank : -1);
}

/* Alltoallv: MPI_IN_PLACE makes recvbuf's blocks the input too. */
int shim_coll_alltoallv(struct shim_coll *c, const char *call, const void *sendbuf,
                        struct shim_array scounts, struct shim_array sdispls,
                        MPI_Datatype stype, void *recvbuf, struct shim_array rcounts,
                        struct shim_array rdispls, MPI_Datatype rtype, MPI_Comm comm)
{
    if (!coll_begin(c, call, comm, MPI_UNDEFINED))
        return MPI_SUCCESS;
    int in_place = sendbuf == MPI_IN_PLACE;
    STAGE_OR_RETURN(coll_stage_v(c, 0, sendbuf, scounts, sdispls, stype, SHIM_TO_MPI, -1, -1));
    return coll_stage_v(c, 1, recvbuf, rcounts, rdispls, rtype,
                        in_place ? SHIM_BOTH : SHIM_FROM_MPI, -1, -1);
}

/* ---- the wrappers -------------------------------------------------------------------- */

/* A blocking wrapper: the staging, PMPI with host pointers, the copy back. */
#define COLL_RUN(PREP, PMPI_CALL_USER, PMPI_CALL_HOST) \
    SHIM_COLL_BEGIN(PREP, PMPI_CALL_USER);             \
    return shim_coll_end(&c, PMPI_CALL_HOST)

/* Reduce_local has no nonblocking or persistent form. */
#define REDUCE_LOCAL_WRAPPER(SFX, COUNT_T)                                                        \
    SHIM_EXPORT int MPI_Reduce_local##SFX(const void *inbuf, void *inoutbuf, COUNT_T count,       \
                                          MPI_Datatype dt, MPI_Op op)                             \
    {                                                                                             \
        COLL_RUN(shim_coll_reduce_local(&c, "MPI_Reduce_local" #SFX, inbuf, inoutbuf, count, dt), \
                 PMPI_Reduce_local##SFX(inbuf, inoutbuf, count, dt, op),                          \
                 PMPI_Reduce_local##SFX(SHIM_COLL_ARG(0, inbuf), SHIM_COLL_ARG(1, inoutbuf),      \
                                        count, dt, op));                                          \
    }

#define COLL_NM(UPPER, LOWER) UPPER

SHIM_COLL_FAMILY(COLL_NM, , , int, COLL_RUN, SHIM_NONE, SHIM_NONE)
REDUCE_LOCAL_WRAPPER(, int)

#if SHIM_LARGE_COUNT
SHIM_COLL_FAMILY(COLL_NM, , _c, MPI_Count, COLL_RUN, SHIM_NONE, SHIM_NONE)
REDUCE_LOCAL_WRAPPER(_c, MPI_Count)
#endif
