// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"errors"

	"github.com/cucopy/cucopy/cudadrv"
)

// Driver errors core tells apart.

// leavingFailed reports whether a driver error came from leaving a context
// (cuCtxPopCurrent) rather than from the operation itself.
func leavingFailed(err error) bool {
	var r *cudadrv.Result
	return errors.As(err, &r) && r.Call == "cuCtxPopCurrent"
}

// queryFailed reports a failed cuEventQuery: the piece it asked about
// failed, and progress reports it on that piece's operation.
func queryFailed(err error) bool {
	var r *cudadrv.Result
	return errors.As(err, &r) && r.Call == "cuEventQuery"
}

// deinitialized says the driver is already gone (process exit): not an error.
func deinitialized(err error) bool {
	var r *cudadrv.Result
	return errors.As(err, &r) && r.Code == cudadrv.ErrorDeinitialized
}

// sticky says the context carries a sticky error (an illegal address, a
// failed launch, ...): the driver refuses every later call on it, releases
// included, until the program resets it, which frees everything anyway.
func sticky(err error) bool {
	var r *cudadrv.Result
	if !errors.As(err, &r) {
		return false
	}
	switch r.Code {
	case 700, 709, 710, 714, 715, 716, 717, 718, 719:
		return true
	}
	return false
}
