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
#undef FK_SYM
    if (fk.is_fake == NULL || fk.set_delay_us == NULL || !fk.is_fake()) {
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

static void attrs_of(cdDevicePtr p, cdContext *ctx, unsigned *type, unsigned *managed, int *ordinal,
                     cdDevicePtr *start, size_t *size)
{
    unsigned which[] = {CD_POINTER_ATTRIBUTE_CONTEXT,        CD_POINTER_ATTRIBUTE_MEMORY_TYPE,
                        CD_POINTER_ATTRIBUTE_IS_MANAGED,     CD_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                        CD_POINTER_ATTRIBUTE_RANGE_START_ADDR, CD_POINTER_ATTRIBUTE_RANGE_SIZE};
    void *data[] = {ctx, type, managed, ordinal, start, size};
    OK(drv.cuPointerGetAttributes(6, which, data, p));
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
    cdContext c = NULL;
    unsigned type = 0;
    unsigned managed = 9;
    int ordinal = -1;
    cdDevicePtr start = 0;
    size_t size = 0;
    attrs_of(d1 + 100, &c, &type, &managed, &ordinal, &start, &size);
    CHECK(c == ctx1 && type == CD_MEMORYTYPE_DEVICE && managed == 0 && ordinal == 1);
    CHECK(start == d1 && size == N);
    attrs_of(d0, &c, &type, &managed, &ordinal, &start, &size);
    CHECK(c == ctx0 && ordinal == 0);
    char stack_buf[8];
    attrs_of((cdDevicePtr)(uintptr_t)stack_buf, &c, &type, &managed, &ordinal, &start, &size);
    CHECK(c == NULL && type == 0 && managed == 0 && ordinal == -2);

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
    attrs_of(m, &c, &type, &managed, &ordinal, &start, &size);
    CHECK(c == ctx1 && type == CD_MEMORYTYPE_DEVICE && managed == 1 && ordinal == 1);
    *(volatile char *)(uintptr_t)m = 1; /* managed memory is CPU-accessible */
    attrs_of((cdDevicePtr)(uintptr_t)pinned, &c, &type, &managed, &ordinal, &start, &size);
    CHECK(c == ctx1 && type == CD_MEMORYTYPE_HOST && managed == 0);
    attrs_of((cdDevicePtr)(uintptr_t)(registered + 10), &c, &type, &managed, &ordinal, &start,
             &size);
    CHECK(c == ctx1 && type == CD_MEMORYTYPE_HOST && start == (uintptr_t)registered);
    OK(drv.cuMemHostUnregister(registered));
    CHECK_RC(drv.cuMemHostUnregister(registered), CD_ERROR_HOST_MEMORY_NOT_REGISTERED);
    attrs_of((cdDevicePtr)(uintptr_t)registered, &c, &type, &managed, &ordinal, &start, &size);
    CHECK(c == NULL && type == 0);
    OK(drv.cuMemFreeHost(pinned));
    OK(drv.cuMemFree(m));

    /* Freed memory reads as unknown and stays inaccessible. */
    OK(drv.cuMemFree(d0));
    OK(drv.cuMemFree(d1));
    attrs_of(d1, &c, &type, &managed, &ordinal, &start, &size);
    CHECK(c == NULL && type == 0 && ordinal == -2);
    CHECK_RC(drv.cuMemFree(d1), CD_ERROR_INVALID_VALUE);
    CHECK(cpu_read_faults(d1));
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
    char attr_blob[64] = {0};
    memset(dst, 0, 32);
    OK(drv.cuMemcpyBatchAsync(dsts, srcs, sizes, 2, (struct CUmemcpyAttributes_st *)attr_blob,
                              &attr_idx, 1, s1));
    CHECK_RC(drv.cuMemcpyBatchAsync(dsts, srcs, sizes, 2,
                                    (struct CUmemcpyAttributes_st *)attr_blob, &attr_idx, 1, NULL),
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
    if (!no_ctx_getid)
        VIOLATES(drv.cuCtxGetId(ctx1, &(unsigned long long){0}), CD_ERROR_CONTEXT_IS_DESTROYED);
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
    test_streams(ctx0, ctx1);

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
