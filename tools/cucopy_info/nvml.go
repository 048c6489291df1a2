// SPDX-License-Identifier: BSD-3-Clause

package main

// NVML is used here only, in the Go executable; it must never be imported by
// capi, core or cudadrv (brief §2: it would leave undefined nvml* symbols in
// the c-shared library).

import (
	"fmt"
	"math/bits"
	"os"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVMLInfo is what NVML says, or why it could not be asked.
type NVMLInfo struct {
	Available     bool         `json:"available"`
	Reason        string       `json:"reason,omitempty"`
	DriverVersion string       `json:"driver_version,omitempty"`
	Devices       []NVMLDevice `json:"devices,omitempty"`
}

// NVMLDevice is one GPU as NVML sees it, in NVML's enumeration order.
// Unknown values stay zero (PCIe 0, empty strings, nil pointers); Errors
// collects the failed queries.
type NVMLDevice struct {
	Index int `json:"index"`
	// CUDAOrdinal is the CUDA device with the same PCI bus id, -1 when CUDA
	// does not see this GPU (CUDA_VISIBLE_DEVICES) or its bus id is unknown.
	CUDAOrdinal int      `json:"cuda_ordinal"`
	Name        string   `json:"name"`
	UUID        string   `json:"uuid"`
	PCIBusID    string   `json:"pci_bus_id"` // normalized: dddd:bb:dd.f
	PCIe        PCIeLink `json:"pcie"`
	NVLinks     []NVLink `json:"nvlinks"` // the active links only
	CPUAffinity string   `json:"cpu_affinity,omitempty"`
	// NUMAAffinity is the NUMA node list near the GPU ("0"; "N/A": none),
	// from NVML's memory affinity or else sysfs numa_node (NUMASource).
	NUMAAffinity string `json:"numa_affinity,omitempty"`
	NUMASource   string `json:"numa_source,omitempty"`
	// GPUNUMAID is the NUMA node of the GPU's own memory (nvidia-smi's
	// "GPU NUMA ID"), nil when NVML has none (all but coherent GPUs).
	GPUNUMAID *int     `json:"gpu_numa_id,omitempty"`
	Errors    []string `json:"errors,omitempty"`
	handle    nvml.Device
}

// PCIeLink is the current and maximum PCIe link; 0 means unknown.
type PCIeLink struct {
	CurrGen   int `json:"curr_gen"`
	CurrWidth int `json:"curr_width"`
	MaxGen    int `json:"max_gen"`
	MaxWidth  int `json:"max_width"`
}

// NVLink is one active NVLink and where it goes.
type NVLink struct {
	Link           int    `json:"link"`
	RemotePCIBusID string `json:"remote_pci_bus_id,omitempty"`
	// RemoteNVMLIndex is the NVML GPU at the other end, -1 when the remote
	// is not a GPU (an NVSwitch) or its PCI info is unknown.
	RemoteNVMLIndex int `json:"remote_nvml_index"`
	// RemoteType is "gpu", "switch", "ibmnpu", or "" when NVML cannot say.
	RemoteType string `json:"remote_type,omitempty"`
}

// toSwitch reports whether the link ends at an NVSwitch. Without NVML's
// remote device type, a known remote bus id that is no GPU is a switch.
func (l NVLink) toSwitch() bool {
	if l.RemoteType != "" {
		return l.RemoteType == "switch"
	}
	return l.RemoteNVMLIndex < 0 && l.RemotePCIBusID != ""
}

func remoteTypeName(t nvml.IntNvLinkDeviceType) string {
	switch t {
	case nvml.NVLINK_DEVICE_TYPE_GPU:
		return "gpu"
	case nvml.NVLINK_DEVICE_TYPE_SWITCH:
		return "switch"
	case nvml.NVLINK_DEVICE_TYPE_IBMNPU:
		return "ibmnpu"
	}
	return ""
}

// Topology is the nvidia-smi topo -m view of the CUDA devices, in CUDA
// ordinal order (the same order as the peer-access matrix).
type Topology struct {
	Known  bool       `json:"known"`
	Reason string     `json:"reason,omitempty"` // why (part of) it is unknown
	GPUs   []TopoGPU  `json:"gpus"`
	Pairs  []TopoPair `json:"pairs"`
}

// TopoGPU is one row's affinity columns. Unknown values read "unknown".
type TopoGPU struct {
	Ordinal      int    `json:"ordinal"`
	PCIBusID     string `json:"pci_bus_id"`
	NVMLIndex    int    `json:"nvml_index"` // -1: not matched
	CPUAffinity  string `json:"cpu_affinity"`
	NUMAAffinity string `json:"numa_affinity"`
	GPUNUMAID    string `json:"gpu_numa_id"`
	Reason       string `json:"reason,omitempty"`
}

// TopoPair is one off-diagonal cell: NV# when the pair shares # active
// NVLinks, else the PCIe level (PIX, PXB, PHB, NODE, SYS), or "unknown".
type TopoPair struct {
	Device  int    `json:"device"`
	Peer    int    `json:"peer"`
	Label   string `json:"label"`
	Level   string `json:"pcie_level,omitempty"`
	NVLinks int    `json:"nvlinks"`
	Error   string `json:"error,omitempty"`
}

const unknown = "unknown"

// normBusID turns a PCI bus id in CUDA's ("0000:19:00.0") or NVML's
// ("00000000:19:00.0", upper or lower case) spelling into dddd:bb:dd.f, the
// sysfs spelling. Unparsable ids are only trimmed and lower-cased.
func normBusID(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	parts := strings.Split(s, ":")
	if len(parts) == 2 { // bb:dd.f without a domain
		parts = append([]string{"0"}, parts...)
	}
	if len(parts) != 3 {
		return s
	}
	df := strings.Split(parts[2], ".")
	if len(df) != 2 {
		return s
	}
	var v [4]uint64
	for i, p := range []string{parts[0], parts[1], df[0], df[1]} {
		n, err := strconv.ParseUint(p, 16, 32)
		if err != nil {
			return s
		}
		v[i] = n
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", v[0], v[1], v[2], v[3])
}

// cString reads a NUL-terminated C char array.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// pciBusID is the normalized bus id of NVML PCI info.
func pciBusID(p nvml.PciInfo) string {
	if s := cString(p.BusId[:]); s != "" {
		return normBusID(s)
	}
	if s := cString(p.BusIdLegacy[:]); s != "" {
		return normBusID(s)
	}
	return ""
}

// cpuList formats an affinity bitmask ([]uint words, bit i = CPU or NUMA
// node i) as a list like "0-31,64-95"; "" when no bit is set.
func cpuList(mask []uint) string {
	var out []string
	start := -1
	n := len(mask) * bits.UintSize
	for cpu := 0; cpu <= n; cpu++ {
		set := cpu < n && mask[cpu/bits.UintSize]&(1<<(uint(cpu)%bits.UintSize)) != 0
		switch {
		case set && start < 0:
			start = cpu
		case !set && start >= 0:
			if cpu-1 == start {
				out = append(out, strconv.Itoa(start))
			} else {
				out = append(out, fmt.Sprintf("%d-%d", start, cpu-1))
			}
			start = -1
		}
	}
	return strings.Join(out, ",")
}

// levelName is nvidia-smi topo -m's name for an NVML topology level.
func levelName(l nvml.GpuTopologyLevel) string {
	switch l {
	case nvml.TOPOLOGY_INTERNAL:
		return "INT"
	case nvml.TOPOLOGY_SINGLE:
		return "PIX"
	case nvml.TOPOLOGY_MULTIPLE:
		return "PXB"
	case nvml.TOPOLOGY_HOSTBRIDGE:
		return "PHB"
	case nvml.TOPOLOGY_NODE:
		return "NODE"
	case nvml.TOPOLOGY_SYSTEM:
		return "SYS"
	}
	return fmt.Sprintf("level%d", int(l))
}

// affinityCPUs and affinityNodes bound the affinity masks asked of NVML.
const (
	affinityCPUs  = 4096
	affinityNodes = 1024
)

// sysfsNUMA reads the NUMA node of a PCI device from sysfs.
func sysfsNUMA(busID string) (int, error) {
	b, err := os.ReadFile("/sys/bus/pci/devices/" + busID + "/numa_node")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// hasSymbol reports whether the loaded NVML exports name. go-nvml loads
// NVML with RTLD_LAZY, so calling an entry point an older driver lacks
// would kill the process instead of returning an error.
func hasSymbol(lib nvml.Interface, name string) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	ext := lib.Extensions()
	return ext != nil && ext.LookupSymbol(name) == nil
}

func panicString(r any) string {
	switch v := r.(type) {
	case error:
		return v.Error()
	case string:
		return v
	}
	return fmt.Sprint(r)
}

// queryNVML asks lib (nvml.New() in the tool, a mock in tests) about the
// GPUs and builds the topology of the CUDA devices, whose PCI bus ids are
// cudaBusIDs indexed by CUDA ordinal. It never fails: an unusable NVML, a
// panic inside go-nvml or a failed query is reported as unknown.
// numaFallback gives the NUMA node when NVML cannot (sysfsNUMA in the tool).
func queryNVML(lib nvml.Interface, cudaBusIDs []string, numaFallback func(string) (int, error)) (info NVMLInfo, topo Topology) {
	defer func() {
		// go-nvml panics on some loader failures; treat them as unavailable.
		if r := recover(); r != nil {
			info = NVMLInfo{Reason: "panic: " + panicString(r)}
			topo = unknownTopology(cudaBusIDs, "NVML unavailable: "+info.Reason)
		}
	}()
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		info.Reason = "libnvidia-ml.so.1 not found"
		return info, unknownTopology(cudaBusIDs, "NVML unavailable: "+info.Reason)
	default:
		info.Reason = "nvmlInit: " + ret.Error()
		return info, unknownTopology(cudaBusIDs, "NVML unavailable: "+info.Reason)
	}
	defer lib.Shutdown()
	info.Available = true
	if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		info.DriverVersion = v
	} else {
		info.DriverVersion = "? (" + ret.Error() + ")"
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		info.Reason = "device count: " + ret.Error()
		return info, unknownTopology(cudaBusIDs, "NVML "+info.Reason)
	}
	has := optionalCalls{
		numaNode:    hasSymbol(lib, "nvmlDeviceGetNumaNodeId"),
		memAffinity: hasSymbol(lib, "nvmlDeviceGetMemoryAffinity"),
		remoteType:  hasSymbol(lib, "nvmlDeviceGetNvLinkRemoteDeviceType"),
	}
	for i := 0; i < n; i++ {
		info.Devices = append(info.Devices, queryNVMLDevice(lib, i, has, numaFallback))
	}
	resolveNVLinks(info.Devices)
	topo = buildTopology(info.Devices, cudaBusIDs)
	return info, topo
}

// optionalCalls are the entry points newer than the oldest drivers.
type optionalCalls struct {
	numaNode    bool // nvmlDeviceGetNumaNodeId
	memAffinity bool // nvmlDeviceGetMemoryAffinity
	remoteType  bool // nvmlDeviceGetNvLinkRemoteDeviceType
}

// queryNVMLDevice asks NVML about GPU i; a panic marks only this GPU.
func queryNVMLDevice(lib nvml.Interface, i int, has optionalCalls, numaFallback func(string) (int, error)) (d NVMLDevice) {
	d = NVMLDevice{Index: i, CUDAOrdinal: -1}
	defer func() {
		if r := recover(); r != nil {
			d.Errors = append(d.Errors, "panic: "+panicString(r))
			d.handle = nil
		}
	}()
	note := func(what string, ret nvml.Return) bool {
		if ret == nvml.SUCCESS {
			return true
		}
		d.Errors = append(d.Errors, what+": "+ret.Error())
		return false
	}
	h, ret := lib.DeviceGetHandleByIndex(i)
	if !note("handle", ret) {
		return d
	}
	pci, ret := h.GetPciInfo()
	if note("pci info", ret) {
		d.PCIBusID = pciBusID(pci)
	}
	// Only a device whose bus id is known takes part in the topology.
	if d.PCIBusID != "" {
		d.handle = h
	}
	if d.Name, ret = h.GetName(); ret != nvml.SUCCESS {
		note("name", ret)
	}
	if d.UUID, ret = h.GetUUID(); ret != nvml.SUCCESS {
		note("uuid", ret)
	}
	pcie := func(what string, f func() (int, nvml.Return)) int {
		v, ret := f()
		if ret == nvml.ERROR_NOT_SUPPORTED {
			return 0
		}
		note(what, ret)
		return v
	}
	d.PCIe.CurrGen = pcie("pcie current generation", h.GetCurrPcieLinkGeneration)
	d.PCIe.CurrWidth = pcie("pcie current width", h.GetCurrPcieLinkWidth)
	d.PCIe.MaxGen = pcie("pcie max generation", h.GetMaxPcieLinkGeneration)
	d.PCIe.MaxWidth = pcie("pcie max width", h.GetMaxPcieLinkWidth)

	d.NVLinks = []NVLink{}
	for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
		// Links past the GPU's count answer INVALID_ARGUMENT, GPUs
		// without NVLink NOT_SUPPORTED: neither is an active link.
		state, ret := h.GetNvLinkState(l)
		if ret != nvml.SUCCESS || state != nvml.FEATURE_ENABLED {
			continue
		}
		link := NVLink{Link: l, RemoteNVMLIndex: -1}
		if rp, ret := h.GetNvLinkRemotePciInfo(l); note(fmt.Sprintf("nvlink %d remote pci info", l), ret) {
			link.RemotePCIBusID = pciBusID(rp)
		}
		if has.remoteType {
			if t, ret := h.GetNvLinkRemoteDeviceType(l); ret == nvml.SUCCESS {
				link.RemoteType = remoteTypeName(t)
			}
		}
		d.NVLinks = append(d.NVLinks, link)
	}

	if mask, ret := h.GetCpuAffinity(affinityCPUs); note("cpu affinity", ret) {
		d.CPUAffinity = cpuList(mask)
	}
	if has.memAffinity {
		if mask, ret := h.GetMemoryAffinity(affinityNodes, nvml.AFFINITY_SCOPE_NODE); ret == nvml.SUCCESS {
			if d.NUMAAffinity = cpuList(mask); d.NUMAAffinity != "" {
				d.NUMASource = "nvml"
			}
		}
	}
	if d.NUMAAffinity == "" && d.PCIBusID != "" && numaFallback != nil {
		if node, err := numaFallback(d.PCIBusID); err == nil {
			d.NUMAAffinity, d.NUMASource = "N/A", "sysfs"
			if node >= 0 {
				d.NUMAAffinity = strconv.Itoa(node)
			}
		}
	}
	if has.numaNode {
		if node, ret := h.GetNumaNodeId(); ret == nvml.SUCCESS && node >= 0 {
			d.GPUNUMAID = &node
		}
	}
	return d
}

// resolveNVLinks names the GPU at the far end of each link.
func resolveNVLinks(devs []NVMLDevice) {
	byBus := map[string]int{}
	for _, d := range devs {
		if d.PCIBusID != "" {
			byBus[d.PCIBusID] = d.Index
		}
	}
	for i := range devs {
		for k, l := range devs[i].NVLinks {
			if j, ok := byBus[l.RemotePCIBusID]; ok && l.RemotePCIBusID != "" {
				devs[i].NVLinks[k].RemoteNVMLIndex = j
			}
		}
	}
}

// nvlinksBetween counts the active links of a that join it to b: links
// straight to b, plus, when both GPUs hang on NVSwitches (links whose
// remote is an NVSwitch), the smaller of their switch link counts, which is what
// nvidia-smi topo -m shows on NVSwitch systems.
func nvlinksBetween(a, b *NVMLDevice) int {
	direct, swA, swB := 0, 0, 0
	for _, l := range a.NVLinks {
		switch {
		case l.RemoteNVMLIndex == b.Index:
			direct++
		case l.toSwitch():
			swA++
		}
	}
	for _, l := range b.NVLinks {
		if l.toSwitch() {
			swB++
		}
	}
	return direct + min(swA, swB)
}

// unknownTopology is the topology when NVML cannot be asked at all.
func unknownTopology(cudaBusIDs []string, reason string) Topology {
	t := Topology{Reason: reason, GPUs: []TopoGPU{}, Pairs: []TopoPair{}}
	for c, bus := range cudaBusIDs {
		t.GPUs = append(t.GPUs, TopoGPU{Ordinal: c, PCIBusID: bus, NVMLIndex: -1,
			CPUAffinity: unknown, NUMAAffinity: unknown, GPUNUMAID: unknown})
	}
	for i := range cudaBusIDs {
		for j := range cudaBusIDs {
			if i != j {
				t.Pairs = append(t.Pairs, TopoPair{Device: i, Peer: j, Label: unknown})
			}
		}
	}
	return t
}

// buildTopology matches CUDA devices to NVML devices by PCI bus id (never by
// index: CUDA_VISIBLE_DEVICES renumbers CUDA ordinals) and fills the
// matrix. NVML must still be initialized: it asks for common ancestors.
func buildTopology(devs []NVMLDevice, cudaBusIDs []string) Topology {
	t := unknownTopology(cudaBusIDs, "")
	byBus := map[string]int{}
	var lost []string
	for k, d := range devs {
		if d.handle != nil {
			byBus[d.PCIBusID] = k
		} else {
			lost = append(lost, strconv.Itoa(d.Index))
		}
	}
	match := make([]*NVMLDevice, len(cudaBusIDs))
	var unmatched []string
	for c, bus := range cudaBusIDs {
		g := &t.GPUs[c]
		k, ok := byBus[normBusID(bus)]
		switch {
		case bus == "":
			g.Reason = "CUDA PCI bus id unknown"
		case !ok:
			g.Reason = "no NVML device with PCI bus id " + bus
			if len(lost) > 0 {
				g.Reason += " (NVML device " + strings.Join(lost, ", ") + " could not be queried)"
			}
		}
		if !ok || bus == "" {
			unmatched = append(unmatched, "GPU"+strconv.Itoa(c))
			continue
		}
		d := &devs[k]
		d.CUDAOrdinal = c
		match[c] = d
		g.NVMLIndex = d.Index
		if d.CPUAffinity != "" {
			g.CPUAffinity = d.CPUAffinity
		}
		if d.NUMAAffinity != "" {
			g.NUMAAffinity = d.NUMAAffinity
		}
		g.GPUNUMAID = "N/A"
		if d.GPUNUMAID != nil {
			g.GPUNUMAID = strconv.Itoa(*d.GPUNUMAID)
		}
	}
	for k := range t.Pairs {
		p := &t.Pairs[k]
		a, b := match[p.Device], match[p.Peer]
		if a == nil || b == nil {
			continue
		}
		p.NVLinks = nvlinksBetween(a, b)
		if lvl, ret := commonAncestor(a.handle, b.handle); ret == nvml.SUCCESS {
			p.Level = levelName(lvl)
		} else {
			p.Error = "common ancestor: " + ret.Error()
		}
		switch {
		case p.NVLinks > 0:
			p.Label = fmt.Sprintf("NV%d", p.NVLinks)
		case p.Level != "":
			p.Label = p.Level
		}
	}
	t.Known = len(unmatched) == 0
	if !t.Known {
		t.Reason = "not in NVML: " + strings.Join(unmatched, ", ")
	}
	return t
}

// commonAncestor guards GetTopologyCommonAncestor against go-nvml panics.
func commonAncestor(a, b nvml.Device) (lvl nvml.GpuTopologyLevel, ret nvml.Return) {
	defer func() {
		if recover() != nil {
			ret = nvml.ERROR_UNKNOWN
		}
	}()
	return a.GetTopologyCommonAncestor(b)
}
