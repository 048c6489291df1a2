// SPDX-License-Identifier: BSD-3-Clause

// The frame every export runs in: the handle lookup, the panic guard that
// poisons a handle, and the mapping of Go errors to a status plus the
// thread's cucopy_last_error() message.

package main

/*
#include "capi.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime/debug"
	"unsafe"

	"github.com/cucopy/cucopy/core"
)

func setLastError(msg string) {
	if msg == "" {
		return
	}
	C.cucopy_set_last_error((*C.char)(unsafe.Pointer(unsafe.StringData(msg))), C.size_t(len(msg)))
}

// fail records err as the thread's last error and returns its status.
func fail(err error) C.int {
	setLastError(err.Error())
	return C.int(core.StatusOf(err))
}

func failf(st core.Status, op, format string, args ...any) C.int {
	return fail(&core.Error{Status: st, Op: op, Msg: fmt.Sprintf(format, args...)})
}

// result maps a core (status, error) pair to the C return value.
func result(st core.Status, err error) C.int {
	if err != nil {
		return fail(err)
	}
	return C.int(st)
}

// internalError turns a panic inside an export into CUCOPY_ERR_INTERNAL and
// poisons the handle in use (poison, if not nil), so that the bug cannot
// spread silently.
func internalError(op string, r any, poison func()) C.int {
	if poison != nil {
		poison()
	}
	fmt.Fprintf(os.Stderr, "cucopy error: internal error in %s: %v\n%s", op, r, debug.Stack())
	return failf(core.ErrInternal, op, "internal error: %v (the handle is now unusable)", r)
}

// call runs f on the live object of handle h. A panic inside becomes
// CUCOPY_ERR_INTERNAL and poisons the handle, so that the bug cannot
// spread silently; f does not escape, so the hot path does not allocate.
func call[T any](t *handleTable[T], h C.uint64_t, op string, f func(obj *T) C.int) (rc C.int) {
	return invoke(t, h, op, false, f)
}

// closing is call for the functions that end a handle: they run on a
// poisoned handle too, so that its resources can still be given back.
func closing[T any](t *handleTable[T], h C.uint64_t, op string, f func(obj *T) C.int) (rc C.int) {
	return invoke(t, h, op, true, f)
}

func invoke[T any](t *handleTable[T], h C.uint64_t, op string, poisonedOK bool, f func(obj *T) C.int) (rc C.int) {
	e := t.entry(uint64(h))
	if e == nil {
		return failf(core.ErrHandle, op, "invalid %s handle (NULL, closed or destroyed)", t.kind)
	}
	if e.poisoned.Load() && !poisonedOK {
		return failf(core.ErrHandle, op, "%s handle unusable after an earlier internal error", t.kind)
	}
	defer func() {
		if r := recover(); r != nil {
			rc = internalError(op, r, func() { t.poison(uint64(h), e) })
		}
	}()
	return f(e.obj)
}

// checkMask refuses the field_mask bits of a params or attr struct that
// this library does not know (e.g. set by a program built with a newer
// header), naming them.
func checkMask(op string, mask, known uint64) error {
	if unknown := mask &^ known; unknown != 0 {
		return &core.Error{Status: core.ErrInvalid, Op: op, Msg: fmt.Sprintf("unknown field_mask bits 0x%x", unknown)}
	}
	return nil
}

// boolInt is a Go bool as a C int flag (0 or 1).
func boolInt(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
