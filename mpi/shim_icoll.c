/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Nonblocking collectives (issue 13): MPI_Ibcast, Ireduce, Iallreduce,
 * Ireduce_scatter_block, Ireduce_scatter, Iscan, Iexscan, Igather, Iscatter,
 * Iallgather, Ialltoall, Igatherv, Iscatterv, Iallgatherv, Ialltoallv and
 * Ialltoallw, and their large-count MPI_IX_c forms on an MPI-4 library; and
 * the persistent collectives of the same list (MPI_Bcast_init & co., and
 * their _c forms) on an MPI-4 library, or Open MPI 4's MPIX_Bcast_init & co.
 * (its pcollreq extension, mpi-ext.h).
 *
 * Each stages exactly what its blocking form stages (the shim_coll_*
 * functions of shim_coll.c): what MPI reads is copied from the device into
 * pinned host memory in the call, before PMPI_IX is called, and PMPI_IX gets
 * the host pointers. The request is recorded with its staging
 * (shim_rec_add_coll); the completion call that sees it finish (Wait*,
 * Test*, Request_get_status: shim_complete.c) copies what MPI wrote back to
 * the device and releases the staging memory. Host buffers pass straight
 * through with the user's arguments, and nothing is recorded.
 *
 * A persistent one stages the same way at init and gives PMPI_X_init the host
 * pointers; its record (shim_rec_add_pcoll) keeps the staging memory until
 * MPI_Request_free. Every MPI_Start/Startall copies what MPI reads from the
 * device into it again, before PMPI_Start; every completion copies back what
 * MPI wrote and keeps the staging.
 */
#include "shim.h"

/* The class of a nonblocking or persistent collective: icoll, or reduce for
 * a reduction. */
#define ICOLL_CLASS_MOVE SHIM_CLASS_ICOLL
#define ICOLL_CLASS_REDUCTION SHIM_CLASS_REDUCE

/* A nonblocking or persistent wrapper: the staging, PMPI with host pointers,
 * the record (RECORD: shim_rec_add_coll or shim_rec_add_pcoll). */
#define ICOLL_RECORD(RECORD, KIND, PREP, PMPI_CALL_USER, PMPI_CALL_HOST) \
    SHIM_COLL_BEGIN(ICOLL_CLASS_##KIND, PREP, PMPI_CALL_USER);           \
    rc = PMPI_CALL_HOST;                                                 \
    if (rc != MPI_SUCCESS) {                                             \
        shim_coll_release(&c);                                           \
        return rc;                                                       \
    }                                                                    \
    return RECORD(req, &c)

#define ICOLL_RUN(KIND, PREP, PMPI_CALL_USER, PMPI_CALL_HOST) \
    ICOLL_RECORD(shim_rec_add_coll, KIND, PREP, PMPI_CALL_USER, PMPI_CALL_HOST)

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
#endif

/*
 * Persistent collectives: MPI-4's MPI_X_init (MPICH 4), or Open MPI 4's
 * MPIX_X_init (the same arguments: each MPI_X_init name the macros make is
 * renamed to it below). At init the staging of the nonblocking form, and
 * PMPI_X_init with the host pointers; the record keeps the staging from init
 * to MPI_Request_free (shim_rec_add_pcoll). The class is the nonblocking
 * forms' (icoll, or reduce for a reduction). The v and w forms' counts,
 * displacements (and Alltoallw's datatypes) are read at init: MPI forbids
 * changing them while the request lives. MPI_Barrier_init has no buffer and
 * is not wrapped.
 */
#if defined(OPEN_MPI) && !SHIM_LARGE_COUNT && __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#if SHIM_LARGE_COUNT || defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define PCOLL_RUN(KIND, PREP, PMPI_CALL_USER, PMPI_CALL_HOST) \
    ICOLL_RECORD(shim_rec_add_pcoll, KIND, PREP, PMPI_CALL_USER, PMPI_CALL_HOST)

#define PCOLL_NM(UPPER, LOWER) UPPER
#define PCOLL_XP() , MPI_Info info, MPI_Request *req
#define PCOLL_XA() , info, req

#if !SHIM_LARGE_COUNT
/* Open MPI 4: MPIX_X_init and PMPIX_X_init. */
#define MPI_Bcast_init MPIX_Bcast_init
#define PMPI_Bcast_init PMPIX_Bcast_init
#define MPI_Allreduce_init MPIX_Allreduce_init
#define PMPI_Allreduce_init PMPIX_Allreduce_init
#define MPI_Scan_init MPIX_Scan_init
#define PMPI_Scan_init PMPIX_Scan_init
#define MPI_Exscan_init MPIX_Exscan_init
#define PMPI_Exscan_init PMPIX_Exscan_init
#define MPI_Reduce_scatter_block_init MPIX_Reduce_scatter_block_init
#define PMPI_Reduce_scatter_block_init PMPIX_Reduce_scatter_block_init
#define MPI_Reduce_init MPIX_Reduce_init
#define PMPI_Reduce_init PMPIX_Reduce_init
#define MPI_Reduce_scatter_init MPIX_Reduce_scatter_init
#define PMPI_Reduce_scatter_init PMPIX_Reduce_scatter_init
#define MPI_Allgather_init MPIX_Allgather_init
#define PMPI_Allgather_init PMPIX_Allgather_init
#define MPI_Alltoall_init MPIX_Alltoall_init
#define PMPI_Alltoall_init PMPIX_Alltoall_init
#define MPI_Gather_init MPIX_Gather_init
#define PMPI_Gather_init PMPIX_Gather_init
#define MPI_Scatter_init MPIX_Scatter_init
#define PMPI_Scatter_init PMPIX_Scatter_init
#define MPI_Gatherv_init MPIX_Gatherv_init
#define PMPI_Gatherv_init PMPIX_Gatherv_init
#define MPI_Scatterv_init MPIX_Scatterv_init
#define PMPI_Scatterv_init PMPIX_Scatterv_init
#define MPI_Allgatherv_init MPIX_Allgatherv_init
#define PMPI_Allgatherv_init PMPIX_Allgatherv_init
#define MPI_Alltoallv_init MPIX_Alltoallv_init
#define PMPI_Alltoallv_init PMPIX_Alltoallv_init
#define MPI_Alltoallw_init MPIX_Alltoallw_init
#define PMPI_Alltoallw_init PMPIX_Alltoallw_init
#endif

SHIM_COLL_FAMILY(PCOLL_NM, _init, , int, PCOLL_RUN, PCOLL_XP, PCOLL_XA)
SHIM_COLL_V_FAMILY(PCOLL_NM, _init, , int, int, PCOLL_RUN, PCOLL_XP, PCOLL_XA)
SHIM_COLL_ALLTOALLW(PCOLL_NM, _init, , int, int, PCOLL_RUN, PCOLL_XP, PCOLL_XA)

#if SHIM_LARGE_COUNT
SHIM_COLL_FAMILY(PCOLL_NM, _init, _c, MPI_Count, PCOLL_RUN, PCOLL_XP, PCOLL_XA)
SHIM_COLL_V_FAMILY(PCOLL_NM, _init, _c, MPI_Count, MPI_Aint, PCOLL_RUN, PCOLL_XP, PCOLL_XA)
SHIM_COLL_ALLTOALLW(PCOLL_NM, _init, _c, MPI_Count, MPI_Aint, PCOLL_RUN, PCOLL_XP, PCOLL_XA)
#endif
#endif
