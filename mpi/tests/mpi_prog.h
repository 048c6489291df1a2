/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the MPI programs run under the shim share (the tests in mpi/tests and
 * mpi/bench's cucopy_mpi_bench): a fatal check of MPI calls, a counted
 * check, and a look at this process's mappings (is the shim, libcucopy or a
 * libcuda loaded?).
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

/* One check of @p cond, counted in @p checks and (failed) @p failures; a
 * failure says where and why on stderr, naming @p prog and @p rank. */
#define MPI_PROG_CHECK(prog, rank, checks, failures, cond, ...)                          \
    do {                                                                              \
        (checks)++;                                                                   \
        if (!(cond)) {                                                                \
            (failures)++;                                                             \
            fprintf(stderr, "%s: rank %d: FAILED at %s:%d: ", prog, rank, __FILE__,    \
                    __LINE__);                                                        \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
        }                                                                             \
    } while (0)

/* In main: run test_NAME() when the program's argument @p only is "all" or
 * NAME, then a barrier. */
#define MPI_PROG_RUN(only, name)                                  \
    if (strcmp(only, "all") == 0 || strcmp(only, #name) == 0) { \
        test_##name();                                           \
        MPI_Barrier(MPI_COMM_WORLD);                             \
    }

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

/* 1 when MPI_Error_string returns what MPI_Add_error_string set. Debian's
 * MPICH 4.0.2 does not (measured): the shim then raises the plain class and
 * prints its message on stderr (the CTests check that line), and only the
 * class can be checked in the program; @p prog's rank @p rank says so once. */
static inline int mpi_prog_added_strings_kept(const char *prog, int rank)
{
    static int kept = -1;
    if (kept < 0) {
        int code = MPI_SUCCESS, len = 0;
        char text[MPI_MAX_ERROR_STRING] = "";
        MPI_Add_error_code(MPI_ERR_OTHER, &code);
        MPI_Add_error_string(code, "mpi_prog: probe");
        MPI_Error_string(code, text, &len);
        kept = strcmp(text, "mpi_prog: probe") == 0;
        if (!kept)
            printf("%s: rank %d: this MPI loses added error strings: "
                   "error classes checked, messages on stderr\n", prog, rank);
    }
    return kept;
}

/* 1 when @p rc is of class @p want_class and its message names @p call (or
 * this MPI loses added strings); *cls and text[] get what MPI says of it. */
static inline int mpi_prog_error_is(const char *prog, int rank, int rc, int want_class,
                                    const char *call, int *cls, char text[MPI_MAX_ERROR_STRING])
{
    int len = 0;
    *cls = MPI_SUCCESS;
    text[0] = 0;
    if (rc != MPI_SUCCESS) {
        MPI_Error_class(rc, cls);
        MPI_Error_string(rc, text, &len);
    }
    return *cls == want_class &&
           (strstr(text, call) != NULL || !mpi_prog_added_strings_kept(prog, rank));
}

#endif
