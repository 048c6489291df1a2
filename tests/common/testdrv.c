/* SPDX-License-Identifier: BSD-3-Clause */
#include "testdrv.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

struct testdrv td;

static int resolve(cd_pfn_cuGetProcAddress_v2 gpa2, cd_pfn_cuGetProcAddress gpa1,
                   const char *name, const char *symbol, int version, int required,
                   void **slot)
{
    void *fn = NULL;
    if (version > td.driver_version) {
        fn = NULL;
    } else if (gpa2 != NULL) {
        unsigned int status = 0;
        if (gpa2(name, &fn, version, CD_GET_PROC_ADDRESS_DEFAULT, &status) != CD_SUCCESS ||
            status != CD_GET_PROC_ADDRESS_SUCCESS)
            fn = NULL;
    } else if (gpa1 != NULL) {
        if (gpa1(name, &fn, version, CD_GET_PROC_ADDRESS_DEFAULT) != CD_SUCCESS)
            fn = NULL;
    } else {
        fn = dlsym(td.lib, symbol);
    }
    *slot = fn;
    if (fn == NULL && required) {
        fprintf(stderr, "testdrv: driver lacks %s\n", name);
        return -1;
    }
    return 0;
}

int testdrv_load(void)
{
    if (td.lib != NULL)
        return 0;
    const char *path = getenv("CUCOPY_CUDA_DRIVER");
    if (path == NULL || path[0] == '\0')
        path = "libcuda.so.1";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "testdrv: cannot load %s: %s\n", path, dlerror());
        return -1;
    }
    td.lib = lib;
    cd_pfn_cuGetProcAddress_v2 gpa2 = (cd_pfn_cuGetProcAddress_v2)dlsym(lib, "cuGetProcAddress_v2");
    cd_pfn_cuGetProcAddress gpa1 = (cd_pfn_cuGetProcAddress)dlsym(lib, "cuGetProcAddress");
    cdResult (*get_version)(int *) = (cdResult(*)(int *))dlsym(lib, "cuDriverGetVersion");
    if (get_version == NULL || get_version(&td.driver_version) != CD_SUCCESS) {
        fprintf(stderr, "testdrv: cuDriverGetVersion failed\n");
        return -1;
    }
    int failed = 0;
#define CD_ENTRY(name, symbol, version, use, params) \
    failed |= resolve(gpa2, gpa1, #name, #symbol, version, (use) == CD_REQUIRED, (void **)&td.name);
#include "entry_points.h"
#undef CD_ENTRY
    if (failed)
        return -1;
    TD_CHECK(td.cuInit(0));
    TD_CHECK(td.cuDeviceGetCount(&td.device_count));
    int (*is_fake)(void) = (int (*)(void))testdrv_fake_sym("fakecuda_is_fake");
    td.is_fake = is_fake != NULL && is_fake();
    return 0;
}

void *testdrv_fake_sym(const char *name)
{
    return td.lib != NULL ? dlsym(td.lib, name) : NULL;
}

const char *testdrv_error_name(cdResult r)
{
    const char *name = NULL;
    if (td.cuGetErrorName == NULL || td.cuGetErrorName(r, &name) != CD_SUCCESS || name == NULL)
        return "unknown CUresult";
    return name;
}

void testdrv_fail(const char *file, int line, const char *what, cdResult r)
{
    fprintf(stderr, "%s:%d: %s failed: %s (%u)\n", file, line, what, testdrv_error_name(r), r);
    exit(1);
}
