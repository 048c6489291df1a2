// SPDX-License-Identifier: BSD-3-Clause

package cudadrv

// Pageable staging's one driver call (cd_stage.c); core/stage.go runs the
// pipeline.

/*
#cgo noescape cd_stage_step
#cgo nocallback cd_stage_step
#include "cd_shim.h"
*/
import "C"

import "unsafe"

func (d *driver) StageStep(ctx Context, s Stream, flags uint32, device, kind int32, pieces []Piece) error {
	var p *C.cd_piece
	if len(pieces) > 0 {
		p = (*C.cd_piece)(unsafe.Pointer(&pieces[0]))
	}
	var e C.cd_err // on the stack: noescape
	if C.cd_stage_step(C.uintptr_t(ctx), C.uintptr_t(s), C.int32_t(flags), C.int32_t(device),
		C.int32_t(kind), p, C.int32_t(len(pieces)), &e) == 0 {
		return nil
	}
	return d.Error(goCallError(e))
}
