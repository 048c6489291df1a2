/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the MPI programs run under the shim share (the tests in mpi/tests and
 * mpi/bench's cucopy_mpi_bench): a fatal check of MPI calls, and a look at
 * this process's mappings (is the shim, libcucopy or a libcuda loaded?).
 */
#ifndef CUCOPY_MPI_PROG_H
#define CUCOPY_MPI_PROG_H

#include <mpi.h>
#include <stdio.h>
#include <string.h>

/* Abort the job when @p call does not return MPI_SUCCESS, naming the
 * program @p prog, rank @p rank, the place, the call and MPI's message. */
#define MPI_OK_OR_ABORT(prog, rank, call)                                                 \
    do {                                                                                  \
        int rc_ = (call);                                                                 \
        if (rc_ != MPI_SUCCESS) {                                                         \
            char s_[MPI_MAX_ERROR_STRING];                                                \
            int l_ = 0;                                                                   \
            MPI_Error_string(rc_, s_, &l_);                                               \
            fprintf(stderr, "%s: rank %d: FAILED at %s:%d: %s: %s\n", prog, rank, __FILE__, \
                    __LINE__, #call, s_);                                                 \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                 \
        }                                                                                 \
    } while (0)

/* 1 when a mapping of this process (/proc/self/maps) names @p what, 0 when
 * none does, -1 when the maps cannot be read. */
static inline int mpi_prog_mapped(const char *what)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL)
        return -1;
    char line[4096];
    int found = 0;
    while (fgets(line, sizeof line, f) != NULL)
        found |= strstr(line, what) != NULL;
    fclose(f);
    return found;
}

#endif
