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
 * The v and w calls (Gatherv, Scatterv, Allgatherv, Alltoallv, Alltoallw,
 * and their _c forms on an MPI-4 library; "v" runs them alone, at up to 16
 * ranks): uneven counts (some zero), blocks out of rank order with gaps
 * between them holding a canary that differs call by call (bytes MPI does
 * not write must keep it on the device), recvcounts/displs passed as NULL
 * where the standard makes them insignificant, every MPI_IN_PLACE form,
 * Alltoallw with int, double and a contiguous derived type per peer at
 * byte displacements; a vector type on device memory and a device buffer on
 * an intercommunicator refused.
 *
 * Without the shim the first device-buffer call (MPI_Bcast; MPI_Gatherv of
 * "gatherv") faults inside MPI: the negative controls (mpi/tests/CMakeLists.txt).
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

/* ---- the v and w collectives ------------------------------------------------------- */

/* Blocks of a v buffer: counts uneven (some zero), placed in the buffer in
 * the reverse order of the ranks or in their order, with a gap before each
 * block and after the last. Gaps hold a canary that must survive. */
#define MAXR 16

struct vlay {
    int counts[MAXR];
    int displs[MAXR]; /* in elements (v) or bytes (Alltoallw) */
    size_t size;      /* of the whole buffer, in the same unit */
};

/* Lay out nranks blocks of counts[] (units of @p unit bytes each for
 * Alltoallw's byte displacements, else 1): reverse order when @p rev. */
static void vlay_place(struct vlay *l, const size_t unit[], int rev)
{
    size_t off = 5;
    for (int k = 0; k < nranks; k++) {
        int q = rev ? nranks - 1 - k : k;
        l->displs[q] = (int)off;
        off += (size_t)l->counts[q] * (unit ? unit[q] : 1) + 3 + (size_t)q;
    }
    l->size = off + 2;
}

/* Rank q's count in the rooted and all-gather calls: 40 + 23 q elements
 * (+ seed), rank 1 none at -n 3 and more. */
static void vlay_rooted(struct vlay *l, int seed, int rev)
{
    for (int q = 0; q < nranks; q++)
        l->counts[q] = q == 1 && nranks > 2 ? 0 : 40 + 23 * q + seed;
    vlay_place(l, NULL, rev);
}

/* Elements rank a sends to rank b in Alltoallv/w (zero for some pairs);
 * symmetric for MPI_IN_PLACE. */
static int a2a_count(int a, int b, int sym)
{
    int c = ((a * 3 + b * 5) % 7) * 11 + (a + b) % 3;
    return sym && a != b ? c + a2a_count(b, a, 0) : c;
}

static unsigned canary_seed;

/* Fill the whole buffer (guards included) with a canary that differs call by
 * call (the shim's staging memory is reused: stale bytes must not match). */
static void canary(struct buf *b)
{
    canary_seed++;
    for (size_t i = 0; i < b->bytes + 2 * GUARD; i++)
        b->want[i] = (unsigned char)(0x5A ^ (i * 7) ^ (canary_seed * 29));
    put(b);
}

static int vbytes_ok(int count)
{
    return count > 0 ? count : 1;
}

/* The v calls by their int forms, or (lc) their large-count _c forms with
 * the arrays widened; NULL arrays stay NULL. */
static int lc_calls; /* large-count calls made */
#if MPI_VERSION >= 4
static MPI_Count *wide_c(const int *a, MPI_Count w[MAXR])
{
    if (a == NULL)
        return NULL;
    for (int q = 0; q < nranks; q++)
        w[q] = a[q];
    return w;
}

static MPI_Aint *wide_d(const int *a, MPI_Aint w[MAXR])
{
    if (a == NULL)
        return NULL;
    for (int q = 0; q < nranks; q++)
        w[q] = a[q];
    return w;
}
#define WIDE_ARRAYS MPI_Count wc1[MAXR], wc2[MAXR]; MPI_Aint wd1[MAXR], wd2[MAXR]
#endif

static int gatherv(int lc, const void *s, int sc, MPI_Datatype st, void *r, const int *rc,
                   const int *d, MPI_Datatype rt, int root)
{
#if MPI_VERSION >= 4
    WIDE_ARRAYS;
    (void)wc2, (void)wd2;
    if (lc && ++lc_calls)
        return MPI_Gatherv_c(s, sc, st, r, wide_c(rc, wc1), wide_d(d, wd1), rt, root,
                             MPI_COMM_WORLD);
#endif
    (void)lc;
    return MPI_Gatherv(s, sc, st, r, rc, d, rt, root, MPI_COMM_WORLD);
}

static int scatterv(int lc, const void *s, const int *sc, const int *d, MPI_Datatype st, void *r,
                    int rc, MPI_Datatype rt, int root)
{
#if MPI_VERSION >= 4
    WIDE_ARRAYS;
    (void)wc2, (void)wd2;
    if (lc && ++lc_calls)
        return MPI_Scatterv_c(s, wide_c(sc, wc1), wide_d(d, wd1), st, r, rc, rt, root,
                              MPI_COMM_WORLD);
#endif
    (void)lc;
    return MPI_Scatterv(s, sc, d, st, r, rc, rt, root, MPI_COMM_WORLD);
}

static int allgatherv(int lc, const void *s, int sc, MPI_Datatype st, void *r, const int *rc,
                      const int *d, MPI_Datatype rt, MPI_Comm comm)
{
#if MPI_VERSION >= 4
    WIDE_ARRAYS;
    (void)wc2, (void)wd2;
    if (lc && ++lc_calls)
        return MPI_Allgatherv_c(s, sc, st, r, wide_c(rc, wc1), wide_d(d, wd1), rt, comm);
#endif
    (void)lc;
    return MPI_Allgatherv(s, sc, st, r, rc, d, rt, comm);
}

static int alltoallv(int lc, const void *s, const int *sc, const int *sd, MPI_Datatype st,
                     void *r, const int *rc, const int *rd, MPI_Datatype rt)
{
#if MPI_VERSION >= 4
    WIDE_ARRAYS;
    if (lc && ++lc_calls)
        return MPI_Alltoallv_c(s, wide_c(sc, wc1), wide_d(sd, wd1), st, r, wide_c(rc, wc2),
                               wide_d(rd, wd2), rt, MPI_COMM_WORLD);
#endif
    (void)lc;
    return MPI_Alltoallv(s, sc, sd, st, r, rc, rd, rt, MPI_COMM_WORLD);
}

static int alltoallw(int lc, const void *s, const int *sc, const int *sd, const MPI_Datatype *st,
                     void *r, const int *rc, const int *rd, const MPI_Datatype *rt,
                     MPI_Comm comm)
{
#if MPI_VERSION >= 4
    WIDE_ARRAYS;
    if (lc && ++lc_calls)
        return MPI_Alltoallw_c(s, wide_c(sc, wc1), wide_d(sd, wd1), st, r, wide_c(rc, wc2),
                               wide_d(rd, wd2), rt, comm);
#endif
    (void)lc;
    return MPI_Alltoallw(s, sc, sd, st, r, rc, rd, rt, comm);
}

/* The large-count forms too where the MPI has them (MPI-4: MPICH). */
#if MPI_VERSION >= 4
#define LC_FORMS 2
#else
#define LC_FORMS 1
#endif

/* The send placement of p (device or host), the receive one. */
#define SDEV(p) (places[p][0] == HOST ? HOST : places[p][0] % ndev)
#define RDEV(p) (places[p][1] == HOST ? HOST : places[p][1] % ndev)

static void test_gatherv(void)
{
    int root = nranks - 1;
    for (int lc = 0; lc < LC_FORMS; lc++)
        for (size_t p = 0; p < NPLACES; p++) {
            struct vlay l;
            vlay_rooted(&l, (int)p, 1);
            int n = l.counts[rank];
            struct buf s = mk(SDEV(p), (size_t)vbytes_ok(n) * sizeof(int));
            struct buf r = mk(RDEV(p), l.size * sizeof(int));
            fill(want_at(&s, 0), MPI_INT, rank + 30, (size_t)n);
            put(&s);
            canary(&r);
            /* recvcounts and displs are not significant off the root: NULL there. */
            int at_root = rank == root;
            MPI_OK(gatherv(lc, s.p, n, MPI_INT, r.p, at_root ? l.counts : NULL,
                           at_root ? l.displs : NULL, MPI_INT, root));
            if (at_root)
                for (int q = 0; q < nranks; q++)
                    fill(want_at(&r, (size_t)l.displs[q] * sizeof(int)), MPI_INT, q + 30,
                         (size_t)l.counts[q]);
            verify(&r, lc ? "MPI_Gatherv_c recvbuf" : "MPI_Gatherv recvbuf");
            verify(&s, "MPI_Gatherv sendbuf");

            /* MPI_IN_PLACE at the root: its own block stays as it was. */
            canary(&r);
            if (at_root) {
                fill(want_at(&r, (size_t)l.displs[root] * sizeof(int)), MPI_INT, root + 30,
                     (size_t)l.counts[root]);
                put(&r);
            }
            MPI_OK(gatherv(lc, at_root ? MPI_IN_PLACE : s.p, n, MPI_INT, r.p,
                           at_root ? l.counts : NULL, at_root ? l.displs : NULL, MPI_INT, root));
            if (at_root)
                for (int q = 0; q < nranks; q++)
                    fill(want_at(&r, (size_t)l.displs[q] * sizeof(int)), MPI_INT, q + 30,
                         (size_t)l.counts[q]);
            verify(&r, lc ? "MPI_Gatherv_c in place" : "MPI_Gatherv in place");
            drop(&s);
            drop(&r);
        }
}

static void test_scatterv(void)
{
    int root = 1;
    for (int lc = 0; lc < LC_FORMS; lc++)
        for (size_t p = 0; p < NPLACES; p++) {
            struct vlay l;
            vlay_rooted(&l, (int)p + 3, 0);
            int n = l.counts[rank], at_root = rank == root;
            struct buf s = mk(SDEV(p), l.size * sizeof(int));
            struct buf r = mk(RDEV(p), (size_t)vbytes_ok(n) * sizeof(int));
            canary(&s);
            if (at_root) {
                for (int q = 0; q < nranks; q++)
                    fill(want_at(&s, (size_t)l.displs[q] * sizeof(int)), MPI_INT, q + 40,
                         (size_t)l.counts[q]);
                put(&s);
            }
            canary(&r);
            MPI_OK(scatterv(lc, s.p, at_root ? l.counts : NULL, at_root ? l.displs : NULL,
                            MPI_INT, r.p, n, MPI_INT, root));
            fill(want_at(&r, 0), MPI_INT, rank + 40, (size_t)n);
            verify(&r, lc ? "MPI_Scatterv_c recvbuf" : "MPI_Scatterv recvbuf");
            verify(&s, "MPI_Scatterv sendbuf");

            /* MPI_IN_PLACE as the root's recvbuf: that is not touched. */
            canary(&r);
            MPI_OK(scatterv(lc, s.p, at_root ? l.counts : NULL, at_root ? l.displs : NULL,
                            MPI_INT, at_root ? MPI_IN_PLACE : r.p, n, MPI_INT, root));
            if (!at_root)
                fill(want_at(&r, 0), MPI_INT, rank + 40, (size_t)n);
            verify(&r, lc ? "MPI_Scatterv_c in place" : "MPI_Scatterv in place");
            verify(&s, "MPI_Scatterv in place sendbuf");
            drop(&s);
            drop(&r);
        }
}

static void test_allgatherv(void)
{
    for (int lc = 0; lc < LC_FORMS; lc++)
        for (size_t p = 0; p < NPLACES; p++) {
            struct vlay l;
            vlay_rooted(&l, (int)p + 1, p % 2 == 0);
            int n = l.counts[rank];
            struct buf s = mk(SDEV(p), (size_t)vbytes_ok(n) * sizeof(int));
            struct buf r = mk(RDEV(p), l.size * sizeof(int));
            fill(want_at(&s, 0), MPI_INT, rank + 50, (size_t)n);
            put(&s);
            canary(&r);
            MPI_OK(allgatherv(lc, s.p, n, MPI_INT, r.p, l.counts, l.displs, MPI_INT,
                              MPI_COMM_WORLD));
            for (int q = 0; q < nranks; q++)
                fill(want_at(&r, (size_t)l.displs[q] * sizeof(int)), MPI_INT, q + 50,
                     (size_t)l.counts[q]);
            verify(&r, lc ? "MPI_Allgatherv_c" : "MPI_Allgatherv");
            verify(&s, "MPI_Allgatherv sendbuf");

            /* MPI_IN_PLACE: this rank's block of recvbuf is its input. */
            canary(&r);
            fill(want_at(&r, (size_t)l.displs[rank] * sizeof(int)), MPI_INT, rank + 60,
                 (size_t)n);
            put(&r);
            MPI_OK(allgatherv(lc, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r.p, l.counts, l.displs,
                              MPI_INT, MPI_COMM_WORLD));
            for (int q = 0; q < nranks; q++)
                fill(want_at(&r, (size_t)l.displs[q] * sizeof(int)), MPI_INT, q + 60,
                     (size_t)l.counts[q]);
            verify(&r, lc ? "MPI_Allgatherv_c in place" : "MPI_Allgatherv in place");
            drop(&s);
            drop(&r);
        }
}

static void test_alltoallv(void)
{
    for (int lc = 0; lc < LC_FORMS; lc++)
        for (size_t p = 0; p < NPLACES; p++) {
            struct vlay sl, rl;
            for (int q = 0; q < nranks; q++) {
                sl.counts[q] = a2a_count(rank, q, 0); /* this rank to q */
                rl.counts[q] = a2a_count(q, rank, 0); /* q to this rank */
            }
            vlay_place(&sl, NULL, 1);
            vlay_place(&rl, NULL, 0);
            struct buf s = mk(SDEV(p), sl.size * sizeof(int));
            struct buf r = mk(RDEV(p), rl.size * sizeof(int));
            canary(&s);
            for (int q = 0; q < nranks; q++)
                fill(want_at(&s, (size_t)sl.displs[q] * sizeof(int)), MPI_INT,
                     rank * 100 + q + 1000, (size_t)sl.counts[q]);
            put(&s);
            canary(&r);
            MPI_OK(alltoallv(lc, s.p, sl.counts, sl.displs, MPI_INT, r.p, rl.counts, rl.displs,
                             MPI_INT));
            for (int q = 0; q < nranks; q++)
                fill(want_at(&r, (size_t)rl.displs[q] * sizeof(int)), MPI_INT,
                     q * 100 + rank + 1000, (size_t)rl.counts[q]);
            verify(&r, lc ? "MPI_Alltoallv_c" : "MPI_Alltoallv");
            verify(&s, "MPI_Alltoallv sendbuf");

            /* MPI_IN_PLACE: symmetric counts, recvbuf holds what is sent. */
            for (int q = 0; q < nranks; q++)
                rl.counts[q] = a2a_count(rank, q, 1);
            vlay_place(&rl, NULL, p % 2 == 1);
            drop(&r);
            r = mk(RDEV(p), rl.size * sizeof(int));
            canary(&r);
            for (int q = 0; q < nranks; q++)
                fill(want_at(&r, (size_t)rl.displs[q] * sizeof(int)), MPI_INT,
                     rank * 100 + q + 2000, (size_t)rl.counts[q]);
            put(&r);
            MPI_OK(alltoallv(lc, MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, r.p, rl.counts,
                             rl.displs, MPI_INT));
            for (int q = 0; q < nranks; q++)
                fill(want_at(&r, (size_t)rl.displs[q] * sizeof(int)), MPI_INT,
                     q * 100 + rank + 2000, (size_t)rl.counts[q]);
            verify(&r, lc ? "MPI_Alltoallv_c in place" : "MPI_Alltoallv in place");
            drop(&s);
            drop(&r);
        }
}

/* Alltoallw: the pair a -> b uses int, double or a contiguous type of three
 * ints (a dense derived type) by (a + b) % 3, byte displacements with gaps
 * of odd sizes; the data is a byte pattern of the pair. */
static MPI_Datatype tri;

static MPI_Datatype w_type(int a, int b)
{
    int k = (a + b) % 3;
    return k == 0 ? MPI_INT : k == 1 ? MPI_DOUBLE : tri;
}

static size_t w_size(int a, int b)
{
    int k = (a + b) % 3;
    return k == 0 ? sizeof(int) : k == 1 ? sizeof(double) : 3 * sizeof(int);
}

static void w_fill(unsigned char *dst, int a, int b, int salt, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = (unsigned char)(a * 31 + b * 17 + (int)i * 13 + salt);
}

static void test_alltoallw(void)
{
    MPI_OK(MPI_Type_contiguous(3, MPI_INT, &tri));
    MPI_OK(MPI_Type_commit(&tri));
    for (int lc = 0; lc < LC_FORMS; lc++)
        for (size_t p = 0; p < NPLACES; p++) {
            struct vlay sl, rl;
            MPI_Datatype st[MAXR], rt[MAXR];
            size_t su[MAXR], ru[MAXR];
            for (int q = 0; q < nranks; q++) {
                sl.counts[q] = a2a_count(rank, q, 0);
                rl.counts[q] = a2a_count(q, rank, 0);
                st[q] = w_type(rank, q);
                rt[q] = w_type(q, rank);
                su[q] = w_size(rank, q);
                ru[q] = w_size(q, rank);
            }
            vlay_place(&sl, su, 0);
            vlay_place(&rl, ru, 1);
            struct buf s = mk(SDEV(p), sl.size), r = mk(RDEV(p), rl.size);
            canary(&s);
            for (int q = 0; q < nranks; q++)
                w_fill(want_at(&s, (size_t)sl.displs[q]), rank, q, 1, sl.counts[q] * su[q]);
            put(&s);
            canary(&r);
            MPI_OK(alltoallw(lc, s.p, sl.counts, sl.displs, st, r.p, rl.counts, rl.displs, rt,
                             MPI_COMM_WORLD));
            for (int q = 0; q < nranks; q++)
                w_fill(want_at(&r, (size_t)rl.displs[q]), q, rank, 1, rl.counts[q] * ru[q]);
            verify(&r, lc ? "MPI_Alltoallw_c" : "MPI_Alltoallw");
            verify(&s, "MPI_Alltoallw sendbuf");

            /* MPI_IN_PLACE: symmetric counts and types. */
            for (int q = 0; q < nranks; q++)
                rl.counts[q] = a2a_count(rank, q, 1);
            vlay_place(&rl, ru, p % 2 == 0);
            drop(&r);
            r = mk(RDEV(p), rl.size);
            canary(&r);
            for (int q = 0; q < nranks; q++)
                w_fill(want_at(&r, (size_t)rl.displs[q]), rank, q, 2, rl.counts[q] * ru[q]);
            put(&r);
            MPI_OK(alltoallw(lc, MPI_IN_PLACE, NULL, NULL, NULL, r.p, rl.counts, rl.displs, rt,
                             MPI_COMM_WORLD));
            for (int q = 0; q < nranks; q++)
                w_fill(want_at(&r, (size_t)rl.displs[q]), q, rank, 2, rl.counts[q] * ru[q]);
            verify(&r, lc ? "MPI_Alltoallw_c in place" : "MPI_Alltoallw in place");
            drop(&s);
            drop(&r);
        }
    MPI_OK(MPI_Type_free(&tri));
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

/* The v and w calls: a vector type on device memory refused on every rank
 * (MPI_ERR_TYPE naming the call), device buffers on an intercommunicator
 * (MPI_ERR_COMM) while host ones pass. */
static void test_verrors(void)
{
    MPI_Comm comm;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    MPI_OK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    struct buf d = mk(ndev - 1, 4096);
    canary(&d);
    int hbuf[4 * MAXR] = {0}, ones[MAXR], displs[MAXR];
    MPI_Datatype column, cols[MAXR], ints[MAXR];
    MPI_OK(MPI_Type_vector(8, 1, 4, MPI_INT, &column));
    MPI_OK(MPI_Type_commit(&column));
    for (int q = 0; q < nranks; q++) {
        ones[q] = 1;
        displs[q] = q;
        cols[q] = column;
        ints[q] = MPI_INT;
    }
    expect_error(alltoallw(0, d.p, ones, displs, cols, hbuf, ones, displs, ints, comm),
                 MPI_ERR_TYPE, "MPI_Alltoallw", "Alltoallw of a vector type on device memory");
    expect_error(allgatherv(0, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, d.p, ones, displs, column,
                            comm),
                 MPI_ERR_TYPE, "MPI_Allgatherv", "Allgatherv of a vector type on device memory");
    verify(&d, "a refused v call's buffer");
    MPI_OK(MPI_Type_free(&column));

    MPI_Comm half, inter;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
    MPI_OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 78, &inter));
    MPI_OK(MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN));
    int remote = 0, sv[MAXR], rv[MAXR];
    MPI_OK(MPI_Comm_remote_size(inter, &remote));
    for (int j = 0; j < remote; j++)
        sv[j] = rank * 10 + j;
    MPI_OK(MPI_Alltoallv(sv, ones, displs, MPI_INT, rv, ones, displs, MPI_INT, inter));
    for (int j = 0; j < remote; j++) {
        int world = rank % 2 ? 2 * j : 2 * j + 1;
        CHECK(rv[j] == world * 10 + rank / 2,
              "host Alltoallv on an intercommunicator: from %d got %d, want %d", j, rv[j],
              world * 10 + rank / 2);
    }
    expect_error(MPI_Alltoallv(sv, ones, displs, MPI_INT, d.p, ones, displs, MPI_INT, inter),
                 MPI_ERR_COMM, "MPI_Alltoallv", "device Alltoallv on an intercommunicator");
    verify(&d, "a refused intercommunicator v call's recvbuf");
    MPI_OK(MPI_Comm_free(&inter));
    MPI_OK(MPI_Comm_free(&half));
    drop(&d);
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
    /* "v": the v and w collectives only. */
#define RUN_V(name)                                                \
    if (strcmp(only, "v") == 0 || strcmp(only, "all") == 0 || strcmp(only, #name) == 0) { \
        test_##name();                                             \
        MPI_Barrier(MPI_COMM_WORLD);                               \
    }
    if (nranks > MAXR) {
        fprintf(stderr, "coll_device: the v part runs at most %d ranks\n", MAXR);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    RUN_V(gatherv);
    RUN_V(scatterv);
    RUN_V(allgatherv);
    RUN_V(alltoallv);
    RUN_V(alltoallw);
    RUN_V(verrors);
    if (lc_calls > 0)
        printf("coll_device: rank %d: large-count: %d v/w calls checked\n", rank, lc_calls);

    return coll_prog_end();
}
