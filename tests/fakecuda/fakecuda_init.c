/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Loading, initialisation and the calls that need no device: the
 * environment knobs (read when the fake is loaded), fork detection, the
 * leak report at exit, cuInit, cuDriverGetVersion, error names and
 * cuGetProcAddress with its table, generated from entry_points.h.
 */
#include "fakecuda_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fk_config fk_cfg;
pthread_mutex_t fk_lock = PTHREAD_MUTEX_INITIALIZER;
atomic_int fk_initialized;
atomic_int fk_forked;

/* ---- configuration, load and exit ----------------------------------------- */

static int fk_env_int(const char *name, int fallback, int min, int max)
{
    const char *text = getenv(name);
    if (text == NULL || *text == '\0')
        return fallback;
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max) {
        fprintf(stderr, "fakecuda: invalid %s=\"%s\" (want %d..%d); cuInit will fail\n", name,
                text, min, max);
        fk_cfg.bad = 1;
        return fallback;
    }
    return (int)v;
}

/* A forked child cannot use CUDA (the driver's threads and mappings are the
 * parent's); the real driver answers errors there, so does the fake. */
static void fk_after_fork_child(void)
{
    atomic_store(&fk_forked, 1);
}

__attribute__((constructor)) static void fk_setup(void)
{
    fk_cfg.devices = fk_env_int("FAKECUDA_DEVICES", 2, 0, FK_MAX_DEVICES);
    fk_cfg.driver_version = fk_env_int("FAKECUDA_DRIVER_VERSION", 13000, 2000, 99990);
    fk_cfg.no_peer = fk_env_int("FAKECUDA_NO_PEER", 0, 0, 1);
    fk_cfg.no_ctx_getid = fk_env_int("FAKECUDA_NO_CTX_GETID", 0, 0, 1);
    fk_cfg.strict_exit = fk_env_int("FAKECUDA_STRICT_EXIT", 0, 0, 1);
    fk_cfg.quiet = fk_env_int("FAKECUDA_QUIET", 0, 0, 1);
    atomic_store(&fk_delay_us, (unsigned)fk_env_int("FAKECUDA_DELAY_US", 0, 0, 10000000));
    const char *faults = getenv("FAKECUDA_FAIL");
    if (faults != NULL && *faults != '\0' && !fk_faults_parse(faults)) {
        fprintf(stderr,
                "fakecuda: invalid FAKECUDA_FAIL=\"%s\" (want name:nth:code[,...] with an "
                "entry name of entry_points.h); cuInit will fail\n",
                faults);
        fk_cfg.bad = 1;
    }
    fk_tables_setup();
    fk_ctx_setup();
    pthread_atfork(NULL, NULL, fk_after_fork_child);
}

__attribute__((destructor)) static void fk_teardown(void)
{
    if (atomic_load(&fk_forked))
        return; /* the parent's workers do not exist here */
    fk_streams_atexit();
    long violations = fakecuda_violations();
    int streams = fk_count_live_streams(NULL);
    int events = fk_count_live_events(NULL);
    if (violations != 0 || streams != 0 || events != 0)
        fprintf(stderr, "fakecuda: %ld violations, %d streams and %d events leaked\n", violations,
                streams, events);
    if (fk_cfg.strict_exit && violations > 0)
        _exit(97);
}

/* ---- init, versions, error names ------------------------------------------------ */

cdResult cuInit(unsigned int flags)
{
    FK_ENTER_NOINIT(cuInit);
    if (flags != 0)
        return CD_ERROR_INVALID_VALUE;
    if (fk_cfg.bad)
        return CD_ERROR_INVALID_VALUE;
    if (fk_cfg.devices == 0)
        return CD_ERROR_NO_DEVICE;
    atomic_store(&fk_initialized, 1);
    return CD_SUCCESS;
}

cdResult cuDriverGetVersion(int *version)
{
    FK_ENTER_NOINIT(cuDriverGetVersion);
    if (version == NULL)
        return CD_ERROR_INVALID_VALUE;
    *version = fk_cfg.driver_version;
    return CD_SUCCESS;
}

struct fk_error_text {
    cdResult code;
    const char *name;
    const char *text;
};

#define FK_ERR(suffix, text) {CD_##suffix, "CUDA_" #suffix, text}
static const struct fk_error_text fk_errors[] = {
    FK_ERR(SUCCESS, "no error"),
    FK_ERR(ERROR_INVALID_VALUE, "invalid argument"),
    FK_ERR(ERROR_OUT_OF_MEMORY, "out of memory"),
    FK_ERR(ERROR_NOT_INITIALIZED, "initialization error"),
    FK_ERR(ERROR_DEINITIALIZED, "driver shutting down"),
    FK_ERR(ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
    FK_ERR(ERROR_INVALID_DEVICE, "invalid device ordinal"),
    FK_ERR(ERROR_INVALID_IMAGE, "device kernel image is invalid"),
    FK_ERR(ERROR_INVALID_CONTEXT, "invalid device context"),
    FK_ERR(ERROR_PEER_ACCESS_UNSUPPORTED, "peer access is not supported between these two devices"),
    FK_ERR(ERROR_INVALID_HANDLE, "invalid resource handle"),
    FK_ERR(ERROR_NOT_FOUND, "named symbol not found"),
    FK_ERR(ERROR_NOT_READY, "device not ready"),
    FK_ERR(ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
    FK_ERR(ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled"),
    FK_ERR(ERROR_PEER_ACCESS_NOT_ENABLED, "peer access has not been enabled"),
    FK_ERR(ERROR_PRIMARY_CONTEXT_ACTIVE, "cannot set while device is active in this process"),
    FK_ERR(ERROR_CONTEXT_IS_DESTROYED, "context is destroyed"),
    FK_ERR(ERROR_TOO_MANY_PEERS, "peer mapping resources exhausted"),
    FK_ERR(ERROR_HOST_MEMORY_ALREADY_REGISTERED,
           "part or all of the requested memory range is already mapped"),
    FK_ERR(ERROR_HOST_MEMORY_NOT_REGISTERED,
           "pointer does not correspond to a registered memory region"),
    FK_ERR(ERROR_LAUNCH_FAILED, "unspecified launch failure"),
    FK_ERR(ERROR_NOT_PERMITTED, "operation not permitted"),
    FK_ERR(ERROR_NOT_SUPPORTED, "operation not supported"),
    FK_ERR(ERROR_UNKNOWN, "unknown error"),
};
#undef FK_ERR

static const struct fk_error_text *fk_error_find(cdResult code)
{
    for (size_t i = 0; i < sizeof fk_errors / sizeof fk_errors[0]; i++) {
        if (fk_errors[i].code == code)
            return &fk_errors[i];
    }
    return NULL;
}

cdResult cuGetErrorName(cdResult error, const char **name)
{
    FK_ENTER_NOINIT(cuGetErrorName);
    if (name == NULL)
        return CD_ERROR_INVALID_VALUE;
    const struct fk_error_text *e = fk_error_find(error);
    *name = e ? e->name : NULL;
    return e ? CD_SUCCESS : CD_ERROR_INVALID_VALUE;
}

cdResult cuGetErrorString(cdResult error, const char **text)
{
    FK_ENTER_NOINIT(cuGetErrorString);
    if (text == NULL)
        return CD_ERROR_INVALID_VALUE;
    const struct fk_error_text *e = fk_error_find(error);
    *text = e ? e->text : NULL;
    return e ? CD_SUCCESS : CD_ERROR_INVALID_VALUE;
}

/* ---- cuGetProcAddress ---------------------------------------------------------- */

struct fk_proc {
    const char *name;
    int version;
    void *pfn;
};

static const struct fk_proc fk_procs[] = {
#define CD_ENTRY(name, symbol, version, use, params) {#name, version, (void *)symbol},
#include "entry_points.h"
#undef CD_ENTRY
};

/* Compile-time proof that the exported lookups have cuda.h's signatures. */
static const cd_pfn_cuGetProcAddress_v2 fk_check_gpa_v2 __attribute__((unused)) =
    cuGetProcAddress_v2;
static const cd_pfn_cuGetProcAddress fk_check_gpa __attribute__((unused)) = cuGetProcAddress;

static cdResult fk_get_proc(const char *symbol, void **pfn, int cuda_version, cdU64 flags,
                            unsigned int *symbol_status)
{
    unsigned int status = CD_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    cdResult rc = CD_ERROR_NOT_FOUND;
    if (symbol == NULL || pfn == NULL || flags > 2)
        return CD_ERROR_INVALID_VALUE;
    *pfn = NULL;
    if (strcmp(symbol, "cuGetProcAddress") == 0) {
        /* The driver resolves itself: v2 for 12.0 callers, as cuda.h maps it. */
        *pfn = cuda_version >= 12000 ? (void *)cuGetProcAddress_v2 : (void *)cuGetProcAddress;
        status = CD_GET_PROC_ADDRESS_SUCCESS;
        rc = CD_SUCCESS;
    }
    for (size_t i = 0; rc != CD_SUCCESS && i < sizeof fk_procs / sizeof fk_procs[0]; i++) {
        const struct fk_proc *p = &fk_procs[i];
        if (strcmp(p->name, symbol) != 0)
            continue;
        /* An entry newer than the emulated driver does not exist in it. */
        if (p->version > fk_cfg.driver_version ||
            (fk_cfg.no_ctx_getid && strcmp(symbol, "cuCtxGetId") == 0))
            break;
        if (cuda_version < p->version) {
            status = CD_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
            break;
        }
        *pfn = p->pfn;
        status = CD_GET_PROC_ADDRESS_SUCCESS;
        rc = CD_SUCCESS;
    }
    if (symbol_status != NULL)
        *symbol_status = status;
    return rc;
}

cdResult cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version, cdU64 flags,
                             unsigned int *symbol_status)
{
    FK_ENTER_NOINIT(cuGetProcAddress);
    return fk_get_proc(symbol, pfn, cuda_version, flags, symbol_status);
}

cdResult cuGetProcAddress(const char *symbol, void **pfn, int cuda_version, cdU64 flags)
{
    FK_ENTER_NOINIT(cuGetProcAddress);
    return fk_get_proc(symbol, pfn, cuda_version, flags, NULL);
}
