/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Checked cucopy calls and the copies built on them, for the tests that
 * check the context rules (the library leaves the caller's current context
 * alone and creates or activates none):
 *  - TC_CALL(expr): evaluate a cucopy call and check that the calling
 *    thread's current context is unchanged and (on the fake driver) that no
 *    context was created or activated by it; one case per check;
 *  - TC_LOOP_CALL(expr): for calls made a timing-dependent number of times:
 *    checks that no context is left current, and only a failure counts;
 *  - a copy of len bytes between two buffers in each of the four ways, with
 *    the data verified, and a flush of everything outstanding.
 */
#ifndef CUCOPY_TEST_CALLS_H
#define CUCOPY_TEST_CALLS_H

#include "check.h"
#include "fake.h"
#include "mem.h"

#include <stddef.h>

/* Set to 1 around calls that are allowed to activate a primary context. */
extern _Thread_local int tc_may_activate;

#define TC_CALL(expr) (tc_call_before(#expr), tc_call_after((int)(expr), __FILE__, __LINE__))
#define TC_LOOP_CALL(expr) tc_loop_call_after((int)(expr), #expr, __FILE__, __LINE__)

/* TC_CALL's halves: note the current context and context count before the
 * call; check them after it and pass the call's status on. */
int tc_call_before(const char *what);
int tc_call_after(int status, const char *file, int line);
int tc_loop_call_after(int status, const char *what, const char *file, int line);

/* Copy len bytes src -> dst with put/get x short/zcopy, one case each
 * ("copy <what>: put short", ...); every cucopy call goes through TC_CALL. */
void tc_copy_all_ways(cucopy_iface_h iface, cucopy_ep_h ep, const struct tc_buf *src,
                      const struct tc_buf *dst, size_t len, const char *what);

/* Flush everything outstanding on the iface (flush with NULL, progress,
 * until OK), through TC_CALL; one status case. */
void tc_flush(cucopy_iface_h iface);

#endif
