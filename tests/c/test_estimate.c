/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cucopy_iface_estimate through the C ABI: the topology model's arithmetic
 * (pinned PCIe DMA from the reported link, pageable staging, device memory
 * from the memory interface on the fake), time = latency + length /
 * bandwidth, only the fields of field_mask written, NVLinks from NVML
 * (test_estimate_nvlink: the fake NVML); calibration (measured
 * once per pair and kept, the caller's current context and the iface's
 * counters untouched, buffers freed, no primary context activated: without
 * one the model answers); bad input (NULL iface or attr, unknown memory
 * type, flags or field bits, devices out of range, a pinned flag on device
 * memory, an unknown NUMA node).
 */
#define _GNU_SOURCE
#include "check.h"
#include "ctx.h"
#include "fake.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ALL                                                                                \
    (CUCOPY_ESTIMATE_ATTR_LATENCY | CUCOPY_ESTIMATE_ATTR_BANDWIDTH | CUCOPY_ESTIMATE_ATTR_TIME | \
     CUCOPY_ESTIMATE_ATTR_SOURCE | CUCOPY_ESTIMATE_ATTR_PATH | CUCOPY_ESTIMATE_ATTR_NUMA_REMOTE)
#define LEN ((size_t)256 << 20)

static cucopy_iface_h iface;

static cucopy_estimate_attr_t estimate(cucopy_memory_type_t st, int sd, cucopy_memory_type_t dt,
                                       int dd, unsigned flags)
{
    cucopy_estimate_attr_t a;
    memset(&a, 0, sizeof(a));
    a.field_mask = ALL;
    CHECK_STATUS(cucopy_iface_estimate(iface, st, sd, dt, dd, LEN, flags, &a), CUCOPY_OK);
    return a;
}

static int near(double want, double got)
{
    double d = want - got;
    return (d < 0 ? -d : d) <= 1e-9 * (want < 0 ? -want : want);
}

/* The model's PCIe DMA rate of a link (docs/design.md, "Performance model"). */
static double pcie_rate(int gen, int width)
{
    static const double lane[] = {0, 0.25e9, 0.5e9, 0.985e9, 1.969e9, 3.938e9, 7.56e9};
    return gen >= 1 && gen <= 6 ? 0.88 * lane[gen] * width : -1;
}

static void check_linear(const cucopy_estimate_attr_t *a, const char *what)
{
    CHECKF(a->latency > 0 && a->bandwidth > 0, "%s: latency %g s, bandwidth %g B/s", what,
           a->latency, a->bandwidth);
    CHECKF(near(a->latency + (double)LEN / a->bandwidth, a->time),
           "%s: time %g s is not latency + length / bandwidth", what, a->time);
}

static void test_model(int devices)
{
    tc_case_begin("model: pinned host to device 0 over its PCIe link");
    cucopy_estimate_attr_t a = estimate(CUCOPY_MEMORY_TYPE_HOST, CUCOPY_NUMA_ANY,
                                        CUCOPY_MEMORY_TYPE_CUDA, 0, CUCOPY_ESTIMATE_SRC_PINNED);
    CHECKF(a.source == CUCOPY_ESTIMATE_SOURCE_MODEL, "source %d", a.source);
    CHECKF(a.path == CUCOPY_PATH_PCIE, "path %d", a.path);
    CHECKF(a.path_gen >= 1 && a.path_gen <= 6 && a.path_width >= 1 && a.path_width <= 32,
           "PCIe gen %d x%d", a.path_gen, a.path_width);
    double pinned = pcie_rate(a.path_gen, a.path_width);
    CHECKF(near(pinned, a.bandwidth), "bandwidth %g, want 0.88 x lane rate x width = %g",
           a.bandwidth, pinned);
    CHECKF(near(6.5e-6, a.latency), "latency %g", a.latency);
    CHECK(!a.numa_remote);
    check_linear(&a, "h2d pinned");
    if (td.is_fake) /* no sysfs node for the fake's bus ids: assumed from cc 9.0 */
        CHECKF(a.path_gen == 5 && a.path_width == 16, "fake: gen %d x%d", a.path_gen,
               a.path_width);
    tc_case_end();

    tc_case_begin("model: device 0 to pageable host, staged");
    a = estimate(CUCOPY_MEMORY_TYPE_CUDA, 0, CUCOPY_MEMORY_TYPE_HOST, CUCOPY_NUMA_ANY, 0);
    CHECKF(a.path == CUCOPY_PATH_PCIE_STAGED, "path %d", a.path);
    CHECKF(near(pinned < 16e9 ? pinned : 16e9, a.bandwidth), "bandwidth %g", a.bandwidth);
    CHECKF(near(9.6e-6, a.latency), "latency %g", a.latency);
    check_linear(&a, "d2h pageable");
    tc_case_end();

    tc_case_begin("model: within device 0, and managed memory as device memory");
    a = estimate(CUCOPY_MEMORY_TYPE_CUDA, 0, CUCOPY_MEMORY_TYPE_CUDA_MANAGED, 0, 0);
    CHECKF(a.path == CUCOPY_PATH_DEVICE, "path %d", a.path);
    check_linear(&a, "d2d");
    if (td.is_fake) /* the fake's HBM3e: 3201 MHz, 6144 bits */
        CHECKF(near(0.43 * 2 * 3.201e9 * 768, a.bandwidth) && a.path_width == 6144,
               "fake: bandwidth %g, width %d", a.bandwidth, a.path_width);
    tc_case_end();

    tc_case_begin("model: host to host on the CPU");
    a = estimate(CUCOPY_MEMORY_TYPE_HOST, CUCOPY_NUMA_ANY, CUCOPY_MEMORY_TYPE_HOST,
                 CUCOPY_NUMA_ANY, CUCOPY_ESTIMATE_DST_PINNED);
    CHECKF(a.path == CUCOPY_PATH_CPU, "path %d", a.path);
    check_linear(&a, "host to host");
    tc_case_end();

    if (devices >= 2) {
        tc_case_begin("model: device 0 to device 1");
        a = estimate(CUCOPY_MEMORY_TYPE_CUDA, 0, CUCOPY_MEMORY_TYPE_CUDA, 1, 0);
        CHECKF(a.path == CUCOPY_PATH_NVLINK || a.path == CUCOPY_PATH_PCIE_PEER ||
                   a.path == CUCOPY_PATH_HOST_STAGED,
               "path %d", a.path);
        check_linear(&a, "peer");
        /* On the fake: $TEST_ESTIMATE_NVLINKS links when the fake NVML
         * (tests/fakecuda/fakenvml.c) is on LD_LIBRARY_PATH, else peer
         * access over PCIe. */
        const char *nv = getenv("TEST_ESTIMATE_NVLINKS");
        int nvlinks = nv != NULL ? atoi(nv) : 0;
        if (td.is_fake && nvlinks > 0)
            CHECKF(a.path == CUCOPY_PATH_NVLINK && a.path_width == nvlinks && a.path_gen == 4 &&
                       near(0.88 * nvlinks * 25e9, a.bandwidth) && near(7.5e-6, a.latency),
                   "fake NVML: path %d, %d links of NVLink%d, bandwidth %g", a.path,
                   a.path_width, a.path_gen, a.bandwidth);
        else if (td.is_fake)
            CHECKF(a.path == CUCOPY_PATH_PCIE_PEER, "fake: path %d", a.path);
        tc_case_end();
    }

    tc_case_begin("only the fields of field_mask are written");
    cucopy_estimate_attr_t m;
    memset(&m, 0xee, sizeof(m));
    m.field_mask = CUCOPY_ESTIMATE_ATTR_BANDWIDTH;
    CHECK_STATUS(cucopy_iface_estimate(iface, CUCOPY_MEMORY_TYPE_HOST, CUCOPY_NUMA_ANY,
                                       CUCOPY_MEMORY_TYPE_CUDA, 0, LEN,
                                       CUCOPY_ESTIMATE_SRC_PINNED, &m),
                 CUCOPY_OK);
    CHECKF(near(pinned, m.bandwidth), "bandwidth %g", m.bandwidth);
    cucopy_estimate_attr_t untouched;
    memset(&untouched, 0xee, sizeof(untouched));
    CHECK(memcmp(&m.latency, &untouched.latency, sizeof(m.latency)) == 0);
    CHECK(memcmp(&m.path, &untouched.path, sizeof(m.path)) == 0);
    tc_case_end();
}

static void test_bad_input(int devices)
{
    cucopy_estimate_attr_t a = {.field_mask = ALL};
    const cucopy_memory_type_t H = CUCOPY_MEMORY_TYPE_HOST;
    const cucopy_memory_type_t D = CUCOPY_MEMORY_TYPE_CUDA;
    CHECK_STATUS(cucopy_iface_estimate(NULL, H, -1, D, 0, 8, 0, &a), CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(cucopy_iface_estimate(iface, H, -1, D, 0, 8, 0, NULL), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_iface_estimate(iface, (cucopy_memory_type_t)7, -1, D, 0, 8, 0, &a),
                 CUCOPY_ERR_INVALID_PARAM);
    CHECK(strstr(cucopy_last_error(), "unknown memory type 7") != NULL);
    CHECK_STATUS(cucopy_iface_estimate(iface, H, -1, D, devices, 8, 0, &a),
                 CUCOPY_ERR_INVALID_PARAM);
    CHECK(strstr(cucopy_last_error(), "destination: device") != NULL);
    CHECK_STATUS(cucopy_iface_estimate(iface, D, -1, H, -1, 8, 0, &a), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_iface_estimate(iface, D, 0, D, 0, 8, CUCOPY_ESTIMATE_SRC_PINNED, &a),
                 CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_iface_estimate(iface, H, -2, D, 0, 8, 0, &a), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_iface_estimate(iface, H, -1, D, 0, 8, 1u << 7, &a),
                 CUCOPY_ERR_INVALID_PARAM);
    CHECK(strstr(cucopy_last_error(), "unknown flags 0x80") != NULL);
    cucopy_estimate_attr_t bad = {.field_mask = 1u << 20};
    CHECK_STATUS(cucopy_iface_estimate(iface, H, -1, D, 0, 8, 0, &bad), CUCOPY_ERR_INVALID_PARAM);
    if (access("/sys/devices/system/node/node0", F_OK) == 0) /* the host lists its nodes */
        CHECK_STATUS(cucopy_iface_estimate(iface, H, 4096, D, 0, 8, 0, &a),
                     CUCOPY_ERR_INVALID_PARAM);
}

static void test_calibration(int devices)
{
    /* Device 0's primary context is active (the program's), none current. */
    tc_primary_retain(0);
    cdContext before = tc_current();
    long allocs = tc_fake.live_allocations ? tc_fake.live_allocations() : 0;

    tc_case_begin("calibration: measured, then kept");
    cucopy_estimate_attr_t a =
        estimate(CUCOPY_MEMORY_TYPE_HOST, CUCOPY_NUMA_ANY, CUCOPY_MEMORY_TYPE_CUDA, 0,
                 CUCOPY_ESTIMATE_SRC_PINNED | CUCOPY_ESTIMATE_CALIBRATE);
    CHECKF(a.source == CUCOPY_ESTIMATE_SOURCE_CALIBRATED, "source %d: %s", a.source,
           cucopy_last_error());
    CHECKF(a.path == CUCOPY_PATH_PCIE, "path %d", a.path);
    check_linear(&a, "calibrated h2d");
    CHECK(tc_current() == before);
    if (tc_fake.live_allocations)
        CHECKF(tc_fake.live_allocations() == allocs, "calibration left %ld allocation(s)",
               tc_fake.live_allocations() - allocs);
    long mallocs = tc_fake.calls ? tc_fake.calls("cuMemAlloc") : 0;
    cucopy_estimate_attr_t b =
        estimate(CUCOPY_MEMORY_TYPE_HOST, CUCOPY_NUMA_ANY, CUCOPY_MEMORY_TYPE_CUDA, 0,
                 CUCOPY_ESTIMATE_SRC_PINNED | CUCOPY_ESTIMATE_CALIBRATE);
    CHECKF(b.latency == a.latency && b.bandwidth == a.bandwidth, "the second call measured again");
    b = estimate(CUCOPY_MEMORY_TYPE_HOST, CUCOPY_NUMA_ANY, CUCOPY_MEMORY_TYPE_CUDA, 0,
                 CUCOPY_ESTIMATE_SRC_PINNED);
    CHECKF(b.source == CUCOPY_ESTIMATE_SOURCE_CALIBRATED && b.bandwidth == a.bandwidth,
           "a measured pair without the flag: source %d", b.source);
    if (tc_fake.calls)
        CHECKF(tc_fake.calls("cuMemAlloc") == mallocs, "kept calibration allocated again");
    b = estimate(CUCOPY_MEMORY_TYPE_HOST, CUCOPY_NUMA_ANY, CUCOPY_MEMORY_TYPE_CUDA, 0,
                 CUCOPY_ESTIMATE_CALIBRATE);
    CHECKF(b.source == CUCOPY_ESTIMATE_SOURCE_CALIBRATED && b.path == CUCOPY_PATH_PCIE_STAGED,
           "pageable host to device 0: source %d, path %d", b.source, b.path);
    check_linear(&b, "calibrated pageable h2d");
    cucopy_iface_stats_t s = {.field_mask = CUCOPY_IFACE_STATS_DIRECTIONS};
    CHECK_STATUS(cucopy_iface_stats(iface, &s), CUCOPY_OK);
    CHECKF(s.dir_operations[CUCOPY_DIR_H2D] == 0, "calibration copies counted on the iface");
    CHECK(cucopy_iface_progress(iface) == 0);
    tc_case_end();

    if (devices >= 2 && !tc_primary_active(1)) {
        tc_case_begin("calibration without a context on the device: the model, nothing activated");
        a = estimate(CUCOPY_MEMORY_TYPE_CUDA, 1, CUCOPY_MEMORY_TYPE_CUDA, 1,
                     CUCOPY_ESTIMATE_CALIBRATE);
        CHECKF(a.source == CUCOPY_ESTIMATE_SOURCE_MODEL, "source %d", a.source);
        CHECK(!tc_primary_active(1));
        tc_case_end();
    }
    tc_primary_release(0);
}

int main(void)
{
    int devices = tc_begin("test_estimate", 2);
    cucopy_context_h ctx = NULL;
    REQUIRE_OK(cucopy_context_create(NULL, &ctx));
    cucopy_iface_params_t p = {.field_mask = CUCOPY_IFACE_PARAM_THREAD_MODE,
                               .thread_mode = CUCOPY_THREAD_MODE_MULTI};
    REQUIRE_OK(cucopy_iface_open(ctx, &p, &iface));
    test_model(devices);
    test_bad_input(devices);
    test_calibration(devices);
    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);
    CHECK_STATUS(cucopy_context_destroy(ctx), CUCOPY_OK);
    return tc_finish();
}
