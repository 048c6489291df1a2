/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What two processes pay for taking turns on one GPU, without MPI or
 * cucopy: the pattern of cucopy_mpi_bench's D-D latency with both ranks on
 * one device (each message: the sender copies device -> pinned host, the
 * receiver pinned host -> device). Two processes (forked before cuInit)
 * pass a token through pipes; on its turn each does one copy of SIZE bytes
 * on its own context (cuMemcpyDtoH or cuMemcpyHtoD, pinned host memory),
 * then hands the token back. Printed: microseconds per turn, for
 *   alone:     one process doing both copies of a turn pair, no switch;
 *   alternate: the two processes taking turns (one copy per turn).
 * The difference is the cost of the GPU switching between the processes'
 * contexts, which no library in either process can remove (CUDA MPS or a
 * GPU per rank would).
 *
 * With --stream (default sizes 1 MiB, 4 MiB), bandwidth instead of turns: two
 * processes on one GPU copying at the same time in opposite directions, as an
 * MPI sender staging device -> host does while the receiver, another process
 * with its own context, stages host -> device. Process A copies device ->
 * pinned host, B pinned host -> device, each SIZE bytes per cuMemcpyAsync on
 * its own non-blocking stream with a cuStreamSynchronize every 8 copies (a
 * staging pipeline's window), about 2 GiB per phase: A alone, B alone, then
 * both at once. Printed: GB/s (1e9 B/s) of each, and the sum of the together
 * rates over the mean of the alone ones (1.0: together the two move no more
 * than one alone; 2.0: no interference). It bounds what pipelined staging can
 * reach with both ranks on one GPU, whatever either library does.
 *
 *   gcc -O2 -std=gnu11 -I cudadrv -I tests/common tests/gpu/two_process_pingpong.c \
 *       tests/common/testdrv.c -ldl -o pingpong
 *   ./pingpong [SIZE...]; ./pingpong --stream [SIZE...]
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testdrv.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

struct gpu {
    cdContext ctx;
    cdDevicePtr dev;
    void *host;
};

static void gpu_open(struct gpu *g, size_t size)
{
    TD_CHECK(testdrv_load() == 0 ? CD_SUCCESS : CD_ERROR_NOT_INITIALIZED);
    cdDevice d;
    TD_CHECK(td.cuDeviceGet(&d, 0));
    TD_CHECK(td.cuDevicePrimaryCtxRetain(&g->ctx, d));
    TD_CHECK(td.cuCtxSetCurrent(g->ctx));
    TD_CHECK(td.cuMemAlloc(&g->dev, size));
    TD_CHECK(td.cuMemHostAlloc(&g->host, size, CD_MEMHOSTALLOC_PORTABLE));
}

/* One turn's copy: to the device on even turns, back on odd ones. */
static void turn_copy(struct gpu *g, size_t size, long k)
{
    if (k % 2 == 0)
        TD_CHECK(td.cuMemcpyHtoD(g->dev, g->host, size));
    else
        TD_CHECK(td.cuMemcpyDtoH(g->host, g->dev, size));
}

static void pass(int fd)
{
    char c = 1;
    if (write(fd, &c, 1) != 1)
        exit(3);
}

static void take(int fd)
{
    char c;
    if (read(fd, &c, 1) != 1)
        exit(3);
}

/* The child: copy on each token from `in`, reply on `out`. */
static void child(int in, int out, size_t size, long turns)
{
    struct gpu g;
    gpu_open(&g, size);
    pass(out); /* ready */
    for (long k = 0; k < turns; k++) {
        take(in);
        turn_copy(&g, size, k);
        pass(out);
    }
    exit(0);
}

/* The measuring process: alone, then taking turns with the child. */
static void measurer(int in, int out, size_t size, long turns)
{
    struct gpu g;
    gpu_open(&g, size);
    take(in);
    double t0 = now_us();
    for (long k = 0; k < turns; k++)
        turn_copy(&g, size, k);
    double alone = (now_us() - t0) / turns;
    t0 = now_us();
    for (long k = 0; k < turns; k++) {
        turn_copy(&g, size, k);
        pass(out);
        take(in);
    }
    double alt = (now_us() - t0) / (2.0 * turns);
    printf("two_process_pingpong: %8zu B: alone %7.2f us per copy, alternating between two "
           "processes %7.2f us per copy\n",
           size, alone, alt);
    exit(0);
}

/* --stream: bytes each process moves per phase, copies per synchronisation. */
#define STREAM_BYTES (2ull << 30)
#define STREAM_WINDOW 8

/* What a --stream child sends the parent, in GB/s. */
struct stream_rates {
    double alone, together;
};

/* n copies of SIZE bytes on s, device -> host or host -> device, waiting for
 * the stream after every STREAM_WINDOW of them (n is a multiple); GB/s. */
static double stream_loop(struct gpu *g, cdStream s, int d2h, size_t size, long n)
{
    cdDevicePtr host = (cdDevicePtr)(uintptr_t)g->host;
    cdDevicePtr dst = d2h ? host : g->dev, src = d2h ? g->dev : host;
    double t0 = now_us();
    for (long k = 0; k < n; k++) {
        TD_CHECK(td.cuMemcpyAsync(dst, src, size, s));
        if ((k + 1) % STREAM_WINDOW == 0)
            TD_CHECK(td.cuStreamSynchronize(s));
    }
    return (double)size * n / ((now_us() - t0) * 1e3);
}

/* A --stream child: A (d2h) runs phase 1 while B waits for the token, B runs
 * phase 2 while A waits; the token B then sends starts phase 3 in both (B on
 * sending it, A on receiving it). The rates go to the parent on `res`. */
static void stream_child(int d2h, int in, int out, int res, size_t size, long n)
{
    struct gpu g;
    cdStream s;
    struct stream_rates r;
    gpu_open(&g, size);
    TD_CHECK(td.cuStreamCreate(&s, CD_STREAM_NON_BLOCKING));
    stream_loop(&g, s, d2h, size, STREAM_WINDOW); /* first-use costs out of the timing */
    if (d2h) {
        take(in); /* B ready */
        r.alone = stream_loop(&g, s, d2h, size, n);
        pass(out);
        take(in);
    } else {
        pass(out); /* ready */
        take(in);
        r.alone = stream_loop(&g, s, d2h, size, n);
        pass(out);
    }
    r.together = stream_loop(&g, s, d2h, size, n);
    TD_CHECK(td.cuStreamDestroy(s));
    if (write(res, &r, sizeof r) != (ssize_t)sizeof r)
        exit(3);
    exit(0);
}

static int exited_ok(int status)
{
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* --stream [SIZE...]: per size, the two children and the line from their rates. */
static int stream_main(int nsizes, char **sizes)
{
    size_t def[2] = {1 << 20, 4 << 20};
    int failed = 0;
    for (int i = 0; i < (nsizes > 0 ? nsizes : 2); i++) {
        size_t size = nsizes > 0 ? strtoull(sizes[i], NULL, 0) : def[i];
        if (size == 0) {
            fprintf(stderr, "two_process_pingpong: bad size %s\n", sizes[i]);
            return 2;
        }
        long n = (STREAM_BYTES / size + STREAM_WINDOW - 1) / STREAM_WINDOW * STREAM_WINDOW;
        if (n < 2 * STREAM_WINDOW)
            n = 2 * STREAM_WINDOW;
        int a_to_b[2], b_to_a[2], res_a[2], res_b[2];
        if (pipe(a_to_b) != 0 || pipe(b_to_a) != 0 || pipe(res_a) != 0 || pipe(res_b) != 0)
            return 1;
        pid_t a = fork();
        if (a == 0)
            stream_child(1, b_to_a[0], a_to_b[1], res_a[1], size, n);
        pid_t b = fork();
        if (b == 0)
            stream_child(0, a_to_b[0], b_to_a[1], res_b[1], size, n);
        close(a_to_b[0]), close(a_to_b[1]), close(b_to_a[0]), close(b_to_a[1]);
        close(res_a[1]), close(res_b[1]);
        /* Each child holds both ends of the token pipes, so one that fails
         * leaves the other waiting for a token forever: stop that one. */
        int st = 0;
        pid_t first = wait(&st), second = first == a ? b : a;
        int bad = !exited_ok(st);
        if (bad)
            kill(second, SIGKILL);
        waitpid(second, &st, 0);
        bad |= !exited_ok(st);
        struct stream_rates ra, rb;
        bad |= read(res_a[0], &ra, sizeof ra) != (ssize_t)sizeof ra ||
               read(res_b[0], &rb, sizeof rb) != (ssize_t)sizeof rb;
        close(res_a[0]), close(res_b[0]);
        if (!bad) {
            printf("two_process_pingpong --stream: %8zu B: alone d2h %5.1f GB/s h2d %5.1f GB/s; "
                   "together d2h %5.1f GB/s h2d %5.1f GB/s (sum %.2f of the alone mean)\n",
                   size, ra.alone, rb.alone, ra.together, rb.together,
                   (ra.together + rb.together) / ((ra.alone + rb.alone) / 2));
            fflush(stdout); /* before the next fork, or the children repeat it */
        }
        failed |= bad;
    }
    return failed;
}

/* The parent never touches CUDA: both processes of a size are its children. */
int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--stream") == 0)
        return stream_main(argc - 2, argv + 2);
    const long turns = 4000;
    int nsizes = argc > 1 ? argc - 1 : 3;
    size_t def[3] = {8, 16384, 32768};
    int failed = 0;
    for (int i = 0; i < nsizes; i++) {
        size_t size = argc > 1 ? strtoull(argv[i + 1], NULL, 0) : def[i];
        int a_to_b[2], b_to_a[2];
        if (pipe(a_to_b) != 0 || pipe(b_to_a) != 0)
            return 1;
        pid_t a = fork();
        if (a == 0)
            measurer(b_to_a[0], a_to_b[1], size, turns);
        pid_t b = fork();
        if (b == 0)
            child(a_to_b[0], b_to_a[1], size, turns);
        close(a_to_b[0]), close(a_to_b[1]), close(b_to_a[0]), close(b_to_a[1]);
        int sa = 0, sb = 0;
        waitpid(a, &sa, 0);
        waitpid(b, &sb, 0);
        failed |= !exited_ok(sa) || !exited_ok(sb);
    }
    return failed;
}
