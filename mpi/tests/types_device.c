/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Non-contiguous datatypes on device memory (docs/mpi.md "Non-contiguous
 * datatypes"), run under LD_PRELOAD=libcucopy_mpi.so (mpirun -n 2 and -n 3,
 * two devices per rank): the datatype zoo (vector, hvector, indexed,
 * hindexed, indexed_block, hindexed_block, struct of int + double, subarrays
 * in C and Fortran order, the x-face of a 3-D block, resized, a vector of
 * structs, dup, contiguous of a subarray, pair types inside vector and
 * indexed types) sent device to device, device to host and host to device
 * around the ring by every kind of point-to-point call, partial receives,
 * MPI_Get_count / MPI_Get_elements with the user's type, the layout cache
 * across MPI_Type_free, the collectives that stage them (packed), Alltoallw
 * with a different type per peer and the reductions packing cannot run
 * (layout-preserving: user ops, host memory in the call, struct and pair
 * types, Reduce_scatter), and the refusals with their messages.
 *
 * The oracle is MPI itself on host memory: each buffer is a whole allocation
 * filled with a pattern (the receive buffer's is the canary), and the same
 * operation on host copies of the buffers (which the shim passes through)
 * says what every byte must be afterwards; the device buffer is compared
 * with it byte for byte, so a byte written in a hole of the type map, or
 * one of the map left unwritten, fails.
 *
 * Without the shim the first device-buffer call faults inside MPI: the
 * negative control (mpi/tests/CMakeLists.txt).
 *
 * Prints "types_device: rank R: PASS" or "FAILED ..." lines; exit status 1
 * on a failure.
 */
#include <mpi.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev_prog.h"
#include "mpi_prog.h"

static int rank, nranks, provided;
static _Atomic int failures, checks; /* the threads test counts from several threads */

#define CHECK(cond, ...) MPI_PROG_CHECK("types_device", rank, checks, failures, cond, __VA_ARGS__)
#define MPI_OK(call) MPI_OK_OR_ABORT("types_device", rank, call)

/* Room before a buffer's origin (types may reach below it) and after. */
#define PAD 64

/* ---- buffers: a whole allocation, host or device --------------------------------- */

struct tbuf {
    int dev; /* -1: host memory */
    size_t len;
    char *alloc;
    char *origin; /* alloc + PAD: the buffer argument */
};

static struct tbuf tb_alloc(int dev, size_t span)
{
    struct tbuf b = {.dev = dev, .len = span + 2 * PAD};
    if (dev < 0) {
        b.alloc = malloc(b.len);
    } else {
        cdDevicePtr p = 0;
        push(dev);
        TD_CHECK(td.cuMemAlloc(&p, b.len));
        pop();
        b.alloc = (char *)(uintptr_t)p;
    }
    b.origin = b.alloc + PAD;
    return b;
}

static void tb_free(struct tbuf *b)
{
    if (b->dev < 0) {
        free(b->alloc);
    } else {
        push(b->dev);
        TD_CHECK(td.cuMemFree((cdDevicePtr)(uintptr_t)b->alloc));
        pop();
    }
}

static unsigned char pattern(int seed, size_t i)
{
    return (unsigned char)(seed * 131 + i * 7 + (i >> 8) + 1);
}

/* Load the whole allocation from host memory @p h. */
static void tb_load(struct tbuf *b, const char *h)
{
    if (b->dev < 0) {
        memcpy(b->alloc, h, b->len);
        return;
    }
    /* Wait until it landed: the shim's copies run on their own streams. */
    push(b->dev);
    TD_CHECK(td.cuMemcpyHtoD((cdDevicePtr)(uintptr_t)b->alloc, h, b->len));
    TD_CHECK(td.cuCtxSynchronize());
    pop();
}

/* Fill the whole allocation with pattern(seed); host memory @p h gets the same. */
static void tb_fill(struct tbuf *b, int seed, char *h)
{
    for (size_t i = 0; i < b->len; i++)
        h[i] = (char)pattern(seed, i);
    tb_load(b, h);
}

/* 1 when the whole allocation equals @p want; else the first difference
 * and how many bytes differ go to *at and *bad. */
static int tb_equals(const struct tbuf *b, const char *want, size_t *at, size_t *bad)
{
    char *h = malloc(b->len);
    if (b->dev < 0) {
        memcpy(h, b->alloc, b->len);
    } else {
        push(b->dev);
        TD_CHECK(td.cuMemcpyDtoH(h, (cdDevicePtr)(uintptr_t)b->alloc, b->len));
        pop();
    }
    *bad = 0;
    for (size_t i = b->len; i-- > 0;)
        if (h[i] != want[i]) {
            *at = i;
            (*bad)++;
        }
    free(h);
    return *bad == 0;
}

#define EXPECT_SAME(b, want, ...)                                                          \
    do {                                                                                   \
        size_t at_ = 0, bad_ = 0;                                                          \
        int ok_ = tb_equals(b, want, &at_, &bad_);                                         \
        CHECK(ok_, __VA_ARGS__);                                                           \
        if (!ok_)                                                                          \
            fprintf(stderr, "types_device: rank %d:   %zu bytes differ, the first at "      \
                            "offset %td from the origin\n",                                \
                    rank, bad_, (ptrdiff_t)at_ - PAD);                                      \
    } while (0)

static int to_rank(void)
{
    return (rank + 1) % nranks;
}

static int from_rank(void)
{
    return (rank + nranks - 1) % nranks;
}

/* Bytes from the origin to the end of @p count elements of @p dt. */
static size_t span_of(MPI_Datatype dt, int count)
{
    MPI_Aint lb, ext, tlb, text;
    MPI_OK(MPI_Type_get_extent(dt, &lb, &ext));
    MPI_OK(MPI_Type_get_true_extent(dt, &tlb, &text));
    if (tlb < -PAD) {
        fprintf(stderr, "types_device: a zoo type reaches below its pad\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    return (size_t)(tlb + text + (MPI_Aint)(count - 1) * ext);
}

/* ---- the zoo -------------------------------------------------------------------------- */

struct zoo {
    const char *name;
    MPI_Datatype dt;
    int count;
};

#define ZOO_MAX 32
#define VMAX_RANKS 64
static struct zoo zoo[ZOO_MAX];
static int nzoo;
static int zoo_pairs; /* the first of the pair types' entries */

static void zoo_add(const char *name, MPI_Datatype dt, int count)
{
    MPI_OK(MPI_Type_commit(&dt));
    zoo[nzoo++] = (struct zoo){name, dt, count};
}

/* int at 0, double at 8: 4 bytes of hole in every element. */
static MPI_Datatype int_double(void)
{
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {0, 8};
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE}, t;
    MPI_OK(MPI_Type_create_struct(2, bl, disp, types, &t));
    return t;
}

static void zoo_make(void)
{
    MPI_Datatype t, u;
    MPI_OK(MPI_Type_vector(4, 1, 3, MPI_DOUBLE, &t));
    zoo_add("vector", t, 3);
    MPI_OK(MPI_Type_create_hvector(3, 2, 20, MPI_INT, &t));
    zoo_add("hvector", t, 2);
    {
        int bl[3] = {2, 1, 3}, disp[3] = {0, 5, 9};
        MPI_OK(MPI_Type_indexed(3, bl, disp, MPI_FLOAT, &t));
        zoo_add("indexed", t, 2);
    }
    {
        /* Displacements going down: the type map's order is not the address order. */
        int bl[2] = {1, 2};
        MPI_Aint disp[2] = {24, 0};
        MPI_OK(MPI_Type_create_hindexed(2, bl, disp, MPI_DOUBLE, &t));
        zoo_add("hindexed (descending)", t, 2);
    }
    {
        int disp[3] = {7, 0, 3};
        MPI_OK(MPI_Type_create_indexed_block(3, 2, disp, MPI_SHORT, &t));
        zoo_add("indexed_block", t, 3);
    }
    {
        MPI_Aint disp[2] = {0, 40};
        MPI_OK(MPI_Type_create_hindexed_block(2, 3, disp, MPI_CHAR, &t));
        zoo_add("hindexed_block", t, 2);
    }
    zoo_add("struct int+double", int_double(), 4);
    {
        int sizes[2] = {6, 5}, subs[2] = {3, 2}, starts[2] = {1, 2};
        MPI_OK(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &t));
        zoo_add("subarray C", t, 2);
    }
    {
        int sizes[2] = {6, 5}, subs[2] = {2, 4}, starts[2] = {3, 1};
        MPI_OK(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_FORTRAN, MPI_DOUBLE,
                                        &t));
        zoo_add("subarray Fortran", t, 1);
    }
    {
        /* The x-face (x = 2) of a 8 x 6 x 5 block of doubles, x fastest. */
        int sizes[3] = {8, 6, 5}, subs[3] = {8, 6, 1}, starts[3] = {0, 0, 2};
        MPI_OK(MPI_Type_create_subarray(3, sizes, subs, starts, MPI_ORDER_C, MPI_DOUBLE, &t));
        zoo_add("x-face subarray", t, 1);
    }
    MPI_OK(MPI_Type_vector(2, 1, 2, MPI_INT, &u));
    MPI_OK(MPI_Type_create_resized(u, 0, 32, &t));
    MPI_OK(MPI_Type_free(&u));
    zoo_add("resized vector", t, 3);
    MPI_OK(MPI_Type_create_resized(MPI_INT, 0, 8, &t));
    zoo_add("resized int (gaps between elements)", t, 5);
    {
        MPI_Datatype s = int_double();
        MPI_OK(MPI_Type_vector(3, 1, 2, s, &t));
        MPI_OK(MPI_Type_free(&s));
        zoo_add("vector of struct", t, 2);
    }
    MPI_OK(MPI_Type_dup(zoo[0].dt, &t));
    zoo_add("dup of vector", t, 2);
    {
        int sizes[2] = {4, 4}, subs[2] = {2, 2}, starts[2] = {1, 1};
        MPI_OK(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_SHORT, &u));
        MPI_OK(MPI_Type_contiguous(2, u, &t));
        MPI_OK(MPI_Type_free(&u));
        zoo_add("contiguous of subarray", t, 2);
    }
#if MPI_VERSION >= 4
    /* The large-count constructors (MPI-4): MPI_Type_get_envelope cannot
     * describe them (MPICH 4.0 fails it); the shim reads the _c contents. */
    MPI_OK(MPI_Type_vector_c(4, 1, 3, MPI_DOUBLE, &t));
    zoo_add("vector_c", t, 3);
    MPI_OK(MPI_Type_create_hvector_c(3, 2, 20, MPI_INT, &t));
    zoo_add("hvector_c", t, 2);
    {
        MPI_Count bl[3] = {2, 1, 3}, disp[3] = {0, 5, 9};
        MPI_OK(MPI_Type_indexed_c(3, bl, disp, MPI_FLOAT, &t));
        zoo_add("indexed_c", t, 2);
        MPI_Count hbl[2] = {1, 2}, hdisp[2] = {24, 0};
        MPI_OK(MPI_Type_create_hindexed_c(2, hbl, hdisp, MPI_DOUBLE, &t));
        zoo_add("hindexed_c (descending)", t, 2);
        MPI_Count bdisp[3] = {7, 0, 3};
        MPI_OK(MPI_Type_create_indexed_block_c(3, 2, bdisp, MPI_SHORT, &t));
        zoo_add("indexed_block_c", t, 3);
        MPI_Count hbdisp[2] = {0, 40};
        MPI_OK(MPI_Type_create_hindexed_block_c(2, 3, hbdisp, MPI_CHAR, &t));
        zoo_add("hindexed_block_c", t, 2);
        MPI_Count sbl[2] = {1, 1}, sdisp[2] = {0, 8};
        MPI_Datatype stypes[2] = {MPI_INT, MPI_DOUBLE};
        MPI_OK(MPI_Type_create_struct_c(2, sbl, sdisp, stypes, &t));
        zoo_add("struct_c int+double", t, 4);
        MPI_Count sizes[3] = {8, 6, 5}, subs[3] = {8, 6, 1}, starts[3] = {0, 0, 2};
        MPI_OK(MPI_Type_create_subarray_c(3, sizes, subs, starts, MPI_ORDER_C, MPI_DOUBLE, &t));
        zoo_add("x-face subarray_c", t, 1);
    }
    MPI_OK(MPI_Type_vector_c(2, 1, 2, MPI_INT, &u));
    MPI_OK(MPI_Type_create_resized_c(u, 0, 32, &t));
    MPI_OK(MPI_Type_free(&u));
    zoo_add("resized_c vector_c", t, 3);
    MPI_OK(MPI_Type_contiguous_c(2, zoo[0].dt, &t));
    zoo_add("contiguous_c of vector", t, 2);
#endif
    /* Pair types (a hole in each: MPI_DOUBLE_INT after its int, MPI_SHORT_INT
     * between its short and its int) inside non-contiguous types. */
    zoo_pairs = nzoo;
    MPI_OK(MPI_Type_vector(3, 1, 2, MPI_DOUBLE_INT, &t));
    zoo_add("vector of MPI_DOUBLE_INT", t, 2);
    {
        int bl[2] = {2, 1}, disp[2] = {0, 3};
        MPI_OK(MPI_Type_indexed(2, bl, disp, MPI_SHORT_INT, &t));
        zoo_add("indexed of MPI_SHORT_INT", t, 2);
    }
}

/* ---- point-to-point -------------------------------------------------------------------- */

enum mode { BLOCKING, NONBLOCKING, PERSISTENT, SENDRECV, REPLACE, MRECV, MODES };
static const char *const mode_name[MODES] = {"Send/Recv",     "Isend/Irecv", "Send_init/Recv_init",
                                             "Sendrecv",      "Sendrecv_replace", "Mprobe/Mrecv"};

/* One message around the ring: scount x stype from a buffer on @p sdev (-1:
 * host) to rcount x rtype into one on @p rdev; the received buffer is
 * compared with MPI's own result on host memory, and so are the status's
 * counts in rtype. */
static void ring(const char *what, enum mode m, MPI_Datatype stype, int scount,
                 MPI_Datatype rtype, int rcount, int sdev, int rdev, int tag)
{
    size_t sspan = span_of(stype, scount), rspan = span_of(rtype, rcount);
    size_t span = sspan > rspan ? sspan : rspan;
    struct tbuf s = tb_alloc(sdev, span), r = tb_alloc(rdev, span);
    char *hs = malloc(s.len), *hr = malloc(r.len), *want = malloc(r.len);
    char *hpeer = malloc(s.len);
    int sseed = 10 + 7 * rank + tag, pseed = 10 + 7 * from_rank() + tag;
    tb_fill(&s, sseed, hs);
    tb_fill(&r, 200 + tag, hr);
    if (m == REPLACE)
        tb_fill(&r, sseed, hr); /* one buffer, sent from and received into */
    /* MPI's result on host memory: the peer's message into a canaried copy. */
    MPI_Status ref;
#define REFERENCE(peer_seed)                                                                 \
    do {                                                                                     \
        for (size_t i_ = 0; i_ < s.len; i_++)                                                \
            hpeer[i_] = (char)pattern(peer_seed, i_);                                        \
        memcpy(want, hr, r.len);                                                             \
        MPI_OK(MPI_Sendrecv(hpeer + PAD, scount, stype, 0, tag, want + PAD, rcount, rtype,  \
                            0, tag, MPI_COMM_SELF, &ref));                                   \
    } while (0)
    REFERENCE(pseed);

    MPI_Comm comm = MPI_COMM_WORLD;
    MPI_Status st;
    MPI_Request req[2];
    switch (m) {
    case BLOCKING:
        if (rank % 2 == 0) {
            MPI_OK(MPI_Send(s.origin, scount, stype, to_rank(), tag, comm));
            MPI_OK(MPI_Recv(r.origin, rcount, rtype, from_rank(), tag, comm, &st));
        } else {
            MPI_OK(MPI_Recv(r.origin, rcount, rtype, from_rank(), tag, comm, &st));
            MPI_OK(MPI_Send(s.origin, scount, stype, to_rank(), tag, comm));
        }
        break;
    case NONBLOCKING: {
        MPI_Status sts[2];
        MPI_OK(MPI_Irecv(r.origin, rcount, rtype, from_rank(), tag, comm, &req[0]));
        MPI_OK(MPI_Isend(s.origin, scount, stype, to_rank(), tag, comm, &req[1]));
        MPI_OK(MPI_Waitall(2, req, sts));
        st = sts[0];
        break;
    }
    case PERSISTENT:
        /* Started twice: the second round sends what the buffer holds then. */
        MPI_OK(MPI_Recv_init(r.origin, rcount, rtype, from_rank(), tag, comm, &req[0]));
        MPI_OK(MPI_Send_init(s.origin, scount, stype, to_rank(), tag, comm, &req[1]));
        for (int round = 0; round < 2; round++) {
            if (round == 1) {
                /* New data in the send buffer: MPI_Start copies it in again. */
                tb_fill(&s, sseed + 50, hs);
                tb_fill(&r, 200 + tag, hr);
                REFERENCE(pseed + 50);
            }
            MPI_OK(MPI_Startall(2, req));
            MPI_OK(MPI_Wait(&req[0], &st));
            MPI_OK(MPI_Wait(&req[1], MPI_STATUS_IGNORE));
            if (round == 0) {
                EXPECT_SAME(&r, want, "%s %s dev%d->dev%d: round 0 data or canaries", what,
                            mode_name[m], sdev, rdev);
            }
        }
        MPI_OK(MPI_Request_free(&req[0]));
        MPI_OK(MPI_Request_free(&req[1]));
        break;
    case SENDRECV:
        MPI_OK(MPI_Sendrecv(s.origin, scount, stype, to_rank(), tag, r.origin, rcount, rtype,
                            from_rank(), tag, comm, &st));
        break;
    case REPLACE:
        MPI_OK(MPI_Sendrecv_replace(r.origin, rcount, rtype, to_rank(), tag, from_rank(), tag,
                                    comm, &st));
        break;
    case MRECV: {
        MPI_Message msg;
        MPI_OK(MPI_Isend(s.origin, scount, stype, to_rank(), tag, comm, &req[1]));
        MPI_OK(MPI_Mprobe(from_rank(), tag, comm, &msg, &st));
        MPI_OK(MPI_Mrecv(r.origin, rcount, rtype, &msg, &st));
        MPI_OK(MPI_Wait(&req[1], MPI_STATUS_IGNORE));
        break;
    }
    default:
        break;
    }
    EXPECT_SAME(&r, want, "%s %s dev%d->dev%d: data or canaries", what, mode_name[m], sdev,
                rdev);
    if (m != REPLACE)
        EXPECT_SAME(&s, hs, "%s %s dev%d->dev%d: the send buffer changed", what, mode_name[m],
                    sdev, rdev);
    int c = -2, cref = -3, e = -2, eref = -3;
    MPI_Get_count(&st, rtype, &c);
    MPI_Get_count(&ref, rtype, &cref);
    MPI_Get_elements(&st, rtype, &e);
    MPI_Get_elements(&ref, rtype, &eref);
    CHECK(c == cref && e == eref && st.MPI_SOURCE == from_rank() && st.MPI_TAG == tag,
          "%s %s: count %d elements %d source %d tag %d (want %d %d %d %d)", what, mode_name[m],
          c, e, st.MPI_SOURCE, st.MPI_TAG, cref, eref, from_rank(), tag);
#undef REFERENCE
    free(hs);
    free(hr);
    free(want);
    free(hpeer);
    tb_free(&s);
    tb_free(&r);
}

static void test_zoo(void)
{
    /* Device to device (across the two devices), device to host, host to device. */
    static const int pairs[][2] = {{0, 1}, {1, 1}, {0, -1}, {-1, 0}};
    int tag = 1000;
    for (int z = 0; z < nzoo; z++)
        for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++)
            for (int m = 0; m < MODES; m++) {
                /* Every mode device to device; the mixed pairs by plain calls. */
                if (pairs[p][0] < 0 || pairs[p][1] < 0) {
                    if (m != BLOCKING && m != NONBLOCKING)
                        continue;
                }
                if (m == REPLACE && pairs[p][0] != pairs[p][1])
                    continue; /* one buffer */
                ring(zoo[z].name, (enum mode)m, zoo[z].dt, zoo[z].count, zoo[z].dt,
                     zoo[z].count, pairs[p][0], pairs[p][1], tag++);
            }
}

/* Receives shorter than the receive buffer: whole elements, and a part of one
 * (MPI_Get_count MPI_UNDEFINED, MPI_Get_elements what came). */
static void test_partial(void)
{
    int tag = 3000;
    for (int z = 0; z < nzoo; z++) {
        /* One element fewer than the buffer holds. */
        if (zoo[z].count > 1)
            ring(zoo[z].name, BLOCKING, zoo[z].dt, zoo[z].count - 1, zoo[z].dt, zoo[z].count, 0,
                 1, tag++);
    }
    /* 5 doubles into 2 vectors of 4 doubles: the first 5 places of the map. */
    ring("5 doubles into vector", BLOCKING, MPI_DOUBLE, 5, zoo[0].dt, 2, 1, 0, tag++);
    ring("5 doubles into vector", NONBLOCKING, MPI_DOUBLE, 5, zoo[0].dt, 2, -1, 0, tag++);
    /* 3 ints and a double into the struct type x 4. */
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {0, 4};
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE}, packed;
    MPI_OK(MPI_Type_create_struct(2, bl, disp, types, &packed));
    MPI_OK(MPI_Type_commit(&packed));
    ring("1 int+double into struct", BLOCKING, packed, 1, zoo[6].dt, 4, 0, 0, tag++);
    MPI_OK(MPI_Type_free(&packed));
    /* One block of memory in another order (descending, no holes: size ==
     * true extent): one double of two, which MPI puts at offset 8. */
    {
        int sbl[2] = {1, 1};
        MPI_Aint sdisp[2] = {8, 0};
        MPI_Datatype swap;
        MPI_OK(MPI_Type_create_hindexed(2, sbl, sdisp, MPI_DOUBLE, &swap));
        MPI_OK(MPI_Type_commit(&swap));
        ring("1 double into a descending hindexed without holes", BLOCKING, MPI_DOUBLE, 1,
             swap, 1, 0, 1, tag++);
        ring("3 doubles into descending hindexed without holes", NONBLOCKING, MPI_DOUBLE, 3,
             swap, 2, 1, 0, tag++);
        ring("descending hindexed without holes", BLOCKING, swap, 2, MPI_DOUBLE, 4, 0, 1,
             tag++);
        MPI_OK(MPI_Type_free(&swap));
    }
    /* Part of an element: 7 bytes of chars into hindexed_block elements of 3+3. */
    ring("7 chars into hindexed_block", BLOCKING, MPI_CHAR, 7, zoo[5].dt, 2, 0, 1, tag++);
}

/* A freed type's handle may come back for a different type: the shim must
 * not use the old layout. The two have the same size, extent and envelope
 * (vectors of 16 bytes over the same extent), so only MPI_Type_free can tell
 * the shim. */
static void test_cache(void)
{
    int tag = 4000, reused = 0;
    for (int round = 0; round < 6; round++) {
        MPI_Datatype a, b;
        MPI_OK(MPI_Type_vector(2, 2, 8 + 3 * round, MPI_INT, &a));
        MPI_OK(MPI_Type_commit(&a));
        ring("cache: first type", BLOCKING, a, 2, a, 2, 0, 1, tag++);
        MPI_Datatype old = a;
        MPI_OK(MPI_Type_free(&a));
        MPI_OK(MPI_Type_vector(4, 1, 3 + round, MPI_INT, &b));
        MPI_OK(MPI_Type_commit(&b));
        reused += b == old;
        ring("cache: the next type", BLOCKING, b, 2, b, 2, 1, 0, tag++);
        ring("cache: the next type", NONBLOCKING, b, 2, b, 2, 0, 0, tag++);
        MPI_OK(MPI_Type_free(&b));
    }
    /* A type freed while a nonblocking receive on it is in flight. */
    MPI_Datatype t;
    MPI_OK(MPI_Type_vector(3, 2, 4, MPI_FLOAT, &t));
    MPI_OK(MPI_Type_commit(&t));
    size_t span = span_of(t, 2);
    struct tbuf s = tb_alloc(1, span), r = tb_alloc(0, span);
    char *hs = malloc(s.len), *hr = malloc(r.len), *hp = malloc(s.len);
    tb_fill(&s, 50 + rank, hs);
    tb_fill(&r, 77, hr);
    for (size_t i = 0; i < s.len; i++)
        hp[i] = (char)pattern(50 + from_rank(), i);
    MPI_OK(MPI_Sendrecv(hp + PAD, 2, t, 0, 1, hr + PAD, 2, t, 0, 1, MPI_COMM_SELF,
                        MPI_STATUS_IGNORE));
    MPI_Request req[2];
    MPI_OK(MPI_Irecv(r.origin, 2, t, from_rank(), tag, MPI_COMM_WORLD, &req[0]));
    MPI_OK(MPI_Isend(s.origin, 2, t, to_rank(), tag, MPI_COMM_WORLD, &req[1]));
    MPI_OK(MPI_Type_free(&t));
    MPI_Datatype other;
    MPI_OK(MPI_Type_contiguous(3, MPI_INT, &other)); /* may take t's handle */
    MPI_OK(MPI_Type_commit(&other));
    MPI_OK(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
    EXPECT_SAME(&r, hr, "a type freed while its receive was in flight: data or canaries");
    MPI_OK(MPI_Type_free(&other));
    free(hs);
    free(hr);
    free(hp);
    tb_free(&s);
    tb_free(&r);
    if (rank == 0)
        printf("types_device: rank 0: %d of 6 freed handles came back for the next type\n",
               reused);
}

/* ---- collectives -------------------------------------------------------------------------- */

enum coll { BCAST, GATHER, SCATTER, ALLGATHER, ALLTOALL, IBCAST, IALLGATHER, IALLTOALL, COLLS };
static const char *const coll_name[COLLS] = {"Bcast",     "Gather",     "Scatter",
                                             "Allgather", "Alltoall",   "Ibcast",
                                             "Iallgather", "Ialltoall"};

static void run_coll(enum coll k, char *s, char *r, MPI_Datatype dt, int count)
{
    MPI_Comm w = MPI_COMM_WORLD;
    MPI_Request req = MPI_REQUEST_NULL;
    switch (k) {
    case BCAST:
        MPI_OK(MPI_Bcast(r, count, dt, 0, w));
        break;
    case GATHER:
        MPI_OK(MPI_Gather(s, count, dt, r, count, dt, 0, w));
        break;
    case SCATTER:
        MPI_OK(MPI_Scatter(s, count, dt, r, count, dt, 0, w));
        break;
    case ALLGATHER:
        MPI_OK(MPI_Allgather(s, count, dt, r, count, dt, w));
        break;
    case ALLTOALL:
        MPI_OK(MPI_Alltoall(s, count, dt, r, count, dt, w));
        break;
    case IBCAST:
        MPI_OK(MPI_Ibcast(r, count, dt, 0, w, &req));
        break;
    case IALLGATHER:
        MPI_OK(MPI_Iallgather(s, count, dt, r, count, dt, w, &req));
        break;
    case IALLTOALL:
        MPI_OK(MPI_Ialltoall(s, count, dt, r, count, dt, w, &req));
        break;
    default:
        break;
    }
    MPI_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
}

/* Each collective on device buffers and on host copies of them: the device
 * buffers must end as the host ones (data and canaries). */
static void test_coll(void)
{
    static const int pick[] = {0, 6, 9, 10, 13};
    int seed = 0;
    for (size_t p = 0; p < sizeof pick / sizeof pick[0]; p++) {
        const struct zoo *z = &zoo[pick[p]];
        for (int k = 0; k < COLLS; k++) {
            int blocks = k == BCAST || k == IBCAST ? 1 : nranks;
            size_t span = span_of(z->dt, z->count * blocks);
            int dev = (k + rank) % ndev;
            struct tbuf s = tb_alloc(dev, span), r = tb_alloc(1 - dev < ndev ? 1 - dev : 0, span);
            char *hs = malloc(s.len), *hr = malloc(r.len);
            seed++;
            tb_fill(&s, 30 + seed + 5 * rank, hs);
            tb_fill(&r, 90 + seed + 3 * rank, hr);
            if (k == BCAST || k == IBCAST)
                tb_fill(&r, 30 + seed + 5 * rank, hr); /* the root's data */
            run_coll((enum coll)k, hs + PAD, hr + PAD, z->dt, z->count);
            run_coll((enum coll)k, s.origin, r.origin, z->dt, z->count);
            EXPECT_SAME(&r, hr, "%s of %s on device memory: data or canaries", coll_name[k],
                        z->name);
            free(hs);
            free(hr);
            tb_free(&s);
            tb_free(&r);
        }
    }
}

/* The v forms where one side is a single buffer: a non-contiguous type of
 * doubles there (staged packed), MPI_DOUBLE blocks with a gap between them
 * on the other side (staged as a span), both on device memory. */
enum vcoll { GATHERV, SCATTERV, ALLGATHERV, IALLGATHERV, VCOLLS };
static const char *const vcoll_name[VCOLLS] = {"Gatherv", "Scatterv", "Allgatherv",
                                               "Iallgatherv"};

static void run_vcoll(enum vcoll k, char *one, char *blocks, MPI_Datatype dt, int count,
                      const int *counts, const int *displs)
{
    MPI_Comm w = MPI_COMM_WORLD;
    MPI_Request req = MPI_REQUEST_NULL;
    switch (k) {
    case GATHERV:
        MPI_OK(MPI_Gatherv(one, count, dt, blocks, counts, displs, MPI_DOUBLE, 0, w));
        break;
    case SCATTERV:
        MPI_OK(MPI_Scatterv(blocks, counts, displs, MPI_DOUBLE, one, count, dt, 0, w));
        break;
    case ALLGATHERV:
        MPI_OK(MPI_Allgatherv(one, count, dt, blocks, counts, displs, MPI_DOUBLE, w));
        break;
    case IALLGATHERV:
        MPI_OK(MPI_Iallgatherv(one, count, dt, blocks, counts, displs, MPI_DOUBLE, w, &req));
        break;
    default:
        break;
    }
    MPI_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
}

static void test_vcoll(void)
{
    static const int pick[] = {0, 8, 9}; /* vector, subarray Fortran, x-face: doubles */
    int seed = 0;
    int *counts = malloc(sizeof(int) * (size_t)nranks);
    int *displs = malloc(sizeof(int) * (size_t)nranks);
    for (size_t p = 0; p < sizeof pick / sizeof pick[0]; p++) {
        const struct zoo *z = &zoo[pick[p]];
        int size = 0;
        MPI_OK(MPI_Type_size(z->dt, &size));
        int nd = z->count * size / (int)sizeof(double);
        for (int q = 0; q < nranks; q++) {
            counts[q] = nd;
            displs[q] = q * (nd + 1); /* one double of gap before the next block */
        }
        size_t vspan = (size_t)nranks * (size_t)(nd + 1) * sizeof(double);
        for (int k = 0; k < VCOLLS; k++) {
            struct tbuf o = tb_alloc(rank % ndev, span_of(z->dt, z->count));
            struct tbuf b = tb_alloc((rank + 1) % ndev, vspan);
            char *ho = malloc(o.len), *hb = malloc(b.len);
            seed++;
            tb_fill(&o, 60 + seed + 5 * rank, ho);
            tb_fill(&b, 120 + seed + 3 * rank, hb);
            run_vcoll((enum vcoll)k, ho + PAD, hb + PAD, z->dt, z->count, counts, displs);
            run_vcoll((enum vcoll)k, o.origin, b.origin, z->dt, z->count, counts, displs);
            EXPECT_SAME(&o, ho, "%s of %s (its single buffer): data or canaries",
                        vcoll_name[k], z->name);
            EXPECT_SAME(&b, hb, "%s of %s (its blocks of doubles): data or canaries",
                        vcoll_name[k], z->name);
            free(ho);
            free(hb);
            tb_free(&o);
            tb_free(&b);
        }
    }
    free(counts);
    free(displs);
}

/* The v forms' per-peer blocks of a non-contiguous type on device memory:
 * block q is the type's count elements at displacement q x (count + 1), so
 * a whole element of holes lies between blocks; the single buffers of the
 * same type. */
enum vblk { VB_GATHERV, VB_SCATTERV, VB_ALLGATHERV, VB_ALLGATHERV_IN_PLACE, VB_IALLGATHERV,
            VB_ALLTOALLV, VB_IALLTOALLV, VBLKS };
static const char *const vblk_name[VBLKS] = {"Gatherv",      "Scatterv",  "Allgatherv",
                                             "Allgatherv in place", "Iallgatherv",
                                             "Alltoallv",    "Ialltoallv"};

static void run_vblk(enum vblk k, char *one, char *blocks, char *blocks2, MPI_Datatype dt,
                     int count, const int *counts, const int *displs)
{
    MPI_Comm w = MPI_COMM_WORLD;
    MPI_Request req = MPI_REQUEST_NULL;
    switch (k) {
    case VB_GATHERV:
        MPI_OK(MPI_Gatherv(one, count, dt, blocks, counts, displs, dt, nranks - 1, w));
        break;
    case VB_SCATTERV:
        MPI_OK(MPI_Scatterv(blocks, counts, displs, dt, one, count, dt, nranks - 1, w));
        break;
    case VB_ALLGATHERV:
        MPI_OK(MPI_Allgatherv(one, count, dt, blocks, counts, displs, dt, w));
        break;
    case VB_ALLGATHERV_IN_PLACE:
        MPI_OK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, blocks, counts, displs, dt, w));
        break;
    case VB_IALLGATHERV:
        MPI_OK(MPI_Iallgatherv(one, count, dt, blocks, counts, displs, dt, w, &req));
        break;
    case VB_ALLTOALLV:
        MPI_OK(MPI_Alltoallv(blocks2, counts, displs, dt, blocks, counts, displs, dt, w));
        break;
    case VB_IALLTOALLV:
        MPI_OK(MPI_Ialltoallv(blocks2, counts, displs, dt, blocks, counts, displs, dt, w, &req));
        break;
    default:
        break;
    }
    MPI_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
}

static void test_vblocks(void)
{
    static const int pick[] = {0, 6, 9, 11}; /* vector, struct, x-face, resized int */
    int seed = 0;
    int *counts = malloc(sizeof(int) * (size_t)nranks);
    int *displs = malloc(sizeof(int) * (size_t)nranks);
    for (size_t p = 0; p < sizeof pick / sizeof pick[0]; p++) {
        const struct zoo *z = &zoo[pick[p]];
        for (int q = 0; q < nranks; q++) {
            counts[q] = z->count;
            displs[q] = q * (z->count + 1); /* an element of holes between blocks */
        }
        size_t vspan = span_of(z->dt, nranks * (z->count + 1));
        for (int k = 0; k < VBLKS; k++) {
            struct tbuf o = tb_alloc(rank % ndev, span_of(z->dt, z->count));
            struct tbuf b = tb_alloc((rank + 1) % ndev, vspan), b2 = tb_alloc(rank % ndev, vspan);
            char *ho = malloc(o.len), *hb = malloc(b.len), *hb2 = malloc(b2.len);
            seed++;
            tb_fill(&o, 70 + seed + 5 * rank, ho);
            tb_fill(&b, 130 + seed + 3 * rank, hb);
            tb_fill(&b2, 190 + seed + 7 * rank, hb2);
            run_vblk((enum vblk)k, ho + PAD, hb + PAD, hb2 + PAD, z->dt, z->count, counts,
                     displs);
            run_vblk((enum vblk)k, o.origin, b.origin, b2.origin, z->dt, z->count, counts,
                     displs);
            EXPECT_SAME(&b, hb, "%s of %s (its blocks): data or canaries", vblk_name[k],
                        z->name);
            EXPECT_SAME(&o, ho, "%s of %s (its single buffer): data or canaries", vblk_name[k],
                        z->name);
            EXPECT_SAME(&b2, hb2, "%s of %s (its send blocks): changed", vblk_name[k], z->name);
            free(ho);
            free(hb);
            free(hb2);
            tb_free(&o);
            tb_free(&b);
            tb_free(&b2);
        }
    }
    free(counts);
    free(displs);
}

/* ---- reductions -------------------------------------------------------------------------- */

/* Reductions on a type of ints on device memory, every buffer the call
 * touches on device memory: PMPI gets count x k MPI_INTs (the shim's packed
 * staging). The oracle: the same reduction by MPI on the packed host copies
 * (MPI_INT, count x k), unpacked into a canaried copy of the receive buffer
 * (MPI itself packing and unpacking, through MPI_COMM_SELF). */
enum red { ALLREDUCE, ALLREDUCE_IN_PLACE, REDUCE, REDUCE_LOCAL, SCAN, EXSCAN,
           REDUCE_SCATTER_BLOCK, IALLREDUCE, REDS };
static const char *const red_name[REDS] = {"Allreduce", "Allreduce in place", "Reduce",
                                           "Reduce_local", "Scan", "Exscan",
                                           "Reduce_scatter_block", "Iallreduce"};

static void run_red(enum red k, char *s, char *r, int count, MPI_Datatype dt)
{
    MPI_Comm w = MPI_COMM_WORLD;
    MPI_Request req = MPI_REQUEST_NULL;
    switch (k) {
    case ALLREDUCE:
        MPI_OK(MPI_Allreduce(s, r, count, dt, MPI_SUM, w));
        break;
    case ALLREDUCE_IN_PLACE:
        MPI_OK(MPI_Allreduce(MPI_IN_PLACE, r, count, dt, MPI_MAX, w));
        break;
    case REDUCE:
        MPI_OK(MPI_Reduce(s, r, count, dt, MPI_SUM, nranks - 1, w));
        break;
    case REDUCE_LOCAL:
        MPI_OK(MPI_Reduce_local(s, r, count, dt, MPI_BXOR));
        break;
    case SCAN:
        MPI_OK(MPI_Scan(s, r, count, dt, MPI_SUM, w));
        break;
    case EXSCAN:
        MPI_OK(MPI_Exscan(s, r, count, dt, MPI_SUM, w));
        break;
    case REDUCE_SCATTER_BLOCK:
        MPI_OK(MPI_Reduce_scatter_block(s, r, count, dt, MPI_SUM, w));
        break;
    case IALLREDUCE:
        MPI_OK(MPI_Iallreduce(s, r, count, dt, MPI_SUM, w, &req));
        break;
    default:
        break;
    }
    MPI_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
}

/* @p n elements of @p dt at @p from packed into ints at @p to, or back. */
static void self_copy(const char *from, int n, MPI_Datatype ft, char *to, int m,
                      MPI_Datatype tt)
{
    MPI_OK(MPI_Sendrecv(from, n, ft, 0, 2, to, m, tt, 0, 2, MPI_COMM_SELF, MPI_STATUS_IGNORE));
}

static void test_reduce(void)
{
    static const int pick[] = {1, 7, 10, 11}; /* hvector, subarray C, resized: ints */
    int seed = 0;
    for (size_t p = 0; p < sizeof pick / sizeof pick[0]; p++) {
        const struct zoo *z = &zoo[pick[p]];
        int size = 0;
        MPI_OK(MPI_Type_size(z->dt, &size));
        int k1 = size / (int)sizeof(int); /* ints per element */
        for (int k = 0; k < REDS; k++) {
            int sblocks = k == REDUCE_SCATTER_BLOCK ? nranks : 1;
            struct tbuf s = tb_alloc(rank % ndev, span_of(z->dt, z->count * sblocks));
            struct tbuf r = tb_alloc((rank + 1) % ndev, span_of(z->dt, z->count));
            char *hs = malloc(s.len), *hr = malloc(r.len), *want = malloc(r.len);
            int sn = z->count * sblocks * k1, rn = z->count * k1;
            int *ps = malloc(sizeof(int) * (size_t)sn), *pr = malloc(sizeof(int) * (size_t)rn);
            seed++;
            tb_fill(&s, 150 + seed + 5 * rank, hs);
            tb_fill(&r, 210 + seed + 3 * rank, hr);
            /* MPI on the packed ints, unpacked into the canaried copy. */
            self_copy(hs + PAD, z->count * sblocks, z->dt, (char *)ps, sn, MPI_INT);
            self_copy(hr + PAD, z->count, z->dt, (char *)pr, rn, MPI_INT);
            run_red((enum red)k, (char *)ps, (char *)pr, rn, MPI_INT);
            memcpy(want, hr, r.len);
            int written = !(k == REDUCE && rank != nranks - 1) && !(k == EXSCAN && rank == 0);
            if (written)
                self_copy((char *)pr, rn, MPI_INT, want + PAD, z->count, z->dt);
            run_red((enum red)k, s.origin, r.origin, z->count, z->dt);
            EXPECT_SAME(&r, want, "%s of %s on device memory: data or canaries", red_name[k],
                        z->name);
            EXPECT_SAME(&s, hs, "%s of %s: the send buffer changed", red_name[k], z->name);
            free(hs);
            free(hr);
            free(want);
            free(ps);
            free(pr);
            tb_free(&s);
            tb_free(&r);
        }
    }
}

/* ---- Alltoallw: a datatype per peer --------------------------------------------------- */

/* Alltoallw's per-peer datatypes on device memory, staged layout-preserving:
 * the type between ranks a and b is one of a list (a + b picks it, so both
 * sides agree and each rank has a different one per peer): vector,
 * indexed, subarray, resized vector, a vector of MPI_DOUBLE_INT and plain
 * MPI_DOUBLE (one contiguous block among the others). Block q lies at a byte
 * displacement with holes before, between and after the blocks. */
enum wcoll { W_ALLTOALLW, W_IALLTOALLW, W_IN_PLACE, W_I_IN_PLACE, W_C, W_IC, WCOLLS };
static const char *const wcoll_name[WCOLLS] = {"Alltoallw",          "Ialltoallw",
                                               "Alltoallw in place", "Ialltoallw in place",
                                               "Alltoallw_c",        "Ialltoallw_c"};

struct wlay {
    int counts[VMAX_RANKS], displs[VMAX_RANKS];
    MPI_Datatype types[VMAX_RANKS];
    size_t span;
};

static void w_layout(struct wlay *l)
{
    const struct zoo plain = {"MPI_DOUBLE", MPI_DOUBLE, 3};
    const struct zoo *pick[] = {&zoo[0], &zoo[2], &zoo[7], &zoo[10], &zoo[zoo_pairs], &plain};
    size_t off = 8; /* a hole before the first block */
    for (int q = 0; q < nranks; q++) {
        const struct zoo *z = pick[(rank + q) % (int)(sizeof pick / sizeof pick[0])];
        l->counts[q] = z->count;
        l->types[q] = z->dt;
        l->displs[q] = (int)off;
        off += span_of(z->dt, z->count);
        off = ((off + 7) & ~(size_t)7) + 16; /* and one between blocks */
    }
    l->span = off;
}

static void run_w(enum wcoll k, char *s, char *r, const struct wlay *l)
{
    MPI_Comm w = MPI_COMM_WORLD;
    MPI_Request req = MPI_REQUEST_NULL;
    const int *c = l->counts, *d = l->displs;
    const MPI_Datatype *t = l->types;
    switch (k) {
    case W_ALLTOALLW:
        MPI_OK(MPI_Alltoallw(s, c, d, t, r, c, d, t, w));
        break;
    case W_IALLTOALLW:
        MPI_OK(MPI_Ialltoallw(s, c, d, t, r, c, d, t, w, &req));
        break;
    case W_IN_PLACE:
        MPI_OK(MPI_Alltoallw(MPI_IN_PLACE, NULL, NULL, NULL, r, c, d, t, w));
        break;
    case W_I_IN_PLACE:
        MPI_OK(MPI_Ialltoallw(MPI_IN_PLACE, NULL, NULL, NULL, r, c, d, t, w, &req));
        break;
#if MPI_VERSION >= 4
    case W_C:
    case W_IC: {
        MPI_Count cc[VMAX_RANKS];
        MPI_Aint cd[VMAX_RANKS];
        for (int q = 0; q < nranks; q++) {
            cc[q] = c[q];
            cd[q] = d[q];
        }
        if (k == W_C)
            MPI_OK(MPI_Alltoallw_c(s, cc, cd, t, r, cc, cd, t, w));
        else
            MPI_OK(MPI_Ialltoallw_c(s, cc, cd, t, r, cc, cd, t, w, &req));
        MPI_OK(MPI_Wait(&req, MPI_STATUS_IGNORE)); /* the arrays live until it completes */
        break;
    }
#endif
    default:
        break;
    }
    MPI_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
}

static void test_alltoallw(void)
{
    struct wlay l;
    w_layout(&l);
    /* Send and receive buffers on the two devices, and one of them on host memory. */
    static const int place[][2] = {{0, 1}, {-1, 1}, {0, -1}};
    int seed = 0;
    for (int k = 0; k < WCOLLS; k++) {
        if ((k == W_C || k == W_IC) && MPI_VERSION < 4)
            continue;
#ifdef MPICH_VERSION
        /* MPICH 4.0.2 fails this one on host memory already: MPI_ERR_TRUNCATE
         * in MPI_Wait, its in-place algorithm receiving a whole block of one
         * peer's type into another's (measured). */
        if (k == W_I_IN_PLACE)
            continue;
#endif
        for (size_t p = 0; p < sizeof place / sizeof place[0]; p++) {
            int in_place = k == W_IN_PLACE || k == W_I_IN_PLACE;
            if (in_place && p > 0)
                continue; /* one buffer, on device memory */
            int sdev = place[p][0] < 0 ? -1 : (rank + place[p][0]) % ndev;
            int rdev = place[p][1] < 0 ? -1 : (rank + place[p][1]) % ndev;
            struct tbuf s = tb_alloc(sdev, l.span), r = tb_alloc(rdev, l.span);
            char *hs = malloc(s.len), *hr = malloc(r.len);
            seed++;
            tb_fill(&s, 40 + seed + 5 * rank, hs);
            tb_fill(&r, 100 + seed + 3 * rank, hr);
            run_w((enum wcoll)k, hs + PAD, hr + PAD, &l);
            run_w((enum wcoll)k, s.origin, r.origin, &l);
            EXPECT_SAME(&r, hr, "%s (send on %d, receive on %d): data or canaries",
                        wcoll_name[k], sdev, rdev);
            EXPECT_SAME(&s, hs, "%s (send on %d, receive on %d): the send buffer changed",
                        wcoll_name[k], sdev, rdev);
            free(hs);
            free(hr);
            tb_free(&s);
            tb_free(&r);
        }
    }
}

/* ---- reductions on host memory's layout ------------------------------------------------- */

/* Reductions that the packed staging cannot run, staged layout-preserving:
 * a user-defined op on a struct {double, int} (a hole after the int), a
 * user-defined MINLOC on a vector of MPI_DOUBLE_INT, a user-defined sum on
 * a vector of doubles (which the packed staging would hand MPI_DOUBLE: the
 * op must see its own type), and predefined ops on derived types (MPI_MINLOC
 * on the vector of pairs, MPI_SUM on the vector of doubles with host memory
 * in the call: what MPI does with them on host memory, the device must get,
 * an error included). Every call runs with each buffer on device memory and
 * with one of them on host memory; the oracle is the same call on host
 * copies, byte for byte (canaries in every hole). */
struct di {
    double d;
    int i;
};

static MPI_Datatype t_di, t_pairs, t_dvec;
static _Atomic int op_wrong_type;

/* struct di at 16-byte extents: d summed, i the largest. */
static void op_di(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    if (*dt != t_di) {
        op_wrong_type++;
        return;
    }
    const struct di *a = in;
    struct di *b = inout;
    for (int e = 0; e < *len; e++) {
        b[e].d += a[e].d;
        if (a[e].i > b[e].i)
            b[e].i = a[e].i;
    }
}

/* Field j of element e of @p dt's test layout: t_pairs holds 3 pairs 32
 * bytes apart in an extent of 80, t_dvec (zoo[0]) 4 doubles 24 apart in 80. */
static char *field(char *base, MPI_Datatype dt, int e, int j)
{
    return dt == t_di ? base + e * 16 : base + e * 80 + j * (dt == t_pairs ? 32 : 24);
}

/* Apply @p one to field j of element e of @p in and @p inout (e < len,
 * j < fields) when MPI called the op with @p own, its datatype. */
static void op_fields(void *in, void *inout, const int *len, const MPI_Datatype *dt,
                      MPI_Datatype own, int fields, void (*one)(char *a, char *b))
{
    if (*dt != own) {
        op_wrong_type++;
        return;
    }
    for (int e = 0; e < *len; e++)
        for (int j = 0; j < fields; j++)
            one(field(in, own, e, j), field(inout, own, e, j));
}

static void minloc_one(char *a, char *b)
{
    struct di x, y;
    memcpy(&x.d, a, sizeof x.d);
    memcpy(&x.i, a + 8, sizeof x.i);
    memcpy(&y.d, b, sizeof y.d);
    memcpy(&y.i, b + 8, sizeof y.i);
    if (x.d < y.d || (x.d == y.d && x.i < y.i)) {
        memcpy(b, &x.d, sizeof x.d); /* the pair's 12 bytes, not its hole */
        memcpy(b + 8, &x.i, sizeof x.i);
    }
}

static void sum_one(char *a, char *b)
{
    double x, y;
    memcpy(&x, a, sizeof x);
    memcpy(&y, b, sizeof y);
    y += x;
    memcpy(b, &y, sizeof y);
}

static void op_pairs_minloc(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    op_fields(in, inout, len, dt, t_pairs, 3, minloc_one);
}

static void op_dvec_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    op_fields(in, inout, len, dt, t_dvec, 4, sum_one);
}

struct rcase {
    const char *name;
    MPI_Datatype *dt;
    MPI_Op op;
    int fields, has_int;
    int user; /* a user-defined op: MPI runs it on host memory */
};

/* Values in the type map's fields of @p n elements at @p base (small
 * integers: sums exact, MINLOC ties broken by the index). */
static void put_values(const struct rcase *rc, char *base, int n, int seed)
{
    for (int e = 0; e < n; e++)
        for (int j = 0; j < rc->fields; j++) {
            double d = (double)((seed * 7 + e * 3 + j * 5 + rank * 11) % 9) - 4.0;
            int i = rank * 1000 + e * 10 + j;
            char *at = field(base, *rc->dt, e, j);
            memcpy(at, &d, sizeof d);
            if (rc->has_int)
                memcpy(at + 8, &i, sizeof i);
        }
}

enum sred { S_ALLREDUCE, S_ALLREDUCE_IN_PLACE, S_REDUCE, S_REDUCE_SCATTER, S_SCAN, S_IALLREDUCE,
            S_REDUCE_LOCAL, SREDS };
static const char *const sred_name[SREDS] = {"Allreduce", "Allreduce in place", "Reduce",
                                             "Reduce_scatter", "Scan", "Iallreduce",
                                             "Reduce_local"};

/* Elements of the send and receive buffers of call @p k (count 2). */
static int sred_count(enum sred k, int recv)
{
    if (k != S_REDUCE_SCATTER)
        return 2;
    return recv ? rank + 1 : nranks * (nranks + 1) / 2; /* rank q gets q + 1 */
}

static int run_sred(enum sred k, char *s, char *r, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int counts[VMAX_RANKS], rc = MPI_SUCCESS;
    for (int q = 0; q < nranks; q++)
        counts[q] = q + 1;
    switch (k) {
    case S_ALLREDUCE:
        rc = MPI_Allreduce(s, r, 2, dt, op, comm);
        break;
    case S_ALLREDUCE_IN_PLACE:
        rc = MPI_Allreduce(MPI_IN_PLACE, r, 2, dt, op, comm);
        break;
    case S_REDUCE:
        rc = MPI_Reduce(s, r, 2, dt, op, nranks - 1, comm);
        break;
    case S_REDUCE_SCATTER:
        rc = MPI_Reduce_scatter(s, r, counts, dt, op, comm);
        break;
    case S_SCAN:
        rc = MPI_Scan(s, r, 2, dt, op, comm);
        break;
    case S_IALLREDUCE:
        rc = MPI_Iallreduce(s, r, 2, dt, op, comm, &req);
        break;
    case S_REDUCE_LOCAL:
        rc = MPI_Reduce_local(s, r, 2, dt, op); /* MPI_COMM_WORLD's handler */
        break;
    default:
        break;
    }
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    return rc;
}

static int error_class(int rc)
{
    int cls = rc;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    return cls;
}

static void test_reduce_span(void)
{
    MPI_Comm comm;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    MPI_OK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    {
        int bl[2] = {1, 1};
        MPI_Aint disp[2] = {offsetof(struct di, d), offsetof(struct di, i)};
        MPI_Datatype types[2] = {MPI_DOUBLE, MPI_INT}, u;
        MPI_OK(MPI_Type_create_struct(2, bl, disp, types, &u));
        MPI_OK(MPI_Type_create_resized(u, 0, sizeof(struct di), &t_di));
        MPI_OK(MPI_Type_free(&u));
        MPI_OK(MPI_Type_commit(&t_di));
    }
    t_pairs = zoo[zoo_pairs].dt;
    t_dvec = zoo[0].dt;
    MPI_Op u_di, u_minloc, u_sum;
    MPI_OK(MPI_Op_create(op_di, 1, &u_di));
    MPI_OK(MPI_Op_create(op_pairs_minloc, 1, &u_minloc));
    MPI_OK(MPI_Op_create(op_dvec_sum, 1, &u_sum));
    const struct rcase cases[] = {
        {"struct {double, int}, a user op", &t_di, u_di, 1, 1, 1},
        {"vector of MPI_DOUBLE_INT, a user MINLOC", &t_pairs, u_minloc, 3, 1, 1},
        {"vector of MPI_DOUBLE_INT, MPI_MINLOC", &t_pairs, MPI_MINLOC, 3, 1, 0},
        {"vector of double, a user sum", &t_dvec, u_sum, 4, 0, 1},
        {"vector of double, MPI_SUM", &t_dvec, MPI_SUM, 4, 0, 0},
    };
    /* Both buffers on device memory (the two devices), the send one on host, the receive one. */
    static const int place[][2] = {{0, 1}, {-1, 1}, {0, -1}};
    int seed = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const struct rcase *rc = &cases[c];
        for (int k = 0; k < SREDS; k++)
            for (size_t p = 0; p < sizeof place / sizeof place[0]; p++) {
                if (k == S_ALLREDUCE_IN_PLACE && place[p][1] < 0)
                    continue; /* one buffer: on device memory */
                /* MPI_SUM on a vector of doubles where a rank's buffers are all on
                 * device memory is staged packed (test_reduce: it runs there, where
                 * MPI refuses it on host memory): here a host send buffer on every
                 * rank. */
                if (!rc->user && *rc->dt == t_dvec && (place[p][0] >= 0 ||
                                                       k == S_ALLREDUCE_IN_PLACE))
                    continue;
                int sdev = place[p][0] < 0 ? -1 : (rank + place[p][0]) % ndev;
                int rdev = place[p][1] < 0 ? -1 : (rank + place[p][1]) % ndev;
                int sn = sred_count((enum sred)k, 0), rn = sred_count((enum sred)k, 1);
                struct tbuf s = tb_alloc(sdev, span_of(*rc->dt, sn));
                struct tbuf r = tb_alloc(rdev, span_of(*rc->dt, k == S_ALLREDUCE_IN_PLACE ? sn
                                                                                          : rn));
                char *hs = malloc(s.len), *hr = malloc(r.len);
                seed++;
                for (size_t i = 0; i < s.len; i++)
                    hs[i] = (char)pattern(20 + seed + 5 * rank, i);
                for (size_t i = 0; i < r.len; i++)
                    hr[i] = (char)pattern(80 + seed + 3 * rank, i);
                put_values(rc, hs + PAD, sn, seed);
                put_values(rc, hr + PAD, k == S_ALLREDUCE_IN_PLACE ? sn : rn, seed + 1);
                tb_load(&s, hs);
                tb_load(&r, hr);
                int want = error_class(run_sred((enum sred)k, hs + PAD, hr + PAD, *rc->dt,
                                                rc->op, comm));
                int got = error_class(run_sred((enum sred)k, s.origin, r.origin, *rc->dt,
                                               rc->op, comm));
                CHECK(!rc->user || want == MPI_SUCCESS, "%s of %s on host memory: class %d",
                      sred_name[k], rc->name, want);
                CHECK(got == want, "%s of %s (send on %d, receive on %d): class %d, on host %d",
                      sred_name[k], rc->name, sdev, rdev, got, want);
                EXPECT_SAME(&r, hr, "%s of %s (send on %d, receive on %d): data or canaries",
                            sred_name[k], rc->name, sdev, rdev);
                EXPECT_SAME(&s, hs, "%s of %s (send on %d, receive on %d): send buffer changed",
                            sred_name[k], rc->name, sdev, rdev);
                free(hs);
                free(hr);
                tb_free(&s);
                tb_free(&r);
            }
    }
    CHECK(op_wrong_type == 0, "a user op was called with another datatype than its own (%d)",
          (int)op_wrong_type);
    MPI_OK(MPI_Op_free(&u_di));
    MPI_OK(MPI_Op_free(&u_minloc));
    MPI_OK(MPI_Op_free(&u_sum));
    MPI_OK(MPI_Type_free(&t_di));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    MPI_Comm_free(&comm);
}

/* ---- threads --------------------------------------------------------------------------- */

/* MPI_THREAD_MULTIPLE: threads exchanging at once, each with a shared zoo
 * type (one cached layout, looked up concurrently) and types of its own
 * made and freed while the others send (the cache's inserts and drops). */
static void *thread_main(void *arg)
{
    int t = (int)(intptr_t)arg;
    TD_CHECK(td.cuCtxSetCurrent(primary[t % ndev]));
    for (int round = 0; round < 4; round++) {
        int tag = 6000 + 100 * t + 10 * round;
        MPI_Datatype own;
        MPI_OK(MPI_Type_vector(3 + t, 1 + round % 2, 3 + t + round, MPI_INT, &own));
        MPI_OK(MPI_Type_commit(&own));
        ring("threads: own type", round % 2 ? NONBLOCKING : BLOCKING, own, 2, own, 2, t % ndev,
             (t + 1) % ndev, tag);
        ring("threads: shared type", SENDRECV, zoo[0].dt, zoo[0].count, zoo[0].dt, zoo[0].count,
             (t + round) % ndev, t % ndev, tag + 1);
        MPI_OK(MPI_Type_free(&own));
    }
    return NULL;
}

static void test_threads(void)
{
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            printf("types_device: MPI_THREAD_MULTIPLE not provided (%d): thread test skipped\n",
                   provided);
        return;
    }
    pthread_t th[4];
    for (int t = 0; t < 4; t++)
        pthread_create(&th[t], NULL, thread_main, (void *)(intptr_t)t);
    for (int t = 0; t < 4; t++)
        pthread_join(th[t], NULL);
}

/* ---- refused: a clear MPI_ERR_TYPE, nothing sent ------------------------------------------ */

static void expect_refusal(int rc, const char *call, const char *words)
{
    int cls;
    char text[MPI_MAX_ERROR_STRING];
    int ok = mpi_prog_error_is("types_device", rank, rc, MPI_ERR_TYPE, call, &cls, text);
    if (ok && mpi_prog_added_strings_kept("types_device", rank))
        ok = strstr(text, words) != NULL;
    CHECK(ok, "%s: rc %d class %d, message '%s' should name %s and say '%s'", call, rc, cls, text,
          call, words);
}

static void test_refused(void)
{
    MPI_Comm comm;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    MPI_OK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    const struct zoo *v = &zoo[0];
    size_t span = span_of(v->dt, v->count * nranks);
    struct tbuf s = tb_alloc(0, span), r = tb_alloc(1 % ndev, span);
    char *hs = malloc(s.len), *hr = malloc(r.len);
    tb_fill(&s, 3, hs);
    tb_fill(&r, 4, hr);
    /* (Reductions mixing host and device memory, several basic types, pair
     * types, per-rank counts, and Alltoallw's per-peer types are staged:
     * test_reduce_span, test_alltoallw.) A v collective's blocks of a type
     * whose extent is below its size (elements overlapping) on device
     * memory: refused on every rank (each has such a receive buffer). */
    int *counts = malloc(sizeof(int) * (size_t)nranks);
    int *displs = malloc(sizeof(int) * (size_t)nranks);
    {
        MPI_Datatype pair, narrow;
        MPI_OK(MPI_Type_vector(2, 1, 2, MPI_INT, &pair));
        MPI_OK(MPI_Type_create_resized(pair, 0, sizeof(int), &narrow));
        MPI_OK(MPI_Type_free(&pair));
        MPI_OK(MPI_Type_commit(&narrow));
        for (int q = 0; q < nranks; q++) {
            counts[q] = 1;
            displs[q] = 4 * q;
        }
        static int two[2];
        expect_refusal(MPI_Allgatherv(two, 2, MPI_INT, r.origin, counts, displs, narrow, comm),
                       "MPI_Allgatherv", "whose extent is below its size");
        MPI_OK(MPI_Type_free(&narrow));
    }
    MPI_Datatype t;
    int gsizes[1] = {64}, distribs[1] = {MPI_DISTRIBUTE_CYCLIC}, dargs[1] = {2}, psizes[1] = {2};
    MPI_OK(MPI_Type_create_darray(2, rank % 2, 1, gsizes, distribs, dargs, psizes, MPI_ORDER_C,
                                  MPI_CHAR, &t));
    MPI_OK(MPI_Type_commit(&t));
    expect_refusal(MPI_Send(s.origin, 1, t, to_rank(), 5000, comm), "MPI_Send", "darray");
    MPI_OK(MPI_Type_free(&t));
    EXPECT_SAME(&s, hs, "a refused call wrote a device buffer");
    EXPECT_SAME(&r, hr, "a refused call wrote a device buffer");
    free(counts);
    free(displs);
    free(hs);
    free(hr);
    tb_free(&s);
    tb_free(&r);
    MPI_Comm_free(&comm);
}

int main(int argc, char **argv)
{
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    dev_prog_init("types_device");
    zoo_make();
    const char *only = argc > 1 ? argv[1] : "all";
#define RUN(name) MPI_PROG_RUN(only, name)
    RUN(zoo);
    RUN(partial);
    RUN(cache);
    RUN(coll);
    RUN(vcoll);
    RUN(vblocks);
    RUN(reduce);
    RUN(alltoallw);
    RUN(reduce_span);
    RUN(threads);
    RUN(refused);
    for (int z = 0; z < nzoo; z++)
        MPI_Type_free(&zoo[z].dt);
    int total = 0, mine = failures;
    MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("types_device: rank %d: %s (%d checks, %d failed here, %d in all)\n", rank,
           total == 0 ? "PASS" : "FAILED", (int)checks, mine, total);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
