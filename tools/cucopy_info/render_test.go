// SPDX-License-Identifier: BSD-3-Clause

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cucopy/cucopy/core"
)

func TestCudaVersionString(t *testing.T) {
	for v, want := range map[int]string{13000: "13.0", 12040: "12.4", 11080: "11.8", 12090: "12.9", 0: "0.0"} {
		if got := cudaVersionString(v); got != want {
			t.Errorf("cudaVersionString(%d) = %q, want %q", v, got, want)
		}
	}
}

func TestRenderDevices(t *testing.T) {
	devs := []Device{
		{Ordinal: 0, Name: "H200", PCIBusID: "0000:19:00.0", TotalMem: 141 << 30,
			CCMajor: 9, CCMinor: 0, SMCount: 132, UnifiedAddressing: true, ManagedMemory: true,
			PrimaryActive: true},
		{Ordinal: 1, Name: "Fake GPU", PCIBusID: "0000:1a:00.0", TotalMem: 3 << 29,
			CCMajor: 8, CCMinor: 6, SMCount: 8, Errors: []string{"cuDeviceGetAttribute failed"}},
	}
	var b bytes.Buffer
	renderDevices(&b, devs)
	want := "" +
		"  GPU  Name      PCI bus id    Memory GiB  CC   SMs  Unified addr  Managed mem  Primary ctx\n" +
		"  0    H200      0000:19:00.0  141.0       9.0  132  yes           yes          active\n" +
		"  1    Fake GPU  0000:1a:00.0  1.5         8.6  8    no            no           inactive\n" +
		"  GPU1: cuDeviceGetAttribute failed\n"
	if b.String() != want {
		t.Errorf("device table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestRenderPeerMatrix(t *testing.T) {
	links := []PeerLink{
		{Device: 0, Peer: 1, CanAccess: true},
		{Device: 0, Peer: 2, CanAccess: false},
		{Device: 1, Peer: 0, CanAccess: true},
		{Device: 1, Peer: 2, Error: "cuDeviceCanAccessPeer failed"},
		{Device: 2, Peer: 0, CanAccess: false},
		// 2 -> 1 missing: shown as "?"
		{Device: 7, Peer: 0, CanAccess: true}, // out of range: ignored
	}
	var b bytes.Buffer
	renderPeerMatrix(&b, 3, links)
	want := "" +
		"        GPU0  GPU1  GPU2\n" +
		"  GPU0  X     ok    no\n" +
		"  GPU1  ok    X     err\n" +
		"  GPU2  no    ?     X\n" +
		"  GPU1 -> GPU2: cuDeviceCanAccessPeer failed\n"
	if b.String() != want {
		t.Errorf("peer matrix:\n%s\nwant:\n%s", b.String(), want)
	}

	b.Reset()
	renderPeerMatrix(&b, 1, nil)
	if want := "        GPU0\n  GPU0  X\n"; b.String() != want {
		t.Errorf("1-device matrix:\n%q\nwant:\n%q", b.String(), want)
	}
}

func TestRenderNVMLUnavailable(t *testing.T) {
	var b bytes.Buffer
	renderNVML(&b, NVMLInfo{Reason: "libnvidia-ml.so.1 not found"})
	if want := "NVML: unavailable (libnvidia-ml.so.1 not found)\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestConfigVarsSource(t *testing.T) {
	env := map[string]string{"CUCOPY_MAX_EVENTS": "128"}
	getenv := func(k string) string { return env[k] }
	var b bytes.Buffer
	code := run([]string{"--help"}, &b, &b, getenv)
	if code != 0 || !strings.Contains(b.String(), "--json") {
		t.Fatalf("--help: code %d, output %q", code, b.String())
	}
	// Effective configuration through core.LoadConfig.
	cfg, err := core.LoadConfig(getenv)
	if err != nil {
		t.Fatal(err)
	}
	vars := configVars(cfg, getenv)
	for _, v := range vars {
		switch v.Name {
		case "CUCOPY_MAX_EVENTS":
			if v.Value != "128" || v.Source != "environment" {
				t.Errorf("%+v", v)
			}
		case "CUCOPY_CUDA_DRIVER":
			if v.Value != "libcuda.so.1" || v.Source != "default" {
				t.Errorf("%+v", v)
			}
		}
	}
}

func TestDriverMissing(t *testing.T) {
	env := map[string]string{"CUCOPY_CUDA_DRIVER": "/nonexistent/libcuda.so.1"}
	var out, errb bytes.Buffer
	code := run(nil, &out, &errb, func(k string) string { return env[k] })
	if code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	msg := errb.String()
	if !strings.Contains(msg, "/nonexistent/libcuda.so.1") || !strings.Contains(msg, "CUCOPY_CUDA_DRIVER") {
		t.Errorf("message %q should name the path and CUCOPY_CUDA_DRIVER", msg)
	}
}

// TestFakeDriver runs the whole tool against the fake driver when it has
// been built (build/fakecuda/libcuda.so.1, or $CUCOPY_INFO_TEST_DRIVER).
func TestFakeDriver(t *testing.T) {
	// The driver of the tests' architecture: make test-arm64 sets
	// CUCOPY_CUDA_DRIVER to the arm64 fake (build/ holds the x86-64 one).
	path := os.Getenv("CUCOPY_INFO_TEST_DRIVER")
	if path == "" {
		path = os.Getenv("CUCOPY_CUDA_DRIVER")
	}
	if path == "" {
		path, _ = filepath.Abs("../../build/fakecuda/libcuda.so.1")
	}
	if _, err := os.Stat(path); err != nil {
		t.Skipf("fake driver not built (%s)", path)
	}
	t.Setenv("FAKECUDA_DEVICES", "3")
	env := map[string]string{"CUCOPY_CUDA_DRIVER": path}
	var out, errb bytes.Buffer
	if code := run([]string{"--json"}, &out, &errb, func(k string) string { return env[k] }); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var info Info
	if err := json.Unmarshal(out.Bytes(), &info); err != nil {
		t.Fatal(err)
	}
	if info.Driver.Path != path || info.Driver.DeviceCount != 3 || len(info.Devices) != 3 || len(info.Peers) != 6 {
		t.Errorf("unexpected report: %+v", info)
	}
	for _, d := range info.Devices {
		if d.PrimaryActive || len(d.Errors) > 0 {
			t.Errorf("device %+v", d)
		}
	}
	// The fake's bus ids are in no NVML: without NVML, or with a real one,
	// the topology is there and unknown, and nothing failed.
	if len(info.Topology.GPUs) != 3 || len(info.Topology.Pairs) != 6 || info.Topology.Known || info.Topology.Reason == "" {
		t.Errorf("topology %+v", info.Topology)
	}
	if !info.NVML.Available {
		for _, p := range info.Topology.Pairs {
			if p.Label != "unknown" {
				t.Errorf("pair %+v", p)
			}
		}
	}
}
