// SPDX-License-Identifier: BSD-3-Clause

package main

// --perf: the performance model's matrix (cucopy_iface_estimate for every
// pair of pageable host, pinned host and each GPU), with NVML's NVLinks
// passed to the model; --calibrate measures every pair.

import (
	"fmt"
	"io"
	"strings"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/cudadrv"
)

// PerfInfo is the --perf report.
type PerfInfo struct {
	Calibrate bool       `json:"calibrate"`
	NVLinks   string     `json:"nvlinks"` // where the model's NVLinks come from
	Places    []string   `json:"places"`
	Pairs     []PerfPair `json:"pairs"` // every ordered pair of Places, row by row
	Errors    []string   `json:"errors,omitempty"`
}

// PerfPair is one estimate.
type PerfPair struct {
	Src          string  `json:"src"`
	Dst          string  `json:"dst"`
	LatencyUS    float64 `json:"latency_us"`
	BandwidthGBs float64 `json:"bandwidth_gbps"` // 1e9 bytes per second
	Calibrated   bool    `json:"calibrated"`
	Path         string  `json:"path"`
	Error        string  `json:"error,omitempty"`
}

type perfPlace struct {
	name  string
	place core.Place
}

func perfPlaces(devices int) []perfPlace {
	p := []perfPlace{
		{"pageable", core.Place{Type: core.MemHost, Device: core.NUMAAny}},
		{"pinned", core.Place{Type: core.MemHost, Pinned: true, Device: core.NUMAAny}},
	}
	for d := range devices {
		p = append(p, perfPlace{fmt.Sprintf("GPU%d", d), core.Place{Type: core.MemCUDA, Device: d}})
	}
	return p
}

// nvlinkSource gives the model NVML's active NVLinks: links from a GPU to
// another directly, or, for GPUs that both have links to NVSwitches, the
// smaller of their switch link counts.
func nvlinkSource(n NVMLInfo) core.NVLinkSource {
	return func(busIDs []string) ([][]int, [][]int) {
		byBus := map[string]*NVMLDevice{}
		for k := range n.Devices {
			byBus[strings.ToLower(n.Devices[k].PCIBusID)] = &n.Devices[k]
		}
		switchLinks := func(d *NVMLDevice) int {
			c := 0
			for _, l := range d.NVLinks {
				if l.toSwitch() {
					c++
				}
			}
			return c
		}
		links := make([][]int, len(busIDs))
		for a := range busIDs {
			links[a] = make([]int, len(busIDs))
			da := byBus[strings.ToLower(busIDs[a])]
			for b := range busIDs {
				db := byBus[strings.ToLower(busIDs[b])]
				if a == b || da == nil || db == nil {
					continue
				}
				for _, l := range da.NVLinks {
					if l.RemoteNVMLIndex == db.Index {
						links[a][b]++
					}
				}
				if links[a][b] == 0 {
					links[a][b] = min(switchLinks(da), switchLinks(db))
				}
			}
		}
		return links, nil
	}
}

// gatherPerf estimates every pair on a fresh iface. With calibrate it
// retains each device's primary context for the measurements (releasing it
// after): the one case where the tool holds a context.
func gatherPerf(drv cudadrv.Interface, cfg core.Config, nv NVMLInfo, calibrate bool) *PerfInfo {
	info := &PerfInfo{Calibrate: calibrate, NVLinks: "none (NVML not available)"}
	if nv.Available {
		info.NVLinks = "NVML"
	}
	ctx, err := core.NewContext(drv, cfg)
	if err != nil {
		info.Errors = append(info.Errors, err.Error())
		return info
	}
	iface, err := ctx.OpenIface(core.IfaceParams{ThreadMode: core.ThreadSingle, MaxPoll: cfg.MaxPoll, MaxEvents: cfg.MaxEvents, Lanes: 1})
	if err != nil {
		info.Errors = append(info.Errors, err.Error())
		return info
	}
	defer func() {
		if err := iface.Close(); err != nil {
			info.Errors = append(info.Errors, err.Error())
		}
	}()
	if nv.Available {
		iface.SetNVLinkSource(nvlinkSource(nv))
	}
	if calibrate {
		for dev := range ctx.DeviceCount() {
			if _, err := drv.PrimaryRetain(dev); err != nil {
				info.Errors = append(info.Errors, fmt.Sprintf("retaining device %d's primary context: %v", dev, err))
				continue
			}
			defer drv.PrimaryRelease(dev)
		}
	}
	places := perfPlaces(ctx.DeviceCount())
	for _, p := range places {
		info.Places = append(info.Places, p.name)
	}
	for _, s := range places {
		for _, d := range places {
			pair := PerfPair{Src: s.name, Dst: d.name}
			e, err := iface.Estimate(s.place, d.place, 0, calibrate)
			if err != nil {
				pair.Error = err.Error()
			} else {
				pair.LatencyUS, pair.BandwidthGBs, pair.Calibrated = e.Latency*1e6, e.Bandwidth/1e9, e.Calibrated
				pair.Path = pathString(e)
			}
			info.Pairs = append(info.Pairs, pair)
		}
	}
	return info
}

func pathString(e core.Estimate) string {
	switch e.Path {
	case core.PathPCIe, core.PathPCIeStaged, core.PathPCIePeer:
		return fmt.Sprintf("%s gen%d x%d", e.Path, e.PathGen, e.PathWidth)
	case core.PathNVLink:
		return fmt.Sprintf("nvlink%d x%d", e.PathGen, e.PathWidth)
	}
	return e.Path.String()
}

// renderPerf writes the matrix (latency/bandwidth per cell, * measured),
// the paths, and one line per pair (what tests/gpu/perf-model.sh reads).
func renderPerf(w io.Writer, p *PerfInfo) {
	how := "the topology model"
	if p.Calibrate {
		how = "measured where marked *, else the topology model"
	}
	fmt.Fprintf(w, "Performance model: latency us / bandwidth GB/s, %s; NVLinks: %s\n", how, p.NVLinks)
	n := len(p.Places)
	cell := func(i, j int) PerfPair { return p.Pairs[i*n+j] }
	matrix := func(value func(PerfPair) string) {
		t := newTable(w)
		fmt.Fprint(t, "  from \\ to")
		for _, name := range p.Places {
			fmt.Fprintf(t, "\t%s", name)
		}
		fmt.Fprintln(t)
		for i, name := range p.Places {
			fmt.Fprintf(t, "  %s", name)
			for j := range p.Places {
				c := cell(i, j)
				if c.Error != "" {
					fmt.Fprint(t, "\terr")
					continue
				}
				fmt.Fprintf(t, "\t%s", value(c))
			}
			fmt.Fprintln(t)
		}
		t.Flush()
	}
	if len(p.Pairs) == n*n && n > 0 {
		matrix(func(c PerfPair) string {
			mark := ""
			if c.Calibrated {
				mark = "*"
			}
			return fmt.Sprintf("%.3g/%.4g%s", c.LatencyUS, c.BandwidthGBs, mark)
		})
		fmt.Fprintln(w, "\nPaths")
		matrix(func(c PerfPair) string { return strings.ReplaceAll(c.Path, " ", "-") })
	}
	fmt.Fprintln(w, "\nPairs")
	t := newTable(w)
	fmt.Fprintln(t, "  src -> dst\tlatency_us\tbandwidth_GBps\tsource\tpath")
	for _, c := range p.Pairs {
		if c.Error != "" {
			fmt.Fprintf(t, "  %s -> %s\t-\t-\terror\t%s\n", c.Src, c.Dst, c.Error)
			continue
		}
		src := "model"
		if c.Calibrated {
			src = "calibrated"
		}
		fmt.Fprintf(t, "  %s -> %s\t%.2f\t%.2f\t%s\t%s\n", c.Src, c.Dst, c.LatencyUS, c.BandwidthGBs, src, c.Path)
	}
	t.Flush()
	for _, e := range p.Errors {
		fmt.Fprintf(w, "  error: %s\n", e)
	}
}
