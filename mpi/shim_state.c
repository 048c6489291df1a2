/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Configuration, the libcuda.so.1 probe, the lazy load of libcucopy.so.0,
 * classification and the staging copies, error codes with messages, stats.
 *
 * The hot path of a host buffer in a process without CUDA is shim_active():
 * one relaxed load, then (state WATCHING) dl_iterate_phdr's load counter
 * compared with the one of the last probe. dlopen(RTLD_NOLOAD) itself costs
 * ~12 us on a miss (it searches the library path), so it runs only when the
 * loader added an object since the last probe.
 */
#define _GNU_SOURCE
#include "shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <strings.h>

/* ---- configuration (read once, at load) ------------------------------------ */

enum shim_mode { MODE_AUTO, MODE_OFF, MODE_FORCE };

static enum shim_mode mode = MODE_AUTO;
static int stage_managed;          /* CUCOPY_MPI_MANAGED=stage */
static int print_stats;            /* CUCOPY_MPI_STATS=1 */
static char config_error[256];     /* reported (and fatal) at MPI_Init */
static const char *status_note = "auto"; /* what the stats line says of the mode */
static const char *stage_setting;  /* CUCOPY_MPI_STAGE as given; NULL: unset */
static unsigned stage_listed;      /* the classes it lists (SHIM_CLASS_*) */

#define POOL_MB_DEFAULT 1024

_Atomic int shim_state = SHIM_WATCHING;
_Atomic unsigned shim_classes = SHIM_CLASS_ALL;
_Thread_local int shim_types_only;

/* The names of CUCOPY_MPI_STAGE's classes, in bit order (SHIM_CLASS_*). */
static const char *const class_names[] = {"p2p", "coll", "icoll", "reduce", "io", "types"};
#define CLASS_COUNT (sizeof class_names / sizeof class_names[0])

/* As cucopy's own booleans (docs/configuration.md): y/n, yes/no, on/off,
 * 1/0, true/false, any case; empty is unset (0). */
static int parse_bool(const char *name, const char *v, int *out)
{
    static const char *yes[] = {"y", "yes", "on", "1", "true"};
    static const char *no[] = {"n", "no", "off", "0", "false"};
    *out = 0;
    if (v == NULL || *v == '\0')
        return 0;
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(v, no[i]) == 0)
            return 0;
    }
    snprintf(config_error, sizeof config_error,
             "%s=%s: expected y/n, yes/no, on/off, 1/0 or true/false", name, v);
    return -1;
}

/*
 * CUCOPY_MPI_STAGE: a comma-separated list of classes (p2p, coll, icoll,
 * reduce, io, types), or all, or none (alone). "types": non-contiguous
 * datatypes on device memory in every class but io (shim_active_for).
 * 0, or -1 with config_error set.
 */
static int parse_stage(const char *v)
{
    stage_setting = v;
    if (strcmp(v, "all") == 0) {
        stage_listed = SHIM_CLASS_ALL;
        return 0;
    }
    if (strcmp(v, "none") == 0) {
        stage_listed = 0;
        return 0;
    }
    const char *at = v;
    for (;;) {
        size_t len = strcspn(at, ",");
        size_t k = 0;
        while (k < CLASS_COUNT &&
               !(strlen(class_names[k]) == len && strncmp(at, class_names[k], len) == 0))
            k++;
        if (k < CLASS_COUNT) {
            stage_listed |= 1u << k;
        } else if ((len == 3 && strncmp(at, "all", 3) == 0) ||
                   (len == 4 && strncmp(at, "none", 4) == 0)) {
            snprintf(config_error, sizeof config_error,
                     "CUCOPY_MPI_STAGE=%s: all and none stand alone, not in a list", v);
            return -1;
        } else {
            snprintf(config_error, sizeof config_error,
                     "CUCOPY_MPI_STAGE=%s: %s%.*s%s: expected a comma-separated list of "
                     "p2p, coll, icoll, reduce, io, types, or all, or none",
                     v, len == 0 ? "an empty class" : "unknown class '", (int)len, at,
                     len == 0 ? "" : "'");
            return -1;
        }
        if (at[len] == '\0')
            return 0;
        at += len + 1;
    }
}

__attribute__((constructor)) static void shim_configure(void)
{
    const char *v = getenv("CUCOPY_MPI");
    if (v == NULL || *v == '\0' || strcmp(v, "auto") == 0 || strcmp(v, "on") == 0) {
        mode = MODE_AUTO;
    } else if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0) {
        mode = MODE_OFF;
        status_note = "off (CUCOPY_MPI=off)";
    } else if (strcmp(v, "force") == 0) {
        mode = MODE_FORCE;
        status_note = "force";
    } else {
        snprintf(config_error, sizeof config_error,
                 "CUCOPY_MPI=%s: expected auto, on, off or force", v);
    }

    size_t pool_mb = POOL_MB_DEFAULT;
    v = getenv("CUCOPY_MPI_POOL_MB");
    if (v != NULL && *v != '\0') {
        char *end = NULL;
        errno = 0;
        unsigned long long mb = strtoull(v, &end, 10);
        if (errno != 0 || end == v || *end != '\0' || v[0] == '-' ||
            mb > (unsigned long long)(SIZE_MAX >> 20))
            snprintf(config_error, sizeof config_error,
                     "CUCOPY_MPI_POOL_MB=%s: expected a number of MiB (0: no pinned pool)", v);
        else
            pool_mb = (size_t)mb;
    }
    shim_pool_configure(pool_mb << 20);

    v = getenv("CUCOPY_MPI_MANAGED");
    if (v == NULL || *v == '\0' || strcmp(v, "pass") == 0)
        stage_managed = 0;
    else if (strcmp(v, "stage") == 0)
        stage_managed = 1;
    else
        snprintf(config_error, sizeof config_error,
                 "CUCOPY_MPI_MANAGED=%s: expected pass or stage", v);

    parse_bool("CUCOPY_MPI_STATS", getenv("CUCOPY_MPI_STATS"), &print_stats);

    v = getenv("CUCOPY_MPI_STAGE");
    if (v != NULL && *v != '\0')
        parse_stage(v);

    if (config_error[0] == '\0')
        shim_pipe_configure(config_error, sizeof config_error);
    if (config_error[0] == '\0')
        shim_defer_configure(config_error, sizeof config_error);
    if (mode == MODE_OFF)
        shim_pipe_threshold = 0; /* a pure pass-through */

    if (mode == MODE_OFF || config_error[0] != '\0')
        atomic_store(&shim_state, SHIM_OFF);
}

/* ---- libcucopy.so.0, loaded on first need ------------------------------------ */

static struct {
    cucopy_status_t (*context_create)(const cucopy_context_params_t *, cucopy_context_h *);
    cucopy_status_t (*context_destroy)(cucopy_context_h);
    cucopy_status_t (*mem_query)(cucopy_context_h, const void *, size_t, cucopy_mem_attr_t *);
    cucopy_status_t (*mem_alloc)(cucopy_context_h, const cucopy_mem_alloc_params_t *, void **);
    cucopy_status_t (*mem_free)(cucopy_context_h, void *);
    cucopy_status_t (*iface_open)(cucopy_context_h, const cucopy_iface_params_t *,
                                  cucopy_iface_h *);
    cucopy_status_t (*iface_close)(cucopy_iface_h);
    cucopy_status_t (*ep_create)(cucopy_iface_h, cucopy_ep_h *);
    cucopy_status_t (*ep_destroy)(cucopy_ep_h);
    cucopy_status_t (*ep_put_short)(cucopy_ep_h, const void *, size_t, uint64_t);
    cucopy_status_t (*ep_put_zcopy)(cucopy_ep_h, const cucopy_iov_t *, size_t, uint64_t,
                                    cucopy_completion_t *);
    int (*iface_progress)(cucopy_iface_h);
    cucopy_status_t (*iface_query)(cucopy_iface_h, cucopy_iface_attr_t *);
    const char *(*last_error)(void);
    const char *(*status_string)(cucopy_status_t);
    unsigned (*get_version)(void);
    cucopy_context_h ctx;
    cucopy_iface_h iface;
    cucopy_ep_h ep;
} cc;

struct shim_cucopy_copy shim_cc;

static void *load_library(char *why, size_t why_len)
{
    const char *path = getenv("CUCOPY_MPI_LIBCUCOPY");
    if (path == NULL || *path == '\0')
        path = "libcucopy.so.0";
    /* By name: our RUNPATH ($ORIGIN: installed side by side), LD_LIBRARY_PATH,
     * the system's paths. */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h != NULL)
        return h;
    snprintf(why, why_len, "%s", dlerror());
    if (strchr(path, '/') != NULL)
        return NULL;
    /* Then explicitly next to this library. */
    Dl_info self;
    if (dladdr((void *)&load_library, &self) == 0 || self.dli_fname == NULL)
        return NULL;
    char next_to[PATH_MAX];
    const char *slash = strrchr(self.dli_fname, '/');
    if (slash == NULL)
        return NULL;
    snprintf(next_to, sizeof next_to, "%.*s/%s", (int)(slash - self.dli_fname),
             self.dli_fname, path);
    return dlopen(next_to, RTLD_NOW | RTLD_LOCAL);
}

#define LOAD_SYM(field, name)                                                          \
    do {                                                                               \
        *(void **)&cc.field = dlsym(h, name);                                          \
        if (cc.field == NULL) {                                                        \
            snprintf(why, sizeof why, "%s has no %s", "libcucopy.so.0", name);         \
            goto fail;                                                                 \
        }                                                                              \
    } while (0)

/* 0 when cc is ready; -1 (a message on stderr) when the shim must pass
 * everything through. Called once, under probe_mu. */
static int load_cucopy(void)
{
    char why[512] = "";
    void *h = load_library(why, sizeof why);
    if (h == NULL)
        goto fail;
    LOAD_SYM(context_create, "cucopy_context_create");
    LOAD_SYM(context_destroy, "cucopy_context_destroy");
    LOAD_SYM(mem_query, "cucopy_mem_query");
    LOAD_SYM(mem_alloc, "cucopy_mem_alloc");
    LOAD_SYM(mem_free, "cucopy_mem_free");
    LOAD_SYM(iface_open, "cucopy_iface_open");
    LOAD_SYM(iface_close, "cucopy_iface_close");
    LOAD_SYM(ep_create, "cucopy_ep_create");
    LOAD_SYM(ep_destroy, "cucopy_ep_destroy");
    LOAD_SYM(ep_put_short, "cucopy_ep_put_short");
    LOAD_SYM(ep_put_zcopy, "cucopy_ep_put_zcopy");
    LOAD_SYM(iface_progress, "cucopy_iface_progress");
    LOAD_SYM(last_error, "cucopy_last_error");
    LOAD_SYM(status_string, "cucopy_status_string");
    LOAD_SYM(get_version, "cucopy_get_version");
    LOAD_SYM(iface_query, "cucopy_iface_query");
    unsigned v = cc.get_version();
    if (v / 100 != CUCOPY_VERSION / 100) {
        snprintf(why, sizeof why, "libcucopy.so.0 is version %u, this shim was built for %u",
                 v, (unsigned)CUCOPY_VERSION);
        goto fail;
    }
    /* Non-contiguous datatypes' strided runs (shim_types.c; 0.5.0 has it). */
    *(void **)&shim_cc.ep_copy_2d = dlsym(h, "cucopy_ep_copy_2d");
    if (shim_cc.ep_copy_2d == NULL) {
        snprintf(why, sizeof why, "libcucopy.so.0 has no cucopy_ep_copy_2d");
        goto fail;
    }
    shim_cc.iface_progress = cc.iface_progress;
    /* The driver: $CUCOPY_CUDA_DRIVER or libcuda.so.1, which is the object the
     * program already loaded (dlopen finds it by its SONAME). */
    cucopy_status_t st = cc.context_create(NULL, &cc.ctx);
    if (st != CUCOPY_OK) {
        snprintf(why, sizeof why, "cucopy_context_create: %s", cc.last_error());
        goto fail;
    }
    cucopy_iface_params_t ip = {.field_mask = CUCOPY_IFACE_PARAM_THREAD_MODE,
                                .thread_mode = CUCOPY_THREAD_MODE_MULTI};
    st = cc.iface_open(cc.ctx, &ip, &cc.iface);
    if (st == CUCOPY_OK)
        st = cc.ep_create(cc.iface, &cc.ep);
    cucopy_iface_attr_t ia = {.field_mask = CUCOPY_IFACE_ATTR_MAX_IOV};
    if (st == CUCOPY_OK)
        st = cc.iface_query(cc.iface, &ia);
    if (st != CUCOPY_OK) {
        snprintf(why, sizeof why, "%s", cc.last_error());
        goto fail;
    }
    shim_cc.ep = cc.ep;
    shim_cc.iface = cc.iface;
    shim_cc.max_iov = ia.max_iov;
    return 0;
fail:
    fprintf(stderr,
            "cucopy_mpi: cannot use libcucopy.so.0 (%s): GPU buffers are NOT staged, "
            "every buffer goes to MPI unchanged\n",
            why);
    status_note = "off (libcucopy.so.0 unusable)";
    return -1;
}

/* ---- the probe -------------------------------------------------------------- */

static pthread_mutex_t probe_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic unsigned long long adds_seen; /* dlpi_adds at the last probe */

static int adds_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(unsigned long long *)data = info->dlpi_adds;
    return 1; /* the first object is enough */
}

int shim_probe_cuda(void)
{
    unsigned long long adds = 0;
    dl_iterate_phdr(adds_cb, &adds);
    if (SHIM_LIKELY(adds == atomic_load_explicit(&adds_seen, memory_order_acquire)))
        return 0;
    pthread_mutex_lock(&probe_mu);
    if (atomic_load(&shim_state) == SHIM_WATCHING) {
        /* The handle is kept: libcuda stays loaded while the shim uses it. */
        void *cuda = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
        if (cuda != NULL)
            atomic_store(&shim_state, load_cucopy() == 0 ? SHIM_ACTIVE : SHIM_OFF);
        /* After the state: a thread seeing these adds sees the state too. */
        atomic_store_explicit(&adds_seen, adds, memory_order_release);
    }
    int active = atomic_load(&shim_state) == SHIM_ACTIVE;
    pthread_mutex_unlock(&probe_mu);
    return active;
}

/* ---- init and finalize -------------------------------------------------------- */

static int world_rank = -1;

void shim_after_init(int provided)
{
    /* The iface is multi-thread whatever the level. Deferred sends are posted
     * by the calls that follow them; with MPI_THREAD_MULTIPLE another thread
     * may already be blocked in MPI waiting for the peer that waits for such a
     * send: nonblocking sends copy in the call then (docs/mpi.md). */
    if (provided == MPI_THREAD_MULTIPLE)
        shim_isend_async = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    if (config_error[0] != '\0') {
        fprintf(stderr, "cucopy_mpi: %s\n", config_error);
        /* The launcher forwards the message asynchronously, and an abort
         * tears the job down at once: MPICH's hydra dropped it now and then
         * under load (seen in CI). A fatal path can afford 0.2 s. */
        usleep(200000);
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* CUDA-awareness: Open MPI's and MPICH's MPIX_Query_cuda_support()
     * (mpi-ext.h), looked up at run time; 0 on Debian's builds. A CUDA-aware
     * MPI handles device buffers itself: auto mode passes everything through,
     * force mode stages anyway. */
    int (*query)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "MPIX_Query_cuda_support");
    int aware = query != NULL && query() == 1;
    if (aware && mode == MODE_AUTO) {
        /* CUCOPY_MPI_STAGE: the classes staged anyway; the others pass
         * device pointers through. None listed: a pure pass-through. */
        atomic_store(&shim_classes, stage_listed);
        if (stage_listed == 0) {
            atomic_store(&shim_state, SHIM_OFF);
            status_note =
                stage_setting != NULL
                    ? "off (the MPI reports CUDA support; CUCOPY_MPI_STAGE=none)"
                    : "off (the MPI reports CUDA support; CUCOPY_MPI=force stages anyway)";
        } else {
            status_note = "auto (the MPI reports CUDA support; CUCOPY_MPI_STAGE picks the "
                          "classes staged)";
        }
    } else if (aware && mode == MODE_FORCE) {
        status_note = "force (the MPI reports CUDA support)";
    }
    /* Pipelining stages point-to-point device buffers: where they pass
     * through to the MPI (behind a CUDA-aware MPI without p2p in
     * CUCOPY_MPI_STAGE) no rank pipelines a send, and the receive side's
     * envelope check would read device receive buffers with the CPU. Off
     * then, on every rank alike (the private communicator is made by all or
     * none). */
    if (atomic_load(&shim_state) == SHIM_OFF ||
        !(atomic_load(&shim_classes) & SHIM_CLASS_P2P))
        shim_pipe_threshold = 0;
    shim_pipe_after_init();
    if (stage_setting != NULL && !(aware && mode == MODE_AUTO) && world_rank == 0)
        fprintf(stderr, "cucopy_mpi: CUCOPY_MPI_STAGE=%s changes nothing: %s\n", stage_setting,
                mode == MODE_OFF     ? "CUCOPY_MPI=off stages nothing"
                : mode == MODE_FORCE ? "CUCOPY_MPI=force stages every class"
                                     : "this MPI does not report CUDA support, so every class "
                                       "is staged");
}

/* ---- stats -------------------------------------------------------------------- */

#define STATS_DEVICES 16

static _Atomic unsigned long long stat_calls[2][STATS_DEVICES + 1];
static _Atomic unsigned long long stat_bytes[2][STATS_DEVICES + 1];

void shim_stats_add(int to_device, int device, size_t bytes)
{
    int d = device >= 0 && device < STATS_DEVICES ? device : STATS_DEVICES;
    atomic_fetch_add_explicit(&stat_calls[to_device][d], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&stat_bytes[to_device][d], bytes, memory_order_relaxed);
}

static void stats_print(void)
{
    static const char *dir[2] = {"device->MPI", "MPI->device"};
    char line[2048];
    int at = snprintf(line, sizeof line, "cucopy_mpi: rank %d: staging %s, libcuda %s",
                      world_rank, status_note,
                      atomic_load(&shim_state) == SHIM_ACTIVE ? "loaded" : "not loaded");
    for (int t = 0; t < 2; t++) {
        at += snprintf(line + at, sizeof line - (size_t)at, "; %s:", dir[t]);
        int any = 0;
        for (int d = 0; d <= STATS_DEVICES && at < (int)sizeof line - 80; d++) {
            unsigned long long n = atomic_load(&stat_calls[t][d]);
            if (n == 0)
                continue;
            any = 1;
            at += snprintf(line + at, sizeof line - (size_t)at, " dev%d %llu calls %llu bytes",
                           d == STATS_DEVICES ? -1 : d, n, atomic_load(&stat_bytes[t][d]));
        }
        if (!any)
            at += snprintf(line + at, sizeof line - (size_t)at, " none");
    }
    at += snprintf(line + at, sizeof line - (size_t)at,
                   "; pool high-water %zu bytes, pageable fallbacks %ld; staged classes:",
                   shim_pool_high_water(), shim_pool_fallbacks());
    /* The policy (CUCOPY_MPI_STAGE & co.): what the wrappers would stage. */
    unsigned staged = atomic_load(&shim_state) == SHIM_OFF ? 0 : atomic_load(&shim_classes);
    for (size_t k = 0; k < CLASS_COUNT; k++)
        if (staged & (1u << k))
            at += snprintf(line + at, sizeof line - (size_t)at, "%s%s",
                           (staged & ((1u << k) - 1)) ? "," : " ", class_names[k]);
    at += snprintf(line + at, sizeof line - (size_t)at, "%s", staged == 0 ? " none" : "");
    at += shim_pipe_stats(line + at, sizeof line - (size_t)at);
    at += shim_defer_stats(line + at, sizeof line - (size_t)at);
    at += shim_early_stats(line + at, sizeof line - (size_t)at);
    snprintf(line + at, sizeof line - (size_t)at, "\n");
    fputs(line, stderr);
}

void shim_after_finalize(void)
{
    if (print_stats)
        stats_print();
    if (cc.ctx == NULL)
        return;
    shim_pool_release_all();
    cc.ep_destroy(cc.ep);
    cc.iface_close(cc.iface);
    /* BUSY while staging memory is still held (a request never completed):
     * the context then stays, which only matters at exit. */
    if (cc.context_destroy(cc.ctx) == CUCOPY_OK)
        cc.ctx = NULL;
}

/* ---- host memory for the pool ------------------------------------------------- */

cucopy_status_t shim_cucopy_host_alloc(size_t bytes, void **p)
{
    cucopy_mem_alloc_params_t ap = {
        .field_mask = CUCOPY_MEM_ALLOC_PARAM_LENGTH | CUCOPY_MEM_ALLOC_PARAM_MEM_TYPE,
        .length = bytes,
        .mem_type = CUCOPY_MEMORY_TYPE_HOST};
    return cc.mem_alloc(cc.ctx, &ap, p);
}

void shim_cucopy_host_free(void *p)
{
    if (cc.mem_free(cc.ctx, p) != CUCOPY_OK)
        fprintf(stderr, "cucopy_mpi: freeing staging memory: %s\n", cc.last_error());
}

/* ---- errors ------------------------------------------------------------------- */

#define ERROR_CODES 64

static pthread_mutex_t error_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char text[MPI_MAX_ERROR_STRING];
    int code;
} error_codes[ERROR_CODES];
static int error_codes_used;
static int error_strings_lost; /* the MPI's MPI_Error_string does not return them */

/* MPI_Error_string(code) is @p text: Debian's MPICH 4.0.2 returns an unrelated
 * built-in message for a code made by MPI_Add_error_code instead of the string
 * given to MPI_Add_error_string (measured). */
static int error_string_kept(int code, const char *text)
{
    char back[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    return PMPI_Error_string(code, back, &len) == MPI_SUCCESS && strcmp(back, text) == 0;
}

/* An error code of class errclass whose MPI_Error_string is text: made once
 * per distinct text (MPI_Add_error_code + MPI_Add_error_string). Where the
 * MPI loses such strings, the plain class, and the text on stderr. */
static int error_code_for(int errclass, const char *text)
{
    int code = errclass;
    pthread_mutex_lock(&error_mu);
    for (int i = 0; i < error_codes_used; i++) {
        if (strcmp(error_codes[i].text, text) == 0) {
            code = error_codes[i].code;
            goto out;
        }
    }
    int fresh;
    int made = !error_strings_lost && error_codes_used < ERROR_CODES &&
               PMPI_Add_error_code(errclass, &fresh) == MPI_SUCCESS &&
               PMPI_Add_error_string(fresh, (char *)text) == MPI_SUCCESS;
    if (made && !error_string_kept(fresh, text)) {
        error_strings_lost = 1; /* checked once: no more codes are made */
        made = 0;
    }
    if (made) {
        snprintf(error_codes[error_codes_used].text, MPI_MAX_ERROR_STRING, "%s", text);
        error_codes[error_codes_used++].code = fresh;
        code = fresh;
    } else {
        fprintf(stderr, "%s\n", text); /* the plain class carries no message */
    }
out:
    pthread_mutex_unlock(&error_mu);
    return code;
}

int shim_error(MPI_Comm comm, int errclass, const char *call, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    snprintf(text, sizeof text, "cucopy_mpi: %s: %s", call, what);
    int code = error_code_for(errclass, text);
    PMPI_Comm_call_errhandler(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, code);
    return code;
}

/* A cucopy failure: the detail goes to stderr (it varies), the code is fixed. */
int shim_cucopy_error(MPI_Comm comm, const char *call, const char *what)
{
    fprintf(stderr, "cucopy_mpi: %s: %s: %s\n", call, what, cc.last_error());
    char msg[160];
    snprintf(msg, sizeof msg, "%s failed (details on stderr)", what);
    return shim_error(comm, MPI_ERR_OTHER, call, msg);
}

/* ---- the pipeline's copies ----------------------------------------------------- */

static cucopy_status_t copy_async(const void *src, void *dst, size_t n, cucopy_completion_t *comp)
{
    cucopy_iov_t iov = {.buffer = (void *)src, .length = n};
    return cc.ep_put_zcopy(cc.ep, &iov, 1, (uint64_t)(uintptr_t)dst, comp);
}

void shim_copy_progress(void)
{
    cc.iface_progress(cc.iface);
}

static void copy_done(cucopy_completion_t *c)
{
    struct shim_copy *k = (struct shim_copy *)c;
    k->status = c->status;
    atomic_store_explicit(&k->done, 1, memory_order_release);
}

int shim_copy_start(struct shim_copy *k, const void *src, void *dst, size_t n)
{
    k->comp = (cucopy_completion_t){.func = copy_done, .count = 1, .status = CUCOPY_OK};
    atomic_store_explicit(&k->done, 0, memory_order_relaxed);
    cucopy_status_t st = copy_async(src, dst, n, &k->comp);
    if (st == CUCOPY_INPROGRESS)
        return 1;
    if (st == CUCOPY_ERR_NO_RESOURCE)
        return 0;
    k->status = st;
    atomic_store_explicit(&k->done, 1, memory_order_release);
    return 1;
}

/* ---- classification and staging ------------------------------------------------- */

int shim_stage(const char *call, const void *buf, MPI_Count count, MPI_Datatype dt,
               MPI_Comm comm, int direction, struct shim_buf *b)
{
    b->staged = 0;
    b->layout = NULL;
    if (count <= 0)
        return MPI_SUCCESS;
    MPI_Count size = 0, tlb = 0, text = 0, lb = 0, ext = 0;
    /* A bad type or count is MPI's to report: pass through. */
    if (PMPI_Type_size_x(dt, &size) != MPI_SUCCESS || size <= 0 || size == MPI_UNDEFINED ||
        PMPI_Type_get_true_extent_x(dt, &tlb, &text) != MPI_SUCCESS ||
        PMPI_Type_get_extent_x(dt, &lb, &ext) != MPI_SUCCESS)
        return MPI_SUCCESS;
    /* The first byte touched; with MPI_BOTTOM (NULL) the type's addresses are
     * absolute. Unsigned arithmetic: no overflow trap on odd lower bounds. */
    uintptr_t first = (uintptr_t)buf + (uintptr_t)(intptr_t)tlb;
    if (first == 0)
        return MPI_SUCCESS;
    /* One contiguous block: no holes in one element, elements back to back. */
    int dense = size == text && (count == 1 || ext == size);
    if (dense && shim_types_only)
        return MPI_SUCCESS; /* CUCOPY_MPI_STAGE=types alone: the MPI's */
    size_t bytes = 0;
    uintptr_t query = first; /* the span the type map touches: one allocation */
    if (dense) {
        if ((unsigned long long)count > SIZE_MAX / (unsigned long long)size)
            return shim_error(comm, MPI_ERR_COUNT, call, "count * type size overflows");
        bytes = (size_t)count * (size_t)size;
    } else {
        /* Elements at buf + k * ext (ext may be negative), each [tlb, tlb + text). */
        if (count > ((MPI_Count)1 << 62) / (ext < 0 ? -ext : ext > 0 ? ext : 1))
            return shim_error(comm, MPI_ERR_COUNT, call, "count * type extent overflows");
        MPI_Count last = (count - 1) * ext;
        MPI_Count lo = tlb + (last < 0 ? last : 0), hi = tlb + text + (last > 0 ? last : 0);
        query = (uintptr_t)buf + (uintptr_t)(intptr_t)lo;
        bytes = (size_t)(hi - lo);
    }
    cucopy_mem_attr_t attr = {.field_mask = CUCOPY_MEM_ATTR_MEM_TYPE | CUCOPY_MEM_ATTR_DEVICE};
    cucopy_status_t st = cc.mem_query(cc.ctx, (const void *)query, bytes, &attr);
    if (st == CUCOPY_ERR_OUT_OF_RANGE)
        return shim_error(comm, MPI_ERR_BUFFER, call,
                          "the message runs past the end of its device allocation");
    if (st != CUCOPY_OK)
        return shim_cucopy_error(comm, call, "classifying the buffer (cucopy_mem_query)");
    if (attr.mem_type == CUCOPY_MEMORY_TYPE_HOST)
        return MPI_SUCCESS;
    if (attr.mem_type == CUCOPY_MEMORY_TYPE_CUDA_MANAGED && !stage_managed)
        return MPI_SUCCESS; /* the CPU can read and write managed memory */
    if (buf == MPI_BOTTOM)
        return shim_error(comm, MPI_ERR_BUFFER, call,
                          "MPI_BOTTOM with a datatype that reaches device memory "
                          "is not supported");
    /* One block of memory whose bytes MPI takes in another order (an hindexed
     * type with descending displacements and no holes): staged packed, in
     * type-map order, as the other non-contiguous ones. Copied whole, a
     * partial receive would copy back the wrong bytes, and a pipelined
     * envelope would not be where the check looks. */
    if (dense && shim_types_in_order(dt) == 0)
        dense = 0;
    if (!dense)
        return shim_types_stage(call, buf, count, dt, comm, direction, attr.device, b);
    b->host = shim_pool_get(bytes, &b->cap, &b->pinned);
    if (b->host == NULL)
        return shim_error(comm, MPI_ERR_NO_MEM, call, "no host memory for staging");
    b->first = (char *)first;
    b->tlb = (MPI_Aint)tlb;
    b->bytes = bytes;
    b->device = attr.device;
    if ((direction & SHIM_TO_MPI) && !(direction & SHIM_DEFER_COPY)) {
        st = cc.ep_put_short(cc.ep, b->first, bytes, (uint64_t)(uintptr_t)b->host);
        if (st != CUCOPY_OK) {
            shim_pool_put(b->host, b->cap, b->pinned);
            return shim_cucopy_error(comm, call, "copying the device buffer to host memory");
        }
        shim_stats_add(0, b->device, bytes);
    }
    b->staged = 1;
    return MPI_SUCCESS;
}

int shim_restage(const char *call, struct shim_buf *b, MPI_Comm comm)
{
    if (b->layout != NULL)
        return shim_types_copy(call, b, 0, b->bytes, comm);
    cucopy_status_t st = cc.ep_put_short(cc.ep, b->first, b->bytes, (uint64_t)(uintptr_t)b->host);
    if (st != CUCOPY_OK)
        return shim_cucopy_error(comm, call, "copying the device buffer to host memory");
    shim_stats_add(0, b->device, b->bytes);
    return MPI_SUCCESS;
}

int shim_unstage(const char *call, struct shim_buf *b, size_t n, MPI_Comm comm)
{
    if (n > b->bytes)
        n = b->bytes;
    if (n == 0)
        return MPI_SUCCESS;
    if (b->layout != NULL)
        return shim_types_copy(call, b, 1, n, comm);
    cucopy_status_t st = cc.ep_put_short(cc.ep, b->host, n, (uint64_t)(uintptr_t)b->first);
    if (st != CUCOPY_OK)
        return shim_cucopy_error(comm, call, "copying the received message to device memory");
    shim_stats_add(1, b->device, n);
    return MPI_SUCCESS;
}

size_t shim_received_bytes(const MPI_Status *st)
{
    int cancelled = 0;
    if (PMPI_Test_cancelled(st, &cancelled) == MPI_SUCCESS && cancelled)
        return 0;
    /* Elements of MPI_BYTE are bytes: Open MPI and MPICH keep the byte count
     * in the status, whatever the receive's datatype (which may be freed by now). */
    MPI_Count n = 0;
    if (PMPI_Get_elements_x(st, MPI_BYTE, &n) != MPI_SUCCESS || n == MPI_UNDEFINED || n < 0)
        return 0;
    return (size_t)n;
}

void shim_release(struct shim_buf *b)
{
    if (b->staged) {
        shim_pool_put(b->host, b->cap, b->pinned);
        if (b->layout != NULL)
            shim_types_unref(b->layout);
    }
    b->staged = 0;
    b->layout = NULL;
}

int shim_copy_ok(int rc)
{
    if (rc == MPI_SUCCESS)
        return 1;
    int cls = MPI_ERR_OTHER;
    return PMPI_Error_class(rc, &cls) == MPI_SUCCESS && cls == MPI_ERR_TRUNCATE;
}
