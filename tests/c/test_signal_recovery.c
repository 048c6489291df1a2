/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A host program that owns SIGSEGV, like gfortran's runtime or UCX: it
 * installs its handler after the library was loaded. With
 * CUCOPY_TEST_FAULT=nil_deref set (setenv; the library reads the environment
 * at cucopy_context_create()), it dereferences nil inside
 * Go after loading the driver. The call must return CUCOPY_ERR_INTERNAL with a
 * last-error message and the process must survive (the fault must not reach
 * the host's handler); afterwards a genuine NULL write by the host program
 * (in a forked child) must still reach the host's handler.
 *
 * Round 1: a plain handler (SA_RESTART only, as gfortran installs it).
 * Round 2: the host replaces the handler again after the library initialized
 *          (as MPI_Init with UCX does), now SA_SIGINFO|SA_ONSTACK; the next
 *          cucopy_context_create() must again turn the fault into a status.
 * A control child checks the host handler works before any cucopy call.
 */
#define _GNU_SOURCE
#include "check.h"
#include "testdrv.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILD_HANDLED 42

static volatile sig_atomic_t in_child;
static volatile sig_atomic_t handler_round;

static void host_fault(int sig)
{
    if (in_child)
        _exit(CHILD_HANDLED + handler_round);
    static const char msg[] = "test_signal_recovery: FAIL: the host's SIGSEGV/SIGBUS handler got "
                              "a fault in the parent (the library's fault was not recovered)\n";
    ssize_t w = write(2, msg, sizeof(msg) - 1);
    (void)w;
    (void)sig;
    _exit(3);
}

static void host_fault_info(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    host_fault(sig);
}

static void install_host_handler(int round)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    if (round == 1) {
        sa.sa_handler = host_fault;
        sa.sa_flags = SA_RESTART;
    } else {
        static char altstack[64 * 1024];
        stack_t ss;
        memset(&ss, 0, sizeof(ss));
        ss.ss_sp = altstack;
        ss.ss_size = sizeof(altstack);
        REQUIRE(sigaltstack(&ss, NULL) == 0);
        sa.sa_sigaction = host_fault_info;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    }
    handler_round = (sig_atomic_t)round;
    REQUIRE(sigaction(SIGSEGV, &sa, NULL) == 0);
    REQUIRE(sigaction(SIGBUS, &sa, NULL) == 0);
}

/* A forked child writes through NULL; its host handler must run. */
static void child_null_write(const char *when)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        in_child = 1;
        alarm(10);
        volatile int *volatile np = NULL;
        *np = 1;
        _exit(1); /* the write did not fault */
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    int want = CHILD_HANDLED + handler_round;
    if (WIFSIGNALED(st))
        CHECKF(0, "%s: the child's NULL write killed it with signal %d instead of reaching the "
                  "host's handler", when, WTERMSIG(st));
    else
        CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == want,
               "%s: child exit status %d, expected %d (host handler ran)", when,
               WIFEXITED(st) ? WEXITSTATUS(st) : -1, want);
}

static void faulting_create(const char *when)
{
    cucopy_context_h ctx = NULL;
    REQUIRE(setenv("CUCOPY_TEST_FAULT", "nil_deref", 1) == 0);
    int s = cucopy_context_create(NULL, &ctx);
    REQUIRE(unsetenv("CUCOPY_TEST_FAULT") == 0);
    if (s == CUCOPY_OK) {
        fprintf(stderr, "test_signal_recovery: CUCOPY_TEST_FAULT had no effect: this is the "
                        "release library; the test needs the test build first on "
                        "LD_LIBRARY_PATH (BUILD_DIR/testhooks)\n");
        cucopy_context_destroy(ctx);
    }
    CHECKF(s == CUCOPY_ERR_INTERNAL, "%s: cucopy_context_create with CUCOPY_TEST_FAULT=nil_deref "
                                     "returned %s, expected CUCOPY_ERR_INTERNAL",
           when, tc_status_name(s));
    const char *e = cucopy_last_error();
    CHECKF(e != NULL && e[0] != '\0', "%s: no last-error message after the recovered fault", when);
    printf("test_signal_recovery: %s: %s: \"%s\"\n", when, tc_status_name(s), e != NULL ? e : "");
}

/* The library works normally after the recovered panics. */
static void library_still_works(const char *when)
{
    cucopy_context_h ctx = NULL;
    int n = 0;
    tc_case_begin("%s: the library still works", when);
    if (CHECK_STATUS(cucopy_context_create(NULL, &ctx), CUCOPY_OK)) {
        CHECK_STATUS(cucopy_device_count(ctx, &n), CUCOPY_OK);
        CHECK(n == td.device_count);
        CHECK_STATUS(cucopy_context_destroy(ctx), CUCOPY_OK);
    }
    tc_case_end();
}

/* A fault inside an export that holds a handle (CUCOPY_TEST_FAULT=
 * progress_nil_deref: the next iface_progress dereferences nil): that call
 * returns CUCOPY_ERR_INTERNAL and poisons that iface only; another iface of
 * the same context goes on; the poisoned one can still be closed. */
static void poisoned_handle(const char *when)
{
    cucopy_context_h ctx = NULL;
    cucopy_iface_h a = NULL;
    cucopy_iface_h b = NULL;
    REQUIRE(setenv("CUCOPY_TEST_FAULT", "progress_nil_deref", 1) == 0);
    cucopy_status_t s = cucopy_context_create(NULL, &ctx);
    REQUIRE(unsetenv("CUCOPY_TEST_FAULT") == 0);
    REQUIRE(s == CUCOPY_OK);
    REQUIRE(cucopy_iface_open(ctx, NULL, &a) == CUCOPY_OK);
    REQUIRE(cucopy_iface_open(ctx, NULL, &b) == CUCOPY_OK);
    int n = cucopy_iface_progress(a);
    CHECKF(n == CUCOPY_ERR_INTERNAL, "%s: progress with the fault returned %d, expected %s", when,
           n, tc_status_name(CUCOPY_ERR_INTERNAL));
    CHECKF(strstr(cucopy_last_error(), "internal error") != NULL,
           "%s: last error \"%s\" does not say internal error", when, cucopy_last_error());
    CHECK_STATUS(cucopy_iface_progress(a), CUCOPY_ERR_INVALID_HANDLE);
    CHECKF(strstr(cucopy_last_error(), "internal error") != NULL,
           "%s: the poisoned handle's error \"%s\" does not say why", when, cucopy_last_error());
    CHECKF(cucopy_iface_progress(b) >= 0, "%s: the other iface is unusable: %s", when,
           cucopy_last_error());
    char src[64] = "the other iface still copies";
    char dst[64] = {0};
    cucopy_ep_h ep = NULL;
    REQUIRE(cucopy_ep_create(b, &ep) == CUCOPY_OK);
    CHECK_STATUS(cucopy_ep_put_short(ep, src, sizeof(src), (uint64_t)(uintptr_t)dst), CUCOPY_OK);
    CHECKF(strcmp(dst, src) == 0, "%s: copy on the other iface", when);
    CHECK_STATUS(cucopy_ep_destroy(ep), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_close(b), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_close(a), CUCOPY_OK); /* a poisoned handle can still be closed */
    CHECK_STATUS(cucopy_context_destroy(ctx), CUCOPY_OK);
}

int main(void)
{
    tc_init("test_signal_recovery");
    /* The library is loaded (linked); the host takes SIGSEGV now. */
    install_host_handler(1);
    child_null_write("control, before any cucopy call");

    faulting_create("round 1");
    child_null_write("round 1, after the recovered fault");
    faulting_create("round 1, again");
    library_still_works("round 1");
    child_null_write("round 1, after a normal context");

    install_host_handler(2);
    faulting_create("round 2 (handler replaced after initialization)");
    child_null_write("round 2, after the recovered fault");
    library_still_works("round 2");
    poisoned_handle("round 2, a fault inside iface_progress");
    child_null_write("round 2, after the poisoned handle");
    return tc_finish();
}
