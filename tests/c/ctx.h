/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Contexts through the raw driver (testdrv.h), never through cucopy: the
 * primary context the suite's buffers live in, the program's own retain,
 * release and reset of primary contexts, the current-context stack, and
 * context ids. Every driver failure ends the test (TD_CHECK).
 */
#ifndef CUCOPY_TEST_CTX_H
#define CUCOPY_TEST_CTX_H

#include "testdrv.h"

#include <stdint.h>

/* Retain (once per process) and return device dev's primary context. This
 * activates it. */
cdContext tc_primary(int dev);

/* Whether device dev's primary context is active. */
int tc_primary_active(int dev);

/* The program's own retain, release and reset of device dev's primary
 * context (one driver call each time, unlike tc_primary). */
cdContext tc_primary_retain(int dev);
void tc_primary_release(int dev);
void tc_primary_reset(int dev);

/* Push ctx (when not NULL) / pop it again; end the test on failure. */
void tc_push(cdContext ctx);
void tc_pop(cdContext ctx);

/* The calling thread's current context. */
cdContext tc_current(void);

/* The context's id (cuCtxGetId), 0 where the driver lacks it. */
uint64_t tc_ctx_id(cdContext c);

#endif
