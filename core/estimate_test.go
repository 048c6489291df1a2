// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/cudadrv"
)

// h200Like is two GPUs on PCIe gen5 x16, NUMA node 0 and 1, HBM3e of an
// H200, joined by 18 NVLinks 0->1 and nothing 1->0 (to tell the cases apart).
func h200Like() core.Topology {
	dev := core.DeviceTopology{PCIeGen: 5, PCIeWidth: 16, NUMANode: 0, CCMajor: 9, MemClockKHz: 3201000, MemBusBits: 6144}
	dev1 := dev
	dev1.NUMANode = 1
	return core.Topology{
		Devices:   []core.DeviceTopology{dev, dev1},
		Peers:     [][]core.PeerTopology{{{}, {Access: true, NVLinks: 18}}, {{Access: true}, {}}},
		NUMANodes: []int{0, 1},
	}
}

var (
	pinned   = core.Place{Type: core.MemHost, Pinned: true, Device: core.NUMAAny}
	pageable = core.Place{Type: core.MemHost, Device: core.NUMAAny}
)

func gpu(dev int) core.Place { return core.Place{Type: core.MemCUDA, Device: dev} }

func TestEstimateModel(t *testing.T) {
	r := newRig(t, 2)
	r.ifc.SetTopology(h200Like())
	gen5x16 := 0.88 * 3.938e9 * 16 // 55.4 GB/s
	const n = 256 << 20
	cases := []struct {
		name     string
		src, dst core.Place
		lat, bw  float64
		path     core.Path
		gen, w   int
		remote   bool
	}{
		{"h2d pinned", pinned, gpu(0), 6.5e-6, gen5x16, core.PathPCIe, 5, 16, false},
		{"d2h pinned", gpu(1), pinned, 7.7e-6, gen5x16, core.PathPCIe, 5, 16, false},
		{"h2d pageable", pageable, gpu(0), 6.6e-6, 8.5e9, core.PathPCIeStaged, 5, 16, false},
		{"d2h pageable", gpu(0), pageable, 9.6e-6, 16e9, core.PathPCIeStaged, 5, 16, false},
		{"h2d pinned, remote node", core.Place{Type: core.MemHost, Pinned: true, Device: 1}, gpu(0), 7e-6, 0.8 * gen5x16, core.PathPCIe, 5, 16, true},
		{"h2d pinned, near node", core.Place{Type: core.MemHost, Pinned: true, Device: 1}, gpu(1), 6.5e-6, gen5x16, core.PathPCIe, 5, 16, false},
		{"d2d", gpu(1), gpu(1), 10.2e-6, 0.43 * 2 * 3.201e9 * 768, core.PathDevice, 0, 6144, false},
		{"managed d2d", core.Place{Type: core.MemCUDAManaged, Device: 0}, gpu(0), 10.2e-6, 0.43 * 2 * 3.201e9 * 768, core.PathDevice, 0, 6144, false},
		{"nvlink", gpu(0), gpu(1), 7.5e-6, 0.88 * 18 * 25e9, core.PathNVLink, 4, 18, false},
		{"pcie peer", gpu(1), gpu(0), 7.5e-6, gen5x16, core.PathPCIePeer, 5, 16, false},
		{"host to host", pageable, pinned, 0.5e-6, 10e9, core.PathCPU, 0, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := r.ifc.Estimate(c.src, c.dst, n, false)
			require.NoError(t, err)
			assert.InDelta(t, c.lat, e.Latency, 1e-12)
			assert.InEpsilon(t, c.bw, e.Bandwidth, 1e-9)
			assert.InEpsilon(t, c.lat+n/c.bw, e.Time, 1e-9)
			assert.Equal(t, c.path, e.Path)
			assert.Equal(t, c.gen, e.PathGen)
			assert.Equal(t, c.w, e.PathWidth)
			assert.Equal(t, c.remote, e.NUMARemote)
			assert.False(t, e.Calibrated)
		})
	}

	// Without peer access: device to host then host to device.
	topo := h200Like()
	topo.Peers[1][0].Access = false
	topo.Devices[0].PCIeGen = 4 // 27.7 GB/s
	r.ifc.SetTopology(topo)
	e, err := r.ifc.Estimate(gpu(1), gpu(0), 0, false)
	require.NoError(t, err)
	assert.Equal(t, core.PathHostStaged, e.Path)
	assert.InDelta(t, 14.2e-6, e.Latency, 1e-12)
	assert.InEpsilon(t, 1/(1/gen5x16+1/(0.88*1.969e9*16)), e.Bandwidth, 1e-9)
	assert.InDelta(t, e.Latency, e.Time, 1e-15, "length 0: the latency")
	// PCIe peer: the slower link.
	topo.Peers[1][0].Access = true
	r.ifc.SetTopology(topo)
	e, err = r.ifc.Estimate(gpu(1), gpu(0), 0, false)
	require.NoError(t, err)
	assert.Equal(t, 4, e.PathGen)
	assert.InEpsilon(t, 0.88*1.969e9*16, e.Bandwidth, 1e-9)
	// A driver without the memory interface: the constant.
	topo.Devices[0].MemClockKHz = 0
	r.ifc.SetTopology(topo)
	e, err = r.ifc.Estimate(gpu(0), gpu(0), 0, false)
	require.NoError(t, err)
	assert.InEpsilon(t, 2e12, e.Bandwidth, 1e-9)
}

func TestEstimateBadInput(t *testing.T) {
	r := newRig(t, 2)
	r.ifc.SetTopology(h200Like())
	for _, c := range []struct {
		name     string
		src, dst core.Place
		msg      string
	}{
		{"unknown type", core.Place{Type: 7}, gpu(0), "unknown memory type 7"},
		{"negative type", gpu(0), core.Place{Type: -1}, "destination: unknown memory type -1"},
		{"device too large", pinned, gpu(2), "device 2: the driver shows 2 device(s)"},
		{"device negative", gpu(-1), pinned, "source: device -1"},
		{"pinned device memory", core.Place{Type: core.MemCUDA, Pinned: true}, gpu(0), "pinned flag is for host memory only"},
		{"unknown NUMA node", core.Place{Type: core.MemHost, Device: 5}, gpu(0), "host NUMA node 5: the host has nodes [0 1]"},
		{"NUMA node below -1", gpu(0), core.Place{Type: core.MemHost, Device: -2}, "host NUMA node -2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := r.ifc.Estimate(c.src, c.dst, 8, false)
			errStatus(t, core.ErrInvalid, err)
			assert.Contains(t, err.Error(), c.msg)
		})
	}
	r.close()
	_, err := r.ifc.Estimate(pinned, gpu(0), 8, false)
	errStatus(t, core.ErrHandle, err)
}

// fakeSysfs writes a sysfs tree: device 0 (bus 01) behind a gen3 port,
// itself gen4 x8 now (max x16), on NUMA node 1; device 1 (bus 02) has
// no link files; the host has nodes 0 and 1.
func fakeSysfs(t *testing.T) string {
	root := t.TempDir()
	port := filepath.Join(root, "devices/pci0000:00/0000:00:01.0")
	dev := filepath.Join(port, "0000:01:00.0")
	write := func(dir, name, v string) {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644))
	}
	write(port, "max_link_speed", "8.0 GT/s PCIe")
	write(dev, "max_link_speed", "16.0 GT/s PCIe")
	write(dev, "current_link_speed", "2.5 GT/s PCIe") // idle: not used
	write(dev, "current_link_width", "8")
	write(dev, "max_link_width", "16")
	write(dev, "numa_node", "1")
	dev2 := filepath.Join(root, "devices/pci0000:00/0000:02:00.0")
	write(dev2, "numa_node", "-1")
	links := filepath.Join(root, "bus/pci/devices")
	require.NoError(t, os.MkdirAll(links, 0o755))
	require.NoError(t, os.Symlink(dev, filepath.Join(links, "0000:01:00.0")))
	require.NoError(t, os.Symlink(dev2, filepath.Join(links, "0000:02:00.0")))
	for _, n := range []string{"node0", "node1", "possible"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, "devices/system/node", n), 0o755))
	}
	return root
}

func TestReadTopology(t *testing.T) {
	r := newRig(t, 2)
	nv := func(ids []string) ([][]int, [][]int) {
		assert.Equal(t, []string{"0000:01:00.0", "0000:02:00.0"}, ids)
		return [][]int{{0, 4}, {4}}, [][]int{{0, 3}}
	}
	topo, err := core.ReadTopology(r.drv, 2, fakeSysfs(t), nv)
	require.NoError(t, err)
	d0, d1 := topo.Devices[0], topo.Devices[1]
	assert.Equal(t, 3, d0.PCIeGen, "the upstream port's maximum bounds the link")
	assert.Equal(t, 8, d0.PCIeWidth, "the current width")
	assert.False(t, d0.PCIeAssumed)
	assert.Equal(t, 1, d0.NUMANode)
	assert.Equal(t, 3201000, d0.MemClockKHz)
	assert.Equal(t, 6144, d0.MemBusBits)
	// The fake's compute capability is 1: the link is assumed gen3 x16.
	assert.Equal(t, core.DeviceTopology{PCIBusID: "0000:02:00.0", PCIeGen: 3, PCIeWidth: 16, PCIeAssumed: true, NUMANode: -1, CCMajor: 1, MemClockKHz: 3201000, MemBusBits: 6144}, d1)
	assert.Equal(t, core.PeerTopology{Access: true, NVLinks: 4, NVLinkVersion: 3}, topo.Peers[0][1])
	assert.Equal(t, core.PeerTopology{Access: true, NVLinks: 4}, topo.Peers[1][0])
	assert.Equal(t, []int{0, 1}, topo.NUMANodes)

	// No sysfs at all, no NVLink source.
	topo, err = core.ReadTopology(r.drv, 2, filepath.Join(t.TempDir(), "none"), nil)
	require.NoError(t, err)
	assert.True(t, topo.Devices[0].PCIeAssumed)
	assert.Equal(t, -1, topo.Devices[0].NUMANode)
	assert.Nil(t, topo.NUMANodes)
	assert.Zero(t, topo.Peers[0][1].NVLinks)

	// A failing driver query is an error of the estimate.
	r.drv.Fail("P2PAttribute", 1, 999)
	_, err = core.ReadTopology(r.drv, 2, core.SysfsRoot, nil)
	errStatus(t, core.ErrCUDA, err)
}

func TestEstimateCalibration(t *testing.T) {
	r := newRig(t, 2)
	r.ifc.SetTopology(h200Like())
	r.ifc.SetCalibrationBytes(1 << 20)
	autoRun(t, r)
	r.drv.ActivatePrimary(0)
	r.drv.ActivatePrimary(1)
	current := r.drv.Primary(1)
	r.drv.SetCurrent(current)

	allocs := r.drv.Calls("MemAlloc")
	e, err := r.ifc.Estimate(pinned, gpu(0), 1<<20, true)
	require.NoError(t, err)
	assert.True(t, e.Calibrated)
	assert.Equal(t, core.PathPCIe, e.Path, "the path is the model's")
	assert.Positive(t, e.Latency)
	assert.Positive(t, e.Bandwidth)
	assert.InEpsilon(t, e.Latency+float64(1<<20)/e.Bandwidth, e.Time, 1e-9)
	assert.Equal(t, 1, r.ifc.Calibrations())
	assert.Equal(t, allocs+2, r.drv.Calls("MemAlloc"), "one source and one destination buffer")
	assertCurrent(t, r, current)
	assert.Equal(t, r.drv.Calls("MemAlloc"), r.drv.Calls("MemFree"), "buffers freed")
	assert.Zero(t, r.drv.LiveStreams(), "the private iface's streams released")
	assert.Zero(t, r.drv.LiveEvents())

	// Kept: neither a second call nor the config measures again, and the
	// same pair from a named NUMA node is the same measurement.
	allocs = r.drv.Calls("MemAlloc")
	again, err := r.ifc.Estimate(pinned, gpu(0), 1<<20, true)
	require.NoError(t, err)
	assert.Equal(t, e, again)
	remote, err := r.ifc.Estimate(core.Place{Type: core.MemHost, Pinned: true, Device: 1}, gpu(0), 0, true)
	require.NoError(t, err)
	assert.True(t, remote.Calibrated)
	assert.True(t, remote.NUMARemote)
	assert.InEpsilon(t, 0.8*e.Bandwidth, remote.Bandwidth, 1e-9)
	assert.InDelta(t, e.Latency+0.5e-6, remote.Latency, 1e-12)
	model, err := r.ifc.Estimate(pinned, gpu(0), 8, false)
	require.NoError(t, err)
	assert.True(t, model.Calibrated, "a measured pair is used without the flag too")
	assert.Equal(t, 1, r.ifc.Calibrations())
	assert.Equal(t, allocs, r.drv.Calls("MemAlloc"))

	// Another pair is measured once more; the caller's iface did nothing.
	// (Pageable memory, from mmap, is unknown to this fake, which refuses
	// it: tests/c/test_estimate.c measures it on the C fake.)
	_, err = r.ifc.Estimate(gpu(0), gpu(1), 8, true)
	require.NoError(t, err)
	assert.Equal(t, 2, r.ifc.Calibrations())
	st := r.ifc.Stats()
	for k := range st.Dir {
		assert.Zero(t, st.Dir[k].Operations, "direction %d: calibration copies run on a private iface", k)
	}
	n, _ := r.progress()
	assert.Zero(t, n)
	assertCurrent(t, r, current)
}

// autoRun executes the fake's queued work in the background, as a GPU
// would, while a calibration waits for its copies.
func autoRun(t *testing.T, r *rig) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				r.drv.Run()
				time.Sleep(20 * time.Microsecond)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

func assertCurrent(t *testing.T, r *rig, want cudadrv.Context) {
	t.Helper()
	cur, err := r.drv.CurrentContext()
	require.NoError(t, err)
	assert.Equal(t, want, cur, "the caller's current context")
}

func TestEstimateCalibrationNotPossible(t *testing.T) {
	r := newRig(t, 2)
	r.ifc.SetTopology(h200Like())
	r.ifc.SetCalibrationBytes(4096)
	autoRun(t, r)
	// No active context anywhere: no buffer can be allocated, and none is
	// activated for it.
	e, err := r.ifc.Estimate(pinned, gpu(0), 8, true)
	require.NoError(t, err)
	assert.False(t, e.Calibrated)
	assert.InDelta(t, 6.5e-6, e.Latency, 1e-12)
	assert.Zero(t, r.drv.Activations())
	assert.Zero(t, r.ifc.Calibrations())
	// Once a context is there, the next calibrating call measures.
	r.drv.ActivatePrimary(0)
	e, err = r.ifc.Estimate(pinned, gpu(0), 8, true)
	require.NoError(t, err)
	assert.True(t, e.Calibrated)
}

func TestEstimateCalibrateConfig(t *testing.T) {
	r := newRig(t, 1)
	drv := r.drv
	cfg, err := core.LoadConfig(env("CUCOPY_CALIBRATE", "1"))
	require.NoError(t, err)
	ctx, err := core.NewContext(drv, cfg)
	require.NoError(t, err)
	ifc, err := ctx.OpenIface(defaultParams())
	require.NoError(t, err)
	defer func() { require.NoError(t, ifc.Close()) }()
	ifc.SetTopology(h200Like())
	ifc.SetCalibrationBytes(4096)
	autoRun(t, r)
	drv.ActivatePrimary(0)
	e, err := ifc.Estimate(gpu(0), gpu(0), 8, false)
	require.NoError(t, err)
	assert.True(t, e.Calibrated, "CUCOPY_CALIBRATE=1 measures without the flag")
}

// Many threads on a multi-thread iface: each pair is measured once.
func TestEstimateCalibrationThreads(t *testing.T) {
	r := newRig(t, 2, func(p *core.IfaceParams) { p.ThreadMode = core.ThreadMulti; p.Lanes = 2 })
	r.ifc.SetTopology(h200Like())
	r.ifc.SetCalibrationBytes(4096)
	autoRun(t, r)
	r.drv.ActivatePrimary(0)
	r.drv.ActivatePrimary(1)
	pairs := [][2]core.Place{{pinned, gpu(0)}, {gpu(1), pinned}, {gpu(0), gpu(1)}, {gpu(1), gpu(1)}}
	var wg sync.WaitGroup
	for k := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range pairs {
				p := pairs[(j+k)%len(pairs)]
				e, err := r.ifc.Estimate(p[0], p[1], 64, true)
				assert.NoError(t, err)
				assert.True(t, e.Calibrated)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, len(pairs), r.ifc.Calibrations())
}
