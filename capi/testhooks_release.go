// SPDX-License-Identifier: BSD-3-Clause

//go:build !cucopy_testhooks

// The release build's test hooks (testhooks.go): none.

package main

func testFaultsAtContextCreate() {}

func testFaultAtProgress() {}
