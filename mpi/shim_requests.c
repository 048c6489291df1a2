/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The request table: MPI_Request value -> staging record, for nonblocking
 * calls whose buffer was staged. Keyed by the handle's value (a pointer in
 * Open MPI, an int in MPICH), never by the address of the user's variable
 * (programs copy handles into arrays for Waitall).
 *
 * Completion calls *take* the records of the requests they are given out of
 * the table before calling PMPI and put back those that did not complete.
 * A completed request's handle value may be reused by MPI at once, by
 * another thread's Isend: the old record is already out of the table then,
 * so the new one cannot collide with it. (MPI forbids two threads completing
 * one request at once, so nobody else looks for a taken record.)
 *
 * Request_free of a staged request detaches its record: the real request
 * stays alive, is tested in later completion calls and waited for in
 * MPI_Finalize; then its staging memory goes back to the pool (and a
 * receive's data to the device).
 *
 * A nonblocking collective's record holds up to two staged buffers and the
 * bytes MPI writes into each (known at the call, not from a status); it is
 * finished like a receive's (recv is 1), Request_free detaches it too.
 *
 * A record may also own memory MPI reads until the request completes (the
 * converted datatype arrays of a Fortran MPI_Ialltoallw): shim_rec_keep,
 * which makes a record with nothing staged for a request that has none.
 *
 * Persistent requests (*_init) keep their record, staging memory included,
 * from init to Request_free: active from MPI_Start to completion. A
 * persistent collective's record (shim_rec_add_pcoll) is a collective's one
 * that also knows what MPI reads of each buffer (nin, in_pieces): MPI_Start
 * copies that in again, each completion copies back what MPI wrote.
 */
#include "shim.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define TABLE_BITS 10
#define TABLE_SIZE (1u << TABLE_BITS)

_Atomic long shim_records_live;

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static struct shim_rec *table[TABLE_SIZE];

static pthread_mutex_t detached_mu = PTHREAD_MUTEX_INITIALIZER;
static struct shim_rec *detached;

static uintptr_t key_of(MPI_Request r)
{
    uintptr_t k = 0;
    memcpy(&k, &r, sizeof r < sizeof k ? sizeof r : sizeof k);
    return k;
}

static unsigned bucket_of(MPI_Request r)
{
    uint64_t k = key_of(r);
    k ^= k >> 29;
    k *= 0x9E3779B97F4A7C15ull;
    return (unsigned)(k >> (64 - TABLE_BITS));
}

static void insert(struct shim_rec *r)
{
    unsigned b = bucket_of(r->req);
    pthread_mutex_lock(&table_mu);
    r->next = table[b];
    table[b] = r;
    pthread_mutex_unlock(&table_mu);
}

int shim_rec_add(MPI_Request *req, int recv, MPI_Comm comm, const char *call,
                 const struct shim_buf *b)
{
    struct shim_rec *r = malloc(sizeof *r);
    if (r == NULL) {
        /* No record, no way to finish later: finish now (the call becomes blocking). */
        struct shim_rec now = {.recv = recv, .comm = comm, .call = call, .buf = *b};
        MPI_Status st;
        int rc = PMPI_Wait(req, &st);
        if (recv && shim_copy_ok(rc)) {
            int rc2 = shim_rec_copy_now(&now, &st);
            if (rc == MPI_SUCCESS)
                rc = rc2;
        }
        shim_release(&now.buf);
        return rc;
    }
    *r = (struct shim_rec){.req = *req, .recv = recv, .comm = comm, .call = call, .buf = *b};
    atomic_fetch_add(&shim_records_live, 1);
    insert(r);
    return MPI_SUCCESS;
}

/* A collective's record of request @p req on the staging of @p c, which it
 * owns from now on (the staging memory, the block lists). */
static void rec_of_coll(struct shim_rec *r, MPI_Request req, const struct shim_coll *c)
{
    *r = (struct shim_rec){.req = req,
                           .recv = 1,
                           .coll = 1,
                           .comm = c->comm,
                           .call = c->call,
                           .buf = c->b[0],
                           .buf2 = c->b[1]};
    for (int i = 0; i < 2; i++) {
        int back = c->b[i].staged && (c->dir[i] & SHIM_FROM_MPI);
        r->out[i] = back ? c->out[i] : 0;
        r->pieces[i] = c->pieces[i];
        r->npieces[i] = back ? c->npieces[i] : 0;
        r->in_pieces[i] = c->in_pieces[i];
        if (!c->b[i].staged)
            r->nin[i] = 0;
        else if (c->nin_pieces[i] >= 0)
            r->nin[i] = c->nin_pieces[i]; /* the pieces MPI reads */
        else
            r->nin[i] = c->dir[i] & SHIM_TO_MPI ? -1 : 0; /* all of it, or nothing */
    }
}

int shim_rec_add_coll(MPI_Request *req, const struct shim_coll *c)
{
    struct shim_rec local;
    struct shim_rec *r = malloc(sizeof *r);
    if (r == NULL)
        r = &local; /* finished now, below */
    rec_of_coll(r, *req, c);
    for (int i = 0; i < 2; i++) {
        free(r->in_pieces[i]); /* copied in once, at the call */
        r->in_pieces[i] = NULL;
        r->nin[i] = 0;
    }
    if (r == &local) {
        /* No record, no way to finish later: finish now (the call becomes blocking). */
        MPI_Status st;
        int rc = PMPI_Wait(req, &st);
        int rc2 = shim_copy_ok(rc) ? shim_rec_copy_now(r, &st) : MPI_SUCCESS;
        shim_release(&r->buf);
        shim_release(&r->buf2);
        free(r->pieces[0]);
        free(r->pieces[1]);
        return rc != MPI_SUCCESS ? rc : rc2;
    }
    atomic_fetch_add(&shim_records_live, 1);
    insert(r);
    return MPI_SUCCESS;
}

int shim_rec_keep(MPI_Request *req, MPI_Comm comm, const char *call, void *mem)
{
    struct shim_rec *r = shim_rec_take(*req);
    if (r == NULL) {
        r = malloc(sizeof *r);
        if (r == NULL) {
            MPI_Status st;
            int rc = PMPI_Wait(req, &st);
            free(mem);
            return rc;
        }
        /* A collective's record with nothing staged: nothing to copy back. */
        *r = (struct shim_rec){.req = *req, .recv = 1, .coll = 1, .comm = comm, .call = call};
        atomic_fetch_add(&shim_records_live, 1);
    }
    r->owned = mem;
    insert(r);
    return MPI_SUCCESS;
}

static int greq_query(void *extra, MPI_Status *s)
{
    struct shim_greq *g = extra;
    *s = g->st;
    s->MPI_ERROR = g->error;
    return g->error;
}

static int greq_free(void *extra)
{
    free(extra);
    return MPI_SUCCESS;
}

static int greq_cancel(void *extra, int complete)
{
    (void)extra;
    (void)complete; /* served at once, or a send being posted: not cancelled */
    return MPI_SUCCESS;
}

int shim_greq_start(struct shim_greq *g, MPI_Request *req)
{
    int rc = PMPI_Grequest_start(greq_query, greq_free, greq_cancel, g, req);
    if (rc != MPI_SUCCESS)
        free(g);
    return rc;
}

struct shim_rec *shim_rec_new(void)
{
    return malloc(sizeof(struct shim_rec));
}

void shim_rec_insert_deferred(struct shim_rec *r, MPI_Request req, MPI_Comm comm,
                              const char *call, const struct shim_buf *b, struct shim_defer *d)
{
    *r = (struct shim_rec){.req = req, .comm = comm, .call = call, .buf = *b, .defer = d};
    atomic_fetch_add(&shim_records_live, 1);
    insert(r);
}

int shim_rec_add_persistent(MPI_Request *req, int recv, MPI_Comm comm, const char *call,
                            const struct shim_buf *b)
{
    struct shim_rec *r = malloc(sizeof *r);
    if (r == NULL) {
        PMPI_Request_free(req);
        struct shim_buf copy = *b;
        shim_release(&copy);
        return shim_error(comm, MPI_ERR_NO_MEM, call, "no memory for the request record");
    }
    *r = (struct shim_rec){
        .req = *req, .recv = recv, .persistent = 1, .comm = comm, .call = call, .buf = *b};
    atomic_fetch_add(&shim_records_live, 1);
    insert(r);
    return MPI_SUCCESS;
}

int shim_rec_add_pcoll(MPI_Request *req, const struct shim_coll *c)
{
    struct shim_rec *r = malloc(sizeof *r);
    if (r == NULL) {
        PMPI_Request_free(req);
        struct shim_coll copy = *c;
        shim_coll_release(&copy);
        return shim_error(c->comm, MPI_ERR_NO_MEM, c->call, "no memory for the request record");
    }
    rec_of_coll(r, *req, c);
    r->persistent = 1;
    atomic_fetch_add(&shim_records_live, 1);
    insert(r);
    return MPI_SUCCESS;
}

/* MPI_Start of a persistent collective: what MPI reads of each staged buffer,
 * from the device into its staging memory again (the program may have
 * written the device buffer since the last start). */
static int rec_restage_coll(struct shim_rec *r)
{
    struct shim_buf *b[2] = {&r->buf, &r->buf2};
    int rc = MPI_SUCCESS;
    for (int i = 0; i < 2 && rc == MPI_SUCCESS; i++) {
        if (r->nin[i] < 0)
            rc = shim_restage(r->call, b[i], r->comm);
        for (int k = 0; k < r->nin[i] && rc == MPI_SUCCESS; k++) {
            struct shim_buf part = shim_buf_part(b[i], r->in_pieces[i][k].off,
                                                 r->in_pieces[i][k].len);
            if (part.bytes > 0)
                rc = shim_restage(r->call, &part, r->comm);
        }
    }
    return rc;
}

int shim_rec_start(struct shim_rec *r)
{
    int rc = MPI_SUCCESS;
    if (r->coll)
        rc = rec_restage_coll(r);
    else if (!r->recv)
        rc = shim_restage(r->call, &r->buf, r->comm);
    if (rc != MPI_SUCCESS)
        return rc;
    r->copied = 0;
    r->pipe_done = 0;
    r->active = 1;
    return MPI_SUCCESS;
}

/* Wait for the copy back shim_batch_early started; its result. */
static int back_finish(struct shim_rec *r)
{
    while (!shim_copy_is_done(&r->back)) {
        shim_copy_progress();
        if (!shim_copy_is_done(&r->back))
            sched_yield(); /* the copy engine works */
    }
    r->back_started = 0;
    r->copied = 1;
    if (r->back.status != CUCOPY_OK)
        return shim_error(r->comm, MPI_ERR_OTHER, r->call,
                          "copying the received message to device memory failed");
    shim_stats_add(1, r->buf.device, r->back_bytes);
    return MPI_SUCCESS;
}

static void rec_free(struct shim_rec *r)
{
    if (r->back_started)
        back_finish(r); /* the copy reads the staging released below */
    shim_release(&r->buf);
    shim_release(&r->buf2);
    free(r->pieces[0]);
    free(r->pieces[1]);
    free(r->in_pieces[0]);
    free(r->in_pieces[1]);
    free(r->owned);
    if (r->defer != NULL)
        shim_defer_drop(r->defer);
    free(r);
    atomic_fetch_sub(&shim_records_live, 1);
}

int shim_rec_free(struct shim_rec *r, MPI_Request *req)
{
    if (r->persistent && !r->active) {
        int rc = PMPI_Request_free(req);
        rec_free(r);
        return rc;
    }
    shim_rec_detach(r);
    *req = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}

struct shim_rec *shim_rec_take(MPI_Request req)
{
    if (req == MPI_REQUEST_NULL)
        return NULL;
    unsigned b = bucket_of(req);
    uintptr_t k = key_of(req);
    pthread_mutex_lock(&table_mu);
    struct shim_rec **at = &table[b];
    while (*at != NULL && key_of((*at)->req) != k)
        at = &(*at)->next;
    struct shim_rec *r = *at;
    if (r != NULL)
        *at = r->next;
    pthread_mutex_unlock(&table_mu);
    return r;
}

void shim_rec_put_back(struct shim_rec *r)
{
    insert(r);
}

int shim_rec_copy_now(struct shim_rec *r, const MPI_Status *st)
{
    int rc;
    if (r->back_started)
        return back_finish(r);
    if (!r->coll && shim_pipe_is_envelope(MPI_SUCCESS, st, r->buf.host)) {
        /* A pipelined message (docs/mpi.md): the status is the caller's,
         * writable (its count becomes the message's). */
        rc = shim_pipe_recv(r->call, &r->buf, (MPI_Status *)st, r->comm);
        r->pipe_done = 1;
        r->pipe_rc = rc;
        if (PMPI_Get_elements_x(st, MPI_BYTE, &r->pipe_bytes) != MPI_SUCCESS)
            r->pipe_bytes = 0;
    } else if (!r->coll) {
        /* A host receive's record (shim_pipe_watch) has nothing to copy. */
        rc = r->buf.staged ? shim_unstage(r->call, &r->buf, shim_received_bytes(st), r->comm)
                           : MPI_SUCCESS;
    } else {
        /* What MPI wrote is known from the call; the status is not read (a
         * collective cannot be cancelled, and MPICH 4.0.2's
         * MPI_Request_get_status leaves a collective's status unset). */
        rc = shim_coll_unstage(r->call, &r->buf, r->out[0], r->pieces[0], r->npieces[0],
                               r->comm);
        if (rc == MPI_SUCCESS)
            rc = shim_coll_unstage(r->call, &r->buf2, r->out[1], r->pieces[1], r->npieces[1],
                                   r->comm);
    }
    r->copied = 1;
    return rc;
}

int shim_rec_finish(struct shim_rec *r, const MPI_Status *st, int ok)
{
    int rc = MPI_SUCCESS;
    /* An inactive persistent request completes at once, having moved nothing. */
    int moved = !r->persistent || r->active;
    if (r->back_started) {
        rc = back_finish(r); /* its message arrived: MPI said so */
    } else if (r->recv && moved && ok && !r->copied && st != NULL) {
        rc = shim_rec_copy_now(r, st);
    } else if (r->recv && moved && r->copied && r->pipe_done && st != NULL) {
        /* Received earlier: MPI's status says 40 bytes, the message had more. */
        PMPI_Status_set_elements_x((MPI_Status *)st, MPI_BYTE, r->pipe_bytes);
        rc = r->pipe_rc;
    }
    if (r->persistent && !r->detached) {
        r->active = 0;
        shim_rec_put_back(r);
        return rc;
    }
    if (r->persistent)
        PMPI_Request_free(&r->req); /* Request_free'd while active: now */
    rec_free(r);
    return rc;
}

void shim_rec_detach(struct shim_rec *r)
{
    r->detached = 1;
    pthread_mutex_lock(&detached_mu);
    r->next = detached;
    detached = r;
    pthread_mutex_unlock(&detached_mu);
}

void shim_detached_progress(int wait)
{
    if (wait)
        pthread_mutex_lock(&detached_mu);
    else if (pthread_mutex_trylock(&detached_mu) != 0)
        return; /* another thread is at it */
    struct shim_rec *list = detached;
    detached = NULL;
    pthread_mutex_unlock(&detached_mu);

    struct shim_rec *keep = NULL;
    while (list != NULL) {
        struct shim_rec *r = list;
        list = r->next;
        MPI_Status st;
        int flag = 1;
        if (r->defer != NULL)
            shim_defer_ready(r, wait); /* then its request completes */
        int rc = wait ? PMPI_Wait(&r->req, &st) : PMPI_Test(&r->req, &flag, &st);
        if (flag) {
            shim_rec_finish(r, &st, shim_copy_ok(rc)); /* errors were raised there */
        } else {
            r->next = keep;
            keep = r;
        }
    }
    if (keep == NULL)
        return;
    pthread_mutex_lock(&detached_mu);
    struct shim_rec **tail = &keep;
    while (*tail != NULL)
        tail = &(*tail)->next;
    *tail = detached;
    detached = keep;
    pthread_mutex_unlock(&detached_mu);
}
