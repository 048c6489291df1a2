/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * halo: a 1-D halo exchange across MPI ranks and all GPUs of each rank, with
 * one cucopy iface and one endpoint per rank driving every device.
 *
 *   mpirun -n R ./mpi_halo_c [steps [nx [ny]]]
 *
 * The global domain is a ring of R*D slabs (D = devices per rank); slab
 * g = rank*D + device. A slab is ny interior rows of nx 64-bit cells plus two
 * halo rows on each side, in device memory:
 *
 *   rows 0,1         left halo  = rows ny-2, ny-1 of slab g-1
 *   rows 2..ny+1     interior
 *   rows ny+2,ny+3   right halo = rows 0, 1 of slab g+1      (periodic)
 *
 * Each step:
 *  1. "compute": the interior gets new step-dependent values (put_zcopy from a
 *     pinned host buffer; a real code would run a kernel here);
 *  2. boundary strips whose neighbour lives on the same rank go device->device
 *     straight into the neighbour's halo (put_zcopy between two GPUs); strips
 *     whose neighbour is on another rank go device->pinned host (get_zcopy);
 *     completion is awaited with the event fd protocol on even steps and with
 *     progress + flush on odd steps;
 *  3. MPI_Sendrecv of the host strips with the neighbouring ranks;
 *  4. put_zcopy of the received strips host->device into the halos, flush;
 *  5. every halo cell of every device is read back (get_short) and checked.
 * At the end the error counts are summed over ranks; rank 0 prints
 * "halo: OK ranks=R devices=D steps=N" or the errors, and the exit status is
 * non-zero on any error.
 *
 * Like a CUDA program, it makes device 0's primary context current at start;
 * cucopy must leave it current (checked after every step and at the end).
 */
#define _GNU_SOURCE
#include "cucopy.h"
#include "halo_drv.h"

#include <mpi.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HALO_ROWS 2
#define MAX_REPORTS 8
#define POLL_TIMEOUT_MS 30000

static int rank, nranks, ndev;
static size_t nx = 1024, ny = 64;
static cucopy_context_h ctx;
static cucopy_iface_h iface;
static cucopy_ep_h ep;
static int event_fd = -1;
static int reports; /* error lines printed so far */

struct slab {
    uint64_t dev;       /* device address of row 0 (left halo) */
    uint64_t *interior; /* pinned host: the next interior values */
    uint64_t *check;    /* pinned host: read-back for verification */
};
static struct slab *slabs;
/* Pinned host staging strips for the neighbours on other ranks. */
static uint64_t *send_left, *send_right, *recv_left, *recv_right;

static void die(const char *what, cucopy_status_t s)
{
    fprintf(stderr, "halo[%d]: %s: %s (%s)\n", rank, what, cucopy_status_string(s),
            cucopy_last_error());
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* The value of interior cell (row i, column j) of slab g after step s. */
static uint64_t cell(int g, size_t i, size_t j, int s)
{
    return ((uint64_t)(s + 1) << 48) | ((uint64_t)g << 32) | ((uint64_t)i << 16) | j;
}

static size_t row_bytes(void) { return nx * sizeof(uint64_t); }
static size_t strip_bytes(void) { return HALO_ROWS * row_bytes(); }
static uint64_t row_addr(int d, size_t row) { return slabs[d].dev + row * row_bytes(); }

/* ---- completion tracking ------------------------------------------------- */

struct waiter {
    cucopy_completion_t comp;
    int fired;
};

static void waiter_done(cucopy_completion_t *self)
{
    ((struct waiter *)self)->fired = 1; /* comp is the first member */
}

static void waiter_init(struct waiter *w)
{
    w->comp.func = waiter_done;
    w->comp.count = 0;
    w->comp.status = CUCOPY_OK;
    w->fired = 0;
}

/* The operation returned: count it when it completes later. Callbacks only
 * run inside progress, so counting after the call is safe. */
static void track(struct waiter *w, cucopy_status_t s, const char *what)
{
    if (s == CUCOPY_INPROGRESS)
        w->comp.count++;
    else if (s != CUCOPY_OK)
        die(what, s);
}

static void progress(void)
{
    int n = cucopy_iface_progress(iface);
    if (n < 0)
        die("cucopy_iface_progress", n);
}

/* put/get zcopy of one contiguous piece; retries on back-pressure. */
static void zcopy(int get, void *local, size_t len, uint64_t remote, struct waiter *w)
{
    cucopy_iov_t iov = {local, len};
    for (;;) {
        cucopy_status_t s = get ? cucopy_ep_get_zcopy(ep, &iov, 1, remote, &w->comp)
                                : cucopy_ep_put_zcopy(ep, &iov, 1, remote, &w->comp);
        if (s == CUCOPY_ERR_NO_RESOURCE) {
            progress();
            continue;
        }
        track(w, s, get ? "cucopy_ep_get_zcopy" : "cucopy_ep_put_zcopy");
        return;
    }
}

static int waiter_finished(struct waiter *w)
{
    return w->comp.count == 0 ? 1 : w->fired;
}

/* Wait by polling: progress until the waiter fired, then flush the iface. */
static void wait_progress(struct waiter *w)
{
    while (!waiter_finished(w))
        progress();
    cucopy_status_t s;
    while ((s = cucopy_iface_flush(iface, 0, NULL)) == CUCOPY_INPROGRESS)
        progress();
    if (s != CUCOPY_OK)
        die("cucopy_iface_flush", s);
}

/* Wait with the event fd protocol of cucopy.h: arm; BUSY -> progress and
 * arm again; OK -> sleep in poll() until the fd is readable, then progress. */
static int wait_event_fd(struct waiter *w)
{
    int sleeps = 0;
    while (!waiter_finished(w)) {
        cucopy_status_t s = cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP);
        if (s == CUCOPY_ERR_BUSY) {
            progress();
            continue;
        }
        if (s != CUCOPY_OK)
            die("cucopy_iface_event_arm", s);
        struct pollfd p = {event_fd, POLLIN, 0};
        int ready;
        do /* EINTR: Go's preemption signal (SIGURG) may interrupt poll; retry */
            ready = poll(&p, 1, POLL_TIMEOUT_MS);
        while (ready < 0 && errno == EINTR);
        if (ready != 1) {
            fprintf(stderr, "halo[%d]: event fd not readable after %d ms with %d copies "
                            "pending (lost wake-up)\n", rank, POLL_TIMEOUT_MS, w->comp.count);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        sleeps++;
        progress();
    }
    return sleeps;
}

static void check_status(struct waiter *w, const char *what)
{
    if (w->comp.status != CUCOPY_OK)
        die(what, w->comp.status);
}

/* ---- the exchange --------------------------------------------------------- */

static int left_rank(void) { return (rank - 1 + nranks) % nranks; }
static int right_rank(void) { return (rank + 1) % nranks; }

static int step(int s, int *sleeps)
{
    struct waiter w;

    /* 1. new interior values */
    waiter_init(&w);
    for (int d = 0; d < ndev; d++) {
        int g = rank * ndev + d;
        for (size_t i = 0; i < ny; i++)
            for (size_t j = 0; j < nx; j++)
                slabs[d].interior[i * nx + j] = cell(g, i, j, s);
        zcopy(0, slabs[d].interior, ny * row_bytes(), row_addr(d, HALO_ROWS), &w);
    }
    wait_progress(&w);
    check_status(&w, "interior update");

    /* 2. boundary strips: device->device within the rank, device->host for
     *    the neighbours on other ranks. With one rank the ring closes on
     *    this rank and everything is device->device. */
    waiter_init(&w);
    for (int d = 0; d < ndev; d++) {
        uint64_t left_strip = row_addr(d, HALO_ROWS);
        uint64_t right_strip = row_addr(d, ny);
        /* left strip -> right halo of the left neighbour */
        if (d > 0 || nranks == 1) {
            int n = (d - 1 + ndev) % ndev;
            zcopy(0, (void *)(uintptr_t)left_strip, strip_bytes(), row_addr(n, ny + HALO_ROWS),
                  &w);
        } else {
            zcopy(1, send_left, strip_bytes(), left_strip, &w);
        }
        /* right strip -> left halo of the right neighbour */
        if (d < ndev - 1 || nranks == 1) {
            int n = (d + 1) % ndev;
            zcopy(0, (void *)(uintptr_t)right_strip, strip_bytes(), row_addr(n, 0), &w);
        } else {
            zcopy(1, send_right, strip_bytes(), right_strip, &w);
        }
    }
    if (s % 2 == 0)
        *sleeps += wait_event_fd(&w);
    else
        wait_progress(&w);
    check_status(&w, "boundary strips");

    /* 3. MPI between ranks, 4. received strips host->device into the halos */
    if (nranks > 1) {
        int count = (int)(HALO_ROWS * nx);
        MPI_Sendrecv(send_left, count, MPI_UINT64_T, left_rank(), 1, recv_right, count,
                     MPI_UINT64_T, right_rank(), 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(send_right, count, MPI_UINT64_T, right_rank(), 2, recv_left, count,
                     MPI_UINT64_T, left_rank(), 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        waiter_init(&w);
        zcopy(0, recv_left, strip_bytes(), row_addr(0, 0), &w);
        zcopy(0, recv_right, strip_bytes(), row_addr(ndev - 1, ny + HALO_ROWS), &w);
        wait_progress(&w);
        check_status(&w, "received strips");
    }

    /* 5. verify every halo cell */
    int errors = 0;
    int total = nranks * ndev;
    for (int d = 0; d < ndev; d++) {
        int g = rank * ndev + d;
        int gl = (g - 1 + total) % total, gr = (g + 1) % total;
        uint64_t *got = slabs[d].check;
        cucopy_status_t st = cucopy_ep_get_short(ep, got, strip_bytes(), row_addr(d, 0));
        if (st == CUCOPY_OK)
            st = cucopy_ep_get_short(ep, got + HALO_ROWS * nx, strip_bytes(),
                                     row_addr(d, ny + HALO_ROWS));
        if (st != CUCOPY_OK)
            die("cucopy_ep_get_short", st);
        for (size_t h = 0; h < 2 * HALO_ROWS; h++) {
            int left = h < HALO_ROWS;
            int from = left ? gl : gr;
            size_t src_row = left ? ny - HALO_ROWS + h : h - HALO_ROWS;
            for (size_t j = 0; j < nx; j++) {
                uint64_t want = cell(from, src_row, j, s);
                uint64_t have = got[h * nx + j];
                if (have == want)
                    continue;
                errors++;
                if (reports++ < MAX_REPORTS)
                    fprintf(stderr,
                            "halo[%d]: step %d device %d (slab %d) %s halo row %zu col %zu: "
                            "0x%016llx, expected 0x%016llx (slab %d row %zu)\n",
                            rank, s, d, g, left ? "left" : "right", left ? h : h - HALO_ROWS,
                            j, (unsigned long long)have, (unsigned long long)want, from,
                            src_row);
            }
        }
    }
    if (!halo_drv_check_current()) {
        fprintf(stderr, "halo[%d]: step %d: device 0's primary context is no longer current\n",
                rank, s);
        errors++;
    }
    return errors;
}

int main(int argc, char **argv)
{
    int steps = 10;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc > 1)
        steps = atoi(argv[1]);
    if (argc > 2)
        nx = (size_t)strtoul(argv[2], NULL, 0);
    if (argc > 3)
        ny = (size_t)strtoul(argv[3], NULL, 0);
    if (steps < 1 || steps > 65535 || nx < 1 || nx > 65536 || ny < 2 * HALO_ROWS ||
        ny > 65536) {
        if (rank == 0)
            fprintf(stderr, "usage: %s [steps 1..65535 [nx 1..65536 [ny 4..65536]]]\n",
                    argv[0]);
        MPI_Finalize();
        return 2;
    }

    /* What a CUDA program does first: device 0's primary context current. */
    int drv_devices = halo_drv_init();
    if (drv_devices < 1)
        MPI_Abort(MPI_COMM_WORLD, 2);

    cucopy_status_t s = cucopy_context_create(NULL, &ctx);
    if (s != CUCOPY_OK)
        die("cucopy_context_create", s);
    if ((s = cucopy_device_count(ctx, &ndev)) != CUCOPY_OK)
        die("cucopy_device_count", s);
    int ndev_min, ndev_max;
    MPI_Allreduce(&ndev, &ndev_min, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&ndev, &ndev_max, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (ndev_min != ndev_max || ndev < 1 || ndev != drv_devices ||
        (size_t)nranks * (size_t)ndev > 65535) {
        if (rank == 0)
            fprintf(stderr, "halo: ranks see %d..%d devices (driver: %d); need the same "
                            "number >= 1 on every rank\n", ndev_min, ndev_max, drv_devices);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    cucopy_iface_params_t ip = {.field_mask = CUCOPY_IFACE_PARAM_THREAD_MODE,
                                .thread_mode = CUCOPY_THREAD_MODE_SINGLE};
    if ((s = cucopy_iface_open(ctx, &ip, &iface)) != CUCOPY_OK)
        die("cucopy_iface_open", s);
    cucopy_iface_attr_t attr = {.field_mask = CUCOPY_IFACE_ATTR_CAP_FLAGS};
    if ((s = cucopy_iface_query(iface, &attr)) != CUCOPY_OK)
        die("cucopy_iface_query", s);
    if (ndev > 1 && !(attr.cap_flags & CUCOPY_IFACE_CAP_CROSS_DEVICE)) {
        fprintf(stderr, "halo[%d]: the iface cannot copy between GPUs\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if ((s = cucopy_iface_event_fd(iface, &event_fd)) != CUCOPY_OK)
        die("cucopy_iface_event_fd", s);
    if ((s = cucopy_ep_create(iface, &ep)) != CUCOPY_OK)
        die("cucopy_ep_create", s);

    /* Memory: one slab per device, pinned host buffers for staging. */
    size_t slab_bytes = (ny + 2 * HALO_ROWS) * row_bytes();
    slabs = calloc((size_t)ndev, sizeof(*slabs));
    if (slabs == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (int d = 0; d < ndev; d++) {
        slabs[d].dev = halo_drv_dev_alloc(d, slab_bytes);
        slabs[d].interior = halo_drv_host_alloc(ny * row_bytes());
        slabs[d].check = halo_drv_host_alloc(2 * strip_bytes());
        if (slabs[d].dev == 0 || slabs[d].interior == NULL || slabs[d].check == NULL)
            MPI_Abort(MPI_COMM_WORLD, 2);
        /* Initial pattern everywhere, halos included: rank/device dependent,
         * never a valid cell value (step 0 of cell() is 1 << 48). */
        uint64_t *init = malloc(slab_bytes);
        if (init == NULL)
            MPI_Abort(MPI_COMM_WORLD, 2);
        for (size_t k = 0; k < slab_bytes / sizeof(uint64_t); k++)
            init[k] = 0xdead000000000000ull | ((uint64_t)rank << 40) | ((uint64_t)d << 32) | k;
        if ((s = cucopy_ep_put_short(ep, init, slab_bytes, slabs[d].dev)) != CUCOPY_OK)
            die("cucopy_ep_put_short", s);
        free(init);
    }
    send_left = halo_drv_host_alloc(strip_bytes());
    send_right = halo_drv_host_alloc(strip_bytes());
    recv_left = halo_drv_host_alloc(strip_bytes());
    recv_right = halo_drv_host_alloc(strip_bytes());
    if (!send_left || !send_right || !recv_left || !recv_right)
        MPI_Abort(MPI_COMM_WORLD, 2);

    int errors = 0, sleeps = 0;
    for (int t = 0; t < steps; t++)
        errors += step(t, &sleeps);

    if (!halo_drv_check_current()) {
        fprintf(stderr, "halo[%d]: device 0's primary context is not current at the end\n",
                rank);
        errors++;
    }

    /* Tear down: cucopy first, then the memory, then the contexts. */
    cucopy_ep_destroy(ep);
    if ((s = cucopy_iface_close(iface)) != CUCOPY_OK)
        die("cucopy_iface_close", s);
    if ((s = cucopy_context_destroy(ctx)) != CUCOPY_OK)
        die("cucopy_context_destroy", s);
    for (int d = 0; d < ndev; d++) {
        if (!halo_drv_dev_free(d, slabs[d].dev) || !halo_drv_host_free(slabs[d].interior) ||
            !halo_drv_host_free(slabs[d].check))
            errors++;
    }
    if (!halo_drv_host_free(send_left) || !halo_drv_host_free(send_right) ||
        !halo_drv_host_free(recv_left) || !halo_drv_host_free(recv_right) || !halo_drv_fini())
        errors++;
    free(slabs);

    int total_errors = 0, total_sleeps = 0;
    MPI_Allreduce(&errors, &total_errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&sleeps, &total_sleeps, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (total_errors == 0)
            printf("halo: OK ranks=%d devices=%d steps=%d (nx=%zu ny=%zu, %d event-fd "
                   "wake-ups)\n", nranks, ndev, steps, nx, ny, total_sleeps);
        else
            printf("halo: FAILED ranks=%d devices=%d steps=%d: %d errors\n", nranks, ndev, steps,
                   total_errors);
        fflush(stdout);
    }
    MPI_Finalize();
    return total_errors == 0 ? 0 : 1;
}
