/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal C helpers of the export layer, called from Go. Declarations only:
 * this header is included in the preamble of files with //export, which cgo
 * compiles twice.
 */
#ifndef CUCOPY_CAPI_H
#define CUCOPY_CAPI_H

#include <stddef.h>
#include <stdint.h>

#include "cucopy.h"

/* Store the thread's last-error message (copied, truncated to fit). */
void cucopy_set_last_error(const char *msg, size_t len);

/* A completion to run and its status (core.ReadyComp). */
typedef struct cucopy_ready {
    uintptr_t comp; /* cucopy_completion_t * */
    int32_t status;
    int32_t pad;
} cucopy_ready_t;

/* Account each finished operation of ready[0..n) on its cucopy_completion_t
 * and run its callback when the count reaches zero, in order, recording
 * iface_serial as an iface whose callback the thread runs meanwhile
 * (cucopy_in_callback_of); *nready (the iface's count of completions ready,
 * a Go atomic) drops by one before each. A callback may call back into Go:
 * ready and nready are Go memory holding no Go pointers, used only during
 * this call. */
void cucopy_complete_batch(const cucopy_ready_t *ready, int n, uint64_t iface_serial,
                           int64_t *nready);

/* 1 when this thread is inside a completion callback of the iface with
 * this serial (at any depth of nested callbacks), else 0. */
int cucopy_in_callback_of(uint64_t iface_serial);

/* Re-install the fault dispatcher where the host replaced Go's handlers;
 * returns how many signals it took back. */
int cucopy_signals_reassert(void);

/* The C steady state's mirrors of the endpoint and memory-handle tables
 * (capi/fast.c): their capacities are the Go tables' (capi/ep.go,
 * capi/memory.go). Go sets an index when it adds a handle and clears it
 * (handle 0) when the index stops naming a usable one. */
#define CAPI_FAST_EPS (1u << 16)
#define CAPI_FAST_MEMHS (1u << 16)
void capi_fast_ep_set(uint32_t idx, uint64_t handle, void *iface, int32_t lane);
/* desc: the handle's cudadrv.MemDesc (struct cd_mdesc), copied. */
void capi_fast_memh_set(uint32_t idx, uint64_t handle, uint64_t ctx_serial, uint64_t addr,
                        uint64_t length, int classify, const void *desc);
void capi_fast_clear(int memh, uint32_t idx);

/* Copies in the C steady state (capi/fast.c): a short copy, or a zcopy of
 * iovcnt entries (cucopy_iov_t, or cucopy_iov_memh_t with how's memh bit)
 * completing comp; how's bits are cucopyGoEpShort's (put, memh), and
 * CAPI_FAST_ZCOPY for the report. The answer is cd_fast_*'s (CD_FAST_*):
 * done there, declined (run the Go export), or failed or done with a
 * warning ((*entry, *result) for cucopyGoFastReport). */
#define CAPI_FAST_ZCOPY 4
int capi_fast_short(uint64_t ep, int how, uintptr_t buffer, uint64_t memh, size_t length,
                    uint64_t remote, uint64_t remote_memh, int32_t *entry, uint32_t *result);
int capi_fast_zcopy(uint64_t ep, int how, const void *iov, size_t iovcnt, uint64_t remote,
                    uint64_t remote_memh, uintptr_t comp, int32_t *entry, uint32_t *result);

#endif
