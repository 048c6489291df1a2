/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Faults and accounting: the gate every entry point passes (fk_enter: call
 * counters, injected faults, calls from a host function or a forked child,
 * cuInit), violations, and the control API of fakecuda.h that tests use to
 * inject faults and read the counts.
 */
#include "fakecuda_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int fk_faults_parse(const char *spec)
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

/* ---- the gate and violations ------------------------------------------------- */

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

FK_EXPORT void fakecuda_poison_context(cdContext ctx, int code)
{
    struct fk_ctx *c = fk_ctx_find(ctx);
    if (c == NULL || !fk_ctx_set_poison(c, atomic_load(&c->live_id), code))
        fprintf(stderr, "fakecuda: fakecuda_poison_context: %p is not a live context; ignored\n",
                (void *)ctx);
}

FK_EXPORT long fakecuda_live_allocations(void)
{
    return fk_mem_count_live();
}

FK_EXPORT long fakecuda_registered_ranges(void)
{
    return fk_mem_count_registered();
}
