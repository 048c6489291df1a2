/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fork() after the library was loaded: in the child every function returns
 * CUCOPY_ERR_FORKED, promptly (alarm(10) turns a hang into SIGALRM), with a
 * last-error message; the parent goes on unaffected. Forks once before the
 * first cucopy_context_create() and once with a context, an iface, an ep and
 * a copy in flight.
 */
#define _GNU_SOURCE
#include "check.h"
#include "mem.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEN 4096
#define PROMPT_S 5.0

static void child_checks(cucopy_context_h ctx, cucopy_iface_h iface, cucopy_ep_h ep,
                         const struct tc_buf *src, const struct tc_buf *dst)
{
    const int F = CUCOPY_ERR_FORKED;
    cucopy_context_h c = NULL;
    CHECK_STATUS(cucopy_context_create(NULL, &c), F);
    if (ctx == NULL)
        return;
    int n = 0;
    int fd = -1;
    cucopy_iface_h i = NULL;
    cucopy_ep_h e = NULL;
    cucopy_iov_t iov = {(void *)(uintptr_t)src->dptr, LEN};
    struct tc_comp comp;
    tc_comp_init(&comp, 1);
    CHECK(cucopy_iface_progress(iface) == F);
    CHECK_STATUS(cucopy_device_count(ctx, &n), F);
    CHECK_STATUS(cucopy_iface_open(ctx, NULL, &i), F);
    CHECK_STATUS(cucopy_iface_flush(iface, 0, NULL), F);
    CHECK_STATUS(cucopy_iface_event_fd(iface, &fd), F);
    CHECK_STATUS(cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP), F);
    CHECK_STATUS(cucopy_ep_create(iface, &e), F);
    CHECK_STATUS(cucopy_ep_put_short(ep, iov.buffer, LEN, dst->dptr), F);
    CHECK_STATUS(cucopy_ep_put_zcopy(ep, &iov, 1, dst->dptr, &comp.comp), F);
    CHECK_STATUS(cucopy_ep_flush(ep, 0, NULL), F);
    CHECK_STATUS(cucopy_ep_destroy(ep), F);
    CHECK_STATUS(cucopy_iface_close(iface), F);
    CHECK_STATUS(cucopy_context_destroy(ctx), F);
    CHECK(comp.fired == 0);
}

static void fork_and_check(const char *when, cucopy_context_h ctx, cucopy_iface_h iface,
                           cucopy_ep_h ep, const struct tc_buf *src, const struct tc_buf *dst)
{
    fflush(stdout);
    fflush(stderr);
    double start = tc_now();
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        alarm(10);
        child_checks(ctx, iface, ep, src, dst);
        double took = tc_now() - start;
        CHECKF(took < PROMPT_S, "child took %.1f s", took);
        _exit(tc_failures() == 0 ? 0 : 1); /* no atexit handlers in the child */
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    if (WIFSIGNALED(st))
        CHECKF(0, "%s: child killed by signal %d%s", when, WTERMSIG(st),
               WTERMSIG(st) == SIGALRM ? " (it hung)" : "");
    else
        CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: child failed (exit %d)", when,
               WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

static void parent_copy(cucopy_iface_h iface, cucopy_ep_h ep, const struct tc_buf *src,
                        const struct tc_buf *dst, int seed)
{
    const unsigned char *data = tc_pattern(LEN) + seed;
    unsigned char back[LEN];
    tc_buf_write(src, 0, data, LEN);
    tc_buf_set(dst, 0, 0, LEN);
    CHECK_STATUS(cucopy_ep_put_short(ep, (void *)(uintptr_t)src->dptr, LEN, dst->dptr), CUCOPY_OK);
    tc_buf_read(dst, 0, back, LEN);
    CHECKF(memcmp(back, data, LEN) == 0, "parent: put_short data differs");

    cucopy_iov_t iov = {(void *)(uintptr_t)dst->dptr, LEN};
    struct tc_comp c;
    tc_comp_init(&c, 1);
    tc_buf_set(dst, 0, 0, LEN);
    int s = cucopy_ep_get_zcopy(ep, &iov, 1, src->dptr, &c.comp);
    CHECKF(s == CUCOPY_OK || s == CUCOPY_INPROGRESS, "parent: get_zcopy %s: %s",
           tc_status_name(s), cucopy_last_error());
    if (s == CUCOPY_INPROGRESS)
        CHECKF(tc_wait(iface, &c, 30) && c.comp.status == CUCOPY_OK,
               "parent: get_zcopy did not complete");
    tc_buf_read(dst, 0, back, LEN);
    CHECKF(memcmp(back, data, LEN) == 0, "parent: get_zcopy data differs");
}

int main(void)
{
    tc_begin("test_fork", CUCOPY_MAX_DEVICES);
    tc_pattern(LEN);
    struct tc_buf host;
    struct tc_buf dev;
    tc_buf_alloc(&host, TC_MEM_PINNED, LEN);
    tc_buf_alloc(&dev, TC_MEM_DEV0, LEN);

    fork_and_check("before the first context", NULL, NULL, NULL, &host, &dev);

    cucopy_context_h ctx = NULL;
    cucopy_iface_h iface = NULL;
    cucopy_ep_h ep = NULL;
    REQUIRE_OK(cucopy_context_create(NULL, &ctx));
    REQUIRE_OK(cucopy_iface_open(ctx, NULL, &iface));
    REQUIRE_OK(cucopy_ep_create(iface, &ep));
    parent_copy(iface, ep, &host, &dev, 1);

    /* A copy in flight while forking. */
    cucopy_iov_t iov = {(void *)(uintptr_t)host.dptr, LEN};
    struct tc_comp c;
    tc_comp_init(&c, 1);
    int s = cucopy_ep_put_zcopy(ep, &iov, 1, dev.dptr, &c.comp);
    CHECKF(s == CUCOPY_OK || s == CUCOPY_INPROGRESS, "put_zcopy %s", tc_status_name(s));
    fork_and_check("with a context and a copy in flight", ctx, iface, ep, &host, &dev);
    if (s == CUCOPY_INPROGRESS)
        CHECKF(tc_wait(iface, &c, 30) && c.fired == 1, "parent: the copy in flight at fork "
                                                       "did not complete");

    parent_copy(iface, ep, &host, &dev, 2);
    cucopy_context_h ctx2 = NULL;
    CHECK_STATUS(cucopy_context_create(NULL, &ctx2), CUCOPY_OK);
    CHECK_STATUS(cucopy_context_destroy(ctx2), CUCOPY_OK);
    CHECK_STATUS(cucopy_ep_destroy(ep), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);
    CHECK_STATUS(cucopy_context_destroy(ctx), CUCOPY_OK);
    tc_buf_free(&host);
    tc_buf_free(&dev);
    return tc_finish();
}
