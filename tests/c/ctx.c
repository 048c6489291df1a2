/* SPDX-License-Identifier: BSD-3-Clause */
#include "ctx.h"

#include "check.h"

#include <pthread.h>

static pthread_mutex_t primaries_lock = PTHREAD_MUTEX_INITIALIZER;
static cdContext primaries[64];

cdContext tc_primary(int dev)
{
    REQUIRE(dev >= 0 && dev < 64 && dev < td.device_count);
    pthread_mutex_lock(&primaries_lock);
    if (primaries[dev] == NULL) {
        cdDevice d;
        TD_CHECK(td.cuDeviceGet(&d, dev));
        TD_CHECK(td.cuDevicePrimaryCtxRetain(&primaries[dev], d));
    }
    cdContext ctx = primaries[dev];
    pthread_mutex_unlock(&primaries_lock);
    return ctx;
}

int tc_primary_active(int dev)
{
    cdDevice d;
    unsigned int flags = 0;
    int active = 0;
    TD_CHECK(td.cuDeviceGet(&d, dev));
    TD_CHECK(td.cuDevicePrimaryCtxGetState(d, &flags, &active));
    return active;
}

cdContext tc_primary_retain(int dev)
{
    cdDevice d;
    cdContext c = NULL;
    TD_CHECK(td.cuDeviceGet(&d, dev));
    TD_CHECK(td.cuDevicePrimaryCtxRetain(&c, d));
    return c;
}

void tc_primary_release(int dev)
{
    cdDevice d;
    TD_CHECK(td.cuDeviceGet(&d, dev));
    TD_CHECK(td.cuDevicePrimaryCtxRelease(d));
}

void tc_primary_reset(int dev)
{
    cdDevice d;
    TD_CHECK(td.cuDeviceGet(&d, dev));
    TD_CHECK(td.cuDevicePrimaryCtxReset(d));
}

void tc_push(cdContext ctx)
{
    if (ctx != NULL)
        TD_CHECK(td.cuCtxPushCurrent(ctx));
}

void tc_pop(cdContext ctx)
{
    if (ctx != NULL) {
        cdContext popped = NULL;
        TD_CHECK(td.cuCtxPopCurrent(&popped));
        REQUIRE(popped == ctx);
    }
}

cdContext tc_current(void)
{
    cdContext ctx = NULL;
    TD_CHECK(td.cuCtxGetCurrent(&ctx));
    return ctx;
}

uint64_t tc_ctx_id(cdContext c)
{
    unsigned long long id = 0;
    if (td.cuCtxGetId == NULL || c == NULL)
        return 0;
    TD_CHECK(td.cuCtxGetId(c, &id));
    return id;
}
