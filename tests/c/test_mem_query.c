/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cucopy_mem_query for every allocator x {no context current, a context of
 * the memory's device current, another device's context current, a new
 * thread} x {the base address, an interior pointer with the rest of the
 * allocation, an interior address with length 0}: every field checked against
 * what the raw driver set up, the current context unchanged and (fake)
 * nothing activated. Allocators: cuMemAlloc on each device, cuMemAllocManaged
 * (no preferred location, preferred device, preferred host), cuMemHostAlloc,
 * the program's cuMemHostRegister, malloc, stack, VMM (cuMemCreate +
 * cuMemMap) on each device and host-located (HOST_NUMA 0; SKIP line when the
 * driver refuses it), stream-ordered pool memory (cuMemAllocAsync),
 * cucopy_mem_alloc (device, managed, host) and cucopy_mem_reg.
 * Also: ranges crossing the end of an allocation (OUT_OF_RANGE), freed
 * pointers of every kind (never device memory), field_mask semantics, bad
 * input; copies (put/get, short/zcopy) to and from VMM, pool, registered and
 * cucopy_mem_alloc'ed memory with the data verified; VMM memory whose
 * device's primary context is inactive: copies fail with NO_DEVICE and
 * nothing is activated.
 */
#define _GNU_SOURCE
#include "calls.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEN ((size_t)1 << 20)
#define CLEN ((size_t)16384) /* bytes copied */
#define NO_CHECK (-100)      /* preferred_location not checked */
#define MAX_ALLOCS 32

#define ALL_MEM_FIELDS                                                                           \
    (CUCOPY_MEM_ATTR_MEM_TYPE | CUCOPY_MEM_ATTR_PINNED | CUCOPY_MEM_ATTR_DEVICE |               \
     CUCOPY_MEM_ATTR_CONTEXT_ID | CUCOPY_MEM_ATTR_ALLOCATION | CUCOPY_MEM_ATTR_FLAGS |           \
     CUCOPY_MEM_ATTR_ACCESS)

static cucopy_context_h ctx;
static int ndev;
static int other_dev; /* a device other than 0 where there is one, else -1 */

/* One allocation and what mem_query must say of it. */
struct alloc {
    char name[64];
    uint64_t addr;
    size_t len;        /* bytes usable from addr */
    int home;          /* device whose context is "the same device" */
    cucopy_memory_type_t type;
    int pinned;
    int device;
    uint64_t ctx_id;
    uint64_t base;     /* 0 and 0: not known (pageable) */
    size_t alen;
    uint64_t flags;
    int preferred;     /* NO_CHECK for kinds other than managed */
    uint64_t access;
    int check_access;
    int cuda_known;    /* ranges crossing its end are OUT_OF_RANGE */
};

static struct alloc allocs[MAX_ALLOCS];
static int nallocs;

static uint64_t all_devices(void)
{
    return ndev >= 64 ? ~0ull : (1ull << ndev) - 1;
}

static struct alloc *add(const char *name, uint64_t addr, size_t len, int home)
{
    REQUIRE(nallocs < MAX_ALLOCS);
    struct alloc *a = &allocs[nallocs++];
    memset(a, 0, sizeof(*a));
    snprintf(a->name, sizeof(a->name), "%s", name);
    a->addr = addr;
    a->len = len;
    a->home = home;
    a->device = -1;
    a->preferred = NO_CHECK;
    a->base = addr;
    a->alen = len;
    a->cuda_known = 1;
    a->check_access = 1;
    return a;
}

/* ---- VMM and pools ------------------------------------------------------------- */

struct vmm {
    cdDevicePtr ptr;
    size_t size;
    cdMemHandle handle;
    uint64_t access; /* devices given read-write access */
};

/* Create, map and grant access; in @p in (a context of the memory's device,
 * or any for host memory). Returns the first failing driver result. */
static cdResult vmm_create(struct vmm *v, unsigned loc_type, int loc_id, cdContext in)
{
    struct cd_mem_alloc_prop prop;
    memset(&prop, 0, sizeof(prop));
    memset(v, 0, sizeof(*v));
    prop.type = CD_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = loc_type;
    prop.location.id = loc_id;
    size_t g = 0;
    cdResult r;
    tc_push(in);
    if ((r = td.cuMemGetAllocationGranularity(&g, &prop, CD_MEM_ALLOC_GRANULARITY_MINIMUM)) !=
        CD_SUCCESS)
        goto out;
    v->size = g;
    if ((r = td.cuMemCreate(&v->handle, v->size, &prop, 0)) != CD_SUCCESS)
        goto out;
    TD_CHECK(td.cuMemAddressReserve(&v->ptr, v->size, g, 0, 0));
    TD_CHECK(td.cuMemMap(v->ptr, v->size, 0, v->handle, 0));
    struct cd_mem_access_desc desc[CUCOPY_MAX_DEVICES];
    size_t n = 0;
    for (int d = 0; d < ndev; d++) {
        int can = 1;
        if (loc_type == CD_MEM_LOCATION_TYPE_DEVICE && d != loc_id)
            TD_CHECK(td.cuDeviceCanAccessPeer(&can, d, loc_id));
        if (!can)
            continue;
        desc[n].location.type = CD_MEM_LOCATION_TYPE_DEVICE;
        desc[n].location.id = d;
        desc[n].flags = CD_MEM_ACCESS_FLAGS_PROT_READWRITE;
        n++;
        v->access |= 1ull << d;
    }
    TD_CHECK(td.cuMemSetAccess(v->ptr, v->size, desc, n));
out:
    tc_pop(in);
    return r;
}

static void vmm_destroy(struct vmm *v, cdContext in)
{
    tc_push(in);
    TD_CHECK(td.cuMemUnmap(v->ptr, v->size));
    TD_CHECK(td.cuMemRelease(v->handle));
    TD_CHECK(td.cuMemAddressFree(v->ptr, v->size));
    tc_pop(in);
}

struct pool_mem {
    cdDevicePtr ptr;
    cdStream stream;
    cdContext ctx;
    uint64_t access;
};

static void pool_alloc(struct pool_mem *p, int dev, size_t len)
{
    memset(p, 0, sizeof(*p));
    p->ctx = tc_primary(dev);
    tc_push(p->ctx);
    struct CUmemPoolHandle_st *pool = NULL;
    cdDevice d;
    TD_CHECK(td.cuDeviceGet(&d, dev));
    TD_CHECK(td.cuDeviceGetDefaultMemPool(&pool, d));
    p->access = 1ull << dev;
    for (int o = 0; o < ndev; o++) {
        int can = 0;
        if (o == dev)
            continue;
        TD_CHECK(td.cuDeviceCanAccessPeer(&can, o, dev));
        if (!can)
            continue;
        struct cd_mem_access_desc desc = {{CD_MEM_LOCATION_TYPE_DEVICE, o},
                                          CD_MEM_ACCESS_FLAGS_PROT_READWRITE};
        TD_CHECK(td.cuMemPoolSetAccess(pool, &desc, 1));
        p->access |= 1ull << o;
    }
    TD_CHECK(td.cuStreamCreate(&p->stream, CD_STREAM_NON_BLOCKING));
    TD_CHECK(td.cuMemAllocAsync(&p->ptr, len, p->stream));
    TD_CHECK(td.cuStreamSynchronize(p->stream));
    tc_pop(p->ctx);
}

static void pool_free(struct pool_mem *p)
{
    tc_push(p->ctx);
    TD_CHECK(td.cuMemFreeAsync(p->ptr, p->stream));
    TD_CHECK(td.cuStreamSynchronize(p->stream));
    TD_CHECK(td.cuStreamDestroy(p->stream));
    tc_pop(p->ctx);
}

/* ---- the query checks ---------------------------------------------------------------- */

static void check_attr(const struct alloc *a, const cucopy_mem_attr_t *m, uint64_t addr)
{
    CHECKF(m->mem_type == a->type, "mem_type %d, want %d", m->mem_type, a->type);
    CHECKF(m->pinned == a->pinned, "pinned %d, want %d", m->pinned, a->pinned);
    CHECKF(m->device == a->device, "device %d, want %d", m->device, a->device);
    CHECKF(m->context_id == a->ctx_id, "context_id %llu, want %llu",
           (unsigned long long)m->context_id, (unsigned long long)a->ctx_id);
    CHECKF(m->base_address == a->base && m->alloc_length == a->alen,
           "allocation [0x%llx, +%zu), want [0x%llx, +%zu) (queried 0x%llx)",
           (unsigned long long)m->base_address, m->alloc_length, (unsigned long long)a->base,
           a->alen, (unsigned long long)addr);
    CHECKF(m->flags == a->flags, "flags 0x%llx, want 0x%llx", (unsigned long long)m->flags,
           (unsigned long long)a->flags);
    if (a->preferred != NO_CHECK)
        CHECKF(m->preferred_location == a->preferred, "preferred_location %d, want %d",
               m->preferred_location, a->preferred);
    if (a->check_access)
        CHECKF(m->access_mask == a->access, "access_mask 0x%llx, want 0x%llx",
               (unsigned long long)m->access_mask, (unsigned long long)a->access);
}

static void query_alloc(const struct alloc *a, const char *when)
{
    static const char *const where[3] = {"base", "interior + rest", "interior, length 0"};
    for (int w = 0; w < 3; w++) {
        size_t off = w == 0 ? 0 : a->len / 2 + 8;
        size_t len = w == 0 ? a->len : w == 1 ? a->len - off : 0;
        cucopy_mem_attr_t m;
        memset(&m, 0xa5, sizeof(m));
        m.field_mask = ALL_MEM_FIELDS;
        tc_case_begin("mem_query %s, %s, %s", a->name, where[w], when);
        if (CHECK_STATUS(TC_CALL(cucopy_mem_query(ctx, (const void *)(uintptr_t)(a->addr + off),
                                                  len, &m)),
                         CUCOPY_OK))
            check_attr(a, &m, a->addr + off);
        tc_case_end();
    }
    /* crossing the end */
    cucopy_mem_attr_t m;
    memset(&m, 0, sizeof(m));
    m.field_mask = ALL_MEM_FIELDS;
    tc_case_begin("mem_query %s, range crossing its end, %s", a->name, when);
    if (a->cuda_known) {
        CHECK_STATUS(TC_CALL(cucopy_mem_query(ctx, (const void *)(uintptr_t)(a->base + a->alen - 8),
                                              16, &m)),
                     CUCOPY_ERR_OUT_OF_RANGE);
        CHECK_STATUS(TC_CALL(cucopy_mem_query(ctx, (const void *)(uintptr_t)a->base, a->alen + 1,
                                              &m)),
                     CUCOPY_ERR_OUT_OF_RANGE);
    } else {
        /* memory CUDA does not know has no end the library could see */
        CHECK_STATUS(TC_CALL(cucopy_mem_query(ctx, (const void *)(uintptr_t)a->addr, a->len + 64,
                                              &m)),
                     CUCOPY_OK);
    }
    tc_case_end();
}

static void query_all(const char *when_none)
{
    for (int i = 0; i < nallocs; i++)
        query_alloc(&allocs[i], when_none);
}

/* The matrix on this thread: none current, same device, other device. */
static void matrix(void)
{
    query_all("none current");
    for (int i = 0; i < nallocs; i++) {
        const struct alloc *a = &allocs[i];
        TD_CHECK(td.cuCtxSetCurrent(tc_primary(a->home)));
        query_alloc(a, "same device's primary current");
        if (other_dev >= 0) {
            int o = a->home == 0 ? other_dev : 0;
            TD_CHECK(td.cuCtxSetCurrent(tc_primary(o)));
            query_alloc(a, "other device's primary current");
        }
        TD_CHECK(td.cuCtxSetCurrent(NULL));
    }
    /* a created context of another device current */
    cdContext user = NULL;
    TD_CHECK(td.cuCtxCreate(&user, 0, ndev - 1));
    query_all("created context of the last device current");
    TD_CHECK(td.cuCtxPopCurrent(NULL));
    TD_CHECK(td.cuCtxDestroy(user));
}

static void *thread_main(void *arg)
{
    (void)arg;
    CHECK(tc_current() == NULL);
    query_all("new thread, none current");
    return NULL;
}

/* Each field bit alone writes only its fields. */
static void field_mask_cases(const struct alloc *a)
{
    static const struct {
        uint64_t bit;
        size_t off[2], len[2];
        const char *name;
    } f[] = {
        {CUCOPY_MEM_ATTR_MEM_TYPE, {offsetof(cucopy_mem_attr_t, mem_type)},
         {sizeof(cucopy_memory_type_t)}, "mem_type"},
        {CUCOPY_MEM_ATTR_PINNED, {offsetof(cucopy_mem_attr_t, pinned)}, {sizeof(int)}, "pinned"},
        {CUCOPY_MEM_ATTR_DEVICE, {offsetof(cucopy_mem_attr_t, device)}, {sizeof(int)}, "device"},
        {CUCOPY_MEM_ATTR_CONTEXT_ID, {offsetof(cucopy_mem_attr_t, context_id)}, {8},
         "context_id"},
        {CUCOPY_MEM_ATTR_ALLOCATION,
         {offsetof(cucopy_mem_attr_t, base_address), offsetof(cucopy_mem_attr_t, alloc_length)},
         {8, sizeof(size_t)},
         "allocation"},
        {CUCOPY_MEM_ATTR_FLAGS,
         {offsetof(cucopy_mem_attr_t, flags), offsetof(cucopy_mem_attr_t, preferred_location)},
         {8, sizeof(int)},
         "flags"},
        {CUCOPY_MEM_ATTR_ACCESS, {offsetof(cucopy_mem_attr_t, access_mask)}, {8}, "access"},
    };
    const size_t n = sizeof(f) / sizeof(f[0]);
    for (size_t i = 0; i < n; i++) {
        cucopy_mem_attr_t m;
        memset(&m, 0xa5, sizeof(m));
        m.field_mask = f[i].bit;
        tc_case_begin("mem_query %s, field_mask = %s only", a->name, f[i].name);
        CHECK_STATUS(TC_CALL(cucopy_mem_query(ctx, (const void *)(uintptr_t)a->addr, 0, &m)),
                     CUCOPY_OK);
        for (size_t j = 0; j < n; j++) {
            for (int k = 0; k < 2 && f[j].len[k] > 0; k++) {
                const unsigned char *p = (const unsigned char *)&m + f[j].off[k];
                int untouched = 1;
                for (size_t b = 0; b < f[j].len[k]; b++)
                    untouched &= p[b] == 0xa5;
                if (j == i)
                    CHECKF(!untouched || (k == 1 && j == 5 && a->preferred == NO_CHECK),
                           "field %s not written", f[j].name);
                else
                    CHECKF(untouched, "field %s written although only %s was asked for",
                           f[j].name, f[i].name);
            }
        }
        tc_case_end();
    }
    cucopy_mem_attr_t m;
    memset(&m, 0, sizeof(m));
    m.field_mask = ALL_MEM_FIELDS | (1u << 7);
    CHECK_STATUS(TC_CALL(cucopy_mem_query(ctx, (const void *)(uintptr_t)a->addr, 0, &m)),
                 CUCOPY_ERR_INVALID_PARAM);
    m.field_mask = 1ull << 63;
    CHECK_STATUS(TC_CALL(cucopy_mem_query(ctx, (const void *)(uintptr_t)a->addr, 0, &m)),
                 CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_mem_query(ctx, (const void *)(uintptr_t)a->addr, 0, NULL)),
                 CUCOPY_ERR_INVALID_PARAM);
    m.field_mask = ALL_MEM_FIELDS;
    CHECK_STATUS(TC_CALL(cucopy_mem_query(NULL, (const void *)(uintptr_t)a->addr, 0, &m)),
                 CUCOPY_ERR_INVALID_HANDLE);
    /* a length that overflows the address space */
    CHECK_STATUS(TC_CALL(cucopy_mem_query(ctx, (const void *)(uintptr_t)a->addr, SIZE_MAX, &m)),
                 CUCOPY_ERR_INVALID_PARAM);
}

/* ---- phase A: VMM memory of a device whose primary context is inactive -------- */

static void vmm_inactive_primary(void)
{
    int d = ndev - 1;
    if (tc_primary_active(d)) {
        printf("test_mem_query: device %d's primary context is active before the test; the "
               "inactive-primary VMM case is not run\n", d);
        return;
    }
    cdContext user = NULL;
    TD_CHECK(td.cuCtxCreate(&user, 0, d));
    TD_CHECK(td.cuCtxPopCurrent(NULL));
    struct vmm v;
    cdResult r = vmm_create(&v, CD_MEM_LOCATION_TYPE_DEVICE, d, user);
    if (r != CD_SUCCESS) {
        printf("test_mem_query: SKIP VMM with an inactive primary: cuMemCreate on device %d "
               "failed with %s\n", d, testdrv_error_name(r));
        TD_CHECK(td.cuCtxDestroy(user));
        return;
    }
    cucopy_iface_h iface = NULL;
    cucopy_ep_h ep = NULL;
    REQUIRE(TC_CALL(cucopy_iface_open(ctx, NULL, &iface)) == CUCOPY_OK);
    REQUIRE(TC_CALL(cucopy_ep_create(iface, &ep)) == CUCOPY_OK);
    char *host = malloc(CLEN);
    REQUIRE(host != NULL);
    memset(host, 1, CLEN);
    for (int cur = 0; cur < 2; cur++) {
        if (cur)
            TD_CHECK(td.cuCtxPushCurrent(user));
        const char *when = cur ? "a created context of its device current" : "none current";
        cucopy_mem_attr_t m;
        memset(&m, 0, sizeof(m));
        m.field_mask = ALL_MEM_FIELDS;
        tc_case_begin("VMM of device %d, primary inactive, %s: mem_query works", d, when);
        if (CHECK_STATUS(TC_CALL(cucopy_mem_query(ctx, (void *)(uintptr_t)v.ptr, 0, &m)),
                         CUCOPY_OK)) {
            CHECK(m.mem_type == CUCOPY_MEMORY_TYPE_CUDA);
            CHECKF(m.device == d, "device %d", m.device);
            CHECKF(m.context_id == 0, "context_id %llu", (unsigned long long)m.context_id);
            CHECKF(m.flags == CUCOPY_MEM_FLAG_VMM, "flags 0x%llx", (unsigned long long)m.flags);
        }
        tc_case_end();
        tc_case_begin("VMM of device %d, primary inactive, %s: copies are NO_DEVICE, nothing "
                      "activated", d, when);
        CHECK_STATUS(TC_CALL(cucopy_ep_put_short(ep, host, CLEN, v.ptr)), CUCOPY_ERR_NO_DEVICE);
        CHECK_STATUS(TC_CALL(cucopy_ep_get_short(ep, host, CLEN, v.ptr)), CUCOPY_ERR_NO_DEVICE);
        cucopy_iov_t iov = {host, CLEN};
        struct tc_comp c;
        tc_comp_init(&c, 1);
        CHECK_STATUS(TC_CALL(cucopy_ep_put_zcopy(ep, &iov, 1, v.ptr, &c.comp)),
                     CUCOPY_ERR_NO_DEVICE);
        CHECK_STATUS(TC_CALL(cucopy_ep_get_zcopy(ep, &iov, 1, v.ptr, &c.comp)),
                     CUCOPY_ERR_NO_DEVICE);
        CHECK(c.fired == 0);
        CHECKF(!tc_primary_active(d), "device %d's primary context became active", d);
        tc_case_end();
        if (cur)
            TD_CHECK(td.cuCtxPopCurrent(NULL));
    }

    /* The program activates the primary context, cucopy retains it for the
     * VMM memory, the program resets it: VMM memory outlives a reset, so
     * the memory stays valid while the context cucopy used is gone. */
    char *back = malloc(CLEN);
    REQUIRE(back != NULL);
    for (int round = 0; round < 2; round++) {
        tc_primary_retain(d);
        tc_case_begin("VMM of device %d, primary activated by the program (%s): copies work",
                      d, round ? "again, after a reset" : "first time");
        memset(host, 2 + round, CLEN);
        memset(back, 0, CLEN);
        CHECK_STATUS(TC_CALL(cucopy_ep_put_short(ep, host, CLEN, v.ptr)), CUCOPY_OK);
        CHECK_STATUS(TC_CALL(cucopy_ep_get_short(ep, back, CLEN, v.ptr)), CUCOPY_OK);
        CHECK(memcmp(back, host, CLEN) == 0);
        tc_case_end();
        if (round == 1)
            break;
        tc_primary_reset(d);
        tc_case_begin("VMM of device %d, primary reset and not activated again: NO_DEVICE, "
                      "not a driver error, nothing activated", d);
        CHECK_STATUS(TC_CALL(cucopy_ep_put_short(ep, host, CLEN, v.ptr)), CUCOPY_ERR_NO_DEVICE);
        CHECKF(!tc_primary_active(d), "device %d's primary context became active", d);
        tc_case_end();
    }
    tc_flush(iface);
    CHECK_STATUS(TC_CALL(cucopy_ep_destroy(ep)), CUCOPY_OK);
    CHECK_STATUS(TC_CALL(cucopy_iface_close(iface)), CUCOPY_OK);
    /* Two retains by the program (before and after the reset). */
    tc_primary_release(d);
    if (tc_primary_active(d))
        tc_primary_release(d);
    CHECKF(!tc_primary_active(d), "device %d's primary context active after iface_close", d);
    free(back);
    free(host);
    vmm_destroy(&v, user);
    TD_CHECK(td.cuCtxDestroy(user));
}

/* ---- freed pointers ---------------------------------------------------------------- */

static int driver_knows(uint64_t addr)
{
    unsigned int type = 0;
    unsigned int attr = CD_POINTER_ATTRIBUTE_MEMORY_TYPE;
    void *data = &type;
    TD_CHECK(td.cuPointerGetAttributes(1, &attr, &data, addr));
    return type != 0;
}

static void check_freed(const char *what, uint64_t addr)
{
    if (driver_knows(addr)) {
        printf("test_mem_query: NOTE: the driver still knows freed %s at 0x%llx; not checked\n",
               what, (unsigned long long)addr);
        return;
    }
    cucopy_mem_attr_t m;
    memset(&m, 0xa5, sizeof(m));
    m.field_mask = ALL_MEM_FIELDS;
    tc_case_begin("mem_query of freed %s: plain host memory", what);
    if (CHECK_STATUS(TC_CALL(cucopy_mem_query(ctx, (void *)(uintptr_t)addr, 0, &m)), CUCOPY_OK)) {
        CHECKF(m.mem_type == CUCOPY_MEMORY_TYPE_HOST, "mem_type %d", m.mem_type);
        CHECKF(m.pinned == 0 && m.device == -1 && m.context_id == 0, "pinned %d device %d "
               "context_id %llu", m.pinned, m.device, (unsigned long long)m.context_id);
        CHECKF(m.base_address == 0 && m.alloc_length == 0, "allocation [0x%llx, +%zu)",
               (unsigned long long)m.base_address, m.alloc_length);
        CHECKF(m.flags == 0, "flags 0x%llx", (unsigned long long)m.flags);
    }
    tc_case_end();
}

static void freed_pointers(void)
{
    cdContext p0 = tc_primary(0);
    struct tc_buf b;
    uint64_t a;
    tc_buf_alloc(&b, TC_MEM_DEV0, LEN);
    a = b.dptr + 64;
    tc_buf_free(&b);
    check_freed("cuMemAlloc memory", a);
    tc_buf_alloc(&b, TC_MEM_MANAGED, LEN);
    a = b.dptr;
    tc_buf_free(&b);
    check_freed("managed memory", a);
    tc_buf_alloc(&b, TC_MEM_PINNED, LEN);
    a = b.dptr;
    tc_buf_free(&b);
    check_freed("cuMemHostAlloc memory", a);

    char *h = NULL;
    REQUIRE(posix_memalign((void **)&h, (size_t)sysconf(_SC_PAGESIZE), LEN) == 0);
    tc_push(p0);
    TD_CHECK(td.cuMemHostRegister(h, LEN, CD_MEMHOSTREGISTER_PORTABLE));
    TD_CHECK(td.cuMemHostUnregister(h));
    tc_pop(p0);
    check_freed("(unregistered) cuMemHostRegister memory", (uint64_t)(uintptr_t)h);
    cucopy_memh_h mh = NULL;
    REQUIRE_OK(cucopy_mem_reg(ctx, h, LEN, 0, &mh));
    REQUIRE_OK(cucopy_mem_dereg(ctx, mh));
    check_freed("(deregistered) cucopy_mem_reg memory", (uint64_t)(uintptr_t)h);
    free(h);

    struct vmm v;
    if (vmm_create(&v, CD_MEM_LOCATION_TYPE_DEVICE, 0, p0) == CD_SUCCESS) {
        vmm_destroy(&v, p0);
        check_freed("(unmapped) VMM memory", v.ptr);
    }
    if (td.cuMemAllocAsync != NULL) {
        struct pool_mem pm;
        pool_alloc(&pm, 0, LEN);
        pool_free(&pm);
        check_freed("pool memory", pm.ptr);
    }
    cucopy_mem_alloc_params_t ap;
    memset(&ap, 0, sizeof(ap));
    ap.field_mask = CUCOPY_MEM_ALLOC_PARAM_LENGTH | CUCOPY_MEM_ALLOC_PARAM_MEM_TYPE |
                    CUCOPY_MEM_ALLOC_PARAM_DEVICE;
    ap.length = LEN;
    const cucopy_memory_type_t ts[3] = {CUCOPY_MEMORY_TYPE_CUDA, CUCOPY_MEMORY_TYPE_CUDA_MANAGED,
                                        CUCOPY_MEMORY_TYPE_HOST};
    for (int i = 0; i < 3; i++) {
        void *p = NULL;
        ap.mem_type = ts[i];
        REQUIRE_OK(cucopy_mem_alloc(ctx, &ap, &p));
        REQUIRE_OK(cucopy_mem_free(ctx, p));
        check_freed(i == 0 ? "cucopy_mem_alloc device memory"
                    : i == 1 ? "cucopy_mem_alloc managed memory"
                             : "cucopy_mem_alloc host memory",
                    (uint64_t)(uintptr_t)p);
    }
}

/* ---- main ------------------------------------------------------------------------------ */

int main(void)
{
    ndev = tc_begin("test_mem_query", CUCOPY_MAX_DEVICES);
    other_dev = ndev > 1 ? ndev - 1 : -1;
    if (other_dev < 0)
        printf("test_mem_query: one device: the other-device cases are not run\n");
    long live_start = tc_fake.live_allocations != NULL ? tc_fake.live_allocations() : 0;
    REQUIRE_OK(cucopy_context_create(NULL, &ctx));
    REQUIRE(tc_current() == NULL);

    /* A: before the program activates any primary context */
    vmm_inactive_primary();

    /* B: the allocations */
    cdContext prim[CUCOPY_MAX_DEVICES];
    uint64_t pid[CUCOPY_MAX_DEVICES];
    for (int d = 0; d < ndev; d++) {
        prim[d] = tc_primary(d);
        pid[d] = tc_ctx_id(prim[d]);
    }
    struct alloc *a;
    struct tc_buf dev[2], managed, pref_dev, pref_host, pinned;
    int have_advise = td.cuMemAdvise != NULL;
    for (int d = 0; d < ndev && d < 2; d++) {
        char name[32];
        tc_buf_alloc(&dev[d], d == 0 ? TC_MEM_DEV0 : TC_MEM_DEV1, LEN);
        snprintf(name, sizeof(name), "cuMemAlloc dev%d", d);
        a = add(name, dev[d].dptr, LEN, d);
        a->type = CUCOPY_MEMORY_TYPE_CUDA;
        a->device = d;
        a->ctx_id = pid[d];
        a->access = 1ull << d;
    }
    tc_buf_alloc(&managed, TC_MEM_MANAGED, LEN);
    a = add("managed", managed.dptr, LEN, 0);
    a->type = CUCOPY_MEMORY_TYPE_CUDA_MANAGED;
    a->device = 0;
    a->ctx_id = pid[0];
    a->preferred = CUCOPY_LOCATION_NONE;
    a->access = all_devices();
    if (have_advise) {
        int pd = ndev - 1;
        tc_buf_alloc(&pref_dev, TC_MEM_MANAGED, LEN);
        tc_buf_alloc(&pref_host, TC_MEM_MANAGED, LEN);
        struct cd_mem_location l1 = {CD_MEM_LOCATION_TYPE_DEVICE, pd};
        struct cd_mem_location lh = {CD_MEM_LOCATION_TYPE_HOST, 0};
        tc_push(prim[0]);
        TD_CHECK(td.cuMemAdvise(pref_dev.dptr, LEN, CD_MEM_ADVISE_SET_PREFERRED_LOCATION, l1));
        TD_CHECK(td.cuMemAdvise(pref_host.dptr, LEN, CD_MEM_ADVISE_SET_PREFERRED_LOCATION, lh));
        tc_pop(prim[0]);
        a = add("managed, preferred device", pref_dev.dptr, LEN, 0);
        a->type = CUCOPY_MEMORY_TYPE_CUDA_MANAGED;
        a->device = 0;
        a->ctx_id = pid[0];
        a->flags = CUCOPY_MEM_FLAG_PREFERRED;
        a->preferred = pd;
        a->access = all_devices();
        a = add("managed, preferred host", pref_host.dptr, LEN, 0);
        a->type = CUCOPY_MEMORY_TYPE_CUDA_MANAGED;
        a->device = 0;
        a->ctx_id = pid[0];
        a->flags = CUCOPY_MEM_FLAG_PREFERRED;
        a->preferred = CUCOPY_LOCATION_HOST;
        a->access = all_devices();
    } else {
        printf("test_mem_query: SKIP managed memory with a preferred location: no cuMemAdvise "
               "(_v2) in this driver\n");
    }
    tc_buf_alloc(&pinned, TC_MEM_PINNED, LEN);
    a = add("cuMemHostAlloc", pinned.dptr, LEN, 0);
    a->type = CUCOPY_MEMORY_TYPE_HOST;
    a->pinned = 1;
    a->device = 0;
    a->ctx_id = pid[0];
    a->access = all_devices();

    char *hreg = NULL;
    REQUIRE(posix_memalign((void **)&hreg, (size_t)sysconf(_SC_PAGESIZE), LEN) == 0);
    tc_push(prim[0]);
    TD_CHECK(td.cuMemHostRegister(hreg, LEN, CD_MEMHOSTREGISTER_PORTABLE));
    tc_pop(prim[0]);
    a = add("cuMemHostRegister (program)", (uint64_t)(uintptr_t)hreg, LEN, 0);
    a->type = CUCOPY_MEMORY_TYPE_HOST;
    a->pinned = 1;
    a->device = 0;
    a->ctx_id = pid[0];
    a->access = all_devices();

    char *heap = malloc(LEN);
    REQUIRE(heap != NULL);
    memset(heap, 0, LEN);
    a = add("malloc", (uint64_t)(uintptr_t)heap, LEN, 0);
    a->type = CUCOPY_MEMORY_TYPE_HOST;
    a->base = 0;
    a->alen = 0;
    a->check_access = 0;
    a->cuda_known = 0;
    char stack[4096];
    memset(stack, 0, sizeof(stack));
    a = add("stack", (uint64_t)(uintptr_t)stack, sizeof(stack), 0);
    a->type = CUCOPY_MEMORY_TYPE_HOST;
    a->base = 0;
    a->alen = 0;
    a->check_access = 0;
    a->cuda_known = 0;

    struct vmm vd[2], vh;
    int nvmm = 0, have_vh = 0;
    for (int d = 0; d < ndev && d < 2; d++) {
        cdResult r = vmm_create(&vd[d], CD_MEM_LOCATION_TYPE_DEVICE, d, prim[d]);
        if (r != CD_SUCCESS) {
            printf("test_mem_query: SKIP VMM on device %d: %s\n", d, testdrv_error_name(r));
            break;
        }
        nvmm++;
        char name[32];
        snprintf(name, sizeof(name), "VMM dev%d", d);
        a = add(name, vd[d].ptr, vd[d].size, d);
        a->type = CUCOPY_MEMORY_TYPE_CUDA;
        a->device = d;
        a->flags = CUCOPY_MEM_FLAG_VMM;
        a->access = vd[d].access;
    }
    cdResult rh = vmm_create(&vh, CD_MEM_LOCATION_TYPE_HOST_NUMA, 0, prim[0]);
    if (rh == CD_SUCCESS) {
        have_vh = 1;
        a = add("VMM host NUMA 0", vh.ptr, vh.size, 0);
        a->type = CUCOPY_MEMORY_TYPE_CUDA;
        a->device = -1;
        a->flags = CUCOPY_MEM_FLAG_VMM | CUCOPY_MEM_FLAG_HOST_LOCATED;
        a->access = vh.access;
    } else {
        printf("test_mem_query: SKIP host-located VMM memory (HOST_NUMA 0): the driver refuses "
               "it with %s\n", testdrv_error_name(rh));
    }
    struct pool_mem pm;
    int have_pool = td.cuMemAllocAsync != NULL;
    if (have_pool) {
        pool_alloc(&pm, 0, LEN);
        a = add("pool dev0", pm.ptr, LEN, 0);
        a->type = CUCOPY_MEMORY_TYPE_CUDA;
        a->device = 0;
        a->flags = CUCOPY_MEM_FLAG_POOL;
        a->access = pm.access;
    } else {
        printf("test_mem_query: SKIP pool memory: no cuMemAllocAsync in this driver\n");
    }

    /* cucopy's own: mem_alloc on each device and type, mem_reg */
    void *cm[2][3] = {{NULL}};
    const cucopy_memory_type_t ts[3] = {CUCOPY_MEMORY_TYPE_CUDA, CUCOPY_MEMORY_TYPE_CUDA_MANAGED,
                                        CUCOPY_MEMORY_TYPE_HOST};
    for (int d = 0; d < ndev && d < 2; d++) {
        for (int i = 0; i < 3; i++) {
            cucopy_mem_alloc_params_t ap;
            memset(&ap, 0, sizeof(ap));
            ap.field_mask = CUCOPY_MEM_ALLOC_PARAM_LENGTH | CUCOPY_MEM_ALLOC_PARAM_MEM_TYPE |
                            CUCOPY_MEM_ALLOC_PARAM_DEVICE;
            ap.length = LEN;
            ap.mem_type = ts[i];
            ap.device = d;
            REQUIRE_OK(cucopy_mem_alloc(ctx, &ap, &cm[d][i]));
            char name[48];
            snprintf(name, sizeof(name), "cucopy_mem_alloc %s dev%d",
                     i == 0 ? "cuda" : i == 1 ? "managed" : "host", d);
            a = add(name, (uint64_t)(uintptr_t)cm[d][i], LEN, d);
            a->type = ts[i];
            a->pinned = ts[i] == CUCOPY_MEMORY_TYPE_HOST;
            a->device = d;
            a->ctx_id = pid[d];
            a->flags = CUCOPY_MEM_FLAG_ALLOCATED;
            a->access = ts[i] == CUCOPY_MEMORY_TYPE_CUDA ? 1ull << d : all_devices();
            if (ts[i] == CUCOPY_MEMORY_TYPE_CUDA_MANAGED)
                a->preferred = CUCOPY_LOCATION_NONE;
        }
    }
    char *creg = NULL;
    REQUIRE(posix_memalign((void **)&creg, (size_t)sysconf(_SC_PAGESIZE), LEN) == 0);
    cucopy_memh_h mh = NULL;
    REQUIRE_OK(cucopy_mem_reg(ctx, creg, LEN, 0, &mh));
    a = add("cucopy_mem_reg", (uint64_t)(uintptr_t)creg, LEN, 0);
    a->type = CUCOPY_MEMORY_TYPE_HOST;
    a->pinned = 1;
    a->device = 0;
    a->ctx_id = pid[0];
    a->flags = CUCOPY_MEM_FLAG_REGISTERED;
    a->access = all_devices();

    /* C: the matrix */
    matrix();
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, thread_main, NULL) == 0);
    pthread_join(t, NULL);
    field_mask_cases(&allocs[0]);
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].type == CUCOPY_MEMORY_TYPE_CUDA_MANAGED && allocs[i].preferred >= 0)
            field_mask_cases(&allocs[i]);

    /* D: copies, none current and another device current */
    cucopy_iface_h iface = NULL;
    cucopy_ep_h ep = NULL;
    REQUIRE(TC_CALL(cucopy_iface_open(ctx, NULL, &iface)) == CUCOPY_OK);
    REQUIRE(TC_CALL(cucopy_ep_create(iface, &ep)) == CUCOPY_OK);
    char *page = malloc(CLEN);
    REQUIRE(page != NULL);
    struct tc_buf pg = tc_buf_view(TC_MEM_PAGEABLE, NULL, (uint64_t)(uintptr_t)page, CLEN, 1);
    struct tc_buf rg = tc_buf_view(TC_MEM_PAGEABLE, NULL, (uint64_t)(uintptr_t)creg, CLEN, 1);
    for (int cur = -1; cur < ndev && cur < 2; cur++) {
        char what[128];
        const char *when = cur < 0 ? "none current" : cur == 0 ? "dev0 current" : "dev1 current";
        if (cur >= 0)
            TD_CHECK(td.cuCtxSetCurrent(prim[cur]));
        for (int d = 0; d < nvmm; d++) {
            struct tc_buf vb = tc_buf_view(TC_MEM_DEV0, prim[d], vd[d].ptr, CLEN, 0);
            snprintf(what, sizeof(what), "pageable -> VMM dev%d, %s", d, when);
            tc_copy_all_ways(iface, ep, &pg, &vb, CLEN, what);
            snprintf(what, sizeof(what), "VMM dev%d -> registered, %s", d, when);
            tc_copy_all_ways(iface, ep, &vb, &rg, CLEN, what);
        }
        if (have_pool) {
            struct tc_buf pb = tc_buf_view(TC_MEM_DEV0, prim[0], pm.ptr, CLEN, 0);
            snprintf(what, sizeof(what), "registered -> pool dev0, %s", when);
            tc_copy_all_ways(iface, ep, &rg, &pb, CLEN, what);
            snprintf(what, sizeof(what), "pool dev0 -> pageable, %s", when);
            tc_copy_all_ways(iface, ep, &pb, &pg, CLEN, what);
        }
        for (int d = 0; d < ndev && d < 2; d++) {
            struct tc_buf db = dev[d];
            db.size = CLEN;
            snprintf(what, sizeof(what), "registered -> cuMemAlloc dev%d, %s", d, when);
            tc_copy_all_ways(iface, ep, &rg, &db, CLEN, what);
            snprintf(what, sizeof(what), "cuMemAlloc dev%d -> registered, %s", d, when);
            tc_copy_all_ways(iface, ep, &db, &rg, CLEN, what);
            for (int i = 0; i < 3; i++) {
                struct tc_buf cb = tc_buf_view(ts[i] == CUCOPY_MEMORY_TYPE_HOST ? TC_MEM_PINNED
                                                                            : TC_MEM_DEV0,
                                           prim[d], (uint64_t)(uintptr_t)cm[d][i], CLEN,
                                           ts[i] == CUCOPY_MEMORY_TYPE_HOST);
                const char *tn = i == 0 ? "cuda" : i == 1 ? "managed" : "host";
                snprintf(what, sizeof(what), "pageable -> cucopy_mem_alloc %s dev%d, %s", tn, d,
                         when);
                tc_copy_all_ways(iface, ep, &pg, &cb, CLEN, what);
                snprintf(what, sizeof(what), "cucopy_mem_alloc %s dev%d -> cuMemAlloc dev0, %s",
                         tn, d, when);
                struct tc_buf d0 = dev[0];
                d0.size = CLEN;
                tc_copy_all_ways(iface, ep, &cb, &d0, CLEN, what);
            }
        }
        if (cur >= 0)
            TD_CHECK(td.cuCtxSetCurrent(NULL));
    }
    tc_flush(iface);
    CHECK_STATUS(TC_CALL(cucopy_ep_destroy(ep)), CUCOPY_OK);
    CHECK_STATUS(TC_CALL(cucopy_iface_close(iface)), CUCOPY_OK);
    free(page);

    /* E: clean up, then freed pointers */
    CHECK_STATUS(TC_CALL(cucopy_mem_dereg(ctx, mh)), CUCOPY_OK);
    free(creg);
    for (int d = 0; d < ndev && d < 2; d++)
        for (int i = 0; i < 3; i++)
            CHECK_STATUS(TC_CALL(cucopy_mem_free(ctx, cm[d][i])), CUCOPY_OK);
    if (have_pool)
        pool_free(&pm);
    if (have_vh)
        vmm_destroy(&vh, prim[0]);
    for (int d = 0; d < nvmm; d++)
        vmm_destroy(&vd[d], prim[d]);
    tc_push(prim[0]);
    TD_CHECK(td.cuMemHostUnregister(hreg));
    tc_pop(prim[0]);
    free(hreg);
    free(heap);
    tc_buf_free(&pinned);
    if (have_advise) {
        tc_buf_free(&pref_dev);
        tc_buf_free(&pref_host);
    }
    tc_buf_free(&managed);
    for (int d = 0; d < ndev && d < 2; d++)
        tc_buf_free(&dev[d]);
    freed_pointers();

    CHECK(tc_current() == NULL);
    CHECK_STATUS(cucopy_context_destroy(ctx), CUCOPY_OK);
    if (tc_fake.live_allocations != NULL)
        CHECKF(tc_fake.live_allocations() == live_start,
               "fakecuda_live_allocations %ld at the end, %ld at the start",
               tc_fake.live_allocations(), live_start);
    if (tc_fake.violations != NULL)
        CHECKF(tc_fake.violations() == 0, "%ld fake-driver violation(s)", tc_fake.violations());
    return tc_finish();
}
