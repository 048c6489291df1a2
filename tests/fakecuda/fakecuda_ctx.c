/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Contexts: primary contexts with retain counts and reset, created contexts,
 * the thread-local current-context stack, context ids, peer access and
 * sticky errors.
 *
 * A context object is never freed. A primary context keeps its handle across
 * incarnations (as on the real driver) but gets a new id each time it is
 * activated; everything created in an old incarnation stays dead. That is
 * the trap real code falls into, so the fake reproduces it faithfully and
 * reports any use of the dead resources as a violation.
 */
#include "fakecuda_internal.h"

#include <stdlib.h>

struct fk_table fk_ctx_table = {.obj_size = sizeof(struct fk_ctx)};
atomic_long fk_ctx_creation_count;

static unsigned long long fk_next_ctx_id = 1; /* under fk_lock */
static struct fk_ctx *fk_primary[FK_MAX_DEVICES];

static _Thread_local struct fk_ctx *fk_stack[FK_MAX_STACK];
static _Thread_local int fk_depth;

static struct fk_ctx *fk_ctx_new_locked(int device, int primary)
{
    const void *handle = NULL;
    struct fk_ctx *c = fk_table_new(&fk_ctx_table, &handle);
    if (c == NULL)
        return NULL;
    c->handle = (cdContext)handle;
    c->device = device;
    c->primary = primary;
    return c;
}

void fk_ctx_setup(void)
{
    pthread_mutex_lock(&fk_lock);
    for (int dev = 0; dev < fk_cfg.devices; dev++) {
        fk_primary[dev] = fk_ctx_new_locked(dev, 1);
        if (fk_primary[dev] == NULL)
            abort();
    }
    pthread_mutex_unlock(&fk_lock);
}

static void fk_ctx_activate_locked(struct fk_ctx *c)
{
    c->last_id = fk_next_ctx_id++;
    c->npeers = 0;
    c->default_stream = NULL;
    atomic_store(&c->poison, 0);
    atomic_store(&c->live_id, c->last_id);
    atomic_fetch_add(&fk_ctx_creation_count, 1);
}

/* Ends the live incarnation. The streams are stopped here and joined by the
 * caller after it dropped fk_lock: their workers finish the queued work
 * first, as the real driver's destroy/reset synchronizes. */
static void fk_ctx_kill_locked(struct fk_ctx *c, struct fk_stream ***stopped, int *nstopped)
{
    atomic_store(&c->live_id, 0);
    c->retain = 0;
    c->npeers = 0;
    fk_streams_kill_ctx_locked(c, stopped, nstopped);
    c->default_stream = NULL;
}

struct fk_ctx *fk_ctx_find(cdContext handle)
{
    return fk_table_find(&fk_ctx_table, handle);
}

struct fk_ctx *fk_ctx_current(void)
{
    return fk_depth > 0 ? fk_stack[fk_depth - 1] : NULL;
}

int fk_ctx_alive(const struct fk_ctx *c, unsigned long long id)
{
    return id != 0 && atomic_load(&c->live_id) == id;
}

cdResult fk_ctx_require_current(struct fk_ctx **out, const char *api, int poison_applies)
{
    struct fk_ctx *c = fk_ctx_current();
    if (c == NULL)
        return CD_ERROR_INVALID_CONTEXT;
    if (atomic_load(&c->live_id) == 0)
        return fk_violation(CD_ERROR_CONTEXT_IS_DESTROYED,
                            "%s: the current context (device %d, last id %llu) is destroyed", api,
                            c->device, c->last_id);
    int poison = atomic_load(&c->poison);
    if (poison_applies && poison != 0)
        return (cdResult)poison;
    *out = c;
    return CD_SUCCESS;
}

cdResult fk_ctx_owned_check(const char *api, const char *kind, const void *h,
                            const char *ended_by, const struct fk_ctx *c,
                            unsigned long long ctx_id)
{
    if (ended_by != NULL)
        return fk_violation(CD_ERROR_INVALID_HANDLE, "%s: %s %p used after %s", api, kind, h,
                            ended_by);
    if (!fk_ctx_alive(c, ctx_id))
        return fk_violation(CD_ERROR_CONTEXT_IS_DESTROYED,
                            "%s: %s %p belongs to a dead context (device %d, id %llu)", api, kind,
                            h, c->device, ctx_id);
    return CD_SUCCESS;
}

/* A context handle given by the caller: must be ours and alive. */
static cdResult fk_ctx_check_handle(cdContext handle, const char *api, struct fk_ctx **out)
{
    struct fk_ctx *c = fk_ctx_find(handle);
    if (c == NULL)
        return fk_violation(CD_ERROR_INVALID_CONTEXT, "%s: %p is not a context handle", api,
                            (void *)handle);
    if (atomic_load(&c->live_id) == 0)
        return fk_violation(CD_ERROR_CONTEXT_IS_DESTROYED,
                            "%s: context %p (device %d, last id %llu) is destroyed%s", api,
                            (void *)handle, c->device, c->last_id,
                            c->primary ? " (primary context released or reset)" : "");
    *out = c;
    return CD_SUCCESS;
}

static cdResult fk_ctx_push(struct fk_ctx *c, const char *api)
{
    if (fk_depth == FK_MAX_STACK)
        return fk_violation(CD_ERROR_INVALID_VALUE,
                            "%s: context stack deeper than %d (a push without its pop?)", api,
                            FK_MAX_STACK);
    fk_stack[fk_depth++] = c;
    return CD_SUCCESS;
}

/* ---- the current-context stack ------------------------------------------------- */

cdResult cuCtxGetCurrent(cdContext *ctx)
{
    FK_ENTER(cuCtxGetCurrent);
    if (ctx == NULL)
        return CD_ERROR_INVALID_VALUE;
    struct fk_ctx *c = fk_ctx_current();
    *ctx = c ? c->handle : NULL;
    return CD_SUCCESS;
}

cdResult cuCtxSetCurrent(cdContext ctx)
{
    FK_ENTER(cuCtxSetCurrent);
    if (ctx == NULL) {
        if (fk_depth > 0)
            fk_depth--;
        return CD_SUCCESS;
    }
    struct fk_ctx *c = NULL;
    cdResult rc = fk_ctx_check_handle(ctx, "cuCtxSetCurrent", &c);
    if (rc != CD_SUCCESS)
        return rc;
    if (fk_depth == 0)
        return fk_ctx_push(c, "cuCtxSetCurrent");
    fk_stack[fk_depth - 1] = c;
    return CD_SUCCESS;
}

cdResult cuCtxPushCurrent_v2(cdContext ctx)
{
    FK_ENTER(cuCtxPushCurrent);
    if (ctx == NULL)
        return CD_ERROR_INVALID_VALUE;
    struct fk_ctx *c = NULL;
    cdResult rc = fk_ctx_check_handle(ctx, "cuCtxPushCurrent", &c);
    if (rc != CD_SUCCESS)
        return rc;
    return fk_ctx_push(c, "cuCtxPushCurrent");
}

cdResult cuCtxPopCurrent_v2(cdContext *ctx)
{
    FK_ENTER(cuCtxPopCurrent);
    if (fk_depth == 0)
        return CD_ERROR_INVALID_CONTEXT;
    /* Popping a destroyed context is allowed: that is how a thread gets rid
     * of a context another thread destroyed. */
    struct fk_ctx *c = fk_stack[--fk_depth];
    if (ctx != NULL)
        *ctx = c->handle;
    return CD_SUCCESS;
}

cdResult cuCtxGetDevice(cdDevice *device)
{
    FK_ENTER(cuCtxGetDevice);
    if (device == NULL)
        return CD_ERROR_INVALID_VALUE;
    struct fk_ctx *c = NULL;
    cdResult rc = fk_ctx_require_current(&c, "cuCtxGetDevice", 0);
    if (rc != CD_SUCCESS)
        return rc;
    *device = c->device;
    return CD_SUCCESS;
}

cdResult cuCtxGetId(cdContext ctx, unsigned long long *id)
{
    FK_ENTER(cuCtxGetId);
    if (fk_cfg.no_ctx_getid || fk_cfg.driver_version < 12000)
        return fk_violation(CD_ERROR_NOT_SUPPORTED,
                            "cuCtxGetId called although this driver (version %d%s) lacks it",
                            fk_cfg.driver_version,
                            fk_cfg.no_ctx_getid ? ", FAKECUDA_NO_CTX_GETID" : "");
    if (id == NULL)
        return CD_ERROR_INVALID_VALUE;
    struct fk_ctx *c = ctx != NULL ? fk_ctx_find(ctx) : NULL;
    /* Measured on driver 580: asking a reset (inactive) primary context for
     * its id is answered, with CONTEXT_IS_DESTROYED; the handle persists. */
    if (c != NULL && c->primary && atomic_load(&c->live_id) == 0)
        return CD_ERROR_CONTEXT_IS_DESTROYED;
    cdResult rc = ctx == NULL ? fk_ctx_require_current(&c, "cuCtxGetId", 0)
                              : fk_ctx_check_handle(ctx, "cuCtxGetId", &c);
    if (rc != CD_SUCCESS)
        return rc;
    *id = atomic_load(&c->live_id);
    return CD_SUCCESS;
}

/* ---- created contexts ---------------------------------------------------------- */

cdResult cuCtxCreate_v2(cdContext *ctx, unsigned int flags, cdDevice dev)
{
    FK_ENTER(cuCtxCreate);
    if (ctx == NULL || (flags & ~0xffu) != 0)
        return CD_ERROR_INVALID_VALUE;
    if (!fk_device_valid(dev))
        return CD_ERROR_INVALID_DEVICE;
    if (fk_depth == FK_MAX_STACK)
        return fk_violation(CD_ERROR_INVALID_VALUE, "cuCtxCreate: context stack deeper than %d",
                            FK_MAX_STACK);
    pthread_mutex_lock(&fk_lock);
    struct fk_ctx *c = fk_ctx_new_locked(dev, 0);
    if (c != NULL)
        fk_ctx_activate_locked(c);
    pthread_mutex_unlock(&fk_lock);
    if (c == NULL)
        return CD_ERROR_OUT_OF_MEMORY;
    *ctx = c->handle;
    return fk_ctx_push(c, "cuCtxCreate");
}

cdResult cuCtxDestroy_v2(cdContext ctx)
{
    FK_ENTER(cuCtxDestroy);
    if (ctx == NULL)
        return CD_ERROR_INVALID_VALUE;
    struct fk_stream **stopped = NULL;
    int nstopped = 0;
    pthread_mutex_lock(&fk_lock);
    struct fk_ctx *c = NULL;
    cdResult rc = fk_ctx_check_handle(ctx, "cuCtxDestroy", &c);
    if (rc == CD_SUCCESS && c->primary)
        rc = fk_violation(CD_ERROR_INVALID_CONTEXT,
                          "cuCtxDestroy on the primary context of device %d", c->device);
    if (rc == CD_SUCCESS)
        fk_ctx_kill_locked(c, &stopped, &nstopped);
    pthread_mutex_unlock(&fk_lock);
    if (rc != CD_SUCCESS)
        return rc;
    fk_streams_join(stopped, nstopped);
    /* "If the context is current to the calling thread then it will also be
     * popped"; other threads keep it and get CONTEXT_IS_DESTROYED. */
    if (fk_depth > 0 && fk_stack[fk_depth - 1] == c)
        fk_depth--;
    return CD_SUCCESS;
}

/* ---- primary contexts ------------------------------------------------------------ */

cdResult cuDevicePrimaryCtxRetain(cdContext *ctx, cdDevice dev)
{
    FK_ENTER(cuDevicePrimaryCtxRetain);
    if (ctx == NULL)
        return CD_ERROR_INVALID_VALUE;
    if (!fk_device_valid(dev))
        return CD_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&fk_lock);
    struct fk_ctx *c = fk_primary[dev];
    if (atomic_load(&c->live_id) == 0)
        fk_ctx_activate_locked(c);
    c->retain++;
    *ctx = c->handle;
    pthread_mutex_unlock(&fk_lock);
    return CD_SUCCESS;
}

cdResult cuDevicePrimaryCtxRelease_v2(cdDevice dev)
{
    FK_ENTER(cuDevicePrimaryCtxRelease);
    if (!fk_device_valid(dev))
        return CD_ERROR_INVALID_DEVICE;
    struct fk_stream **stopped = NULL;
    int nstopped = 0;
    cdResult rc = CD_SUCCESS;
    pthread_mutex_lock(&fk_lock);
    struct fk_ctx *c = fk_primary[dev];
    if (c->retain == 0)
        rc = fk_violation(CD_ERROR_INVALID_CONTEXT,
                          "cuDevicePrimaryCtxRelease of device %d, which is not retained", dev);
    else if (--c->retain == 0)
        fk_ctx_kill_locked(c, &stopped, &nstopped);
    pthread_mutex_unlock(&fk_lock);
    fk_streams_join(stopped, nstopped);
    return rc;
}

cdResult cuDevicePrimaryCtxReset_v2(cdDevice dev)
{
    FK_ENTER(cuDevicePrimaryCtxReset);
    if (!fk_device_valid(dev))
        return CD_ERROR_INVALID_DEVICE;
    struct fk_stream **stopped = NULL;
    int nstopped = 0;
    pthread_mutex_lock(&fk_lock);
    struct fk_ctx *c = fk_primary[dev];
    /* "Resetting the primary context does not release it, an application
     * that has retained the primary context should explicitly release its
     * usage" (and may, safely, after the reset): the count stays. */
    int retain = c->retain;
    if (atomic_load(&c->live_id) != 0)
        fk_ctx_kill_locked(c, &stopped, &nstopped);
    c->retain = retain;
    pthread_mutex_unlock(&fk_lock);
    fk_streams_join(stopped, nstopped);
    return CD_SUCCESS;
}

cdResult cuDevicePrimaryCtxGetState(cdDevice dev, unsigned int *flags, int *active)
{
    FK_ENTER(cuDevicePrimaryCtxGetState);
    if (flags == NULL || active == NULL)
        return CD_ERROR_INVALID_VALUE;
    if (!fk_device_valid(dev))
        return CD_ERROR_INVALID_DEVICE;
    *flags = CD_CTX_SCHED_AUTO;
    *active = atomic_load(&fk_primary[dev]->live_id) != 0;
    return CD_SUCCESS;
}

/* ---- peer access ------------------------------------------------------------------ */

cdResult cuCtxEnablePeerAccess(cdContext peer, unsigned int flags)
{
    FK_ENTER(cuCtxEnablePeerAccess);
    if (flags != 0)
        return CD_ERROR_INVALID_VALUE;
    struct fk_ctx *cur = NULL;
    cdResult rc = fk_ctx_require_current(&cur, "cuCtxEnablePeerAccess", 0);
    if (rc != CD_SUCCESS)
        return rc;
    struct fk_ctx *p = NULL;
    rc = fk_ctx_check_handle(peer, "cuCtxEnablePeerAccess", &p);
    if (rc != CD_SUCCESS)
        return rc;
    if (p->device == cur->device)
        return CD_ERROR_INVALID_DEVICE;
    if (fk_cfg.no_peer)
        return CD_ERROR_PEER_ACCESS_UNSUPPORTED;
    unsigned long long peer_id = atomic_load(&p->live_id);
    pthread_mutex_lock(&fk_lock);
    for (int i = 0; i < cur->npeers && rc == CD_SUCCESS; i++) {
        if (cur->peers[i] == peer_id)
            rc = CD_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    }
    if (rc == CD_SUCCESS && cur->npeers == FK_MAX_PEERS)
        rc = CD_ERROR_TOO_MANY_PEERS;
    if (rc == CD_SUCCESS)
        cur->peers[cur->npeers++] = peer_id;
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* ---- sticky errors ------------------------------------------------------------------ */

int fk_ctx_set_poison(struct fk_ctx *c, unsigned long long id, int code)
{
    pthread_mutex_lock(&fk_lock);
    int alive = fk_ctx_alive(c, id);
    if (alive)
        atomic_store(&c->poison, code);
    pthread_mutex_unlock(&fk_lock);
    return alive;
}
