/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every function of cucopy.h with bad input: NULL handles (INVALID_HANDLE),
 * NULL out-pointers and NULL buffers with a length (INVALID_PARAM), iovcnt 0
 * and above max_iov, lengths whose end wraps around the address space,
 * unknown field_mask bits, flags and event bits, out-of-range params, a
 * second driver path, handles used after destroy/close (INVALID_HANDLE),
 * destroying a context with an open iface (BUSY), and invalid configuration
 * in the environment (checked in a re-executed child). Every error comes with
 * a non-empty cucopy_last_error(); nothing crashes; a rejected zcopy leaves
 * its completion alone, copies nothing and leaves nothing in flight.
 * Host copies of unmapped addresses are an error, also after the program
 * replaced the fault handlers. Also: NULL destroy/close is OK, cucopy_status_string() of every status,
 * cucopy_get_version(), last error is thread-local and not cleared by
 * successful calls.
 */
#define _GNU_SOURCE
#include "check.h"
#include "mem.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define BUF 64
#define FILL 0x3c

static void status_strings(void)
{
    for (int s = CUCOPY_ERR_CANCELED; s <= CUCOPY_INPROGRESS; s++) {
        const char *str = cucopy_status_string((cucopy_status_t)s);
        const char *name = tc_status_name(s);
        size_t n = strlen(name);
        CHECKF(str != NULL && strncmp(str, name, n) == 0 && (str[n] == '\0' || str[n] == ':'),
               "cucopy_status_string(%d) = \"%s\", expected it to start with %s", s,
               str != NULL ? str : "(NULL)", name);
    }
    const int unknown[] = {2, 7, CUCOPY_ERR_CANCELED - 1, -100, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        const char *str = cucopy_status_string((cucopy_status_t)unknown[i]);
        CHECKF(str != NULL && strcmp(str, "unknown status") == 0,
               "cucopy_status_string(%d) = \"%s\", expected \"unknown status\"", unknown[i],
               str != NULL ? str : "(NULL)");
    }
    CHECKF(cucopy_get_version() == CUCOPY_VERSION, "cucopy_get_version() = %u, header says %d",
           cucopy_get_version(), CUCOPY_VERSION);
}

static void *fresh_thread(void *arg)
{
    (void)arg;
    const char *e = cucopy_last_error();
    CHECKF(e != NULL && e[0] == '\0', "last error on a fresh thread is \"%s\", expected \"\"",
           e != NULL ? e : "(NULL)");
    /* An error here does not change the main thread's. */
    CHECK_STATUS(cucopy_device_count(NULL, NULL), CUCOPY_ERR_INVALID_HANDLE);
    return NULL;
}

static void last_error_rules(cucopy_context_h ctx)
{
    CHECK_STATUS(cucopy_context_create(NULL, NULL), CUCOPY_ERR_INVALID_PARAM);
    char mine[512];
    snprintf(mine, sizeof(mine), "%s", cucopy_last_error());
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, fresh_thread, NULL) == 0);
    REQUIRE(pthread_join(t, NULL) == 0);
    CHECKF(strcmp(cucopy_last_error(), mine) == 0,
           "another thread's error changed this thread's last error");
    int n = 0;
    CHECK_STATUS(cucopy_device_count(ctx, &n), CUCOPY_OK);
    CHECKF(strcmp(cucopy_last_error(), mine) == 0, "a successful call changed the last error");
}

static void context_params(void)
{
    cucopy_context_h c = NULL;
    cucopy_context_params_t p;
    CHECK_STATUS(cucopy_context_create(NULL, NULL), CUCOPY_ERR_INVALID_PARAM);
    memset(&p, 0, sizeof(p));
    CHECK_STATUS(cucopy_context_create(&p, NULL), CUCOPY_ERR_INVALID_PARAM);
    p.field_mask = 1u << 2;
    CHECK_STATUS(cucopy_context_create(&p, &c), CUCOPY_ERR_INVALID_PARAM);
    p.field_mask = 1ull << 63;
    CHECK_STATUS(cucopy_context_create(&p, &c), CUCOPY_ERR_INVALID_PARAM);
    p.field_mask = CUCOPY_CONTEXT_PARAM_LOG_LEVEL;
    p.log_level = (cucopy_log_level_t)99;
    CHECK_STATUS(cucopy_context_create(&p, &c), CUCOPY_ERR_INVALID_PARAM);
    p.log_level = (cucopy_log_level_t)-1;
    CHECK_STATUS(cucopy_context_create(&p, &c), CUCOPY_ERR_INVALID_PARAM);
    p.field_mask = CUCOPY_CONTEXT_PARAM_DRIVER_PATH;
    p.driver_path = NULL;
    CHECK_STATUS(cucopy_context_create(&p, &c), CUCOPY_ERR_INVALID_PARAM);
}

/* After the first context loaded the driver: another path is refused, the
 * same one is fine. */
static void second_driver_path(void)
{
    cucopy_context_h c = NULL;
    cucopy_context_params_t p;
    memset(&p, 0, sizeof(p));
    p.field_mask = CUCOPY_CONTEXT_PARAM_DRIVER_PATH;
    p.driver_path = "/nonexistent/libcuda-other.so.1";
    CHECK_STATUS(cucopy_context_create(&p, &c), CUCOPY_ERR_INVALID_PARAM);
    const char *env = getenv("CUCOPY_CUDA_DRIVER");
    p.driver_path = env != NULL && env[0] != '\0' ? env : "libcuda.so.1";
    c = NULL;
    if (CHECK_STATUS(cucopy_context_create(&p, &c), CUCOPY_OK))
        CHECK_STATUS(cucopy_context_destroy(c), CUCOPY_OK);
    p.field_mask = CUCOPY_CONTEXT_PARAM_LOG_LEVEL;
    p.log_level = CUCOPY_LOG_ERROR;
    c = NULL;
    if (CHECK_STATUS(cucopy_context_create(&p, &c), CUCOPY_OK))
        CHECK_STATUS(cucopy_context_destroy(c), CUCOPY_OK);
}

static void iface_params(cucopy_context_h ctx)
{
    cucopy_iface_h i = NULL;
    cucopy_iface_params_t p;
    CHECK_STATUS(cucopy_iface_open(NULL, NULL, &i), CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(cucopy_iface_open(ctx, NULL, NULL), CUCOPY_ERR_INVALID_PARAM);
    memset(&p, 0, sizeof(p));
    p.field_mask = 1u << 3;
    CHECK_STATUS(cucopy_iface_open(ctx, &p, &i), CUCOPY_ERR_INVALID_PARAM);
    p.field_mask = 1ull << 40;
    CHECK_STATUS(cucopy_iface_open(ctx, &p, &i), CUCOPY_ERR_INVALID_PARAM);
    p.field_mask = CUCOPY_IFACE_PARAM_THREAD_MODE;
    p.thread_mode = (cucopy_thread_mode_t)5;
    CHECK_STATUS(cucopy_iface_open(ctx, &p, &i), CUCOPY_ERR_INVALID_PARAM);
    p.field_mask = CUCOPY_IFACE_PARAM_MAX_POLL;
    p.max_poll = 0;
    CHECK_STATUS(cucopy_iface_open(ctx, &p, &i), CUCOPY_ERR_INVALID_PARAM);
    p.field_mask = CUCOPY_IFACE_PARAM_MAX_EVENTS;
    p.max_events = 0;
    CHECK_STATUS(cucopy_iface_open(ctx, &p, &i), CUCOPY_ERR_INVALID_PARAM);

    /* Valid params come back from query. */
    p.field_mask = CUCOPY_IFACE_PARAM_THREAD_MODE | CUCOPY_IFACE_PARAM_MAX_POLL |
                   CUCOPY_IFACE_PARAM_MAX_EVENTS;
    p.thread_mode = CUCOPY_THREAD_MODE_MULTI;
    p.max_poll = 3;
    p.max_events = 7;
    i = NULL;
    if (!CHECK_STATUS(cucopy_iface_open(ctx, &p, &i), CUCOPY_OK))
        return;
    cucopy_iface_attr_t a;
    memset(&a, 0, sizeof(a));
    a.field_mask = CUCOPY_IFACE_ATTR_MAX_POLL | CUCOPY_IFACE_ATTR_MAX_EVENTS |
                   CUCOPY_IFACE_ATTR_THREAD_MODE;
    CHECK_STATUS(cucopy_iface_query(i, &a), CUCOPY_OK);
    CHECKF(a.max_poll == 3 && a.max_events == 7 && a.thread_mode == CUCOPY_THREAD_MODE_MULTI,
           "query gave max_poll %u, max_events %u, thread_mode %d for params 3, 7, MULTI",
           a.max_poll, a.max_events, (int)a.thread_mode);
    CHECK_STATUS(cucopy_iface_close(i), CUCOPY_OK);
}

static size_t iface_query(cucopy_iface_h iface)
{
    cucopy_iface_attr_t a;
    CHECK_STATUS(cucopy_iface_query(NULL, &a), CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(cucopy_iface_query(iface, NULL), CUCOPY_ERR_INVALID_PARAM);
    memset(&a, 0, sizeof(a));
    a.field_mask = 1u << 6;
    CHECK_STATUS(cucopy_iface_query(iface, &a), CUCOPY_ERR_INVALID_PARAM);
    a.field_mask = 1ull << 63;
    CHECK_STATUS(cucopy_iface_query(iface, &a), CUCOPY_ERR_INVALID_PARAM);

    /* Unselected fields stay as they were. */
    memset(&a, 0x77, sizeof(a));
    a.field_mask = 0;
    CHECK_STATUS(cucopy_iface_query(iface, &a), CUCOPY_OK);
    cucopy_iface_attr_t sentinel;
    memset(&sentinel, 0x77, sizeof(sentinel));
    sentinel.field_mask = 0;
    CHECKF(memcmp(&a, &sentinel, sizeof(a)) == 0, "query with field_mask 0 wrote fields");
    memset(&a, 0x77, sizeof(a));
    a.field_mask = CUCOPY_IFACE_ATTR_MAX_IOV;
    CHECK_STATUS(cucopy_iface_query(iface, &a), CUCOPY_OK);
    CHECKF(a.cap_flags == sentinel.cap_flags && a.max_poll == sentinel.max_poll &&
               a.device_count == sentinel.device_count,
           "query of MAX_IOV only wrote other fields");

    memset(&a, 0, sizeof(a));
    a.field_mask = CUCOPY_IFACE_ATTR_CAP_FLAGS | CUCOPY_IFACE_ATTR_MAX_IOV |
                   CUCOPY_IFACE_ATTR_MAX_POLL | CUCOPY_IFACE_ATTR_MAX_EVENTS |
                   CUCOPY_IFACE_ATTR_THREAD_MODE | CUCOPY_IFACE_ATTR_DEVICE_COUNT;
    CHECK_STATUS(cucopy_iface_query(iface, &a), CUCOPY_OK);
    uint64_t basic = CUCOPY_IFACE_CAP_PUT_SHORT | CUCOPY_IFACE_CAP_GET_SHORT |
                     CUCOPY_IFACE_CAP_PUT_ZCOPY | CUCOPY_IFACE_CAP_GET_ZCOPY |
                     CUCOPY_IFACE_CAP_EVENT_FD;
    CHECKF((a.cap_flags & basic) == basic, "cap_flags 0x%llx lack put/get short/zcopy or event fd",
           (unsigned long long)a.cap_flags);
    CHECKF(!(a.cap_flags & CUCOPY_IFACE_CAP_CROSS_DEVICE) == !(td.device_count > 1),
           "%d device(s) but CROSS_DEVICE %s", td.device_count,
           (a.cap_flags & CUCOPY_IFACE_CAP_CROSS_DEVICE) ? "set" : "not set");
    if (td.cuCtxGetId != NULL)
        CHECKF(a.cap_flags & CUCOPY_IFACE_CAP_CONTEXT_ID,
               "the driver has cuCtxGetId but CONTEXT_ID is not set");
    else
        CHECKF(!(a.cap_flags & CUCOPY_IFACE_CAP_CONTEXT_ID),
               "the driver lacks cuCtxGetId but CONTEXT_ID is set");
    CHECKF(a.max_iov >= 1, "max_iov %zu", a.max_iov);
    if (getenv("CUCOPY_MAX_POLL") == NULL)
        CHECKF(a.max_poll == 16, "default max_poll %u, header says 16", a.max_poll);
    if (getenv("CUCOPY_MAX_EVENTS") == NULL)
        CHECKF(a.max_events == 4096, "default max_events %u, header says 4096", a.max_events);
    CHECKF(a.thread_mode == CUCOPY_THREAD_MODE_SINGLE, "default thread mode %d", (int)a.thread_mode);
    CHECKF(a.device_count == td.device_count, "device_count %d, driver shows %d", a.device_count,
           td.device_count);
    return a.max_iov;
}

static void iface_calls(cucopy_iface_h iface)
{
    int fd = -1;
    CHECK(cucopy_iface_progress(NULL) == CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(cucopy_iface_flush(NULL, 0, NULL), CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(cucopy_iface_flush(iface, 1, NULL), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_iface_flush(iface, 0x80000000u, NULL), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_iface_event_fd(NULL, &fd), CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(cucopy_iface_event_fd(iface, NULL), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_iface_event_arm(NULL, CUCOPY_EVENT_SEND_COMP), CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(cucopy_iface_event_arm(iface, 1u << 1), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_iface_event_arm(iface, 0xffffffffu), CUCOPY_ERR_INVALID_PARAM);
    cucopy_ep_h ep = NULL;
    CHECK_STATUS(cucopy_ep_create(NULL, &ep), CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(cucopy_ep_create(iface, NULL), CUCOPY_ERR_INVALID_PARAM);
}

static unsigned char host_a[BUF];
static unsigned char host_b[BUF];

static uint64_t addr(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

/* A rejected zcopy: the expected status, completion untouched. */
static void bad_zcopy(cucopy_ep_h ep, int get, const cucopy_iov_t *iov, size_t iovcnt,
                      uint64_t remote, int expected, const char *what)
{
    struct tc_comp c;
    tc_comp_init(&c, 1);
    int s = get ? cucopy_ep_get_zcopy(ep, iov, iovcnt, remote, &c.comp)
                : cucopy_ep_put_zcopy(ep, iov, iovcnt, remote, &c.comp);
    tc_case_begin("%s_zcopy: %s", get ? "get" : "put", what);
    CHECK_STATUS(s, expected);
    CHECKF(c.fired == 0 && c.comp.count == 1 && c.comp.status == CUCOPY_OK,
           "a rejected zcopy touched its completion");
    tc_case_end();
}

static void ep_calls(cucopy_iface_h iface, cucopy_ep_h ep, size_t max_iov, uint64_t dev_addr)
{
    const int EP = CUCOPY_ERR_INVALID_HANDLE;
    const int IP = CUCOPY_ERR_INVALID_PARAM;
    void *wrap_ptr = (void *)(uintptr_t)(UINTPTR_MAX - 3);
    memset(host_b, FILL, sizeof(host_b));
    memset(host_a, 0x11, sizeof(host_a));
    uint64_t a = addr(host_a);
    uint64_t b = addr(host_b);

    CHECK_STATUS(cucopy_ep_put_short(NULL, host_a, 8, b), EP);
    CHECK_STATUS(cucopy_ep_put_short(ep, NULL, 8, b), IP);
    CHECK_STATUS(cucopy_ep_put_short(ep, host_a, 8, 0), IP);
    CHECK_STATUS(cucopy_ep_put_short(ep, host_a, 8, UINT64_MAX - 3), IP);
    CHECK_STATUS(cucopy_ep_put_short(ep, host_a, 16, UINT64_MAX - 8), IP);
    CHECK_STATUS(cucopy_ep_put_short(ep, wrap_ptr, 8, b), IP);
    CHECK_STATUS(cucopy_ep_put_short(ep, host_a, SIZE_MAX, b), IP);
    CHECK_STATUS(cucopy_ep_put_short(ep, NULL, 0, 0), CUCOPY_OK); /* zero length: a no-op */
    CHECK_STATUS(cucopy_ep_get_short(NULL, host_b, 8, a), EP);
    CHECK_STATUS(cucopy_ep_get_short(ep, NULL, 8, a), IP);
    CHECK_STATUS(cucopy_ep_get_short(ep, host_b, 8, 0), IP);
    CHECK_STATUS(cucopy_ep_get_short(ep, host_b, 8, UINT64_MAX - 3), IP);
    CHECK_STATUS(cucopy_ep_get_short(ep, wrap_ptr, 8, a), IP);
    CHECK_STATUS(cucopy_ep_get_short(ep, host_b, SIZE_MAX, a), IP);
    CHECK_STATUS(cucopy_ep_get_short(ep, NULL, 0, 0), CUCOPY_OK);
    /* Device memory as remote, end wrapping. */
    CHECK_STATUS(cucopy_ep_put_short(ep, host_a, SIZE_MAX - 2, dev_addr), IP);
    CHECK_STATUS(cucopy_ep_get_short(ep, host_b, SIZE_MAX - 2, dev_addr), IP);

    for (int get = 0; get < 2; get++) {
        void *local = get ? host_b : host_a;
        uint64_t remote = get ? a : b;
        cucopy_iov_t one = {local, 8};
        size_t nmany = max_iov + 1;
        cucopy_iov_t *many = calloc(nmany, sizeof(*many));
        REQUIRE(many != NULL);
        for (size_t i = 0; i < nmany; i++) {
            many[i].buffer = local;
            many[i].length = 1;
        }
        struct tc_comp c;
        tc_comp_init(&c, 1);
        CHECK_STATUS(get ? cucopy_ep_get_zcopy(NULL, &one, 1, remote, &c.comp)
                         : cucopy_ep_put_zcopy(NULL, &one, 1, remote, &c.comp),
                     EP);
        bad_zcopy(ep, get, NULL, 1, remote, IP, "iov NULL, iovcnt 1");
        bad_zcopy(ep, get, &one, 0, remote, IP, "iovcnt 0");
        bad_zcopy(ep, get, many, max_iov + 1, remote, IP, "iovcnt max_iov + 1");
        bad_zcopy(ep, get, many, SIZE_MAX, remote, IP, "iovcnt SIZE_MAX");
        cucopy_iov_t null_buf = {NULL, 8};
        bad_zcopy(ep, get, &null_buf, 1, remote, IP, "iov buffer NULL, length 8");
        bad_zcopy(ep, get, &one, 1, 0, IP, "remote_addr 0");
        bad_zcopy(ep, get, &one, 1, UINT64_MAX - 3, IP, "remote_addr + length wraps");
        cucopy_iov_t wrap = {wrap_ptr, 8};
        bad_zcopy(ep, get, &wrap, 1, remote, IP, "iov buffer + length wraps");
        cucopy_iov_t huge = {local, SIZE_MAX};
        bad_zcopy(ep, get, &huge, 1, remote, IP, "iov length SIZE_MAX");
        if (max_iov >= 2) {
            cucopy_iov_t sum[2] = {{local, SIZE_MAX / 2 + 1}, {local, SIZE_MAX / 2 + 1}};
            bad_zcopy(ep, get, sum, 2, remote, IP, "iov lengths sum overflows");
            cucopy_iov_t second_null[2] = {{local, 4}, {NULL, 4}};
            bad_zcopy(ep, get, second_null, 2, remote, IP, "second iov buffer NULL");
        }
        free(many);
    }
    /* Nothing was copied and nothing is in flight. */
    int untouched = 1;
    for (int i = 0; i < BUF; i++)
        untouched &= host_b[i] == FILL;
    CHECKF(untouched, "a rejected put wrote into the destination");
    CHECK_STATUS(cucopy_iface_flush(iface, 0, NULL), CUCOPY_OK);
    CHECK(cucopy_iface_progress(iface) == 0);

    CHECK_STATUS(cucopy_ep_flush(NULL, 0, NULL), EP);
    CHECK_STATUS(cucopy_ep_flush(ep, 1, NULL), IP);
    CHECK_STATUS(cucopy_ep_flush(ep, 0x40000000u, NULL), IP);
}

/* Every ep function on an ep that is no longer valid. */
/*
 * Addresses that are no memory at all: an unmapped page, freed device memory
 * (the driver no longer knows it, so it reads as host memory). Copies get a
 * clear error, the process survives, nothing is copied, and the iface keeps
 * working.
 */
/* An address that was a page and is no longer mapped. */
static char *unmapped_page(void)
{
    long page = sysconf(_SC_PAGESIZE);
    char *gone = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(gone != MAP_FAILED);
    REQUIRE(munmap(gone, (size_t)page) == 0);
    return gone;
}

static void freed_pointers(cucopy_iface_h iface, cucopy_ep_h ep)
{
    char *gone = unmapped_page();
    char host[BUF];
    memset(host, FILL, sizeof(host));
    uint64_t gone_addr = (uint64_t)(uintptr_t)gone;
    CHECK_STATUS(cucopy_ep_put_short(ep, host, 8, gone_addr), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_ep_get_short(ep, host, 8, gone_addr), CUCOPY_ERR_INVALID_PARAM);
    cucopy_iov_t iov = {host, 8};
    cucopy_completion_t comp = {NULL, 1, CUCOPY_OK};
    CHECK_STATUS(cucopy_ep_put_zcopy(ep, &iov, 1, gone_addr, &comp), CUCOPY_ERR_INVALID_PARAM);
    CHECKF(comp.count == 1 && comp.status == CUCOPY_OK, "a rejected zcopy touched its completion");
    cucopy_iov_t bad_iov = {gone, 8};
    CHECK_STATUS(cucopy_ep_get_zcopy(ep, &bad_iov, 1, (uint64_t)(uintptr_t)host, NULL),
                 CUCOPY_ERR_INVALID_PARAM);
    CHECKF(host[0] == FILL, "the failed copies changed the destination");

    /* Freed device memory. */
    struct tc_buf dev;
    tc_buf_alloc(&dev, TC_MEM_DEV0, BUF);
    uint64_t freed = dev.dptr;
    tc_buf_free(&dev);
    /* Freed CUDA memory is no longer CUDA memory: an unmapped host address. */
    CHECK_STATUS(cucopy_ep_put_short(ep, host, 8, freed), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_ep_get_short(ep, host, 8, freed), CUCOPY_ERR_INVALID_PARAM);

    /* Still usable. */
    char back[BUF];
    CHECK_STATUS(cucopy_ep_put_short(ep, host, sizeof(host), (uint64_t)(uintptr_t)back), CUCOPY_OK);
    CHECKF(back[BUF - 1] == FILL, "host copy after the failures");
    CHECK_STATUS(cucopy_iface_progress(iface) >= 0 ? CUCOPY_OK : CUCOPY_ERR_INTERNAL, CUCOPY_OK);
}

static void foreign_fault_handler(int sig)
{
    (void)sig;
    static const char msg[] = "test_bad_input: FAIL: the program's own fault handler got a fault "
                              "from a cucopy host copy\n";
    ssize_t ignored = write(2, msg, sizeof(msg) - 1);
    (void)ignored;
    _exit(99);
}

/* Whether the kernel copies host memory here (process_vm_readv on this
 * process, as core/cpucopy.go does): where it does not (qemu-user answers
 * ENOSYS, some sandboxes EPERM) host copies take the Go copy, which relies
 * on Go's fault handler, so a replaced handler is outside what cucopy
 * promises there. */
static int kernel_copy_works(void)
{
    char a = 1, b = 0;
    struct iovec local = {&b, 1};
    struct iovec remote = {&a, 1};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == 1 && b == 1;
}

/* The same host copies of an unmapped address after the program replaced
 * the fault handlers (as gfortran's runtime or an MPI library may, after
 * iface_open): still a clear error, and the program's handler never runs. */
static void freed_pointers_foreign_handler(cucopy_ep_h ep)
{
    if (!kernel_copy_works()) {
        printf("test_bad_input: SKIP host copies under a foreign fault handler: no "
               "process_vm_readv here (%s)\n",
               strerror(errno));
        return;
    }
    struct sigaction sa;
    struct sigaction old_segv;
    struct sigaction old_bus;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = foreign_fault_handler;
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(SIGSEGV, &sa, &old_segv) == 0);
    REQUIRE(sigaction(SIGBUS, &sa, &old_bus) == 0);
    char *gone = unmapped_page();
    char host[BUF];
    memset(host, FILL, sizeof(host));
    uint64_t gone_addr = (uint64_t)(uintptr_t)gone;
    CHECK_STATUS(cucopy_ep_put_short(ep, host, 8, gone_addr), CUCOPY_ERR_INVALID_PARAM);
    CHECK_STATUS(cucopy_ep_get_short(ep, host, 8, gone_addr), CUCOPY_ERR_INVALID_PARAM);
    CHECKF(host[0] == FILL, "the failed copy changed the destination");
    REQUIRE(sigaction(SIGSEGV, &old_segv, NULL) == 0);
    REQUIRE(sigaction(SIGBUS, &old_bus, NULL) == 0);
}

static void dead_ep(cucopy_ep_h ep, const char *why)
{
    const int EP = CUCOPY_ERR_INVALID_HANDLE;
    cucopy_iov_t one = {host_a, 8};
    struct tc_comp c;
    tc_comp_init(&c, 1);
    tc_case_begin("ep after %s", why);
    CHECK_STATUS(cucopy_ep_put_short(ep, host_a, 8, addr(host_b)), EP);
    CHECK_STATUS(cucopy_ep_get_short(ep, host_b, 8, addr(host_a)), EP);
    CHECK_STATUS(cucopy_ep_put_zcopy(ep, &one, 1, addr(host_b), &c.comp), EP);
    CHECK_STATUS(cucopy_ep_get_zcopy(ep, &one, 1, addr(host_b), &c.comp), EP);
    CHECK_STATUS(cucopy_ep_flush(ep, 0, NULL), EP);
    CHECK_STATUS(cucopy_ep_destroy(ep), EP);
    CHECK(c.fired == 0 && c.comp.count == 1);
    tc_case_end();
}

static void dead_iface(cucopy_iface_h iface)
{
    const int EP = CUCOPY_ERR_INVALID_HANDLE;
    cucopy_iface_attr_t a;
    memset(&a, 0, sizeof(a));
    a.field_mask = CUCOPY_IFACE_ATTR_MAX_IOV;
    int fd = -1;
    cucopy_ep_h ep = NULL;
    tc_case_begin("iface after close");
    CHECK_STATUS(cucopy_iface_close(iface), EP);
    CHECK_STATUS(cucopy_iface_query(iface, &a), EP);
    CHECK(cucopy_iface_progress(iface) == EP);
    CHECK_STATUS(cucopy_iface_flush(iface, 0, NULL), EP);
    CHECK_STATUS(cucopy_iface_event_fd(iface, &fd), EP);
    CHECK_STATUS(cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP), EP);
    CHECK_STATUS(cucopy_ep_create(iface, &ep), EP);
    tc_case_end();
}

static void dead_context(cucopy_context_h ctx)
{
    const int EP = CUCOPY_ERR_INVALID_HANDLE;
    int n = 0;
    cucopy_iface_h i = NULL;
    tc_case_begin("context after destroy");
    CHECK_STATUS(cucopy_context_destroy(ctx), EP);
    CHECK_STATUS(cucopy_device_count(ctx, &n), EP);
    CHECK_STATUS(cucopy_iface_open(ctx, NULL, &i), EP);
    tc_case_end();
}

/* Invalid configuration in the environment, in a fresh process. */
static int env_child(const char *which)
{
    cucopy_context_h c = NULL;
    cucopy_iface_h i = NULL;
    int s;
    if (strcmp(which, "driver") == 0) {
        s = cucopy_context_create(NULL, &c);
        CHECK_STATUS(s, CUCOPY_ERR_NO_DRIVER);
    } else if (strcmp(which, "log") == 0) {
        s = cucopy_context_create(NULL, &c);
        CHECK_STATUS(s, CUCOPY_ERR_INVALID_PARAM);
    } else {
        /* CUCOPY_MAX_POLL / CUCOPY_MAX_EVENTS: refused by context_create or
         * at the latest by iface_open. */
        s = cucopy_context_create(NULL, &c);
        if (s == CUCOPY_OK)
            s = cucopy_iface_open(c, NULL, &i);
        CHECK_STATUS(s, CUCOPY_ERR_INVALID_PARAM);
    }
    printf("  child %s: %s: %s\n", which, tc_status_name(s), cucopy_last_error());
    return tc_finish();
}

static void env_case(const char *which, const char *var, const char *value)
{
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        setenv(var, value, 1);
        tc_exec_self((char *const[]){"test_bad_input", "--env-child", (char *)which, NULL});
        _exit(127);
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "environment %s=%s: child exit status 0x%x", var,
           value, (unsigned)st);
}

/* The environment read by context_create is the process's at the time of
 * the call: a host that sets CUCOPY_* with setenv() before creating the
 * context is heard. */
static void setenv_before_create(void)
{
    cucopy_context_h c = NULL;
    REQUIRE(setenv("CUCOPY_LOG_LEVEL", "loud", 1) == 0);
    int s = cucopy_context_create(NULL, &c);
    REQUIRE(unsetenv("CUCOPY_LOG_LEVEL") == 0);
    CHECKF(s == CUCOPY_ERR_INVALID_PARAM,
           "setenv(\"CUCOPY_LOG_LEVEL\", \"loud\") before cucopy_context_create(): got %s, "
           "expected CUCOPY_ERR_INVALID_PARAM (is the environment read only when the library "
           "loads?)", tc_status_name(s));
    if (s == CUCOPY_OK)
        CHECK_STATUS(cucopy_context_destroy(c), CUCOPY_OK);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--env-child") == 0) {
        setvbuf(stdout, NULL, _IOLBF, 0);
        return env_child(argv[2]);
    }
    tc_begin("test_bad_input", CUCOPY_MAX_DEVICES);

    const char *e = cucopy_last_error();
    CHECKF(e != NULL && e[0] == '\0', "last error before any call is \"%s\"",
           e != NULL ? e : "(NULL)");
    status_strings();
    CHECK_STATUS(cucopy_context_destroy(NULL), CUCOPY_OK);
    CHECK_STATUS(cucopy_iface_close(NULL), CUCOPY_OK);
    CHECK_STATUS(cucopy_ep_destroy(NULL), CUCOPY_OK);
    context_params();

    cucopy_context_h ctx = NULL;
    REQUIRE_OK(cucopy_context_create(NULL, &ctx));
    second_driver_path();
    last_error_rules(ctx);
    int n = -1;
    CHECK_STATUS(cucopy_device_count(NULL, &n), CUCOPY_ERR_INVALID_HANDLE);
    CHECK_STATUS(cucopy_device_count(ctx, NULL), CUCOPY_ERR_INVALID_PARAM);
    iface_params(ctx);

    cucopy_iface_h iface = NULL;
    REQUIRE_OK(cucopy_iface_open(ctx, NULL, &iface));
    size_t max_iov = iface_query(iface);
    iface_calls(iface);
    cucopy_ep_h ep = NULL;
    REQUIRE_OK(cucopy_ep_create(iface, &ep));
    struct tc_buf dev;
    tc_buf_alloc(&dev, TC_MEM_DEV0, BUF);
    ep_calls(iface, ep, max_iov, dev.dptr);
    freed_pointers(iface, ep);
    freed_pointers_foreign_handler(ep);

    CHECK_STATUS(cucopy_context_destroy(ctx), CUCOPY_ERR_BUSY); /* iface still open */
    CHECK_STATUS(cucopy_ep_destroy(ep), CUCOPY_OK);
    dead_ep(ep, "destroy");
    cucopy_ep_h orphan = NULL;
    REQUIRE_OK(cucopy_ep_create(iface, &orphan));
    CHECK_STATUS(cucopy_iface_close(iface), CUCOPY_OK);
    dead_ep(orphan, "its iface closed"); /* endpoints become invalid */
    dead_iface(iface);
    CHECK_STATUS(cucopy_context_destroy(ctx), CUCOPY_OK);
    dead_context(ctx);
    tc_buf_free(&dev);

    setenv_before_create();
    env_case("driver", "CUCOPY_CUDA_DRIVER", "/nonexistent/libcuda.so.1");
    env_case("log", "CUCOPY_LOG_LEVEL", "loud");
    env_case("max_poll", "CUCOPY_MAX_POLL", "0");
    env_case("max_events", "CUCOPY_MAX_EVENTS", "many");
    return tc_finish();
}
