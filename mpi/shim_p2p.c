/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MPI_Init*, MPI_Finalize and point-to-point (MPI_Start and MPI_Startall are
 * with the completion family, in shim_complete.c).
 *
 * Every wrapper starts with the one cached check (shim_active()); a host
 * buffer, a zero count or MPI_PROC_NULL then goes straight to PMPI with the
 * user's arguments. A device buffer whose type map is one contiguous block
 * is staged: sends copy it to pinned host memory *in the call* (so MPI's
 * non-overtaking order is the order of the calls, exactly as without the
 * shim), receives land in host memory and are copied to the device before
 * the call that completes them returns.
 */
#include "shim.h"

/* ---- init and finalize -------------------------------------------------------- */

SHIM_EXPORT int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) {
        int provided = MPI_THREAD_SINGLE;
        PMPI_Query_thread(&provided);
        shim_after_init(provided);
    }
    return rc;
}

SHIM_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        shim_after_init(*provided);
    return rc;
}

SHIM_EXPORT int MPI_Finalize(void)
{
    if (shim_pending())
        shim_detached_progress(1);
    int rc = PMPI_Finalize();
    shim_after_finalize();
    return rc;
}

/* ---- blocking sends ------------------------------------------------------------- */

typedef int (*send_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm);

static int staged_send(const char *call, send_fn fn, const void *buf, int count,
                       MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
    struct shim_buf b;
    int rc = shim_stage(call, buf, count, dt, comm, SHIM_TO_MPI, &b);
    if (rc != MPI_SUCCESS)
        return rc;
    if (!b.staged)
        return fn(buf, count, dt, dest, tag, comm);
    rc = fn(shim_host_arg(&b), count, dt, dest, tag, comm);
    shim_release(&b);
    return rc;
}

/* MPI_Bsend: MPI copies into the attached buffer before returning, so the
 * staging memory goes back to the pool at once, as for the others. */
#define SEND_WRAPPER(NAME)                                                                   \
    SHIM_EXPORT int MPI_##NAME(const void *buf, int count, MPI_Datatype dt, int dest, int tag, \
                               MPI_Comm comm)                                                \
    {                                                                                        \
        if (SHIM_LIKELY(!shim_active()) || count == 0 || dest == MPI_PROC_NULL)              \
            return PMPI_##NAME(buf, count, dt, dest, tag, comm);                             \
        return staged_send("MPI_" #NAME, PMPI_##NAME, buf, count, dt, dest, tag, comm);      \
    }

SEND_WRAPPER(Send)
SEND_WRAPPER(Ssend)
SEND_WRAPPER(Rsend)
SEND_WRAPPER(Bsend)

/* ---- nonblocking sends ---------------------------------------------------------- */

typedef int (*isend_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);

static int staged_isend(const char *call, isend_fn fn, const void *buf, int count,
                        MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    struct shim_buf b;
    int rc = shim_stage(call, buf, count, dt, comm, SHIM_TO_MPI, &b);
    if (rc != MPI_SUCCESS)
        return rc;
    if (!b.staged)
        return fn(buf, count, dt, dest, tag, comm, req);
    rc = fn(shim_host_arg(&b), count, dt, dest, tag, comm, req);
    if (rc != MPI_SUCCESS) {
        shim_release(&b);
        return rc;
    }
    /* The staging memory stays with the request until it completes. */
    return shim_rec_add(req, 0, comm, call, &b);
}

#define ISEND_WRAPPER(NAME)                                                                   \
    SHIM_EXPORT int MPI_##NAME(const void *buf, int count, MPI_Datatype dt, int dest, int tag,  \
                               MPI_Comm comm, MPI_Request *req)                               \
    {                                                                                         \
        if (SHIM_LIKELY(!shim_active()) || count == 0 || dest == MPI_PROC_NULL)               \
            return PMPI_##NAME(buf, count, dt, dest, tag, comm, req);                         \
        return staged_isend("MPI_" #NAME, PMPI_##NAME, buf, count, dt, dest, tag, comm, req); \
    }

ISEND_WRAPPER(Isend)
ISEND_WRAPPER(Issend)
ISEND_WRAPPER(Irsend)
ISEND_WRAPPER(Ibsend)

/* ---- receives ------------------------------------------------------------------- */

/* After a blocking receive into staging memory: the bytes MPI wrote go to the
 * device; the status goes to the user (who may have passed MPI_STATUS_IGNORE). */
int shim_finish_recv(const char *call, int rc, struct shim_buf *b, const MPI_Status *s,
                     MPI_Comm comm)
{
    if (shim_copy_ok(rc)) {
        int rc2 = shim_unstage(call, b, shim_received_bytes(s), comm);
        if (rc == MPI_SUCCESS)
            rc = rc2;
    }
    shim_release(b);
    return rc;
}

SHIM_EXPORT int MPI_Recv(void *buf, int count, MPI_Datatype dt, int source, int tag,
                         MPI_Comm comm, MPI_Status *status)
{
    if (SHIM_LIKELY(!shim_active()) || count == 0 || source == MPI_PROC_NULL)
        return PMPI_Recv(buf, count, dt, source, tag, comm, status);
    struct shim_buf b;
    int rc = shim_stage("MPI_Recv", buf, count, dt, comm, SHIM_FROM_MPI, &b);
    if (rc != MPI_SUCCESS)
        return rc;
    if (!b.staged)
        return PMPI_Recv(buf, count, dt, source, tag, comm, status);
    MPI_Status local;
    MPI_Status *s = status == MPI_STATUS_IGNORE ? &local : status;
    rc = PMPI_Recv(shim_host_arg(&b), count, dt, source, tag, comm, s);
    return shim_finish_recv("MPI_Recv", rc, &b, s, comm);
}

SHIM_EXPORT int MPI_Irecv(void *buf, int count, MPI_Datatype dt, int source, int tag,
                          MPI_Comm comm, MPI_Request *req)
{
    if (SHIM_LIKELY(!shim_active()) || count == 0 || source == MPI_PROC_NULL)
        return PMPI_Irecv(buf, count, dt, source, tag, comm, req);
    struct shim_buf b;
    int rc = shim_stage("MPI_Irecv", buf, count, dt, comm, SHIM_FROM_MPI, &b);
    if (rc != MPI_SUCCESS)
        return rc;
    if (!b.staged)
        return PMPI_Irecv(buf, count, dt, source, tag, comm, req);
    rc = PMPI_Irecv(shim_host_arg(&b), count, dt, source, tag, comm, req);
    if (rc != MPI_SUCCESS) {
        shim_release(&b);
        return rc;
    }
    return shim_rec_add(req, 1, comm, "MPI_Irecv", &b);
}

/* Matched receives: the message was matched by MPI_(I)mprobe already; the
 * same staging as MPI_Recv / MPI_Irecv. */
SHIM_EXPORT int MPI_Mrecv(void *buf, int count, MPI_Datatype dt, MPI_Message *message,
                          MPI_Status *status)
{
    if (SHIM_LIKELY(!shim_active()) || count == 0 || *message == MPI_MESSAGE_NO_PROC)
        return PMPI_Mrecv(buf, count, dt, message, status);
    struct shim_buf b;
    int rc = shim_stage("MPI_Mrecv", buf, count, dt, MPI_COMM_WORLD, SHIM_FROM_MPI, &b);
    if (rc != MPI_SUCCESS)
        return rc;
    if (!b.staged)
        return PMPI_Mrecv(buf, count, dt, message, status);
    MPI_Status local;
    MPI_Status *s = status == MPI_STATUS_IGNORE ? &local : status;
    rc = PMPI_Mrecv(shim_host_arg(&b), count, dt, message, s);
    return shim_finish_recv("MPI_Mrecv", rc, &b, s, MPI_COMM_WORLD);
}

SHIM_EXPORT int MPI_Imrecv(void *buf, int count, MPI_Datatype dt, MPI_Message *message,
                           MPI_Request *req)
{
    if (SHIM_LIKELY(!shim_active()) || count == 0 || *message == MPI_MESSAGE_NO_PROC)
        return PMPI_Imrecv(buf, count, dt, message, req);
    struct shim_buf b;
    int rc = shim_stage("MPI_Imrecv", buf, count, dt, MPI_COMM_WORLD, SHIM_FROM_MPI, &b);
    if (rc != MPI_SUCCESS)
        return rc;
    if (!b.staged)
        return PMPI_Imrecv(buf, count, dt, message, req);
    rc = PMPI_Imrecv(shim_host_arg(&b), count, dt, message, req);
    if (rc != MPI_SUCCESS) {
        shim_release(&b);
        return rc;
    }
    return shim_rec_add(req, 1, MPI_COMM_WORLD, "MPI_Imrecv", &b);
}

/* ---- send and receive in one call ------------------------------------------------ */

SHIM_EXPORT int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                             int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                             int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
    if (SHIM_LIKELY(!shim_active()))
        return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                             recvtype, source, recvtag, comm, status);
    struct shim_buf sb = {0}, rb = {0};
    int rc = MPI_SUCCESS;
    if (sendcount != 0 && dest != MPI_PROC_NULL)
        rc = shim_stage("MPI_Sendrecv", sendbuf, sendcount, sendtype, comm, SHIM_TO_MPI, &sb);
    if (rc != MPI_SUCCESS)
        return rc;
    if (recvcount != 0 && source != MPI_PROC_NULL)
        rc = shim_stage("MPI_Sendrecv", recvbuf, recvcount, recvtype, comm, SHIM_FROM_MPI, &rb);
    if (rc != MPI_SUCCESS) {
        shim_release(&sb);
        return rc;
    }
    if (!sb.staged && !rb.staged)
        return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                             recvtype, source, recvtag, comm, status);
    MPI_Status local;
    MPI_Status *s = status == MPI_STATUS_IGNORE ? &local : status;
    rc = PMPI_Sendrecv(sb.staged ? shim_host_arg(&sb) : sendbuf, sendcount, sendtype, dest,
                       sendtag, rb.staged ? shim_host_arg(&rb) : recvbuf, recvcount, recvtype,
                       source, recvtag, comm, s);
    shim_release(&sb);
    if (!rb.staged)
        return rc;
    return shim_finish_recv("MPI_Sendrecv", rc, &rb, s, comm);
}

SHIM_EXPORT int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest, int sendtag,
                                     int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
    if (SHIM_LIKELY(!shim_active()) || count == 0 ||
        (dest == MPI_PROC_NULL && source == MPI_PROC_NULL))
        return PMPI_Sendrecv_replace(buf, count, dt, dest, sendtag, source, recvtag, comm,
                                     status);
    /* Copy to the host only what is sent, back only what is received. */
    int direction = (dest != MPI_PROC_NULL ? SHIM_TO_MPI : 0) |
                    (source != MPI_PROC_NULL ? SHIM_FROM_MPI : 0);
    struct shim_buf b;
    int rc = shim_stage("MPI_Sendrecv_replace", buf, count, dt, comm, direction, &b);
    if (rc != MPI_SUCCESS)
        return rc;
    if (!b.staged)
        return PMPI_Sendrecv_replace(buf, count, dt, dest, sendtag, source, recvtag, comm,
                                     status);
    MPI_Status local;
    MPI_Status *s = status == MPI_STATUS_IGNORE ? &local : status;
    rc = PMPI_Sendrecv_replace(shim_host_arg(&b), count, dt, dest, sendtag, source, recvtag,
                               comm, s);
    if (source == MPI_PROC_NULL) {
        shim_release(&b);
        return rc;
    }
    return shim_finish_recv("MPI_Sendrecv_replace", rc, &b, s, comm);
}

/* ---- persistent requests --------------------------------------------------------- */

/* The staging memory is taken at init and kept to MPI_Request_free; PMPI's
 * request is made on it. MPI_Start (shim_complete.c) copies a send's device
 * bytes in; each completion copies a receive's bytes out. */
#define SEND_INIT_WRAPPER(NAME)                                                                \
    SHIM_EXPORT int MPI_##NAME(const void *buf, int count, MPI_Datatype dt, int dest, int tag,   \
                               MPI_Comm comm, MPI_Request *req)                                \
    {                                                                                          \
        if (SHIM_LIKELY(!shim_active()) || count == 0 || dest == MPI_PROC_NULL)                \
            return PMPI_##NAME(buf, count, dt, dest, tag, comm, req);                          \
        struct shim_buf b;                                                                     \
        int rc = shim_stage("MPI_" #NAME, buf, count, dt, comm, 0, &b);                        \
        if (rc != MPI_SUCCESS)                                                                 \
            return rc;                                                                         \
        if (!b.staged)                                                                         \
            return PMPI_##NAME(buf, count, dt, dest, tag, comm, req);                          \
        rc = PMPI_##NAME(shim_host_arg(&b), count, dt, dest, tag, comm, req);                  \
        if (rc != MPI_SUCCESS) {                                                               \
            shim_release(&b);                                                                  \
            return rc;                                                                         \
        }                                                                                      \
        return shim_rec_add_persistent(req, 0, comm, "MPI_" #NAME, &b);                        \
    }

SEND_INIT_WRAPPER(Send_init)
SEND_INIT_WRAPPER(Ssend_init)
SEND_INIT_WRAPPER(Rsend_init)
SEND_INIT_WRAPPER(Bsend_init)

SHIM_EXPORT int MPI_Recv_init(void *buf, int count, MPI_Datatype dt, int source, int tag,
                              MPI_Comm comm, MPI_Request *req)
{
    if (SHIM_LIKELY(!shim_active()) || count == 0 || source == MPI_PROC_NULL)
        return PMPI_Recv_init(buf, count, dt, source, tag, comm, req);
    struct shim_buf b;
    int rc = shim_stage("MPI_Recv_init", buf, count, dt, comm, SHIM_FROM_MPI, &b);
    if (rc != MPI_SUCCESS)
        return rc;
    if (!b.staged)
        return PMPI_Recv_init(buf, count, dt, source, tag, comm, req);
    rc = PMPI_Recv_init(shim_host_arg(&b), count, dt, source, tag, comm, req);
    if (rc != MPI_SUCCESS) {
        shim_release(&b);
        return rc;
    }
    return shim_rec_add_persistent(req, 1, comm, "MPI_Recv_init", &b);
}
