/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One rank driving two GPUs, unchanged OpenACC: each rank's part of a 1-D
 * periodic domain is split in two halves, half 0 on GPU 0 and half 1 on GPU
 * 1 (both on GPU 0 on a one-GPU machine), each with its own data on its own
 * device (acc_set_device_num before every construct). Every step exchanges
 * the halves' ghost cells with MPI_Sendrecv calls whose send buffer is on one
 * GPU and receive buffer on the other: between the two halves of a rank (the
 * rank sends to itself) and between a rank's half 1 and the next rank's half
 * 0; then the three-point average runs on each device. At the end each half's
 * sum is reduced over the ranks by MPI_Allreduce with the send buffer on one
 * GPU and the receive buffer on the other. The field and the sums are compared
 * with the same computation done on the host (no MPI, no GPU).
 *
 * Device addresses come from acc_deviceptr on each half's own device, so one
 * MPI call carries buffers of two GPUs. An MPI that is not CUDA-aware reads
 * and writes them from the CPU and crashes; with
 *   mpirun -x LD_PRELOAD=.../libcucopy_mpi.so ./halo_acc2
 * it verifies (tests/gpu/openacc.sh). Built as halo_acc.c is.
 */
#include <mpi.h>
#include <openacc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HALF 32768 /* cells per half; a rank has 2 * HALF */
#define STEPS 40

static int ngpu;   /* NVIDIA devices OpenACC sees (0: host fallback) */
static int gpu[2]; /* the device of each half */

static void on(int h)
{
    if (ngpu > 0)
        acc_set_device_num(gpu[h], acc_device_nvidia);
}

static double initial(long g)
{
    return (double)((g * 37) % 1009);
}

/* One step of the reference on the whole domain (periodic). */
static void reference_step(double *u, double *t, long n)
{
    for (long i = 0; i < n; i++)
        t[i] = (u[(i + n - 1) % n] + u[i] + u[(i + 1) % n]) / 3.0;
    memcpy(u, t, (size_t)n * sizeof(double));
}

/* Half h's data on its device: u[0] and u[HALF + 1] are its ghost cells. */
static void enter(int h, double *u, double *t, double *sum, double *tot)
{
    on(h);
#pragma acc enter data copyin(u[0:HALF + 2]) create(t[0:HALF + 2], sum[0:1], tot[0:1])
}

static double *dev(int h, void *p)
{
    on(h);
    return acc_deviceptr(p);
}

static void average(int h, double *u, double *t)
{
    on(h);
#pragma acc parallel loop present(u[0:HALF + 2], t[0:HALF + 2])
    for (long i = 1; i <= HALF; i++)
        t[i] = (u[i - 1] + u[i] + u[i + 1]) / 3.0;
#pragma acc parallel loop present(u[0:HALF + 2], t[0:HALF + 2])
    for (long i = 1; i <= HALF; i++)
        u[i] = t[i];
}

/* The half's sum into sum[0] on its device. */
static void half_sum(int h, double *u, double *sum)
{
    on(h);
    double s = 0;
#pragma acc parallel loop reduction(+ : s) present(u[0:HALF + 2])
    for (long i = 1; i <= HALF; i++)
        s += u[i];
    sum[0] = s;
#pragma acc update device(sum[0:1])
}

static void leave(int h, double *u, double *t, double *sum, double *tot)
{
    on(h);
#pragma acc exit data copyout(u[0:HALF + 2], tot[0:1]) delete(t[0:HALF + 2], sum[0:1])
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int left = (rank + np - 1) % np, right = (rank + 1) % np;
    ngpu = acc_get_num_devices(acc_device_nvidia);
    gpu[0] = 0;
    gpu[1] = ngpu > 1 ? 1 : 0;

    double *u[2], *t[2], sum[2][1], tot[2][1];
    for (int h = 0; h < 2; h++) {
        u[h] = malloc((HALF + 2) * sizeof(double));
        t[h] = malloc((HALF + 2) * sizeof(double));
        for (long i = 0; i < HALF; i++)
            u[h][i + 1] = initial((long)rank * 2 * HALF + (long)h * HALF + i);
        enter(h, u[h], t[h], sum[h], tot[h]);
    }

    for (int step = 0; step < STEPS; step++) {
        /* Inside the rank: half 0's right ghost <- half 1's first cell, half
         * 1's left ghost <- half 0's last cell (GPU 1 -> GPU 0, and back). */
        MPI_Sendrecv(dev(1, &u[1][1]), 1, MPI_DOUBLE, rank, 1, dev(0, &u[0][HALF + 1]), 1,
                     MPI_DOUBLE, rank, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(dev(0, &u[0][HALF]), 1, MPI_DOUBLE, rank, 2, dev(1, &u[1][0]), 1,
                     MPI_DOUBLE, rank, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        /* Between ranks: half 0's first cell to the left neighbour's half 1
         * right ghost, half 1's last cell to the right neighbour's half 0
         * left ghost. */
        MPI_Sendrecv(dev(0, &u[0][1]), 1, MPI_DOUBLE, left, 3, dev(1, &u[1][HALF + 1]), 1,
                     MPI_DOUBLE, right, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(dev(1, &u[1][HALF]), 1, MPI_DOUBLE, right, 4, dev(0, &u[0][0]), 1,
                     MPI_DOUBLE, left, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int h = 0; h < 2; h++)
            average(h, u[h], t[h]);
    }
    /* Each half's sum over the ranks, from one GPU into the other. */
    for (int h = 0; h < 2; h++)
        half_sum(h, u[h], sum[h]);
    MPI_Allreduce(dev(0, sum[0]), dev(1, tot[1]), 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(dev(1, sum[1]), dev(0, tot[0]), 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int h = 0; h < 2; h++)
        leave(h, u[h], t[h], sum[h], tot[h]);

    /* Reference on the host, whole domain: this rank's cells, each half's sum. */
    long n = (long)np * 2 * HALF;
    double *ru = malloc((size_t)n * sizeof(double)), *rt = malloc((size_t)n * sizeof(double));
    for (long g = 0; g < n; g++)
        ru[g] = initial(g);
    for (int step = 0; step < STEPS; step++)
        reference_step(ru, rt, n);
    long bad = 0;
    double want_sum[2] = {0, 0};
    for (long g = 0; g < n; g++)
        want_sum[(g / HALF) % 2] += ru[g];
    for (int h = 0; h < 2; h++)
        for (long i = 0; i < HALF; i++) {
            double want = ru[(long)rank * 2 * HALF + (long)h * HALF + i], got = u[h][i + 1];
            if (got < want - 1e-9 * (1 + want) || got > want + 1e-9 * (1 + want))
                bad++;
        }
    /* tot[1] holds half 0's sum (sent from GPU 0), tot[0] half 1's. */
    for (int h = 0; h < 2; h++) {
        double got = tot[1 - h][0], want = want_sum[h];
        if (got < want - 1e-9 * (1 + want) || got > want + 1e-9 * (1 + want))
            bad++;
    }
    long total = 0;
    MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    int ondev = ngpu > 0 && acc_get_device_type() == acc_device_nvidia;
    if (rank == 0)
        printf("halo_acc2: %s ranks=%d gpus per rank=%d (halves on %d and %d) steps=%d "
               "cells=%ld wrong=%ld (OpenACC device: %s)\n",
               total == 0 ? "OK" : "FAILED", np, gpu[1] == gpu[0] ? 1 : 2, gpu[0], gpu[1],
               STEPS, n, total, ondev ? "nvidia" : "host");
    for (int h = 0; h < 2; h++) {
        free(u[h]);
        free(t[h]);
    }
    free(ru);
    free(rt);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
