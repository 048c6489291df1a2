/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MPI_Init*, MPI_Finalize and point-to-point (MPI_Start and MPI_Startall are
 * with the completion family, in shim_complete.c).
 *
 * Every wrapper starts with the one cached check (shim_p2p_active(): the
 * class p2p of CUCOPY_MPI_STAGE, then shim_active()); a host
 * buffer, a zero count or MPI_PROC_NULL then goes straight to PMPI with the
 * user's arguments. A device buffer is staged (one whose type map is not one
 * contiguous block packed, with its signature type: shim_types.c): sends
 * copy it to pinned host memory *in the call* (so MPI's
 * non-overtaking order is the order of the calls, exactly as without the
 * shim), receives land in host memory and are copied to the device before
 * the call that completes them returns. MPI-4 libraries get the large-count
 * MPI_X_c wrappers too, from the same macros.
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
    shim_defer_flush_if();
    if (shim_pending())
        shim_detached_progress(1);
    shim_pipe_before_finalize();
    int rc = PMPI_Finalize();
    shim_after_finalize();
    return rc;
}

/*
 * Each wrapper is a macro of (SFX, COUNT_T): once as MPI_X (int counts) and,
 * for an MPI-4 library (MPICH 4: MPI_VERSION 4), once more as the
 * large-count MPI_X_c (MPI_Count counts), the same code (SHIM_LARGE_COUNT,
 * shim.h).
 */

/* ---- pipelined messages: the receive-side check of host buffers ------------------ */

#define SHIM_UNPAREN(...) __VA_ARGS__

/* Return from a receive into the user's buffer (host memory): FN(ARGS...,
 * status), then, with pipelining on, the envelope check. */
#define HOST_RECV(NAME, FN, ARGS, buf, count, dt, comm, status)                       \
    do {                                                                                \
        if (SHIM_LIKELY(!shim_pipe_on()))                                               \
            return FN(SHIM_UNPAREN ARGS, status);                                      \
        MPI_Status hl_;                                                                 \
        MPI_Status *hs_ = (status) == MPI_STATUS_IGNORE ? &hl_ : (status);             \
        int hrc_ = FN(SHIM_UNPAREN ARGS, hs_);                                          \
        return shim_pipe_host_recv(NAME, hrc_, buf, count, dt, comm, hs_);             \
    } while (0)

/* Return from a nonblocking receive into the user's buffer: FN(ARGS..., req),
 * then, with pipelining on, a record whose completion checks for an envelope. */
#define HOST_IRECV(NAME, FN, ARGS, buf, count, dt, comm, req)                          \
    do {                                                                                \
        if (SHIM_LIKELY(!shim_pipe_on()))                                               \
            return FN(SHIM_UNPAREN ARGS, req);                                         \
        int hrc_ = FN(SHIM_UNPAREN ARGS, req);                                          \
        return hrc_ == MPI_SUCCESS ? shim_pipe_watch(req, NAME, buf, count, dt, comm, 0) \
                                   : hrc_;                                              \
    } while (0)

/* ---- blocking sends ------------------------------------------------------------- */

/* MPI_Bsend: MPI copies into the attached buffer before returning, so the
 * staging memory goes back to the pool at once, as for the others. */
#define SEND_WRAPPER(NAME, SFX, COUNT_T, PIPE)                                              \
    SHIM_EXPORT int MPI_##NAME##SFX(const void *buf, COUNT_T count, MPI_Datatype dt,         \
                                    int dest, int tag, MPI_Comm comm)                        \
    {                                                                                        \
        shim_defer_flush_if(); /* after the deferred sends before it (shim_defer.c) */       \
        if (SHIM_LIKELY(!shim_p2p_active()) || count == 0 || dest == MPI_PROC_NULL)          \
            return PMPI_##NAME##SFX(buf, count, dt, dest, tag, comm);                        \
        struct shim_buf b;                                                                   \
        int rc;                                                                              \
        if (PIPE && shim_pipe_on() &&                                                        \
            shim_pipe_send("MPI_" #NAME #SFX, PIPE, buf, count, dt, dest, tag, comm, &rc))   \
            return rc;                                                                       \
        rc = shim_stage("MPI_" #NAME #SFX, buf, count, dt, comm, SHIM_TO_MPI, &b);       \
        if (rc != MPI_SUCCESS)                                                               \
            return rc;                                                                       \
        if (!b.staged)                                                                       \
            return PMPI_##NAME##SFX(buf, count, dt, dest, tag, comm);                        \
        rc = PMPI_##NAME##SFX(shim_host_arg(&b), count, shim_type_arg(&b, dt), dest, tag,    \
                              comm);                                                         \
        shim_release(&b);                                                                    \
        return rc;                                                                           \
    }

/* Send and Ssend may be pipelined; Rsend and Bsend never are (docs/mpi.md). */
#define SEND_WRAPPERS(SFX, COUNT_T)                     \
    SEND_WRAPPER(Send, SFX, COUNT_T, SHIM_PIPE_SEND)    \
    SEND_WRAPPER(Ssend, SFX, COUNT_T, SHIM_PIPE_SSEND)  \
    SEND_WRAPPER(Rsend, SFX, COUNT_T, SHIM_PIPE_NONE)   \
    SEND_WRAPPER(Bsend, SFX, COUNT_T, SHIM_PIPE_NONE)

/* ---- nonblocking sends ---------------------------------------------------------- */

/* The staging memory stays with the request until it completes. A
 * contiguous device buffer's copy runs after the call (CUCOPY_MPI_ISEND=async:
 * the send is deferred, shim_defer.c; a pipelined one's chunks too); every
 * other send is posted after the deferred ones before it. */
#define ISEND_WRAPPER(NAME, SFX, COUNT_T, PIPE, DEFER)                                      \
    SHIM_EXPORT int MPI_##NAME##SFX(const void *buf, COUNT_T count, MPI_Datatype dt,         \
                                    int dest, int tag, MPI_Comm comm, MPI_Request *req)      \
    {                                                                                        \
        if (SHIM_LIKELY(!shim_p2p_active()) || count == 0 || dest == MPI_PROC_NULL) {        \
            shim_defer_flush_if();                                                           \
            return PMPI_##NAME##SFX(buf, count, dt, dest, tag, comm, req);                   \
        }                                                                                    \
        struct shim_buf b;                                                                   \
        int rc;                                                                              \
        if (PIPE && shim_pipe_on() &&                                                        \
            shim_pipe_isend("MPI_" #NAME #SFX, PIPE, buf, count, dt, dest, tag, comm, req,   \
                            &rc))                                                            \
            return rc;                                                                       \
        rc = shim_stage("MPI_" #NAME #SFX, buf, count, dt, comm,                             \
                        SHIM_TO_MPI | (shim_isend_async ? SHIM_DEFER_COPY : 0), &b);         \
        if (rc != MPI_SUCCESS)                                                               \
            return rc;                                                                       \
        if (b.staged && b.layout == NULL && shim_isend_async) {                              \
            if (DEFER != SHIM_DEFER_NONE && shim_defer_args_ok(dest, tag, comm) &&           \
                shim_defer_isend("MPI_" #NAME #SFX, DEFER, &b, count, dt, dest, tag, comm,   \
                                 req))                                                       \
                return MPI_SUCCESS;                                                          \
            rc = shim_restage("MPI_" #NAME #SFX, &b, comm); /* the copy not made */          \
            if (rc != MPI_SUCCESS) {                                                         \
                shim_release(&b);                                                            \
                return rc;                                                                   \
            }                                                                                \
        }                                                                                    \
        shim_defer_flush_if();                                                               \
        if (!b.staged)                                                                       \
            return PMPI_##NAME##SFX(buf, count, dt, dest, tag, comm, req);                   \
        rc = PMPI_##NAME##SFX(shim_host_arg(&b), count, shim_type_arg(&b, dt), dest, tag,    \
                              comm, req);                                                    \
        if (rc != MPI_SUCCESS) {                                                             \
            shim_release(&b);                                                                \
            return rc;                                                                       \
        }                                                                                    \
        return shim_rec_add(req, 0, comm, "MPI_" #NAME #SFX, &b);                            \
    }

#define ISEND_WRAPPERS(SFX, COUNT_T)                                          \
    ISEND_WRAPPER(Isend, SFX, COUNT_T, SHIM_PIPE_ISEND, SHIM_DEFER_ISEND)     \
    ISEND_WRAPPER(Issend, SFX, COUNT_T, SHIM_PIPE_ISSEND, SHIM_DEFER_ISSEND)  \
    ISEND_WRAPPER(Irsend, SFX, COUNT_T, SHIM_PIPE_NONE, SHIM_DEFER_IRSEND)    \
    ISEND_WRAPPER(Ibsend, SFX, COUNT_T, SHIM_PIPE_NONE, SHIM_DEFER_NONE)

/* ---- receives that take a held message first ------------------------------------ */

/* With pipelining on, a probe may have received a message and held it
 * (shim_held.c): every receive takes the first held one it matches before
 * asking MPI. These stand for the PMPI calls of the wrappers below. A
 * Sendrecv whose receive is served so sends as MPI_Sendrecv would (posted
 * first, waited for after); Sendrecv_replace sends its buffer before
 * receiving into it. */
#define HELD_FNS(SFX, COUNT_T)                                                                  \
    static int held_Recv##SFX(void *buf, COUNT_T count, MPI_Datatype dt, int source, int tag,  \
                              MPI_Comm comm, MPI_Status *s)                                    \
    {                                                                                          \
        struct held *h = shim_held_any() ? shim_held_take(comm, source, tag) : NULL;          \
        if (h != NULL)                                                                         \
            return shim_held_recv("MPI_Recv" #SFX, h, buf, count, dt, comm, s);                \
        return PMPI_Recv##SFX(buf, count, dt, source, tag, comm, s);                           \
    }                                                                                          \
                                                                                               \
    static int held_Irecv##SFX(void *buf, COUNT_T count, MPI_Datatype dt, int source, int tag, \
                               MPI_Comm comm, MPI_Request *req)                                \
    {                                                                                          \
        struct held *h = shim_held_any() ? shim_held_take(comm, source, tag) : NULL;          \
        if (h != NULL)                                                                         \
            return shim_held_irecv("MPI_Irecv" #SFX, h, buf, count, dt, comm, req);            \
        return PMPI_Irecv##SFX(buf, count, dt, source, tag, comm, req);                        \
    }                                                                                          \
                                                                                               \
    static int held_Mrecv##SFX(void *buf, COUNT_T count, MPI_Datatype dt, MPI_Message *m,     \
                               MPI_Status *s)                                                  \
    {                                                                                          \
        return shim_held_any() ? shim_held_mrecv(buf, count, dt, m, s)                        \
                               : PMPI_Mrecv##SFX(buf, count, dt, m, s);                        \
    }                                                                                          \
                                                                                               \
    static int held_Imrecv##SFX(void *buf, COUNT_T count, MPI_Datatype dt, MPI_Message *m,    \
                                MPI_Request *req)                                              \
    {                                                                                          \
        return shim_held_any() ? shim_held_imrecv(buf, count, dt, m, req)                     \
                               : PMPI_Imrecv##SFX(buf, count, dt, m, req);                     \
    }                                                                                          \
                                                                                               \
    static int held_Sendrecv##SFX(const void *sendbuf, COUNT_T sendcount,                      \
                                  MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf, \
                                  COUNT_T recvcount, MPI_Datatype recvtype, int source,        \
                                  int recvtag, MPI_Comm comm, MPI_Status *s)                   \
    {                                                                                          \
        struct held *h = shim_held_any() ? shim_held_take(comm, source, recvtag) : NULL;      \
        if (h == NULL)                                                                         \
            return PMPI_Sendrecv##SFX(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf,    \
                                      recvcount, recvtype, source, recvtag, comm, s);          \
        MPI_Request sreq = MPI_REQUEST_NULL;                                                   \
        int rc = PMPI_Isend##SFX(sendbuf, sendcount, sendtype, dest, sendtag, comm, &sreq);    \
        int rrc = shim_held_recv("MPI_Sendrecv" #SFX, h, recvbuf, recvcount, recvtype, comm,   \
                                 s);                                                           \
        if (rc == MPI_SUCCESS)                                                                 \
            rc = PMPI_Wait(&sreq, MPI_STATUS_IGNORE);                                          \
        return rc != MPI_SUCCESS ? rc : rrc;                                                   \
    }                                                                                          \
                                                                                               \
    static int held_Sendrecv_replace##SFX(void *buf, COUNT_T count, MPI_Datatype dt, int dest, \
                                          int sendtag, int source, int recvtag, MPI_Comm comm, \
                                          MPI_Status *s)                                       \
    {                                                                                          \
        struct held *h = shim_held_any() ? shim_held_take(comm, source, recvtag) : NULL;      \
        if (h == NULL)                                                                         \
            return PMPI_Sendrecv_replace##SFX(buf, count, dt, dest, sendtag, source, recvtag,  \
                                              comm, s);                                        \
        int rc = PMPI_Send##SFX(buf, count, dt, dest, sendtag, comm);                          \
        int rrc = shim_held_recv("MPI_Sendrecv_replace" #SFX, h, buf, count, dt, comm, s);     \
        return rc != MPI_SUCCESS ? rc : rrc;                                                   \
    }

HELD_FNS(, int)
#if SHIM_LARGE_COUNT
HELD_FNS(_c, MPI_Count)
#endif

/* ---- receives ------------------------------------------------------------------- */

/* After a blocking receive into staging memory: the bytes MPI wrote go to the
 * device; the status goes to the user (who may have passed MPI_STATUS_IGNORE). */
int shim_finish_recv(const char *call, int rc, struct shim_buf *b, const MPI_Status *s,
                     MPI_Comm comm)
{
    if (shim_pipe_is_envelope(rc, s, b->host)) {
        /* The status is the caller's, writable (its count becomes the message's). */
        rc = shim_pipe_recv(call, b, (MPI_Status *)s, comm);
    } else if (shim_copy_ok(rc)) {
        int rc2 = shim_unstage(call, b, shim_received_bytes(s), comm);
        if (rc == MPI_SUCCESS)
            rc = rc2;
    }
    shim_release(b);
    return rc;
}

#define RECV_WRAPPERS(SFX, COUNT_T)                                                         \
    SHIM_EXPORT int MPI_Recv##SFX(void *buf, COUNT_T count, MPI_Datatype dt, int source,    \
                                  int tag, MPI_Comm comm, MPI_Status *status)              \
    {                                                                                       \
        shim_defer_flush_if();                                                              \
        if (SHIM_LIKELY(!shim_p2p_active()) || count == 0 || source == MPI_PROC_NULL)       \
            HOST_RECV("MPI_Recv" #SFX, held_Recv##SFX, (buf, count, dt, source, tag, comm),  \
                      buf, count, dt, comm, status);                                        \
        struct shim_buf b;                                                                  \
        int rc = shim_stage("MPI_Recv" #SFX, buf, count, dt, comm, SHIM_FROM_MPI, &b);      \
        if (rc != MPI_SUCCESS)                                                              \
            return rc;                                                                      \
        if (!b.staged)                                                                      \
            HOST_RECV("MPI_Recv" #SFX, held_Recv##SFX, (buf, count, dt, source, tag, comm),  \
                      buf, count, dt, comm, status);                                        \
        MPI_Status local;                                                                   \
        MPI_Status *s = status == MPI_STATUS_IGNORE ? &local : status;                      \
        rc = held_Recv##SFX(shim_host_arg(&b), count, shim_type_arg(&b, dt), source, tag,   \
                            comm, s);                                                       \
        return shim_finish_recv("MPI_Recv" #SFX, rc, &b, s, comm);                          \
    }                                                                                       \
                                                                                            \
    SHIM_EXPORT int MPI_Irecv##SFX(void *buf, COUNT_T count, MPI_Datatype dt, int source,   \
                                   int tag, MPI_Comm comm, MPI_Request *req)               \
    {                                                                                       \
        if (SHIM_LIKELY(!shim_p2p_active()) || count == 0 || source == MPI_PROC_NULL)       \
            HOST_IRECV("MPI_Irecv" #SFX, held_Irecv##SFX, (buf, count, dt, source, tag, comm), \
                       buf, count, dt, comm, req);                                          \
        struct shim_buf b;                                                                  \
        int rc = shim_stage("MPI_Irecv" #SFX, buf, count, dt, comm, SHIM_FROM_MPI, &b);     \
        if (rc != MPI_SUCCESS)                                                              \
            return rc;                                                                      \
        if (!b.staged)                                                                      \
            HOST_IRECV("MPI_Irecv" #SFX, held_Irecv##SFX, (buf, count, dt, source, tag, comm), \
                       buf, count, dt, comm, req);                                          \
        rc = held_Irecv##SFX(shim_host_arg(&b), count, shim_type_arg(&b, dt), source, tag,  \
                             comm, req);                                                    \
        if (rc != MPI_SUCCESS) {                                                            \
            shim_release(&b);                                                               \
            return rc;                                                                      \
        }                                                                                   \
        return shim_rec_add(req, 1, comm, "MPI_Irecv" #SFX, &b);                            \
    }                                                                                       \
                                                                                            \
    /* Matched receives: the message was matched by MPI_(I)mprobe already; the same      \
     * staging as MPI_Recv / MPI_Irecv. */                                                  \
    SHIM_EXPORT int MPI_Mrecv##SFX(void *buf, COUNT_T count, MPI_Datatype dt,               \
                                   MPI_Message *message, MPI_Status *status)               \
    {                                                                                       \
        shim_defer_flush_if();                                                              \
        if (SHIM_LIKELY(!shim_p2p_active()) || count == 0 || *message == MPI_MESSAGE_NO_PROC) \
            HOST_RECV("MPI_Mrecv" #SFX, held_Mrecv##SFX, (buf, count, dt, message), buf,     \
                      count, dt, MPI_COMM_WORLD, status);                                   \
        struct shim_buf b;                                                                  \
        int rc = shim_stage("MPI_Mrecv" #SFX, buf, count, dt, MPI_COMM_WORLD, SHIM_FROM_MPI, \
                            &b);                                                            \
        if (rc != MPI_SUCCESS)                                                              \
            return rc;                                                                      \
        if (!b.staged)                                                                      \
            HOST_RECV("MPI_Mrecv" #SFX, held_Mrecv##SFX, (buf, count, dt, message), buf,     \
                      count, dt, MPI_COMM_WORLD, status);                                   \
        MPI_Status local;                                                                   \
        MPI_Status *s = status == MPI_STATUS_IGNORE ? &local : status;                      \
        rc = held_Mrecv##SFX(shim_host_arg(&b), count, shim_type_arg(&b, dt), message,      \
                             s);                                                            \
        return shim_finish_recv("MPI_Mrecv" #SFX, rc, &b, s, MPI_COMM_WORLD);               \
    }                                                                                       \
                                                                                            \
    SHIM_EXPORT int MPI_Imrecv##SFX(void *buf, COUNT_T count, MPI_Datatype dt,              \
                                    MPI_Message *message, MPI_Request *req)                \
    {                                                                                       \
        if (SHIM_LIKELY(!shim_p2p_active()) || count == 0 || *message == MPI_MESSAGE_NO_PROC) \
            HOST_IRECV("MPI_Imrecv" #SFX, held_Imrecv##SFX, (buf, count, dt, message), buf,  \
                       count, dt, MPI_COMM_WORLD, req);                                     \
        struct shim_buf b;                                                                  \
        int rc = shim_stage("MPI_Imrecv" #SFX, buf, count, dt, MPI_COMM_WORLD,              \
                            SHIM_FROM_MPI, &b);                                             \
        if (rc != MPI_SUCCESS)                                                              \
            return rc;                                                                      \
        if (!b.staged)                                                                      \
            HOST_IRECV("MPI_Imrecv" #SFX, held_Imrecv##SFX, (buf, count, dt, message), buf,  \
                       count, dt, MPI_COMM_WORLD, req);                                     \
        rc = held_Imrecv##SFX(shim_host_arg(&b), count, shim_type_arg(&b, dt), message,     \
                              req);                                                         \
        if (rc != MPI_SUCCESS) {                                                            \
            shim_release(&b);                                                               \
            return rc;                                                                      \
        }                                                                                   \
        return shim_rec_add(req, 1, MPI_COMM_WORLD, "MPI_Imrecv" #SFX, &b);                 \
    }

/* ---- send and receive in one call ------------------------------------------------ */

#define SENDRECV_WRAPPERS(SFX, COUNT_T)                                                       \
    SHIM_EXPORT int MPI_Sendrecv##SFX(const void *sendbuf, COUNT_T sendcount,                 \
                                      MPI_Datatype sendtype, int dest, int sendtag,           \
                                      void *recvbuf, COUNT_T recvcount, MPI_Datatype recvtype, \
                                      int source, int recvtag, MPI_Comm comm,                 \
                                      MPI_Status *status)                                     \
    {                                                                                         \
        shim_defer_flush_if();                                                                \
        if (SHIM_LIKELY(!shim_p2p_active()))                                                  \
            HOST_RECV("MPI_Sendrecv" #SFX, held_Sendrecv##SFX,                                \
                      (sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,        \
                       recvtype, source, recvtag, comm),                                       \
                      recvbuf, recvcount, recvtype, comm, status);                            \
        struct shim_buf sb = {0}, rb = {0};                                                   \
        int rc = MPI_SUCCESS;                                                                 \
        if (sendcount != 0 && dest != MPI_PROC_NULL)                                          \
            rc = shim_stage("MPI_Sendrecv" #SFX, sendbuf, sendcount, sendtype, comm,          \
                            SHIM_TO_MPI, &sb);                                                \
        if (rc != MPI_SUCCESS)                                                                \
            return rc;                                                                        \
        if (recvcount != 0 && source != MPI_PROC_NULL)                                        \
            rc = shim_stage("MPI_Sendrecv" #SFX, recvbuf, recvcount, recvtype, comm,          \
                            SHIM_FROM_MPI, &rb);                                              \
        if (rc != MPI_SUCCESS) {                                                              \
            shim_release(&sb);                                                                \
            return rc;                                                                        \
        }                                                                                     \
        if (!sb.staged && !rb.staged)                                                         \
            HOST_RECV("MPI_Sendrecv" #SFX, held_Sendrecv##SFX,                                \
                      (sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,        \
                       recvtype, source, recvtag, comm),                                       \
                      recvbuf, recvcount, recvtype, comm, status);                            \
        MPI_Status local;                                                                     \
        MPI_Status *s = status == MPI_STATUS_IGNORE ? &local : status;                        \
        rc = held_Sendrecv##SFX(sb.staged ? shim_host_arg(&sb) : sendbuf, sendcount,          \
                                shim_type_arg(&sb, sendtype), dest, sendtag,                  \
                                rb.staged ? shim_host_arg(&rb) : recvbuf, recvcount,          \
                                shim_type_arg(&rb, recvtype), source, recvtag, comm, s);      \
        shim_release(&sb);                                                                    \
        if (!rb.staged)                                                                       \
            return shim_pipe_host_recv("MPI_Sendrecv" #SFX, rc, recvbuf, recvcount, recvtype, \
                                       comm, s);                                              \
        return shim_finish_recv("MPI_Sendrecv" #SFX, rc, &rb, s, comm);                       \
    }                                                                                         \
                                                                                              \
    /* Copy to the host only what is sent, back only what is received. */                     \
    SHIM_EXPORT int MPI_Sendrecv_replace##SFX(void *buf, COUNT_T count, MPI_Datatype dt,      \
                                              int dest, int sendtag, int source, int recvtag, \
                                              MPI_Comm comm, MPI_Status *status)              \
    {                                                                                         \
        shim_defer_flush_if();                                                                \
        if (SHIM_LIKELY(!shim_p2p_active()) || count == 0 ||                                  \
            (dest == MPI_PROC_NULL && source == MPI_PROC_NULL))                               \
            HOST_RECV("MPI_Sendrecv_replace" #SFX, held_Sendrecv_replace##SFX,                \
                      (buf, count, dt, dest, sendtag, source, recvtag, comm), buf, count, dt, \
                      comm, status);                                                          \
        int direction = (dest != MPI_PROC_NULL ? SHIM_TO_MPI : 0) |                           \
                        (source != MPI_PROC_NULL ? SHIM_FROM_MPI : 0);                        \
        struct shim_buf b;                                                                    \
        int rc = shim_stage("MPI_Sendrecv_replace" #SFX, buf, count, dt, comm, direction,     \
                            &b);                                                              \
        if (rc != MPI_SUCCESS)                                                                \
            return rc;                                                                        \
        if (!b.staged)                                                                        \
            HOST_RECV("MPI_Sendrecv_replace" #SFX, held_Sendrecv_replace##SFX,                \
                      (buf, count, dt, dest, sendtag, source, recvtag, comm), buf, count, dt, \
                      comm, status);                                                          \
        MPI_Status local;                                                                     \
        MPI_Status *s = status == MPI_STATUS_IGNORE ? &local : status;                        \
        rc = held_Sendrecv_replace##SFX(shim_host_arg(&b), count, shim_type_arg(&b, dt),      \
                                        dest, sendtag, source, recvtag, comm, s);             \
        if (source == MPI_PROC_NULL) {                                                        \
            shim_release(&b);                                                                 \
            return rc;                                                                        \
        }                                                                                     \
        return shim_finish_recv("MPI_Sendrecv_replace" #SFX, rc, &b, s, comm);                \
    }

/* ---- persistent requests --------------------------------------------------------- */

/* A persistent request on the user's (host) buffer; a receive's is recorded
 * with pipelining on, so that each completion checks for an envelope. */
#define INIT_HOST(NAME, SFX, RECV)                                                            \
    (RECV && shim_pipe_on() && count != 0 && peer != MPI_PROC_NULL                            \
         ? shim_pipe_init_host(PMPI_##NAME##SFX(buf, count, dt, peer, tag, comm, req), req,   \
                               "MPI_" #NAME #SFX, (void *)buf, count, dt, comm)              \
         : PMPI_##NAME##SFX(buf, count, dt, peer, tag, comm, req))

static int shim_pipe_init_host(int rc, MPI_Request *req, const char *call, void *buf,
                               MPI_Count count, MPI_Datatype dt, MPI_Comm comm)
{
    return rc == MPI_SUCCESS ? shim_pipe_watch(req, call, buf, count, dt, comm, 1) : rc;
}

/* The staging memory is taken at init and kept to MPI_Request_free; PMPI's
 * request is made on it. MPI_Start (shim_complete.c) copies a send's device
 * bytes in; each completion copies a receive's bytes out. */
#define INIT_WRAPPER(NAME, SFX, COUNT_T, RECV, CONST)                                        \
    SHIM_EXPORT int MPI_##NAME##SFX(CONST void *buf, COUNT_T count, MPI_Datatype dt,     \
                                    int peer, int tag, MPI_Comm comm, MPI_Request *req)       \
    {                                                                                         \
        if (SHIM_LIKELY(!shim_p2p_active()) || count == 0 || peer == MPI_PROC_NULL)           \
            return INIT_HOST(NAME, SFX, RECV);                                                \
        struct shim_buf b;                                                                    \
        int rc = shim_stage("MPI_" #NAME #SFX, buf, count, dt, comm,                          \
                            RECV ? SHIM_FROM_MPI : 0, &b);                                    \
        if (rc != MPI_SUCCESS)                                                                \
            return rc;                                                                        \
        if (!b.staged)                                                                        \
            return INIT_HOST(NAME, SFX, RECV);                                                \
        rc = PMPI_##NAME##SFX(shim_host_arg(&b), count, shim_type_arg(&b, dt), peer, tag,     \
                              comm, req);                                                     \
        if (rc != MPI_SUCCESS) {                                                              \
            shim_release(&b);                                                                 \
            return rc;                                                                        \
        }                                                                                     \
        return shim_rec_add_persistent(req, RECV, comm, "MPI_" #NAME #SFX, &b);               \
    }

#define INIT_WRAPPERS(SFX, COUNT_T)                 \
    INIT_WRAPPER(Send_init, SFX, COUNT_T, 0, const)  \
    INIT_WRAPPER(Ssend_init, SFX, COUNT_T, 0, const) \
    INIT_WRAPPER(Rsend_init, SFX, COUNT_T, 0, const) \
    INIT_WRAPPER(Bsend_init, SFX, COUNT_T, 0, const) \
    INIT_WRAPPER(Recv_init, SFX, COUNT_T, 1, )

/* ---- the definitions ------------------------------------------------------------- */

SEND_WRAPPERS(, int)
ISEND_WRAPPERS(, int)
RECV_WRAPPERS(, int)
SENDRECV_WRAPPERS(, int)
INIT_WRAPPERS(, int)

#if SHIM_LARGE_COUNT
SEND_WRAPPERS(_c, MPI_Count)
ISEND_WRAPPERS(_c, MPI_Count)
RECV_WRAPPERS(_c, MPI_Count)
SENDRECV_WRAPPERS(_c, MPI_Count)
INIT_WRAPPERS(_c, MPI_Count)
#endif
