// SPDX-License-Identifier: BSD-3-Clause

// Command capi is libcucopy.so: the C ABI of include/cucopy.h over package
// core, built with -buildmode=c-shared. The public C functions are C
// wrappers (wrappers.c) over the //export functions, one file per object
// (context.go, device.go, memory.go, iface.go, ep.go), each running in the
// frame of frame.go.
//
// init only reads configuration and sets GOMAXPROCS: the driver is loaded
// at the first cucopy_context_create, never here (dlopen from a Go init can
// deadlock when the library is itself being dlopened).
package main

// The flags of every C file and preamble of the package (fast.c calls the
// C steady state of cudadrv/cd_fast.c, hence its headers). -Werror=switch: a
// switch over an enum with no default must name every member, so a status
// added to include/cucopy.h without its cucopy_status_string case (wrappers.c)
// fails the build.

/*
#cgo CFLAGS: -I${SRCDIR}/../include -I${SRCDIR}/../cudadrv -O2 -std=gnu11 -Wall -Wextra -Werror=switch
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"github.com/cucopy/cucopy/core"
)

func main() {}

// initErr is a configuration error found at load time, reported by the
// first cucopy_context_create.
var initErr error

func init() {
	if os.Getenv("GOMAXPROCS") != "" {
		return // the user's explicit choice wins
	}
	// MPI core binding often leaves an affinity mask of one CPU, which would
	// serialize every thread calling in; keep at least 2.
	n := max(2, runtime.GOMAXPROCS(0))
	if v := os.Getenv("CUCOPY_GOMAXPROCS"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > 4096 {
			initErr = &core.Error{Status: core.ErrInvalid, Op: "context_create",
				Msg: fmt.Sprintf("CUCOPY_GOMAXPROCS=%q: want an integer from 1 to 4096", v)}
			return
		}
		n = p
	}
	runtime.GOMAXPROCS(n)
}
