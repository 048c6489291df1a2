/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fault injection (fake driver only; exits 77 on a real driver).
 *
 * Every driver entry point the library calls fails once at each of its call
 * sites, and the library must survive it: a negative status to the caller
 * (or a tolerated fault with the right data), cucopy_last_error() naming the
 * call and the CUDA error when the status is CUCOPY_ERR_CUDA, no leaked
 * stream, event, allocation, registration or primary-context retain, no
 * driver misuse, the caller's current context unchanged, and the library
 * fully usable afterwards (the rest of the workload runs with verified data,
 * including work of a second iface opened before the fault).
 *
 * How the call sites are found (nothing in this file names them):
 *  1. W is a fixed workload of steps that exercises every library path that
 *     talks to the driver, on two devices. Each cucopy call in it is made
 *     through LIB(), which reads fakecuda_calls() of every entry point of
 *     cudadrv/entry_points.h (iterated with the CD_ENTRY X-macro; plus
 *     "cuGetProcAddress", the loader's resolver) before and after the call.
 *     The test's own raw-driver calls (buffers, data set-up and checks) are
 *     outside LIB() and never counted.
 *  2. Discovery: W runs once cleanly in this process; call occurrence k of
 *     entry point E is located as (LIB call c, j-th call of E inside it).
 *  3. For every E and k, this binary re-executes itself with
 *     --inject c step E j: the child runs W and arms fakecuda_fail(E, j,
 *     CUDA_ERROR_INVALID_VALUE) just before LIB call c (and cancels it right
 *     after), so exactly that call site fails. A step that failed is retried
 *     once and must then succeed; every other step must succeed; the end
 *     checks must pass.
 * A new entry point or a new call site shows up in discovery and is covered
 * without editing this test.
 *
 * To keep call counts deterministic, the test synchronizes the devices with
 * the raw driver before it progresses (so one progress call completes
 * everything), and slows the fake's streams only where work must be in
 * flight (flush, event fd).
 */
#define _GNU_SOURCE
#include "calls.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEN 4096
#define SLOW_US 20000
#define FAULT_CODE 1 /* CUDA_ERROR_INVALID_VALUE */
#define FAULT_NAME "CUDA_ERROR_INVALID_VALUE"
#define WAIT_S 3.0

/* Step results besides cucopy statuses. */
#define TF_BAD_DATA (-1001)
#define TF_TIMEOUT (-1002)
#define TF_BAD_RESULT (-1003)

/* ------------------------------------------------------------------ */
/* Entry points: THE list, plus the loader's resolver. */

static const char *const entry_names[] = {
#define CD_ENTRY(name, symbol, version, use, params) #name,
#include "entry_points.h"
#undef CD_ENTRY
    "cuGetProcAddress",
};
#define NE ((int)(sizeof(entry_names) / sizeof(entry_names[0])))

/*
 * Calls that undo something. An injected failure makes the fake do nothing,
 * so a failing undo call leaves exactly its own object behind; that one
 * object (and nothing else) is accepted as the fault's own effect.
 */
enum undo_kind { U_NONE, U_CURRENT, U_STREAM, U_EVENT, U_ALLOC, U_REG, U_RETAIN };
static const struct {
    const char *entry;
    enum undo_kind kind;
} undo_calls[] = {
    {"cuCtxPopCurrent", U_CURRENT},   {"cuStreamDestroy", U_STREAM},
    {"cuEventDestroy", U_EVENT},      {"cuMemFree", U_ALLOC},
    {"cuMemFreeHost", U_ALLOC},       {"cuMemHostUnregister", U_REG},
    {"cuDevicePrimaryCtxRelease", U_RETAIN},
    /* Staging's bounce buffers are unpinned in the context that pinned
     * them: failing to enter it leaves the registration, as a failed
     * cuMemHostUnregister does. */
    {"cuCtxGetCurrent", U_REG},       {"cuCtxPushCurrent", U_REG},
};

/* ------------------------------------------------------------------ */
/* State of the workload. */

static cucopy_context_h cctx;
static cucopy_iface_h iface, biface;
static cucopy_ep_h ep, bep;
static cdContext prim[2], user;
static uint64_t user_key;
static struct tc_buf hp, pin, d0, d1, ubuf, bh, bd1, hp2, pin2;
static unsigned char *mreg; /* malloc memory for mem_reg */
static struct tc_buf mreg_b;
static void *cdev, *cman, *chost; /* cucopy_mem_alloc */
static struct tc_buf cdev_b, cman_b, chost_b;
static cucopy_memh_h memh;
static long ops_verified;
static unsigned seed;

/* ------------------------------------------------------------------ */
/* LIB(): the bracket around every cucopy call. */

#define MAX_LIB 2048
static int mode_discover;
static int cur_step;
static int lib_seq;
static int lib_step[MAX_LIB];
static const char *lib_what[MAX_LIB];
static int lib_delta[MAX_LIB][NE];
static long snap[NE];
static cdContext lib_ctx_before;
static int lib_ctx_changes;

/* Injection (child). */
static int inj_on, inj_c = -1, inj_step, inj_e, inj_j;
static long inj_before;
static int inj_consumed, inj_status, inj_hit, inj_step_failed;
static char inj_msg[1024];

/* How many objects of this kind the injected fault itself may leave. */
static int allowed(enum undo_kind kind)
{
    if (!inj_on || !inj_consumed)
        return 0;
    for (size_t i = 0; i < sizeof(undo_calls) / sizeof(undo_calls[0]); i++)
        if (undo_calls[i].kind == kind && strcmp(undo_calls[i].entry, entry_names[inj_e]) == 0)
            return 1;
    return 0;
}

static void take_snap(long *out)
{
    for (int e = 0; e < NE; e++)
        out[e] = tc_fake.calls(entry_names[e]);
}

static int lib_begin(const char *what)
{
    int c = lib_seq++;
    if (c < MAX_LIB) {
        lib_step[c] = cur_step;
        lib_what[c] = what;
    }
    lib_ctx_before = tc_current();
    if (mode_discover)
        take_snap(snap);
    if (inj_on && c == inj_c) {
        inj_hit = 1;
        if (cur_step != inj_step)
            printf("test_faults: call sequence differs: LIB call %d is in step %d, "
                   "discovery had step %d\n",
                   c, cur_step, inj_step);
        inj_before = tc_fake.calls(entry_names[inj_e]);
        tc_fake.fail(entry_names[inj_e], inj_j, FAULT_CODE);
    }
    return 0;
}

static int lib_end(int status)
{
    int c = lib_seq - 1;
    if (inj_on && c == inj_c) {
        long n = tc_fake.calls(entry_names[inj_e]) - inj_before;
        inj_consumed = n >= inj_j;
        if (!inj_consumed)
            tc_fake.fail(entry_names[inj_e], 0, 0);
        inj_status = status;
        snprintf(inj_msg, sizeof(inj_msg), "%s", status < 0 ? cucopy_last_error() : "");
    }
    if (mode_discover && c < MAX_LIB) {
        for (int e = 0; e < NE; e++)
            lib_delta[c][e] = (int)(tc_fake.calls(entry_names[e]) - snap[e]);
    }
    cdContext now = tc_current();
    if (now != lib_ctx_before) {
        if (!(c == inj_c && allowed(U_CURRENT)))
            lib_ctx_changes++;
        printf("test_faults: LIB call %d (%s) left context %p current (was %p)\n", c,
               c < MAX_LIB ? lib_what[c] : "?", (void *)now, (void *)lib_ctx_before);
        /* Put the stack back so the rest can run. */
        while (tc_current() != lib_ctx_before && tc_current() != NULL) {
            cdContext p;
            if (td.cuCtxPopCurrent(&p) != CD_SUCCESS)
                break;
        }
    }
    return status;
}

#define LIB(expr) (lib_begin(#expr), lib_end((int)(expr)))

/* Why the current step failed. */
static char why_buf[1024];
static void why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void why(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why_buf, sizeof(why_buf), fmt, ap);
    va_end(ap);
}

#define TRY(expr)                                                                          \
    do {                                                                                   \
        int s_ = LIB(expr);                                                                \
        if (s_ < 0) {                                                                      \
            why("%s returned %s: %s", #expr, tc_status_name(s_), cucopy_last_error());     \
            return s_;                                                                     \
        }                                                                                  \
    } while (0)

/* ------------------------------------------------------------------ */
/* Helpers. */

static struct tc_comp comps[1024];
static int ncomps;

static struct tc_comp *new_comp(int count)
{
    REQUIRE(ncomps < (int)(sizeof(comps) / sizeof(comps[0])));
    struct tc_comp *c = &comps[ncomps++];
    tc_comp_init(c, count);
    return c;
}

static void slow(int on)
{
    if (tc_fake.set_delay_us != NULL)
        tc_fake.set_delay_us(on ? SLOW_US : 0);
}

/* Raw synchronize of every context the workload copies in, so one progress
 * call completes everything (deterministic call counts). */
static void sync_all(void)
{
    cdContext cs[3] = {prim[0], prim[1], user};
    for (int i = 0; i < 3; i++) {
        if (cs[i] == NULL)
            continue;
        tc_push(cs[i]);
        TD_CHECK(td.cuCtxSynchronize());
        tc_pop(cs[i]);
    }
}

/* Progress ifc until every completion fired; their statuses must be OK. */
static int wait_comps(cucopy_iface_h ifc, struct tc_comp **cs, int n)
{
    sync_all();
    double deadline = tc_now() + WAIT_S;
    for (;;) {
        int all = 1;
        for (int i = 0; i < n; i++)
            if (cs[i] != NULL && cs[i]->fired == 0)
                all = 0;
        if (all)
            break;
        if (tc_now() > deadline) {
            why("completion never fired (%.0f s)", WAIT_S);
            return TF_TIMEOUT;
        }
        int r = LIB(cucopy_iface_progress(ifc));
        if (r < 0) {
            why("cucopy_iface_progress returned %s: %s", tc_status_name(r), cucopy_last_error());
            return r;
        }
    }
    for (int i = 0; i < n; i++) {
        if (cs[i] == NULL)
            continue;
        if (cs[i]->fired != 1) {
            why("completion fired %d times", cs[i]->fired);
            return TF_BAD_RESULT;
        }
        if (cs[i]->comp.status != CUCOPY_OK) {
            why("completion status %s (last error: %s)", tc_status_name(cs[i]->comp.status),
                cucopy_last_error());
            return cs[i]->comp.status;
        }
    }
    return 0;
}

/* Zcopy that returned s with completion c: wait for it (if in progress). */
static int zwait(cucopy_iface_h ifc, int s, struct tc_comp *c, const char *what)
{
    if (s < 0) {
        why("%s returned %s: %s", what, tc_status_name(s), cucopy_last_error());
        return s;
    }
    if (s == CUCOPY_OK)
        return 0;
    return wait_comps(ifc, &c, 1);
}

static int verify(const struct tc_buf *dst, size_t off, const unsigned char *data, size_t len,
                  const char *what)
{
    unsigned char back[LEN];
    tc_buf_read(dst, off, back, len);
    if (memcmp(back, data, len) != 0) {
        why("%s: data differs", what);
        return TF_BAD_DATA;
    }
    ops_verified++;
    return 0;
}

static const unsigned char *fresh_data(void)
{
    return tc_pattern(LEN) + (seed++ % 256);
}

static void *ptr(const struct tc_buf *b)
{
    return (void *)(uintptr_t)b->dptr;
}

/* ------------------------------------------------------------------ */
/* Steps. */

struct copy_case {
    const char *name;
    struct tc_buf *src, *dst;
    int get, zcopy;
    cucopy_iface_h *ifc;
    cucopy_ep_h *e;
};

static int copy_step(const void *arg)
{
    const struct copy_case *cc = arg;
    const unsigned char *data = fresh_data();
    tc_buf_write(cc->src, 0, data, LEN);
    tc_buf_set(cc->dst, 0, 0x5a, LEN);
    int s;
    if (!cc->zcopy) {
        if (cc->get)
            TRY(cucopy_ep_get_short(*cc->e, ptr(cc->dst), LEN, cc->src->dptr));
        else
            TRY(cucopy_ep_put_short(*cc->e, ptr(cc->src), LEN, cc->dst->dptr));
    } else {
        struct tc_comp *c = new_comp(1);
        cucopy_iov_t iov = {cc->get ? ptr(cc->dst) : ptr(cc->src), LEN};
        if (cc->get)
            s = LIB(cucopy_ep_get_zcopy(*cc->e, &iov, 1, cc->src->dptr, &c->comp));
        else
            s = LIB(cucopy_ep_put_zcopy(*cc->e, &iov, 1, cc->dst->dptr, &c->comp));
        int r = zwait(*cc->ifc, s, c, cc->get ? "get_zcopy" : "put_zcopy");
        if (r != 0)
            return r;
    }
    return verify(cc->dst, 0, data, LEN, cc->name);
}

static int st_context_create(const void *a)
{
    (void)a;
    TRY(cucopy_context_create(NULL, &cctx));
    return 0;
}

static int st_device_count(const void *a)
{
    (void)a;
    int n = -1;
    TRY(cucopy_device_count(cctx, &n));
    if (n != 2) {
        why("device_count %d, expected 2", n);
        return TF_BAD_RESULT;
    }
    ops_verified++;
    return 0;
}

static int st_device_query(const void *a)
{
    int dev = (int)(intptr_t)a;
    cucopy_device_attr_t at;
    memset(&at, 0, sizeof(at));
    at.field_mask = CUCOPY_DEVICE_ATTR_NAME | CUCOPY_DEVICE_ATTR_UUID |
                    CUCOPY_DEVICE_ATTR_PCI_BUS_ID | CUCOPY_DEVICE_ATTR_NUMA_NODE |
                    CUCOPY_DEVICE_ATTR_MEMORY | CUCOPY_DEVICE_ATTR_COMPUTE_CAPABILITY |
                    CUCOPY_DEVICE_ATTR_PEERS | CUCOPY_DEVICE_ATTR_PRIMARY_ACTIVE;
    TRY(cucopy_device_query(cctx, dev, &at));
    if (at.name[0] == 0 || at.pci_bus_id[0] == 0 || at.total_memory == 0 || at.cc_major <= 0 ||
        !(at.peer_mask & (1ull << (1 - dev))) || at.primary_active != 1) {
        why("device_query(%d): name \"%s\" bus \"%s\" mem %llu cc %d peers %llx active %d", dev,
            at.name, at.pci_bus_id, (unsigned long long)at.total_memory, at.cc_major,
            (unsigned long long)at.peer_mask, at.primary_active);
        return TF_BAD_RESULT;
    }
    ops_verified++;
    return 0;
}

static int st_peer_query(const void *a)
{
    int dev = (int)(intptr_t)a;
    cucopy_peer_attr_t at;
    memset(&at, 0, sizeof(at));
    at.field_mask = CUCOPY_PEER_ATTR_CAN_ACCESS | CUCOPY_PEER_ATTR_ACCESS_SUPPORTED |
                    CUCOPY_PEER_ATTR_NATIVE_ATOMICS | CUCOPY_PEER_ATTR_PERFORMANCE_RANK;
    TRY(cucopy_device_peer_query(cctx, dev, 1 - dev, &at));
    if (at.can_access != 1 || at.access_supported != 1) {
        why("peer_query(%d,%d): can_access %d supported %d", dev, 1 - dev, at.can_access,
            at.access_supported);
        return TF_BAD_RESULT;
    }
    ops_verified++;
    return 0;
}

static int st_iface_open(const void *a)
{
    (void)a;
    TRY(cucopy_iface_open(cctx, NULL, &iface));
    cucopy_iface_attr_t at;
    memset(&at, 0, sizeof(at));
    at.field_mask = CUCOPY_IFACE_ATTR_CAP_FLAGS | CUCOPY_IFACE_ATTR_DEVICE_COUNT;
    TRY(cucopy_iface_query(iface, &at));
    if (at.device_count != 2) {
        why("iface_query device_count %d", at.device_count);
        return TF_BAD_RESULT;
    }
    /* The key release_context takes: the id where the library keys by id
     * (a fault in the loader may have hidden cuCtxGetId from it). */
    user_key = (at.cap_flags & CUCOPY_IFACE_CAP_CONTEXT_ID) && td.cuCtxGetId != NULL
                   ? tc_ctx_id(user)
                   : (uint64_t)(uintptr_t)user;
    return 0;
}

static int st_ep_create(const void *a)
{
    (void)a;
    TRY(cucopy_ep_create(iface, &ep));
    return 0;
}

static int st_bystander_open(const void *a)
{
    (void)a;
    TRY(cucopy_iface_open(cctx, NULL, &biface));
    int s = LIB(cucopy_ep_create(biface, &bep));
    if (s < 0) {
        why("bystander ep_create returned %s: %s", tc_status_name(s), cucopy_last_error());
        (void)LIB(cucopy_iface_close(biface));
        biface = NULL;
        return s;
    }
    return 0;
}

static int st_ep_destroy(const void *a)
{
    (void)a;
    TRY(cucopy_ep_destroy(ep));
    return 0;
}

static int st_iface_close(const void *a)
{
    (void)a;
    TRY(cucopy_iface_close(iface));
    return 0;
}

static int st_bystander_close(const void *a)
{
    (void)a;
    TRY(cucopy_iface_close(biface));
    return 0;
}

static int st_context_destroy(const void *a)
{
    (void)a;
    TRY(cucopy_context_destroy(cctx));
    return 0;
}

struct alloc_case {
    cucopy_memory_type_t type;
    void **addr;
    struct tc_buf *view;
};

static int st_mem_alloc(const void *a)
{
    const struct alloc_case *ac = a;
    cucopy_mem_alloc_params_t p;
    memset(&p, 0, sizeof(p));
    p.field_mask = CUCOPY_MEM_ALLOC_PARAM_LENGTH | CUCOPY_MEM_ALLOC_PARAM_MEM_TYPE |
                   CUCOPY_MEM_ALLOC_PARAM_DEVICE;
    p.length = LEN;
    p.mem_type = ac->type;
    p.device = 0;
    TRY(cucopy_mem_alloc(cctx, &p, ac->addr));
    uint64_t addr = (uint64_t)(uintptr_t)*ac->addr;
    enum tc_mem_kind k = ac->type == CUCOPY_MEMORY_TYPE_CUDA      ? TC_MEM_DEV0
                         : ac->type == CUCOPY_MEMORY_TYPE_CUDA_MANAGED ? TC_MEM_MANAGED
                                                                    : TC_MEM_PINNED;
    *ac->view = tc_buf_view(k, prim[0], addr, LEN, ac->type == CUCOPY_MEMORY_TYPE_HOST);
    return 0;
}

static int st_mem_free(const void *a)
{
    const struct alloc_case *ac = a;
    TRY(cucopy_mem_free(cctx, *ac->addr));
    return 0;
}

struct query_case {
    struct tc_buf *b;
    cucopy_memory_type_t type;
    int device;
    uint64_t flags; /* flags that must be set */
};

static int st_mem_query(const void *a)
{
    const struct query_case *qc = a;
    cucopy_mem_attr_t at;
    memset(&at, 0, sizeof(at));
    at.field_mask = CUCOPY_MEM_ATTR_MEM_TYPE | CUCOPY_MEM_ATTR_PINNED | CUCOPY_MEM_ATTR_DEVICE |
                    CUCOPY_MEM_ATTR_CONTEXT_ID | CUCOPY_MEM_ATTR_ALLOCATION |
                    CUCOPY_MEM_ATTR_FLAGS | CUCOPY_MEM_ATTR_ACCESS;
    TRY(cucopy_mem_query(cctx, ptr(qc->b), LEN, &at));
    if (at.mem_type != qc->type || (qc->device >= 0 && at.device != qc->device) ||
        (at.flags & qc->flags) != qc->flags) {
        why("mem_query(%s): type %d device %d flags %llx; expected type %d device %d flags %llx",
            tc_mem_kind_name(qc->b->kind), at.mem_type, at.device, (unsigned long long)at.flags,
            qc->type, qc->device, (unsigned long long)qc->flags);
        return TF_BAD_RESULT;
    }
    ops_verified++;
    return 0;
}

static int st_mem_reg(const void *a)
{
    (void)a;
    TRY(cucopy_mem_reg(cctx, mreg, LEN, 0, &memh));
    return 0;
}

static int st_mem_dereg(const void *a)
{
    (void)a;
    TRY(cucopy_mem_dereg(cctx, memh));
    return 0;
}

/* One zcopy from two devices' memory (two events on two contexts) into
 * pinned memory. */
static int st_multi_iov(const void *a)
{
    (void)a;
    const unsigned char *data = fresh_data();
    tc_buf_write(&d0, 0, data, LEN / 2);
    tc_buf_write(&d1, 0, data + LEN / 2, LEN / 2);
    tc_buf_set(&pin, 0, 0x5a, LEN);
    cucopy_iov_t iov[2] = {{ptr(&d0), LEN / 2}, {ptr(&d1), LEN / 2}};
    struct tc_comp *c = new_comp(1);
    int s = LIB(cucopy_ep_put_zcopy(ep, iov, 2, pin.dptr, &c->comp));
    int r = zwait(iface, s, c, "put_zcopy (2 devices)");
    if (r != 0)
        return r;
    return verify(&pin, 0, data, LEN, "2-device iov");
}

/* Flush with work in flight on both devices. */
static int st_flush(const void *a)
{
    (void)a;
    const unsigned char *da = fresh_data(), *db = fresh_data();
    tc_buf_write(&hp2, 0, da, LEN);
    tc_buf_set(&d0, 0, 0x5a, LEN);
    tc_buf_write(&d1, 0, db, LEN);
    tc_buf_set(&pin2, 0, 0x5a, LEN);
    struct tc_comp *c1 = new_comp(1), *c2 = new_comp(1), *fe = new_comp(1), *fi = new_comp(1);
    cucopy_iov_t i1 = {ptr(&hp2), LEN}, i2 = {ptr(&pin2), LEN};
    slow(1);
    int s1 = LIB(cucopy_ep_put_zcopy(ep, &i1, 1, d0.dptr, &c1->comp));
    if (s1 < 0) {
        slow(0);
        why("put_zcopy returned %s: %s", tc_status_name(s1), cucopy_last_error());
        return s1;
    }
    int s2 = LIB(cucopy_ep_get_zcopy(ep, &i2, 1, d1.dptr, &c2->comp));
    if (s2 < 0) {
        slow(0);
        why("get_zcopy returned %s: %s", tc_status_name(s2), cucopy_last_error());
        struct tc_comp *w[] = {s1 == CUCOPY_INPROGRESS ? c1 : NULL};
        (void)wait_comps(iface, w, 1);
        return s2;
    }
    int fs = LIB(cucopy_ep_flush(ep, 0, &fe->comp));
    int is = fs < 0 ? 0 : LIB(cucopy_iface_flush(iface, 0, &fi->comp));
    slow(0);
    struct tc_comp *w[4] = {s1 == CUCOPY_INPROGRESS ? c1 : NULL, s2 == CUCOPY_INPROGRESS ? c2 : NULL,
                            fs == CUCOPY_INPROGRESS ? fe : NULL,
                            is == CUCOPY_INPROGRESS ? fi : NULL};
    int r = wait_comps(iface, w, 4);
    if (fs < 0 || is < 0) {
        int s = fs < 0 ? fs : is;
        why("%s returned %s: %s", fs < 0 ? "ep_flush" : "iface_flush", tc_status_name(s),
            cucopy_last_error());
        return s;
    }
    if (r != 0)
        return r;
    if ((r = verify(&d0, 0, da, LEN, "flush: H2D dev0")) != 0)
        return r;
    return verify(&pin2, 0, db, LEN, "flush: D2H dev1");
}

/* The event-fd protocol with work in flight on device 1. */
static int st_event_fd(const void *a)
{
    (void)a;
    int fd = -1;
    TRY(cucopy_iface_event_fd(iface, &fd));
    const unsigned char *data = fresh_data();
    tc_buf_write(&d1, 0, data, LEN);
    tc_buf_set(&pin2, 0, 0x5a, LEN);
    struct tc_comp *c = new_comp(1);
    cucopy_iov_t iov = {ptr(&pin2), LEN};
    slow(1);
    int s = LIB(cucopy_ep_get_zcopy(ep, &iov, 1, d1.dptr, &c->comp));
    if (s < 0) {
        slow(0);
        why("get_zcopy returned %s: %s", tc_status_name(s), cucopy_last_error());
        return s;
    }
    int armed = 0, r = 0;
    for (int tries = 0; tries < 10 && c->fired == 0; tries++) {
        int as = LIB(cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP));
        if (as == CUCOPY_OK) {
            armed = 1;
            break;
        }
        if (as != CUCOPY_ERR_BUSY) {
            slow(0);
            why("event_arm returned %s: %s", tc_status_name(as), cucopy_last_error());
            struct tc_comp *w[] = {s == CUCOPY_INPROGRESS ? c : NULL};
            (void)wait_comps(iface, w, 1);
            return as;
        }
        r = LIB(cucopy_iface_progress(iface));
        if (r < 0) {
            slow(0);
            why("progress returned %s: %s", tc_status_name(r), cucopy_last_error());
            return r;
        }
    }
    if (armed && s == CUCOPY_INPROGRESS && c->fired == 0) {
        struct pollfd pfd = {fd, POLLIN, 0};
        double deadline = tc_now() + WAIT_S;
        int pr;
        do { /* the Go runtime's signals interrupt poll() */
            int ms = (int)((deadline - tc_now()) * 1000);
            pr = poll(&pfd, 1, ms > 0 ? ms : 0);
        } while (pr < 0 && errno == EINTR && tc_now() < deadline);
        if (pr != 1) {
            slow(0);
            why("event fd not readable after arm (poll %d)", pr);
            struct tc_comp *w[] = {c};
            (void)wait_comps(iface, w, 1);
            return TF_TIMEOUT;
        }
    }
    slow(0);
    r = zwait(iface, s, c, "get_zcopy");
    if (r != 0)
        return r;
    return verify(&pin2, 0, data, LEN, "event fd: D2H dev1");
}

/* A zcopy into memory of a user context (cuCtxCreate). */
static int st_user_copy(const void *a)
{
    (void)a;
    const unsigned char *data = fresh_data();
    tc_buf_write(&hp2, 0, data, LEN);
    tc_buf_set(&ubuf, 0, 0x5a, LEN);
    struct tc_comp *c = new_comp(1);
    cucopy_iov_t iov = {ptr(&hp2), LEN};
    int s = LIB(cucopy_ep_put_zcopy(ep, &iov, 1, ubuf.dptr, &c->comp));
    int r = zwait(iface, s, c, "put_zcopy (user context)");
    if (r != 0)
        return r;
    return verify(&ubuf, 0, data, LEN, "H2D user context");
}

static int st_release_context(const void *a)
{
    (void)a;
    TRY(cucopy_iface_release_context(iface, user_key));
    int ns = tc_fake.live_streams(user);
    int nev = tc_fake.live_events(user);
    if (ns > allowed(U_STREAM) || nev > allowed(U_EVENT)) {
        why("release_context left %d stream(s), %d event(s) in the user context", ns, nev);
        return TF_BAD_RESULT;
    }
    /* The program destroys its context now. */
    tc_buf_free(&ubuf);
    TD_CHECK(td.cuCtxDestroy(user));
    user = NULL;
    ops_verified++;
    return 0;
}

/* ------------------------------------------------------------------ */
/* The workload. */

struct step {
    char name[80];
    int (*fn)(const void *arg);
    const void *arg;
    int release; /* a retry may find it already released */
};

#define MAX_STEPS 128
static struct step steps[MAX_STEPS];
static int nsteps;
static struct copy_case copies[64];
static int ncopies;

static void add_step(const char *name, int (*fn)(const void *), const void *arg, int release)
{
    REQUIRE(nsteps < MAX_STEPS);
    struct step *s = &steps[nsteps++];
    snprintf(s->name, sizeof(s->name), "%s", name);
    s->fn = fn;
    s->arg = arg;
    s->release = release;
}

static void add_copies(const char *what, struct tc_buf *src, struct tc_buf *dst,
                       cucopy_iface_h *ifc, cucopy_ep_h *e)
{
    for (int zcopy = 0; zcopy < 2; zcopy++) {
        for (int get = 0; get < 2; get++) {
            REQUIRE(ncopies < 64);
            struct copy_case *cc = &copies[ncopies++];
            cc->name = what;
            cc->src = src;
            cc->dst = dst;
            cc->get = get;
            cc->zcopy = zcopy;
            cc->ifc = ifc;
            cc->e = e;
            char name[80];
            snprintf(name, sizeof(name), "%s %s %s", what, get ? "get" : "put",
                     zcopy ? "zcopy" : "short");
            add_step(name, copy_step, cc, 0);
        }
    }
}

static struct alloc_case alloc_dev = {CUCOPY_MEMORY_TYPE_CUDA, &cdev, &cdev_b};
static struct alloc_case alloc_man = {CUCOPY_MEMORY_TYPE_CUDA_MANAGED, &cman, &cman_b};
static struct alloc_case alloc_host = {CUCOPY_MEMORY_TYPE_HOST, &chost, &chost_b};
static struct query_case q_dev = {&cdev_b, CUCOPY_MEMORY_TYPE_CUDA, 0, CUCOPY_MEM_FLAG_ALLOCATED};
static struct query_case q_man = {&cman_b, CUCOPY_MEMORY_TYPE_CUDA_MANAGED, 0,
                                  CUCOPY_MEM_FLAG_ALLOCATED};
static struct query_case q_host = {&chost_b, CUCOPY_MEMORY_TYPE_HOST, -1,
                                   CUCOPY_MEM_FLAG_ALLOCATED};
static struct query_case q_reg = {&mreg_b, CUCOPY_MEMORY_TYPE_HOST, -1,
                                  CUCOPY_MEM_FLAG_REGISTERED};
static struct query_case q_d1 = {&d1, CUCOPY_MEMORY_TYPE_CUDA, 1, 0};
static struct query_case q_hp = {&hp, CUCOPY_MEMORY_TYPE_HOST, -1, 0};

static void build_workload(void)
{
    add_step("context_create", st_context_create, NULL, 0);
    add_step("device_count", st_device_count, NULL, 0);
    add_step("device_query 0", st_device_query, (void *)(intptr_t)0, 0);
    add_step("device_query 1", st_device_query, (void *)(intptr_t)1, 0);
    add_step("device_peer_query 0 1", st_peer_query, (void *)(intptr_t)0, 0);
    add_step("device_peer_query 1 0", st_peer_query, (void *)(intptr_t)1, 0);
    add_step("iface_open", st_iface_open, NULL, 0);
    add_step("ep_create", st_ep_create, NULL, 0);
    add_step("bystander iface_open", st_bystander_open, NULL, 0);
    static struct copy_case bys_early = {"bystander H2D dev1", &bh, &bd1, 0, 1, &biface, &bep};
    add_step("bystander early put_zcopy", copy_step, &bys_early, 0);
    add_step("mem_alloc device", st_mem_alloc, &alloc_dev, 0);
    add_step("mem_query device", st_mem_query, &q_dev, 0);
    add_step("mem_alloc managed", st_mem_alloc, &alloc_man, 0);
    add_step("mem_query managed", st_mem_query, &q_man, 0);
    add_step("mem_alloc host", st_mem_alloc, &alloc_host, 0);
    add_step("mem_query host", st_mem_query, &q_host, 0);
    add_step("mem_query dev1", st_mem_query, &q_d1, 0);
    add_step("mem_query pageable", st_mem_query, &q_hp, 0);
    add_step("mem_reg", st_mem_reg, NULL, 0);
    add_step("mem_query registered", st_mem_query, &q_reg, 0);
    add_copies("H2D pageable->dev0", &hp, &d0, &iface, &ep);
    add_copies("D2H dev0->pinned", &d0, &pin, &iface, &ep);
    add_copies("D2D dev0->dev0(mem_alloc)", &d0, &cdev_b, &iface, &ep);
    add_copies("peer dev0->dev1", &d0, &d1, &iface, &ep);
    add_copies("peer dev1->dev0", &d1, &d0, &iface, &ep);
    add_copies("registered->managed", &mreg_b, &cman_b, &iface, &ep);
    add_copies("pinned(mem_alloc)->dev1", &chost_b, &d1, &iface, &ep);
    add_copies("managed->pageable", &cman_b, &hp, &iface, &ep);
    add_step("zcopy iov on 2 devices", st_multi_iov, NULL, 0);
    add_step("flush with work in flight", st_flush, NULL, 0);
    add_step("event fd protocol", st_event_fd, NULL, 0);
    add_step("user context copy", st_user_copy, NULL, 0);
    add_step("iface_release_context", st_release_context, NULL, 0);
    add_step("mem_dereg", st_mem_dereg, NULL, 1);
    add_step("mem_free device", st_mem_free, &alloc_dev, 1);
    add_step("mem_free managed", st_mem_free, &alloc_man, 1);
    add_step("mem_free host", st_mem_free, &alloc_host, 1);
    add_step("ep_destroy", st_ep_destroy, NULL, 1);
    add_step("iface_close", st_iface_close, NULL, 1);
    static struct copy_case bys_late = {"bystander D2H dev1", &bd1, &bh, 1, 1, &biface, &bep};
    add_step("bystander late get_zcopy", copy_step, &bys_late, 0);
    add_step("bystander iface_close", st_bystander_close, NULL, 1);
    add_step("context_destroy", st_context_destroy, NULL, 1);
}

/* Buffers and the user context, made with the raw driver before W. */
static void setup(void)
{
    for (int d = 0; d < 2; d++)
        prim[d] = tc_primary(d);
    tc_buf_alloc(&hp, TC_MEM_PAGEABLE, LEN);
    tc_buf_alloc(&hp2, TC_MEM_PAGEABLE, LEN);
    tc_buf_alloc(&bh, TC_MEM_PAGEABLE, LEN);
    tc_buf_alloc(&pin, TC_MEM_PINNED, LEN);
    tc_buf_alloc(&pin2, TC_MEM_PINNED, LEN);
    tc_buf_alloc(&d0, TC_MEM_DEV0, LEN);
    tc_buf_alloc(&d1, TC_MEM_DEV1, LEN);
    tc_buf_alloc(&bd1, TC_MEM_DEV1, LEN);
    mreg = aligned_alloc(4096, LEN);
    REQUIRE(mreg != NULL);
    mreg_b = tc_buf_view(TC_MEM_PAGEABLE, NULL, (uint64_t)(uintptr_t)mreg, LEN, 1);
    cdDevice dev0;
    TD_CHECK(td.cuDeviceGet(&dev0, 0));
    TD_CHECK(td.cuCtxCreate(&user, CD_CTX_SCHED_AUTO, dev0));
    cdContext popped;
    TD_CHECK(td.cuCtxPopCurrent(&popped));
    REQUIRE(popped == user);
    tc_buf_alloc_in(&ubuf, user, LEN);
    REQUIRE(tc_current() == NULL);
}

/* After W: leaks and misuse. Returns the number of problems (printed). */
static int end_checks(void)
{
    int bad = 0;
    int ns = tc_fake.live_streams(NULL);
    int nev = tc_fake.live_events(NULL);
    long viol = tc_fake.violations(), regs = tc_fake.registered_ranges();
    if (ns > allowed(U_STREAM) || nev > allowed(U_EVENT) || ns + nev > 1) {
        printf("test_faults: LEAK: %d stream(s), %d event(s) alive after context_destroy\n", ns,
               nev);
        bad++;
    }
    if (viol != 0) {
        printf("test_faults: %ld driver misuse(s) (fakecuda violations)\n", viol);
        bad++;
    }
    if (regs > allowed(U_REG)) {
        printf("test_faults: LEAK: %ld host registration(s) left\n", regs);
        bad++;
    }
    if (lib_ctx_changes != 0) {
        printf("test_faults: %d cucopy call(s) changed the current context\n", lib_ctx_changes);
        bad++;
    }
    if (user != NULL) {
        tc_buf_free(&ubuf);
        TD_CHECK(td.cuCtxDestroy(user));
        user = NULL;
    }
    struct tc_buf *bufs[] = {&hp, &hp2, &bh, &pin, &pin2, &d0, &d1, &bd1};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        tc_buf_free(bufs[i]);
    free(mreg);
    long allocs = tc_fake.live_allocations();
    if (allocs > allowed(U_ALLOC)) {
        printf("test_faults: LEAK: %ld allocation(s) left\n", allocs);
        bad++;
    }
    /* The test's own retains go; a primary context still active is one
     * the library still retains. */
    int retained = 0;
    for (int d = 0; d < 2; d++) {
        cdDevice dev;
        TD_CHECK(td.cuDeviceGet(&dev, d));
        TD_CHECK(td.cuDevicePrimaryCtxRelease(dev));
        if (tc_primary_active(d) && ++retained > allowed(U_RETAIN)) {
            printf("test_faults: LEAK: device %d's primary context still retained\n", d);
            bad++;
        }
    }
    return bad;
}

/* Runs W. Returns the number of problems. */
static int run_workload(void)
{
    int bad = 0;
    for (int i = 0; i < nsteps; i++) {
        cur_step = i;
        why_buf[0] = 0;
        int was_hit = inj_hit;
        int r = steps[i].fn(steps[i].arg);
        int faulted_here = inj_on && !was_hit && inj_hit;
        if (r == 0)
            continue;
        if (!faulted_here || !inj_consumed) {
            printf("test_faults: step \"%s\" failed%s: %s\n", steps[i].name,
                   inj_on ? " (no fault injected in it)" : "", why_buf);
            bad++;
            if (mode_discover)
                return bad;
            continue;
        }
        /* The faulted step: retry it. */
        inj_step_failed = 1;
        char first[1024];
        snprintf(first, sizeof(first), "%s", why_buf);
        why_buf[0] = 0;
        int r2 = steps[i].fn(steps[i].arg);
        if (r2 != 0 && !(steps[i].release &&
                         (r2 == CUCOPY_ERR_INVALID_HANDLE || r2 == CUCOPY_ERR_INVALID_PARAM))) {
            printf("test_faults: step \"%s\" failed again on retry: %s (first: %s)\n",
                   steps[i].name, why_buf, first);
            bad++;
        }
    }
    bad += end_checks();
    return bad;
}

/* ------------------------------------------------------------------ */
/* Child: one injected fault. */

static int child_main(int c, int step, const char *name, int j)
{
    inj_e = -1;
    for (int e = 0; e < NE; e++)
        if (strcmp(entry_names[e], name) == 0)
            inj_e = e;
    REQUIRE(inj_e >= 0);
    inj_c = c;
    inj_step = step;
    inj_j = j;
    build_workload();
    setup();
    tc_fake.reset_counters();
    inj_on = 1;
    int bad = run_workload();
    if (!inj_hit || !inj_consumed) {
        printf("test_faults: fault %s #%d at LIB call %d was not triggered (call sites moved)\n",
               name, j, c);
        bad++;
    }
    /* The faulted call itself: a negative status names the call. */
    /* 0: tolerated; 1: the call returned an error; 2: the call succeeded and
     * the step failed later (a completion status, a later call) */
    int outcome = inj_step_failed ? 2 : 0;
    if (inj_status < 0) {
        outcome = 1;
        if (inj_status == CUCOPY_ERR_INTERNAL) {
            printf("test_faults: %s returned CUCOPY_ERR_INTERNAL (a panic): \"%s\"\n",
                   inj_c < MAX_LIB ? lib_what[inj_c] : "?", inj_msg);
            bad++;
        } else if (inj_msg[0] == 0) {
            printf("test_faults: %s returned %s with an empty cucopy_last_error()\n",
                   inj_c < MAX_LIB ? lib_what[inj_c] : "?", tc_status_name(inj_status));
            bad++;
        } else if (inj_status == CUCOPY_ERR_CUDA &&
                   (strstr(inj_msg, name) == NULL || strstr(inj_msg, FAULT_NAME) == NULL)) {
            printf("test_faults: CUCOPY_ERR_CUDA whose last error does not name %s and %s: "
                   "\"%s\"\n",
                   name, FAULT_NAME, inj_msg);
            bad++;
        }
    }
    printf("TF_RESULT %d %d %d %ld\n", bad == 0, outcome, inj_status, ops_verified);
    printf("TF_MSG %s\n", inj_msg);
    fflush(stdout);
    return bad == 0 ? 0 : 1;
}

/* ------------------------------------------------------------------ */
/* Parent: discovery, then one child per call site. */

#define PARALLEL 4 /* children at a time (they mostly wait) */

struct outcome_stats {
    int sites, errors, later, tolerated, failed;
};

int main(int argc, char **argv)
{
    tc_init("test_faults");
    if (!td.is_fake)
        tc_skip("fault injection needs the fake driver (fakecuda_fail)");
    if (td.device_count < 2)
        tc_skip("needs 2 devices (FAKECUDA_DEVICES=2)");
    REQUIRE(tc_fake.calls != NULL && tc_fake.fail != NULL && tc_fake.reset_counters != NULL &&
            tc_fake.live_streams != NULL && tc_fake.live_events != NULL &&
            tc_fake.set_delay_us != NULL && tc_fake.violations != NULL);
    for (int e = 0; e < NE; e++)
        REQUIRE(tc_fake.calls(entry_names[e]) >= 0);

    if (argc == 6 && strcmp(argv[1], "--inject") == 0)
        return child_main(atoi(argv[2]), atoi(argv[3]), argv[4], atoi(argv[5]));
    int list = argc == 2 && strcmp(argv[1], "--list") == 0;
    REQUIRE(argc == 1 || list);

    /* Discovery. */
    build_workload();
    setup();
    tc_fake.reset_counters();
    mode_discover = 1;
    int bad = run_workload();
    mode_discover = 0;
    if (bad != 0 || lib_seq > MAX_LIB) {
        printf("test_faults: the clean workload failed (%d problem(s), %d cucopy calls)\n", bad,
               lib_seq);
        return 1;
    }
    long clean_ops = ops_verified;
    long total[NE];
    memset(total, 0, sizeof(total));
    for (int c = 0; c < lib_seq; c++)
        for (int e = 0; e < NE; e++)
            total[e] += lib_delta[c][e];
    printf("test_faults: clean workload: %d steps, %d cucopy calls, %ld operations verified\n",
           nsteps, lib_seq, clean_ops);

    if (list) { /* the call sites found, for debugging */
        for (int c = 0; c < lib_seq; c++)
            for (int e = 0; e < NE; e++)
                if (lib_delta[c][e] > 0)
                    printf("%4d %-36s %-28s x%d  %s\n", c, steps[lib_step[c]].name, entry_names[e],
                           lib_delta[c][e], lib_what[c]);
        return 0;
    }

    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    REQUIRE(n > 0);
    self[n] = 0;

    struct outcome_stats st[NE];
    memset(st, 0, sizeof(st));
    long faults = 0, failed = 0, ops = clean_ops;
    int called = 0;
    for (int e = 0; e < NE; e++)
        called += total[e] > 0;

    /* Every call site: (entry point, LIB call, occurrence inside it). */
    static struct fcase {
        int e, c, j;
    } cases[1 << 14];
    int ncases = 0;
    for (int e = 0; e < NE; e++)
        for (int c = 0; c < lib_seq; c++)
            for (int j = 1; j <= lib_delta[c][e]; j++) {
                REQUIRE(ncases < (int)(sizeof(cases) / sizeof(cases[0])));
                cases[ncases++] = (struct fcase){e, c, j};
            }

    /* Discovery that found nothing (the fake's counters or the LIB() bracket
     * broken) must not pass as "0 faults, 0 failed". */
    if (ncases == 0 || called < 10) {
        printf("test_faults: FAIL: discovery found %d call sites at %d entry points\n", ncases,
               called);
        return 1;
    }
    double t0 = tc_now();
    for (int b = 0; b < ncases; b += PARALLEL) {
        FILE *fs[PARALLEL];
        int nb = ncases - b < PARALLEL ? ncases - b : PARALLEL;
        for (int i = 0; i < nb; i++) {
            const struct fcase *fc = &cases[b + i];
            char cmd[4400];
            snprintf(cmd, sizeof(cmd), "%s '%s' --inject %d %d %s %d 2>&1", tc_emulator(), self,
                     fc->c, lib_step[fc->c], entry_names[fc->e], fc->j);
            fs[i] = popen(cmd, "r");
            REQUIRE(fs[i] != NULL);
        }
        for (int i = 0; i < nb; i++) {
            const struct fcase *fc = &cases[b + i];
            int e = fc->e, c = fc->c, j = fc->j;
            static char out[1 << 20];
            size_t len = fread(out, 1, sizeof(out) - 1, fs[i]);
            out[len] = 0;
            int ws = pclose(fs[i]);
            int rc = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
            int pass = 0, outcome = -1, status = 0;
            long cops = 0;
            const char *res = strstr(out, "TF_RESULT ");
            if (res != NULL)
                sscanf(res, "TF_RESULT %d %d %d %ld", &pass, &outcome, &status, &cops);
            faults++;
            st[e].sites++;
            ops += cops;
            if (outcome == 1)
                st[e].errors++;
            else if (outcome == 0)
                st[e].tolerated++;
            if (outcome == 2)
                st[e].later++;
            if (rc == 0 && pass)
                continue;
            failed++;
            st[e].failed++;
            printf("test_faults: FAIL: %s call #%d of \"%s\" (step \"%s\", LIB call %d): exit %d\n",
                   entry_names[e], j, lib_what[c], steps[lib_step[c]].name, c, rc);
            printf("---- child output ----\n%s---- end ----\n", out);
        }
    }
    double dt = tc_now() - t0;

    printf("test_faults: per entry point: call sites (the call returned an error / the step "
           "failed later / tolerated; failed)\n");
    for (int e = 0; e < NE; e++)
        if (st[e].sites > 0)
            printf("  %-28s %4d (%d / %d / %d; %d)\n", entry_names[e], st[e].sites, st[e].errors,
                   st[e].later, st[e].tolerated, st[e].failed);
    printf("test_faults: %d entry points called, %ld injected faults (call sites), %ld "
           "operations verified, %ld failed, %s (%.1f s)\n",
           called, faults, ops, failed, failed == 0 ? "0 leaks" : "see the FAIL lines", dt);
    return failed == 0 ? 0 : 1;
}
