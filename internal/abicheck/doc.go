// SPDX-License-Identifier: BSD-3-Clause

// Package abicheck holds tests that the copies of include/cucopy.h kept in
// Go agree with the header where no compiler sees both sides. Go cannot list
// the members of a C enum: capi/abi.go checks each status it names against
// the header at compile time, but only a test can tell that a status of the
// header has no Go constant at all.
package abicheck
