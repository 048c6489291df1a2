/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Self-test of the fake driver: loads it the way cudadrv does (dlopen, then
 * cuGetProcAddress for every entry of entry_points.h) and checks the
 * behaviour the project's tests rely on.
 *
 * usage: fakecuda_selftest /path/to/fake/libcuda.so.1
 * With FAKECUDA_NO_CTX_GETID=1 in the environment it checks that cuCtxGetId
 * is hidden instead of using it.
 */
#define _GNU_SOURCE

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cd_types.h"
#include "fakecuda.h"

static struct {
#define CD_ENTRY(name, symbol, version, use, params) cdResult (*name) params;
#include "entry_points.h"
#undef CD_ENTRY
} drv;

static struct {
    fakecuda_is_fake_fn is_fake;
    fakecuda_calls_fn calls;
    fakecuda_live_fn live_streams;
    fakecuda_live_fn live_events;
    fakecuda_counter_fn violations;
    fakecuda_counter_fn ctx_creations;
    fakecuda_fail_fn fail;
    fakecuda_poison_context_fn poison;
    fakecuda_reset_counters_fn reset_counters;
    fakecuda_set_delay_us_fn set_delay_us;
    fakecuda_counter_fn live_allocations;
    fakecuda_counter_fn registered_ranges;
} fk;

static int failures;
static int no_ctx_getid;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
            failures++;                                                                \
        }                                                                              \
    } while (0)

#define CHECK_RC(call, want)                                                           \
    do {                                                                               \
        cdResult rc_ = (call);                                                         \
        if (rc_ != (cdResult)(want)) {                                                 \
            fprintf(stderr, "%s:%d: %s returned %u, want %u\n", __FILE__, __LINE__,    \
                    #call, rc_, (unsigned)(want));                                     \
            failures++;                                                                \
        }                                                                              \
    } while (0)

#define OK(call) CHECK_RC(call, CD_SUCCESS)

/* Expects @p call to fail with @p want and count exactly one violation. */
#define VIOLATES(call, want)                                                           \
    do {                                                                               \
        long before_ = fk.violations();                                                \
        CHECK_RC(call, want);                                                          \
        CHECK(fk.violations() == before_ + 1);                                         \
    } while (0)

static void *load(const char *path)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        exit(1);
    }
    cd_pfn_cuGetProcAddress_v2 gpa = (cd_pfn_cuGetProcAddress_v2)dlsym(lib, "cuGetProcAddress_v2");
    if (gpa == NULL) {
        fprintf(stderr, "no cuGetProcAddress_v2\n");
        exit(1);
    }
    unsigned status = 99;
#define CD_ENTRY(name, symbol, version, use, params)                                      \
    {                                                                                      \
        void *pfn = NULL;                                                                  \
        cdResult rc = gpa(#name, &pfn, 13000, CD_GET_PROC_ADDRESS_DEFAULT, &status);       \
        if (no_ctx_getid && strcmp(#name, "cuCtxGetId") == 0) {                            \
            CHECK(rc == CD_ERROR_NOT_FOUND && pfn == NULL);                                \
            CHECK(status == CD_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);                         \
        } else {                                                                           \
            CHECK(rc == CD_SUCCESS && status == CD_GET_PROC_ADDRESS_SUCCESS);              \
            CHECK(pfn == dlsym(lib, #symbol));                                             \
            memcpy(&drv.name, &pfn, sizeof pfn);                                           \
        }                                                                                  \
    }
#include "entry_points.h"
#undef CD_ENTRY
    void *pfn = &pfn;
    CHECK_RC(gpa("cuNoSuchThing", &pfn, 13000, 0, &status), CD_ERROR_NOT_FOUND);
    CHECK(pfn == NULL && status == CD_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CHECK_RC(gpa("cuMemcpyBatchAsync", &pfn, 12080, 0, &status), CD_ERROR_NOT_FOUND);
    CHECK(pfn == NULL && status == CD_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    CHECK_RC(gpa("cuGetProcAddress", &pfn, 12000, 0, &status), CD_SUCCESS);
    CHECK(pfn == (void *)gpa);
    CHECK(dlsym(lib, "fk_enter") == NULL); /* internals stay hidden */

#define FK_SYM(field, name) memcpy(&fk.field, &(void *){dlsym(lib, name)}, sizeof(void *))
    FK_SYM(is_fake, "fakecuda_is_fake");
    FK_SYM(calls, "fakecuda_calls");
    FK_SYM(live_streams, "fakecuda_live_streams");
    FK_SYM(live_events, "fakecuda_live_events");
    FK_SYM(violations, "fakecuda_violations");
    FK_SYM(ctx_creations, "fakecuda_ctx_creations");
    FK_SYM(fail, "fakecuda_fail");
    FK_SYM(poison, "fakecuda_poison_context");
    FK_SYM(reset_counters, "fakecuda_reset_counters");
    FK_SYM(set_delay_us, "fakecuda_set_delay_us");
    FK_SYM(live_allocations, "fakecuda_live_allocations");
    FK_SYM(registered_ranges, "fakecuda_registered_ranges");
#undef FK_SYM
    if (fk.is_fake == NULL || fk.set_delay_us == NULL || fk.live_allocations == NULL ||
        fk.registered_ranges == NULL || !fk.is_fake()) {
        fprintf(stderr, "not the fake driver\n");
        exit(1);
    }
    return lib;
}

static void test_init_and_devices(void)
{
    int n = 0;
    CHECK_RC(drv.cuDeviceGetCount(&n), CD_ERROR_NOT_INITIALIZED);
    int version = 0;
    OK(drv.cuDriverGetVersion(&version));
    CHECK(version == 13000);
    const char *text = NULL;
    OK(drv.cuGetErrorName(CD_ERROR_INVALID_VALUE, &text));
    CHECK(text && strcmp(text, "CUDA_ERROR_INVALID_VALUE") == 0);
    OK(drv.cuGetErrorName(CD_ERROR_CONTEXT_IS_DESTROYED, &text));
    CHECK(text && strcmp(text, "CUDA_ERROR_CONTEXT_IS_DESTROYED") == 0);
    OK(drv.cuGetErrorString(CD_SUCCESS, &text));
    CHECK(text && strcmp(text, "no error") == 0);
    CHECK_RC(drv.cuGetErrorName(12345, &text), CD_ERROR_INVALID_VALUE);

    CHECK_RC(drv.cuInit(1), CD_ERROR_INVALID_VALUE);
    OK(drv.cuInit(0));
    OK(drv.cuDeviceGetCount(&n));
    CHECK(n == 2);
    char name[64];
    char bus0[32];
    char bus1[32];
    OK(drv.cuDeviceGetName(name, sizeof name, 1));
    CHECK(strcmp(name, "FakeCUDA H200 #1") == 0);
    OK(drv.cuDeviceGetPCIBusId(bus0, sizeof bus0, 0));
    OK(drv.cuDeviceGetPCIBusId(bus1, sizeof bus1, 1));
    CHECK(strcmp(bus0, bus1) != 0 && strlen(bus0) == 12);
    int major = 0;
    OK(drv.cuDeviceGetAttribute(&major, CD_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
    CHECK(major == 9);
    size_t total = 0;
    OK(drv.cuDeviceTotalMem(&total, 0));
    CHECK(total == (size_t)80 << 30);
    int peer = -1;
    OK(drv.cuDeviceCanAccessPeer(&peer, 0, 1));
    CHECK(peer == 1);
    OK(drv.cuDeviceCanAccessPeer(&peer, 0, 0));
    CHECK(peer == 0);
    cdDevice dev = -1;
    CHECK_RC(drv.cuDeviceGet(&dev, 2), CD_ERROR_INVALID_DEVICE);

    /* UUIDs: 16 bytes, distinct per device, stable. */
    unsigned char u0[16];
    unsigned char u1[16];
    unsigned char again[16];
    OK(drv.cuDeviceGetUuid((struct CUuuid_st *)u0, 0));
    OK(drv.cuDeviceGetUuid((struct CUuuid_st *)u1, 1));
    OK(drv.cuDeviceGetUuid((struct CUuuid_st *)again, 0));
    CHECK(memcmp(u0, u1, 16) != 0 && memcmp(u0, again, 16) == 0);
    CHECK_RC(drv.cuDeviceGetUuid((struct CUuuid_st *)u0, 2), CD_ERROR_INVALID_DEVICE);

    /* P2P attributes between distinct devices only. */
    int value = -1;
    OK(drv.cuDeviceGetP2PAttribute(&value, CD_P2P_ATTRIBUTE_PERFORMANCE_RANK, 0, 1));
    CHECK(value == 0);
    OK(drv.cuDeviceGetP2PAttribute(&value, CD_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 1, 0));
    CHECK(value == 1);
    OK(drv.cuDeviceGetP2PAttribute(&value, CD_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, 0, 1));
    CHECK(value == 1);
    CHECK_RC(drv.cuDeviceGetP2PAttribute(&value, CD_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 1, 1),
             CD_ERROR_INVALID_DEVICE);
    CHECK_RC(drv.cuDeviceGetP2PAttribute(&value, CD_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 2),
             CD_ERROR_INVALID_DEVICE);
}

/* The context's id; 0 when the driver hides cuCtxGetId, where the checks
 * comparing ids are skipped. */
static unsigned long long ctx_id(cdContext ctx)
{
    unsigned long long id = 0;
    if (!no_ctx_getid)
        OK(drv.cuCtxGetId(ctx, &id));
    return id;
}

static void test_contexts(cdContext *ctx0, cdContext *ctx1)
{
    long creations = fk.ctx_creations();
    OK(drv.cuDevicePrimaryCtxRetain(ctx0, 0));
    CHECK(fk.ctx_creations() == creations + 1);
    unsigned flags = 7;
    int active = 0;
    OK(drv.cuDevicePrimaryCtxGetState(0, &flags, &active));
    CHECK(active == 1 && flags == 0);
    unsigned long long first_id = ctx_id(*ctx0);
    CHECK(first_id >= 1 || no_ctx_getid);

    /* Reset: same handle, new id, dead until retained again. */
    OK(drv.cuDevicePrimaryCtxReset(0));
    OK(drv.cuDevicePrimaryCtxGetState(0, &flags, &active));
    CHECK(active == 0);
    VIOLATES(drv.cuCtxPushCurrent(*ctx0), CD_ERROR_CONTEXT_IS_DESTROYED);
    cdContext again = NULL;
    OK(drv.cuDevicePrimaryCtxRetain(&again, 0));
    CHECK(again == *ctx0);
    CHECK(ctx_id(again) > first_id || no_ctx_getid);
    OK(drv.cuDevicePrimaryCtxRetain(ctx1, 1));
    CHECK(*ctx1 != *ctx0 && (ctx_id(*ctx1) != ctx_id(*ctx0) || no_ctx_getid));
    CHECK(fk.ctx_creations() == creations + 3);

    /* The current-context stack. */
    cdContext cur = (cdContext)1;
    OK(drv.cuCtxGetCurrent(&cur));
    CHECK(cur == NULL);
    CHECK_RC(drv.cuCtxPopCurrent(&cur), CD_ERROR_INVALID_CONTEXT);
    cdDevice dev = -1;
    CHECK_RC(drv.cuCtxGetDevice(&dev), CD_ERROR_INVALID_CONTEXT);
    OK(drv.cuCtxSetCurrent(*ctx0));
    OK(drv.cuCtxPushCurrent(*ctx1));
    OK(drv.cuCtxGetDevice(&dev));
    CHECK(dev == 1);
    CHECK(ctx_id(NULL) == ctx_id(*ctx1));
    OK(drv.cuCtxPopCurrent(&cur));
    CHECK(cur == *ctx1);
    OK(drv.cuCtxGetCurrent(&cur));
    CHECK(cur == *ctx0);
    OK(drv.cuCtxSetCurrent(NULL));
    OK(drv.cuCtxGetCurrent(&cur));
    CHECK(cur == NULL);

    /* A created context is current at once and popped by its destroy. */
    cdContext made = NULL;
    OK(drv.cuCtxCreate(&made, 0, 1));
    OK(drv.cuCtxGetCurrent(&cur));
    CHECK(cur == made);
    OK(drv.cuCtxDestroy(made));
    OK(drv.cuCtxGetCurrent(&cur));
    CHECK(cur == NULL);
    VIOLATES(drv.cuCtxSetCurrent(made), CD_ERROR_CONTEXT_IS_DESTROYED);
    VIOLATES(drv.cuCtxDestroy(made), CD_ERROR_CONTEXT_IS_DESTROYED);

    /* Peer access needs a current context and a live peer. */
    CHECK_RC(drv.cuCtxEnablePeerAccess(*ctx1, 0), CD_ERROR_INVALID_CONTEXT);
    OK(drv.cuCtxPushCurrent(*ctx0));
    OK(drv.cuCtxEnablePeerAccess(*ctx1, 0));
    CHECK_RC(drv.cuCtxEnablePeerAccess(*ctx1, 0), CD_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    CHECK_RC(drv.cuCtxEnablePeerAccess(*ctx0, 0), CD_ERROR_INVALID_DEVICE);
    OK(drv.cuCtxPopCurrent(NULL));
}

/* Six pointer attributes of @p p; each field starts as a value the fake
 * never answers (type 0 aside), so one it fails to write shows. */
struct ptr_attrs {
    cdContext ctx;
    unsigned type;
    unsigned managed;
    int ordinal;
    cdDevicePtr start;
    size_t size;
};

static struct ptr_attrs attrs_of(cdDevicePtr p)
{
    struct ptr_attrs a = {(cdContext)1, 0, 9, -1, 0, 0};
    unsigned which[] = {CD_POINTER_ATTRIBUTE_CONTEXT,        CD_POINTER_ATTRIBUTE_MEMORY_TYPE,
                        CD_POINTER_ATTRIBUTE_IS_MANAGED,     CD_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                        CD_POINTER_ATTRIBUTE_RANGE_START_ADDR, CD_POINTER_ATTRIBUTE_RANGE_SIZE};
    void *data[] = {&a.ctx, &a.type, &a.managed, &a.ordinal, &a.start, &a.size};
    OK(drv.cuPointerGetAttributes(6, which, data, p));
    return a;
}

/* Reading @p p on the CPU faults, as device memory does on a GPU machine.
 * The read happens in a forked child, so the parent (and valgrind's verdict
 * on it) never sees the bad access. */
static int cpu_read_faults(cdDevicePtr p)
{
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        volatile char c = *(volatile char *)(uintptr_t)p;
        (void)c;
        _exit(0);
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child)
        return 0;
    /* Killed by SIGSEGV, or (under a sanitizer) exiting on its report. */
    return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_memory(cdContext ctx0, cdContext ctx1)
{
    enum { N = 1 << 16 };
    cdDevicePtr d0 = 0;
    cdDevicePtr d1 = 0;
    CHECK_RC(drv.cuMemAlloc(&d0, N), CD_ERROR_INVALID_CONTEXT);
    OK(drv.cuCtxPushCurrent(ctx0));
    OK(drv.cuMemAlloc(&d0, N));
    OK(drv.cuCtxSetCurrent(ctx1));
    OK(drv.cuMemAlloc(&d1, N));
    OK(drv.cuCtxPopCurrent(NULL));

    /* Pointer attributes need no current context. */
    struct ptr_attrs a = attrs_of(d1 + 100);
    CHECK(a.ctx == ctx1 && a.type == CD_MEMORYTYPE_DEVICE && a.managed == 0 && a.ordinal == 1);
    CHECK(a.start == d1 && a.size == N);
    a = attrs_of(d0);
    CHECK(a.ctx == ctx0 && a.ordinal == 0);
    char stack_buf[8];
    a = attrs_of((cdDevicePtr)(uintptr_t)stack_buf);
    CHECK(a.ctx == NULL && a.type == 0 && a.managed == 0 && a.ordinal == -2);

    CHECK(cpu_read_faults(d0));
    CHECK(cpu_read_faults(d1 + N - 1));

    /* Managed, pinned and registered host memory. */
    OK(drv.cuCtxPushCurrent(ctx1));
    cdDevicePtr m = 0;
    OK(drv.cuMemAllocManaged(&m, 4096, CD_MEM_ATTACH_GLOBAL));
    void *pinned = NULL;
    OK(drv.cuMemHostAlloc(&pinned, 4096, 0));
    static char registered[8192];
    OK(drv.cuMemHostRegister(registered, sizeof registered, 0));
    CHECK_RC(drv.cuMemHostRegister(registered + 4096, 16, 0),
             CD_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    OK(drv.cuCtxPopCurrent(NULL));
    a = attrs_of(m);
    CHECK(a.ctx == ctx1 && a.type == CD_MEMORYTYPE_DEVICE && a.managed == 1 && a.ordinal == 1);
    *(volatile char *)(uintptr_t)m = 1; /* managed memory is CPU-accessible */
    a = attrs_of((cdDevicePtr)(uintptr_t)pinned);
    CHECK(a.ctx == ctx1 && a.type == CD_MEMORYTYPE_HOST && a.managed == 0);
    a = attrs_of((cdDevicePtr)(uintptr_t)(registered + 10));
    CHECK(a.ctx == ctx1 && a.type == CD_MEMORYTYPE_HOST && a.start == (uintptr_t)registered);
    OK(drv.cuMemHostUnregister(registered));
    CHECK_RC(drv.cuMemHostUnregister(registered), CD_ERROR_HOST_MEMORY_NOT_REGISTERED);
    a = attrs_of((cdDevicePtr)(uintptr_t)registered);
    CHECK(a.ctx == NULL && a.type == 0);
    OK(drv.cuMemFreeHost(pinned));
    OK(drv.cuMemFree(m));

    /* Freed memory reads as unknown and stays inaccessible. */
    OK(drv.cuMemFree(d0));
    OK(drv.cuMemFree(d1));
    a = attrs_of(d1);
    CHECK(a.ctx == NULL && a.type == 0 && a.ordinal == -2);
    CHECK_RC(drv.cuMemFree(d1), CD_ERROR_INVALID_VALUE);
    CHECK(cpu_read_faults(d1));
}

static struct CUmemPoolHandle_st *pool_of(cdDevicePtr p)
{
    unsigned which = CD_POINTER_ATTRIBUTE_MEMPOOL_HANDLE;
    struct CUmemPoolHandle_st *pool = (struct CUmemPoolHandle_st *)1;
    void *data = &pool;
    OK(drv.cuPointerGetAttributes(1, &which, &data, p));
    return pool;
}

static unsigned type_of(cdDevicePtr p)
{
    unsigned which = CD_POINTER_ATTRIBUTE_MEMORY_TYPE;
    unsigned type = 99;
    void *data = &type;
    OK(drv.cuPointerGetAttributes(1, &which, &data, p));
    return type;
}

/* Managed preferred locations, registration overlaps, freed ranges of the
 * host kinds, and the allocation counters. */
static void test_memory_more(cdContext ctx0, cdContext ctx1)
{
    long live = fk.live_allocations();
    long regs = fk.registered_ranges();
    char src[64] = "fakecuda";
    OK(drv.cuCtxPushCurrent(ctx1));
    cdDevicePtr m = 0;
    OK(drv.cuMemAllocManaged(&m, 8192, CD_MEM_ATTACH_GLOBAL));
    cdDevicePtr d = 0;
    OK(drv.cuMemAlloc(&d, 4096));
    void *pinned = NULL;
    OK(drv.cuMemHostAlloc(&pinned, 8192, 0));
    CHECK(fk.live_allocations() == live + 3);
    OK(drv.cuCtxPopCurrent(NULL));

    /* Preferred location: none, then a device, then the CPU; no context needed. */
    int where = 99;
    OK(drv.cuMemRangeGetAttribute(&where, sizeof where, CD_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
                                  m, 8192));
    CHECK(where == CD_DEVICE_INVALID);
    struct cd_mem_location loc = {CD_MEM_LOCATION_TYPE_DEVICE, 0};
    OK(drv.cuMemAdvise(m, 8192, CD_MEM_ADVISE_SET_PREFERRED_LOCATION, loc));
    OK(drv.cuMemRangeGetAttribute(&where, sizeof where, CD_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
                                  m + 100, 16));
    CHECK(where == 0);
    loc.type = CD_MEM_LOCATION_TYPE_HOST;
    OK(drv.cuMemAdvise(m, 4096, CD_MEM_ADVISE_SET_PREFERRED_LOCATION, loc));
    OK(drv.cuMemRangeGetAttribute(&where, sizeof where, CD_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
                                  m, 8192));
    CHECK(where == CD_DEVICE_CPU);
    loc = (struct cd_mem_location){CD_MEM_LOCATION_TYPE_DEVICE, 2};
    CHECK_RC(drv.cuMemAdvise(m, 8192, CD_MEM_ADVISE_SET_PREFERRED_LOCATION, loc),
             CD_ERROR_INVALID_DEVICE);
    loc.id = 1;
    CHECK_RC(drv.cuMemAdvise(d, 4096, CD_MEM_ADVISE_SET_PREFERRED_LOCATION, loc),
             CD_ERROR_INVALID_VALUE); /* not managed */
    CHECK_RC(drv.cuMemAdvise(m, 8193, CD_MEM_ADVISE_SET_PREFERRED_LOCATION, loc),
             CD_ERROR_INVALID_VALUE); /* past the end */
    CHECK_RC(drv.cuMemRangeGetAttribute(&where, sizeof where,
                                        CD_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, d, 16),
             CD_ERROR_INVALID_VALUE);
    CHECK_RC(drv.cuMemRangeGetAttribute(&where, 8, CD_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, m,
                                        16),
             CD_ERROR_INVALID_VALUE);

    /* Registration: overlaps with registered, pinned or managed memory are
     * "already registered"; freed fake memory cannot be pinned. */
    static char buf[3 * 4096];
    CHECK_RC(drv.cuMemHostRegister(buf, 4096, 0), CD_ERROR_INVALID_CONTEXT);
    OK(drv.cuCtxPushCurrent(ctx0));
    OK(drv.cuMemHostRegister(buf + 4096, 4096, 0));
    CHECK(fk.registered_ranges() == regs + 1);
    CHECK_RC(drv.cuMemHostRegister(buf, 4097, 0), CD_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CHECK_RC(drv.cuMemHostRegister(buf + 8191, 2, 0), CD_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    OK(drv.cuMemHostRegister(buf, 4096, 0)); /* adjacent is fine */
    CHECK_RC(drv.cuMemHostRegister((char *)pinned + 100, 16, 0),
             CD_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CHECK_RC(drv.cuMemHostRegister((void *)(uintptr_t)m, 16, 0),
             CD_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CHECK(fk.registered_ranges() == regs + 2);
    CHECK(fk.live_allocations() == live + 3); /* registrations are no allocations */
    /* Copies work on registered ranges. */
    OK(drv.cuMemcpyHtoD(d, src, sizeof src));
    OK(drv.cuCtxSetCurrent(ctx1));
    OK(drv.cuMemcpyDtoH(buf + 4096, d, sizeof src));
    CHECK(strcmp(buf + 4096, "fakecuda") == 0);
    OK(drv.cuCtxPopCurrent(NULL));
    OK(drv.cuMemHostUnregister(buf));
    OK(drv.cuMemHostUnregister(buf + 4096));
    CHECK(fk.registered_ranges() == regs);

    /* Freed managed and pinned memory: unknown, not pinnable, a violation in
     * a copy, never device memory. */
    OK(drv.cuMemFree(m));
    OK(drv.cuMemFreeHost(pinned));
    CHECK(fk.live_allocations() == live + 1);
    CHECK(type_of(m) == 0 && type_of((cdDevicePtr)(uintptr_t)pinned) == 0);
    CHECK(cpu_read_faults(m));
    OK(drv.cuCtxPushCurrent(ctx1));
    CHECK_RC(drv.cuMemHostRegister((void *)(uintptr_t)m, 16, 0), CD_ERROR_INVALID_VALUE);
    CHECK_RC(drv.cuMemRangeGetAttribute(&where, sizeof where,
                                        CD_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, m, 16),
             CD_ERROR_INVALID_VALUE);
    VIOLATES(drv.cuMemcpyDtoD(d, m, 16), CD_ERROR_INVALID_VALUE);
    VIOLATES(drv.cuMemcpyHtoD(d, pinned, 16), CD_ERROR_INVALID_VALUE);
    OK(drv.cuMemFree(d));
    VIOLATES(drv.cuMemcpyHtoD(d, src, 16), CD_ERROR_INVALID_VALUE);
    OK(drv.cuCtxPopCurrent(NULL));
    CHECK(fk.live_allocations() == live);
}

/* cuMemCreate + cuMemMap memory: attributes, access, handles, lifetime. */
static void test_vmm(cdContext ctx0, cdContext ctx1)
{
    enum { MB = 1 << 20 };
    long live = fk.live_allocations();
    struct cd_mem_alloc_prop prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CD_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CD_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    OK(drv.cuMemGetAllocationGranularity(&gran, &prop, CD_MEM_ALLOC_GRANULARITY_MINIMUM));
    CHECK(gran == 2 * MB);
    cdMemHandle h = 0;
    CHECK_RC(drv.cuMemCreate(&h, 4 * MB, &prop, 0), CD_ERROR_INVALID_CONTEXT);
    OK(drv.cuCtxPushCurrent(ctx1)); /* any context will do */
    CHECK_RC(drv.cuMemCreate(&h, 3 * MB, &prop, 0), CD_ERROR_INVALID_VALUE);
    OK(drv.cuMemCreate(&h, 4 * MB, &prop, 0));
    OK(drv.cuCtxPopCurrent(NULL));
    CHECK(fk.live_allocations() == live + 1);

    cdDevicePtr va = 0;
    OK(drv.cuMemAddressReserve(&va, 8 * MB, 8 * MB, 0, 0));
    CHECK(va != 0 && va % (8 * MB) == 0);
    CHECK(type_of(va) == 0); /* reserved, not mapped */
    CHECK_RC(drv.cuMemMap(va + 6 * MB, 4 * MB, 0, h, 0), CD_ERROR_INVALID_VALUE); /* past it */
    OK(drv.cuMemMap(va, 4 * MB, 0, h, 0));
    CHECK_RC(drv.cuMemMap(va + 2 * MB, 2 * MB, 0, h, 0), CD_ERROR_INVALID_VALUE); /* mapped */
    OK(drv.cuMemMap(va + 4 * MB, 2 * MB, 2 * MB, h, 0)); /* the second half again */

    struct ptr_attrs a = attrs_of(va + 100);
    CHECK(a.ctx == NULL && a.type == CD_MEMORYTYPE_DEVICE && a.managed == 0 && a.ordinal == 0);
    CHECK(a.start == va && a.size == 4 * MB);
    CHECK(pool_of(va) == NULL);
    CHECK(cpu_read_faults(va));

    /* Access: none until set; a copy without it is what faults on a GPU. */
    unsigned long long flags = 99;
    struct cd_mem_location dev0 = {CD_MEM_LOCATION_TYPE_DEVICE, 0};
    struct cd_mem_location dev1 = {CD_MEM_LOCATION_TYPE_DEVICE, 1};
    OK(drv.cuMemGetAccess(&flags, &dev0, va));
    CHECK(flags == CD_MEM_ACCESS_FLAGS_PROT_NONE);
    char src[32] = "vmm memory";
    char dst[32] = {0};
    OK(drv.cuCtxPushCurrent(ctx0));
    VIOLATES(drv.cuMemcpyHtoD(va, src, sizeof src), CD_ERROR_INVALID_VALUE);
    OK(drv.cuCtxPopCurrent(NULL));
    struct cd_mem_access_desc desc[2] = {{dev0, CD_MEM_ACCESS_FLAGS_PROT_READWRITE},
                                         {dev1, CD_MEM_ACCESS_FLAGS_PROT_READ}};
    CHECK_RC(drv.cuMemSetAccess(va, 2 * MB, desc, 2), CD_ERROR_INVALID_VALUE); /* part */
    CHECK_RC(drv.cuMemSetAccess(va, 8 * MB, desc, 2), CD_ERROR_INVALID_VALUE); /* unmapped */
    OK(drv.cuMemSetAccess(va, 6 * MB, desc, 2));
    OK(drv.cuMemGetAccess(&flags, &dev0, va + 5 * MB));
    CHECK(flags == CD_MEM_ACCESS_FLAGS_PROT_READWRITE);
    OK(drv.cuMemGetAccess(&flags, &dev1, va));
    CHECK(flags == CD_MEM_ACCESS_FLAGS_PROT_READ);
    CHECK_RC(drv.cuMemGetAccess(&flags, &dev1, va + 6 * MB), CD_ERROR_INVALID_VALUE);
    struct cd_mem_access_desc host_rw = {{CD_MEM_LOCATION_TYPE_HOST, 0},
                                         CD_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHECK_RC(drv.cuMemSetAccess(va, 4 * MB, &host_rw, 1), CD_ERROR_INVALID_VALUE);
    OK(drv.cuCtxPushCurrent(ctx0));
    OK(drv.cuMemcpyHtoD(va + 3 * MB, src, sizeof src));
    OK(drv.cuMemcpyDtoD(va + 4 * MB, va + 3 * MB, 16)); /* both views share memory */
    OK(drv.cuCtxSetCurrent(ctx1));
    OK(drv.cuMemcpyDtoH(dst, va + 5 * MB, sizeof dst)); /* read access suffices */
    CHECK(strcmp(dst, "vmm memory") == 0);
    VIOLATES(drv.cuMemcpyHtoD(va, src, sizeof src), CD_ERROR_INVALID_VALUE);
    VIOLATES(drv.cuMemcpyDtoH(dst, va + 4 * MB - 8, 16), CD_ERROR_INVALID_VALUE); /* crosses */
    OK(drv.cuCtxPopCurrent(NULL));

    /* Handles: retained from any address of a mapping, released by count. */
    cdMemHandle again = 0;
    OK(drv.cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)(va + 4 * MB + 7)));
    CHECK(again == h);
    CHECK_RC(drv.cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)(va + 6 * MB)),
             CD_ERROR_INVALID_VALUE);
    CHECK_RC(drv.cuMemRetainAllocationHandle(&again, src), CD_ERROR_INVALID_VALUE);
    struct cd_mem_alloc_prop got;
    memset(&got, 0xff, sizeof got);
    OK(drv.cuMemGetAllocationPropertiesFromHandle(&got, h));
    CHECK(memcmp(&got, &prop, sizeof got) == 0);
    OK(drv.cuMemRelease(again));
    OK(drv.cuMemRelease(h));
    VIOLATES(drv.cuMemRelease(h), CD_ERROR_INVALID_VALUE);
    CHECK_RC(drv.cuMemGetAllocationPropertiesFromHandle(&got, h), CD_ERROR_INVALID_VALUE);
    CHECK(fk.live_allocations() == live + 1); /* still mapped */
    OK(drv.cuCtxPushCurrent(ctx0));
    OK(drv.cuMemcpyDtoH(dst, va + 3 * MB, sizeof dst));
    CHECK(strcmp(dst, "vmm memory") == 0);
    OK(drv.cuCtxPopCurrent(NULL));

    /* Unmapping: whole mappings only; then unknown memory. */
    CHECK_RC(drv.cuMemUnmap(va, 2 * MB), CD_ERROR_INVALID_VALUE);
    VIOLATES(drv.cuMemAddressFree(va, 8 * MB), CD_ERROR_INVALID_VALUE); /* still mapped */
    OK(drv.cuMemUnmap(va, 6 * MB));
    CHECK(fk.live_allocations() == live);
    a = attrs_of(va);
    CHECK(a.ctx == NULL && a.type == 0 && a.ordinal == -2);
    CHECK_RC(drv.cuMemGetAccess(&flags, &dev0, va), CD_ERROR_INVALID_VALUE);
    OK(drv.cuCtxPushCurrent(ctx0));
    VIOLATES(drv.cuMemcpyDtoH(dst, va, 16), CD_ERROR_INVALID_VALUE);
    OK(drv.cuCtxPopCurrent(NULL));
    CHECK(cpu_read_faults(va));
    CHECK_RC(drv.cuMemMap(va, 2 * MB, 0, h, 0), CD_ERROR_INVALID_HANDLE); /* released */
    CHECK_RC(drv.cuMemAddressFree(va, 4 * MB), CD_ERROR_INVALID_VALUE);
    OK(drv.cuMemAddressFree(va, 8 * MB));
    CHECK_RC(drv.cuMemAddressFree(va, 8 * MB), CD_ERROR_INVALID_VALUE);

    /* Host-located VMM memory: device memory to the attributes, inaccessible
     * to the CPU until the host is given access. */
    prop.location.type = CD_MEM_LOCATION_TYPE_HOST;
    prop.location.id = 0;
    OK(drv.cuCtxPushCurrent(ctx0));
    OK(drv.cuMemCreate(&h, 2 * MB, &prop, 0));
    OK(drv.cuCtxPopCurrent(NULL));
    OK(drv.cuMemAddressReserve(&va, 2 * MB, 0, 0, 0));
    OK(drv.cuMemMap(va, 2 * MB, 0, h, 0));
    OK(drv.cuMemRelease(h));
    a = attrs_of(va);
    /* As driver 580 answers: */
    CHECK(a.ctx == NULL && a.type == CD_MEMORYTYPE_HOST && a.ordinal == 0);
    CHECK(cpu_read_faults(va));
    struct cd_mem_access_desc both[2] = {host_rw, {dev1, CD_MEM_ACCESS_FLAGS_PROT_READWRITE}};
    OK(drv.cuMemSetAccess(va, 2 * MB, both, 2));
    struct cd_mem_location host = {CD_MEM_LOCATION_TYPE_HOST, 0};
    OK(drv.cuMemGetAccess(&flags, &host, va));
    CHECK(flags == CD_MEM_ACCESS_FLAGS_PROT_READWRITE);
    memcpy((void *)(uintptr_t)va, "host view", 10);
    OK(drv.cuCtxPushCurrent(ctx1));
    OK(drv.cuMemcpyDtoH(dst, va, 10));
    OK(drv.cuCtxPopCurrent(NULL));
    CHECK(strcmp(dst, "host view") == 0);
    CHECK(fk.live_allocations() == live + 1);
    OK(drv.cuMemUnmap(va, 2 * MB));
    OK(drv.cuMemAddressFree(va, 2 * MB));
    CHECK(fk.live_allocations() == live);
    CHECK(cpu_read_faults(va));
}

/* Stream-ordered pool memory. */
static void test_pools(cdContext ctx0, cdContext ctx1)
{
    long live = fk.live_allocations();
    struct CUmemPoolHandle_st *p0 = NULL;
    struct CUmemPoolHandle_st *p1 = NULL;
    struct CUmemPoolHandle_st *again = NULL;
    OK(drv.cuDeviceGetDefaultMemPool(&p0, 0));
    OK(drv.cuDeviceGetDefaultMemPool(&p1, 1));
    OK(drv.cuDeviceGetDefaultMemPool(&again, 0));
    CHECK(p0 != NULL && p0 == again && p0 != p1);
    CHECK_RC(drv.cuDeviceGetDefaultMemPool(&again, 2), CD_ERROR_INVALID_DEVICE);
    CHECK(cpu_read_faults((cdDevicePtr)(uintptr_t)p0)); /* handles are not memory */

    unsigned flags = 99;
    struct cd_mem_location dev0 = {CD_MEM_LOCATION_TYPE_DEVICE, 0};
    struct cd_mem_location dev1 = {CD_MEM_LOCATION_TYPE_DEVICE, 1};
    OK(drv.cuMemPoolGetAccess(&flags, p1, &dev1));
    CHECK(flags == CD_MEM_ACCESS_FLAGS_PROT_READWRITE);
    OK(drv.cuMemPoolGetAccess(&flags, p1, &dev0));
    CHECK(flags == CD_MEM_ACCESS_FLAGS_PROT_NONE);
    struct cd_mem_access_desc d = {dev0, CD_MEM_ACCESS_FLAGS_PROT_READWRITE};
    OK(drv.cuMemPoolSetAccess(p1, &d, 1));
    OK(drv.cuMemPoolGetAccess(&flags, p1, &dev0));
    CHECK(flags == CD_MEM_ACCESS_FLAGS_PROT_READWRITE);
    d = (struct cd_mem_access_desc){dev1, CD_MEM_ACCESS_FLAGS_PROT_NONE};
    CHECK_RC(drv.cuMemPoolSetAccess(p1, &d, 1), CD_ERROR_INVALID_VALUE); /* the owner */
    VIOLATES(drv.cuMemPoolGetAccess(&flags, (struct CUmemPoolHandle_st *)&flags, &dev0),
             CD_ERROR_INVALID_VALUE);

    /* Allocation on a stream of device 1: no owning context. */
    cdDevicePtr p = 0;
    cdStream s = NULL;
    CHECK_RC(drv.cuMemAllocAsync(&p, 4096, NULL), CD_ERROR_INVALID_CONTEXT);
    OK(drv.cuCtxPushCurrent(ctx1));
    OK(drv.cuStreamCreate(&s, 0));
    OK(drv.cuMemAllocAsync(&p, 4096, s));
    CHECK(fk.live_allocations() == live + 1);
    struct ptr_attrs a = attrs_of(p + 10);
    CHECK(a.ctx == NULL && a.type == CD_MEMORYTYPE_DEVICE && a.managed == 0 && a.ordinal == 1);
    CHECK(a.start == p && a.size == 4096);
    CHECK(pool_of(p) == p1);
    CHECK(cpu_read_faults(p));
    char src[16] = "pool memory";
    char dst[16] = {0};
    OK(drv.cuMemcpyAsync(p, (cdDevicePtr)(uintptr_t)src, sizeof src, s));
    OK(drv.cuMemcpyAsync((cdDevicePtr)(uintptr_t)dst, p, sizeof dst, s));
    OK(drv.cuMemFreeAsync(p, s));
    OK(drv.cuStreamSynchronize(s));
    CHECK(strcmp(dst, "pool memory") == 0);
    CHECK(fk.live_allocations() == live);
    CHECK(type_of(p) == 0 && pool_of(p) == NULL);
    VIOLATES(drv.cuMemcpyAsync(p, (cdDevicePtr)(uintptr_t)src, 4, s), CD_ERROR_INVALID_VALUE);
    CHECK_RC(drv.cuMemFreeAsync(p, s), CD_ERROR_INVALID_VALUE);
    /* cuMemFree frees pool memory too; other memory has no pool. */
    OK(drv.cuMemAllocAsync(&p, 100, NULL));
    CHECK(pool_of(p) == p1);
    OK(drv.cuMemFree(p));
    cdDevicePtr plain = 0;
    OK(drv.cuMemAlloc(&plain, 64));
    CHECK(pool_of(plain) == NULL);
    CHECK_RC(drv.cuMemFreeAsync(plain, s), CD_ERROR_INVALID_VALUE);
    OK(drv.cuMemFree(plain));
    OK(drv.cuStreamDestroy(s));
    /* The stream's context must be current. */
    OK(drv.cuStreamCreate(&s, 0));
    OK(drv.cuCtxSetCurrent(ctx0));
    VIOLATES(drv.cuMemAllocAsync(&p, 64, s), CD_ERROR_INVALID_HANDLE);
    OK(drv.cuCtxSetCurrent(ctx1));
    OK(drv.cuStreamDestroy(s));
    OK(drv.cuCtxPopCurrent(NULL));
    CHECK(fk.live_allocations() == live);
}

struct order_log {
    int seen[8];
    int n;
};

static void log_host_fn(void *arg)
{
    struct order_log *log = arg;
    log->seen[log->n] = log->n;
    log->n++;
}

static void call_cuda_from_host_fn(void *arg)
{
    int *rc = arg;
    int count = 0;
    *rc = (int)drv.cuDeviceGetCount(&count);
}

static const char fault_ptx[] = ".version 6.0\n.target sm_50\n.address_size 64\n"
                                ".visible .entry cucopy_fault()\n{\n    ret;\n}\n"
                                ".visible .entry harmless()\n{\n    ret;\n}\n";

/* Modules and the faulting kernel: a sticky error on its own context only. */
static void test_kernels(cdContext ctx0, cdContext ctx1)
{
    struct CUmod_st *m0 = NULL;
    struct CUmod_st *m1 = NULL;
    struct CUfunc_st *fault = NULL;
    struct CUfunc_st *harmless = NULL;
    struct CUfunc_st *other = NULL;
    cdStream s0 = NULL;
    cdStream s1 = NULL;
    CHECK_RC(drv.cuModuleLoadData(&m0, fault_ptx), CD_ERROR_INVALID_CONTEXT);
    OK(drv.cuCtxPushCurrent(ctx1));
    OK(drv.cuModuleLoadData(&m1, fault_ptx));
    OK(drv.cuModuleGetFunction(&other, m1, "harmless"));
    OK(drv.cuStreamCreate(&s1, CD_STREAM_NON_BLOCKING));
    OK(drv.cuCtxSetCurrent(ctx0));
    CHECK_RC(drv.cuModuleLoadData(&m0, "not PTX"), CD_ERROR_INVALID_IMAGE);
    OK(drv.cuModuleLoadData(&m0, fault_ptx));
    CHECK_RC(drv.cuModuleGetFunction(&fault, m0, "cucopy_faul"), CD_ERROR_NOT_FOUND);
    CHECK_RC(drv.cuModuleGetFunction(&fault, m0, "missing"), CD_ERROR_NOT_FOUND);
    OK(drv.cuModuleGetFunction(&fault, m0, "cucopy_fault"));
    OK(drv.cuModuleGetFunction(&harmless, m0, "harmless"));
    OK(drv.cuStreamCreate(&s0, 0));
    CHECK_RC(drv.cuLaunchKernel(fault, 0, 1, 1, 1, 1, 1, 0, s0, NULL, NULL),
             CD_ERROR_INVALID_VALUE);
    CHECK_RC(drv.cuLaunchKernel(fault, 1, 1, 1, 1025, 1, 1, 0, s0, NULL, NULL),
             CD_ERROR_INVALID_VALUE);
    /* The stream's context must be current and own the function. */
    VIOLATES(drv.cuLaunchKernel(harmless, 1, 1, 1, 1, 1, 1, 0, s1, NULL, NULL),
             CD_ERROR_INVALID_HANDLE);
    VIOLATES(drv.cuLaunchKernel(other, 1, 1, 1, 1, 1, 1, 0, s0, NULL, NULL),
             CD_ERROR_INVALID_HANDLE);
    /* A harmless kernel does nothing, on a created and the default stream. */
    OK(drv.cuLaunchKernel(harmless, 1, 1, 1, 32, 1, 1, 0, s0, NULL, NULL));
    OK(drv.cuLaunchKernel(harmless, 2, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    OK(drv.cuStreamSynchronize(s0));
    OK(drv.cuCtxSynchronize());
    long calls = fk.calls("cuLaunchKernel");
    /* The faulting kernel: the launch succeeds, the fault shows once it ran,
     * then sticks to every later call on ctx0; ctx1 goes on. */
    fk.set_delay_us(20000);
    OK(drv.cuLaunchKernel(fault, 1, 1, 1, 1, 1, 1, 0, s0, NULL, NULL));
    CHECK_RC(drv.cuStreamQuery(s0), CD_ERROR_NOT_READY);
    CHECK_RC(drv.cuStreamSynchronize(s0), CD_ERROR_ILLEGAL_ADDRESS);
    fk.set_delay_us(0);
    CHECK(fk.calls("cuLaunchKernel") == calls + 1);
    CHECK_RC(drv.cuStreamQuery(s0), CD_ERROR_ILLEGAL_ADDRESS);
    CHECK_RC(drv.cuCtxSynchronize(), CD_ERROR_ILLEGAL_ADDRESS);
    CHECK_RC(drv.cuLaunchKernel(harmless, 1, 1, 1, 1, 1, 1, 0, s0, NULL, NULL),
             CD_ERROR_ILLEGAL_ADDRESS);
    CHECK_RC(drv.cuModuleGetFunction(&harmless, m0, "harmless"), CD_ERROR_ILLEGAL_ADDRESS);
    CHECK_RC(drv.cuModuleLoadData(&(struct CUmod_st *){NULL}, fault_ptx),
             CD_ERROR_ILLEGAL_ADDRESS);
    CHECK_RC(drv.cuStreamCreate(&(cdStream){NULL}, 0), CD_ERROR_ILLEGAL_ADDRESS);
    OK(drv.cuCtxSetCurrent(ctx1));
    OK(drv.cuLaunchKernel(other, 1, 1, 1, 1, 1, 1, 0, s1, NULL, NULL));
    OK(drv.cuStreamSynchronize(s1));
    OK(drv.cuModuleUnload(m1));
    VIOLATES(drv.cuModuleUnload(m1), CD_ERROR_INVALID_HANDLE);
    VIOLATES(drv.cuLaunchKernel(other, 1, 1, 1, 1, 1, 1, 0, s1, NULL, NULL),
             CD_ERROR_INVALID_HANDLE);
    VIOLATES(drv.cuModuleGetFunction(&other, m1, "harmless"), CD_ERROR_INVALID_HANDLE);
    OK(drv.cuStreamDestroy(s1));
    /* Destroying and unloading still work on the sick context. */
    OK(drv.cuCtxSetCurrent(ctx0));
    OK(drv.cuModuleUnload(m0));
    OK(drv.cuStreamDestroy(s0));
    OK(drv.cuCtxPopCurrent(NULL));
    fk.poison(ctx0, 0);
    OK(drv.cuCtxPushCurrent(ctx0));
    OK(drv.cuCtxSynchronize());
    OK(drv.cuCtxPopCurrent(NULL));
    CHECK(fk.live_streams(NULL) == 0);
}

static void test_streams(cdContext ctx0, cdContext ctx1)
{
    enum { N = 1 << 20 };
    unsigned char *src = malloc(N);
    unsigned char *dst = malloc(N);
    for (int i = 0; i < N; i++)
        src[i] = (unsigned char)(i * 7 + 3);
    memset(dst, 0, N);
    cdDevicePtr d0 = 0;
    cdDevicePtr d1 = 0;
    cdStream s0 = NULL;
    cdStream s1 = NULL;
    cdEvent e0 = NULL;
    cdEvent e1 = NULL;
    OK(drv.cuCtxPushCurrent(ctx0));
    OK(drv.cuMemAlloc(&d0, N));
    OK(drv.cuStreamCreate(&s0, CD_STREAM_NON_BLOCKING));
    OK(drv.cuEventCreate(&e0, CD_EVENT_DISABLE_TIMING));
    OK(drv.cuCtxSetCurrent(ctx1));
    OK(drv.cuMemAlloc(&d1, N));
    OK(drv.cuStreamCreate(&s1, 0));
    OK(drv.cuEventCreate(&e1, 0));
    OK(drv.cuCtxPopCurrent(NULL));
    CHECK(fk.live_streams(NULL) == 2 && fk.live_streams(ctx0) == 1);
    CHECK(fk.live_events(ctx1) == 1);
    CHECK_RC(drv.cuEventQuery(e0), CD_SUCCESS); /* never recorded */

    /* H2D on device 0, D2D device 0 -> device 1, D2H from device 1, with a
     * delay so the event is seen pending first. */
    fk.set_delay_us(20000);
    OK(drv.cuCtxPushCurrent(ctx0));
    OK(drv.cuMemcpyAsync(d0, (cdDevicePtr)(uintptr_t)src, N, s0));
    OK(drv.cuEventRecord(e0, s0));
    CHECK_RC(drv.cuEventQuery(e0), CD_ERROR_NOT_READY);
    CHECK_RC(drv.cuStreamQuery(s0), CD_ERROR_NOT_READY);
    OK(drv.cuCtxSetCurrent(ctx1));
    OK(drv.cuCtxPopCurrent(NULL));
    /* Queries and synchronization work with no current context. */
    OK(drv.cuEventSynchronize(e0));
    OK(drv.cuEventQuery(e0));
    OK(drv.cuCtxPushCurrent(ctx1));
    OK(drv.cuMemcpyAsync(d1, d0, N, s1));
    OK(drv.cuMemcpyAsync((cdDevicePtr)(uintptr_t)dst, d1, N, s1));
    OK(drv.cuEventRecord(e1, s1));
    OK(drv.cuCtxPopCurrent(NULL));
    CHECK_RC(drv.cuEventQuery(e1), CD_ERROR_NOT_READY);
    OK(drv.cuStreamSynchronize(s1));
    OK(drv.cuEventQuery(e1));
    CHECK(memcmp(src, dst, N) == 0);
    fk.set_delay_us(0);

    /* Host functions run in stream order, after the work before them. */
    struct order_log log = {{0}, 0};
    memset(dst, 0, N);
    OK(drv.cuCtxPushCurrent(ctx1));
    OK(drv.cuLaunchHostFunc(s1, log_host_fn, &log));
    OK(drv.cuMemcpyAsync((cdDevicePtr)(uintptr_t)dst, d1, N, s1));
    OK(drv.cuLaunchHostFunc(s1, log_host_fn, &log));
    OK(drv.cuLaunchHostFunc(s1, log_host_fn, &log));
    OK(drv.cuStreamSynchronize(s1));
    CHECK(log.n == 3 && log.seen[0] == 0 && log.seen[1] == 1 && log.seen[2] == 2);
    CHECK(memcmp(src, dst, N) == 0);
    int inner = 0;
    long before = fk.violations();
    OK(drv.cuLaunchHostFunc(s1, call_cuda_from_host_fn, &inner));
    OK(drv.cuStreamSynchronize(s1));
    CHECK(inner == CD_ERROR_NOT_PERMITTED && fk.violations() == before + 1);

    /* The synchronous copies, memset and a batch on the default stream's
     * context. */
    OK(drv.cuMemsetD8(d1, 0x5a, 16));
    unsigned char small[16];
    OK(drv.cuMemcpyDtoH(small, d1, sizeof small));
    CHECK(small[0] == 0x5a && small[15] == 0x5a);
    OK(drv.cuMemcpyHtoD(d1, src, 16));
    OK(drv.cuMemcpyDtoD(d1 + 16, d1, 16));
    cdDevicePtr dsts[2] = {(cdDevicePtr)(uintptr_t)dst, (cdDevicePtr)(uintptr_t)(dst + 16)};
    cdDevicePtr srcs[2] = {d1 + 16, d1};
    size_t sizes[2] = {16, 16};
    size_t attr_idx = 0;
    struct cd_memcpy_attr attr = {0};
    struct CUmemcpyAttributes_st *attrs = (struct CUmemcpyAttributes_st *)&attr;
    memset(dst, 0, 32);
    CHECK_RC(drv.cuMemcpyBatchAsync(dsts, srcs, sizes, 2, attrs, &attr_idx, 1, s1),
             CD_ERROR_INVALID_VALUE); /* no source access order */
    attr.src_access_order = CD_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    OK(drv.cuMemcpyBatchAsync(dsts, srcs, sizes, 2, attrs, &attr_idx, 1, s1));
    CHECK_RC(drv.cuMemcpyBatchAsync(dsts, srcs, sizes, 2, attrs, &attr_idx, 1, NULL),
             CD_ERROR_INVALID_VALUE);
    OK(drv.cuStreamSynchronize(s1));
    CHECK(memcmp(dst, src, 16) == 0 && memcmp(dst + 16, src, 16) == 0);

    /* A device range past the end of its allocation fails at issue. */
    VIOLATES(drv.cuMemcpyAsync(d1 + N - 8, (cdDevicePtr)(uintptr_t)src, 16, s1),
             CD_ERROR_INVALID_VALUE);
    OK(drv.cuMemcpyAsync(d1, (cdDevicePtr)(uintptr_t)src, 0, s1)); /* zero length */

    /* Strictness: the stream's own context must be current. */
    VIOLATES(drv.cuMemcpyAsync(d0, (cdDevicePtr)(uintptr_t)src, 16, s0),
             CD_ERROR_INVALID_HANDLE);
    VIOLATES(drv.cuEventRecord(e0, s1), CD_ERROR_INVALID_HANDLE);
    OK(drv.cuCtxPopCurrent(NULL));
    VIOLATES(drv.cuMemcpyAsync(d1, (cdDevicePtr)(uintptr_t)src, 16, s1),
             CD_ERROR_INVALID_CONTEXT);
    VIOLATES(drv.cuLaunchHostFunc(s1, log_host_fn, &log), CD_ERROR_INVALID_CONTEXT);
    VIOLATES(drv.cuEventRecord(e1, NULL), CD_ERROR_INVALID_CONTEXT);

    /* Fault injection: the 2nd call from now fails and does nothing. */
    OK(drv.cuCtxPushCurrent(ctx1));
    long calls = fk.calls("cuMemcpyAsync");
    fk.fail("cuMemcpyAsync", 2, CD_ERROR_ILLEGAL_ADDRESS);
    memset(dst, 0, N);
    OK(drv.cuMemcpyAsync((cdDevicePtr)(uintptr_t)dst, d1, 8, s1));
    CHECK_RC(drv.cuMemcpyAsync((cdDevicePtr)(uintptr_t)(dst + 8), d1, 8, s1),
             CD_ERROR_ILLEGAL_ADDRESS);
    OK(drv.cuMemcpyAsync((cdDevicePtr)(uintptr_t)(dst + 16), d1, 8, s1));
    OK(drv.cuStreamSynchronize(s1));
    CHECK(fk.calls("cuMemcpyAsync") == calls + 3);
    CHECK(dst[0] == src[0] && dst[8] == 0 && dst[16] == src[0]);
    CHECK(fk.calls("cuNoSuchThing") == -1);

    /* A sticky error fails everything on that context, nothing elsewhere. */
    fk.poison(ctx1, CD_ERROR_ILLEGAL_ADDRESS);
    CHECK_RC(drv.cuMemcpyAsync(d1, (cdDevicePtr)(uintptr_t)src, 8, s1), CD_ERROR_ILLEGAL_ADDRESS);
    CHECK_RC(drv.cuStreamSynchronize(s1), CD_ERROR_ILLEGAL_ADDRESS);
    CHECK_RC(drv.cuEventQuery(e1), CD_ERROR_ILLEGAL_ADDRESS);
    OK(drv.cuCtxSetCurrent(ctx0));
    OK(drv.cuMemcpyAsync(d0, (cdDevicePtr)(uintptr_t)src, 8, s0));
    OK(drv.cuStreamSynchronize(s0));
    fk.poison(ctx1, 0);
    OK(drv.cuCtxPopCurrent(NULL));

    /* Destroy with work pending: the work completes, the handle is dead. */
    fk.set_delay_us(5000);
    OK(drv.cuCtxPushCurrent(ctx0));
    memset(dst, 0, N);
    OK(drv.cuMemcpyAsync((cdDevicePtr)(uintptr_t)dst, d0, 64, s0));
    OK(drv.cuEventRecord(e0, s0));
    OK(drv.cuStreamDestroy(s0));
    OK(drv.cuCtxPopCurrent(NULL));
    OK(drv.cuEventSynchronize(e0));
    CHECK(memcmp(dst, src, 64) == 0);
    VIOLATES(drv.cuStreamQuery(s0), CD_ERROR_INVALID_HANDLE);
    fk.set_delay_us(0);
    OK(drv.cuEventDestroy(e0));
    VIOLATES(drv.cuEventQuery(e0), CD_ERROR_INVALID_HANDLE);

    /* A reset kills the context's streams and events: any use is reported. */
    OK(drv.cuMemFree(d0));
    OK(drv.cuMemFree(d1));
    CHECK(fk.live_streams(ctx1) == 1 && fk.live_events(ctx1) == 1);
    OK(drv.cuDevicePrimaryCtxReset(1));
    CHECK(fk.live_streams(NULL) == 0 && fk.live_events(NULL) == 0);
    VIOLATES(drv.cuStreamSynchronize(s1), CD_ERROR_CONTEXT_IS_DESTROYED);
    VIOLATES(drv.cuEventQuery(e1), CD_ERROR_CONTEXT_IS_DESTROYED);
    VIOLATES(drv.cuStreamDestroy(s1), CD_ERROR_CONTEXT_IS_DESTROYED);
    /* Asking the reset primary context's handle for its id is answered (as
     * measured on driver 580), not a violation. */
    if (!no_ctx_getid) {
        long before = fk.violations();
        CHECK(drv.cuCtxGetId(ctx1, &(unsigned long long){0}) == CD_ERROR_CONTEXT_IS_DESTROYED);
        CHECK(fk.violations() == before);
    }
    /* The same handle lives again after a retain, with a new id; the old
     * stream stays dead. */
    cdContext again = NULL;
    OK(drv.cuDevicePrimaryCtxRetain(&again, 1));
    CHECK(again == ctx1);
    OK(drv.cuCtxPushCurrent(ctx1));
    VIOLATES(drv.cuLaunchHostFunc(s1, log_host_fn, &log), CD_ERROR_CONTEXT_IS_DESTROYED);
    OK(drv.cuCtxPopCurrent(NULL));
    free(src);
    free(dst);
}

/* cuMemcpy2DAsync: rows at their pitches (the holes untouched), the
 * driver's checks, memory types against what the ranges are, stream order
 * under a delay, injected faults. */
static void test_memcpy2d(cdContext ctx0)
{
    enum { W = 8, H = 16, SP = 24, DP = 40, N = 1024 };
    OK(drv.cuCtxPushCurrent(ctx0));
    cdStream s = NULL;
    cdDevicePtr d = 0;
    void *pinned = NULL;
    OK(drv.cuStreamCreate(&s, CD_STREAM_NON_BLOCKING));
    OK(drv.cuMemAlloc(&d, N));
    OK(drv.cuMemHostAlloc(&pinned, N, CD_MEMHOSTALLOC_PORTABLE));
    unsigned char src[N], out[N];
    for (int i = 0; i < N; i++)
        src[i] = (unsigned char)(i * 7 + 1);
    OK(drv.cuMemsetD8(d, 0xee, N));
    /* Pageable rows (pitch SP) -> device rows (pitch DP). */
    struct cd_memcpy2d c = {0};
    c.src_memory_type = CD_MEMORYTYPE_HOST;
    c.src_host = src;
    c.src_pitch = SP;
    c.dst_memory_type = CD_MEMORYTYPE_DEVICE;
    c.dst_device = d;
    c.dst_pitch = DP;
    c.width_in_bytes = W;
    c.height = H;
    fk.set_delay_us(2000);
    OK(drv.cuMemcpy2DAsync(&c, s));
    CHECK_RC(drv.cuStreamQuery(s), CD_ERROR_NOT_READY); /* still queued behind the delay */
    fk.set_delay_us(0);
    OK(drv.cuStreamSynchronize(s));
    OK(drv.cuMemcpyDtoH(out, d, N));
    int ok = 1;
    for (int i = 0; i < N; i++) {
        int row = i / DP, col = i % DP;
        unsigned char want = row < H && col < W ? src[row * SP + col] : 0xee;
        ok &= out[i] == want;
    }
    CHECK(ok);
    /* Device rows -> packed pinned rows, unified addressing on both sides. */
    struct cd_memcpy2d u = {0};
    u.src_memory_type = CD_MEMORYTYPE_UNIFIED;
    u.src_device = d;
    u.src_pitch = DP;
    u.dst_memory_type = CD_MEMORYTYPE_UNIFIED;
    u.dst_device = (cdDevicePtr)(uintptr_t)pinned;
    u.dst_pitch = W;
    u.width_in_bytes = W;
    u.height = H;
    OK(drv.cuMemcpy2DAsync(&u, s));
    OK(drv.cuStreamSynchronize(s));
    ok = 1;
    for (int r = 0; r < H; r++)
        ok &= memcmp((unsigned char *)pinned + r * W, src + r * SP, W) == 0;
    CHECK(ok);
    /* The driver's checks, nothing queued. */
    struct cd_memcpy2d bad = c;
    bad.dst_pitch = W - 1;
    CHECK_RC(drv.cuMemcpy2DAsync(&bad, s), CD_ERROR_INVALID_VALUE); /* pitch below the width */
    bad = c;
    bad.src_pitch = SIZE_MAX / 2;
    CHECK_RC(drv.cuMemcpy2DAsync(&bad, s), CD_ERROR_INVALID_VALUE); /* the span wraps */
    CHECK_RC(drv.cuMemcpy2DAsync(NULL, s), CD_ERROR_INVALID_VALUE);
    bad = c;
    bad.dst_device = d + N - 100; /* 15 * 40 + 8 bytes from there leave the allocation */
    VIOLATES(drv.cuMemcpy2DAsync(&bad, s), CD_ERROR_INVALID_VALUE);
    bad = c;
    bad.dst_memory_type = CD_MEMORYTYPE_HOST; /* device memory given as host memory */
    bad.dst_host = (void *)(uintptr_t)d;
    VIOLATES(drv.cuMemcpy2DAsync(&bad, s), CD_ERROR_INVALID_VALUE);
    bad = c;
    bad.src_memory_type = CD_MEMORYTYPE_DEVICE; /* pageable memory given as device memory */
    bad.src_device = (cdDevicePtr)(uintptr_t)src;
    VIOLATES(drv.cuMemcpy2DAsync(&bad, s), CD_ERROR_INVALID_VALUE);
    /* An injected fault does nothing. */
    OK(drv.cuMemsetD8(d, 0xee, N));
    fk.fail("cuMemcpy2DAsync", 1, CD_ERROR_LAUNCH_FAILED);
    CHECK_RC(drv.cuMemcpy2DAsync(&c, s), CD_ERROR_LAUNCH_FAILED);
    OK(drv.cuStreamSynchronize(s));
    OK(drv.cuMemcpyDtoH(out, d, 16));
    CHECK(out[0] == 0xee && out[15] == 0xee);
    OK(drv.cuMemFreeHost(pinned));
    OK(drv.cuMemFree(d));
    OK(drv.cuStreamDestroy(s));
    OK(drv.cuCtxPopCurrent(NULL));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s /path/to/fake/libcuda.so.1\n", argv[0]);
        return 2;
    }
    const char *hide = getenv("FAKECUDA_NO_CTX_GETID");
    no_ctx_getid = hide != NULL && strcmp(hide, "1") == 0;
    setenv("FAKECUDA_DEVICES", "2", 1);
    void *lib = load(argv[1]);
    test_init_and_devices();
    cdContext ctx0 = NULL;
    cdContext ctx1 = NULL;
    test_contexts(&ctx0, &ctx1);
    test_memory(ctx0, ctx1);
    test_memory_more(ctx0, ctx1);
    test_vmm(ctx0, ctx1);
    test_pools(ctx0, ctx1);
    test_kernels(ctx0, ctx1);
    test_streams(ctx0, ctx1);
    test_memcpy2d(ctx0);

    /* Leave nothing behind: the fake's exit report must stay silent. */
    OK(drv.cuDevicePrimaryCtxRelease(0));
    OK(drv.cuDevicePrimaryCtxRelease(1));
    CHECK(fk.live_streams(NULL) == 0 && fk.live_events(NULL) == 0);
    fk.reset_counters();
    dlclose(lib);
    if (failures != 0) {
        fprintf(stderr, "fakecuda_selftest: %d check(s) failed\n", failures);
        return 1;
    }
    printf("fakecuda_selftest: all checks passed%s\n",
           no_ctx_getid ? " (cuCtxGetId hidden)" : "");
    return 0;
}
