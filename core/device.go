// SPDX-License-Identifier: BSD-3-Clause

package core

// Devices: what the driver says of each device and of each ordered pair
// (cucopy_device_query, cucopy_device_peer_query), plus the NUMA node from
// sysfs. Nothing is retained or activated.

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cucopy/cucopy/cudadrv"
)

// DeviceAttr is what one device is (cucopy_device_attr_t).
type DeviceAttr struct {
	Name          string
	UUID          [16]byte
	PCIBusID      string
	NUMANode      int
	TotalMemory   uint64
	CCMajor       int
	CCMinor       int
	PeerMask      uint64
	PrimaryActive bool
}

// Device attribute bits for DeviceQuery (CUCOPY_DEVICE_ATTR_*).
const (
	DevAttrName = 1 << iota
	DevAttrUUID
	DevAttrPCIBusID
	DevAttrNUMANode
	DevAttrMemory
	DevAttrComputeCapability
	DevAttrPeers
	DevAttrPrimaryActive
)

// DeviceQuery reads the fields of mask for device dev.
func (c *Context) DeviceQuery(dev int, mask uint64) (DeviceAttr, error) {
	const api = "device_query"
	var a DeviceAttr
	if dev < 0 || dev >= c.devices {
		return a, errorf(ErrInvalid, api, "device %d: the driver shows %d device(s)", dev, c.devices)
	}
	var err error
	wrap := func(what string, e error) error {
		return driverError(api, fmt.Sprintf("%s of device %d", what, dev), e)
	}
	if mask&DevAttrName != 0 {
		if a.Name, err = c.drv.DeviceName(dev); err != nil {
			return a, wrap("name", err)
		}
	}
	if mask&DevAttrUUID != 0 {
		if a.UUID, err = c.drv.DeviceUUID(dev); err != nil {
			return a, wrap("UUID", err)
		}
	}
	if mask&(DevAttrPCIBusID|DevAttrNUMANode) != 0 {
		if a.PCIBusID, err = c.drv.DevicePCIBusID(dev); err != nil {
			return a, wrap("PCI bus id", err)
		}
		a.PCIBusID = strings.ToLower(a.PCIBusID)
		a.NUMANode = numaNode(a.PCIBusID)
	}
	if mask&DevAttrMemory != 0 {
		if a.TotalMemory, err = c.drv.DeviceTotalMem(dev); err != nil {
			return a, wrap("memory size", err)
		}
	}
	if mask&DevAttrComputeCapability != 0 {
		if a.CCMajor, err = c.drv.DeviceAttribute(dev, cudadrv.AttrComputeCapabilityMaj); err != nil {
			return a, wrap("compute capability", err)
		}
		if a.CCMinor, err = c.drv.DeviceAttribute(dev, cudadrv.AttrComputeCapabilityMin); err != nil {
			return a, wrap("compute capability", err)
		}
	}
	if mask&DevAttrPeers != 0 {
		for p := 0; p < c.devices && p < 64; p++ {
			if p == dev {
				continue
			}
			can, err := c.drv.CanAccessPeer(dev, p)
			if err != nil {
				return a, wrap(fmt.Sprintf("peer access to device %d", p), err)
			}
			if can {
				a.PeerMask |= 1 << uint(p)
			}
		}
	}
	if mask&DevAttrPrimaryActive != 0 {
		if a.PrimaryActive, err = c.drv.PrimaryActive(dev); err != nil {
			return a, wrap("primary context state", err)
		}
	}
	return a, nil
}

// numaNode reads the host NUMA node of a PCI device from sysfs; -1 if unknown.
func numaNode(busID string) int {
	b, err := os.ReadFile("/sys/bus/pci/devices/" + busID + "/numa_node")
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// PeerAttr is what the driver says of an ordered device pair (cucopy_peer_attr_t).
type PeerAttr struct {
	CanAccess       bool
	AccessSupported bool
	NativeAtomics   bool
	PerformanceRank int
}

// PeerQuery reads the driver's peer attributes of (dev, peer).
func (c *Context) PeerQuery(dev, peer int) (PeerAttr, error) {
	const api = "device_peer_query"
	var a PeerAttr
	if dev < 0 || dev >= c.devices || peer < 0 || peer >= c.devices || dev == peer {
		return a, errorf(ErrInvalid, api, "device pair (%d, %d): want two different devices of %d", dev, peer, c.devices)
	}
	var err error
	if a.CanAccess, err = c.drv.CanAccessPeer(dev, peer); err != nil {
		return a, driverError(api, "peer access", err)
	}
	attr := func(which int) (int, error) {
		v, err := c.drv.P2PAttribute(dev, peer, which)
		if err != nil {
			return 0, driverError(api, fmt.Sprintf("P2P attribute %d of (%d, %d)", which, dev, peer), err)
		}
		return v, nil
	}
	v, err := attr(cudadrv.P2PAccessSupported)
	if err != nil {
		return a, err
	}
	a.AccessSupported = v != 0
	if v, err = attr(cudadrv.P2PNativeAtomics); err != nil {
		return a, err
	}
	a.NativeAtomics = v != 0
	if a.PerformanceRank, err = attr(cudadrv.P2PPerformanceRank); err != nil {
		return a, err
	}
	return a, nil
}
