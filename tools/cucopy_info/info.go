// SPDX-License-Identifier: BSD-3-Clause

package main

import (
	"fmt"
	"runtime"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/cudadrv"
)

// Info is everything the tool reports; the text and JSON outputs show the
// same data.
type Info struct {
	Version    string      `json:"cucopy_version"`
	Driver     DriverInfo  `json:"driver"`
	Devices    []Device    `json:"devices"`
	Peers      []PeerLink  `json:"peer_access"`
	NVML       NVMLInfo    `json:"nvml"`
	Topology   Topology    `json:"topology"`
	Config     []ConfigVar `json:"config"`
	GOMAXPROCS int         `json:"gomaxprocs"`
	// GOMAXPROCSSource is "environment" when $GOMAXPROCS is set, else "default".
	GOMAXPROCSSource string `json:"gomaxprocs_source"`
}

// DriverInfo describes the loaded CUDA driver.
type DriverInfo struct {
	Path          string       `json:"path"`
	Version       int          `json:"version"`
	VersionString string       `json:"version_string"`
	CtxGetID      bool         `json:"cuCtxGetId"`
	Capabilities  []Capability `json:"capabilities"`
	DeviceCount   int          `json:"device_count"`
	Error         string       `json:"error,omitempty"` // counting devices failed
}

// Capability is an optional driver entry point.
type Capability struct {
	Name    string `json:"name"`
	Present bool   `json:"present"`
}

// Device is one row of the device table. Error collects the queries that
// failed; their fields keep zero values.
type Device struct {
	Ordinal           int      `json:"ordinal"`
	Name              string   `json:"name"`
	PCIBusID          string   `json:"pci_bus_id"`
	TotalMem          uint64   `json:"total_mem_bytes"`
	CCMajor           int      `json:"cc_major"`
	CCMinor           int      `json:"cc_minor"`
	SMCount           int      `json:"sm_count"`
	UnifiedAddressing bool     `json:"unified_addressing"`
	ManagedMemory     bool     `json:"managed_memory"`
	PrimaryActive     bool     `json:"primary_context_active"`
	Errors            []string `json:"errors,omitempty"`
}

// PeerLink is one off-diagonal cell of the peer-access matrix.
type PeerLink struct {
	Device    int    `json:"device"`
	Peer      int    `json:"peer"`
	CanAccess bool   `json:"can_access"`
	Error     string `json:"error,omitempty"`
}

// ConfigVar is one effective CUCOPY_* setting and where it came from.
type ConfigVar struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Source string `json:"source"` // "default" or "environment"
}

func versionString() string {
	return fmt.Sprintf("%d.%d.%d", versionMajor, versionMinor, versionPatch)
}

// cudaVersionString turns a CUDA version number (13000) into "13.0".
func cudaVersionString(v int) string {
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

// configVars lists the effective configuration with each value's source.
func configVars(cfg core.Config, getenv func(string) string) []ConfigVar {
	src := func(name string) string {
		if getenv(name) != "" {
			return "environment"
		}
		return "default"
	}
	vars := []ConfigVar{
		{"CUCOPY_CUDA_DRIVER", cfg.DriverPath, ""},
		{"CUCOPY_MAX_POLL", fmt.Sprint(cfg.MaxPoll), ""},
		{"CUCOPY_MAX_EVENTS", fmt.Sprint(cfg.MaxEvents), ""},
		{"CUCOPY_LANES", fmt.Sprint(cfg.Lanes), ""},
		{"CUCOPY_LOG_LEVEL", cfg.LogLevel.String(), ""},
		{"CUCOPY_STATS", fmt.Sprint(cfg.Stats), ""},
		{"CUCOPY_CALIBRATE", fmt.Sprint(cfg.Calibrate), ""},
		{"CUCOPY_STAGE", map[bool]string{false: "auto", true: "off"}[cfg.Stage.Off], ""},
		{"CUCOPY_STAGE_THRESHOLD", fmt.Sprint(cfg.Stage.Threshold), ""},
		{"CUCOPY_STAGE_CHUNK", fmt.Sprint(cfg.Stage.Chunk), ""},
		{"CUCOPY_STAGE_THREADS", fmt.Sprint(cfg.Stage.Threads), ""},
		{"CUCOPY_STAGE_POOL", fmt.Sprint(cfg.Stage.Pool), ""},
		{"CUCOPY_STAGE_SMALL", fmt.Sprint(cfg.Stage.Small), ""},
		{"CUCOPY_STAGE_CPU", map[bool]string{false: "kernel", true: "memmove"}[cfg.Stage.Memmove], ""},
	}
	for i := range vars {
		vars[i].Source = src(vars[i].Name)
	}
	return vars
}

// gather queries the driver. It only reads: no context is created,
// retained or made current.
func gather(drv cudadrv.Interface, cfg core.Config, getenv func(string) string) *Info {
	info := &Info{
		Version: versionString(),
		Driver: DriverInfo{
			Path:          drv.Path(),
			Version:       drv.Version(),
			VersionString: cudaVersionString(drv.Version()),
			CtxGetID:      drv.HasCtxID(),
		},
		Config:           configVars(cfg, getenv),
		GOMAXPROCS:       runtime.GOMAXPROCS(0),
		GOMAXPROCSSource: "default",
	}
	if getenv("GOMAXPROCS") != "" {
		info.GOMAXPROCSSource = "environment"
	}
	for _, c := range drv.Capabilities() {
		info.Driver.Capabilities = append(info.Driver.Capabilities, Capability{c.Name, c.Present})
	}
	n, err := drv.DeviceCount()
	if err != nil {
		info.Driver.Error = err.Error()
		n = 0
	}
	info.Driver.DeviceCount = n
	for dev := 0; dev < n; dev++ {
		info.Devices = append(info.Devices, queryDevice(drv, dev))
	}
	for dev := 0; dev < n; dev++ {
		for peer := 0; peer < n; peer++ {
			if dev == peer {
				continue
			}
			l := PeerLink{Device: dev, Peer: peer}
			if ok, err := drv.CanAccessPeer(dev, peer); err != nil {
				l.Error = err.Error()
			} else {
				l.CanAccess = ok
			}
			info.Peers = append(info.Peers, l)
		}
	}
	busIDs := make([]string, len(info.Devices))
	for i, d := range info.Devices {
		busIDs[i] = d.PCIBusID
	}
	info.NVML, info.Topology = queryNVML(nvml.New(), busIDs, sysfsNUMA)
	return info
}

func queryDevice(drv cudadrv.Interface, dev int) Device {
	d := Device{Ordinal: dev}
	note := func(err error) {
		if err != nil {
			d.Errors = append(d.Errors, err.Error())
		}
	}
	attr := func(a int) int {
		v, err := drv.DeviceAttribute(dev, a)
		note(err)
		return v
	}
	var err error
	d.Name, err = drv.DeviceName(dev)
	note(err)
	d.PCIBusID, err = drv.DevicePCIBusID(dev)
	note(err)
	d.TotalMem, err = drv.DeviceTotalMem(dev)
	note(err)
	d.CCMajor = attr(cudadrv.AttrComputeCapabilityMaj)
	d.CCMinor = attr(cudadrv.AttrComputeCapabilityMin)
	d.SMCount = attr(cudadrv.AttrMultiprocessorCount)
	d.UnifiedAddressing = attr(cudadrv.AttrUnifiedAddressing) != 0
	d.ManagedMemory = attr(cudadrv.AttrManagedMemory) != 0
	d.PrimaryActive, err = drv.PrimaryActive(dev)
	note(err)
	return d
}
