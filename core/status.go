// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"errors"
	"fmt"
)

// Status mirrors cucopy_status_t (include/cucopy.h); capi checks the values.
type Status int32

const (
	OK               Status = 0
	InProgress       Status = 1
	ErrInvalid       Status = -1
	ErrHandle        Status = -2
	ErrNoMemory      Status = -3
	ErrNoResource    Status = -4
	ErrBusy          Status = -5
	ErrUnsupport     Status = -6
	ErrNoDevice      Status = -7
	ErrNoDriver      Status = -8
	ErrCUDA          Status = -9
	ErrForked        Status = -10
	ErrInternal      Status = -11
	ErrOutOfRange    Status = -12
	ErrAlreadyExists Status = -13
	ErrCanceled      Status = -14
)

// Error is every error core returns: a status for the C caller and a
// message for cucopy_last_error.
type Error struct {
	Status Status
	Op     string // the public operation, e.g. "put_zcopy"
	Msg    string
	Err    error // the driver's *cudadrv.Result, when a driver call failed
}

func (e *Error) Error() string {
	switch {
	case e.Err != nil && e.Msg != "":
		return fmt.Sprintf("%s: %s: %v", e.Op, e.Msg, e.Err)
	case e.Err != nil:
		return fmt.Sprintf("%s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Op, e.Msg)
}

func (e *Error) Unwrap() error { return e.Err }

func errorf(st Status, op, format string, args ...any) error {
	return &Error{Status: st, Op: op, Msg: fmt.Sprintf(format, args...)}
}

func driverError(op, msg string, err error) error {
	return &Error{Status: ErrCUDA, Op: op, Msg: msg, Err: err}
}

// StatusOf maps an error to the status the C caller sees.
func StatusOf(err error) Status {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return ErrInternal
}
