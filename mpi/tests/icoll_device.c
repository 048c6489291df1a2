/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Nonblocking collectives with device buffers, run under
 * LD_PRELOAD=libcucopy_mpi.so (mpirun -n 2 and -n 3, two devices per rank):
 * MPI_Ibcast, Igather, Iscatter, Iallgather, Ialltoall, Iallreduce, Ireduce,
 * Iscan, Iexscan, Ireduce_scatter_block and Ireduce_scatter, the v forms and
 * Ialltoallw (a datatype per peer, byte displacements), with buffers on
 * device 0, device 1 and the host, roots other than 0, every MPI_IN_PLACE
 * form; the reductions by every predefined op that applies on int, float and
 * double and by a user-defined op on double. Many collectives are
 * outstanding at once and are completed in an order other than the one they
 * were started in (a different one on each rank), by every completion call:
 * Waitall, Wait, loops of Test, Testall, Testany, Testsome and
 * Request_get_status, Waitany, Waitsome; mixed with point-to-point
 * Isend/Irecv on device buffers. Every buffer is read back from the device
 * whole, 64 guard bytes on each side (coll_prog.h), after completion; the
 * device receive buffers are checked untouched until then. Also: a
 * Request_free'd collective (the shim completes it; its data reaches the
 * device at a later completion call), refused input (a reduction between a
 * vector type on device memory and host memory, Ialltoallw of one,
 * MPI_BOTTOM reaching device memory, an intercommunicator) and,
 * on an MPI-4 library, all of it again through the large-count MPI_IX_c
 * calls.
 *
 * Without the shim the first device-buffer call faults inside MPI: the
 * negative control (mpi/tests/CMakeLists.txt, argument "movement").
 *
 * Prints "icoll_device: rank R: PASS" or "FAILED ..." lines; exit status 1 on
 * a failure.
 */
#define COLL_PROG "icoll_device"
#include "coll_prog.h"

/* 1: call the large-count MPI_IX_c forms (MPI-4), counted in large_calls. */
static int large COLL_PROG_UNUSED, large_calls COLL_PROG_UNUSED;

#if MPI_VERSION >= 4
#define ICALL(name, ...)                                                                      \
    (large_calls += large, large ? MPI_##name##_c(__VA_ARGS__) : MPI_##name(__VA_ARGS__))
/* The v forms: the _c calls take MPI_Count counts and MPI_Aint displacements. */
#define VCALL(name, ARGS, ARGS_C) (large_calls += large, large ? MPI_##name##_c ARGS_C : MPI_##name ARGS)
#else
#define ICALL(name, ...) MPI_##name(__VA_ARGS__)
#define VCALL(name, ARGS, ARGS_C) MPI_##name ARGS
#endif

/* ---- a set of outstanding calls: their requests and the buffers to check ------------ */

#define MAXREQ 32
#define MAXBUF 48

struct set {
    MPI_Request req[MAXREQ];
    const char *call[MAXREQ];
    int n;
    struct buf buf[MAXBUF];
    const char *name[MAXBUF];
    int nbuf;
};

/* A new buffer of the set, every byte OLD (on the device too). */
static struct buf *add(struct set *S, int dev, size_t bytes, const char *name)
{
    if (S->nbuf == MAXBUF) {
        fprintf(stderr, "icoll_device: too many buffers\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    S->name[S->nbuf] = name;
    S->buf[S->nbuf] = mk(dev, bytes);
    return &S->buf[S->nbuf++];
}

/* The request slot of a new call named @p call. */
static MPI_Request *slot(struct set *S, const char *call)
{
    if (S->n == MAXREQ) {
        fprintf(stderr, "icoll_device: too many requests\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    S->call[S->n] = call;
    S->req[S->n] = MPI_REQUEST_NULL;
    return &S->req[S->n++];
}

/* An MPI_IN_PLACE input: rank's elems elements of t under a vbase of its own
 * (a missing copy-in must not find the right bytes in reused staging memory).
 * The caller computes the expected result, then sets vbase back to 0. */
static struct buf *in_place(struct set *S, int dev, size_t bytes, MPI_Datatype t, MPI_Op op,
                            size_t elems, const char *name)
{
    vbase = 50 + (in_place_calls++ % 40);
    struct buf *b = add(S, dev, bytes, name);
    fill_op(want_at(b, 0), t, op, rank, elems);
    put(b);
    return b;
}

/* ---- completion, by method ---------------------------------------------------------- */

enum {
    BY_WAITALL,
    BY_WAIT,
    BY_TEST,
    BY_TESTALL,
    BY_WAITANY,
    BY_TESTANY,
    BY_WAITSOME,
    BY_TESTSOME,
    BY_GET_STATUS,
    NMETHODS
};
static const char *const method_name[NMETHODS] = {
    "Waitall", "Wait",    "Test loop",     "Testall loop",           "Waitany",
    "Testany loop", "Waitsome", "Testsome loop", "Request_get_status loop + Wait"};

/* Give up on a loop after this long (the test is then failed and aborted). */
static void deadline(double t0, int method)
{
    if (MPI_Wtime() - t0 > 60) {
        fprintf(stderr, "icoll_device: rank %d: FAILED: %s did not complete in 60 s\n", rank,
                method_name[method]);
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
}

/* Complete every request of S by @p method, in an order other than the one
 * the calls were started in and different on each rank: the handles are
 * copied into an array in that order (the shim finds records by value). */
static void complete(struct set *S, int method)
{
    int n = S->n;
    MPI_Request r[MAXREQ];
    MPI_Status st[MAXREQ];
    for (int i = 0; i < n; i++)
        r[i] = S->req[(rank % 2 == 0) ? n - 1 - i : (i + 1 + rank) % n];
    double t0 = MPI_Wtime();
    int done = 0, flag = 0, idx = 0, outc = 0, ind[MAXREQ];
    switch (method) {
    case BY_WAITALL:
        MPI_OK(MPI_Waitall(n, r, rank % 2 ? MPI_STATUSES_IGNORE : st));
        break;
    case BY_WAIT:
        for (int i = 0; i < n; i++)
            MPI_OK(MPI_Wait(&r[i], i % 2 ? MPI_STATUS_IGNORE : &st[i]));
        break;
    case BY_TEST:
        while (done < n) {
            for (int i = 0; i < n; i++) {
                if (r[i] == MPI_REQUEST_NULL)
                    continue;
                MPI_OK(MPI_Test(&r[i], &flag, MPI_STATUS_IGNORE));
                done += flag;
            }
            deadline(t0, method);
        }
        break;
    case BY_TESTALL:
        for (flag = 0; !flag; deadline(t0, method))
            MPI_OK(MPI_Testall(n, r, &flag, MPI_STATUSES_IGNORE));
        break;
    case BY_WAITANY:
        for (int i = 0; i < n; i++) {
            MPI_OK(MPI_Waitany(n, r, &idx, &st[0]));
            CHECK(idx >= 0 && idx < n, "Waitany: index %d of %d", idx, n);
        }
        break;
    case BY_TESTANY:
        while (done < n) {
            MPI_OK(MPI_Testany(n, r, &idx, &flag, MPI_STATUS_IGNORE));
            done += flag && idx != MPI_UNDEFINED;
            deadline(t0, method);
        }
        break;
    case BY_WAITSOME:
    case BY_TESTSOME:
        while (done < n) {
            if (method == BY_WAITSOME)
                MPI_OK(MPI_Waitsome(n, r, &outc, ind, st));
            else
                MPI_OK(MPI_Testsome(n, r, &outc, ind, MPI_STATUSES_IGNORE));
            CHECK(outc != MPI_UNDEFINED, "%s: MPI_UNDEFINED with requests left",
                  method_name[method]);
            done += outc == MPI_UNDEFINED ? n : outc;
            deadline(t0, method);
        }
        break;
    case BY_GET_STATUS:
        /* Request_get_status copies a finished collective to the device
         * once and keeps the request; Wait then frees it. */
        for (int i = 0; i < n; i++) {
            for (flag = 0; !flag; deadline(t0, method))
                MPI_OK(MPI_Request_get_status(r[i], &flag, MPI_STATUS_IGNORE));
            MPI_OK(MPI_Wait(&r[i], MPI_STATUS_IGNORE));
        }
        break;
    }
    for (int i = 0; i < n; i++)
        CHECK(r[i] == MPI_REQUEST_NULL, "%s: request %d still active after completion",
              method_name[method], i);
}

/* Every buffer of S against what it must hold; then drop them. */
static void check_set(struct set *S, int method, const char *what)
{
    char name[160];
    for (int i = 0; i < S->nbuf; i++) {
        snprintf(name, sizeof name, "%s %s (completed by %s, %d outstanding)", what, S->name[i],
                 method_name[method], S->n);
        verify(&S->buf[i], name);
        drop(&S->buf[i]);
    }
    S->nbuf = 0;
    S->n = 0;
}

static int dev_of(int p, int which)
{
    return places[p][which] == HOST ? HOST : places[p][which] % ndev;
}

/* ---- data movement ------------------------------------------------------------------ */

/* Start every data movement call of placement p (send side sd, receive side
 * rd) in S: Ibcast, Igather, Iscatter, Iallgather, Ialltoall, each also with
 * MPI_IN_PLACE. */
static void start_movement(struct set *S, int sd, int rd, size_t n)
{
    size_t bn = n * sizeof(int), all = (size_t)nranks * bn;
    int root = nranks > 2 ? 1 : nranks - 1;
    MPI_Comm w = MPI_COMM_WORLD;

    /* Ibcast from the last rank. */
    struct buf *b = add(S, rd, bn, "MPI_Ibcast buffer");
    if (rank == nranks - 1) {
        fill(want_at(b, 0), MPI_INT, 30, n);
        put(b);
    }
    MPI_OK(ICALL(Ibcast, b->p, (int)n, MPI_INT, nranks - 1, w, slot(S, "Ibcast")));
    fill(want_at(b, 0), MPI_INT, 30, n);

    /* One send buffer for Igather and Iallgather (read by both at once). */
    struct buf *s = add(S, sd, bn, "sendbuf of Igather and Iallgather");
    fill(want_at(s, 0), MPI_INT, rank, n);
    put(s);

    struct buf *r = add(S, rd, all, "MPI_Igather recvbuf");
    MPI_OK(ICALL(Igather, s->p, (int)n, MPI_INT, r->p, (int)n, MPI_INT, root, w,
                 slot(S, "Igather")));
    if (rank == root)
        for (int q = 0; q < nranks; q++)
            fill(want_at(r, q * bn), MPI_INT, q, n);

    /* Igather MPI_IN_PLACE at the root: its block stays where it is. */
    r = add(S, rd, all, "MPI_Igather in place recvbuf");
    if (rank == root) {
        fill(want_at(r, root * bn), MPI_INT, root, n);
        put(r);
    }
    MPI_OK(ICALL(Igather, rank == root ? MPI_IN_PLACE : s->p, (int)n, MPI_INT, r->p, (int)n,
                 MPI_INT, root, w, slot(S, "Igather in place")));
    if (rank == root)
        for (int q = 0; q < nranks; q++)
            fill(want_at(r, q * bn), MPI_INT, q, n);

    /* Iscatter: sendbuf at the root only; then MPI_IN_PLACE at the root. */
    struct buf *ss = add(S, sd, all, "MPI_Iscatter sendbuf");
    if (rank == root) {
        for (int q = 0; q < nranks; q++)
            fill(want_at(ss, q * bn), MPI_INT, q + 10, n);
        put(ss);
    }
    r = add(S, rd, bn, "MPI_Iscatter recvbuf");
    MPI_OK(ICALL(Iscatter, ss->p, (int)n, MPI_INT, r->p, (int)n, MPI_INT, root, w,
                 slot(S, "Iscatter")));
    fill(want_at(r, 0), MPI_INT, rank + 10, n);
    r = add(S, rd, bn, "MPI_Iscatter in place recvbuf");
    MPI_OK(ICALL(Iscatter, ss->p, (int)n, MPI_INT, rank == root ? MPI_IN_PLACE : r->p, (int)n,
                 MPI_INT, root, w, slot(S, "Iscatter in place")));
    if (rank != root)
        fill(want_at(r, 0), MPI_INT, rank + 10, n);

    /* Iallgather, and in place (each rank's own block of recvbuf). */
    r = add(S, rd, all, "MPI_Iallgather recvbuf");
    MPI_OK(ICALL(Iallgather, s->p, (int)n, MPI_INT, r->p, (int)n, MPI_INT, w,
                 slot(S, "Iallgather")));
    for (int q = 0; q < nranks; q++)
        fill(want_at(r, q * bn), MPI_INT, q, n);
    r = add(S, rd, all, "MPI_Iallgather in place recvbuf");
    fill(want_at(r, rank * bn), MPI_INT, rank + 20, n);
    put(r);
    MPI_OK(ICALL(Iallgather, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r->p, (int)n, MPI_INT, w,
                 slot(S, "Iallgather in place")));
    for (int q = 0; q < nranks; q++)
        fill(want_at(r, q * bn), MPI_INT, q + 20, n);

    /* Ialltoall: block q of rank r's sendbuf is seed r * 100 + q; in place too. */
    struct buf *sa = add(S, sd, all, "MPI_Ialltoall sendbuf");
    for (int q = 0; q < nranks; q++)
        fill(want_at(sa, q * bn), MPI_INT, rank * 100 + q, n);
    put(sa);
    r = add(S, rd, all, "MPI_Ialltoall recvbuf");
    MPI_OK(ICALL(Ialltoall, sa->p, (int)n, MPI_INT, r->p, (int)n, MPI_INT, w,
                 slot(S, "Ialltoall")));
    for (int q = 0; q < nranks; q++)
        fill(want_at(r, q * bn), MPI_INT, q * 100 + rank, n);
    r = add(S, rd, all, "MPI_Ialltoall in place recvbuf");
    for (int q = 0; q < nranks; q++)
        fill(want_at(r, q * bn), MPI_INT, rank * 100 + q + 7, n);
    put(r);
    MPI_OK(ICALL(Ialltoall, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r->p, (int)n, MPI_INT, w,
                 slot(S, "Ialltoall in place")));
    for (int q = 0; q < nranks; q++)
        fill(want_at(r, q * bn), MPI_INT, q * 100 + rank + 7, n);
}

static void test_movement(void)
{
    static const size_t counts[] = {513, 1, 70000};
    struct set S = {0};
    for (size_t p = 0; p < NPLACES; p++)
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
            int method = (int)(p * 3 + k) % NMETHODS;
            start_movement(&S, dev_of(p, 0), dev_of(p, 1), counts[k]);
            complete(&S, method);
            check_set(&S, method, "movement");
        }
}

/* ---- reductions --------------------------------------------------------------------- */

static void start_reductions(struct set *S, MPI_Datatype t, MPI_Op op, int sd, int rd)
{
    size_t n = 1001, nip = 250, es = esize(t), bn = n * es, all = (size_t)nranks * bn;
    int root = nranks - 1;
    MPI_Comm w = MPI_COMM_WORLD;

    /* One send buffer, read by every call at once. */
    struct buf *s = add(S, sd, all, "sendbuf");
    fill_op(want_at(s, 0), t, op, rank, (size_t)nranks * n);
    put(s);

    struct buf *r = add(S, rd, bn, "MPI_Iallreduce recvbuf");
    MPI_OK(ICALL(Iallreduce, s->p, r->p, (int)n, t, op, w, slot(S, "Iallreduce")));
    reduced(want_at(r, 0), t, op, nranks, 0, n);

    r = in_place(S, rd, bn, t, op, n, "MPI_Iallreduce in place");
    MPI_OK(ICALL(Iallreduce, MPI_IN_PLACE, r->p, (int)n, t, op, w,
                 slot(S, "Iallreduce in place")));
    reduced(want_at(r, 0), t, op, nranks, 0, n);
    vbase = 0;

    r = add(S, rd, bn, "MPI_Ireduce recvbuf");
    MPI_OK(ICALL(Ireduce, s->p, r->p, (int)n, t, op, root, w, slot(S, "Ireduce")));
    if (rank == root)
        reduced(want_at(r, 0), t, op, nranks, 0, n);

    /* 250 elements: Debian's MPICH 4.0.2 faults in an MPI_IN_PLACE Reduce of
     * more than 2048 bytes at the root (docs/mpi.md). The others send from s. */
    r = add(S, rd, bn, "MPI_Ireduce in place recvbuf");
    if (rank == root) {
        fill_op(want_at(r, 0), t, op, rank, nip);
        put(r);
    }
    MPI_OK(ICALL(Ireduce, rank == root ? MPI_IN_PLACE : s->p, r->p, (int)nip, t, op, root, w,
                 slot(S, "Ireduce in place")));
    if (rank == root)
        reduced(want_at(r, 0), t, op, nranks, 0, nip);

    r = add(S, rd, bn, "MPI_Iscan recvbuf");
    MPI_OK(ICALL(Iscan, s->p, r->p, (int)n, t, op, w, slot(S, "Iscan")));
    reduced(want_at(r, 0), t, op, rank + 1, 0, n);

    r = in_place(S, rd, bn, t, op, n, "MPI_Iscan in place");
    MPI_OK(ICALL(Iscan, MPI_IN_PLACE, r->p, (int)n, t, op, w, slot(S, "Iscan in place")));
    reduced(want_at(r, 0), t, op, rank + 1, 0, n);
    vbase = 0;

    /* Iexscan: rank 0's recvbuf is undefined; the shim leaves it as it was. */
    r = add(S, rd, bn, "MPI_Iexscan recvbuf");
    MPI_OK(ICALL(Iexscan, s->p, r->p, (int)n, t, op, w, slot(S, "Iexscan")));
    if (rank > 0)
        reduced(want_at(r, 0), t, op, rank, 0, n);

    r = in_place(S, rd, bn, t, op, n, "MPI_Iexscan in place");
    MPI_OK(ICALL(Iexscan, MPI_IN_PLACE, r->p, (int)n, t, op, w, slot(S, "Iexscan in place")));
    if (rank > 0)
        reduced(want_at(r, 0), t, op, rank, 0, n);
    vbase = 0;

    /* Ireduce_scatter_block: block `rank` of the reduction of size x n. */
    r = add(S, rd, all, "MPI_Ireduce_scatter_block recvbuf");
    MPI_OK(ICALL(Ireduce_scatter_block, s->p, r->p, (int)n, t, op, w,
                 slot(S, "Ireduce_scatter_block")));
    reduced(want_at(r, 0), t, op, nranks, (size_t)rank * n, n);

    r = in_place(S, rd, all, t, op, (size_t)nranks * n, "MPI_Ireduce_scatter_block in place");
    MPI_OK(ICALL(Ireduce_scatter_block, MPI_IN_PLACE, r->p, (int)n, t, op, w,
                 slot(S, "Ireduce_scatter_block in place")));
    reduced(want_at(r, 0), t, op, nranks, (size_t)rank * n, n);
    vbase = 0;

    /* Ireduce_scatter: uneven blocks, n - 100 q elements for rank q (the
     * counts must stay as they are until completion: static). */
    static int rc[64];
#if MPI_VERSION >= 4
    static MPI_Count rc_c[64];
#endif
    size_t off = 0, total = 0;
    for (int q = 0; q < nranks && q < 64; q++) {
        rc[q] = (int)n - 100 * q;
#if MPI_VERSION >= 4
        rc_c[q] = rc[q];
#endif
        off += q < rank ? (size_t)rc[q] : 0;
        total += (size_t)rc[q];
    }
    for (int ip = 0; ip < 2; ip++) {
        const void *sb = s->p;
        if (ip) {
            r = in_place(S, rd, all, t, op, total, "MPI_Ireduce_scatter in place");
            sb = MPI_IN_PLACE;
        } else {
            r = add(S, rd, all, "MPI_Ireduce_scatter recvbuf");
        }
        MPI_Request *q = slot(S, ip ? "Ireduce_scatter in place" : "Ireduce_scatter");
#if MPI_VERSION >= 4
        if (large) {
            large_calls++;
            MPI_OK(MPI_Ireduce_scatter_c(sb, r->p, rc_c, t, op, w, q));
        } else
#endif
            MPI_OK(MPI_Ireduce_scatter(sb, r->p, rc, t, op, w, q));
        reduced(want_at(r, 0), t, op, nranks, off, (size_t)rc[rank]);
        vbase = 0;
    }
}

/* Every op of red_ops on every type, in the placements red_everywhere says
 * (coll_prog.h); the completion methods in turn. */
static void test_reductions(void)
{
    struct set S = {0};
    char what[64];
    int k = 0, j = 0;
    for (int ti = 0; ti < NRED_TYPES; ti++) {
        MPI_Datatype t = red_types[ti];
        MPI_Op ops[10];
        int nops = red_ops(t, ops);
        for (int oi = 0; oi < nops; oi++) {
            int all = red_everywhere(t, oi);
            for (size_t p = 0; p < NPLACES; p++) {
                if (!all && p != (size_t)j % NPLACES)
                    continue;
                int method = k++ % NMETHODS;
                start_reductions(&S, t, ops[oi], dev_of(p, 0), dev_of(p, 1));
                complete(&S, method);
                snprintf(what, sizeof what, "%s %s", tname(t), oname(ops[oi]));
                check_set(&S, method, what);
            }
            j += !all;
        }
    }
}

/* ---- the v forms -------------------------------------------------------------------- */

/* Blocks of a v call (struct vlay, coll_prog.h): in reverse order of q with a
 * gap before each; the gaps must keep their old bytes. */

/* Igatherv, Iscatterv, Iallgatherv, Ialltoallv (each also with MPI_IN_PLACE),
 * all outstanding at once, on placement p, completed by @p method. */
static void one_v(int sd, int rd, size_t n, int method)
{
    struct set S = {0};
    struct vlay G, A, R, P; /* gather/scatter/allgather; alltoallv send, recv; in place */
    int root = nranks > 2 ? 1 : nranks - 1;
    MPI_Comm w = MPI_COMM_WORLD;
    for (int q = 0; q < nranks; q++) {
        G.counts[q] = (int)n + 37 * q;
        A.counts[q] = (int)n + 11 * rank + 3 * q; /* rank -> q */
        R.counts[q] = (int)n + 11 * q + 3 * rank; /* q -> rank */
        P.counts[q] = (int)n + 3 * (rank + q);    /* symmetric, for in place */
    }
    vlay_place(&G, NULL, 1);
    vlay_place(&A, NULL, 1);
    vlay_place(&R, NULL, 1);
    vlay_place(&P, NULL, 1);
    size_t gb = G.size * sizeof(int), mine = (size_t)G.counts[rank];

    struct buf *s = add(&S, sd, mine * sizeof(int), "Igatherv/Iallgatherv sendbuf");
    fill(want_at(s, 0), MPI_INT, rank + 60, mine);
    put(s);
    struct buf *r = add(&S, rd, gb, "MPI_Igatherv recvbuf");
    MPI_OK(VCALL(Igatherv, (s->p, (int)mine, MPI_INT, r->p, G.counts, G.displs, MPI_INT, root, w,
                            slot(&S, "Igatherv")),
                 (s->p, (int)mine, MPI_INT, r->p, G.ccounts, G.cdispls, MPI_INT, root, w,
                  slot(&S, "Igatherv"))));
    if (rank == root)
        VFILL(r, G, q + 60);

    r = add(&S, rd, gb, "MPI_Igatherv in place recvbuf");
    if (rank == root) {
        fill(want_at(r, (size_t)G.displs[root] * sizeof(int)), MPI_INT, root + 60, mine);
        put(r);
    }
    const void *sb = rank == root ? MPI_IN_PLACE : s->p;
    MPI_OK(VCALL(Igatherv, (sb, (int)mine, MPI_INT, r->p, G.counts, G.displs, MPI_INT, root, w,
                            slot(&S, "Igatherv in place")),
                 (sb, (int)mine, MPI_INT, r->p, G.ccounts, G.cdispls, MPI_INT, root, w,
                  slot(&S, "Igatherv in place"))));
    if (rank == root)
        VFILL(r, G, q + 60);

    struct buf *ss = add(&S, sd, gb, "MPI_Iscatterv sendbuf");
    if (rank == root) {
        VFILL(ss, G, q + 70);
        put(ss);
    }
    r = add(&S, rd, mine * sizeof(int), "MPI_Iscatterv recvbuf");
    MPI_OK(VCALL(Iscatterv, (ss->p, G.counts, G.displs, MPI_INT, r->p, (int)mine, MPI_INT, root, w,
                             slot(&S, "Iscatterv")),
                 (ss->p, G.ccounts, G.cdispls, MPI_INT, r->p, (int)mine, MPI_INT, root, w,
                  slot(&S, "Iscatterv"))));
    fill(want_at(r, 0), MPI_INT, rank + 70, mine);
    r = add(&S, rd, mine * sizeof(int), "MPI_Iscatterv in place recvbuf");
    void *rb = rank == root ? MPI_IN_PLACE : r->p;
    MPI_OK(VCALL(Iscatterv, (ss->p, G.counts, G.displs, MPI_INT, rb, (int)mine, MPI_INT, root, w,
                             slot(&S, "Iscatterv in place")),
                 (ss->p, G.ccounts, G.cdispls, MPI_INT, rb, (int)mine, MPI_INT, root, w,
                  slot(&S, "Iscatterv in place"))));
    if (rank != root)
        fill(want_at(r, 0), MPI_INT, rank + 70, mine);

    r = add(&S, rd, gb, "MPI_Iallgatherv recvbuf");
    MPI_OK(VCALL(Iallgatherv, (s->p, (int)mine, MPI_INT, r->p, G.counts, G.displs, MPI_INT, w,
                               slot(&S, "Iallgatherv")),
                 (s->p, (int)mine, MPI_INT, r->p, G.ccounts, G.cdispls, MPI_INT, w,
                  slot(&S, "Iallgatherv"))));
    VFILL(r, G, q + 60);
    r = add(&S, rd, gb, "MPI_Iallgatherv in place recvbuf");
    fill(want_at(r, (size_t)G.displs[rank] * sizeof(int)), MPI_INT, rank + 90, mine);
    put(r);
    MPI_OK(VCALL(Iallgatherv,
                 (MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r->p, G.counts, G.displs, MPI_INT, w,
                  slot(&S, "Iallgatherv in place")),
                 (MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r->p, G.ccounts, G.cdispls, MPI_INT, w,
                  slot(&S, "Iallgatherv in place"))));
    VFILL(r, G, q + 90);

    /* Ialltoallv: the block from r to q is seed r * 100 + q + 5. */
    struct buf *sa = add(&S, sd, A.size * sizeof(int), "MPI_Ialltoallv sendbuf");
    VFILL(sa, A, rank * 100 + q + 5);
    put(sa);
    r = add(&S, rd, R.size * sizeof(int), "MPI_Ialltoallv recvbuf");
    MPI_OK(VCALL(Ialltoallv,
                 (sa->p, A.counts, A.displs, MPI_INT, r->p, R.counts, R.displs, MPI_INT, w,
                  slot(&S, "Ialltoallv")),
                 (sa->p, A.ccounts, A.cdispls, MPI_INT, r->p, R.ccounts, R.cdispls, MPI_INT, w,
                  slot(&S, "Ialltoallv"))));
    VFILL(r, R, q * 100 + rank + 5);
    r = add(&S, rd, P.size * sizeof(int), "MPI_Ialltoallv in place recvbuf");
    VFILL(r, P, rank * 100 + q + 9);
    put(r);
    MPI_OK(VCALL(Ialltoallv,
                 (MPI_IN_PLACE, P.counts, P.displs, MPI_INT, r->p, P.counts, P.displs, MPI_INT,
                  w, slot(&S, "Ialltoallv in place")),
                 (MPI_IN_PLACE, P.ccounts, P.cdispls, MPI_INT, r->p, P.ccounts, P.cdispls,
                  MPI_INT, w, slot(&S, "Ialltoallv in place"))));
    VFILL(r, P, q * 100 + rank + 9);

    /* Ialltoallw: the counts of Ialltoallv, the pair a -> b of type
     * w_type(a, b) (int, double or three ints) at byte displacements, gaps
     * holding a canary; in place too. The arrays live until completion.
     * MPICH (4.0.2; host memory, no shim, too) gets an in-place Ialltoallw
     * with a different type per peer wrong (wrong bytes at -n 2, "Message
     * truncated" at -n 3; the blocking one is right): in place, doubles
     * from every peer there. */
#ifdef MPICH_VERSION
    const int mixed_in_place = 0;
#else
    const int mixed_in_place = 1;
#endif
    struct vlay WS = A, WR = R, WP = P;
    MPI_Datatype wst[VMAX], wrt[VMAX], wpt[VMAX];
    size_t wsu[VMAX], wru[VMAX], wpu[VMAX];
    for (int q = 0; q < nranks; q++) {
        wst[q] = w_type(rank, q);
        wrt[q] = w_type(q, rank);
        wpt[q] = mixed_in_place ? wrt[q] : MPI_DOUBLE;
        wsu[q] = w_size(rank, q);
        wru[q] = w_size(q, rank);
        wpu[q] = mixed_in_place ? wru[q] : sizeof(double);
    }
    vlay_place(&WS, wsu, 0);
    vlay_place(&WR, wru, 1);
    vlay_place(&WP, wpu, 0);
    struct buf *sw = add(&S, sd, WS.size, "MPI_Ialltoallw sendbuf");
    canary(sw);
    for (int q = 0; q < nranks; q++)
        w_fill(want_at(sw, (size_t)WS.displs[q]), rank, q, 3, (size_t)WS.counts[q] * wsu[q]);
    put(sw);
    r = add(&S, rd, WR.size, "MPI_Ialltoallw recvbuf");
    canary(r);
    MPI_OK(VCALL(Ialltoallw,
                 (sw->p, WS.counts, WS.displs, wst, r->p, WR.counts, WR.displs, wrt, w,
                  slot(&S, "Ialltoallw")),
                 (sw->p, WS.ccounts, WS.cdispls, wst, r->p, WR.ccounts, WR.cdispls, wrt, w,
                  slot(&S, "Ialltoallw"))));
    for (int q = 0; q < nranks; q++)
        w_fill(want_at(r, (size_t)WR.displs[q]), q, rank, 3, (size_t)WR.counts[q] * wru[q]);
    r = add(&S, rd, WP.size, "MPI_Ialltoallw in place recvbuf");
    canary(r);
    for (int q = 0; q < nranks; q++)
        w_fill(want_at(r, (size_t)WP.displs[q]), rank, q, 4, (size_t)WP.counts[q] * wpu[q]);
    put(r);
    MPI_OK(VCALL(Ialltoallw,
                 (MPI_IN_PLACE, NULL, NULL, NULL, r->p, WP.counts, WP.displs, wpt, w,
                  slot(&S, "Ialltoallw in place")),
                 (MPI_IN_PLACE, NULL, NULL, NULL, r->p, WP.ccounts, WP.cdispls, wpt, w,
                  slot(&S, "Ialltoallw in place"))));
    for (int q = 0; q < nranks; q++)
        w_fill(want_at(r, (size_t)WP.displs[q]), q, rank, 4, (size_t)WP.counts[q] * wpu[q]);

    complete(&S, method);
    check_set(&S, method, "v and w forms");
}

static void test_v(void)
{
    static const size_t counts[] = {1, 300, 20000};
    int k = 0;
    MPI_OK(MPI_Type_contiguous(3, MPI_INT, &tri));
    MPI_OK(MPI_Type_commit(&tri));
    for (size_t p = 0; p < NPLACES; p++)
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++, k++)
            one_v(dev_of((int)p, 0), dev_of((int)p, 1), counts[i], (k * 2 + 1) % NMETHODS);
    MPI_OK(MPI_Type_free(&tri));
}

/* ---- overlapped with point-to-point ------------------------------------------------- */

/* Around a ring: two device messages each way on one tag interleaved with an
 * Iallreduce, an Ibcast and an Ialltoall on device buffers; every
 * completion method in turn. */
static void test_overlap(void)
{
    size_t n = 5000, bn = n * sizeof(int);
    int left = (rank + nranks - 1) % nranks, right = (rank + 1) % nranks;
    MPI_Comm w = MPI_COMM_WORLD;
    struct set S = {0};
    for (int method = 0; method < NMETHODS; method++) {
        int d0 = method % ndev, d1 = (method + 1) % ndev;
        struct buf *in1 = add(&S, d1, bn, "first message from the left");
        struct buf *in2 = add(&S, d0, bn, "second message from the left");
        struct buf *out1 = add(&S, d0, bn, "first message to the right");
        struct buf *out2 = add(&S, d1, bn, "second message to the right");
        fill(want_at(out1, 0), MPI_INT, rank + 1000, n);
        fill(want_at(out2, 0), MPI_INT, rank + 2000, n);
        put(out1);
        put(out2);
        MPI_OK(MPI_Irecv(in1->p, (int)n, MPI_INT, left, 5, w, slot(&S, "Irecv")));

        struct buf *s = add(&S, d0, bn, "Iallreduce sendbuf");
        struct buf *r = add(&S, d1, bn, "Iallreduce recvbuf");
        fill(want_at(s, 0), MPI_INT, rank, n);
        put(s);
        MPI_OK(ICALL(Iallreduce, s->p, r->p, (int)n, MPI_INT, MPI_SUM, w,
                     slot(&S, "Iallreduce")));
        reduced(want_at(r, 0), MPI_INT, MPI_SUM, nranks, 0, n);

        MPI_OK(MPI_Isend(out1->p, (int)n, MPI_INT, right, 5, w, slot(&S, "Isend")));

        struct buf *b = add(&S, d1, bn, "Ibcast buffer");
        if (rank == nranks - 1) {
            fill(want_at(b, 0), MPI_INT, 40 + method, n);
            put(b);
        }
        MPI_OK(ICALL(Ibcast, b->p, (int)n, MPI_INT, nranks - 1, w, slot(&S, "Ibcast")));
        fill(want_at(b, 0), MPI_INT, 40 + method, n);

        MPI_OK(MPI_Irecv(in2->p, (int)n, MPI_INT, left, 5, w, slot(&S, "Irecv")));
        MPI_OK(MPI_Isend(out2->p, (int)n, MPI_INT, right, 5, w, slot(&S, "Isend")));

        size_t m = 100, mb = m * sizeof(int);
        struct buf *sa = add(&S, d1, nranks * mb, "Ialltoall sendbuf");
        struct buf *ra = add(&S, d0, nranks * mb, "Ialltoall recvbuf");
        for (int q = 0; q < nranks; q++)
            fill(want_at(sa, q * mb), MPI_INT, rank * 100 + q, m);
        put(sa);
        MPI_OK(ICALL(Ialltoall, sa->p, (int)m, MPI_INT, ra->p, (int)m, MPI_INT, w,
                     slot(&S, "Ialltoall")));
        for (int q = 0; q < nranks; q++)
            fill(want_at(ra, q * mb), MPI_INT, q * 100 + rank, m);

        fill(want_at(in1, 0), MPI_INT, left + 1000, n);
        fill(want_at(in2, 0), MPI_INT, left + 2000, n);
        complete(&S, method);
        check_set(&S, method, "overlapped with point-to-point:");
    }
}

/* ---- the copy back happens at completion ------------------------------------------- */

/* Until a completion call sees the collective finish, the device receive
 * buffer is untouched (the shim writes it only then); then it holds the
 * result. Once with Wait, once with a Test loop checking after every Test
 * that said "not yet". */
static void test_at_completion(void)
{
    size_t n = 3000, bn = n * sizeof(double);
    for (int loop = 0; loop < 2; loop++) {
        struct buf s = mk(0, bn), r = mk(ndev - 1, bn);
        fill(want_at(&s, 0), MPI_DOUBLE, rank, n);
        put(&s);
        MPI_Request req;
        MPI_OK(ICALL(Iallreduce, s.p, r.p, (int)n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &req));
        verify(&r, "Iallreduce recvbuf before completion (still OLD)");
        if (loop == 0) {
            MPI_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
        } else {
            int flag = 0;
            double t0 = MPI_Wtime();
            while (!flag) {
                MPI_OK(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
                if (!flag)
                    verify(&r, "Iallreduce recvbuf after a Test that said not yet (still OLD)");
                deadline(t0, BY_TEST);
            }
        }
        reduced(want_at(&r, 0), MPI_DOUBLE, MPI_MAX, nranks, 0, n);
        verify(&r, loop ? "Iallreduce recvbuf after Test said done" : "Iallreduce after Wait");
        verify(&s, "Iallreduce sendbuf");
        drop(&s);
        drop(&r);
    }
}

/* ---- Request_free ------------------------------------------------------------------- */

/* The standard makes freeing a nonblocking collective's request erroneous;
 * the shim keeps the real request and completes it at later completion calls
 * (a Testall of nothing here): the result must reach the device. */
static void test_request_free(void)
{
    size_t n = 777, bn = n * sizeof(int);
    struct buf s = mk(ndev - 1, bn), r = mk(0, bn);
    fill(want_at(&s, 0), MPI_INT, rank, n);
    put(&s);
    MPI_Request req;
    MPI_OK(ICALL(Iallreduce, s.p, r.p, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req));
    MPI_OK(MPI_Request_free(&req));
    CHECK(req == MPI_REQUEST_NULL, "Request_free left the handle set");
    reduced(want_at(&r, 0), MPI_INT, MPI_SUM, nranks, 0, n);
    double t0 = MPI_Wtime();
    unsigned char got;
    int flag;
    while (first_bad(&r, &got) != bn + 2 * GUARD && MPI_Wtime() - t0 < 30)
        MPI_OK(MPI_Testall(0, NULL, &flag, MPI_STATUSES_IGNORE));
    verify(&r, "a Request_free'd Iallreduce's recvbuf after later completion calls");
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    drop(&s);
    drop(&r);
}

/* ---- refused input ------------------------------------------------------------------ */

static void test_errors(void)
{
    MPI_Comm comm;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    MPI_OK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    struct buf s = mk(0, 4096), r = mk(ndev - 1, 4096);
    MPI_Request req = MPI_REQUEST_NULL;
    /* (A reduction between a vector type on device memory and host memory,
     * and Ialltoallw's per-peer vector types on device memory, are staged
     * layout-preserving: types_device.c.) */

    /* Iallgatherv into MPI_BOTTOM with a type of four ints at r's absolute
     * address, block q at displacement q + 1 of it: refused, no request. */
    MPI_Aint at;
    int four = 4, hb[4] = {0};
    MPI_Datatype abs_t;
    struct vlay L;
    for (int q = 0; q < nranks; q++) {
        L.counts[q] = 1;
        L.displs[q] = q + 1;
    }
    vlay_widen(&L);
    MPI_OK(MPI_Get_address(r.p, &at));
    MPI_OK(MPI_Type_create_hindexed(1, &four, &at, MPI_INT, &abs_t));
    MPI_OK(MPI_Type_commit(&abs_t));
    expect_error(VCALL(Iallgatherv,
                       (hb, 4, MPI_INT, MPI_BOTTOM, L.counts, L.displs, abs_t, comm, &req),
                       (hb, 4, MPI_INT, MPI_BOTTOM, L.ccounts, L.cdispls, abs_t, comm, &req)),
                 MPI_ERR_BUFFER, "MPI_Iallgatherv",
                 "Iallgatherv into MPI_BOTTOM + device addresses");
    CHECK(req == MPI_REQUEST_NULL, "a refused Iallgatherv made a request");
    MPI_OK(MPI_Type_free(&abs_t));
    verify(&s, "a refused call's sendbuf");
    verify(&r, "a refused call's recvbuf");

    /* An intercommunicator (even ranks against odd ones): host and device
     * buffers both reduce over the remote group (coll_device's "inter" runs
     * every collective there). */
    MPI_Comm half, inter;
    int hs = rank + 1, hr = -1, want = 0;
    coll_prog_intercomm(&half, &inter, 78, &want);
    MPI_OK(ICALL(Iallreduce, &hs, &hr, 1, MPI_INT, MPI_SUM, inter, &req));
    MPI_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK(hr == want, "host Iallreduce on an intercommunicator: %d, want %d", hr, want);
    memcpy(want_at(&s, 0), &hs, sizeof hs);
    put(&s);
    MPI_OK(ICALL(Iallreduce, s.p, r.p, 1, MPI_INT, MPI_SUM, inter, &req));
    MPI_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    memcpy(want_at(&r, 0), &want, sizeof want);
    verify(&r, "a device Iallreduce on an intercommunicator");
    MPI_OK(MPI_Comm_free(&inter));
    MPI_OK(MPI_Comm_free(&half));

    drop(&s);
    drop(&r);
    MPI_OK(MPI_Comm_free(&comm));
}

int main(int argc, char **argv)
{
    const char *only = coll_prog_init(&argc, &argv);
#define RUN(name) MPI_PROG_RUN(only, name)
    RUN(movement);
    RUN(reductions);
    RUN(v);
    RUN(overlap);
    RUN(at_completion);
    RUN(request_free);
    RUN(errors);
#if MPI_VERSION >= 4
    /* The same through MPI_IX_c. */
    large = 1;
    RUN(movement);
    RUN(reductions);
    RUN(v);
    RUN(overlap);
    RUN(at_completion);
    RUN(errors);
    if (strcmp(only, "all") == 0)
        printf("icoll_device: rank %d: large-count: %d calls checked\n", rank, large_calls);
#endif
    return coll_prog_end();
}
