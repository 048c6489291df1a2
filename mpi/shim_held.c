/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Probes of pipelined messages (docs/mpi.md, "Pipelined messages: probes"):
 * with pipelining on, a probe that sees a message of SHIM_PIPE_ENV_BYTES
 * cannot tell an envelope from a user's 40-byte message without receiving
 * it. So it receives it (PMPI_Mprobe + PMPI_Mrecv, on its exact source) and
 * *holds* it here, with the messages of that source before it (an earlier
 * message of another tag must stay first for a later MPI_ANY_TAG receive):
 * the held messages of a (communicator, source) are always the front of
 * that source's queue, in order. The probe then reports the held message:
 * an envelope's status counts the message's bytes, not its 40.
 *
 * Every receive consults the held messages before MPI (shim_held_take: one
 * atomic load when none is held), and takes the first that matches; it is
 * delivered by MPI itself: sent to this process on a private communicator
 * and received there with the user's buffer and datatype (so partial
 * elements, counts and truncation are MPI's), the status then given the
 * held message's source and tag. A receive that got an envelope then takes
 * the stream as before (shim_pipe.c). A nonblocking receive served so
 * completes in the call: its request is a generalized request, complete at
 * once, whose status is the held message's. MPI_Mprobe of a held message
 * hands out a real message handle, that of the message sent to this
 * process, remembered with the held message's source and tag for
 * MPI_Mrecv / MPI_Imrecv.
 */
#include "shim.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct held {
    struct held *next;
    MPI_Comm comm;
    int src, tag;
    size_t bytes;
    char *data;        /* the message as bytes */
    MPI_Count reports; /* bytes a probe reports: an envelope's message, else bytes */
    MPI_Message msg;   /* handed out by a matched probe: the handle of its self-send */
};

_Atomic int shim_held_count; /* held messages and handed-out handles */

static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;
static struct held *held_head, **held_tail = &held_head;
static struct held *handed; /* handed out by MPI_(I)mprobe, until MPI_(I)mrecv */

static MPI_Comm held_comm = MPI_COMM_NULL;
static int held_rank, held_tag_ub = 32767;
static _Atomic unsigned held_next_tag;

void shim_held_after_init(int tag_ub, int world_rank)
{
    held_tag_ub = tag_ub;
    held_rank = world_rank;
    if (PMPI_Comm_dup(MPI_COMM_WORLD, &held_comm) != MPI_SUCCESS ||
        PMPI_Comm_set_errhandler(held_comm, MPI_ERRORS_RETURN) != MPI_SUCCESS) {
        fprintf(stderr, "cucopy_mpi: CUCOPY_MPI_PIPELINE_KB: cannot make the private "
                        "communicator of probed messages\n");
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static void held_free(struct held *h)
{
    free(h->data);
    free(h);
    atomic_fetch_sub_explicit(&shim_held_count, 1, memory_order_release);
}

void shim_held_before_finalize(void)
{
    /* Messages probed and never received: the program's to answer for;
     * their memory is ours. */
    pthread_mutex_lock(&held_mu);
    while (held_head != NULL) {
        struct held *h = held_head;
        held_head = h->next;
        held_free(h);
    }
    held_tail = &held_head;
    while (handed != NULL) { /* handed out by MPI_Mprobe, never received */
        struct held *h = handed;
        handed = h->next;
        held_free(h);
    }
    pthread_mutex_unlock(&held_mu);
    if (held_comm != MPI_COMM_NULL)
        PMPI_Comm_free(&held_comm);
}

static int held_matches(const struct held *h, MPI_Comm comm, int source, int tag)
{
    return h->comm == comm && (source == MPI_ANY_SOURCE || source == h->src) &&
           (tag == MPI_ANY_TAG || tag == h->tag);
}

/* The first held message that (comm, source, tag) matches, unlinked when
 * @p take. Under held_mu. */
static struct held *held_find(MPI_Comm comm, int source, int tag, int take)
{
    for (struct held **at = &held_head; *at != NULL; at = &(*at)->next) {
        struct held *h = *at;
        if (!held_matches(h, comm, source, tag))
            continue;
        if (take) {
            *at = h->next;
            if (held_tail == &h->next)
                held_tail = at;
            h->next = NULL;
        }
        return h;
    }
    return NULL;
}

struct held *shim_held_take(MPI_Comm comm, int source, int tag)
{
    if (source == MPI_PROC_NULL)
        return NULL;
    pthread_mutex_lock(&held_mu);
    struct held *h = held_find(comm, source, tag, 1);
    pthread_mutex_unlock(&held_mu);
    return h;
}

/* A held message's status, as MPI would have made it for the message. */
static void held_status(const struct held *h, MPI_Count bytes, int error, MPI_Status *s)
{
    if (s == MPI_STATUS_IGNORE)
        return;
    s->MPI_SOURCE = h->src;
    s->MPI_TAG = h->tag;
    s->MPI_ERROR = error;
    PMPI_Status_set_elements_x(s, MPI_BYTE, bytes);
    PMPI_Status_set_cancelled(s, 0);
}

/* Receive message @p m (@p s: its probe's status) and hold it, at the end. */
static int held_receive(MPI_Message *m, const MPI_Status *s, MPI_Comm comm)
{
    MPI_Count n = 0;
    int rc = PMPI_Get_elements_x(s, MPI_BYTE, &n);
    struct held *h = calloc(1, sizeof *h);
    char *data = malloc(n > 0 ? (size_t)n : 1);
    if (rc != MPI_SUCCESS || n < 0 || n > INT_MAX || h == NULL || data == NULL) {
        free(h);
        free(data);
        /* Nothing sensible is left: the message is matched and must be received. */
        PMPI_Mrecv(NULL, 0, MPI_BYTE, m, MPI_STATUS_IGNORE);
        return shim_error(comm, MPI_ERR_NO_MEM, "MPI_Probe",
                          "no memory to hold a probed message (pipelining is on)");
    }
    rc = PMPI_Mrecv(data, (int)n, MPI_BYTE, m, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        free(h);
        free(data);
        return rc;
    }
    *h = (struct held){.comm = comm, .src = s->MPI_SOURCE, .tag = s->MPI_TAG, .bytes = (size_t)n,
                       .data = data, .reports = n, .msg = MPI_MESSAGE_NULL};
    uint64_t total = 0;
    if (shim_pipe_envelope_total(data, (size_t)n, &total))
        h->reports = (MPI_Count)total;
    atomic_fetch_add_explicit(&shim_held_count, 1, memory_order_relaxed);
    pthread_mutex_lock(&held_mu);
    *held_tail = h;
    held_tail = &h->next;
    pthread_mutex_unlock(&held_mu);
    return MPI_SUCCESS;
}

/* A probe saw a message of the envelope's size from s->MPI_SOURCE with tag
 * s->MPI_TAG: hold that source's messages up to and including it (the
 * first of that tag from that source is the one the probe saw). */
static int held_up_to(const MPI_Status *s, MPI_Comm comm)
{
    for (;;) {
        MPI_Message m;
        MPI_Status st;
        int flag = 0;
        /* Nonblocking: another thread may have received the probed message
         * meanwhile (then nothing more is held, and the probe looks again). */
        int rc = PMPI_Improbe(s->MPI_SOURCE, MPI_ANY_TAG, comm, &flag, &m, &st);
        if (rc != MPI_SUCCESS || !flag)
            return rc;
        rc = held_receive(&m, &st, comm);
        if (rc != MPI_SUCCESS || st.MPI_TAG == s->MPI_TAG)
            return rc;
    }
}

/* Is what the probe saw a candidate (the envelope's size)? Not through
 * shim_received_bytes: MPICH 4.0's probes leave the status's cancelled bit
 * as it was (seen with an uninitialized status: taken for cancelled). */
static int held_candidate(const MPI_Status *s)
{
    MPI_Count n = 0;
    return s->MPI_SOURCE != MPI_PROC_NULL && PMPI_Get_elements_x(s, MPI_BYTE, &n) == MPI_SUCCESS &&
           n == SHIM_PIPE_ENV_BYTES;
}

/* MPI_Probe (@p blocking) and MPI_Iprobe, pipelining on. */
static int held_probe(int source, int tag, MPI_Comm comm, int blocking, int *flag,
                      MPI_Status *status)
{
    MPI_Status local;
    MPI_Status *s = status == MPI_STATUS_IGNORE ? &local : status;
    for (;;) {
        if (atomic_load_explicit(&shim_held_count, memory_order_acquire) != 0) {
            pthread_mutex_lock(&held_mu);
            struct held *h = held_find(comm, source, tag, 0);
            if (h != NULL)
                held_status(h, h->reports, MPI_SUCCESS, s);
            pthread_mutex_unlock(&held_mu);
            if (h != NULL) {
                *flag = 1;
                return MPI_SUCCESS;
            }
        }
        int rc = blocking ? PMPI_Probe(source, tag, comm, s)
                          : PMPI_Iprobe(source, tag, comm, flag, s);
        if (blocking)
            *flag = 1;
        if (rc != MPI_SUCCESS || !*flag || !held_candidate(s))
            return rc;
        rc = held_up_to(s, comm);
        if (rc != MPI_SUCCESS)
            return rc;
        /* Found held now (also by a blocking probe: no other receive took it,
         * unless another thread did, and then the probe looks again). */
    }
}

SHIM_EXPORT int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    shim_defer_flush_if(); /* blocking: post the deferred sends first (shim_defer.c) */
    if (SHIM_LIKELY(!shim_pipe_on()))
        return PMPI_Probe(source, tag, comm, status);
    int flag = 0;
    return held_probe(source, tag, comm, 1, &flag, status);
}

SHIM_EXPORT int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)
{
    shim_defer_poll();
    if (SHIM_LIKELY(!shim_pipe_on()))
        return PMPI_Iprobe(source, tag, comm, flag, status);
    return held_probe(source, tag, comm, 0, flag, status);
}

/* Hand held message @p h out as message handle *msg: sent to this process
 * on the private communicator, matched there; remembered until received. */
static int held_hand_out(struct held *h, MPI_Message *msg, MPI_Status *s)
{
    int tag = (int)(atomic_fetch_add(&held_next_tag, 1) % (unsigned)held_tag_ub);
    MPI_Request sreq;
    MPI_Status st;
    MPI_Comm comm = h->comm;
    int rc = PMPI_Isend(h->data, (int)h->bytes, MPI_BYTE, held_rank, tag, held_comm, &sreq);
    if (rc != MPI_SUCCESS)
        held_free(h);
    else if ((rc = PMPI_Mprobe(held_rank, tag, held_comm, msg, &st)) != MPI_SUCCESS) {
        PMPI_Request_free(&sreq); /* h's memory stays: its send may still read it */
        atomic_fetch_sub_explicit(&shim_held_count, 1, memory_order_release);
    }
    if (rc != MPI_SUCCESS) {
        int eclass = MPI_ERR_OTHER;
        PMPI_Error_class(rc, &eclass);
        return shim_error(comm, eclass, "MPI_Mprobe", "handing out a probed message");
    }
    /* The send completes when MPI_Mrecv receives it; h->data lives until then. */
    PMPI_Request_free(&sreq);
    h->msg = *msg;
    held_status(h, h->reports, MPI_SUCCESS, s);
    pthread_mutex_lock(&held_mu);
    h->next = handed;
    handed = h;
    pthread_mutex_unlock(&held_mu);
    return MPI_SUCCESS;
}

/* MPI_Mprobe (@p blocking) and MPI_Improbe, pipelining on. */
static int held_mprobe(int source, int tag, MPI_Comm comm, int blocking, int *flag,
                       MPI_Message *msg, MPI_Status *status)
{
    MPI_Status local;
    MPI_Status *s = status == MPI_STATUS_IGNORE ? &local : status;
    struct held *h = NULL;
    if (atomic_load_explicit(&shim_held_count, memory_order_acquire) != 0)
        h = shim_held_take(comm, source, tag);
    if (h == NULL) {
        int rc = blocking ? PMPI_Mprobe(source, tag, comm, msg, s)
                          : PMPI_Improbe(source, tag, comm, flag, msg, s);
        if (blocking)
            *flag = 1;
        if (rc != MPI_SUCCESS || !*flag || !held_candidate(s))
            return rc;
        /* The matched message is this one alone: receive it to look. */
        rc = held_receive(msg, s, comm);
        if (rc != MPI_SUCCESS)
            return rc;
        /* The first held one of its source and tag (an earlier one would
         * have matched above), unless another thread took it: look again. */
        h = shim_held_take(comm, s->MPI_SOURCE, s->MPI_TAG);
        if (h == NULL)
            return held_mprobe(source, tag, comm, blocking, flag, msg, status);
    }
    *flag = 1;
    return held_hand_out(h, msg, s);
}

SHIM_EXPORT int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *msg,
                           MPI_Status *status)
{
    shim_defer_flush_if();
    if (SHIM_LIKELY(!shim_pipe_on()))
        return PMPI_Mprobe(source, tag, comm, msg, status);
    int flag = 0;
    return held_mprobe(source, tag, comm, 1, &flag, msg, status);
}

SHIM_EXPORT int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *msg,
                            MPI_Status *status)
{
    shim_defer_poll();
    if (SHIM_LIKELY(!shim_pipe_on()))
        return PMPI_Improbe(source, tag, comm, flag, msg, status);
    return held_mprobe(source, tag, comm, 0, flag, msg, status);
}

/* ---- delivering a held message ---------------------------------------------------- */

/* Receive held message @p h into (buf, count, dt) through MPI: sent to this
 * process on the private communicator and received there. Frees @p h; the
 * status is the held message's, the count what MPI received. */
int shim_held_recv(const char *call, struct held *h, void *buf, MPI_Count count,
                   MPI_Datatype dt, MPI_Comm comm, MPI_Status *status)
{
    MPI_Status local;
    MPI_Status *s = status == MPI_STATUS_IGNORE ? &local : status;
    int tag = (int)(atomic_fetch_add(&held_next_tag, 1) % (unsigned)held_tag_ub);
    MPI_Request rreq = MPI_REQUEST_NULL;
    int rc;
#if SHIM_LARGE_COUNT
    rc = PMPI_Irecv_c(buf, count, dt, held_rank, tag, held_comm, &rreq);
#else
    rc = count > INT_MAX ? MPI_ERR_COUNT
                         : PMPI_Irecv(buf, (int)count, dt, held_rank, tag, held_comm, &rreq);
#endif
    if (rc == MPI_SUCCESS)
        rc = PMPI_Send(h->data, (int)h->bytes, MPI_BYTE, held_rank, tag, held_comm);
    MPI_Status st;
    memset(&st, 0, sizeof st);
    int wrc = rreq == MPI_REQUEST_NULL ? MPI_SUCCESS : PMPI_Wait(&rreq, &st);
    if (rc == MPI_SUCCESS)
        rc = wrc;
    MPI_Count got = 0;
    if (PMPI_Get_elements_x(&st, MPI_BYTE, &got) != MPI_SUCCESS || got == MPI_UNDEFINED)
        got = 0;
    int eclass = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        PMPI_Error_class(rc, &eclass);
    /* A truncated receive counts the message's bytes, as MPI does. */
    held_status(h, eclass == MPI_ERR_TRUNCATE ? (MPI_Count)h->bytes : got, MPI_SUCCESS, s);
    held_free(h);
    if (rc == MPI_SUCCESS)
        return MPI_SUCCESS;
    return shim_error(comm, eclass == MPI_SUCCESS ? MPI_ERR_OTHER : eclass, call,
                      eclass == MPI_ERR_TRUNCATE ? "message truncated (a probed message)"
                                                 : "receiving a probed message");
}

/* *req: a generalized request with state @p g (malloc'd), complete at once,
 * whose status is @p st. */
static int greq_served(struct shim_greq *g, const MPI_Status *st, MPI_Request *req)
{
    *g = (struct shim_greq){.st = *st, .error = MPI_SUCCESS};
    int rc = shim_greq_start(g, req);
    return rc != MPI_SUCCESS ? rc : PMPI_Grequest_complete(*req);
}

int shim_held_irecv(const char *call, struct held *h, void *buf, MPI_Count count,
                    MPI_Datatype dt, MPI_Comm comm, MPI_Request *req)
{
    struct shim_greq *g = malloc(sizeof *g);
    if (g == NULL) {
        held_free(h);
        return shim_error(comm, MPI_ERR_NO_MEM, call, "no memory for a probed message's request");
    }
    MPI_Status st;
    int rc = shim_held_recv(call, h, buf, count, dt, comm, &st);
    if (rc != MPI_SUCCESS) {
        free(g);
        return rc; /* raised there: reported by the call that posts the receive */
    }
    return greq_served(g, &st, req);
}

/* The handed-out held message of handle @p msg, unlinked; NULL if none. */
static struct held *held_handed(MPI_Message msg)
{
    if (msg == MPI_MESSAGE_NULL || msg == MPI_MESSAGE_NO_PROC ||
        atomic_load_explicit(&shim_held_count, memory_order_acquire) == 0)
        return NULL;
    pthread_mutex_lock(&held_mu);
    struct held **at = &handed;
    while (*at != NULL && (*at)->msg != msg)
        at = &(*at)->next;
    struct held *h = *at;
    if (h != NULL)
        *at = h->next;
    pthread_mutex_unlock(&held_mu);
    return h;
}

int shim_held_mrecv(void *buf, MPI_Count count, MPI_Datatype dt, MPI_Message *msg,
                    MPI_Status *status)
{
    struct held *h = held_handed(*msg);
    MPI_Status local;
    MPI_Status *s = status == MPI_STATUS_IGNORE ? &local : status;
    int rc;
#if SHIM_LARGE_COUNT
    rc = PMPI_Mrecv_c(buf, count, dt, msg, s);
#else
    rc = count > INT_MAX ? MPI_ERR_COUNT : PMPI_Mrecv(buf, (int)count, dt, msg, s);
#endif
    if (h == NULL)
        return rc;
    MPI_Count got = 0;
    if (PMPI_Get_elements_x(s, MPI_BYTE, &got) != MPI_SUCCESS || got == MPI_UNDEFINED)
        got = 0;
    int eclass = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        PMPI_Error_class(rc, &eclass);
    held_status(h, eclass == MPI_ERR_TRUNCATE ? (MPI_Count)h->bytes : got, MPI_SUCCESS, s);
    MPI_Comm comm = h->comm;
    held_free(h);
    if (rc == MPI_SUCCESS)
        return MPI_SUCCESS;
    return shim_error(comm, eclass == MPI_SUCCESS ? MPI_ERR_OTHER : eclass, "MPI_Mrecv",
                      eclass == MPI_ERR_TRUNCATE ? "message truncated (a probed message)"
                                                 : "receiving a probed message");
}

int shim_held_imrecv(void *buf, MPI_Count count, MPI_Datatype dt, MPI_Message *msg,
                     MPI_Request *req)
{
    if (*msg == MPI_MESSAGE_NULL || *msg == MPI_MESSAGE_NO_PROC ||
        atomic_load_explicit(&shim_held_count, memory_order_acquire) == 0)
        goto plain;
    pthread_mutex_lock(&held_mu);
    struct held *h = handed;
    while (h != NULL && h->msg != *msg)
        h = h->next;
    pthread_mutex_unlock(&held_mu);
    if (h == NULL)
        goto plain;
    /* A handed-out message is this process's own: received in the call. */
    struct shim_greq *g = malloc(sizeof *g);
    if (g == NULL)
        return shim_error(h->comm, MPI_ERR_NO_MEM, "MPI_Imrecv",
                          "no memory for a probed message's request");
    MPI_Status st;
    int rc = shim_held_mrecv(buf, count, dt, msg, &st);
    if (rc != MPI_SUCCESS) {
        free(g);
        return rc;
    }
    return greq_served(g, &st, req);
plain:
#if SHIM_LARGE_COUNT
    return PMPI_Imrecv_c(buf, count, dt, msg, req);
#else
    return count > INT_MAX ? MPI_ERR_COUNT : PMPI_Imrecv(buf, (int)count, dt, msg, req);
#endif
}
