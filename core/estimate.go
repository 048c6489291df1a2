// SPDX-License-Identifier: BSD-3-Clause

package core

// The performance model (cucopy_iface_estimate; docs/design.md,
// "Performance model"): time(length) = latency + length / bandwidth per
// (source place, destination place), from the topology (estimate_topology.go)
// and the constants below, or from a measurement of the pair through a
// private iface (estimate_calibrate.go), kept for the iface's life.

import (
	"fmt"
	"sync"

	"github.com/cucopy/cucopy/cudadrv"
)

// Path is the way a copy's data takes (cucopy_path_t).
type Path int32

const (
	PathCPU        Path = 0 // host to host, on the CPU
	PathPCIe       Path = 1 // pinned host <-> GPU, DMA over PCIe
	PathPCIeStaged Path = 2 // pageable host <-> GPU, staged by the driver
	PathDevice     Path = 3 // within one GPU's memory
	PathNVLink     Path = 4 // GPU <-> GPU over NVLink
	PathPCIePeer   Path = 5 // GPU <-> GPU, peer DMA over PCIe
	PathHostStaged Path = 6 // GPU <-> GPU without peer access, through host memory
)

var pathNames = [...]string{"cpu", "pcie", "pcie-staged", "device", "nvlink", "pcie-peer", "host-staged"}

func (p Path) String() string {
	if p >= 0 && int(p) < len(pathNames) {
		return pathNames[p]
	}
	return fmt.Sprintf("path(%d)", int(p))
}

// NUMAAny is the device of host memory near the GPU it is copied with
// (CUCOPY_NUMA_ANY).
const NUMAAny = -1

// Place is one side of a copy: a memory type, whether host memory is
// pinned, and a device ordinal (device and managed memory) or a host NUMA
// node (host memory; NUMAAny).
type Place struct {
	Type   MemType
	Pinned bool
	Device int
}

func (p Place) String() string {
	switch {
	case p.Type == MemHost && p.Pinned:
		return "pinned host memory" + numaSuffix(p.Device)
	case p.Type == MemHost:
		return "pageable host memory" + numaSuffix(p.Device)
	case p.Type == MemCUDAManaged:
		return fmt.Sprintf("managed memory of device %d", p.Device)
	}
	return fmt.Sprintf("memory of device %d", p.Device)
}

func numaSuffix(node int) string {
	if node == NUMAAny {
		return ""
	}
	return fmt.Sprintf(" on NUMA node %d", node)
}

// Estimate is the expected cost of a copy (cucopy_estimate_attr_t).
type Estimate struct {
	Latency    float64 // seconds
	Bandwidth  float64 // bytes per second
	Time       float64 // seconds for the length asked: Latency + length / Bandwidth
	Calibrated bool
	Path       Path
	PathGen    int // PCIe generation or NVLink version
	PathWidth  int // PCIe lanes, NVLinks, or memory bus bits
	NUMARemote bool
}

// The model's constants. Latencies are one lone small copy, issue to
// completion, through cucopy; bandwidths the rate of large copies. Where
// they come from: docs/design.md, "Performance model".
const (
	pcieEfficiency   = 0.88 // DMA payload over raw PCIe rate: 55.4 of 63.0 GB/s, H200 gen5 x16
	nvlinkEfficiency = 0.88 // 395 of 450 GB/s, H200 NV18
	// A device-to-device copy reads and writes every byte: half the memory
	// interface's peak, of which about 85% is reached (2097 GB/s on an
	// H200, 4917 GB/s peak).
	deviceCopyFactor = 0.43
	deviceCopyRate   = 2.0e12 // when the driver does not report the memory interface
	pageableH2DRate  = 8.5e9  // the driver's CPU staging of pageable memory (H200 hosts: 7.2-9.0 GB/s at 256 MiB)
	pageableD2HRate  = 16.0e9 // 15.2-18.5 GB/s
	cpuCopyRate      = 10.0e9 // one core's memcpy of large buffers
	numaRemoteFactor = 0.8    // host memory across the socket link
	// NVLink per link and direction, by version (GB/s): 1: 20, 2-4: 25, 5: 50.
	latH2DPinned     = 6.5e-6
	latD2HPinned     = 7.7e-6
	latH2DPageable   = 6.6e-6
	latD2HPageable   = 9.6e-6
	latDevice        = 10.2e-6
	latPeer          = 7.5e-6
	latCPU           = 0.5e-6
	latNUMARemote    = 0.5e-6
	calibrationBytes = 256 << 20
)

// pcieLaneRate is the raw data rate of one PCIe lane by generation, bytes
// per second after line coding (8b/10b to gen2, 128b/130b gen3-5, FLIT gen6).
var pcieLaneRate = [...]float64{0, 0.25e9, 0.5e9, 0.985e9, 1.969e9, 3.938e9, 7.56e9}

func nvlinkRate(version int) float64 {
	switch {
	case version >= 5:
		return 50e9
	case version == 1:
		return 20e9
	}
	return 25e9
}

// nvlinkVersionOf is the NVLink generation of a compute capability:
// Volta 2, Ampere 3, Hopper 4, Blackwell 5.
func nvlinkVersionOf(ccMajor int) int {
	switch {
	case ccMajor >= 10:
		return 5
	case ccMajor == 9:
		return 4
	case ccMajor == 8:
		return 3
	}
	return 2
}

// linear is latency + length / bandwidth.
type linear struct {
	lat, bw float64
}

func (l linear) at(length uint64) float64 { return l.lat + float64(length)/l.bw }

// pairKey is what a calibration is kept under: host memory's NUMA node
// is not part of it (the measurement does not place memory; the model's
// NUMA factor applies on top).
type pairKey struct {
	src, dst Place
}

// estimator is an iface's model state. mu is a leaf for estimates and is
// held across a calibration, which takes the context's and the private
// iface's locks, never the owning iface's (Iface's lock order).
type estimator struct {
	mu        sync.Mutex
	topo      *Topology
	nvlinks   NVLinkSource
	sysfs     string
	measured  map[pairKey]linear
	measures  int    // calibrations made (tests)
	calBytes  uint64 // the bandwidth copy's size
	calibrate bool   // CUCOPY_CALIBRATE
}

func newEstimator(cfg Config) *estimator {
	return &estimator{sysfs: SysfsRoot, nvlinks: nvmlLinks, measured: map[pairKey]linear{}, calBytes: calibrationBytes, calibrate: cfg.Calibrate}
}

// nvmlLinks is the default NVLink source: NVML loaded with dlopen
// (cudadrv.NVLinks). Without NVML no NVLink is known (logged at debug).
// The NVLink version comes from the compute capability: NVML's
// nvmlDeviceGetNvLinkVersion answers in an enum whose values drivers have
// not kept apart from plain version numbers.
func nvmlLinks(busIDs []string) ([][]int, [][]int) {
	links, err := cudadrv.NVLinks(busIDs)
	if err != nil {
		logf(LogDebug, "iface_estimate: no NVLink information: %v", err)
		return nil, nil
	}
	return links, nil
}

// SetTopology makes the iface's estimates use t instead of reading the
// machine (tests, and tools that know more, e.g. NVML's NVLinks).
// Calibrations made so far stay.
func (i *Iface) SetTopology(t Topology) {
	i.est.mu.Lock()
	i.est.topo = &t
	i.est.mu.Unlock()
}

// SetNVLinkSource replaces the topology read's source of NVLinks (default:
// NVML loaded with dlopen, nvmlLinks); nil: none.
func (i *Iface) SetNVLinkSource(src NVLinkSource) {
	i.est.mu.Lock()
	i.est.nvlinks = src
	i.est.mu.Unlock()
}

// SetCalibrationBytes sets the size of the bandwidth measurement (tests;
// default 256 MiB).
func (i *Iface) SetCalibrationBytes(n uint64) {
	i.est.mu.Lock()
	i.est.calBytes = max(n, 1)
	i.est.mu.Unlock()
}

// Calibrations is how many pairs this iface measured.
func (i *Iface) Calibrations() int {
	i.est.mu.Lock()
	defer i.est.mu.Unlock()
	return i.est.measures
}

// Topology is the topology the iface's estimates use, read now if needed.
func (i *Iface) Topology() (Topology, error) {
	i.est.mu.Lock()
	defer i.est.mu.Unlock()
	t, err := i.topology()
	if err != nil {
		return Topology{}, err
	}
	return *t, nil
}

// topology reads the topology once; under est.mu.
func (i *Iface) topology() (*Topology, error) {
	if i.est.topo == nil {
		t, err := ReadTopology(i.drv, i.ctx.devices, i.est.sysfs, i.est.nvlinks)
		if err != nil {
			return nil, err
		}
		i.est.topo = &t
	}
	return i.est.topo, nil
}

// Estimate says what a copy of length bytes from src to dst is expected to
// cost. calibrate (or CUCOPY_CALIBRATE) measures the pair first if this
// iface has not measured it yet; a calibration that cannot run leaves the
// model's numbers (logged at info level).
func (i *Iface) Estimate(src, dst Place, length uint64, calibrate bool) (Estimate, error) {
	const api = "iface_estimate"
	if i.closed.Load() {
		return Estimate{}, errorf(ErrHandle, api, "iface is closed")
	}
	i.est.mu.Lock()
	defer i.est.mu.Unlock()
	t, err := i.topology()
	if err != nil {
		return Estimate{}, err
	}
	if err := t.check(api, "source", src); err != nil {
		return Estimate{}, err
	}
	if err := t.check(api, "destination", dst); err != nil {
		return Estimate{}, err
	}
	e, near := t.model(src, dst)
	key := pairKey{src: nearPlace(src), dst: nearPlace(dst)}
	m, ok := i.est.measured[key]
	if !ok && (calibrate || i.est.calibrate) {
		if m, err = i.measure(key.src, key.dst, i.est.calBytes); err != nil {
			logf(LogInfo, "%s: calibration of %v to %v not possible, using the model: %v", api, key.src, key.dst, err)
		} else {
			i.est.measured[key] = m
			i.est.measures++
			ok = true
		}
	}
	if ok {
		// The model's NUMA correction on top of the measurement.
		e.Latency = m.lat + (e.Latency - near.lat)
		e.Bandwidth = m.bw * (e.Bandwidth / near.bw)
		e.Calibrated = true
	}
	e.Time = linear{e.Latency, e.Bandwidth}.at(length)
	return e, nil
}

func nearPlace(p Place) Place {
	if p.Type == MemHost {
		p.Device = NUMAAny
	}
	return p
}

// check validates one side of a copy against the topology.
func (t *Topology) check(api, side string, p Place) error {
	switch p.Type {
	case MemHost:
		if p.Device == NUMAAny {
			return nil
		}
		if p.Device < 0 {
			return errorf(ErrInvalid, api, "%s: host NUMA node %d: want a node or CUCOPY_NUMA_ANY (-1)", side, p.Device)
		}
		if len(t.NUMANodes) == 0 {
			return nil // the host does not say: any node goes
		}
		for _, n := range t.NUMANodes {
			if n == p.Device {
				return nil
			}
		}
		return errorf(ErrInvalid, api, "%s: host NUMA node %d: the host has nodes %v", side, p.Device, t.NUMANodes)
	case MemCUDA, MemCUDAManaged:
		if p.Pinned {
			return errorf(ErrInvalid, api, "%s: the pinned flag is for host memory only", side)
		}
		if p.Device < 0 || p.Device >= len(t.Devices) {
			return errorf(ErrInvalid, api, "%s: device %d: the driver shows %d device(s)", side, p.Device, len(t.Devices))
		}
		return nil
	}
	return errorf(ErrInvalid, api, "%s: unknown memory type %d", side, int(p.Type))
}

// model is the topology's estimate of src -> dst (Time not set), and the
// same with host memory near its GPU (what a calibration measures).
func (t *Topology) model(src, dst Place) (Estimate, linear) {
	var e Estimate
	var l linear
	switch {
	case src.Type == MemHost && dst.Type == MemHost:
		e.Path, l = PathCPU, linear{latCPU, cpuCopyRate}
	case src.Type == MemHost || dst.Type == MemHost:
		h2d := src.Type == MemHost
		host, dev := src, dst
		if !h2d {
			host, dev = dst, src
		}
		gpu := t.Devices[dev.Device]
		e.PathGen, e.PathWidth = gpu.PCIeGen, gpu.PCIeWidth
		pinned := gpu.pcieRate()
		switch {
		case host.Pinned && h2d:
			e.Path, l = PathPCIe, linear{latH2DPinned, pinned}
		case host.Pinned:
			e.Path, l = PathPCIe, linear{latD2HPinned, pinned}
		case h2d:
			e.Path, l = PathPCIeStaged, linear{latH2DPageable, min(pinned, pageableH2DRate)}
		default:
			e.Path, l = PathPCIeStaged, linear{latD2HPageable, min(pinned, pageableD2HRate)}
		}
		e.NUMARemote = host.Device >= 0 && gpu.NUMANode >= 0 && host.Device != gpu.NUMANode
	case src.Device == dst.Device:
		d := t.Devices[src.Device]
		e.Path, e.PathWidth, l = PathDevice, d.MemBusBits, linear{latDevice, deviceCopyRate}
		if d.MemClockKHz > 0 && d.MemBusBits > 0 {
			// Peak: double data rate on every bit of the bus.
			l.bw = deviceCopyFactor * 2 * float64(d.MemClockKHz) * 1e3 * float64(d.MemBusBits) / 8
		}
	default:
		a, b := t.Devices[src.Device], t.Devices[dst.Device]
		p := t.Peers[src.Device][dst.Device]
		switch {
		case p.NVLinks > 0:
			v := p.NVLinkVersion
			if v == 0 {
				v = nvlinkVersionOf(a.CCMajor)
			}
			e.Path, e.PathGen, e.PathWidth = PathNVLink, v, p.NVLinks
			l = linear{latPeer, nvlinkEfficiency * float64(p.NVLinks) * nvlinkRate(v)}
		case p.Access:
			slow := a
			if b.pcieRate() < a.pcieRate() {
				slow = b
			}
			e.Path, e.PathGen, e.PathWidth = PathPCIePeer, slow.PCIeGen, slow.PCIeWidth
			l = linear{latPeer, slow.pcieRate()}
		default:
			// Device to host, then host to device, one after the other.
			e.Path = PathHostStaged
			l = linear{latD2HPinned + latH2DPinned, 1 / (1/a.pcieRate() + 1/b.pcieRate())}
		}
	}
	e.Latency, e.Bandwidth = l.lat, l.bw
	if e.NUMARemote {
		e.Latency += latNUMARemote
		e.Bandwidth *= numaRemoteFactor
	}
	return e, l
}

// pcieRate is what DMA reaches over the device's PCIe link.
func (d DeviceTopology) pcieRate() float64 {
	gen := min(max(d.PCIeGen, 1), len(pcieLaneRate)-1)
	return pcieEfficiency * pcieLaneRate[gen] * float64(max(d.PCIeWidth, 1))
}
