/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cucopy_mem_reg / cucopy_mem_dereg:
 *  - no context at all (none current, no active primary): NO_DEVICE, nothing
 *    activated;
 *  - a malloc'ed range registered: mem_query says host, pinned,
 *    CUCOPY_MEM_FLAG_REGISTERED, the owning context's device and id, the
 *    registered range; copies (put/get short and zcopy) to and from device
 *    memory of every device work;
 *  - registering it again, or any range overlapping it: ALREADY_EXISTS; an
 *    adjacent range: OK;
 *  - memory pinned by the program (cuMemHostAlloc, cuMemHostRegister) and
 *    cucopy_mem_alloc'ed host memory: ALREADY_EXISTS;
 *  - device, managed and cucopy_mem_alloc'ed device memory: INVALID_PARAM;
 *    NULL, length 0, flags, NULL memh_p: INVALID_PARAM;
 *  - registered with another device's context current: that context owns it;
 *  - dereg NULL: OK; twice (stale handle): INVALID_HANDLE; after dereg the
 *    range is plain pageable memory again;
 *  - dereg after the program reset the primary context it was registered in
 *    (cuDevicePrimaryCtxReset), or destroyed its created context: OK.
 * Every call leaves the current context as it was and activates nothing.
 */
#define _GNU_SOURCE
#include "calls.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEN ((size_t)64 << 10)
#define CLEN ((size_t)8192) /* bytes copied */

static cucopy_context_h ctx;
static int ndev;

static void *page_alloc(size_t len)
{
    void *p = NULL;
    REQUIRE(posix_memalign(&p, (size_t)sysconf(_SC_PAGESIZE), len) == 0);
    memset(p, 0, len);
    return p;
}

static cucopy_mem_attr_t query(const void *addr, size_t len)
{
    cucopy_mem_attr_t a;
    memset(&a, 0, sizeof(a));
    a.field_mask = CUCOPY_MEM_ATTR_MEM_TYPE | CUCOPY_MEM_ATTR_PINNED | CUCOPY_MEM_ATTR_DEVICE |
                   CUCOPY_MEM_ATTR_CONTEXT_ID | CUCOPY_MEM_ATTR_ALLOCATION |
                   CUCOPY_MEM_ATTR_FLAGS | CUCOPY_MEM_ATTR_ACCESS;
    int s = TC_CALL(cucopy_mem_query(ctx, addr, len, &a));
    CHECKF(s == CUCOPY_OK, "mem_query(%p, %zu) returned %s: %s", addr, len, tc_status_name(s),
           cucopy_last_error());
    return a;
}

static uint64_t all_devices(void)
{
    return ndev >= 64 ? ~0ull : (1ull << ndev) - 1;
}

/* mem_query of a range registered by cucopy in a context of device dev with
 * id ctx_id. */
static void check_registered(char *base, size_t len, int dev, uint64_t ctx_id, const char *what)
{
    const size_t offs[3] = {0, len / 2, len - 1};
    for (int i = 0; i < 3; i++) {
        tc_case_begin("%s: mem_query at +%zu says registered", what, offs[i]);
        cucopy_mem_attr_t a = query(base + offs[i], len - offs[i]);
        CHECKF(a.mem_type == CUCOPY_MEMORY_TYPE_HOST, "mem_type %d", a.mem_type);
        CHECKF(a.pinned == 1, "pinned %d", a.pinned);
        CHECKF(a.flags & CUCOPY_MEM_FLAG_REGISTERED, "flags 0x%llx lack REGISTERED",
               (unsigned long long)a.flags);
        CHECKF(!(a.flags & (CUCOPY_MEM_FLAG_VMM | CUCOPY_MEM_FLAG_POOL |
                            CUCOPY_MEM_FLAG_ALLOCATED | CUCOPY_MEM_FLAG_PREFERRED |
                            CUCOPY_MEM_FLAG_HOST_LOCATED)),
               "flags 0x%llx", (unsigned long long)a.flags);
        CHECKF(a.device == dev, "device %d, want %d", a.device, dev);
        CHECKF(a.context_id == ctx_id, "context_id %llu, want %llu",
               (unsigned long long)a.context_id, (unsigned long long)ctx_id);
        CHECKF(a.base_address == (uint64_t)(uintptr_t)base && a.alloc_length == len,
               "allocation [0x%llx, +%zu), want [%p, +%zu)", (unsigned long long)a.base_address,
               a.alloc_length, (void *)base, len);
        CHECKF(a.access_mask == all_devices(), "access_mask 0x%llx",
               (unsigned long long)a.access_mask);
        tc_case_end();
    }
    /* crossing the end of the registered range */
    CHECK_STATUS(TC_CALL(cucopy_mem_query(ctx, base + len - 8, 16,
                                          &(cucopy_mem_attr_t){.field_mask = 0})),
                 CUCOPY_ERR_OUT_OF_RANGE);
}

static void check_unregistered(char *base, size_t len, const char *what)
{
    tc_case_begin("%s: mem_query says pageable", what);
    cucopy_mem_attr_t a = query(base, len);
    CHECKF(a.mem_type == CUCOPY_MEMORY_TYPE_HOST, "mem_type %d", a.mem_type);
    CHECKF(a.pinned == 0, "pinned %d", a.pinned);
    CHECKF(!(a.flags & CUCOPY_MEM_FLAG_REGISTERED), "still REGISTERED");
    CHECKF(a.device == -1 && a.context_id == 0, "device %d, context_id %llu", a.device,
           (unsigned long long)a.context_id);
    tc_case_end();
}

static void phase1_no_context(void)
{
    for (int d = 0; d < ndev; d++)
        if (tc_primary_active(d)) {
            printf("test_mem_reg: a primary context is active before the test; the "
                   "no-context case is not run\n");
            return;
        }
    char *buf = page_alloc(LEN);
    cucopy_memh_h mh = NULL;
    tc_case_begin("no context at all: NO_DEVICE, nothing activated");
    CHECK_STATUS(TC_CALL(cucopy_mem_reg(ctx, buf, LEN, 0, &mh)), CUCOPY_ERR_NO_DEVICE);
    for (int d = 0; d < ndev; d++)
        CHECKF(!tc_primary_active(d), "device %d's primary became active", d);
    tc_case_end();
    check_unregistered(buf, LEN, "after the refused registration");
    free(buf);
}

static void phase2_registered(void)
{
    cdContext p0 = tc_primary(0);
    uint64_t id0 = tc_ctx_id(p0);
    /* region: [0, 64K) free | [64K, 128K) registered | [128K, 256K) free */
    char *region = page_alloc(4 * LEN);
    char *buf = region + LEN;
    cucopy_memh_h mh = NULL;
    tc_case_begin("register malloc'ed memory, no context current (primary 0 active)");
    CHECK_STATUS(TC_CALL(cucopy_mem_reg(ctx, buf, LEN, 0, &mh)), CUCOPY_OK);
    CHECK(mh != NULL);
    tc_case_end();
    REQUIRE(mh != NULL);
    if (tc_fake.registered_ranges != NULL)
        CHECKF(tc_fake.registered_ranges() == 1, "fake: %ld registered ranges",
               tc_fake.registered_ranges());
    check_registered(buf, LEN, 0, id0, "registered, none current");

    /* copies from and to it, on every device (one device current, none) */
    cucopy_iface_h iface = NULL;
    cucopy_ep_h ep = NULL;
    REQUIRE(TC_CALL(cucopy_iface_open(ctx, NULL, &iface)) == CUCOPY_OK);
    REQUIRE(TC_CALL(cucopy_ep_create(iface, &ep)) == CUCOPY_OK);
    struct tc_buf reg = tc_buf_view(TC_MEM_PAGEABLE, NULL, (uint64_t)(uintptr_t)buf, CLEN, 1);
    for (int d = 0; d < ndev && d < 2; d++) {
        struct tc_buf dev;
        char what[96];
        tc_buf_alloc(&dev, d == 0 ? TC_MEM_DEV0 : TC_MEM_DEV1, CLEN);
        snprintf(what, sizeof(what), "registered -> dev%d", d);
        tc_copy_all_ways(iface, ep, &reg, &dev, CLEN, what);
        snprintf(what, sizeof(what), "dev%d -> registered", d);
        tc_copy_all_ways(iface, ep, &dev, &reg, CLEN, what);
        TD_CHECK(td.cuCtxSetCurrent(tc_primary(ndev - 1 - d)));
        snprintf(what, sizeof(what), "registered -> dev%d (dev%d current)", d, ndev - 1 - d);
        tc_copy_all_ways(iface, ep, &reg, &dev, CLEN, what);
        snprintf(what, sizeof(what), "dev%d -> registered (dev%d current)", d, ndev - 1 - d);
        tc_copy_all_ways(iface, ep, &dev, &reg, CLEN, what);
        TD_CHECK(td.cuCtxSetCurrent(NULL));
        tc_flush(iface);
        tc_buf_free(&dev);
    }
    CHECK_STATUS(TC_CALL(cucopy_ep_destroy(ep)), CUCOPY_OK);
    CHECK_STATUS(TC_CALL(cucopy_iface_close(iface)), CUCOPY_OK);

    /* again and overlapping: ALREADY_EXISTS */
    static const struct {
        ptrdiff_t off;
        size_t len;
        const char *what;
    } ov[] = {
        {0, LEN, "the same range"},
        {0, 4096, "its first page"},
        {LEN / 2, 4096, "a page inside"},
        {-(ptrdiff_t)LEN / 2, LEN, "a range overlapping its start"},
        {LEN / 2, LEN, "a range overlapping its end"},
        {-(ptrdiff_t)LEN, 3 * LEN, "a range covering it"},
        {LEN - 1, 2, "two bytes across its end"},
    };
    for (size_t i = 0; i < sizeof(ov) / sizeof(ov[0]); i++) {
        cucopy_memh_h h2 = NULL;
        tc_case_begin("register %s again: ALREADY_EXISTS", ov[i].what);
        CHECK_STATUS(TC_CALL(cucopy_mem_reg(ctx, buf + ov[i].off, ov[i].len, 0, &h2)),
                     CUCOPY_ERR_ALREADY_EXISTS);
        tc_case_end();
        if (h2 != NULL)
            cucopy_mem_dereg(ctx, h2);
    }
    /* still registered, and the neighbours can be registered */
    check_registered(buf, LEN, 0, id0, "after the refused overlaps");
    cucopy_memh_h before = NULL, after = NULL;
    tc_case_begin("adjacent ranges before and after: OK");
    CHECK_STATUS(TC_CALL(cucopy_mem_reg(ctx, region, LEN, 0, &before)), CUCOPY_OK);
    CHECK_STATUS(TC_CALL(cucopy_mem_reg(ctx, buf + LEN, LEN, 0, &after)), CUCOPY_OK);
    tc_case_end();
    if (before != NULL)
        check_registered(region, LEN, 0, id0, "the range before");
    CHECK_STATUS(TC_CALL(cucopy_mem_dereg(ctx, before)), CUCOPY_OK);
    CHECK_STATUS(TC_CALL(cucopy_mem_dereg(ctx, after)), CUCOPY_OK);
    check_registered(buf, LEN, 0, id0, "after the neighbours' dereg");

    /* dereg; NULL; twice */
    CHECK_STATUS(TC_CALL(cucopy_mem_dereg(ctx, mh)), CUCOPY_OK);
    check_unregistered(buf, LEN, "after dereg");
    CHECK_STATUS(TC_CALL(cucopy_mem_dereg(ctx, mh)), CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(TC_CALL(cucopy_mem_dereg(ctx, NULL)), CUCOPY_OK);
    if (tc_fake.registered_ranges != NULL)
        CHECKF(tc_fake.registered_ranges() == 0, "fake: %ld registered ranges after dereg",
               tc_fake.registered_ranges());
    /* registering it again after dereg works */
    tc_case_begin("register again after dereg: OK");
    mh = NULL;
    CHECK_STATUS(TC_CALL(cucopy_mem_reg(ctx, buf, LEN, 0, &mh)), CUCOPY_OK);
    CHECK_STATUS(TC_CALL(cucopy_mem_dereg(ctx, mh)), CUCOPY_OK);
    tc_case_end();
    free(region);
}

static void phase3_refused(void)
{
    cdContext p0 = tc_primary(0);
    struct tc_buf dev0, managed, pinned;
    tc_buf_alloc(&dev0, TC_MEM_DEV0, LEN);
    tc_buf_alloc(&managed, TC_MEM_MANAGED, LEN);
    tc_buf_alloc(&pinned, TC_MEM_PINNED, LEN);
    char *hreg = page_alloc(LEN);
    tc_push(p0);
    TD_CHECK(td.cuMemHostRegister(hreg, LEN, CD_MEMHOSTREGISTER_PORTABLE));
    tc_pop(p0);
    cucopy_mem_alloc_params_t ap;
    memset(&ap, 0, sizeof(ap));
    ap.field_mask = CUCOPY_MEM_ALLOC_PARAM_LENGTH | CUCOPY_MEM_ALLOC_PARAM_MEM_TYPE |
                    CUCOPY_MEM_ALLOC_PARAM_DEVICE;
    ap.length = LEN;
    ap.device = 0;
    void *cdev = NULL, *chost = NULL;
    ap.mem_type = CUCOPY_MEMORY_TYPE_CUDA;
    REQUIRE_OK(cucopy_mem_alloc(ctx, &ap, &cdev));
    ap.mem_type = CUCOPY_MEMORY_TYPE_HOST;
    REQUIRE_OK(cucopy_mem_alloc(ctx, &ap, &chost));

    for (int cur = 0; cur < 2; cur++) {
        if (cur)
            TD_CHECK(td.cuCtxSetCurrent(p0));
        struct {
            void *p;
            size_t len;
            int want;
            const char *what;
        } c[] = {
            {(void *)(uintptr_t)dev0.dptr, LEN, CUCOPY_ERR_INVALID_PARAM, "cuMemAlloc memory"},
            {(void *)(uintptr_t)(dev0.dptr + 4096), 4096, CUCOPY_ERR_INVALID_PARAM,
             "interior cuMemAlloc memory"},
            {(void *)(uintptr_t)managed.dptr, LEN, CUCOPY_ERR_INVALID_PARAM, "managed memory"},
            {cdev, LEN, CUCOPY_ERR_INVALID_PARAM, "cucopy_mem_alloc device memory"},
            {pinned.host, LEN, CUCOPY_ERR_ALREADY_EXISTS, "cuMemHostAlloc memory"},
            {pinned.host + 4096, 4096, CUCOPY_ERR_ALREADY_EXISTS, "interior cuMemHostAlloc memory"},
            {hreg, LEN, CUCOPY_ERR_ALREADY_EXISTS, "memory cuMemHostRegister'ed by the program"},
            {hreg + 4096, 4096, CUCOPY_ERR_ALREADY_EXISTS, "inside the program's registration"},
            {chost, LEN, CUCOPY_ERR_ALREADY_EXISTS, "cucopy_mem_alloc host memory"},
        };
        for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
            cucopy_memh_h mh = NULL;
            tc_case_begin("mem_reg of %s (%s): %s", c[i].what,
                          cur ? "primary 0 current" : "none current", tc_status_name(c[i].want));
            CHECK_STATUS(TC_CALL(cucopy_mem_reg(ctx, c[i].p, c[i].len, 0, &mh)), c[i].want);
            tc_case_end();
            if (mh != NULL)
                cucopy_mem_dereg(ctx, mh);
        }
        if (cur)
            TD_CHECK(td.cuCtxSetCurrent(NULL));
    }

    /* bad arguments */
    char *buf = page_alloc(LEN);
    cucopy_memh_h mh = NULL;
    CHECK_STATUS(TC_CALL(cucopy_mem_reg(ctx, NULL, LEN, 0, &mh)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_mem_reg(ctx, buf, 0, 0, &mh)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_mem_reg(ctx, buf, LEN, 1, &mh)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_mem_reg(ctx, buf, LEN, 0x80000000u, &mh)),
                 CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_mem_reg(ctx, buf, LEN, 0, NULL)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_mem_reg(ctx, buf, SIZE_MAX, 0, &mh)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_mem_reg(NULL, buf, LEN, 0, &mh)), CUCOPY_ERR_INVALID_HANDLE);
    check_unregistered(buf, LEN, "after the refused registrations");
    /* a handle used with another cucopy context */
    cucopy_context_h other = NULL;
    REQUIRE_OK(cucopy_context_create(NULL, &other));
    REQUIRE_OK(cucopy_mem_reg(ctx, buf, LEN, 0, &mh));
    CHECK_STATUS(TC_CALL(cucopy_mem_dereg(NULL, mh)), CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(TC_CALL(cucopy_mem_dereg(other, mh)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_mem_dereg(ctx, mh)), CUCOPY_OK);
    CHECK_STATUS(cucopy_context_destroy(other), CUCOPY_OK);
    free(buf);

    CHECK_STATUS(TC_CALL(cucopy_mem_free(ctx, cdev)), CUCOPY_OK);
    CHECK_STATUS(TC_CALL(cucopy_mem_free(ctx, chost)), CUCOPY_OK);
    tc_push(p0);
    TD_CHECK(td.cuMemHostUnregister(hreg));
    tc_pop(p0);
    free(hreg);
    tc_buf_free(&dev0);
    tc_buf_free(&managed);
    tc_buf_free(&pinned);
}

/* Registered with a created context of device d current: it owns the range. */
static void phase4_other_context(void)
{
    for (int d = 0; d < ndev && d < 2; d++) {
        cdContext user = NULL;
        TD_CHECK(td.cuCtxCreate(&user, 0, d));
        char *buf = page_alloc(LEN);
        cucopy_memh_h mh = NULL;
        char what[96];
        snprintf(what, sizeof(what), "registered with a created context of device %d current", d);
        tc_case_begin("%s", what);
        CHECK_STATUS(TC_CALL(cucopy_mem_reg(ctx, buf, LEN, 0, &mh)), CUCOPY_OK);
        tc_case_end();
        if (mh != NULL) {
            TD_CHECK(td.cuCtxPopCurrent(NULL));
            check_registered(buf, LEN, d, tc_ctx_id(user), what);
            TD_CHECK(td.cuCtxPushCurrent(user));
            CHECK_STATUS(TC_CALL(cucopy_mem_dereg(ctx, mh)), CUCOPY_OK);
            check_unregistered(buf, LEN, "after dereg in the created context");
        }
        /* registered in it, then the program destroys the context */
        mh = NULL;
        CHECK_STATUS(TC_CALL(cucopy_mem_reg(ctx, buf, LEN, 0, &mh)), CUCOPY_OK);
        TD_CHECK(td.cuCtxPopCurrent(NULL));
        TD_CHECK(td.cuCtxDestroy(user));
        long viol = tc_fake.violations != NULL ? tc_fake.violations() : 0;
        tc_case_begin("dereg after the program destroyed the registering context (device %d): OK",
                      d);
        CHECK_STATUS(TC_CALL(cucopy_mem_dereg(ctx, mh)), CUCOPY_OK);
        if (tc_fake.violations != NULL)
            CHECKF(tc_fake.violations() == viol,
                   "the dereg made %ld driver call(s) the fake counts as violations (the "
                   "destroyed context used)", tc_fake.violations() - viol);
        CHECK_STATUS(TC_CALL(cucopy_mem_dereg(ctx, mh)), CUCOPY_ERR_INVALID_HANDLE);
        tc_case_end();
        free(buf);
    }
}

/* Registered in primary context 0 (retained by the program, none current),
 * then the program resets it. Last phase: the reset takes every allocation
 * of primary 0 along. */
static void phase5_reset(void)
{
    cdContext p0 = tc_primary(0);
    (void)p0;
    char *buf = page_alloc(LEN);
    cucopy_memh_h mh = NULL;
    REQUIRE_OK(cucopy_mem_reg(ctx, buf, LEN, 0, &mh));
    check_registered(buf, LEN, 0, tc_ctx_id(p0), "registered before the reset");
    cdDevice d0;
    TD_CHECK(td.cuDeviceGet(&d0, 0));
    TD_CHECK(td.cuDevicePrimaryCtxReset(d0));
    long viol = tc_fake.violations != NULL ? tc_fake.violations() : 0;
    tc_case_begin("dereg after cuDevicePrimaryCtxReset of its context: OK");
    CHECK_STATUS(TC_CALL(cucopy_mem_dereg(ctx, mh)), CUCOPY_OK);
    if (tc_fake.violations != NULL)
        CHECKF(tc_fake.violations() == viol,
               "the dereg made %ld driver call(s) the fake counts as violations (a dead "
               "context used, or a release of a primary the reset already dropped)",
               tc_fake.violations() - viol);
    CHECK_STATUS(TC_CALL(cucopy_mem_dereg(ctx, mh)), CUCOPY_ERR_INVALID_HANDLE);
    tc_case_end();
    check_unregistered(buf, LEN, "after the reset and dereg");
    free(buf);
}

int main(void)
{
    ndev = tc_begin("test_mem_reg", CUCOPY_MAX_DEVICES);
    REQUIRE_OK(cucopy_context_create(NULL, &ctx));
    REQUIRE(tc_current() == NULL);

    phase1_no_context();
    phase2_registered();
    phase3_refused();
    phase4_other_context();
    phase5_reset();

    CHECK(tc_current() == NULL);
    CHECK_STATUS(cucopy_context_destroy(ctx), CUCOPY_OK);
    if (tc_fake.violations != NULL)
        CHECKF(tc_fake.violations() == 0, "%ld fake-driver violation(s)", tc_fake.violations());
    return tc_finish();
}
