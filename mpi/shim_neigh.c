/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Neighborhood collectives (issue 13): MPI_Neighbor_allgather,
 * Neighbor_allgatherv, Neighbor_alltoall, Neighbor_alltoallv and
 * Neighbor_alltoallw, their nonblocking MPI_Ineighbor_* forms, and the
 * large-count _c forms of both on an MPI-4 library, where the persistent
 * forms (MPI_Neighbor_*_init) refuse device buffers.
 *
 * A buffer of a neighborhood collective is one block per neighbour of the
 * communicator's topology: recvbuf has one per source (the in-degree),
 * sendbuf one per destination (the out-degree; Neighbor_allgather's sendbuf
 * is one block, sent to every destination). Each is staged as a v form's
 * buffer is (shim_coll_stage_blocks, shim_coll.c): the span of its blocks in
 * one piece of pool memory, only the blocks copied in where MPI reads them
 * and back where it writes them, never the gaps. The blocks of the
 * non-v forms are count elements at q x count extents.
 *
 * The neighbours come from the topology (MPI_Topo_test): a Cartesian one has
 * 2 x ndims, for each dimension the one in the negative direction, then the
 * one in the positive direction (MPI_Cart_shift by 1), in both buffers; a
 * graph one MPI_Graph_neighbors_count of them, sources and destinations; a
 * distributed graph MPI_Dist_graph_neighbors_count's in- and out-degree, in
 * the order of MPI_Dist_graph_neighbors. A neighbour that is MPI_PROC_NULL
 * (a non-periodic Cartesian dimension's edge) has a block that MPI neither
 * reads nor writes: the shim neither copies it in nor back (its count is
 * given to the staging as 0; PMPI gets the user's arrays).
 *
 * The blocking forms copy back when PMPI returns (shim_coll_end); the
 * nonblocking ones record the request with its staging (shim_rec_add_coll),
 * and the completion call that sees it finish copies back, as for
 * MPI_Ialltoallv (shim_icoll.c). A communicator without a topology, or any
 * argument MPI must report, goes to PMPI unstaged.
 */
#include "shim.h"

#include <stdlib.h>

/* ---- the neighbours of a topology ------------------------------------------------ */

#define NEIGH_STACK 16

/* The blocks of one call: the degrees, which neighbours are MPI_PROC_NULL,
 * and the counts and displacements given to the staging (MPI_Count each). */
struct neigh {
    int in, out;            /* blocks of recvbuf, of sendbuf */
    unsigned char *null[2]; /* [0]: destination q is MPI_PROC_NULL, [1]: source q */
    MPI_Count *counts[2], *displs[2];
    void *mem;              /* all of the above, when not on the stack */
    unsigned char null_stack[2][NEIGH_STACK];
    MPI_Count stack[4][NEIGH_STACK];
};

static void neigh_free(struct neigh *t)
{
    free(t->mem);
    t->mem = NULL;
}

/* Room for the arrays of @p t's degrees: MPI_SUCCESS, or MPI_ERR_NO_MEM
 * raised on @p comm. */
static int neigh_alloc(struct neigh *t, const char *call, MPI_Comm comm)
{
    int n = t->in > t->out ? t->in : t->out;
    t->mem = NULL;
    if (n <= NEIGH_STACK) {
        for (int s = 0; s < 2; s++) {
            t->null[s] = t->null_stack[s];
            t->counts[s] = t->stack[2 * s];
            t->displs[s] = t->stack[2 * s + 1];
        }
    } else {
        size_t k = (size_t)n;
        char *m = malloc(k * (2 + 4 * sizeof(MPI_Count)));
        if (m == NULL)
            return shim_error(comm, MPI_ERR_NO_MEM, call, "no memory for the neighbour list");
        t->mem = m;
        for (int s = 0; s < 2; s++) {
            t->counts[s] = (MPI_Count *)(void *)m + (2 * s) * k;
            t->displs[s] = (MPI_Count *)(void *)m + (2 * s + 1) * k;
        }
        t->null[0] = (unsigned char *)(m + 4 * k * sizeof(MPI_Count));
        t->null[1] = t->null[0] + k;
    }
    for (int q = 0; q < n; q++)
        t->null[0][q] = t->null[1][q] = 0;
    return MPI_SUCCESS;
}

/* Which ranks @p list names MPI_PROC_NULL, into null[]. */
static void neigh_mark(unsigned char *null, const int *list, int n)
{
    for (int q = 0; q < n; q++)
        null[q] = list[q] == MPI_PROC_NULL;
}

/* The neighbours of @p comm's topology into *t: MPI_SUCCESS with *found 1,
 * or with *found 0 when the call goes to PMPI unstaged (no topology, an
 * invalid communicator: MPI's to report); else an error raised on @p comm. */
static int neigh_topology(struct neigh *t, const char *call, MPI_Comm comm, int *found)
{
    int kind = MPI_UNDEFINED, weighted = 0, rc = MPI_SUCCESS;
    t->in = t->out = 0;
    t->mem = NULL;
    *found = 0;
    if (comm == MPI_COMM_NULL || PMPI_Topo_test(comm, &kind) != MPI_SUCCESS)
        return MPI_SUCCESS;
    if (kind == MPI_CART) {
        int nd = 0;
        if (PMPI_Cartdim_get(comm, &nd) != MPI_SUCCESS || nd < 0 || nd > (1 << 28))
            return MPI_SUCCESS;
        t->in = t->out = 2 * nd;
        if ((rc = neigh_alloc(t, call, comm)) != MPI_SUCCESS)
            return rc;
        for (int d = 0; d < nd; d++) {
            int shift[2] = {MPI_PROC_NULL, MPI_PROC_NULL};
            if (PMPI_Cart_shift(comm, d, 1, &shift[0], &shift[1]) != MPI_SUCCESS) {
                neigh_free(t);
                return MPI_SUCCESS;
            }
            neigh_mark(t->null[0] + 2 * d, shift, 2);
            neigh_mark(t->null[1] + 2 * d, shift, 2);
        }
    } else if (kind == MPI_GRAPH) {
        int rank = 0, n = 0;
        if (PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS ||
            PMPI_Graph_neighbors_count(comm, rank, &n) != MPI_SUCCESS || n < 0)
            return MPI_SUCCESS;
        t->in = t->out = n; /* a graph's neighbours are ranks, never MPI_PROC_NULL */
        if ((rc = neigh_alloc(t, call, comm)) != MPI_SUCCESS)
            return rc;
    } else {
        if (kind != MPI_DIST_GRAPH ||
            PMPI_Dist_graph_neighbors_count(comm, &t->in, &t->out, &weighted) != MPI_SUCCESS ||
            t->in < 0 || t->out < 0)
            return MPI_SUCCESS;
        if ((rc = neigh_alloc(t, call, comm)) != MPI_SUCCESS)
            return rc;
        /* The neighbours and their weights (unread) in the counts' room, not
         * used yet: 8 bytes per neighbour hold an int rank and an int weight. */
        int *src = (int *)(void *)t->counts[1], *dst = (int *)(void *)t->counts[0];
        if (PMPI_Dist_graph_neighbors(comm, t->in, src, src + t->in, t->out, dst,
                                      dst + t->out) != MPI_SUCCESS) {
            neigh_free(t);
            return MPI_SUCCESS;
        }
        neigh_mark(t->null[1], src, t->in);
        neigh_mark(t->null[0], dst, t->out);
    }
    *found = 1;
    return MPI_SUCCESS;
}

int shim_neigh_degrees(MPI_Comm comm, const char *call, int *in, int *out)
{
    struct neigh t;
    int found = 0;
    if (neigh_topology(&t, call, comm, &found) != MPI_SUCCESS || !found)
        return 0;
    *in = t.in;
    *out = t.out;
    neigh_free(&t);
    return 1;
}

/* ---- what one call stages ------------------------------------------------------- */

/* One buffer of a call: its blocks are counts[q] (or count each) elements at
 * displs[q] (or q x count) extents of type (or, types not NULL, of types[q]
 * at displs[q] bytes), q < the side's degree; one: a single block of count
 * (Neighbor_allgather's sendbuf, sent to every destination). */
struct neigh_side {
    const void *buf;
    MPI_Count count;
    struct shim_array counts, displs; /* .p NULL: count, q x count */
    MPI_Datatype type;
    const MPI_Datatype *types;
    int one;
};

/* Stage side @p s (0: sendbuf, read; 1: recvbuf, written) of the call. */
static int neigh_stage_side(struct shim_coll *c, struct neigh *t, int i,
                            const struct neigh_side *s)
{
    int n = i == 0 ? t->out : t->in;
    MPI_Count *counts = t->counts[i], *displs = t->displs[i];
    const unsigned char *null = t->null[i];
    if (s->one) {
        /* Sent to every destination: read unless all are MPI_PROC_NULL. */
        int any = 0;
        for (int q = 0; q < n; q++)
            any |= !null[q];
        counts[0] = any ? s->count : 0;
        displs[0] = 0;
        n = 1;
    } else {
        for (int q = 0; q < n; q++) {
            MPI_Count k = s->counts.p != NULL ? shim_array_at(s->counts, q) : s->count;
            counts[q] = null[q] ? 0 : k;
            if (s->displs.p != NULL)
                displs[q] = shim_array_at(s->displs, q);
            else if (__builtin_mul_overflow((MPI_Count)q, s->count, &displs[q])) {
                shim_coll_release(c); /* sendbuf's staging, for recvbuf's error */
                return shim_error(c->comm, MPI_ERR_COUNT, c->call,
                                  "count * neighbours overflows");
            }
        }
    }
    if (n == 0)
        return MPI_SUCCESS;
    return shim_coll_stage_blocks(c, i, s->buf, n, SHIM_ARRAY(counts), SHIM_ARRAY(displs),
                                  s->type, s->types, i == 0 ? SHIM_TO_MPI : SHIM_FROM_MPI);
}

/* The staging of one call: the topology's neighbours, then sendbuf and
 * recvbuf. MPI_IN_PLACE is not allowed in a neighborhood collective: such a
 * buffer is not staged, MPI reports it. */
static int neigh_stage(struct shim_coll *c, const char *call, MPI_Comm comm,
                       const struct neigh_side *send, const struct neigh_side *recv)
{
    struct neigh t;
    int found = 0;
    c->b[0].staged = c->b[1].staged = 0;
    c->pieces[0] = c->pieces[1] = NULL;
    int rc = neigh_topology(&t, call, comm, &found);
    if (rc != MPI_SUCCESS || !found)
        return rc;
    if (shim_coll_start(c, call, comm)) {
        rc = neigh_stage_side(c, &t, 0, send);
        if (rc == MPI_SUCCESS)
            rc = neigh_stage_side(c, &t, 1, recv);
    }
    neigh_free(&t);
    return rc;
}

/* Neighbor_allgather: sendbuf once to every destination, recvbuf a block of
 * rcount per source. */
static int neigh_allgather(struct shim_coll *c, const char *call, const void *sendbuf,
                           MPI_Count scount, MPI_Datatype stype, void *recvbuf, MPI_Count rcount,
                           MPI_Datatype rtype, MPI_Comm comm)
{
    struct neigh_side s = {.buf = sendbuf, .count = scount, .type = stype, .one = 1};
    struct neigh_side r = {.buf = recvbuf, .count = rcount, .type = rtype};
    return neigh_stage(c, call, comm, &s, &r);
}

static int neigh_allgatherv(struct shim_coll *c, const char *call, const void *sendbuf,
                            MPI_Count scount, MPI_Datatype stype, void *recvbuf,
                            struct shim_array rcounts, struct shim_array displs,
                            MPI_Datatype rtype, MPI_Comm comm)
{
    struct neigh_side s = {.buf = sendbuf, .count = scount, .type = stype, .one = 1};
    struct neigh_side r = {.buf = recvbuf, .counts = rcounts, .displs = displs, .type = rtype};
    return neigh_stage(c, call, comm, &s, &r);
}

/* Neighbor_alltoall: a block of scount per destination, of rcount per source. */
static int neigh_alltoall(struct shim_coll *c, const char *call, const void *sendbuf,
                          MPI_Count scount, MPI_Datatype stype, void *recvbuf, MPI_Count rcount,
                          MPI_Datatype rtype, MPI_Comm comm)
{
    struct neigh_side s = {.buf = sendbuf, .count = scount, .type = stype};
    struct neigh_side r = {.buf = recvbuf, .count = rcount, .type = rtype};
    return neigh_stage(c, call, comm, &s, &r);
}

static int neigh_alltoallv(struct shim_coll *c, const char *call, const void *sendbuf,
                           struct shim_array scounts, struct shim_array sdispls,
                           MPI_Datatype stype, void *recvbuf, struct shim_array rcounts,
                           struct shim_array rdispls, MPI_Datatype rtype, MPI_Comm comm)
{
    struct neigh_side s = {.buf = sendbuf, .counts = scounts, .displs = sdispls, .type = stype};
    struct neigh_side r = {.buf = recvbuf, .counts = rcounts, .displs = rdispls, .type = rtype};
    return neigh_stage(c, call, comm, &s, &r);
}

/* Neighbor_alltoallw: displacements in bytes (MPI_Aint in every form), a
 * datatype per neighbour; a non-contiguous one on device memory is refused
 * with MPI_ERR_TYPE, as Alltoallw's are (shim_coll.c). */
static int neigh_alltoallw(struct shim_coll *c, const char *call, const void *sendbuf,
                           struct shim_array scounts, struct shim_array sdispls,
                           const MPI_Datatype stypes[], void *recvbuf, struct shim_array rcounts,
                           struct shim_array rdispls, const MPI_Datatype rtypes[], MPI_Comm comm)
{
    struct neigh_side s = {
        .buf = sendbuf, .counts = scounts, .displs = sdispls, .types = stypes};
    struct neigh_side r = {
        .buf = recvbuf, .counts = rcounts, .displs = rdispls, .types = rtypes};
    return neigh_stage(c, call, comm, &s, &r);
}

/* ---- the wrappers -------------------------------------------------------------------- */

/* The blocking and nonblocking wrappers' bodies (SHIM_COLL_BEGIN, shim.h):
 * the staging, PMPI with the host pointers, then the copy back (blocking),
 * or the request recorded with the staging (nonblocking: the completion
 * call copies back, shim_complete.c). */
#define NEIGH_RUN(KIND, PREP, PMPI_CALL_USER, PMPI_CALL_HOST) \
    SHIM_COLL_BEGIN(SHIM_CLASS_COLL, PREP, PMPI_CALL_USER);   \
    return shim_coll_end(&c, PMPI_CALL_HOST)

#define INEIGH_RUN(KIND, PREP, PMPI_CALL_USER, PMPI_CALL_HOST) \
    SHIM_COLL_BEGIN(SHIM_CLASS_ICOLL, PREP, PMPI_CALL_USER);   \
    return shim_coll_started(&c, PMPI_CALL_HOST, req)

#define NEIGH_NM(UPPER, LOWER) Neighbor_##LOWER
#define INEIGH_NM(UPPER, LOWER) Ineighbor_##LOWER
#define INEIGH_XP() , MPI_Request *req
#define INEIGH_XA() , req

/* Neighbor_allgather, Neighbor_alltoall: (sendbuf, scount, stype, recvbuf,
 * rcount, rtype, comm), as Allgather (SHIM_COLL_ALL, shim.h). */
#define NEIGH_ALL(NM, L, SFX, COUNT_T, RUN, XP, XA) \
    SHIM_COLL_ALL(NM, L, L, , SFX, COUNT_T, RUN, XP, XA, neigh_##L)

/* Neighbor_allgatherv and Neighbor_alltoallv have Allgatherv's and
 * Alltoallv's arguments; their staging is this file's. */
#define NEIGH_ALLGATHERV(NM, SFX, COUNT_T, DISP_T, RUN, XP, XA)                                 \
    SHIM_EXPORT int SHIM_COLL_MPI(NM, allgatherv, allgatherv, , SFX)(                           \
        const void *sendbuf, COUNT_T scount, MPI_Datatype stype, void *recvbuf,                 \
        const COUNT_T rcounts[], const DISP_T displs[], MPI_Datatype rtype,                     \
        MPI_Comm comm XP())                                                                     \
    {                                                                                           \
        RUN(MOVE,                                                                               \
            neigh_allgatherv(&c, SHIM_COLL_NAME(NM, allgatherv, allgatherv, , SFX), sendbuf,    \
                             scount, stype, recvbuf, SHIM_ARRAY(rcounts), SHIM_ARRAY(displs),   \
                             rtype, comm),                                                      \
            SHIM_COLL_PMPI(NM, allgatherv, allgatherv, , SFX)(sendbuf, scount, stype, recvbuf,  \
                                                              rcounts, displs, rtype,           \
                                                              comm XA()),                       \
            SHIM_COLL_PMPI(NM, allgatherv, allgatherv, , SFX)(                                  \
                SHIM_COLL_ARG(0, sendbuf), scount, SHIM_COLL_TYPE(0, stype),                    \
                SHIM_COLL_ARG(1, recvbuf), rcounts, displs, SHIM_COLL_TYPE(1, rtype),           \
                comm XA()));                                                                    \
    }

#define NEIGH_ALLTOALLV(NM, SFX, COUNT_T, DISP_T, RUN, XP, XA)                                  \
    SHIM_EXPORT int SHIM_COLL_MPI(NM, alltoallv, alltoallv, , SFX)(                             \
        const void *sendbuf, const COUNT_T scounts[], const DISP_T sdispls[],                   \
        MPI_Datatype stype, void *recvbuf, const COUNT_T rcounts[], const DISP_T rdispls[],     \
        MPI_Datatype rtype, MPI_Comm comm XP())                                                 \
    {                                                                                           \
        RUN(MOVE,                                                                               \
            neigh_alltoallv(&c, SHIM_COLL_NAME(NM, alltoallv, alltoallv, , SFX), sendbuf,       \
                            SHIM_ARRAY(scounts), SHIM_ARRAY(sdispls), stype, recvbuf,           \
                            SHIM_ARRAY(rcounts), SHIM_ARRAY(rdispls), rtype, comm),             \
            SHIM_COLL_PMPI(NM, alltoallv, alltoallv, , SFX)(sendbuf, scounts, sdispls, stype,   \
                                                            recvbuf, rcounts, rdispls, rtype,   \
                                                            comm XA()),                         \
            SHIM_COLL_PMPI(NM, alltoallv, alltoallv, , SFX)(                                    \
                SHIM_COLL_ARG(0, sendbuf), scounts, sdispls, SHIM_COLL_TYPE(0, stype),          \
                SHIM_COLL_ARG(1, recvbuf), rcounts, rdispls, SHIM_COLL_TYPE(1, rtype),          \
                comm XA()));                                                                    \
    }

/* Neighbor_alltoallw: MPI_Aint byte displacements in the int form too. */
#define NEIGH_ALLTOALLW(NM, SFX, COUNT_T, RUN, XP, XA)                                          \
    SHIM_EXPORT int SHIM_COLL_MPI(NM, alltoallw, alltoallw, , SFX)(                             \
        const void *sendbuf, const COUNT_T scounts[], const MPI_Aint sdispls[],                 \
        const MPI_Datatype stypes[], void *recvbuf, const COUNT_T rcounts[],                    \
        const MPI_Aint rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm XP())              \
    {                                                                                           \
        RUN(MOVE,                                                                               \
            neigh_alltoallw(&c, SHIM_COLL_NAME(NM, alltoallw, alltoallw, , SFX), sendbuf,       \
                            SHIM_ARRAY(scounts), SHIM_ARRAY(sdispls), stypes, recvbuf,          \
                            SHIM_ARRAY(rcounts), SHIM_ARRAY(rdispls), rtypes, comm),            \
            SHIM_COLL_PMPI(NM, alltoallw, alltoallw, , SFX)(sendbuf, scounts, sdispls, stypes,  \
                                                            recvbuf, rcounts, rdispls, rtypes,  \
                                                            comm XA()),                         \
            SHIM_COLL_PMPI(NM, alltoallw, alltoallw, , SFX)(                                    \
                SHIM_COLL_ARG(0, sendbuf), scounts, sdispls, stypes, SHIM_COLL_ARG(1, recvbuf), \
                rcounts, rdispls, rtypes, comm XA()));                                          \
    }

#define NEIGH_FAMILY(NM, SFX, COUNT_T, DISP_T, RUN, XP, XA)        \
    NEIGH_ALL(NM, allgather, SFX, COUNT_T, RUN, XP, XA)            \
    NEIGH_ALL(NM, alltoall, SFX, COUNT_T, RUN, XP, XA)             \
    NEIGH_ALLGATHERV(NM, SFX, COUNT_T, DISP_T, RUN, XP, XA)        \
    NEIGH_ALLTOALLV(NM, SFX, COUNT_T, DISP_T, RUN, XP, XA)         \
    NEIGH_ALLTOALLW(NM, SFX, COUNT_T, RUN, XP, XA)

NEIGH_FAMILY(NEIGH_NM, , int, int, NEIGH_RUN, SHIM_NONE, SHIM_NONE)
NEIGH_FAMILY(INEIGH_NM, , int, int, INEIGH_RUN, INEIGH_XP, INEIGH_XA)

#if SHIM_LARGE_COUNT
NEIGH_FAMILY(NEIGH_NM, _c, MPI_Count, MPI_Aint, NEIGH_RUN, SHIM_NONE, SHIM_NONE)
NEIGH_FAMILY(INEIGH_NM, _c, MPI_Count, MPI_Aint, INEIGH_RUN, INEIGH_XP, INEIGH_XA)

/*
 * The persistent forms (MPI-4: MPI_Neighbor_allgather_init & co.), as the
 * other persistent collectives (shim_icoll.c, docs/mpi.md "Persistent
 * collectives"): staged at init, what MPI reads copied in again at every
 * MPI_Start, what it wrote copied back at every completion, the staging
 * released at MPI_Request_free (shim_rec_add_pcoll). Class icoll, as theirs.
 */
#define PNEIGH_RUN(KIND, PREP, PMPI_CALL_USER, PMPI_CALL_HOST) \
    SHIM_COLL_BEGIN(SHIM_CLASS_ICOLL, PREP, PMPI_CALL_USER);   \
    rc = PMPI_CALL_HOST;                                       \
    if (rc != MPI_SUCCESS) {                                   \
        shim_coll_release(&c);                                 \
        return rc;                                             \
    }                                                          \
    return shim_rec_add_pcoll(req, &c)
#define PNEIGH_XP() , MPI_Info info, MPI_Request *req
#define PNEIGH_XA() , info, req

NEIGH_FAMILY(NEIGH_NM, _init, int, int, PNEIGH_RUN, PNEIGH_XP, PNEIGH_XA)
NEIGH_FAMILY(NEIGH_NM, _init_c, MPI_Count, MPI_Aint, PNEIGH_RUN, PNEIGH_XP, PNEIGH_XA)
#endif
