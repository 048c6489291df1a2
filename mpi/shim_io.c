/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MPI-IO and RMA (issue 13, item 6).
 *
 * Blocking MPI-IO is staged as a blocking send or receive is: MPI_File_write,
 * _at, _all, _at_all, _shared and _ordered copy a device buffer into pinned
 * host memory before PMPI writes from it; MPI_File_read and its five
 * siblings give PMPI host memory and copy back to the device exactly the
 * bytes MPI read (the status's byte count: a short read at the end of the
 * file leaves the rest of the device buffer as it was). A memory datatype
 * that is not one contiguous block is staged packed (shim_types.c; PMPI gets
 * its signature type); the file view is MPI's business and may be anything.
 * MPI-4 libraries get the
 * large-count MPI_File_X_c forms too.
 *
 * Refused with MPI_ERR_UNSUPPORTED_OPERATION on device memory (host memory
 * passes straight through): the nonblocking IO (MPI_File_iread & co.) and the
 * split collectives (MPI_File_read_all_begin & co.), whose buffer MPI uses
 * after the call returns; an RMA window on device memory (MPI_Win_create,
 * MPI_Win_attach); a device origin, result or compare buffer of MPI_Put,
 * MPI_Get, MPI_Accumulate, MPI_Get_accumulate, their request forms,
 * MPI_Fetch_and_op and MPI_Compare_and_swap (MPI reads and writes them until
 * the epoch ends).
 *
 * Errors go where MPI sends them: a file's to its own error handler
 * (MPI_File_call_errhandler; MPI_ERRORS_RETURN unless the program set
 * another), a window's to the window's, MPI_Win_create's to its
 * communicator's. shim_stage() raises its errors on a communicator: here a
 * private one whose handler is MPI_ERRORS_RETURN, so the code comes back
 * unraised and is then raised on the file or window.
 */
#include "shim.h"

#include <pthread.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------------------ */

static MPI_Comm io_comm = MPI_COMM_NULL;
static pthread_once_t io_comm_once = PTHREAD_ONCE_INIT;

static void io_comm_make(void)
{
    /* Comm_split copies no attributes of MPI_COMM_SELF (Comm_dup would call
     * the program's copy callbacks). */
    MPI_Comm c;
    if (PMPI_Comm_split(MPI_COMM_SELF, 0, 0, &c) == MPI_SUCCESS &&
        PMPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN) == MPI_SUCCESS)
        io_comm = c;
    else
        io_comm = MPI_COMM_SELF; /* cannot happen in practice: errors then go to SELF's */
}

/* The communicator on which the shim's errors of a file or window call are
 * made (its handler returns); the code is raised on the file or window next. */
static MPI_Comm io_errcomm(void)
{
    pthread_once(&io_comm_once, io_comm_make);
    return io_comm;
}

static int file_raise(MPI_File fh, int code)
{
    PMPI_File_call_errhandler(fh, code);
    return code;
}

static int win_raise(MPI_Win win, int code)
{
    PMPI_Win_call_errhandler(win, code);
    return code;
}

/* ---- classification only: the refused calls ----------------------------------------- */

/*
 * MPI_SUCCESS when @p buf (count elements of dt) starts in memory that
 * passes through (host memory; managed memory unless CUCOPY_MPI_MANAGED=stage);
 * otherwise an error code, not raised yet: MPI_ERR_UNSUPPORTED_OPERATION,
 * "cucopy_mpi: <call>: <what>", for memory the shim would stage, or the
 * classification's own error. Only the first byte (buf + true lower bound)
 * is looked at: the datatype's shape does not matter for a refusal.
 */
static int refuse_device(const char *call, const void *buf, MPI_Count count, MPI_Datatype dt,
                         const char *what)
{
    MPI_Count tlb = 0, text = 0;
    if (count <= 0 || PMPI_Type_get_true_extent_x(dt, &tlb, &text) != MPI_SUCCESS)
        return MPI_SUCCESS; /* nothing is accessed, or a bad type: MPI reports it */
    /* Unsigned arithmetic: MPI_BOTTOM (NULL) with absolute addresses. */
    const void *first = (const void *)((uintptr_t)buf + (uintptr_t)(intptr_t)tlb);
    struct shim_buf b;
    int rc = shim_stage(call, first, 1, MPI_BYTE, io_errcomm(), 0, &b);
    if (rc != MPI_SUCCESS || !b.staged)
        return rc;
    shim_release(&b);
    return shim_error(io_errcomm(), MPI_ERR_UNSUPPORTED_OPERATION, call, what);
}

#define IO_DEFERRED_WHAT                                                                      \
    "device memory in nonblocking or split-collective MPI-IO is not supported "               \
    "(the blocking calls stage it)"
#define WIN_WHAT "an RMA window on device memory is not supported"
#define ORIGIN_WHAT "a device buffer in an RMA operation is not supported (yet)"

/* ---- blocking IO, staged ------------------------------------------------------------ */

/* The status a staged read gives PMPI: the user's or a local one, zeroed.
 * Open MPI 4.1 and MPICH 4.0 set only the byte count of a file status
 * (measured): left as the program had it, the cancelled flag that
 * shim_received_bytes() reads would be stack garbage. */
static MPI_Status *io_status(MPI_Status *user, MPI_Status *local)
{
    MPI_Status *s = user == MPI_STATUS_IGNORE ? local : user;
    memset(s, 0, sizeof *s);
    return s;
}

static int io_stage(MPI_File fh, const char *call, const void *buf, MPI_Count count,
                    MPI_Datatype dt, int dir, struct shim_buf *b)
{
    int rc = shim_stage(call, buf, count, dt, io_errcomm(), dir, b);
    return rc == MPI_SUCCESS ? rc : file_raise(fh, rc);
}

/* After PMPI returned @p rc for a staged buffer: a read copies the bytes MPI
 * read (status @p s) to the device; the staging memory goes back. The call's
 * result (a failed copy raised on the file). */
static int io_finish(MPI_File fh, const char *call, int rc, struct shim_buf *b,
                     const MPI_Status *s, int dir)
{
    if ((dir & SHIM_FROM_MPI) && rc == MPI_SUCCESS) {
        rc = shim_unstage(call, b, shim_received_bytes(s), io_errcomm());
        if (rc != MPI_SUCCESS)
            file_raise(fh, rc);
    }
    shim_release(b);
    return rc;
}

/* Offset parameter and argument of the _at forms (empty for the others). */
#define AT_P MPI_Offset offset,
#define AT_A offset,

/* CONST: const for writes; DIR: SHIM_TO_MPI (write), SHIM_FROM_MPI (read) or
 * SHIM_BOTH (a collective read: see IO_WRAPPERS). */
#define IO_BLOCKING(NAME, SFX, COUNT_T, CONST, DIR, OFF_P, OFF_A)                             \
    SHIM_EXPORT int MPI_##NAME##SFX(MPI_File fh, OFF_P CONST void *buf, COUNT_T count,        \
                                    MPI_Datatype dt, MPI_Status *status)                      \
    {                                                                                         \
        struct shim_buf b = {0};                                                              \
        int rc = MPI_SUCCESS;                                                                 \
        shim_defer_flush_if(); /* collective IO may wait for peers */                        \
        if (SHIM_LIKELY(!shim_active_for(SHIM_CLASS_IO)) || count == 0 ||                                      \
            (rc = io_stage(fh, "MPI_" #NAME #SFX, buf, count, dt, DIR, &b)) != MPI_SUCCESS || \
            !b.staged)                                                                        \
            return rc != MPI_SUCCESS ? rc : PMPI_##NAME##SFX(fh, OFF_A buf, count, dt, status); \
        MPI_Status local, *s = (DIR & SHIM_FROM_MPI) ? io_status(status, &local) : status;   \
        rc = PMPI_##NAME##SFX(fh, OFF_A shim_host_arg(&b), count, shim_type_arg(&b, dt), s);  \
        return io_finish(fh, "MPI_" #NAME #SFX, rc, &b, s, DIR);                              \
    }

/* ---- nonblocking and split-collective IO: refused on device memory ---------------- */

#define IO_NONBLOCKING(NAME, SFX, COUNT_T, CONST, OFF_P, OFF_A)                               \
    SHIM_EXPORT int MPI_##NAME##SFX(MPI_File fh, OFF_P CONST void *buf, COUNT_T count,        \
                                    MPI_Datatype dt, MPI_Request *req)                        \
    {                                                                                         \
        int rc = MPI_SUCCESS;                                                                 \
        if (SHIM_LIKELY(!shim_active_for(SHIM_CLASS_IO)) ||                                                    \
            (rc = refuse_device("MPI_" #NAME #SFX, buf, count, dt, IO_DEFERRED_WHAT)) ==      \
                MPI_SUCCESS)                                                                  \
            return PMPI_##NAME##SFX(fh, OFF_A buf, count, dt, req);                           \
        *req = MPI_REQUEST_NULL;                                                              \
        return file_raise(fh, rc);                                                            \
    }

/* The _end calls need no wrapper: a refused _begin started nothing. */
#define IO_BEGIN(NAME, SFX, COUNT_T, CONST, OFF_P, OFF_A)                                     \
    SHIM_EXPORT int MPI_##NAME##SFX(MPI_File fh, OFF_P CONST void *buf, COUNT_T count,        \
                                    MPI_Datatype dt)                                          \
    {                                                                                         \
        int rc = MPI_SUCCESS;                                                                 \
        if (SHIM_LIKELY(!shim_active_for(SHIM_CLASS_IO)) ||                                                    \
            (rc = refuse_device("MPI_" #NAME #SFX, buf, count, dt, IO_DEFERRED_WHAT)) ==      \
                MPI_SUCCESS)                                                                  \
            return PMPI_##NAME##SFX(fh, OFF_A buf, count, dt);                                \
        return file_raise(fh, rc);                                                            \
    }

/*
 * The collective reads (read_all, read_at_all) copy the device buffer in
 * first: at the end of the file both MPIs report the whole count read
 * (measured on host memory: Open MPI 4.1's read_all writes only the bytes
 * there were and leaves the rest of the buffer alone, MPICH 4.0's read_all
 * and read_at_all write zeros past the end), so the bytes MPI counts but did
 * not write must be the device's own for the device to end as host memory
 * would. The other reads report the bytes read (both MPIs) and copy only
 * those back.
 */
#define IO_WRAPPERS(SFX, COUNT_T)                                                   \
    IO_BLOCKING(File_read, SFX, COUNT_T, , SHIM_FROM_MPI, , )                       \
    IO_BLOCKING(File_read_all, SFX, COUNT_T, , SHIM_BOTH, , )                       \
    IO_BLOCKING(File_read_shared, SFX, COUNT_T, , SHIM_FROM_MPI, , )                \
    IO_BLOCKING(File_read_ordered, SFX, COUNT_T, , SHIM_FROM_MPI, , )               \
    IO_BLOCKING(File_read_at, SFX, COUNT_T, , SHIM_FROM_MPI, AT_P, AT_A)            \
    IO_BLOCKING(File_read_at_all, SFX, COUNT_T, , SHIM_BOTH, AT_P, AT_A)            \
    IO_BLOCKING(File_write, SFX, COUNT_T, const, SHIM_TO_MPI, , )                   \
    IO_BLOCKING(File_write_all, SFX, COUNT_T, const, SHIM_TO_MPI, , )               \
    IO_BLOCKING(File_write_shared, SFX, COUNT_T, const, SHIM_TO_MPI, , )            \
    IO_BLOCKING(File_write_ordered, SFX, COUNT_T, const, SHIM_TO_MPI, , )           \
    IO_BLOCKING(File_write_at, SFX, COUNT_T, const, SHIM_TO_MPI, AT_P, AT_A)        \
    IO_BLOCKING(File_write_at_all, SFX, COUNT_T, const, SHIM_TO_MPI, AT_P, AT_A)    \
    IO_NONBLOCKING(File_iread, SFX, COUNT_T, , , )                                  \
    IO_NONBLOCKING(File_iread_all, SFX, COUNT_T, , , )                              \
    IO_NONBLOCKING(File_iread_shared, SFX, COUNT_T, , , )                           \
    IO_NONBLOCKING(File_iread_at, SFX, COUNT_T, , AT_P, AT_A)                       \
    IO_NONBLOCKING(File_iread_at_all, SFX, COUNT_T, , AT_P, AT_A)                   \
    IO_NONBLOCKING(File_iwrite, SFX, COUNT_T, const, , )                            \
    IO_NONBLOCKING(File_iwrite_all, SFX, COUNT_T, const, , )                        \
    IO_NONBLOCKING(File_iwrite_shared, SFX, COUNT_T, const, , )                     \
    IO_NONBLOCKING(File_iwrite_at, SFX, COUNT_T, const, AT_P, AT_A)                 \
    IO_NONBLOCKING(File_iwrite_at_all, SFX, COUNT_T, const, AT_P, AT_A)             \
    IO_BEGIN(File_read_all_begin, SFX, COUNT_T, , , )                               \
    IO_BEGIN(File_read_ordered_begin, SFX, COUNT_T, , , )                           \
    IO_BEGIN(File_read_at_all_begin, SFX, COUNT_T, , AT_P, AT_A)                    \
    IO_BEGIN(File_write_all_begin, SFX, COUNT_T, const, , )                         \
    IO_BEGIN(File_write_ordered_begin, SFX, COUNT_T, const, , )                     \
    IO_BEGIN(File_write_at_all_begin, SFX, COUNT_T, const, AT_P, AT_A)

IO_WRAPPERS(, int)

#if SHIM_LARGE_COUNT
IO_WRAPPERS(_c, MPI_Count)
#endif

/* ---- RMA: windows and origin buffers on device memory refused ---------------------- */

/* A window's base: MPI_SUCCESS, or an error code not raised yet. */
static int win_base_refuse(const char *call, const void *base, MPI_Aint size)
{
    if (SHIM_LIKELY(!shim_active_for(SHIM_CLASS_IO)) || size <= 0)
        return MPI_SUCCESS;
    return refuse_device(call, base, 1, MPI_BYTE, WIN_WHAT);
}

#define WIN_CREATE(SFX, DISP_T)                                                                \
    SHIM_EXPORT int MPI_Win_create##SFX(void *base, MPI_Aint size, DISP_T disp_unit,           \
                                        MPI_Info info, MPI_Comm comm, MPI_Win *win)            \
    {                                                                                          \
        int rc = win_base_refuse("MPI_Win_create" #SFX, base, size);                           \
        if (rc == MPI_SUCCESS)                                                                 \
            return PMPI_Win_create##SFX(base, size, disp_unit, info, comm, win);               \
        /* No window yet: MPI_Win_create's errors go to the communicator. */                   \
        *win = MPI_WIN_NULL;                                                                   \
        PMPI_Comm_call_errhandler(comm, rc);                                                   \
        return rc;                                                                             \
    }

WIN_CREATE(, int)
#if SHIM_LARGE_COUNT
WIN_CREATE(_c, MPI_Aint)
#endif

SHIM_EXPORT int MPI_Win_attach(MPI_Win win, void *base, MPI_Aint size)
{
    int rc = win_base_refuse("MPI_Win_attach", base, size);
    return rc == MPI_SUCCESS ? PMPI_Win_attach(win, base, size) : win_raise(win, rc);
}

/* Up to three buffers of one RMA call (count 0: not accessed; the third is
 * of type @p t1, as Compare_and_swap's): MPI_SUCCESS, or an error code
 * already raised on @p win. */
static int rma_refuse(MPI_Win win, const char *call, int target, const void *b0, MPI_Count c0,
                      MPI_Datatype t0, const void *b1, MPI_Count c1, MPI_Datatype t1,
                      const void *b2, MPI_Count c2)
{
    if (SHIM_LIKELY(!shim_active_for(SHIM_CLASS_IO)) || target == MPI_PROC_NULL)
        return MPI_SUCCESS;
    int rc = refuse_device(call, b0, c0, t0, ORIGIN_WHAT);
    if (rc == MPI_SUCCESS)
        rc = refuse_device(call, b1, c1, t1, ORIGIN_WHAT);
    if (rc == MPI_SUCCESS)
        rc = refuse_device(call, b2, c2, t1, ORIGIN_WHAT);
    return rc == MPI_SUCCESS ? rc : win_raise(win, rc);
}

/* The origin buffer alone; a refused request call returns MPI_REQUEST_NULL. */
#define RMA_ONE(call, b, c, t) rma_refuse(win, call, target, b, c, t, NULL, 0, MPI_BYTE, NULL, 0)
#define RMA_REQ_NULL(rc) ((rc) == MPI_SUCCESS ? 0 : (*req = MPI_REQUEST_NULL, 1))

/* MPI_NO_OP reads no origin buffer. */
#define ORIGIN_COUNT(op, c) ((op) == MPI_NO_OP ? 0 : (c))

#define RMA_WRAPPERS(SFX, COUNT_T)                                                              \
    SHIM_EXPORT int MPI_Put##SFX(const void *o, COUNT_T oc, MPI_Datatype ot, int target,        \
                                 MPI_Aint td, COUNT_T tc, MPI_Datatype tt, MPI_Win win)         \
    {                                                                                           \
        int rc = RMA_ONE("MPI_Put" #SFX, o, oc, ot);                                            \
        return rc != MPI_SUCCESS ? rc : PMPI_Put##SFX(o, oc, ot, target, td, tc, tt, win);      \
    }                                                                                           \
                                                                                                \
    SHIM_EXPORT int MPI_Get##SFX(void *o, COUNT_T oc, MPI_Datatype ot, int target, MPI_Aint td, \
                                 COUNT_T tc, MPI_Datatype tt, MPI_Win win)                      \
    {                                                                                           \
        int rc = RMA_ONE("MPI_Get" #SFX, o, oc, ot);                                            \
        return rc != MPI_SUCCESS ? rc : PMPI_Get##SFX(o, oc, ot, target, td, tc, tt, win);      \
    }                                                                                           \
                                                                                                \
    SHIM_EXPORT int MPI_Accumulate##SFX(const void *o, COUNT_T oc, MPI_Datatype ot, int target, \
                                        MPI_Aint td, COUNT_T tc, MPI_Datatype tt, MPI_Op op,    \
                                        MPI_Win win)                                            \
    {                                                                                           \
        int rc = RMA_ONE("MPI_Accumulate" #SFX, o, oc, ot);                                     \
        return rc != MPI_SUCCESS ? rc                                                           \
                                 : PMPI_Accumulate##SFX(o, oc, ot, target, td, tc, tt, op, win); \
    }                                                                                           \
                                                                                                \
    SHIM_EXPORT int MPI_Rput##SFX(const void *o, COUNT_T oc, MPI_Datatype ot, int target,       \
                                  MPI_Aint td, COUNT_T tc, MPI_Datatype tt, MPI_Win win,        \
                                  MPI_Request *req)                                             \
    {                                                                                           \
        int rc = RMA_ONE("MPI_Rput" #SFX, o, oc, ot);                                           \
        return RMA_REQ_NULL(rc) ? rc : PMPI_Rput##SFX(o, oc, ot, target, td, tc, tt, win, req); \
    }                                                                                           \
                                                                                                \
    SHIM_EXPORT int MPI_Rget##SFX(void *o, COUNT_T oc, MPI_Datatype ot, int target,             \
                                  MPI_Aint td, COUNT_T tc, MPI_Datatype tt, MPI_Win win,        \
                                  MPI_Request *req)                                             \
    {                                                                                           \
        int rc = RMA_ONE("MPI_Rget" #SFX, o, oc, ot);                                           \
        return RMA_REQ_NULL(rc) ? rc : PMPI_Rget##SFX(o, oc, ot, target, td, tc, tt, win, req); \
    }                                                                                           \
                                                                                                \
    SHIM_EXPORT int MPI_Raccumulate##SFX(const void *o, COUNT_T oc, MPI_Datatype ot,            \
                                         int target, MPI_Aint td, COUNT_T tc, MPI_Datatype tt,  \
                                         MPI_Op op, MPI_Win win, MPI_Request *req)              \
    {                                                                                           \
        int rc = RMA_ONE("MPI_Raccumulate" #SFX, o, oc, ot);                                    \
        return RMA_REQ_NULL(rc)                                                                 \
                   ? rc                                                                         \
                   : PMPI_Raccumulate##SFX(o, oc, ot, target, td, tc, tt, op, win, req);        \
    }                                                                                           \
                                                                                                \
    SHIM_EXPORT int MPI_Get_accumulate##SFX(const void *o, COUNT_T oc, MPI_Datatype ot,         \
                                            void *r, COUNT_T rc_, MPI_Datatype rt, int target,  \
                                            MPI_Aint td, COUNT_T tc, MPI_Datatype tt,           \
                                            MPI_Op op, MPI_Win win)                             \
    {                                                                                           \
        int rc = rma_refuse(win, "MPI_Get_accumulate" #SFX, target, o, ORIGIN_COUNT(op, oc),    \
                            ot, r, rc_, rt, NULL, 0);                                           \
        return rc != MPI_SUCCESS                                                                \
                   ? rc                                                                         \
                   : PMPI_Get_accumulate##SFX(o, oc, ot, r, rc_, rt, target, td, tc, tt, op,    \
                                              win);                                             \
    }                                                                                           \
                                                                                                \
    SHIM_EXPORT int MPI_Rget_accumulate##SFX(const void *o, COUNT_T oc, MPI_Datatype ot,        \
                                             void *r, COUNT_T rc_, MPI_Datatype rt, int target, \
                                             MPI_Aint td, COUNT_T tc, MPI_Datatype tt,          \
                                             MPI_Op op, MPI_Win win, MPI_Request *req)          \
    {                                                                                           \
        int rc = rma_refuse(win, "MPI_Rget_accumulate" #SFX, target, o, ORIGIN_COUNT(op, oc),   \
                            ot, r, rc_, rt, NULL, 0);                                           \
        return RMA_REQ_NULL(rc) ? rc                                                            \
                                : PMPI_Rget_accumulate##SFX(o, oc, ot, r, rc_, rt, target, td,  \
                                                            tc, tt, op, win, req);              \
    }

RMA_WRAPPERS(, int)
#if SHIM_LARGE_COUNT
RMA_WRAPPERS(_c, MPI_Count)
#endif

/* One element of @p dt each (no large-count forms). */
SHIM_EXPORT int MPI_Fetch_and_op(const void *o, void *r, MPI_Datatype dt, int target,
                                 MPI_Aint td, MPI_Op op, MPI_Win win)
{
    int rc = rma_refuse(win, "MPI_Fetch_and_op", target, o, ORIGIN_COUNT(op, 1), dt, r, 1, dt,
                        NULL, 0);
    return rc != MPI_SUCCESS ? rc : PMPI_Fetch_and_op(o, r, dt, target, td, op, win);
}

SHIM_EXPORT int MPI_Compare_and_swap(const void *o, const void *cmp, void *r, MPI_Datatype dt,
                                     int target, MPI_Aint td, MPI_Win win)
{
    int rc = rma_refuse(win, "MPI_Compare_and_swap", target, o, 1, dt, cmp, 1, dt, r, 1);
    return rc != MPI_SUCCESS ? rc : PMPI_Compare_and_swap(o, cmp, r, dt, target, td, win);
}
