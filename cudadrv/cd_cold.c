/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The cold calls: contexts, primary contexts, peer access, streams, events
 * and device queries, one C function each. Each returns 0, or -1 with the
 * failed call in *err; a context is pushed only where the driver needs one.
 */
#include <stdint.h>

#include "cd_internal.h"

#define CD_SIMPLE(err_, idx_, call_)                                                   \
    do {                                                                               \
        (err_)->entry = -1;                                                            \
        (err_)->result = CD_SUCCESS;                                                   \
        CD_CALL(err_, idx_, call_);                                                    \
        return 0;                                                                      \
    out:                                                                               \
        return -1;                                                                     \
    } while (0)

int cd_ctx_current(uintptr_t *ctx, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuCtxGetCurrent, cd.cuCtxGetCurrent((cdContext *)ctx));
}

int cd_ctx_id(uintptr_t ctx, uint64_t *id, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuCtxGetId, cd.cuCtxGetId((cdContext)ctx, (unsigned long long *)id));
}

int cd_ctx_device(uintptr_t ctx, int32_t *device, cd_err *err)
{
    CD_IN_CTX(ctx, err, CD_IDX_cuCtxGetDevice, cd.cuCtxGetDevice((cdDevice *)device));
}

int cd_primary_state(int32_t device, int32_t *active, cd_err *err)
{
    unsigned int flags = 0;
    CD_SIMPLE(err, CD_IDX_cuDevicePrimaryCtxGetState,
              cd.cuDevicePrimaryCtxGetState(device, &flags, (int *)active));
}

int cd_primary_retain(int32_t device, uintptr_t *ctx, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuDevicePrimaryCtxRetain,
              cd.cuDevicePrimaryCtxRetain((cdContext *)ctx, device));
}

int cd_primary_release(int32_t device, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuDevicePrimaryCtxRelease, cd.cuDevicePrimaryCtxRelease(device));
}

int cd_enable_peer(uintptr_t ctx, uintptr_t peer, cd_err *err)
{
    CD_IN_CTX(ctx, err, CD_IDX_cuCtxEnablePeerAccess, cd.cuCtxEnablePeerAccess((cdContext)peer, 0));
}

int cd_stream_create(uintptr_t ctx, uintptr_t *stream, cd_err *err)
{
    CD_IN_CTX(ctx, err, CD_IDX_cuStreamCreate,
              cd.cuStreamCreate((cdStream *)stream, CD_STREAM_NON_BLOCKING));
}

int cd_stream_destroy(uintptr_t ctx, uintptr_t stream, cd_err *err)
{
    CD_IN_CTX(ctx, err, CD_IDX_cuStreamDestroy, cd.cuStreamDestroy((cdStream)stream));
}

int cd_stream_sync(uintptr_t ctx, uintptr_t stream, cd_err *err)
{
    CD_IN_CTX(ctx, err, CD_IDX_cuStreamSynchronize, cd.cuStreamSynchronize((cdStream)stream));
}

int cd_stream_wait_event(uintptr_t ctx, uintptr_t stream, uintptr_t event, cd_err *err)
{
    CD_IN_CTX(ctx, err, CD_IDX_cuStreamWaitEvent,
              cd.cuStreamWaitEvent((cdStream)stream, (cdEvent)event, 0));
}

int cd_event_create(uintptr_t ctx, uintptr_t *event, cd_err *err)
{
    CD_IN_CTX(ctx, err, CD_IDX_cuEventCreate,
              cd.cuEventCreate((cdEvent *)event, CD_EVENT_DISABLE_TIMING));
}

int cd_event_destroy(uintptr_t ctx, uintptr_t event, cd_err *err)
{
    CD_IN_CTX(ctx, err, CD_IDX_cuEventDestroy, cd.cuEventDestroy((cdEvent)event));
}

int cd_device_count(int32_t *count, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuDeviceGetCount, cd.cuDeviceGetCount((int *)count));
}

int cd_device_name(int32_t device, char *name, int32_t len, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuDeviceGetName, cd.cuDeviceGetName(name, len, device));
}

int cd_device_attr(int32_t device, uint32_t attr, int32_t *value, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuDeviceGetAttribute, cd.cuDeviceGetAttribute((int *)value, attr, device));
}

int cd_device_total_mem(int32_t device, uint64_t *bytes, cd_err *err)
{
    size_t b = 0;
    err->entry = -1;
    err->result = CD_SUCCESS;
    CD_CALL(err, CD_IDX_cuDeviceTotalMem, cd.cuDeviceTotalMem(&b, device));
    *bytes = b;
    return 0;
out:
    return -1;
}

int cd_device_pci_bus_id(int32_t device, char *bus_id, int32_t len, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuDeviceGetPCIBusId, cd.cuDeviceGetPCIBusId(bus_id, len, device));
}

int cd_can_access_peer(int32_t device, int32_t peer, int32_t *can, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuDeviceCanAccessPeer, cd.cuDeviceCanAccessPeer((int *)can, device, peer));
}

int cd_device_uuid(int32_t device, uint8_t *uuid, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuDeviceGetUuid, cd.cuDeviceGetUuid((struct CUuuid_st *)uuid, device));
}

int cd_p2p_attr(int32_t device, int32_t peer, uint32_t attr, int32_t *value, cd_err *err)
{
    CD_SIMPLE(err, CD_IDX_cuDeviceGetP2PAttribute,
              cd.cuDeviceGetP2PAttribute((int *)value, attr, device, peer));
}
