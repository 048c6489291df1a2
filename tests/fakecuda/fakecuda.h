/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file fakecuda.h
 * @brief Control and accounting API of the fake CUDA driver (tests only).
 *
 * The fake libcuda.so.1 exports these functions next to the driver entry
 * points. Tests must find them with dlsym() at run time, never link them:
 * the same test binaries run against the real driver, which lacks them, so a
 * test that needs one skips (or checks less) when dlsym() returns NULL.
 * fakecuda_is_fake() is the canonical probe.
 *
 * All functions are thread-safe. Names are entry-point base names as in
 * cudadrv/entry_points.h ("cuMemcpyAsync", not "cuMemcpyAsync_v2"), plus
 * "cuGetProcAddress" for both cuGetProcAddress variants.
 *
 * Environment knobs (read when the fake is loaded):
 *   FAKECUDA_DEVICES=N          number of devices, 0..16 (default 2; 0: cuInit
 *                               fails with CUDA_ERROR_NO_DEVICE)
 *   FAKECUDA_DRIVER_VERSION=V   cuDriverGetVersion (default 13000); entries
 *                               whose version is above V are absent from
 *                               cuGetProcAddress (an older driver)
 *   FAKECUDA_NO_PEER=1          no peer access between devices
 *   FAKECUDA_NO_CTX_GETID=1     cuCtxGetId absent (a pre-12 driver)
 *   FAKECUDA_DELAY_US=U         every stream operation waits U microseconds
 *                               on its worker before it runs
 *   FAKECUDA_FAIL=name:nth:code[,...]   the nth call of name (counted from
 *                               load) fails with code and does nothing
 *   FAKECUDA_STRICT_EXIT=1      exit status 97 at process exit when any
 *                               violation was counted
 *   FAKECUDA_QUIET=1            no "VIOLATION" lines on stderr (counting goes on)
 *
 * Memory, as cuPointerGetAttributes reports it (TYPE, CONTEXT, DEVICE_ORDINAL,
 * MEMPOOL_HANDLE; RANGE_* is the allocation, for VMM the one cuMemMap mapping):
 *   cuMemAlloc          DEVICE, its context, its device, NULL
 *   cuMemAllocManaged   DEVICE + IS_MANAGED, its context, its device, NULL
 *   cuMemHostAlloc, cuMemHostRegister   HOST, its context, its device, NULL
 *   cuMemAllocAsync     DEVICE, NULL, the stream's device, that device's
 *                       default pool (usable at once)
 *   cuMemCreate + cuMemMap   DEVICE, NULL, the location's device or -2
 *                       (CD_DEVICE_INVALID) when host-located, NULL
 *   anything else       0, NULL, -2: malloc memory, and freed memory of every
 *                       kind (the fake never reuses an address)
 * Device, pool and VMM memory is not CPU-accessible at its address (a read
 * segfaults); host-located VMM memory becomes so when cuMemSetAccess gives the
 * host access. A copy touching freed memory, a range past the end of its
 * allocation, or VMM memory its issuing context's device has no access to
 * (cuMemSetAccess: READ to read, READWRITE to write) fails with
 * CUDA_ERROR_INVALID_VALUE and counts a violation. Managed preferred
 * locations (cuMemAdvise) are kept per allocation, not per page.
 *
 * Modules and kernels (tests only): cuModuleLoadData takes a NUL-terminated
 * PTX text (it must contain ".version" and ".target", else
 * CUDA_ERROR_INVALID_IMAGE; no cubin or fatbin) and needs a current context,
 * whose module it becomes. cuModuleGetFunction finds `.entry NAME` in that
 * text (CUDA_ERROR_NOT_FOUND otherwise). Nothing is compiled or executed:
 * cuLaunchKernel (grid and block dimensions >= 1, at most 1024 threads a
 * block, at most 48 KiB of shared memory; kernel parameters are ignored)
 * queues an operation on the stream, whose context must be current and own
 * the function's module, as for copies. When the operation runs, a kernel
 * whose name starts with "cucopy_fault" is taken to store to address 0 (the
 * PTX of tests/c/test_sick_context.c does): it gives the stream's context the
 * sticky error CUDA_ERROR_ILLEGAL_ADDRESS, exactly as
 * fakecuda_poison_context() does, which the synchronization of that work then
 * reports. Every other kernel does nothing. cuModuleUnload works on a context
 * with a sticky error; a module or function used after its unload or its
 * context's death is a violation.
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include "cd_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Returns 1: the loaded driver is the fake. */
int fakecuda_is_fake(void);

/** Calls of the entry point @p name since load or the last
 *  fakecuda_reset_counters(); -1 for an unknown name. Failed and
 *  fault-injected calls count too. */
long fakecuda_calls(const char *name);

/** Streams created by cuStreamCreate, not destroyed, whose context is alive;
 *  in context @p ctx, or in all contexts when @p ctx is NULL. A stream whose
 *  context died is not counted: the context took it along. */
int fakecuda_live_streams(cdContext ctx);

/** Events, counted like fakecuda_live_streams(). */
int fakecuda_live_events(cdContext ctx);

/** Violations counted so far: uses the real driver answers with an error or
 *  where it has undefined behaviour (a dead context's stream, a stream used
 *  under another context, a CUDA call inside a host function, ...). Each one
 *  also printed a "fakecuda: VIOLATION: ..." line on stderr. */
long fakecuda_violations(void);

/** How many contexts came to life: cuCtxCreate calls plus activations of a
 *  primary context by cuDevicePrimaryCtxRetain. */
long fakecuda_ctx_creations(void);

/** Makes the @p nth call of @p name from now on (1 = the next one) fail with
 *  CUresult @p code and do nothing. Several faults may be pending at once.
 *  @p nth <= 0 cancels the pending faults of @p name; a NULL @p name cancels
 *  all. An unknown name is reported on stderr and ignored. */
void fakecuda_fail(const char *name, int nth, int code);

/** A sticky error: every later operation on the live context @p ctx (stream
 *  and event creation, copies, records, host functions, queries and
 *  synchronizations of its streams and events, allocations) fails with
 *  @p code; queued copies of its streams are skipped. Destroying its streams
 *  and events still succeeds. The error ends with the context (destroy, or
 *  reset of a primary context). @p code 0 clears it. */
void fakecuda_poison_context(cdContext ctx, int code);

/** Zeroes the call counters, the violation counter and the context-creation
 *  counter. Pending faults and poisons stay. */
void fakecuda_reset_counters(void);

/** Live allocations of every kind: cuMemAlloc, cuMemAllocManaged,
 *  cuMemHostAlloc and cuMemAllocAsync memory not freed (and whose context, if
 *  it has one, is alive), plus cuMemCreate allocations whose memory still
 *  exists (a handle reference or a mapping left). Registered host ranges are
 *  not allocations: see fakecuda_registered_ranges(). */
long fakecuda_live_allocations(void);

/** Host ranges registered by cuMemHostRegister, not unregistered, whose
 *  registering context is alive. */
long fakecuda_registered_ranges(void);

/** Sets the per-operation delay of FAKECUDA_DELAY_US at run time. */
void fakecuda_set_delay_us(unsigned int us);

/** Signatures for dlsym() users. */
typedef int (*fakecuda_is_fake_fn)(void);
typedef long (*fakecuda_calls_fn)(const char *name);
typedef int (*fakecuda_live_fn)(cdContext ctx);
typedef long (*fakecuda_counter_fn)(void);
typedef void (*fakecuda_fail_fn)(const char *name, int nth, int code);
typedef void (*fakecuda_poison_context_fn)(cdContext ctx, int code);
typedef void (*fakecuda_reset_counters_fn)(void);
typedef void (*fakecuda_set_delay_us_fn)(unsigned int us);

#ifdef __cplusplus
}
#endif

#endif
