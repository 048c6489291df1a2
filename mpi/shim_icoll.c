/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Nonblocking collectives (issue 13): MPI_Ibcast, Ireduce, Iallreduce,
 * Ireduce_scatter_block, Ireduce_scatter, Iscan, Iexscan, Igather, Iscatter,
 * Iallgather, Ialltoall, Igatherv, Iscatterv, Iallgatherv, Ialltoallv and
 * Ialltoallw, and their large-count MPI_IX_c forms on an MPI-4 library; on
 * an MPI-4 library also the persistent collectives of the same
 * list (MPI_Bcast_init & co.), which refuse device buffers.
 *
 * Each stages exactly what its blocking form stages (the shim_coll_*
 * functions of shim_coll.c): what MPI reads is copied from the device into
 * pinned host memory in the call, before PMPI_IX is called, and PMPI_IX gets
 * the host pointers. The request is recorded with its staging
 * (shim_rec_add_coll); the completion call that sees it finish (Wait*,
 * Test*, Request_get_status: shim_complete.c) copies what MPI wrote back to
 * the device and releases the staging memory. Host buffers pass straight
 * through with the user's arguments, and nothing is recorded.
 */
#include "shim.h"

/* The class of a nonblocking or persistent collective: icoll, or reduce for
 * a reduction. */
#define ICOLL_CLASS_MOVE SHIM_CLASS_ICOLL
#define ICOLL_CLASS_REDUCTION SHIM_CLASS_REDUCE

/* A nonblocking wrapper: the staging, PMPI_IX with host pointers, the record. */
#define ICOLL_RUN(KIND, PREP, PMPI_CALL_USER, PMPI_CALL_HOST)  \
    SHIM_COLL_BEGIN(ICOLL_CLASS_##KIND, PREP, PMPI_CALL_USER); \
    rc = PMPI_CALL_HOST;                                       \
    if (rc != MPI_SUCCESS) {                                   \
        shim_coll_release(&c);                                 \
        return rc;                                             \
    }                                                          \
    return shim_rec_add_coll(req, &c)

#define ICOLL_NM(UPPER, LOWER) I##LOWER
#define ICOLL_XP() , MPI_Request *req
#define ICOLL_XA() , req

/* The v and w forms' counts, displacements (and Ialltoallw's datatypes) are
 * read at the call (MPI forbids changing them before completion): the blocks
 * to copy back are kept in the record; PMPI gets the user's arrays, which
 * stay the user's. */
SHIM_COLL_FAMILY(ICOLL_NM, , , int, ICOLL_RUN, ICOLL_XP, ICOLL_XA)
SHIM_COLL_V_FAMILY(ICOLL_NM, , , int, int, ICOLL_RUN, ICOLL_XP, ICOLL_XA)
SHIM_COLL_ALLTOALLW(ICOLL_NM, , , int, int, ICOLL_RUN, ICOLL_XP, ICOLL_XA)

#if SHIM_LARGE_COUNT
SHIM_COLL_FAMILY(ICOLL_NM, , _c, MPI_Count, ICOLL_RUN, ICOLL_XP, ICOLL_XA)
SHIM_COLL_V_FAMILY(ICOLL_NM, , _c, MPI_Count, MPI_Aint, ICOLL_RUN, ICOLL_XP, ICOLL_XA)
SHIM_COLL_ALLTOALLW(ICOLL_NM, , _c, MPI_Count, MPI_Aint, ICOLL_RUN, ICOLL_XP, ICOLL_XA)

/*
 * Persistent collectives (MPI-4: MPI_Bcast_init & co.): a device buffer is
 * refused with MPI_ERR_BUFFER before a request is made (the staging would
 * have to live from init to MPI_Request_free and be refreshed at every
 * MPI_Start: not done yet). Host buffers pass straight through, and so does
 * everything where CUCOPY_MPI_STAGE does not stage the call's class (icoll,
 * or reduce for a reduction: those of the nonblocking forms).
 */
#define PCOLL_RUN(KIND, PREP, PMPI_CALL_USER, PMPI_CALL_HOST)  \
    SHIM_COLL_BEGIN(ICOLL_CLASS_##KIND, PREP, PMPI_CALL_USER); \
    shim_coll_release(&c);                                     \
    return shim_error(c.comm, MPI_ERR_BUFFER, c.call,          \
                      "persistent collectives on device buffers are not supported (yet)")

#define PCOLL_NM(UPPER, LOWER) UPPER
#define PCOLL_XP() , MPI_Info info, MPI_Request *req
#define PCOLL_XA() , info, req

SHIM_COLL_FAMILY(PCOLL_NM, _init, , int, PCOLL_RUN, PCOLL_XP, PCOLL_XA)
SHIM_COLL_FAMILY(PCOLL_NM, _init, _c, MPI_Count, PCOLL_RUN, PCOLL_XP, PCOLL_XA)
#endif
