/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One sick context (brief §4): a sticky error in one CUDA context (e.g.
 * CUDA_ERROR_ILLEGAL_ADDRESS after a faulting kernel) fails that context's
 * outstanding and later operations with a clear status; operations on the
 * other devices complete normally.
 *  - zcopies in flight on device 0 and device 1 (and a flush registered
 *    before the error); device 0's primary context gets a sticky error the
 *    way a real program gets one: a kernel that stores to address 0
 *    (make_sick: cuModuleLoadData of a PTX text, cuLaunchKernel on a stream
 *    of that context, cuStreamSynchronize reports CUDA_ERROR_ILLEGAL_ADDRESS).
 *    The fake driver runs no code but treats a kernel named cucopy_fault* as
 *    one that faults (tests/fakecuda/fakecuda.h), so the test is the same on
 *    both drivers;
 *  - progress: every device-0 operation completes exactly once, with
 *    CUCOPY_ERR_CUDA (on a real driver a piece that finished before the
 *    fault may complete with OK instead: the kernel runs next to the copies,
 *    not after them), every device-1 operation once with OK and its data;
 *    the flush completes;
 *  - later operations on device 0 (put/get, short/zcopy, device 0 -> device
 *    1) fail with CUCOPY_ERR_CUDA, their completion untouched, and
 *    cucopy_last_error() naming the operation, the driver call and the CUDA
 *    error; later operations on device 1 and host copies still work;
 *  - the same again with the event-fd protocol (arm / poll / progress) while
 *    the sick context has work queued: every completion arrives, no hang;
 *  - flush completes, iface_close returns OK and releases every stream and
 *    event (the driver refuses to destroy a sick context's objects; the
 *    context's reset frees them), the context is destroyed; the caller's
 *    current context is never changed; no driver misuse (fake driver).
 * Each round runs in its own process: on the real driver (580, 2x H200) the
 * sticky error reached device 1's context too and no reset brought the
 * process's CUDA back (as the CUDA docs say: restart the process). When the
 * driver fails device 1 as well (asked of the driver directly), the round
 * checks only that cucopy reports every device-1 failure exactly once and
 * clearly. Other processes, e.g. the tests after this one, never see it.
 */
#define _GNU_SOURCE
#include "calls.h"

#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NCH 4
#define TIMEOUT_S 60.0
#define SLOW_US 100000 /* per stream operation while work must stay in flight */

static cucopy_context_h cctx;
static size_t len; /* bytes per piece */
static unsigned base_delay_us;
static struct tc_buf host_a, host_b;

static void *ptr(const struct tc_buf *b, size_t off)
{
    return (void *)(uintptr_t)(b->dptr + off);
}


/* A kernel that stores to address 0 (PTX ISA 6.0, sm_50: every driver JIT-
 * compiles it for its GPU). */
static const char fault_ptx[] = ".version 6.0\n"
                                ".target sm_50\n"
                                ".address_size 64\n"
                                ".visible .entry cucopy_fault()\n"
                                "{\n"
                                "    .reg .u64 %rd<2>;\n"
                                "    .reg .u32 %r<2>;\n"
                                "    mov.u64 %rd1, 0;\n"
                                "    mov.u32 %r1, 1;\n"
                                "    st.global.u32 [%rd1], %r1;\n"
                                "    ret;\n"
                                "}\n";

/* The faulting kernel, loaded into a context, and a stream of that context
 * to launch it on. */
struct sick {
    cdContext ctx;
    struct CUmod_st *mod;
    struct CUfunc_st *fn;
    cdStream stream;
};

/* Loads the kernel in @p ctx (the JIT compilation happens here, before any
 * copy is in flight). */
static void sick_prepare(struct sick *k, cdContext ctx)
{
    memset(k, 0, sizeof(*k));
    k->ctx = ctx;
    tc_push(ctx);
    TD_CHECK(td.cuModuleLoadData(&k->mod, fault_ptx));
    TD_CHECK(td.cuModuleGetFunction(&k->fn, k->mod, "cucopy_fault"));
    TD_CHECK(td.cuStreamCreate(&k->stream, CD_STREAM_NON_BLOCKING));
    tc_pop(ctx);
}

/* On a context with a sticky error a release may report the error (the real
 * driver's choice); the fake documents success. */
static void sick_release_status(cdResult r, const char *what)
{
    CHECKF(r == CD_SUCCESS || (!td.is_fake && r == CD_ERROR_ILLEGAL_ADDRESS),
           "%s on the sick context returned %s (%u)", what, testdrv_error_name(r), r);
}

/* Makes the context sick on any driver: launch the kernel, synchronize (the
 * fault shows there: CUDA_ERROR_ILLEGAL_ADDRESS), release the stream and the
 * module. The context has the sticky error from then on. */
static void make_sick(struct sick *k)
{
    tc_push(k->ctx);
    TD_CHECK(td.cuLaunchKernel(k->fn, 1, 1, 1, 1, 1, 1, 0, k->stream, NULL, NULL));
    cdResult r = td.cuStreamSynchronize(k->stream);
    if (r != CD_ERROR_ILLEGAL_ADDRESS)
        tc_fatal(__FILE__, __LINE__,
                 "the kernel storing to address 0 did not make the context sick: "
                 "cuStreamSynchronize returned %s (%u), expected CUDA_ERROR_ILLEGAL_ADDRESS",
                 testdrv_error_name(r), r);
    /* Sticky: asking again reports it again. */
    r = td.cuStreamQuery(k->stream);
    CHECKF(r == CD_ERROR_ILLEGAL_ADDRESS, "cuStreamQuery after the fault returned %s (%u)",
           testdrv_error_name(r), r);
    sick_release_status(td.cuStreamDestroy(k->stream), "cuStreamDestroy");
    sick_release_status(td.cuModuleUnload(k->mod), "cuModuleUnload");
    tc_pop(k->ctx);
    k->stream = NULL;
    k->mod = NULL;
    k->fn = NULL;
}


/* NCH put_zcopy pieces src -> dst, each with its completion. */
struct flight {
    struct tc_comp c[NCH];
    int st[NCH];
};

static void issue_flight(cucopy_ep_h ep, const struct tc_buf *src, const struct tc_buf *dst,
                         struct flight *f, unsigned seed)
{
    const unsigned char *data = tc_pattern(NCH * len) + seed;
    tc_buf_write(src, 0, data, NCH * len);
    tc_buf_set(dst, 0, 0x5a, NCH * len);
    for (int i = 0; i < NCH; i++) {
        cucopy_iov_t iov = {ptr(src, i * len), len};
        tc_comp_init(&f->c[i], 1);
        f->st[i] = TC_CALL(cucopy_ep_put_zcopy(ep, &iov, 1, tc_buf_addr(dst, i * len), &f->c[i].comp));
        CHECKF(f->st[i] == CUCOPY_INPROGRESS, "put_zcopy piece %d returned %s: %s", i,
               tc_status_name(f->st[i]), cucopy_last_error());
    }
}

static int flight_pending(const struct flight *f)
{
    int n = 0;
    for (int i = 0; i < NCH; i++)
        n += f->st[i] == CUCOPY_INPROGRESS && f->c[i].fired == 0;
    return n;
}

/* Device 0's pieces in flight at the fault: each completes exactly once,
 * with CUCOPY_ERR_CUDA; on a real driver a piece may have finished before the
 * kernel faulted (OK) or fail with another negative status. */
static void flight_check_sick(const struct flight *f, const char *what)
{
    int ok = 0, failed = 0;
    for (int i = 0; i < NCH; i++) {
        if (f->st[i] != CUCOPY_INPROGRESS)
            continue;
        int s = f->c[i].comp.status;
        CHECKF(f->c[i].fired == 1, "%s: piece %d fired %d time(s)", what, i, f->c[i].fired);
        if (td.is_fake)
            CHECKF(s == CUCOPY_ERR_CUDA, "%s: piece %d completed with %s, expected %s", what, i,
                   tc_status_name(s), tc_status_name(CUCOPY_ERR_CUDA));
        else
            CHECKF(s == CUCOPY_OK || s < 0,
                   "%s: piece %d completed with %s, expected OK or an error", what, i,
                   tc_status_name(s));
        ok += s == CUCOPY_OK;
        failed += s < 0;
    }
    printf("test_sick_context: %s: %d piece(s) in flight at the fault completed OK, %d failed\n",
           what, ok, failed);
}

static void flight_check(const struct flight *f, int want, const char *what)
{
    for (int i = 0; i < NCH; i++) {
        if (f->st[i] != CUCOPY_INPROGRESS)
            continue;
        CHECKF(f->c[i].fired == 1, "%s: piece %d fired %d time(s)", what, i, f->c[i].fired);
        CHECKF(f->c[i].comp.status == want, "%s: piece %d completed with %s, expected %s", what,
               i, tc_status_name(f->c[i].comp.status), tc_status_name(want));
    }
}

static void check_data(const struct tc_buf *dst, unsigned seed, const char *what)
{
    unsigned char *back = malloc(NCH * len);
    REQUIRE(back != NULL);
    tc_buf_read(dst, 0, back, NCH * len);
    CHECKF(memcmp(back, tc_pattern(NCH * len) + seed, NCH * len) == 0, "%s: data differs", what);
    free(back);
}

/* The status of a failing call is CUDA and last_error names the op, a cu*
 * call and the sticky error. */
static void check_sick(int s, const char *op, const char *what)
{
    const char *e = cucopy_last_error();
    CHECKF(s == CUCOPY_ERR_CUDA, "%s on the sick context returned %s (expected CUCOPY_ERR_CUDA); "
                                 "last error \"%s\"",
           what, tc_status_name(s), e);
    if (s < 0) {
        CHECKF(strstr(e, op) != NULL, "%s: last error \"%s\" does not name the operation %s",
               what, e, op);
        CHECKF(strstr(e, "cu") != NULL && strstr(e, "CUDA_ERROR_ILLEGAL_ADDRESS") != NULL,
               "%s: last error \"%s\" does not name the driver call and CUDA_ERROR_ILLEGAL_ADDRESS",
               what, e);
    }
}

/* Fake driver: keep the copies in flight while the kernel faults. */
static void slow(int on)
{
    if (tc_fake.set_delay_us != NULL)
        tc_fake.set_delay_us(on ? SLOW_US : base_delay_us);
}

/*
 * Whether the driver kept device 1 healthy after device 0's fault, asked of
 * the driver itself (no cucopy involved). Driver 580 on 2x H200 (NVLink,
 * peer access enabled between the two contexts) was seen failing device 1's
 * context with CUDA_ERROR_ILLEGAL_ADDRESS too: then nothing a library does
 * can keep device 1 going, and the round only checks that cucopy reports
 * every failure exactly once and clearly.
 */
static int device1_healthy(cdContext p1, struct tc_buf *scratch)
{
    tc_push(p1);
    cdResult r = td.cuMemsetD8(scratch->dptr, 0, 1);
    if (r == CD_SUCCESS)
        r = td.cuCtxSynchronize();
    tc_pop(p1);
    if (r != CD_SUCCESS)
        printf("test_sick_context: NOTE: after device 0's fault the driver fails device 1 too "
               "(cuMemsetD8/cuCtxSynchronize there: %s): device 1 cannot go on, whatever cucopy "
               "does; only exactly-once, clear failure reporting is checked for it\n",
               testdrv_error_name(r));
    return r == CD_SUCCESS;
}

/* Run one round. use_arm: wait with the event-fd protocol instead of a
 * progress loop. */
static void round_sick(int use_arm)
{
    const char *phase = use_arm ? "event-fd protocol" : "progress";
    long v0 = tc_violations();
    cdContext p0 = tc_primary_retain(0);
    cdContext p1 = tc_primary_retain(1);
    struct tc_buf s0, t0, s1, t1, x1;
    tc_buf_alloc_in(&s0, p0, NCH * len);
    tc_buf_alloc_in(&t0, p0, NCH * len);
    tc_buf_alloc_in(&s1, p1, NCH * len);
    tc_buf_alloc_in(&t1, p1, NCH * len);
    tc_buf_alloc_in(&x1, p1, NCH * len);
    struct sick sk;
    sick_prepare(&sk, p0);
    cucopy_iface_h iface;
    cucopy_ep_h ep;
    REQUIRE(TC_CALL(cucopy_iface_open(cctx, NULL, &iface)) == CUCOPY_OK);
    REQUIRE(TC_CALL(cucopy_ep_create(iface, &ep)) == CUCOPY_OK);
    int fd = -1;
    if (use_arm)
        CHECK_STATUS(TC_CALL(cucopy_iface_event_fd(iface, &fd)), CUCOPY_OK);
    /* Resources exist on both devices before the error. */
    tc_copy_all_ways(iface, ep, &host_a, &s0, len, "before: host -> device 0");
    tc_copy_all_ways(iface, ep, &host_a, &s1, len, "before: host -> device 1");

    slow(1);
    struct flight f0, f1;
    issue_flight(ep, &s0, &t0, &f0, 1);
    issue_flight(ep, &s1, &t1, &f1, 2);
    struct tc_comp fc;
    tc_comp_init(&fc, 1);
    int fs = TC_CALL(cucopy_iface_flush(iface, 0, &fc.comp));
    CHECK_STATUS(fs, CUCOPY_INPROGRESS);
    /* Fake: the kernel must not wait behind the delay; the copies already
     * started theirs. */
    slow(0);
    make_sick(&sk);
    int healthy1 = device1_healthy(p1, &x1);

    tc_case_begin("%s: completions after the sticky error", phase);
    double deadline = tc_now() + TIMEOUT_S;
    int arms = 0, busy = 0, wakeups = 0, arm_errors = 0;
    for (;;) {
        int pending = flight_pending(&f0) + flight_pending(&f1) +
                      (fs == CUCOPY_INPROGRESS && fc.fired == 0);
        if (pending == 0)
            break;
        if (FAIL_IF(tc_now() > deadline, "%d completion(s) did not fire within %.0f s", pending,
                    TIMEOUT_S))
            break;
        if (use_arm) {
            int s = TC_LOOP_CALL(cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP));
            arms++;
            if (s == CUCOPY_ERR_BUSY) {
                busy++;
            } else if (s == CUCOPY_OK) {
                struct pollfd pfd = {fd, POLLIN, 0};
                int r = poll(&pfd, 1, 20000);
                if (FAIL_IF(r == 0, "armed with %d completion(s) pending, the fd stayed quiet "
                                    "for 20 s", pending))
                    break;
                wakeups += r > 0;
            } else if (arm_errors++ == 0) {
                (void)FAIL_IF(1, "event_arm with the sick context's work queued returned %s "
                                 "(expected BUSY or OK: the event-fd protocol has no way on "
                                 "for the healthy devices); last error \"%s\"",
                              tc_status_name(s), cucopy_last_error());
            }
        }
        int n = TC_LOOP_CALL(cucopy_iface_progress(iface));
        if (FAIL_IF(n < 0, "progress returned %s: %s", tc_status_name(n), cucopy_last_error()))
            break;
    }
    for (int k = 0; k < 5; k++)
        (void)FAIL_IF(TC_LOOP_CALL(cucopy_iface_progress(iface)) < 0, "progress failed");
    flight_check_sick(&f0, "device 0 (sick)");
    if (healthy1) {
        flight_check(&f1, CUCOPY_OK, "device 1");
        check_data(&t1, 2, "device 1 in flight");
    } else {
        flight_check_sick(&f1, "device 1 (failed by the driver too)");
    }
    CHECKF(fc.fired == 1, "flush registered before the error fired %d time(s)", fc.fired);
    tc_case_end();
    if (use_arm)
        printf("test_sick_context: %s: %d arm(s), %d BUSY, %d wake-up(s), %d arm error(s)\n",
               phase, arms, busy, wakeups, arm_errors);

    /* Later operations on device 0 fail clearly; completions untouched. */
    tc_case_begin("%s: later operations on the sick context", phase);
    struct tc_comp c;
    tc_comp_init(&c, 1);
    cucopy_iov_t iov = {ptr(&host_a, 0), len};
    check_sick(TC_CALL(cucopy_ep_put_zcopy(ep, &iov, 1, tc_buf_addr(&s0, 0), &c.comp)),
               "put_zcopy", "put_zcopy host -> device 0");
    iov.buffer = ptr(&host_b, 0);
    check_sick(TC_CALL(cucopy_ep_get_zcopy(ep, &iov, 1, tc_buf_addr(&s0, 0), &c.comp)),
               "get_zcopy", "get_zcopy device 0 -> host");
    iov.buffer = ptr(&s0, 0);
    check_sick(TC_CALL(cucopy_ep_put_zcopy(ep, &iov, 1, tc_buf_addr(&t0, 0), &c.comp)),
               "put_zcopy", "put_zcopy device 0 -> device 0");
    check_sick(TC_CALL(cucopy_ep_put_zcopy(ep, &iov, 1, tc_buf_addr(&x1, 0), &c.comp)),
               "put_zcopy", "put_zcopy device 0 -> device 1");
    check_sick(TC_CALL(cucopy_ep_put_short(ep, ptr(&host_a, 0), len, tc_buf_addr(&s0, 0))),
               "put_short", "put_short host -> device 0");
    check_sick(TC_CALL(cucopy_ep_get_short(ep, ptr(&host_b, 0), len, tc_buf_addr(&s0, 0))),
               "get_short", "get_short device 0 -> host");
    CHECKF(c.fired == 0 && c.comp.count == 1 && c.comp.status == CUCOPY_OK,
           "a failed operation touched its completion (fired %d, count %d, status %s)", c.fired,
           c.comp.count, tc_status_name(c.comp.status));
    /* A zcopy whose second piece is on the sick context: an error, and the
     * healthy first piece is not left running. */
    cucopy_iov_t mix[2] = {{ptr(&host_a, 0), len}, {ptr(&s0, 0), len}};
    tc_comp_init(&c, 1);
    int s = TC_CALL(cucopy_ep_put_zcopy(ep, mix, 2, tc_buf_addr(&x1, 0), &c.comp));
    check_sick(s, "put_zcopy", "2-piece put_zcopy host + device 0 -> device 1");
    CHECK(c.fired == 0 && c.comp.count == 1);
    tc_case_end();

    /* Progress, flush and arm still work; device 1 and host copies too. */
    if (!healthy1)
        goto close;
    CHECK(TC_CALL(cucopy_iface_progress(iface)) >= 0);
    CHECK_STATUS(TC_CALL(cucopy_iface_flush(iface, 0, NULL)), CUCOPY_OK);
    CHECK_STATUS(TC_CALL(cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP)), CUCOPY_OK);
    tc_copy_all_ways(iface, ep, &host_a, &host_b, len, "after: host -> host");
    tc_copy_all_ways(iface, ep, &host_a, &s1, len, "after: host -> device 1");
    tc_copy_all_ways(iface, ep, &s1, &host_b, len, "after: device 1 -> host");
    tc_copy_all_ways(iface, ep, &s1, &x1, len, "after: device 1 -> device 1");

    /* Device 1 in flight again, completing normally next to the sick one. */
    struct flight f2;
    issue_flight(ep, &s1, &t1, &f2, 3);
    tc_comp_init(&fc, 1);
    fs = TC_CALL(cucopy_iface_flush(iface, 0, &fc.comp));
    deadline = tc_now() + TIMEOUT_S;
    while ((flight_pending(&f2) > 0 || (fs == CUCOPY_INPROGRESS && fc.fired == 0)) &&
           tc_now() < deadline)
        TC_LOOP_CALL(cucopy_iface_progress(iface));
    flight_check(&f2, CUCOPY_OK, "device 1 after the error");
    check_data(&t1, 3, "device 1 after the error");
    if (fs == CUCOPY_INPROGRESS)
        CHECKF(fc.fired == 1, "flush after the error fired %d time(s)", fc.fired);
    int fl;
    deadline = tc_now() + TIMEOUT_S;
    while ((fl = TC_LOOP_CALL(cucopy_iface_flush(iface, 0, NULL))) == CUCOPY_INPROGRESS &&
           tc_now() < deadline)
        TC_LOOP_CALL(cucopy_iface_progress(iface));
    CHECK_STATUS(fl, CUCOPY_OK);

close:
    /* Close: returns, every stream and event is released. */
    CHECK_STATUS(TC_CALL(cucopy_ep_destroy(ep)), CUCOPY_OK);
    int cs = TC_CALL(cucopy_iface_close(iface));
    printf("test_sick_context: %s: iface_close with a sick context: %s%s%s\n", phase,
           tc_status_name(cs), cs < 0 ? ": " : "", cs < 0 ? cucopy_last_error() : "");
    /* The driver refuses to destroy a sick context's streams and events; the
     * program's reset frees them: close must not get stuck on them. */
    CHECKF(cs == CUCOPY_OK, "iface_close returned %s: %s", tc_status_name(cs),
           cucopy_last_error());
    CHECK_STATUS(TC_CALL(cucopy_iface_progress(iface)), CUCOPY_ERR_INVALID_HANDLE);
    if (td.is_fake)
        CHECKF(tc_fake.live_streams(NULL) == 0 && tc_fake.live_events(NULL) == 0,
               "%s: %d stream(s), %d event(s) alive after iface_close", phase,
               tc_fake.live_streams(NULL), tc_fake.live_events(NULL));

    /* Everything released, the program recovers device 0 the CUDA way: a
     * reset of the primary context ends the sticky error (and frees s0, t0).
     * The error never reached another process. */
    if (healthy1) {
        tc_buf_free(&s1);
        tc_buf_free(&t1);
        tc_buf_free(&x1);
    } else {
        /* The driver's error reached device 1's context too; frees s1, t1, x1. */
        tc_primary_reset(1);
    }
    tc_primary_release(1);
    tc_primary_reset(0);
    tc_primary_release(0);
    CHECKF(tc_violations() == v0, "%s: %ld driver misuse(s)", phase, tc_violations() - v0);
}

/* One round in this process (a child): on a real driver the sticky error
 * ends the process's CUDA use for good (no reset brings the device back; the
 * CUDA docs say to restart the process), so every round runs in its own. */
static int child_round(int use_arm)
{
    if (td.is_fake)
        REQUIRE(tc_fake.set_delay_us != NULL && tc_fake.live_streams != NULL &&
                tc_fake.live_events != NULL && tc_fake.violations != NULL);
    const char *delay = getenv("FAKECUDA_DELAY_US");
    base_delay_us = delay != NULL ? (unsigned)strtoul(delay, NULL, 10) : 0;
    len = 4096;
    tc_pattern(NCH * len);
    tc_buf_alloc(&host_a, TC_MEM_PAGEABLE, NCH * len);
    tc_buf_alloc(&host_b, TC_MEM_PAGEABLE, NCH * len);
    REQUIRE_OK(cucopy_context_create(NULL, &cctx));
    printf("test_sick_context: round %s: %d device(s), %s driver %d\n",
           use_arm ? "event-fd protocol" : "progress", td.device_count,
           td.is_fake ? "fake" : "real", td.driver_version);
    long v0 = tc_violations();
    round_sick(use_arm);
    CHECK_STATUS(TC_CALL(cucopy_context_destroy(cctx)), CUCOPY_OK);
    CHECKF(tc_violations() == v0, "%ld driver misuse(s) in the round", tc_violations() - v0);
    tc_buf_free(&host_a);
    tc_buf_free(&host_b);
    return tc_finish();
}

int main(int argc, char **argv)
{
    tc_init("test_sick_context");
    if (td.device_count < 2)
        tc_skip("test_sick_context: needs 2 devices, the driver shows %d", td.device_count);
    if (td.cuModuleLoadData == NULL || td.cuModuleGetFunction == NULL ||
        td.cuLaunchKernel == NULL || td.cuModuleUnload == NULL ||
        td.cuDevicePrimaryCtxReset == NULL)
        tc_skip("test_sick_context: SKIP: the driver (version %d) lacks the module, launch or "
                "primary-context reset entry points",
                td.driver_version);
    if (argc == 3 && strcmp(argv[1], "--round") == 0)
        return child_round(atoi(argv[2]));
    fflush(stdout);
    int failed = 0;
    for (int round = 0; round < 2; round++) {
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            char arg[2] = {(char)('0' + round), '\0'};
            tc_exec_self((char *const[]){argv[0], "--round", arg, NULL});
            _exit(127);
        }
        int status = 0;
        REQUIRE(waitpid(pid, &status, 0) == pid);
        int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        CHECKF(rc == 0, "round %d (its own process) exited %d", round, rc);
        failed += rc != 0;
    }
    printf("test_sick_context: 2 rounds, %d failed\n", failed);
    return tc_finish();
}
