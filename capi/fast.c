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
#include <string.h>

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

/* The index of handle h's description among mems (core's memSides.index:
 * 1-based, the same handle the same index, 0 for none or a side the driver
 * classifies); -1 when the C steady state does not take the handle. */
static int32_t fast_mem_index(uint64_t h, uint64_t ctx_serial, uint64_t addr, uint64_t length,
                              cd_mdesc *mems, uint64_t *owners, int32_t *n)
{
    cd_mdesc d;
    const cd_mdesc *side;
    if (!fast_memh_get(h, ctx_serial, addr, length, &d, &side))
        return -1;
    if (side == NULL)
        return 0;
    for (int32_t k = 0; k < *n; k++)
        if (owners[k] == h)
            return k + 1;
    mems[*n] = d;
    owners[*n] = h;
    return ++*n;
}

int capi_fast_short(uint64_t ep, int how, uintptr_t buffer, uint64_t memh, size_t length,
                    uint64_t remote, uint64_t remote_memh, int32_t *entry, uint32_t *result)
{
    cd_fast_iface *f;
    int32_t lane;
    if (!fast_ep_get(ep, &f, &lane) || f == NULL)
        return CD_FAST_DECLINED;
    cd_mdesc mems[2];
    uint64_t owners[2];
    int32_t nmems = 0;
    int32_t lmem = fast_mem_index(memh, f->ctx_serial, buffer, length, mems, owners, &nmems);
    int32_t rmem = fast_mem_index(remote_memh, f->ctx_serial, remote, length, mems, owners, &nmems);
    if (lmem < 0 || rmem < 0)
        return CD_FAST_DECLINED;
    /* core's endpoints: put copies local -> remote, get remote -> local. */
    cd_piece p = {0};
    p.len = length;
    p.dst = (how & 1) ? remote : buffer;
    p.dst_mem = (how & 1) ? rmem : lmem;
    p.src = (how & 1) ? buffer : remote;
    p.src_mem = (how & 1) ? lmem : rmem;
    cd_err err;
    int st = cd_fast_short(f, lane, &p, mems, &err);
    *entry = err.entry;
    *result = err.result;
    return st;
}

int capi_fast_zcopy(uint64_t ep, int how, const void *iov, size_t iovcnt, uint64_t remote,
                    uint64_t remote_memh, uintptr_t comp, int32_t *entry, uint32_t *result)
{
    cd_fast_iface *f;
    int32_t lane;
    if (iov == NULL || iovcnt == 0 || iovcnt > CD_MAX_RUN || !fast_ep_get(ep, &f, &lane) ||
        f == NULL)
        return CD_FAST_DECLINED;
    const cucopy_iov_t *plain = iov;
    const cucopy_iov_memh_t *with = iov;
    int memh = (how & 2) != 0;
    /* core.Ep.zcopy: the non-empty entries, back to back from remote. */
    cd_piece pieces[CD_MAX_RUN];
    cd_mdesc mems[CD_MAX_RUN + 1];
    uint64_t owners[CD_MAX_RUN + 1];
    int32_t n = 0, nmems = 0;
    uint64_t total = 0;
    for (size_t k = 0; k < iovcnt; k++) {
        uint64_t buffer = (uint64_t)(uintptr_t)(memh ? with[k].buffer : plain[k].buffer);
        uint64_t length = memh ? with[k].length : plain[k].length;
        uint64_t h = memh ? (uint64_t)(uintptr_t)with[k].memh : 0;
        if (length == 0) {
            /* Go refuses an unknown handle even on an empty entry. */
            if (h != 0 && fast_handle(h, CAPI_FAST_MEMHS, fast_memhs, sizeof(fast_memh)) == NULL)
                return CD_FAST_DECLINED;
            continue;
        }
        if (buffer == 0 || buffer > UINT64_MAX - length || total > UINT64_MAX - length)
            return CD_FAST_DECLINED;
        int32_t local = 0;
        if (memh) {
            local = fast_mem_index(h, f->ctx_serial, buffer, length, mems, owners, &nmems);
            if (local < 0)
                return CD_FAST_DECLINED;
        }
        cd_piece *p = &pieces[n++];
        memset(p, 0, sizeof(*p));
        p->len = length;
        p->dst = buffer;  /* get: remote -> local */
        p->src = total;   /* the offset from remote, until remote is known */
        p->dst_mem = local;
        total += length;
    }
    if (n == 0 || remote == 0 || remote > UINT64_MAX - total)
        return CD_FAST_DECLINED;
    int32_t rmem = fast_mem_index(remote_memh, f->ctx_serial, remote, total, mems, owners, &nmems);
    if (rmem < 0)
        return CD_FAST_DECLINED;
    for (int32_t k = 0; k < n; k++) {
        cd_piece *p = &pieces[k];
        uint64_t at = remote + p->src, local = p->dst;
        int32_t lmem = p->dst_mem;
        if (how & 1) { /* put: local -> remote */
            p->dst = at;
            p->src = local;
            p->dst_mem = rmem;
            p->src_mem = lmem;
        } else {
            p->src = at;
            p->src_mem = rmem;
        }
    }
    cd_err err;
    int st = cd_fast_zcopy(f, lane, pieces, n, mems, comp, &err);
    *entry = err.entry;
    *result = err.result;
    return st;
}
