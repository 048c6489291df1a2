/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fake driver's core: configuration, call accounting, fault injection,
 * violations, cuInit, versions, error names, cuGetProcAddress, the handle
 * tables and the fakecuda_* control API.
 */
#include "fakecuda_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct fk_config fk_cfg;
atomic_uint fk_delay_us;
pthread_mutex_t fk_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t fk_done_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t fk_done_cond = PTHREAD_COND_INITIALIZER;
atomic_long fk_ctx_creation_count;
_Thread_local int fk_in_host_fn;

static atomic_int fk_initialized;
static atomic_int fk_forked;
static atomic_long fk_violation_count;
static atomic_long fk_call_count[FK_ID_COUNT];

static const char *const fk_entry_names[FK_ID_COUNT] = {
#define CD_ENTRY(name, symbol, version, use, params) [FK_ID_##name] = #name,
#include "entry_points.h"
#undef CD_ENTRY
    [FK_ID_cuGetProcAddress] = "cuGetProcAddress",
};

static int fk_entry_id_of(const char *name)
{
    if (name == NULL)
        return -1;
    for (int i = 0; i < FK_ID_COUNT; i++) {
        if (strcmp(fk_entry_names[i], name) == 0)
            return i;
    }
    return -1;
}

/* ---- fault injection ---------------------------------------------------- */

#define FK_MAX_FAULTS 64

struct fk_fault {
    int id;
    int remaining; /* calls until it fires; 1 = the next call */
    cdResult code;
};

static pthread_mutex_t fk_fault_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fk_fault fk_faults[FK_MAX_FAULTS];
static int fk_nfaults;
/* Lets the common no-fault path skip fk_fault_lock. */
static atomic_int fk_faults_pending;

static int fk_fault_add(int id, int nth, cdResult code)
{
    int ok = 0;
    pthread_mutex_lock(&fk_fault_lock);
    if (fk_nfaults < FK_MAX_FAULTS) {
        fk_faults[fk_nfaults].id = id;
        fk_faults[fk_nfaults].remaining = nth;
        fk_faults[fk_nfaults].code = code;
        fk_nfaults++;
        atomic_store(&fk_faults_pending, fk_nfaults);
        ok = 1;
    }
    pthread_mutex_unlock(&fk_fault_lock);
    return ok;
}

static void fk_fault_cancel(int id)
{
    pthread_mutex_lock(&fk_fault_lock);
    int kept = 0;
    for (int i = 0; i < fk_nfaults; i++) {
        if (id >= 0 && fk_faults[i].id != id)
            fk_faults[kept++] = fk_faults[i];
    }
    fk_nfaults = kept;
    atomic_store(&fk_faults_pending, fk_nfaults);
    pthread_mutex_unlock(&fk_fault_lock);
}

/* Advances every pending fault of @p id by one call; returns the code of the
 * first one that fires (it is removed), or CD_SUCCESS. */
static cdResult fk_fault_check(int id)
{
    cdResult fired = CD_SUCCESS;
    int kept = 0;
    pthread_mutex_lock(&fk_fault_lock);
    for (int i = 0; i < fk_nfaults; i++) {
        struct fk_fault *f = &fk_faults[i];
        if (f->id == id && --f->remaining <= 0 && fired == CD_SUCCESS) {
            fired = f->code;
            continue;
        }
        fk_faults[kept++] = *f;
    }
    fk_nfaults = kept;
    atomic_store(&fk_faults_pending, fk_nfaults);
    pthread_mutex_unlock(&fk_fault_lock);
    return fired;
}

static int fk_parse_faults(const char *spec)
{
    char *copy = strdup(spec);
    char *save = NULL;
    int ok = copy != NULL;
    for (char *item = copy ? strtok_r(copy, ",", &save) : NULL; item != NULL && ok;
         item = strtok_r(NULL, ",", &save)) {
        char *name = item;
        char *nth_text = strchr(name, ':');
        char *code_text = nth_text ? strchr(nth_text + 1, ':') : NULL;
        if (code_text == NULL) {
            ok = 0;
            break;
        }
        *nth_text++ = '\0';
        *code_text++ = '\0';
        char *end1 = NULL;
        char *end2 = NULL;
        long nth = strtol(nth_text, &end1, 10);
        long code = strtol(code_text, &end2, 10);
        int id = fk_entry_id_of(name);
        if (id < 0 || *end1 != '\0' || *end2 != '\0' || nth < 1 || nth > 1000000000L ||
            code < 1 || code > 100000L || !fk_fault_add(id, (int)nth, (cdResult)code))
            ok = 0;
    }
    free(copy);
    return ok;
}

/* ---- configuration ------------------------------------------------------- */

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

#define FK_NTABLES 6
static struct fk_table *const fk_tables[FK_NTABLES] = {&fk_ctx_table,    &fk_stream_table,
                                                    &fk_event_table,  &fk_pool_table,
                                                    &fk_module_table, &fk_func_table};

#define FK_TABLE_SPAN ((size_t)64 << 20) /* handle address space per kind */
#define FK_HANDLE_STRIDE 16
#define FK_CHUNK_OBJS 1024u
#define FK_MAX_CHUNKS ((unsigned)(FK_TABLE_SPAN / FK_HANDLE_STRIDE / FK_CHUNK_OBJS))

static void fk_tables_setup(void)
{
    void *space = mmap(NULL, FK_NTABLES * FK_TABLE_SPAN, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (space == MAP_FAILED) {
        fprintf(stderr, "fakecuda: cannot reserve handle space: %s\n", strerror(errno));
        abort();
    }
    for (int i = 0; i < FK_NTABLES; i++) {
        fk_tables[i]->base = (uintptr_t)space + (size_t)i * FK_TABLE_SPAN;
        fk_tables[i]->chunks = calloc(FK_MAX_CHUNKS, sizeof(void *));
        if (fk_tables[i]->chunks == NULL)
            abort();
    }
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
    if (faults != NULL && *faults != '\0' && !fk_parse_faults(faults)) {
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
    long violations = atomic_load(&fk_violation_count);
    int streams = fk_count_live_streams(NULL);
    int events = fk_count_live_events(NULL);
    if (violations != 0 || streams != 0 || events != 0)
        fprintf(stderr, "fakecuda: %ld violations, %d streams and %d events leaked\n", violations,
                streams, events);
    if (fk_cfg.strict_exit && violations > 0)
        _exit(97);
}

/* ---- handle tables --------------------------------------------------------- */

void *fk_table_at(struct fk_table *t, unsigned index)
{
    char *chunk = t->chunks[index / FK_CHUNK_OBJS];
    return chunk + (size_t)(index % FK_CHUNK_OBJS) * t->obj_size;
}

static const void *fk_table_handle(struct fk_table *t, unsigned index)
{
    return (const void *)(t->base + (uintptr_t)(index + 1) * FK_HANDLE_STRIDE);
}

void *fk_table_new(struct fk_table *t, const void **handle)
{
    unsigned index = atomic_load(&t->count);
    unsigned chunk = index / FK_CHUNK_OBJS;
    if (chunk >= FK_MAX_CHUNKS - 1)
        return NULL;
    if (t->chunks[chunk] == NULL) {
        t->chunks[chunk] = calloc(FK_CHUNK_OBJS, t->obj_size);
        if (t->chunks[chunk] == NULL)
            return NULL;
    }
    /* Release: a lock-free fk_table_find() that sees the new count sees the
     * chunk pointer too. */
    atomic_store_explicit(&t->count, index + 1, memory_order_release);
    *handle = fk_table_handle(t, index);
    return fk_table_at(t, index);
}

void *fk_table_find(struct fk_table *t, const void *handle)
{
    uintptr_t h = (uintptr_t)handle;
    if (h <= t->base || h >= t->base + FK_TABLE_SPAN || (h - t->base) % FK_HANDLE_STRIDE != 0)
        return NULL;
    unsigned index = (unsigned)((h - t->base) / FK_HANDLE_STRIDE) - 1;
    if (index >= atomic_load_explicit(&t->count, memory_order_acquire))
        return NULL;
    return fk_table_at(t, index);
}

/* ---- accounting and violations ---------------------------------------------- */

cdResult fk_violation(cdResult code, const char *fmt, ...)
{
    atomic_fetch_add(&fk_violation_count, 1);
    if (!fk_cfg.quiet) {
        char text[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        fprintf(stderr, "fakecuda: VIOLATION: %s\n", text);
    }
    return code;
}

cdResult fk_enter(enum fk_entry_id id, int needs_init)
{
    atomic_fetch_add_explicit(&fk_call_count[id], 1, memory_order_relaxed);
    if (fk_in_host_fn)
        return fk_violation(CD_ERROR_NOT_PERMITTED,
                            "%s called from a host function (cuLaunchHostFunc forbids CUDA calls)",
                            fk_entry_names[id]);
    if (atomic_load(&fk_forked))
        return fk_violation(CD_ERROR_NOT_INITIALIZED, "%s called in a forked child",
                            fk_entry_names[id]);
    if (atomic_load_explicit(&fk_faults_pending, memory_order_relaxed) != 0) {
        cdResult injected = fk_fault_check(id);
        if (injected != CD_SUCCESS)
            return injected;
    }
    if (needs_init && !atomic_load(&fk_initialized))
        return CD_ERROR_NOT_INITIALIZED;
    return CD_SUCCESS;
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

/* ---- control API ------------------------------------------------------------------ */

FK_EXPORT int fakecuda_is_fake(void)
{
    return 1;
}

FK_EXPORT long fakecuda_calls(const char *name)
{
    int id = fk_entry_id_of(name);
    return id < 0 ? -1 : atomic_load(&fk_call_count[id]);
}

FK_EXPORT int fakecuda_live_streams(cdContext ctx)
{
    return fk_count_live_streams(ctx ? fk_ctx_find(ctx) : NULL);
}

FK_EXPORT int fakecuda_live_events(cdContext ctx)
{
    return fk_count_live_events(ctx ? fk_ctx_find(ctx) : NULL);
}

FK_EXPORT long fakecuda_violations(void)
{
    return atomic_load(&fk_violation_count);
}

FK_EXPORT long fakecuda_ctx_creations(void)
{
    return atomic_load(&fk_ctx_creation_count);
}

FK_EXPORT void fakecuda_fail(const char *name, int nth, int code)
{
    if (name == NULL) {
        fk_fault_cancel(-1);
        return;
    }
    int id = fk_entry_id_of(name);
    if (id < 0) {
        fprintf(stderr, "fakecuda: fakecuda_fail: unknown entry point \"%s\" ignored\n", name);
        return;
    }
    if (nth <= 0) {
        fk_fault_cancel(id);
        return;
    }
    if (!fk_fault_add(id, nth, (cdResult)code))
        fprintf(stderr, "fakecuda: fakecuda_fail: more than %d faults pending; ignored\n",
                FK_MAX_FAULTS);
}

FK_EXPORT void fakecuda_reset_counters(void)
{
    for (int i = 0; i < FK_ID_COUNT; i++)
        atomic_store(&fk_call_count[i], 0);
    atomic_store(&fk_violation_count, 0);
    atomic_store(&fk_ctx_creation_count, 0);
}

FK_EXPORT void fakecuda_set_delay_us(unsigned int us)
{
    atomic_store(&fk_delay_us, us);
}

