// SPDX-License-Identifier: BSD-3-Clause

// Test hooks: CUCOPY_TEST_FAULT makes an export dereference nil on purpose,
// so that tests/c/test_signal_recovery can check that a fault inside the
// library comes back as CUCOPY_ERR_INTERNAL under a host's signal handlers.
//
// They stay in the shipped library: that test (and tests/run-gpu.sh on real
// GPUs) must exercise the very .so programs load, with its signal
// dispatcher, and leaving them out of releases would need a second
// c-shared build that is tested instead of the one shipped. Their cost is
// one getenv in cucopy_context_create and one atomic load per
// cucopy_iface_progress; unset or any other value does nothing.

package main

import "sync/atomic"

// testFaultSink keeps the deliberate nil dereferences of CUCOPY_TEST_FAULT
// from being optimized away; testFaultProgress arms the one in the next
// iface_progress (CUCOPY_TEST_FAULT=progress_nil_deref).
var (
	testFaultSink     int
	testFaultProgress atomic.Bool
)

// testFaultsAtContextCreate runs in cucopy_context_create after the driver
// loaded: it arms progress_nil_deref, or faults now for nil_deref.
func testFaultsAtContextCreate() {
	if getenv("CUCOPY_TEST_FAULT") == "progress_nil_deref" {
		testFaultProgress.Store(true)
	}
	if getenv("CUCOPY_TEST_FAULT") == "nil_deref" {
		var p *int
		testFaultSink = *p // test hook: a fault inside the library must come back as a status
	}
}

// testFaultAtProgress faults once inside cucopy_iface_progress, an export
// holding an iface handle, when progress_nil_deref armed it.
func testFaultAtProgress() {
	if testFaultProgress.Load() && testFaultProgress.CompareAndSwap(true, false) {
		var p *int
		testFaultSink = *p // test hook: a fault inside an export with a handle
	}
}
