/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include "check.h"

#include "fake.h"
#include "testdrv.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *tc_name = "test";
static pthread_mutex_t tc_lock = PTHREAD_MUTEX_INITIALIZER;
static long tc_cases;
static long tc_passed;
static long tc_failed_checks;
static atomic_long tc_seq;

/* The open case group of this thread, if any. */
static _Thread_local int tc_in_case;
static _Thread_local int tc_case_failed;
static _Thread_local char tc_case_desc[256];

void tc_init(const char *test_name)
{
    tc_name = test_name;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (testdrv_load() != 0) {
        fprintf(stderr, "%s: cannot load the CUDA driver\n", tc_name);
        exit(1);
    }
    tc_fake_load();
    printf("%s: driver %d, %d device(s)%s\n", tc_name, td.driver_version, td.device_count,
           td.is_fake ? " (fake)" : "");
}

int tc_begin(const char *test_name, int max_devices)
{
    tc_init(test_name);
    if (td.device_count < 1)
        tc_skip("no CUDA device");
    return td.device_count < max_devices ? td.device_count : max_devices;
}

static void count_case(int ok)
{
    pthread_mutex_lock(&tc_lock);
    tc_cases++;
    if (ok)
        tc_passed++;
    pthread_mutex_unlock(&tc_lock);
}

int tc_finish(void)
{
    pthread_mutex_lock(&tc_lock);
    long cases = tc_cases;
    long passed = tc_passed;
    pthread_mutex_unlock(&tc_lock);
    printf("%s: %ld cases, %ld passed\n", tc_name, cases, passed);
    fflush(stdout);
    return cases > 0 && cases == passed ? 0 : 1; /* no case run is no pass */
}

void tc_skip(const char *fmt, ...)
{
    va_list ap;
    printf("%s: SKIP: ", tc_name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    exit(77);
}

void tc_fatal(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%d: FATAL: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    count_case(0);
    tc_finish();
    exit(1);
}

void tc_case_begin(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tc_case_desc, sizeof(tc_case_desc), fmt, ap);
    va_end(ap);
    tc_in_case = 1;
    tc_case_failed = 0;
}

void tc_case_end(void)
{
    if (!tc_in_case)
        return;
    tc_in_case = 0;
    count_case(!tc_case_failed);
}

static void vreport(int ok, const char *file, int line, const char *fmt, va_list ap)
{
    if (ok) {
        if (!tc_in_case)
            count_case(1);
        return;
    }
    pthread_mutex_lock(&tc_lock);
    tc_failed_checks++;
    fprintf(stderr, "%s:%d: FAIL: ", file, line);
    vfprintf(stderr, fmt, ap);
    if (tc_in_case)
        fprintf(stderr, " [case: %s]", tc_case_desc);
    fprintf(stderr, "\n");
    pthread_mutex_unlock(&tc_lock);
    if (tc_in_case)
        tc_case_failed = 1;
    else
        count_case(0);
}

int tc_check(int ok, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(ok, file, line, fmt, ap);
    va_end(ap);
    return ok;
}

static void report(int ok, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(ok, file, line, fmt, ap);
    va_end(ap);
}

int tc_check_status(int got, int expected, const char *expr, const char *file, int line)
{
    const char *err = cucopy_last_error();
    if (got != expected) {
        report(0, file, line, "%s returned %s (%d), expected %s (%d); last error: \"%s\"", expr,
               tc_status_name(got), got, tc_status_name(expected), expected,
               err != NULL ? err : "(NULL)");
        return 0;
    }
    if (expected < 0 && (err == NULL || err[0] == '\0')) {
        report(0, file, line, "%s returned %s as expected but cucopy_last_error() is empty", expr,
               tc_status_name(got));
        return 0;
    }
    /* Successful calls leave the last error in place, so a message is this
     * call's only if it names the call: "<function without cucopy_>: ...". */
    if (expected < 0 && strncmp(expr, "cucopy_", 7) == 0) {
        size_t n = strcspn(expr + 7, "(");
        if (strncmp(err, expr + 7, n) != 0 || err[n] != ':') {
            report(0, file, line, "%s returned %s as expected but the last error is not its own: \"%s\"",
                   expr, tc_status_name(got), err);
            return 0;
        }
    }
    report(1, file, line, "%s", expr);
    return 1;
}

const char *tc_status_name(int status)
{
    switch (status) {
    case CUCOPY_OK: return "CUCOPY_OK";
    case CUCOPY_INPROGRESS: return "CUCOPY_INPROGRESS";
    case CUCOPY_ERR_INVALID_PARAM: return "CUCOPY_ERR_INVALID_PARAM";
    case CUCOPY_ERR_INVALID_HANDLE: return "CUCOPY_ERR_INVALID_HANDLE";
    case CUCOPY_ERR_NO_MEMORY: return "CUCOPY_ERR_NO_MEMORY";
    case CUCOPY_ERR_NO_RESOURCE: return "CUCOPY_ERR_NO_RESOURCE";
    case CUCOPY_ERR_BUSY: return "CUCOPY_ERR_BUSY";
    case CUCOPY_ERR_UNSUPPORTED: return "CUCOPY_ERR_UNSUPPORTED";
    case CUCOPY_ERR_NO_DEVICE: return "CUCOPY_ERR_NO_DEVICE";
    case CUCOPY_ERR_NO_DRIVER: return "CUCOPY_ERR_NO_DRIVER";
    case CUCOPY_ERR_CUDA: return "CUCOPY_ERR_CUDA";
    case CUCOPY_ERR_FORKED: return "CUCOPY_ERR_FORKED";
    case CUCOPY_ERR_INTERNAL: return "CUCOPY_ERR_INTERNAL";
    case CUCOPY_ERR_OUT_OF_RANGE: return "CUCOPY_ERR_OUT_OF_RANGE";
    case CUCOPY_ERR_ALREADY_EXISTS: return "CUCOPY_ERR_ALREADY_EXISTS";
    case CUCOPY_ERR_CANCELED: return "CUCOPY_ERR_CANCELED";
    default: return status > 0 ? "a positive count" : "an unknown status";
    }
}

long tc_failures(void)
{
    pthread_mutex_lock(&tc_lock);
    long n = tc_failed_checks;
    pthread_mutex_unlock(&tc_lock);
    return n;
}

double tc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *tc_emulator(void)
{
    const char *e = getenv("CUCOPY_TEST_EMULATOR");
    return e != NULL ? e : "";
}

void tc_exec_self(char *const args[])
{
    enum { MAX_WORDS = 16, MAX_ARGS = 16 };
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return;
    self[n] = '\0';
    char words[1024];
    snprintf(words, sizeof(words), "%s", tc_emulator());
    char *argv[MAX_WORDS + MAX_ARGS + 2];
    int argc = 0;
    for (char *save = NULL, *w = strtok_r(words, " ", &save); w != NULL && argc < MAX_WORDS;
         w = strtok_r(NULL, " ", &save))
        argv[argc++] = w;
    if (argc == 0) {
        execv(self, args);
        return;
    }
    argv[argc++] = self; /* the emulator's program; args[0] is not passed on */
    for (int i = 1; args[i] != NULL && i < MAX_ARGS; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;
    execvp(argv[0], argv);
}

long tc_next_seq(void)
{
    return atomic_fetch_add(&tc_seq, 1) + 1;
}

static void tc_comp_fired(cucopy_completion_t *self)
{
    struct tc_comp *c = (struct tc_comp *)((char *)self - offsetof(struct tc_comp, comp));
    c->fired++;
    c->order = tc_next_seq();
}

void tc_comp_init(struct tc_comp *c, int count)
{
    memset(c, 0, sizeof(*c));
    c->comp.func = tc_comp_fired;
    c->comp.count = count;
    c->comp.status = CUCOPY_OK;
}

int tc_wait(cucopy_iface_h iface, struct tc_comp *c, double timeout_s)
{
    double deadline = tc_now() + timeout_s;
    while (c->fired == 0) {
        int n = cucopy_iface_progress(iface);
        if (n < 0) {
            tc_check(0, __FILE__, __LINE__, "cucopy_iface_progress returned %s; last error: %s",
                     tc_status_name(n), cucopy_last_error());
            return 0;
        }
        if (tc_now() > deadline)
            return 0;
    }
    return 1;
}
