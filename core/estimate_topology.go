// SPDX-License-Identifier: BSD-3-Clause

package core

// The topology the performance model (estimate.go) reads: per device its
// PCIe link, NUMA node, compute capability and memory interface; per
// ordered device pair peer support and NVLinks. From the driver's
// attributes and sysfs; NVLinks from an NVLinkSource where one is given
// (cucopy_info passes NVML's view; without one, a pair with peer access is
// taken to be PCIe peer DMA). Nothing here creates or makes current a
// context.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cucopy/cucopy/cudadrv"
)

// DeviceTopology is what the model knows of one device. Zero values are
// unknown (NUMANode: -1).
type DeviceTopology struct {
	PCIBusID    string
	PCIeGen     int // the link's generation: the lower of the device's and its upstream port's maximum
	PCIeWidth   int // lanes: the current width (links do not narrow when idle), else the maximum
	PCIeAssumed bool
	NUMANode    int
	CCMajor     int
	MemClockKHz int // peak memory clock (CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)
	MemBusBits  int // global memory bus width (CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)
}

// PeerTopology is what the model knows of an ordered device pair.
type PeerTopology struct {
	Access  bool // CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED
	NVLinks int  // active NVLinks joining the two (directly or through NVSwitches)
	// NVLinkVersion is the NVLink generation (1-5); 0: from the compute
	// capability of the source device.
	NVLinkVersion int
}

// Topology is the machine as the model sees it.
type Topology struct {
	Devices []DeviceTopology
	Peers   [][]PeerTopology // [src][dst]; the diagonal is unused
	// NUMANodes are the host's NUMA node ids (sysfs devices/system/node);
	// empty when unknown (then any node is accepted).
	NUMANodes []int
}

// NVLinkSource says how many NVLinks join each ordered pair of the devices
// with these PCI bus ids, and their version (0 unknown); nil entries or a
// nil result mean no NVLink known.
type NVLinkSource func(busIDs []string) (links [][]int, version [][]int)

// SysfsRoot is where ReadTopology reads sysfs ("/sys").
const SysfsRoot = "/sys"

// ReadTopology reads the topology of the driver's devices. sysfs is the
// sysfs mount point (tests pass a tree of their own); nvlinks may be nil.
// A failing driver query is an error; what sysfs lacks stays unknown.
func ReadTopology(drv cudadrv.Interface, devices int, sysfs string, nvlinks NVLinkSource) (Topology, error) {
	const api = "iface_estimate"
	t := Topology{Devices: make([]DeviceTopology, devices), Peers: make([][]PeerTopology, devices)}
	busIDs := make([]string, devices)
	for dev := range devices {
		d := &t.Devices[dev]
		id, err := drv.DevicePCIBusID(dev)
		if err != nil {
			return t, driverError(api, "PCI bus id of device "+strconv.Itoa(dev), err)
		}
		d.PCIBusID = strings.ToLower(id)
		busIDs[dev] = d.PCIBusID
		if d.CCMajor, err = drv.DeviceAttribute(dev, cudadrv.AttrComputeCapabilityMaj); err != nil {
			return t, driverError(api, "compute capability of device "+strconv.Itoa(dev), err)
		}
		// The memory interface is optional: a driver that no longer
		// reports it leaves the model's constant (estimate.go).
		if clock, err := drv.DeviceAttribute(dev, cudadrv.AttrMemoryClockRate); err == nil {
			if bits, err := drv.DeviceAttribute(dev, cudadrv.AttrGlobalMemoryBusWidth); err == nil && clock > 0 && bits > 0 {
				d.MemClockKHz, d.MemBusBits = clock, bits
			}
		}
		readPCIeLink(sysfs, d)
		d.NUMANode = readInt(filepath.Join(sysfs, "bus/pci/devices", d.PCIBusID, "numa_node"), -1)
		if d.NUMANode < 0 {
			d.NUMANode = -1
		}
	}
	var links, versions [][]int
	if nvlinks != nil && devices > 1 {
		links, versions = nvlinks(busIDs)
	}
	for src := range devices {
		t.Peers[src] = make([]PeerTopology, devices)
		for dst := range devices {
			if src == dst {
				continue
			}
			v, err := drv.P2PAttribute(src, dst, cudadrv.P2PAccessSupported)
			if err != nil {
				return t, driverError(api, "peer attributes of devices "+strconv.Itoa(src)+" and "+strconv.Itoa(dst), err)
			}
			p := &t.Peers[src][dst]
			p.Access = v != 0
			p.NVLinks, p.NVLinkVersion = cell(links, src, dst), cell(versions, src, dst)
		}
	}
	t.NUMANodes = readNUMANodes(sysfs)
	return t, nil
}

func cell(m [][]int, i, j int) int {
	if i < len(m) && j < len(m[i]) {
		return m[i][j]
	}
	return 0
}

// readPCIeLink fills the PCIe generation and width of d from sysfs. The
// current speed is not used: GPUs train their link down to 2.5 GT/s when
// idle, and up again under load. The upstream port (the parent directory
// of the device's sysfs node) bounds the device's maximum. Without sysfs
// data the link is assumed from the compute capability (PCIeAssumed).
func readPCIeLink(sysfs string, d *DeviceTopology) {
	dir := filepath.Join(sysfs, "bus/pci/devices", d.PCIBusID)
	gen := linkGen(readString(filepath.Join(dir, "max_link_speed")))
	if real, err := filepath.EvalSymlinks(dir); err == nil && gen > 0 {
		if up := linkGen(readString(filepath.Join(filepath.Dir(real), "max_link_speed"))); up > 0 && up < gen {
			gen = up
		}
	}
	width := readInt(filepath.Join(dir, "current_link_width"), 0)
	if width <= 0 || width > 32 {
		width = readInt(filepath.Join(dir, "max_link_width"), 0)
	}
	if gen > 0 && width > 0 && width <= 32 {
		d.PCIeGen, d.PCIeWidth = gen, width
		return
	}
	d.PCIeGen, d.PCIeWidth, d.PCIeAssumed = assumedPCIeGen(d.CCMajor), 16, true
}

// assumedPCIeGen is the PCIe generation of the GPUs of a compute
// capability: Hopper and later gen5, Ampere gen4, older gen3.
func assumedPCIeGen(ccMajor int) int {
	switch {
	case ccMajor >= 9:
		return 5
	case ccMajor == 8:
		return 4
	}
	return 3
}

// linkGen turns a sysfs link speed ("32.0 GT/s PCIe", "8 GT/s") into a
// PCIe generation; 0 if unknown.
func linkGen(s string) int {
	f, err := strconv.ParseFloat(strings.Fields(s + " x")[0], 64)
	if err != nil {
		return 0
	}
	for gen, gts := range []float64{2.5, 5, 8, 16, 32, 64} {
		if f > gts-0.5 && f < gts+0.5 {
			return gen + 1
		}
	}
	return 0
}

func readString(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func readInt(path string, def int) int {
	n, err := strconv.Atoi(readString(path))
	if err != nil {
		return def
	}
	return n
}

// readNUMANodes lists the host's NUMA nodes (devices/system/node/nodeN).
func readNUMANodes(sysfs string) []int {
	ents, err := os.ReadDir(filepath.Join(sysfs, "devices/system/node"))
	if err != nil {
		return nil
	}
	var nodes []int
	for _, e := range ents {
		if n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "node")); err == nil && strings.HasPrefix(e.Name(), "node") {
			nodes = append(nodes, n)
		}
	}
	return nodes
}
