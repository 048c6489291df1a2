/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Modules, functions and kernel launches: just enough to run the test
 * suite's one kernel.
 *
 * cuModuleLoadData keeps a copy of a PTX text in a module of the current
 * context; cuModuleGetFunction finds a `.entry NAME` in it. Nothing is
 * compiled or executed: a kernel whose name starts with "cucopy_fault" is
 * taken to store to address 0 (the real kernel of tests/c/test_sick_context.c
 * does), so running it gives its context the sticky error
 * CUDA_ERROR_ILLEGAL_ADDRESS; any other kernel does nothing. cuLaunchKernel
 * checks the launch and queues the kernel on the stream's worker
 * (fakecuda_stream.c), which applies that fault when it runs it.
 *
 * Module and function objects are never freed, like streams: a handle used
 * after cuModuleUnload, or after its context died, is recognized and
 * reported.
 */
#include "fakecuda_internal.h"

#include <stdlib.h>
#include <string.h>

#define FK_FAULT_PREFIX "cucopy_fault"

struct fk_module {
    struct CUmod_st *handle;
    struct fk_ctx *ctx;
    unsigned long long ctx_id;
    char *image; /* the PTX text; freed by cuModuleUnload */
    int unloaded;
};

struct fk_func {
    struct CUfunc_st *handle;
    struct fk_module *module;
    int faults;
};

struct fk_table fk_module_table = {.obj_size = sizeof(struct fk_module)};
struct fk_table fk_func_table = {.obj_size = sizeof(struct fk_func)};

/* A module handle given by the caller: ours, loaded, context alive. */
static cdResult fk_module_check_locked(struct CUmod_st *h, const char *api,
                                       struct fk_module **out)
{
    struct fk_module *m = fk_table_find(&fk_module_table, h);
    if (m == NULL)
        return fk_violation(CD_ERROR_INVALID_HANDLE, "%s: %p is not a module handle", api,
                            (void *)h);
    cdResult rc = fk_ctx_owned_check(api, "module", h, m->unloaded ? "cuModuleUnload" : NULL,
                                     m->ctx, m->ctx_id);
    if (rc == CD_SUCCESS)
        *out = m;
    return rc;
}

static int fk_ident_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '$';
}

static int fk_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
}

/* Whether the PTX text declares the kernel `.entry name`. */
static int fk_ptx_has_entry(const char *ptx, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = strstr(ptx, ".entry"); p != NULL; p = strstr(p + 1, ".entry")) {
        if (p != ptx && !fk_space(p[-1]))
            continue;
        const char *q = p + strlen(".entry");
        if (!fk_space(*q))
            continue;
        while (fk_space(*q))
            q++;
        if (strncmp(q, name, len) == 0 && !fk_ident_char(q[len]))
            return 1;
    }
    return 0;
}

cdResult cuModuleLoadData(struct CUmod_st **module, const void *image)
{
    FK_ENTER(cuModuleLoadData);
    if (module == NULL || image == NULL)
        return CD_ERROR_INVALID_VALUE;
    /* Only PTX text is understood (no cubin or fatbin). */
    const char *ptx = image;
    if (strstr(ptx, ".version") == NULL || strstr(ptx, ".target") == NULL)
        return CD_ERROR_INVALID_IMAGE;
    char *copy = strdup(ptx);
    if (copy == NULL)
        return CD_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&fk_lock);
    struct fk_ctx *c = NULL;
    cdResult rc = fk_ctx_require_current(&c, "cuModuleLoadData", 1);
    if (rc == CD_SUCCESS) {
        const void *handle = NULL;
        struct fk_module *m = fk_table_new(&fk_module_table, &handle);
        if (m == NULL) {
            rc = CD_ERROR_OUT_OF_MEMORY;
        } else {
            m->handle = (struct CUmod_st *)handle;
            m->ctx = c;
            m->ctx_id = atomic_load(&c->live_id);
            m->image = copy;
            copy = NULL;
            *module = m->handle;
        }
    }
    pthread_mutex_unlock(&fk_lock);
    free(copy);
    return rc;
}

cdResult cuModuleGetFunction(struct CUfunc_st **function, struct CUmod_st *module,
                             const char *name)
{
    FK_ENTER(cuModuleGetFunction);
    if (function == NULL || name == NULL)
        return CD_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fk_lock);
    struct fk_module *m = NULL;
    cdResult rc = fk_module_check_locked(module, "cuModuleGetFunction", &m);
    if (rc == CD_SUCCESS && atomic_load(&m->ctx->poison) != 0)
        rc = (cdResult)atomic_load(&m->ctx->poison);
    if (rc == CD_SUCCESS && !fk_ptx_has_entry(m->image, name))
        rc = CD_ERROR_NOT_FOUND;
    if (rc == CD_SUCCESS) {
        const void *handle = NULL;
        struct fk_func *f = fk_table_new(&fk_func_table, &handle);
        if (f == NULL) {
            rc = CD_ERROR_OUT_OF_MEMORY;
        } else {
            f->handle = (struct CUfunc_st *)handle;
            f->module = m;
            f->faults = strncmp(name, FK_FAULT_PREFIX, strlen(FK_FAULT_PREFIX)) == 0;
            *function = f->handle;
        }
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

cdResult cuModuleUnload(struct CUmod_st *module)
{
    FK_ENTER(cuModuleUnload);
    pthread_mutex_lock(&fk_lock);
    struct fk_module *m = NULL;
    /* Like destroying a stream, unloading works on a context with a sticky
     * error. */
    cdResult rc = fk_module_check_locked(module, "cuModuleUnload", &m);
    char *image = NULL;
    if (rc == CD_SUCCESS) {
        m->unloaded = 1;
        image = m->image;
        m->image = NULL;
    }
    pthread_mutex_unlock(&fk_lock);
    free(image);
    return rc;
}

/* Under fk_lock: the function @p h of a loaded module whose context is
 * alive; its context incarnation and whether the kernel faults when it runs. */
static cdResult fk_function_check_locked(struct CUfunc_st *h, const char *api,
                                         struct fk_ctx **ctx, unsigned long long *ctx_id,
                                         int *faults)
{
    struct fk_func *f = fk_table_find(&fk_func_table, h);
    if (f == NULL)
        return fk_violation(CD_ERROR_INVALID_HANDLE, "%s: %p is not a function handle", api,
                            (void *)h);
    struct fk_module *m = f->module;
    if (m->unloaded)
        return fk_violation(CD_ERROR_INVALID_HANDLE,
                            "%s: function %p of module %p used after cuModuleUnload", api,
                            (void *)h, (void *)m->handle);
    cdResult rc = fk_ctx_owned_check(api, "function", h, NULL, m->ctx, m->ctx_id);
    if (rc != CD_SUCCESS)
        return rc;
    *ctx = m->ctx;
    *ctx_id = m->ctx_id;
    *faults = f->faults;
    return CD_SUCCESS;
}

/* ---- launches ------------------------------------------------------------------ */

cdResult cuLaunchKernel(struct CUfunc_st *f, unsigned int grid_x, unsigned int grid_y,
                        unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                        unsigned int block_z, unsigned int shared_bytes, cdStream stream,
                        void **params, void **extra)
{
    FK_ENTER(cuLaunchKernel);
    (void)params; /* the fake's kernels are not executed */
    (void)extra;
    if (grid_x == 0 || grid_y == 0 || grid_z == 0 || block_x == 0 || block_y == 0 ||
        block_z == 0 || (unsigned long long)block_x * block_y * block_z > 1024 ||
        shared_bytes > 48 * 1024)
        return CD_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fk_lock);
    struct fk_ctx *fc = NULL;
    unsigned long long fc_id = 0;
    int faults = 0;
    struct fk_stream *s = NULL;
    struct fk_ctx *sc = NULL;
    unsigned long long sc_id = 0;
    struct fk_op *op = NULL;
    cdResult rc = fk_function_check_locked(f, "cuLaunchKernel", &fc, &fc_id, &faults);
    if (rc == CD_SUCCESS)
        rc = fk_stream_for_work_locked(stream, "cuLaunchKernel", &s);
    if (rc == CD_SUCCESS)
        sc = fk_stream_owner(s, &sc_id);
    if (rc == CD_SUCCESS && (sc != fc || sc_id != fc_id))
        rc = fk_violation(CD_ERROR_INVALID_HANDLE,
                          "cuLaunchKernel: function %p of context id %llu (device %d) launched on "
                          "a stream of context id %llu (device %d)",
                          (void *)f, fc_id, fc->device, sc_id, sc->device);
    if (rc == CD_SUCCESS && (op = fk_op_new(FK_OP_KERNEL)) == NULL)
        rc = CD_ERROR_OUT_OF_MEMORY;
    if (rc == CD_SUCCESS) {
        op->value = faults;
        fk_enqueue_locked(s, op);
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}
