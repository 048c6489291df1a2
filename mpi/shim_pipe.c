/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pipelined large device messages (docs/mpi.md, "Pipelined messages"): a
 * contiguous device send of at least CUCOPY_MPI_PIPELINE_KB KiB is an
 * envelope of SHIM_PIPE_ENV_BYTES on the user's (comm, dest, tag), sent in
 * the user's mode, then its bytes as chunks on a private duplicate of
 * MPI_COMM_WORLD, to the destination's world rank, under a stream tag of its
 * own. The device->host copy of a chunk (cucopy_ep_put_zcopy) overlaps the
 * MPI transfer of the chunks already copied; on the receiving side the
 * host->device copy of a chunk overlaps the reception of the next ones.
 *
 * Matching stays MPI's: receives are posted as without pipelining and check
 * what they got (shim_pipe_is_envelope); a receive that got an envelope
 * takes the stream's chunks before the call that completes it returns
 * (MPI_Waitall: as soon as the envelope is there, shim_batch_early).
 *
 * A send returns once every chunk is copied and posted: the chunks' requests
 * (and the staging memory they read) then live in a list of streams in
 * flight, reaped at later pipelined calls and waited for in MPI_Finalize.
 */
#include "shim.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GCC 13 takes the request arrays (malloc'd, n entries) for regions of size 0
 * in MPICH's declarations of PMPI_Waitall/PMPI_Testall (a false
 * -Wstringop-overflow, seen with n read from the stream). */
#pragma GCC diagnostic ignored "-Wstringop-overflow"

size_t shim_pipe_threshold; /* bytes; 0: pipelining off */
static size_t pipe_chunk = (size_t)1024 << 10;

static MPI_Comm pipe_comm = MPI_COMM_NULL;
static MPI_Group world_group = MPI_GROUP_NULL;
static int pipe_tag_ub = 32767;
static int pipe_world_rank, pipe_world_size;
static _Atomic unsigned pipe_next_tag;

static _Atomic unsigned long long stat_sent, stat_received;
static _Atomic unsigned long long stat_dropped; /* bytes of truncated streams drained */
static _Atomic unsigned long long stat_early;   /* streams taken by shim_batch_early */

/* Chunk receives posted at once on the receiving side, and device->host
 * copies in flight at once on the sending side. */
#define RECV_WINDOW 4
#define COPY_WINDOW 8

/* The envelope, as sent (host byte order: both ends run one build). */
struct pipe_env {
    uint64_t magic[2];
    int32_t tag;  /* the stream tag on pipe_comm */
    int32_t src;  /* the sender's rank in MPI_COMM_WORLD */
    uint64_t total;
    uint64_t chunk;
};
_Static_assert(sizeof(struct pipe_env) == SHIM_PIPE_ENV_BYTES, "envelope size");

static const uint64_t pipe_magic[2] = {0x9d3b5e41c0c0a7e1ull, 0x43554350595049ffull};

/* ---- configuration -------------------------------------------------------------- */

/* An unsigned number of KiB in [lo, hi] from @p name, else an error text. */
static int parse_kib(const char *name, size_t lo, size_t hi, size_t *out, char *err,
                     size_t errlen)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0')
        return 0;
    char *end = NULL;
    errno = 0;
    unsigned long long kb = strtoull(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || v[0] == '-' || kb < lo || kb > hi) {
        snprintf(err, errlen, "%s=%s: expected a number of KiB from %zu to %zu", name, v, lo,
                 hi);
        return -1;
    }
    *out = (size_t)kb;
    return 0;
}

int shim_pipe_configure(char *err, size_t errlen)
{
    size_t kb = 0, chunk_kb = pipe_chunk >> 10;
    if (parse_kib("CUCOPY_MPI_PIPELINE_KB", 0, (size_t)1 << 30, &kb, err, errlen) != 0 ||
        parse_kib("CUCOPY_MPI_PIPELINE_CHUNK_KB", 4, (size_t)1 << 20, &chunk_kb, err,
                  errlen) != 0)
        return -1;
    shim_pipe_threshold = kb << 10;
    pipe_chunk = chunk_kb << 10;
    return 0;
}

void shim_pipe_after_init(void)
{
    if (shim_pipe_threshold == 0)
        return;
    int *ub = NULL, flag = 0;
    if (PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag) == MPI_SUCCESS && flag)
        pipe_tag_ub = *ub;
    PMPI_Comm_rank(MPI_COMM_WORLD, &pipe_world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &pipe_world_size);
    if (PMPI_Comm_dup(MPI_COMM_WORLD, &pipe_comm) != MPI_SUCCESS ||
        PMPI_Comm_group(MPI_COMM_WORLD, &world_group) != MPI_SUCCESS) {
        fprintf(stderr, "cucopy_mpi: CUCOPY_MPI_PIPELINE_KB: cannot make the private "
                        "communicator of pipelined messages\n");
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    shim_held_after_init(pipe_tag_ub, pipe_world_rank);
}

/* ---- the copies ----------------------------------------------------------------- */

/* ---- sending ---------------------------------------------------------------------- */

/* A pipelined send: its staging memory (the whole message), the chunks'
 * device->host copies and, once posted, their requests; from when every chunk
 * is posted until MPI completed them all, it waits in the list in flight. */
struct pipe_stream {
    struct pipe_stream *next;
    struct shim_buf b;
    struct pipe_env env;
    int n;
    MPI_Request *reqs;      /* n chunk sends */
    struct shim_copy *copy; /* n device->host copies */
    int dest, dest_world;   /* the receiver on the user's communicator, on pipe_comm */
    int issued, posted;     /* chunks whose copy started, chunks posted */
    int env_sent;           /* the envelope was sent (chunks go only after it) */
    int erc;                /* its result: chunks of a failed one are not sent */
    cucopy_status_t failed; /* the first chunk copy that failed (sent anyway) */
};

static pthread_mutex_t flight_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pipe_stream *in_flight;

static void stream_free(struct pipe_stream *ps)
{
    shim_release(&ps->b);
    free(ps->reqs);
    free(ps->copy);
    free(ps);
}

/* Test (or, @p wait, wait for) the streams in flight; free those done. */
static void reap(int wait)
{
    if (wait)
        pthread_mutex_lock(&flight_mu);
    else if (pthread_mutex_trylock(&flight_mu) != 0)
        return;
    struct pipe_stream *list = in_flight;
    in_flight = NULL;
    pthread_mutex_unlock(&flight_mu);
    struct pipe_stream *keep = NULL;
    while (list != NULL) {
        struct pipe_stream *ps = list;
        list = ps->next;
        int flag = 1;
        if (wait)
            PMPI_Waitall(ps->n, ps->reqs, MPI_STATUSES_IGNORE);
        else
            PMPI_Testall(ps->n, ps->reqs, &flag, MPI_STATUSES_IGNORE);
        if (flag) {
            stream_free(ps);
        } else {
            ps->next = keep;
            keep = ps;
        }
    }
    if (keep == NULL)
        return;
    pthread_mutex_lock(&flight_mu);
    struct pipe_stream **tail = &keep;
    while (*tail != NULL)
        tail = &(*tail)->next;
    *tail = in_flight;
    in_flight = keep;
    pthread_mutex_unlock(&flight_mu);
}

void shim_pipe_before_finalize(void)
{
    if (shim_pipe_threshold == 0)
        return;
    reap(1);
    shim_held_before_finalize();
    if (pipe_comm != MPI_COMM_NULL)
        PMPI_Comm_free(&pipe_comm);
    if (world_group != MPI_GROUP_NULL)
        PMPI_Group_free(&world_group);
}

/* @p rank of @p comm as a rank of MPI_COMM_WORLD; -1 when it has none. */
static int world_rank_of(MPI_Comm comm, int rank)
{
    if (comm == MPI_COMM_WORLD)
        return rank;
    MPI_Group g;
    int w = MPI_UNDEFINED;
    if (PMPI_Comm_group(comm, &g) != MPI_SUCCESS)
        return -1;
    int rc = PMPI_Group_translate_ranks(g, 1, &rank, world_group, &w);
    PMPI_Group_free(&g);
    return rc == MPI_SUCCESS && w != MPI_UNDEFINED ? w : -1;
}

/* The envelope goes in the user's mode; Isend/Issend return its request. */
static int send_envelope(int mode, const void *env, int dest, int tag, MPI_Comm comm,
                         MPI_Request *req)
{
    const void *e = env;
    switch (mode) {
    case SHIM_PIPE_SSEND:
        return PMPI_Ssend(e, SHIM_PIPE_ENV_BYTES, MPI_BYTE, dest, tag, comm);
    case SHIM_PIPE_ISEND:
        return PMPI_Isend(e, SHIM_PIPE_ENV_BYTES, MPI_BYTE, dest, tag, comm, req);
    case SHIM_PIPE_ISSEND:
        return PMPI_Issend(e, SHIM_PIPE_ENV_BYTES, MPI_BYTE, dest, tag, comm, req);
    default:
        return PMPI_Send(e, SHIM_PIPE_ENV_BYTES, MPI_BYTE, dest, tag, comm);
    }
}

/* Bytes of chunk @p k of a stream of @p total bytes in chunks of @p chunk. */
static size_t chunk_len(size_t total, size_t chunk, int k)
{
    size_t off = (size_t)k * chunk;
    return total - off < chunk ? total - off : chunk;
}

/* A buffer's layout: its capacity in bytes, the type's size and
 * true lower bound, and whether it is one contiguous block. 0, or -1 for a
 * type or count MPI will have refused. */
struct recv_layout {
    size_t cap;
    MPI_Count size, tlb;
    int dense;
};

static int layout_of(MPI_Count count, MPI_Datatype dt, struct recv_layout *l)
{
    MPI_Count text = 0, lb = 0, ext = 0;
    if (PMPI_Type_size_x(dt, &l->size) != MPI_SUCCESS || l->size <= 0 || count < 0 ||
        PMPI_Type_get_true_extent_x(dt, &l->tlb, &text) != MPI_SUCCESS ||
        PMPI_Type_get_extent_x(dt, &lb, &ext) != MPI_SUCCESS ||
        (unsigned long long)count > SIZE_MAX / (unsigned long long)l->size)
        return -1;
    l->cap = (size_t)count * (size_t)l->size;
    /* One block in address order: the chunks are its bytes as they lie
     * (size == true extent alone would take a permuted map for one). */
    l->dense = l->size == text && (count == 1 || ext == l->size) &&
               shim_types_in_order(dt) == 1;
    return 0;
}

int shim_pipe_prepare(const char *call, const void *buf, MPI_Count count, MPI_Datatype dt,
                      int dest, MPI_Comm comm, struct pipe_stream **out, int *rc)
{
    struct recv_layout l;
    int inter = 1;
    *out = NULL;
    /* Contiguous buffers only: the chunks are the buffer's bytes in order
     * (a staging of non-contiguous types packs them: not pipelined). */
    if (pipe_comm == MPI_COMM_NULL || count <= 0 || layout_of(count, dt, &l) != 0 || !l.dense ||
        l.cap < shim_pipe_threshold || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS ||
        inter)
        return 0;
    int dest_world = world_rank_of(comm, dest);
    if (dest_world < 0)
        return 0; /* a bad rank: MPI's to report, on the plain path */
    struct shim_buf b;
    *rc = shim_stage(call, buf, count, dt, comm, 0, &b); /* the chunks copy */
    if (*rc != MPI_SUCCESS)
        return 1;
    if (!b.staged)
        return 0; /* host memory */
    reap(0);

    size_t chunk = pipe_chunk;
    int n = (int)((b.bytes + chunk - 1) / chunk);
    struct pipe_stream *ps = calloc(1, sizeof *ps);
    if (ps != NULL) {
        ps->reqs = malloc((size_t)n * sizeof *ps->reqs);
        ps->copy = calloc((size_t)n, sizeof *ps->copy);
    }
    if (ps == NULL || ps->reqs == NULL || ps->copy == NULL) {
        if (ps != NULL) {
            free(ps->reqs);
            free(ps->copy);
            free(ps);
        }
        shim_release(&b);
        return 0; /* no memory for the stream: the message goes whole */
    }
    ps->b = b;
    ps->n = n;
    ps->dest = dest;
    ps->dest_world = dest_world;
    unsigned t = atomic_fetch_add(&pipe_next_tag, 1);
    ps->env = (struct pipe_env){.magic = {pipe_magic[0], pipe_magic[1]},
                                .tag = (int32_t)(t % (unsigned)pipe_tag_ub), /* not tag_ub */
                                .src = pipe_world_rank,
                                .total = b.bytes,
                                .chunk = chunk};
    for (int k = 0; k < n; k++)
        ps->reqs[k] = MPI_REQUEST_NULL;
    /* The copies start first: they run while the envelope goes. */
    shim_pipe_step(ps);
    *out = ps;
    return 1;
}

int shim_pipe_envelope(struct pipe_stream *ps, int mode, int tag, MPI_Comm comm,
                       MPI_Request *req, void *store)
{
    memcpy(store, &ps->env, sizeof ps->env);
    ps->erc = send_envelope(mode, store, ps->dest, tag, comm, req);
    ps->env_sent = 1;
    return ps->erc;
}

int shim_pipe_copies_done(const struct pipe_stream *ps)
{
    for (int k = ps->posted; k < ps->issued; k++)
        if (!shim_copy_is_done(&ps->copy[k]))
            return 0;
    return 1;
}

int shim_pipe_step(struct pipe_stream *ps)
{
    size_t chunk = (size_t)ps->env.chunk;
    struct shim_buf *b = &ps->b;
    shim_copy_progress();
    /* Each chunk posted once its copy is done, in chunk order, after the
     * envelope. */
    while (ps->env_sent && ps->posted < ps->issued && shim_copy_is_done(&ps->copy[ps->posted])) {
        int k = ps->posted;
        if (ps->copy[k].status != CUCOPY_OK && ps->failed == CUCOPY_OK)
            ps->failed = ps->copy[k].status;
        if (ps->erc == MPI_SUCCESS) {
            size_t off = (size_t)k * chunk;
            PMPI_Isend(b->host + off, (int)chunk_len(b->bytes, chunk, k), MPI_BYTE,
                       ps->dest_world, ps->env.tag, pipe_comm, &ps->reqs[k]);
        }
        ps->posted++;
    }
    while (ps->issued < ps->n && ps->issued - ps->posted < COPY_WINDOW) {
        size_t off = (size_t)ps->issued * chunk;
        if (!shim_copy_start(&ps->copy[ps->issued], b->first + off, b->host + off,
                             chunk_len(b->bytes, chunk, ps->issued)))
            break;
        ps->issued++;
    }
    if (ps->erc == MPI_SUCCESS && ps->posted > 0) {
        int flag = 0;
        PMPI_Testall(ps->posted, ps->reqs, &flag, MPI_STATUSES_IGNORE); /* MPI's progress */
    }
    return ps->posted == ps->n;
}

int shim_pipe_finish(struct pipe_stream *ps, cucopy_status_t *failed)
{
    shim_stats_add(0, ps->b.device, ps->b.bytes);
    *failed = ps->failed;
    int erc = ps->erc;
    if (erc != MPI_SUCCESS) {
        stream_free(ps); /* every copy is done: nothing reads the memory */
        return erc;
    }
    atomic_fetch_add_explicit(&stat_sent, 1, memory_order_relaxed);
    pthread_mutex_lock(&flight_mu);
    ps->next = in_flight;
    in_flight = ps;
    pthread_mutex_unlock(&flight_mu);
    return MPI_SUCCESS;
}

int shim_pipe_send(const char *call, int mode, const void *buf, MPI_Count count,
                   MPI_Datatype dt, int dest, int tag, MPI_Comm comm, int *rc)
{
    struct pipe_stream *ps;
    if (!shim_pipe_prepare(call, buf, count, dt, dest, comm, &ps, rc))
        return 0;
    if (ps != NULL) /* else *rc: the staging failed */
        *rc = shim_pipe_run(ps, call, mode, tag, comm, NULL);
    return 1;
}

int shim_pipe_run(struct pipe_stream *ps, const char *call, int mode, int tag, MPI_Comm comm,
                  MPI_Request *req)
{
    /* A nonblocking envelope's bytes must outlive the stream (freed once its
     * chunks completed, maybe before the envelope's send: an Issend): they
     * are kept with the user's request, freed when it completes. */
    int nonblocking = mode == SHIM_PIPE_ISEND || mode == SHIM_PIPE_ISSEND;
    void *kept = nonblocking ? malloc(SHIM_PIPE_ENV_BYTES) : NULL;
    shim_pipe_envelope(ps, mode, tag, comm, req, kept != NULL ? kept : (void *)&ps->env);
    if (kept != NULL && ps->erc == MPI_SUCCESS)
        ps->erc = shim_rec_keep(req, comm, call, kept); /* (without memory: waits for it) */
    else
        free(kept);
    while (!shim_pipe_step(ps))
        if (!shim_copy_is_done(&ps->copy[ps->posted]))
            sched_yield(); /* the copy engine (or the driver's threads) works */
    cucopy_status_t failed;
    int rc = shim_pipe_finish(ps, &failed);
    if (rc == MPI_SUCCESS && failed != CUCOPY_OK)
        rc = shim_cucopy_error(comm, call, "copying a chunk of the device buffer to host "
                                           "memory (the chunks were sent anyway)");
    return rc;
}

/* ---- receiving -------------------------------------------------------------------- */

int shim_pipe_is_envelope(int rc, const MPI_Status *s, const void *first)
{
    if (shim_pipe_threshold == 0 || rc != MPI_SUCCESS || first == NULL)
        return 0;
    if (shim_received_bytes(s) != SHIM_PIPE_ENV_BYTES)
        return 0;
    uint64_t m[2];
    memcpy(m, first, sizeof m);
    return m[0] == pipe_magic[0] && m[1] == pipe_magic[1];
}

int shim_pipe_envelope_total(const void *data, size_t bytes, uint64_t *total)
{
    struct pipe_env env;
    if (bytes != SHIM_PIPE_ENV_BYTES)
        return 0;
    memcpy(&env, data, sizeof env);
    if (env.magic[0] != pipe_magic[0] || env.magic[1] != pipe_magic[1])
        return 0;
    *total = env.total;
    return 1;
}

/* One chunk receive of the window. */
struct pipe_slot {
    int k; /* chunk index; -1: free */
    int received;
    MPI_Request req;
    char *land;    /* where MPI writes it: host + off, or scratch */
    size_t fit;    /* bytes of it within the capacity */
    struct shim_copy copy;
    int copying;
};

/*
 * Receive the chunks of the stream of @p env into @p host (capacity @p cap
 * bytes), copying each to @p dev + its offset when @p dev is not NULL
 * (device @p devno, for stats). Chunks (or their parts) past the capacity
 * are received into scratch memory and dropped. Sets the status's count to
 * the message's bytes (a truncated one's too, as Open MPI does); MPI_SUCCESS,
 * or an error raised on @p comm (MPI_ERR_TRUNCATE for a message larger than
 * the capacity).
 */
static int recv_stream(const char *call, const struct pipe_env *env, char *host, size_t cap,
                       char *dev, int devno, MPI_Comm comm, MPI_Status *s)
{
    if (env->chunk == 0 || env->chunk > INT_MAX || env->total == 0 || env->src < 0 ||
        env->src >= pipe_world_size || env->tag < 0 || env->tag >= pipe_tag_ub)
        return shim_error(comm, MPI_ERR_OTHER, call, "a corrupt pipelined message envelope");
    size_t total = env->total, chunk = env->chunk;
    if (total / chunk >= INT_MAX)
        return shim_error(comm, MPI_ERR_OTHER, call, "a corrupt pipelined message envelope");
    int n = (int)((total + chunk - 1) / chunk);
    /* Receiving the stream blocks (also inside a Test that found the
     * envelope): this process's deferred sends go first, chunks included,
     * since the peer may be receiving a stream of ours meanwhile. */
    shim_defer_flush_if();
    struct pipe_slot slot[RECV_WINDOW];
    char *scratch[RECV_WINDOW] = {NULL};
    for (int i = 0; i < RECV_WINDOW; i++)
        slot[i] = (struct pipe_slot){.k = -1, .req = MPI_REQUEST_NULL};
    int next = 0, finished = 0, rc = MPI_SUCCESS;
    cucopy_status_t failed = CUCOPY_OK;
    while (finished < n) {
        int moved = 0;
        for (int i = 0; i < RECV_WINDOW && next < n; i++) {
            struct pipe_slot *sl = &slot[i];
            if (sl->k >= 0)
                continue;
            size_t off = (size_t)next * chunk, len = chunk_len(total, chunk, next);
            sl->fit = off >= cap ? 0 : cap - off < len ? cap - off : len;
            if (sl->fit == len) {
                sl->land = host + off;
            } else {
                if (scratch[i] == NULL && (scratch[i] = malloc(chunk)) == NULL) {
                    rc = shim_error(comm, MPI_ERR_NO_MEM, call,
                                    "no memory to drain a truncated pipelined message");
                    break;
                }
                sl->land = scratch[i];
            }
            /* Posted in chunk order: non-overtaking matches chunk k to it. */
            int prc = PMPI_Irecv(sl->land, (int)len, MPI_BYTE, env->src, env->tag, pipe_comm,
                                 &sl->req);
            if (prc != MPI_SUCCESS) {
                rc = prc;
                break;
            }
            sl->k = next++;
            sl->received = 0;
            sl->copying = 0;
        }
        if (rc != MPI_SUCCESS)
            break; /* nothing sensible is left to do: the stream cannot be drained */
        if (dev != NULL)
            shim_copy_progress();
        for (int i = 0; i < RECV_WINDOW; i++) {
            struct pipe_slot *sl = &slot[i];
            if (sl->k < 0)
                continue;
            if (!sl->received) {
                int flag = 0;
                PMPI_Test(&sl->req, &flag, MPI_STATUS_IGNORE);
                if (!flag)
                    continue;
                sl->received = 1;
                size_t off = (size_t)sl->k * chunk;
                if (sl->land != host + off && sl->fit > 0)
                    memcpy(host + off, sl->land, sl->fit);
                if (sl->land != host + off)
                    atomic_fetch_add_explicit(&stat_dropped,
                                              chunk_len(total, chunk, sl->k) - sl->fit,
                                              memory_order_relaxed);
                if (dev != NULL && sl->fit > 0) {
                    sl->copying = 1;
                    if (!shim_copy_start(&sl->copy, host + off, dev + off, sl->fit))
                        sl->copying = 2; /* retried below */
                }
            }
            if (sl->copying == 2) {
                size_t off = (size_t)sl->k * chunk;
                if (!shim_copy_start(&sl->copy, host + off, dev + off, sl->fit))
                    continue;
                sl->copying = 1;
            }
            if (sl->copying == 1) {
                if (!shim_copy_is_done(&sl->copy))
                    continue;
                if (sl->copy.status != CUCOPY_OK && failed == CUCOPY_OK)
                    failed = sl->copy.status;
            }
            sl->k = -1;
            finished++;
            moved = 1;
        }
        if (!moved)
            sched_yield(); /* MPI and the copies work elsewhere */
    }
    /* An error left posted receives or copies: wait for them (the memory
     * they touch is the caller's). */
    for (int i = 0; i < RECV_WINDOW; i++) {
        if (slot[i].k < 0)
            continue;
        if (!slot[i].received) {
            PMPI_Cancel(&slot[i].req);
            PMPI_Wait(&slot[i].req, MPI_STATUS_IGNORE);
        }
        while (slot[i].copying == 1 && !shim_copy_is_done(&slot[i].copy))
            shim_copy_progress();
    }
    for (int i = 0; i < RECV_WINDOW; i++)
        free(scratch[i]);
    if (rc != MPI_SUCCESS)
        return rc;
    size_t got = total < cap ? total : cap;
    if (dev != NULL)
        shim_stats_add(1, devno, got);
    atomic_fetch_add_explicit(&stat_received, 1, memory_order_relaxed);
    /* A truncated one counts the message's bytes, as Open MPI 4.1 does
     * without pipelining (measured); the bytes delivered are the room. */
    PMPI_Status_set_elements_x(s, MPI_BYTE, (MPI_Count)total);
    if (failed != CUCOPY_OK)
        return shim_cucopy_error(comm, call, "copying a received chunk to device memory");
    if (total > cap) {
        char what[160];
        snprintf(what, sizeof what, "message truncated: %zu bytes sent, room for %zu", total,
                 cap);
        return shim_error(comm, MPI_ERR_TRUNCATE, call, what);
    }
    return MPI_SUCCESS;
}

int shim_pipe_recv(const char *call, struct shim_buf *b, MPI_Status *s, MPI_Comm comm)
{
    struct pipe_env env;
    memcpy(&env, b->host, sizeof env);
    if (!b->staged || b->layout == NULL)
        return recv_stream(call, &env, b->host, b->bytes, b->staged ? b->first : NULL,
                           b->device, comm, s);
    /* A non-contiguous device buffer, staged packed (shim_types.c): the
     * stream lands in the packed staging memory, then what arrived is
     * scattered to the type map. */
    int rc = recv_stream(call, &env, b->host, b->bytes, NULL, -1, comm, s);
    if (shim_copy_ok(rc)) {
        int rc2 = shim_unstage(call, b, shim_received_bytes(s), comm);
        if (rc == MPI_SUCCESS)
            rc = rc2;
    }
    return rc;
}

int shim_pipe_scatter(const void *packed, size_t bytes, void *buf, MPI_Count count,
                      MPI_Datatype dt, MPI_Comm comm)
{
    MPI_Count size = 0;
    if (PMPI_Type_size_x(dt, &size) != MPI_SUCCESS || size <= 0)
        return MPI_ERR_TYPE;
    MPI_Count whole = (MPI_Count)bytes / size;
    if (whole > count)
        whole = count;
    if (whole > INT_MAX || bytes > INT_MAX)
        return shim_error(comm, MPI_ERR_COUNT, "MPI_Recv",
                          "a pipelined message into a non-contiguous datatype larger than "
                          "2 GiB is not supported");
    if ((MPI_Count)bytes == whole * size) {
        int pos = 0;
        return PMPI_Unpack(packed, (int)bytes, &pos, buf, (int)whole, dt, comm);
    }
    /* A partial last element, which MPI_Unpack cannot scatter: MPI's own
     * receive does, from a send to this process on the private communicator
     * under the tag no stream uses (one at a time: threads would match each
     * other's). */
    static pthread_mutex_t self_mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&self_mu);
    int rc = PMPI_Sendrecv(packed, (int)bytes, MPI_BYTE, pipe_world_rank, pipe_tag_ub, buf,
                           (int)(count > INT_MAX ? INT_MAX : count), dt, pipe_world_rank,
                           pipe_tag_ub, pipe_comm, MPI_STATUS_IGNORE);
    pthread_mutex_unlock(&self_mu);
    return rc;
}

int shim_pipe_host_recv(const char *call, int rc, void *buf, MPI_Count count, MPI_Datatype dt,
                        MPI_Comm comm, MPI_Status *s)
{
    struct recv_layout l;
    if (shim_pipe_threshold == 0 || rc != MPI_SUCCESS ||
        shim_received_bytes(s) != SHIM_PIPE_ENV_BYTES || layout_of(count, dt, &l) != 0)
        return rc;
    size_t cap = l.cap;
    MPI_Count size = l.size, tlb = l.tlb;
    if (l.dense) {
        struct shim_buf hb = {.host = (char *)buf + tlb, .bytes = cap};
        if (!shim_pipe_is_envelope(rc, s, hb.host))
            return rc;
        return shim_pipe_recv(call, &hb, s, comm);
    }
    /* Not one block: the envelope's bytes are scattered by the datatype;
     * pack the elements that hold them back together. */
    MPI_Count nel = (SHIM_PIPE_ENV_BYTES + size - 1) / size;
    if (nel > count || nel * size > INT_MAX || cap > INT_MAX)
        return rc;
    char *head = malloc((size_t)(nel * size));
    if (head == NULL)
        return rc;
    int pos = 0;
    int env_ok = PMPI_Pack(buf, (int)nel, dt, head, (int)(nel * size), &pos, comm) ==
                     MPI_SUCCESS &&
                 shim_pipe_is_envelope(rc, s, head);
    struct pipe_env env;
    memcpy(&env, head, sizeof env);
    free(head);
    if (!env_ok)
        return rc;
    size_t got = env.total < cap ? env.total : cap;
    char *packed = malloc(got > 0 ? got : 1);
    if (packed == NULL)
        return shim_error(comm, MPI_ERR_NO_MEM, call,
                          "no memory to receive a pipelined message into a non-contiguous "
                          "datatype");
    int rrc = recv_stream(call, &env, packed, got, NULL, -1, comm, s);
    int src2 = shim_copy_ok(rrc) ? shim_pipe_scatter(packed, got, buf, count, dt, comm)
                                 : MPI_SUCCESS;
    free(packed);
    return rrc != MPI_SUCCESS ? rrc : src2;
}

int shim_pipe_watch(MPI_Request *req, const char *call, void *buf, MPI_Count count,
                    MPI_Datatype dt, MPI_Comm comm, int persistent)
{
    struct recv_layout l;
    if (layout_of(count, dt, &l) != 0 || !l.dense || l.cap < SHIM_PIPE_ENV_BYTES ||
        buf == MPI_BOTTOM)
        return MPI_SUCCESS; /* not watched: docs/mpi.md */
    struct shim_buf hb = {.host = (char *)buf + l.tlb, .bytes = l.cap, .device = -1};
    return persistent ? shim_rec_add_persistent(req, 1, comm, call, &hb)
                      : shim_rec_add(req, 1, comm, call, &hb);
}

int shim_pipe_early_candidate(const struct shim_rec *r)
{
    return shim_pipe_on() && r != NULL && r->recv && !r->coll && !r->copied &&
           (!r->persistent || r->active) && r->buf.bytes >= SHIM_PIPE_ENV_BYTES;
}

int shim_pipe_take_early(struct shim_rec *r, const MPI_Status *st)
{
    if (!shim_pipe_is_envelope(MPI_SUCCESS, st, r->buf.host))
        return 0;
    shim_rec_copy_now(r, st); /* the record keeps the count for the Waitall's status */
    atomic_fetch_add_explicit(&stat_early, 1, memory_order_relaxed);
    return 1;
}

int shim_pipe_stats(char *out, size_t len)
{
    if (shim_pipe_threshold == 0)
        return snprintf(out, len, "%s", ""); /* the line as without pipelining */
    return snprintf(out, len, "; pipelined (>= %zu KiB, chunks of %zu KiB): sent %llu, "
                              "received %llu (%llu before their Waitall), truncated bytes "
                              "dropped %llu",
                    shim_pipe_threshold >> 10, pipe_chunk >> 10,
                    (unsigned long long)atomic_load(&stat_sent),
                    (unsigned long long)atomic_load(&stat_received),
                    (unsigned long long)atomic_load(&stat_early),
                    (unsigned long long)atomic_load(&stat_dropped));
}
