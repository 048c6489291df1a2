/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Fortran entry points, for MPIs whose Fortran bindings call PMPI_*
 * directly, past the C wrappers (docs/mpi.md). Two cases, chosen at build
 * time (cucopy_add_mpi_shim(... FORTRAN ALL | F08_COMPLETION)):
 *
 *   SHIM_FORTRAN_ALL (Open MPI 4): mpif.h, `use mpi` and `use mpi_f08` all
 *     reach PMPI_*. Every call is defined under the four manglings of mpif.h
 *     / `use mpi` (mpi_send_, mpi_send__, mpi_send, MPI_SEND: aliases of one
 *     function) and the one of `use mpi_f08` (mpi_send_f08_), forwarding to
 *     the MPI's profiling entry points (pmpi_send_, pmpi_send_f08_); the
 *     blocking and nonblocking collectives instead convert their arguments
 *     and call the shim's own C wrappers (MPI_Bcast & co., shim_coll.c;
 *     MPI_Ibcast & co., shim_icoll.c).
 *   SHIM_FORTRAN_F08_COMPLETION (MPICH 4.0): mpif.h and `use mpi` call MPI_*
 *     (the C wrappers see them), and so do the sends, receives and
 *     collectives of `use mpi_f08`; but its Init, Init_thread, Finalize,
 *     Start(all), Wait*, Test*, Request_free and Request_get_status call
 *     PMPI_* (measured with objdump). Only those f08 entries are defined,
 *     and since MPICH has no pmpi_*_f08_ names they forward to the MPI's own
 *     mpi_*_f08_, the next definition after the shim.
 *
 * The MPI's function is found with dlsym(RTLD_NEXT) on first use. The MPI therefore still does its own
 * handle conversions, sentinels, LOGICALs and ierror; the wrapper only
 * converts handles to C (MPI_Comm_f2c, MPI_Type_f2c, MPI_Request_f2c, ...)
 * to classify and stage the buffer with the C path's code (shim_stage,
 * the request table, the completion batch), then hands PMPI the staging
 * memory instead of the device address.
 *
 * All arguments are addresses (Fortran passes by reference; the f08 handle
 * types hold one INTEGER; TYPE(MPI_Status) is MPI_STATUS_SIZE INTEGERs).
 * The f08 ierror is OPTIONAL: NULL when absent.
 */
#define _GNU_SOURCE
#include "shim.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef MPI_Fint fint;

/* INTEGERs in one Fortran status (MPI_STATUS_SIZE). */
#define FSTATUS_WORDS ((sizeof(MPI_Status) + sizeof(fint) - 1) / sizeof(fint))

/* ---- forwarding ----------------------------------------------------------------- */

/* The MPI's Fortran entry point @p name, looked up once. A Fortran program
 * calling the wrapper has the MPI's Fortran library loaded, so a miss is a
 * broken installation: say so and stop. */
static void *fort_next(void *_Atomic *slot, const char *name)
{
    void *fn = atomic_load_explicit(slot, memory_order_acquire);
    if (SHIM_LIKELY(fn != NULL))
        return fn;
    dlerror();
    fn = dlsym(RTLD_NEXT, name);
    if (fn == NULL) {
        fprintf(stderr, "cucopy_mpi: the MPI's Fortran library does not define %s (%s)\n",
                name, dlerror());
        abort();
    }
    atomic_store_explicit(slot, fn, memory_order_release);
    return fn;
}

static void set_ierr(fint *ierr, int rc)
{
    if (ierr != NULL)
        *ierr = (fint)rc;
}

#if defined(SHIM_FORTRAN_ALL) /* p2p and collectives */
/* The address of the MPI's Fortran sentinel @p name (a common block of
 * libmpi), looked up once into @p slot; NULL if the MPI has none. */
static const void *f_sentinel(const void *_Atomic *slot, _Atomic int *looked, const char *name)
{
    if (!atomic_load_explicit(looked, memory_order_acquire)) {
        atomic_store(slot, dlsym(RTLD_DEFAULT, name));
        atomic_store_explicit(looked, 1, memory_order_release);
    }
    return atomic_load_explicit(slot, memory_order_relaxed);
}

/* Fortran's MPI_BOTTOM is the address of a common block of the MPI (Open
 * MPI: mpi_fortran_bottom_); the C classification must see C's MPI_BOTTOM. */
static const void *c_buf(const void *buf)
{
    static const void *_Atomic bottom;
    static _Atomic int looked;
    const void *b = f_sentinel(&bottom, &looked, "mpi_fortran_bottom_");
    return b != NULL && buf == b ? MPI_BOTTOM : buf;
}

/* The same for an argument that may be Fortran's MPI_IN_PLACE (Open MPI:
 * mpi_fortran_in_place_): C's MPI_IN_PLACE, else as c_buf. Only where Open
 * MPI's own binding converts it (the send buffer; Scatter's receive buffer). */
static const void *c_in_place(const void *buf)
{
    static const void *_Atomic in_place;
    static _Atomic int looked;
    const void *p = f_sentinel(&in_place, &looked, "mpi_fortran_in_place_");
    return p != NULL && buf == p ? MPI_IN_PLACE : c_buf(buf);
}

#endif

/* The Fortran MPI_STATUS_IGNORE (MPICH's mpi_f08 has one of its own). */
static int status_ignored(const fint *s)
{
#if defined(MPICH_VERSION)
    if ((const void *)s == (const void *)MPI_F08_STATUS_IGNORE)
        return 1;
#endif
    return s == MPI_F_STATUS_IGNORE;
}

static int statuses_ignored(const fint *s)
{
#if defined(MPICH_VERSION)
    if ((const void *)s == (const void *)MPI_F08_STATUSES_IGNORE)
        return 1;
#endif
    return s == MPI_F_STATUSES_IGNORE;
}

static MPI_Status c_status(const fint *fs)
{
    MPI_Status cs;
    memset(&cs, 0, sizeof cs);
    PMPI_Status_f2c(fs, &cs);
    return cs;
}

static int f_request_null(const fint *freq)
{
    return PMPI_Request_f2c(*freq) == MPI_REQUEST_NULL;
}

#if defined(SHIM_FORTRAN_ALL) /* p2p only */
/* The C request PMPI made for *freq recorded with its staging memory; *freq
 * follows the record's fate (a record-less fallback completed it). */
static int f_rec_add(fint *freq, int recv, int persistent, MPI_Comm comm, const char *call,
                     const struct shim_buf *b)
{
    MPI_Request creq = PMPI_Request_f2c(*freq);
    int rc = persistent ? shim_rec_add_persistent(&creq, recv, comm, call, b)
                        : shim_rec_add(&creq, recv, comm, call, b);
    if (creq == MPI_REQUEST_NULL)
        *freq = PMPI_Request_c2f(MPI_REQUEST_NULL);
    return rc;
}

#endif

/* One function under the four manglings of mpif.h / use mpi. */
#define F77_NAMES(fn, lower, UPPER)                                                   \
    extern __typeof__(fn) lower##_ __attribute__((alias(#fn), visibility("default"))); \
    extern __typeof__(fn) lower##__ __attribute__((alias(#fn), visibility("default")));\
    extern __typeof__(fn) lower __attribute__((alias(#fn), visibility("default")));    \
    extern __typeof__(fn) UPPER __attribute__((alias(#fn), visibility("default")));

/* ---- init and finalize -------------------------------------------------------- */

typedef void (*f_init_fn)(fint *);
typedef void (*f_init_thread_fn)(fint *, fint *, fint *);
typedef void (*f_finalize_fn)(fint *);

static void f_init(f_init_fn fn, fint *ierr)
{
    fint e = 0;
    fn(&e);
    if (e == MPI_SUCCESS) {
        int provided = MPI_THREAD_SINGLE;
        PMPI_Query_thread(&provided);
        shim_after_init(provided);
    }
    set_ierr(ierr, e);
}

static void f_init_thread(f_init_thread_fn fn, fint *required, fint *provided, fint *ierr)
{
    fint e = 0;
    fn(required, provided, &e);
    if (e == MPI_SUCCESS)
        shim_after_init(*provided);
    set_ierr(ierr, e);
}

static void f_finalize(f_finalize_fn fn, fint *ierr)
{
    /* As MPI_Finalize (shim_p2p.c): deferred sends posted, pipelined
     * streams waited for, the private communicator freed. */
    shim_defer_flush_if();
    if (shim_pending())
        shim_detached_progress(1);
    shim_pipe_before_finalize();
    fint e = 0;
    fn(&e);
    shim_after_finalize();
    set_ierr(ierr, e);
}

#if defined(SHIM_FORTRAN_ALL) /* the sends and receives */
/* The datatype to give PMPI for staged buffer @p b: the signature type of a
 * non-contiguous one (made a Fortran handle in *tmp), else @p dt. */
static fint *f_type_arg(const struct shim_buf *b, fint *dt, fint *tmp)
{
    if (!b->staged || b->layout == NULL)
        return dt;
    *tmp = PMPI_Type_c2f(b->ptype);
    return tmp;
}

/* ---- sends: blocking, nonblocking, persistent ------------------------------------ */

typedef void (*f_send_fn)(void *, fint *, fint *, fint *, fint *, fint *, fint *);
typedef void (*f_isend_fn)(void *, fint *, fint *, fint *, fint *, fint *, fint *, fint *);

/* The pipelined mode of a send (docs/mpi.md, "Pipelined messages"). */
static int f_pipe_mode(const char *call)
{
    static const char *const names[] = {"MPI_Send", "MPI_Ssend", "MPI_Isend", "MPI_Issend"};
    static const int modes[] = {SHIM_PIPE_SEND, SHIM_PIPE_SSEND, SHIM_PIPE_ISEND,
                                SHIM_PIPE_ISSEND};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(call, names[i]) == 0)
            return modes[i];
    return SHIM_PIPE_NONE;
}

/* The deferred mode of a nonblocking send (shim_defer.c); NONE: Ibsend. */
static int f_defer_mode(const char *call)
{
    static const char *const names[] = {"MPI_Isend", "MPI_Issend", "MPI_Irsend"};
    static const int modes[] = {SHIM_DEFER_ISEND, SHIM_DEFER_ISSEND, SHIM_DEFER_IRSEND};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(call, names[i]) == 0)
            return modes[i];
    return SHIM_DEFER_NONE;
}

/* A nonblocking send of a contiguous device buffer (staged with
 * SHIM_DEFER_COPY: nothing copied yet) whose copy runs after the call, as
 * the C wrappers do (CUCOPY_MPI_ISEND=async): 1 when it was deferred (*freq
 * and *ierr set), 0 when it goes the usual way. */
static int f_defer_isend(const char *call, const fint *count, const fint *dt, const fint *dest,
                         const fint *tag, MPI_Comm c, struct shim_buf *b, fint *freq,
                         fint *ierr)
{
    MPI_Request creq = MPI_REQUEST_NULL;
    if (!shim_defer_args_ok(*dest, *tag, c) ||
        !shim_defer_isend(call, f_defer_mode(call), b, *count, PMPI_Type_f2c(*dt), *dest, *tag,
                          c, &creq))
        return 0;
    *freq = PMPI_Request_c2f(creq);
    set_ierr(ierr, MPI_SUCCESS);
    return 1;
}

/* A nonblocking send that may be pipelined, as the C wrappers do
 * (shim_pipe_isend: deferred or in the call): 1 when it was (*freq and
 * *ierr set), 0 when it goes the usual way. */
static int f_pipe_isend(const char *call, void *buf, const fint *count, const fint *dt,
                        const fint *dest, const fint *tag, MPI_Comm c, fint *freq, fint *ierr)
{
    int mode = f_pipe_mode(call);
    MPI_Request creq = MPI_REQUEST_NULL;
    int rc;
    if (mode == SHIM_PIPE_NONE ||
        !shim_pipe_isend(call, mode, c_buf(buf), *count, PMPI_Type_f2c(*dt), *dest, *tag, c,
                         &creq, &rc))
        return 0;
    if (rc == MPI_SUCCESS)
        *freq = PMPI_Request_c2f(creq);
    set_ierr(ierr, rc);
    return 1;
}

/* A blocking send that may be pipelined, as the C wrappers do: 1 when it was
 * (*ierr set), 0 when it goes the usual way. */
static int f_pipe_send(const char *call, void *buf, const fint *count, const fint *dt,
                       const fint *dest, const fint *tag, MPI_Comm c, fint *ierr)
{
    int mode = f_pipe_mode(call);
    if (SHIM_LIKELY(!shim_pipe_on()) || mode == SHIM_PIPE_NONE)
        return 0;
    int rc;
    if (!shim_pipe_send(call, mode, c_buf(buf), *count, PMPI_Type_f2c(*dt), *dest, *tag, c,
                        &rc))
        return 0;
    set_ierr(ierr, rc);
    return 1;
}

static void f_send(const char *call, f_send_fn fn, void *buf, fint *count, fint *dt, fint *dest,
                   fint *tag, fint *comm, fint *ierr)
{
    shim_defer_flush_if(); /* a C program's deferred sends first (shim_defer.c) */
    if (SHIM_LIKELY(!shim_p2p_active()) || *count == 0 || *dest == MPI_PROC_NULL) {
        fn(buf, count, dt, dest, tag, comm, ierr);
        return;
    }
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    if (f_pipe_send(call, buf, count, dt, dest, tag, c, ierr))
        return;
    struct shim_buf b;
    int rc = shim_stage(call, c_buf(buf), *count, PMPI_Type_f2c(*dt), c, SHIM_TO_MPI, &b);
    if (rc != MPI_SUCCESS) {
        set_ierr(ierr, rc);
        return;
    }
    if (!b.staged) {
        fn(buf, count, dt, dest, tag, comm, ierr);
        return;
    }
    fint e = 0, ft = 0;
    fn(shim_host_arg(&b), count, f_type_arg(&b, dt, &ft), dest, tag, comm, &e);
    shim_release(&b);
    set_ierr(ierr, e);
}

/* Isend family (persistent 0) and Send_init family (persistent 1): a
 * persistent send is copied at MPI_Start, not here. */
static void f_isend(const char *call, int persistent, f_isend_fn fn, void *buf, fint *count,
                    fint *dt, fint *dest, fint *tag, fint *comm, fint *req, fint *ierr)
{
    if (SHIM_LIKELY(!shim_p2p_active()) || *count == 0 || *dest == MPI_PROC_NULL) {
        shim_defer_flush_if(); /* after the deferred sends before it (shim_defer.c) */
        fn(buf, count, dt, dest, tag, comm, req, ierr);
        return;
    }
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    /* Deferred sends keep their FIFO order without a flush; every other one
     * posts the deferred sends before it first. */
    if (!persistent && shim_pipe_on() &&
        f_pipe_isend(call, buf, count, dt, dest, tag, c, req, ierr))
        return;
    int defer = !persistent && shim_isend_async && f_defer_mode(call) != SHIM_DEFER_NONE;
    struct shim_buf b;
    int rc = shim_stage(call, c_buf(buf), *count, PMPI_Type_f2c(*dt), c,
                        persistent ? 0 : SHIM_TO_MPI | (defer ? SHIM_DEFER_COPY : 0), &b);
    if (rc != MPI_SUCCESS) {
        set_ierr(ierr, rc);
        return;
    }
    if (defer && b.staged && b.layout == NULL) {
        if (f_defer_isend(call, count, dt, dest, tag, c, &b, req, ierr))
            return;
        rc = shim_restage(call, &b, c); /* the copy not made */
        if (rc != MPI_SUCCESS) {
            shim_release(&b);
            set_ierr(ierr, rc);
            return;
        }
    }
    shim_defer_flush_if();
    if (!b.staged) {
        fn(buf, count, dt, dest, tag, comm, req, ierr);
        return;
    }
    fint e = 0, ft = 0;
    fn(shim_host_arg(&b), count, f_type_arg(&b, dt, &ft), dest, tag, comm, req, &e);
    if (e != MPI_SUCCESS) {
        shim_release(&b);
        set_ierr(ierr, e);
        return;
    }
    set_ierr(ierr, f_rec_add(req, 0, persistent, c, call, &b));
}

/* ---- held messages: the C wrappers receive (shim_held.c) ---------------------------- */

/* With pipelining on, the shim's C probes may hold messages; the MPI's
 * Fortran receives would not see them, so while any is held the Fortran
 * receive entries below call the shim's C wrappers instead (which stage,
 * and take a held message first). */
static void f_c_status(int rc, const MPI_Status *cs, fint *status, fint *ierr)
{
    if (!status_ignored(status))
        PMPI_Status_c2f(cs, status);
    set_ierr(ierr, rc);
}

static void f_held_recv(void *buf, fint *count, fint *dt, fint *source, fint *tag, fint *comm,
                        fint *status, fint *ierr)
{
    MPI_Status cs;
    int rc = MPI_Recv((void *)c_buf(buf), *count, PMPI_Type_f2c(*dt), *source, *tag,
                      PMPI_Comm_f2c(*comm), &cs);
    f_c_status(rc, &cs, status, ierr);
}

static void f_held_irecv(void *buf, fint *count, fint *dt, fint *source, fint *tag,
                         fint *comm, fint *req, fint *ierr)
{
    MPI_Request creq = MPI_REQUEST_NULL;
    int rc = MPI_Irecv((void *)c_buf(buf), *count, PMPI_Type_f2c(*dt), *source, *tag,
                       PMPI_Comm_f2c(*comm), &creq);
    if (rc == MPI_SUCCESS)
        *req = PMPI_Request_c2f(creq);
    set_ierr(ierr, rc);
}

static void f_held_mrecv(void *buf, fint *count, fint *dt, fint *message, fint *status,
                         fint *req, fint *ierr)
{
    MPI_Message cm = PMPI_Message_f2c(*message);
    MPI_Status cs;
    MPI_Request creq = MPI_REQUEST_NULL;
    int rc = req == NULL ? MPI_Mrecv((void *)c_buf(buf), *count, PMPI_Type_f2c(*dt), &cm, &cs)
                         : MPI_Imrecv((void *)c_buf(buf), *count, PMPI_Type_f2c(*dt), &cm, &creq);
    *message = PMPI_Message_c2f(cm);
    if (req != NULL) {
        if (rc == MPI_SUCCESS)
            *req = PMPI_Request_c2f(creq);
        set_ierr(ierr, rc);
        return;
    }
    f_c_status(rc, &cs, status, ierr);
}

/* ---- receives -------------------------------------------------------------------- */

typedef void (*f_recv_fn)(void *, fint *, fint *, fint *, fint *, fint *, fint *, fint *);
typedef void (*f_mrecv_fn)(void *, fint *, fint *, fint *, fint *, fint *);

/* After a blocking receive into staging memory (@p e: its ierror, @p fs its
 * Fortran status). */
static int f_finish_recv(const char *call, fint e, struct shim_buf *b, fint *fs,
                         MPI_Comm comm)
{
    MPI_Status cs = c_status(fs);
    int rc = shim_finish_recv(call, e, b, &cs, comm);
    PMPI_Status_c2f(&cs, fs); /* a pipelined message's count (docs/mpi.md) */
    return rc;
}

/* A receive into the user's (host) buffer by the MPI's function: CALL, which
 * writes status S_ and ierror E_; then, with pipelining on, the envelope check
 * (docs/mpi.md, "Pipelined messages") on communicator COMM (evaluated then). */
#define F_HOST_RECV(NAME, CALL, buf, count, dt, COMM, status, ierr)                        \
    do {                                                                                   \
        if (SHIM_LIKELY(!shim_pipe_on())) {                                                \
            fint *S_ = (status), *E_ = (ierr);                                             \
            CALL;                                                                          \
            break;                                                                         \
        }                                                                                  \
        fint l_[FSTATUS_WORDS] = {0}, ev_ = 0;                                             \
        fint *S_ = status_ignored(status) ? l_ : (status), *E_ = &ev_;                    \
        CALL;                                                                              \
        MPI_Status cs_ = c_status(S_);                                                     \
        int rc_ = shim_pipe_host_recv(NAME, ev_, (void *)c_buf(buf), *(count),            \
                                      PMPI_Type_f2c(*(dt)), (COMM), &cs_);                 \
        PMPI_Status_c2f(&cs_, S_);                                                         \
        set_ierr(ierr, rc_);                                                               \
    } while (0)

/* A nonblocking receive (Recv_init: @p persistent) into the user's (host)
 * buffer the MPI's function just made as *freq (ierror @p e): with
 * pipelining on, recorded so that its completion checks for an envelope. */
static int f_pipe_watch(fint e, fint *freq, const char *call, void *buf, const fint *count,
                        const fint *dt, MPI_Comm c, int persistent)
{
    if (SHIM_LIKELY(!shim_pipe_on()) || e != MPI_SUCCESS)
        return e;
    MPI_Request creq = PMPI_Request_f2c(*freq);
    int rc = shim_pipe_watch(&creq, call, (void *)c_buf(buf), *count, PMPI_Type_f2c(*dt), c,
                             persistent);
    if (creq == MPI_REQUEST_NULL)
        *freq = PMPI_Request_c2f(MPI_REQUEST_NULL);
    return rc;
}

static void f_recv(f_recv_fn fn, void *buf, fint *count, fint *dt, fint *source, fint *tag,
                   fint *comm, fint *status, fint *ierr)
{
    shim_defer_flush_if(); /* a C program's deferred sends first (shim_defer.c) */
    if (shim_held_any()) {
        f_held_recv(buf, count, dt, source, tag, comm, status, ierr);
        return;
    }
    if (SHIM_LIKELY(!shim_p2p_active()) || *count == 0 || *source == MPI_PROC_NULL) {
        F_HOST_RECV("MPI_Recv", fn(buf, count, dt, source, tag, comm, S_, E_), buf, count, dt,
                    PMPI_Comm_f2c(*comm), status, ierr);
        return;
    }
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    struct shim_buf b;
    int rc = shim_stage("MPI_Recv", c_buf(buf), *count, PMPI_Type_f2c(*dt), c, SHIM_FROM_MPI,
                        &b);
    if (rc != MPI_SUCCESS) {
        set_ierr(ierr, rc);
        return;
    }
    if (!b.staged) {
        F_HOST_RECV("MPI_Recv", fn(buf, count, dt, source, tag, comm, S_, E_), buf, count, dt,
                    c, status, ierr);
        return;
    }
    fint local[FSTATUS_WORDS] = {0};
    fint *s = status_ignored(status) ? local : status;
    fint e = 0, ft = 0;
    fn(shim_host_arg(&b), count, f_type_arg(&b, dt, &ft), source, tag, comm, s, &e);
    set_ierr(ierr, f_finish_recv("MPI_Recv", e, &b, s, c));
}

/* Irecv (persistent 0) and Recv_init (persistent 1). */
static void f_irecv(const char *call, int persistent, f_isend_fn fn, void *buf, fint *count,
                    fint *dt, fint *source, fint *tag, fint *comm, fint *req, fint *ierr)
{
    if (!persistent && shim_held_any()) {
        f_held_irecv(buf, count, dt, source, tag, comm, req, ierr);
        return;
    }
    fint e = 0;
    if (SHIM_LIKELY(!shim_p2p_active()) || *count == 0 || *source == MPI_PROC_NULL) {
        if (SHIM_LIKELY(!shim_pipe_on()) || *count == 0 || *source == MPI_PROC_NULL) {
            fn(buf, count, dt, source, tag, comm, req, ierr);
            return;
        }
        fn(buf, count, dt, source, tag, comm, req, &e);
        set_ierr(ierr, f_pipe_watch(e, req, call, buf, count, dt, PMPI_Comm_f2c(*comm),
                                    persistent));
        return;
    }
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    struct shim_buf b;
    int rc = shim_stage(call, c_buf(buf), *count, PMPI_Type_f2c(*dt), c, SHIM_FROM_MPI, &b);
    if (rc != MPI_SUCCESS) {
        set_ierr(ierr, rc);
        return;
    }
    if (!b.staged) {
        fn(buf, count, dt, source, tag, comm, req, &e);
        set_ierr(ierr, f_pipe_watch(e, req, call, buf, count, dt, c, persistent));
        return;
    }
    fint ft = 0;
    fn(shim_host_arg(&b), count, f_type_arg(&b, dt, &ft), source, tag, comm, req, &e);
    if (e != MPI_SUCCESS) {
        shim_release(&b);
        set_ierr(ierr, e);
        return;
    }
    set_ierr(ierr, f_rec_add(req, 1, persistent, c, call, &b));
}

static void f_mrecv(f_mrecv_fn fn, void *buf, fint *count, fint *dt, fint *message,
                    fint *status, fint *ierr)
{
    shim_defer_flush_if(); /* a C program's deferred sends first (shim_defer.c) */
    if (shim_held_any()) {
        f_held_mrecv(buf, count, dt, message, status, NULL, ierr);
        return;
    }
    if (SHIM_LIKELY(!shim_p2p_active()) || *count == 0 ||
        PMPI_Message_f2c(*message) == MPI_MESSAGE_NO_PROC) {
        F_HOST_RECV("MPI_Mrecv", fn(buf, count, dt, message, S_, E_), buf, count, dt,
                    MPI_COMM_WORLD, status, ierr);
        return;
    }
    struct shim_buf b;
    int rc = shim_stage("MPI_Mrecv", c_buf(buf), *count, PMPI_Type_f2c(*dt), MPI_COMM_WORLD,
                        SHIM_FROM_MPI, &b);
    if (rc != MPI_SUCCESS) {
        set_ierr(ierr, rc);
        return;
    }
    if (!b.staged) {
        F_HOST_RECV("MPI_Mrecv", fn(buf, count, dt, message, S_, E_), buf, count, dt,
                    MPI_COMM_WORLD, status, ierr);
        return;
    }
    fint local[FSTATUS_WORDS] = {0};
    fint *s = status_ignored(status) ? local : status;
    fint e = 0, ft = 0;
    fn(shim_host_arg(&b), count, f_type_arg(&b, dt, &ft), message, s, &e);
    set_ierr(ierr, f_finish_recv("MPI_Mrecv", e, &b, s, MPI_COMM_WORLD));
}

static void f_imrecv(f_mrecv_fn fn, void *buf, fint *count, fint *dt, fint *message, fint *req,
                     fint *ierr)
{
    if (shim_held_any()) {
        f_held_mrecv(buf, count, dt, message, NULL, req, ierr);
        return;
    }
    if (SHIM_LIKELY(!shim_p2p_active()) || *count == 0 ||
        PMPI_Message_f2c(*message) == MPI_MESSAGE_NO_PROC) {
        fint e = 0;
        fn(buf, count, dt, message, req, &e);
        set_ierr(ierr, *count == 0 ? e
                                   : f_pipe_watch(e, req, "MPI_Imrecv", buf, count, dt,
                                                  MPI_COMM_WORLD, 0));
        return;
    }
    struct shim_buf b;
    int rc = shim_stage("MPI_Imrecv", c_buf(buf), *count, PMPI_Type_f2c(*dt), MPI_COMM_WORLD,
                        SHIM_FROM_MPI, &b);
    if (rc != MPI_SUCCESS) {
        set_ierr(ierr, rc);
        return;
    }
    if (!b.staged) {
        fint e = 0;
        fn(buf, count, dt, message, req, &e);
        set_ierr(ierr, f_pipe_watch(e, req, "MPI_Imrecv", buf, count, dt, MPI_COMM_WORLD, 0));
        return;
    }
    fint e = 0, ft = 0;
    fn(shim_host_arg(&b), count, f_type_arg(&b, dt, &ft), message, req, &e);
    if (e != MPI_SUCCESS) {
        shim_release(&b);
        set_ierr(ierr, e);
        return;
    }
    set_ierr(ierr, f_rec_add(req, 1, 0, MPI_COMM_WORLD, "MPI_Imrecv", &b));
}

/* ---- send and receive in one call -------------------------------------------------- */

typedef void (*f_sendrecv_fn)(void *, fint *, fint *, fint *, fint *, void *, fint *, fint *,
                              fint *, fint *, fint *, fint *, fint *);
typedef void (*f_sendrecv_replace_fn)(void *, fint *, fint *, fint *, fint *, fint *, fint *,
                                      fint *, fint *, fint *);

static void f_sendrecv(f_sendrecv_fn fn, void *sbuf, fint *scount, fint *stype, fint *dest,
                       fint *stag, void *rbuf, fint *rcount, fint *rtype, fint *source,
                       fint *rtag, fint *comm, fint *status, fint *ierr)
{
    shim_defer_flush_if(); /* a C program's deferred sends first (shim_defer.c) */
    if (shim_held_any()) {
        MPI_Status cs;
        int rc = MPI_Sendrecv(c_buf(sbuf), *scount, PMPI_Type_f2c(*stype), *dest, *stag,
                              (void *)c_buf(rbuf), *rcount, PMPI_Type_f2c(*rtype), *source,
                              *rtag,
                              PMPI_Comm_f2c(*comm), &cs);
        f_c_status(rc, &cs, status, ierr);
        return;
    }
    if (SHIM_LIKELY(!shim_p2p_active())) {
        F_HOST_RECV("MPI_Sendrecv",
                    fn(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm,
                       S_, E_),
                    rbuf, rcount, rtype, PMPI_Comm_f2c(*comm), status, ierr);
        return;
    }
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    struct shim_buf sb = {0}, rb = {0};
    int rc = MPI_SUCCESS;
    if (*scount != 0 && *dest != MPI_PROC_NULL)
        rc = shim_stage("MPI_Sendrecv", c_buf(sbuf), *scount, PMPI_Type_f2c(*stype), c,
                        SHIM_TO_MPI, &sb);
    if (rc == MPI_SUCCESS && *rcount != 0 && *source != MPI_PROC_NULL) {
        rc = shim_stage("MPI_Sendrecv", c_buf(rbuf), *rcount, PMPI_Type_f2c(*rtype), c,
                        SHIM_FROM_MPI, &rb);
        if (rc != MPI_SUCCESS)
            shim_release(&sb);
    }
    if (rc != MPI_SUCCESS) {
        set_ierr(ierr, rc);
        return;
    }
    if (!sb.staged && !rb.staged) {
        F_HOST_RECV("MPI_Sendrecv",
                    fn(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm,
                       S_, E_),
                    rbuf, rcount, rtype, c, status, ierr);
        return;
    }
    fint local[FSTATUS_WORDS] = {0};
    fint *s = status_ignored(status) ? local : status;
    fint e = 0, fst = 0, frt = 0;
    fn(sb.staged ? shim_host_arg(&sb) : sbuf, scount, f_type_arg(&sb, stype, &fst), dest, stag,
       rb.staged ? shim_host_arg(&rb) : rbuf, rcount, f_type_arg(&rb, rtype, &frt), source,
       rtag, comm, s, &e);
    shim_release(&sb);
    if (rb.staged) {
        e = (fint)f_finish_recv("MPI_Sendrecv", e, &rb, s, c);
    } else if (shim_pipe_on()) {
        MPI_Status cs = c_status(s);
        e = (fint)shim_pipe_host_recv("MPI_Sendrecv", e, (void *)c_buf(rbuf), *rcount,
                                      PMPI_Type_f2c(*rtype), c, &cs);
        PMPI_Status_c2f(&cs, s);
    }
    set_ierr(ierr, e);
}

static void f_sendrecv_replace(f_sendrecv_replace_fn fn, void *buf, fint *count, fint *dt,
                               fint *dest, fint *stag, fint *source, fint *rtag, fint *comm,
                               fint *status, fint *ierr)
{
    shim_defer_flush_if(); /* a C program's deferred sends first (shim_defer.c) */
    if (shim_held_any()) {
        MPI_Status cs;
        int rc = MPI_Sendrecv_replace((void *)c_buf(buf), *count, PMPI_Type_f2c(*dt), *dest, *stag,
                                      *source, *rtag, PMPI_Comm_f2c(*comm), &cs);
        f_c_status(rc, &cs, status, ierr);
        return;
    }
    if (SHIM_LIKELY(!shim_p2p_active()) || *count == 0 ||
        (*dest == MPI_PROC_NULL && *source == MPI_PROC_NULL)) {
        F_HOST_RECV("MPI_Sendrecv_replace",
                    fn(buf, count, dt, dest, stag, source, rtag, comm, S_, E_), buf, count, dt,
                    PMPI_Comm_f2c(*comm), status, ierr);
        return;
    }
    int direction = (*dest != MPI_PROC_NULL ? SHIM_TO_MPI : 0) |
                    (*source != MPI_PROC_NULL ? SHIM_FROM_MPI : 0);
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    struct shim_buf b;
    int rc = shim_stage("MPI_Sendrecv_replace", c_buf(buf), *count, PMPI_Type_f2c(*dt), c,
                        direction, &b);
    if (rc != MPI_SUCCESS) {
        set_ierr(ierr, rc);
        return;
    }
    if (!b.staged) {
        F_HOST_RECV("MPI_Sendrecv_replace",
                    fn(buf, count, dt, dest, stag, source, rtag, comm, S_, E_), buf, count, dt,
                    c, status, ierr);
        return;
    }
    fint local[FSTATUS_WORDS] = {0};
    fint *s = status_ignored(status) ? local : status;
    fint e = 0, ft = 0;
    fn(shim_host_arg(&b), count, f_type_arg(&b, dt, &ft), dest, stag, source, rtag, comm, s, &e);
    if (*source == MPI_PROC_NULL)
        shim_release(&b);
    else
        e = (fint)f_finish_recv("MPI_Sendrecv_replace", e, &b, s, c);
    set_ierr(ierr, e);
}

#endif

/* ---- probes (pipelining on: the shim's C probes, shim_held.c) ------------------------ */

typedef void (*f_probe_fn)(fint *, fint *, fint *, fint *, fint *);
typedef void (*f_iprobe_fn)(fint *, fint *, fint *, fint *, fint *, fint *);
typedef void (*f_improbe_fn)(fint *, fint *, fint *, fint *, fint *, fint *, fint *);

/* A LOGICAL as the MPI's Fortran writes it: its own MPI_Initialized answers
 * .TRUE. while the program runs, its MPI_Finalized .FALSE. */
static fint f_logical(int v)
{
    static void *_Atomic next_true, *_Atomic next_false;
    static _Atomic fint value[2];
    static _Atomic int known;
    if (!atomic_load_explicit(&known, memory_order_acquire)) {
        fint t = 1, f = 0, e = 0;
        void (*ini)(fint *, fint *) = (void (*)(fint *, fint *))fort_next(&next_true,
                                                                          "pmpi_initialized_");
        void (*fin)(fint *, fint *) = (void (*)(fint *, fint *))fort_next(&next_false,
                                                                          "pmpi_finalized_");
        ini(&t, &e);
        fin(&f, &e);
        atomic_store(&value[1], t);
        atomic_store(&value[0], f);
        atomic_store_explicit(&known, 1, memory_order_release);
    }
    return atomic_load(&value[v != 0]);
}

/* Probe (@p flag NULL) and Iprobe; Mprobe (@p message) and Improbe. */
static void f_probe(void *next, fint *source, fint *tag, fint *comm, fint *flag, fint *message,
                    fint *status, fint *ierr)
{
    if (flag == NULL)
        shim_defer_flush_if(); /* blocking: post the deferred sends (shim_defer.c) */
    else
        shim_defer_poll();
    if (SHIM_LIKELY(!shim_pipe_on())) {
        if (message == NULL && flag == NULL)
            ((f_probe_fn)next)(source, tag, comm, status, ierr);
        else if (message == NULL)
            ((f_iprobe_fn)next)(source, tag, comm, flag, status, ierr);
        else if (flag == NULL)
            ((f_iprobe_fn)next)(source, tag, comm, message, status, ierr);
        else
            ((f_improbe_fn)next)(source, tag, comm, flag, message, status, ierr);
        return;
    }
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    MPI_Status cs;
    MPI_Message cm = MPI_MESSAGE_NULL;
    int cflag = 1, rc;
    if (message == NULL)
        rc = flag == NULL ? MPI_Probe(*source, *tag, c, &cs)
                          : MPI_Iprobe(*source, *tag, c, &cflag, &cs);
    else
        rc = flag == NULL ? MPI_Mprobe(*source, *tag, c, &cm, &cs)
                          : MPI_Improbe(*source, *tag, c, &cflag, &cm, &cs);
    if (flag != NULL)
        *flag = f_logical(rc == MPI_SUCCESS && cflag);
    if (message != NULL && rc == MPI_SUCCESS && cflag)
        *message = PMPI_Message_c2f(cm);
    if (rc == MPI_SUCCESS && cflag && !status_ignored(status))
        PMPI_Status_c2f(&cs, status);
    set_ierr(ierr, rc);
}

/* ---- completion: one request --------------------------------------------------------- */

typedef void (*f_wait_fn)(fint *, fint *, fint *);
typedef void (*f_test_fn)(fint *, fint *, fint *, fint *);
typedef void (*f_req_fn)(fint *, fint *);
typedef void (*f_startall_fn)(fint *, fint *, fint *);

static void f_wait(f_wait_fn fn, fint *req, fint *status, fint *ierr)
{
    shim_defer_flush_if(); /* blocking: post the deferred sends (shim_defer.c) */
    if (SHIM_LIKELY(!shim_pending())) {
        fn(req, status, ierr);
        return;
    }
    shim_detached_progress(0);
    struct shim_rec *r = shim_rec_take(PMPI_Request_f2c(*req));
    if (r == NULL) {
        fn(req, status, ierr);
        return;
    }
    fint local[FSTATUS_WORDS] = {0};
    fint *s = status_ignored(status) ? local : status;
    if (r->defer != NULL)
        shim_defer_ready(r, 1);
    fint e = 0;
    fn(req, s, &e);
    if (!r->persistent && !f_request_null(req)) {
        shim_rec_put_back(r);
        set_ierr(ierr, e);
        return;
    }
    MPI_Status cs = c_status(s);
    int rc2 = shim_rec_finish(r, &cs, shim_copy_ok(e));
    PMPI_Status_c2f(&cs, s); /* a pipelined message's count (docs/mpi.md) */
    set_ierr(ierr, e != MPI_SUCCESS ? e : rc2);
}

/* MPI_Test (get_status 0) and MPI_Request_get_status (1: the request stays;
 * a completed receive is copied to the device once). */
static void f_test(int get_status, f_test_fn fn, fint *req, fint *flag, fint *status,
                   fint *ierr)
{
    shim_defer_poll();
    if (SHIM_LIKELY(!shim_pending())) {
        fn(req, flag, status, ierr);
        return;
    }
    if (!get_status)
        shim_detached_progress(0);
    struct shim_rec *r = shim_rec_take(PMPI_Request_f2c(*req));
    if (r == NULL) {
        fn(req, flag, status, ierr);
        return;
    }
    fint local[FSTATUS_WORDS] = {0};
    fint *s = status_ignored(status) ? local : status;
    if (r->defer != NULL)
        shim_defer_ready(r, 0);
    fint e = 0;
    fn(req, flag, s, &e);
    int rc2 = MPI_SUCCESS;
    if (get_status) {
        if (shim_copy_ok(e) && *flag && r->recv && !r->copied &&
            (!r->persistent || r->active)) {
            MPI_Status cs = c_status(s);
            rc2 = shim_rec_copy_now(r, &cs);
        }
        shim_rec_put_back(r);
    } else if (!*flag || (!r->persistent && !f_request_null(req))) {
        shim_rec_put_back(r);
    } else {
        MPI_Status cs = c_status(s);
        rc2 = shim_rec_finish(r, &cs, shim_copy_ok(e));
        PMPI_Status_c2f(&cs, s);
    }
    set_ierr(ierr, e != MPI_SUCCESS ? e : rc2);
}

/* MPI_Type_free: the type's cached layout goes first (shim_types.c). */
static void f_type_free(f_req_fn fn, fint *dt, fint *ierr)
{
    shim_types_forget(PMPI_Type_f2c(*dt));
    fn(dt, ierr);
}

static void f_request_free(f_req_fn fn, fint *req, fint *ierr)
{
    if (SHIM_LIKELY(!shim_pending())) {
        fn(req, ierr);
        return;
    }
    MPI_Request creq = PMPI_Request_f2c(*req);
    struct shim_rec *r = shim_rec_take(creq);
    if (r != NULL && r->defer != NULL)
        shim_defer_flush(1); /* posted now; completed detached */
    if (r == NULL) {
        fn(req, ierr);
        return;
    }
    int rc = shim_rec_free(r, &creq);
    *req = PMPI_Request_c2f(MPI_REQUEST_NULL);
    set_ierr(ierr, rc);
}

static void f_start(f_req_fn fn, fint *req, fint *ierr)
{
    shim_defer_flush_if(); /* a persistent send after the deferred ones */
    if (SHIM_LIKELY(!shim_pending())) {
        fn(req, ierr);
        return;
    }
    struct shim_rec *r = shim_rec_take(PMPI_Request_f2c(*req));
    if (r == NULL) {
        fn(req, ierr);
        return;
    }
    fint e = (fint)shim_rec_start(r);
    if (e == MPI_SUCCESS) {
        fn(req, &e);
        if (e != MPI_SUCCESS)
            r->active = 0;
    }
    shim_rec_put_back(r);
    set_ierr(ierr, e);
}

/* ---- completion: arrays of requests ---------------------------------------------------- */

/* C handles and statuses for an array of Fortran requests. */
struct f_array {
    MPI_Request stack_req[SHIM_STACK_REQUESTS];
    fint stack_fstatus[SHIM_STACK_REQUESTS * FSTATUS_WORDS];
    MPI_Request *creq;
    fint *fstatus; /* the Fortran statuses given to PMPI */
    int own_fstatus;
    int n;
};

/* -1 on no memory (error raised). */
static int f_array_open(struct f_array *a, int n, const fint *freq)
{
    a->n = n < 0 ? 0 : n;
    a->creq = a->n <= SHIM_STACK_REQUESTS ? a->stack_req : malloc((size_t)a->n * sizeof *a->creq);
    a->fstatus = NULL;
    a->own_fstatus = 0;
    if (a->creq == NULL) {
        shim_error(MPI_COMM_WORLD, MPI_ERR_NO_MEM, "MPI_Wait*", "no memory for the requests");
        return -1;
    }
    for (int i = 0; i < a->n; i++)
        a->creq[i] = PMPI_Request_f2c(freq[i]);
    return 0;
}

/* The Fortran statuses to give PMPI (@p user or local ones); NULL on no memory. */
static fint *f_array_fstatus(struct f_array *a, fint *user, int n)
{
    if (!statuses_ignored(user))
        return a->fstatus = user;
    if (n <= SHIM_STACK_REQUESTS) {
        a->fstatus = a->stack_fstatus;
    } else {
        a->fstatus = calloc((size_t)n * FSTATUS_WORDS, sizeof(fint));
        a->own_fstatus = a->fstatus != NULL;
        if (a->fstatus == NULL)
            shim_error(MPI_COMM_WORLD, MPI_ERR_NO_MEM, "MPI_Wait*", "no memory for the statuses");
    }
    return a->fstatus;
}

/* After PMPI: the C handles as PMPI left the Fortran ones, statuses [0, n)
 * in C (cs: n of them). */
static void f_array_after(struct f_array *a, const fint *freq, MPI_Status *cs, int n)
{
    for (int i = 0; i < a->n; i++)
        a->creq[i] = PMPI_Request_f2c(freq[i]);
    for (int k = 0; k < n; k++)
        cs[k] = c_status(a->fstatus + (size_t)k * FSTATUS_WORDS);
}

/* After finishing the records: the C statuses back into the Fortran ones (a
 * pipelined message's count, docs/mpi.md). */
static void f_array_back(struct f_array *a, const MPI_Status *cs, int n)
{
    for (int k = 0; k < n; k++)
        PMPI_Status_c2f(&cs[k], a->fstatus + (size_t)k * FSTATUS_WORDS);
}

static void f_array_close(struct f_array *a)
{
    if (a->creq != a->stack_req)
        free(a->creq);
    if (a->own_fstatus)
        free(a->fstatus);
}

typedef void (*f_waitall_fn)(fint *, fint *, fint *, fint *);
typedef void (*f_testall_fn)(fint *, fint *, fint *, fint *, fint *);
typedef void (*f_waitany_fn)(fint *, fint *, fint *, fint *, fint *);
typedef void (*f_testany_fn)(fint *, fint *, fint *, fint *, fint *, fint *);
typedef void (*f_waitsome_fn)(fint *, fint *, fint *, fint *, fint *, fint *);

/* Take the records of the Fortran requests: 1 taken (go on), 0 none (call
 * PMPI as is), -1 error (*ierr set). */
static int f_take(struct f_array *a, struct shim_batch *bt, fint *count, fint *freq, fint *ierr)
{
    if (f_array_open(a, *count, freq) != 0) {
        set_ierr(ierr, MPI_ERR_NO_MEM);
        return -1;
    }
    int t = shim_batch_take(bt, a->n, a->creq);
    if (t < 0) {
        set_ierr(ierr, shim_batch_end(bt, MPI_SUCCESS));
        f_array_close(a);
    } else if (t == 0) {
        f_array_close(a);
    }
    return t;
}

static void f_waitall(int test, void *fn, fint *count, fint *req, fint *flag, fint *statuses,
                      fint *ierr)
{
    if (test)
        shim_defer_poll();
    else
        shim_defer_flush_if();
    if (SHIM_LIKELY(!shim_pending())) {
        if (test)
            ((f_testall_fn)fn)(count, req, flag, statuses, ierr);
        else
            ((f_waitall_fn)fn)(count, req, statuses, ierr);
        return;
    }
    shim_detached_progress(0);
    struct f_array a;
    struct shim_batch bt;
    int t = f_take(&a, &bt, count, req, ierr);
    if (t > 0)
        shim_batch_defer_ready(&bt, !test);
    if (t == 0) {
        if (test)
            ((f_testall_fn)fn)(count, req, flag, statuses, ierr);
        else
            ((f_waitall_fn)fn)(count, req, statuses, ierr);
    }
    if (t <= 0)
        return;
    fint *fs = f_array_fstatus(&a, statuses, a.n);
    MPI_Status *cs = fs != NULL ? shim_batch_statuses(&bt, MPI_STATUSES_IGNORE) : NULL;
    if (cs == NULL) {
        set_ierr(ierr, shim_batch_end(&bt, MPI_ERR_NO_MEM));
        f_array_close(&a);
        return;
    }
    fint e = 0;
    int done = 1;
    if (test) {
        ((f_testall_fn)fn)(count, req, flag, fs, &e);
        done = *flag || e == MPI_ERR_IN_STATUS;
    } else {
        shim_batch_early(&bt);
        ((f_waitall_fn)fn)(count, req, fs, &e);
    }
    if (done) {
        f_array_after(&a, req, cs, a.n);
        shim_batch_finish_all(&bt, a.creq, cs, e);
        f_array_back(&a, cs, a.n);
    }
    set_ierr(ierr, shim_batch_end(&bt, e));
    f_array_close(&a);
}

/* Waitany / Testany: *index counts from @p base (MPI_UNDEFINED: none). */
static void f_waitany(int test, int base, void *fn, fint *count, fint *req, fint *index,
                      fint *flag, fint *status, fint *ierr)
{
    if (test)
        shim_defer_poll();
    else
        shim_defer_flush_if();
    if (SHIM_LIKELY(!shim_pending())) {
        if (test)
            ((f_testany_fn)fn)(count, req, index, flag, status, ierr);
        else
            ((f_waitany_fn)fn)(count, req, index, status, ierr);
        return;
    }
    shim_detached_progress(0);
    struct f_array a;
    struct shim_batch bt;
    int t = f_take(&a, &bt, count, req, ierr);
    /* A deferred send's request completes when the shim says so: Waitany
     * waits for the deferred sends among them first (docs/mpi.md). */
    if (t > 0)
        shim_batch_defer_ready(&bt, !test);
    if (t == 0) {
        if (test)
            ((f_testany_fn)fn)(count, req, index, flag, status, ierr);
        else
            ((f_waitany_fn)fn)(count, req, index, status, ierr);
    }
    if (t <= 0)
        return;
    fint local[FSTATUS_WORDS] = {0};
    fint *s = status_ignored(status) ? local : status;
    fint e = 0;
    fint done = 1;
    if (test)
        ((f_testany_fn)fn)(count, req, index, flag, s, &e);
    else
        ((f_waitany_fn)fn)(count, req, index, s, &e);
    if (test)
        done = *flag;
    if (done && *index != MPI_UNDEFINED && *index - base >= 0 && *index - base < a.n) {
        MPI_Status cs = c_status(s);
        shim_batch_finish(&bt, *index - base, &cs, shim_copy_ok(e));
        PMPI_Status_c2f(&cs, s);
    }
    set_ierr(ierr, shim_batch_end(&bt, e));
    f_array_close(&a);
}

/* Waitsome / Testsome: indices count from @p base. */
static void f_waitsome(int test, int base, f_waitsome_fn fn, fint *count, fint *req, fint *outcount,
                       fint *indices, fint *statuses, fint *ierr)
{
    if (test)
        shim_defer_poll();
    else
        shim_defer_flush_if();
    if (SHIM_LIKELY(!shim_pending())) {
        fn(count, req, outcount, indices, statuses, ierr);
        return;
    }
    shim_detached_progress(0);
    struct f_array a;
    struct shim_batch bt;
    int t = f_take(&a, &bt, count, req, ierr);
    if (t > 0)
        shim_batch_defer_ready(&bt, !test); /* as in f_waitany */
    if (t == 0)
        fn(count, req, outcount, indices, statuses, ierr);
    if (t <= 0)
        return;
    fint *fs = f_array_fstatus(&a, statuses, a.n);
    MPI_Status *cs = fs != NULL ? shim_batch_statuses(&bt, MPI_STATUSES_IGNORE) : NULL;
    if (cs == NULL) {
        set_ierr(ierr, shim_batch_end(&bt, MPI_ERR_NO_MEM));
        f_array_close(&a);
        return;
    }
    fint e = 0;
    fn(count, req, outcount, indices, fs, &e);
    if (*outcount != MPI_UNDEFINED && *outcount > 0) {
        int n = *outcount < a.n ? *outcount : a.n;
        f_array_after(&a, req, cs, n);
        for (int k = 0; k < n; k++) {
            int i = indices[k] - base;
            if (i < 0 || i >= a.n)
                continue;
            int ok = e == MPI_ERR_IN_STATUS ? shim_copy_ok(cs[k].MPI_ERROR) : shim_copy_ok(e);
            shim_batch_finish(&bt, i, &cs[k], ok);
        }
        f_array_back(&a, cs, n);
    }
    set_ierr(ierr, shim_batch_end(&bt, e));
    f_array_close(&a);
}

/* Every staged send is copied before any request starts. */
static void f_startall(f_startall_fn fn, fint *count, fint *req, fint *ierr)
{
    shim_defer_flush_if();
    if (SHIM_LIKELY(!shim_pending())) {
        fn(count, req, ierr);
        return;
    }
    struct f_array a;
    struct shim_batch bt;
    int t = f_take(&a, &bt, count, req, ierr);
    if (t == 0)
        fn(count, req, ierr);
    if (t <= 0)
        return;
    fint e = MPI_SUCCESS;
    for (int i = 0; i < a.n && e == MPI_SUCCESS; i++)
        if (bt.recs[i] != NULL)
            e = (fint)shim_rec_start(bt.recs[i]);
    if (e == MPI_SUCCESS)
        fn(count, req, &e);
    if (e != MPI_SUCCESS)
        for (int i = 0; i < a.n; i++)
            if (bt.recs[i] != NULL)
                bt.recs[i]->active = 0;
    set_ierr(ierr, shim_batch_end(&bt, e));
    f_array_close(&a);
}

#if defined(SHIM_FORTRAN_ALL) /* the collectives */
/* ---- blocking collectives ------------------------------------------------------------ */

/*
 * Open MPI's Fortran collectives call PMPI_* directly too. While the shim is
 * not active the MPI's own Fortran entry point gets the call unchanged;
 * otherwise the wrapper converts what Open MPI's binding converts (the
 * handles, Fortran's MPI_IN_PLACE and MPI_BOTTOM) and calls the shim's C
 * wrapper (MPI_X of shim_coll.c), which classifies, stages
 * and calls PMPI_X as for a C program: one piece of code decides. A
 * reduction op made by MPI_Op_create from Fortran goes through
 * PMPI_Op_f2c, as in Open MPI's own binding; MPI calls the Fortran function
 * with Fortran arguments, on the staging memory.
 *
 * The count and displacement arrays are passed to C as they are, as Open
 * MPI's binding does where a Fortran INTEGER is a C int.
 */
_Static_assert(sizeof(fint) == sizeof(int),
               "MPI_Fint is not int: the Fortran collectives would need their count arrays "
               "converted");

#define F_COMM(c) PMPI_Comm_f2c(*(c))
#define F_TYPE(t) PMPI_Type_f2c(*(t))
#define F_OP(o) PMPI_Op_f2c(*(o))

typedef void (*f_alltoallw_fn)(void *, fint *, fint *, fint *, void *, fint *, fint *, fint *,
                               fint *, fint *);
typedef void (*f_ialltoallw_fn)(void *, fint *, fint *, fint *, void *, fint *, fint *, fint *,
                                fint *, fint *, fint *);

/* Alltoallw (@p req NULL) and Ialltoallw: the datatype arrays (one per peer:
 * the remote group's size on an intercommunicator) converted to C; the send
 * types are not significant with MPI_IN_PLACE and are not read then. The
 * blocking call frees them when it returns; Ialltoallw's belong to the
 * request's record until it completes (shim_rec_keep): Open MPI 4.1 reads
 * the arrays it was given until then (freeing them at the call crashes its
 * MPI_Test, measured with Open MPI 4.1.4). */
static void f_alltoallw(void *fn, void *sbuf, fint *scounts, fint *sdispls, fint *stypes,
                        void *rbuf, fint *rcounts, fint *rdispls, fint *rtypes, fint *comm,
                        fint *req, fint *ierr)
{
    const char *call = req == NULL ? "MPI_Alltoallw" : "MPI_Ialltoallw";
    unsigned cls = req == NULL ? SHIM_CLASS_COLL : SHIM_CLASS_ICOLL;
    MPI_Comm c = F_COMM(comm);
    int n = 0, inter = 0;
    /* A bad communicator (NULL: not a handle) is MPI's to report. */
    if (SHIM_LIKELY(!shim_active_for(cls)) || c == NULL || c == MPI_COMM_NULL ||
        PMPI_Comm_test_inter(c, &inter) != MPI_SUCCESS ||
        (inter ? PMPI_Comm_remote_size(c, &n) : PMPI_Comm_size(c, &n)) != MPI_SUCCESS) {
        if (req == NULL)
            ((f_alltoallw_fn)fn)(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes,
                                 comm, ierr);
        else
            ((f_ialltoallw_fn)fn)(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls,
                                  rtypes, comm, req, ierr);
        return;
    }
    /* Both arrays in one allocation per call (as Open MPI's own binding). */
    MPI_Datatype *t = malloc(sizeof *t * 2 * ((size_t)n + 1));
    if (t == NULL) {
        set_ierr(ierr, shim_error(c, MPI_ERR_NO_MEM, call, "no memory for the datatype arrays"));
        return;
    }
    const void *s = c_in_place(sbuf);
    MPI_Datatype *st = s == MPI_IN_PLACE ? NULL : t, *rt = t + n;
    for (int i = 0; i < n; i++) {
        rt[i] = PMPI_Type_f2c(rtypes[i]);
        if (st != NULL)
            st[i] = PMPI_Type_f2c(stypes[i]);
    }
    void *r = (void *)c_buf(rbuf);
    if (req == NULL) {
        set_ierr(ierr, MPI_Alltoallw(s, scounts, sdispls, st, r, rcounts, rdispls, rt, c));
        free(t);
        return;
    }
    MPI_Request creq = MPI_REQUEST_NULL;
    int rc = MPI_Ialltoallw(s, scounts, sdispls, st, r, rcounts, rdispls, rt, c, &creq);
    if (rc != MPI_SUCCESS)
        free(t);
    else
        rc = shim_rec_keep(&creq, c, call, t); /* t lives until completion */
    if (rc == MPI_SUCCESS)
        *req = PMPI_Request_c2f(creq);
    set_ierr(ierr, rc);
}

#endif

/* ---- the entry points ---------------------------------------------------------------------- */

/*
 * F77_ENTRY(lower, UPPER, params, body): w_<lower> (mpif.h / use mpi,
 * forwarding to p<lower>_) under its four manglings. F08_ENTRY(lower,
 * params, body): <lower>_f08_ (use mpi_f08). In body, NEXT is the
 * forwarding function, to be cast to its type. P2P_ENTRY: both where the
 * MPI's Fortran sends and receives bypass the C wrappers; COMPLETION_ENTRY
 * (Init, Finalize, Start, completion): both, or the f08 one alone.
 */
#define F77_ENTRY(lower, UPPER, PARAMS, BODY)                              \
    static void *_Atomic next_##lower;                                     \
    static void w_##lower PARAMS                                           \
    {                                                                      \
        void *NEXT = fort_next(&next_##lower, "p" #lower "_");             \
        enum { INDEX_BASE = 1 };                                           \
        BODY;                                                              \
    }                                                                      \
    F77_NAMES(w_##lower, lower, UPPER)

/* F08_INDEX_BASE: what Waitany, Testany, Waitsome, Testsome of `use mpi_f08`
 * count indices from: 1 in the standard and in Open MPI; 0 in MPICH 4.0.2
 * (measured: MPI_Waitany of two requests completing the first returns 0,
 * with host buffers and no shim). The program gets the MPI's value as
 * without the shim; the shim reads it the same way. */
#if defined(SHIM_FORTRAN_ALL)
#define F08_NEXT_PREFIX "p" /* Open MPI: pmpi_send_f08_ */
#define F08_INDEX_BASE 1
#elif defined(SHIM_FORTRAN_F08_COMPLETION)
#define F08_NEXT_PREFIX "" /* MPICH: its own mpi_wait_f08_ */
#define F08_INDEX_BASE 0
#else
#error "build with SHIM_FORTRAN_ALL or SHIM_FORTRAN_F08_COMPLETION (mpi/CMakeLists.txt)"
#endif

#define F08_ENTRY(lower, PARAMS, BODY)                                               \
    static void *_Atomic next_##lower##_f08;                                         \
    SHIM_EXPORT void lower##_f08_ PARAMS;                                            \
    SHIM_EXPORT void lower##_f08_ PARAMS                                             \
    {                                                                                \
        void *NEXT = fort_next(&next_##lower##_f08, F08_NEXT_PREFIX #lower "_f08_"); \
        enum { INDEX_BASE = F08_INDEX_BASE };                                        \
        BODY;                                                                        \
    }

#if defined(SHIM_FORTRAN_ALL)
#define P2P_ENTRY(lower, UPPER, PARAMS, BODY) \
    F77_ENTRY(lower, UPPER, PARAMS, BODY)     \
    F08_ENTRY(lower, PARAMS, BODY)
#define COMPLETION_ENTRY(lower, UPPER, PARAMS, BODY) P2P_ENTRY(lower, UPPER, PARAMS, BODY)
#else
#define P2P_ENTRY(lower, UPPER, PARAMS, BODY)
#define COMPLETION_ENTRY(lower, UPPER, PARAMS, BODY) F08_ENTRY(lower, PARAMS, BODY)
#endif

#define SEND_PARAMS (void *buf, fint *count, fint *dt, fint *dest, fint *tag, fint *comm, fint *ierr)
#define ISEND_PARAMS                                                                      \
    (void *buf, fint *count, fint *dt, fint *peer, fint *tag, fint *comm, fint *req,      \
     fint *ierr)

COMPLETION_ENTRY(mpi_init, MPI_INIT, (fint *ierr), f_init((f_init_fn)NEXT, ierr))
COMPLETION_ENTRY(mpi_init_thread, MPI_INIT_THREAD, (fint *required, fint *provided, fint *ierr),
      f_init_thread((f_init_thread_fn)NEXT, required, provided, ierr))
COMPLETION_ENTRY(mpi_finalize, MPI_FINALIZE, (fint *ierr), f_finalize((f_finalize_fn)NEXT, ierr))

P2P_ENTRY(mpi_send, MPI_SEND, SEND_PARAMS,
      f_send("MPI_Send", (f_send_fn)NEXT, buf, count, dt, dest, tag, comm, ierr))
P2P_ENTRY(mpi_ssend, MPI_SSEND, SEND_PARAMS,
      f_send("MPI_Ssend", (f_send_fn)NEXT, buf, count, dt, dest, tag, comm, ierr))
P2P_ENTRY(mpi_rsend, MPI_RSEND, SEND_PARAMS,
      f_send("MPI_Rsend", (f_send_fn)NEXT, buf, count, dt, dest, tag, comm, ierr))
P2P_ENTRY(mpi_bsend, MPI_BSEND, SEND_PARAMS,
      f_send("MPI_Bsend", (f_send_fn)NEXT, buf, count, dt, dest, tag, comm, ierr))

#define ISEND_ENTRY(lower, UPPER, NAME, PERSISTENT)                                        \
    P2P_ENTRY(lower, UPPER, ISEND_PARAMS,                                                      \
          f_isend(NAME, PERSISTENT, (f_isend_fn)NEXT, buf, count, dt, peer, tag, comm, req, \
                  ierr))
ISEND_ENTRY(mpi_isend, MPI_ISEND, "MPI_Isend", 0)
ISEND_ENTRY(mpi_issend, MPI_ISSEND, "MPI_Issend", 0)
ISEND_ENTRY(mpi_irsend, MPI_IRSEND, "MPI_Irsend", 0)
ISEND_ENTRY(mpi_ibsend, MPI_IBSEND, "MPI_Ibsend", 0)
ISEND_ENTRY(mpi_send_init, MPI_SEND_INIT, "MPI_Send_init", 1)
ISEND_ENTRY(mpi_ssend_init, MPI_SSEND_INIT, "MPI_Ssend_init", 1)
ISEND_ENTRY(mpi_rsend_init, MPI_RSEND_INIT, "MPI_Rsend_init", 1)
ISEND_ENTRY(mpi_bsend_init, MPI_BSEND_INIT, "MPI_Bsend_init", 1)

P2P_ENTRY(mpi_recv, MPI_RECV,
      (void *buf, fint *count, fint *dt, fint *source, fint *tag, fint *comm, fint *status,
       fint *ierr),
      f_recv((f_recv_fn)NEXT, buf, count, dt, source, tag, comm, status, ierr))
P2P_ENTRY(mpi_irecv, MPI_IRECV, ISEND_PARAMS,
      f_irecv("MPI_Irecv", 0, (f_isend_fn)NEXT, buf, count, dt, peer, tag, comm, req, ierr))
P2P_ENTRY(mpi_recv_init, MPI_RECV_INIT, ISEND_PARAMS,
      f_irecv("MPI_Recv_init", 1, (f_isend_fn)NEXT, buf, count, dt, peer, tag, comm, req,
              ierr))
P2P_ENTRY(mpi_mrecv, MPI_MRECV,
      (void *buf, fint *count, fint *dt, fint *message, fint *status, fint *ierr),
      f_mrecv((f_mrecv_fn)NEXT, buf, count, dt, message, status, ierr))
P2P_ENTRY(mpi_imrecv, MPI_IMRECV,
      (void *buf, fint *count, fint *dt, fint *message, fint *req, fint *ierr),
      f_imrecv((f_mrecv_fn)NEXT, buf, count, dt, message, req, ierr))
P2P_ENTRY(mpi_sendrecv, MPI_SENDRECV,
      (void *sbuf, fint *scount, fint *stype, fint *dest, fint *stag, void *rbuf,
       fint *rcount, fint *rtype, fint *source, fint *rtag, fint *comm, fint *status,
       fint *ierr),
      f_sendrecv((f_sendrecv_fn)NEXT, sbuf, scount, stype, dest, stag, rbuf, rcount, rtype,
                 source, rtag, comm, status, ierr))
P2P_ENTRY(mpi_sendrecv_replace, MPI_SENDRECV_REPLACE,
      (void *buf, fint *count, fint *dt, fint *dest, fint *stag, fint *source, fint *rtag,
       fint *comm, fint *status, fint *ierr),
      f_sendrecv_replace((f_sendrecv_replace_fn)NEXT, buf, count, dt, dest, stag, source,
                         rtag, comm, status, ierr))
/* Probes: Open MPI's bindings and MPICH 4.0's mpi_f08 call PMPI_Probe & co.
 * (objdump: mpi_probe_f08_ calls PMPI_Probe). */
COMPLETION_ENTRY(mpi_probe, MPI_PROBE, (fint *source, fint *tag, fint *comm, fint *status, fint *ierr),
      f_probe(NEXT, source, tag, comm, NULL, NULL, status, ierr))
COMPLETION_ENTRY(mpi_iprobe, MPI_IPROBE,
      (fint *source, fint *tag, fint *comm, fint *flag, fint *status, fint *ierr),
      f_probe(NEXT, source, tag, comm, flag, NULL, status, ierr))
COMPLETION_ENTRY(mpi_mprobe, MPI_MPROBE,
      (fint *source, fint *tag, fint *comm, fint *message, fint *status, fint *ierr),
      f_probe(NEXT, source, tag, comm, NULL, message, status, ierr))
COMPLETION_ENTRY(mpi_improbe, MPI_IMPROBE,
      (fint *source, fint *tag, fint *comm, fint *flag, fint *message, fint *status,
       fint *ierr),
      f_probe(NEXT, source, tag, comm, flag, message, status, ierr))
/* MPI_Type_free: Open MPI's Fortran bindings and MPICH 4.0's mpi_f08 call
 * PMPI_Type_free, past the C wrapper (nm -D: libmpichfort.so.12's
 * mpi_type_free_f08_ imports PMPI_Type_free). */
COMPLETION_ENTRY(mpi_type_free, MPI_TYPE_FREE, (fint *dt, fint *ierr),
      f_type_free((f_req_fn)NEXT, dt, ierr))

COMPLETION_ENTRY(mpi_wait, MPI_WAIT, (fint *req, fint *status, fint *ierr),
      f_wait((f_wait_fn)NEXT, req, status, ierr))
COMPLETION_ENTRY(mpi_test, MPI_TEST, (fint *req, fint *flag, fint *status, fint *ierr),
      f_test(0, (f_test_fn)NEXT, req, flag, status, ierr))
COMPLETION_ENTRY(mpi_request_get_status, MPI_REQUEST_GET_STATUS,
      (fint *req, fint *flag, fint *status, fint *ierr),
      f_test(1, (f_test_fn)NEXT, req, flag, status, ierr))
COMPLETION_ENTRY(mpi_request_free, MPI_REQUEST_FREE, (fint *req, fint *ierr),
      f_request_free((f_req_fn)NEXT, req, ierr))
COMPLETION_ENTRY(mpi_start, MPI_START, (fint *req, fint *ierr), f_start((f_req_fn)NEXT, req, ierr))
COMPLETION_ENTRY(mpi_startall, MPI_STARTALL, (fint *count, fint *req, fint *ierr),
      f_startall((f_startall_fn)NEXT, count, req, ierr))
COMPLETION_ENTRY(mpi_waitall, MPI_WAITALL, (fint *count, fint *req, fint *statuses, fint *ierr),
      f_waitall(0, NEXT, count, req, NULL, statuses, ierr))
COMPLETION_ENTRY(mpi_testall, MPI_TESTALL, (fint *count, fint *req, fint *flag, fint *statuses, fint *ierr),
      f_waitall(1, NEXT, count, req, flag, statuses, ierr))
COMPLETION_ENTRY(mpi_waitany, MPI_WAITANY, (fint *count, fint *req, fint *index, fint *status, fint *ierr),
      f_waitany(0, INDEX_BASE, NEXT, count, req, index, NULL, status, ierr))
COMPLETION_ENTRY(mpi_testany, MPI_TESTANY,
      (fint *count, fint *req, fint *index, fint *flag, fint *status, fint *ierr),
      f_waitany(1, INDEX_BASE, NEXT, count, req, index, flag, status, ierr))
COMPLETION_ENTRY(mpi_waitsome, MPI_WAITSOME,
      (fint *count, fint *req, fint *outcount, fint *indices, fint *statuses, fint *ierr),
      f_waitsome(0, INDEX_BASE, (f_waitsome_fn)NEXT, count, req, outcount, indices, statuses,
                 ierr))
COMPLETION_ENTRY(mpi_testsome, MPI_TESTSOME,
      (fint *count, fint *req, fint *outcount, fint *indices, fint *statuses, fint *ierr),
      f_waitsome(1, INDEX_BASE, (f_waitsome_fn)NEXT, count, req, outcount, indices, statuses,
                 ierr))

/*
 * The blocking collectives (Open MPI: they call PMPI_*; MPICH 4.0's call
 * MPI_*, which the C wrappers catch: none here). COLL_ENTRY(lower, UPPER,
 * params, args, C call): the MPI's Fortran entry point with @p args while the
 * shim stages neither blocking class (coll, reduce), else the C call (the
 * shim's MPI_X, which checks the call's own class) into *ierr.
 */
#if defined(SHIM_FORTRAN_ALL)
#define F_COLL_ACTIVE() shim_active_for(SHIM_CLASS_COLL | SHIM_CLASS_REDUCE)
#define COLL_ENTRY(lower, UPPER, PARAMS, ARGS, C_CALL)                         \
    P2P_ENTRY(lower, UPPER, PARAMS, shim_defer_flush_if();                     \
              if (SHIM_LIKELY(!F_COLL_ACTIVE())) ((void (*) PARAMS)NEXT) ARGS; \
              else set_ierr(ierr, C_CALL))

#define IN_PLACE_ARG(b) ((void *)c_in_place(b))
#define BUF_ARG(b) ((void *)c_buf(b))

COLL_ENTRY(mpi_bcast, MPI_BCAST,
           (void *buf, fint *count, fint *dt, fint *root, fint *comm, fint *ierr),
           (buf, count, dt, root, comm, ierr),
           MPI_Bcast(BUF_ARG(buf), *count, F_TYPE(dt), *root, F_COMM(comm)))
COLL_ENTRY(mpi_reduce, MPI_REDUCE,
           (void *sbuf, void *rbuf, fint *count, fint *dt, fint *op, fint *root, fint *comm,
            fint *ierr),
           (sbuf, rbuf, count, dt, op, root, comm, ierr),
           MPI_Reduce(IN_PLACE_ARG(sbuf), BUF_ARG(rbuf), *count, F_TYPE(dt), F_OP(op), *root,
                      F_COMM(comm)))
COLL_ENTRY(mpi_reduce_local, MPI_REDUCE_LOCAL,
           (void *inbuf, void *inoutbuf, fint *count, fint *dt, fint *op, fint *ierr),
           (inbuf, inoutbuf, count, dt, op, ierr),
           MPI_Reduce_local(BUF_ARG(inbuf), BUF_ARG(inoutbuf), *count, F_TYPE(dt), F_OP(op)))

#define REDUCE_ALL_PARAMS \
    (void *sbuf, void *rbuf, fint *count, fint *dt, fint *op, fint *comm, fint *ierr)
#define REDUCE_ALL_ENTRY(lower, UPPER, CALL)                                             \
    COLL_ENTRY(lower, UPPER, REDUCE_ALL_PARAMS, (sbuf, rbuf, count, dt, op, comm, ierr), \
               CALL(IN_PLACE_ARG(sbuf), BUF_ARG(rbuf), *count, F_TYPE(dt), F_OP(op),     \
                    F_COMM(comm)))
REDUCE_ALL_ENTRY(mpi_allreduce, MPI_ALLREDUCE, MPI_Allreduce)
REDUCE_ALL_ENTRY(mpi_scan, MPI_SCAN, MPI_Scan)
REDUCE_ALL_ENTRY(mpi_exscan, MPI_EXSCAN, MPI_Exscan)
REDUCE_ALL_ENTRY(mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK, MPI_Reduce_scatter_block)
COLL_ENTRY(mpi_reduce_scatter, MPI_REDUCE_SCATTER,
           (void *sbuf, void *rbuf, fint *counts, fint *dt, fint *op, fint *comm, fint *ierr),
           (sbuf, rbuf, counts, dt, op, comm, ierr),
           MPI_Reduce_scatter(IN_PLACE_ARG(sbuf), BUF_ARG(rbuf), counts, F_TYPE(dt), F_OP(op),
                              F_COMM(comm)))

#define GATHER_PARAMS                                                              \
    (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcount, fint *rtype, \
     fint *root, fint *comm, fint *ierr)
#define GATHER_ARGS (sbuf, scount, stype, rbuf, rcount, rtype, root, comm, ierr)
COLL_ENTRY(mpi_gather, MPI_GATHER, GATHER_PARAMS, GATHER_ARGS,
           MPI_Gather(IN_PLACE_ARG(sbuf), *scount, F_TYPE(stype), BUF_ARG(rbuf), *rcount,
                      F_TYPE(rtype), *root, F_COMM(comm)))
COLL_ENTRY(mpi_scatter, MPI_SCATTER, GATHER_PARAMS, GATHER_ARGS,
           MPI_Scatter(BUF_ARG(sbuf), *scount, F_TYPE(stype), IN_PLACE_ARG(rbuf), *rcount,
                       F_TYPE(rtype), *root, F_COMM(comm)))

#define ALLGATHER_PARAMS                                                           \
    (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcount, fint *rtype, \
     fint *comm, fint *ierr)
#define ALLGATHER_ENTRY(lower, UPPER, CALL)                                             \
    COLL_ENTRY(lower, UPPER, ALLGATHER_PARAMS,                                          \
               (sbuf, scount, stype, rbuf, rcount, rtype, comm, ierr),                  \
               CALL(IN_PLACE_ARG(sbuf), *scount, F_TYPE(stype), BUF_ARG(rbuf), *rcount, \
                    F_TYPE(rtype), F_COMM(comm)))
ALLGATHER_ENTRY(mpi_allgather, MPI_ALLGATHER, MPI_Allgather)
ALLGATHER_ENTRY(mpi_alltoall, MPI_ALLTOALL, MPI_Alltoall)

COLL_ENTRY(mpi_gatherv, MPI_GATHERV,
           (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcounts, fint *displs,
            fint *rtype, fint *root, fint *comm, fint *ierr),
           (sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, ierr),
           MPI_Gatherv(IN_PLACE_ARG(sbuf), *scount, F_TYPE(stype), BUF_ARG(rbuf), rcounts,
                       displs, F_TYPE(rtype), *root, F_COMM(comm)))
COLL_ENTRY(mpi_scatterv, MPI_SCATTERV,
           (void *sbuf, fint *scounts, fint *displs, fint *stype, void *rbuf, fint *rcount,
            fint *rtype, fint *root, fint *comm, fint *ierr),
           (sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, ierr),
           MPI_Scatterv(BUF_ARG(sbuf), scounts, displs, F_TYPE(stype), IN_PLACE_ARG(rbuf),
                        *rcount, F_TYPE(rtype), *root, F_COMM(comm)))
COLL_ENTRY(mpi_allgatherv, MPI_ALLGATHERV,
           (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcounts, fint *displs,
            fint *rtype, fint *comm, fint *ierr),
           (sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, ierr),
           MPI_Allgatherv(IN_PLACE_ARG(sbuf), *scount, F_TYPE(stype), BUF_ARG(rbuf), rcounts,
                          displs, F_TYPE(rtype), F_COMM(comm)))
COLL_ENTRY(mpi_alltoallv, MPI_ALLTOALLV,
           (void *sbuf, fint *scounts, fint *sdispls, fint *stype, void *rbuf, fint *rcounts,
            fint *rdispls, fint *rtype, fint *comm, fint *ierr),
           (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, ierr),
           MPI_Alltoallv(IN_PLACE_ARG(sbuf), scounts, sdispls, F_TYPE(stype), BUF_ARG(rbuf),
                         rcounts, rdispls, F_TYPE(rtype), F_COMM(comm)))
P2P_ENTRY(mpi_alltoallw, MPI_ALLTOALLW,
          (void *sbuf, fint *scounts, fint *sdispls, fint *stypes, void *rbuf, fint *rcounts,
           fint *rdispls, fint *rtypes, fint *comm, fint *ierr),
          f_alltoallw(NEXT, sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes,
                      comm, NULL, ierr))

/*
 * The nonblocking collectives (issue 13; Open MPI's call PMPI_I* too).
 * ICOLL_ENTRY(lower, UPPER, params, args, C call): the MPI's Fortran entry
 * point with @p args while the shim stages neither nonblocking class (icoll,
 * reduce), else the C call (the shim's MPI_IX of shim_icoll.c, which checks
 * the call's own class, stages, and records the staging in the request table
 * the Fortran completion calls above consult) on the C request creq, written
 * back as Open MPI's binding does: PMPI_Request_c2f(creq) on success. The
 * count and displacement arrays of the v forms are the program's own (MPI_Fint
 * is int), which MPI requires unchanged until completion: nothing to keep.
 */
static int f_ireq(int rc, MPI_Request creq, fint *req)
{
    if (rc == MPI_SUCCESS)
        *req = PMPI_Request_c2f(creq);
    return rc;
}

#define F_ICOLL_ACTIVE() shim_active_for(SHIM_CLASS_ICOLL | SHIM_CLASS_REDUCE)
#define ICOLL_ENTRY(lower, UPPER, PARAMS, ARGS, C_CALL)                          \
    P2P_ENTRY(lower, UPPER, PARAMS,                                              \
              if (SHIM_LIKELY(!F_ICOLL_ACTIVE())) ((void (*) PARAMS)NEXT) ARGS;  \
              else {                                                             \
                  MPI_Request creq = MPI_REQUEST_NULL;                           \
                  int rc = C_CALL;                                               \
                  set_ierr(ierr, f_ireq(rc, creq, req));                         \
              })

ICOLL_ENTRY(mpi_ibcast, MPI_IBCAST,
            (void *buf, fint *count, fint *dt, fint *root, fint *comm, fint *req, fint *ierr),
            (buf, count, dt, root, comm, req, ierr),
            MPI_Ibcast(BUF_ARG(buf), *count, F_TYPE(dt), *root, F_COMM(comm), &creq))
ICOLL_ENTRY(mpi_ireduce, MPI_IREDUCE,
            (void *sbuf, void *rbuf, fint *count, fint *dt, fint *op, fint *root, fint *comm,
             fint *req, fint *ierr),
            (sbuf, rbuf, count, dt, op, root, comm, req, ierr),
            MPI_Ireduce(IN_PLACE_ARG(sbuf), BUF_ARG(rbuf), *count, F_TYPE(dt), F_OP(op), *root,
                        F_COMM(comm), &creq))

#define IREDUCE_ALL_PARAMS                                                             \
    (void *sbuf, void *rbuf, fint *count, fint *dt, fint *op, fint *comm, fint *req, \
     fint *ierr)
#define IREDUCE_ALL_ENTRY(lower, UPPER, CALL)                                                \
    ICOLL_ENTRY(lower, UPPER, IREDUCE_ALL_PARAMS,                                            \
                (sbuf, rbuf, count, dt, op, comm, req, ierr),                                \
                CALL(IN_PLACE_ARG(sbuf), BUF_ARG(rbuf), *count, F_TYPE(dt), F_OP(op),        \
                     F_COMM(comm), &creq))
IREDUCE_ALL_ENTRY(mpi_iallreduce, MPI_IALLREDUCE, MPI_Iallreduce)
IREDUCE_ALL_ENTRY(mpi_iscan, MPI_ISCAN, MPI_Iscan)
IREDUCE_ALL_ENTRY(mpi_iexscan, MPI_IEXSCAN, MPI_Iexscan)
IREDUCE_ALL_ENTRY(mpi_ireduce_scatter_block, MPI_IREDUCE_SCATTER_BLOCK,
                  MPI_Ireduce_scatter_block)
ICOLL_ENTRY(mpi_ireduce_scatter, MPI_IREDUCE_SCATTER,
            (void *sbuf, void *rbuf, fint *counts, fint *dt, fint *op, fint *comm, fint *req,
             fint *ierr),
            (sbuf, rbuf, counts, dt, op, comm, req, ierr),
            MPI_Ireduce_scatter(IN_PLACE_ARG(sbuf), BUF_ARG(rbuf), counts, F_TYPE(dt),
                                F_OP(op), F_COMM(comm), &creq))

#define IGATHER_PARAMS                                                             \
    (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcount, fint *rtype, \
     fint *root, fint *comm, fint *req, fint *ierr)
#define IGATHER_ARGS (sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req, ierr)
ICOLL_ENTRY(mpi_igather, MPI_IGATHER, IGATHER_PARAMS, IGATHER_ARGS,
            MPI_Igather(IN_PLACE_ARG(sbuf), *scount, F_TYPE(stype), BUF_ARG(rbuf), *rcount,
                        F_TYPE(rtype), *root, F_COMM(comm), &creq))
ICOLL_ENTRY(mpi_iscatter, MPI_ISCATTER, IGATHER_PARAMS, IGATHER_ARGS,
            MPI_Iscatter(BUF_ARG(sbuf), *scount, F_TYPE(stype), IN_PLACE_ARG(rbuf), *rcount,
                         F_TYPE(rtype), *root, F_COMM(comm), &creq))

#define IALLGATHER_PARAMS                                                          \
    (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcount, fint *rtype, \
     fint *comm, fint *req, fint *ierr)
#define IALLGATHER_ENTRY(lower, UPPER, CALL)                                             \
    ICOLL_ENTRY(lower, UPPER, IALLGATHER_PARAMS,                                         \
                (sbuf, scount, stype, rbuf, rcount, rtype, comm, req, ierr),             \
                CALL(IN_PLACE_ARG(sbuf), *scount, F_TYPE(stype), BUF_ARG(rbuf), *rcount, \
                     F_TYPE(rtype), F_COMM(comm), &creq))
IALLGATHER_ENTRY(mpi_iallgather, MPI_IALLGATHER, MPI_Iallgather)
IALLGATHER_ENTRY(mpi_ialltoall, MPI_IALLTOALL, MPI_Ialltoall)

ICOLL_ENTRY(mpi_igatherv, MPI_IGATHERV,
            (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcounts, fint *displs,
             fint *rtype, fint *root, fint *comm, fint *req, fint *ierr),
            (sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, req, ierr),
            MPI_Igatherv(IN_PLACE_ARG(sbuf), *scount, F_TYPE(stype), BUF_ARG(rbuf), rcounts,
                         displs, F_TYPE(rtype), *root, F_COMM(comm), &creq))
ICOLL_ENTRY(mpi_iscatterv, MPI_ISCATTERV,
            (void *sbuf, fint *scounts, fint *displs, fint *stype, void *rbuf, fint *rcount,
             fint *rtype, fint *root, fint *comm, fint *req, fint *ierr),
            (sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, req, ierr),
            MPI_Iscatterv(BUF_ARG(sbuf), scounts, displs, F_TYPE(stype), IN_PLACE_ARG(rbuf),
                          *rcount, F_TYPE(rtype), *root, F_COMM(comm), &creq))
ICOLL_ENTRY(mpi_iallgatherv, MPI_IALLGATHERV,
            (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcounts, fint *displs,
             fint *rtype, fint *comm, fint *req, fint *ierr),
            (sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req, ierr),
            MPI_Iallgatherv(IN_PLACE_ARG(sbuf), *scount, F_TYPE(stype), BUF_ARG(rbuf), rcounts,
                            displs, F_TYPE(rtype), F_COMM(comm), &creq))
ICOLL_ENTRY(mpi_ialltoallv, MPI_IALLTOALLV,
            (void *sbuf, fint *scounts, fint *sdispls, fint *stype, void *rbuf, fint *rcounts,
             fint *rdispls, fint *rtype, fint *comm, fint *req, fint *ierr),
            (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, req, ierr),
            MPI_Ialltoallv(IN_PLACE_ARG(sbuf), scounts, sdispls, F_TYPE(stype), BUF_ARG(rbuf),
                           rcounts, rdispls, F_TYPE(rtype), F_COMM(comm), &creq))

P2P_ENTRY(mpi_ialltoallw, MPI_IALLTOALLW,
          (void *sbuf, fint *scounts, fint *sdispls, fint *stypes, void *rbuf, fint *rcounts,
           fint *rdispls, fint *rtypes, fint *comm, fint *req, fint *ierr),
          f_alltoallw(NEXT, sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes,
                      comm, req, ierr))

/*
 * The neighborhood collectives (Open MPI's call PMPI_Neighbor_* and
 * PMPI_Ineighbor_* too): the shim's C wrappers of shim_neigh.c, which find
 * the blocks from the topology. Neighbor_alltoallw's displacements are
 * INTEGER(MPI_ADDRESS_KIND), MPI_Aint in C; its datatype arrays (out-degree
 * send types, in-degree receive types) are converted and, for the
 * nonblocking form, kept until completion, as Ialltoallw's.
 */
COLL_ENTRY(mpi_neighbor_allgather, MPI_NEIGHBOR_ALLGATHER, ALLGATHER_PARAMS,
           (sbuf, scount, stype, rbuf, rcount, rtype, comm, ierr),
           MPI_Neighbor_allgather(BUF_ARG(sbuf), *scount, F_TYPE(stype), BUF_ARG(rbuf), *rcount,
                                  F_TYPE(rtype), F_COMM(comm)))
COLL_ENTRY(mpi_neighbor_alltoall, MPI_NEIGHBOR_ALLTOALL, ALLGATHER_PARAMS,
           (sbuf, scount, stype, rbuf, rcount, rtype, comm, ierr),
           MPI_Neighbor_alltoall(BUF_ARG(sbuf), *scount, F_TYPE(stype), BUF_ARG(rbuf), *rcount,
                                 F_TYPE(rtype), F_COMM(comm)))
COLL_ENTRY(mpi_neighbor_allgatherv, MPI_NEIGHBOR_ALLGATHERV,
           (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcounts, fint *displs,
            fint *rtype, fint *comm, fint *ierr),
           (sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, ierr),
           MPI_Neighbor_allgatherv(BUF_ARG(sbuf), *scount, F_TYPE(stype), BUF_ARG(rbuf),
                                   rcounts, displs, F_TYPE(rtype), F_COMM(comm)))
COLL_ENTRY(mpi_neighbor_alltoallv, MPI_NEIGHBOR_ALLTOALLV,
           (void *sbuf, fint *scounts, fint *sdispls, fint *stype, void *rbuf, fint *rcounts,
            fint *rdispls, fint *rtype, fint *comm, fint *ierr),
           (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, ierr),
           MPI_Neighbor_alltoallv(BUF_ARG(sbuf), scounts, sdispls, F_TYPE(stype),
                                  BUF_ARG(rbuf), rcounts, rdispls, F_TYPE(rtype),
                                  F_COMM(comm)))
ICOLL_ENTRY(mpi_ineighbor_allgather, MPI_INEIGHBOR_ALLGATHER, IALLGATHER_PARAMS,
            (sbuf, scount, stype, rbuf, rcount, rtype, comm, req, ierr),
            MPI_Ineighbor_allgather(BUF_ARG(sbuf), *scount, F_TYPE(stype), BUF_ARG(rbuf),
                                    *rcount, F_TYPE(rtype), F_COMM(comm), &creq))
ICOLL_ENTRY(mpi_ineighbor_alltoall, MPI_INEIGHBOR_ALLTOALL, IALLGATHER_PARAMS,
            (sbuf, scount, stype, rbuf, rcount, rtype, comm, req, ierr),
            MPI_Ineighbor_alltoall(BUF_ARG(sbuf), *scount, F_TYPE(stype), BUF_ARG(rbuf),
                                   *rcount, F_TYPE(rtype), F_COMM(comm), &creq))
ICOLL_ENTRY(mpi_ineighbor_allgatherv, MPI_INEIGHBOR_ALLGATHERV,
            (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcounts, fint *displs,
             fint *rtype, fint *comm, fint *req, fint *ierr),
            (sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req, ierr),
            MPI_Ineighbor_allgatherv(BUF_ARG(sbuf), *scount, F_TYPE(stype), BUF_ARG(rbuf),
                                     rcounts, displs, F_TYPE(rtype), F_COMM(comm), &creq))
ICOLL_ENTRY(mpi_ineighbor_alltoallv, MPI_INEIGHBOR_ALLTOALLV,
            (void *sbuf, fint *scounts, fint *sdispls, fint *stype, void *rbuf, fint *rcounts,
             fint *rdispls, fint *rtype, fint *comm, fint *req, fint *ierr),
            (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, req, ierr),
            MPI_Ineighbor_alltoallv(BUF_ARG(sbuf), scounts, sdispls, F_TYPE(stype),
                                    BUF_ARG(rbuf), rcounts, rdispls, F_TYPE(rtype),
                                    F_COMM(comm), &creq))

typedef void (*f_nalltoallw_fn)(void *, fint *, MPI_Aint *, fint *, void *, fint *, MPI_Aint *,
                                fint *, fint *, fint *);
typedef void (*f_inalltoallw_fn)(void *, fint *, MPI_Aint *, fint *, void *, fint *,
                                 MPI_Aint *, fint *, fint *, fint *, fint *);

/* Neighbor_alltoallw (@p req NULL) and Ineighbor_alltoallw. */
static void f_neighbor_alltoallw(void *fn, void *sbuf, fint *scounts, MPI_Aint *sdispls,
                                 fint *stypes, void *rbuf, fint *rcounts, MPI_Aint *rdispls,
                                 fint *rtypes, fint *comm, fint *req, fint *ierr)
{
    const char *call = req == NULL ? "MPI_Neighbor_alltoallw" : "MPI_Ineighbor_alltoallw";
    MPI_Comm c = F_COMM(comm);
    int in = 0, out = 0;
    if (SHIM_LIKELY(!shim_active_for(req == NULL ? SHIM_CLASS_COLL : SHIM_CLASS_ICOLL)) ||
        c == NULL || c == MPI_COMM_NULL || !shim_neigh_degrees(c, call, &in, &out)) {
        if (req == NULL)
            ((f_nalltoallw_fn)fn)(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls,
                                  rtypes, comm, ierr);
        else
            ((f_inalltoallw_fn)fn)(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls,
                                   rtypes, comm, req, ierr);
        return;
    }
    MPI_Datatype *st = malloc(sizeof *st * ((size_t)in + (size_t)out + 1)), *rt = st + out;
    if (st == NULL) {
        set_ierr(ierr, shim_error(c, MPI_ERR_NO_MEM, call, "no memory for the datatype arrays"));
        return;
    }
    for (int i = 0; i < out; i++)
        st[i] = PMPI_Type_f2c(stypes[i]);
    for (int i = 0; i < in; i++)
        rt[i] = PMPI_Type_f2c(rtypes[i]);
    const void *s = c_buf(sbuf);
    void *r = (void *)c_buf(rbuf);
    MPI_Request creq = MPI_REQUEST_NULL;
    int rc = req == NULL
                 ? MPI_Neighbor_alltoallw(s, scounts, sdispls, st, r, rcounts, rdispls, rt, c)
                 : MPI_Ineighbor_alltoallw(s, scounts, sdispls, st, r, rcounts, rdispls, rt, c,
                                           &creq);
    if (req == NULL || rc != MPI_SUCCESS)
        free(st);
    else
        rc = f_ireq(shim_rec_keep(&creq, c, call, st), creq, req); /* st lives until completion */
    set_ierr(ierr, rc);
}

P2P_ENTRY(mpi_neighbor_alltoallw, MPI_NEIGHBOR_ALLTOALLW,
          (void *sbuf, fint *scounts, MPI_Aint *sdispls, fint *stypes, void *rbuf, fint *rcounts,
           MPI_Aint *rdispls, fint *rtypes, fint *comm, fint *ierr),
          f_neighbor_alltoallw(NEXT, sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls,
                               rtypes, comm, NULL, ierr))
P2P_ENTRY(mpi_ineighbor_alltoallw, MPI_INEIGHBOR_ALLTOALLW,
          (void *sbuf, fint *scounts, MPI_Aint *sdispls, fint *stypes, void *rbuf, fint *rcounts,
           MPI_Aint *rdispls, fint *rtypes, fint *comm, fint *req, fint *ierr),
          f_neighbor_alltoallw(NEXT, sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls,
                               rtypes, comm, req, ierr))

/*
 * MPI_Pack and MPI_Unpack (Open MPI's call PMPI_Pack and PMPI_Unpack): while
 * the shim does not stage p2p the MPI's own entry point, else the shim's C
 * wrapper of shim_pack.c with the handles converted (MPI_BOTTOM in both
 * buffers); the position is a Fortran INTEGER, a C int here. (Not the
 * external forms: their datarep is a Fortran string.)
 */
#define PACK_ENTRY(lower, UPPER, PARAMS, ARGS, C_CALL)                        \
    P2P_ENTRY(lower, UPPER, PARAMS,                                           \
              if (SHIM_LIKELY(!shim_p2p_active())) ((void (*) PARAMS)NEXT) ARGS; \
              else set_ierr(ierr, C_CALL))
PACK_ENTRY(mpi_pack, MPI_PACK,
           (void *inbuf, fint *incount, fint *dt, void *outbuf, fint *outsize, fint *position,
            fint *comm, fint *ierr),
           (inbuf, incount, dt, outbuf, outsize, position, comm, ierr),
           MPI_Pack(BUF_ARG(inbuf), *incount, F_TYPE(dt), BUF_ARG(outbuf), *outsize, position,
                    F_COMM(comm)))
PACK_ENTRY(mpi_unpack, MPI_UNPACK,
           (void *inbuf, fint *insize, fint *position, void *outbuf, fint *outcount, fint *dt,
            fint *comm, fint *ierr),
           (inbuf, insize, position, outbuf, outcount, dt, comm, ierr),
           MPI_Unpack(BUF_ARG(inbuf), *insize, position, BUF_ARG(outbuf), *outcount, F_TYPE(dt),
                      F_COMM(comm)))

/* Not here: the persistent collectives (MPI-4; refused on device memory in C). */

/*
 * MPI-IO and RMA (issue 13; Open MPI's Fortran bindings call PMPI_File_*,
 * PMPI_Win_create, PMPI_Put & co. directly). IO_ENTRY(lower, UPPER, params,
 * args, body): the MPI's Fortran entry point with @p args while the shim
 * does not stage the io class, else @p body: the handles converted (and
 * Fortran's MPI_BOTTOM), the shim's C wrapper of shim_io.c called, which
 * stages the blocking IO and refuses device memory in the nonblocking IO,
 * the split collectives, windows and RMA buffers; the status, request or
 * window written back as Open MPI's binding does, on success (a refused
 * request comes back as MPI_REQUEST_NULL).
 */
#define IO_ENTRY(lower, UPPER, PARAMS, ARGS, BODY)                                           \
    P2P_ENTRY(lower, UPPER, PARAMS,                                                          \
              if (SHIM_LIKELY(!shim_active_for(SHIM_CLASS_IO)))((void (*) PARAMS)NEXT) ARGS; \
              else { BODY; })
#define F_FILE(f) PMPI_File_f2c(*(f))
#define F_WIN(w) PMPI_Win_f2c(*(w))

/* After a blocking IO call: its Fortran status from the C one. */
static int f_io_status(int rc, const MPI_Status *cs, fint *status)
{
    if (rc == MPI_SUCCESS && cs != MPI_STATUS_IGNORE)
        PMPI_Status_c2f(cs, status);
    return rc;
}

/* A request made by a C wrapper, as Fortran's (MPI_REQUEST_NULL if refused). */
static int f_io_req(int rc, MPI_Request creq, fint *req)
{
    *req = PMPI_Request_c2f(creq);
    return rc;
}

#define F_CSTATUS(status) (status_ignored(status) ? MPI_STATUS_IGNORE : &cs)

/* (fh, buf, count, datatype, status): File_read & co.; _AT: an offset first. */
#define IO_RW_ENTRY(lower, UPPER, CALL)                                                    \
    IO_ENTRY(lower, UPPER, (fint * fh, void *buf, fint *count, fint *dt, fint *status,     \
                            fint *ierr),                                                   \
             (fh, buf, count, dt, status, ierr), MPI_Status cs;                            \
             set_ierr(ierr, f_io_status(CALL(F_FILE(fh), BUF_ARG(buf), *count, F_TYPE(dt), \
                                             F_CSTATUS(status)),                           \
                                        F_CSTATUS(status), status)))
#define IO_RW_AT_ENTRY(lower, UPPER, CALL)                                                  \
    IO_ENTRY(lower, UPPER, (fint * fh, MPI_Offset *offset, void *buf, fint *count, fint *dt, \
                            fint *status, fint *ierr),                                      \
             (fh, offset, buf, count, dt, status, ierr), MPI_Status cs;                     \
             set_ierr(ierr, f_io_status(CALL(F_FILE(fh), *offset, BUF_ARG(buf), *count,     \
                                             F_TYPE(dt), F_CSTATUS(status)),                \
                                        F_CSTATUS(status), status)))
IO_RW_ENTRY(mpi_file_read, MPI_FILE_READ, MPI_File_read)
IO_RW_ENTRY(mpi_file_read_all, MPI_FILE_READ_ALL, MPI_File_read_all)
IO_RW_ENTRY(mpi_file_read_shared, MPI_FILE_READ_SHARED, MPI_File_read_shared)
IO_RW_ENTRY(mpi_file_read_ordered, MPI_FILE_READ_ORDERED, MPI_File_read_ordered)
IO_RW_AT_ENTRY(mpi_file_read_at, MPI_FILE_READ_AT, MPI_File_read_at)
IO_RW_AT_ENTRY(mpi_file_read_at_all, MPI_FILE_READ_AT_ALL, MPI_File_read_at_all)
IO_RW_ENTRY(mpi_file_write, MPI_FILE_WRITE, MPI_File_write)
IO_RW_ENTRY(mpi_file_write_all, MPI_FILE_WRITE_ALL, MPI_File_write_all)
IO_RW_ENTRY(mpi_file_write_shared, MPI_FILE_WRITE_SHARED, MPI_File_write_shared)
IO_RW_ENTRY(mpi_file_write_ordered, MPI_FILE_WRITE_ORDERED, MPI_File_write_ordered)
IO_RW_AT_ENTRY(mpi_file_write_at, MPI_FILE_WRITE_AT, MPI_File_write_at)
IO_RW_AT_ENTRY(mpi_file_write_at_all, MPI_FILE_WRITE_AT_ALL, MPI_File_write_at_all)

/* (fh, [offset,] buf, count, datatype, request): the nonblocking IO, refused on
 * device memory by the C wrapper. */
#define IO_I_ENTRY(lower, UPPER, CALL)                                                       \
    IO_ENTRY(lower, UPPER, (fint * fh, void *buf, fint *count, fint *dt, fint *req,          \
                            fint *ierr),                                                     \
             (fh, buf, count, dt, req, ierr), MPI_Request creq = MPI_REQUEST_NULL;           \
             set_ierr(ierr, f_io_req(CALL(F_FILE(fh), BUF_ARG(buf), *count, F_TYPE(dt), &creq), \
                                     creq, req)))
#define IO_I_AT_ENTRY(lower, UPPER, CALL)                                                     \
    IO_ENTRY(lower, UPPER, (fint * fh, MPI_Offset *offset, void *buf, fint *count, fint *dt,  \
                            fint *req, fint *ierr),                                           \
             (fh, offset, buf, count, dt, req, ierr), MPI_Request creq = MPI_REQUEST_NULL;    \
             set_ierr(ierr, f_io_req(CALL(F_FILE(fh), *offset, BUF_ARG(buf), *count,          \
                                          F_TYPE(dt), &creq),                                 \
                                     creq, req)))
IO_I_ENTRY(mpi_file_iread, MPI_FILE_IREAD, MPI_File_iread)
IO_I_ENTRY(mpi_file_iread_all, MPI_FILE_IREAD_ALL, MPI_File_iread_all)
IO_I_ENTRY(mpi_file_iread_shared, MPI_FILE_IREAD_SHARED, MPI_File_iread_shared)
IO_I_AT_ENTRY(mpi_file_iread_at, MPI_FILE_IREAD_AT, MPI_File_iread_at)
IO_I_AT_ENTRY(mpi_file_iread_at_all, MPI_FILE_IREAD_AT_ALL, MPI_File_iread_at_all)
IO_I_ENTRY(mpi_file_iwrite, MPI_FILE_IWRITE, MPI_File_iwrite)
IO_I_ENTRY(mpi_file_iwrite_all, MPI_FILE_IWRITE_ALL, MPI_File_iwrite_all)
IO_I_ENTRY(mpi_file_iwrite_shared, MPI_FILE_IWRITE_SHARED, MPI_File_iwrite_shared)
IO_I_AT_ENTRY(mpi_file_iwrite_at, MPI_FILE_IWRITE_AT, MPI_File_iwrite_at)
IO_I_AT_ENTRY(mpi_file_iwrite_at_all, MPI_FILE_IWRITE_AT_ALL, MPI_File_iwrite_at_all)

/* (fh, [offset,] buf, count, datatype): the split collectives' _begin, refused
 * on device memory (the _end calls need no entry: a refused _begin started
 * nothing). */
#define IO_BEGIN_ENTRY(lower, UPPER, CALL)                                               \
    IO_ENTRY(lower, UPPER, (fint * fh, void *buf, fint *count, fint *dt, fint *ierr),    \
             (fh, buf, count, dt, ierr),                                                 \
             set_ierr(ierr, CALL(F_FILE(fh), BUF_ARG(buf), *count, F_TYPE(dt))))
#define IO_BEGIN_AT_ENTRY(lower, UPPER, CALL)                                                 \
    IO_ENTRY(lower, UPPER, (fint * fh, MPI_Offset *offset, void *buf, fint *count, fint *dt,  \
                            fint *ierr),                                                      \
             (fh, offset, buf, count, dt, ierr),                                              \
             set_ierr(ierr, CALL(F_FILE(fh), *offset, BUF_ARG(buf), *count, F_TYPE(dt))))
IO_BEGIN_ENTRY(mpi_file_read_all_begin, MPI_FILE_READ_ALL_BEGIN, MPI_File_read_all_begin)
IO_BEGIN_ENTRY(mpi_file_read_ordered_begin, MPI_FILE_READ_ORDERED_BEGIN,
               MPI_File_read_ordered_begin)
IO_BEGIN_AT_ENTRY(mpi_file_read_at_all_begin, MPI_FILE_READ_AT_ALL_BEGIN,
                  MPI_File_read_at_all_begin)
IO_BEGIN_ENTRY(mpi_file_write_all_begin, MPI_FILE_WRITE_ALL_BEGIN, MPI_File_write_all_begin)
IO_BEGIN_ENTRY(mpi_file_write_ordered_begin, MPI_FILE_WRITE_ORDERED_BEGIN,
               MPI_File_write_ordered_begin)
IO_BEGIN_AT_ENTRY(mpi_file_write_at_all_begin, MPI_FILE_WRITE_AT_ALL_BEGIN,
                  MPI_File_write_at_all_begin)

/* RMA: a window on device memory and device origin, result or compare
 * buffers are refused by the C wrappers. */
IO_ENTRY(mpi_win_create, MPI_WIN_CREATE,
         (void *base, MPI_Aint *size, fint *disp_unit, fint *info, fint *comm, fint *win,
          fint *ierr),
         (base, size, disp_unit, info, comm, win, ierr), MPI_Win cwin = MPI_WIN_NULL;
         int rc = MPI_Win_create(BUF_ARG(base), *size, *disp_unit, PMPI_Info_f2c(*info),
                                 F_COMM(comm), &cwin);
         if (rc == MPI_SUCCESS) *win = PMPI_Win_c2f(cwin); set_ierr(ierr, rc))
IO_ENTRY(mpi_win_attach, MPI_WIN_ATTACH, (fint * win, void *base, MPI_Aint *size, fint *ierr),
         (win, base, size, ierr), set_ierr(ierr, MPI_Win_attach(F_WIN(win), BUF_ARG(base), *size)))

/* The parameters of Put & co.: RES the result buffer's (Get_accumulate), OP
 * the op's, REQ the request's, each empty or RMA_*_P; and the C arguments
 * up to the target datatype (RES: empty or RMA_RES_A). */
#define RMA_PARAMS(RES, OP, REQ)                                                          \
    (void *o, fint *oc, fint *ot, RES fint *target, MPI_Aint *td, fint *tc, fint *tt, OP \
     fint *win, REQ fint *ierr)
#define RMA_C_ARGS(RES) BUF_ARG(o), *oc, F_TYPE(ot), RES * target, *td, *tc, F_TYPE(tt)
#define RMA_RES_P void *r, fint *rc, fint *rt,
#define RMA_RES_A BUF_ARG(r), *rc, F_TYPE(rt),
#define RMA_OP_P fint *op,
#define RMA_REQ_P fint *req,
IO_ENTRY(mpi_put, MPI_PUT, RMA_PARAMS(, , ), (o, oc, ot, target, td, tc, tt, win, ierr),
         set_ierr(ierr, MPI_Put(RMA_C_ARGS(), F_WIN(win))))
IO_ENTRY(mpi_get, MPI_GET, RMA_PARAMS(, , ), (o, oc, ot, target, td, tc, tt, win, ierr),
         set_ierr(ierr, MPI_Get(RMA_C_ARGS(), F_WIN(win))))
IO_ENTRY(mpi_rput, MPI_RPUT, RMA_PARAMS(, , RMA_REQ_P),
         (o, oc, ot, target, td, tc, tt, win, req, ierr), MPI_Request creq = MPI_REQUEST_NULL;
         set_ierr(ierr, f_io_req(MPI_Rput(RMA_C_ARGS(), F_WIN(win), &creq), creq, req)))
IO_ENTRY(mpi_rget, MPI_RGET, RMA_PARAMS(, , RMA_REQ_P),
         (o, oc, ot, target, td, tc, tt, win, req, ierr), MPI_Request creq = MPI_REQUEST_NULL;
         set_ierr(ierr, f_io_req(MPI_Rget(RMA_C_ARGS(), F_WIN(win), &creq), creq, req)))
IO_ENTRY(mpi_accumulate, MPI_ACCUMULATE, RMA_PARAMS(, RMA_OP_P, ),
         (o, oc, ot, target, td, tc, tt, op, win, ierr),
         set_ierr(ierr, MPI_Accumulate(RMA_C_ARGS(), F_OP(op), F_WIN(win))))
IO_ENTRY(mpi_get_accumulate, MPI_GET_ACCUMULATE, RMA_PARAMS(RMA_RES_P, RMA_OP_P, ),
         (o, oc, ot, r, rc, rt, target, td, tc, tt, op, win, ierr),
         set_ierr(ierr, MPI_Get_accumulate(RMA_C_ARGS(RMA_RES_A), F_OP(op), F_WIN(win))))
IO_ENTRY(mpi_raccumulate, MPI_RACCUMULATE, RMA_PARAMS(, RMA_OP_P, RMA_REQ_P),
         (o, oc, ot, target, td, tc, tt, op, win, req, ierr),
         MPI_Request creq = MPI_REQUEST_NULL;
         set_ierr(ierr, f_io_req(MPI_Raccumulate(RMA_C_ARGS(), F_OP(op), F_WIN(win), &creq),
                                 creq, req)))
IO_ENTRY(mpi_rget_accumulate, MPI_RGET_ACCUMULATE, RMA_PARAMS(RMA_RES_P, RMA_OP_P, RMA_REQ_P),
         (o, oc, ot, r, rc, rt, target, td, tc, tt, op, win, req, ierr),
         MPI_Request creq = MPI_REQUEST_NULL;
         set_ierr(ierr, f_io_req(MPI_Rget_accumulate(RMA_C_ARGS(RMA_RES_A), F_OP(op),
                                                     F_WIN(win), &creq),
                                 creq, req)))
IO_ENTRY(mpi_fetch_and_op, MPI_FETCH_AND_OP,
         (void *o, void *r, fint *dt, fint *target, MPI_Aint *td, fint *op, fint *win,
          fint *ierr),
         (o, r, dt, target, td, op, win, ierr),
         set_ierr(ierr, MPI_Fetch_and_op(BUF_ARG(o), BUF_ARG(r), F_TYPE(dt), *target, *td,
                                         F_OP(op), F_WIN(win))))
IO_ENTRY(mpi_compare_and_swap, MPI_COMPARE_AND_SWAP,
         (void *o, void *cmp, void *r, fint *dt, fint *target, MPI_Aint *td, fint *win,
          fint *ierr),
         (o, cmp, r, dt, target, td, win, ierr),
         set_ierr(ierr, MPI_Compare_and_swap(BUF_ARG(o), BUF_ARG(cmp), BUF_ARG(r), F_TYPE(dt),
                                             *target, *td, F_WIN(win))))
#endif
