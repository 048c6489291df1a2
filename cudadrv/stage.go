// SPDX-License-Identifier: BSD-3-Clause

package cudadrv

// Pageable staging's one driver call (cd_stage.c); core/stage.go runs the
// pipeline.

/*
#include "cd_shim.h"
*/
import "C"

func (d *driver) StageStep(ctx Context, s Stream, wait bool, dst, src, n uint64) error {
	w := C.int32_t(0)
	if wait {
		w = 1
	}
	return d.call(func(e *C.cd_err) C.int {
		return C.cd_stage_step(C.uintptr_t(ctx), C.uintptr_t(s), w, C.uint64_t(dst), C.uint64_t(src), C.uint64_t(n), e)
	})
}
