/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MPI_Pack, MPI_Unpack, MPI_Pack_external and MPI_Unpack_external (and
 * their _c forms on an MPI-4 library) with device buffers, run under
 * LD_PRELOAD=libcucopy_mpi.so (mpirun -n 2). Device memory comes from the
 * driver directly (testdrv, the fake under CTest: its device memory faults on
 * a CPU access).
 *
 * Every call runs twice: on device (or mixed) buffers and on host twins of
 * them holding the same bytes; the device buffers, read back whole (64 guard
 * bytes each side), must then equal the host ones and the positions must
 * agree: Pack writes only [position in, position out) of outbuf (the bytes
 * before and after keep a canary), Unpack only the type map of outbuf (a
 * vector type's holes keep the canary). Each pack appends to what an earlier
 * one wrote (two calls into one buffer); contiguous ints, a vector of ints
 * and a struct of an int and a double (not in the external forms under
 * MPICH, whose MPI_Pack_external_size dies on it); "external32" (big-endian)
 * for the external forms; device/host mixes. Then a packed device buffer goes to the
 * other rank as MPI_PACKED and is unpacked there from device memory into
 * device memory. A Pack into too small a device outbuf, an Unpack from too
 * short a device inbuf fail with MPI_ERR_TRUNCATE, the buffers untouched.
 *
 * Without the shim the first device call (MPI_Pack from device memory)
 * faults inside MPI: the negative control (mpi/tests/CMakeLists.txt).
 *
 * Prints "pack_device: rank R: PASS" or "FAILED ..." lines; exit status 1
 * on a failure.
 */
#define COLL_PROG "pack_device"
#include "coll_prog.h"

#define N 24 /* elements of each type packed */

enum { PACK, UNPACK, PACK_EXT, UNPACK_EXT, NFORMS };
static const char *const form_name[NFORMS] = {"MPI_Pack", "MPI_Unpack", "MPI_Pack_external",
                                              "MPI_Unpack_external"};

static int lc_calls;

#if MPI_VERSION >= 4
#define LC_FORMS 2
#else
#define LC_FORMS 1
#endif

/* Form @p f of the call (lc: its _c form) on typed buffer @p t (count
 * elements of @p dt) and packed buffer @p pk of @p size bytes, at *pos. */
static int call(int f, int lc, void *t, int count, MPI_Datatype dt, void *pk, int size,
                MPI_Aint *pos, MPI_Comm comm)
{
    int rc, ipos = (int)*pos;
#if MPI_VERSION >= 4
    if (lc) {
        MPI_Count cpos = *pos;
        lc_calls++;
        rc = f == PACK     ? MPI_Pack_c(t, count, dt, pk, size, &cpos, comm)
             : f == UNPACK ? MPI_Unpack_c(pk, size, &cpos, t, count, dt, comm)
             : f == PACK_EXT
                 ? MPI_Pack_external_c("external32", t, count, dt, pk, size, &cpos)
                 : MPI_Unpack_external_c("external32", pk, size, &cpos, t, count, dt);
        *pos = (MPI_Aint)cpos;
        return rc;
    }
#endif
    (void)lc;
    switch (f) {
    case PACK:
        rc = MPI_Pack(t, count, dt, pk, size, &ipos, comm);
        *pos = ipos;
        return rc;
    case UNPACK:
        rc = MPI_Unpack(pk, size, &ipos, t, count, dt, comm);
        *pos = ipos;
        return rc;
    case PACK_EXT:
        return MPI_Pack_external("external32", t, count, dt, pk, size, pos);
    default:
        return MPI_Unpack_external("external32", pk, size, pos, t, count, dt);
    }
}

/* A pattern in every byte of b (guards included) from @p salt. */
static void pattern(struct buf *b, int salt)
{
    for (size_t i = 0; i < b->bytes + 2 * GUARD; i++)
        b->want[i] = (unsigned char)(i * 13 + (size_t)salt * 7 + (size_t)rank * 3);
    put(b);
}

/* The host twin of @p d: a host buffer with the same bytes. */
static struct buf twin(struct buf *d)
{
    struct buf h = mk(HOST, d->bytes);
    memcpy(h.want, d->want, d->bytes + 2 * GUARD);
    put(&h);
    return h;
}

/* @p d must hold what its host twin @p h holds. */
static void same(struct buf *d, struct buf *h, const char *what)
{
    memcpy(d->want, h->base, d->bytes + 2 * GUARD);
    verify(d, what);
}

/* Types packed: ints, a vector of ints (one int of every three: holes), a
 * struct of an int and a double. */
static MPI_Datatype types[3];
static const char *const type_name[3] = {"int", "vector", "struct"};

static void make_types(void)
{
    types[0] = MPI_INT;
    MPI_OK(MPI_Type_vector(4, 1, 3, MPI_INT, &types[1]));
    MPI_OK(MPI_Type_commit(&types[1]));
    int len[2] = {1, 1};
    MPI_Aint at[2] = {0, 8};
    MPI_Datatype parts[2] = {MPI_INT, MPI_DOUBLE};
    MPI_OK(MPI_Type_create_struct(2, len, at, parts, &types[2]));
    MPI_OK(MPI_Type_commit(&types[2]));
}

/* Buffer placements {typed buffer, packed buffer}. */
static const int pplaces[][2] = {{0, 1}, {1, 1}, {HOST, 0}, {1, HOST}};
#define NPPLACES (sizeof pplaces / sizeof pplaces[0])

/* One round of a test: the typed buffer t and the packed one k (psize
 * bytes), on the device or host, and their host twins; the type, its extent. */
struct round {
    struct buf t, k, ht, hk;
    MPI_Datatype dt;
    MPI_Aint extent;
    int psize, lc, ti;
};

/* Form @p f twice (each half of the typed buffer in turn) from position 5,
 * on the buffers and on their twins: the positions must agree, and the
 * written buffer (@p f packs: k; unpacks: t) must equal its twin. */
static void twice(struct round *r, int f)
{
    MPI_Aint pos = 5, hpos = 5;
    for (int rep = 0; rep < 2; rep++) {
        size_t half = (size_t)rep * (N / 2) * (size_t)r->extent;
        MPI_OK(call(f, r->lc, r->t.p + half, N / 2, r->dt, r->k.p, r->psize, &pos,
                    MPI_COMM_WORLD));
        MPI_OK(call(f, r->lc, r->ht.p + half, N / 2, r->dt, r->hk.p, r->psize, &hpos,
                    MPI_COMM_WORLD));
    }
    char what[160];
    snprintf(what, sizeof what, "%s%s of %s, typed on %d, packed on %d", form_name[f],
             r->lc ? "_c" : "", type_name[r->ti], r->t.dev, r->k.dev);
    CHECK(pos == hpos, "%s: position %ld, host %ld", what, (long)pos, (long)hpos);
    if (f == PACK || f == PACK_EXT) {
        same(&r->k, &r->hk, what);
        verify(&r->t, "the packed typed buffer");
    } else {
        same(&r->t, &r->ht, what);
    }
}

/* Pack (or Pack_external) N elements, in two calls, into one packed buffer
 * from 5 bytes in, then Unpack them back (in two calls) into a typed buffer
 * that holds the canary: device and host, compared. */
static void round_trip(int ext, int lc, int ti, size_t pl)
{
    struct round r = {.dt = types[ti], .lc = lc, .ti = ti};
    MPI_Aint lb = 0;
    MPI_OK(MPI_Type_get_extent(r.dt, &lb, &r.extent));
    int tdev = pplaces[pl][0] == HOST ? HOST : pplaces[pl][0] % ndev;
    int pdev = pplaces[pl][1] == HOST ? HOST : pplaces[pl][1] % ndev;
    size_t tbytes = (size_t)r.extent * N;
    if (ext) {
        MPI_Aint s = 0;
        MPI_OK(MPI_Pack_external_size("external32", N, r.dt, &s));
        r.psize = (int)s;
    } else {
        MPI_OK(MPI_Pack_size(N, r.dt, MPI_COMM_WORLD, &r.psize));
    }
    r.psize = r.psize + 5 + 11; /* from 5 bytes in, and room after */
    r.t = mk(tdev, tbytes);
    r.k = mk(pdev, (size_t)r.psize);
    pattern(&r.t, ti + 10 * (int)pl);
    canary(&r.k);
    r.ht = twin(&r.t);
    r.hk = twin(&r.k);
    twice(&r, ext ? PACK_EXT : PACK);
    canary(&r.t);
    memcpy(r.ht.want, r.t.want, tbytes + 2 * GUARD);
    put(&r.ht);
    twice(&r, ext ? UNPACK_EXT : UNPACK);
    drop(&r.t);
    drop(&r.k);
    drop(&r.ht);
    drop(&r.hk);
}

/* MPICH 4.0.2's MPI_Pack_external_size of a struct of an int and a double
 * dies of SIGILL, on host memory and without the shim (measured 2026-12-01):
 * the external forms of the struct are skipped there. */
#ifdef MPICH_VERSION
#define EXT_STRUCT_BROKEN 1
#else
#define EXT_STRUCT_BROKEN 0
#endif

static void test_local(void)
{
    if (EXT_STRUCT_BROKEN && rank == 0)
        printf("pack_device: rank %d: MPICH's MPI_Pack_external_size dies on a struct type: "
               "the external forms of the struct are skipped\n",
               rank);
    for (int lc = 0; lc < LC_FORMS; lc++)
        for (int ext = 0; ext < 2; ext++)
            for (int ti = 0; ti < 3; ti++) {
                if (ext && ti == 2 && EXT_STRUCT_BROKEN)
                    continue;
                for (size_t pl = 0; pl < NPPLACES; pl++)
                    round_trip(ext, lc, ti, pl);
            }
}

/* Rank 0 packs a vector type from device 0 into a device buffer and sends it
 * as MPI_PACKED; rank 1 receives it into device memory and unpacks it from
 * there into a canary device buffer of device 1. */
static void test_exchange(void)
{
    if (nranks < 2)
        return;
    MPI_Datatype dt = types[1];
    MPI_Aint lb = 0, extent = 0;
    MPI_OK(MPI_Type_get_extent(dt, &lb, &extent));
    int psize = 0;
    MPI_OK(MPI_Pack_size(N, dt, MPI_COMM_WORLD, &psize));
    struct buf k = mk(0, (size_t)psize);
    if (rank == 0) {
        struct buf t = mk(0, (size_t)extent * N);
        pattern(&t, 77);
        int pos = 0;
        MPI_OK(MPI_Pack(t.p, N, dt, k.p, psize, &pos, MPI_COMM_WORLD));
        MPI_OK(MPI_Send(k.p, pos, MPI_PACKED, 1, 5, MPI_COMM_WORLD));
        drop(&t);
    } else if (rank == 1) {
        struct buf t = mk(ndev - 1, (size_t)extent * N);
        canary(&t);
        MPI_Status st;
        MPI_OK(MPI_Recv(k.p, psize, MPI_PACKED, 0, 5, MPI_COMM_WORLD, &st));
        int pos = 0;
        MPI_OK(MPI_Unpack(k.p, psize, &pos, t.p, N, dt, MPI_COMM_WORLD));
        CHECK(pos == psize, "MPI_Unpack of the received data: position %d, want %d", pos, psize);
        /* What rank 0's pattern puts in the vector's ints (rank 0's bytes). */
        for (int e = 0; e < N; e++)
            for (int j = 0; j < 4; j++) {
                size_t off = (size_t)e * (size_t)extent + (size_t)j * 3 * sizeof(int);
                for (size_t b = 0; b < sizeof(int); b++)
                    t.want[GUARD + off + b] = (unsigned char)((GUARD + off + b) * 13 + 77 * 7);
            }
        verify(&t, "a vector type unpacked on the device from a device MPI_PACKED message");
        drop(&t);
    }
    drop(&k);
}

/* Too small a device outbuf of Pack, too short a device inbuf of Unpack:
 * MPI_ERR_TRUNCATE naming the call (the shim's: MPICH 4.0.2's MPI_Pack does
 * not check outsize, and would write past the staging memory), the device
 * buffers untouched. */
static void test_errors(void)
{
    MPI_Comm comm;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    MPI_OK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    struct buf t = mk(0, 64 * sizeof(int)), k = mk(ndev - 1, 16);
    pattern(&t, 3);
    canary(&k);
    int pos = 4;
    expect_error(MPI_Pack(t.p, 64, MPI_INT, k.p, 16, &pos, comm), MPI_ERR_TRUNCATE, "MPI_Pack",
                 "MPI_Pack of 256 bytes into 12");
    verify(&k, "a too small device outbuf of MPI_Pack");
    CHECK(pos == 4, "a refused MPI_Pack moved the position to %d", pos);
    canary(&t);
    pos = 0;
    expect_error(MPI_Unpack(k.p, 16, &pos, t.p, 64, MPI_INT, comm), MPI_ERR_TRUNCATE,
                 "MPI_Unpack", "MPI_Unpack of 256 bytes from 16");
    verify(&t, "the outbuf of an MPI_Unpack from too short a device inbuf");
    drop(&t);
    drop(&k);
    MPI_OK(MPI_Comm_free(&comm));
}

int main(int argc, char **argv)
{
    const char *only = coll_prog_init(&argc, &argv);
    make_types();
#define RUN(name) MPI_PROG_RUN(only, name)
    RUN(local);
    RUN(exchange);
    RUN(errors);
    MPI_OK(MPI_Type_free(&types[1]));
    MPI_OK(MPI_Type_free(&types[2]));
    if (lc_calls > 0)
        printf("pack_device: rank %d: large-count: %d calls checked\n", rank, lc_calls);
    return coll_prog_end();
}
