/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cucopy_device_count, cucopy_device_query and cucopy_device_peer_query
 * against the raw driver: every field of every device, every ordered device
 * pair, out-of-range ordinals, field_mask semantics (only selected fields
 * written; unknown bits rejected). The queries never create, activate or
 * make current a context: checked with no context anywhere, with a primary
 * context active, with another device's context current, and from a second
 * thread.
 */
#define _GNU_SOURCE
#include "calls.h"

#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cucopy_context_h ctx;
static int ndev;

#define ALL_DEVICE_FIELDS                                                                        \
    (CUCOPY_DEVICE_ATTR_NAME | CUCOPY_DEVICE_ATTR_UUID | CUCOPY_DEVICE_ATTR_PCI_BUS_ID |        \
     CUCOPY_DEVICE_ATTR_NUMA_NODE | CUCOPY_DEVICE_ATTR_MEMORY |                                  \
     CUCOPY_DEVICE_ATTR_COMPUTE_CAPABILITY | CUCOPY_DEVICE_ATTR_PEERS |                          \
     CUCOPY_DEVICE_ATTR_PRIMARY_ACTIVE)
#define ALL_PEER_FIELDS                                                                          \
    (CUCOPY_PEER_ATTR_CAN_ACCESS | CUCOPY_PEER_ATTR_ACCESS_SUPPORTED |                          \
     CUCOPY_PEER_ATTR_NATIVE_ATOMICS | CUCOPY_PEER_ATTR_PERFORMANCE_RANK)

static int attr_of(int dev, unsigned which)
{
    int v = 0;
    TD_CHECK(td.cuDeviceGetAttribute(&v, which, dev));
    return v;
}

static int is_lower_hex(char c)
{
    return isdigit((unsigned char)c) || (c >= 'a' && c <= 'f');
}

/* "dddd:bb:dd.f": 4, 2 and 2 lower-case hex digits, one hex function digit. */
static int bus_id_format_ok(const char *s)
{
    static const char pat[] = "xxxx:xx:xx.x";
    if (strlen(s) != sizeof(pat) - 1)
        return 0;
    for (size_t i = 0; pat[i]; i++) {
        if (pat[i] == 'x' ? !is_lower_hex(s[i]) : s[i] != pat[i])
            return 0;
    }
    return 1;
}

/* Every field of device d checked against the raw driver. */
static void check_device(int d, const char *when)
{
    cucopy_device_attr_t a;
    int active_before = tc_primary_active(d);
    memset(&a, 0xa5, sizeof(a));
    a.field_mask = ALL_DEVICE_FIELDS;
    tc_case_begin("device_query(%d) all fields, %s", d, when);
    if (CHECK_STATUS(TC_CALL(cucopy_device_query(ctx, d, &a)), CUCOPY_OK)) {
        char name[256] = "";
        TD_CHECK(td.cuDeviceGetName(name, sizeof(name), d));
        CHECKF(memchr(a.name, 0, sizeof(a.name)) != NULL && a.name[0] != 0, "empty name");
        CHECKF(strcmp(a.name, name) == 0, "name \"%.255s\", driver \"%s\"", a.name, name);

        unsigned char uuid[16];
        static const unsigned char zero[16];
        TD_CHECK(td.cuDeviceGetUuid((struct CUuuid_st *)uuid, d));
        CHECKF(memcmp(a.uuid, zero, 16) != 0, "UUID is all zero");
        CHECKF(memcmp(a.uuid, uuid, 16) == 0, "UUID differs from cuDeviceGetUuid");

        char bus[64] = "";
        TD_CHECK(td.cuDeviceGetPCIBusId(bus, sizeof(bus), d));
        for (char *p = bus; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        CHECKF(memchr(a.pci_bus_id, 0, sizeof(a.pci_bus_id)) != NULL &&
                   bus_id_format_ok(a.pci_bus_id),
               "PCI bus id \"%.31s\" is not dddd:bb:dd.f in lower case", a.pci_bus_id);
        CHECKF(strcmp(a.pci_bus_id, bus) == 0, "PCI bus id \"%.31s\", driver \"%s\"",
               a.pci_bus_id, bus);
        unsigned dom = 0, b = 0, dv = 0, fn = 0;
        if (sscanf(a.pci_bus_id, "%x:%x:%x.%x", &dom, &b, &dv, &fn) == 4) {
            CHECKF((int)b == attr_of(d, CD_DEVICE_ATTRIBUTE_PCI_BUS_ID),
                   "bus %x, attribute says %x", b, attr_of(d, CD_DEVICE_ATTRIBUTE_PCI_BUS_ID));
            CHECKF((int)dom == attr_of(d, CD_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
                   "domain %x, attribute says %x", dom,
                   attr_of(d, CD_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID));
            CHECKF((int)dv == attr_of(d, CD_DEVICE_ATTRIBUTE_PCI_DEVICE_ID),
                   "device %x, attribute says %x", dv,
                   attr_of(d, CD_DEVICE_ATTRIBUTE_PCI_DEVICE_ID));
        }

        CHECKF(a.numa_node >= -1, "numa_node %d", a.numa_node);
        char path[128];
        snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", bus);
        FILE *f = fopen(path, "r");
        int sys_node = -1;
        if (f != NULL) {
            if (fscanf(f, "%d", &sys_node) != 1 || sys_node < 0)
                sys_node = -1;
            fclose(f);
        }
        CHECKF(a.numa_node == sys_node, "numa_node %d, %s says %d", a.numa_node, path, sys_node);

        size_t total = 0;
        TD_CHECK(td.cuDeviceTotalMem(&total, d));
        CHECKF(a.total_memory > 0 && a.total_memory == total, "total_memory %llu, driver %zu",
               (unsigned long long)a.total_memory, total);

        int maj = attr_of(d, CD_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
        int min = attr_of(d, CD_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
        CHECKF(a.cc_major >= 1 && a.cc_minor >= 0, "cc %d.%d", a.cc_major, a.cc_minor);
        CHECKF(a.cc_major == maj && a.cc_minor == min, "cc %d.%d, driver %d.%d", a.cc_major,
               a.cc_minor, maj, min);
        if (td.is_fake)
            CHECKF(a.cc_major == 9 && a.cc_minor == 0, "fake: cc %d.%d, want 9.0", a.cc_major,
                   a.cc_minor);

        uint64_t want = 0;
        for (int p = 0; p < ndev && p < CUCOPY_MAX_DEVICES; p++) {
            int can = 0;
            if (p == d)
                continue;
            TD_CHECK(td.cuDeviceCanAccessPeer(&can, d, p));
            if (can)
                want |= 1ull << p;
        }
        CHECKF(a.peer_mask == want, "peer_mask 0x%llx, cuDeviceCanAccessPeer says 0x%llx",
               (unsigned long long)a.peer_mask, (unsigned long long)want);
        CHECKF(!(a.peer_mask >> d & 1), "peer_mask has the device's own bit");

        CHECKF(a.primary_active == active_before, "primary_active %d, driver says %d",
               a.primary_active, active_before);
    }
    CHECKF(tc_primary_active(d) == active_before, "the query changed the primary state");
    tc_case_end();
}

/* Only the selected field is written; the others keep their sentinel. */
static void check_field_mask(int d)
{
    static const struct {
        uint64_t bit;
        size_t off, len;
        const char *name;
    } f[] = {
        {CUCOPY_DEVICE_ATTR_NAME, offsetof(cucopy_device_attr_t, name), 256, "name"},
        {CUCOPY_DEVICE_ATTR_UUID, offsetof(cucopy_device_attr_t, uuid), 16, "uuid"},
        {CUCOPY_DEVICE_ATTR_PCI_BUS_ID, offsetof(cucopy_device_attr_t, pci_bus_id), 32,
         "pci_bus_id"},
        {CUCOPY_DEVICE_ATTR_NUMA_NODE, offsetof(cucopy_device_attr_t, numa_node), sizeof(int),
         "numa_node"},
        {CUCOPY_DEVICE_ATTR_MEMORY, offsetof(cucopy_device_attr_t, total_memory), 8,
         "total_memory"},
        {CUCOPY_DEVICE_ATTR_COMPUTE_CAPABILITY, offsetof(cucopy_device_attr_t, cc_major),
         2 * sizeof(int), "cc"},
        {CUCOPY_DEVICE_ATTR_PEERS, offsetof(cucopy_device_attr_t, peer_mask), 8, "peer_mask"},
        {CUCOPY_DEVICE_ATTR_PRIMARY_ACTIVE, offsetof(cucopy_device_attr_t, primary_active),
         sizeof(int), "primary_active"},
    };
    const size_t n = sizeof(f) / sizeof(f[0]);
    for (size_t i = 0; i < n; i++) {
        cucopy_device_attr_t a;
        memset(&a, 0xa5, sizeof(a));
        a.field_mask = f[i].bit;
        tc_case_begin("device_query(%d) field_mask = %s only", d, f[i].name);
        CHECK_STATUS(TC_CALL(cucopy_device_query(ctx, d, &a)), CUCOPY_OK);
        for (size_t j = 0; j < n; j++) {
            if (j == i)
                continue;
            const unsigned char *p = (const unsigned char *)&a + f[j].off;
            int untouched = 1;
            for (size_t k = 0; k < f[j].len; k++)
                untouched &= p[k] == 0xa5;
            CHECKF(untouched, "field %s written although only %s was asked for", f[j].name,
                   f[i].name);
        }
        tc_case_end();
    }
}

static void check_peers(const char *when)
{
    for (int d = 0; d < ndev; d++) {
        for (int p = 0; p < ndev; p++) {
            cucopy_peer_attr_t a;
            memset(&a, 0xa5, sizeof(a));
            a.field_mask = ALL_PEER_FIELDS;
            if (p == d) {
                CHECK_STATUS(TC_CALL(cucopy_device_peer_query(ctx, d, p, &a)),
                             CUCOPY_ERR_INVALID_PARAM);
                continue;
            }
            tc_case_begin("device_peer_query(%d, %d), %s", d, p, when);
            if (CHECK_STATUS(TC_CALL(cucopy_device_peer_query(ctx, d, p, &a)), CUCOPY_OK)) {
                int can = 0, sup = 0, atom = 0, rank = 0;
                TD_CHECK(td.cuDeviceCanAccessPeer(&can, d, p));
                TD_CHECK(td.cuDeviceGetP2PAttribute(&sup, CD_P2P_ATTRIBUTE_ACCESS_SUPPORTED, d, p));
                TD_CHECK(td.cuDeviceGetP2PAttribute(&atom, CD_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED,
                                                    d, p));
                TD_CHECK(td.cuDeviceGetP2PAttribute(&rank, CD_P2P_ATTRIBUTE_PERFORMANCE_RANK, d, p));
                CHECKF(a.can_access == !!can, "can_access %d, driver %d", a.can_access, can);
                CHECKF(a.access_supported == !!sup, "access_supported %d, driver %d",
                       a.access_supported, sup);
                CHECKF(a.native_atomics == !!atom, "native_atomics %d, driver %d",
                       a.native_atomics, atom);
                CHECKF(a.performance_rank == rank, "performance_rank %d, driver %d",
                       a.performance_rank, rank);
            }
            tc_case_end();
            /* one field at a time: the others stay untouched */
            memset(&a, 0xa5, sizeof(a));
            a.field_mask = CUCOPY_PEER_ATTR_CAN_ACCESS;
            tc_case_begin("device_peer_query(%d, %d) can_access only", d, p);
            CHECK_STATUS(TC_CALL(cucopy_device_peer_query(ctx, d, p, &a)), CUCOPY_OK);
            CHECK(a.can_access == 0 || a.can_access == 1);
            CHECKF(a.access_supported == (int)0xa5a5a5a5 && a.native_atomics == (int)0xa5a5a5a5 &&
                       a.performance_rank == (int)0xa5a5a5a5,
                   "fields outside field_mask written");
            tc_case_end();
        }
    }
}

static void check_all(const char *when)
{
    int n = -1;
    CHECK_STATUS(TC_CALL(cucopy_device_count(ctx, &n)), CUCOPY_OK);
    CHECKF(n == ndev, "device_count %d, driver %d (%s)", n, ndev, when);
    for (int d = 0; d < ndev; d++)
        check_device(d, when);
    check_peers(when);
}

/* UUIDs and PCI bus ids differ between devices. */
static void check_distinct(void)
{
    for (int d = 0; d < ndev; d++) {
        for (int e = d + 1; e < ndev; e++) {
            cucopy_device_attr_t a, b;
            memset(&a, 0, sizeof(a));
            memset(&b, 0, sizeof(b));
            a.field_mask = b.field_mask = CUCOPY_DEVICE_ATTR_UUID | CUCOPY_DEVICE_ATTR_PCI_BUS_ID;
            tc_case_begin("devices %d and %d differ in UUID and PCI bus id", d, e);
            CHECK_STATUS(TC_CALL(cucopy_device_query(ctx, d, &a)), CUCOPY_OK);
            CHECK_STATUS(TC_CALL(cucopy_device_query(ctx, e, &b)), CUCOPY_OK);
            CHECKF(memcmp(a.uuid, b.uuid, 16) != 0, "same UUID");
            CHECKF(strcmp(a.pci_bus_id, b.pci_bus_id) != 0, "same PCI bus id %s", a.pci_bus_id);
            tc_case_end();
        }
    }
}

static void *thread_main(void *arg)
{
    (void)arg;
    CHECK(tc_current() == NULL);
    check_all("from a new thread");
    return NULL;
}

static void bad_input(void)
{
    cucopy_device_attr_t a;
    cucopy_peer_attr_t p;
    memset(&a, 0, sizeof(a));
    memset(&p, 0, sizeof(p));
    a.field_mask = ALL_DEVICE_FIELDS;
    p.field_mask = ALL_PEER_FIELDS;
    CHECK_STATUS(TC_CALL(cucopy_device_count(ctx, NULL)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_device_count(NULL, &(int){0})), CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(TC_CALL(cucopy_device_query(ctx, -1, &a)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_device_query(ctx, ndev, &a)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_device_query(ctx, 1 << 20, &a)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_device_query(ctx, 0, NULL)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_device_query(NULL, 0, &a)), CUCOPY_ERR_INVALID_HANDLE);
    a.field_mask = ALL_DEVICE_FIELDS | (1u << 8);
    CHECK_STATUS(TC_CALL(cucopy_device_query(ctx, 0, &a)), CUCOPY_ERR_INVALID_PARAM);
    a.field_mask = 1ull << 63;
    CHECK_STATUS(TC_CALL(cucopy_device_query(ctx, 0, &a)), CUCOPY_ERR_INVALID_PARAM);
    a.field_mask = 0;
    CHECK_STATUS(TC_CALL(cucopy_device_query(ctx, 0, &a)), CUCOPY_OK);

    CHECK_STATUS(TC_CALL(cucopy_device_peer_query(ctx, -1, 0, &p)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_device_peer_query(ctx, 0, -1, &p)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_device_peer_query(ctx, 0, ndev, &p)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_device_peer_query(ctx, ndev, 0, &p)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_device_peer_query(ctx, 0, 0, &p)), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(TC_CALL(cucopy_device_peer_query(NULL, 0, 1, &p)), CUCOPY_ERR_INVALID_HANDLE);
    if (ndev > 1) {
        CHECK_STATUS(TC_CALL(cucopy_device_peer_query(ctx, 0, 1, NULL)), CUCOPY_ERR_INVALID_PARAM);
        p.field_mask = ALL_PEER_FIELDS | (1u << 4);
        CHECK_STATUS(TC_CALL(cucopy_device_peer_query(ctx, 0, 1, &p)), CUCOPY_ERR_INVALID_PARAM);
    }
}

int main(void)
{
    ndev = tc_begin("test_device_query", CUCOPY_MAX_DEVICES);
    REQUIRE_OK(cucopy_context_create(NULL, &ctx));
    REQUIRE(tc_current() == NULL);

    /* 1. Nothing active (as far as this process is concerned). */
    check_all("no context current");
    for (int d = 0; d < ndev; d++)
        check_field_mask(d);
    bad_input();
    check_distinct();
    if (ndev < 2)
        printf("test_device_query: one device: no device pairs to query\n");

    /* 2. Device 0's primary context active and current. */
    cdContext p0 = tc_primary(0);
    CHECK(tc_primary_active(0));
    check_all("primary 0 active, none current");
    TD_CHECK(td.cuCtxSetCurrent(p0));
    check_all("primary 0 current");
    TD_CHECK(td.cuCtxSetCurrent(NULL));

    /* 3. A created context of the last device current; its primary stays
     *    as it was. */
    cdContext user = NULL;
    TD_CHECK(td.cuCtxCreate(&user, 0, ndev - 1));
    check_all("created context of the last device current");
    TD_CHECK(td.cuCtxPopCurrent(NULL));
    TD_CHECK(td.cuCtxDestroy(user));

    /* 4. Another thread, no context current there. */
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, thread_main, NULL) == 0);
    pthread_join(t, NULL);

    CHECK_STATUS(cucopy_context_destroy(ctx), CUCOPY_OK);
    if (tc_fake.violations != NULL)
        CHECKF(tc_fake.violations() == 0, "%ld fake-driver violation(s)", tc_fake.violations());
    return tc_finish();
}
