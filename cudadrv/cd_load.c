/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Loading the driver: dlopen once, resolve every entry point of
 * entry_points.h once into `cd`, through cuGetProcAddress_v2 (CUDA >= 12),
 * cuGetProcAddress (11.3+), or dlsym of the versioned names (older drivers).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cd_shim.h"

struct cd_table cd;

const char *const cd_entry_name[CD_NUM_ENTRIES] = {
#define CD_ENTRY(name, symbol, version, use, params) #name,
#include "entry_points.h"
#undef CD_ENTRY
};

static const char *const cd_entry_symbol[CD_NUM_ENTRIES] = {
#define CD_ENTRY(name, symbol, version, use, params) #symbol,
#include "entry_points.h"
#undef CD_ENTRY
};

static const int cd_entry_version[CD_NUM_ENTRIES] = {
#define CD_ENTRY(name, symbol, version, use, params) version,
#include "entry_points.h"
#undef CD_ENTRY
};

const int cd_entry_use[CD_NUM_ENTRIES] = {
#define CD_ENTRY(name, symbol, version, use, params) use,
#include "entry_points.h"
#undef CD_ENTRY
};

static void *cd_lib;

static void **cd_slot_of(int idx)
{
    return (void **)&cd + idx;
}

int cd_entry_present(int idx)
{
    return idx >= 0 && idx < CD_NUM_ENTRIES && *cd_slot_of(idx) != NULL;
}

static void *cd_resolve(int idx, int driver_version, cd_pfn_cuGetProcAddress_v2 gpa2,
                        cd_pfn_cuGetProcAddress gpa1)
{
    void *fn = NULL;
    if (cd_entry_version[idx] > driver_version)
        return NULL; /* the driver predates the ABI we declared */
    if (gpa2 != NULL) {
        unsigned int status = 0;
        if (gpa2(cd_entry_name[idx], &fn, cd_entry_version[idx], CD_GET_PROC_ADDRESS_DEFAULT,
                 &status) != CD_SUCCESS ||
            status != CD_GET_PROC_ADDRESS_SUCCESS)
            return NULL;
        return fn;
    }
    if (gpa1 != NULL) {
        if (gpa1(cd_entry_name[idx], &fn, cd_entry_version[idx], CD_GET_PROC_ADDRESS_DEFAULT) !=
            CD_SUCCESS)
            return NULL;
        return fn;
    }
    return dlsym(cd_lib, cd_entry_symbol[idx]);
}

/* A load that failed before cuInit ran: forget the table and close the
 * library again, so that failed attempts leave nothing behind. (After cuInit,
 * even a failed one, the driver may have started threads: it stays loaded.) */
static int cd_unload(int rc)
{
    memset(&cd, 0, sizeof(cd));
    dlclose(cd_lib);
    cd_lib = NULL;
    return rc;
}

int cd_load(const char *path, int *driver_version, cdResult *result, char *err, int errlen)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();
        snprintf(err, (size_t)errlen, "%s", why != NULL ? why : "dlopen failed");
        return CD_LOAD_DLOPEN;
    }
    if (lib == cd_lib)
        dlclose(lib); /* a retry after a failed cuInit: one reference is enough */
    cd_lib = lib;
    cdResult (*get_version)(int *) = (cdResult(*)(int *))dlsym(lib, "cuDriverGetVersion");
    if (get_version == NULL) {
        snprintf(err, (size_t)errlen, "cuDriverGetVersion");
        return cd_unload(CD_LOAD_MISSING);
    }
    *result = get_version(driver_version);
    if (*result != CD_SUCCESS) {
        snprintf(err, (size_t)errlen, "cuDriverGetVersion");
        return cd_unload(CD_LOAD_INIT);
    }
    cd_pfn_cuGetProcAddress_v2 gpa2 = (cd_pfn_cuGetProcAddress_v2)dlsym(lib, "cuGetProcAddress_v2");
    cd_pfn_cuGetProcAddress gpa1 =
        gpa2 != NULL ? NULL : (cd_pfn_cuGetProcAddress)dlsym(lib, "cuGetProcAddress");
    for (int i = 0; i < CD_NUM_ENTRIES; i++) {
        if (cd_entry_use[i] == CD_TESTS)
            continue;
        *cd_slot_of(i) = cd_resolve(i, *driver_version, gpa2, gpa1);
        if (*cd_slot_of(i) == NULL && cd_entry_use[i] == CD_REQUIRED) {
            snprintf(err, (size_t)errlen, "%s", cd_entry_name[i]);
            return cd_unload(CD_LOAD_MISSING);
        }
    }
    *result = cd.cuInit(0);
    if (*result != CD_SUCCESS) {
        snprintf(err, (size_t)errlen, "cuInit");
        return CD_LOAD_INIT;
    }
    return CD_LOAD_OK;
}

const char *cd_error_name(uint32_t result)
{
    const char *name = NULL;
    if (cd.cuGetErrorName == NULL || cd.cuGetErrorName(result, &name) != CD_SUCCESS)
        return NULL;
    return name;
}
