/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NVLinks from NVML, on a cold path (the first estimate of an iface). NVML
 * cannot be linked into the c-shared library: its undefined nvml* symbols
 * would break every program linking it (brief section 2). It is loaded here
 * with dlopen instead, and the few prototypes and the one struct it needs
 * are declared by hand from nvml.h (the _v2 calls exist since NVML 4.304,
 * CUDA 11; NVML_NVLINK_MAX_LINKS is 36 in NVML 12). The library is never
 * unloaded: NVML may keep threads, and dlopen counts references.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "cd_nvml.h"

typedef int cd_nvml_return;
typedef struct cd_nvml_device_st *cd_nvml_device;

struct cd_nvml {
    cd_nvml_return (*init)(void);
    cd_nvml_return (*shutdown)(void);
    cd_nvml_return (*handle_by_bus_id)(const char *bus_id, cd_nvml_device *dev);
    cd_nvml_return (*link_state)(cd_nvml_device dev, unsigned int link, int *active);
    cd_nvml_return (*remote_pci)(cd_nvml_device dev, unsigned int link,
                                 struct cd_nvml_pci_info *pci);
    /* Optional (NVML 11.x and later): the type of the far end. */
    cd_nvml_return (*remote_type)(cd_nvml_device dev, unsigned int link, int *type);
};

static int nvml_load(struct cd_nvml *f, char *err, int errlen)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();
        snprintf(err, (size_t)errlen, "%s", why != NULL ? why : "dlopen failed");
        return -1;
    }
    struct {
        const char *name;
        void **slot;
        int optional;
    } syms[] = {
        {"nvmlInit_v2", (void **)&f->init, 0},
        {"nvmlShutdown", (void **)&f->shutdown, 0},
        {"nvmlDeviceGetHandleByPciBusId_v2", (void **)&f->handle_by_bus_id, 0},
        {"nvmlDeviceGetNvLinkState", (void **)&f->link_state, 0},
        {"nvmlDeviceGetNvLinkRemotePciInfo_v2", (void **)&f->remote_pci, 0},
        {"nvmlDeviceGetNvLinkRemoteDeviceType", (void **)&f->remote_type, 1},
    };
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        dlerror();
        *syms[i].slot = dlsym(lib, syms[i].name);
        if (*syms[i].slot == NULL && !syms[i].optional) {
            snprintf(err, (size_t)errlen, "libnvidia-ml.so.1 has no %s", syms[i].name);
            return -1;
        }
    }
    return 0;
}

/* The GPU of the list at (domain, bus, device), or -1. */
static int gpu_at(int n, const unsigned *domain, const unsigned *bus, const unsigned *device,
                  const struct cd_nvml_pci_info *pci)
{
    for (int i = 0; i < n; i++) {
        if (pci->domain == domain[i] && pci->bus == bus[i] && pci->device == device[i])
            return i;
    }
    return -1;
}

int cd_nvml_links(int n, const unsigned *domain, const unsigned *bus, const unsigned *device,
                  int *links, char *err, int errlen)
{
    struct cd_nvml f = {0};
    if (nvml_load(&f, err, errlen) != 0)
        return -1;
    cd_nvml_return r = f.init();
    if (r != CD_NVML_SUCCESS) {
        snprintf(err, (size_t)errlen, "nvmlInit_v2 failed: NVML error %d", r);
        return -1;
    }
    int *to_switch = calloc((size_t)n, sizeof(int));
    if (to_switch == NULL) {
        f.shutdown();
        snprintf(err, (size_t)errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < n * n; i++)
        links[i] = 0;
    for (int a = 0; a < n; a++) {
        char id[32];
        snprintf(id, sizeof(id), "%08x:%02x:%02x.0", domain[a], bus[a], device[a]);
        cd_nvml_device dev;
        if (f.handle_by_bus_id(id, &dev) != CD_NVML_SUCCESS)
            continue; /* not a GPU NVML knows: no NVLink known */
        for (unsigned int l = 0; l < CD_NVML_MAX_LINKS; l++) {
            int active = 0;
            /* Links past the GPU's count answer INVALID_ARGUMENT, GPUs
             * without NVLink NOT_SUPPORTED: neither is an active link. */
            if (f.link_state(dev, l, &active) != CD_NVML_SUCCESS ||
                active != CD_NVML_FEATURE_ENABLED)
                continue;
            int type = -1;
            if (f.remote_type != NULL && f.remote_type(dev, l, &type) != CD_NVML_SUCCESS)
                type = -1;
            struct cd_nvml_pci_info pci;
            int b = -1;
            if (f.remote_pci(dev, l, &pci) == CD_NVML_SUCCESS)
                b = gpu_at(n, domain, bus, device, &pci);
            if (type == CD_NVML_DEVICE_TYPE_SWITCH || (type < 0 && b < 0))
                to_switch[a]++; /* without the type: a far end that is none of the GPUs */
            else if (b >= 0 && b != a)
                links[a * n + b]++;
        }
    }
    for (int a = 0; a < n; a++) {
        for (int b = 0; b < n; b++) {
            int s = to_switch[a] < to_switch[b] ? to_switch[a] : to_switch[b];
            if (a != b && links[a * n + b] == 0)
                links[a * n + b] = s;
        }
    }
    free(to_switch);
    f.shutdown();
    return 0;
}
