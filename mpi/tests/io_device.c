/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MPI-IO and RMA with device buffers, run under LD_PRELOAD=libcucopy_mpi.so
 * (mpirun -n 2 and -n 3, two devices per rank):
 *
 *   io_device DIR [negative]
 *
 * DIR is a directory of this run's own (created, emptied, and removed at
 * the end: a file MPI left behind fails the run); the file is DIR/io.dat.
 * Device memory comes from the driver directly (testdrv; the fake's faults
 * on a CPU access); this program never links or calls cucopy.
 *
 * Every rank writes a pattern from a device buffer at its own place in the
 * file (MPI_File_write_at; write_at_all; write and write_all through the
 * individual file pointer of a strided file view; write_ordered;
 * write_shared) and reads a neighbour's back into another device buffer (of
 * the other device) with the matching read; every buffer is read back from
 * the device with 64 guard bytes each side, the whole file from the host.
 * Short reads at the end of the file (every read form, MPI_BYTE and MPI_INT
 * with a partial last element, and past the end) must copy back exactly
 * the bytes read: the rest of the device buffer keeps its canary (the
 * collective reads, whose count both MPIs overstate there: the device must
 * end as host memory does). Statuses are filled with garbage before each
 * read (MPI sets only their byte count).
 * Refused, with the class and the call's name checked: a vector type on
 * device memory (MPI_ERR_TYPE), the nonblocking and split-collective IO on
 * device memory, MPI_Win_create / MPI_Win_attach of device memory, and
 * device buffers of MPI_Put, Get, Accumulate, Get_accumulate, Rput, Rget,
 * Raccumulate, Rget_accumulate, Fetch_and_op and Compare_and_swap
 * (MPI_ERR_UNSUPPORTED_OPERATION), each through the error handler MPI
 * names (a counting one on the file, the window, the communicator); the
 * same calls on host memory pass. On an MPI-4 library the large-count _c
 * forms run too (a line counts them).
 *
 * "negative" (run without the shim): MPI_File_write_at of a device buffer
 * must not put the data in the file (Open MPI 4.1 returns MPI_SUCCESS with
 * 0 bytes written, MPICH 4.0 an MPI_ERR_IO "Bad address": measured), which
 * shows the device memory is not readable by MPI and the shim does the work.
 *
 * Prints "io_device: rank R: PASS" (negative: "negative control holds") or
 * FAILED lines; exit status 1 on a failure.
 */
#include <dirent.h>
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dev_prog.h"
#include "mpi_prog.h"

static int rank, nranks;
static int failures, checks;
static int lc_calls; /* large-count calls made */

#define CHECK(cond, ...) MPI_PROG_CHECK("io_device", rank, checks, failures, cond, __VA_ARGS__)
#define MPI_OK(call) MPI_OK_OR_ABORT("io_device", rank, call)

/* ---- device buffers with guards ------------------------------------------------ */

#define GUARD 64
#define OLD 0xEE
#define HOST (-1)

struct dbuf {
    int dev;             /* device ordinal, or HOST */
    char *base;          /* GUARD + bytes + GUARD */
    char *p;             /* what MPI gets */
    size_t bytes;
    unsigned char *want; /* what base must hold */
};

/* base <- want (and wait for it: docs/mpi.md, Streams). */
static void dbuf_store(struct dbuf *b)
{
    size_t all = b->bytes + 2 * GUARD;
    if (b->dev == HOST) {
        memcpy(b->base, b->want, all);
        return;
    }
    push(b->dev);
    TD_CHECK(td.cuMemcpyHtoD((cdDevicePtr)(uintptr_t)b->base, b->want, all));
    TD_CHECK(td.cuCtxSynchronize());
    pop();
}

/* @p bytes on @p dev: guards OLD, the body @p body. */
static struct dbuf dbuf_new(int dev, size_t bytes, unsigned char body)
{
    struct dbuf b = {.dev = dev, .bytes = bytes};
    size_t all = bytes + 2 * GUARD;
    b.want = malloc(all);
    memset(b.want, OLD, all);
    memset(b.want + GUARD, body, bytes);
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
    dbuf_store(&b);
    return b;
}

static void dbuf_free(struct dbuf *b)
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

/* The whole buffer, guards included, equals want. */
static void dbuf_check(const struct dbuf *b, const char *what)
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
    size_t bad = 0;
    while (bad < all && h[bad] == b->want[bad])
        bad++;
    CHECK(bad == all, "%s (dev %d, %zu B): byte %td of the buffer is 0x%02x, want 0x%02x", what,
          b->dev, b->bytes, (ptrdiff_t)bad - GUARD, bad < all ? h[bad] : 0,
          bad < all ? b->want[bad] : 0);
    free(h);
}

/* ---- data --------------------------------------------------------------------------- */

static unsigned char pat(unsigned seed, size_t i)
{
    return (unsigned char)(i * 167u + (i >> 9) * 29u + seed * 101u + 7u);
}

static void fill(unsigned char *dst, unsigned seed, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = pat(seed, i);
}

/* The device of rank r's write buffers, and of its read buffers (the other one). */
static int wdev(void)
{
    return rank % ndev;
}

static int rdev(void)
{
    return (rank + 1) % ndev;
}

/* A status full of garbage, as an uninitialized one on the stack. */
static void garbage(MPI_Status *st)
{
    memset(st, 0xA5, sizeof *st);
}

static long long status_bytes(const MPI_Status *st)
{
    MPI_Count n = -1;
    MPI_Get_elements_x(st, MPI_BYTE, &n);
    return (long long)n;
}

/* MPI_File_sync, barrier, sync: the others' writes are visible (MPI 14.6.10). */
static void settle(MPI_File fh)
{
    MPI_OK(MPI_File_sync(fh));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_File_sync(fh));
}

/* ---- the blocking calls, by kind, in their int or (lc) large-count form ------------ */

enum kind { AT, AT_ALL, IND, IND_ALL, KINDS };
static const char *const rd_name[KINDS] = {"read_at", "read_at_all", "read", "read_all"};
static const char *const wr_name[KINDS] = {"write_at", "write_at_all", "write", "write_all"};

/* The call of kind @p k: MPI_File_<OP>_at, _at_all, <OP>, <OP>_all (SFX: _c
 * for the large-count forms). */
#define IO_KIND(OP, SFX, k, fh, off, buf, n, t, st)                       \
    ((k) == AT       ? MPI_File_##OP##_at##SFX(fh, off, buf, n, t, st)     \
     : (k) == AT_ALL ? MPI_File_##OP##_at_all##SFX(fh, off, buf, n, t, st) \
     : (k) == IND    ? MPI_File_##OP##SFX(fh, buf, n, t, st)               \
                     : MPI_File_##OP##_all##SFX(fh, buf, n, t, st))

/* A read (or, @p is_write, a write) of kind @p k; IND and IND_ALL move the
 * individual file pointer to @p off first. */
static int io(int is_write, int k, int lc, MPI_File fh, MPI_Offset off, void *buf, int n,
              MPI_Datatype t, MPI_Status *st)
{
    if (k >= IND)
        MPI_OK(MPI_File_seek(fh, off, MPI_SEEK_SET));
#if MPI_VERSION >= 4
    if (lc && ++lc_calls) {
        MPI_Count c = n;
        return is_write ? IO_KIND(write, _c, k, fh, off, buf, c, t, st)
                        : IO_KIND(read, _c, k, fh, off, buf, c, t, st);
    }
#endif
    (void)lc;
    return is_write ? IO_KIND(write, , k, fh, off, buf, n, t, st)
                    : IO_KIND(read, , k, fh, off, buf, n, t, st);
}

static int rd(int k, int lc, MPI_File fh, MPI_Offset off, void *buf, int n, MPI_Datatype t,
              MPI_Status *st)
{
    return io(0, k, lc, fh, off, buf, n, t, st);
}

static int wr(int k, int lc, MPI_File fh, MPI_Offset off, const void *buf, int n,
              MPI_Datatype t, MPI_Status *st)
{
    return io(1, k, lc, fh, off, (void *)buf, n, t, st);
}

#if MPI_VERSION >= 4
#define LC_FORMS 2
#else
#define LC_FORMS 1
#endif

/* ---- regions written by every rank, read back by its neighbour --------------------- */

/* Region 0: write_at / read_at, C0 bytes per rank. Region 1: write_at_all /
 * read_at_all, C1 ints per rank. Region 2: a file view of K blocks of B ints
 * per rank, interleaved rank by rank; its first half written with
 * MPI_File_write and read with MPI_File_read, the second with the _all forms. */
#define C0 41083
#define C1 5003
#define K 16
#define B 256

static MPI_Offset r1(void)
{
    return (MPI_Offset)nranks * C0;
}

static MPI_Offset r2(void)
{
    return r1() + (MPI_Offset)nranks * C1 * 4;
}

static MPI_Offset r2_end(void)
{
    return r2() + (MPI_Offset)nranks * K * B * 4;
}

/* What the file holds after the regions of pass @p seed (all ranks' data). */
static unsigned char *file_image(unsigned seed)
{
    unsigned char *img = malloc((size_t)r2_end());
    for (int q = 0; q < nranks; q++) {
        fill(img + (size_t)q * C0, seed + q, C0);
        fill(img + r1() + (size_t)q * C1 * 4, seed + 10 + q, (size_t)C1 * 4);
        unsigned char *v = malloc((size_t)K * B * 4);
        fill(v, seed + 20 + q, (size_t)K * B * 4);
        for (int j = 0; j < K; j++)
            memcpy(img + r2() + ((size_t)j * nranks + q) * B * 4, v + (size_t)j * B * 4,
                   (size_t)B * 4);
        free(v);
    }
    return img;
}

/* One write from a device buffer and the neighbour's read into another. */
static void write_region(int k, int lc, MPI_File fh, MPI_Offset off, MPI_Datatype t, int n,
                         unsigned seed, struct dbuf *w)
{
    MPI_Status st;
    garbage(&st);
    int tsz = 0;
    MPI_Type_size(t, &tsz);
    fill(w->want + GUARD, seed, (size_t)n * tsz);
    dbuf_store(w);
    int rc = wr(k, lc, fh, off, w->p, n, t, &st);
    CHECK(rc == MPI_SUCCESS && status_bytes(&st) == (long long)n * tsz,
          "%s%s from dev %d: rc %d, %lld bytes written of %d", wr_name[k], lc ? "_c" : "", w->dev,
          rc, status_bytes(&st), n * tsz);
    dbuf_check(w, "a written buffer");
}

static void read_region(int k, int lc, MPI_File fh, MPI_Offset off, MPI_Datatype t, int n,
                        unsigned seed, struct dbuf *r, int ignore_status)
{
    MPI_Status st;
    garbage(&st);
    int tsz = 0;
    MPI_Type_size(t, &tsz);
    size_t bytes = (size_t)n * tsz;
    memset(r->want + GUARD, 0x5C, r->bytes);
    dbuf_store(r);
    fill(r->want + GUARD, seed, bytes);
    int rc = rd(k, lc, fh, off, r->p, n, t, ignore_status ? MPI_STATUS_IGNORE : &st);
    CHECK(rc == MPI_SUCCESS && (ignore_status || status_bytes(&st) == (long long)bytes),
          "%s%s into dev %d: rc %d, %lld bytes read of %zu", rd_name[k], lc ? "_c" : "", r->dev,
          rc, ignore_status ? -1 : status_bytes(&st), bytes);
    char what[96];
    snprintf(what, sizeof what, "MPI_File_%s%s into device memory", rd_name[k], lc ? "_c" : "");
    dbuf_check(r, what);
}

/* Region 2's K x B ints at @p buf through the view set: the first half with
 * MPI_File_read/write at the individual pointer, the second with the _all form. */
static void view_halves(int is_write, int lc, MPI_File fh, char *buf)
{
    int half = K / 2 * B;
    for (int k = IND; k <= IND_ALL; k++) {
        MPI_Status st;
        garbage(&st);
        int rc = io(is_write, k, lc, fh, (k - IND) * half, buf + (size_t)(k - IND) * half * 4,
                    half, MPI_INT, &st);
        CHECK(rc == MPI_SUCCESS && status_bytes(&st) == (long long)half * 4,
              "%s through a file view: rc %d, %lld bytes", is_write ? wr_name[k] : rd_name[k],
              rc, status_bytes(&st));
    }
}

static void test_regions(MPI_File fh, int lc)
{
    unsigned seed = 10 + 100 * (unsigned)lc;
    int next = (rank + 1) % nranks;
    struct dbuf w = dbuf_new(wdev(), (size_t)C0 + 3, OLD);
    struct dbuf r = dbuf_new(rdev(), (size_t)C0 + 3, OLD);

    /* Region 0: at offsets; the neighbour's read with MPI_STATUS_IGNORE on rank 0. */
    write_region(AT, lc, fh, (MPI_Offset)rank * C0, MPI_BYTE, C0, seed + rank, &w);
    settle(fh);
    read_region(AT, lc, fh, (MPI_Offset)next * C0, MPI_BYTE, C0, seed + next, &r, rank == 0);

    /* Region 1: collective, in ints. */
    write_region(AT_ALL, lc, fh, r1() + (MPI_Offset)rank * C1 * 4, MPI_INT, C1, seed + 10 + rank,
                 &w);
    settle(fh);
    read_region(AT_ALL, lc, fh, r1() + (MPI_Offset)next * C1 * 4, MPI_INT, C1, seed + 10 + next,
                &r, 0);

    /* Region 2: this rank's blocks through a strided view, the individual
     * file pointer (offsets in ints of the view). */
    MPI_Datatype ft;
    MPI_OK(MPI_Type_vector(K, B, nranks * B, MPI_INT, &ft));
    MPI_OK(MPI_Type_commit(&ft));
    struct dbuf wv = dbuf_new(wdev(), (size_t)K * B * 4, OLD);
    fill(wv.want + GUARD, seed + 20 + rank, wv.bytes);
    dbuf_store(&wv);
    MPI_OK(MPI_File_set_view(fh, r2() + (MPI_Offset)rank * B * 4, MPI_INT, ft, "native",
                             MPI_INFO_NULL));
    view_halves(1, lc, fh, wv.p);
    settle(fh);
    /* The neighbour's view: its blocks, in order. */
    MPI_OK(MPI_File_set_view(fh, r2() + (MPI_Offset)next * B * 4, MPI_INT, ft, "native",
                             MPI_INFO_NULL));
    struct dbuf rv = dbuf_new(rdev(), (size_t)K * B * 4, 0x5C);
    fill(rv.want + GUARD, seed + 20 + next, rv.bytes);
    view_halves(0, lc, fh, rv.p);
    dbuf_check(&rv, "MPI_File_read + read_all through a file view into device memory");
    MPI_OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    MPI_OK(MPI_Type_free(&ft));

    /* The whole file from the host (host buffers pass through). */
    MPI_Offset size = 0;
    MPI_OK(MPI_File_get_size(fh, &size));
    CHECK(size == r2_end(), "file size %lld, want %lld", (long long)size, (long long)r2_end());
    unsigned char *img = file_image(seed), *got = malloc((size_t)r2_end());
    MPI_Status st;
    MPI_OK(MPI_File_read_at(fh, 0, got, (int)r2_end(), MPI_BYTE, &st));
    size_t bad = 0;
    while (bad < (size_t)r2_end() && got[bad] == img[bad])
        bad++;
    CHECK(bad == (size_t)r2_end(), "the file at byte %zu: 0x%02x, want 0x%02x", bad,
          bad < (size_t)r2_end() ? got[bad] : 0, bad < (size_t)r2_end() ? img[bad] : 0);
    free(got);
    free(img);
    dbuf_free(&w);
    dbuf_free(&r);
    dbuf_free(&wv);
    dbuf_free(&rv);
}

/* ---- short reads at the end of the file --------------------------------------------- */

/* Every read form asks for more than is left (MPI_BYTE; MPI_INT with a
 * partial last element; from past the end). The reads at an offset or the
 * individual pointer report the bytes read, and only those reach the
 * device: the rest keeps a canary. The collective ones report the whole
 * count at the end of the file in both MPIs (Open MPI's read_all writes
 * only the bytes there were, MPICH's write zeros past the end: measured):
 * the device must end exactly as a host buffer does with the same read,
 * and its status say the same. Run after test_regions(@p lc). */
static void test_short_reads(MPI_File fh, int lc)
{
    unsigned char *img = file_image(10 + 100 * (unsigned)lc);
    MPI_Offset end = r2_end();
    unsigned char canary = 0x31;
    for (int k = AT; k < KINDS; k++) {
        for (int form = 0; form < 3; form++) {
            /* left: bytes from the offset to the end. */
            size_t left = form == 2 ? 0 : 1000 + 37 * (size_t)rank + (form == 1);
            MPI_Datatype t = form == 1 ? MPI_INT : MPI_BYTE;
            int tsz = form == 1 ? 4 : 1;
            int n = (int)((left + 777) / (size_t)tsz);
            MPI_Offset off = form == 2 ? end + 10 : end - (MPI_Offset)left;
            struct dbuf h = dbuf_new(HOST, (size_t)n * tsz, ++canary);
            /* On the device of the writes: MPI->device traffic on both devices. */
            struct dbuf r = dbuf_new(wdev(), (size_t)n * tsz, canary);
            memcpy(h.want + GUARD, img + (size_t)(end - (MPI_Offset)left), left);
            memcpy(r.want, h.want, r.bytes + 2 * GUARD);
            MPI_Status hst, st;
            garbage(&hst);
            garbage(&st);
            int hrc = rd(k, lc, fh, off, h.p, n, t, &hst);
            int rc = rd(k, lc, fh, off, r.p, n, t, &st);
            char what[128];
            snprintf(what, sizeof what, "a short MPI_File_%s%s (%zu of %zu bytes) of %s",
                     rd_name[k], lc ? "_c" : "", left, r.bytes,
                     form == 2 ? "nothing (past the end)" : form == 1 ? "ints" : "bytes");
            if (k == AT || k == IND) {
                CHECK(hrc == MPI_SUCCESS && status_bytes(&hst) == (long long)left,
                      "%s, host memory: rc %d, %lld bytes", what, hrc, status_bytes(&hst));
                dbuf_check(&h, what);
            } else {
                /* What the MPI did to host memory is the reference. */
                CHECK(hrc == MPI_SUCCESS, "%s, host memory: rc %d", what, hrc);
                memcpy(r.want, h.base, r.bytes + 2 * GUARD);
                CHECK(memcmp(r.want + GUARD, h.want + GUARD, left) == 0,
                      "%s, host memory: not the file's bytes", what);
            }
            CHECK(rc == MPI_SUCCESS && status_bytes(&st) == status_bytes(&hst),
                  "%s: rc %d, %lld bytes, on host memory %lld", what, rc, status_bytes(&st),
                  status_bytes(&hst));
            dbuf_check(&r, what);
            dbuf_free(&h);
            dbuf_free(&r);
        }
    }
    free(img);
}

/* ---- ordered and shared file pointers ---------------------------------------------- */

static size_t ordered_size(int q)
{
    return 3000 + 100 * (size_t)q;
}

/* The view starts at @p base (bytes); the shared pointer is 0 there. */
static void test_shared(MPI_File fh, MPI_Offset base)
{
    MPI_OK(MPI_File_set_view(fh, base, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    size_t mine = ordered_size(rank), total = 0, before = 0;
    for (int q = 0; q < nranks; q++) {
        before += q < rank ? ordered_size(q) : 0;
        total += ordered_size(q);
    }
    struct dbuf w = dbuf_new(wdev(), mine, OLD);
    fill(w.want + GUARD, 40 + rank, mine);
    dbuf_store(&w);
    MPI_Status st;
    garbage(&st);
    int rc = MPI_File_write_ordered(fh, w.p, (int)mine, MPI_BYTE, &st);
    CHECK(rc == MPI_SUCCESS && status_bytes(&st) == (long long)mine,
          "MPI_File_write_ordered from device memory: rc %d, %lld bytes", rc, status_bytes(&st));
    settle(fh);
    MPI_OK(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    struct dbuf r = dbuf_new(rdev(), mine + 40, 0x77);
    fill(r.want + GUARD, 40 + rank, mine);
    garbage(&st);
    rc = MPI_File_read_ordered(fh, r.p, (int)mine, MPI_BYTE, &st);
    CHECK(rc == MPI_SUCCESS && status_bytes(&st) == (long long)mine,
          "MPI_File_read_ordered into device memory: rc %d, %lld bytes", rc, status_bytes(&st));
    dbuf_check(&r, "MPI_File_read_ordered into device memory");
    /* In rank order, in the file. */
    unsigned char *got = malloc(total), *want = malloc(total);
    MPI_OK(MPI_File_read_at(fh, 0, got, (int)total, MPI_BYTE, &st));
    for (int q = 0, at = 0; q < nranks; at += (int)ordered_size(q), q++)
        fill(want + at, 40 + q, ordered_size(q));
    CHECK(memcmp(got, want, total) == 0, "the ordered region is not in rank order (%zu B before)",
          before);
    free(got);
    free(want);

    /* Shared: one chunk per rank, in some order. */
    enum { C4 = 2048 };
    struct dbuf ws = dbuf_new(wdev(), C4, OLD), rs = dbuf_new(rdev(), C4, 0x66);
    fill(ws.want + GUARD, 50 + rank, C4);
    dbuf_store(&ws);
    garbage(&st);
    rc = MPI_File_write_shared(fh, ws.p, C4, MPI_BYTE, &st);
    CHECK(rc == MPI_SUCCESS && status_bytes(&st) == C4,
          "MPI_File_write_shared from device memory: rc %d, %lld bytes", rc, status_bytes(&st));
    settle(fh);
    unsigned char *all = malloc((size_t)nranks * C4), *one = malloc(C4);
    MPI_OK(MPI_File_read_at(fh, (MPI_Offset)total, all, nranks * C4, MPI_BYTE, &st));
    int seen = 0; /* bit q: rank q's chunk found */
    for (int i = 0; i < nranks; i++)
        for (int q = 0; q < nranks; q++) {
            fill(one, 50 + q, C4);
            if (memcmp(all + (size_t)i * C4, one, C4) == 0)
                seen |= 1 << q;
        }
    CHECK(seen == (1 << nranks) - 1, "MPI_File_write_shared chunks found: mask 0x%x", seen);
    MPI_OK(MPI_File_seek_shared(fh, (MPI_Offset)total, MPI_SEEK_SET));
    garbage(&st);
    rc = MPI_File_read_shared(fh, rs.p, C4, MPI_BYTE, &st);
    CHECK(rc == MPI_SUCCESS && status_bytes(&st) == C4,
          "MPI_File_read_shared into device memory: rc %d, %lld bytes", rc, status_bytes(&st));
    /* Which chunk it got: the device's bytes say; every rank a different one. */
    unsigned char *h = malloc(C4);
    push(rs.dev);
    TD_CHECK(td.cuMemcpyDtoH(h, (cdDevicePtr)(uintptr_t)rs.p, C4));
    pop();
    int got_q = -1;
    for (int q = 0; q < nranks; q++) {
        fill(one, 50 + q, C4);
        if (memcmp(h, one, C4) == 0)
            got_q = q;
    }
    CHECK(got_q >= 0, "MPI_File_read_shared into device memory: no rank's chunk");
    if (got_q >= 0) {
        fill(rs.want + GUARD, 50 + got_q, C4);
        dbuf_check(&rs, "MPI_File_read_shared into device memory");
    }
    int bit = got_q >= 0 ? 1 << got_q : 0, mask = 0;
    MPI_OK(MPI_Allreduce(&bit, &mask, 1, MPI_INT, MPI_BOR, MPI_COMM_WORLD));
    CHECK(mask == (1 << nranks) - 1, "MPI_File_read_shared: chunks read: mask 0x%x", mask);
    free(h);
    free(all);
    free(one);
    dbuf_free(&w);
    dbuf_free(&r);
    dbuf_free(&ws);
    dbuf_free(&rs);
    MPI_OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
}

/* ---- refused calls ---------------------------------------------------------------------- */

/* Counting error handlers: the shim must raise on the file, window or
 * communicator the standard names. */
static int eh_calls, eh_code;

static void file_eh(MPI_File *f, int *code, ...)
{
    (void)f;
    eh_calls++;
    eh_code = *code;
}

static void win_eh(MPI_Win *w, int *code, ...)
{
    (void)w;
    eh_calls++;
    eh_code = *code;
}

static void comm_eh(MPI_Comm *c, int *code, ...)
{
    (void)c;
    eh_calls++;
    eh_code = *code;
}

/* @p rc is of class @p cls, names @p call, and went through the counting
 * handler once. */
static void refused(int rc, int cls, const char *call)
{
    int got;
    char text[MPI_MAX_ERROR_STRING];
    CHECK(mpi_prog_error_is("io_device", rank, rc, cls, call, &got, text),
          "%s: rc %d class %d (want %d), message '%s'", call, rc, got, cls, text);
    CHECK(eh_calls == 1 && eh_code == rc, "%s: the error handler ran %d times (code %d, rc %d)",
          call, eh_calls, eh_code, rc);
    eh_calls = 0;
    eh_code = MPI_SUCCESS;
}

/* A request that is not MPI_REQUEST_NULL (a completed receive from
 * MPI_PROC_NULL), to see a refusal set it to MPI_REQUEST_NULL. */
static MPI_Request live_request(MPI_Request *keep)
{
    MPI_OK(MPI_Irecv(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_WORLD, keep));
    return *keep;
}

/* @p rc of a call given @p req (live_request()'s before the call). */
static void refused_req(int rc, const MPI_Request *req, MPI_Request *keep, const char *call)
{
    refused(rc, MPI_ERR_UNSUPPORTED_OPERATION, call);
    CHECK(*req == MPI_REQUEST_NULL, "%s: the request of a refused call is not MPI_REQUEST_NULL",
          call);
    MPI_OK(MPI_Wait(keep, MPI_STATUS_IGNORE));
}

/* Nonblocking and split-collective IO of @p d (device, refused) and @p h
 * (host, passes), at file offset @p at. */
/* A non-contiguous memory type on device memory (docs/mpi.md "Non-contiguous
 * datatypes"): staged packed, so a write puts in the file what the same
 * write from host memory puts there, and a read writes only the type map
 * (the device buffer must end as a host one read the same way). Each rank
 * its 128 bytes from @p at: the device write, then the host one. */
static void test_typed(MPI_File fh, MPI_Offset at)
{
    enum { N = 256 }; /* 2 x vector(8, 1, 4) of ints: 232 bytes, 64 in the map */
    MPI_Datatype col;
    MPI_OK(MPI_Type_vector(8, 1, 4, MPI_INT, &col));
    MPI_OK(MPI_Type_commit(&col));
    MPI_Offset mine = at + (MPI_Offset)rank * 128;
    MPI_Offset theirs = at + (MPI_Offset)((rank + 1) % nranks) * 128;
    struct dbuf d = dbuf_new(wdev(), N, 0), h = dbuf_new(HOST, N, 0);
    fill(d.want + GUARD, 40 + (unsigned)rank, N);
    memcpy(h.want, d.want, N + 2 * GUARD);
    dbuf_store(&d);
    dbuf_store(&h);
    for (int k = AT; k <= AT_ALL; k++) {
        MPI_OK(wr(k, 0, fh, mine, d.p, 2, col, MPI_STATUS_IGNORE));
        MPI_OK(wr(k, 0, fh, mine + 64, h.p, 2, col, MPI_STATUS_IGNORE));
        settle(fh);
        unsigned char got[128];
        MPI_OK(MPI_File_read_at(fh, mine, got, 128, MPI_BYTE, MPI_STATUS_IGNORE));
        CHECK(memcmp(got, got + 64, 64) == 0,
              "%s of a vector type from device memory: the file differs from the host write",
              wr_name[k]);
        dbuf_check(&d, "a vector type's device write buffer");
        struct dbuf r = dbuf_new(rdev(), N, 0x5A), hr = dbuf_new(HOST, N, 0x5A);
        MPI_Status st, hst;
        garbage(&st);
        garbage(&hst);
        MPI_OK(rd(k, 0, fh, theirs, hr.p, 2, col, &hst));
        MPI_OK(rd(k, 0, fh, theirs, r.p, 2, col, &st));
        memcpy(r.want, hr.base, N + 2 * GUARD); /* MPI's own read into host memory */
        dbuf_check(&r, rd_name[k]);
        int c = -1;
        MPI_Get_count(&st, col, &c);
        CHECK(status_bytes(&st) == 64 && c == 2, "%s of a vector type into device memory: %lld "
              "bytes, count %d", rd_name[k], status_bytes(&st), c);
        dbuf_free(&r);
        dbuf_free(&hr);
        settle(fh);
    }
    dbuf_free(&d);
    dbuf_free(&h);
    MPI_OK(MPI_Type_free(&col));
}

static void test_io_refusals(MPI_File fh, MPI_Offset at)
{
    enum { N = 4096 };
    struct dbuf d = dbuf_new(wdev(), N, 0x42), h = dbuf_new(HOST, N, 0x43);
    MPI_Errhandler eh;
    MPI_OK(MPI_File_create_errhandler(file_eh, &eh));
    MPI_OK(MPI_File_set_errhandler(fh, eh));
    MPI_Offset mine = at + (MPI_Offset)rank * N;
    MPI_Request keep, req;

    /* (A vector type on device memory is staged packed: test_typed.) */
    MPI_Offset size = 0;
    MPI_OK(MPI_File_get_size(fh, &size));
    CHECK(size <= at, "a refused write changed the file size to %lld", (long long)size);

    /* Nonblocking IO. */
    const int U = MPI_ERR_UNSUPPORTED_OPERATION;
    req = live_request(&keep);
    refused_req(MPI_File_iwrite_at(fh, mine, d.p, N, MPI_BYTE, &req), &req, &keep,
                "MPI_File_iwrite_at");
    req = live_request(&keep);
    refused_req(MPI_File_iread_at(fh, 0, d.p, N, MPI_BYTE, &req), &req, &keep,
                "MPI_File_iread_at");
    req = live_request(&keep);
    refused_req(MPI_File_iwrite(fh, d.p, N, MPI_BYTE, &req), &req, &keep, "MPI_File_iwrite");
    req = live_request(&keep);
    refused_req(MPI_File_iread(fh, d.p, N, MPI_BYTE, &req), &req, &keep, "MPI_File_iread");
    req = live_request(&keep);
    refused_req(MPI_File_iwrite_shared(fh, d.p, N, MPI_BYTE, &req), &req, &keep,
                "MPI_File_iwrite_shared");
    req = live_request(&keep);
    refused_req(MPI_File_iread_shared(fh, d.p, N, MPI_BYTE, &req), &req, &keep,
                "MPI_File_iread_shared");
    /* The collective ones are refused on every rank: none waits. */
    req = live_request(&keep);
    refused_req(MPI_File_iwrite_at_all(fh, mine, d.p, N, MPI_BYTE, &req), &req, &keep,
                "MPI_File_iwrite_at_all");
    req = live_request(&keep);
    refused_req(MPI_File_iread_at_all(fh, 0, d.p, N, MPI_BYTE, &req), &req, &keep,
                "MPI_File_iread_at_all");
    req = live_request(&keep);
    refused_req(MPI_File_iwrite_all(fh, d.p, N, MPI_BYTE, &req), &req, &keep,
                "MPI_File_iwrite_all");
    req = live_request(&keep);
    refused_req(MPI_File_iread_all(fh, d.p, N, MPI_BYTE, &req), &req, &keep, "MPI_File_iread_all");
    /* Split collectives. */
    refused(MPI_File_write_at_all_begin(fh, mine, d.p, N, MPI_BYTE), U,
            "MPI_File_write_at_all_begin");
    refused(MPI_File_read_at_all_begin(fh, 0, d.p, N, MPI_BYTE), U, "MPI_File_read_at_all_begin");
    refused(MPI_File_write_all_begin(fh, d.p, N, MPI_BYTE), U, "MPI_File_write_all_begin");
    refused(MPI_File_read_all_begin(fh, d.p, N, MPI_BYTE), U, "MPI_File_read_all_begin");
    refused(MPI_File_write_ordered_begin(fh, d.p, N, MPI_BYTE), U, "MPI_File_write_ordered_begin");
    refused(MPI_File_read_ordered_begin(fh, d.p, N, MPI_BYTE), U, "MPI_File_read_ordered_begin");
#if MPI_VERSION >= 4
    req = live_request(&keep);
    refused_req(MPI_File_iwrite_at_c(fh, mine, d.p, N, MPI_BYTE, &req), &req, &keep,
                "MPI_File_iwrite_at_c");
    req = live_request(&keep);
    refused_req(MPI_File_iread_all_c(fh, d.p, N, MPI_BYTE, &req), &req, &keep,
                "MPI_File_iread_all_c");
    refused(MPI_File_write_all_begin_c(fh, d.p, N, MPI_BYTE), U, "MPI_File_write_all_begin_c");
    lc_calls += 3;
#endif
    dbuf_check(&d, "the device buffer of refused IO");
    MPI_OK(MPI_File_get_size(fh, &size));
    CHECK(size <= at, "a refused write changed the file size to %lld", (long long)size);

    /* Host memory passes through: nonblocking and split collective (once
     * every rank has checked the size: the refused calls synchronize nothing). */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    fill(h.want + GUARD, 60 + rank, N);
    dbuf_store(&h);
    MPI_Status st;
    MPI_OK(MPI_File_iwrite_at(fh, mine, h.p, N, MPI_BYTE, &req));
    MPI_OK(MPI_Wait(&req, &st));
    CHECK(status_bytes(&st) == N, "host MPI_File_iwrite_at: %lld bytes", status_bytes(&st));
    MPI_OK(MPI_File_write_at_all_begin(fh, mine + (MPI_Offset)nranks * N, h.p, N, MPI_BYTE));
    MPI_OK(MPI_File_write_at_all_end(fh, h.p, &st));
    settle(fh);
    int next = (rank + 1) % nranks;
    unsigned char *want = malloc(N), *got = malloc(N);
    fill(want, 60 + next, N);
    MPI_OK(MPI_File_iread_at(fh, at + (MPI_Offset)next * N, got, N, MPI_BYTE, &req));
    MPI_OK(MPI_Wait(&req, &st));
    CHECK(memcmp(got, want, N) == 0, "host MPI_File_iwrite_at / iread_at: wrong data");
    memset(got, 0, N);
    MPI_OK(MPI_File_read_at_all_begin(fh, at + (MPI_Offset)(nranks + next) * N, got, N,
                                      MPI_BYTE));
    MPI_OK(MPI_File_read_at_all_end(fh, got, &st));
    CHECK(memcmp(got, want, N) == 0, "host split-collective write / read: wrong data");
    free(want);
    free(got);
    CHECK(eh_calls == 0, "host IO ran the file's error handler");

    MPI_OK(MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Errhandler_free(&eh));
    dbuf_free(&d);
    dbuf_free(&h);
}

/* RMA: windows on device memory refused (Win_create on the communicator's
 * handler, Win_attach on the window's); device origin/result buffers
 * refused on the window's handler; host memory works. */
static void test_rma(void)
{
    enum { N = 4096 };
    const int U = MPI_ERR_UNSUPPORTED_OPERATION;
    int next = (rank + 1) % nranks;
    struct dbuf d = dbuf_new(wdev(), N, 0x24);
    MPI_Comm comm;
    MPI_Errhandler ceh, weh;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    MPI_OK(MPI_Comm_create_errhandler(comm_eh, &ceh));
    MPI_OK(MPI_Comm_set_errhandler(comm, ceh));
    MPI_OK(MPI_Win_create_errhandler(win_eh, &weh));

    MPI_Win win = (MPI_Win)0;
    refused(MPI_Win_create(d.p, N, 1, MPI_INFO_NULL, comm, &win), U, "MPI_Win_create");
    CHECK(win == MPI_WIN_NULL, "a refused MPI_Win_create's window is not MPI_WIN_NULL");
#if MPI_VERSION >= 4
    refused(MPI_Win_create_c(d.p, N, 1, MPI_INFO_NULL, comm, &win), U, "MPI_Win_create_c");
    lc_calls++;
#endif

    /* A host window: device origins refused, host ones work. */
    int *mem = calloc(N / sizeof(int), sizeof(int));
    MPI_OK(MPI_Win_create(mem, N, sizeof(int), MPI_INFO_NULL, comm, &win));
    MPI_OK(MPI_Win_set_errhandler(win, weh));
    MPI_OK(MPI_Win_fence(0, win));
    MPI_Request keep, req;
    int one = 1, res = 0;
    refused(MPI_Put(d.p, 4, MPI_INT, next, 0, 4, MPI_INT, win), U, "MPI_Put");
    refused(MPI_Get(d.p, 4, MPI_INT, next, 0, 4, MPI_INT, win), U, "MPI_Get");
    refused(MPI_Accumulate(d.p, 4, MPI_INT, next, 0, 4, MPI_INT, MPI_SUM, win), U,
            "MPI_Accumulate");
    refused(MPI_Get_accumulate(&one, 1, MPI_INT, d.p, 1, MPI_INT, next, 0, 1, MPI_INT, MPI_SUM,
                               win),
            U, "MPI_Get_accumulate");
    refused(MPI_Fetch_and_op(&one, d.p, MPI_INT, next, 0, MPI_SUM, win), U, "MPI_Fetch_and_op");
    refused(MPI_Compare_and_swap(&one, d.p, &res, MPI_INT, next, 0, win), U,
            "MPI_Compare_and_swap");
    req = live_request(&keep);
    refused_req(MPI_Rput(d.p, 4, MPI_INT, next, 0, 4, MPI_INT, win, &req), &req, &keep,
                "MPI_Rput");
    req = live_request(&keep);
    refused_req(MPI_Rget(d.p, 4, MPI_INT, next, 0, 4, MPI_INT, win, &req), &req, &keep,
                "MPI_Rget");
    req = live_request(&keep);
    refused_req(MPI_Raccumulate(d.p, 4, MPI_INT, next, 0, 4, MPI_INT, MPI_SUM, win, &req),
                &req, &keep, "MPI_Raccumulate");
    req = live_request(&keep);
    refused_req(MPI_Rget_accumulate(d.p, 1, MPI_INT, &res, 1, MPI_INT, next, 0, 1, MPI_INT,
                                    MPI_SUM, win, &req),
                &req, &keep, "MPI_Rget_accumulate");
#if MPI_VERSION >= 4
    refused(MPI_Put_c(d.p, 4, MPI_INT, next, 0, 4, MPI_INT, win), U, "MPI_Put_c");
    refused(MPI_Get_c(d.p, 4, MPI_INT, next, 0, 4, MPI_INT, win), U, "MPI_Get_c");
    lc_calls += 2;
#endif
    /* Not accessed, not refused: MPI_PROC_NULL targets, MPI_NO_OP's origin. */
    MPI_OK(MPI_Put(d.p, 4, MPI_INT, MPI_PROC_NULL, 0, 4, MPI_INT, win));
    MPI_OK(MPI_Get_accumulate(d.p, 1, MPI_INT, &res, 1, MPI_INT, next, 0, 1, MPI_INT, MPI_NO_OP,
                              win));
    /* Host: put rank+1 into slot 1 of the next rank, add 10 to its slot 2. */
    int v = rank + 1, ten = 10;
    MPI_OK(MPI_Put(&v, 1, MPI_INT, next, 1, 1, MPI_INT, win));
    MPI_OK(MPI_Accumulate(&ten, 1, MPI_INT, next, 2, 1, MPI_INT, MPI_SUM, win));
    MPI_OK(MPI_Win_fence(0, win));
    int prev = (rank + nranks - 1) % nranks;
    CHECK(mem[1] == prev + 1 && mem[2] == 10, "host MPI_Put / MPI_Accumulate: %d %d, want %d 10",
          mem[1], mem[2], prev + 1);
    int back = -1;
    MPI_OK(MPI_Get(&back, 1, MPI_INT, next, 1, 1, MPI_INT, win));
    MPI_OK(MPI_Win_fence(0, win));
    CHECK(back == rank + 1, "host MPI_Get: %d, want %d", back, rank + 1);
    CHECK(eh_calls == 0, "host RMA ran the window's error handler");
    MPI_OK(MPI_Win_free(&win));

    /* A dynamic window: attaching device memory refused, host memory works. */
    MPI_OK(MPI_Win_create_dynamic(MPI_INFO_NULL, comm, &win));
    MPI_OK(MPI_Win_set_errhandler(win, weh));
    refused(MPI_Win_attach(win, d.p, N), U, "MPI_Win_attach");
    MPI_OK(MPI_Win_attach(win, mem, N));
    MPI_OK(MPI_Win_detach(win, mem));
    MPI_OK(MPI_Win_free(&win));
    dbuf_check(&d, "the device buffer of refused RMA calls");

    free(mem);
    MPI_OK(MPI_Errhandler_free(&weh));
    MPI_OK(MPI_Errhandler_free(&ceh));
    MPI_OK(MPI_Comm_free(&comm));
    dbuf_free(&d);
}

/* ---- without the shim ------------------------------------------------------------- */

static void test_negative(MPI_File fh)
{
    CHECK(mpi_prog_mapped("libcucopy_mpi") == 0, "the shim is loaded in the negative control");
    struct dbuf w = dbuf_new(wdev(), C0, OLD);
    fill(w.want + GUARD, 70 + rank, C0);
    dbuf_store(&w);
    MPI_Status st;
    memset(&st, 0, sizeof st);
    int rc = MPI_File_write_at(fh, (MPI_Offset)rank * C0, w.p, C0, MPI_BYTE, &st);
    int cls = MPI_SUCCESS, len = 0;
    char text[MPI_MAX_ERROR_STRING] = "";
    if (rc != MPI_SUCCESS) {
        MPI_Error_class(rc, &cls);
        MPI_Error_string(rc, text, &len);
        for (char *c = text; *c; c++)
            *c = *c == '\n' ? ' ' : *c;
    }
    long long written = rc == MPI_SUCCESS ? status_bytes(&st) : -1;
    settle(fh);
    unsigned char *got = calloc(C0, 1);
    MPI_OK(MPI_File_read_at(fh, (MPI_Offset)rank * C0, got, C0, MPI_BYTE, &st));
    int in_file = memcmp(got, w.want + GUARD, C0) == 0;
    CHECK(!in_file && (rc != MPI_SUCCESS || written < C0),
          "without the shim MPI_File_write_at wrote the device buffer: rc %d, %lld bytes", rc,
          written);
    printf("io_device: rank %d: negative control: MPI_File_write_at of device memory without "
           "the shim: error class %d%s%s, %lld of %d bytes written, the data %s the file\n",
           rank, cls, text[0] ? ": " : "", text, written, C0, in_file ? "IS IN" : "is not in");
    free(got);
    dbuf_free(&w);
}

/* ---- the run's directory ------------------------------------------------------------ */

/* Rank 0: make @p dir and empty it (what an earlier run left behind). */
static void dir_prepare(const char *dir)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "io_device: mkdir %s: %s\n", dir, strerror(errno));
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[4096];
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    }
    if (d != NULL)
        closedir(d);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc < 2 || nranks > 30) {
        fprintf(stderr, "usage: mpirun -n N (N <= 30) io_device DIR [negative]\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    int negative = argc > 2 && strcmp(argv[2], "negative") == 0;
    dev_prog_init("io_device");

    const char *dir = argv[1];
    char path[4096];
    snprintf(path, sizeof path, "%s/io.dat", dir);
    if (rank == 0)
        dir_prepare(dir);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_File fh;
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
                         &fh));

    if (negative) {
        test_negative(fh);
    } else {
        for (int lc = 0; lc < LC_FORMS; lc++) {
            test_regions(fh, lc);
            test_short_reads(fh, lc);
        }
        test_shared(fh, r2_end());
        test_io_refusals(fh, 2 * r2_end());
        test_typed(fh, 3 * r2_end());
        test_rma();
    }
    MPI_OK(MPI_File_close(&fh));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        MPI_OK(MPI_File_delete(path, MPI_INFO_NULL));
        CHECK(rmdir(dir) == 0, "removing %s: %s (did MPI leave a file there?)", dir,
              strerror(errno));
    }
    if (lc_calls > 0)
        printf("io_device: rank %d: large-count: %d calls checked\n", rank, lc_calls);

    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (failures == 0)
        printf("io_device: rank %d: %s (%d checks)\n", rank,
               negative ? "negative control holds" : "PASS", checks);
    else
        printf("io_device: rank %d: FAILED (%d of %d checks)\n", rank, failures, checks);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
