// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"errors"

	"github.com/cucopy/cucopy/cudadrv"
)

// The driver errors core tells apart, by the typed fields and predicates of
// cudadrv.Result (never by message or call-name strings).

// driverResult is err's *cudadrv.Result, nil when it holds none.
func driverResult(err error) *cudadrv.Result {
	var r *cudadrv.Result
	if errors.As(err, &r) {
		return r
	}
	return nil
}

// resultIs reports a driver error with CUresult code.
func resultIs(err error, code uint32) bool {
	r := driverResult(err)
	return r != nil && r.Code == code
}

// queryFailed reports a failed cuEventQuery: the piece it asked about
// failed, and progress reports it on that piece's operation.
func queryFailed(err error) bool {
	r := driverResult(err)
	return r != nil && r.Entry == cudadrv.EntryEventQuery
}

// deinitialized says the driver is already gone (process exit): not an error.
func deinitialized(err error) bool {
	r := driverResult(err)
	return r != nil && r.Deinitialized()
}

// sticky says the context carries a sticky error (an illegal address, a
// failed launch, ...): the driver refuses every later call on it, releases
// included, until the program resets it, which frees everything anyway.
func sticky(err error) bool {
	r := driverResult(err)
	return r != nil && r.Sticky()
}
