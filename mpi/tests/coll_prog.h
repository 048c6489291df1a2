/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the collective tests (coll_device.c, icoll_device.c) share: buffers
 * on device 0, device 1 or the host with guard bytes, read back whole and
 * compared with what they must hold; the values each rank contributes and
 * their reductions; the blocks of the v calls' buffers and the canary of the
 * gaps between them; the start (MPI, the test driver, both devices' primary
 * contexts) and the end (the PASS/FAILED line, the exit status). Define
 * COLL_PROG (the program's name, a string) before including it.
 */
#ifndef CUCOPY_MPI_COLL_PROG_H
#define CUCOPY_MPI_COLL_PROG_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev_prog.h"
#include "mpi_prog.h"

#define COLL_PROG_UNUSED __attribute__((unused))

static int rank, nranks;
static int failures, checks;

#define CHECK(cond, ...) MPI_PROG_CHECK(COLL_PROG, rank, checks, failures, cond, __VA_ARGS__)

#define MPI_OK(call) MPI_OK_OR_ABORT(COLL_PROG, rank, call)

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

static inline void put(struct buf *b)
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
static inline struct buf mk(int dev, size_t bytes)
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

static inline void drop(struct buf *b)
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
static inline void *want_at(struct buf *b, size_t off)
{
    return b->want + GUARD + off;
}

/* The device (or host) bytes of the whole buffer, guards included, compared
 * with b->want: the offset of the first that differs, or bytes + 2 GUARD;
 * *got its value. */
static inline size_t first_bad(struct buf *b, unsigned char *got)
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
    *got = bad < all ? h[bad] : 0;
    free(h);
    return bad;
}

/* Compare the whole buffer, guards included, with b->want. */
static inline void verify(struct buf *b, const char *what)
{
    size_t all = b->bytes + 2 * GUARD;
    unsigned char got = 0;
    size_t bad = first_bad(b, &got);
    CHECK(bad == all, "%s (dev %d, %zu B): byte %zd (offset from the buffer) is 0x%02x, want 0x%02x",
          what, b->dev, b->bytes, (ptrdiff_t)bad - GUARD, got, bad < all ? b->want[bad] : 0);
}

/* ---- values ----------------------------------------------------------------------- */

/* Added to every rank number by ival/dval: the MPI_IN_PLACE reductions use
 * other values than the send buffers (the shim's staging memory is reused
 * from its pool: a missing copy-in must not find the right bytes there). */
static int vbase COLL_PROG_UNUSED, in_place_calls COLL_PROG_UNUSED;

/* Element i of rank r's contribution. */
static inline int ival(int r, size_t i)
{
    return (int)(((r + vbase) * 7919 + i * 31) % 100003) - 50000;
}

static inline double dval(int r, size_t i)
{
    return (double)ival(r, i) * 0.25 + r;
}

static inline size_t esize(MPI_Datatype t)
{
    return t == MPI_INT ? sizeof(int) : t == MPI_FLOAT ? sizeof(float) : sizeof(double);
}

/* The user-defined op of the reduction tests (MPI_Op_create, commutative, on
 * doubles): of two values the one of larger magnitude, the larger of two of
 * one magnitude (a maximum in a total order: any order of application gives
 * the same bits). MPI_OP_NULL until a test creates it. */
static MPI_Op absmax_op COLL_PROG_UNUSED = MPI_OP_NULL;

static inline double absmax(double a, double b)
{
    double fa = a < 0 ? -a : a, fb = b < 0 ? -b : b;
    return fa > fb || (fa == fb && a > b) ? a : b;
}

static void COLL_PROG_UNUSED absmax_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++) {
        double a, b;
        memcpy(&a, (char *)in + i * sizeof a, sizeof a);
        memcpy(&b, (char *)inout + i * sizeof b, sizeof b);
        b = absmax(a, b);
        memcpy((char *)inout + i * sizeof b, &b, sizeof b);
    }
}

/* Element i of rank r's contribution to a reduction by @p op on type t (as a
 * double: every value is exact in t, and so is every result): ival/dval for
 * the sums, extremes, bitwise ops and the user op; for MPI_PROD factors of
 * +-1, +-2 and 3 (int) or 0.5 (float, double); for the logical ops 0 to 4.
 * A vbase other than 0 shifts the short patterns too. */
static inline double elem(MPI_Datatype t, MPI_Op op, int r, size_t i)
{
    static const double iprod[5] = {1, -1, 2, -2, 3}, fprod[5] = {1, -1, 2, -2, 0.5};
    size_t k = (i * 3 + (size_t)r * 2 + (size_t)(vbase ? 1 + vbase % 4 : 0)) % 5;
    if (op == MPI_PROD)
        return t == MPI_INT ? iprod[k] : fprod[k];
    if (op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR)
        return (double)k;
    return t == MPI_INT ? ival(r, i) : t == MPI_FLOAT ? (float)dval(r, i) : dval(r, i);
}

/* Store v as an element of type t at dst. */
static inline void put_elem(void *dst, MPI_Datatype t, double v)
{
    if (t == MPI_INT) {
        int x = (int)v;
        memcpy(dst, &x, sizeof x);
    } else if (t == MPI_FLOAT) {
        float x = (float)v;
        memcpy(dst, &x, sizeof x);
    } else {
        memcpy(dst, &v, sizeof v);
    }
}

/* a op b, computed in type t (ints: the bitwise ops on their bits, the
 * logical ones give 0 or 1, as MPI does). */
static inline double combine(MPI_Datatype t, MPI_Op op, double a, double b)
{
    if (t == MPI_INT) {
        int x = (int)a, y = (int)b;
        int v = op == MPI_SUM    ? x + y
                : op == MPI_PROD ? x * y
                : op == MPI_MAX  ? (x > y ? x : y)
                : op == MPI_MIN  ? (x < y ? x : y)
                : op == MPI_LAND ? (x && y)
                : op == MPI_LOR  ? (x || y)
                : op == MPI_LXOR ? (!x != !y)
                : op == MPI_BAND ? (x & y)
                : op == MPI_BOR  ? (x | y)
                                 : (x ^ y);
        return v;
    }
    if (op == absmax_op)
        return absmax(a, b);
    if (t == MPI_FLOAT) {
        float x = (float)a, y = (float)b;
        return op == MPI_SUM    ? x + y
               : op == MPI_PROD ? x * y
               : op == MPI_MAX  ? (x > y ? x : y)
                                : (x < y ? x : y);
    }
    return op == MPI_SUM    ? a + b
           : op == MPI_PROD ? a * b
           : op == MPI_MAX  ? (a > b ? a : b)
                            : (a < b ? a : b);
}

/* Write rank r's n elements of a reduction by op on type t at dst. */
static inline void fill_op(void *dst, MPI_Datatype t, MPI_Op op, int r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        put_elem((char *)dst + i * esize(t), t, elem(t, op, r, i));
}

/* Write rank r's n elements of type t (int or double) at dst. */
static inline void fill(void *dst, MPI_Datatype t, int r, size_t n)
{
    fill_op(dst, t, MPI_SUM, r, n);
}

/* The reduction (op) over ranks [0, upto) of element i (offset: elements of
 * the contribution skipped, for Reduce_scatter_block), written at dst. */
static inline void reduced(void *dst, MPI_Datatype t, MPI_Op op, int upto, size_t off, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double v = elem(t, op, 0, off + i);
        for (int r = 1; r < upto; r++)
            v = combine(t, op, v, elem(t, op, r, off + i));
        put_elem((char *)dst + i * esize(t), t, v);
    }
}

/* Buffer placements: {send, recv} devices. */
static const int places[][2] COLL_PROG_UNUSED = {{0, 1}, {1, 0}, {1, 1}, {HOST, 1}, {0, HOST}};
#define NPLACES (sizeof places / sizeof places[0])

static inline const char *tname(MPI_Datatype t)
{
    return t == MPI_INT ? "int" : t == MPI_FLOAT ? "float" : "double";
}

/* The reductions the tests run: the predefined ops that apply to each type
 * (the logical and bitwise ones to int only) and absmax_op on double. */
static const MPI_Datatype red_types[] COLL_PROG_UNUSED = {MPI_INT, MPI_FLOAT, MPI_DOUBLE};
#define NRED_TYPES 3

static inline int red_ops(MPI_Datatype t, MPI_Op ops[10])
{
    int n = 0;
    ops[n++] = MPI_SUM;
    ops[n++] = MPI_MAX;
    ops[n++] = MPI_PROD;
    ops[n++] = MPI_MIN;
    if (t == MPI_INT) {
        ops[n++] = MPI_LAND;
        ops[n++] = MPI_LOR;
        ops[n++] = MPI_LXOR;
        ops[n++] = MPI_BAND;
        ops[n++] = MPI_BOR;
        ops[n++] = MPI_BXOR;
    } else if (t == MPI_DOUBLE) {
        if (absmax_op == MPI_OP_NULL)
            MPI_OK(MPI_Op_create(absmax_fn, 1, &absmax_op));
        ops[n++] = absmax_op;
    }
    return n;
}

/* 1 when op number @p oi of red_ops(t) runs in every placement: MPI_SUM and
 * MPI_MAX on int and double; every other (type, op) runs in one, the next
 * placement each time (run time). */
static inline int red_everywhere(MPI_Datatype t, int oi)
{
    return t != MPI_FLOAT && oi < 2;
}

static inline const char *oname(MPI_Op op)
{
    return op == MPI_SUM    ? "sum"
           : op == MPI_MAX  ? "max"
           : op == MPI_PROD ? "prod"
           : op == MPI_MIN  ? "min"
           : op == MPI_LAND ? "land"
           : op == MPI_LOR  ? "lor"
           : op == MPI_LXOR ? "lxor"
           : op == MPI_BAND ? "band"
           : op == MPI_BOR  ? "bor"
           : op == MPI_BXOR ? "bxor"
                            : "user op absmax";
}

/* ---- the v and w forms: blocks of a buffer ------------------------------------------ */

#define VMAX 64 /* the most ranks the v tests run */

/* Block q of a buffer: counts[q] elements at displs[q] (in elements of the
 * call's type, or in bytes for Alltoallw); ccounts, cdispls: the same for the
 * large-count _c calls. size: the whole buffer, in the displacements' unit. */
struct vlay {
    int counts[VMAX], displs[VMAX];
#if MPI_VERSION >= 4
    MPI_Count ccounts[VMAX];
    MPI_Aint cdispls[VMAX];
#endif
    size_t size;
};

/* Copy counts and displs into the _c calls' arrays. */
static inline void vlay_widen(struct vlay *l)
{
#if MPI_VERSION >= 4
    for (int q = 0; q < nranks; q++) {
        l->ccounts[q] = l->counts[q];
        l->cdispls[q] = l->displs[q];
    }
#else
    (void)l;
#endif
}

/* Place the nranks blocks of l->counts (of unit[q] bytes per count for
 * Alltoallw's byte displacements, else 1) in the reverse order of the ranks
 * when @p rev, else in their order, with a gap before each block (3 + q,
 * the first 5) and after the last. */
static inline void vlay_place(struct vlay *l, const size_t unit[], int rev)
{
    size_t off = 5;
    for (int k = 0; k < nranks; k++) {
        int q = rev ? nranks - 1 - k : k;
        l->displs[q] = (int)off;
        off += (size_t)l->counts[q] * (unit ? unit[q] : 1) + 3 + (size_t)q;
    }
    l->size = off + 2;
    vlay_widen(l);
}

/* Block q of v buffer b (of ints): rank seed(q)'s values, in b->want. */
#define VFILL(b, L, seed_of_q)                                                             \
    for (int q = 0; q < nranks; q++)                                                       \
    fill(want_at(b, (size_t)(L).displs[q] * sizeof(int)), MPI_INT, (seed_of_q),            \
         (size_t)(L).counts[q])

/* Alltoallw: the pair a -> b uses int, double or a contiguous type of three
 * ints (a dense derived type) by (a + b) % 3, byte displacements with gaps
 * of odd sizes; the data is a byte pattern of the pair. */
static MPI_Datatype tri COLL_PROG_UNUSED; /* made and freed by each test */

static inline MPI_Datatype w_type(int a, int b)
{
    int k = (a + b) % 3;
    return k == 0 ? MPI_INT : k == 1 ? MPI_DOUBLE : tri;
}

static inline size_t w_size(int a, int b)
{
    int k = (a + b) % 3;
    return k == 0 ? sizeof(int) : k == 1 ? sizeof(double) : 3 * sizeof(int);
}

static inline void w_fill(unsigned char *dst, int a, int b, int salt, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = (unsigned char)(a * 31 + b * 17 + (int)i * 13 + salt);
}

static unsigned canary_seed COLL_PROG_UNUSED;

/* Fill the whole buffer (guards included) with a canary that differs call by
 * call (the shim's staging memory is reused: stale bytes must not match),
 * on the device too. Gaps between blocks must keep it. */
static inline void canary(struct buf *b)
{
    canary_seed++;
    for (size_t i = 0; i < b->bytes + 2 * GUARD; i++)
        b->want[i] = (unsigned char)(0x5A ^ (i * 7) ^ (canary_seed * 29));
    put(b);
}

/* ---- start and end ---------------------------------------------------------------- */

/* MPI_Init, the test driver, up to two devices' primary contexts (device 0
 * current). The test to run: the first argument, "all" without one. */
static inline const char *coll_prog_init(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    dev_prog_init(COLL_PROG);
    return *argc > 1 ? (*argv)[1] : "all";
}

/* The PASS / FAILED line, MPI_Finalize; the exit status (1: a rank failed). */
static inline int coll_prog_end(void)
{
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (failures == 0)
        printf("%s: rank %d: PASS (%d checks)\n", COLL_PROG, rank, checks);
    else
        printf("%s: rank %d: FAILED (%d of %d checks)\n", COLL_PROG, rank, failures, checks);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}

/* An intercommunicator of the even ranks against the odd ones (errors
 * return) in *inter, the local group in *half (free both); *remote_sum: what
 * an MPI_SUM over it of rank + 1 gives this rank (the remote group's sum). */
static inline void coll_prog_intercomm(MPI_Comm *half, MPI_Comm *inter, int tag, int *remote_sum)
{
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, half));
    MPI_OK(MPI_Intercomm_create(*half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, tag, inter));
    MPI_OK(MPI_Comm_set_errhandler(*inter, MPI_ERRORS_RETURN));
    *remote_sum = 0;
    for (int q = 0; q < nranks; q++)
        *remote_sum += q % 2 != rank % 2 ? q + 1 : 0;
}

/* @p rc must be an error of class @p want_class whose message names @p call. */
static inline void expect_error(int rc, int want_class, const char *call, const char *what)
{
    int cls;
    char text[MPI_MAX_ERROR_STRING];
    CHECK(mpi_prog_error_is(COLL_PROG, rank, rc, want_class, call, &cls, text),
          "%s: rc %d class %d (want %d), message '%s' should name %s", what, rc, cls, want_class,
          text, call);
}

#endif
