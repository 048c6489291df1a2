/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The C ABI's side of the C steady state (docs/design.md, "The C steady
 * state"): C mirrors of the endpoint and memory-handle tables, so that a
 * call can find its iface, lane and handle descriptions without Go, and the
 * copies of one piece that run entirely in C (cudadrv/cd_fast.c).
 *
 * Go writes an index when it adds a handle and clears it when the index
 * stops naming a usable one (capi/handles.go, mirror). Readers take no
 * lock: an entry is a seqlock on its own handle word, which never names a
 * second object (handles carry a generation). A reader that loses a race
 * answers "not here", and the call goes to Go, which decides.
 */
#include <stdint.h>

#include "capi.h"
#include "cd_shim.h"

typedef struct fast_ep {
    uint64_t handle; /* the live handle of this index, 0 if none */
    uint64_t iface;  /* its iface's cd_fast_iface */
    uint64_t lane;
} fast_ep;

typedef struct fast_memh {
    uint64_t handle;
    uint64_t ctx_serial; /* its cucopy context's (core.Context.Serial) */
    uint64_t addr;
    uint64_t length;
    uint64_t classify; /* the driver classifies its side per copy (core.MemHandle) */
    uint64_t desc[sizeof(cd_mdesc) / sizeof(uint64_t)];
} fast_memh;

_Static_assert(sizeof(cd_mdesc) % sizeof(uint64_t) == 0, "cd_mdesc is whole words");

static fast_ep fast_eps[CAPI_FAST_EPS];
static fast_memh fast_memhs[CAPI_FAST_MEMHS];

/* The writer's halves of the seqlock: open hides the entry before its
 * words change, publish shows it with them. */
static void fast_open(uint64_t *handle)
{
    __atomic_store_n(handle, 0, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

static void fast_store(uint64_t *w, uint64_t v)
{
    __atomic_store_n(w, v, __ATOMIC_RELAXED);
}

static void fast_publish(uint64_t *handle, uint64_t h)
{
    __atomic_store_n(handle, h, __ATOMIC_RELEASE);
}

void capi_fast_ep_set(uint32_t idx, uint64_t handle, void *iface, int32_t lane)
{
    fast_ep *e = &fast_eps[idx];
    fast_open(&e->handle);
    fast_store(&e->iface, (uint64_t)(uintptr_t)iface);
    fast_store(&e->lane, (uint64_t)(uint32_t)lane);
    fast_publish(&e->handle, handle);
}

void capi_fast_memh_set(uint32_t idx, uint64_t handle, uint64_t ctx_serial, uint64_t addr,
                        uint64_t length, int classify, const void *desc)
{
    fast_memh *e = &fast_memhs[idx];
    const uint64_t *d = desc;
    fast_open(&e->handle);
    fast_store(&e->ctx_serial, ctx_serial);
    fast_store(&e->addr, addr);
    fast_store(&e->length, length);
    fast_store(&e->classify, (uint64_t)classify);
    for (size_t k = 0; k < sizeof(e->desc) / sizeof(e->desc[0]); k++)
        fast_store(&e->desc[k], d[k]);
    fast_publish(&e->handle, handle);
}

void capi_fast_clear(int memh, uint32_t idx)
{
    fast_open(memh ? &fast_memhs[idx].handle : &fast_eps[idx].handle);
}

/* The entry of handle h in a table of n, or NULL. */
static uint64_t *fast_handle(uint64_t h, uint32_t n, void *table, size_t size)
{
    uint32_t idx = (uint32_t)h - 1;
    if ((uint32_t)h == 0 || idx >= n)
        return NULL;
    uint64_t *handle = (uint64_t *)((char *)table + (size_t)idx * size);
    return __atomic_load_n(handle, __ATOMIC_ACQUIRE) == h ? handle : NULL;
}

static uint64_t fast_load(const uint64_t *w)
{
    return __atomic_load_n(w, __ATOMIC_RELAXED);
}

/* The reader's end: the words read since fast_handle are the entry of h. */
static int fast_still(const uint64_t *handle, uint64_t h)
{
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(handle, __ATOMIC_RELAXED) == h;
}

static int fast_ep_get(uint64_t h, cd_fast_iface **iface, int32_t *lane)
{
    uint64_t *handle = fast_handle(h, CAPI_FAST_EPS, fast_eps, sizeof(fast_ep));
    if (handle == NULL)
        return 0;
    fast_ep *e = (fast_ep *)handle;
    *iface = (cd_fast_iface *)(uintptr_t)fast_load(&e->iface);
    *lane = (int32_t)fast_load(&e->lane);
    return fast_still(handle, h);
}

/* The description of memory handle h for [addr, addr+length) of a copy on
 * a context with serial ctx_serial: *side is d, or NULL when the driver
 * classifies the side. 0 when the C steady state does not take it (no such
 * handle, another context's, or a range outside it: Go says which). */
static int fast_memh_get(uint64_t h, uint64_t ctx_serial, uint64_t addr, uint64_t length,
                         cd_mdesc *d, const cd_mdesc **side)
{
    *side = NULL;
    if (h == 0)
        return 1;
    uint64_t *handle = fast_handle(h, CAPI_FAST_MEMHS, fast_memhs, sizeof(fast_memh));
    if (handle == NULL)
        return 0;
    fast_memh *e = (fast_memh *)handle;
    uint64_t serial = fast_load(&e->ctx_serial), a = fast_load(&e->addr),
             n = fast_load(&e->length), classify = fast_load(&e->classify);
    uint64_t words[sizeof(e->desc) / sizeof(e->desc[0])];
    for (size_t k = 0; k < sizeof(words) / sizeof(words[0]); k++)
        words[k] = fast_load(&e->desc[k]);
    if (!fast_still(handle, h))
        return 0;
    /* core.Iface.checkHandle's test. */
    if (serial != ctx_serial || addr < a || addr - a > n || length > n - (addr - a))
        return 0;
    if (!classify) {
        __builtin_memcpy(d, words, sizeof(*d));
        *side = d;
    }
    return 1;
}

int capi_fast(uint64_t ep, int how, uintptr_t buffer, uint64_t memh, size_t length,
              uint64_t remote, uint64_t remote_memh, uintptr_t comp, int32_t *entry,
              uint32_t *result)
{
    cd_fast_iface *f;
    int32_t lane;
    if (!fast_ep_get(ep, &f, &lane) || f == NULL)
        return CD_FAST_DECLINED;
    cd_mdesc bd, rd;
    const cd_mdesc *bs, *rs;
    if (!fast_memh_get(memh, f->ctx_serial, buffer, length, &bd, &bs) ||
        !fast_memh_get(remote_memh, f->ctx_serial, remote, length, &rd, &rs))
        return CD_FAST_DECLINED;
    /* core's endpoints: put copies local -> remote, get remote -> local. */
    uint64_t dst = buffer, src = remote;
    const cd_mdesc *dd = bs, *sd = rs;
    if (how & 1) {
        dst = remote;
        src = buffer;
        dd = rs;
        sd = bs;
    }
    cd_err err;
    int st = (how & CAPI_FAST_ZCOPY) ? cd_fast_zcopy(f, lane, dst, src, length, dd, sd, comp, &err)
                                     : cd_fast_short(f, lane, dst, src, length, dd, sd, &err);
    *entry = err.entry;
    *result = err.result;
    return st;
}
