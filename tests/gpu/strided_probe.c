/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the driver charges for strided copies between a GPU and pinned host
 * memory, without cucopy: the numbers behind how the MPI interposer gathers
 * and scatters non-contiguous datatypes (docs/mpi.md). The layouts are the
 * faces of a 256 x 256 x 256 array of doubles (x fastest):
 *   x-face  65536 blocks of 8 B, 2048 B apart
 *   y-face  256 blocks of 2 KiB, 512 KiB apart
 * each packed into (or unpacked from) 512 KiB of contiguous pinned memory, by
 *   contig    one cuMemcpyDtoHAsync of the 512 KiB (the bar)
 *   2d        one cuMemcpy2DAsync (width = block, height = blocks)
 *   batch     cuMemcpyBatchAsync, one entry per block
 *   2d-d2d+   cuMemcpy2DAsync into a contiguous device buffer, then one
 *             contiguous copy to the host (the device packs itself)
 * and wider x-face elements (16 .. 256 B) to see where 2-D copies catch up.
 * Each row: microseconds per copy (issued and synchronized, median of 21
 * rounds of 10), GB/s of payload, and its ratio to contig's GB/s.
 *
 *   gcc -O2 -std=gnu11 -I/usr/local/cuda/include tests/gpu/strided_probe.c \
 *       -L/usr/local/cuda/lib64/stubs -lcuda -o strided_probe && ./strided_probe
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(call)                                                                    \
    do {                                                                            \
        CUresult r_ = (call);                                                       \
        if (r_ != CUDA_SUCCESS) {                                                   \
            const char *n_ = "?";                                                   \
            cuGetErrorName(r_, &n_);                                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, n_);      \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static CUstream stream;
static CUdeviceptr dev, devpack;
static char *host;
#define PAYLOAD (512u << 10)

enum kind { CONTIG, TWO_D, BATCH, TWO_D_DEV };

struct shape {
    size_t width, height, pitch;
};

static size_t *bsizes;
static CUdeviceptr *bsrc, *bdst;

static void issue(enum kind k, struct shape s, int to_device)
{
    size_t bytes = s.width * s.height;
    if (k == CONTIG) {
        if (to_device)
            CK(cuMemcpyHtoDAsync(dev, host, bytes, stream));
        else
            CK(cuMemcpyDtoHAsync(host, dev, bytes, stream));
        return;
    }
    if (k == TWO_D || k == TWO_D_DEV) {
        CUDA_MEMCPY2D m;
        memset(&m, 0, sizeof m);
        m.WidthInBytes = s.width;
        m.Height = s.height;
        CUdeviceptr packed_dev = k == TWO_D_DEV ? devpack : 0;
        if (k == TWO_D_DEV && to_device)
            CK(cuMemcpyHtoDAsync(devpack, host, bytes, stream));
        if (to_device) {
            if (k == TWO_D_DEV) {
                m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
                m.srcDevice = packed_dev;
            } else {
                m.srcMemoryType = CU_MEMORYTYPE_HOST;
                m.srcHost = host;
            }
            m.srcPitch = s.width;
            m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
            m.dstDevice = dev;
            m.dstPitch = s.pitch;
        } else {
            m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
            m.srcDevice = dev;
            m.srcPitch = s.pitch;
            if (k == TWO_D_DEV) {
                m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
                m.dstDevice = packed_dev;
            } else {
                m.dstMemoryType = CU_MEMORYTYPE_HOST;
                m.dstHost = host;
            }
            m.dstPitch = s.width;
        }
        CK(cuMemcpy2DAsync(&m, stream));
        if (k == TWO_D_DEV && !to_device)
            CK(cuMemcpyDtoHAsync(host, devpack, bytes, stream));
        return;
    }
    for (size_t i = 0; i < s.height; i++) {
        CUdeviceptr d = dev + i * s.pitch, h = (CUdeviceptr)(uintptr_t)(host + i * s.width);
        bsrc[i] = to_device ? h : d;
        bdst[i] = to_device ? d : h;
        bsizes[i] = s.width;
    }
    CUmemcpyAttributes attr;
    memset(&attr, 0, sizeof attr);
    attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    attr.srcLocHint.type = to_device ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
    attr.dstLocHint.type = to_device ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST;
    size_t zero = 0;
    CK(cuMemcpyBatchAsync(bdst, bsrc, bsizes, s.height, &attr, &zero, 1, stream));
}

static double time_us(enum kind k, struct shape s, int to_device)
{
    double t[21];
    issue(k, s, to_device); /* warm */
    CK(cuStreamSynchronize(stream));
    for (int r = 0; r < 21; r++) {
        double t0 = now_us();
        for (int i = 0; i < 10; i++) {
            issue(k, s, to_device);
            CK(cuStreamSynchronize(stream));
        }
        t[r] = (now_us() - t0) / 10;
    }
    qsort(t, 21, sizeof t[0], cmp_double);
    return t[10];
}

static void check_xface(size_t width, size_t pitch, size_t height)
{
    /* Pattern on the device, one 2-D gather, compare with the host's view. */
    size_t span = pitch * height;
    unsigned char *pat = malloc(span);
    for (size_t i = 0; i < span; i++)
        pat[i] = (unsigned char)(i * 131 + 7);
    CK(cuMemcpyHtoD(dev, pat, span));
    struct shape s = {width, height, pitch};
    issue(TWO_D, s, 0);
    CK(cuStreamSynchronize(stream));
    for (size_t r = 0; r < height; r++)
        if (memcmp(host + r * width, pat + r * pitch, width) != 0) {
            fprintf(stderr, "2-D gather wrong at row %zu\n", r);
            exit(1);
        }
    free(pat);
}

static void row(const char *name, struct shape s, double contig_gbs)
{
    static const char *kinds[] = {"2d", "batch", "2d-d2d+"};
    for (int dir = 0; dir < 2; dir++) {
        for (int k = TWO_D; k <= TWO_D_DEV; k++) {
            double us = time_us((enum kind)k, s, dir);
            printf("%-10s %-4s %-8s %6zu B x %6zu  %9.1f us  %7.2f GB/s  ratio %.2f\n", name,
                   dir ? "h2d" : "d2h", kinds[k - 1], s.width, s.height, us,
                   (double)(s.width * s.height) / us / 1e3,
                   (double)(s.width * s.height) / us / 1e3 / contig_gbs);
        }
    }
}

int main(void)
{
    CUdevice d;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, d));
    CK(cuCtxSetCurrent(ctx));
    CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    size_t span = (size_t)256 * 256 * 256 * 8;
    CK(cuMemAlloc(&dev, span));
    CK(cuMemAlloc(&devpack, PAYLOAD * 32));
    CK(cuMemHostAlloc((void **)&host, PAYLOAD * 32, 0));
    bsizes = malloc(65536 * sizeof *bsizes);
    bsrc = malloc(65536 * sizeof *bsrc);
    bdst = malloc(65536 * sizeof *bdst);
    check_xface(8, 2048, 65536);
    puts("# strided copies, 512 KiB payload, pinned host memory, median us per copy");
    struct shape contig = {PAYLOAD, 1, PAYLOAD};
    double c_d2h = time_us(CONTIG, contig, 0), c_h2d = time_us(CONTIG, contig, 1);
    printf("contig     d2h           %9.1f us  %7.2f GB/s\n", c_d2h, PAYLOAD / c_d2h / 1e3);
    printf("contig     h2d           %9.1f us  %7.2f GB/s\n", c_h2d, PAYLOAD / c_h2d / 1e3);
    double c = PAYLOAD / ((c_d2h + c_h2d) / 2) / 1e3; /* contiguous GB/s */
    row("x-face", (struct shape){8, 65536, 2048}, c);
    row("y-face", (struct shape){2048, 256, 512u << 10}, c);
    for (size_t w = 16; w <= 256; w *= 2)
        row("x-wide", (struct shape){w, 65536, 2048 > w ? 2048 : w * 2}, c);
    return 0;
}
