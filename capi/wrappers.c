/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The public functions of include/cucopy.h.
 *
 * Each is a C wrapper over a Go export. Including both the public header and
 * cgo's generated _cgo_export.h here makes any drift between the two a
 * compile error of `go build`. The wrappers refuse every call in a forked
 * child before it reaches Go (the child would hang in the Go scheduler), and
 * answer what needs no Go (version, status strings, last error) in C.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "_cgo_export.h"
#include "capi.h"
#include "cucopy.h"
#include "cd_shim.h"

static __thread char last_error[1024];
static volatile sig_atomic_t forked;

static void mark_forked(void)
{
    forked = 1;
}

__attribute__((constructor)) static void install_fork_guard(void)
{
    pthread_atfork(NULL, NULL, mark_forked);
}

void cucopy_set_last_error(const char *msg, size_t len)
{
    if (len >= sizeof(last_error))
        len = sizeof(last_error) - 1;
    memcpy(last_error, msg, len);
    last_error[len] = '\0';
}

static cucopy_status_t refuse_forked(const char *op)
{
    snprintf(last_error, sizeof(last_error),
             "%s: called in a child process after fork(); cucopy and CUDA cannot be used there",
             op);
    return CUCOPY_ERR_FORKED;
}

/* The test build (capi/testhooks.go: -DCUCOPY_TESTHOOKS) counts the calls
 * into Go, for tests/c/test_crossings: cucopy_test_crossings reads them with
 * the process's Go-to-C calls. The release library has neither. */
#ifdef CUCOPY_TESTHOOKS
static uint64_t c_to_go_calls;
#define COUNT_C_TO_GO() __atomic_add_fetch(&c_to_go_calls, 1, __ATOMIC_RELAXED)

void cucopy_test_crossings(uint64_t *c_to_go, uint64_t *go_to_c)
{
    *c_to_go = __atomic_load_n(&c_to_go_calls, __ATOMIC_RELAXED);
    *go_to_c = cucopyGoTestGoToCCalls(); /* not counted: the reader's own crossing */
}
#else
#define COUNT_C_TO_GO() ((void)0)
#endif

/* Every wrapper that calls into Go starts with GUARD. */
#define GUARD(op)                                                                      \
    do {                                                                               \
        if (forked)                                                                    \
            return refuse_forked(op);                                                  \
        COUNT_C_TO_GO();                                                               \
    } while (0)

/* A copy first tries the C steady state (capi/fast.c; fast_call is its
 * capi_fast_* call, with &fast_entry and &fast_result), after the fork
 * guard: done there, the call returns done; what it declines goes on to
 * GUARD and the Go export after this; a copy it ran that failed (or left the
 * caller's context with an error) is reported by Go (how: capi_fast_*'s). */
#define FAST_TRY(op, how, fast_call, done)                                             \
    do {                                                                               \
        if (forked)                                                                    \
            return refuse_forked(op);                                                  \
        int32_t fast_entry = -1;                                                       \
        uint32_t fast_result = 0;                                                      \
        int fast_st = (fast_call);                                                     \
        if (fast_st == CD_FAST_DONE)                                                   \
            return (done);                                                             \
        GUARD(op);                                                                     \
        if (fast_st != CD_FAST_DECLINED)                                               \
            return (cucopy_status_t)cucopyGoFastReport(how, fast_st, fast_entry,       \
                                                       fast_result);                   \
    } while (0)

#define SHORT_FAST(op, how, buffer, memh, length, remote, remote_memh)                   \
    FAST_TRY(op, how,                                                                  \
             capi_fast_short(HANDLE_BITS(ep), how, buffer, memh, length, remote,       \
                             remote_memh, &fast_entry, &fast_result),                  \
             CUCOPY_OK)
#define ZCOPY_FAST(op, how, remote, remote_memh, comp)                                 \
    FAST_TRY(op, (how) | CAPI_FAST_ZCOPY,                                              \
             capi_fast_zcopy(HANDLE_BITS(ep), how, iov, iovcnt, remote, remote_memh,   \
                             (uintptr_t)(comp), &fast_entry, &fast_result),            \
             CUCOPY_INPROGRESS)

/* A handle as Go's tables know it: the opaque pointer's bits are the table
 * handle (generation << 32 | index + 1) itself. */
#define HANDLE_BITS(h) ((uint64_t)(uintptr_t)(h))

/* The functions that create something return it through out_p. The Go
 * export gets wantOut = (out_p != NULL), to refuse a missing out_p with a
 * message, and a local to write to; *out_p is written here, once: the handle
 * or address on success, NULL on any error. */
#define RETURN_OUT(out_p, type, go_export, ...)                                        \
    do {                                                                               \
        uint64_t out_value = 0;                                                        \
        cucopy_status_t out_status =                                                   \
            (cucopy_status_t)go_export(__VA_ARGS__, (out_p) != NULL, &out_value);      \
        if ((out_p) != NULL)                                                           \
            *(out_p) = out_status == CUCOPY_OK ? (type)(uintptr_t)out_value : NULL;    \
        return out_status;                                                             \
    } while (0)

/* The ifaces (core.Iface.Serial) whose completion callbacks this thread is
 * running, innermost last: a callback may progress another iface, whose
 * callback runs inside it. A flush from inside any of them cannot wait for
 * that iface's callbacks (the running one, or those queued behind it on
 * this thread). Deeper nesting than the array is counted, not recorded:
 * a flush there is treated as inside every iface (it never waits for
 * callbacks, rather than forever). */
#define RUNNING_MAX 8
static __thread uint64_t running_ifaces[RUNNING_MAX];
static __thread int running_depth;

static void cucopy_complete(uintptr_t comp_addr, int status, uint64_t iface_serial)
{
    cucopy_completion_t *comp = (cucopy_completion_t *)comp_addr;
    if (status < 0 && comp->status == CUCOPY_OK)
        comp->status = (cucopy_status_t)status;
    if (--comp->count == 0 && comp->func != NULL) {
        if (running_depth < RUNNING_MAX)
            running_ifaces[running_depth] = iface_serial;
        running_depth++;
        comp->func(comp);
        running_depth--;
    }
}

void cucopy_complete_batch(const cucopy_ready_t *ready, int n, uint64_t iface_serial,
                           int64_t *nready)
{
    for (int k = 0; k < n; k++) {
        __atomic_sub_fetch(nready, 1, __ATOMIC_SEQ_CST); /* as Go's nready.Add(-1) */
        cucopy_complete(ready[k].comp, ready[k].status, iface_serial);
    }
}

int cucopy_in_callback_of(uint64_t iface_serial)
{
    if (running_depth > RUNNING_MAX)
        return 1;
    for (int k = 0; k < running_depth; k++)
        if (running_ifaces[k] == iface_serial)
            return 1;
    return 0;
}

unsigned cucopy_get_version(void)
{
    return CUCOPY_VERSION;
}

/* No default: with -Werror=switch (main.go) a status of the header without a
 * case here fails the build. Values outside the enum fall through. */
const char *cucopy_status_string(cucopy_status_t status)
{
    switch (status) {
    case CUCOPY_OK:
        return "CUCOPY_OK: success";
    case CUCOPY_INPROGRESS:
        return "CUCOPY_INPROGRESS: operation in progress";
    case CUCOPY_ERR_INVALID_PARAM:
        return "CUCOPY_ERR_INVALID_PARAM: invalid argument";
    case CUCOPY_ERR_INVALID_HANDLE:
        return "CUCOPY_ERR_INVALID_HANDLE: invalid, closed or poisoned handle";
    case CUCOPY_ERR_NO_MEMORY:
        return "CUCOPY_ERR_NO_MEMORY: out of host memory";
    case CUCOPY_ERR_NO_RESOURCE:
        return "CUCOPY_ERR_NO_RESOURCE: limit reached, progress and retry";
    case CUCOPY_ERR_BUSY:
        return "CUCOPY_ERR_BUSY: busy";
    case CUCOPY_ERR_UNSUPPORTED:
        return "CUCOPY_ERR_UNSUPPORTED: unsupported";
    case CUCOPY_ERR_NO_DEVICE:
        return "CUCOPY_ERR_NO_DEVICE: no usable device or context";
    case CUCOPY_ERR_NO_DRIVER:
        return "CUCOPY_ERR_NO_DRIVER: CUDA driver not loadable";
    case CUCOPY_ERR_CUDA:
        return "CUCOPY_ERR_CUDA: CUDA driver call failed";
    case CUCOPY_ERR_FORKED:
        return "CUCOPY_ERR_FORKED: called in a forked child";
    case CUCOPY_ERR_INTERNAL:
        return "CUCOPY_ERR_INTERNAL: internal error";
    case CUCOPY_ERR_OUT_OF_RANGE:
        return "CUCOPY_ERR_OUT_OF_RANGE: range crosses the end of its allocation";
    case CUCOPY_ERR_ALREADY_EXISTS:
        return "CUCOPY_ERR_ALREADY_EXISTS: range already registered";
    case CUCOPY_ERR_CANCELED:
        return "CUCOPY_ERR_CANCELED: canceled, its CUDA context was reset";
    }
    return "unknown status";
}

const char *cucopy_last_error(void)
{
    return last_error;
}

cucopy_status_t cucopy_context_create(const cucopy_context_params_t *params,
                                      cucopy_context_h *ctx_p)
{
    GUARD("context_create");
    cucopy_signals_reassert();
    RETURN_OUT(ctx_p, cucopy_context_h, cucopyGoContextCreate, (cucopy_context_params_t *)params);
}

cucopy_status_t cucopy_context_destroy(cucopy_context_h ctx)
{
    GUARD("context_destroy");
    return ctx == NULL ? CUCOPY_OK : (cucopy_status_t)cucopyGoContextDestroy(HANDLE_BITS(ctx));
}

cucopy_status_t cucopy_device_count(cucopy_context_h ctx, int *count)
{
    GUARD("device_count");
    return (cucopy_status_t)cucopyGoDeviceCount(HANDLE_BITS(ctx), count);
}

cucopy_status_t cucopy_iface_open(cucopy_context_h ctx, const cucopy_iface_params_t *params,
                                  cucopy_iface_h *iface_p)
{
    GUARD("iface_open");
    cucopy_signals_reassert();
    RETURN_OUT(iface_p, cucopy_iface_h, cucopyGoIfaceOpen, HANDLE_BITS(ctx),
               (cucopy_iface_params_t *)params);
}

cucopy_status_t cucopy_iface_close(cucopy_iface_h iface)
{
    GUARD("iface_close");
    return iface == NULL ? CUCOPY_OK : (cucopy_status_t)cucopyGoIfaceClose(HANDLE_BITS(iface));
}

cucopy_status_t cucopy_iface_query(cucopy_iface_h iface, cucopy_iface_attr_t *attr)
{
    GUARD("iface_query");
    return (cucopy_status_t)cucopyGoIfaceQuery(HANDLE_BITS(iface), attr);
}

int cucopy_iface_progress(cucopy_iface_h iface)
{
    GUARD("iface_progress");
    return cucopyGoIfaceProgress(HANDLE_BITS(iface));
}

cucopy_status_t cucopy_iface_flush(cucopy_iface_h iface, unsigned flags, cucopy_completion_t *comp)
{
    GUARD("iface_flush");
    return (cucopy_status_t)cucopyGoIfaceFlush(HANDLE_BITS(iface), flags, (uintptr_t)comp);
}

cucopy_status_t cucopy_iface_fence(cucopy_iface_h iface, unsigned flags)
{
    GUARD("iface_fence");
    return (cucopy_status_t)cucopyGoIfaceFence(HANDLE_BITS(iface), flags);
}

cucopy_status_t cucopy_iface_event_fd(cucopy_iface_h iface, int *fd_p)
{
    GUARD("iface_event_fd");
    return (cucopy_status_t)cucopyGoIfaceEventFd(HANDLE_BITS(iface), fd_p);
}

cucopy_status_t cucopy_iface_event_arm(cucopy_iface_h iface, unsigned events)
{
    GUARD("iface_event_arm");
    return (cucopy_status_t)cucopyGoIfaceEventArm(HANDLE_BITS(iface), events);
}

cucopy_status_t cucopy_ep_create(cucopy_iface_h iface, cucopy_ep_h *ep_p)
{
    GUARD("ep_create");
    RETURN_OUT(ep_p, cucopy_ep_h, cucopyGoEpCreate, HANDLE_BITS(iface));
}

cucopy_status_t cucopy_ep_destroy(cucopy_ep_h ep)
{
    GUARD("ep_destroy");
    return ep == NULL ? CUCOPY_OK : (cucopy_status_t)cucopyGoEpDestroy(HANDLE_BITS(ep));
}

cucopy_status_t cucopy_ep_put_short(cucopy_ep_h ep, const void *buffer, size_t length,
                                    uint64_t remote_addr)
{
    SHORT_FAST("ep_put_short", 1, (uintptr_t)buffer, 0, length, remote_addr, 0);
    return (cucopy_status_t)cucopyGoEpShort(HANDLE_BITS(ep), 1, (uintptr_t)buffer, 0, length,
                                            remote_addr, 0);
}

cucopy_status_t cucopy_ep_get_short(cucopy_ep_h ep, void *buffer, size_t length,
                                    uint64_t remote_addr)
{
    SHORT_FAST("ep_get_short", 0, (uintptr_t)buffer, 0, length, remote_addr, 0);
    return (cucopy_status_t)cucopyGoEpShort(HANDLE_BITS(ep), 0, (uintptr_t)buffer, 0, length,
                                            remote_addr, 0);
}

cucopy_status_t cucopy_ep_put_short_memh(cucopy_ep_h ep, const void *buffer, cucopy_memh_h memh,
                                         size_t length, uint64_t remote_addr,
                                         cucopy_memh_h remote_memh)
{
    SHORT_FAST("ep_put_short_memh", 3, (uintptr_t)buffer, HANDLE_BITS(memh), length, remote_addr,
               HANDLE_BITS(remote_memh));
    return (cucopy_status_t)cucopyGoEpShort(HANDLE_BITS(ep), 3, (uintptr_t)buffer,
                                            HANDLE_BITS(memh), length, remote_addr,
                                            HANDLE_BITS(remote_memh));
}

cucopy_status_t cucopy_ep_get_short_memh(cucopy_ep_h ep, void *buffer, cucopy_memh_h memh,
                                         size_t length, uint64_t remote_addr,
                                         cucopy_memh_h remote_memh)
{
    SHORT_FAST("ep_get_short_memh", 2, (uintptr_t)buffer, HANDLE_BITS(memh), length, remote_addr,
               HANDLE_BITS(remote_memh));
    return (cucopy_status_t)cucopyGoEpShort(HANDLE_BITS(ep), 2, (uintptr_t)buffer,
                                            HANDLE_BITS(memh), length, remote_addr,
                                            HANDLE_BITS(remote_memh));
}

cucopy_status_t cucopy_ep_put_zcopy_memh(cucopy_ep_h ep, const cucopy_iov_memh_t *iov,
                                         size_t iovcnt, uint64_t remote_addr,
                                         cucopy_memh_h remote_memh, cucopy_completion_t *comp)
{
    ZCOPY_FAST("ep_put_zcopy_memh", 3, remote_addr, HANDLE_BITS(remote_memh), comp);
    return (cucopy_status_t)cucopyGoEpZcopyMemh(HANDLE_BITS(ep), 1, (cucopy_iov_memh_t *)iov,
                                                iovcnt, remote_addr, HANDLE_BITS(remote_memh),
                                                (uintptr_t)comp);
}

cucopy_status_t cucopy_ep_get_zcopy_memh(cucopy_ep_h ep, const cucopy_iov_memh_t *iov,
                                         size_t iovcnt, uint64_t remote_addr,
                                         cucopy_memh_h remote_memh, cucopy_completion_t *comp)
{
    ZCOPY_FAST("ep_get_zcopy_memh", 2, remote_addr, HANDLE_BITS(remote_memh), comp);
    return (cucopy_status_t)cucopyGoEpZcopyMemh(HANDLE_BITS(ep), 0, (cucopy_iov_memh_t *)iov,
                                                iovcnt, remote_addr, HANDLE_BITS(remote_memh),
                                                (uintptr_t)comp);
}

cucopy_status_t cucopy_ep_copy_batch(cucopy_ep_h ep, const cucopy_copy_t *copies, size_t count,
                                     cucopy_completion_t *comp)
{
    GUARD("ep_copy_batch");
    return (cucopy_status_t)cucopyGoEpCopyBatch(HANDLE_BITS(ep), (cucopy_copy_t *)copies, count,
                                                (uintptr_t)comp);
}

cucopy_status_t cucopy_ep_copy_2d(cucopy_ep_h ep, const cucopy_copy_2d_t *copies, size_t count,
                                  cucopy_completion_t *comp)
{
    GUARD("ep_copy_2d");
    return (cucopy_status_t)cucopyGoEpCopy2D(HANDLE_BITS(ep), (cucopy_copy_2d_t *)copies, count,
                                             (uintptr_t)comp);
}

cucopy_status_t cucopy_ep_put_zcopy(cucopy_ep_h ep, const cucopy_iov_t *iov, size_t iovcnt,
                                    uint64_t remote_addr, cucopy_completion_t *comp)
{
    ZCOPY_FAST("ep_put_zcopy", 1, remote_addr, 0, comp);
    return (cucopy_status_t)cucopyGoEpZcopy(HANDLE_BITS(ep), 1, (cucopy_iov_t *)iov, iovcnt,
                                            remote_addr, (uintptr_t)comp);
}

cucopy_status_t cucopy_ep_get_zcopy(cucopy_ep_h ep, const cucopy_iov_t *iov, size_t iovcnt,
                                    uint64_t remote_addr, cucopy_completion_t *comp)
{
    ZCOPY_FAST("ep_get_zcopy", 0, remote_addr, 0, comp);
    return (cucopy_status_t)cucopyGoEpZcopy(HANDLE_BITS(ep), 0, (cucopy_iov_t *)iov, iovcnt,
                                            remote_addr, (uintptr_t)comp);
}

cucopy_status_t cucopy_ep_flush(cucopy_ep_h ep, unsigned flags, cucopy_completion_t *comp)
{
    GUARD("ep_flush");
    return (cucopy_status_t)cucopyGoEpFlush(HANDLE_BITS(ep), flags, (uintptr_t)comp);
}

cucopy_status_t cucopy_ep_fence(cucopy_ep_h ep, unsigned flags)
{
    GUARD("ep_fence");
    return (cucopy_status_t)cucopyGoEpFence(HANDLE_BITS(ep), flags);
}

cucopy_status_t cucopy_device_query(cucopy_context_h ctx, int ordinal, cucopy_device_attr_t *attr)
{
    GUARD("device_query");
    return (cucopy_status_t)cucopyGoDeviceQuery(HANDLE_BITS(ctx), ordinal, attr);
}

cucopy_status_t cucopy_device_peer_query(cucopy_context_h ctx, int device, int peer,
                                         cucopy_peer_attr_t *attr)
{
    GUARD("device_peer_query");
    return (cucopy_status_t)cucopyGoDevicePeerQuery(HANDLE_BITS(ctx), device, peer, attr);
}

cucopy_status_t cucopy_mem_query(cucopy_context_h ctx, const void *addr, size_t length,
                                 cucopy_mem_attr_t *attr)
{
    GUARD("mem_query");
    return (cucopy_status_t)cucopyGoMemQuery(HANDLE_BITS(ctx), (uintptr_t)addr, length, attr);
}

cucopy_status_t cucopy_mem_alloc(cucopy_context_h ctx, const cucopy_mem_alloc_params_t *params,
                                 void **addr_p)
{
    GUARD("mem_alloc");
    RETURN_OUT(addr_p, void *, cucopyGoMemAlloc, HANDLE_BITS(ctx),
               (cucopy_mem_alloc_params_t *)params);
}

cucopy_status_t cucopy_mem_free(cucopy_context_h ctx, void *addr)
{
    GUARD("mem_free");
    return (cucopy_status_t)cucopyGoMemFree(HANDLE_BITS(ctx), (uintptr_t)addr);
}

cucopy_status_t cucopy_mem_reg(cucopy_context_h ctx, void *addr, size_t length, unsigned flags,
                               cucopy_memh_h *memh_p)
{
    GUARD("mem_reg");
    RETURN_OUT(memh_p, cucopy_memh_h, cucopyGoMemReg, HANDLE_BITS(ctx), (uintptr_t)addr, length,
               flags);
}

cucopy_status_t cucopy_mem_describe(cucopy_context_h ctx, const void *addr, size_t length,
                                    cucopy_memh_h *memh_p)
{
    GUARD("mem_describe");
    RETURN_OUT(memh_p, cucopy_memh_h, cucopyGoMemDescribe, HANDLE_BITS(ctx), (uintptr_t)addr,
               length);
}

cucopy_status_t cucopy_mem_dereg(cucopy_context_h ctx, cucopy_memh_h memh)
{
    GUARD("mem_dereg");
    return memh == NULL ? CUCOPY_OK
                        : (cucopy_status_t)cucopyGoMemDereg(HANDLE_BITS(ctx), HANDLE_BITS(memh));
}

cucopy_status_t cucopy_iface_stats(cucopy_iface_h iface, cucopy_iface_stats_t *stats)
{
    GUARD("iface_stats");
    return (cucopy_status_t)cucopyGoIfaceStats(HANDLE_BITS(iface), stats);
}

cucopy_status_t cucopy_iface_estimate(cucopy_iface_h iface, cucopy_memory_type_t src_type,
                                      int src_device, cucopy_memory_type_t dst_type, int dst_device,
                                      size_t length, unsigned flags, cucopy_estimate_attr_t *attr)
{
    GUARD("iface_estimate");
    return (cucopy_status_t)cucopyGoIfaceEstimate(HANDLE_BITS(iface), (int)src_type, src_device,
                                                  (int)dst_type, dst_device, length, flags, attr);
}

cucopy_status_t cucopy_iface_release_context(cucopy_iface_h iface, uint64_t cuda_ctx_id)
{
    GUARD("iface_release_context");
    return (cucopy_status_t)cucopyGoIfaceReleaseContext(HANDLE_BITS(iface), cuda_ctx_id);
}
