/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Blocking collectives with device buffers, run under
 * LD_PRELOAD=libcucopy_mpi.so (mpirun -n 2 and -n 3, two devices per rank).
 * Device memory comes from the driver directly (testdrv, the fake under
 * CTest: its device memory faults on a CPU access); this program never links
 * or calls cucopy. Each buffer has 64 guard bytes on both sides; after every
 * call the whole buffer, guards included, is read back with cuMemcpyDtoH and
 * compared with what the standard says it holds (results where MPI writes,
 * the old bytes everywhere else). Buffers mix device 0, device 1 and host
 * memory; rooted calls use a root other than 0; MPI_IN_PLACE wherever the
 * standard allows it; reductions MPI_SUM and MPI_MAX on int and double.
 *
 * Without the shim the first device-buffer call (MPI_Bcast) faults inside
 * MPI: the negative control (mpi/tests/CMakeLists.txt).
 *
 * Prints "coll_device: rank R: PASS" or "FAILED ..." lines; exit status 1 on
 * a failure.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_prog.h"
#include "testdrv.h"

static int rank, nranks, ndev;
static int failures, checks;
static cdContext primary[2];

#define CHECK(cond, ...) MPI_PROG_CHECK("coll_device", rank, checks, failures, cond, __VA_ARGS__)

#define MPI_OK(call) MPI_OK_OR_ABORT("coll_device", rank, call)

/* ---- buffers on device 0, device 1 or the host (dev -1), with guards ---------- */

#define GUARD 64
#define OLD 0xEE /* every byte of a buffer before the call */
#define HOST (-1)

struct buf {
    int dev;
    char *base; /* GUARD + bytes + GUARD */
    char *p;    /* what MPI gets */
    size_t bytes;
    unsigned char *want; /* the expected content of base after the call */
};

static void push(int dev)
{
    TD_CHECK(td.cuCtxPushCurrent(primary[dev]));
}

static void pop(void)
{
    cdContext c;
    TD_CHECK(td.cuCtxPopCurrent(&c));
}

static void put(struct buf *b)
{
    if (b->dev == HOST) {
        memcpy(b->base, b->want, b->bytes + 2 * GUARD);
        return;
    }
    push(b->dev);
    TD_CHECK(td.cuMemcpyHtoD((cdDevicePtr)(uintptr_t)b->base, b->want, b->bytes + 2 * GUARD));
    TD_CHECK(td.cuCtxSynchronize()); /* written before MPI gets it (docs/mpi.md) */
    pop();
}

/* A buffer of @p bytes on @p dev, every byte OLD. */
static struct buf mk(int dev, size_t bytes)
{
    struct buf b = {.dev = dev, .bytes = bytes};
    size_t all = bytes + 2 * GUARD;
    b.want = malloc(all);
    memset(b.want, OLD, all);
    if (dev == HOST) {
        b.base = malloc(all);
    } else {
        cdDevicePtr p = 0;
        push(dev);
        TD_CHECK(td.cuMemAlloc(&p, all));
        pop();
        b.base = (char *)(uintptr_t)p;
    }
    b.p = b.base + GUARD;
    put(&b);
    return b;
}

static void drop(struct buf *b)
{
    if (b->dev == HOST) {
        free(b->base);
    } else {
        push(b->dev);
        TD_CHECK(td.cuMemFree((cdDevicePtr)(uintptr_t)b->base));
        pop();
    }
    free(b->want);
}

/* The expected bytes [off, off + n) of the buffer (without the guard). */
static void *want_at(struct buf *b, size_t off)
{
    return b->want + GUARD + off;
}

/* Compare the whole buffer, guards included, with b->want. */
static void verify(struct buf *b, const char *what)
{
    size_t all = b->bytes + 2 * GUARD;
    unsigned char *h = malloc(all);
    if (b->dev == HOST) {
        memcpy(h, b->base, all);
    } else {
        push(b->dev);
        TD_CHECK(td.cuMemcpyDtoH(h, (cdDevicePtr)(uintptr_t)b->base, all));
        pop();
    }
    size_t bad = all;
    for (size_t i = 0; i < all && bad == all; i++)
        if (h[i] != b->want[i])
            bad = i;
    CHECK(bad == all, "%s (dev %d, %zu B): byte %zd (offset from the buffer) is 0x%02x, want 0x%02x",
          what, b->dev, b->bytes, (ptrdiff_t)bad - GUARD, bad < all ? h[bad] : 0,
          bad < all ? b->want[bad] : 0);
    free(h);
}

/* ---- values ----------------------------------------------------------------------- */

/* Added to every rank number by ival/dval: the MPI_IN_PLACE reductions use
 * other values than the send buffers (the shim's staging memory is reused
 * from its pool: a missing copy-in must not find the right bytes there). */
static int vbase, in_place_calls;

/* Element i of rank r's contribution. */
static int ival(int r, size_t i)
{
    return (int)(((r + vbase) * 7919 + i * 31) % 100003) - 50000;
}

static double dval(int r, size_t i)
{
    return (double)ival(r, i) * 0.25 + r;
}

static size_t esize(MPI_Datatype t)
{
    return t == MPI_INT ? sizeof(int) : sizeof(double);
}

/* Write rank r's n elements of type t at dst. */
static void fill(void *dst, MPI_Datatype t, int r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (t == MPI_INT) {
            int v = ival(r, i);
            memcpy((char *)dst + i * sizeof v, &v, sizeof v);
        } else {
            double v = dval(r, i);
            memcpy((char *)dst + i * sizeof v, &v, sizeof v);
        }
    }
}

/* The reduction (op) over ranks [0, upto) of element i (offset: elements of
 * the contribution skipped, for Reduce_scatter_block), written at dst. */
static void reduced(void *dst, MPI_Datatype t, MPI_Op op, int upto, size_t off, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (t == MPI_INT) {
            int v = ival(0, off + i);
            for (int r = 1; r < upto; r++)
                v = op == MPI_SUM ? v + ival(r, off + i)
                                  : (v > ival(r, off + i) ? v : ival(r, off + i));
            memcpy((char *)dst + i * sizeof v, &v, sizeof v);
        } else {
            double v = dval(0, off + i);
            for (int r = 1; r < upto; r++)
                v = op == MPI_SUM ? v + dval(r, off + i)
                                  : (v > dval(r, off + i) ? v : dval(r, off + i));
            memcpy((char *)dst + i * sizeof v, &v, sizeof v);
        }
    }
}

/* Buffer placements: {send, recv} devices. */
static const int places[][2] = {{0, 1}, {1, 0}, {1, 1}, {HOST, 1}, {0, HOST}};
#define NPLACES (sizeof places / sizeof places[0])

static const char *tname(MPI_Datatype t)
{
    return t == MPI_INT ? "int" : "double";
}

static const char *oname(MPI_Op op)
{
    return op == MPI_SUM ? "sum" : "max";
}

/* ---- data movement ---------------------------------------------------------------- */

static void test_bcast(void)
{
    static const size_t counts[] = {1, 1000, 70000};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
        for (int dev = 0; dev < ndev; dev++) {
            size_t n = counts[k];
            int root = nranks - 1;
            struct buf b = mk(dev, n * sizeof(int));
            if (rank == root) {
                fill(want_at(&b, 0), MPI_INT, root, n);
                put(&b);
            }
            MPI_OK(MPI_Bcast(b.p, (int)n, MPI_INT, root, MPI_COMM_WORLD));
            fill(want_at(&b, 0), MPI_INT, root, n);
            verify(&b, "MPI_Bcast");
            drop(&b);
        }
}

static void test_gather_scatter(void)
{
    size_t n = 777, bn = n * sizeof(int), all = (size_t)nranks * bn;
    int root = nranks > 2 ? 1 : nranks - 1;
    for (size_t p = 0; p < NPLACES; p++) {
        int sd = places[p][0] == HOST ? HOST : places[p][0] % ndev;
        int rd = places[p][1] == HOST ? HOST : places[p][1] % ndev;

        /* Gather: recvbuf significant at the root only. */
        struct buf s = mk(sd, bn), r = mk(rd, all);
        fill(want_at(&s, 0), MPI_INT, rank, n);
        put(&s);
        MPI_OK(MPI_Gather(s.p, (int)n, MPI_INT, r.p, (int)n, MPI_INT, root, MPI_COMM_WORLD));
        if (rank == root)
            for (int q = 0; q < nranks; q++)
                fill(want_at(&r, q * bn), MPI_INT, q, n);
        verify(&r, "MPI_Gather recvbuf");
        verify(&s, "MPI_Gather sendbuf");

        /* Gather MPI_IN_PLACE at the root: its block stays where it is. */
        memset(r.want, OLD, all + 2 * GUARD);
        if (rank == root)
            fill(want_at(&r, root * bn), MPI_INT, root, n);
        put(&r);
        MPI_OK(MPI_Gather(rank == root ? MPI_IN_PLACE : s.p, (int)n, MPI_INT, r.p, (int)n,
                          MPI_INT, root, MPI_COMM_WORLD));
        if (rank == root)
            for (int q = 0; q < nranks; q++)
                fill(want_at(&r, q * bn), MPI_INT, q, n);
        verify(&r, "MPI_Gather in place");
        drop(&s);
        drop(&r);

        /* Scatter: sendbuf at the root only. */
        s = mk(sd, all);
        r = mk(rd, bn);
        if (rank == root) {
            for (int q = 0; q < nranks; q++)
                fill(want_at(&s, q * bn), MPI_INT, q + 10, n);
            put(&s);
        }
        MPI_OK(MPI_Scatter(s.p, (int)n, MPI_INT, r.p, (int)n, MPI_INT, root, MPI_COMM_WORLD));
        fill(want_at(&r, 0), MPI_INT, rank + 10, n);
        verify(&r, "MPI_Scatter recvbuf");
        verify(&s, "MPI_Scatter sendbuf");
        /* Scatter MPI_IN_PLACE at the root: its recvbuf is not touched. */
        memset(r.want, OLD, bn + 2 * GUARD);
        put(&r);
        MPI_OK(MPI_Scatter(s.p, (int)n, MPI_INT, rank == root ? MPI_IN_PLACE : r.p, (int)n,
                           MPI_INT, root, MPI_COMM_WORLD));
        if (rank != root)
            fill(want_at(&r, 0), MPI_INT, rank + 10, n);
        verify(&r, "MPI_Scatter in place");
        verify(&s, "MPI_Scatter in place sendbuf");
        drop(&s);
        drop(&r);
    }
}

static void test_allgather_alltoall(void)
{
    size_t n = 513, bn = n * sizeof(int), all = (size_t)nranks * bn;
    for (size_t p = 0; p < NPLACES; p++) {
        int sd = places[p][0] == HOST ? HOST : places[p][0] % ndev;
        int rd = places[p][1] == HOST ? HOST : places[p][1] % ndev;
        struct buf s = mk(sd, all), r = mk(rd, all);

        fill(want_at(&s, 0), MPI_INT, rank, n);
        put(&s);
        MPI_OK(MPI_Allgather(s.p, (int)n, MPI_INT, r.p, (int)n, MPI_INT, MPI_COMM_WORLD));
        for (int q = 0; q < nranks; q++)
            fill(want_at(&r, q * bn), MPI_INT, q, n);
        verify(&r, "MPI_Allgather");

        memset(r.want, OLD, all + 2 * GUARD);
        fill(want_at(&r, rank * bn), MPI_INT, rank + 20, n);
        put(&r);
        MPI_OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r.p, (int)n, MPI_INT,
                             MPI_COMM_WORLD));
        for (int q = 0; q < nranks; q++)
            fill(want_at(&r, q * bn), MPI_INT, q + 20, n);
        verify(&r, "MPI_Allgather in place");

        /* Alltoall: block q of rank r's sendbuf is seed r * 100 + q. */
        memset(r.want, OLD, all + 2 * GUARD);
        put(&r);
        for (int q = 0; q < nranks; q++)
            fill(want_at(&s, q * bn), MPI_INT, rank * 100 + q, n);
        put(&s);
        MPI_OK(MPI_Alltoall(s.p, (int)n, MPI_INT, r.p, (int)n, MPI_INT, MPI_COMM_WORLD));
        for (int q = 0; q < nranks; q++)
            fill(want_at(&r, q * bn), MPI_INT, q * 100 + rank, n);
        verify(&r, "MPI_Alltoall");
        verify(&s, "MPI_Alltoall sendbuf");

        for (int q = 0; q < nranks; q++)
            fill(want_at(&r, q * bn), MPI_INT, rank * 100 + q + 7, n);
        put(&r);
        MPI_OK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r.p, (int)n, MPI_INT,
                            MPI_COMM_WORLD));
        for (int q = 0; q < nranks; q++)
            fill(want_at(&r, q * bn), MPI_INT, q * 100 + rank + 7, n);
        verify(&r, "MPI_Alltoall in place");
        drop(&s);
        drop(&r);
    }
}

/* ---- reductions -------------------------------------------------------------------- */

static void one_reduction(MPI_Datatype t, MPI_Op op, int sd, int rd)
{
    size_t n = 1001, es = esize(t), bn = n * es;
    int root = nranks - 1;
    char what[96];
    struct buf s = mk(sd, (size_t)nranks * bn), r = mk(rd, (size_t)nranks * bn);
    fill(want_at(&s, 0), t, rank, (size_t)nranks * n);
    put(&s);

#define WHAT(name) (snprintf(what, sizeof what, "%s %s %s", name, tname(t), oname(op)), what)
#define RESET_R()                                                    \
    do {                                                             \
        memset(r.want, OLD, (size_t)nranks * bn + 2 * GUARD);        \
        put(&r);                                                     \
        vbase = 0;                                                   \
    } while (0)
#define IN_PLACE_R(elems)                                            \
    do {                                                             \
        vbase = 50 + (in_place_calls++ % 40); /* new each time */   \
        memset(r.want, OLD, (size_t)nranks * bn + 2 * GUARD);        \
        fill(want_at(&r, 0), t, rank, elems);                        \
        put(&r);                                                     \
    } while (0)

    MPI_OK(MPI_Allreduce(s.p, r.p, (int)n, t, op, MPI_COMM_WORLD));
    reduced(want_at(&r, 0), t, op, nranks, 0, n);
    verify(&r, WHAT("MPI_Allreduce"));
    verify(&s, WHAT("MPI_Allreduce sendbuf"));

    IN_PLACE_R(n);
    MPI_OK(MPI_Allreduce(MPI_IN_PLACE, r.p, (int)n, t, op, MPI_COMM_WORLD));
    reduced(want_at(&r, 0), t, op, nranks, 0, n);
    verify(&r, WHAT("MPI_Allreduce in place"));

    RESET_R();
    MPI_OK(MPI_Reduce(s.p, r.p, (int)n, t, op, root, MPI_COMM_WORLD));
    if (rank == root)
        reduced(want_at(&r, 0), t, op, nranks, 0, n);
    verify(&r, WHAT("MPI_Reduce"));

    /* 250 elements: Debian's MPICH 4.0.2 itself faults (host memory, no shim)
     * in an MPI_IN_PLACE Reduce of more than 2048 bytes at the root. */
    size_t nip = 250;
    RESET_R(); /* vbase 0: the other ranks send from s */
    if (rank == root) {
        fill(want_at(&r, 0), t, rank, nip);
        put(&r);
    }
    MPI_OK(MPI_Reduce(rank == root ? MPI_IN_PLACE : s.p, r.p, (int)nip, t, op, root,
                      MPI_COMM_WORLD));
    if (rank == root)
        reduced(want_at(&r, 0), t, op, nranks, 0, nip);
    verify(&r, WHAT("MPI_Reduce in place"));

    RESET_R();
    MPI_OK(MPI_Scan(s.p, r.p, (int)n, t, op, MPI_COMM_WORLD));
    reduced(want_at(&r, 0), t, op, rank + 1, 0, n);
    verify(&r, WHAT("MPI_Scan"));

    IN_PLACE_R(n);
    MPI_OK(MPI_Scan(MPI_IN_PLACE, r.p, (int)n, t, op, MPI_COMM_WORLD));
    reduced(want_at(&r, 0), t, op, rank + 1, 0, n);
    verify(&r, WHAT("MPI_Scan in place"));

    /* Exscan: rank 0's recvbuf is undefined; the shim leaves it as it was. */
    RESET_R();
    MPI_OK(MPI_Exscan(s.p, r.p, (int)n, t, op, MPI_COMM_WORLD));
    if (rank > 0)
        reduced(want_at(&r, 0), t, op, rank, 0, n);
    verify(&r, WHAT("MPI_Exscan"));

    IN_PLACE_R(n);
    MPI_OK(MPI_Exscan(MPI_IN_PLACE, r.p, (int)n, t, op, MPI_COMM_WORLD));
    if (rank > 0)
        reduced(want_at(&r, 0), t, op, rank, 0, n);
    verify(&r, WHAT("MPI_Exscan in place"));

    /* Reduce_scatter_block: block `rank` of the reduction of size x n. */
    RESET_R();
    MPI_OK(MPI_Reduce_scatter_block(s.p, r.p, (int)n, t, op, MPI_COMM_WORLD));
    reduced(want_at(&r, 0), t, op, nranks, (size_t)rank * n, n);
    verify(&r, WHAT("MPI_Reduce_scatter_block"));

    IN_PLACE_R((size_t)nranks * n);
    MPI_OK(MPI_Reduce_scatter_block(MPI_IN_PLACE, r.p, (int)n, t, op, MPI_COMM_WORLD));
    reduced(want_at(&r, 0), t, op, nranks, (size_t)rank * n, n);
    verify(&r, WHAT("MPI_Reduce_scatter_block in place"));

    /* Reduce_scatter: uneven blocks, n - 100 q elements for rank q. */
    {
        int rc_counts[64];
        size_t off = 0, total = 0;
        for (int q = 0; q < nranks && q < 64; q++) {
            rc_counts[q] = (int)n - 100 * q;
            off += q < rank ? (size_t)rc_counts[q] : 0;
            total += (size_t)rc_counts[q];
        }
        RESET_R();
        MPI_OK(MPI_Reduce_scatter(s.p, r.p, rc_counts, t, op, MPI_COMM_WORLD));
        reduced(want_at(&r, 0), t, op, nranks, off, (size_t)rc_counts[rank]);
        verify(&r, WHAT("MPI_Reduce_scatter"));

        IN_PLACE_R(total);
        MPI_OK(MPI_Reduce_scatter(MPI_IN_PLACE, r.p, rc_counts, t, op, MPI_COMM_WORLD));
        reduced(want_at(&r, 0), t, op, nranks, off, (size_t)rc_counts[rank]);
        verify(&r, WHAT("MPI_Reduce_scatter in place"));
    }

    vbase = 0;
    /* Reduce_local: inoutbuf = in op inoutbuf (rank 0 and this rank's data). */
    memset(r.want, OLD, (size_t)nranks * bn + 2 * GUARD);
    fill(want_at(&r, 0), t, 0, n);
    put(&r);
    MPI_OK(MPI_Reduce_local(s.p, r.p, (int)n, t, op));
    {
        char *a = malloc(bn), *b = malloc(bn);
        fill(a, t, 0, n);
        fill(b, t, rank, n);
        for (size_t i = 0; i < n; i++) {
            char *dst = (char *)want_at(&r, i * es);
            if (t == MPI_INT) {
                int x, y;
                memcpy(&x, a + i * es, es);
                memcpy(&y, b + i * es, es);
                x = op == MPI_SUM ? x + y : (x > y ? x : y);
                memcpy(dst, &x, es);
            } else {
                double x, y;
                memcpy(&x, a + i * es, es);
                memcpy(&y, b + i * es, es);
                x = op == MPI_SUM ? x + y : (x > y ? x : y);
                memcpy(dst, &x, es);
            }
        }
        free(a);
        free(b);
    }
    verify(&r, WHAT("MPI_Reduce_local"));
    verify(&s, WHAT("sendbuf after the reductions"));
#undef WHAT
#undef RESET_R
#undef IN_PLACE_R
    drop(&s);
    drop(&r);
}

static void test_reductions(void)
{
    MPI_Datatype types[] = {MPI_INT, MPI_DOUBLE};
    MPI_Op ops[] = {MPI_SUM, MPI_MAX};
    for (size_t p = 0; p < NPLACES; p++)
        for (int ti = 0; ti < 2; ti++)
            for (int oi = 0; oi < 2; oi++)
                one_reduction(types[ti], ops[oi],
                              places[p][0] == HOST ? HOST : places[p][0] % ndev,
                              places[p][1] == HOST ? HOST : places[p][1] % ndev);
}

/* ---- refused input ----------------------------------------------------------------- */

static void expect_error(int rc, int want_class, const char *call, const char *what)
{
    int cls;
    char text[MPI_MAX_ERROR_STRING];
    CHECK(mpi_prog_error_is("coll_device", rank, rc, want_class, call, &cls, text),
          "%s: rc %d class %d (want %d), message '%s' should name %s", what, rc, cls, want_class,
          text, call);
}

static void test_errors(void)
{
    MPI_Comm comm;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    MPI_OK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    struct buf s = mk(0, 4096), r = mk(ndev - 1, 4096);
    MPI_Datatype column;
    MPI_OK(MPI_Type_vector(8, 1, 4, MPI_INT, &column));
    MPI_OK(MPI_Type_commit(&column));
    /* Refused on every rank before anything is sent: no rank waits. */
    expect_error(MPI_Allreduce(s.p, r.p, 1, column, MPI_SUM, comm), MPI_ERR_TYPE,
                 "MPI_Allreduce", "Allreduce of a vector type on device memory");
    expect_error(MPI_Allreduce(MPI_IN_PLACE, r.p, 2, column, MPI_MAX, comm), MPI_ERR_TYPE,
                 "MPI_Allreduce", "Allreduce in place of a vector type on device memory");
    expect_error(MPI_Bcast(r.p, 1, column, 0, comm), MPI_ERR_TYPE, "MPI_Bcast",
                 "Bcast of a vector type on device memory");
    verify(&s, "a refused call's sendbuf");
    verify(&r, "a refused call's recvbuf");
    MPI_OK(MPI_Type_free(&column));

    /* An intercommunicator (even ranks against odd ones): host buffers pass,
     * device buffers are refused with MPI_ERR_COMM on every rank. */
    if (nranks >= 2) {
        MPI_Comm half, inter;
        MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
        MPI_OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 77, &inter));
        MPI_OK(MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN));
        int hs = rank + 1, hr = -1, remote = 0;
        MPI_OK(MPI_Comm_remote_size(inter, &remote));
        MPI_OK(MPI_Allreduce(&hs, &hr, 1, MPI_INT, MPI_SUM, inter));
        int want = 0;
        for (int q = 0; q < nranks; q++)
            want += q % 2 != rank % 2 ? q + 1 : 0;
        CHECK(hr == want, "host Allreduce on an intercommunicator: %d, want %d", hr, want);
        expect_error(MPI_Allreduce(s.p, r.p, 4, MPI_INT, MPI_SUM, inter), MPI_ERR_COMM,
                     "MPI_Allreduce", "device Allreduce on an intercommunicator");
        verify(&r, "a refused intercommunicator call's recvbuf");
        MPI_OK(MPI_Comm_free(&inter));
        MPI_OK(MPI_Comm_free(&half));
    }
    drop(&s);
    drop(&r);
    MPI_OK(MPI_Comm_free(&comm));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (testdrv_load() != 0)
        MPI_Abort(MPI_COMM_WORLD, 3);
    ndev = td.device_count < 2 ? td.device_count : 2;
    if (ndev < 1) {
        fprintf(stderr, "coll_device: no device\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    for (int d = 0; d < ndev; d++) {
        cdDevice dev;
        TD_CHECK(td.cuDeviceGet(&dev, d));
        TD_CHECK(td.cuDevicePrimaryCtxRetain(&primary[d], dev));
    }
    if (ndev == 1)
        primary[1] = primary[0];
    TD_CHECK(td.cuCtxSetCurrent(primary[0]));

    const char *only = argc > 1 ? argv[1] : "all";
#define RUN(name)                                                \
    if (strcmp(only, "all") == 0 || strcmp(only, #name) == 0) { \
        test_##name();                                           \
        MPI_Barrier(MPI_COMM_WORLD);                             \
    }
    RUN(bcast);
    RUN(gather_scatter);
    RUN(allgather_alltoall);
    RUN(reductions);
    RUN(errors);

    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (failures == 0)
        printf("coll_device: rank %d: PASS (%d checks)\n", rank, checks);
    else
        printf("coll_device: rank %d: FAILED (%d of %d checks)\n", rank, failures, checks);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
