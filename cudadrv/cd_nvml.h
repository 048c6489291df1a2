/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NVLinks from NVML (cd_nvml.c), for the performance model's topology.
 */
#ifndef CUCOPY_CD_NVML_H
#define CUCOPY_CD_NVML_H

/* What of nvml.h the two need, declared by hand (the fake NVML,
 * tests/fakecuda/fakenvml.c, implements it from here too). */

/* nvmlPciInfo_t */
struct cd_nvml_pci_info {
    char bus_id_legacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pci_device_id;
    unsigned int pci_subsystem_id;
    char bus_id[32];
};

/* nvmlReturn_t, nvmlEnableState_t and nvmlIntNvLinkDeviceType_t values,
 * NVML_NVLINK_MAX_LINKS (NVML 12). */
enum {
    CD_NVML_SUCCESS = 0,
    CD_NVML_ERROR_UNINITIALIZED = 1,
    CD_NVML_ERROR_INVALID_ARGUMENT = 2,
    CD_NVML_ERROR_NOT_FOUND = 6,
    CD_NVML_FEATURE_ENABLED = 1,
    CD_NVML_DEVICE_TYPE_GPU = 0,
    CD_NVML_DEVICE_TYPE_SWITCH = 2,
    CD_NVML_MAX_LINKS = 36
};

/* Count the active NVLinks joining each ordered pair of the n GPUs at PCI
 * (domain[i], bus[i], device[i]) into links[a * n + b]: links from a whose
 * far end is b, or, when there are none, the smaller of a's and b's links
 * to NVSwitches. NVML (libnvidia-ml.so.1) is loaded with dlopen and
 * initialized for the call only. Returns 0, or -1 with err set when NVML
 * cannot be loaded or initialized (links untouched). */
int cd_nvml_links(int n, const unsigned *domain, const unsigned *bus, const unsigned *device,
                  int *links, char *err, int errlen);

#endif
