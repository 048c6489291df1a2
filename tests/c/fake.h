/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fake driver's control API (tests/fakecuda/fakecuda.h), looked up with
 * dlsym in the loaded driver: every field is NULL on a real driver, so a
 * test checks a field (or td.is_fake) before it calls one. tc_init() fills
 * tc_fake; nothing here is linked against the fake.
 */
#ifndef CUCOPY_TEST_FAKE_H
#define CUCOPY_TEST_FAKE_H

#include "fakecuda.h"

struct tc_fake {
    fakecuda_calls_fn calls;
    fakecuda_live_fn live_streams;
    fakecuda_live_fn live_events;
    fakecuda_counter_fn violations;
    fakecuda_counter_fn ctx_creations;
    fakecuda_counter_fn live_allocations;
    fakecuda_counter_fn registered_ranges;
    fakecuda_fail_fn fail;
    fakecuda_poison_context_fn poison_context;
    fakecuda_reset_counters_fn reset_counters;
    fakecuda_set_delay_us_fn set_delay_us;
};

extern struct tc_fake tc_fake;

/* Fill tc_fake from the loaded driver (testdrv.h); called by tc_init(). */
void tc_fake_load(void);

/* fakecuda_violations(), 0 on a real driver. */
long tc_violations(void);

/* fakecuda_ctx_creations(), 0 on a real driver. */
long tc_ctx_creations(void);

#endif
