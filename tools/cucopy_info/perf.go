// SPDX-License-Identifier: BSD-3-Clause

package main

// --perf: the performance model's matrix (cucopy_iface_estimate for every
// pair of pageable host, pinned host and each GPU), the library's own
// estimates (NVLinks from NVML loaded by the library); --calibrate measures
// every pair.

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

// gatherPerf estimates every pair on a fresh iface. With calibrate it
// retains each device's primary context for the measurements (releasing it
// after): the one case where the tool holds a context.
func gatherPerf(drv cudadrv.Interface, cfg core.Config, busIDs []string, calibrate bool) *PerfInfo {
	info := &PerfInfo{Calibrate: calibrate, NVLinks: "NVML"}
	if _, err := cudadrv.NVLinks(busIDs); err != nil {
		info.NVLinks = "none (" + err.Error() + ")"
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
