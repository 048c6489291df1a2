/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A host-only MPI program: under LD_PRELOAD=libcucopy_mpi.so it must behave
 * exactly as without it and never map libcucopy.so.0 or a libcuda
 * (/proc/self/maps, checked before and after MPI_Finalize).
 *
 *   host_only --expect-shim | --expect-no-shim     the checks (CTest)
 *   host_only --bench [iterations] [--load-cuda]   ns per call of host-buffer
 *       calls, for comparing runs with and without the shim; --load-cuda
 *       first dlopens $CUCOPY_CUDA_DRIVER (the shim then classifies every
 *       buffer). Timings are printed, never asserted.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi_prog.h"

static int rank, nranks, failures, checks;

#define CHECK(cond, ...) MPI_PROG_CHECK("host_only", rank, checks, failures, cond, __VA_ARGS__)

static void check_maps(int expect_shim, const char *when)
{
    CHECK(mpi_prog_mapped("libcucopy.so") == 0, "%s: libcucopy.so.0 is mapped", when);
    CHECK(mpi_prog_mapped("libcuda.so") == 0, "%s: a libcuda is mapped", when);
    /* libcucopy_mpi.so or libcucopy_mpi_mpich.so */
    CHECK(mpi_prog_mapped("/libcucopy_mpi") == expect_shim, "%s: libcucopy_mpi*.so %s", when,
          expect_shim ? "is not mapped (no LD_PRELOAD?)" : "is mapped");
}

static void exchange(void)
{
    int to = (rank + 1) % nranks, from = (rank + nranks - 1) % nranks;
    enum { N = 1000 };
    static int s[N], r[N];
    for (int i = 0; i < N; i++)
        s[i] = rank * N + i;
    MPI_Status st;
    MPI_Sendrecv(s, N, MPI_INT, to, 1, r, N, MPI_INT, from, 1, MPI_COMM_WORLD, &st);
    int ok = st.MPI_SOURCE == from;
    for (int i = 0; i < N; i++)
        ok &= r[i] == from * N + i;
    CHECK(ok, "Sendrecv");

    MPI_Request reqs[4];
    static int r2[N];
    MPI_Irecv(r2, N, MPI_INT, from, 2, MPI_COMM_WORLD, &reqs[0]);
    MPI_Irecv(r, N / 2, MPI_INT, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &reqs[1]);
    MPI_Isend(s, N, MPI_INT, to, 2, MPI_COMM_WORLD, &reqs[2]);
    MPI_Issend(s, N / 2, MPI_INT, to, 3, MPI_COMM_WORLD, &reqs[3]);
    int done = 0;
    while (done < 4) {
        int idx, flag;
        MPI_Testany(4, reqs, &idx, &flag, MPI_STATUS_IGNORE);
        if (flag && idx != MPI_UNDEFINED)
            done++;
    }
    ok = 1;
    for (int i = 0; i < N; i++)
        ok &= r2[i] == from * N + i && (i >= N / 2 || r[i] == from * N + i);
    CHECK(ok, "Irecv/Isend/Issend/Testany");

    /* A vector type and MPI_BOTTOM on host memory: passed through. */
    MPI_Datatype column;
    MPI_Type_vector(10, 1, 10, MPI_INT, &column);
    MPI_Type_commit(&column);
    for (int i = 0; i < 100; i++)
        r[i] = -1;
    MPI_Aint at;
    MPI_Get_address(s, &at);
    MPI_Datatype absolute;
    int len = 10;
    MPI_Type_create_hindexed(1, &len, &at, MPI_INT, &absolute);
    MPI_Type_commit(&absolute);
    MPI_Sendrecv(MPI_BOTTOM, 1, absolute, to, 4, r, 1, column, from, 4, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    ok = 1;
    for (int i = 0; i < 100; i++)
        ok &= r[i] == (i % 10 == 0 ? from * N + i / 10 : -1);
    CHECK(ok, "MPI_BOTTOM and a vector type on host memory");
    MPI_Type_free(&column);
    MPI_Type_free(&absolute);
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void bench(long iters, int load_cuda)
{
    if (load_cuda) {
        const char *drv = getenv("CUCOPY_CUDA_DRIVER");
        if (dlopen(drv && *drv ? drv : "libcuda.so.1", RTLD_NOW | RTLD_GLOBAL) == NULL) {
            fprintf(stderr, "host_only: --load-cuda: %s\n", dlerror());
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    char buf[8] = {0}, rbuf[8];
    MPI_Request req;
    double best[4] = {1e30, 1e30, 1e30, 1e30};
    for (int rep = 0; rep < 5; rep++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now_ns();
        for (long i = 0; i < iters; i++)
            MPI_Send(buf, 8, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
        double t1 = now_ns();
        for (long i = 0; i < iters; i++) {
            MPI_Isend(buf, 8, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        double t2 = now_ns();
        for (long i = 0; i < iters; i++)
            MPI_Sendrecv(buf, 8, MPI_BYTE, rank, 0, rbuf, 8, MPI_BYTE, rank, 0, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
        double t3 = now_ns();
        long pp = iters / 10;
        MPI_Barrier(MPI_COMM_WORLD);
        double t4 = now_ns();
        if (nranks >= 2 && rank < 2) {
            for (long i = 0; i < pp; i++) {
                if (rank == 0) {
                    MPI_Send(buf, 8, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
                    MPI_Recv(rbuf, 8, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(rbuf, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
                }
            }
        }
        double t5 = now_ns();
        double v[4] = {(t1 - t0) / iters, (t2 - t1) / iters, (t3 - t2) / iters,
                       pp ? (t5 - t4) / pp / 2 : 0};
        for (int k = 0; k < 4; k++)
            best[k] = v[k] < best[k] ? v[k] : best[k];
    }
    if (rank == 0)
        printf("host_only bench (best of 5, %ld iterations, libcuda %s): "
               "Send(PROC_NULL) %.1f ns, Isend+Wait(PROC_NULL) %.1f ns, "
               "Sendrecv(self, 8 B) %.1f ns, ping-pong half round trip (8 B) %.1f ns\n",
               iters, load_cuda ? "loaded" : "not loaded", best[0], best[1], best[2], best[3]);
}

int main(int argc, char **argv)
{
    int expect_shim = -1, do_bench = 0, load_cuda = 0;
    long iters = 1000000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--expect-shim") == 0)
            expect_shim = 1;
        else if (strcmp(argv[i], "--expect-no-shim") == 0)
            expect_shim = 0;
        else if (strcmp(argv[i], "--bench") == 0)
            do_bench = 1;
        else if (strcmp(argv[i], "--load-cuda") == 0)
            load_cuda = 1;
        else if (do_bench)
            iters = atol(argv[i]);
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (do_bench) {
        bench(iters, load_cuda);
        MPI_Finalize();
        return 0;
    }
    if (expect_shim < 0) {
        fprintf(stderr, "usage: host_only --expect-shim | --expect-no-shim | --bench [n]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int round = 0; round < 3; round++)
        exchange();
    check_maps(expect_shim, "before MPI_Finalize");
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    check_maps(expect_shim, "after MPI_Finalize");
    if (failures == 0 && total == 0)
        printf("host_only: rank %d: PASS\n", rank);
    else
        printf("host_only: rank %d: FAILED\n", rank);
    return failures == 0 && total == 0 ? 0 : 1;
}
