// SPDX-License-Identifier: BSD-3-Clause

package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// fakeGPU describes one GPU of a mock NVML.
type fakeGPU struct {
	bus       string         // NVML spelling, e.g. "00000000:19:00.0"
	links     map[int]string // active NVLink -> remote bus id
	switches  bool           // the remote of every link is an NVSwitch
	affinity  []uint         // CPU mask words
	numa      int            // the NUMA node near the GPU (memory affinity)
	handleErr nvml.Return    // DeviceGetHandleByIndex fails with this
}

func pciInfo(bus string) nvml.PciInfo {
	var p nvml.PciInfo
	for i := 0; i < len(bus) && i < len(p.BusId)-1; i++ {
		p.BusId[i] = int8(bus[i])
	}
	return p
}

// nv18 makes 18 active links, all to remote.
func nv18(remote string) map[int]string {
	m := map[int]string{}
	for l := 0; l < 18; l++ {
		m[l] = remote
	}
	return m
}

// mockNVML builds an nvml.Interface over gpus. level gives the common
// ancestor of two NVML indices (SYS when nil).
func mockNVML(gpus []fakeGPU, level func(a, b int) nvml.GpuTopologyLevel) *mock.Interface {
	if level == nil {
		level = func(a, b int) nvml.GpuTopologyLevel { return nvml.TOPOLOGY_SYSTEM }
	}
	devs := make([]*mock.Device, len(gpus))
	index := map[nvml.Device]int{}
	for i := range gpus {
		g := gpus[i]
		d := &mock.Device{
			GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) { return pciInfo(g.bus), nvml.SUCCESS },
			GetNameFunc:    func() (string, nvml.Return) { return "NVIDIA H200", nvml.SUCCESS },
			GetUUIDFunc: func() (string, nvml.Return) {
				return "GPU-0000000" + string(rune('0'+i)), nvml.SUCCESS
			},
			GetCurrPcieLinkGenerationFunc: func() (int, nvml.Return) { return 5, nvml.SUCCESS },
			GetCurrPcieLinkWidthFunc:      func() (int, nvml.Return) { return 16, nvml.SUCCESS },
			GetMaxPcieLinkGenerationFunc:  func() (int, nvml.Return) { return 5, nvml.SUCCESS },
			GetMaxPcieLinkWidthFunc:       func() (int, nvml.Return) { return 16, nvml.SUCCESS },
			GetNvLinkStateFunc: func(l int) (nvml.EnableState, nvml.Return) {
				if len(g.links) == 0 {
					return 0, nvml.ERROR_NOT_SUPPORTED
				}
				if l >= 18 {
					return 0, nvml.ERROR_INVALID_ARGUMENT
				}
				if _, ok := g.links[l]; ok {
					return nvml.FEATURE_ENABLED, nvml.SUCCESS
				}
				return nvml.FEATURE_DISABLED, nvml.SUCCESS
			},
			GetNvLinkRemotePciInfoFunc: func(l int) (nvml.PciInfo, nvml.Return) {
				return pciInfo(g.links[l]), nvml.SUCCESS
			},
			GetNvLinkRemoteDeviceTypeFunc: func(int) (nvml.IntNvLinkDeviceType, nvml.Return) {
				if g.switches {
					return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
				}
				return nvml.NVLINK_DEVICE_TYPE_GPU, nvml.SUCCESS
			},
			GetCpuAffinityFunc: func(int) ([]uint, nvml.Return) { return g.affinity, nvml.SUCCESS },
			GetMemoryAffinityFunc: func(int, nvml.AffinityScope) ([]uint, nvml.Return) {
				return []uint{1 << g.numa}, nvml.SUCCESS
			},
			// Only coherent GPUs (Grace Hopper) have a NUMA node of their own.
			GetNumaNodeIdFunc: func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED },
		}
		d.GetTopologyCommonAncestorFunc = func(other nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			j, ok := index[other]
			if !ok {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return level(i, j), nvml.SUCCESS
		}
		devs[i] = d
		index[d] = i
	}
	return &mock.Interface{
		InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
		SystemGetDriverVersionFunc: func() (string, nvml.Return) { return "570.124.06", nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return len(gpus), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(gpus) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			if r := gpus[i].handleErr; r != nvml.SUCCESS {
				return nil, r
			}
			return devs[i], nvml.SUCCESS
		},
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return nil }}
		},
	}
}

func noSysfs(string) (int, error) { return 0, errors.New("no sysfs in tests") }

const (
	bus0 = "00000000:19:00.0"
	bus1 = "00000000:1A:00.0"
	bus2 = "00000000:9B:00.0"
)

var (
	cpus0to31  = []uint{0xffffffff}
	cpus32to63 = []uint{0xffffffff00000000}
)

const legend = "  X = self, NV# = # active NVLinks, PIX/PXB/PHB/NODE/SYS = PCIe path (see nvidia-smi topo -m)\n"

func renderTopo(topo Topology) string {
	var b bytes.Buffer
	renderTopology(&b, topo)
	return b.String()
}

// Two H200s joined by 18 NVLinks, PCIe gen5 x16, CPUs 0-31, NUMA node 0.
func TestNVMLTopologyNV18(t *testing.T) {
	lib := mockNVML([]fakeGPU{
		{bus: bus0, links: nv18(bus1), affinity: cpus0to31, numa: 0},
		{bus: bus1, links: nv18(bus0), affinity: cpus0to31, numa: 0},
	}, func(a, b int) nvml.GpuTopologyLevel { return nvml.TOPOLOGY_NODE })
	info, topo := queryNVML(lib, []string{"0000:19:00.0", "0000:1a:00.0"}, noSysfs)

	want := "" +
		"Topology (NVML, like nvidia-smi topo -m)\n" +
		"        GPU0  GPU1  CPU Affinity  NUMA Affinity  GPU NUMA ID\n" +
		"  GPU0  X     NV18  0-31          0              N/A\n" +
		"  GPU1  NV18  X     0-31          0              N/A\n" +
		legend
	if got := renderTopo(topo); got != want {
		t.Errorf("topology:\n%s\nwant:\n%s", got, want)
	}
	if !topo.Known || len(topo.Pairs) != 2 || topo.Pairs[0].Level != "NODE" || topo.Pairs[0].NVLinks != 18 {
		t.Errorf("topology data: %+v", topo)
	}

	var b bytes.Buffer
	renderNVML(&b, info)
	wantNVML := "" +
		"NVML: driver 570.124.06\n" +
		"  NVML  CUDA  Name         UUID          PCI bus id    PCIe now  PCIe max  NVLinks  NUMA\n" +
		"  0     GPU0  NVIDIA H200  GPU-00000000  0000:19:00.0  gen5 x16  gen5 x16  18       0\n" +
		"  1     GPU1  NVIDIA H200  GPU-00000001  0000:1a:00.0  gen5 x16  gen5 x16  18       0\n"
	if b.String() != wantNVML {
		t.Errorf("NVML section:\n%s\nwant:\n%s", b.String(), wantNVML)
	}
	for _, d := range info.Devices {
		if len(d.Errors) > 0 || d.NUMASource != "nvml" || d.GPUNUMAID != nil || d.NVLinks[17].RemoteNVMLIndex != 1-d.Index {
			t.Errorf("device %+v", d)
		}
	}
}

// GPUs that reach each other through NVSwitches show NV# as well.
func TestNVMLTopologyNVSwitch(t *testing.T) {
	const sw = "00000000:05:00.0"
	lib := mockNVML([]fakeGPU{
		{bus: bus0, links: nv18(sw), switches: true, affinity: cpus0to31},
		{bus: bus1, links: nv18(sw), switches: true, affinity: cpus0to31},
	}, nil)
	_, topo := queryNVML(lib, []string{"0000:19:00.0", "0000:1a:00.0"}, noSysfs)
	if topo.Pairs[0].Label != "NV18" || topo.Pairs[1].Label != "NV18" || topo.Pairs[0].Level != "SYS" {
		t.Errorf("pairs %+v", topo.Pairs)
	}
}

// Without a usable NVML every topology column says unknown, with a reason.
func TestNVMLInitFailure(t *testing.T) {
	cuda := []string{"0000:19:00.0", "0000:1a:00.0"}
	for _, tc := range []struct {
		init   func() nvml.Return
		reason string
	}{
		{func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }, "libnvidia-ml.so.1 not found"},
		{func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }, "nvmlInit: " + nvml.ERROR_DRIVER_NOT_LOADED.Error()},
		{func() nvml.Return { panic("dlopen exploded") }, "panic: dlopen exploded"},
	} {
		info, topo := queryNVML(&mock.Interface{InitFunc: tc.init}, cuda, noSysfs)
		if info.Available || info.Reason != tc.reason || topo.Known {
			t.Errorf("info %+v topo %+v", info, topo)
		}
		want := "" +
			"Topology (NVML, like nvidia-smi topo -m): unknown: NVML unavailable: " + tc.reason + "\n" +
			"        GPU0     GPU1     CPU Affinity  NUMA Affinity  GPU NUMA ID\n" +
			"  GPU0  X        unknown  unknown       unknown        unknown\n" +
			"  GPU1  unknown  X        unknown       unknown        unknown\n" +
			legend
		if got := renderTopo(topo); got != want {
			t.Errorf("topology:\n%s\nwant:\n%s", got, want)
		}
	}
}

// A GPU NVML cannot look up leaves its own row unknown; the others are fine.
func TestNVMLDeviceLookupError(t *testing.T) {
	lib := mockNVML([]fakeGPU{
		{bus: bus0, links: nv18(bus1), affinity: cpus0to31, numa: 0},
		{bus: bus1, links: nv18(bus0), affinity: cpus0to31, numa: 0, handleErr: nvml.ERROR_UNKNOWN},
		{bus: bus2, affinity: cpus32to63, numa: 1},
	}, nil)
	info, topo := queryNVML(lib, []string{"0000:19:00.0", "0000:1a:00.0", "0000:9b:00.0"}, noSysfs)
	want := "" +
		"Topology (NVML, like nvidia-smi topo -m): unknown: not in NVML: GPU1\n" +
		"        GPU0     GPU1     GPU2     CPU Affinity  NUMA Affinity  GPU NUMA ID\n" +
		"  GPU0  X        unknown  SYS      0-31          0              N/A\n" +
		"  GPU1  unknown  X        unknown  unknown       unknown        unknown\n" +
		"  GPU2  SYS      unknown  X        32-63         1              N/A\n" +
		"  GPU1: no NVML device with PCI bus id 0000:1a:00.0 (NVML device 1 could not be queried)\n" +
		legend
	if got := renderTopo(topo); got != want {
		t.Errorf("topology:\n%s\nwant:\n%s", got, want)
	}
	if d := info.Devices[1]; d.CUDAOrdinal != -1 || len(d.Errors) != 1 || !strings.Contains(d.Errors[0], "handle") {
		t.Errorf("failed device %+v", d)
	}
	if d := info.Devices[2]; len(d.NVLinks) != 0 || d.CUDAOrdinal != 2 {
		t.Errorf("device without NVLink %+v", d)
	}
}

// CUDA_VISIBLE_DEVICES=1,0 reverses CUDA's ordinals: matching goes by bus
// id, so CUDA GPU0 gets NVML device 1's affinity. A GPU CUDA does not see
// stays out of the matrix. NUMA falls back to sysfs when NVML lacks it.
func TestNVMLBusIDMatchingReordered(t *testing.T) {
	lib := mockNVML([]fakeGPU{
		{bus: bus0, affinity: cpus0to31, numa: 0},
		{bus: bus1, affinity: cpus32to63, numa: 1},
		{bus: bus2, affinity: cpus32to63, numa: 1},
	}, func(a, b int) nvml.GpuTopologyLevel {
		if a+b == 1 {
			return nvml.TOPOLOGY_HOSTBRIDGE
		}
		return nvml.TOPOLOGY_SYSTEM
	})
	lib.ExtensionsFunc = nil // no LookupSymbol: NUMA from the fallback
	sysfs := map[string]int{"0000:19:00.0": 0, "0000:1a:00.0": 1}
	fallback := func(bus string) (int, error) {
		if n, ok := sysfs[bus]; ok {
			return n, nil
		}
		return 0, errors.New("absent")
	}
	info, topo := queryNVML(lib, []string{"0000:1A:00.0", "0000:19:00.0"}, fallback)
	want := "" +
		"Topology (NVML, like nvidia-smi topo -m)\n" +
		"        GPU0  GPU1  CPU Affinity  NUMA Affinity  GPU NUMA ID\n" +
		"  GPU0  X     PHB   32-63         1              N/A\n" +
		"  GPU1  PHB   X     0-31          0              N/A\n" +
		legend
	if got := renderTopo(topo); got != want {
		t.Errorf("topology:\n%s\nwant:\n%s", got, want)
	}
	if topo.GPUs[0].NVMLIndex != 1 || topo.GPUs[1].NVMLIndex != 0 {
		t.Errorf("gpus %+v", topo.GPUs)
	}
	for i, want := range []int{1, 0, -1} {
		if d := info.Devices[i]; d.CUDAOrdinal != want {
			t.Errorf("NVML %d: CUDA ordinal %d, want %d", i, d.CUDAOrdinal, want)
		}
	}
	if d := info.Devices[0]; d.NUMASource != "sysfs" || d.NUMAAffinity != "0" {
		t.Errorf("NUMA fallback: %+v", d)
	}
	if d := info.Devices[2]; d.NUMAAffinity != "" {
		t.Errorf("NUMA without NVML and sysfs should stay unknown: %+v", d)
	}
}

// A panic inside one device's queries marks that device only.
func TestNVMLDevicePanic(t *testing.T) {
	lib := mockNVML([]fakeGPU{{bus: bus0, affinity: cpus0to31}, {bus: bus1, affinity: cpus0to31}}, nil)
	inner := lib.DeviceGetHandleByIndexFunc
	lib.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		d, r := inner(i)
		if i == 1 {
			d.(*mock.Device).GetNameFunc = nil // the mock panics when called
		}
		return d, r
	}
	info, topo := queryNVML(lib, []string{"0000:19:00.0", "0000:1a:00.0"}, noSysfs)
	if !info.Available || len(info.Devices) != 2 || len(info.Devices[1].Errors) != 1 ||
		!strings.HasPrefix(info.Devices[1].Errors[0], "panic:") || len(info.Devices[0].Errors) != 0 {
		t.Fatalf("devices %+v", info.Devices)
	}
	if topo.GPUs[0].CPUAffinity != "0-31" || topo.GPUs[1].CPUAffinity != unknown {
		t.Errorf("gpus %+v", topo.GPUs)
	}
}

func TestNormBusID(t *testing.T) {
	for in, want := range map[string]string{
		"0000:00:06.0":     "0000:00:06.0",
		"00000000:00:06.0": "0000:00:06.0",
		"00000000:1A:00.0": "0000:1a:00.0",
		"0001:9b:00.1":     "0001:9b:00.1",
		"1a:00.0":          "0000:1a:00.0",
		" garbage ":        "garbage",
	} {
		if got := normBusID(in); got != want {
			t.Errorf("normBusID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCPUList(t *testing.T) {
	for _, tc := range []struct {
		mask []uint
		want string
	}{
		{nil, ""},
		{[]uint{0xffffffff}, "0-31"},
		{[]uint{0x5}, "0,2"},
		{[]uint{1 << 63, 0x3}, "63-65"},
		{[]uint{0xffffffff, 0xffffffff}, "0-31,64-95"},
	} {
		if got := cpuList(tc.mask); got != tc.want {
			t.Errorf("cpuList(%x) = %q, want %q", tc.mask, got, tc.want)
		}
	}
}
