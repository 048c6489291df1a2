// SPDX-License-Identifier: BSD-3-Clause

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cucopy/cucopy/core"
)

func TestRenderPerf(t *testing.T) {
	p := &PerfInfo{
		Calibrate: true,
		NVLinks:   "NVML",
		Places:    []string{"pinned", "GPU0"},
		Pairs: []PerfPair{
			{Src: "pinned", Dst: "pinned", LatencyUS: 0.5, BandwidthGBs: 10, Path: "cpu"},
			{Src: "pinned", Dst: "GPU0", LatencyUS: 7.612, BandwidthGBs: 55.21, Calibrated: true, Path: "pcie gen5 x16"},
			{Src: "GPU0", Dst: "pinned", Error: "boom"},
			{Src: "GPU0", Dst: "GPU0", LatencyUS: 11, BandwidthGBs: 2114.2, Path: "device"},
		},
		Errors: []string{"retaining device 0's primary context: no"},
	}
	var b bytes.Buffer
	renderPerf(&b, p)
	want := "" +
		"Performance model: latency us / bandwidth GB/s, measured where marked *, else the topology model; NVLinks: NVML\n" +
		"  from \\ to  pinned  GPU0\n" +
		"  pinned     0.5/10  7.61/55.21*\n" +
		"  GPU0       err     11/2114\n" +
		"\n" +
		"Paths\n" +
		"  from \\ to  pinned  GPU0\n" +
		"  pinned     cpu     pcie-gen5-x16\n" +
		"  GPU0       err     device\n" +
		"\n" +
		"Pairs\n" +
		"  src -> dst        latency_us  bandwidth_GBps  source      path\n" +
		"  pinned -> pinned  0.50        10.00           model       cpu\n" +
		"  pinned -> GPU0    7.61        55.21           calibrated  pcie gen5 x16\n" +
		"  GPU0 -> pinned    -           -               error       boom\n" +
		"  GPU0 -> GPU0      11.00       2114.20         model       device\n" +
		"  error: retaining device 0's primary context: no\n"
	if b.String() != want {
		t.Errorf("perf matrix:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestPathString(t *testing.T) {
	for want, e := range map[string]core.Estimate{
		"pcie gen4 x8":         {Path: core.PathPCIe, PathGen: 4, PathWidth: 8},
		"pcie-staged gen5 x16": {Path: core.PathPCIeStaged, PathGen: 5, PathWidth: 16},
		"pcie-peer gen3 x16":   {Path: core.PathPCIePeer, PathGen: 3, PathWidth: 16},
		"nvlink4 x18":          {Path: core.PathNVLink, PathGen: 4, PathWidth: 18},
		"device":               {Path: core.PathDevice, PathWidth: 6144},
		"host-staged":          {Path: core.PathHostStaged},
		"cpu":                  {Path: core.PathCPU},
	} {
		if got := pathString(e); got != want {
			t.Errorf("pathString(%+v) = %q, want %q", e, got, want)
		}
	}
}

func TestCalibrateNeedsPerf(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run([]string{"--calibrate"}, &out, &errb, func(string) string { return "" }); rc != 2 {
		t.Errorf("rc = %d, want 2", rc)
	}
	if !strings.Contains(errb.String(), "--calibrate needs --perf") {
		t.Errorf("stderr: %q", errb.String())
	}
}
