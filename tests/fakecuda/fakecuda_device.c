/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device queries: N identical H200-like devices on distinct PCI buses.
 */
#include "fakecuda_internal.h"

#include <stdio.h>
#include <string.h>

#define FK_TOTAL_MEM ((size_t)80 << 30)
#define FK_PCI_BUS_FIRST 0x19

int fk_device_valid(int dev)
{
    return dev >= 0 && dev < fk_cfg.devices;
}

cdResult cuDeviceGet(cdDevice *device, int ordinal)
{
    FK_ENTER(cuDeviceGet);
    if (device == NULL)
        return CD_ERROR_INVALID_VALUE;
    if (!fk_device_valid(ordinal))
        return CD_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CD_SUCCESS;
}

cdResult cuDeviceGetCount(int *count)
{
    FK_ENTER(cuDeviceGetCount);
    if (count == NULL)
        return CD_ERROR_INVALID_VALUE;
    *count = fk_cfg.devices;
    return CD_SUCCESS;
}

cdResult cuDeviceGetName(char *name, int len, cdDevice dev)
{
    FK_ENTER(cuDeviceGetName);
    if (name == NULL || len <= 0)
        return CD_ERROR_INVALID_VALUE;
    if (!fk_device_valid(dev))
        return CD_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "FakeCUDA H200 #%d", dev);
    return CD_SUCCESS;
}

cdResult cuDeviceGetAttribute(int *value, unsigned int attrib, cdDevice dev)
{
    FK_ENTER(cuDeviceGetAttribute);
    if (value == NULL)
        return CD_ERROR_INVALID_VALUE;
    if (!fk_device_valid(dev))
        return CD_ERROR_INVALID_DEVICE;
    switch (attrib) {
    case CD_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        *value = 132;
        break;
    case CD_DEVICE_ATTRIBUTE_PCI_BUS_ID:
        *value = FK_PCI_BUS_FIRST + dev;
        break;
    case CD_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
    case CD_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
    case CD_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        *value = 0;
        break;
    case CD_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
        *value = 4;
        break;
    case CD_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: /* an H200's HBM3e: 3201 MHz, 6144 bits */
        *value = 3201000;
        break;
    case CD_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
        *value = 6144;
        break;
    case CD_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        *value = 9;
        break;
    case CD_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CD_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CD_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
        *value = 1;
        break;
    default:
        /* The real driver knows more attributes; the project must declare an
         * attribute in cd_types.h (and teach the fake) before using it. */
        fprintf(stderr, "fakecuda: cuDeviceGetAttribute: attribute %u unknown to the fake\n",
                attrib);
        return CD_ERROR_INVALID_VALUE;
    }
    return CD_SUCCESS;
}

cdResult cuDeviceTotalMem_v2(size_t *bytes, cdDevice dev)
{
    FK_ENTER(cuDeviceTotalMem);
    if (bytes == NULL)
        return CD_ERROR_INVALID_VALUE;
    if (!fk_device_valid(dev))
        return CD_ERROR_INVALID_DEVICE;
    *bytes = FK_TOTAL_MEM;
    return CD_SUCCESS;
}

cdResult cuDeviceGetPCIBusId(char *bus_id, int len, cdDevice dev)
{
    FK_ENTER(cuDeviceGetPCIBusId);
    if (bus_id == NULL || len <= 0)
        return CD_ERROR_INVALID_VALUE;
    if (!fk_device_valid(dev))
        return CD_ERROR_INVALID_DEVICE;
    snprintf(bus_id, (size_t)len, "0000:%02x:00.0", FK_PCI_BUS_FIRST + dev);
    return CD_SUCCESS;
}

cdResult cuDeviceCanAccessPeer(int *can_access, cdDevice dev, cdDevice peer)
{
    FK_ENTER(cuDeviceCanAccessPeer);
    if (can_access == NULL)
        return CD_ERROR_INVALID_VALUE;
    if (!fk_device_valid(dev) || !fk_device_valid(peer))
        return CD_ERROR_INVALID_DEVICE;
    *can_access = dev != peer && !fk_cfg.no_peer;
    return CD_SUCCESS;
}

/* A stable UUID per device: a fixed prefix, the ordinal, and a byte that
 * depends on it, so every byte sequence differs between devices. */
cdResult cuDeviceGetUuid_v2(struct CUuuid_st *uuid, cdDevice dev)
{
    FK_ENTER(cuDeviceGetUuid);
    if (uuid == NULL)
        return CD_ERROR_INVALID_VALUE;
    if (!fk_device_valid(dev))
        return CD_ERROR_INVALID_DEVICE;
    unsigned char bytes[16] = {0xfa, 0x4e, 0xc0, 0xda, 0x00, 0x00, 0x40, 0x00,
                               0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    bytes[5] = (unsigned char)dev;
    bytes[14] = (unsigned char)(0x11 * (dev + 1));
    bytes[15] = (unsigned char)dev;
    memcpy(uuid, bytes, sizeof bytes);
    return CD_SUCCESS;
}

cdResult cuDeviceGetP2PAttribute(int *value, unsigned int attrib, cdDevice src, cdDevice dst)
{
    FK_ENTER(cuDeviceGetP2PAttribute);
    if (value == NULL)
        return CD_ERROR_INVALID_VALUE;
    if (!fk_device_valid(src) || !fk_device_valid(dst) || src == dst)
        return CD_ERROR_INVALID_DEVICE;
    switch (attrib) {
    case CD_P2P_ATTRIBUTE_PERFORMANCE_RANK:
        *value = 0;
        break;
    case CD_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
    case CD_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
        *value = !fk_cfg.no_peer;
        break;
    default:
        fprintf(stderr, "fakecuda: cuDeviceGetP2PAttribute: attribute %u unknown to the fake\n",
                attrib);
        return CD_ERROR_INVALID_VALUE;
    }
    return CD_SUCCESS;
}
