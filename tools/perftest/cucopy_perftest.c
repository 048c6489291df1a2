/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cucopy_perftest: latency, bandwidth and message rate of cucopy, per
 * direction and device pair, with pinned and pageable host memory, one device
 * at a time or all devices at once from one iface; every measurement is
 * repeated in the same run, on the same buffers, with the same loop written on
 * raw CUDA driver calls, and the ratio is printed.
 *
 * cucopy is used only through include/cucopy.h. The raw driver (allocation,
 * data checks, baseline loops) comes from tests/common/testdrv.h, which loads
 * $CUCOPY_CUDA_DRIVER or libcuda.so.1 like the library does, so the same
 * binary runs on the fake driver and on real GPUs.
 *
 * Operations per direction (cucopy side; the raw side is cuMemcpyAsync from
 * the same source to the same destination):
 *   h2d   put_short / put_zcopy, local = host buffer, remote = device buffer
 *   d2h   get_short / get_zcopy, local = host buffer, remote = device buffer
 *   d2d   put_short / put_zcopy within one device
 *   peer  put_short / put_zcopy from GPU i to GPU j (every ordered pair)
 *
 * The cucopy loops run on the main thread with the primary context of device
 * 0 current, as a typical application has it (--current changes it); one iface and one ep serve
 * every device. The raw loops make the right context current once before the
 * loop (one stream per copy lane; with --concurrent one thread switches
 * between the lanes' contexts), which is what a careful user does.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cucopy.h"
#include "testdrv.h"

/* ------------------------------------------------------------------------ */
/* Options                                                                  */

enum direction { DIR_H2D, DIR_D2H, DIR_D2D, DIR_PEER, DIR_COUNT };
static const char *const dir_names[DIR_COUNT] = {"h2d", "d2h", "d2d", "peer"};

enum test_kind { TEST_LAT, TEST_BW, TEST_RATE, TEST_COUNT };
static const char *const test_names[TEST_COUNT] = {"lat", "bw", "rate"};
static const char *const test_units[TEST_COUNT] = {"us", "GB/s", "Mops/s"};

enum host_kind { HOST_PINNED, HOST_PAGEABLE, HOST_REGISTERED, HOST_COUNT, HOST_NONE = -1 };
static const char *const host_names[HOST_COUNT] = {"pinned", "pageable", "registered"};

enum impl { IMPL_CUCOPY, IMPL_RAW, IMPL_COUNT };

#define MAX_DEVICES 64
#define MAX_SIZES 64
#define VERIFY_BYTES 64
#define MAX_REPEAT 32
#define MIN_ITERS 3

struct options {
    int devices[MAX_DEVICES]; /* selected ordinals, in order */
    int ndevices;             /* 0: all */
    unsigned dirs;            /* bit per direction; 0: all that apply */
    unsigned hosts;           /* bit per host kind */
    size_t sizes[MAX_SIZES];
    int nsizes;
    size_t rate_sizes[MAX_SIZES];
    int nrate_sizes; /* 0: the --sizes up to 64 KiB, else 8 */
    unsigned tests;
    long iters_cap;   /* 0: no cap */
    long warmup;      /* -1: automatic */
    int window;
    int iov; /* iov entries per zcopy (bw, rate); the raw side: as many cuMemcpyAsync */
    int batch; /* bw, rate: each op is one cucopy_ep_copy_batch of this many copies; 0: none */
    int memh;  /* --memh: cucopy copies name memory handles of every buffer */
    int repeat; /* --repeat: rounds per row, cucopy and raw alternating; medians */
    int compare; /* --compare: a summary line per row, the cost per operation over raw */
    int anatomy; /* --anatomy: where the window loops' time goes (issue, progress) */
    int concurrent;
    int stats; /* --stats: cucopy_iface_stats at the end */
    int csv;
    int current; /* device whose primary context is current; -1: none */
    double target_s;  /* seconds per measurement */
    double timeout_s; /* one loop longer than this is a hang */
    struct shape2d { size_t width, height, pitch; } shapes[MAX_SIZES]; /* --2d */
    int nshapes; /* > 0: only the 2-D rows */
};

static struct options opt = {
    .hosts = 1u << HOST_PINNED,
    .tests = (1u << TEST_COUNT) - 1,
    .warmup = -1,
    .window = 8,
    .iov = 1,
    .repeat = 1,
    .current = 0,
    .target_s = 0.2,
    .timeout_s = 60.0,
};

static const size_t default_sizes[] = {8, 4096, 65536, 1 << 20, 16 << 20, 256 << 20};

/* ------------------------------------------------------------------------ */
/* State                                                                    */

struct device {
    int used;      /* selected by --devices */
    int retained;  /* primary context retained */
    cdDevice dev;
    cdContext pctx;
    char name[128];
    cdDevicePtr src; /* device buffer in the source role */
    cdDevicePtr dst; /* device buffer in the destination role */
    void *host_src[HOST_COUNT];
    void *host_dst[HOST_COUNT];
    cucopy_memh_h host_memh[HOST_COUNT][2]; /* HOST_REGISTERED: cucopy_mem_reg of src, dst */
};

static struct device devs[MAX_DEVICES];
static int ndev_total; /* from cucopy_device_count */
static size_t buf_size; /* every buffer holds the largest requested size */

static cucopy_context_h cctx;
static cucopy_iface_h iface;
static cucopy_ep_h ep;

static int failures;        /* verification or operation failures */
static int ctx_violations;  /* cucopy calls that left another current context */
static unsigned pattern_seed = 1;
/* The context current on the main thread while cucopy runs (--current). */
static cdContext home_ctx;
static char home_label[64];
static char peer_info[1024]; /* "0->1 on, 1->0 on" for the header */

/* One copy stream: a source, a destination and the context that runs it. */
struct lane {
    enum direction dir;
    int src_dev; /* -1: host */
    int dst_dev; /* -1: host */
    int ctx_dev; /* whose context runs the raw copy (source device for peer) */
    uint64_t src;
    uint64_t dst;
    int is_get; /* cucopy op is get (local = dst host buffer, remote = src) */
    cucopy_memh_h src_memh, dst_memh; /* --memh: cucopy_mem_describe of src and dst */
    /* raw baseline */
    cdStream stream;
    cdEvent *events;
    /* window loops */
    long issued;
    long completed;
    int finished;
};

struct measurement {
    enum test_kind test;
    enum direction dir;
    int host; /* enum host_kind or HOST_NONE */
    size_t size;
    struct lane *lanes;
    int nlanes;
};

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cucopy_perftest: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static void cu_error(const char *call, int st)
{
    fprintf(stderr, "cucopy_perftest: %s: %s (%d): %s\n", call,
            cucopy_status_string((cucopy_status_t)st), st, cucopy_last_error());
}

static void drv_error(const char *call, cdResult r)
{
    fprintf(stderr, "cucopy_perftest: %s: %s (%u)\n", call, testdrv_error_name(r), r);
}

static void fmt_size(char *buf, size_t len, size_t size)
{
    if (size >= (1u << 30) && size % (1u << 30) == 0)
        snprintf(buf, len, "%zuG", size >> 30);
    else if (size >= (1u << 20) && size % (1u << 20) == 0)
        snprintf(buf, len, "%zuM", size >> 20);
    else if (size >= 1024 && size % 1024 == 0)
        snprintf(buf, len, "%zuK", size >> 10);
    else
        snprintf(buf, len, "%zu", size);
}

static void push_ctx(int d)
{
    TD_CHECK(td.cuCtxPushCurrent(devs[d].pctx));
}

static void pop_ctx(void)
{
    cdContext c;
    TD_CHECK(td.cuCtxPopCurrent(&c));
}

/* ------------------------------------------------------------------------ */
/* Command line                                                             */

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: cucopy_perftest [options]\n"
            "Latency, bandwidth and message rate of cucopy against the same loop on raw\n"
            "CUDA driver calls, in the same run on the same buffers.\n"
            "\n"
            "  --devices all|N[,N...]   devices to use (default all)\n"
            "  --dirs LIST              h2d,d2h,d2d,peer (default all that apply; peer is\n"
            "                           GPU i -> GPU j for every ordered pair, needs 2 devices)\n"
            "  --host pinned|pageable|registered|both|all\n"
            "                                host memory for h2d/d2h (default pinned; both:\n"
            "                                pinned and pageable; all: the three)\n"
            "  --sizes LIST             sizes with K/M/G suffixes (binary)\n"
            "                           (default 8,4K,64K,1M,16M,256M)\n"
            "  --rate-sizes LIST        sizes for the rate test (default: the --sizes up to\n"
            "                           64K, or 8 if there is none)\n"
            "  --tests LIST             lat,bw,rate (default all)\n"
            "  --iters N                upper bound on timed iterations (default: chosen per\n"
            "                           measurement so that it takes about --time seconds)\n"
            "  --warmup N               untimed iterations first (default: up to 16, ~50 ms)\n"
            "  --window W               outstanding zcopy ops for bw and rate (default 8)\n"
            "  --iov N                  bw and rate: each op is N iov entries of size/N bytes\n"
            "                           (sizes must be multiples of N; default 1); raw: N\n"
            "                           cuMemcpyAsync and one cuEventRecord per op\n"
            "  --batch N                bw and rate: each cucopy op is one cucopy_ep_copy_batch of\n"
            "                           N copies of size/N bytes; raw: one cuMemcpyAsync and one\n"
            "                           cuEventRecord per copy; rate counts copies\n"
            "  --memh                   cucopy copies pass memory handles (cucopy_mem_describe)\n"
            "                           of every buffer: no pointer query per copy\n"
            "  --repeat R               measure each row R times, cucopy and raw alternating\n"
            "                           (raw first in every other round); print the medians\n"
            "                           and the range of the per-round ratios (default 1)\n"
            "  --compare                after each row, a summary line: the time per operation\n"
            "                           of cucopy and of raw and what cucopy costs over raw\n"
            "                           (lat: per copy; bw: per op of SIZE; rate: 1/rate);\n"
"                           table format only\n"
            "  --anatomy                bw and rate: after each row, where the last timed\n"
            "                           round's time went on each side: issuing (cucopy's\n"
            "                           zcopy or batch call; raw's cuMemcpyAsync + event record)\n"
            "                           and completing (cucopy_iface_progress calls; raw's\n"
            "                           cuEventQuery calls), per operation; the clock reads\n"
            "                           add a little to both; table format only\n"
            "  --time SEC               target time per measurement (default 0.2)\n"
            "  --timeout SEC            a loop running longer is reported as hung (default 60)\n"
            "  --concurrent             bw and rate on all chosen devices (all pairs for peer)\n"
            "                           at once from one iface; aggregate numbers. The raw\n"
            "                           baseline uses one stream per device from one thread.\n"
            "                           lat is always measured per device.\n"
            "  --stats                  print cucopy_iface_stats of the run at the end\n"
            "  --format table|csv       output format (default table)\n"
            "  --current N|none         context current on the thread calling cucopy: the\n"
            "                           primary context of device N (default 0), or none\n"
            "  --2d WxH:PITCH[,...]     instead of the tests above: strided copies of H rows of\n"
            "                           W bytes, PITCH apart on the device, packed on the host\n"
            "                           (d2h gathers, h2d scatters), on the first --devices\n"
            "                           device and each --host kind; cucopy_ep_copy_2d against\n"
            "                           one raw cuMemcpy2DAsync per op, each op waited for\n"
            "  --help                   this text\n"
            "\n"
            "lat:  put_short (h2d, d2d, peer) or get_short (d2h) of each size, average us\n"
            "      per op; raw: cuMemcpyAsync + cuStreamSynchronize.\n"
            "bw:   put_zcopy/get_zcopy with W ops outstanding, progress polled, GB/s (1e9);\n"
            "      raw: cuMemcpyAsync + cuEventRecord per op, cuEventQuery polling.\n"
            "rate: as bw, in million ops per second.\n"
            "2d:   cucopy_ep_copy_2d + progress until it completes, us per op; raw:\n"
            "      cuMemcpy2DAsync + cuStreamSynchronize.\n"
            "ratio > 1.0 means cucopy is faster (lat and 2d: raw/cucopy; bw and rate: cucopy/raw).\n"
            "Exit status: 0 success, 1 usage or setup error, 2 a copy failed or produced\n"
            "wrong data, or cucopy changed the caller's current context.\n"
            "Environment: CUCOPY_CUDA_DRIVER selects the driver (e.g. the fake one).\n");
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s)
        return -1;
    unsigned long long mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1ull << 10; end++; break;
    case 'm': case 'M': mult = 1ull << 20; end++; break;
    case 'g': case 'G': mult = 1ull << 30; end++; break;
    default: break;
    }
    if (mult > 1 && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end != '\0' || v == 0 || v > (unsigned long long)SIZE_MAX / mult)
        return -1;
    *out = (size_t)(v * mult);
    return 0;
}

/* Split a comma list; calls fn for every item; fn returns -1 on a bad item. */
static void parse_list(const char *what, const char *arg, int (*fn)(const char *item, void *arg),
                       void *fnarg)
{
    char *copy = strdup(arg);
    if (copy == NULL)
        die("out of memory");
    char *save = NULL;
    int n = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (fn(tok, fnarg) != 0) {
            fprintf(stderr, "cucopy_perftest: bad %s '%s'\n", what, tok);
            free(copy);
            exit(1);
        }
        n++;
    }
    free(copy);
    if (n == 0)
        die("empty %s list", what);
}

struct size_list {
    size_t *sizes;
    int *n;
};

static int add_size(const char *item, void *arg)
{
    struct size_list *l = arg;
    size_t s;
    if (*l->n >= MAX_SIZES || parse_size(item, &s) != 0)
        return -1;
    l->sizes[(*l->n)++] = s;
    return 0;
}

static int add_device(const char *item, void *arg)
{
    (void)arg;
    char *end;
    errno = 0;
    long v = strtol(item, &end, 10);
    if (errno != 0 || end == item || *end != '\0' || v < 0 || v >= MAX_DEVICES ||
        opt.ndevices >= MAX_DEVICES)
        return -1;
    for (int i = 0; i < opt.ndevices; i++)
        if (opt.devices[i] == (int)v)
            return -1;
    opt.devices[opt.ndevices++] = (int)v;
    return 0;
}

static int add_dir(const char *item, void *arg)
{
    (void)arg;
    for (int d = 0; d < DIR_COUNT; d++)
        if (strcmp(item, dir_names[d]) == 0) {
            opt.dirs |= 1u << d;
            return 0;
        }
    return -1;
}

static int add_test(const char *item, void *arg)
{
    (void)arg;
    for (int t = 0; t < TEST_COUNT; t++)
        if (strcmp(item, test_names[t]) == 0) {
            opt.tests |= 1u << t;
            return 0;
        }
    return -1;
}

/* --2d: WxH:PITCH, sizes with K/M/G suffixes. */
static int add_shape(const char *item, void *arg)
{
    (void)arg;
    char w[64], h[64], p[64];
    if (opt.nshapes == MAX_SIZES || sscanf(item, "%63[^x]x%63[^:]:%63s", w, h, p) != 3)
        return -1;
    struct shape2d *sh = &opt.shapes[opt.nshapes];
    if (parse_size(w, &sh->width) != 0 || parse_size(h, &sh->height) != 0 ||
        parse_size(p, &sh->pitch) != 0 || sh->width == 0 || sh->height == 0 ||
        sh->pitch < sh->width || sh->height > SIZE_MAX / sh->pitch)
        return -1;
    opt.nshapes++;
    return 0;
}

static long parse_long(const char *what, const char *s, long min)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min)
        die("bad %s '%s'", what, s);
    return v;
}

static double parse_double(const char *what, const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v > 0))
        die("bad %s '%s'", what, s);
    return v;
}

static void parse_options(int argc, char **argv)
{
    enum {
        O_DEVICES = 256, O_DIRS, O_HOST, O_SIZES, O_RATE_SIZES, O_TESTS, O_ITERS, O_WARMUP,
        O_WINDOW, O_IOV, O_BATCH, O_MEMH, O_REPEAT, O_COMPARE, O_ANATOMY, O_TIME, O_TIMEOUT, O_CONCURRENT, O_STATS, O_FORMAT, O_CURRENT, O_2D, O_HELP
    };
    static const struct option longopts[] = {
        {"devices", required_argument, NULL, O_DEVICES},
        {"dirs", required_argument, NULL, O_DIRS},
        {"host", required_argument, NULL, O_HOST},
        {"sizes", required_argument, NULL, O_SIZES},
        {"rate-sizes", required_argument, NULL, O_RATE_SIZES},
        {"tests", required_argument, NULL, O_TESTS},
        {"iters", required_argument, NULL, O_ITERS},
        {"warmup", required_argument, NULL, O_WARMUP},
        {"window", required_argument, NULL, O_WINDOW},
        {"iov", required_argument, NULL, O_IOV},
        {"batch", required_argument, NULL, O_BATCH},
        {"memh", no_argument, NULL, O_MEMH},
        {"repeat", required_argument, NULL, O_REPEAT},
        {"compare", no_argument, NULL, O_COMPARE},
        {"anatomy", no_argument, NULL, O_ANATOMY},
        {"time", required_argument, NULL, O_TIME},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"concurrent", no_argument, NULL, O_CONCURRENT},
        {"stats", no_argument, NULL, O_STATS},
        {"format", required_argument, NULL, O_FORMAT},
        {"current", required_argument, NULL, O_CURRENT},
        {"2d", required_argument, NULL, O_2D},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    int tests_set = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_DEVICES:
            opt.ndevices = 0;
            if (strcmp(optarg, "all") != 0)
                parse_list("device", optarg, add_device, NULL);
            break;
        case O_DIRS:
            opt.dirs = 0;
            if (strcmp(optarg, "all") != 0)
                parse_list("direction", optarg, add_dir, NULL);
            break;
        case O_HOST:
            if (strcmp(optarg, "pinned") == 0)
                opt.hosts = 1u << HOST_PINNED;
            else if (strcmp(optarg, "pageable") == 0)
                opt.hosts = 1u << HOST_PAGEABLE;
            else if (strcmp(optarg, "registered") == 0)
                opt.hosts = 1u << HOST_REGISTERED;
            else if (strcmp(optarg, "both") == 0) /* kept for compatibility */
                opt.hosts = (1u << HOST_PINNED) | (1u << HOST_PAGEABLE);
            else if (strcmp(optarg, "all") == 0)
                opt.hosts = (1u << HOST_PINNED) | (1u << HOST_PAGEABLE) | (1u << HOST_REGISTERED);
            else
                die("bad --host '%s' (pinned, pageable, registered, both or all)", optarg);
            break;
        case O_2D:
            parse_list("2d shape", optarg, add_shape, NULL);
            break;
        case O_SIZES: {
            opt.nsizes = 0;
            struct size_list l = {opt.sizes, &opt.nsizes};
            parse_list("size", optarg, add_size, &l);
            break;
        }
        case O_RATE_SIZES: {
            opt.nrate_sizes = 0;
            struct size_list l = {opt.rate_sizes, &opt.nrate_sizes};
            parse_list("size", optarg, add_size, &l);
            break;
        }
        case O_TESTS:
            if (!tests_set)
                opt.tests = 0;
            tests_set = 1;
            opt.tests = 0;
            parse_list("test", optarg, add_test, NULL);
            break;
        case O_ITERS:
            opt.iters_cap = parse_long("--iters", optarg, 1);
            break;
        case O_WARMUP:
            opt.warmup = parse_long("--warmup", optarg, 0);
            break;
        case O_WINDOW:
            opt.window = (int)parse_long("--window", optarg, 1);
            if (opt.window > 65536)
                die("--window too large");
            break;
        case O_IOV:
            opt.iov = (int)parse_long("--iov", optarg, 1);
            if (opt.iov > 64)
                die("--iov %d: at most 64 (cucopy_iface_attr_t max_iov)", opt.iov);
            break;
        case O_TIME:
            opt.target_s = parse_double("--time", optarg);
            break;
        case O_TIMEOUT:
            opt.timeout_s = parse_double("--timeout", optarg);
            break;
        case O_BATCH:
            opt.batch = (int)parse_long("--batch", optarg, 1);
            if (opt.batch > 64)
                die("--batch %d: at most 64 (cucopy_iface_attr_t max_iov)", opt.batch);
            break;
        case O_MEMH:
            opt.memh = 1;
            break;
        case O_REPEAT:
            opt.repeat = (int)parse_long("--repeat", optarg, 1);
            if (opt.repeat > MAX_REPEAT)
                die("--repeat %d: at most %d", opt.repeat, MAX_REPEAT);
            break;
        case O_COMPARE:
            opt.compare = 1;
            break;
        case O_ANATOMY:
            opt.anatomy = 1;
            break;
        case O_CONCURRENT:
            opt.concurrent = 1;
            break;
        case O_STATS:
            opt.stats = 1;
            break;
        case O_FORMAT:
            if (strcmp(optarg, "table") == 0)
                opt.csv = 0;
            else if (strcmp(optarg, "csv") == 0)
                opt.csv = 1;
            else
                die("bad --format '%s' (table or csv)", optarg);
            break;
        case O_CURRENT:
            if (strcmp(optarg, "none") == 0)
                opt.current = -1;
            else
                opt.current = (int)parse_long("--current", optarg, 0);
            if (opt.current >= MAX_DEVICES)
                die("bad --current '%s'", optarg);
            break;
        case 'h':
        case O_HELP:
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(1);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "cucopy_perftest: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        exit(1);
    }
    if (opt.nshapes > 0) {
        /* The 2-D rows allocate their own buffers: the common ones stay small. */
        opt.nsizes = opt.nrate_sizes = 1;
        opt.sizes[0] = opt.rate_sizes[0] = 8;
    }
    if (opt.nsizes == 0) {
        opt.nsizes = (int)(sizeof(default_sizes) / sizeof(default_sizes[0]));
        memcpy(opt.sizes, default_sizes, sizeof(default_sizes));
    }
    if (opt.nrate_sizes == 0) {
        for (int i = 0; i < opt.nsizes; i++)
            if (opt.sizes[i] <= 65536)
                opt.rate_sizes[opt.nrate_sizes++] = opt.sizes[i];
        if (opt.nrate_sizes == 0)
            opt.rate_sizes[opt.nrate_sizes++] = 8;
    }
    if (opt.batch > 0 && opt.iov > 1)
        die("--batch and --iov exclude each other");
    for (int i = 0; i < opt.nsizes + opt.nrate_sizes && opt.batch > 1; i++) {
        size_t size = i < opt.nsizes ? opt.sizes[i] : opt.rate_sizes[i - opt.nsizes];
        if (size % (size_t)opt.batch != 0)
            die("--batch %d: size %zu is not a multiple of it", opt.batch, size);
    }
    for (int i = 0; i < opt.nsizes + opt.nrate_sizes && opt.iov > 1; i++) {
        size_t size = i < opt.nsizes ? opt.sizes[i] : opt.rate_sizes[i - opt.nsizes];
        if (size % (size_t)opt.iov != 0)
            die("--iov %d: size %zu is not a multiple of it", opt.iov, size);
    }
}

/* ------------------------------------------------------------------------ */
/* Setup and teardown                                                       */

static int dir_uses_host(enum direction d)
{
    return d == DIR_H2D || d == DIR_D2H;
}

static void setup(void)
{
    if (testdrv_load() != 0)
        die("cannot load the CUDA driver");

    cucopy_status_t st = cucopy_context_create(NULL, &cctx);
    if (st != CUCOPY_OK) {
        cu_error("cucopy_context_create", st);
        exit(1);
    }
    st = cucopy_device_count(cctx, &ndev_total);
    if (st != CUCOPY_OK) {
        cu_error("cucopy_device_count", st);
        exit(1);
    }
    if (ndev_total <= 0)
        die("no CUDA device");
    if (ndev_total > MAX_DEVICES)
        ndev_total = MAX_DEVICES;
    if (ndev_total != td.device_count)
        fprintf(stderr, "cucopy_perftest: warning: cucopy shows %d devices, the driver %d\n",
                ndev_total, td.device_count);

    if (opt.ndevices == 0) {
        for (int d = 0; d < ndev_total; d++)
            opt.devices[opt.ndevices++] = d;
    }
    for (int i = 0; i < opt.ndevices; i++) {
        if (opt.devices[i] >= ndev_total)
            die("device %d does not exist (%d devices)", opt.devices[i], ndev_total);
        devs[opt.devices[i]].used = 1;
    }

    unsigned applicable = (1u << DIR_H2D) | (1u << DIR_D2H) | (1u << DIR_D2D);
    if (opt.ndevices >= 2)
        applicable |= 1u << DIR_PEER;
    if (opt.dirs == 0) {
        opt.dirs = applicable;
    } else if (opt.dirs & ~applicable) {
        fprintf(stderr, "cucopy_perftest: warning: peer needs two devices; skipped\n");
        opt.dirs &= applicable;
        if (opt.dirs == 0)
            die("nothing to measure");
    }

    buf_size = 0;
    for (int i = 0; i < opt.nsizes; i++)
        if ((opt.tests & ((1u << TEST_LAT) | (1u << TEST_BW))) && opt.sizes[i] > buf_size)
            buf_size = opt.sizes[i];
    for (int i = 0; i < opt.nrate_sizes; i++)
        if ((opt.tests & (1u << TEST_RATE)) && opt.rate_sizes[i] > buf_size)
            buf_size = opt.rate_sizes[i];
    if (buf_size == 0)
        die("nothing to measure");

    /* Primary contexts: the selected devices, and the --current one (device
     * 0 by default: current on this thread while cucopy runs, as in a typical
     * application). */
    if (opt.current >= ndev_total)
        die("--current %d: device does not exist (%d devices)", opt.current, ndev_total);
    for (int d = 0; d < ndev_total; d++) {
        if (!devs[d].used && d != opt.current)
            continue;
        TD_CHECK(td.cuDeviceGet(&devs[d].dev, d));
        TD_CHECK(td.cuDevicePrimaryCtxRetain(&devs[d].pctx, devs[d].dev));
        devs[d].retained = 1;
        if (td.cuDeviceGetName(devs[d].name, (int)sizeof(devs[d].name), devs[d].dev) !=
            CD_SUCCESS)
            snprintf(devs[d].name, sizeof(devs[d].name), "?");
    }

    int need_host_src = (opt.dirs >> DIR_H2D) & 1;
    int need_host_dst = (opt.dirs >> DIR_D2H) & 1;
    for (int d = 0; d < ndev_total; d++) {
        if (!devs[d].used)
            continue;
        push_ctx(d);
        TD_CHECK(td.cuMemAlloc(&devs[d].src, buf_size));
        TD_CHECK(td.cuMemAlloc(&devs[d].dst, buf_size));
        TD_CHECK(td.cuMemsetD8(devs[d].src, 0x5a, buf_size));
        TD_CHECK(td.cuMemsetD8(devs[d].dst, 0x00, buf_size));
        TD_CHECK(td.cuCtxSynchronize());
        for (int h = 0; h < HOST_COUNT; h++) {
            if (!(opt.hosts & (1u << h)))
                continue;
            for (int role = 0; role < 2; role++) {
                if (role == 0 ? !need_host_src : !need_host_dst)
                    continue;
                void *p = NULL;
                if (h == HOST_PINNED) {
                    TD_CHECK(td.cuMemHostAlloc(&p, buf_size, CD_MEMHOSTALLOC_PORTABLE));
                } else if (posix_memalign(&p, h == HOST_REGISTERED ? 4096 : 64, buf_size) != 0) {
                    die("cannot allocate %zu bytes of host memory", buf_size);
                }
                memset(p, role == 0 ? 0x5a : 0x00, buf_size); /* touch every page */
                if (h == HOST_REGISTERED) {
                    /* Pinned by cucopy for every context (PORTABLE); the raw
                     * baseline runs on the same buffer, which it cannot
                     * register a second time. */
                    st = cucopy_mem_reg(cctx, p, buf_size, 0, &devs[d].host_memh[h][role]);
                    if (st != CUCOPY_OK) {
                        cu_error("cucopy_mem_reg", st);
                        exit(1);
                    }
                }
                if (role == 0)
                    devs[d].host_src[h] = p;
                else
                    devs[d].host_dst[h] = p;
            }
        }
        pop_ctx();
    }

    /* Peer access for the raw baseline (and so for cucopy too, which shares
     * the contexts), where the hardware allows it. */
    if (opt.dirs & (1u << DIR_PEER)) {
        for (int i = 0; i < opt.ndevices; i++)
            for (int j = 0; j < opt.ndevices; j++) {
                int a = opt.devices[i], b = opt.devices[j];
                if (a == b)
                    continue;
                int can = 0;
                cdResult r = CD_ERROR_PEER_ACCESS_UNSUPPORTED;
                if (td.cuDeviceCanAccessPeer(&can, devs[a].dev, devs[b].dev) == CD_SUCCESS &&
                    can) {
                    push_ctx(a);
                    r = td.cuCtxEnablePeerAccess(devs[b].pctx, 0);
                    pop_ctx();
                    if (r != CD_SUCCESS && r != CD_ERROR_PEER_ACCESS_ALREADY_ENABLED)
                        drv_error("cuCtxEnablePeerAccess", r);
                }
                size_t used = strlen(peer_info);
                snprintf(peer_info + used, sizeof(peer_info) - used, "%s%d->%d %s",
                         used ? ", " : "", a, b,
                         r == CD_SUCCESS || r == CD_ERROR_PEER_ACCESS_ALREADY_ENABLED
                             ? "on"
                             : "off (driver's staged path)");
            }
    }

    cucopy_iface_params_t ip = {.field_mask = CUCOPY_IFACE_PARAM_THREAD_MODE,
                                .thread_mode = CUCOPY_THREAD_MODE_SINGLE};
    st = cucopy_iface_open(cctx, &ip, &iface);
    if (st != CUCOPY_OK) {
        cu_error("cucopy_iface_open", st);
        exit(1);
    }
    st = cucopy_ep_create(iface, &ep);
    if (st != CUCOPY_OK) {
        cu_error("cucopy_ep_create", st);
        exit(1);
    }

    /* From here on, home_ctx is current on this thread. */
    if (opt.current >= 0) {
        home_ctx = devs[opt.current].pctx;
        snprintf(home_label, sizeof(home_label), "device %d's primary context", opt.current);
    } else {
        home_ctx = NULL;
        snprintf(home_label, sizeof(home_label), "no context");
    }
    TD_CHECK(td.cuCtxSetCurrent(home_ctx));
}

/* --stats: what the iface counted over the whole run, per device and direction. */
static void print_stats(void)
{
    static const char *const dirs[CUCOPY_DIR_COUNT] = {"h2d", "d2h", "d2d", "peer", "host"};
    static cucopy_incarnation_stats_t lives[64];
    cucopy_iface_stats_t s = {.field_mask = CUCOPY_IFACE_STATS_EVENTS | CUCOPY_IFACE_STATS_DIRECTIONS |
                                            CUCOPY_IFACE_STATS_DEVICES | CUCOPY_IFACE_STATS_CONTEXTS |
                                            CUCOPY_IFACE_STATS_INCARNATIONS,
                              .incarnations = lives,
                              .incarnations_capacity = 64};
    cucopy_status_t st = cucopy_iface_stats(iface, &s);
    if (st != CUCOPY_OK) {
        cu_error("cucopy_iface_stats", st);
        return;
    }
    printf("# cucopy_iface_stats: %llu NO_RESOURCE, %llu flushes, %llu fences; contexts %llu seen, "
           "%llu released, %llu reset\n",
           (unsigned long long)s.no_resource, (unsigned long long)s.flushes,
           (unsigned long long)s.fences, (unsigned long long)s.contexts_seen,
           (unsigned long long)s.contexts_released, (unsigned long long)s.contexts_reset);
    printf("# %-8s %-5s %14s %14s %18s\n", "device", "dir", "operations", "pieces", "bytes");
    for (int d = 0; d < s.device_count; d++)
        for (int k = 0; k < CUCOPY_DIR_HOST; k++) {
            int j = d * CUCOPY_DIR_COUNT + k;
            if (s.device_pieces[j] != 0)
                printf("# %-8d %-5s %14llu %14llu %18llu\n", d, dirs[k],
                       (unsigned long long)s.device_operations[j],
                       (unsigned long long)s.device_pieces[j], (unsigned long long)s.device_bytes[j]);
        }
    if (s.dir_pieces[CUCOPY_DIR_HOST] != 0)
        printf("# %-8s %-5s %14llu %14llu %18llu\n", "-", "host",
               (unsigned long long)s.dir_operations[CUCOPY_DIR_HOST],
               (unsigned long long)s.dir_pieces[CUCOPY_DIR_HOST],
               (unsigned long long)s.dir_bytes[CUCOPY_DIR_HOST]);
    static const char *const states[] = {"live", "released", "reset"};
    printf("# context lives: %zu (%llu ended ones no longer kept)\n", s.incarnations_count,
           (unsigned long long)s.incarnations_dropped);
    for (size_t i = 0; i < s.incarnations_count && i < 64; i++)
        for (int k = 0; k < CUCOPY_DIR_HOST; k++)
            if (lives[i].pieces[k] != 0)
                printf("#   life %llu: device %d, context id %llu, lane %d, %s: %s %llu ops %llu "
                       "pieces %llu bytes\n",
                       (unsigned long long)lives[i].serial, lives[i].device,
                       (unsigned long long)lives[i].context_id, lives[i].lane,
                       states[lives[i].state % 3], dirs[k], (unsigned long long)lives[i].operations[k],
                       (unsigned long long)lives[i].pieces[k], (unsigned long long)lives[i].bytes[k]);
}

static void teardown(void)
{
    cucopy_status_t st;
    if (opt.stats)
        print_stats();
    if ((st = cucopy_ep_destroy(ep)) != CUCOPY_OK)
        cu_error("cucopy_ep_destroy", st);
    if ((st = cucopy_iface_close(iface)) != CUCOPY_OK)
        cu_error("cucopy_iface_close", st);
    for (int d = 0; d < ndev_total; d++)
        for (int role = 0; role < 2; role++)
            if ((st = cucopy_mem_dereg(cctx, devs[d].host_memh[HOST_REGISTERED][role])) !=
                CUCOPY_OK)
                cu_error("cucopy_mem_dereg", st);
    if ((st = cucopy_context_destroy(cctx)) != CUCOPY_OK)
        cu_error("cucopy_context_destroy", st);

    TD_CHECK(td.cuCtxSetCurrent(NULL));
    for (int d = 0; d < ndev_total; d++) {
        if (!devs[d].retained)
            continue;
        push_ctx(d);
        if (devs[d].src)
            TD_CHECK(td.cuMemFree(devs[d].src));
        if (devs[d].dst)
            TD_CHECK(td.cuMemFree(devs[d].dst));
        for (int h = 0; h < HOST_COUNT; h++) {
            void *p[2] = {devs[d].host_src[h], devs[d].host_dst[h]};
            for (int k = 0; k < 2; k++) {
                if (p[k] == NULL)
                    continue;
                if (h == HOST_PINNED)
                    TD_CHECK(td.cuMemFreeHost(p[k]));
                else
                    free(p[k]);
            }
        }
        pop_ctx();
        TD_CHECK(td.cuDevicePrimaryCtxRelease(devs[d].dev));
    }
}

/* ------------------------------------------------------------------------ */
/* Data check: the first and last bytes of the destination                  */

static unsigned char pattern_byte(unsigned seed, size_t off)
{
    return (unsigned char)(seed * 131u + (unsigned)off * 7u + 1u);
}

static void mem_write(int dev, uint64_t addr, const void *buf, size_t n)
{
    if (dev < 0) {
        memcpy((void *)(uintptr_t)addr, buf, n);
        return;
    }
    push_ctx(dev);
    TD_CHECK(td.cuMemcpyHtoD(addr, buf, n));
    pop_ctx();
}

static void mem_read(int dev, uint64_t addr, void *buf, size_t n)
{
    if (dev < 0) {
        memcpy(buf, (const void *)(uintptr_t)addr, n);
        return;
    }
    push_ctx(dev);
    TD_CHECK(td.cuMemcpyDtoH(buf, addr, n));
    pop_ctx();
}

/* Head [0, h) and tail [size - h, size) of a buffer, h = min(size, 64). */
static void check_ranges(size_t size, size_t off[2], size_t *len)
{
    *len = size < VERIFY_BYTES ? size : VERIFY_BYTES;
    off[0] = 0;
    off[1] = size - *len;
}

/* Fresh pattern in every source, its complement in every destination. */
static unsigned arm_check(const struct measurement *m)
{
    unsigned seed = pattern_seed++;
    size_t off[2], len;
    check_ranges(m->size, off, &len);
    unsigned char want[VERIFY_BYTES], wrong[VERIFY_BYTES];
    for (int l = 0; l < m->nlanes; l++) {
        const struct lane *ln = &m->lanes[l];
        for (int k = 0; k < 2; k++) {
            for (size_t i = 0; i < len; i++) {
                want[i] = pattern_byte(seed, off[k] + i);
                wrong[i] = (unsigned char)~want[i];
            }
            mem_write(ln->src_dev, ln->src + off[k], want, len);
            mem_write(ln->dst_dev, ln->dst + off[k], wrong, len);
        }
    }
    return seed;
}

static const char *dev_label(int dev, char buf[16])
{
    if (dev < 0)
        return "host";
    snprintf(buf, 16, "%d", dev);
    return buf;
}

static int verify(const struct measurement *m, unsigned seed, const char *who)
{
    char sbuf[16], dbuf[16];
    size_t off[2], len;
    check_ranges(m->size, off, &len);
    unsigned char got[VERIFY_BYTES];
    int ok = 1;
    for (int l = 0; l < m->nlanes; l++) {
        const struct lane *ln = &m->lanes[l];
        for (int k = 0; k < 2 && ok; k++) {
            mem_read(ln->dst_dev, ln->dst + off[k], got, len);
            for (size_t i = 0; i < len; i++) {
                if (got[i] != pattern_byte(seed, off[k] + i)) {
                    fprintf(stderr,
                            "cucopy_perftest: VERIFY FAILED (%s) %s %s size %zu %s->%s: "
                            "byte %zu is 0x%02x, expected 0x%02x\n",
                            who, test_names[m->test], dir_names[m->dir], m->size,
                            dev_label(ln->src_dev, sbuf), dev_label(ln->dst_dev, dbuf),
                            off[k] + i, got[i], pattern_byte(seed, off[k] + i));
                    ok = 0;
                    break;
                }
            }
        }
    }
    return ok ? 0 : -1;
}

static void check_current_context(const char *after)
{
    cdContext cur = NULL;
    TD_CHECK(td.cuCtxGetCurrent(&cur));
    if (cur != home_ctx) {
        fprintf(stderr,
                "cucopy_perftest: LIBRARY BUG: current context is %p after %s, was %p "
                "(%s)\n",
                (void *)cur, after, (void *)home_ctx, home_label);
        ctx_violations++;
        TD_CHECK(td.cuCtxSetCurrent(home_ctx));
    }
}

/* ------------------------------------------------------------------------ */
/* cucopy loops                                                             */

static cucopy_status_t cu_short(const struct lane *ln, size_t size)
{
    if (opt.memh && ln->is_get)
        return cucopy_ep_get_short_memh(ep, (void *)(uintptr_t)ln->dst, ln->dst_memh, size,
                                        ln->src, ln->src_memh);
    if (opt.memh)
        return cucopy_ep_put_short_memh(ep, (const void *)(uintptr_t)ln->src, ln->src_memh, size,
                                        ln->dst, ln->dst_memh);
    if (ln->is_get)
        return cucopy_ep_get_short(ep, (void *)(uintptr_t)ln->dst, size, ln->src);
    return cucopy_ep_put_short(ep, (const void *)(uintptr_t)ln->src, size, ln->dst);
}

/* --batch: one cucopy_ep_copy_batch of opt.batch copies of size/batch bytes,
 * back to back on both sides. */
static cucopy_status_t cu_batch(const struct lane *ln, size_t size, cucopy_completion_t *comp)
{
    cucopy_copy_t cp[64];
    size_t piece = size / (size_t)opt.batch;
    for (int k = 0; k < opt.batch; k++) {
        uint64_t off = (uint64_t)k * piece;
        cp[k] = (cucopy_copy_t){(void *)(uintptr_t)(ln->dst + off),
                                (const void *)(uintptr_t)(ln->src + off), piece, ln->dst_memh,
                                ln->src_memh};
    }
    return cucopy_ep_copy_batch(ep, cp, (size_t)opt.batch, comp);
}

/* A zcopy of size bytes as opt.iov entries, back to back on both sides. */
static cucopy_status_t cu_zcopy(const struct lane *ln, size_t size, cucopy_completion_t *comp)
{
    if (opt.batch > 0)
        return cu_batch(ln, size, comp);
    size_t piece = size / (size_t)opt.iov;
    uint64_t local = ln->is_get ? ln->dst : ln->src;
    if (opt.memh) {
        cucopy_iov_memh_t iov[64];
        for (int k = 0; k < opt.iov; k++)
            iov[k] = (cucopy_iov_memh_t){(void *)(uintptr_t)(local + (uint64_t)k * piece), piece,
                                         ln->is_get ? ln->dst_memh : ln->src_memh};
        if (ln->is_get)
            return cucopy_ep_get_zcopy_memh(ep, iov, (size_t)opt.iov, ln->src, ln->src_memh,
                                            comp);
        return cucopy_ep_put_zcopy_memh(ep, iov, (size_t)opt.iov, ln->dst, ln->dst_memh, comp);
    }
    cucopy_iov_t iov[64];
    for (int k = 0; k < opt.iov; k++) {
        iov[k].buffer = (void *)(uintptr_t)(local + (uint64_t)k * piece);
        iov[k].length = piece;
    }
    if (ln->is_get)
        return cucopy_ep_get_zcopy(ep, iov, (size_t)opt.iov, ln->src, comp);
    return cucopy_ep_put_zcopy(ep, iov, (size_t)opt.iov, ln->dst, comp);
}

static int cu_lat(struct measurement *m, long n, double *secs)
{
    const struct lane *ln = &m->lanes[0];
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        cucopy_status_t st;
        long spins = 0;
        while ((st = cu_short(ln, m->size)) == CUCOPY_ERR_NO_RESOURCE) {
            int r = cucopy_iface_progress(iface);
            if (r < 0) {
                cu_error("cucopy_iface_progress", r);
                return -1;
            }
            if ((++spins & 1023) == 0 && now_s() - t0 > opt.timeout_s) {
                fprintf(stderr, "cucopy_perftest: short op refused with NO_RESOURCE for %.0f s\n",
                        opt.timeout_s);
                return -1;
            }
        }
        if (st != CUCOPY_OK) {
            cu_error(ln->is_get ? "cucopy_ep_get_short" : "cucopy_ep_put_short", st);
            return -1;
        }
    }
    *secs = now_s() - t0;
    return 0;
}

/* Completion slots of the window loop; `comp` first so the callback can cast. */
struct cu_slot {
    cucopy_completion_t comp;
    struct cu_window *win;
    int lane;
    int index;
};

struct cu_window {
    int nlanes;
    int window;
    struct cu_slot *slots; /* nlanes * window */
    int *free_top;         /* per lane: number of free slots */
    int *free_stack;       /* per lane: window entries */
    long *outstanding;     /* per lane */
    cucopy_status_t error; /* first failed completion */
    long completions;
};

static void cu_slot_done(cucopy_completion_t *comp)
{
    struct cu_slot *s = (struct cu_slot *)comp;
    struct cu_window *w = s->win;
    if (comp->status != CUCOPY_OK && w->error == CUCOPY_OK)
        w->error = comp->status;
    w->outstanding[s->lane]--;
    w->free_stack[s->lane * w->window + w->free_top[s->lane]++] = s->index;
    w->completions++;
}

static struct cu_window *cu_window_new(int nlanes, int window)
{
    struct cu_window *w = calloc(1, sizeof(*w));
    if (w == NULL)
        die("out of memory");
    w->nlanes = nlanes;
    w->window = window;
    w->slots = calloc((size_t)nlanes * (size_t)window, sizeof(*w->slots));
    w->free_top = calloc((size_t)nlanes, sizeof(int));
    w->free_stack = calloc((size_t)nlanes * (size_t)window, sizeof(int));
    w->outstanding = calloc((size_t)nlanes, sizeof(long));
    if (!w->slots || !w->free_top || !w->free_stack || !w->outstanding)
        die("out of memory");
    for (int l = 0; l < nlanes; l++) {
        for (int i = 0; i < window; i++) {
            struct cu_slot *s = &w->slots[l * window + i];
            s->win = w;
            s->lane = l;
            s->index = l * window + i;
            w->free_stack[l * window + i] = s->index;
        }
        w->free_top[l] = window;
    }
    return w;
}

static void cu_window_free(struct cu_window *w)
{
    free(w->slots);
    free(w->free_top);
    free(w->free_stack);
    free(w->outstanding);
    free(w);
}

static long cu_total_outstanding(const struct cu_window *w)
{
    long n = 0;
    for (int l = 0; l < w->nlanes; l++)
        n += w->outstanding[l];
    return n;
}

/* Wait for the copies still in flight after an error; a hang here is fatal
 * (their completion objects must outlive them). */
static void cu_drain(struct cu_window *w)
{
    double t0 = now_s();
    while (cu_total_outstanding(w) > 0) {
        if (cucopy_iface_progress(iface) < 0 || now_s() - t0 > opt.timeout_s)
            die("cannot drain %ld outstanding copies after an error", cu_total_outstanding(w));
    }
}

/* --anatomy: the last window loop's time per side, issuing and completing. */
static struct {
    double issue, complete; /* seconds */
    long ops, calls;        /* operations issued; progress calls or event queries */
} anat[IMPL_COUNT];

static double anat_now(void)
{
    return opt.anatomy ? now_s() : 0;
}

static int cu_window_loop(struct measurement *m, long n, double *secs)
{
    memset(&anat[IMPL_CUCOPY], 0, sizeof(anat[0]));
    const int W = opt.window;
    struct cu_window *w = cu_window_new(m->nlanes, W);
    for (int l = 0; l < m->nlanes; l++)
        m->lanes[l].issued = 0;
    long target = n * m->nlanes;
    anat[IMPL_CUCOPY].ops = target;
    long done = 0; /* finished immediately (OK) or through a completion */
    long spins = 0;
    int rc = 0;
    double t0 = now_s();
    for (;;) {
        for (int l = 0; l < m->nlanes; l++) {
            struct lane *ln = &m->lanes[l];
            while (ln->issued < n && w->outstanding[l] < W) {
                int idx = w->free_stack[l * W + --w->free_top[l]];
                struct cu_slot *s = &w->slots[idx];
                s->comp.func = cu_slot_done;
                s->comp.count = 1;
                s->comp.status = CUCOPY_OK;
                double a = anat_now();
                cucopy_status_t st = cu_zcopy(ln, m->size, &s->comp);
                anat[IMPL_CUCOPY].issue += anat_now() - a;
                if (st == CUCOPY_INPROGRESS) {
                    w->outstanding[l]++;
                    ln->issued++;
                    continue;
                }
                w->free_top[l]++; /* slot not used */
                if (st == CUCOPY_OK) {
                    ln->issued++;
                    done++;
                    continue;
                }
                if (st == CUCOPY_ERR_NO_RESOURCE)
                    break; /* progress, then retry */
                cu_error(ln->is_get ? "cucopy_ep_get_zcopy" : "cucopy_ep_put_zcopy", st);
                rc = -1;
                goto out;
            }
        }
        if (done + w->completions >= target && cu_total_outstanding(w) == 0)
            break;
        double a = anat_now();
        int r = cucopy_iface_progress(iface);
        anat[IMPL_CUCOPY].complete += anat_now() - a;
        anat[IMPL_CUCOPY].calls++;
        if (r < 0) {
            cu_error("cucopy_iface_progress", r);
            rc = -1;
            goto out;
        }
        if (w->error != CUCOPY_OK) {
            fprintf(stderr, "cucopy_perftest: a zcopy completed with %s; last error: %s\n",
                    cucopy_status_string(w->error), cucopy_last_error());
            rc = -1;
            goto out;
        }
        if ((++spins & 1023) == 0 && now_s() - t0 > opt.timeout_s)
            die("zcopy loop made no progress for %.0f s (%ld of %ld done, %ld outstanding): "
                "hang",
                opt.timeout_s, done + w->completions, target, cu_total_outstanding(w));
    }
    *secs = now_s() - t0;
out:
    if (rc != 0)
        cu_drain(w);
    cu_window_free(w);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Raw driver loops                                                         */

static int raw_setup(struct measurement *m)
{
    for (int l = 0; l < m->nlanes; l++) {
        struct lane *ln = &m->lanes[l];
        push_ctx(ln->ctx_dev);
        TD_CHECK(td.cuStreamCreate(&ln->stream, CD_STREAM_NON_BLOCKING));
        if (m->test != TEST_LAT) {
            ln->events = calloc((size_t)opt.window, sizeof(cdEvent));
            if (ln->events == NULL)
                die("out of memory");
            for (int i = 0; i < opt.window; i++)
                TD_CHECK(td.cuEventCreate(&ln->events[i], CD_EVENT_DISABLE_TIMING));
        }
        pop_ctx();
    }
    return 0;
}

static void raw_teardown(struct measurement *m)
{
    for (int l = 0; l < m->nlanes; l++) {
        struct lane *ln = &m->lanes[l];
        push_ctx(ln->ctx_dev);
        TD_CHECK(td.cuStreamSynchronize(ln->stream));
        if (ln->events != NULL) {
            for (int i = 0; i < opt.window; i++)
                TD_CHECK(td.cuEventDestroy(ln->events[i]));
            free(ln->events);
            ln->events = NULL;
        }
        TD_CHECK(td.cuStreamDestroy(ln->stream));
        ln->stream = NULL;
        pop_ctx();
    }
}

static int raw_lat(struct measurement *m, long n, double *secs)
{
    const struct lane *ln = &m->lanes[0];
    cdResult r;
    TD_CHECK(td.cuCtxSetCurrent(devs[ln->ctx_dev].pctx));
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        if ((r = td.cuMemcpyAsync(ln->dst, ln->src, m->size, ln->stream)) != CD_SUCCESS) {
            drv_error("cuMemcpyAsync", r);
            goto fail;
        }
        if ((r = td.cuStreamSynchronize(ln->stream)) != CD_SUCCESS) {
            drv_error("cuStreamSynchronize", r);
            goto fail;
        }
    }
    *secs = now_s() - t0;
    TD_CHECK(td.cuCtxSetCurrent(home_ctx));
    return 0;
fail:
    TD_CHECK(td.cuCtxSetCurrent(home_ctx));
    return -1;
}

static int raw_window_loop(struct measurement *m, long n, double *secs)
{
    const int W = opt.window;
    cdContext cur = NULL;
    cdResult r;
    int rc = 0;
    for (int l = 0; l < m->nlanes; l++) {
        m->lanes[l].issued = 0;
        m->lanes[l].completed = 0;
        m->lanes[l].finished = 0;
    }
    int remaining = m->nlanes;
    long total = opt.batch > 0 ? n * opt.batch : n; /* raw operations per lane */
    memset(&anat[IMPL_RAW], 0, sizeof(anat[0]));
    anat[IMPL_RAW].ops = total * m->nlanes;
    long spins = 0;
    double t0 = now_s();
    while (remaining > 0) {
        for (int l = 0; l < m->nlanes; l++) {
            struct lane *ln = &m->lanes[l];
            if (ln->finished)
                continue;
            cdContext want = devs[ln->ctx_dev].pctx;
            if (cur != want) {
                TD_CHECK(td.cuCtxSetCurrent(want));
                cur = want;
            }
            double a = anat_now();
            while (ln->completed < ln->issued) {
                r = td.cuEventQuery(ln->events[ln->completed % W]);
                anat[IMPL_RAW].calls++;
                if (r == CD_ERROR_NOT_READY)
                    break;
                if (r != CD_SUCCESS) {
                    drv_error("cuEventQuery", r);
                    rc = -1;
                    goto out;
                }
                ln->completed++;
            }
            double b = anat_now();
            anat[IMPL_RAW].complete += b - a;
            while (ln->issued < total && ln->issued - ln->completed < W) {
                /* --batch: every copy of the batch is one raw operation. */
                int pieces = opt.batch > 0 ? 1 : opt.iov;
                size_t piece = m->size / (size_t)(opt.batch > 0 ? opt.batch : opt.iov);
                uint64_t base = opt.batch > 0 ? (uint64_t)(ln->issued % opt.batch) * piece : 0;
                for (int k = 0; k < pieces; k++) {
                    uint64_t off = base + (uint64_t)k * piece;
                    if ((r = td.cuMemcpyAsync(ln->dst + off, ln->src + off, piece, ln->stream)) !=
                        CD_SUCCESS) {
                        drv_error("cuMemcpyAsync", r);
                        rc = -1;
                        goto out;
                    }
                }
                if ((r = td.cuEventRecord(ln->events[ln->issued % W], ln->stream)) != CD_SUCCESS) {
                    drv_error("cuEventRecord", r);
                    rc = -1;
                    goto out;
                }
                ln->issued++;
            }
            anat[IMPL_RAW].issue += anat_now() - b;
            if (ln->completed == total) {
                ln->finished = 1;
                remaining--;
            }
        }
        if ((++spins & 1023) == 0 && now_s() - t0 > opt.timeout_s)
            die("raw driver loop made no progress for %.0f s", opt.timeout_s);
    }
    *secs = now_s() - t0;
out:
    TD_CHECK(td.cuCtxSetCurrent(home_ctx));
    return rc;
}

static int run_loop(struct measurement *m, enum impl impl, long n, double *secs)
{
    *secs = 0;
    if (n <= 0)
        return 0;
    int rc;
    if (m->test == TEST_LAT)
        rc = impl == IMPL_CUCOPY ? cu_lat(m, n, secs) : raw_lat(m, n, secs);
    else
        rc = impl == IMPL_CUCOPY ? cu_window_loop(m, n, secs) : raw_window_loop(m, n, secs);
    if (impl == IMPL_CUCOPY)
        check_current_context("a cucopy loop");
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Measurement                                                              */

/* Warm up, and choose the iteration count when *n is still 0 (the cucopy
 * side runs first; the raw side reuses its count, so both run the same
 * number of operations, unless cucopy failed before choosing one). */
static int warm_and_calibrate(struct measurement *m, enum impl impl, long *n)
{
    double t1, t;
    if (run_loop(m, impl, 1, &t1) != 0) /* first use: lazy resources */
        return -1;
    long w;
    if (opt.warmup >= 0) {
        w = opt.warmup > 0 ? opt.warmup - 1 : 0;
    } else {
        w = 16;
        if (t1 > 0 && 0.05 / t1 < (double)w)
            w = (long)(0.05 / t1);
    }
    double tw = 0;
    if (w > 0 && run_loop(m, impl, w, &tw) != 0)
        return -1;
    if (*n > 0)
        return 0;

    long cap = opt.iters_cap > 0 ? opt.iters_cap : 100000000L;
    double per = w > 0 ? tw / (double)w : t1;
    if (opt.iters_cap > 0 && per * (double)cap <= opt.target_s * 0.5) {
        *n = cap; /* clearly below the target time: no need to measure more */
        return 0;
    }
    /* Time a growing batch until it lasts 5 ms, then scale to the target. */
    long k = 1;
    for (;;) {
        if (run_loop(m, impl, k, &t) != 0)
            return -1;
        if (t >= 0.005 || k >= cap)
            break;
        long next = (t > 0 && 0.005 / t < 8) ? k * 2 : k * 8;
        k = next < cap ? next : cap;
    }
    per = t / (double)k;
    double want = per > 0 ? opt.target_s / per : (double)cap;
    *n = want >= (double)cap ? cap : (long)want;
    if (*n < MIN_ITERS) /* a few samples even for slow operations */
        *n = cap < MIN_ITERS ? cap : MIN_ITERS;
    return 0;
}

static double metric(const struct measurement *m, long n, double secs)
{
    if (secs <= 0)
        return 0;
    double ops = (double)n * (double)(m->test == TEST_LAT ? 1 : m->nlanes);
    if (m->test == TEST_RATE && opt.batch > 0)
        ops *= opt.batch; /* copies: a batch on the cucopy side, one op each on the raw side */
    switch (m->test) {
    case TEST_LAT:
        return secs / ops * 1e6;
    case TEST_BW:
        return ops * (double)m->size / secs / 1e9;
    default:
        return ops / secs / 1e6;
    }
}

/* "host", one ordinal, or the ordinals of every lane joined by '+', ascending. */
static void lanes_label(const struct measurement *m, int src, char *buf, size_t len)
{
    size_t pos = 0;
    buf[0] = '\0';
    for (int d = -1; d < MAX_DEVICES; d++) {
        int present = 0;
        for (int l = 0; l < m->nlanes && !present; l++)
            present = (src ? m->lanes[l].src_dev : m->lanes[l].dst_dev) == d;
        if (!present)
            continue;
        int w = d < 0 ? snprintf(buf + pos, len - pos, "%shost", pos ? "+" : "")
                      : snprintf(buf + pos, len - pos, "%s%d", pos ? "+" : "", d);
        if (w < 0 || (size_t)w >= len - pos)
            break;
        pos += (size_t)w;
    }
}

static void print_header(void)
{
    if (opt.csv) {
        printf("test,dir,src,dst,host,size,cucopy,raw,unit,ratio_gt1_cucopy_faster,iters,"
               "status\n");
        fflush(stdout);
        return;
    }
    unsigned v = cucopy_get_version();
    printf("# cucopy_perftest: cucopy %u.%u.%u (header %d.%d.%d), CUDA driver %d.%d%s, "
           "%d device%s\n",
           v / 10000, v / 100 % 100, v % 100, CUCOPY_VERSION_MAJOR, CUCOPY_VERSION_MINOR,
           CUCOPY_VERSION_PATCH, td.driver_version / 1000, td.driver_version % 1000 / 10,
           td.is_fake ? " (fake driver)" : "", ndev_total, ndev_total == 1 ? "" : "s");
    for (int d = 0; d < ndev_total; d++)
        if (devs[d].used)
            printf("#   device %d: %s\n", d, devs[d].name);
    char iters[64], warm[32];
    if (opt.iters_cap > 0)
        snprintf(iters, sizeof(iters), "auto, at most %ld", opt.iters_cap);
    else
        snprintf(iters, sizeof(iters), "auto");
    if (opt.warmup >= 0)
        snprintf(warm, sizeof(warm), "%ld", opt.warmup);
    else
        snprintf(warm, sizeof(warm), "auto");
    printf("# window %d, iterations %s, warmup %s, target %.3g s per measurement%s\n",
           opt.window, iters, warm, opt.target_s,
           opt.concurrent ? ", bw/rate: all devices at once (aggregate)" : "");
    if (opt.batch > 0)
        printf("# bw/rate: each cucopy op is one cucopy_ep_copy_batch of %d copies of size/%d "
               "bytes; raw: one cuMemcpyAsync + cuEventRecord per copy; rate counts copies\n",
               opt.batch, opt.batch);
    if (opt.memh)
        printf("# cucopy copies name memory handles (cucopy_mem_describe) of every buffer\n");
    if (opt.iov > 1)
        printf("# bw/rate: each op is %d iov entries of size/%d bytes (raw: %d cuMemcpyAsync, "
               "one cuEventRecord); CUCOPY_IOV_BATCH=%s\n",
               opt.iov, opt.iov, opt.iov,
               getenv("CUCOPY_IOV_BATCH") ? getenv("CUCOPY_IOV_BATCH") : "auto");
    if (opt.hosts & (1u << HOST_PAGEABLE)) {
        /* The library's settings (docs/configuration.md); unset ones are its defaults. */
        const char *names[] = {"CUCOPY_STAGE", "CUCOPY_STAGE_THRESHOLD", "CUCOPY_STAGE_CHUNK",
                               "CUCOPY_STAGE_THREADS", "CUCOPY_STAGE_POOL", "CUCOPY_STAGE_CPU"};
        printf("# pageable staging (cucopy copies from the threshold on through its pinned "
               "bounce buffers; raw: the driver's path):");
        for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
            const char *v = getenv(names[k]);
            printf(" %s=%s", names[k] + 7, v != NULL && *v != '\0' ? v : "default");
        }
        printf("\n");
    }
    printf("# host memory: pinned = cuMemHostAlloc(PORTABLE), pageable = posix_memalign, "
           "registered = posix_memalign + cucopy_mem_reg (raw runs on the same buffer); "
           "h2d: put, d2h: get\n");
    if (peer_info[0] != '\0')
        printf("# peer access (enabled here for cucopy and raw alike): %s\n", peer_info);
    printf("# cucopy: one iface + one ep, current: %s; raw: cuMemcpyAsync on a stream per "
           "lane\n",
           home_label);
    printf("# ratio > 1.0 means cucopy is faster (lat: raw/cucopy; bw, rate: cucopy/raw)\n");
    printf("%-4s %-4s %-6s %-6s %-10s %6s %11s %11s %-6s %6s %9s %s\n", "test", "dir", "src",
           "dst", "host", "size", "cucopy", "raw", "unit", "ratio", "iters", "status");
    fflush(stdout);
}

/* About four significant digits without an exponent for usual values. */
static void fmt_value(char *buf, size_t len, int ok, double v)
{
    if (!ok)
        snprintf(buf, len, "ERR");
    else if (v >= 100)
        snprintf(buf, len, "%.1f", v);
    else if (v >= 1)
        snprintf(buf, len, "%.2f", v);
    else if (v >= 0.001)
        snprintf(buf, len, "%.4f", v);
    else
        snprintf(buf, len, "%.3g", v);
}

/* The time one operation of the row takes, in microseconds, from its value
 * (lat: us per copy; bw: GB/s of ops of size bytes; rate: Mops/s). */
static double us_per_op(const struct measurement *m, double v)
{
    switch (m->test) {
    case TEST_LAT:
        return v;
    case TEST_BW:
        return (double)m->size / (v * 1e3);
    default:
        return 1.0 / v;
    }
}

/* --compare's line after a row: both sides' time per operation and the
 * difference (cucopy's cost over raw; negative: cucopy is faster). */
static void print_compare(const struct measurement *m, const double val[IMPL_COUNT],
                          const char *src, const char *dst, const char *host, const char *sz)
{
    double cu = us_per_op(m, val[IMPL_CUCOPY]), raw = us_per_op(m, val[IMPL_RAW]);
    printf("# compare %s %s %s->%s %s %s: per operation cucopy %.3f us, raw %.3f us, "
           "cucopy %+.3f us (%.2f of raw's time)\n",
           test_names[m->test], dir_names[m->dir], src, dst, host, sz, cu, raw, cu - raw,
           cu / raw);
}

static void print_anatomy(const struct measurement *m, const char *src, const char *dst,
                          const char *host, const char *sz)
{
    double c = (double)anat[IMPL_CUCOPY].ops, r = (double)anat[IMPL_RAW].ops;
    printf("# anatomy %s %s %s->%s %s %s (last round): cucopy issue %.3f us/op, progress %.3f "
           "us/op in %.2f calls/op; raw issue %.3f us/%s, polling %.3f us/%s in %.2f "
           "queries/%s\n",
           test_names[m->test], dir_names[m->dir], src, dst, host, sz,
           anat[IMPL_CUCOPY].issue / c * 1e6, anat[IMPL_CUCOPY].complete / c * 1e6,
           anat[IMPL_CUCOPY].calls / c, anat[IMPL_RAW].issue / r * 1e6,
           opt.batch > 0 ? "copy" : "op", anat[IMPL_RAW].complete / r * 1e6,
           opt.batch > 0 ? "copy" : "op", anat[IMPL_RAW].calls / r, opt.batch > 0 ? "copy" : "op");
}

static void print_row(const struct measurement *m, const double val[IMPL_COUNT],
                      const int ok[IMPL_COUNT], long n, const char *status)
{
    char src[64], dst[64], sz[32], cu[32], raw[32], ratio[32];
    lanes_label(m, 1, src, sizeof(src));
    lanes_label(m, 0, dst, sizeof(dst));
    const char *host = m->host == HOST_NONE ? "-" : host_names[m->host];
    fmt_value(cu, sizeof(cu), ok[IMPL_CUCOPY], val[IMPL_CUCOPY]);
    fmt_value(raw, sizeof(raw), ok[IMPL_RAW], val[IMPL_RAW]);
    if (ok[IMPL_CUCOPY] && ok[IMPL_RAW] && val[IMPL_CUCOPY] > 0 && val[IMPL_RAW] > 0) {
        double q = m->test == TEST_LAT ? val[IMPL_RAW] / val[IMPL_CUCOPY]
                                       : val[IMPL_CUCOPY] / val[IMPL_RAW];
        snprintf(ratio, sizeof(ratio), "%.2f", q);
    } else {
        snprintf(ratio, sizeof(ratio), "-");
    }
    if (opt.csv) {
        printf("%s,%s,%s,%s,%s,%zu,%s,%s,%s,%s,%ld,%s\n", test_names[m->test],
               dir_names[m->dir], src, dst, host, m->size, cu, raw, test_units[m->test], ratio,
               n, status);
    } else {
        fmt_size(sz, sizeof(sz), m->size);
        printf("%-4s %-4s %-6s %-6s %-10s %6s %11s %11s %-6s %6s %9ld %s\n",
               test_names[m->test], dir_names[m->dir], src, dst, host, sz, cu, raw,
               test_units[m->test], ratio, n, status);
        if (opt.compare && strcmp(ratio, "-") != 0)
            print_compare(m, val, src, dst, host, sz);
        if (opt.anatomy && m->test != TEST_LAT && strcmp(ratio, "-") != 0) /* both ran */
            print_anatomy(m, src, dst, host, sz);
    }
    fflush(stdout);
}

static void append_status(char *status, size_t len, const char *who, const char *what)
{
    size_t used = strcmp(status, "ok") == 0 ? 0 : strlen(status);
    snprintf(status + used, len - used, "%s%s-%s", used ? "," : "", who, what);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One row: cucopy, then raw (their first rounds choose the iteration count
 * and warm up); with --repeat R, R rounds in all, the order alternating
 * (raw first in odd rounds) so that a machine warming up or throttling
 * during the row favours neither side; the row shows the medians and, in
 * the table, the range of the per-round ratios. */
static void measure(struct measurement *m)
{
    double vals[IMPL_COUNT][MAX_REPEAT];
    double val[IMPL_COUNT] = {0, 0};
    int ok[IMPL_COUNT] = {1, 1};
    char status[96] = "ok";
    long n = 0;

    raw_setup(m);
    for (int r = 0; r < opt.repeat && ok[IMPL_CUCOPY] && ok[IMPL_RAW]; r++) {
        for (int k = 0; k < IMPL_COUNT; k++) {
            int impl = r % 2 ? IMPL_COUNT - 1 - k : k;
            const char *who = impl == IMPL_CUCOPY ? "cucopy" : "raw";
            unsigned seed = arm_check(m);
            double secs;
            if ((r == 0 && warm_and_calibrate(m, (enum impl)impl, &n) != 0) ||
                run_loop(m, (enum impl)impl, n, &secs) != 0) {
                append_status(status, sizeof(status), who, "error");
                failures++;
                ok[impl] = 0;
                continue;
            }
            if (verify(m, seed, who) != 0) {
                append_status(status, sizeof(status), who, "VERIFY-FAILED");
                failures++;
                ok[impl] = 0;
                continue;
            }
            vals[impl][r] = metric(m, n, secs);
        }
    }
    raw_teardown(m);
    int rounds = opt.repeat;
    if (ok[IMPL_CUCOPY] && ok[IMPL_RAW] && rounds > 1 && !opt.csv) {
        double lo = 0, hi = 0;
        for (int r = 0; r < rounds; r++) {
            double q = m->test == TEST_LAT ? vals[IMPL_RAW][r] / vals[IMPL_CUCOPY][r]
                                           : vals[IMPL_CUCOPY][r] / vals[IMPL_RAW][r];
            lo = r == 0 || q < lo ? q : lo;
            hi = r == 0 || q > hi ? q : hi;
        }
        snprintf(status, sizeof(status), "ok (%d rounds, ratios %.2f-%.2f)", rounds, lo, hi);
    }
    for (int impl = 0; impl < IMPL_COUNT; impl++)
        if (ok[impl])
            val[impl] = median(vals[impl], rounds);
    print_row(m, val, ok, n, status);
}

static void init_lane(struct lane *ln, enum direction dir, int host, int src_dev, int dst_dev)
{
    memset(ln, 0, sizeof(*ln));
    ln->dir = dir;
    switch (dir) {
    case DIR_H2D:
        ln->src_dev = -1;
        ln->dst_dev = dst_dev;
        ln->ctx_dev = dst_dev;
        ln->src = (uint64_t)(uintptr_t)devs[dst_dev].host_src[host];
        ln->dst = devs[dst_dev].dst;
        break;
    case DIR_D2H:
        ln->src_dev = src_dev;
        ln->dst_dev = -1;
        ln->ctx_dev = src_dev;
        ln->src = devs[src_dev].src;
        ln->dst = (uint64_t)(uintptr_t)devs[src_dev].host_dst[host];
        ln->is_get = 1;
        break;
    case DIR_D2D:
    case DIR_PEER:
        ln->src_dev = src_dev;
        ln->dst_dev = dst_dev;
        ln->ctx_dev = src_dev;
        ln->src = devs[src_dev].src;
        ln->dst = devs[dst_dev].dst;
        break;
    default:
        break;
    }
}

/* --memh: describe a lane's buffers once (every buffer holds buf_size). */
static void describe_lane(struct lane *ln)
{
    if (!opt.memh)
        return;
    cucopy_status_t st = cucopy_mem_describe(cctx, (void *)(uintptr_t)ln->src, buf_size,
                                             &ln->src_memh);
    if (st == CUCOPY_OK)
        st = cucopy_mem_describe(cctx, (void *)(uintptr_t)ln->dst, buf_size, &ln->dst_memh);
    if (st != CUCOPY_OK)
        cu_error("cucopy_mem_describe", st);
}

static void release_lanes(struct lane *lanes, int n)
{
    for (int i = 0; i < n; i++) {
        cucopy_mem_dereg(cctx, lanes[i].src_memh);
        cucopy_mem_dereg(cctx, lanes[i].dst_memh);
        lanes[i].src_memh = lanes[i].dst_memh = NULL;
    }
}

/* All lanes of a direction for the chosen devices. */
static int build_lanes(enum direction dir, int host, struct lane *lanes)
{
    int n = 0;
    for (int i = 0; i < opt.ndevices; i++) {
        int a = opt.devices[i];
        if (dir == DIR_PEER) {
            for (int j = 0; j < opt.ndevices; j++) {
                int b = opt.devices[j];
                if (a != b)
                    init_lane(&lanes[n++], dir, host, a, b);
            }
        } else {
            init_lane(&lanes[n++], dir, host, a, a);
        }
    }
    for (int i = 0; i < n; i++)
        describe_lane(&lanes[i]);
    return n;
}

static void run_all(void)
{
    struct lane *lanes = calloc((size_t)opt.ndevices * (size_t)opt.ndevices, sizeof(*lanes));
    if (lanes == NULL)
        die("out of memory");
    for (int t = 0; t < TEST_COUNT; t++) {
        if (!(opt.tests & (1u << t)))
            continue;
        const size_t *sizes = t == TEST_RATE ? opt.rate_sizes : opt.sizes;
        int nsizes = t == TEST_RATE ? opt.nrate_sizes : opt.nsizes;
        for (int d = 0; d < DIR_COUNT; d++) {
            if (!(opt.dirs & (1u << d)))
                continue;
            for (int h = 0; h < HOST_COUNT; h++) {
                int host = dir_uses_host((enum direction)d) ? h : HOST_NONE;
                if (host != HOST_NONE && !(opt.hosts & (1u << h)))
                    continue;
                if (host == HOST_NONE && h > 0)
                    break;
                int nl = build_lanes((enum direction)d, host, lanes);
                int together = opt.concurrent && t != TEST_LAT;
                for (int first = 0; first < nl; first += together ? nl : 1) {
                    for (int s = 0; s < nsizes; s++) {
                        struct measurement m = {
                            .test = (enum test_kind)t,
                            .dir = (enum direction)d,
                            .host = host,
                            .size = sizes[s],
                            .lanes = &lanes[first],
                            .nlanes = together ? nl : 1,
                        };
                        measure(&m);
                    }
                }
                release_lanes(lanes, nl);
            }
        }
    }
    free(lanes);
}

/* ------------------------------------------------------------------------ */
/* --2d: strided copies                                                     */

/* A completion that sets a flag. */
struct flag_comp {
    cucopy_completion_t comp;
    int done;
};

static void flag_done(cucopy_completion_t *c)
{
    ((struct flag_comp *)c)->done = 1;
}

/* One strided copy: gather (d2h: device rows -> packed host) or scatter
 * (h2d), by cucopy or raw, waited for. 0 or -1 (reported). */
static int run_2d_op(enum impl impl, int d2h, const struct shape2d *sh, cdDevicePtr dev,
                     void *host, cdStream stream)
{
    if (impl == IMPL_RAW) {
        struct cd_memcpy2d c;
        memset(&c, 0, sizeof c);
        c.width_in_bytes = sh->width;
        c.height = sh->height;
        /* The device side strided, the host side packed. */
        c.src_memory_type = d2h ? CD_MEMORYTYPE_DEVICE : CD_MEMORYTYPE_HOST;
        c.src_device = d2h ? dev : 0;
        c.src_host = d2h ? NULL : host;
        c.src_pitch = d2h ? sh->pitch : sh->width;
        c.dst_memory_type = d2h ? CD_MEMORYTYPE_HOST : CD_MEMORYTYPE_DEVICE;
        c.dst_device = d2h ? 0 : dev;
        c.dst_host = d2h ? host : NULL;
        c.dst_pitch = d2h ? sh->width : sh->pitch;
        cdResult r = td.cuMemcpy2DAsync(&c, stream);
        if (r == CD_SUCCESS)
            r = td.cuStreamSynchronize(stream);
        if (r != CD_SUCCESS) {
            drv_error("cuMemcpy2DAsync", r);
            return -1;
        }
        return 0;
    }
    cucopy_copy_2d_t e = {(void *)(uintptr_t)dev, sh->pitch, host, sh->width,
                          sh->width, sh->height, NULL, NULL};
    if (d2h)
        e = (cucopy_copy_2d_t){host, sh->width, (void *)(uintptr_t)dev, sh->pitch,
                               sh->width, sh->height, NULL, NULL};
    struct flag_comp fc = {{flag_done, 1, CUCOPY_OK}, 0};
    cucopy_status_t st = cucopy_ep_copy_2d(ep, &e, 1, &fc.comp);
    if (st == CUCOPY_INPROGRESS) {
        double t0 = now_s();
        while (!fc.done) {
            (void)cucopy_iface_progress(iface);
            if (now_s() - t0 > opt.timeout_s) {
                fprintf(stderr, "cucopy_perftest: cucopy_ep_copy_2d did not complete\n");
                return -1;
            }
        }
        st = fc.comp.status;
    }
    if (st != CUCOPY_OK) {
        cu_error("cucopy_ep_copy_2d", st);
        return -1;
    }
    return 0;
}

/* Seconds per op of impl: warm-up, then as many ops as fill --time. */
static double time_2d(enum impl impl, int d2h, const struct shape2d *sh, cdDevicePtr dev,
                      void *host, cdStream stream)
{
    for (int i = 0; i < 3; i++)
        if (run_2d_op(impl, d2h, sh, dev, host, stream) != 0)
            return -1;
    long n = 0;
    double t0 = now_s(), t = 0;
    while (t < opt.target_s && (opt.iters_cap == 0 || n < opt.iters_cap)) {
        if (run_2d_op(impl, d2h, sh, dev, host, stream) != 0)
            return -1;
        n++;
        t = now_s() - t0;
    }
    return t / (double)n;
}

/* The data of the last op of a row: the packed host image of the rows. */
static int verify_2d(int d2h, const struct shape2d *sh, cdDevicePtr dev, const unsigned char *host,
                     int devn, const char *who)
{
    size_t span = (sh->height - 1) * sh->pitch + sh->width;
    unsigned char *img = malloc(span);
    if (img == NULL)
        die("out of memory");
    mem_read(devn, dev, img, span);
    int bad = 0;
    for (size_t r = 0; r < sh->height && !bad; r++)
        bad = memcmp(img + r * sh->pitch, host + r * sh->width, sh->width) != 0;
    free(img);
    if (bad)
        fprintf(stderr, "cucopy_perftest: 2d %s %s: the rows differ\n", d2h ? "d2h" : "h2d", who);
    return bad;
}

static void run_2d(void)
{
    int d = opt.devices[0];
    printf("# 2d: device %d, H rows of W bytes PITCH apart on the device, packed on the host;\n"
           "# cucopy_ep_copy_2d + progress vs cuMemcpy2DAsync + cuStreamSynchronize, median of %d\n"
           "# %-20s %-4s %-9s %9s %11s %9s %7s %11s\n",
           d, opt.repeat, "shape", "dir", "host", "payload", "cucopy_us", "raw_us", "ratio",
           "cucopy_GB/s");
    for (int i = 0; i < opt.nshapes; i++) {
        const struct shape2d *sh = &opt.shapes[i];
        size_t span = (sh->height - 1) * sh->pitch + sh->width, packed = sh->width * sh->height;
        cdDevicePtr dev = 0;
        cdStream stream = NULL;
        push_ctx(d);
        TD_CHECK(td.cuMemAlloc(&dev, span));
        TD_CHECK(td.cuStreamCreate(&stream, CD_STREAM_NON_BLOCKING));
        pop_ctx();
        for (int h = 0; h < HOST_REGISTERED; h++) {
            if (!(opt.hosts & (1u << h)))
                continue;
            void *host = NULL;
            if (h == HOST_PINNED) {
                push_ctx(d);
                TD_CHECK(td.cuMemHostAlloc(&host, packed, CD_MEMHOSTALLOC_PORTABLE));
                pop_ctx();
            } else if (posix_memalign(&host, 4096, packed) != 0) {
                die("out of memory");
            }
            for (int d2h = 1; d2h >= 0; d2h--) {
                double t[IMPL_COUNT][MAX_REPEAT];
                int ok = 1;
                for (int rep = 0; rep < opt.repeat && ok; rep++)
                    for (int k = 0; k < IMPL_COUNT && ok; k++) {
                        enum impl impl = (enum impl)((k + rep) % IMPL_COUNT);
                        /* A fresh pattern on the source side, checked after. */
                        unsigned char *img = malloc(d2h ? span : packed);
                        if (img == NULL)
                            die("out of memory");
                        for (size_t b = 0; b < (d2h ? span : packed); b++)
                            img[b] = pattern_byte(pattern_seed, b);
                        pattern_seed++;
                        if (d2h)
                            mem_write(d, dev, img, span);
                        else
                            memcpy(host, img, packed);
                        free(img);
                        t[impl][rep] = time_2d(impl, d2h, sh, dev, host, stream);
                        ok = t[impl][rep] > 0 &&
                             !verify_2d(d2h, sh, dev, host, d, impl == IMPL_RAW ? "raw" : "cucopy");
                    }
                char shape[64], pay[16];
                snprintf(shape, sizeof shape, "%zux%zu:%zu", sh->width, sh->height, sh->pitch);
                fmt_size(pay, sizeof pay, packed);
                if (!ok) {
                    printf("  %-20s %-4s %-9s %9s %11s\n", shape, d2h ? "d2h" : "h2d",
                           host_names[h], pay, "FAILED");
                    failures++;
                    continue;
                }
                double cu = median(t[IMPL_CUCOPY], opt.repeat);
                double raw = median(t[IMPL_RAW], opt.repeat);
                printf("  %-20s %-4s %-9s %9s %11.1f %9.1f %7.2f %11.2f\n", shape,
                       d2h ? "d2h" : "h2d", host_names[h], pay, cu * 1e6, raw * 1e6, raw / cu,
                       (double)packed / cu / 1e9);
            }
            if (h == HOST_PINNED) {
                push_ctx(d);
                TD_CHECK(td.cuMemFreeHost(host));
                pop_ctx();
            } else {
                free(host);
            }
        }
        push_ctx(d);
        TD_CHECK(td.cuStreamDestroy(stream));
        TD_CHECK(td.cuMemFree(dev));
        pop_ctx();
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    parse_options(argc, argv);
    setup();
    if (opt.nshapes > 0) {
        run_2d();
    } else {
        print_header();
        run_all();
    }
    teardown();
    /* The fake driver counts uses the real driver rejects or leaves undefined. */
    long (*violations)(void) = (long (*)(void))testdrv_fake_sym("fakecuda_violations");
    if (violations != NULL && violations() > 0) {
        fprintf(stderr, "cucopy_perftest: the fake driver counted %ld violation(s) (see the "
                "\"fakecuda: VIOLATION\" lines)\n", violations());
        failures++;
    }
    if (ctx_violations > 0)
        fprintf(stderr, "cucopy_perftest: cucopy changed the current context %d time(s)\n",
                ctx_violations);
    if (failures > 0)
        fprintf(stderr, "cucopy_perftest: %d measurement(s) failed\n", failures);
    return failures > 0 || ctx_violations > 0 ? 2 : 0;
}
