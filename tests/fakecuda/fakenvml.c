/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A fake libnvidia-ml.so.1: the NVML calls cudadrv/cd_nvml.c makes, for the
 * fake driver's GPUs (PCI bus 0x19 + ordinal, as fakecuda_device.c reports
 * them). GPU k's NVLinks all go to GPU k ^ 1 (pairs joined by a bridge), so
 * two fake GPUs are joined both ways by $FAKENVML_LINKS links (default 18,
 * an H200's NV18); with FAKENVML_SWITCH=1 every GPU's links go to an
 * NVSwitch (PCI bus 0xf0) instead. Tests put its directory first on
 * LD_LIBRARY_PATH. The types and values come from cudadrv/cd_nvml.h.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cd_nvml.h"

#define FN_PCI_BUS_FIRST 0x19

static int initialized;

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v != NULL && *v != '\0' ? atoi(v) : def;
}

static int devices(void)
{
    return env_int("FAKECUDA_DEVICES", 2);
}

static int links(void)
{
    int n = env_int("FAKENVML_LINKS", 18);
    return n < 0 ? 0 : n > CD_NVML_MAX_LINKS ? CD_NVML_MAX_LINKS : n;
}

/* Handles are ordinal + 1, never dereferenced. */
static int ordinal(const void *dev)
{
    long k = (long)(uintptr_t)dev - 1;
    return k >= 0 && k < devices() ? (int)k : -1;
}

__attribute__((visibility("default"))) int nvmlInit_v2(void)
{
    initialized++;
    return CD_NVML_SUCCESS;
}

__attribute__((visibility("default"))) int nvmlShutdown(void)
{
    if (initialized == 0)
        return CD_NVML_ERROR_UNINITIALIZED;
    initialized--;
    return CD_NVML_SUCCESS;
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByPciBusId_v2(const char *id,
                                                                                  void **dev)
{
    unsigned int domain;
    unsigned int bus;
    unsigned int slot;
    unsigned int fn;
    if (!initialized)
        return CD_NVML_ERROR_UNINITIALIZED;
    if (id == NULL || dev == NULL || sscanf(id, "%x:%x:%x.%x", &domain, &bus, &slot, &fn) != 4)
        return CD_NVML_ERROR_INVALID_ARGUMENT;
    int k = (int)bus - FN_PCI_BUS_FIRST;
    if (domain != 0 || slot != 0 || k < 0 || k >= devices())
        return CD_NVML_ERROR_NOT_FOUND;
    *dev = (void *)(uintptr_t)(k + 1);
    return CD_NVML_SUCCESS;
}

#define FN_SWITCH 1000 /* remote() of a link to the NVSwitch */

static int to_switch(void)
{
    return env_int("FAKENVML_SWITCH", 0) != 0;
}

/* The GPU at the far end of GPU k's link (k ^ 1, if that GPU exists),
 * FN_SWITCH, or -1 for no link. */
static int remote(int k, unsigned int link)
{
    if ((int)link >= links())
        return -1;
    if (to_switch())
        return FN_SWITCH;
    return (k ^ 1) < devices() ? k ^ 1 : -1;
}

__attribute__((visibility("default"))) int nvmlDeviceGetNvLinkState(void *dev,
                                                                          unsigned int link,
                                                                          int *active)
{
    int k = ordinal(dev);
    if (!initialized)
        return CD_NVML_ERROR_UNINITIALIZED;
    if (k < 0 || active == NULL || link >= CD_NVML_MAX_LINKS)
        return CD_NVML_ERROR_INVALID_ARGUMENT;
    *active = remote(k, link) >= 0 ? CD_NVML_FEATURE_ENABLED : 0;
    return CD_NVML_SUCCESS;
}

__attribute__((visibility("default"))) int
nvmlDeviceGetNvLinkRemotePciInfo_v2(void *dev, unsigned int link, struct cd_nvml_pci_info *pci)
{
    int k = ordinal(dev);
    if (!initialized)
        return CD_NVML_ERROR_UNINITIALIZED;
    if (k < 0 || pci == NULL || remote(k, link) < 0)
        return CD_NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof(*pci));
    int far = remote(k, link);
    pci->bus = far == FN_SWITCH ? 0xf0u : (unsigned int)(FN_PCI_BUS_FIRST + far);
    snprintf(pci->bus_id, sizeof(pci->bus_id), "00000000:%02x:00.0", pci->bus);
    snprintf(pci->bus_id_legacy, sizeof(pci->bus_id_legacy), "0000:%02x:00.0", pci->bus);
    return CD_NVML_SUCCESS;
}

__attribute__((visibility("default"))) int
nvmlDeviceGetNvLinkRemoteDeviceType(void *dev, unsigned int link, int *type)
{
    int k = ordinal(dev);
    if (!initialized)
        return CD_NVML_ERROR_UNINITIALIZED;
    if (k < 0 || type == NULL || remote(k, link) < 0)
        return CD_NVML_ERROR_INVALID_ARGUMENT;
    *type = remote(k, link) == FN_SWITCH ? CD_NVML_DEVICE_TYPE_SWITCH : CD_NVML_DEVICE_TYPE_GPU;
    return CD_NVML_SUCCESS;
}
