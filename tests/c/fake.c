/* SPDX-License-Identifier: BSD-3-Clause */
#include "fake.h"

#include "testdrv.h"

struct tc_fake tc_fake;

void tc_fake_load(void)
{
    tc_fake.calls = (fakecuda_calls_fn)testdrv_fake_sym("fakecuda_calls");
    tc_fake.live_streams = (fakecuda_live_fn)testdrv_fake_sym("fakecuda_live_streams");
    tc_fake.live_events = (fakecuda_live_fn)testdrv_fake_sym("fakecuda_live_events");
    tc_fake.violations = (fakecuda_counter_fn)testdrv_fake_sym("fakecuda_violations");
    tc_fake.ctx_creations = (fakecuda_counter_fn)testdrv_fake_sym("fakecuda_ctx_creations");
    tc_fake.live_allocations =
        (fakecuda_counter_fn)testdrv_fake_sym("fakecuda_live_allocations");
    tc_fake.registered_ranges =
        (fakecuda_counter_fn)testdrv_fake_sym("fakecuda_registered_ranges");
    tc_fake.fail = (fakecuda_fail_fn)testdrv_fake_sym("fakecuda_fail");
    tc_fake.poison_context =
        (fakecuda_poison_context_fn)testdrv_fake_sym("fakecuda_poison_context");
    tc_fake.reset_counters =
        (fakecuda_reset_counters_fn)testdrv_fake_sym("fakecuda_reset_counters");
    tc_fake.set_delay_us = (fakecuda_set_delay_us_fn)testdrv_fake_sym("fakecuda_set_delay_us");
}

long tc_violations(void)
{
    return tc_fake.violations != NULL ? tc_fake.violations() : 0;
}

long tc_ctx_creations(void)
{
    return tc_fake.ctx_creations != NULL ? tc_fake.ctx_creations() : 0;
}
