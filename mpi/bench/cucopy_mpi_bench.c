/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cucopy_mpi_bench: MPI latency and bandwidth between two ranks with host
 * and device buffers, in the shape of the OSU micro-benchmarks (osu_latency,
 * osu_bw), the time of MPI_Allreduce, MPI_Bcast and MPI_Alltoall over every
 * rank (osu_allreduce, osu_bcast, osu_alltoall), and the ratio device/host of
 * the same MPI in the same run.
 *
 * An unchanged MPI program as far as GPUs go: device memory comes from the
 * driver directly (testdrv: $CUCOPY_CUDA_DRIVER or libcuda.so.1), it never
 * links or calls cucopy, and MPI takes its device buffers only because
 * libcucopy_mpi.so is preloaded (mpirun -x LD_PRELOAD=.../libcucopy_mpi.so).
 * Without the shim, a device-buffer pair faults inside a non-CUDA-aware MPI.
 *
 * Every measurement is verified: the sender's buffer holds a pattern seeded
 * by (test, pair, size, sender), the receiver's is cleared first and compared
 * with the pattern after the timed loop (device buffers read back with
 * cuMemcpyDtoH), so a broken shim cannot give fast garbage numbers. The
 * collectives check what each rank received: allreduce the sum of every
 * rank's values, bcast the root's pattern, alltoall each block its sender's.
 *
 * Output: a table per test (latency in us, bandwidth in MB/s, collectives
 * in us per call) with one column per pair and the ratio D-D/H-H, then the
 * issues' goals (10: latency, bandwidth; 13: allreduce) as measured
 * numbers, then "cucopy_mpi_bench: rank R: PASS" or FAILED lines.
 * Exit status: 0 every check passed, 1 usage or setup error, 2 wrong data.
 * docs/mpi.md#benchmark.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_prog.h"
#include "testdrv.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)
#define MAX_SIZES 64
#define SIZE_LIMIT GIB             /* one message, and one bandwidth window */
#define LAT_BYTES_PER_RUN GIB      /* latency: iterations capped to ~this many bytes each way */
#define BW_BYTES_PER_RUN (2 * GIB) /* bandwidth: the same, over all windows */
#define SMALL_LIMIT (8 * KIB)      /* OSU's "large message" threshold */
#define TAG_DATA 1
#define TAG_ACK 2

enum kind { HOST = 0, DEVICE = 1 };
/* XFACE is a section of its own (run_xface), not a table of sizes. */
enum test { LAT = 0, BW, ALLREDUCE, BCAST, ALLTOALL, XFACE, NTESTS };
enum { HH = 0, DD, HD, DH, NPAIRS };

/* Buffer kind of rank 0 and rank 1 for each pair. */
static const struct {
    const char *name;
    const char *opt;
    enum kind k[2];
} pairs[NPAIRS] = {
    {"H-H", "hh", {HOST, HOST}},
    {"D-D", "dd", {DEVICE, DEVICE}},
    {"H-D", "hd", {HOST, DEVICE}},
    {"D-H", "dh", {DEVICE, HOST}},
};

static const char *test_names[NTESTS] = {"lat", "bw", "allreduce", "bcast", "alltoall", "xface"};

/* The collectives run over every rank, with the H-H and D-D pairs only. */
static int is_collective(enum test t)
{
    return t >= ALLREDUCE && t != XFACE;
}

/* --host-mem: what the host buffers of the measurements are. */
enum { HOST_MEM_MALLOC, HOST_MEM_PINNED, HOST_MEM_REGISTERED, HOST_MEM_KINDS };
static const char *const host_mem_names[HOST_MEM_KINDS] = {"malloc", "pinned", "registered"};

static struct {
    size_t sizes[MAX_SIZES];
    int nsizes;
    size_t max_size;
    int sizes_given;
    int iters;  /* 0: per size (OSU's counts, capped by bytes) */
    int warmup; /* -1: per size */
    int window;
    size_t inflight;
    int device[2];
    int pair_on[NPAIRS];
    int test_on[NTESTS];
    double short_us; /* < 0: measure */
    int verify;
    int xface_n;  /* 0: default */
    int host_mem; /* the host buffers (HOST_MEM_*) */
} opt = {.max_size = 256 * MIB,
         .warmup = -1,
         .window = 64,
         .inflight = 256 * MIB,
         .pair_on = {1, 1, 1, 1},
         .test_on = {1, 1, 0, 0, 0},
         .short_us = -1};

static int rank, nranks;
static int failures, checks;
static cdContext ctx;
/* This rank's buffers: [HOST] malloc'd, [DEVICE] cuMemAlloc'd; scratch for
 * device fills and read-backs. */
static char *sendbuf[2], *recvbuf[2], *scratch;
static size_t buf_bytes;
/* Results on rank 0: [test][pair][size index]; < 0: not measured. The
 * collectives' are us per call, averaged over the ranks. */
static double result[NTESTS][NPAIRS][MAX_SIZES];
static int iters_used[NTESTS][MAX_SIZES], window_used[MAX_SIZES];

#define MPI_OK(call) MPI_OK_OR_ABORT("cucopy_mpi_bench", rank, call)

/* ---- options ------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: mpirun -n 2 -x LD_PRELOAD=<lib>/libcucopy_mpi.so cucopy_mpi_bench [options]\n"
            "MPI latency and bandwidth between two ranks with host and device buffers\n"
            "(OSU osu_latency / osu_bw shape), collectives over every rank (osu_allreduce,\n"
            "osu_bcast, osu_alltoall), and the ratio device/host of the same run.\n"
            "\n"
            "  --tests LIST      lat,bw,allreduce,bcast,alltoall,xface (default lat,bw); lat,\n"
            "                    bw and xface need exactly 2 ranks, the collectives any\n"
            "                    number >= 2; xface: the x-face of an N^3 double array as a\n"
            "                    subarray type against as many contiguous bytes (MPI_Sendrecv)\n"
            "  --xface-n N       xface: the array's edge (default 256; --verify: 32)\n"
            "  --pairs LIST      hh,dd,hd,dh (default all): buffer kinds of rank 0 and rank 1,\n"
            "                    h = host (malloc), d = device (cuMemAlloc); the collectives\n"
            "                    run hh and dd only (every rank's buffers of that kind)\n"
            "  --sizes LIST      message sizes, K/M/G suffixes (binary); allreduce and bcast:\n"
            "                    bytes per rank (allreduce: size/8 doubles), alltoall: bytes\n"
            "                    per block (one to each rank)\n"
            "                    (default: powers of 2 from 8 to --max-size)\n"
            "  --max-size S      largest default size (default 256M)\n"
            "  --iters N         timed iterations of every size (default per size: lat\n"
            "                    10000 up to 8K, 1000 above; bw 100 / 20 windows, the\n"
            "                    collectives 100 / 20 calls; capped so a size moves about\n"
            "                    1 GiB (lat) / 2 GiB (bw, collectives: per rank))\n"
            "  --warmup N        untimed iterations first (default lat 100 / 10, bw and\n"
            "                    the collectives 10 / 2)\n"
            "  --window W        bw: messages in flight per window (default 64), halved\n"
            "                    for a size until W x size <= --inflight\n"
            "  --inflight S      bw: most bytes one window holds (default 256M; each staged\n"
            "                    byte in flight holds pinned memory of the shim's pool,\n"
            "                    CUCOPY_MPI_POOL_MB, default 1024)\n"
            "  --device N[,M]    device of rank 0 [and of the other ranks] (default 0)\n"
            "  --host-mem KIND   the host buffers: malloc (default, pageable), pinned\n"
            "                    (cuMemHostAlloc) or registered (malloc'd, then\n"
            "                    cuMemHostRegister): what the MPI itself does on the memory\n"
            "                    kind the shim stages through (pinned)\n"
            "  --short-us X      cucopy's 8 B short-copy latency for the latency goal\n"
            "                    (default: measured here with raw 8 B cuMemcpyHtoD/DtoH)\n"
            "  --verify          a quick check: sizes 8,4K,64K,1M, 5 iterations, 1 warmup,\n"
            "                    window 8 (options given after it override)\n"
            "  --help            this text\n"
            "Exit status: 0 every message verified, 1 usage or setup error, 2 wrong data.\n"
            "Environment: CUCOPY_CUDA_DRIVER selects the driver (e.g. the fake one).\n");
}

/* A size with an optional K/M/G suffix (binary): 0 and *ok = 0 on error. */
static size_t parse_size(const char *s, int *ok)
{
    char *end = NULL;
    *ok = 0;
    if (s[0] < '0' || s[0] > '9')
        return 0;
    unsigned long long v = strtoull(s, &end, 10);
    size_t mult = 1;
    if (*end == 'K' || *end == 'k')
        mult = KIB, end++;
    else if (*end == 'M' || *end == 'm')
        mult = MIB, end++;
    else if (*end == 'G' || *end == 'g')
        mult = GIB, end++;
    if (*end != '\0' || v == 0 || v > SIZE_LIMIT / mult)
        return 0;
    *ok = 1;
    return (size_t)v * mult;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (s[0] == '\0' || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

/* Sets on[i] for each name of @p names found in the comma list @p s. */
static int parse_list(const char *s, const char *const *names, int n, int *on)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    memset(on, 0, sizeof(int) * (size_t)n);
    int any = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int i = 0; i < n; i++)
            if (strcmp(t, names[i]) == 0)
                on[i] = found = any = 1;
        if (!found)
            return -1;
    }
    return any ? 0 : -1;
}

static int parse_sizes(const char *s)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s);
    opt.nsizes = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int ok;
        size_t v = parse_size(t, &ok);
        if (!ok || opt.nsizes == MAX_SIZES)
            return -1;
        opt.sizes[opt.nsizes++] = v;
    }
    opt.sizes_given = 1;
    return opt.nsizes > 0 ? 0 : -1;
}

/* 0: run; 1: --help printed; -1: a message printed (rank 0). */
static int parse_args(int argc, char **argv)
{
    const char *pair_opts[NPAIRS];
    for (int p = 0; p < NPAIRS; p++)
        pair_opts[p] = pairs[p].opt;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0, ok = 1;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            if (rank == 0)
                usage(stdout);
            return 1;
        } else if (strcmp(a, "--verify") == 0) {
            opt.verify = 1;
            parse_sizes("8,4K,64K,1M");
            opt.sizes_given = 0; /* still cut at --max-size */
            opt.iters = 5;
            opt.warmup = 1;
            opt.window = 8;
            continue;
        } else if (v == NULL) {
            bad = 1;
        } else if (strcmp(a, "--tests") == 0) {
            bad = parse_list(v, test_names, NTESTS, opt.test_on) != 0;
        } else if (strcmp(a, "--pairs") == 0) {
            bad = parse_list(v, pair_opts, NPAIRS, opt.pair_on) != 0;
        } else if (strcmp(a, "--sizes") == 0) {
            bad = parse_sizes(v) != 0;
        } else if (strcmp(a, "--max-size") == 0) {
            opt.max_size = parse_size(v, &ok);
            bad = !ok;
        } else if (strcmp(a, "--host-mem") == 0) {
            bad = 1;
            for (int k = 0; k < HOST_MEM_KINDS; k++)
                if (strcmp(v, host_mem_names[k]) == 0) {
                    opt.host_mem = k;
                    bad = 0;
                }
        } else if (strcmp(a, "--inflight") == 0) {
            opt.inflight = parse_size(v, &ok);
            bad = !ok;
        } else if (strcmp(a, "--iters") == 0) {
            bad = parse_int(v, 1, 100000000, &opt.iters) != 0;
        } else if (strcmp(a, "--warmup") == 0) {
            bad = parse_int(v, 0, 100000000, &opt.warmup) != 0;
        } else if (strcmp(a, "--window") == 0) {
            bad = parse_int(v, 1, 4096, &opt.window) != 0;
        } else if (strcmp(a, "--device") == 0) {
            char buf[64], *comma;
            snprintf(buf, sizeof buf, "%s", v);
            comma = strchr(buf, ',');
            if (comma != NULL)
                *comma = '\0';
            bad = parse_int(buf, 0, 1023, &opt.device[0]) != 0 ||
                  parse_int(comma ? comma + 1 : buf, 0, 1023, &opt.device[1]) != 0;
        } else if (strcmp(a, "--xface-n") == 0) {
            bad = parse_int(v, 4, 1024, &opt.xface_n) != 0;
        } else if (strcmp(a, "--short-us") == 0) {
            char *end = NULL;
            opt.short_us = strtod(v, &end);
            bad = *end != '\0' || !(opt.short_us >= 0 && opt.short_us < 1e6);
        } else {
            if (rank == 0) {
                fprintf(stderr, "cucopy_mpi_bench: unknown option '%s'\n", a);
                usage(stderr);
            }
            return -1;
        }
        if (bad) {
            if (rank == 0)
                fprintf(stderr, "cucopy_mpi_bench: %s %s: %s (see --help)\n", a,
                        v ? v : "(missing value)",
                        v ? "invalid value" : "the option needs a value");
            return -1;
        }
        i++;
    }
    if (!opt.sizes_given) {
        /* Powers of 2 from 8, or the --verify list, up to --max-size. */
        if (!opt.verify) {
            opt.nsizes = 0;
            for (size_t s = 8; s <= opt.max_size && opt.nsizes < MAX_SIZES; s *= 2)
                opt.sizes[opt.nsizes++] = s;
        }
        int n = 0;
        for (int i = 0; i < opt.nsizes; i++)
            if (opt.sizes[i] <= opt.max_size)
                opt.sizes[n++] = opt.sizes[i];
        opt.nsizes = n;
        if (n == 0) {
            if (rank == 0)
                fprintf(stderr, "cucopy_mpi_bench: --max-size %zu leaves no size\n", opt.max_size);
            return -1;
        }
    }
    return 0;
}

/* ---- iterations and windows per size ---------------------------------------------- */

static int clamp_iters(int want, size_t bytes_per_iter, size_t budget, int floor)
{
    size_t cap = budget / bytes_per_iter;
    if ((size_t)want > cap)
        want = cap < (size_t)floor ? floor : (int)cap;
    return want;
}

/* Messages per bandwidth window: --window, halved until it fits --inflight. */
static int bw_window(size_t n)
{
    int w = opt.window;
    while (w > 1 && (size_t)w * n > opt.inflight)
        w /= 2;
    return w;
}

/* Bytes one rank's buffer holds for one iteration of test @p t at size @p n. */
static size_t iter_bytes(enum test t, size_t n)
{
    if (t == BW)
        return (size_t)bw_window(n) * n;
    if (t == ALLTOALL)
        return n * (size_t)nranks;
    return n;
}

static int timed_iters(enum test t, size_t n)
{
    if (opt.iters > 0)
        return opt.iters;
    if (t == LAT)
        return clamp_iters(n <= SMALL_LIMIT ? 10000 : 1000, n, LAT_BYTES_PER_RUN, 4);
    return clamp_iters(n <= SMALL_LIMIT ? 100 : 20, iter_bytes(t, n), BW_BYTES_PER_RUN, 2);
}

static int warmup_iters(enum test t, size_t n)
{
    if (opt.warmup >= 0)
        return opt.warmup;
    int w = t == LAT ? (n <= SMALL_LIMIT ? 100 : 10) : (n <= SMALL_LIMIT ? 10 : 2);
    int quarter = timed_iters(t, n) / 4;
    if (w > quarter)
        w = quarter < 1 ? 1 : quarter;
    return w;
}

/* ---- buffers, patterns, checks ------------------------------------------------------ */

static cdDevicePtr dptr(const void *p)
{
    return (cdDevicePtr)(uintptr_t)p;
}

static uint64_t pattern_word(uint64_t seed, uint64_t i)
{
    uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull + i * 0xD1B54A32D192ED03ull;
    x ^= x >> 29;
    return x * 0xBF58476D1CE4E5B9ull;
}

static unsigned char pattern_byte(uint64_t seed, size_t j)
{
    return (unsigned char)(pattern_word(seed, j / 8) >> (8 * (j % 8)));
}

static void fill_host(char *h, size_t n, uint64_t seed)
{
    size_t words = n / 8;
    for (size_t i = 0; i < words; i++) {
        uint64_t w = pattern_word(seed, i);
        memcpy(h + 8 * i, &w, 8);
    }
    for (size_t j = 8 * words; j < n; j++)
        h[j] = (char)pattern_byte(seed, j);
}

/* The first byte of h[0, n) that is not the pattern, or n. */
static size_t first_wrong(const char *h, size_t n, uint64_t seed)
{
    size_t words = n / 8;
    for (size_t i = 0; i < words; i++) {
        uint64_t w;
        memcpy(&w, h + 8 * i, 8);
        if (w != pattern_word(seed, i)) {
            for (size_t j = 8 * i;; j++)
                if ((unsigned char)h[j] != pattern_byte(seed, j))
                    return j;
        }
    }
    for (size_t j = 8 * words; j < n; j++)
        if ((unsigned char)h[j] != pattern_byte(seed, j))
            return j;
    return n;
}

/* The value of double @p i of an allreduce contribution: a 20-bit integer,
 * so that any sum over the ranks is exact in any order. */
static double pattern_value(uint64_t seed, size_t i)
{
    return (double)(pattern_word(seed, i) >> 44);
}

/* fill_host's counterpart for allreduce: n / 8 doubles of pattern_value. */
static void fill_values(char *h, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n / 8; i++) {
        double v = pattern_value(seed, i);
        memcpy(h + 8 * i, &v, 8);
    }
}

/* Put fill's pattern (fill_host, fill_values) into buffer @p b of kind @p k;
 * device writes are waited for (cuMemcpyHtoD from pageable memory may return
 * before its DMA lands, docs/mpi.md#streams). */
static void put_pattern(enum kind k, char *b, size_t n, uint64_t seed,
                        void (*fill)(char *, size_t, uint64_t))
{
    if (k == HOST) {
        fill(b, n, seed);
        return;
    }
    fill(scratch, n, seed);
    TD_CHECK(td.cuMemcpyHtoD(dptr(b), scratch, n));
    TD_CHECK(td.cuCtxSynchronize());
}

static void clear(enum kind k, char *b, size_t n)
{
    if (k == HOST) {
        memset(b, 0, n);
        return;
    }
    TD_CHECK(td.cuMemsetD8(dptr(b), 0, n));
    TD_CHECK(td.cuCtxSynchronize());
}

/* Buffer @p b of kind @p k as host memory: itself, or read back from the
 * device with cuMemcpyDtoH into scratch. */
static const char *host_view(enum kind k, const char *b, size_t n)
{
    if (k == HOST)
        return b;
    TD_CHECK(td.cuMemcpyDtoH(scratch, dptr(b), n));
    return scratch;
}

/* 1 if h[0, n) holds the pattern of @p seed; otherwise a FAILED line (naming
 * the sending rank @p from when >= 0) and 0. */
static int pattern_ok(const char *h, size_t n, uint64_t seed, enum test t, int pair, enum kind k,
                      int from)
{
    size_t j = first_wrong(h, n, seed);
    if (j == n)
        return 1;
    char who[32] = "";
    if (from >= 0)
        snprintf(who, sizeof who, " from rank %d", from);
    fprintf(stderr,
            "cucopy_mpi_bench: rank %d: FAILED: %s %s %zu bytes: wrong data received%s "
            "(%s buffer), first at byte %zu: 0x%02x, expected 0x%02x\n",
            rank, test_names[t], pairs[pair].name, n, who, k == HOST ? "host" : "device", j,
            (unsigned char)h[j], pattern_byte(seed, j));
    return 0;
}

/* One measurement's verdict. */
static void count_check(int ok)
{
    checks++;
    if (!ok)
        failures++;
}

/* Check that buffer @p b of kind @p k holds the pattern (read back from the
 * device with cuMemcpyDtoH). */
static void check_pattern(enum kind k, const char *b, size_t n, uint64_t seed, enum test t,
                          int pair)
{
    count_check(pattern_ok(host_view(k, b, n), n, seed, t, pair, k, -1));
}

/* Test, pair, size index and sending rank (< 65536); alltoall adds the
 * receiving rank (seed_block). */
static uint64_t seed_of(enum test t, int pair, int size_index, int sender)
{
    return ((uint64_t)t << 48) | ((uint64_t)pair << 40) | ((uint64_t)size_index << 32) |
           (uint64_t)(sender & 0xffff);
}

static uint64_t seed_block(enum test t, int pair, int size_index, int sender, int receiver)
{
    return seed_of(t, pair, size_index, sender) | ((uint64_t)(receiver & 0xffff) + 1) << 16;
}

static void *host_alloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, n) != 0) {
        fprintf(stderr, "cucopy_mpi_bench: rank %d: no host memory for %zu bytes\n", rank, n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(p, 0, n); /* first touch outside the timed loops */
    return p;
}

/* The measurements' host buffers, as --host-mem says. */
static void *user_host_alloc(size_t n)
{
    if (opt.host_mem == HOST_MEM_PINNED) {
        void *p = NULL;
        TD_CHECK(td.cuMemHostAlloc(&p, n, CD_MEMHOSTALLOC_PORTABLE));
        memset(p, 0, n);
        return p;
    }
    void *p = host_alloc(n);
    if (opt.host_mem == HOST_MEM_REGISTERED)
        TD_CHECK(td.cuMemHostRegister(p, n, CD_MEMHOSTREGISTER_PORTABLE));
    return p;
}

static void user_host_free(void *p)
{
    if (opt.host_mem == HOST_MEM_PINNED) {
        TD_CHECK(td.cuMemFreeHost(p));
        return;
    }
    if (opt.host_mem == HOST_MEM_REGISTERED)
        TD_CHECK(td.cuMemHostUnregister(p));
    free(p);
}

static char *device_alloc(size_t n)
{
    cdDevicePtr p = 0;
    TD_CHECK(td.cuMemAlloc(&p, n));
    return (char *)(uintptr_t)p;
}

/* ---- the measurements ----------------------------------------------------------------- */

/* One iteration of a measurement, on this rank's buffers. */
struct step {
    char *send, *recv;
    size_t n;   /* bytes per message */
    int window; /* messages per bandwidth window */
};

/* osu_latency's iteration: rank 0 sends and receives back, rank 1 the reverse. */
static void ping_pong(const struct step *a)
{
    int peer = 1 - rank;
    if (rank == 0) {
        MPI_OK(MPI_Send(a->send, (int)a->n, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD));
        MPI_OK(MPI_Recv(a->recv, (int)a->n, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE));
    } else {
        MPI_OK(MPI_Recv(a->recv, (int)a->n, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE));
        MPI_OK(MPI_Send(a->send, (int)a->n, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD));
    }
}

/* osu_bw's iteration: rank 0 posts a window of Isends (one slot of the
 * buffer each), rank 1 the matching Irecvs, both Waitall, then rank 1 sends a
 * 1-byte ack (host memory: the time is the data's). */
static void window_of_messages(const struct step *a)
{
    static MPI_Request reqs[4096];
    char ack = 0;
    if (rank == 0) {
        for (int j = 0; j < a->window; j++)
            MPI_OK(MPI_Isend(a->send + (size_t)j * a->n, (int)a->n, MPI_BYTE, 1, TAG_DATA,
                             MPI_COMM_WORLD, &reqs[j]));
        MPI_OK(MPI_Waitall(a->window, reqs, MPI_STATUSES_IGNORE));
        MPI_OK(MPI_Recv(&ack, 1, MPI_BYTE, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    } else {
        for (int j = 0; j < a->window; j++)
            MPI_OK(MPI_Irecv(a->recv + (size_t)j * a->n, (int)a->n, MPI_BYTE, 0, TAG_DATA,
                             MPI_COMM_WORLD, &reqs[j]));
        MPI_OK(MPI_Waitall(a->window, reqs, MPI_STATUSES_IGNORE));
        MPI_OK(MPI_Send(&ack, 1, MPI_BYTE, 0, TAG_ACK, MPI_COMM_WORLD));
    }
}

/* A barrier, then @p warm untimed and @p iters timed calls of @p step:
 * seconds of the timed ones. */
static double timed_loop(int warm, int iters, void (*step)(const struct step *),
                         const struct step *a)
{
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = 0;
    for (int i = 0; i < warm + iters; i++) {
        if (i == warm)
            t0 = MPI_Wtime();
        step(a);
    }
    return MPI_Wtime() - t0;
}

/* Latency: one-way us = half the average round trip. Each rank checks what
 * it received. */
static void run_latency(int pair, int si)
{
    size_t n = opt.sizes[si];
    enum kind k = pairs[pair].k[rank];
    struct step a = {.send = sendbuf[k], .recv = recvbuf[k], .n = n, .window = 1};
    int iters = timed_iters(LAT, n);
    put_pattern(k, a.send, n, seed_of(LAT, pair, si, rank), fill_host);
    clear(k, a.recv, n);
    double t = timed_loop(warmup_iters(LAT, n), iters, ping_pong, &a);
    check_pattern(k, a.recv, n, seed_of(LAT, pair, si, 1 - rank), LAT, pair);
    result[LAT][pair][si] = t * 1e6 / (2.0 * iters);
    iters_used[LAT][si] = iters;
}

/* Bandwidth: MB/s = 1e6 bytes/s of data over the timed windows. Rank 1
 * checks every slot. */
static void run_bandwidth(int pair, int si)
{
    size_t n = opt.sizes[si];
    enum kind k = pairs[pair].k[rank];
    struct step a = {.send = sendbuf[k], .recv = recvbuf[k], .n = n, .window = bw_window(n)};
    int iters = timed_iters(BW, n);
    size_t total = (size_t)a.window * n;
    if (rank == 0)
        put_pattern(k, a.send, total, seed_of(BW, pair, si, 0), fill_host);
    else
        clear(k, a.recv, total);
    double t = timed_loop(warmup_iters(BW, n), iters, window_of_messages, &a);
    if (rank == 1)
        check_pattern(k, a.recv, total, seed_of(BW, pair, si, 0), BW, pair);
    result[BW][pair][si] = (double)n * a.window * iters / t / 1e6;
    iters_used[BW][si] = iters;
    window_used[si] = a.window;
}

/* osu_allreduce's call: n / 8 doubles, MPI_SUM. */
static void allreduce_call(const struct step *a)
{
    MPI_OK(MPI_Allreduce(a->send, a->recv, (int)(a->n / 8), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
}

/* osu_bcast's: rank 0's send buffer into the others' receive buffers. */
static void bcast_call(const struct step *a)
{
    MPI_OK(MPI_Bcast(rank == 0 ? a->send : a->recv, (int)a->n, MPI_BYTE, 0, MPI_COMM_WORLD));
}

/* osu_alltoall's: a block of n bytes to and from every rank. */
static void alltoall_call(const struct step *a)
{
    MPI_OK(MPI_Alltoall(a->send, (int)a->n, MPI_BYTE, a->recv, (int)a->n, MPI_BYTE,
                        MPI_COMM_WORLD));
}

/* Check that buffer @p b of kind @p k holds, double by double, the sum of
 * every rank's fill_values (read back from the device with cuMemcpyDtoH). */
static void check_sum(enum kind k, const char *b, size_t n, int pair, int si)
{
    const char *h = host_view(k, b, n);
    for (size_t i = 0; i < n / 8; i++) {
        double got, want = 0;
        memcpy(&got, h + 8 * i, 8);
        for (int r = 0; r < nranks; r++)
            want += pattern_value(seed_of(ALLREDUCE, pair, si, r), i);
        if (got != want) {
            fprintf(stderr,
                    "cucopy_mpi_bench: rank %d: FAILED: allreduce %s %zu bytes: wrong sum "
                    "received (%s buffer), first at double %zu: %.17g, expected %.17g\n",
                    rank, pairs[pair].name, n, k == HOST ? "host" : "device", i, got, want);
            count_check(0);
            return;
        }
    }
    count_check(1);
}

/* A collective over every rank, all with host (H-H) or all with device
 * (D-D) buffers: us per call, averaged over the ranks (as OSU's). Every
 * rank checks what it received: allreduce the sum, bcast rank 0's pattern
 * (the others), alltoall each block its sender's. */
static void run_collective(enum test t, int pair, int si)
{
    size_t n = opt.sizes[si];
    enum kind k = pairs[pair].k[0];
    struct step a = {.send = sendbuf[k], .recv = recvbuf[k], .n = n, .window = 1};
    void (*call)(const struct step *) = alltoall_call;
    if (t == ALLREDUCE) {
        a.n = n / 8 * 8; /* whole doubles; none: not measured */
        if (a.n == 0)
            return;
        put_pattern(k, a.send, a.n, seed_of(t, pair, si, rank), fill_values);
        clear(k, a.recv, a.n);
        call = allreduce_call;
    } else if (t == BCAST) {
        if (rank == 0)
            put_pattern(k, a.send, n, seed_of(t, pair, si, 0), fill_host);
        else
            clear(k, a.recv, n);
        call = bcast_call;
    } else {
        for (int r = 0; r < nranks; r++)
            put_pattern(k, a.send + (size_t)r * n, n, seed_block(t, pair, si, rank, r), fill_host);
        clear(k, a.recv, n * (size_t)nranks);
    }
    int iters = timed_iters(t, n);
    double us = timed_loop(warmup_iters(t, n), iters, call, &a) * 1e6 / iters;
    if (t == ALLREDUCE) {
        check_sum(k, a.recv, a.n, pair, si);
    } else if (t == BCAST) {
        if (rank != 0)
            check_pattern(k, a.recv, n, seed_of(t, pair, si, 0), t, pair);
    } else {
        const char *h = host_view(k, a.recv, n * (size_t)nranks);
        int ok = 1;
        for (int r = 0; r < nranks; r++)
            ok &= pattern_ok(h + (size_t)r * n, n, seed_block(t, pair, si, r, rank), t, pair, k, r);
        count_check(ok);
    }
    double sum = 0;
    MPI_OK(MPI_Reduce(&us, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
    result[t][pair][si] = sum / nranks;
    iters_used[t][si] = iters;
}

/* The raw driver's synchronous 8-byte copies between pinned host memory and
 * this rank's device, us per copy: the "short copy" the shim adds to each
 * end of a small device message. */
static void measure_short(double *h2d_us, double *d2h_us)
{
    void *h = NULL;
    cdDevicePtr d = 0;
    TD_CHECK(td.cuMemHostAlloc(&h, 8, CD_MEMHOSTALLOC_PORTABLE));
    TD_CHECK(td.cuMemAlloc(&d, 8));
    memset(h, 0x5a, 8);
    int iters = opt.iters > 0 ? opt.iters : 10000;
    int warm = opt.warmup >= 0 ? opt.warmup : 100;
    for (int dir = 0; dir < 2; dir++) {
        double t0 = 0;
        for (int i = 0; i < warm + iters; i++) {
            if (i == warm)
                t0 = MPI_Wtime();
            if (dir == 0)
                TD_CHECK(td.cuMemcpyHtoD(d, h, 8));
            else
                TD_CHECK(td.cuMemcpyDtoH(h, d, 8));
        }
        double us = (MPI_Wtime() - t0) * 1e6 / iters;
        *(dir == 0 ? h2d_us : d2h_us) = us;
    }
    TD_CHECK(td.cuMemFree(d));
    TD_CHECK(td.cuMemFreeHost(h));
}

/* 8, 4K, 1M: the --sizes spelling. */
static const char *size_str(size_t n, char s[32])
{
    if (n >= MIB && n % MIB == 0)
        snprintf(s, 32, "%zuM", n / MIB);
    else if (n >= KIB && n % KIB == 0)
        snprintf(s, 32, "%zuK", n / KIB);
    else
        snprintf(s, 32, "%zu", n);
    return s;
}

/* ---- what the run sees ------------------------------------------------------------------ */


/* Rank 0's flag, then the lowest of the other ranks' (rank 1's of two), on
 * rank 0. */
static void both(int mine, int out[2])
{
    int others = rank == 0 ? 1 : mine;
    out[0] = mine;
    MPI_OK(MPI_Reduce(&others, &out[1], 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD));
}

/* "rank 1", or "ranks 1-N" with more than two: the others of both(). */
static const char *others_name(void)
{
    static char s[32];
    if (nranks == 2)
        return "rank 1";
    snprintf(s, sizeof s, "ranks 1-%d", nranks - 1);
    return s;
}

static const char *yes(int v)
{
    return v ? "yes" : "no";
}

static void print_header(const char *devname[2])
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, "\n,")] = '\0';
    for (char *c = lib; *c; c++)
        if (*c == '\t')
            *c = ' ';
    const char *drv = getenv("CUCOPY_CUDA_DRIVER");
    const char *pre = getenv("LD_PRELOAD");
    const char *mode = getenv("CUCOPY_MPI");
    const char *pool = getenv("CUCOPY_MPI_POOL_MB");
    int preload = pre != NULL && strstr(pre, "libcucopy_mpi") != NULL;
    int m[2];
    both(mpi_prog_mapped("/libcucopy_mpi") == 1, m);
    if (rank != 0)
        return;
    printf("# cucopy_mpi_bench: %d ranks, %s\n", nranks, lib);
    printf("# driver: %s, CUDA %d.%d%s\n", drv && *drv ? drv : "libcuda.so.1",
           td.driver_version / 1000, td.driver_version % 1000 / 10,
           td.is_fake ? " (FAKE driver: the timings mean nothing, only the checks do)" : "");
    printf("# devices: rank 0 device %d (%s), %s device %d (%s)\n", opt.device[0], devname[0],
           others_name(), opt.device[1], devname[1]);
    char every[32] = "both ranks";
    if (nranks > 2)
        snprintf(every, sizeof every, "all %d ranks", nranks);
    if (preload && m[0] && m[1])
        printf("# shim: LD_PRELOAD=%s (libcucopy_mpi mapped on %s), CUCOPY_MPI=%s, "
               "CUCOPY_MPI_POOL_MB=%s\n",
               pre, every, mode ? mode : "(unset: auto)", pool ? pool : "(unset: 1024)");
    else
        printf("# shim: NOT LOADED (LD_PRELOAD=%s; libcucopy_mpi mapped: rank 0 %s, %s %s): "
               "device buffers reach MPI unchanged (a non-CUDA-aware MPI faults on them)\n",
               pre ? pre : "(unset)", yes(m[0]), others_name(), yes(m[1]));
    static const char *const host_mem_text[HOST_MEM_KINDS] = {
        "malloc'd (page-aligned, pageable)", "pinned (cuMemHostAlloc, --host-mem pinned)",
        "malloc'd and registered (cuMemHostRegister, --host-mem registered)"};
    printf("# buffers: host = %s, device = cuMemAlloc on the "
           "rank's device, from the driver (this program never calls cucopy)\n",
           host_mem_text[opt.host_mem]);
    printf("# pairs (rank 0 - rank 1): H-H host-host, D-D device-device, H-D host-device, D-H "
           "device-host; bw sends rank 0 -> rank 1; the collectives: H-H every rank's buffers "
           "host, D-D every rank's device\n");
    if (opt.iters > 0)
        printf("# iterations: %d timed per size (--iters)", opt.iters);
    else
        printf("# iterations: OSU's (lat 10000 up to 8K, 1000 above; bw 100 / 20 windows; "
               "collectives 100 / 20 calls), capped per size at ~1 GiB (lat) / 2 GiB (bw, "
               "collectives: per rank) moved (column iters)");
    if (opt.warmup >= 0)
        printf(", after %d untimed (--warmup)\n", opt.warmup);
    else
        printf(", after OSU's untimed ones (lat 100 / 10, bw and collectives 10 / 2; at most a "
               "quarter)\n");
    char sz[32];
    if (opt.test_on[BW])
        printf("# bw window: %d messages in flight, halved for a size until window x size <= "
               "%s (--inflight; column window)\n",
               opt.window, size_str(opt.inflight, sz));
    printf("# every measurement verified: the receiver's buffer is compared with the sender's "
           "pattern after the timed loop (device: read back with cuMemcpyDtoH); allreduce: "
           "with the sum of every rank's values, on every rank\n");
}

static void print_cell(double v, int digits)
{
    if (v < 0)
        printf(" %11s", "-");
    else
        printf(" %11.*f", digits, v);
}

static void print_table(enum test t)
{
    if (t == LAT)
        printf("\n# latency, one-way us (half the round trip of blocking Send/Recv ping-pong)\n");
    else if (t == BW)
        printf("\n# bandwidth, MB/s = 1e6 bytes/s (window of Isend/Irecv, Waitall, 1-byte "
               "host ack)\n");
    else if (t == ALLREDUCE)
        printf("\n# allreduce, us per call averaged over the %d ranks (MPI_Allreduce of size / 8 "
               "doubles, MPI_SUM)\n",
               nranks);
    else if (t == BCAST)
        printf("\n# bcast, us per call averaged over the %d ranks (MPI_Bcast of size bytes from "
               "rank 0)\n",
               nranks);
    else
        printf("\n# alltoall, us per call averaged over the %d ranks (MPI_Alltoall, a block of "
               "size bytes to and from each rank)\n",
               nranks);
    /* The collectives have the H-H and D-D columns only (pairs 0 and 1). */
    int npairs = is_collective(t) ? DD + 1 : NPAIRS;
    printf("# %9s", "size");
    for (int p = 0; p < npairs; p++)
        printf(" %11s", pairs[p].name);
    printf(" %11s %8s", "D-D/H-H", "iters");
    if (t == BW)
        printf(" %6s", "window");
    printf("\n");
    for (int si = 0; si < opt.nsizes; si++) {
        char sz[32];
        printf(" %10s", size_str(opt.sizes[si], sz));
        for (int p = 0; p < npairs; p++)
            print_cell(result[t][p][si], t == BW ? 1 : 2);
        double hh = result[t][HH][si], dd = result[t][DD][si];
        print_cell(hh > 0 && dd >= 0 ? dd / hh : -1, 2);
        printf(" %8d", iters_used[t][si]);
        if (t == BW)
            printf(" %6d", window_used[si]);
        printf("\n");
    }
}

/* A goal "@p ratio >= @p min at every size >= 1M" of test @p t: the lowest
 * D-D/H-H (@p host_over_device: H-H/D-D, for times) at those sizes. */
static void print_ratio_goal(const char *goal, enum test t, int host_over_device, double min)
{
    const char *ratio = host_over_device ? "H-H/D-D" : "D-D/H-H";
    if (!opt.test_on[t] || !opt.pair_on[HH] || !opt.pair_on[DD]) {
        printf("# goal %s: not measured (needs --tests %s and pairs hh,dd)\n", goal,
               test_names[t]);
        return;
    }
    double worst = -1;
    int at = -1;
    for (int si = 0; si < opt.nsizes; si++) {
        double hh = result[t][HH][si], dd = result[t][DD][si];
        double r = host_over_device ? hh / dd : dd / hh;
        if (opt.sizes[si] >= MIB && (at < 0 || r < worst))
            worst = r, at = si;
    }
    char sz[32];
    if (at < 0)
        printf("# goal %s: not measured (no size >= 1M)\n", goal);
    else
        printf("# goal %s: %s >= %.2f at every size >= 1M: lowest %.2f (at %s): %s\n", goal,
               ratio, min, worst, size_str(opt.sizes[at], sz), worst >= min ? "MET" : "NOT MET");
}

/* The goals of issue 10 (lat, bw) and 13 (allreduce) as measured numbers
 * (rank 0): those of the tests run. */
static void print_goals(double h2d, double d2h)
{
    printf("\n");
    if (opt.test_on[ALLREDUCE])
        print_ratio_goal("allreduce", ALLREDUCE, 1, 0.7);
    if (!opt.test_on[LAT] && !opt.test_on[BW])
        return;
    print_ratio_goal("bandwidth", BW, 0, 0.5);
    int s8 = -1;
    for (int si = 0; si < opt.nsizes; si++)
        if (opt.sizes[si] == 8)
            s8 = si;
    if (!opt.test_on[LAT] || !opt.pair_on[HH] || !opt.pair_on[DD] || s8 < 0) {
        printf("# goal latency: not measured (needs --tests lat, pairs hh,dd and size 8)\n");
        return;
    }
    double two_short;
    char how[200];
    if (opt.short_us >= 0) {
        two_short = 2 * opt.short_us;
        snprintf(how, sizeof how, "2 x %.2f us from --short-us", opt.short_us);
    } else {
        two_short = h2d + d2h;
        snprintf(how, sizeof how,
                 "measured here on rank 0's device with the raw driver, pinned host memory: "
                 "8 B cuMemcpyHtoD %.2f us + cuMemcpyDtoH %.2f us",
                 h2d, d2h);
    }
    double hh = result[LAT][HH][s8], dd = result[LAT][DD][s8];
    double limit = hh + two_short;
    printf("# goal latency: D-D 8 B %.2f us <= H-H %.2f us + 2 x short %.2f us = %.2f us: %s "
           "(%+.2f us)\n",
           dd, hh, two_short, limit, dd <= limit ? "MET" : "NOT MET", dd - limit);
    printf("#   2 x short: %s\n", how);
}

/* ---- main ------------------------------------------------------------------------------- */

/* 1 on every rank when @p ok is 1 on every rank. */
/* ---- the x-face of a 3-D block ------------------------------------------------------ */

/* One exchange: both ranks MPI_Sendrecv @p count x @p type from @p send to
 * @p recv with the other rank. */
struct face_step {
    char *send, *recv;
    int count;
    MPI_Datatype stype, rtype;
};

static double face_loop(int warm, int iters, const struct face_step *f)
{
    int peer = 1 - rank;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = 0;
    for (int i = 0; i < warm + iters; i++) {
        if (i == warm)
            t0 = MPI_Wtime();
        MPI_OK(MPI_Sendrecv(f->send, f->count, f->stype, peer, TAG_DATA, f->recv, f->count,
                            f->rtype, peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }
    return (MPI_Wtime() - t0) * 1e6 / iters;
}

static double face_value(int r, size_t i)
{
    return (double)r * 1e9 + (double)i;
}

/* An N^3 array of doubles (x fastest): each rank sends its face x = 1 into
 * the other's face x = 0 (N^2 blocks of 8 bytes, N * 8 bytes apart: one
 * subarray type each), then N^2 * 8 contiguous bytes the same way; D-D and
 * H-H. After the loops the array must hold the peer's face at x = 0 and its
 * own values everywhere else (no byte outside the face written). */
static void run_xface(void)
{
    int n = opt.xface_n ? opt.xface_n : opt.verify ? 32 : 256;
    size_t cells = (size_t)n * n * n, bytes = cells * sizeof(double);
    size_t face = (size_t)n * n * sizeof(double);
    int iters = opt.iters ? opt.iters : opt.verify ? 5 : 100;
    int warm = opt.warmup >= 0 ? opt.warmup : opt.verify ? 1 : 10;
    int sizes[3] = {n, n, n}, subs[3] = {n, n, 1}, s1[3] = {0, 0, 1}, s0[3] = {0, 0, 0};
    MPI_Datatype x1, x0;
    MPI_OK(MPI_Type_create_subarray(3, sizes, subs, s1, MPI_ORDER_C, MPI_DOUBLE, &x1));
    MPI_OK(MPI_Type_create_subarray(3, sizes, subs, s0, MPI_ORDER_C, MPI_DOUBLE, &x0));
    MPI_OK(MPI_Type_commit(&x1));
    MPI_OK(MPI_Type_commit(&x0));
    double *h = host_alloc(bytes);
    double us[2][2]; /* [HOST/DEVICE][subarray, contiguous] */
    for (int k = HOST; k <= DEVICE; k++) {
        char *a = k == DEVICE ? device_alloc(bytes) : host_alloc(bytes);
        char *cs = k == DEVICE ? device_alloc(face) : host_alloc(face);
        char *cr = k == DEVICE ? device_alloc(face) : host_alloc(face);
        for (size_t i = 0; i < cells; i++)
            h[i] = face_value(rank, i);
        if (k == DEVICE) {
            TD_CHECK(td.cuMemcpyHtoD(dptr(a), h, bytes));
            TD_CHECK(td.cuMemsetD8(dptr(cs), 1, face));
            TD_CHECK(td.cuCtxSynchronize());
        } else {
            memcpy(a, h, bytes);
            memset(cs, 1, face);
        }
        struct face_step sub = {a, a, 1, x1, x0};
        struct face_step flat = {cs, cr, (int)face, MPI_BYTE, MPI_BYTE};
        us[k][0] = face_loop(warm, iters, &sub);
        us[k][1] = face_loop(warm, iters, &flat);
        if (k == DEVICE)
            TD_CHECK(td.cuMemcpyDtoH(h, dptr(a), bytes));
        else
            memcpy(h, a, bytes);
        int ok = 1;
        for (size_t i = 0; i < cells && ok; i++) {
            double want = i % (size_t)n == 0 ? face_value(1 - rank, i + 1) : face_value(rank, i);
            ok = h[i] == want;
        }
        count_check(ok);
        if (!ok)
            fprintf(stderr, "cucopy_mpi_bench: rank %d: xface %s: wrong data in the array\n",
                    rank, k == DEVICE ? "D-D" : "H-H");
        if (k == DEVICE) {
            TD_CHECK(td.cuMemFree(dptr(a)));
            TD_CHECK(td.cuMemFree(dptr(cs)));
            TD_CHECK(td.cuMemFree(dptr(cr)));
        } else {
            free(a);
            free(cs);
            free(cr);
        }
    }
    free(h);
    MPI_OK(MPI_Type_free(&x1));
    MPI_OK(MPI_Type_free(&x0));
    if (rank != 0)
        return;
    printf("# x-face exchange, us per MPI_Sendrecv (%d timed, %d warmup): the x-face of a %d^3 "
           "double array as a subarray type (%d x %d blocks of 8 B, %zu B) against %zu "
           "contiguous bytes\n",
           iters, warm, n, n, n, face, face);
    printf("#   pair    subarray  contiguous   ratio\n");
    for (int k = HOST; k <= DEVICE; k++)
        printf("    %s  %10.2f  %10.2f  %6.2f\n", k == DEVICE ? "D-D" : "H-H", us[k][0],
               us[k][1], us[k][0] / us[k][1]);
    double r = us[DEVICE][0] / us[DEVICE][1];
    printf("# goal x-face: D-D subarray <= 2.0 x D-D contiguous: %.2f: %s\n", r,
           r <= 2.0 ? "MET" : "NOT MET");
}

static int all_ok(int ok)
{
    int all = 0;
    MPI_OK(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    return all;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int p = parse_args(argc, argv);
    if (p == 0 && (nranks < 2 || (nranks != 2 && (opt.test_on[LAT] || opt.test_on[BW] ||
                                                  opt.test_on[XFACE])))) {
        if (rank == 0)
            fprintf(stderr,
                    "cucopy_mpi_bench: needs %s 2 ranks (mpirun -n 2), not %d (lat and bw: "
                    "exactly 2, the collectives: 2 or more)\n",
                    nranks < 2 ? "at least" : "exactly", nranks);
        p = -1;
    }
    if (p != 0) {
        MPI_Finalize();
        return p > 0 ? 0 : 1;
    }

    /* The driver and this rank's device, current for the whole run (as a
     * CUDA program's primary context is). */
    int ok = testdrv_load() == 0;
    int dev = opt.device[rank == 0 ? 0 : 1];
    char devname[128] = "?";
    if (ok && dev >= td.device_count) {
        fprintf(stderr, "cucopy_mpi_bench: rank %d: --device %d: the driver has %d device(s)\n",
                rank, dev, td.device_count);
        ok = 0;
    }
    if (!all_ok(ok)) {
        MPI_Finalize();
        return 1;
    }
    cdDevice d;
    TD_CHECK(td.cuDeviceGet(&d, dev));
    TD_CHECK(td.cuDevicePrimaryCtxRetain(&ctx, d));
    TD_CHECK(td.cuCtxSetCurrent(ctx));
    TD_CHECK(td.cuDeviceGetName(devname, sizeof devname, d));

    buf_bytes = 0;
    for (int si = 0; si < opt.nsizes; si++)
        for (int t = 0; t < NTESTS; t++) {
            size_t w = iter_bytes((enum test)t, opt.sizes[si]);
            if (opt.test_on[t] && t != XFACE && w > buf_bytes)
                buf_bytes = w;
        }
    if (buf_bytes == 0)
        buf_bytes = 4096; /* xface alone: it allocates its own */
    sendbuf[HOST] = user_host_alloc(buf_bytes);
    recvbuf[HOST] = user_host_alloc(buf_bytes);
    scratch = host_alloc(buf_bytes);
    sendbuf[DEVICE] = device_alloc(buf_bytes);
    recvbuf[DEVICE] = device_alloc(buf_bytes);
    for (int t = 0; t < NTESTS; t++)
        for (int q = 0; q < NPAIRS; q++)
            for (int si = 0; si < MAX_SIZES; si++)
                result[t][q][si] = -1;

    char peer_name[128] = "";
    if (rank == 1)
        MPI_OK(MPI_Send(devname, sizeof devname, MPI_CHAR, 0, TAG_ACK, MPI_COMM_WORLD));
    else if (rank == 0)
        MPI_OK(MPI_Recv(peer_name, sizeof peer_name, MPI_CHAR, 1, TAG_ACK, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE));
    const char *names[2] = {devname, peer_name};
    print_header(names);
    fflush(stdout);

    /* The short copies first, rank 0 alone on its device. */
    double h2d = -1, d2h = -1;
    if (rank == 0 && opt.short_us < 0 && opt.test_on[LAT])
        measure_short(&h2d, &d2h);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    for (int t = 0; t < NTESTS; t++) {
        if (!opt.test_on[t] || t == XFACE)
            continue;
        for (int q = 0; q < NPAIRS; q++) {
            if (!opt.pair_on[q] || (is_collective((enum test)t) && q != HH && q != DD))
                continue;
            for (int si = 0; si < opt.nsizes; si++) {
                if (t == LAT)
                    run_latency(q, si);
                else if (t == BW)
                    run_bandwidth(q, si);
                else
                    run_collective((enum test)t, q, si);
            }
        }
        if (rank == 0) {
            print_table((enum test)t);
            fflush(stdout);
        }
    }
    if (rank == 0)
        print_goals(h2d, d2h);
    if (opt.test_on[XFACE])
        run_xface();

    int cu[2];
    both(mpi_prog_mapped("/libcucopy.so") == 1, cu);
    if (rank == 0)
        printf("# libcucopy.so.0 mapped after the run (the shim loaded it to stage device "
               "buffers): rank 0 %s, %s %s\n",
               yes(cu[0]), others_name(), yes(cu[1]));

    TD_CHECK(td.cuMemFree(dptr(sendbuf[DEVICE])));
    TD_CHECK(td.cuMemFree(dptr(recvbuf[DEVICE])));
    user_host_free(sendbuf[HOST]);
    user_host_free(recvbuf[HOST]);
    free(scratch);

    int total = 0;
    MPI_OK(MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    fflush(stdout);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (failures == 0)
        printf("cucopy_mpi_bench: rank %d: PASS (%d measurements verified)\n", rank, checks);
    else
        printf("cucopy_mpi_bench: rank %d: FAILED (%d of %d measurements had wrong data)\n",
               rank, failures, checks);
    MPI_Finalize();
    return total == 0 ? 0 : 2;
}
