/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cucopy_mtrate: message rate of small zcopies issued by several threads at
 * once, thread t copying host to device t % ndev (each thread its own pinned
 * buffer and device buffer), W operations in flight per thread. Three loops
 * run on the same buffers in the same process, one after another, for each
 * thread count:
 *
 *   raw     each thread: its device's primary context current, its own
 *           stream and W events; cuMemcpyAsync + cuEventRecord, cuEventQuery.
 *   single  each thread its own iface (CUCOPY_THREAD_MODE_SINGLE) and ep:
 *           nothing shared, the best cucopy can do.
 *   multi   one iface (CUCOPY_THREAD_MODE_MULTI) shared by all threads, each
 *           with its own ep, each progressing it when its window is full.
 *
 * The rate is completed operations over the wall time of the whole team;
 * the ratios are against raw at the same thread count. Each thread checks
 * that its last copy arrived. Runs on the fake driver too (the numbers then
 * only show that it works).
 */
#define _GNU_SOURCE

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cucopy.h"
#include "testdrv.h"

#define MAX_THREADS 64
#define MAX_WINDOW 256
#define HUNG_S 10.0 /* a thread still waiting this long after its time is reported hung */

enum impl { RAW, SINGLE, MULTI, NIMPL };
static const char *const impl_names[NIMPL] = {"raw", "single", "multi"};

static struct {
    int threads[16];
    int nthreads;
    size_t size;
    int window;
    double secs;
    int ndev;
    int pageable; /* --host pageable: malloc'd host buffers (the driver stages them) */
} opt = {{1, 2, 4, 8}, 4, 8, 8, 0.5, 0, 0};

static cucopy_context_h cctx;
static cdContext pctx[16];
static pthread_barrier_t start;
static atomic_int failed;

struct comp {
    cucopy_completion_t c; /* first: the callback casts back */
    atomic_long *done;
};

struct thread {
    int t, dev;
    pthread_t id;
    enum impl impl;
    cucopy_iface_h iface; /* single: its own; multi: the shared one */
    uint64_t host;
    cdDevicePtr devbuf;
    long issued;
    atomic_long done;
    atomic_int in; /* the cucopy call the thread is in (a watchdog's clue) */
    double t0, t1;
    struct comp comps[MAX_WINDOW];
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

__attribute__((format(printf, 1, 2))) static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cucopy_mtrate: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void fail(struct thread *th, const char *what, cucopy_status_t st)
{
    if (atomic_fetch_add(&failed, 1) < 5)
        fprintf(stderr, "cucopy_mtrate: thread %d (%s): %s returned %d: %s\n", th->t,
                impl_names[th->impl], what, (int)st, cucopy_last_error());
}

/* Whether the thread's loop ran HUNG_S past its end: report and fail. */
static int hung(struct thread *th, double end, long done)
{
    if (now_s() < end + HUNG_S)
        return 0;
    if (atomic_fetch_add(&failed, 1) < 5)
        fprintf(stderr, "cucopy_mtrate: thread %d (%s, device %d): %ld issued, %ld completed, "
                        "nothing more for %.0f s\n",
                th->t, impl_names[th->impl], th->dev, th->issued, done, HUNG_S);
    return 1;
}

static void comp_done(cucopy_completion_t *c)
{
    struct comp *k = (struct comp *)c;
    atomic_fetch_add(k->done, 1);
}

static void run_raw(struct thread *th)
{
    cdStream stream;
    cdEvent ev[MAX_WINDOW];
    TD_CHECK(td.cuCtxSetCurrent(pctx[th->dev]));
    TD_CHECK(td.cuStreamCreate(&stream, CD_STREAM_NON_BLOCKING));
    for (int i = 0; i < opt.window; i++)
        TD_CHECK(td.cuEventCreate(&ev[i], CD_EVENT_DISABLE_TIMING));
    long done = 0;
    pthread_barrier_wait(&start);
    th->t0 = now_s();
    double end = th->t0 + opt.secs;
    int stop = 0;
    while ((!stop || done < th->issued) && !(stop && hung(th, end, done))) {
        while (done < th->issued) {
            cdResult r = td.cuEventQuery(ev[done % opt.window]);
            if (r == CD_ERROR_NOT_READY)
                break;
            TD_CHECK(r);
            done++;
        }
        while (!stop && th->issued - done < opt.window) {
            TD_CHECK(td.cuMemcpyAsync(th->devbuf, th->host, opt.size, stream));
            TD_CHECK(td.cuEventRecord(ev[th->issued % opt.window], stream));
            th->issued++;
        }
        stop = stop || now_s() > end;
    }
    th->t1 = now_s();
    atomic_store(&th->done, done);
    TD_CHECK(td.cuStreamSynchronize(stream));
    for (int i = 0; i < opt.window; i++)
        TD_CHECK(td.cuEventDestroy(ev[i]));
    TD_CHECK(td.cuStreamDestroy(stream));
}

static void run_cucopy(struct thread *th)
{
    cucopy_ep_h ep;
    cucopy_status_t st;
    TD_CHECK(td.cuCtxSetCurrent(pctx[th->dev]));
    if ((st = cucopy_ep_create(th->iface, &ep)) != CUCOPY_OK) {
        fail(th, "cucopy_ep_create", st);
        pthread_barrier_wait(&start);
        return;
    }
    for (int i = 0; i < opt.window; i++)
        th->comps[i] = (struct comp){{comp_done, 0, CUCOPY_OK}, &th->done};
    cucopy_iov_t iov = {(void *)(uintptr_t)th->host, opt.size};
    /* First use creates the context's resources: not timed. */
    if ((st = cucopy_ep_put_short(ep, iov.buffer, opt.size, th->devbuf)) != CUCOPY_OK)
        fail(th, "cucopy_ep_put_short", st);
    pthread_barrier_wait(&start);
    th->t0 = now_s();
    double end = th->t0 + opt.secs;
    int stop = 0;
    while (!atomic_load(&failed) && (!stop || atomic_load(&th->done) < th->issued) &&
           !hung(th, end, atomic_load(&th->done))) {
        while (!stop && th->issued - atomic_load(&th->done) < opt.window) {
            /* Operations of one ep on one (context, direction) complete in
             * order: the ring entry is free again. */
            struct comp *k = &th->comps[th->issued % opt.window];
            k->c.count = 1;
            atomic_store_explicit(&th->in, 1, memory_order_relaxed);
            st = cucopy_ep_put_zcopy(ep, &iov, 1, th->devbuf, &k->c);
            atomic_store_explicit(&th->in, 0, memory_order_relaxed);
            if (st == CUCOPY_OK)
                atomic_fetch_add(&th->done, 1);
            else if (st != CUCOPY_INPROGRESS) {
                fail(th, "cucopy_ep_put_zcopy", st);
                break;
            }
            th->issued++;
        }
        atomic_store_explicit(&th->in, 2, memory_order_relaxed);
        int n = cucopy_iface_progress(th->iface);
        atomic_store_explicit(&th->in, 0, memory_order_relaxed);
        if (n < 0) {
            fail(th, "cucopy_iface_progress", n);
            break;
        }
        stop = stop || now_s() > end;
    }
    th->t1 = now_s();
    while (atomic_load(&th->done) < th->issued && !atomic_load(&failed) &&
           !hung(th, end, atomic_load(&th->done)))
        cucopy_iface_progress(th->iface);
    if ((st = cucopy_ep_destroy(ep)) != CUCOPY_OK)
        fail(th, "cucopy_ep_destroy", st);
}

static void *thread_main(void *arg)
{
    struct thread *th = arg;
    if (th->impl == RAW)
        run_raw(th);
    else
        run_cucopy(th);
    TD_CHECK(td.cuCtxSetCurrent(NULL));
    return NULL;
}

/* Rate in Mops/s of one impl with n threads; -1 on failure. */
static double measure(enum impl impl, int n, struct thread *ths)
{
    cucopy_iface_h shared = NULL;
    cucopy_iface_params_t p;
    memset(&p, 0, sizeof(p));
    p.field_mask = CUCOPY_IFACE_PARAM_THREAD_MODE;
    p.thread_mode = impl == MULTI ? CUCOPY_THREAD_MODE_MULTI : CUCOPY_THREAD_MODE_SINGLE;
    if (impl == MULTI && cucopy_iface_open(cctx, &p, &shared) != CUCOPY_OK)
        die("cucopy_iface_open: %s", cucopy_last_error());
    pthread_barrier_init(&start, NULL, (unsigned)n);
    for (int t = 0; t < n; t++) {
        struct thread *th = &ths[t];
        th->impl = impl;
        th->issued = 0;
        atomic_store(&th->done, 0);
        th->iface = shared;
        if (impl == SINGLE && cucopy_iface_open(cctx, &p, &th->iface) != CUCOPY_OK)
            die("cucopy_iface_open: %s", cucopy_last_error());
        if (pthread_create(&th->id, NULL, thread_main, th) != 0)
            die("pthread_create: %s", strerror(errno));
    }
    double t0 = 1e300, t1 = 0;
    long ops = 0;
    double limit = now_s() + opt.secs + 2 * HUNG_S;
    for (int t = 0; t < n; t++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += (time_t)(limit - now_s()) + 1;
        if (pthread_timedjoin_np(ths[t].id, NULL, &ts) != 0) {
            static const char *const in[] = {"no call", "put_zcopy", "progress"};
            fprintf(stderr, "cucopy_mtrate: %s with %d threads: thread %d never finished\n",
                    impl_names[impl], n, t);
            for (int u = 0; u < n; u++)
                fprintf(stderr, "  thread %d (device %d): %ld issued, %ld completed, in %s\n", u,
                        ths[u].dev, ths[u].issued, atomic_load(&ths[u].done),
                        in[atomic_load(&ths[u].in)]);
            fflush(stderr);
            _exit(2);
        }
        t0 = ths[t].t0 < t0 ? ths[t].t0 : t0;
        t1 = ths[t].t1 > t1 ? ths[t].t1 : t1;
        ops += atomic_load(&ths[t].done);
        if (impl == SINGLE && cucopy_iface_close(ths[t].iface) != CUCOPY_OK)
            die("cucopy_iface_close: %s", cucopy_last_error());
    }
    if (shared != NULL && cucopy_iface_close(shared) != CUCOPY_OK)
        die("cucopy_iface_close: %s", cucopy_last_error());
    pthread_barrier_destroy(&start);
    return atomic_load(&failed) ? -1 : (double)ops / (t1 - t0) / 1e6;
}

/* Each thread's device buffer holds its host pattern. */
static int verify(int n, struct thread *ths)
{
    int bad = 0;
    unsigned char want[64], got[64];
    size_t len = opt.size < sizeof(got) ? opt.size : sizeof(got);
    for (int t = 0; t < n; t++) {
        TD_CHECK(td.cuCtxSetCurrent(pctx[ths[t].dev]));
        memcpy(want, (void *)(uintptr_t)ths[t].host, len);
        TD_CHECK(td.cuMemcpyDtoH(got, ths[t].devbuf, len));
        if (memcmp(want, got, len) != 0) {
            fprintf(stderr, "cucopy_mtrate: thread %d: device %d holds the wrong bytes\n", t,
                    ths[t].dev);
            bad++;
        }
    }
    TD_CHECK(td.cuCtxSetCurrent(NULL));
    return bad;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: cucopy_mtrate [--threads LIST] [--size BYTES] [--window W] [--time SEC]\n"
               "                     [--host pinned|pageable]\n"
               "  --threads LIST  thread counts (default 1,2,4,8); thread t copies to device\n"
               "                  t %% (number of devices)\n"
               "  --size BYTES    bytes per zcopy (default 8)\n"
               "  --window W      operations in flight per thread (default 8, max %d)\n"
               "  --time SEC      seconds per measurement (default 0.5)\n"
               "  --host KIND     pinned (cuMemHostAlloc, default) or pageable (malloc: the\n"
               "                  driver stages each copy inside cuMemcpyAsync)\n"
               "Prints, per thread count, the rate of raw driver calls, of one single-thread\n"
               "iface per thread, and of one multi-thread iface shared by all threads, with\n"
               "the ratios to raw. Exit status 0, 1 setup error, 2 a copy failed.\n",
            MAX_WINDOW);
}

static void parse(int argc, char **argv)
{
    static const struct option lo[] = {{"threads", required_argument, NULL, 't'},
                                       {"size", required_argument, NULL, 's'},
                                       {"window", required_argument, NULL, 'w'},
                                       {"time", required_argument, NULL, 'T'},
                                       {"host", required_argument, NULL, 'H'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 't':
            opt.nthreads = 0;
            for (char *s = optarg; *s != '\0' && opt.nthreads < 16; s = end + (*end == ',')) {
                long v = strtol(s, &end, 10);
                if (end == s || v < 1 || v > MAX_THREADS || (*end != ',' && *end != '\0'))
                    die("bad --threads '%s'", optarg);
                opt.threads[opt.nthreads++] = (int)v;
            }
            break;
        case 's':
            opt.size = (size_t)strtoul(optarg, &end, 10);
            if (*end != '\0' || opt.size == 0 || opt.size > (64u << 20))
                die("bad --size '%s'", optarg);
            break;
        case 'w':
            opt.window = (int)strtol(optarg, &end, 10);
            if (*end != '\0' || opt.window < 1 || opt.window > MAX_WINDOW)
                die("bad --window '%s'", optarg);
            break;
        case 'H':
            if (strcmp(optarg, "pinned") != 0 && strcmp(optarg, "pageable") != 0)
                die("bad --host '%s' (pinned or pageable)", optarg);
            opt.pageable = strcmp(optarg, "pageable") == 0;
            break;
        case 'T':
            opt.secs = strtod(optarg, &end);
            if (*end != '\0' || !(opt.secs > 0 && opt.secs < 3600))
                die("bad --time '%s'", optarg);
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(1);
        }
    }
    if (optind != argc) {
        usage(stderr);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    if (testdrv_load() != 0)
        die("cannot load the CUDA driver");
    if (cucopy_context_create(NULL, &cctx) != CUCOPY_OK)
        die("cucopy_context_create: %s", cucopy_last_error());
    opt.ndev = td.device_count < 16 ? td.device_count : 16;
    if (opt.ndev < 1)
        die("no CUDA device");
    for (int d = 0; d < opt.ndev; d++) {
        cdDevice dev;
        TD_CHECK(td.cuDeviceGet(&dev, d));
        TD_CHECK(td.cuDevicePrimaryCtxRetain(&pctx[d], dev));
    }
    int maxt = 0;
    for (int i = 0; i < opt.nthreads; i++)
        maxt = opt.threads[i] > maxt ? opt.threads[i] : maxt;
    struct thread *ths = calloc((size_t)maxt, sizeof(*ths));
    if (ths == NULL)
        die("out of memory");
    for (int t = 0; t < maxt; t++) {
        struct thread *th = &ths[t];
        void *h = NULL;
        th->t = t;
        th->dev = t % opt.ndev;
        TD_CHECK(td.cuCtxSetCurrent(pctx[th->dev]));
        if (opt.pageable) {
            h = malloc(opt.size);
            if (h == NULL)
                die("out of memory");
        } else {
            TD_CHECK(td.cuMemHostAlloc(&h, opt.size, 0));
        }
        for (size_t i = 0; i < opt.size; i++)
            ((unsigned char *)h)[i] = (unsigned char)(t * 31 + i);
        th->host = (uint64_t)(uintptr_t)h;
        TD_CHECK(td.cuMemAlloc(&th->devbuf, opt.size));
    }
    TD_CHECK(td.cuCtxSetCurrent(NULL));

    unsigned v = cucopy_get_version();
    printf("cucopy_mtrate: cucopy %u.%u.%u, %s driver %d, %d device(s); %zu-byte H2D zcopies "
           "(%s), window %d per thread, %.2f s per measurement\n",
           v / 10000, v / 100 % 100, v % 100, td.is_fake ? "fake" : "CUDA", td.driver_version,
           opt.ndev, opt.size, opt.pageable ? "pageable" : "pinned", opt.window, opt.secs);
    printf("%7s %12s %12s %7s %12s %7s\n", "threads", "raw Mops/s", "single", "ratio", "multi",
           "ratio");
    int rc = 0;
    for (int i = 0; i < opt.nthreads; i++) {
        int n = opt.threads[i];
        double r[NIMPL];
        for (int impl = 0; impl < NIMPL; impl++) {
            r[impl] = measure((enum impl)impl, n, ths);
            if (r[impl] < 0 || verify(n, ths) != 0)
                rc = 2;
        }
        printf("%7d %12.3f %12.3f %7.2f %12.3f %7.2f\n", n, r[RAW], r[SINGLE], r[SINGLE] / r[RAW],
               r[MULTI], r[MULTI] / r[RAW]);
        fflush(stdout);
    }
    for (int t = 0; t < maxt; t++) {
        TD_CHECK(td.cuCtxSetCurrent(pctx[ths[t].dev]));
        if (opt.pageable)
            free((void *)(uintptr_t)ths[t].host);
        else
            TD_CHECK(td.cuMemFreeHost((void *)(uintptr_t)ths[t].host));
        TD_CHECK(td.cuMemFree(ths[t].devbuf));
    }
    TD_CHECK(td.cuCtxSetCurrent(NULL));
    for (int d = 0; d < opt.ndev; d++) {
        cdDevice dev;
        TD_CHECK(td.cuDeviceGet(&dev, d));
        TD_CHECK(td.cuDevicePrimaryCtxRelease(dev));
    }
    free(ths);
    if (cucopy_context_destroy(cctx) != CUCOPY_OK)
        die("cucopy_context_destroy: %s", cucopy_last_error());
    return rc;
}
