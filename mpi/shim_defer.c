/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Nonblocking sends whose device->host copy runs after the call returns
 * (docs/mpi.md, "Nonblocking sends"; CUCOPY_MPI_ISEND=async, the default).
 *
 * MPI_Isend & co. of a contiguous device buffer take its staging memory,
 * start the copy into it (cucopy_ep_put_zcopy) and return a generalized
 * request (MPI_Grequest_start): the PMPI send cannot be posted before its
 * bytes are in host memory. The send is *deferred*: it waits, in call
 * order, in one FIFO of this process. shim_defer_flush posts the deferred
 * sends in that order, each once its copy is done (waiting for the copies,
 * or stopping at the first not done). MPI's non-overtaking order is kept
 * because every other send wrapper flushes (waiting) before it posts, and
 * blocking calls flush before they block, so that a peer waiting for one
 * of these messages is never waiting on this process's MPI call: sends,
 * blocking receives and probes, Sendrecv, Start, every collective, blocking
 * MPI-IO, MPI_Barrier, communicator and window creation and MPI_Finalize.
 *
 * The completion family (shim_complete.c, and the Fortran entries) finishes
 * a deferred send's generalized request before asking MPI about it
 * (shim_defer_ready): it flushes, tests (or waits for) the posted PMPI
 * request and, once that completed, calls MPI_Grequest_complete; MPI then
 * reports the user's request complete with the PMPI send's status. So Test
 * never waits for a copy, Wait waits for it, and the staging memory is
 * released when the user's request completes, as for every staged send.
 */
#include "shim.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int shim_isend_async = 1;

_Atomic int shim_deferred_n; /* deferred sends not posted yet */
static _Atomic unsigned long long stat_async, stat_in_flight, stat_pipelined;

struct shim_defer {
    struct shim_copy copy;   /* the device-to-host copy */
    struct shim_defer *next; /* the FIFO of sends not posted yet */
    struct shim_rec *rec;    /* the user's request's record (rec->buf: the staging) */
    int mode, dest, tag;
    MPI_Count count;
    MPI_Datatype dt; /* a duplicate of a derived type (the user may free theirs) */
    int dt_dup;
    MPI_Comm comm;
    _Atomic int started;    /* posted: real is the PMPI request */
    MPI_Request real;
    struct shim_greq *gs;   /* the user's request's state (st, error) */
    int complete;           /* MPI_Grequest_complete called */
    /* A pipelined send (shim_pipe_isend): its stream until posted
     * (then the pipeline's list in flight has it); posting it sends the
     * envelope in pipe_mode from env, which lives until the user's request
     * completes, and then every chunk, waiting for their copies (they end
     * without the peer's help). copy is unused. */
    struct pipe_stream *pipe;
    int pipe_mode;
    cucopy_status_t pipe_failed;
    char env[SHIM_PIPE_ENV_BYTES];
};

static pthread_mutex_t fifo_mu = PTHREAD_MUTEX_INITIALIZER;
static struct shim_defer *fifo_head, **fifo_tail = &fifo_head;

int shim_defer_configure(char *err, size_t errlen)
{
    const char *v = getenv("CUCOPY_MPI_ISEND");
    if (v == NULL || *v == '\0' || strcmp(v, "async") == 0)
        shim_isend_async = 1;
    else if (strcmp(v, "sync") == 0)
        shim_isend_async = 0;
    else {
        snprintf(err, errlen, "CUCOPY_MPI_ISEND=%s: expected async or sync", v);
        return -1;
    }
    return 0;
}

static void defer_free(struct shim_defer *d)
{
    if (d->dt_dup)
        PMPI_Type_free(&d->dt);
    free(d);
}

void shim_defer_drop(struct shim_defer *d)
{
    defer_free(d);
}

int shim_defer_args_ok(int dest, int tag, MPI_Comm comm)
{
    int inter = 0, size = 0, flag = 0, *ub = NULL;
    if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS ||
        (inter ? PMPI_Comm_remote_size(comm, &size) : PMPI_Comm_size(comm, &size)) !=
            MPI_SUCCESS)
        return 0;
    if (PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag) != MPI_SUCCESS || !flag)
        return 0;
    return dest >= 0 && dest < size && tag >= 0 && tag <= *ub;
}

/* What every deferred send holds: where it goes, and the user's request's state. */
static void defer_init(struct shim_defer *d, int dest, int tag, MPI_Comm comm,
                       struct shim_greq *gs)
{
    d->dest = dest;
    d->tag = tag;
    d->comm = comm;
    d->real = MPI_REQUEST_NULL;
    d->gs = gs;
}

/* Queue deferred send @p d, in call order. */
static void enqueue(struct shim_defer *d)
{
    pthread_mutex_lock(&fifo_mu);
    *fifo_tail = d;
    fifo_tail = &d->next;
    atomic_fetch_add_explicit(&shim_deferred_n, 1, memory_order_release);
    pthread_mutex_unlock(&fifo_mu);
}

int shim_defer_isend(const char *call, int mode, struct shim_buf *b, MPI_Count count,
                     MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    /* Everything that can fail first: then the copy, the request, the queue. */
    struct shim_defer *d = calloc(1, sizeof *d);
    struct shim_greq *gs = calloc(1, sizeof *gs);
    struct shim_rec *r = shim_rec_new();
    int combiner = MPI_COMBINER_NAMED, ni, na, nd;
    int ok = d != NULL && gs != NULL && r != NULL &&
             PMPI_Type_get_envelope(dt, &ni, &na, &nd, &combiner) == MPI_SUCCESS;
    if (ok && combiner != MPI_COMBINER_NAMED) {
        ok = PMPI_Type_dup(dt, &d->dt) == MPI_SUCCESS;
        d->dt_dup = ok;
    } else if (ok) {
        d->dt = dt;
    }
    if (!ok)
        goto plain;
    d->mode = mode;
    d->count = count;
    defer_init(d, dest, tag, comm, gs);
    while (!shim_copy_start(&d->copy, b->first, b->host, b->bytes))
        shim_copy_progress();
    if (shim_copy_is_done(&d->copy) && d->copy.status != CUCOPY_OK)
        goto plain; /* refused at once, nothing in flight: the plain path copies and reports */
    if (shim_greq_start(gs, req) != MPI_SUCCESS) { /* gs freed */
        gs = NULL;
        while (!shim_copy_is_done(&d->copy))
            shim_copy_progress(); /* the copy writes the staging memory */
        goto plain;
    }
    shim_stats_add(0, b->device, b->bytes);
    shim_rec_insert_deferred(r, *req, comm, call, b, d);
    d->rec = r;
    atomic_fetch_add_explicit(&stat_async, 1, memory_order_relaxed);
    if (!shim_copy_is_done(&d->copy))
        atomic_fetch_add_explicit(&stat_in_flight, 1, memory_order_relaxed);
    enqueue(d);
    return 1;
plain:
    if (d != NULL)
        defer_free(d);
    free(gs);
    free(r);
    return 0;
}

/* Defer pipelined send @p ps (prepared, its first copies started): a
 * generalized request in *req, a record, the FIFO; 0 when there is no
 * memory for them (nothing happened). */
static int defer_pipe(const char *call, int mode, struct pipe_stream *ps, int dest, int tag,
                      MPI_Comm comm, MPI_Request *req)
{
    struct shim_defer *d = calloc(1, sizeof *d);
    struct shim_greq *gs = calloc(1, sizeof *gs);
    struct shim_rec *r = shim_rec_new();
    if (d == NULL || gs == NULL || r == NULL) {
        free(d);
        free(gs);
        free(r);
        return 0;
    }
    if (shim_greq_start(gs, req) != MPI_SUCCESS) { /* gs freed */
        free(d);
        free(r);
        return 0;
    }
    d->pipe = ps;
    d->pipe_mode = mode;
    defer_init(d, dest, tag, comm, gs);
    struct shim_buf none = {.device = -1}; /* the stream owns the staging memory */
    shim_rec_insert_deferred(r, *req, comm, call, &none, d);
    d->rec = r;
    atomic_fetch_add_explicit(&stat_async, 1, memory_order_relaxed);
    if (!shim_pipe_copies_done(ps))
        atomic_fetch_add_explicit(&stat_in_flight, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&stat_pipelined, 1, memory_order_relaxed);
    enqueue(d);
    return 1;
}

int shim_pipe_isend(const char *call, int mode, const void *buf, MPI_Count count,
                    MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request *req, int *rc)
{
    struct pipe_stream *ps = NULL;
    if (!shim_pipe_prepare(call, buf, count, dt, dest, comm, &ps, rc))
        return 0;
    if (ps == NULL)
        return 1; /* *rc: the staging failed */
    if (shim_isend_async && shim_defer_args_ok(dest, tag, comm) &&
        defer_pipe(call, mode, ps, dest, tag, comm, req)) {
        *rc = MPI_SUCCESS;
        return 1;
    }
    /* Copied in the call, its envelope's request the user's, after the
     * deferred sends before it. */
    shim_defer_flush_if();
    *rc = shim_pipe_run(ps, call, mode, tag, comm, req);
    return 1;
}

/* Post pipelined send @p d, under fifo_mu: its envelope, then every chunk,
 * waiting for their copies, so that a peer receiving the stream never waits
 * for a later call of this process. */
static void defer_post_pipe(struct shim_defer *d)
{
    int rc = shim_pipe_envelope(d->pipe, d->pipe_mode, d->tag, d->comm, &d->real, d->env);
    if (rc != MPI_SUCCESS) {
        d->real = MPI_REQUEST_NULL;
        d->gs->error = rc; /* raised by MPI on the communicator */
    }
    while (!shim_pipe_step(d->pipe))
        sched_yield(); /* the copy engine works */
    shim_pipe_finish(d->pipe, &d->pipe_failed); /* the envelope's result is in gs */
    d->pipe = NULL;
    atomic_store_explicit(&d->started, 1, memory_order_release);
}

/* Post deferred send @p d (its copy is done), under fifo_mu. */
static void defer_post(struct shim_defer *d)
{
    struct shim_buf *b = &d->rec->buf;
    void *host = shim_host_arg(b);
    int rc;
#if SHIM_LARGE_COUNT
    switch (d->mode) {
    case SHIM_DEFER_ISSEND:
        rc = PMPI_Issend_c(host, d->count, d->dt, d->dest, d->tag, d->comm, &d->real);
        break;
    case SHIM_DEFER_IRSEND:
        rc = PMPI_Irsend_c(host, d->count, d->dt, d->dest, d->tag, d->comm, &d->real);
        break;
    default:
        rc = PMPI_Isend_c(host, d->count, d->dt, d->dest, d->tag, d->comm, &d->real);
    }
#else
    int n = (int)d->count; /* an int count: the call was MPI_Isend & co. */
    switch (d->mode) {
    case SHIM_DEFER_ISSEND:
        rc = PMPI_Issend(host, n, d->dt, d->dest, d->tag, d->comm, &d->real);
        break;
    case SHIM_DEFER_IRSEND:
        rc = PMPI_Irsend(host, n, d->dt, d->dest, d->tag, d->comm, &d->real);
        break;
    default:
        rc = PMPI_Isend(host, n, d->dt, d->dest, d->tag, d->comm, &d->real);
    }
#endif
    if (rc != MPI_SUCCESS) {
        d->real = MPI_REQUEST_NULL;
        d->gs->error = rc; /* raised by MPI on the communicator */
    }
    /* A failed copy: posted anyway (the receiver must not hang); the sender
     * is told at completion (shim_defer_ready), outside fifo_mu, since an
     * error handler may call MPI. */
    atomic_store_explicit(&d->started, 1, memory_order_release);
    if (d->dt_dup) {
        PMPI_Type_free(&d->dt);
        d->dt_dup = 0;
    }
}

void shim_defer_flush(int wait)
{
    /* An error handler MPI runs inside a post (on this thread, fifo_mu held)
     * may call MPI: its calls do not post (they would wait for the lock). */
    static __thread int flushing;
    if (flushing)
        return;
    flushing = 1;
    pthread_mutex_lock(&fifo_mu);
    while (fifo_head != NULL) {
        struct shim_defer *d = fifo_head;
        /* A polling call posts a pipelined send once the copies started
         * are done: the rest follow within the call. */
        if (d->pipe != NULL && !wait && !shim_pipe_copies_done(d->pipe))
            goto out;
        while (d->pipe == NULL && !shim_copy_is_done(&d->copy)) {
            if (!wait)
                goto out;
            shim_copy_progress();
            if (!shim_copy_is_done(&d->copy))
                sched_yield(); /* the copy engine works */
        }
        fifo_head = d->next;
        if (fifo_head == NULL)
            fifo_tail = &fifo_head;
        d->next = NULL;
        if (d->pipe != NULL)
            defer_post_pipe(d);
        else
            defer_post(d);
        atomic_fetch_sub_explicit(&shim_deferred_n, 1, memory_order_release);
    }
out:;
    int left = fifo_head != NULL;
    pthread_mutex_unlock(&fifo_mu);
    flushing = 0;
    if (!wait && left)
        shim_copy_progress(); /* the copies go on while the program polls */
}

int shim_defer_ready(struct shim_rec *r, int wait)
{
    struct shim_defer *d = r->defer;
    if (d == NULL || d->complete)
        return 1;
    /* Posted: a pipelined send's chunks too (its copies read the user's
     * buffer until then); then its envelope's send is the one to complete. */
    int pipelined = d->pipe_mode != SHIM_PIPE_NONE;
    if (!atomic_load_explicit(&d->started, memory_order_acquire))
        shim_defer_flush(wait);
    if (!atomic_load_explicit(&d->started, memory_order_acquire))
        return 0;
    int flag = 1;
    MPI_Status st;
    memset(&st, 0, sizeof st);
    if (d->real != MPI_REQUEST_NULL) {
        int rc = wait ? PMPI_Wait(&d->real, &st) : PMPI_Test(&d->real, &flag, &st);
        if (rc != MPI_SUCCESS && d->gs->error == MPI_SUCCESS)
            d->gs->error = rc;
    }
    if (!flag)
        return 0;
    cucopy_status_t copied = pipelined ? d->pipe_failed : d->copy.status;
    if (copied != CUCOPY_OK && d->gs->error == MPI_SUCCESS) {
        /* Reported once, by MPI: the generalized request's error (shim_greq). */
        fprintf(stderr, "cucopy_mpi: %s: copying the device buffer to host memory failed "
                        "(status %d; the message was sent anyway)\n",
                r->call, (int)copied);
        d->gs->error = MPI_ERR_OTHER;
    }
    d->gs->st = st;
    d->complete = 1;
    PMPI_Grequest_complete(r->req);
    return 1;
}

int shim_defer_stats(char *out, size_t len)
{
    unsigned long long n = atomic_load(&stat_async);
    if (n == 0)
        return snprintf(out, len, "%s", "");
    unsigned long long p = atomic_load(&stat_pipelined);
    char pipelined[48] = "";
    if (p != 0)
        snprintf(pipelined, sizeof pipelined, "; %llu of them pipelined", p);
    return snprintf(out, len, "; nonblocking sends with the copy after the call: %llu (%llu "
                              "returned with it in flight%s)",
                    n, (unsigned long long)atomic_load(&stat_in_flight), pipelined);
}

/* ---- blocking calls that flush first ----------------------------------------------- */

/* A process blocked here must not hold back a message a peer waits for. */
#define FLUSHING(RET, NAME, PARAMS, ARGS)  \
    SHIM_EXPORT RET MPI_##NAME PARAMS      \
    {                                      \
        shim_defer_flush_if();             \
        return PMPI_##NAME ARGS;           \
    }

FLUSHING(int, Barrier, (MPI_Comm comm), (comm))
FLUSHING(int, Comm_dup, (MPI_Comm comm, MPI_Comm *out), (comm, out))
FLUSHING(int, Comm_split, (MPI_Comm comm, int color, int key, MPI_Comm *out),
         (comm, color, key, out))
FLUSHING(int, Comm_split_type, (MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *out),
         (comm, type, key, info, out))
FLUSHING(int, Comm_create, (MPI_Comm comm, MPI_Group group, MPI_Comm *out), (comm, group, out))
FLUSHING(int, Comm_free, (MPI_Comm * comm), (comm))
FLUSHING(int, Cart_create,
         (MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder,
          MPI_Comm *out),
         (comm, ndims, dims, periods, reorder, out))
FLUSHING(int, Dist_graph_create_adjacent,
         (MPI_Comm comm, int indegree, const int sources[], const int sourceweights[],
          int outdegree, const int dests[], const int destweights[], MPI_Info info,
          int reorder, MPI_Comm *out),
         (comm, indegree, sources, sourceweights, outdegree, dests, destweights, info, reorder,
          out))
FLUSHING(int, Win_fence, (int assert, MPI_Win win), (assert, win))
/* MPI_Buffer_detach waits for the buffered sends: a deferred Ibsend is one. */
FLUSHING(int, Buffer_detach, (void *buffer_addr, int *size), (buffer_addr, size))
