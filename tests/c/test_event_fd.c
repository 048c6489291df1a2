/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The event fd protocol of cucopy.h:
 *  - cucopy_iface_event_fd() gives a valid fd, the same one every time;
 *  - arm with nothing outstanding returns OK;
 *  - arm with work that finished on the GPU but was not progressed yet
 *    returns CUCOPY_ERR_BUSY, and progress then completes it;
 *  - arm with work in flight (64 MiB; FAKECUDA_DELAY_US on the fake) returns
 *    OK, poll() on the fd becomes readable once the work finished, and
 *    progress completes it; a poll timeout means a lost wake-up;
 *  - arm from a completion callback while another completion still waits
 *    returns BUSY;
 *  - work on several devices at once;
 *  - arm/poll/progress from a thread with no current context, for work
 *    issued by another thread.
 */
#define _GNU_SOURCE
#include "check.h"
#include "mem.h"

#include <fcntl.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define BIG ((size_t)64 << 20)
#define SMALL ((size_t)1 << 20)
#define POLL_TIMEOUT_MS 20000
#define TRIALS 3

static cucopy_iface_h iface;
static cucopy_ep_h ep;
static int fd = -1;
static int devices;
static struct tc_buf pinned_src;
static struct tc_buf pinned_dst;
static struct tc_buf dev[2];

struct protocol_result {
    int arm_ok;    /* arms that returned OK */
    int arm_busy;  /* arms that returned BUSY */
    int wakeups;   /* polls that returned readable */
    int first_arm; /* status of the first arm */
    int completed; /* every completion fired */
};

/* Follow the header's protocol until every completion fired. */
static struct protocol_result run_protocol(struct tc_comp *comps, int n)
{
    struct protocol_result r = {0, 0, 0, 1, 0};
    double deadline = tc_now() + 60;
    for (;;) {
        int pending = 0;
        for (int i = 0; i < n; i++)
            pending += comps[i].fired == 0;
        if (pending == 0) {
            r.completed = 1;
            return r;
        }
        if (FAIL_IF(tc_now() > deadline, "event fd protocol: %d completion(s) still pending after "
                                         "60 s", pending))
            return r;
        cucopy_status_t s = cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP);
        if (r.first_arm == 1)
            r.first_arm = s;
        if (s == CUCOPY_ERR_BUSY) {
            r.arm_busy++;
            int got = cucopy_iface_progress(iface);
            if (FAIL_IF(got < 0, "progress: %s: %s", tc_status_name(got), cucopy_last_error()))
                return r;
            continue;
        }
        if (FAIL_IF(s != CUCOPY_OK, "event_arm returned %s: %s", tc_status_name(s),
                    cucopy_last_error()))
            return r;
        r.arm_ok++;
        struct pollfd p = {fd, POLLIN, 0};
        int ready;
        do /* EINTR: the Go runtime's preemption signal (SIGURG) can land on any thread that called in */
            ready = poll(&p, 1, POLL_TIMEOUT_MS);
        while (ready < 0 && errno == EINTR);
        if (FAIL_IF(ready != 1 || !(p.revents & POLLIN),
                    "armed with %d completion(s) pending, but the fd did not become readable in "
                    "%d ms (poll returned %d, revents 0x%x): lost wake-up",
                    pending, POLL_TIMEOUT_MS, ready, (unsigned)p.revents))
            return r;
        r.wakeups++;
        int got = cucopy_iface_progress(iface);
        if (FAIL_IF(got < 0, "progress: %s: %s", tc_status_name(got), cucopy_last_error()))
            return r;
    }
}

static int zcopy(const struct tc_buf *src, const struct tc_buf *dst, size_t len, int get,
                 struct tc_comp *c)
{
    tc_comp_init(c, 1);
    cucopy_iov_t iov = {(void *)(uintptr_t)(get ? dst->dptr : src->dptr), len};
    cucopy_status_t s = get ? cucopy_ep_get_zcopy(ep, &iov, 1, src->dptr, &c->comp)
                            : cucopy_ep_put_zcopy(ep, &iov, 1, dst->dptr, &c->comp);
    CHECKF(s == CUCOPY_OK || s == CUCOPY_INPROGRESS, "zcopy returned %s: %s", tc_status_name(s),
           cucopy_last_error());
    if (s == CUCOPY_OK)
        c->fired = 1; /* finished now: nothing will report */
    return s;
}

/* Arm with nothing outstanding: OK, and the fd must stay quiet, or every
 * waiting loop would spin; it is close-on-exec and non-blocking. */
static void idle_arm(void)
{
    CHECK_STATUS(cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP), CUCOPY_OK);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    CHECKF(poll(&p, 1, 0) == 0, "the fd is readable after an idle arm");
    CHECKF(fcntl(fd, F_GETFD) & FD_CLOEXEC, "the event fd is not close-on-exec");
    CHECKF(fcntl(fd, F_GETFL) & O_NONBLOCK, "the event fd is blocking");
}

static void check_fd(void)
{
    REQUIRE_OK(cucopy_iface_event_fd(iface, &fd));
    tc_case_begin("event fd, idle arm");
    CHECKF(fd >= 0 && fcntl(fd, F_GETFD) != -1, "event fd %d is not an open descriptor", fd);
    int again = -1;
    CHECK_STATUS(cucopy_iface_event_fd(iface, &again), CUCOPY_OK);
    CHECKF(again == fd, "event_fd returned %d, then %d", fd, again);
    idle_arm();
    tc_case_end();
}

/* Work finished on the device but not progressed: arm says BUSY. */
static void busy_when_ready(int d)
{
    struct tc_comp c;
    tc_case_begin("BUSY with finished work on device %d", d);
    int s = zcopy(&pinned_src, &dev[d], SMALL, 0, &c);
    if (s != CUCOPY_INPROGRESS) {
        tc_case_end();
        printf("test_event_fd: a 1 MiB H2D zcopy to device %d finished at once; BUSY case "
               "not testable\n", d);
        return;
    }
    tc_push(dev[d].ctx);
    TD_CHECK(td.cuCtxSynchronize()); /* the copy is done on the device */
    tc_pop(dev[d].ctx);
    CHECKF(c.fired == 0, "completion fired outside progress");
    CHECK_STATUS(cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP), CUCOPY_ERR_BUSY);
    int n = cucopy_iface_progress(iface);
    CHECKF(n >= 1 && c.fired == 1, "progress after BUSY returned %d, completion fired %d", n,
           c.fired);
    idle_arm();
    tc_case_end();
}

/* A completion callback arms while another completion waits: BUSY. */
struct arm_in_callback {
    struct tc_comp c;
    int arm_status;
};

static void arm_from_callback(cucopy_completion_t *self)
{
    struct arm_in_callback *a =
        (struct arm_in_callback *)((char *)self - offsetof(struct arm_in_callback, c.comp));
    a->c.fired++;
    a->c.order = tc_next_seq();
    a->arm_status = cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP);
}

static void busy_from_callback(void)
{
    struct arm_in_callback a;
    struct tc_comp second;
    tc_case_begin("arm from a completion callback while another completion waits");
    int s1 = zcopy(&pinned_src, &dev[0], SMALL, 0, &a.c);
    a.c.comp.func = arm_from_callback;
    a.arm_status = 1;
    int s2 = zcopy(&pinned_src, &dev[0], SMALL, 0, &second);
    if (s1 != CUCOPY_INPROGRESS || s2 != CUCOPY_INPROGRESS) {
        printf("test_event_fd: 1 MiB H2D zcopies finished at once; callback case not testable\n");
        tc_case_end();
        run_protocol(&second, 1);
        return;
    }
    tc_push(dev[0].ctx);
    TD_CHECK(td.cuCtxSynchronize()); /* both copies are done on the device */
    tc_pop(dev[0].ctx);
    double deadline = tc_now() + 30;
    while ((a.c.fired == 0 || second.fired == 0) && tc_now() < deadline)
        if (FAIL_IF(cucopy_iface_progress(iface) < 0, "progress: %s", cucopy_last_error()))
            break;
    CHECKF(a.c.fired == 1 && second.fired == 1, "completions fired %d and %d times", a.c.fired,
           second.fired);
    CHECKF(second.order > a.c.order, "the second copy completed first");
    if (second.order > a.c.order)
        CHECKF(a.arm_status == CUCOPY_ERR_BUSY,
               "event_arm inside a completion callback, with the next completion waiting, "
               "returned %s, expected CUCOPY_ERR_BUSY", tc_status_name(a.arm_status));
    tc_case_end();
}

/* Work in flight: arm OK, fd readable when it finished, progress completes. */
static void wakeup_when_done(void)
{
    int armed_in_flight = 0;
    for (int t = 0; t < TRIALS; t++) {
        struct tc_comp c;
        tc_case_begin("64 MiB H2D in flight, trial %d", t);
        int s = zcopy(&pinned_src, &dev[0], BIG, 0, &c);
        if (s != CUCOPY_INPROGRESS) {
            tc_case_end();
            continue;
        }
        struct protocol_result r = run_protocol(&c, 1);
        CHECKF(r.completed, "trial %d: the 64 MiB copy never completed", t);
        if (r.first_arm == CUCOPY_OK) {
            armed_in_flight++;
            CHECKF(r.wakeups >= 1, "trial %d: armed with work in flight, completed without a "
                                   "wake-up", t);
        }
        CHECKF(c.comp.status == CUCOPY_OK, "status %s", tc_status_name(c.comp.status));
        tc_case_end();
    }
    CHECKF(armed_in_flight >= 1, "arm never returned OK with a 64 MiB copy in flight (%d trials)",
           TRIALS);

    /* And in the other direction. */
    struct tc_comp c;
    tc_case_begin("64 MiB D2H in flight");
    if (zcopy(&dev[0], &pinned_dst, BIG, 1, &c) == CUCOPY_INPROGRESS)
        CHECK(run_protocol(&c, 1).completed);
    tc_case_end();
}

static int issue_multi(struct tc_comp *comps)
{
    int n = 0;
    for (int d = 0; d < devices && d < 2; d++) {
        zcopy(&pinned_src, &dev[d], BIG / 4, 0, &comps[n++]);
        zcopy(&dev[d], &pinned_dst, BIG / 4, 1, &comps[n++]);
    }
    if (devices > 1)
        zcopy(&dev[0], &dev[1], BIG / 4, 0, &comps[n++]);
    return n;
}

static void several_devices(void)
{
    struct tc_comp comps[8];
    tc_case_begin("work on every device");
    int n = issue_multi(comps);
    struct protocol_result r = run_protocol(comps, n);
    CHECKF(r.completed, "work on %d device(s) did not complete through the protocol",
           devices > 1 ? 2 : 1);
    for (int i = 0; i < n; i++)
        CHECKF(comps[i].fired == 1 && comps[i].comp.status == CUCOPY_OK,
               "op %d: fired %d, status %s", i, comps[i].fired,
               tc_status_name(comps[i].comp.status));
    tc_case_end();
}

struct thread_arg {
    struct tc_comp *comps;
    int n;
    struct protocol_result r;
};

static void *protocol_thread(void *p)
{
    struct thread_arg *a = p;
    tc_case_begin("arm/poll/progress from a thread with no current context");
    CHECKF(tc_current() == NULL, "a new thread has a current context");
    a->r = run_protocol(a->comps, a->n);
    CHECKF(tc_current() == NULL, "the protocol left a current context on the thread");
    CHECKF(a->r.completed, "the work did not complete");
    tc_case_end();
    return NULL;
}

static void from_thread_without_context(void)
{
    struct tc_comp comps[8];
    struct thread_arg a;
    TD_CHECK(td.cuCtxSetCurrent(dev[0].ctx)); /* the issuing thread has one */
    a.comps = comps;
    a.n = issue_multi(comps);
    TD_CHECK(td.cuCtxSetCurrent(NULL));
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, protocol_thread, &a) == 0);
    REQUIRE(pthread_join(thread, NULL) == 0);
}

int main(void)
{
    devices = tc_begin("test_event_fd", CUCOPY_MAX_DEVICES);
    tc_buf_alloc(&pinned_src, TC_MEM_PINNED, BIG);
    tc_buf_alloc(&pinned_dst, TC_MEM_PINNED, BIG);
    tc_buf_alloc(&dev[0], TC_MEM_DEV0, BIG);
    if (devices > 1)
        tc_buf_alloc(&dev[1], TC_MEM_DEV1, BIG);
    tc_buf_set(&pinned_src, 0, 0x11, BIG);

    cucopy_context_h ctx = NULL;
    REQUIRE_OK(cucopy_context_create(NULL, &ctx));
    REQUIRE_OK(cucopy_iface_open(ctx, NULL, &iface));
    REQUIRE_OK(cucopy_ep_create(iface, &ep));

    check_fd();
    for (int d = 0; d < devices && d < 2; d++)
        busy_when_ready(d);
    busy_from_callback();
    wakeup_when_done();
    several_devices();
    from_thread_without_context();

    unsigned char head[16];
    tc_buf_read(&dev[0], 0, head, sizeof(head));
    CHECKF(head[0] == 0x11 && head[15] == 0x11, "device 0 does not hold the copied data");

    CHECK_STATUS(cucopy_ep_destroy(ep), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);
    CHECK_STATUS(cucopy_context_destroy(ctx), CUCOPY_OK);
    tc_buf_free(&pinned_src);
    tc_buf_free(&pinned_dst);
    tc_buf_free(&dev[0]);
    if (devices > 1)
        tc_buf_free(&dev[1]);
    return tc_finish();
}
