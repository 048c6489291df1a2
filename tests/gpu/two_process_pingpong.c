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
 *   gcc -O2 -std=gnu11 -I cudadrv -I tests/common tests/gpu/two_process_pingpong.c \
 *       tests/common/testdrv.c -ldl -o pingpong && ./pingpong [SIZE...]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* The parent never touches CUDA: both processes of a size are its children. */
int main(int argc, char **argv)
{
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
        failed |= !WIFEXITED(sa) || WEXITSTATUS(sa) != 0 || !WIFEXITED(sb) || WEXITSTATUS(sb) != 0;
    }
    return failed;
}
