/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Nonblocking sends from device memory whose copy runs after the call
 * (docs/mpi.md, "Nonblocking sends"; CUCOPY_MPI_ISEND=async, the default),
 * run under LD_PRELOAD=libcucopy_mpi.so at -n 2 with slow fake copies
 * (FAKECUDA_DELAY_US), so that each Isend returns with its copy in flight
 * (the stats line counts them; the test requires it). Ranks 0 and 1:
 *
 *   order      device Isends mixed with host sends and a blocking device
 *              Send on one tag arrive in call order (ANY_TAG receives);
 *   complete   every completion call on deferred sends: Wait, a Test loop,
 *              Waitall, a Testall loop, Waitany, a Testany loop, Waitsome,
 *              a Testsome loop, a Request_get_status loop, Request_free;
 *              Issend; a derived datatype freed right after the Isend;
 *   deadlock   both ranks Isend and then block: in Recv, a Test loop on an
 *              Irecv, Barrier, Allreduce of host memory, Comm_split, Probe;
 *              each completes only if the blocking call posted the deferred
 *              send first;
 *   errors     a bad rank or tag: the Isend itself reports it, as MPI does;
 *   threads    (alone, MPI_THREAD_MULTIPLE) a device Isend while another
 *              thread is blocked in MPI waiting for the peer that waits for it.
 *
 * The same program passes with CUCOPY_MPI_ISEND=sync; without the shim the
 * first device send dies in MPI (the negative control). Every byte is
 * checked, guards included. Prints "isend_device: rank R: PASS" or
 * "FAILED ..." lines; exit status 1 on a failure.
 */
#define COLL_PROG "isend_device"
#include "coll_prog.h"

#include <pthread.h>
#include <time.h>

static int peer;

#define BIG (256 * 1024)
#define TAG 11

/* Message @p s of @p n bytes, as a sender writes it and a receiver expects it. */
static void expect_msg(struct buf *b, size_t n, int s)
{
    memset(b->want, OLD, b->bytes + 2 * GUARD);
    for (size_t i = 0; i < n; i++)
        b->want[GUARD + i] = (unsigned char)(s * 29 + i * 7 + (i >> 10) + 1);
}

static struct buf msg_buf(int dev, size_t n, int s)
{
    struct buf b = mk(dev, n);
    expect_msg(&b, n, s);
    put(&b);
    return b;
}

/* Receive message @p s into a device buffer and check it: by MPI_Recv, or
 * (@p test) by MPI_Irecv and a loop of MPI_Test. */
static void recv_check_by(int dev, size_t n, int s, int tag, const char *what, int test)
{
    struct buf b = mk(dev, n);
    MPI_Status st;
    if (test) {
        MPI_Request r;
        int flag = 0;
        MPI_OK(MPI_Irecv(b.p, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r));
        while (!flag)
            MPI_OK(MPI_Test(&r, &flag, &st));
    } else {
        MPI_OK(MPI_Recv(b.p, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st));
    }
    int got = -1;
    MPI_Get_count(&st, MPI_BYTE, &got);
    CHECK(got == (int)n && st.MPI_SOURCE == peer, "%s: count %d from %d, want %zu from %d",
          what, got, st.MPI_SOURCE, n, peer);
    expect_msg(&b, n, s);
    verify(&b, what);
    drop(&b);
}

static void recv_check(int dev, size_t n, int s, int tag, const char *what)
{
    recv_check_by(dev, n, s, tag, what, 0);
}

/* ---- order: deferred sends keep their place among the others ------------------------ */

static void test_order(void)
{
    const size_t n[] = {BIG, 100, 1000, BIG + 3, 64};
    const int dev[] = {0, HOST, 1, 0, 1};
    const int nmsg = 5;
    if (rank == 0) {
        struct buf b[5];
        MPI_Request r[5] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL,
                            MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        for (int i = 0; i < nmsg; i++) {
            b[i] = msg_buf(dev[i], n[i], 100 + i);
            if (i == 3) /* a blocking send after deferred ones */
                MPI_OK(MPI_Send(b[i].p, (int)n[i], MPI_BYTE, peer, TAG, MPI_COMM_WORLD));
            else
                MPI_OK(MPI_Isend(b[i].p, (int)n[i], MPI_BYTE, peer, TAG, MPI_COMM_WORLD, &r[i]));
        }
        MPI_OK(MPI_Waitall(nmsg, r, MPI_STATUSES_IGNORE));
        for (int i = 0; i < nmsg; i++)
            drop(&b[i]);
        return;
    }
    for (int i = 0; i < nmsg; i++) {
        char what[96];
        snprintf(what, sizeof what, "message %d of the ordered sequence (%zu B)", i, n[i]);
        struct buf b = mk(i % 2, BIG + 8);
        MPI_Status st;
        MPI_OK(MPI_Recv(b.p, BIG + 8, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        int got = -1;
        MPI_Get_count(&st, MPI_BYTE, &got);
        CHECK(got == (int)n[i], "%s: got %d bytes", what, got);
        expect_msg(&b, n[i], 100 + i);
        verify(&b, what);
        drop(&b);
    }
}

/* ---- complete: every completion call ------------------------------------------------- */

enum { C_WAIT, C_TEST, C_WAITALL, C_TESTALL, C_WAITANY, C_TESTANY, C_WAITSOME, C_TESTSOME,
       C_GET_STATUS, C_FREE, C_COUNT };
static const char *const cname[] = {"Wait",     "Test",     "Waitall",  "Testall",
                                    "Waitany",  "Testany",  "Waitsome", "Testsome",
                                    "Request_get_status",   "Request_free"};

/* Complete the two requests @p r by completion call @p how. */
static void complete(int how, MPI_Request r[2])
{
    int flag = 0, idx = -1, out = 0, idxs[2];
    MPI_Status st[2];
    switch (how) {
    case C_WAIT:
        MPI_OK(MPI_Wait(&r[0], &st[0]));
        MPI_OK(MPI_Wait(&r[1], &st[1]));
        break;
    case C_TEST:
        for (int k = 0; k < 2; k++)
            for (flag = 0; !flag;)
                MPI_OK(MPI_Test(&r[k], &flag, &st[k]));
        break;
    case C_WAITALL:
        MPI_OK(MPI_Waitall(2, r, st));
        break;
    case C_TESTALL:
        for (flag = 0; !flag;)
            MPI_OK(MPI_Testall(2, r, &flag, st));
        break;
    case C_WAITANY:
        for (int k = 0; k < 2; k++)
            MPI_OK(MPI_Waitany(2, r, &idx, &st[0]));
        break;
    case C_TESTANY:
        for (int k = 0; k < 2;) {
            MPI_OK(MPI_Testany(2, r, &idx, &flag, &st[0]));
            k += flag && idx != MPI_UNDEFINED;
        }
        break;
    case C_WAITSOME:
        for (int k = 0; k < 2; k += out)
            MPI_OK(MPI_Waitsome(2, r, &out, idxs, st));
        break;
    case C_TESTSOME:
        for (int k = 0; k < 2;) {
            MPI_OK(MPI_Testsome(2, r, &out, idxs, st));
            k += out == MPI_UNDEFINED ? 0 : out;
        }
        break;
    case C_GET_STATUS:
        for (int k = 0; k < 2; k++) {
            for (flag = 0; !flag;)
                MPI_OK(MPI_Request_get_status(r[k], &flag, &st[k]));
            MPI_OK(MPI_Wait(&r[k], &st[k]));
        }
        break;
    case C_FREE:
        MPI_OK(MPI_Request_free(&r[0]));
        MPI_OK(MPI_Request_free(&r[1]));
        break;
    }
    CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL, "%s: requests not freed",
          cname[how]);
}

static void test_complete(void)
{
    for (int how = 0; how < C_COUNT; how++) {
        int base = 200 + 10 * how;
        if (rank == 0) {
            struct buf a = msg_buf(0, BIG, base), b = msg_buf(1, 1000, base + 1);
            MPI_Request r[2];
            MPI_OK(MPI_Isend(a.p, BIG, MPI_BYTE, peer, TAG + 1, MPI_COMM_WORLD, &r[0]));
            if (how == C_WAITANY) /* and an Issend: complete once the receive took it */
                MPI_OK(MPI_Issend(b.p, 1000, MPI_BYTE, peer, TAG + 2, MPI_COMM_WORLD, &r[1]));
            else
                MPI_OK(MPI_Isend(b.p, 1000, MPI_BYTE, peer, TAG + 2, MPI_COMM_WORLD, &r[1]));
            complete(how, r);
            /* Request_free'd sends: their buffers stay until the receiver says. */
            char ack = 0;
            MPI_OK(MPI_Recv(&ack, 1, MPI_CHAR, peer, TAG + 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            drop(&a);
            drop(&b);
            continue;
        }
        char what[96];
        snprintf(what, sizeof what, "the big send completed by %s", cname[how]);
        recv_check(1, BIG, base, TAG + 1, what);
        snprintf(what, sizeof what, "the small send completed by %s", cname[how]);
        recv_check(HOST, 1000, base + 1, TAG + 2, what);
        char ack = 1;
        MPI_OK(MPI_Send(&ack, 1, MPI_CHAR, peer, TAG + 3, MPI_COMM_WORLD));
    }
    /* A derived datatype freed right after the Isend (MPI allows it). */
    MPI_Datatype quad;
    MPI_OK(MPI_Type_contiguous(4, MPI_INT, &quad));
    MPI_OK(MPI_Type_commit(&quad));
    if (rank == 0) {
        struct buf a = msg_buf(0, BIG, 300);
        MPI_Request r;
        MPI_OK(MPI_Isend(a.p, BIG / 16, quad, peer, TAG + 4, MPI_COMM_WORLD, &r));
        MPI_OK(MPI_Type_free(&quad));
        MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        drop(&a);
    } else {
        MPI_OK(MPI_Type_free(&quad));
        recv_check(0, BIG, 300, TAG + 4, "an Isend whose datatype was freed after the call");
    }
}

/* ---- deadlock: blocking calls post the deferred sends first --------------------------- */

enum { D_RECV, D_TEST, D_BARRIER, D_ALLREDUCE, D_SPLIT, D_PROBE, D_COUNT };
static const char *const dname[] = {"Recv", "a Test loop on an Irecv", "Barrier", "Allreduce",
                                    "Comm_split", "Probe"};

static void test_deadlock(void)
{
    for (int how = 0; how < D_COUNT; how++) {
        int base = 400 + 10 * how;
        char what[96];
        snprintf(what, sizeof what, "Isend, then %s on both ranks", dname[how]);
        struct buf a = msg_buf(rank, BIG, base + rank);
        MPI_Request r;
        MPI_OK(MPI_Isend(a.p, BIG, MPI_BYTE, peer, TAG + 5, MPI_COMM_WORLD, &r));
        if (how == D_RECV || how == D_TEST) {
            /* D_TEST: the Test that finds a pipelined message's envelope
             * receives its stream, blocking: the peer's must be posted. */
            recv_check_by(1 - rank, BIG, base + peer, TAG + 5, what, how == D_TEST);
        } else {
            /* Rank 1 receives first, then joins the blocking call; rank 0
             * blocks in it right away: it must have posted its send. */
            if (rank == 1)
                recv_check(0, BIG, base + peer, TAG + 5, what);
            if (how == D_BARRIER) {
                MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
            } else if (how == D_ALLREDUCE) {
                int one = 1, sum = 0;
                MPI_OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
                CHECK(sum == nranks, "%s: sum %d", what, sum);
            } else if (how == D_SPLIT) {
                MPI_Comm c;
                MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &c));
                MPI_OK(MPI_Comm_free(&c));
            } else if (rank == 0) { /* Probe: rank 1 sends only once it has rank 0's */
                MPI_Status st;
                char x;
                MPI_OK(MPI_Probe(peer, TAG + 6, MPI_COMM_WORLD, &st));
                MPI_OK(MPI_Recv(&x, 1, MPI_CHAR, peer, TAG + 6, MPI_COMM_WORLD, &st));
            } else {
                char x = 1;
                MPI_OK(MPI_Send(&x, 1, MPI_CHAR, peer, TAG + 6, MPI_COMM_WORLD));
            }
            if (rank == 0)
                recv_check(1, BIG, base + peer, TAG + 5, what);
        }
        MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        drop(&a);
    }
}

/* ---- errors: a bad rank or tag is reported by the Isend itself, as MPI does ------------ */

static void test_errors(void)
{
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    struct buf a = msg_buf(0, 1000, 500);
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = MPI_Isend(a.p, 1000, MPI_BYTE, nranks + 3, TAG, MPI_COMM_WORLD, &r);
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RANK, "Isend to rank %d: class %d, want MPI_ERR_RANK", nranks + 3, cls);
    r = MPI_REQUEST_NULL;
    rc = MPI_Isend(a.p, 1000, MPI_BYTE, peer, -7, MPI_COMM_WORLD, &r);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TAG, "Isend with tag -7: class %d, want MPI_ERR_TAG", cls);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    drop(&a);
}

/* ---- threads: a thread blocked in MPI while another sends (MPI_THREAD_MULTIPLE) -------- */

static void *blocked_recv(void *arg)
{
    int *got = arg;
    MPI_OK(MPI_Recv(got, 1, MPI_INT, peer, TAG + 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    return NULL;
}

/* Rank 0: a thread blocks in a Recv that rank 1 answers only after it got
 * rank 0's device Isend, which the main thread makes meanwhile and waits for
 * only after joining that thread. A deferred send would never be posted (no
 * later call of rank 0 would post it): under MPI_THREAD_MULTIPLE the shim
 * copies in the call. Run alone ("threads"), initialized for threads. */
static void test_threads(void)
{
    if (rank == 0) {
        int got = -1;
        pthread_t th;
        pthread_create(&th, NULL, blocked_recv, &got);
        struct timespec pause = {0, 50 * 1000 * 1000};
        nanosleep(&pause, NULL); /* let it block in MPI first */
        struct buf a = msg_buf(0, BIG, 600);
        MPI_Request r;
        MPI_OK(MPI_Isend(a.p, BIG, MPI_BYTE, peer, TAG + 7, MPI_COMM_WORLD, &r));
        pthread_join(th, NULL);
        MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(got == 7, "the blocked thread's message: %d", got);
        drop(&a);
    } else {
        recv_check(1, BIG, 600, TAG + 7, "a device Isend while another thread is blocked in MPI");
        int seven = 7;
        MPI_OK(MPI_Send(&seven, 1, MPI_INT, peer, TAG + 8, MPI_COMM_WORLD));
    }
}

int main(int argc, char **argv)
{
    int provided = MPI_THREAD_SINGLE;
    if (argc > 1 && strcmp(argv[1], "threads") == 0)
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    else
        MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    dev_prog_init(COLL_PROG);
    const char *only = argc > 1 ? argv[1] : "all";
    peer = 1 - rank;
    if (nranks != 2) {
        CHECK(0, "run with 2 ranks, not %d", nranks);
        return coll_prog_end();
    }
    MPI_PROG_RUN(only, order);
    MPI_PROG_RUN(only, complete);
    MPI_PROG_RUN(only, deadlock);
    MPI_PROG_RUN(only, errors);
    if (strcmp(only, "threads") == 0 && provided == MPI_THREAD_MULTIPLE)
        test_threads();
    return coll_prog_end();
}
