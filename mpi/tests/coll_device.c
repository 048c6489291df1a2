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
#define COLL_PROG "coll_device"
#include "coll_prog.h"

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
        int hs = rank + 1, hr = -1, want = 0;
        coll_prog_intercomm(&half, &inter, 77, &want);
        MPI_OK(MPI_Allreduce(&hs, &hr, 1, MPI_INT, MPI_SUM, inter));
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
    const char *only = coll_prog_init(&argc, &argv);
#define RUN(name) MPI_PROG_RUN(only, name)
    RUN(bcast);
    RUN(gather_scatter);
    RUN(allgather_alltoall);
    RUN(reductions);
    RUN(errors);
    return coll_prog_end();
}
