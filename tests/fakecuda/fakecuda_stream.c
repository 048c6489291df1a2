/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Streams and events: each stream's worker and queue, stream and event
 * handles, records, queries and synchronizations, host functions, and the
 * live counts of the leak accounting. The operations a worker runs are
 * built by the copy engine (fakecuda_copy.c), kernel launches
 * (fakecuda_module.c) and the calls here.
 *
 * Every stream (including each context's default stream) has a worker thread
 * that runs its FIFO of operations, so work really completes after the call
 * that issued it returned, and FAKECUDA_DELAY_US widens that window to make
 * races visible. Stream and event objects are never freed: a handle used
 * after its destroy, or after its context died, is recognized and reported.
 *
 * Completion counters live under fk_done_lock and every waiter sleeps on
 * fk_done_cond with nothing else held.
 */
#include "fakecuda_internal.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

atomic_uint fk_delay_us;
pthread_mutex_t fk_done_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t fk_done_cond = PTHREAD_COND_INITIALIZER;
_Thread_local int fk_in_host_fn;

struct fk_stream {
    cdStream handle;
    struct fk_ctx *ctx;
    unsigned long long ctx_id;
    int is_default;
    unsigned flags;
    int destroyed;                /* under fk_lock */
    struct fk_stream *next;       /* fk_active or fk_reap list; under fk_lock */
    struct fk_stream *prev;       /* fk_active only */
    pthread_t worker;
    atomic_int exited;            /* the worker returned: joining won't block */
    pthread_mutex_t lock;         /* the queue */
    pthread_cond_t work;
    struct fk_op *head;
    struct fk_op *tail;
    int stopping;                 /* under lock: drain, then exit */
    unsigned long long submitted; /* under fk_done_lock */
    unsigned long long completed; /* under fk_done_lock */
};

struct fk_event {
    cdEvent handle;
    struct fk_ctx *ctx;
    unsigned long long ctx_id;
    int destroyed;                 /* under fk_lock */
    unsigned long long record_seq; /* under fk_done_lock: records issued */
    unsigned long long done_seq;   /* under fk_done_lock: newest record reached */
};

struct fk_table fk_stream_table = {.obj_size = sizeof(struct fk_stream)};
struct fk_table fk_event_table = {.obj_size = sizeof(struct fk_event)};

/* Streams whose worker runs for a live stream; under fk_lock. */
static struct fk_stream *fk_active;
/* Destroyed streams whose worker is draining and not joined yet. */
static struct fk_stream *fk_reap;

/* ---- workers ------------------------------------------------------------------ */

static void fk_run_op(struct fk_stream *s, struct fk_op *op)
{
    unsigned delay = atomic_load(&fk_delay_us);
    if (delay != 0)
        usleep(delay);
    /* After a sticky error the device runs no more copies. */
    int poisoned = atomic_load(&s->ctx->poison) != 0;
    switch (op->kind) {
    case FK_OP_COPY:
        if (!poisoned)
            memmove(op->dst, op->src, op->bytes);
        break;
    case FK_OP_MEMSET:
        if (!poisoned)
            memset(op->dst, op->value, op->bytes);
        break;
    case FK_OP_COPY2D:
        for (size_t i = 0; !poisoned && i < op->height; i++)
            memmove(op->dst + i * op->dst_pitch, op->src + i * op->src_pitch, op->bytes);
        break;
    case FK_OP_RECORD:
        break;
    case FK_OP_WAIT:
        /* Another stream's record: its worker completes it (a destroyed or
         * stopped stream still drains its queue). */
        pthread_mutex_lock(&fk_done_lock);
        while (op->event->done_seq < op->seq)
            pthread_cond_wait(&fk_done_cond, &fk_done_lock);
        pthread_mutex_unlock(&fk_done_lock);
        break;
    case FK_OP_HOST_FN:
        fk_in_host_fn = 1;
        op->fn(op->user_data);
        fk_in_host_fn = 0;
        break;
    case FK_OP_KERNEL:
        /* A store to address 0: the device reports the fault, and the
         * context has the sticky error from then on (fakecuda_poison_context's
         * state, set only while this incarnation lives). */
        if (op->value && !poisoned)
            (void)fk_ctx_set_poison(s->ctx, s->ctx_id, CD_ERROR_ILLEGAL_ADDRESS);
        break;
    }
}

static void *fk_worker(void *arg)
{
    struct fk_stream *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        while (s->head == NULL && !s->stopping)
            pthread_cond_wait(&s->work, &s->lock);
        struct fk_op *op = s->head;
        if (op != NULL) {
            s->head = op->next;
            if (s->head == NULL)
                s->tail = NULL;
        }
        pthread_mutex_unlock(&s->lock);
        if (op == NULL)
            break;
        fk_run_op(s, op);
        /* Memory references go before completion shows, so a program that
         * synchronized and freed sees the memory gone (accounting). */
        fk_alloc_unref(op->refs[0]);
        fk_alloc_unref(op->refs[1]);
        pthread_mutex_lock(&fk_done_lock);
        s->completed++;
        if (op->kind == FK_OP_RECORD && op->seq > op->event->done_seq)
            op->event->done_seq = op->seq;
        pthread_cond_broadcast(&fk_done_cond);
        pthread_mutex_unlock(&fk_done_lock);
        free(op);
    }
    atomic_store(&s->exited, 1);
    return NULL;
}

static void fk_unlink_active_locked(struct fk_stream *s)
{
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        fk_active = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    s->next = NULL;
    s->prev = NULL;
}

/* Tells the worker to finish the queue and exit; takes @p s off fk_active. */
static void fk_stream_stop_locked(struct fk_stream *s)
{
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    fk_unlink_active_locked(s);
}

/* Joins destroyed streams whose worker is done, so threads do not pile up. */
static void fk_reap_exited_locked(void)
{
    struct fk_stream **link = &fk_reap;
    while (*link != NULL) {
        struct fk_stream *s = *link;
        if (atomic_load(&s->exited)) {
            pthread_join(s->worker, NULL);
            *link = s->next;
            s->next = NULL;
        } else {
            link = &s->next;
        }
    }
}

static cdResult fk_stream_new_locked(struct fk_ctx *c, int is_default, unsigned flags,
                                     struct fk_stream **out)
{
    const void *handle = NULL;
    struct fk_stream *s = fk_table_new(&fk_stream_table, &handle);
    if (s == NULL)
        return CD_ERROR_OUT_OF_MEMORY;
    s->handle = (cdStream)handle;
    s->ctx = c;
    s->ctx_id = atomic_load(&c->live_id);
    s->is_default = is_default;
    s->flags = flags;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work, NULL);
    /* Workers take no signals: they belong to the host program's threads. */
    sigset_t all;
    sigset_t old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&s->worker, NULL, fk_worker, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0) {
        s->destroyed = 1; /* a dead slot; the handle is never given out */
        return CD_ERROR_OUT_OF_MEMORY;
    }
    s->next = fk_active;
    if (fk_active != NULL)
        fk_active->prev = s;
    fk_active = s;
    *out = s;
    return CD_SUCCESS;
}

void fk_streams_kill_ctx_locked(struct fk_ctx *c, struct fk_stream ***stopped, int *nstopped)
{
    int n = 0;
    for (struct fk_stream *s = fk_active; s != NULL; s = s->next) {
        if (s->ctx == c)
            n++;
    }
    *stopped = NULL;
    *nstopped = 0;
    if (n == 0)
        return;
    struct fk_stream **list = malloc((size_t)n * sizeof *list);
    if (list == NULL)
        abort();
    int i = 0;
    for (struct fk_stream *s = fk_active; s != NULL;) {
        struct fk_stream *next = s->next;
        if (s->ctx == c) {
            fk_stream_stop_locked(s);
            list[i++] = s;
        }
        s = next;
    }
    *stopped = list;
    *nstopped = n;
}

void fk_streams_join(struct fk_stream **stopped, int nstopped)
{
    for (int i = 0; i < nstopped; i++)
        pthread_join(stopped[i]->worker, NULL);
    free(stopped);
}

void fk_streams_atexit(void)
{
    pthread_mutex_lock(&fk_lock);
    struct fk_stream *list = fk_reap;
    fk_reap = NULL;
    pthread_mutex_unlock(&fk_lock);
    while (list != NULL) {
        struct fk_stream *next = list->next;
        pthread_join(list->worker, NULL);
        list->next = NULL;
        list = next;
    }
}

/* ---- queueing and waiting -------------------------------------------------------- */

struct fk_op *fk_op_new(enum fk_op_kind kind)
{
    struct fk_op *op = calloc(1, sizeof *op);
    if (op != NULL)
        op->kind = kind;
    return op;
}

void fk_op_discard(struct fk_op *op)
{
    fk_alloc_unref(op->refs[0]);
    fk_alloc_unref(op->refs[1]);
    free(op);
}

unsigned long long fk_enqueue_locked(struct fk_stream *s, struct fk_op *op)
{
    pthread_mutex_lock(&fk_done_lock);
    unsigned long long ticket = ++s->submitted;
    if (op->kind == FK_OP_RECORD)
        op->seq = ++op->event->record_seq;
    pthread_mutex_unlock(&fk_done_lock);
    pthread_mutex_lock(&s->lock);
    if (s->tail != NULL)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    return ticket;
}

/* A stream to wait for, and how much of its work. */
struct fk_wait {
    struct fk_stream *s;
    unsigned long long target;
};

static int fk_wait_done(const struct fk_wait *w, int n)
{
    for (int i = 0; i < n; i++) {
        if (w[i].s->completed < w[i].target)
            return 0;
    }
    return 1;
}

static int fk_waits_query(const struct fk_wait *w, int n)
{
    pthread_mutex_lock(&fk_done_lock);
    int done = fk_wait_done(w, n);
    pthread_mutex_unlock(&fk_done_lock);
    return done;
}

static void fk_waits_wait(const struct fk_wait *w, int n)
{
    pthread_mutex_lock(&fk_done_lock);
    while (!fk_wait_done(w, n))
        pthread_cond_wait(&fk_done_cond, &fk_done_lock);
    pthread_mutex_unlock(&fk_done_lock);
}

void fk_stream_wait(struct fk_stream *s, unsigned long long ticket)
{
    struct fk_wait w = {s, ticket};
    fk_waits_wait(&w, 1);
}

static int fk_covers(const struct fk_stream *s, const struct fk_ctx *c, int with_non_blocking)
{
    return s->ctx == c && (with_non_blocking || !(s->flags & CD_STREAM_NON_BLOCKING));
}

/* The work issued so far on the streams of @p c: all of them for a context
 * synchronization, the blocking ones for the legacy default stream (which
 * orders against them). The caller frees *out. */
static cdResult fk_collect_ctx_locked(struct fk_ctx *c, int with_non_blocking,
                                      struct fk_wait **out, int *n)
{
    int count = 0;
    for (struct fk_stream *s = fk_active; s != NULL; s = s->next)
        count += fk_covers(s, c, with_non_blocking);
    struct fk_wait *w = calloc((size_t)count + 1, sizeof *w);
    if (w == NULL)
        return CD_ERROR_OUT_OF_MEMORY;
    int i = 0;
    pthread_mutex_lock(&fk_done_lock);
    for (struct fk_stream *s = fk_active; s != NULL; s = s->next) {
        if (fk_covers(s, c, with_non_blocking)) {
            w[i].s = s;
            w[i].target = s->submitted;
            i++;
        }
    }
    pthread_mutex_unlock(&fk_done_lock);
    *out = w;
    *n = i;
    return CD_SUCCESS;
}

/* ---- resolving stream handles ------------------------------------------------------- */

int fk_is_default_handle(cdStream h)
{
    return h == NULL || h == FK_STREAM_LEGACY || h == FK_STREAM_PER_THREAD;
}

cdResult fk_default_stream_locked(struct fk_ctx *c, struct fk_stream **out)
{
    if (c->default_stream == NULL) {
        cdResult rc = fk_stream_new_locked(c, 1, 0, &c->default_stream);
        if (rc != CD_SUCCESS)
            return rc;
    }
    *out = c->default_stream;
    return CD_SUCCESS;
}

/* A stream handle given by the caller: ours, not destroyed, context alive. */
static cdResult fk_stream_check_locked(cdStream h, const char *api, struct fk_stream **out)
{
    struct fk_stream *s = fk_table_find(&fk_stream_table, h);
    if (s == NULL)
        return fk_violation(CD_ERROR_INVALID_HANDLE, "%s: %p is not a stream handle", api,
                            (void *)h);
    cdResult rc = fk_ctx_owned_check(api, "stream", h, s->destroyed ? "cuStreamDestroy" : NULL,
                                     s->ctx, s->ctx_id);
    if (rc == CD_SUCCESS)
        *out = s;
    return rc;
}

cdResult fk_stream_for_work_locked(cdStream h, const char *api, struct fk_stream **out)
{
    struct fk_ctx *cur = fk_ctx_current();
    if (fk_is_default_handle(h)) {
        if (cur == NULL)
            return fk_violation(CD_ERROR_INVALID_CONTEXT,
                                "%s on the default stream with no current context", api);
        cdResult rc = fk_ctx_require_current(&cur, api, 1);
        if (rc != CD_SUCCESS)
            return rc;
        return fk_default_stream_locked(cur, out);
    }
    struct fk_stream *s = NULL;
    cdResult rc = fk_stream_check_locked(h, api, &s);
    if (rc != CD_SUCCESS)
        return rc;
    if (cur == NULL)
        return fk_violation(CD_ERROR_INVALID_CONTEXT,
                            "%s: stream %p (device %d, context id %llu) used with no current "
                            "context",
                            api, (void *)h, s->ctx->device, s->ctx_id);
    if (atomic_load(&cur->live_id) == 0)
        return fk_violation(CD_ERROR_CONTEXT_IS_DESTROYED,
                            "%s: the current context (device %d, last id %llu) is destroyed", api,
                            cur->device, cur->last_id);
    if (cur != s->ctx)
        return fk_violation(CD_ERROR_INVALID_HANDLE,
                            "%s: stream %p of context id %llu (device %d) used while context id "
                            "%llu (device %d) is current",
                            api, (void *)h, s->ctx_id, s->ctx->device,
                            (unsigned long long)atomic_load(&cur->live_id), cur->device);
    int poison = atomic_load(&s->ctx->poison);
    if (poison != 0)
        return (cdResult)poison;
    *out = s;
    return CD_SUCCESS;
}

struct fk_ctx *fk_stream_owner(const struct fk_stream *s, unsigned long long *ctx_id)
{
    *ctx_id = s->ctx_id;
    return s->ctx;
}

cdResult fk_stream_ctx(cdStream stream, const char *api, struct fk_ctx **out)
{
    pthread_mutex_lock(&fk_lock);
    struct fk_stream *s = NULL;
    cdResult rc = fk_stream_for_work_locked(stream, api, &s);
    if (rc == CD_SUCCESS)
        *out = s->ctx;
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* The streams a query or synchronization covers. A created stream works
 * with any (or no) current context; the default stream needs its context;
 * @p whole_ctx (cuCtxSynchronize) covers every stream of the current one. */
static cdResult fk_streams_to_wait(cdStream h, int whole_ctx, const char *api,
                                   struct fk_wait **out, int *n, struct fk_ctx **ctx)
{
    cdResult rc = CD_SUCCESS;
    pthread_mutex_lock(&fk_lock);
    if (whole_ctx || fk_is_default_handle(h)) {
        rc = fk_ctx_require_current(ctx, api, 0);
        if (rc == CD_SUCCESS)
            rc = fk_collect_ctx_locked(*ctx, whole_ctx, out, n);
    } else {
        struct fk_stream *s = NULL;
        rc = fk_stream_check_locked(h, api, &s);
        struct fk_wait *w = rc == CD_SUCCESS ? calloc(1, sizeof *w) : NULL;
        if (rc == CD_SUCCESS && w == NULL)
            rc = CD_ERROR_OUT_OF_MEMORY;
        if (rc == CD_SUCCESS) {
            pthread_mutex_lock(&fk_done_lock);
            w->s = s;
            w->target = s->submitted;
            pthread_mutex_unlock(&fk_done_lock);
            *out = w;
            *n = 1;
            *ctx = s->ctx;
        }
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* ---- streams ------------------------------------------------------------------------------ */

cdResult cuStreamCreate(cdStream *stream, unsigned int flags)
{
    FK_ENTER(cuStreamCreate);
    if (stream == NULL || (flags & ~(unsigned)CD_STREAM_NON_BLOCKING) != 0)
        return CD_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fk_lock);
    fk_reap_exited_locked();
    struct fk_ctx *c = NULL;
    struct fk_stream *s = NULL;
    cdResult rc = fk_ctx_require_current(&c, "cuStreamCreate", 1);
    if (rc == CD_SUCCESS)
        rc = fk_stream_new_locked(c, 0, flags, &s);
    if (rc == CD_SUCCESS)
        *stream = s->handle;
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

cdResult cuStreamDestroy_v2(cdStream stream)
{
    FK_ENTER(cuStreamDestroy);
    if (fk_is_default_handle(stream))
        return CD_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&fk_lock);
    struct fk_stream *s = NULL;
    cdResult rc = fk_stream_check_locked(stream, "cuStreamDestroy", &s);
    if (rc == CD_SUCCESS) {
        /* Queued work still completes; the call does not wait for it. */
        s->destroyed = 1;
        fk_stream_stop_locked(s);
        s->next = fk_reap;
        fk_reap = s;
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

cdResult cuStreamQuery(cdStream stream)
{
    FK_ENTER(cuStreamQuery);
    struct fk_wait *w = NULL;
    int n = 0;
    struct fk_ctx *c = NULL;
    cdResult rc = fk_streams_to_wait(stream, 0, "cuStreamQuery", &w, &n, &c);
    if (rc != CD_SUCCESS)
        return rc;
    int done = fk_waits_query(w, n);
    free(w);
    int poison = atomic_load(&c->poison);
    if (poison != 0)
        return (cdResult)poison;
    return done ? CD_SUCCESS : CD_ERROR_NOT_READY;
}

static cdResult fk_synchronize(cdStream stream, int whole_ctx, const char *api)
{
    struct fk_wait *w = NULL;
    int n = 0;
    struct fk_ctx *c = NULL;
    cdResult rc = fk_streams_to_wait(stream, whole_ctx, api, &w, &n, &c);
    if (rc != CD_SUCCESS)
        return rc;
    fk_waits_wait(w, n);
    free(w);
    return (cdResult)atomic_load(&c->poison);
}

cdResult cuStreamSynchronize(cdStream stream)
{
    FK_ENTER(cuStreamSynchronize);
    return fk_synchronize(stream, 0, "cuStreamSynchronize");
}

cdResult cuCtxSynchronize(void)
{
    FK_ENTER(cuCtxSynchronize);
    return fk_synchronize(NULL, 1, "cuCtxSynchronize");
}

/* ---- events ---------------------------------------------------------------------------------- */

static cdResult fk_event_check_locked(cdEvent h, const char *api, struct fk_event **out)
{
    struct fk_event *e = fk_table_find(&fk_event_table, h);
    if (e == NULL)
        return fk_violation(CD_ERROR_INVALID_HANDLE, "%s: %p is not an event handle", api,
                            (void *)h);
    cdResult rc = fk_ctx_owned_check(api, "event", h, e->destroyed ? "cuEventDestroy" : NULL,
                                     e->ctx, e->ctx_id);
    if (rc == CD_SUCCESS)
        *out = e;
    return rc;
}

cdResult cuEventCreate(cdEvent *event, unsigned int flags)
{
    FK_ENTER(cuEventCreate);
    /* DEFAULT, BLOCKING_SYNC, DISABLE_TIMING, INTERPROCESS (needs DISABLE_TIMING) */
    if (event == NULL || (flags & ~0x7u) != 0 ||
        ((flags & 0x4u) && !(flags & CD_EVENT_DISABLE_TIMING)))
        return CD_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fk_lock);
    struct fk_ctx *c = NULL;
    cdResult rc = fk_ctx_require_current(&c, "cuEventCreate", 1);
    if (rc == CD_SUCCESS) {
        const void *handle = NULL;
        struct fk_event *e = fk_table_new(&fk_event_table, &handle);
        if (e == NULL) {
            rc = CD_ERROR_OUT_OF_MEMORY;
        } else {
            e->handle = (cdEvent)handle;
            e->ctx = c;
            e->ctx_id = atomic_load(&c->live_id);
            *event = e->handle;
        }
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

cdResult cuEventDestroy_v2(cdEvent event)
{
    FK_ENTER(cuEventDestroy);
    pthread_mutex_lock(&fk_lock);
    struct fk_event *e = NULL;
    cdResult rc = fk_event_check_locked(event, "cuEventDestroy", &e);
    if (rc == CD_SUCCESS)
        e->destroyed = 1; /* a pending record still completes harmlessly */
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

cdResult cuEventRecord(cdEvent event, cdStream stream)
{
    FK_ENTER(cuEventRecord);
    pthread_mutex_lock(&fk_lock);
    struct fk_event *e = NULL;
    struct fk_stream *s = NULL;
    struct fk_op *op = NULL;
    cdResult rc = fk_event_check_locked(event, "cuEventRecord", &e);
    if (rc == CD_SUCCESS)
        rc = fk_stream_for_work_locked(stream, "cuEventRecord", &s);
    if (rc == CD_SUCCESS && s->ctx != e->ctx)
        rc = fk_violation(CD_ERROR_INVALID_HANDLE,
                          "cuEventRecord: event %p of context id %llu (device %d) recorded on a "
                          "stream of context id %llu (device %d)",
                          (void *)event, e->ctx_id, e->ctx->device, s->ctx_id, s->ctx->device);
    if (rc == CD_SUCCESS && (op = fk_op_new(FK_OP_RECORD)) == NULL)
        rc = CD_ERROR_OUT_OF_MEMORY;
    if (rc == CD_SUCCESS) {
        op->event = e;
        fk_enqueue_locked(s, op);
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* The event for a query or synchronization: works under any current context. */
static cdResult fk_event_for_wait(cdEvent event, const char *api, struct fk_event **out)
{
    pthread_mutex_lock(&fk_lock);
    cdResult rc = fk_event_check_locked(event, api, out);
    if (rc == CD_SUCCESS && atomic_load(&(*out)->ctx->poison) != 0)
        rc = (cdResult)atomic_load(&(*out)->ctx->poison);
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

cdResult cuEventQuery(cdEvent event)
{
    FK_ENTER(cuEventQuery);
    struct fk_event *e = NULL;
    cdResult rc = fk_event_for_wait(event, "cuEventQuery", &e);
    if (rc != CD_SUCCESS)
        return rc;
    pthread_mutex_lock(&fk_done_lock);
    int done = e->done_seq >= e->record_seq; /* never recorded: 0 >= 0 */
    pthread_mutex_unlock(&fk_done_lock);
    return done ? CD_SUCCESS : CD_ERROR_NOT_READY;
}

cdResult cuEventSynchronize(cdEvent event)
{
    FK_ENTER(cuEventSynchronize);
    struct fk_event *e = NULL;
    cdResult rc = fk_event_for_wait(event, "cuEventSynchronize", &e);
    if (rc != CD_SUCCESS)
        return rc;
    pthread_mutex_lock(&fk_done_lock);
    unsigned long long target = e->record_seq;
    while (e->done_seq < target)
        pthread_cond_wait(&fk_done_cond, &fk_done_lock);
    pthread_mutex_unlock(&fk_done_lock);
    return (cdResult)atomic_load(&e->ctx->poison);
}

/* Later work on @p stream waits for the work @p event's last record covers;
 * the event may be of another context or device (as the driver allows). */
cdResult cuStreamWaitEvent(cdStream stream, cdEvent event, unsigned int flags)
{
    FK_ENTER(cuStreamWaitEvent);
    if (flags != 0)
        return CD_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fk_lock);
    struct fk_event *e = NULL;
    struct fk_stream *s = NULL;
    struct fk_op *op = NULL;
    cdResult rc = fk_event_check_locked(event, "cuStreamWaitEvent", &e);
    if (rc == CD_SUCCESS)
        rc = fk_stream_for_work_locked(stream, "cuStreamWaitEvent", &s);
    if (rc == CD_SUCCESS && (op = fk_op_new(FK_OP_WAIT)) == NULL)
        rc = CD_ERROR_OUT_OF_MEMORY;
    if (rc == CD_SUCCESS) {
        op->event = e;
        pthread_mutex_lock(&fk_done_lock);
        op->seq = e->record_seq; /* the record to wait for: the last one issued */
        pthread_mutex_unlock(&fk_done_lock);
        fk_enqueue_locked(s, op);
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* ---- host functions -------------------------------------------------------------------------- */

cdResult cuLaunchHostFunc(cdStream stream, cdHostFn fn, void *user_data)
{
    FK_ENTER(cuLaunchHostFunc);
    if (fn == NULL)
        return CD_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fk_lock);
    struct fk_stream *s = NULL;
    struct fk_op *op = NULL;
    cdResult rc = fk_stream_for_work_locked(stream, "cuLaunchHostFunc", &s);
    if (rc == CD_SUCCESS && (op = fk_op_new(FK_OP_HOST_FN)) == NULL)
        rc = CD_ERROR_OUT_OF_MEMORY;
    if (rc == CD_SUCCESS) {
        op->fn = fn;
        op->user_data = user_data;
        fk_enqueue_locked(s, op);
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* ---- accounting ---------------------------------------------------------------------------------- */

int fk_count_live_streams(struct fk_ctx *c)
{
    int n = 0;
    pthread_mutex_lock(&fk_lock);
    unsigned total = atomic_load(&fk_stream_table.count);
    for (unsigned i = 0; i < total; i++) {
        const struct fk_stream *s = fk_table_at(&fk_stream_table, i);
        n += !s->is_default && !s->destroyed && (c == NULL || s->ctx == c) &&
             fk_ctx_alive(s->ctx, s->ctx_id);
    }
    pthread_mutex_unlock(&fk_lock);
    return n;
}

int fk_count_live_events(struct fk_ctx *c)
{
    int n = 0;
    pthread_mutex_lock(&fk_lock);
    unsigned total = atomic_load(&fk_event_table.count);
    for (unsigned i = 0; i < total; i++) {
        const struct fk_event *e = fk_table_at(&fk_event_table, i);
        n += !e->destroyed && (c == NULL || e->ctx == c) && fk_ctx_alive(e->ctx, e->ctx_id);
    }
    pthread_mutex_unlock(&fk_lock);
    return n;
}
