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
 * An intercommunicator is passed through when its buffers are host memory;
 * a device buffer on one is refused with MPI_ERR_COMM.
 */
#include "shim.h"

/* ---- one collective call: up to two staged buffers --------------------------------- */

int coll_begin(struct coll *c, const char *call, MPI_Comm comm, int root)
{
    c->call = call;
    c->comm = comm;
    c->inter = 0;
    c->rank = 0;
    c->size = 1;
    c->root = 0;
    c->b[0].staged = c->b[1].staged = 0;
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

static void coll_release(struct coll *c)
{
    shim_release(&c->b[0]);
    shim_release(&c->b[1]);
}

/*
 * Stage buffer @p i: @p blocks x @p count elements of @p dt at @p buf,
 * copied in for SHIM_TO_MPI; @p out_elems of them (from the start) copied
 * back after the call for SHIM_FROM_MPI. On an intercommunicator the buffer
 * is only classified, and refused when it is device memory. On an error the
 * buffers staged before are released.
 */
static int coll_stage(struct coll *c, int i, const void *buf, MPI_Count blocks, MPI_Count count,
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
        coll_release(c);
        return rc;
    }
    if (c->b[i].staged) {
        size_t per = c->b[i].bytes / (size_t)(blocks * count);
        c->out[i] = (size_t)out_elems * per;
    }
    return MPI_SUCCESS;
}

static int coll_staged(const struct coll *c)
{
    return c->b[0].staged || c->b[1].staged;
}

/* The pointer PMPI gets for buffer @p i (the user's when not staged). */
static void *coll_arg(struct coll *c, int i, const void *buf)
{
    return c->b[i].staged ? shim_host_arg(&c->b[i]) : (void *)buf;
}

/* MPI_IN_PLACE of Gather and Allgather: only this rank's block of the
 * receive buffer is MPI's input; copy just it in. */
static int coll_copy_in_block(struct coll *c, int i, MPI_Count block_elems)
{
    struct shim_buf *b = &c->b[i];
    if (!b->staged)
        return MPI_SUCCESS;
    size_t off = (size_t)c->rank * (size_t)block_elems * (size_t)c->ext[i];
    size_t len = (size_t)block_elems * (size_t)c->ext[i];
    if (off >= b->bytes)
        return MPI_SUCCESS;
    struct shim_buf part = *b;
    part.first += off;
    part.host += off;
    part.bytes = len < b->bytes - off ? len : b->bytes - off;
    int rc = shim_restage(c->call, &part, c->comm);
    if (rc != MPI_SUCCESS)
        coll_release(c);
    return rc;
}

/* After PMPI returned @p rc: copy back what MPI wrote (when it succeeded),
 * release the staging memory. The call's result. */
static int coll_end(struct coll *c, int rc)
{
    for (int i = 0; i < 2; i++) {
        if (c->b[i].staged && (c->dir[i] & SHIM_FROM_MPI) && rc == MPI_SUCCESS)
            rc = shim_unstage(c->call, &c->b[i], c->out[i], c->comm);
    }
    coll_release(c);
    return rc;
}

/* The sum of counts[0..n) in *total; 0 (pass through: MPI reports it) when
 * one is negative or the sum is out of range. int and MPI_Count arrays. */
#define COLL_SUM(NAME, COUNT_T)                                                  \
    static int NAME(int n, const COUNT_T counts[], MPI_Count *total)             \
    {                                                                            \
        MPI_Count sum = 0;                                                       \
        for (int i = 0; i < n; i++) {                                            \
            if (counts[i] < 0 || (MPI_Count)counts[i] > ((MPI_Count)1 << 62) - sum) \
                return 0;                                                        \
            sum += counts[i];                                                    \
        }                                                                        \
        *total = sum;                                                            \
        return 1;                                                                \
    }

COLL_SUM(coll_sum_int, int)
#if SHIM_LARGE_COUNT
COLL_SUM(coll_sum_count, MPI_Count)
#define coll_sum(n, counts, total)                                                   \
    _Generic((counts), const int *: coll_sum_int, int *: coll_sum_int, default: coll_sum_count)( \
        n, counts, total)
#else
#define coll_sum coll_sum_int
#endif

/* ---- the wrappers -------------------------------------------------------------------- */

/* Every wrapper: the one cached check, begin, stage, PMPI with the user's
 * arguments when nothing was staged, else with host pointers, then end. */
#define COLL_RUN(PMPI_CALL_USER, PMPI_CALL_HOST) \
    if (!coll_staged(&c))                        \
        return PMPI_CALL_USER;                   \
    return coll_end(&c, PMPI_CALL_HOST)

#define STAGE_OR_RETURN(expr)        \
    do {                             \
        int rc_ = (expr);            \
        if (rc_ != MPI_SUCCESS)      \
            return rc_;              \
    } while (0)

#define COLL_WRAPPERS(SFX, COUNT_T)                                                               \
    SHIM_EXPORT int MPI_Bcast##SFX(void *buf, COUNT_T count, MPI_Datatype dt, int root,           \
                                   MPI_Comm comm)                                                 \
    {                                                                                             \
        struct coll c;                                                                            \
        if (SHIM_LIKELY(!shim_active()) || count == 0 ||                                          \
            !coll_begin(&c, "MPI_Bcast" #SFX, comm, root))                                        \
            return PMPI_Bcast##SFX(buf, count, dt, root, comm);                                   \
        STAGE_OR_RETURN(coll_stage(&c, 0, buf, 1, count, dt,                                      \
                                   c.root ? SHIM_TO_MPI : SHIM_FROM_MPI, count));                 \
        COLL_RUN(PMPI_Bcast##SFX(buf, count, dt, root, comm),                                     \
                 PMPI_Bcast##SFX(coll_arg(&c, 0, buf), count, dt, root, comm));                   \
    }                                                                                             \
                                                                                                  \
    /* Allreduce, Scan: MPI_IN_PLACE makes recvbuf the input too. */                              \
    COLL_REDUCE_ALL(Allreduce, SFX, COUNT_T)                                                      \
    COLL_REDUCE_ALL(Scan, SFX, COUNT_T)                                                           \
                                                                                                  \
    /* Exscan: recvbuf of rank 0 is undefined after the call: left as it was (with               \
     * MPI_IN_PLACE only read, else neither read nor written back). */                           \
    SHIM_EXPORT int MPI_Exscan##SFX(const void *sendbuf, void *recvbuf, COUNT_T count,            \
                                    MPI_Datatype dt, MPI_Op op, MPI_Comm comm)                    \
    {                                                                                             \
        struct coll c;                                                                            \
        if (SHIM_LIKELY(!shim_active()) || count == 0 ||                                          \
            !coll_begin(&c, "MPI_Exscan" #SFX, comm, MPI_UNDEFINED))                              \
            return PMPI_Exscan##SFX(sendbuf, recvbuf, count, dt, op, comm);                       \
        int in_place = sendbuf == MPI_IN_PLACE;                                                   \
        int out = c.rank == 0 ? 0 : SHIM_FROM_MPI;                                                \
        STAGE_OR_RETURN(coll_stage(&c, 0, sendbuf, 1, count, dt, SHIM_TO_MPI, 0));                \
        STAGE_OR_RETURN(coll_stage(&c, 1, recvbuf, 1, count, dt,                                  \
                                   out | (in_place ? SHIM_TO_MPI : 0), count));                   \
        COLL_RUN(PMPI_Exscan##SFX(sendbuf, recvbuf, count, dt, op, comm),                         \
                 PMPI_Exscan##SFX(coll_arg(&c, 0, sendbuf), coll_arg(&c, 1, recvbuf), count, dt,  \
                                  op, comm));                                                     \
    }                                                                                             \
                                                                                                  \
    /* Reduce: recvbuf is significant at the root only (MPI_IN_PLACE: the root's                  \
     * input too). */                                                                             \
    SHIM_EXPORT int MPI_Reduce##SFX(const void *sendbuf, void *recvbuf, COUNT_T count,            \
                                    MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm)          \
    {                                                                                             \
        struct coll c;                                                                            \
        if (SHIM_LIKELY(!shim_active()) || count == 0 ||                                          \
            !coll_begin(&c, "MPI_Reduce" #SFX, comm, root))                                       \
            return PMPI_Reduce##SFX(sendbuf, recvbuf, count, dt, op, root, comm);                 \
        int in_place = sendbuf == MPI_IN_PLACE;                                                   \
        if (!(c.inter && c.root))                                                                 \
            STAGE_OR_RETURN(coll_stage(&c, 0, sendbuf, 1, count, dt, SHIM_TO_MPI, 0));            \
        if (c.root)                                                                               \
            STAGE_OR_RETURN(coll_stage(&c, 1, recvbuf, 1, count, dt,                              \
                                       in_place ? SHIM_BOTH : SHIM_FROM_MPI, count));             \
        COLL_RUN(PMPI_Reduce##SFX(sendbuf, recvbuf, count, dt, op, root, comm),                   \
                 PMPI_Reduce##SFX(coll_arg(&c, 0, sendbuf), coll_arg(&c, 1, recvbuf), count, dt,  \
                                  op, root, comm));                                               \
    }                                                                                             \
                                                                                                  \
    /* Reduce_local: no communicator; errors go to MPI_COMM_WORLD's handler. */                   \
    SHIM_EXPORT int MPI_Reduce_local##SFX(const void *inbuf, void *inoutbuf, COUNT_T count,       \
                                          MPI_Datatype dt, MPI_Op op)                             \
    {                                                                                             \
        struct coll c;                                                                            \
        if (SHIM_LIKELY(!shim_active()) || count == 0 ||                                          \
            !coll_begin(&c, "MPI_Reduce_local" #SFX, MPI_COMM_NULL, MPI_UNDEFINED))               \
            return PMPI_Reduce_local##SFX(inbuf, inoutbuf, count, dt, op);                        \
        STAGE_OR_RETURN(coll_stage(&c, 0, inbuf, 1, count, dt, SHIM_TO_MPI, 0));                  \
        STAGE_OR_RETURN(coll_stage(&c, 1, inoutbuf, 1, count, dt, SHIM_BOTH, count));             \
        COLL_RUN(PMPI_Reduce_local##SFX(inbuf, inoutbuf, count, dt, op),                          \
                 PMPI_Reduce_local##SFX(coll_arg(&c, 0, inbuf), coll_arg(&c, 1, inoutbuf), count, \
                                        dt, op));                                                 \
    }                                                                                             \
                                                                                                  \
    /* Reduce_scatter_block: size x recvcount in, recvcount out (MPI_IN_PLACE:                    \
     * both in recvbuf). */                                                                       \
    SHIM_EXPORT int MPI_Reduce_scatter_block##SFX(const void *sendbuf, void *recvbuf,             \
                                                  COUNT_T count, MPI_Datatype dt, MPI_Op op,      \
                                                  MPI_Comm comm)                                  \
    {                                                                                             \
        struct coll c;                                                                            \
        if (SHIM_LIKELY(!shim_active()) || count == 0 ||                                          \
            !coll_begin(&c, "MPI_Reduce_scatter_block" #SFX, comm, MPI_UNDEFINED))                \
            return PMPI_Reduce_scatter_block##SFX(sendbuf, recvbuf, count, dt, op, comm);         \
        int in_place = sendbuf == MPI_IN_PLACE;                                                   \
        STAGE_OR_RETURN(coll_stage(&c, 0, sendbuf, c.size, count, dt, SHIM_TO_MPI, 0));           \
        STAGE_OR_RETURN(coll_stage(&c, 1, recvbuf, in_place ? c.size : 1, count, dt,              \
                                   in_place ? SHIM_BOTH : SHIM_FROM_MPI, count));                 \
        COLL_RUN(PMPI_Reduce_scatter_block##SFX(sendbuf, recvbuf, count, dt, op, comm),           \
                 PMPI_Reduce_scatter_block##SFX(coll_arg(&c, 0, sendbuf),                         \
                                                coll_arg(&c, 1, recvbuf), count, dt, op, comm));  \
    }                                                                                             \
                                                                                                  \
    /* Reduce_scatter: the sum of recvcounts in, recvcounts[rank] out (MPI_IN_PLACE:         \
     * both in recvbuf). A negative count is MPI's to report. */                                 \
    SHIM_EXPORT int MPI_Reduce_scatter##SFX(const void *sendbuf, void *recvbuf,                   \
                                            const COUNT_T counts[], MPI_Datatype dt, MPI_Op op,   \
                                            MPI_Comm comm)                                        \
    {                                                                                             \
        struct coll c;                                                                            \
        MPI_Count total = 0;                                                                      \
        if (SHIM_LIKELY(!shim_active()) ||                                                        \
            !coll_begin(&c, "MPI_Reduce_scatter" #SFX, comm, MPI_UNDEFINED) ||                    \
            !coll_sum(c.size, counts, &total))                                                    \
            return PMPI_Reduce_scatter##SFX(sendbuf, recvbuf, counts, dt, op, comm);              \
        int in_place = sendbuf == MPI_IN_PLACE;                                                   \
        STAGE_OR_RETURN(coll_stage(&c, 0, sendbuf, 1, total, dt, SHIM_TO_MPI, 0));                \
        STAGE_OR_RETURN(coll_stage(&c, 1, recvbuf, 1, in_place ? total : counts[c.rank], dt,      \
                                   in_place ? SHIM_BOTH : SHIM_FROM_MPI, counts[c.rank]));        \
        COLL_RUN(PMPI_Reduce_scatter##SFX(sendbuf, recvbuf, counts, dt, op, comm),                \
                 PMPI_Reduce_scatter##SFX(coll_arg(&c, 0, sendbuf), coll_arg(&c, 1, recvbuf),     \
                                          counts, dt, op, comm));                                 \
    }                                                                                             \
                                                                                                  \
    /* Allgather, Alltoall: recvbuf holds size x recvcount. MPI_IN_PLACE:                         \
     * Allgather reads this rank's block of recvbuf, Alltoall all of it. */                       \
    SHIM_EXPORT int MPI_Allgather##SFX(const void *sendbuf, COUNT_T scount, MPI_Datatype stype,   \
                                       void *recvbuf, COUNT_T rcount, MPI_Datatype rtype,         \
                                       MPI_Comm comm)                                             \
    {                                                                                             \
        struct coll c;                                                                            \
        if (SHIM_LIKELY(!shim_active()) ||                                                        \
            !coll_begin(&c, "MPI_Allgather" #SFX, comm, MPI_UNDEFINED))                           \
            return PMPI_Allgather##SFX(sendbuf, scount, stype, recvbuf, rcount, rtype, comm);     \
        STAGE_OR_RETURN(coll_stage(&c, 0, sendbuf, 1, scount, stype, SHIM_TO_MPI, 0));            \
        STAGE_OR_RETURN(coll_stage(&c, 1, recvbuf, c.size, rcount, rtype, SHIM_FROM_MPI,          \
                                   (MPI_Count)c.size * rcount));                                  \
        if (sendbuf == MPI_IN_PLACE)                                                              \
            STAGE_OR_RETURN(coll_copy_in_block(&c, 1, rcount));                                   \
        COLL_RUN(PMPI_Allgather##SFX(sendbuf, scount, stype, recvbuf, rcount, rtype, comm),       \
                 PMPI_Allgather##SFX(coll_arg(&c, 0, sendbuf), scount, stype,                     \
                                     coll_arg(&c, 1, recvbuf), rcount, rtype, comm));             \
    }                                                                                             \
                                                                                                  \
    SHIM_EXPORT int MPI_Alltoall##SFX(const void *sendbuf, COUNT_T scount, MPI_Datatype stype,    \
                                      void *recvbuf, COUNT_T rcount, MPI_Datatype rtype,          \
                                      MPI_Comm comm)                                              \
    {                                                                                             \
        struct coll c;                                                                            \
        if (SHIM_LIKELY(!shim_active()) ||                                                        \
            !coll_begin(&c, "MPI_Alltoall" #SFX, comm, MPI_UNDEFINED))                            \
            return PMPI_Alltoall##SFX(sendbuf, scount, stype, recvbuf, rcount, rtype, comm);      \
        int in_place = sendbuf == MPI_IN_PLACE;                                                   \
        STAGE_OR_RETURN(coll_stage(&c, 0, sendbuf, c.size, scount, stype, SHIM_TO_MPI, 0));       \
        STAGE_OR_RETURN(coll_stage(&c, 1, recvbuf, c.size, rcount, rtype,                         \
                                   in_place ? SHIM_BOTH : SHIM_FROM_MPI,                          \
                                   (MPI_Count)c.size * rcount));                                  \
        COLL_RUN(PMPI_Alltoall##SFX(sendbuf, scount, stype, recvbuf, rcount, rtype, comm),        \
                 PMPI_Alltoall##SFX(coll_arg(&c, 0, sendbuf), scount, stype,                      \
                                    coll_arg(&c, 1, recvbuf), rcount, rtype, comm));              \
    }                                                                                             \
                                                                                                  \
    /* Gather: recvbuf (size x recvcount) at the root only; with MPI_IN_PLACE the                 \
     * root's own block is in place (copied in so that copying back keeps it). */                 \
    SHIM_EXPORT int MPI_Gather##SFX(const void *sendbuf, COUNT_T scount, MPI_Datatype stype,      \
                                    void *recvbuf, COUNT_T rcount, MPI_Datatype rtype, int root,  \
                                    MPI_Comm comm)                                                \
    {                                                                                             \
        struct coll c;                                                                            \
        if (SHIM_LIKELY(!shim_active()) || !coll_begin(&c, "MPI_Gather" #SFX, comm, root))        \
            return PMPI_Gather##SFX(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm);  \
        if (!(c.inter && c.root))                                                                 \
            STAGE_OR_RETURN(coll_stage(&c, 0, sendbuf, 1, scount, stype, SHIM_TO_MPI, 0));        \
        if (c.root) {                                                                             \
            STAGE_OR_RETURN(coll_stage(&c, 1, recvbuf, c.size, rcount, rtype, SHIM_FROM_MPI,      \
                                       (MPI_Count)c.size * rcount));                              \
            if (sendbuf == MPI_IN_PLACE)                                                          \
                STAGE_OR_RETURN(coll_copy_in_block(&c, 1, rcount));                               \
        }                                                                                         \
        COLL_RUN(PMPI_Gather##SFX(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm),    \
                 PMPI_Gather##SFX(coll_arg(&c, 0, sendbuf), scount, stype,                        \
                                  coll_arg(&c, 1, recvbuf), rcount, rtype, root, comm));          \
    }                                                                                             \
                                                                                                  \
    /* Scatter: sendbuf (size x sendcount) at the root only; MPI_IN_PLACE as the                  \
     * root's recvbuf leaves its block where it is. */                                            \
    SHIM_EXPORT int MPI_Scatter##SFX(const void *sendbuf, COUNT_T scount, MPI_Datatype stype,     \
                                     void *recvbuf, COUNT_T rcount, MPI_Datatype rtype, int root, \
                                     MPI_Comm comm)                                               \
    {                                                                                             \
        struct coll c;                                                                            \
        if (SHIM_LIKELY(!shim_active()) || !coll_begin(&c, "MPI_Scatter" #SFX, comm, root))       \
            return PMPI_Scatter##SFX(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm); \
        if (c.root)                                                                               \
            STAGE_OR_RETURN(coll_stage(&c, 0, sendbuf, c.size, scount, stype, SHIM_TO_MPI, 0));   \
        if (!(c.inter && c.root))                                                                 \
            STAGE_OR_RETURN(coll_stage(&c, 1, recvbuf, 1, rcount, rtype, SHIM_FROM_MPI, rcount)); \
        COLL_RUN(PMPI_Scatter##SFX(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm),   \
                 PMPI_Scatter##SFX(coll_arg(&c, 0, sendbuf), scount, stype,                       \
                                   coll_arg(&c, 1, recvbuf), rcount, rtype, root, comm));         \
    }

#define COLL_REDUCE_ALL(NAME, SFX, COUNT_T)                                                       \
    SHIM_EXPORT int MPI_##NAME##SFX(const void *sendbuf, void *recvbuf, COUNT_T count,            \
                                    MPI_Datatype dt, MPI_Op op, MPI_Comm comm)                    \
    {                                                                                             \
        struct coll c;                                                                            \
        if (SHIM_LIKELY(!shim_active()) || count == 0 ||                                          \
            !coll_begin(&c, "MPI_" #NAME #SFX, comm, MPI_UNDEFINED))                              \
            return PMPI_##NAME##SFX(sendbuf, recvbuf, count, dt, op, comm);                       \
        int in_place = sendbuf == MPI_IN_PLACE;                                                   \
        STAGE_OR_RETURN(coll_stage(&c, 0, sendbuf, 1, count, dt, SHIM_TO_MPI, 0));                \
        STAGE_OR_RETURN(coll_stage(&c, 1, recvbuf, 1, count, dt,                                  \
                                   in_place ? SHIM_BOTH : SHIM_FROM_MPI, count));                 \
        COLL_RUN(PMPI_##NAME##SFX(sendbuf, recvbuf, count, dt, op, comm),                         \
                 PMPI_##NAME##SFX(coll_arg(&c, 0, sendbuf), coll_arg(&c, 1, recvbuf), count, dt,  \
                                  op, comm));                                                     \
    }

COLL_WRAPPERS(, int)

#if SHIM_LARGE_COUNT
COLL_WRAPPERS(_c, MPI_Count)
#endif
