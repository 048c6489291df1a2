// SPDX-License-Identifier: BSD-3-Clause

package cudadrv

// NVLinks from NVML loaded with dlopen (cd_nvml.c): the one NVML query the
// library makes, for the performance model's topology. Never linked: see
// cd_nvml.c.

/*
#include <stdlib.h>
#include "cd_nvml.h"
*/
import "C"

import (
	"errors"
	"fmt"
)

// NVLinks counts the active NVLinks joining each ordered pair of the GPUs
// with these PCI bus ids ("dddd:bb:dd.f"): links[a][b] is the number of a's
// links whose far end is b, or, with none, the smaller of a's and b's links
// to NVSwitches. An error says why NVML could not be asked (not installed,
// not initialized); a bus id that does not parse is an error too.
func NVLinks(busIDs []string) ([][]int, error) {
	n := len(busIDs)
	if n == 0 {
		return nil, nil
	}
	dom := make([]C.unsigned, n)
	bus := make([]C.unsigned, n)
	dev := make([]C.unsigned, n)
	for i, id := range busIDs {
		var d, b, s, f uint
		if k, err := fmt.Sscanf(id, "%x:%x:%x.%x", &d, &b, &s, &f); err != nil || k != 4 {
			return nil, fmt.Errorf("PCI bus id %q: want dddd:bb:dd.f", id)
		}
		dom[i], bus[i], dev[i] = C.unsigned(d), C.unsigned(b), C.unsigned(s)
	}
	links := make([]C.int, n*n)
	var msg [256]C.char
	if C.cd_nvml_links(C.int(n), &dom[0], &bus[0], &dev[0], &links[0], &msg[0], C.int(len(msg))) != 0 {
		return nil, errors.New("NVML: " + C.GoString(&msg[0]))
	}
	out := make([][]int, n)
	for a := range out {
		out[a] = make([]int, n)
		for b := range out[a] {
			out[a][b] = int(links[a*n+b])
		}
	}
	return out, nil
}
