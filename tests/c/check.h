/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Checks, counting and reporting for the C conformance suite: the bottom
 * layer of its helpers, which go (each on the ones before it)
 *   testdrv.h (tests/common)  the raw driver table td
 *   fake.h                    the fake driver's controls, NULL on a GPU
 *   check.h                   this: start, checks, cases, completions
 *   ctx.h                     contexts through the raw driver
 *   mem.h                     test buffers of every memory kind
 *   calls.h                   checked cucopy calls (TC_CALL) and copies
 * Helpers are named tc_* (TC_* for macros and constants); the check macros
 * below (CHECK, CHECKF, CHECK_STATUS, FAIL_IF, REQUIRE, REQUIRE_OK) are the
 * suite's assertions and carry no prefix.
 *
 * Every CHECK* counts one case unless it runs inside tc_case_begin() ..
 * tc_case_end(), which makes the whole group one case (failing if any check
 * in it failed). A failure prints file:line, what was expected and, for
 * statuses, cucopy_last_error(). tc_finish() prints
 * "<test>: N cases, M passed" and returns the exit status (0 or 1).
 * Counters are shared by all threads; case groups are per thread.
 */
#ifndef CUCOPY_TEST_CHECK_H
#define CUCOPY_TEST_CHECK_H

#include <cucopy.h>

#include <stddef.h>

/* Name the test (for the summary line), load the driver table `td`
 * (testdrv.h) and the fake's controls (tc_fake, fake.h). Exits 1 when the
 * driver cannot be loaded. */
void tc_init(const char *test_name);

/* The start of a test that needs a CUDA device: tc_init(test_name), then a
 * skip (exit 77, "no CUDA device") when the driver shows none. Returns the
 * device count, at most max_devices. */
int tc_begin(const char *test_name, int max_devices);

/* Print the summary line; return 0 when every case passed, else 1. */
int tc_finish(void);

/* Print the message and exit 77 (CTest: skipped). */
_Noreturn void tc_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print file:line and the message, the summary, and exit 1. */
_Noreturn void tc_fatal(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Group the following checks into one case described by fmt. */
void tc_case_begin(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tc_case_end(void);

/* One check: counts it, prints the message on failure; returns ok. */
int tc_check(int ok, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A status check: got == expected; for an expected error also a non-empty
 * cucopy_last_error(). Returns 1 when it passed. */
int tc_check_status(int got, int expected, const char *expr, const char *file, int line);

/* Name of a status value for messages (does not use the library). */
const char *tc_status_name(int status);

/* Number of failed checks so far (all threads). */
long tc_failures(void);

/* Monotonic seconds. */
double tc_now(void);

/* The emulator this test runs under, from $CUCOPY_TEST_EMULATOR (words
 * separated by spaces, e.g. "qemu-aarch64 -L /usr/aarch64-linux-gnu"; CTest
 * sets it in a cross build, whose binaries the host's execve cannot start),
 * or "" natively. */
const char *tc_emulator(void);

/* Replace this process with this test's binary (/proc/self/exe) run with
 * args (NULL-terminated, args[0] the program name), through tc_emulator()
 * when set. Returns only if the exec failed. */
void tc_exec_self(char *const args[]);

#define CHECK(cond) tc_check(!!(cond), __FILE__, __LINE__, "%s", #cond)
#define CHECKF(cond, ...) tc_check(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
/* For checks inside loops: a failure counts (and prints), a pass does not.
 * Yields 1 when cond is true (failed). */
#define FAIL_IF(cond, ...) ((cond) ? (tc_check(0, __FILE__, __LINE__, __VA_ARGS__), 1) : 0)
#define CHECK_STATUS(expr, expected) \
    tc_check_status((int)(expr), (int)(expected), #expr, __FILE__, __LINE__)

/* Set-up steps: a failure ends the test (exit 1). */
#define REQUIRE(cond)                                                   \
    do {                                                                \
        if (!(cond))                                                    \
            tc_fatal(__FILE__, __LINE__, "required: %s", #cond);        \
    } while (0)
#define REQUIRE_OK(expr)                                                \
    do {                                                                \
        int tc_s_ = (int)(expr);                                        \
        if (tc_s_ != CUCOPY_OK)                                         \
            tc_fatal(__FILE__, __LINE__, "%s returned %s; last error: %s", #expr, \
                     tc_status_name(tc_s_), cucopy_last_error());       \
    } while (0)

/*
 * A completion that counts how often it fired and records when, in a
 * process-wide sequence, so tests can check "exactly once" and ordering.
 */
struct tc_comp {
    cucopy_completion_t comp;
    int fired;  /* times comp.func ran */
    long order; /* tc sequence number of the last firing, 0 if never */
};

/* comp.func = the counter, comp.count = count, comp.status = OK. */
void tc_comp_init(struct tc_comp *c, int count);

/* Call cucopy_iface_progress() until c fired or timeout_s passed. Progress
 * errors are checks. Returns 1 when it fired. */
int tc_wait(cucopy_iface_h iface, struct tc_comp *c, double timeout_s);

/* Next value of the process-wide sequence (used by tc_comp; tests may take
 * numbers too to record other events in the same order). */
long tc_next_seq(void);

#endif
