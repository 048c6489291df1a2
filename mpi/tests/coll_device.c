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
 * standard allows it; reductions by every predefined op that applies on int,
 * float and double and by a user-defined op (MPI_Op_create) on double.
 *
 * The v and w calls (Gatherv, Scatterv, Allgatherv, Alltoallv, Alltoallw,
 * and their _c forms on an MPI-4 library; "v" runs them alone, at up to 16
 * ranks): uneven counts (some zero), blocks out of rank order with gaps
 * between them holding a canary that differs call by call (bytes MPI does
 * not write must keep it on the device), recvcounts/displs passed as NULL
 * where the standard makes them insignificant, every MPI_IN_PLACE form,
 * Alltoallw with int, double and a contiguous derived type per peer at
 * byte displacements (non-contiguous types: types_device.c).
 *
 * "inter": every blocking collective on an intercommunicator (even ranks
 * against odd ones), device buffers against the same call on host buffers
 * (icoll_device: a nonblocking one).
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

/* The send placement of p (device or host), the receive one. */
#define SDEV(p) (places[p][0] == HOST ? HOST : places[p][0] % ndev)
#define RDEV(p) (places[p][1] == HOST ? HOST : places[p][1] % ndev)

/* ---- reductions -------------------------------------------------------------------- */

static void one_reduction(MPI_Datatype t, MPI_Op op, int sd, int rd)
{
    size_t n = 1001, es = esize(t), bn = n * es;
    int root = nranks - 1;
    char what[96];
    struct buf s = mk(sd, (size_t)nranks * bn), r = mk(rd, (size_t)nranks * bn);
    fill_op(want_at(&s, 0), t, op, rank, (size_t)nranks * n);
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
        fill_op(want_at(&r, 0), t, op, rank, elems);                        \
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
        fill_op(want_at(&r, 0), t, op, rank, nip);
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
    fill_op(want_at(&r, 0), t, op, 0, n);
    put(&r);
    MPI_OK(MPI_Reduce_local(s.p, r.p, (int)n, t, op));
    for (size_t i = 0; i < n; i++)
        put_elem(want_at(&r, i * es), t, combine(t, op, elem(t, op, rank, i), elem(t, op, 0, i)));
    verify(&r, WHAT("MPI_Reduce_local"));
    verify(&s, WHAT("sendbuf after the reductions"));
#undef WHAT
#undef RESET_R
#undef IN_PLACE_R
    drop(&s);
    drop(&r);
}

/* Every op of red_ops on every type, in the placements red_everywhere says. */
static void test_reductions(void)
{
    int j = 0;
    for (int ti = 0; ti < NRED_TYPES; ti++) {
        MPI_Datatype t = red_types[ti];
        MPI_Op ops[10];
        int nops = red_ops(t, ops);
        for (int oi = 0; oi < nops; oi++) {
            int all = red_everywhere(t, oi);
            for (size_t p = 0; p < NPLACES; p++)
                if (all || p == (size_t)j % NPLACES)
                    one_reduction(t, ops[oi], SDEV(p), RDEV(p));
            j += !all;
        }
    }
}

/* ---- the v and w collectives ------------------------------------------------------- */

/* Blocks of a v buffer (struct vlay, coll_prog.h): counts uneven (some zero),
 * placed in the reverse order of the ranks or in their order, with gaps
 * holding a canary that must survive. */

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

static int vbytes_ok(int count)
{
    return count > 0 ? count : 1;
}

/* The v calls by their int forms, or (lc) their large-count _c forms; the
 * arrays of layout @p l (NULL: NULL arrays, where they are not significant). */
static int lc_calls; /* large-count calls made */
#define VC(l) ((l) ? (l)->counts : NULL)
#define VD(l) ((l) ? (l)->displs : NULL)
#define VCC(l) ((l) ? (l)->ccounts : NULL)
#define VCD(l) ((l) ? (l)->cdispls : NULL)

static int gatherv(int lc, const void *s, int sc, MPI_Datatype st, void *r, const struct vlay *l,
                   MPI_Datatype rt, int root)
{
#if MPI_VERSION >= 4
    if (lc && ++lc_calls)
        return MPI_Gatherv_c(s, sc, st, r, VCC(l), VCD(l), rt, root, MPI_COMM_WORLD);
#endif
    (void)lc;
    return MPI_Gatherv(s, sc, st, r, VC(l), VD(l), rt, root, MPI_COMM_WORLD);
}

static int scatterv(int lc, const void *s, const struct vlay *l, MPI_Datatype st, void *r, int rc,
                    MPI_Datatype rt, int root)
{
#if MPI_VERSION >= 4
    if (lc && ++lc_calls)
        return MPI_Scatterv_c(s, VCC(l), VCD(l), st, r, rc, rt, root, MPI_COMM_WORLD);
#endif
    (void)lc;
    return MPI_Scatterv(s, VC(l), VD(l), st, r, rc, rt, root, MPI_COMM_WORLD);
}

static int allgatherv(int lc, const void *s, int sc, MPI_Datatype st, void *r,
                      const struct vlay *l, MPI_Datatype rt, MPI_Comm comm)
{
#if MPI_VERSION >= 4
    if (lc && ++lc_calls)
        return MPI_Allgatherv_c(s, sc, st, r, VCC(l), VCD(l), rt, comm);
#endif
    (void)lc;
    return MPI_Allgatherv(s, sc, st, r, VC(l), VD(l), rt, comm);
}

static int alltoallv(int lc, const void *s, const struct vlay *sl, MPI_Datatype st, void *r,
                     const struct vlay *rl, MPI_Datatype rt, MPI_Comm comm)
{
#if MPI_VERSION >= 4
    if (lc && ++lc_calls)
        return MPI_Alltoallv_c(s, VCC(sl), VCD(sl), st, r, VCC(rl), VCD(rl), rt, comm);
#endif
    (void)lc;
    return MPI_Alltoallv(s, VC(sl), VD(sl), st, r, VC(rl), VD(rl), rt, comm);
}

static int alltoallw(int lc, const void *s, const struct vlay *sl, const MPI_Datatype *st,
                     void *r, const struct vlay *rl, const MPI_Datatype *rt, MPI_Comm comm)
{
#if MPI_VERSION >= 4
    if (lc && ++lc_calls)
        return MPI_Alltoallw_c(s, VCC(sl), VCD(sl), st, r, VCC(rl), VCD(rl), rt, comm);
#endif
    (void)lc;
    return MPI_Alltoallw(s, VC(sl), VD(sl), st, r, VC(rl), VD(rl), rt, comm);
}

/* The large-count forms too where the MPI has them (MPI-4: MPICH). */
#if MPI_VERSION >= 4
#define LC_FORMS 2
#else
#define LC_FORMS 1
#endif

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
            MPI_OK(gatherv(lc, s.p, n, MPI_INT, r.p, at_root ? &l : NULL, MPI_INT, root));
            if (at_root)
                VFILL(&r, l, q + 30);
            verify(&r, lc ? "MPI_Gatherv_c recvbuf" : "MPI_Gatherv recvbuf");
            verify(&s, "MPI_Gatherv sendbuf");

            /* MPI_IN_PLACE at the root: its own block stays as it was. */
            canary(&r);
            if (at_root) {
                fill(want_at(&r, (size_t)l.displs[root] * sizeof(int)), MPI_INT, root + 30,
                     (size_t)l.counts[root]);
                put(&r);
            }
            MPI_OK(gatherv(lc, at_root ? MPI_IN_PLACE : s.p, n, MPI_INT, r.p, at_root ? &l : NULL,
                           MPI_INT, root));
            if (at_root)
                VFILL(&r, l, q + 30);
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
                VFILL(&s, l, q + 40);
                put(&s);
            }
            canary(&r);
            MPI_OK(scatterv(lc, s.p, at_root ? &l : NULL, MPI_INT, r.p, n, MPI_INT, root));
            fill(want_at(&r, 0), MPI_INT, rank + 40, (size_t)n);
            verify(&r, lc ? "MPI_Scatterv_c recvbuf" : "MPI_Scatterv recvbuf");
            verify(&s, "MPI_Scatterv sendbuf");

            /* MPI_IN_PLACE as the root's recvbuf: that is not touched. */
            canary(&r);
            MPI_OK(scatterv(lc, s.p, at_root ? &l : NULL, MPI_INT, at_root ? MPI_IN_PLACE : r.p, n,
                            MPI_INT, root));
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
            MPI_OK(allgatherv(lc, s.p, n, MPI_INT, r.p, &l, MPI_INT, MPI_COMM_WORLD));
            VFILL(&r, l, q + 50);
            verify(&r, lc ? "MPI_Allgatherv_c" : "MPI_Allgatherv");
            verify(&s, "MPI_Allgatherv sendbuf");

            /* MPI_IN_PLACE: this rank's block of recvbuf is its input. */
            canary(&r);
            fill(want_at(&r, (size_t)l.displs[rank] * sizeof(int)), MPI_INT, rank + 60,
                 (size_t)n);
            put(&r);
            MPI_OK(allgatherv(lc, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r.p, &l, MPI_INT,
                              MPI_COMM_WORLD));
            VFILL(&r, l, q + 60);
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
            VFILL(&s, sl, rank * 100 + q + 1000);
            put(&s);
            canary(&r);
            MPI_OK(alltoallv(lc, s.p, &sl, MPI_INT, r.p, &rl, MPI_INT, MPI_COMM_WORLD));
            VFILL(&r, rl, q * 100 + rank + 1000);
            verify(&r, lc ? "MPI_Alltoallv_c" : "MPI_Alltoallv");
            verify(&s, "MPI_Alltoallv sendbuf");

            /* MPI_IN_PLACE: symmetric counts, recvbuf holds what is sent. */
            for (int q = 0; q < nranks; q++)
                rl.counts[q] = a2a_count(rank, q, 1);
            vlay_place(&rl, NULL, p % 2 == 1);
            drop(&r);
            r = mk(RDEV(p), rl.size * sizeof(int));
            canary(&r);
            VFILL(&r, rl, rank * 100 + q + 2000);
            put(&r);
            MPI_OK(alltoallv(lc, MPI_IN_PLACE, NULL, MPI_DATATYPE_NULL, r.p, &rl, MPI_INT,
                             MPI_COMM_WORLD));
            VFILL(&r, rl, q * 100 + rank + 2000);
            verify(&r, lc ? "MPI_Alltoallv_c in place" : "MPI_Alltoallv in place");
            drop(&s);
            drop(&r);
        }
}

static void test_alltoallw(void)
{
    MPI_OK(MPI_Type_contiguous(3, MPI_INT, &tri));
    MPI_OK(MPI_Type_commit(&tri));
    for (int lc = 0; lc < LC_FORMS; lc++)
        for (size_t p = 0; p < NPLACES; p++) {
            struct vlay sl, rl;
            MPI_Datatype st[VMAX], rt[VMAX];
            size_t su[VMAX], ru[VMAX];
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
            MPI_OK(alltoallw(lc, s.p, &sl, st, r.p, &rl, rt, MPI_COMM_WORLD));
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
            MPI_OK(alltoallw(lc, MPI_IN_PLACE, NULL, NULL, r.p, &rl, rt, MPI_COMM_WORLD));
            for (int q = 0; q < nranks; q++)
                w_fill(want_at(&r, (size_t)rl.displs[q]), q, rank, 2, rl.counts[q] * ru[q]);
            verify(&r, lc ? "MPI_Alltoallw_c in place" : "MPI_Alltoallw in place");
            drop(&s);
            drop(&r);
        }
    MPI_OK(MPI_Type_free(&tri));
}

/* ---- intercommunicators: device buffers give the host buffers' result -------------- */

/* One collective on an intercommunicator, @p n ints per block; @p root as the
 * rooted calls take it (MPI_ROOT, MPI_PROC_NULL or the remote root's rank). */
typedef int (*inter_fn)(void *s, void *r, int n, MPI_Comm inter, int root);

static int remote_size(MPI_Comm inter)
{
    int rs = 0;
    MPI_OK(MPI_Comm_remote_size(inter, &rs));
    return rs;
}

/* The v forms' blocks: remote-size counts n + q, a one-int gap between them. */
static int inter_v(MPI_Comm inter, int n, int counts[VMAX], int displs[VMAX])
{
    int rs = remote_size(inter), at = 0;
    for (int q = 0; q < rs; q++) {
        counts[q] = n + q;
        displs[q] = at;
        at += counts[q] + 1;
    }
    return at;
}

static int i_bcast(void *s, void *r, int n, MPI_Comm c, int root)
{
    (void)r;
    return MPI_Bcast(s, n, MPI_INT, root, c);
}
static int i_reduce(void *s, void *r, int n, MPI_Comm c, int root)
{
    return MPI_Reduce(s, r, n, MPI_INT, MPI_SUM, root, c);
}
static int i_allreduce(void *s, void *r, int n, MPI_Comm c, int root)
{
    (void)root;
    return MPI_Allreduce(s, r, n, MPI_INT, MPI_MAX, c);
}
/* Each group's send vectors are (local size) x recvcount: recvcount n x
 * (remote size) makes both groups' the same length, as the MPIs need. */
static int i_reduce_scatter_block(void *s, void *r, int n, MPI_Comm c, int root)
{
    (void)root;
    return MPI_Reduce_scatter_block(s, r, n * remote_size(c), MPI_INT, MPI_SUM, c);
}
/* Reduce_scatter: the local recvcounts' sum is the send vector; n x (remote
 * size) each makes both groups' sums equal. */
static int i_reduce_scatter(void *s, void *r, int n, MPI_Comm c, int root)
{
    (void)root;
    int counts[VMAX];
    for (int q = 0; q < VMAX; q++)
        counts[q] = n * remote_size(c);
    return MPI_Reduce_scatter(s, r, counts, MPI_INT, MPI_SUM, c);
}
static int i_gather(void *s, void *r, int n, MPI_Comm c, int root)
{
    return MPI_Gather(s, n, MPI_INT, r, n, MPI_INT, root, c);
}
static int i_scatter(void *s, void *r, int n, MPI_Comm c, int root)
{
    return MPI_Scatter(s, n, MPI_INT, r, n, MPI_INT, root, c);
}
static int i_allgather(void *s, void *r, int n, MPI_Comm c, int root)
{
    (void)root;
    return MPI_Allgather(s, n, MPI_INT, r, n, MPI_INT, c);
}
static int i_alltoall(void *s, void *r, int n, MPI_Comm c, int root)
{
    (void)root;
    return MPI_Alltoall(s, n, MPI_INT, r, n, MPI_INT, c);
}
static int i_gatherv(void *s, void *r, int n, MPI_Comm c, int root)
{
    int counts[VMAX], displs[VMAX];
    inter_v(c, n, counts, displs);
    return MPI_Gatherv(s, n + rank / 2, MPI_INT, r, counts, displs, MPI_INT, root, c);
}
static int i_scatterv(void *s, void *r, int n, MPI_Comm c, int root)
{
    int counts[VMAX], displs[VMAX];
    inter_v(c, n, counts, displs);
    return MPI_Scatterv(s, counts, displs, MPI_INT, r, n + rank / 2, MPI_INT, root, c);
}
static int i_allgatherv(void *s, void *r, int n, MPI_Comm c, int root)
{
    (void)root;
    int counts[VMAX], displs[VMAX];
    inter_v(c, n, counts, displs);
    return MPI_Allgatherv(s, n + rank / 2, MPI_INT, r, counts, displs, MPI_INT, c);
}
static int i_alltoallv(void *s, void *r, int n, MPI_Comm c, int root)
{
    (void)root;
    int counts[VMAX], displs[VMAX];
    inter_v(c, n, counts, displs);
    /* What each rank sends the remote rank q is what q receives from it:
     * counts n + (local rank) on both sides (the v blocks are n + q). */
    int scounts[VMAX], sdispls[VMAX], at = 0;
    for (int q = 0; q < remote_size(c); q++) {
        scounts[q] = n + rank / 2;
        sdispls[q] = at;
        at += scounts[q] + 2;
    }
    return MPI_Alltoallv(s, scounts, sdispls, MPI_INT, r, counts, displs, MPI_INT, c);
}
/* Run @p f on host buffers, then on device buffers (two devices) holding the
 * same input: both device buffers must end as the host ones, guards
 * included (MPI's own result on host memory is the reference). */
static void inter_compare(const char *what, inter_fn f, MPI_Comm inter, int n, int root,
                          size_t sints, size_t rints)
{
    size_t sb = sints * sizeof(int), rb = rints * sizeof(int);
    struct buf hs = mk(HOST, sb), hr = mk(HOST, rb);
    struct buf ds = mk(rank % ndev, sb), dr = mk((rank + 1) % ndev, rb);
    int *in = want_at(&hs, 0);
    for (size_t i = 0; i < sints; i++)
        in[i] = rank * 100000 + (int)i + 1;
    memcpy(ds.want, hs.want, sb + 2 * GUARD);
    put(&hs);
    put(&ds);
    MPI_OK(f(hs.p, hr.p, n, inter, root));
    MPI_OK(f(ds.p, dr.p, n, inter, root));
    memcpy(ds.want, hs.base, sb + 2 * GUARD);
    memcpy(dr.want, hr.base, rb + 2 * GUARD);
    char label[96];
    snprintf(label, sizeof label, "%s on an intercommunicator: send buffer", what);
    verify(&ds, label);
    snprintf(label, sizeof label, "%s on an intercommunicator: receive buffer", what);
    verify(&dr, label);
    drop(&hs);
    drop(&hr);
    drop(&ds);
    drop(&dr);
}

/* Even ranks against odd ones (at -n 3 groups of 2 and 1: a buffer's blocks
 * are the remote group's, not the local one's), each group the root side in
 * turn for the rooted calls. */
static void test_inter(void)
{
    MPI_Comm half, inter;
    int unused;
    coll_prog_intercomm(&half, &inter, 79, &unused);
    MPI_OK(MPI_Comm_set_errhandler(inter, MPI_ERRORS_ARE_FATAL));
    const int n = 300;
    size_t rs = (size_t)remote_size(inter), vb = 0;
    int counts[VMAX], displs[VMAX];
    vb = (size_t)inter_v(inter, n, counts, displs);
    size_t vs = rs * (size_t)(n + nranks + 2); /* Alltoallv's send blocks, gaps included */
    int ls = 0;
    MPI_OK(MPI_Comm_size(inter, &ls));
    /* Every call's buffers fit (Reduce_scatter_block's send vector is the
     * largest: local x remote x n); what a call leaves alone is compared too. */
    size_t big = (size_t)ls * rs * (size_t)n;
    big = big > vb ? big : vb;
    big = big > vs ? big : vs;
    static const struct {
        const char *name;
        inter_fn f;
        int rooted;
    } calls[] = {
        {"Bcast", i_bcast, 1},         {"Reduce", i_reduce, 1},
        {"Allreduce", i_allreduce, 0}, {"Reduce_scatter_block", i_reduce_scatter_block, 0},
        {"Reduce_scatter", i_reduce_scatter, 0},
        {"Gather", i_gather, 1},       {"Scatter", i_scatter, 1},
        {"Allgather", i_allgather, 0}, {"Alltoall", i_alltoall, 0},
        {"Gatherv", i_gatherv, 1},     {"Scatterv", i_scatterv, 1},
        {"Allgatherv", i_allgatherv, 0}, {"Alltoallv", i_alltoallv, 0},
    };
    for (size_t k = 0; k < sizeof calls / sizeof calls[0]; k++)
        for (int side = 0; side < (calls[k].rooted ? 2 : 1); side++) {
            /* The root: local rank 0 of group `side` (world rank side). */
            int root = rank % 2 != side ? 0 : rank == side ? MPI_ROOT : MPI_PROC_NULL;
            inter_compare(calls[k].name, calls[k].f, inter, n, root, big, big);
        }
    MPI_OK(MPI_Comm_free(&inter));
    MPI_OK(MPI_Comm_free(&half));
}

/* A datatype whose extent is larger than its one block (an int resized to
 * two ints' extent) in blocks of one element: each block is one contiguous
 * run, so the shim stages it and writes back only the ints, never the
 * second half of their extents (the canary there survives). */
static void test_vresized(void)
{
    MPI_Datatype wide_int;
    MPI_OK(MPI_Type_create_resized(MPI_INT, 0, 2 * sizeof(int), &wide_int));
    MPI_OK(MPI_Type_commit(&wide_int));
    for (int lc = 0; lc < LC_FORMS; lc++)
        for (size_t p = 0; p < NPLACES; p++) {
            struct vlay l;
            for (int q = 0; q < nranks; q++)
                l.counts[q] = 1;
            vlay_place(&l, NULL, p % 2 == 0); /* displacements in extents: 2 ints */
            int mine = rank + 70;
            struct buf r = mk(RDEV(p), l.size * 2 * sizeof(int));
            canary(&r);
            MPI_OK(allgatherv(lc, &mine, 1, MPI_INT, r.p, &l, wide_int, MPI_COMM_WORLD));
            for (int q = 0; q < nranks; q++) {
                int v = q + 70;
                memcpy(want_at(&r, (size_t)l.displs[q] * 2 * sizeof(int)), &v, sizeof v);
            }
            verify(&r, lc ? "MPI_Allgatherv_c of a resized int"
                          : "MPI_Allgatherv of a resized int");
            drop(&r);
        }
    MPI_OK(MPI_Type_free(&wide_int));
}

/* The v and w calls' refusals, on every rank before anything is sent, the
 * device buffer unchanged: MPI_BOTTOM with absolute displacements into device memory
 * and a span running past the end of its device allocation (MPI_ERR_BUFFER);
 * device buffers on an intercommunicator (MPI_ERR_COMM) while host ones pass. */
static void test_verrors(void)
{
    MPI_Comm comm;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    MPI_OK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    struct buf d = mk(ndev - 1, 4096);
    canary(&d);
    int hbuf[4 * VMAX] = {0};
    struct vlay ones; /* one element per peer, at displacement q */
    for (int q = 0; q < nranks; q++) {
        ones.counts[q] = 1;
        ones.displs[q] = q;
    }
    vlay_widen(&ones);
    /* (Alltoallw's per-peer vector types on device memory are staged
     * layout-preserving, Allgatherv's blocks of one packed: types_device.c.) */

    /* MPI_BOTTOM: a type of four ints at d's absolute address, block q at
     * displacement q + 1 of it (the blocks could lie anywhere: refused). */
    MPI_Aint at;
    int four = 4;
    MPI_Datatype abs_t;
    MPI_OK(MPI_Get_address(d.p, &at));
    MPI_OK(MPI_Type_create_hindexed(1, &four, &at, MPI_INT, &abs_t));
    MPI_OK(MPI_Type_commit(&abs_t));
    struct vlay shifted = ones;
    for (int q = 0; q < nranks; q++)
        shifted.displs[q] = q + 1;
    vlay_widen(&shifted);
    expect_error(allgatherv(0, hbuf, 4, MPI_INT, MPI_BOTTOM, &shifted, abs_t, comm),
                 MPI_ERR_BUFFER, "MPI_Allgatherv", "Allgatherv into MPI_BOTTOM + device addresses");
    MPI_OK(MPI_Type_free(&abs_t));

    /* The last block starts at the end of d's allocation (the guard's end). */
    struct vlay past = ones;
    past.displs[nranks - 1] = (int)((d.bytes + GUARD) / sizeof(int));
    vlay_widen(&past);
    expect_error(allgatherv(0, hbuf, 1, MPI_INT, d.p, &past, MPI_INT, comm), MPI_ERR_BUFFER,
                 "MPI_Allgatherv", "Allgatherv with a block past the device allocation");
    verify(&d, "a refused v call's buffer");

    MPI_Comm half, inter;
    int remote = 0, sv[VMAX], rv[VMAX], unused;
    coll_prog_intercomm(&half, &inter, 78, &unused);
    MPI_OK(MPI_Comm_remote_size(inter, &remote));
    for (int j = 0; j < remote; j++)
        sv[j] = rank * 10 + j;
    MPI_OK(alltoallv(0, sv, &ones, MPI_INT, rv, &ones, MPI_INT, inter));
    for (int j = 0; j < remote; j++) {
        int world = rank % 2 ? 2 * j : 2 * j + 1;
        CHECK(rv[j] == world * 10 + rank / 2,
              "host Alltoallv on an intercommunicator: from %d got %d, want %d", j, rv[j],
              world * 10 + rank / 2);
    }
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
    RUN(inter);
    /* "v": the v and w collectives only. */
#define RUN_V(name)                                                                         \
    if (strcmp(only, "v") == 0) {                                                           \
        test_##name();                                                                      \
        MPI_Barrier(MPI_COMM_WORLD);                                                        \
    } else                                                                                  \
        MPI_PROG_RUN(only, name)
    if (nranks > VMAX) {
        fprintf(stderr, "coll_device: the v part runs at most %d ranks\n", VMAX);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    RUN_V(gatherv);
    RUN_V(scatterv);
    RUN_V(allgatherv);
    RUN_V(alltoallv);
    RUN_V(alltoallw);
    RUN_V(vresized);
    RUN_V(verrors);
    if (lc_calls > 0)
        printf("coll_device: rank %d: large-count: %d v/w calls checked\n", rank, lc_calls);

    return coll_prog_end();
}
