/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cucopy quick start: context, iface, endpoint, a device buffer, an
 * asynchronous copy with a completion, a progress loop, a cross-GPU copy
 * waited for on the event fd, flush, and teardown.
 *
 * Build (installed prefix):  cc quickstart.c $(pkg-config --cflags --libs cucopy)
 * Run without a GPU:         CUCOPY_CUDA_DRIVER=<build>/fakecuda/libcuda.so.1 ./a.out
 * See docs/quickstart.md.
 */
#include <cucopy.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N (1u << 20) /* bytes per buffer */

/* Stop with the status and the thread's last-error detail on any error. */
#define CHECK(call)                                                                 \
    do {                                                                            \
        cucopy_status_t s_ = (call);                                                \
        if (s_ < 0) {                                                               \
            fprintf(stderr, "%s: %s\n  %s\n", #call, cucopy_status_string(s_),      \
                    cucopy_last_error());                                           \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

/* A completion with a flag: the cucopy_completion_t comes first, so the
 * callback gets from `self` to the whole object with a cast. */
struct request {
    cucopy_completion_t comp;
    int done;
};

static void on_done(cucopy_completion_t *self)
{
    struct request *req = (struct request *)self; /* comp is the first member */
    req->done = 1; /* runs inside cucopy_iface_progress(), on this thread */
}

static void request_init(struct request *req)
{
    req->comp.func = on_done;
    req->comp.count = 1; /* one operation reports to it */
    req->comp.status = CUCOPY_OK;
    req->done = 0;
}

/* Issue a put_zcopy; on back-pressure (NO_RESOURCE), progress and retry.
 * Returns OK (finished at once: req is not touched), INPROGRESS, or exits. */
static cucopy_status_t put(cucopy_iface_h iface, cucopy_ep_h ep, const cucopy_iov_t *iov,
                           size_t iovcnt, void *dst, struct request *req)
{
    for (;;) {
        cucopy_status_t s = cucopy_ep_put_zcopy(ep, iov, iovcnt, (uint64_t)(uintptr_t)dst,
                                                &req->comp);
        if (s != CUCOPY_ERR_NO_RESOURCE) {
            CHECK(s);
            return s;
        }
        CHECK(cucopy_iface_progress(iface)); /* frees events; then retry whole */
    }
}

/* Variant 1: busy polling. */
static void wait_polling(cucopy_iface_h iface, struct request *req)
{
    while (!req->done)
        CHECK(cucopy_iface_progress(iface));
}

/* Variant 2: sleep on the iface's event fd (arm, poll, progress). */
static void wait_event_fd(cucopy_iface_h iface, struct request *req)
{
    int fd;
    CHECK(cucopy_iface_event_fd(iface, &fd));
    while (!req->done) {
        cucopy_status_t s = cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP);
        if (s == CUCOPY_OK) { /* armed: nothing ready yet, sleep until a copy ends */
            struct pollfd p = {.fd = fd, .events = POLLIN};
            int ready;
            do /* EINTR: Go's preemption signal (SIGURG) may interrupt poll; retry */
                ready = poll(&p, 1, 10000);
            while (ready < 0 && errno == EINTR);
            if (ready <= 0) {
                fprintf(stderr, "no completion within 10 s\n");
                exit(1);
            }
        } else if (s != CUCOPY_ERR_BUSY) { /* BUSY: completions are ready now */
            CHECK(s);
        }
        CHECK(cucopy_iface_progress(iface)); /* runs on_done */
    }
}

static void *alloc_device(cucopy_context_h ctx, int device)
{
    cucopy_mem_alloc_params_t ap = {
        .field_mask = CUCOPY_MEM_ALLOC_PARAM_LENGTH | CUCOPY_MEM_ALLOC_PARAM_DEVICE |
                      CUCOPY_MEM_ALLOC_PARAM_FLAGS,
        .length = N,
        .device = device,
        /* This program uses no CUDA itself, so the device's primary context
         * is inactive: allow cucopy to activate (retain) it. */
        .flags = CUCOPY_MEM_ALLOC_FLAG_ACTIVATE,
    };
    void *p;
    CHECK(cucopy_mem_alloc(ctx, &ap, &p));
    return p;
}

int main(void)
{
    /* 1. Context: loads the driver ($CUCOPY_CUDA_DRIVER or libcuda.so.1). */
    cucopy_context_h ctx;
    CHECK(cucopy_context_create(NULL, &ctx));
    int ndev;
    CHECK(cucopy_device_count(ctx, &ndev));
    printf("cucopy %u, %d device(s)\n", cucopy_get_version(), ndev);
    if (ndev < 1) {
        fprintf(stderr, "no CUDA device\n");
        return 1;
    }

    /* 2. Interface and endpoint. One iface serves every device. */
    cucopy_iface_params_t ip = {.field_mask = CUCOPY_IFACE_PARAM_THREAD_MODE,
                                .thread_mode = CUCOPY_THREAD_MODE_SINGLE};
    cucopy_iface_h iface;
    CHECK(cucopy_iface_open(ctx, &ip, &iface));
    cucopy_iface_attr_t attr = {.field_mask = CUCOPY_IFACE_ATTR_MAX_IOV |
                                              CUCOPY_IFACE_ATTR_CAP_FLAGS};
    CHECK(cucopy_iface_query(iface, &attr));
    printf("max_iov %zu, cross-device copies %s\n", attr.max_iov,
           (attr.cap_flags & CUCOPY_IFACE_CAP_CROSS_DEVICE) ? "yes" : "no");
    cucopy_ep_h ep;
    CHECK(cucopy_ep_create(iface, &ep));

    /* 3. Memory: a device buffer on GPU 0, a host buffer pinned by cucopy. */
    void *dev0 = alloc_device(ctx, 0);
    unsigned char *host = malloc(N), *back = malloc(N);
    for (unsigned i = 0; i < N; i++)
        host[i] = (unsigned char)(i * 7 + 1);
    cucopy_memh_h memh;
    CHECK(cucopy_mem_reg(ctx, host, N, 0, &memh));

    /* 4. Host -> GPU 0, asynchronous, in two iov entries (both are copied,
     *    back to back), waited for by polling progress. */
    cucopy_iov_t iov[2] = {{host, N / 2}, {host + N / 2, N / 2}};
    struct request req;
    request_init(&req);
    if (put(iface, ep, iov, 2, dev0, &req) == CUCOPY_INPROGRESS)
        wait_polling(iface, &req);
    CHECK(req.comp.status); /* first error of the operation, if any */
    printf("host -> GPU 0: done\n");

    /* 5. GPU 0 -> GPU 1 (when there is one), waited for on the event fd. The
     *    copy runs in GPU 0's context, found from the buffer: nothing needs
     *    to be current on this thread. */
    void *src = dev0, *dev1 = NULL;
    if (ndev > 1) {
        dev1 = alloc_device(ctx, 1);
        cucopy_iov_t one = {dev0, N};
        request_init(&req);
        if (put(iface, ep, &one, 1, dev1, &req) == CUCOPY_INPROGRESS)
            wait_event_fd(iface, &req);
        CHECK(req.comp.status);
        printf("GPU 0 -> GPU 1: done\n");
        src = dev1;
    }

    /* 6. Several copies in flight, then one flush for all of them. */
    enum { PIECES = 8 };
    cucopy_iov_t part[PIECES];
    for (int k = 0; k < PIECES; k++) {
        part[k].buffer = back + (size_t)k * (N / PIECES);
        part[k].length = N / PIECES;
        memset(part[k].buffer, 0, part[k].length);
        /* get_zcopy: remote (device) -> local iov; no completion wanted */
        cucopy_status_t s;
        while ((s = cucopy_ep_get_zcopy(ep, &part[k], 1,
                                        (uint64_t)(uintptr_t)src + (uint64_t)k * (N / PIECES),
                                        NULL)) == CUCOPY_ERR_NO_RESOURCE)
            CHECK(cucopy_iface_progress(iface));
        CHECK(s);
    }
    struct request fl;
    request_init(&fl);
    cucopy_status_t s = cucopy_iface_flush(iface, 0, &fl.comp);
    CHECK(s);
    if (s == CUCOPY_INPROGRESS)
        wait_polling(iface, &fl);
    int ok = memcmp(host, back, N) == 0;
    printf("flush: done, data %s\n", ok ? "ok" : "WRONG");

    /* 7. A synchronous short copy: returns once the data is in place. */
    unsigned char word[8];
    CHECK(cucopy_ep_get_short(ep, word, sizeof word, (uint64_t)(uintptr_t)src));
    ok = ok && memcmp(word, host, sizeof word) == 0;
    printf("get_short: %s\n", ok ? "ok" : "WRONG");

    /* 8. Teardown: endpoint, iface (releases streams, events, retains),
     *    memory, then the context. */
    CHECK(cucopy_ep_destroy(ep));
    CHECK(cucopy_iface_close(iface));
    CHECK(cucopy_mem_dereg(ctx, memh));
    CHECK(cucopy_mem_free(ctx, dev0));
    if (dev1 != NULL)
        CHECK(cucopy_mem_free(ctx, dev1));
    CHECK(cucopy_context_destroy(ctx));
    free(host);
    free(back);
    return ok ? 0 : 1;
}
