/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cucopy_mem_alloc / cucopy_mem_free: device, managed and pinned host memory
 * on every device.
 *  - phase 1: every primary context inactive: an explicit device is
 *    CUCOPY_ERR_NO_DEVICE and activates nothing (cuDevicePrimaryCtxGetState;
 *    on the fake also fakecuda_ctx_creations); no device and no context is
 *    CUCOPY_ERR_NO_DEVICE;
 *  - phase 2: inactive primary with CUCOPY_MEM_ALLOC_FLAG_ACTIVATE works; the
 *    library's retain goes with mem_free (fake: the primary is inactive
 *    again; real GPU: the free succeeds);
 *  - phase 3: primaries active (retained by the program): an explicit device
 *    allocates in its primary context, with no context current and with
 *    another device's context current;
 *  - phase 4: no device given, a created context current: allocated in it
 *    (mem_query's context_id is cuCtxGetId of it);
 *  - mem_free of foreign, unknown, interior and already-freed pointers, and
 *    bad params: CUCOPY_ERR_INVALID_PARAM;
 * after every call the current context is what it was (nothing left
 * current); on the fake, fakecuda_live_allocations ends at its start value.
 */
#define _GNU_SOURCE
#include "calls.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEN ((size_t)1 << 20)

static cucopy_context_h ctx;
static int ndev;
static long live_start;

static const cucopy_memory_type_t types[3] = {CUCOPY_MEMORY_TYPE_CUDA,
                                              CUCOPY_MEMORY_TYPE_CUDA_MANAGED,
                                              CUCOPY_MEMORY_TYPE_HOST};

static const char *type_name(cucopy_memory_type_t t)
{
    return t == CUCOPY_MEMORY_TYPE_CUDA          ? "cuda"
           : t == CUCOPY_MEMORY_TYPE_CUDA_MANAGED ? "managed"
                                                  : "host";
}

static cucopy_mem_alloc_params_t params(cucopy_memory_type_t type, int dev, unsigned flags)
{
    cucopy_mem_alloc_params_t p;
    memset(&p, 0, sizeof(p));
    p.field_mask = CUCOPY_MEM_ALLOC_PARAM_LENGTH | CUCOPY_MEM_ALLOC_PARAM_MEM_TYPE;
    p.length = LEN;
    p.mem_type = type;
    if (dev >= 0) {
        p.field_mask |= CUCOPY_MEM_ALLOC_PARAM_DEVICE;
        p.device = dev;
    }
    if (flags != 0) {
        p.field_mask |= CUCOPY_MEM_ALLOC_PARAM_FLAGS;
        p.flags = flags;
    }
    return p;
}

static cucopy_mem_attr_t query(const void *addr)
{
    cucopy_mem_attr_t a;
    memset(&a, 0, sizeof(a));
    a.field_mask = CUCOPY_MEM_ATTR_MEM_TYPE | CUCOPY_MEM_ATTR_PINNED | CUCOPY_MEM_ATTR_DEVICE |
                   CUCOPY_MEM_ATTR_CONTEXT_ID | CUCOPY_MEM_ATTR_ALLOCATION |
                   CUCOPY_MEM_ATTR_FLAGS | CUCOPY_MEM_ATTR_ACCESS;
    int s = TC_CALL(cucopy_mem_query(ctx, addr, 0, &a));
    CHECKF(s == CUCOPY_OK, "mem_query(%p) returned %s: %s", addr, tc_status_name(s),
           cucopy_last_error());
    return a;
}

/* What mem_query says of fresh memory of type t allocated in a context of
 * device dev with id ctx_id (0: not known, not checked). */
static void check_allocated(void *p, cucopy_memory_type_t t, int dev, uint64_t ctx_id)
{
    cucopy_mem_attr_t a = query(p);
    CHECKF(a.mem_type == t, "mem_type %d, want %d", a.mem_type, t);
    CHECKF(a.device == dev, "device %d, want %d", a.device, dev);
    if (ctx_id != 0)
        CHECKF(a.context_id == ctx_id, "context_id %llu, want %llu",
               (unsigned long long)a.context_id, (unsigned long long)ctx_id);
    else
        CHECKF(td.cuCtxGetId == NULL || a.context_id != 0, "context_id 0");
    CHECKF(a.base_address == (uint64_t)(uintptr_t)p && a.alloc_length == LEN,
           "allocation [0x%llx, +%zu), want [%p, +%zu)", (unsigned long long)a.base_address,
           a.alloc_length, p, LEN);
    CHECKF(a.flags & CUCOPY_MEM_FLAG_ALLOCATED, "flags 0x%llx lack ALLOCATED",
           (unsigned long long)a.flags);
    CHECKF(a.pinned == (t == CUCOPY_MEMORY_TYPE_HOST), "pinned %d", a.pinned);
    /* the memory works: a raw round trip in the owning device's primary
     * context (pinned host and managed memory are portable / global) */
    unsigned char in[64], out[64];
    memcpy(in, tc_pattern(64), 64);
    if (t == CUCOPY_MEMORY_TYPE_HOST) {
        memcpy(p, in, 64);
        memcpy(out, p, 64);
    } else {
        cdContext pc = NULL;
        cdDevice d;
        TD_CHECK(td.cuDeviceGet(&d, dev));
        TD_CHECK(td.cuDevicePrimaryCtxRetain(&pc, d));
        tc_push(pc);
        TD_CHECK(td.cuMemcpyHtoD((cdDevicePtr)(uintptr_t)p, in, 64));
        TD_CHECK(td.cuMemcpyDtoH(out, (cdDevicePtr)(uintptr_t)p, 64));
        tc_pop(pc);
        TD_CHECK(td.cuDevicePrimaryCtxRelease(d));
    }
    CHECKF(memcmp(in, out, 64) == 0, "data written and read back differs");
}

static void check_freed(void *p)
{
    cucopy_mem_attr_t a = query(p);
    CHECKF(a.mem_type == CUCOPY_MEMORY_TYPE_HOST, "freed memory is mem_type %d", a.mem_type);
    CHECKF(!(a.flags & CUCOPY_MEM_FLAG_ALLOCATED), "freed memory still ALLOCATED");
}

static void phase1_inactive(void)
{
    int active[CUCOPY_MAX_DEVICES] = {0};
    for (int d = 0; d < ndev && d < CUCOPY_MAX_DEVICES; d++)
        active[d] = tc_primary_active(d);
    for (int d = 0; d < ndev; d++) {
        if (active[d]) {
            printf("test_mem_alloc: device %d's primary context is active before the test; "
                   "skipping its inactive cases\n", d);
            continue;
        }
        for (int i = 0; i < 3; i++) {
            cucopy_mem_alloc_params_t p = params(types[i], d, 0);
            void *addr = (void *)1;
            tc_case_begin("inactive primary %d, %s: NO_DEVICE, nothing activated", d,
                          type_name(types[i]));
            CHECK_STATUS(TC_CALL(cucopy_mem_alloc(ctx, &p, &addr)), CUCOPY_ERR_NO_DEVICE);
            CHECKF(!tc_primary_active(d), "device %d's primary context became active", d);
            tc_case_end();
        }
    }
    int none_active = 1;
    for (int d = 0; d < ndev; d++)
        none_active &= !active[d];
    if (none_active) {
        for (int i = 0; i < 3; i++) {
            cucopy_mem_alloc_params_t p = params(types[i], -1, 0);
            void *addr = NULL;
            tc_case_begin("no device, no context, %s: NO_DEVICE", type_name(types[i]));
            CHECK_STATUS(TC_CALL(cucopy_mem_alloc(ctx, &p, &addr)), CUCOPY_ERR_NO_DEVICE);
            for (int d = 0; d < ndev; d++)
                CHECKF(!tc_primary_active(d), "device %d's primary became active", d);
            tc_case_end();
        }
    }
}

static void phase2_activate(void)
{
    for (int d = 0; d < ndev; d++) {
        if (tc_primary_active(d))
            continue;
        for (int i = 0; i < 3; i++) {
            cucopy_mem_alloc_params_t p = params(types[i], d, CUCOPY_MEM_ALLOC_FLAG_ACTIVATE);
            void *addr = NULL;
            tc_case_begin("inactive primary %d, %s, FLAG_ACTIVATE: allocates, free releases", d,
                          type_name(types[i]));
            tc_may_activate = 1;
            int s = TC_CALL(cucopy_mem_alloc(ctx, &p, &addr));
            tc_may_activate = 0;
            if (CHECK_STATUS(s, CUCOPY_OK)) {
                CHECKF(tc_primary_active(d), "device %d's primary not active after ACTIVATE", d);
                check_allocated(addr, types[i], d, 0);
                CHECK_STATUS(TC_CALL(cucopy_mem_free(ctx, addr)), CUCOPY_OK);
                if (td.is_fake)
                    CHECKF(!tc_primary_active(d),
                           "device %d's primary still active after mem_free: the library's "
                           "retain was not released", d);
                if (!tc_primary_active(d))
                    check_freed(addr);
            }
            tc_case_end();
        }
    }
}

static void phase3_explicit(void)
{
    cdContext prim[CUCOPY_MAX_DEVICES];
    for (int d = 0; d < ndev && d < CUCOPY_MAX_DEVICES; d++)
        prim[d] = tc_primary(d);
    for (int cur = -1; cur < ndev; cur++) {
        if (cur >= 0)
            TD_CHECK(td.cuCtxSetCurrent(prim[cur]));
        for (int d = 0; d < ndev; d++) {
            for (int i = 0; i < 3; i++) {
                cucopy_mem_alloc_params_t p = params(types[i], d, 0);
                void *addr = NULL;
                tc_case_begin("active primary %d, %s, %s", d, type_name(types[i]),
                              cur < 0 ? "none current" : cur == d ? "same device current"
                                                                  : "other device current");
                if (CHECK_STATUS(TC_CALL(cucopy_mem_alloc(ctx, &p, &addr)), CUCOPY_OK)) {
                    check_allocated(addr, types[i], d, tc_ctx_id(prim[d]));
                    CHECK_STATUS(TC_CALL(cucopy_mem_free(ctx, addr)), CUCOPY_OK);
                    check_freed(addr);
                    /* freeing again, now unknown */
                    CHECK_STATUS(TC_CALL(cucopy_mem_free(ctx, addr)), CUCOPY_ERR_INVALID_PARAM);
                }
                tc_case_end();
            }
        }
        /* no device given: the current context's device; pinned host
         * memory with no context current: the first active primary */
        for (int i = 0; i < 3; i++) {
            if (cur < 0 && types[i] != CUCOPY_MEMORY_TYPE_HOST)
                continue;
            int dev = cur < 0 ? 0 : cur;
            cucopy_mem_alloc_params_t p = params(types[i], -1, 0);
            void *addr = NULL;
            tc_case_begin("no device, %s, %s", type_name(types[i]),
                          cur < 0 ? "none current (first active primary)" : "primary current");
            if (CHECK_STATUS(TC_CALL(cucopy_mem_alloc(ctx, &p, &addr)), CUCOPY_OK)) {
                check_allocated(addr, types[i], dev, tc_ctx_id(prim[dev]));
                CHECK_STATUS(TC_CALL(cucopy_mem_free(ctx, addr)), CUCOPY_OK);
            }
            tc_case_end();
        }
        if (cur >= 0)
            TD_CHECK(td.cuCtxSetCurrent(NULL));
    }
}

static void phase4_user_context(void)
{
    for (int d = 0; d < ndev; d++) {
        cdContext user = NULL;
        TD_CHECK(td.cuCtxCreate(&user, 0, d));
        uint64_t id = tc_ctx_id(user);
        for (int i = 0; i < 3; i++) {
            for (int explicit_dev = 0; explicit_dev < 2; explicit_dev++) {
                cucopy_mem_alloc_params_t p = params(types[i], explicit_dev ? d : -1, 0);
                void *addr = NULL;
                tc_case_begin("created context of device %d current, %s, %s: allocated in it", d,
                              type_name(types[i]), explicit_dev ? "same device given" : "no device");
                if (CHECK_STATUS(TC_CALL(cucopy_mem_alloc(ctx, &p, &addr)), CUCOPY_OK)) {
                    check_allocated(addr, types[i], d, id);
                    CHECK_STATUS(TC_CALL(cucopy_mem_free(ctx, addr)), CUCOPY_OK);
                    check_freed(addr);
                }
                tc_case_end();
            }
        }
        TD_CHECK(td.cuCtxPopCurrent(NULL));
        TD_CHECK(td.cuCtxDestroy(user));
    }
}

static void bad_frees_and_params(void)
{
    cucopy_context_h other = NULL;
    REQUIRE_OK(cucopy_context_create(NULL, &other));
    struct tc_buf dev0;
    tc_buf_alloc(&dev0, TC_MEM_DEV0, 4096);
    char *heap = malloc(64);
    char stack[64];
    REQUIRE(heap != NULL);

    cucopy_mem_alloc_params_t p = params(CUCOPY_MEMORY_TYPE_CUDA, 0, 0);
    void *mine = NULL;
    REQUIRE_OK(cucopy_mem_alloc(ctx, &p, &mine));

    CHECK_STATUS(TC_CALL(cucopy_mem_free(ctx, (void *)(uintptr_t)dev0.dptr)),
                 CUCOPY_ERR_INVALID_PARAM); /* the program's cuMemAlloc */
    CHECK_STATUS(TC_CALL(cucopy_mem_free(ctx, heap)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_mem_free(ctx, stack)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_mem_free(ctx, (char *)mine + 64)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_mem_free(other, mine)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_mem_free(NULL, mine)), CUCOPY_ERR_INVALID_HANDLE);
    /* still allocated and working after the refused frees */
    check_allocated(mine, CUCOPY_MEMORY_TYPE_CUDA, 0, tc_ctx_id(tc_primary(0)));
    CHECK_STATUS(TC_CALL(cucopy_mem_free(ctx, mine)), CUCOPY_OK);
    CHECK_STATUS(TC_CALL(cucopy_mem_free(ctx, mine)), CUCOPY_ERR_INVALID_PARAM);

    void *addr = NULL;
    p = params(CUCOPY_MEMORY_TYPE_CUDA, 0, 0);
    p.field_mask &= ~(uint64_t)CUCOPY_MEM_ALLOC_PARAM_LENGTH;
    CHECK_STATUS(TC_CALL(cucopy_mem_alloc(ctx, &p, &addr)), CUCOPY_ERR_INVALID_PARAM);
    p = params(CUCOPY_MEMORY_TYPE_CUDA, 0, 0);
    p.length = 0;
    CHECK_STATUS(TC_CALL(cucopy_mem_alloc(ctx, &p, &addr)), CUCOPY_ERR_INVALID_PARAM);
    p = params(CUCOPY_MEMORY_TYPE_CUDA, 0, 0);
    p.field_mask |= 1u << 4;
    CHECK_STATUS(TC_CALL(cucopy_mem_alloc(ctx, &p, &addr)), CUCOPY_ERR_INVALID_PARAM);
    p.field_mask = CUCOPY_MEM_ALLOC_PARAM_LENGTH | (1ull << 63);
    CHECK_STATUS(TC_CALL(cucopy_mem_alloc(ctx, &p, &addr)), CUCOPY_ERR_INVALID_PARAM);
    p = params(CUCOPY_MEMORY_TYPE_CUDA, 0, 1u << 1);
    CHECK_STATUS(TC_CALL(cucopy_mem_alloc(ctx, &p, &addr)), CUCOPY_ERR_INVALID_PARAM);
    p = params(CUCOPY_MEMORY_TYPE_CUDA, 0, CUCOPY_MEM_ALLOC_FLAG_ACTIVATE | 0x80000000u);
    CHECK_STATUS(TC_CALL(cucopy_mem_alloc(ctx, &p, &addr)), CUCOPY_ERR_INVALID_PARAM);
    p = params((cucopy_memory_type_t)3, 0, 0);
    CHECK_STATUS(TC_CALL(cucopy_mem_alloc(ctx, &p, &addr)), CUCOPY_ERR_INVALID_PARAM);
    p = params((cucopy_memory_type_t)-1, 0, 0);
    CHECK_STATUS(TC_CALL(cucopy_mem_alloc(ctx, &p, &addr)), CUCOPY_ERR_INVALID_PARAM);
    p = params(CUCOPY_MEMORY_TYPE_CUDA, ndev, 0);
    CHECK_STATUS(TC_CALL(cucopy_mem_alloc(ctx, &p, &addr)), CUCOPY_ERR_INVALID_PARAM);
    p = params(CUCOPY_MEMORY_TYPE_CUDA, 0, 0);
    p.device = -5;
    CHECK_STATUS(TC_CALL(cucopy_mem_alloc(ctx, &p, &addr)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_mem_alloc(ctx, NULL, &addr)), CUCOPY_ERR_INVALID_PARAM);
    p = params(CUCOPY_MEMORY_TYPE_CUDA, 0, 0);
    CHECK_STATUS(TC_CALL(cucopy_mem_alloc(ctx, &p, NULL)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_mem_alloc(NULL, &p, &addr)), CUCOPY_ERR_INVALID_HANDLE);
    /* the length alone: device memory of the current context */
    TD_CHECK(td.cuCtxSetCurrent(tc_primary(0)));
    memset(&p, 0, sizeof(p));
    p.field_mask = CUCOPY_MEM_ALLOC_PARAM_LENGTH;
    p.length = LEN;
    tc_case_begin("length only, primary 0 current: device memory there");
    if (CHECK_STATUS(TC_CALL(cucopy_mem_alloc(ctx, &p, &addr)), CUCOPY_OK)) {
        check_allocated(addr, CUCOPY_MEMORY_TYPE_CUDA, 0, tc_ctx_id(tc_primary(0)));
        CHECK_STATUS(TC_CALL(cucopy_mem_free(ctx, addr)), CUCOPY_OK);
    }
    tc_case_end();
    TD_CHECK(td.cuCtxSetCurrent(NULL));

    /* memory allocated through one context, left for context_destroy */
    p = params(CUCOPY_MEMORY_TYPE_CUDA, 0, 0);
    void *leak = NULL;
    CHECK_STATUS(TC_CALL(cucopy_mem_alloc(other, &p, &leak)), CUCOPY_OK);
    CHECK_STATUS(TC_CALL(cucopy_mem_free(ctx, leak)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_mem_free(other, leak)), CUCOPY_OK);
    CHECK_STATUS(TC_CALL(cucopy_context_destroy(other)), CUCOPY_OK);

    tc_buf_free(&dev0);
    free(heap);
}

int main(void)
{
    ndev = tc_begin("test_mem_alloc", CUCOPY_MAX_DEVICES);
    if (tc_fake.live_allocations != NULL)
        live_start = tc_fake.live_allocations();
    REQUIRE_OK(cucopy_context_create(NULL, &ctx));
    REQUIRE(tc_current() == NULL);

    phase1_inactive();
    phase2_activate();
    phase3_explicit();
    phase4_user_context();
    bad_frees_and_params();

    CHECK(tc_current() == NULL);
    CHECK_STATUS(cucopy_context_destroy(ctx), CUCOPY_OK);
    if (tc_fake.live_allocations != NULL)
        CHECKF(tc_fake.live_allocations() == live_start,
               "fakecuda_live_allocations %ld at the end, %ld at the start",
               tc_fake.live_allocations(), live_start);
    else if (td.is_fake)
        printf("test_mem_alloc: the fake lacks fakecuda_live_allocations; not counted\n");
    if (tc_fake.violations != NULL)
        CHECKF(tc_fake.violations() == 0, "%ld fake-driver violation(s)", tc_fake.violations());
    return tc_finish();
}
