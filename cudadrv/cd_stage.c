/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pageable staging (core/stage.go): one step of a copy that core stages
 * through its pinned bounce buffers, in one call so that the context is
 * pushed, used and popped by the same thread.
 */
#include "cd_internal.h"

/* Enqueue n pieces between a bounce buffer and device-side memory on
 * stream: one cuMemcpyAsync, or for several one cuMemcpyBatchAsync where
 * the driver has it and loop is 0 (both sides are memory the driver knows,
 * so the location hints only name them), else one cuMemcpyAsync each. A
 * failed enqueue synchronizes the stream. */
static cdResult cd_stage_enqueue(cdStream stream, int32_t device, int32_t kind, int loop,
                                 const cd_piece *p, int32_t n, cd_err *err)
{
    cdResult r = CD_SUCCESS;
    if (n > 1 && n <= CD_MAX_RUN && !loop && cd.cuMemcpyBatchAsync != NULL) {
        cdDevicePtr dsts[CD_MAX_RUN], srcs[CD_MAX_RUN];
        size_t sizes[CD_MAX_RUN];
        for (int32_t i = 0; i < n; i++) {
            dsts[i] = p[i].dst;
            srcs[i] = p[i].src;
            sizes[i] = (size_t)p[i].len;
        }
        struct cd_mem_location host = {CD_MEM_LOCATION_TYPE_HOST, 0};
        struct cd_mem_location dev = {CD_MEM_LOCATION_TYPE_DEVICE, device};
        struct cd_memcpy_attr attr = {CD_MEMCPY_SRC_ACCESS_ORDER_STREAM,
                                      kind == CD_KIND_H2D ? host : dev,
                                      kind == CD_KIND_H2D ? dev : host, 0};
        size_t first = 0;
        r = cd.cuMemcpyBatchAsync(dsts, srcs, sizes, (size_t)n,
                                  (struct CUmemcpyAttributes_st *)&attr, &first, 1, stream);
        if (r != CD_SUCCESS) {
            err->entry = CD_IDX_cuMemcpyBatchAsync;
            err->result = r;
            (void)cd.cuStreamSynchronize(stream); /* the driver does not say how much it queued */
        }
        return r;
    }
    for (int32_t i = 0; r == CD_SUCCESS && i < n; i++) {
        r = cd.cuMemcpyAsync(p[i].dst, p[i].src, (size_t)p[i].len, stream);
        if (r != CD_SUCCESS) {
            err->entry = CD_IDX_cuMemcpyAsync;
            err->result = r;
            (void)cd.cuStreamSynchronize(stream);
        }
    }
    return r;
}

static cdResult cd_stage_wait(cdStream stream, cd_err *err)
{
    cdResult r = cd.cuStreamSynchronize(stream);
    if (r != CD_SUCCESS) {
        err->entry = CD_IDX_cuStreamSynchronize;
        err->result = r;
    }
    return r;
}

/* With ctx current (pushed only if needed): with CD_STAGE_WAIT_BEFORE,
 * cuStreamSynchronize (everything issued on the stream so far, the
 * previous chunk's DMA among it, has finished); then the n pieces (with
 * CD_STAGE_LOOP one cuMemcpyAsync each); then
 * with CD_STAGE_WAIT_AFTER, cuStreamSynchronize again (they have
 * finished). Whatever fails, no DMA stays in flight on the caller's or the
 * bounce buffers behind an error, except behind a failed wait. */
int cd_stage_step(uintptr_t ctx, uintptr_t stream, int32_t flags, int32_t device, int32_t kind,
                  const cd_piece *pieces, int32_t n, cd_err *err)
{
    int pushed = 0;
    err->entry = -1;
    err->result = CD_SUCCESS;
    if (cd_enter((cdContext)ctx, &pushed, err) != CD_SUCCESS)
        return -1;
    cdStream s = (cdStream)stream;
    cdResult r = CD_SUCCESS;
    if (flags & CD_STAGE_WAIT_BEFORE)
        r = cd_stage_wait(s, err);
    if (r == CD_SUCCESS && n > 0)
        r = cd_stage_enqueue(s, device, kind, (flags & CD_STAGE_LOOP) != 0, pieces, n, err);
    if (r == CD_SUCCESS && (flags & CD_STAGE_WAIT_AFTER))
        r = cd_stage_wait(s, err);
    cd_leave(pushed, err);
    return r == CD_SUCCESS ? 0 : -1; /* a failed pop stays in err only */
}
