/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one list of CUDA driver entry points the project uses.
 *
 * Everything that must agree is generated from this list with X-macros:
 *   - cudadrv's table of function pointers and its loader (cudadrv/cd_load.c),
 *   - the capability names Go reports (cudadrv.Capabilities),
 *   - the fake driver's exports and its cuGetProcAddress table
 *     (tests/fakecuda: every entry must be defined there or it fails to link),
 *   - the test helpers' driver table (tests/common/testdrv.h, testdrv.c),
 *   - the cuda.h agreement test on GPU machines (tests/gpu/check_cuda_h.c).
 *
 * CD_ENTRY(name, symbol, version, use, params)
 *   name     the base name given to cuGetProcAddress (cuda.h's API name)
 *   symbol   the versioned ELF symbol cuda.h maps the name to; used for the
 *            dlsym fallback on drivers without cuGetProcAddress
 *   version  the CUDA version whose ABI `params` describes; passed to
 *            cuGetProcAddress, and the entry counts as absent on older drivers
 *   use      CD_REQUIRED: the library fails to load without it;
 *            CD_OPTIONAL: a capability, absent on some drivers;
 *            CD_TESTS:    used only by tests and tools, never by the library
 *   params   the prototype's parameter list; every entry returns cdResult
 *
 * cuda.h's enum types (CUresult, CUdevice_attribute, CUpointer_attribute, ...)
 * have no negative values, so C compilers give them type unsigned int; the
 * declarations here use unsigned int for them, which keeps the prototypes
 * compatible with cuda.h's.
 */
#ifndef CD_ENTRY
#error "define CD_ENTRY(name, symbol, version, use, params) before including entry_points.h"
#endif

CD_ENTRY(cuInit, cuInit, 2000, CD_REQUIRED, (unsigned int flags))
CD_ENTRY(cuDriverGetVersion, cuDriverGetVersion, 2020, CD_REQUIRED, (int *version))
CD_ENTRY(cuGetErrorName, cuGetErrorName, 6000, CD_REQUIRED, (cdResult error, const char **name))
CD_ENTRY(cuGetErrorString, cuGetErrorString, 6000, CD_TESTS, (cdResult error, const char **text))

CD_ENTRY(cuDeviceGet, cuDeviceGet, 2000, CD_TESTS, (cdDevice *device, int ordinal))
CD_ENTRY(cuDeviceGetCount, cuDeviceGetCount, 2000, CD_REQUIRED, (int *count))
CD_ENTRY(cuDeviceGetName, cuDeviceGetName, 2000, CD_REQUIRED, (char *name, int len, cdDevice dev))
CD_ENTRY(cuDeviceGetAttribute, cuDeviceGetAttribute, 2000, CD_REQUIRED, (int *value, unsigned int attrib, cdDevice dev))
CD_ENTRY(cuDeviceTotalMem, cuDeviceTotalMem_v2, 3020, CD_REQUIRED, (size_t *bytes, cdDevice dev))
CD_ENTRY(cuDeviceGetPCIBusId, cuDeviceGetPCIBusId, 4010, CD_REQUIRED, (char *bus_id, int len, cdDevice dev))
CD_ENTRY(cuDeviceCanAccessPeer, cuDeviceCanAccessPeer, 4000, CD_REQUIRED, (int *can_access, cdDevice dev, cdDevice peer))
CD_ENTRY(cuDeviceGetUuid, cuDeviceGetUuid_v2, 11040, CD_REQUIRED, (struct CUuuid_st *uuid, cdDevice dev))
CD_ENTRY(cuDeviceGetP2PAttribute, cuDeviceGetP2PAttribute, 8000, CD_REQUIRED, (int *value, unsigned int attrib, cdDevice src, cdDevice dst))

CD_ENTRY(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, CD_REQUIRED, (cdContext *ctx, cdDevice dev))
CD_ENTRY(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, 11000, CD_REQUIRED, (cdDevice dev))
CD_ENTRY(cuDevicePrimaryCtxGetState, cuDevicePrimaryCtxGetState, 7000, CD_REQUIRED, (cdDevice dev, unsigned int *flags, int *active))

CD_ENTRY(cuCtxGetCurrent, cuCtxGetCurrent, 4000, CD_REQUIRED, (cdContext *ctx))
CD_ENTRY(cuCtxSetCurrent, cuCtxSetCurrent, 4000, CD_TESTS, (cdContext ctx))
CD_ENTRY(cuCtxPushCurrent, cuCtxPushCurrent_v2, 4000, CD_REQUIRED, (cdContext ctx))
CD_ENTRY(cuCtxPopCurrent, cuCtxPopCurrent_v2, 4000, CD_REQUIRED, (cdContext *ctx))
CD_ENTRY(cuCtxGetDevice, cuCtxGetDevice, 2000, CD_REQUIRED, (cdDevice *device))
CD_ENTRY(cuCtxGetId, cuCtxGetId, 12000, CD_OPTIONAL, (cdContext ctx, unsigned long long *id))
CD_ENTRY(cuCtxEnablePeerAccess, cuCtxEnablePeerAccess, 4000, CD_REQUIRED, (cdContext peer, unsigned int flags))

CD_ENTRY(cuPointerGetAttributes, cuPointerGetAttributes, 7000, CD_REQUIRED, (unsigned int count, unsigned int *attributes, void **data, cdDevicePtr ptr))

CD_ENTRY(cuStreamCreate, cuStreamCreate, 2000, CD_REQUIRED, (cdStream *stream, unsigned int flags))
CD_ENTRY(cuStreamDestroy, cuStreamDestroy_v2, 4000, CD_REQUIRED, (cdStream stream))
CD_ENTRY(cuStreamSynchronize, cuStreamSynchronize, 2000, CD_REQUIRED, (cdStream stream))
CD_ENTRY(cuStreamQuery, cuStreamQuery, 2000, CD_TESTS, (cdStream stream))
CD_ENTRY(cuStreamWaitEvent, cuStreamWaitEvent, 3020, CD_REQUIRED, (cdStream stream, cdEvent event, unsigned int flags))
CD_ENTRY(cuEventCreate, cuEventCreate, 2000, CD_REQUIRED, (cdEvent *event, unsigned int flags))
CD_ENTRY(cuEventDestroy, cuEventDestroy_v2, 4000, CD_REQUIRED, (cdEvent event))
CD_ENTRY(cuEventRecord, cuEventRecord, 2000, CD_REQUIRED, (cdEvent event, cdStream stream))
CD_ENTRY(cuEventQuery, cuEventQuery, 2000, CD_REQUIRED, (cdEvent event))
CD_ENTRY(cuEventSynchronize, cuEventSynchronize, 2000, CD_TESTS, (cdEvent event))
CD_ENTRY(cuMemcpyAsync, cuMemcpyAsync, 4000, CD_REQUIRED, (cdDevicePtr dst, cdDevicePtr src, size_t bytes, cdStream stream))
CD_ENTRY(cuLaunchHostFunc, cuLaunchHostFunc, 10000, CD_REQUIRED, (cdStream stream, cdHostFn fn, void *user_data))
CD_ENTRY(cuMemAlloc, cuMemAlloc_v2, 3020, CD_REQUIRED, (cdDevicePtr *ptr, size_t bytes))
CD_ENTRY(cuMemFree, cuMemFree_v2, 3020, CD_REQUIRED, (cdDevicePtr ptr))
CD_ENTRY(cuMemAllocManaged, cuMemAllocManaged, 6000, CD_REQUIRED, (cdDevicePtr *ptr, size_t bytes, unsigned int flags))
CD_ENTRY(cuMemHostAlloc, cuMemHostAlloc, 2020, CD_REQUIRED, (void **ptr, size_t bytes, unsigned int flags))
CD_ENTRY(cuMemFreeHost, cuMemFreeHost, 2000, CD_REQUIRED, (void *ptr))
CD_ENTRY(cuMemHostRegister, cuMemHostRegister_v2, 6050, CD_REQUIRED, (void *ptr, size_t bytes, unsigned int flags))
CD_ENTRY(cuMemHostUnregister, cuMemHostUnregister, 4000, CD_REQUIRED, (void *ptr))
CD_ENTRY(cuMemRangeGetAttribute, cuMemRangeGetAttribute, 8000, CD_REQUIRED, (void *data, size_t data_size, unsigned int attribute, cdDevicePtr ptr, size_t count))
CD_ENTRY(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000, CD_OPTIONAL, (cdMemHandle *handle, void *addr))
CD_ENTRY(cuMemRelease, cuMemRelease, 10020, CD_OPTIONAL, (cdMemHandle handle))
CD_ENTRY(cuMemGetAllocationPropertiesFromHandle, cuMemGetAllocationPropertiesFromHandle, 10020, CD_OPTIONAL, (struct cd_mem_alloc_prop *prop, cdMemHandle handle))
CD_ENTRY(cuMemGetAccess, cuMemGetAccess, 10020, CD_OPTIONAL, (unsigned long long *flags, const struct cd_mem_location *location, cdDevicePtr ptr))
CD_ENTRY(cuMemPoolGetAccess, cuMemPoolGetAccess, 11020, CD_OPTIONAL, (unsigned int *flags, struct CUmemPoolHandle_st *pool, struct cd_mem_location *location))
CD_ENTRY(cuMemcpy2DAsync, cuMemcpy2DAsync_v2, 3020, CD_REQUIRED, (const struct cd_memcpy2d *copy, cdStream stream))
CD_ENTRY(cuMemcpyBatchAsync, cuMemcpyBatchAsync_v2, 13000, CD_OPTIONAL, (cdDevicePtr *dsts, cdDevicePtr *srcs, size_t *sizes, size_t count, struct CUmemcpyAttributes_st *attrs, size_t *attr_idxs, size_t num_attrs, cdStream stream))

CD_ENTRY(cuCtxCreate, cuCtxCreate_v2, 3020, CD_TESTS, (cdContext *ctx, unsigned int flags, cdDevice dev))
CD_ENTRY(cuCtxDestroy, cuCtxDestroy_v2, 4000, CD_TESTS, (cdContext ctx))
CD_ENTRY(cuCtxSynchronize, cuCtxSynchronize, 2000, CD_TESTS, (void))
CD_ENTRY(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2, 11000, CD_TESTS, (cdDevice dev))
CD_ENTRY(cuMemcpyHtoD, cuMemcpyHtoD_v2, 3020, CD_TESTS, (cdDevicePtr dst, const void *src, size_t bytes))
CD_ENTRY(cuMemcpyDtoH, cuMemcpyDtoH_v2, 3020, CD_TESTS, (void *dst, cdDevicePtr src, size_t bytes))
CD_ENTRY(cuMemcpyDtoD, cuMemcpyDtoD_v2, 3020, CD_TESTS, (cdDevicePtr dst, cdDevicePtr src, size_t bytes))
CD_ENTRY(cuMemsetD8, cuMemsetD8_v2, 3020, CD_TESTS, (cdDevicePtr dst, unsigned char value, size_t count))
CD_ENTRY(cuMemAddressReserve, cuMemAddressReserve, 10020, CD_TESTS, (cdDevicePtr *ptr, size_t size, size_t alignment, cdDevicePtr addr, unsigned long long flags))
CD_ENTRY(cuMemAddressFree, cuMemAddressFree, 10020, CD_TESTS, (cdDevicePtr ptr, size_t size))
CD_ENTRY(cuMemCreate, cuMemCreate, 10020, CD_TESTS, (cdMemHandle *handle, size_t size, const struct cd_mem_alloc_prop *prop, unsigned long long flags))
CD_ENTRY(cuMemMap, cuMemMap, 10020, CD_TESTS, (cdDevicePtr ptr, size_t size, size_t offset, cdMemHandle handle, unsigned long long flags))
CD_ENTRY(cuMemUnmap, cuMemUnmap, 10020, CD_TESTS, (cdDevicePtr ptr, size_t size))
CD_ENTRY(cuMemSetAccess, cuMemSetAccess, 10020, CD_TESTS, (cdDevicePtr ptr, size_t size, const struct cd_mem_access_desc *desc, size_t count))
CD_ENTRY(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity, 10020, CD_TESTS, (size_t *granularity, const struct cd_mem_alloc_prop *prop, unsigned int option))
CD_ENTRY(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020, CD_TESTS, (struct CUmemPoolHandle_st **pool, cdDevice dev))
CD_ENTRY(cuMemPoolSetAccess, cuMemPoolSetAccess, 11020, CD_TESTS, (struct CUmemPoolHandle_st *pool, const struct cd_mem_access_desc *map, size_t count))
CD_ENTRY(cuMemAllocAsync, cuMemAllocAsync, 11020, CD_TESTS, (cdDevicePtr *ptr, size_t bytes, cdStream stream))
CD_ENTRY(cuMemFreeAsync, cuMemFreeAsync, 11020, CD_TESTS, (cdDevicePtr ptr, cdStream stream))
CD_ENTRY(cuMemAdvise, cuMemAdvise_v2, 12020, CD_TESTS, (cdDevicePtr ptr, size_t count, unsigned int advice, struct cd_mem_location location))
/* A faulting kernel, for the sticky-error test (tests/c/test_sick_context.c).
 * cuLaunchKernel: cuda.h maps it to cuLaunchKernel_ptsz only under
 * CUDA_API_PER_THREAD_DEFAULT_STREAM; the default symbol is unversioned. */
CD_ENTRY(cuModuleLoadData, cuModuleLoadData, 2000, CD_TESTS, (struct CUmod_st **module, const void *image))
CD_ENTRY(cuModuleGetFunction, cuModuleGetFunction, 2000, CD_TESTS, (struct CUfunc_st **function, struct CUmod_st *module, const char *name))
CD_ENTRY(cuLaunchKernel, cuLaunchKernel, 4000, CD_TESTS, (struct CUfunc_st *f, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z, unsigned int block_x, unsigned int block_y, unsigned int block_z, unsigned int shared_bytes, cdStream stream, void **params, void **extra))
CD_ENTRY(cuModuleUnload, cuModuleUnload, 2000, CD_TESTS, (struct CUmod_st *module))
