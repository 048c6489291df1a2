/* SPDX-License-Identifier: BSD-3-Clause
 *
 * A program built against an installed cucopy (find_package or pkg-config):
 * context, iface, endpoint, round trips of copies, data checked, "OK".
 * Usage: consumer [expected_device_count]
 *
 * host -> host copies always; host -> device -> device -> host when the CUDA
 * driver ($CUCOPY_CUDA_DRIVER, else libcuda.so.1) can be loaded here to
 * allocate device memory (cucopy itself has no allocator).
 */
#include <cucopy.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                              \
    do {                                                                         \
        cucopy_status_t st_ = (call);                                            \
        if (st_ != CUCOPY_OK) {                                                  \
            fprintf(stderr, "FAIL %s: %s (%s)\n", #call, cucopy_status_string(st_), \
                    cucopy_last_error());                                        \
            return 1;                                                            \
        }                                                                        \
    } while (0)

enum { N = 1 << 16 };

static void done(cucopy_completion_t *c) { (void)c; }

/* The few driver calls needed to get device memory (CUDA driver API types). */
typedef int (*cu_init_t)(unsigned);
typedef int (*cu_device_get_t)(int *, int);
typedef int (*cu_retain_t)(void **, int);
typedef int (*cu_release_t)(int);
typedef int (*cu_set_current_t)(void *);
typedef int (*cu_alloc_t)(unsigned long long *, size_t);
typedef int (*cu_free_t)(unsigned long long);
static cu_alloc_t cu_alloc;
static cu_free_t cu_free;
static cu_set_current_t cu_set_current;
static cu_release_t cu_release;

/* Allocate n bytes on each of the first ndev devices; 0 when the driver is not usable. */
static int device_buffers(int ndev, size_t n, int *devs, void **ctxs, unsigned long long *bufs)
{
    const char *path = getenv("CUCOPY_CUDA_DRIVER");
    void *h = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return 0;
    cu_init_t cu_init = (cu_init_t)dlsym(h, "cuInit");
    cu_device_get_t cu_device_get = (cu_device_get_t)dlsym(h, "cuDeviceGet");
    cu_retain_t cu_retain = (cu_retain_t)dlsym(h, "cuDevicePrimaryCtxRetain");
    cu_release = (cu_release_t)dlsym(h, "cuDevicePrimaryCtxRelease_v2");
    cu_set_current = (cu_set_current_t)dlsym(h, "cuCtxSetCurrent");
    cu_alloc = (cu_alloc_t)dlsym(h, "cuMemAlloc_v2");
    cu_free = (cu_free_t)dlsym(h, "cuMemFree_v2");
    if (!cu_init || !cu_device_get || !cu_retain || !cu_release || !cu_set_current ||
        !cu_alloc || !cu_free || cu_init(0) != 0)
        return 0;
    for (int d = 0; d < ndev; d++) {
        if (cu_device_get(&devs[d], d) != 0 || cu_retain(&ctxs[d], devs[d]) != 0 ||
            cu_set_current(ctxs[d]) != 0 || cu_alloc(&bufs[d], n) != 0) {
            fprintf(stderr, "FAIL device memory on device %d\n", d);
            exit(1);
        }
    }
    cu_set_current(NULL);
    return 1;
}

/* zcopy of one buffer to remote, completed through progress. */
static cucopy_status_t put_zcopy(cucopy_iface_h iface, cucopy_ep_h ep, void *buf, size_t n,
                                 uint64_t remote)
{
    cucopy_iov_t iov = {buf, n};
    cucopy_completion_t comp = {done, 1, CUCOPY_OK};
    cucopy_status_t st = cucopy_ep_put_zcopy(ep, &iov, 1, remote, &comp);
    if (st != CUCOPY_INPROGRESS)
        return st;
    while (comp.count > 0)
        cucopy_iface_progress(iface);
    return comp.status;
}

int main(int argc, char **argv)
{
    if (cucopy_get_version() != CUCOPY_VERSION) {
        fprintf(stderr, "FAIL version: library %u, header %u\n", cucopy_get_version(),
                (unsigned)CUCOPY_VERSION);
        return 1;
    }
    cucopy_context_h ctx;
    cucopy_iface_h iface;
    cucopy_ep_h ep;
    int ndev = -1;
    CHECK(cucopy_context_create(NULL, &ctx));
    CHECK(cucopy_device_count(ctx, &ndev));
    printf("cucopy %u: %d device(s)\n", cucopy_get_version(), ndev);
    if (argc > 1 && ndev != atoi(argv[1])) {
        fprintf(stderr, "FAIL device count %d, expected %s\n", ndev, argv[1]);
        return 1;
    }
    CHECK(cucopy_iface_open(ctx, NULL, &iface));
    CHECK(cucopy_ep_create(iface, &ep));

    unsigned char *src = malloc(N), *mid = malloc(N), *dst = malloc(N);
    if (!src || !mid || !dst)
        return 1;
    for (int i = 0; i < N; i++)
        src[i] = (unsigned char)(i * 7 + 1);

    /* short: src -> mid -> dst */
    memset(mid, 0, N);
    memset(dst, 0, N);
    CHECK(cucopy_ep_put_short(ep, src, N, (uint64_t)(uintptr_t)mid));
    CHECK(cucopy_ep_get_short(ep, dst, N, (uint64_t)(uintptr_t)mid));
    if (memcmp(src, dst, N) != 0) {
        fprintf(stderr, "FAIL short round trip: data differs\n");
        return 1;
    }

    /* zcopy of two iov pieces: src -> mid -> dst, completed through progress */
    memset(mid, 0, N);
    memset(dst, 0, N);
    cucopy_iov_t iov[2] = {{src, N / 2}, {src + N / 2, N / 2}};
    cucopy_completion_t comp = {done, 1, CUCOPY_OK};
    cucopy_status_t st = cucopy_ep_put_zcopy(ep, iov, 2, (uint64_t)(uintptr_t)mid, &comp);
    if (st == CUCOPY_INPROGRESS)
        while (comp.count > 0)
            cucopy_iface_progress(iface);
    else
        CHECK(st);
    CHECK(comp.status);
    cucopy_iov_t back = {dst, N};
    comp.count = 1;
    st = cucopy_ep_get_zcopy(ep, &back, 1, (uint64_t)(uintptr_t)mid, &comp);
    if (st == CUCOPY_INPROGRESS)
        while (comp.count > 0)
            cucopy_iface_progress(iface);
    else
        CHECK(st);
    CHECK(comp.status);
    if (memcmp(src, dst, N) != 0) {
        fprintf(stderr, "FAIL zcopy round trip: data differs\n");
        return 1;
    }

    /* host -> device 0 (short) -> last device (zcopy, cross-device) -> host (zcopy) */
    enum { MAXDEV = 16 };
    int devs[MAXDEV];
    void *ctxs[MAXDEV];
    unsigned long long dbuf[MAXDEV];
    int nd = ndev < MAXDEV ? ndev : MAXDEV;
    if (nd > 0 && device_buffers(nd, N, devs, ctxs, dbuf)) {
        int last = nd - 1;
        memset(dst, 0, N);
        CHECK(cucopy_ep_put_short(ep, src, N, dbuf[0]));
        CHECK(put_zcopy(iface, ep, (void *)(uintptr_t)dbuf[0], N, dbuf[last]));
        cucopy_iov_t back = {dst, N};
        cucopy_completion_t comp = {done, 1, CUCOPY_OK};
        st = cucopy_ep_get_zcopy(ep, &back, 1, dbuf[last], &comp);
        if (st == CUCOPY_INPROGRESS)
            while (comp.count > 0)
                cucopy_iface_progress(iface);
        else
            CHECK(st);
        CHECK(comp.status);
        if (memcmp(src, dst, N) != 0) {
            fprintf(stderr, "FAIL host -> device 0 -> device %d -> host: data differs\n", last);
            return 1;
        }
        printf("host -> device 0 -> device %d -> host: data OK\n", last);
        for (int d = 0; d < nd; d++) {
            cu_set_current(ctxs[d]);
            cu_free(dbuf[d]);
            cu_set_current(NULL);
            cu_release(devs[d]);
        }
    } else {
        printf("no CUDA driver to allocate device memory: host copies only\n");
    }

    CHECK(cucopy_ep_flush(ep, 0, NULL));
    CHECK(cucopy_ep_destroy(ep));
    CHECK(cucopy_iface_close(iface));
    CHECK(cucopy_context_destroy(ctx));
    free(src);
    free(mid);
    free(dst);
    printf("OK\n");
    return 0;
}
