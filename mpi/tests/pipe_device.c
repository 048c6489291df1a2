/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pipelined device messages (docs/mpi.md, "Pipelined messages"), run under
 * LD_PRELOAD=libcucopy_mpi.so with CUCOPY_MPI_PIPELINE_KB and
 * CUCOPY_MPI_PIPELINE_CHUNK_KB set (mpirun -n 2 and -n 3; the fake driver
 * with FAKECUDA_DELAY_US, so that copies and transfers overlap). Ranks 0
 * and 1 exchange messages of sizes around and far above the threshold,
 * mixed with small ones on the same tag, on a communicator whose ranks are
 * not their world ranks: every size, both devices and the host on either
 * side, every blocking and nonblocking send and receive that pipelining
 * touches, every completion call, ANY_SOURCE/ANY_TAG, MPI_Get_count with
 * two datatypes, truncation (and the next message after it), Sendrecv and
 * Sendrecv_replace, Mprobe/Mrecv, a persistent receive, probes (the real
 * size, the order of the messages they held), and the deadlock
 * patterns (Isend then a blocking Recv on both ranks; Irecv, Send, Wait).
 * With -n 3, rank 2 never loads the driver (a host-only rank) and receives
 * pipelined messages from rank 0. Every byte is checked, guards included.
 *
 * The same program passes with pipelining off (the semantics are MPI's);
 * without the shim the first device send dies in MPI (the negative control).
 *
 * Prints "pipe_device: rank R: PASS" or "FAILED ..." lines; exit status 1 on
 * a failure. The test to run: the first argument ("all" without one).
 */
#define COLL_PROG "pipe_device"
#include "coll_prog.h"

static MPI_Comm pair = MPI_COMM_NULL; /* ranks 0 and 1, numbered the other way round */
static int me, peer;                  /* this rank and the other in pair */
static size_t T;                      /* the threshold, bytes */
static size_t C;                      /* the chunk, bytes */
static int pipelined;                 /* CUCOPY_MPI_PIPELINE_KB is set */
static int seed;

#define TAG 7

/* The sizes of the mixed sequences: small ones between those around the
 * threshold and far above it (not a multiple of the chunk). */
static size_t sizes[8];
static int nsizes;

static void set_sizes(void)
{
    size_t s[] = {100, T - 1, T, 8, T + 1, 10 * T + 7, 3 * C + 5, 40};
    nsizes = (int)(sizeof s / sizeof s[0]);
    memcpy(sizes, s, sizeof s);
}

static size_t kib_env(const char *name, size_t dflt)
{
    const char *v = getenv(name);
    size_t kb = v != NULL && *v != '\0' ? (size_t)strtoull(v, NULL, 10) : 0;
    return kb > 0 ? kb << 10 : dflt;
}

/* Bytes [0, n) of b expected (and, for a send buffer, written) as message @p s. */
static void expect_msg(struct buf *b, size_t n, int s)
{
    memset(b->want, OLD, b->bytes + 2 * GUARD);
    for (size_t i = 0; i < n; i++)
        b->want[GUARD + i] = (unsigned char)(s * 37 + i * 11 + (i >> 12) + 3);
}

static struct buf msg_buf(int dev, size_t cap, size_t n, int s)
{
    struct buf b = mk(dev, cap);
    expect_msg(&b, n, s);
    put(&b);
    return b;
}

/* Where the buffers of a sequence are, sender and receiver. */
static const int where[][2] = {{0, 1}, {1, 0}, {0, HOST}, {HOST, 1}, {1, 1}};
#define NWHERE (sizeof where / sizeof where[0])

static void check_status(const MPI_Status *st, size_t n, int src, int tag, const char *what)
{
    int bytes = -1, ints = -1;
    MPI_Get_count(st, MPI_BYTE, &bytes);
    MPI_Get_count(st, MPI_INT, &ints);
    CHECK(bytes == (int)n, "%s: MPI_Get_count(MPI_BYTE) %d, want %zu", what, bytes, n);
    int want_ints = n % sizeof(int) == 0 ? (int)(n / sizeof(int)) : MPI_UNDEFINED;
    CHECK(ints == want_ints, "%s: MPI_Get_count(MPI_INT) %d, want %d", what, ints, want_ints);
    CHECK(st->MPI_SOURCE == src, "%s: MPI_SOURCE %d, want %d", what, st->MPI_SOURCE, src);
    CHECK(st->MPI_TAG == tag, "%s: MPI_TAG %d, want %d", what, st->MPI_TAG, tag);
}

/* ---- blocking: every size on one tag, in order ------------------------------------ */

static void test_blocking(void)
{
    if (rank > 1)
        return;
    char what[160];
    for (size_t w = 0; w < NWHERE; w++) {
        for (int sender = 0; sender < 2; sender++) {
            int base = ++seed * 16;
            if (me == sender) {
                for (int i = 0; i < nsizes; i++) {
                    struct buf b = msg_buf(where[w][0], sizes[i], sizes[i], base + i);
                    if (i % 2)
                        MPI_OK(MPI_Ssend(b.p, (int)sizes[i], MPI_BYTE, peer, TAG, pair));
                    else
                        MPI_OK(MPI_Send(b.p, (int)sizes[i], MPI_BYTE, peer, TAG, pair));
                    drop(&b);
                }
                continue;
            }
            for (int i = 0; i < nsizes; i++) {
                /* Room for more than the message: nothing past it may change. */
                struct buf b = mk(where[w][1], sizes[i] + 100);
                MPI_Status st;
                int any = i % 3 == 1;
                MPI_OK(MPI_Recv(b.p, (int)sizes[i] + 100, MPI_BYTE, any ? MPI_ANY_SOURCE : peer,
                                any ? MPI_ANY_TAG : TAG, pair, &st));
                snprintf(what, sizeof what, "Recv%s of %zu B (dev %d -> dev %d)",
                         any ? "(ANY_SOURCE, ANY_TAG)" : "", sizes[i], where[w][0],
                         where[w][1]);
                check_status(&st, sizes[i], peer, TAG, what);
                expect_msg(&b, sizes[i], base + i);
                verify(&b, what);
                drop(&b);
            }
        }
    }
}

/* ---- nonblocking: every completion call ------------------------------------------- */

enum { C_WAIT, C_TEST, C_WAITALL, C_TESTALL, C_WAITANY, C_TESTANY, C_WAITSOME, C_TESTSOME,
       C_GET_STATUS, C_COUNT };
static const char *const cname[] = {"Wait",    "Test",     "Waitall",  "Testall",
                                    "Waitany", "Testany",  "Waitsome", "Testsome",
                                    "Request_get_status"};

/* Complete reqs[0..n) with completion call @p how; statuses in st[]. */
static void complete(int how, int n, MPI_Request reqs[], MPI_Status st[])
{
    int done = 0, flag = 0, idx = 0, out = 0, ids[16];
    MPI_Status tmp[16];
    switch (how) {
    case C_WAIT:
        for (int i = 0; i < n; i++)
            MPI_OK(MPI_Wait(&reqs[i], &st[i]));
        break;
    case C_TEST:
        for (int i = 0; i < n; i++)
            for (flag = 0; !flag;)
                MPI_OK(MPI_Test(&reqs[i], &flag, &st[i]));
        break;
    case C_WAITALL:
        MPI_OK(MPI_Waitall(n, reqs, st));
        break;
    case C_TESTALL:
        for (flag = 0; !flag;)
            MPI_OK(MPI_Testall(n, reqs, &flag, st));
        break;
    case C_WAITANY:
    case C_TESTANY:
        while (done < n) {
            flag = 1;
            if (how == C_WAITANY)
                MPI_OK(MPI_Waitany(n, reqs, &idx, &tmp[0]));
            else
                MPI_OK(MPI_Testany(n, reqs, &idx, &flag, &tmp[0]));
            if (flag && idx != MPI_UNDEFINED) {
                st[idx] = tmp[0];
                done++;
            }
        }
        break;
    case C_WAITSOME:
    case C_TESTSOME:
        while (done < n) {
            if (how == C_WAITSOME)
                MPI_OK(MPI_Waitsome(n, reqs, &out, ids, tmp));
            else
                MPI_OK(MPI_Testsome(n, reqs, &out, ids, tmp));
            for (int k = 0; out != MPI_UNDEFINED && k < out; k++) {
                st[ids[k]] = tmp[k];
                done++;
            }
        }
        break;
    case C_GET_STATUS:
        /* The Wait after it reports the same message (its status is checked). */
        for (int i = 0; i < n; i++) {
            for (flag = 0; !flag;)
                MPI_OK(MPI_Request_get_status(reqs[i], &flag, &tmp[0]));
            MPI_OK(MPI_Wait(&reqs[i], &st[i]));
            int a = -1, b = -2;
            MPI_Get_count(&tmp[0], MPI_BYTE, &a);
            MPI_Get_count(&st[i], MPI_BYTE, &b);
            CHECK(a == b, "Request_get_status counted %d bytes, the Wait after it %d", a, b);
        }
        break;
    }
}

static void test_nonblocking(void)
{
    if (rank > 1)
        return;
    char what[160];
    for (int how = 0; how < C_COUNT; how++) {
        int sender = how % 2, base = ++seed * 16;
        /* The receiving side's buffers: device 0, device 1 and the host in turn. */
        int rdev = how % 3 == 2 ? HOST : how % 2;
        struct buf b[8];
        MPI_Request reqs[8];
        MPI_Status st[8];
        for (int i = 0; i < nsizes; i++) {
            if (me == sender) {
                b[i] = msg_buf(i % 2, sizes[i], sizes[i], base + i);
                if (i % 3 == 2)
                    MPI_OK(MPI_Issend(b[i].p, (int)sizes[i], MPI_BYTE, peer, TAG, pair,
                                      &reqs[i]));
                else
                    MPI_OK(MPI_Isend(b[i].p, (int)sizes[i], MPI_BYTE, peer, TAG, pair,
                                     &reqs[i]));
            } else {
                b[i] = mk(rdev, sizes[i] + 64);
                MPI_OK(MPI_Irecv(b[i].p, (int)sizes[i] + 64, MPI_BYTE,
                                 i == 3 ? MPI_ANY_SOURCE : peer, i == 5 ? MPI_ANY_TAG : TAG,
                                 pair, &reqs[i]));
            }
        }
        if (me == sender) {
            MPI_OK(MPI_Waitall(nsizes, reqs, MPI_STATUSES_IGNORE));
        } else {
            complete(how, nsizes, reqs, st);
            for (int i = 0; i < nsizes; i++) {
                snprintf(what, sizeof what, "Irecv of %zu B into dev %d, completed by %s",
                         sizes[i], rdev, cname[how]);
                check_status(&st[i], sizes[i], peer, TAG, what);
                expect_msg(&b[i], sizes[i], base + i);
                verify(&b[i], what);
            }
        }
        for (int i = 0; i < nsizes; i++)
            drop(&b[i]);
    }
}

/* ---- truncation, then the next message ------------------------------------------------ */

/* Pipelining on only: without it, what a truncated receive delivers and
 * counts is the MPI's own (Open MPI 4.1: what fits, the message's size;
 * MPICH 4.0 over UCX: nothing, and an abort in MPI_Wait). */
static void test_truncate(void)
{
    if (rank > 1 || !pipelined)
        return;
    MPI_Comm ret;
    MPI_OK(MPI_Comm_dup(pair, &ret));
    MPI_OK(MPI_Comm_set_errhandler(ret, MPI_ERRORS_RETURN));
    size_t big = 10 * T + 7, room = T + 5;
    int base = ++seed * 16;
    for (int nb = 0; nb < 2; nb++) {
        if (me == 0) {
            struct buf b = msg_buf(0, big, big, base + nb);
            struct buf n = msg_buf(1, T + 1, T + 1, base + 8 + nb);
            MPI_OK(MPI_Send(b.p, (int)big, MPI_BYTE, peer, TAG, ret));
            MPI_OK(MPI_Send(n.p, (int)(T + 1), MPI_BYTE, peer, TAG, ret));
            drop(&b);
            drop(&n);
            continue;
        }
        struct buf b = mk(nb ? HOST : 1, room);
        struct buf n = mk(0, T + 1);
        MPI_Status st;
        int rc;
        if (nb) {
            MPI_Request r;
            MPI_OK(MPI_Irecv(b.p, (int)room, MPI_BYTE, peer, TAG, ret, &r));
            rc = MPI_Wait(&r, &st);
        } else {
            rc = MPI_Recv(b.p, (int)room, MPI_BYTE, peer, TAG, ret, &st);
        }
        int cls = MPI_SUCCESS;
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_TRUNCATE, "a message larger than the receive: class %d, want %d",
              cls, MPI_ERR_TRUNCATE);
        if (pipelined) /* the shim's error names the call */
            expect_error(rc, MPI_ERR_TRUNCATE, nb ? "MPI_Irecv" : "MPI_Recv",
                         "a pipelined message larger than the receive");
        /* The count of a truncated receive: the MPI's choice (Open MPI 4.1: the
         * message's size; the shim says the same). */
        int got = -1;
        MPI_Get_count(&st, MPI_BYTE, &got);
        CHECK(got == (int)room || got == (int)big,
              "truncated: MPI_Get_count %d, want the room %zu or the message's %zu", got, room,
              big);
        /* What fits is delivered, nothing past the room is touched. */
        expect_msg(&b, room, base + nb);
        verify(&b, nb ? "truncated Irecv (host)" : "truncated Recv (dev 1)");
        /* The rest of the stream was drained: the next message is the next one. */
        MPI_OK(MPI_Recv(n.p, (int)(T + 1), MPI_BYTE, peer, TAG, ret, &st));
        check_status(&st, T + 1, peer, TAG, "the message after a truncated one");
        expect_msg(&n, T + 1, base + 8 + nb);
        verify(&n, "the message after a truncated one");
        drop(&b);
        drop(&n);
    }
    MPI_OK(MPI_Comm_free(&ret));
}

/* ---- Sendrecv, Sendrecv_replace, Mprobe/Mrecv, a persistent receive -------------------- */

static void test_combined(void)
{
    if (rank > 1)
        return;
    size_t big = 10 * T + 7;
    int base = ++seed * 16;
    MPI_Status st;
    if (me == 0) {
        /* Each of rank 1's receives gets a pipelined message from here. */
        struct buf b = msg_buf(0, big, big, base);
        struct buf mine = mk(1, big);
        MPI_OK(MPI_Send(b.p, (int)big, MPI_BYTE, peer, TAG, pair)); /* -> Sendrecv_replace */
        MPI_OK(MPI_Recv(mine.p, (int)big, MPI_BYTE, peer, TAG, pair, &st));
        expect_msg(&mine, big, base + 1);
        verify(&mine, "the send half of Sendrecv_replace");
        for (int k = 2; k < 8; k++) {
            expect_msg(&b, big, base + k);
            put(&b);
            MPI_OK(MPI_Send(b.p, (int)big, MPI_BYTE, peer, TAG + k, pair));
            if (k == 4 || k == 5) { /* the persistent receives' second round */
                struct buf small = msg_buf(0, 100, 100, base + 10 + k);
                MPI_OK(MPI_Send(small.p, 100, MPI_BYTE, peer, TAG + k, pair));
                drop(&small);
            }
        }
        char ack = 0;
        MPI_OK(MPI_Recv(&ack, 1, MPI_CHAR, peer, TAG, pair, MPI_STATUS_IGNORE));
        drop(&b);
        drop(&mine);
        return;
    }
    /* Sendrecv_replace on device 1: sends its own bytes, receives the pipelined ones. */
    struct buf r = msg_buf(1, big, big, base + 1);
    MPI_OK(MPI_Sendrecv_replace(r.p, (int)big, MPI_BYTE, peer, TAG, peer, TAG, pair, &st));
    check_status(&st, big, peer, TAG, "Sendrecv_replace");
    expect_msg(&r, big, base);
    verify(&r, "Sendrecv_replace (dev 1)");
    /* Sendrecv into the host, sending nothing. */
    struct buf h = mk(HOST, big + 10);
    MPI_OK(MPI_Sendrecv(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, h.p, (int)big + 10, MPI_BYTE, peer,
                        TAG + 2, pair, &st));
    check_status(&st, big, peer, TAG + 2, "Sendrecv");
    expect_msg(&h, big, base + 2);
    verify(&h, "Sendrecv (host)");
    /* Mprobe + Mrecv into device 0; the probe counts the message's bytes. */
    struct buf m = mk(0, big);
    MPI_Message msg;
    MPI_OK(MPI_Mprobe(peer, TAG + 3, pair, &msg, &st));
    check_status(&st, big, peer, TAG + 3, "Mprobe");
    MPI_OK(MPI_Mrecv(m.p, (int)big, MPI_BYTE, &msg, &st));
    check_status(&st, big, peer, TAG + 3, "Mrecv");
    expect_msg(&m, big, base + 3);
    verify(&m, "Mrecv (dev 0)");
    /* Persistent receives, on device 1 and on the host, each started twice
     * (the second time by a message that is not pipelined). */
    for (int k = 4; k < 6; k++) {
        struct buf p = mk(k == 4 ? 1 : HOST, big);
        MPI_Request pr;
        MPI_OK(MPI_Recv_init(p.p, (int)big, MPI_BYTE, peer, MPI_ANY_TAG, pair, &pr));
        for (int round = 0; round < 2; round++) {
            size_t n = round ? 100 : big;
            MPI_OK(MPI_Start(&pr));
            MPI_OK(MPI_Wait(&pr, &st));
            check_status(&st, n, peer, TAG + k, "Recv_init + Start");
            if (round == 0) {
                expect_msg(&p, big, base + k);
            } else {
                struct buf small = mk(HOST, 100);
                expect_msg(&small, 100, base + 10 + k);
                memcpy(want_at(&p, 0), want_at(&small, 0), 100);
                drop(&small);
            }
            verify(&p, k == 4 ? "Recv_init + Start (dev 1)" : "Recv_init + Start (host)");
        }
        MPI_OK(MPI_Request_free(&pr));
        drop(&p);
    }
    /* A host receive whose datatype has holes: blocks of 1000 bytes every 1100
     * (the envelope is read with MPI_Pack, the chunks scattered with
     * shim_pipe_scatter); the holes keep their bytes. */
    MPI_Datatype vec;
    int blocks = (int)((big + 999) / 1000) + 1;
    MPI_OK(MPI_Type_vector(blocks, 1000, 1100, MPI_BYTE, &vec));
    MPI_OK(MPI_Type_commit(&vec));
    struct buf v = mk(HOST, (size_t)blocks * 1100);
    MPI_OK(MPI_Recv(v.p, 1, vec, peer, TAG + 6, pair, &st));
    int got = -1;
    MPI_Get_elements(&st, MPI_BYTE, &got);
    CHECK(got == (int)big, "Recv into a vector type: MPI_Get_elements %d, want %zu", got, big);
    struct buf flat = mk(HOST, big);
    expect_msg(&flat, big, base + 6);
    for (size_t i = 0; i < big; i++)
        v.want[GUARD + (i / 1000) * 1100 + i % 1000] = flat.want[GUARD + i];
    verify(&v, "Recv into a vector type (host)");
    /* The same into device memory: the datatype staging packs it (the stream
     * lands in its packed staging memory, then is scattered to the type map);
     * the holes keep their bytes on the device. */
    struct buf dv = mk(1, (size_t)blocks * 1100);
    MPI_OK(MPI_Recv(dv.p, 1, vec, peer, TAG + 7, pair, &st));
    got = -1;
    MPI_Get_elements(&st, MPI_BYTE, &got);
    CHECK(got == (int)big, "Recv into a vector type on device 1: MPI_Get_elements %d, want %zu",
          got, big);
    expect_msg(&flat, big, base + 7);
    for (size_t i = 0; i < big; i++)
        dv.want[GUARD + (i / 1000) * 1100 + i % 1000] = flat.want[GUARD + i];
    verify(&dv, "Recv into a vector type (device 1)");
    drop(&dv);
    drop(&flat);
    drop(&v);
    MPI_OK(MPI_Type_free(&vec));
    char ack = 1;
    MPI_OK(MPI_Send(&ack, 1, MPI_CHAR, peer, TAG, pair));
    drop(&r);
    drop(&h);
    drop(&m);
}

/* ---- probes: the message's real size, and the order of what they held ----------------- */

/* Rank 0 sends, on one communicator: a small message, a pipelined one, a
 * 40-byte message that is not an envelope (both on one tag), then pipelined
 * ones for each kind of probe. Rank 1 probes each with a specific tag
 * first, so that the small one before it must stay first for an ANY_TAG
 * receive, then receives it into device memory, the host, with Recv,
 * Irecv, Mrecv, Imrecv and Sendrecv; every probe's count is the message's. */
static void test_probes(void)
{
    if (rank > 1)
        return;
    size_t big = 10 * T + 7;
    int base = ++seed * 16;
    const size_t n[] = {100, big, 40, big, big, big, big};
    const int tags[] = {TAG + 20, TAG + 21, TAG + 21, TAG + 22, TAG + 23, TAG + 24, TAG + 25};
    const int nmsg = (int)(sizeof n / sizeof n[0]);
    MPI_Status st;
    if (me == 0) {
        for (int i = 0; i < nmsg; i++) {
            struct buf b = msg_buf(i % 2, n[i], n[i], base + i);
            MPI_OK(MPI_Send(b.p, (int)n[i], MPI_BYTE, peer, tags[i], pair));
            drop(&b);
        }
        char ack = 0;
        MPI_OK(MPI_Recv(&ack, 1, MPI_CHAR, peer, TAG, pair, MPI_STATUS_IGNORE));
        return;
    }
    char what[160];
    int flag = 0;
    /* Probe the pipelined one by its tag: the small one before it is held. */
    MPI_OK(MPI_Probe(peer, tags[1], pair, &st));
    check_status(&st, big, peer, tags[1], "Probe of a pipelined message");
    flag = 0;
    MPI_OK(MPI_Iprobe(MPI_ANY_SOURCE, tags[1], pair, &flag, &st));
    CHECK(flag, "Iprobe after Probe: flag 0");
    check_status(&st, big, peer, tags[1], "Iprobe of the same message");
    /* ANY_TAG: the small message, sent first, comes first. */
    struct buf s0 = mk(HOST, 200);
    MPI_OK(MPI_Recv(s0.p, 200, MPI_BYTE, peer, MPI_ANY_TAG, pair, &st));
    check_status(&st, 100, peer, tags[0], "Recv(ANY_TAG) of the message before the probed one");
    expect_msg(&s0, 100, base + 0);
    verify(&s0, "Recv(ANY_TAG) of the message before the probed one");
    /* The probed one, into device 0. */
    struct buf b1 = mk(0, big);
    MPI_OK(MPI_Recv(b1.p, (int)big, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, pair, &st));
    check_status(&st, big, peer, tags[1], "Recv of the probed pipelined message");
    expect_msg(&b1, big, base + 1);
    verify(&b1, "Recv of the probed pipelined message (dev 0)");
    /* A 40-byte message that is not an envelope: probed, held, received. */
    MPI_OK(MPI_Probe(peer, MPI_ANY_TAG, pair, &st));
    check_status(&st, 40, peer, tags[2], "Probe of a 40-byte message");
    struct buf b2 = mk(1, 64);
    MPI_OK(MPI_Recv(b2.p, 64, MPI_BYTE, peer, tags[2], pair, &st));
    check_status(&st, 40, peer, tags[2], "Recv of a probed 40-byte message");
    expect_msg(&b2, 40, base + 2);
    verify(&b2, "Recv of a probed 40-byte message (dev 1)");
    /* Iprobe until it comes, then Irecv into device 1. */
    for (flag = 0; !flag;)
        MPI_OK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, pair, &flag, &st));
    check_status(&st, big, peer, tags[3], "Iprobe(ANY_SOURCE, ANY_TAG) of a pipelined message");
    struct buf b3 = mk(1, big + 10);
    MPI_Request req;
    MPI_OK(MPI_Irecv(b3.p, (int)big + 10, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, pair, &req));
    MPI_OK(MPI_Wait(&req, &st));
    check_status(&st, big, peer, tags[3], "Irecv + Wait of a probed pipelined message");
    expect_msg(&b3, big, base + 3);
    verify(&b3, "Irecv of a probed pipelined message (dev 1)");
    /* Improbe until it comes, Imrecv into the host. */
    MPI_Message msg;
    for (flag = 0; !flag;)
        MPI_OK(MPI_Improbe(peer, tags[4], pair, &flag, &msg, &st));
    check_status(&st, big, peer, tags[4], "Improbe of a pipelined message");
    struct buf b4 = mk(HOST, big);
    MPI_OK(MPI_Imrecv(b4.p, (int)big, MPI_BYTE, &msg, &req));
    MPI_OK(MPI_Wait(&req, &st));
    check_status(&st, big, peer, tags[4], "Imrecv + Wait of a probed pipelined message");
    expect_msg(&b4, big, base + 4);
    verify(&b4, "Imrecv of a probed pipelined message (host)");
    /* Mprobe, Mrecv into device 0. */
    MPI_OK(MPI_Mprobe(peer, MPI_ANY_TAG, pair, &msg, &st));
    check_status(&st, big, peer, tags[5], "Mprobe of a pipelined message");
    struct buf b5 = mk(0, big);
    MPI_OK(MPI_Mrecv(b5.p, (int)big, MPI_BYTE, &msg, &st));
    check_status(&st, big, peer, tags[5], "Mrecv of a probed pipelined message");
    expect_msg(&b5, big, base + 5);
    verify(&b5, "Mrecv of a probed pipelined message (dev 0)");
    /* Probe, then Sendrecv receiving it into device 1. */
    MPI_OK(MPI_Probe(peer, tags[6], pair, &st));
    check_status(&st, big, peer, tags[6], "Probe before Sendrecv");
    struct buf b6 = mk(1, big);
    MPI_OK(MPI_Sendrecv(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, b6.p, (int)big, MPI_BYTE, peer,
                        tags[6], pair, &st));
    snprintf(what, sizeof what, "Sendrecv of a probed pipelined message");
    check_status(&st, big, peer, tags[6], what);
    expect_msg(&b6, big, base + 6);
    verify(&b6, "Sendrecv of a probed pipelined message (dev 1)");
    flag = 1;
    MPI_OK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, pair, &flag, &st));
    CHECK(!flag, "a message left after the probes' test (tag %d)", st.MPI_TAG);
    char ack = 1;
    MPI_OK(MPI_Send(&ack, 1, MPI_CHAR, peer, TAG, pair));
    struct buf *all[] = {&s0, &b1, &b2, &b3, &b4, &b5, &b6};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        drop(all[i]);
}

/* ---- the large-count forms (an MPI-4 library) ------------------------------------------ */

static void test_large_count(void)
{
#if MPI_VERSION >= 4
    if (rank > 1)
        return;
    MPI_Count big = (MPI_Count)(10 * T + 7);
    int base = ++seed * 16;
    MPI_Status st;
    if (me == 0) {
        struct buf b = msg_buf(1, (size_t)big, (size_t)big, base);
        MPI_Request q;
        MPI_OK(MPI_Send_c(b.p, big, MPI_BYTE, peer, TAG, pair));
        MPI_OK(MPI_Isend_c(b.p, big, MPI_BYTE, peer, TAG, pair, &q));
        MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        drop(&b);
        return;
    }
    for (int k = 0; k < 2; k++) {
        struct buf r = mk(k, (size_t)big + 8);
        if (k) {
            MPI_Request q;
            MPI_OK(MPI_Irecv_c(r.p, big + 8, MPI_BYTE, peer, TAG, pair, &q));
            MPI_OK(MPI_Wait(&q, &st));
        } else {
            MPI_OK(MPI_Recv_c(r.p, big + 8, MPI_BYTE, peer, TAG, pair, &st));
        }
        MPI_Count n = -1;
        MPI_OK(MPI_Get_count_c(&st, MPI_BYTE, &n));
        CHECK(n == big, "%s: MPI_Get_count_c %lld, want %lld", k ? "Irecv_c" : "Recv_c",
              (long long)n, (long long)big);
        expect_msg(&r, (size_t)big, base);
        verify(&r, k ? "Irecv_c (dev 1)" : "Recv_c (dev 0)");
        drop(&r);
    }
#endif
}

/* ---- the patterns that must not deadlock ------------------------------------------------ */

static void test_deadlock(void)
{
    if (rank > 1)
        return;
    size_t big = 10 * T + 7;
    int base = ++seed * 16;
    MPI_Status st;
    /* Isend, then a blocking Recv, on both ranks at once. */
    struct buf s = msg_buf(me, big, big, base + me);
    struct buf r = mk(1 - me, big);
    MPI_Request q;
    MPI_OK(MPI_Isend(s.p, (int)big, MPI_BYTE, peer, TAG, pair, &q));
    MPI_OK(MPI_Recv(r.p, (int)big, MPI_BYTE, peer, TAG, pair, &st));
    MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    check_status(&st, big, peer, TAG, "Isend + Recv on both ranks");
    expect_msg(&r, big, base + peer);
    verify(&r, "Isend + Recv on both ranks");
    /* Irecv, then a blocking Send, then Wait, on both ranks at once. */
    expect_msg(&s, big, base + 2 + me);
    put(&s);
    MPI_OK(MPI_Irecv(r.p, (int)big, MPI_BYTE, peer, TAG, pair, &q));
    MPI_OK(MPI_Send(s.p, (int)big, MPI_BYTE, peer, TAG, pair));
    MPI_OK(MPI_Wait(&q, &st));
    check_status(&st, big, peer, TAG, "Irecv + Send + Wait on both ranks");
    expect_msg(&r, big, base + 2 + peer);
    verify(&r, "Irecv + Send + Wait on both ranks");
    drop(&s);
    drop(&r);
}

/* ---- a datatype that is one block of memory but not in address order -------------- */

/* The type map of "swap": the second half of the buffer, then the first (an
 * hindexed type of two blocks, descending): size == true extent, so it is
 * one contiguous block of memory, but MPI sends its bytes in type-map order,
 * not address order. The message byte i is at buffer byte (i + half) % big
 * on either side. */
static void expect_swapped(struct buf *b, size_t big, int s)
{
    size_t half = big / 2;
    memset(b->want, OLD, b->bytes + 2 * GUARD);
    for (size_t j = 0; j < big; j++) {
        size_t i = (j + half) % big;
        b->want[GUARD + j] = (unsigned char)(s * 37 + i * 11 + (i >> 12) + 3);
    }
}

static void test_permuted(void)
{
    if (rank > 1)
        return;
    size_t big = 4 * T, half = big / 2;
    MPI_Datatype swap;
    int bl[2] = {(int)half, (int)half};
    MPI_Aint disp[2] = {(MPI_Aint)half, 0};
    MPI_OK(MPI_Type_create_hindexed(2, bl, disp, MPI_BYTE, &swap));
    MPI_OK(MPI_Type_commit(&swap));
    char what[160];
    for (size_t w = 0; w < NWHERE; w++) {
        for (int swapped_send = 0; swapped_send < 2; swapped_send++) {
            int base = ++seed * 16;
            MPI_Datatype st = swapped_send ? swap : MPI_BYTE, rt = swapped_send ? MPI_BYTE : swap;
            int sc = swapped_send ? 1 : (int)big, rc = swapped_send ? (int)big : 1;
            if (me == 0) {
                /* The message's bytes in type-map order: msg_buf's pattern when sent
                 * as bytes, swapped in the buffer when sent with swap. */
                struct buf b = mk(where[w][0], big);
                if (swapped_send)
                    expect_swapped(&b, big, base);
                else
                    expect_msg(&b, big, base);
                put(&b);
                MPI_OK(MPI_Send(b.p, sc, st, peer, TAG, pair));
                drop(&b);
                continue;
            }
            struct buf b = mk(where[w][1], big);
            MPI_Status sts;
            MPI_OK(MPI_Recv(b.p, rc, rt, peer, TAG, pair, &sts));
            snprintf(what, sizeof what, "%s of %zu B (dev %d -> dev %d)",
                     swapped_send ? "a swapped send into bytes" : "bytes into a swapped receive",
                     big, where[w][0], where[w][1]);
            check_status(&sts, big, peer, TAG, what);
            if (swapped_send)
                expect_msg(&b, big, base);
            else
                expect_swapped(&b, big, base);
            verify(&b, what);
            drop(&b);
        }
    }
    MPI_OK(MPI_Type_free(&swap));
}

/* ---- a host-only rank (rank 2 of 3) receives pipelined messages from rank 0 ----------- */

static void test_host_only(void)
{
    if (nranks < 3 || (rank != 0 && rank != 2))
        return;
    size_t big = 10 * T + 7;
    int base = 4096; /* rank 2 ran no other test: its seed is not rank 0's */
    if (rank == 0) {
        struct buf b = msg_buf(1, big, big, base);
        MPI_Request q;
        MPI_OK(MPI_Send(b.p, (int)big, MPI_BYTE, 2, TAG, MPI_COMM_WORLD));
        MPI_OK(MPI_Send(b.p, 8, MPI_BYTE, 2, TAG, MPI_COMM_WORLD));
        MPI_OK(MPI_Isend(b.p, (int)big, MPI_BYTE, 2, TAG, MPI_COMM_WORLD, &q));
        MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Ssend(b.p, (int)big, MPI_BYTE, 2, TAG, MPI_COMM_WORLD));
        drop(&b);
        return;
    }
    const char *what[] = {"Recv", "Recv (small)", "Irecv + Wait", "Recv of an Ssend"};
    size_t n[] = {big, 8, big, big};
    for (int k = 0; k < 4; k++) {
        struct buf h = mk(HOST, big + 32);
        MPI_Status st;
        if (k == 2) {
            MPI_Request q;
            MPI_OK(MPI_Irecv(h.p, (int)big + 32, MPI_BYTE, 0, TAG, MPI_COMM_WORLD, &q));
            MPI_OK(MPI_Wait(&q, &st));
        } else {
            MPI_OK(MPI_Recv(h.p, (int)big + 32, MPI_BYTE, MPI_ANY_SOURCE, TAG, MPI_COMM_WORLD,
                            &st));
        }
        check_status(&st, n[k], 0, TAG, what[k]);
        expect_msg(&h, n[k], base);
        verify(&h, what[k]);
        drop(&h);
    }
    CHECK(mpi_prog_mapped("libcuda") == 0, "the host-only rank mapped a libcuda");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (rank < 2)
        dev_prog_init(COLL_PROG); /* rank 2 never loads a driver */
    const char *only = argc > 1 ? argv[1] : "all";
    pipelined = kib_env("CUCOPY_MPI_PIPELINE_KB", 0) != 0;
    T = kib_env("CUCOPY_MPI_PIPELINE_KB", 64 << 10);
    C = kib_env("CUCOPY_MPI_PIPELINE_CHUNK_KB", 1024 << 10);
    set_sizes();
    /* Ranks 0 and 1, numbered the other way round (world rank 0 is pair rank 1). */
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, -rank, &pair));
    if (pair != MPI_COMM_NULL) {
        MPI_Comm_rank(pair, &me);
        peer = 1 - me;
    }
    MPI_PROG_RUN(only, blocking);
    MPI_PROG_RUN(only, nonblocking);
    MPI_PROG_RUN(only, truncate);
    MPI_PROG_RUN(only, combined);
    MPI_PROG_RUN(only, probes);
    MPI_PROG_RUN(only, large_count);
    MPI_PROG_RUN(only, deadlock);
    MPI_PROG_RUN(only, host_only);
    MPI_PROG_RUN(only, permuted);
    if (pair != MPI_COMM_NULL)
        MPI_Comm_free(&pair);
    return coll_prog_end();
}
