// SPDX-License-Identifier: BSD-3-Clause

//go:build cucopy_testhooks

// Test hooks: CUCOPY_TEST_FAULT makes an export dereference nil on purpose,
// so that tests/c/test_signal_recovery can check that a fault inside the
// library comes back as CUCOPY_ERR_INTERNAL under a host's signal handlers;
// cucopy_test_crossings (capi/wrappers.c, built with CUCOPY_TESTHOOKS from
// the CFLAGS below) counts the calls into Go and, through
// cucopyGoTestGoToCCalls, the calls out of it, for tests/c/test_crossings.
//
// Only in the test build (go build -tags cucopy_testhooks:
// BUILD_DIR/testhooks/libcucopy.so.0, which that test loads through
// LD_LIBRARY_PATH); the library that is installed and that every other
// test loads has testhooks_release.go instead, and CTest
// release_without_test_hooks checks that it does not know the variable.
// The two differ in these two functions, the crossing counters and their
// export only. Unset or any other value
// does nothing.

package main

/*
#cgo CFLAGS: -DCUCOPY_TESTHOOKS
#include <stdint.h>
*/
import "C"

import (
	"runtime/metrics"
	"sync/atomic"
)

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

// cucopyGoTestGoToCCalls is the process's Go-to-C calls so far (the Go
// runtime counts every cgo call).
//
//export cucopyGoTestGoToCCalls
func cucopyGoTestGoToCCalls() C.uint64_t {
	s := [1]metrics.Sample{{Name: "/cgo/go-to-c-calls:calls"}}
	metrics.Read(s[:])
	return C.uint64_t(s[0].Value.Uint64())
}
