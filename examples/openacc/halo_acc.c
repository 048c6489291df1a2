/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An unchanged OpenACC program that hands device buffers to MPI: a 1-D
 * domain split over the ranks, its field on the GPU (acc enter data), one
 * ghost cell on each side exchanged every step with MPI_Sendrecv and with
 * MPI_Isend/MPI_Irecv/MPI_Waitall on `host_data use_device` pointers, a
 * three-point average computed on the GPU. At the end the field is compared
 * with the same computation done on the host (no MPI, no GPU).
 *
 * With an MPI that is not CUDA-aware the MPI calls read and write device
 * memory from the CPU and the program crashes or computes garbage; with
 *   mpirun -x LD_PRELOAD=.../libcucopy_mpi.so ./halo_acc
 * it verifies. Built with gcc -fopenacc -foffload=nvptx-none (GCC's
 * OpenACC), run on a GPU machine (tests/gpu/openacc.sh).
 */
#include <mpi.h>
#include <openacc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOCAL 65536
#define STEPS 40

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

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int left = (rank + np - 1) % np, right = (rank + 1) % np;

    /* u[0] and u[LOCAL + 1] are the ghost cells. */
    double *u = malloc((LOCAL + 2) * sizeof(double));
    double *t = malloc((LOCAL + 2) * sizeof(double));
    for (long i = 0; i < LOCAL; i++)
        u[i + 1] = initial((long)rank * LOCAL + i);
#pragma acc enter data copyin(u[0:LOCAL + 2]) create(t[0:LOCAL + 2])

    for (int step = 0; step < STEPS; step++) {
#pragma acc host_data use_device(u)
        {
            if (step % 2 == 0) {
                /* right edge -> right neighbour's left ghost, and back */
                MPI_Sendrecv(&u[LOCAL], 1, MPI_DOUBLE, right, 1, &u[0], 1, MPI_DOUBLE, left, 1,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 2, &u[LOCAL + 1], 1, MPI_DOUBLE, right,
                             2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Request r[4];
                MPI_Irecv(&u[0], 1, MPI_DOUBLE, left, 3, MPI_COMM_WORLD, &r[0]);
                MPI_Irecv(&u[LOCAL + 1], 1, MPI_DOUBLE, right, 4, MPI_COMM_WORLD, &r[1]);
                MPI_Isend(&u[LOCAL], 1, MPI_DOUBLE, right, 3, MPI_COMM_WORLD, &r[2]);
                MPI_Isend(&u[1], 1, MPI_DOUBLE, left, 4, MPI_COMM_WORLD, &r[3]);
                MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
            }
        }
#pragma acc parallel loop present(u[0:LOCAL + 2], t[0:LOCAL + 2])
        for (long i = 1; i <= LOCAL; i++)
            t[i] = (u[i - 1] + u[i] + u[i + 1]) / 3.0;
#pragma acc parallel loop present(u[0:LOCAL + 2], t[0:LOCAL + 2])
        for (long i = 1; i <= LOCAL; i++)
            u[i] = t[i];
    }
#pragma acc exit data copyout(u[0:LOCAL + 2]) delete(t[0:LOCAL + 2])

    /* Reference on the host, whole domain, and this rank's part of it. */
    long n = (long)np * LOCAL;
    double *ru = malloc((size_t)n * sizeof(double)), *rt = malloc((size_t)n * sizeof(double));
    for (long g = 0; g < n; g++)
        ru[g] = initial(g);
    for (int step = 0; step < STEPS; step++)
        reference_step(ru, rt, n);
    long bad = 0;
    for (long i = 0; i < LOCAL; i++) {
        double want = ru[(long)rank * LOCAL + i], got = u[i + 1];
        if (got < want - 1e-9 * (1 + want) || got > want + 1e-9 * (1 + want))
            bad++;
    }
    long total = 0;
    MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    int ondev = acc_get_device_type() == acc_device_nvidia;
    if (rank == 0)
        printf("halo_acc: %s ranks=%d steps=%d cells=%ld wrong=%ld (OpenACC device: %s)\n",
               total == 0 ? "OK" : "FAILED", np, STEPS, n, total, ondev ? "nvidia" : "host");
    free(u);
    free(t);
    free(ru);
    free(rt);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
