/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pageable staging (core/stage.go): one step of a copy that core stages
 * through its pinned bounce buffers, in one call so that the context is
 * pushed, used and popped by the same thread.
 */
#include "cd_internal.h"

/* With ctx current (pushed only if needed): with wait, cuStreamSynchronize
 * (everything issued on the stream so far, the previous chunk's DMA among
 * it, has finished); then with len > 0, cuMemcpyAsync(dst, src, len) on the
 * stream. A failed enqueue synchronizes the stream, so no DMA stays in
 * flight on the caller's or the bounce buffers behind an error. */
int cd_stage_step(uintptr_t ctx, uintptr_t stream, int32_t wait, uint64_t dst, uint64_t src,
                  uint64_t len, cd_err *err)
{
    int pushed = 0;
    err->entry = -1;
    err->result = CD_SUCCESS;
    if (cd_enter((cdContext)ctx, &pushed, err) != CD_SUCCESS)
        return -1;
    cdResult r = CD_SUCCESS;
    if (wait) {
        r = cd.cuStreamSynchronize((cdStream)stream);
        if (r != CD_SUCCESS) {
            err->entry = CD_IDX_cuStreamSynchronize;
            err->result = r;
        }
    }
    if (r == CD_SUCCESS && len > 0) {
        r = cd.cuMemcpyAsync(dst, src, (size_t)len, (cdStream)stream);
        if (r != CD_SUCCESS) {
            err->entry = CD_IDX_cuMemcpyAsync;
            err->result = r;
            (void)cd.cuStreamSynchronize((cdStream)stream);
        }
    }
    cd_leave(pushed, err);
    return r == CD_SUCCESS ? 0 : -1; /* a failed pop stays in err only */
}
