// SPDX-License-Identifier: BSD-3-Clause

package main

// NVML is used here only, in the Go executable; it must never be imported by
// capi, core or cudadrv (brief §2: it would leave undefined nvml* symbols in
// the c-shared library).

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// NVMLInfo is what NVML says, or why it could not be asked.
type NVMLInfo struct {
	Available     bool         `json:"available"`
	Reason        string       `json:"reason,omitempty"`
	DriverVersion string       `json:"driver_version,omitempty"`
	Devices       []NVMLDevice `json:"devices,omitempty"`
}

// NVMLDevice is one GPU as NVML sees it. Error collects failed queries.
type NVMLDevice struct {
	Index  int      `json:"index"`
	Name   string   `json:"name"`
	UUID   string   `json:"uuid"`
	Errors []string `json:"errors,omitempty"`
}

// queryNVML never fails: an unusable NVML is reported, not an error.
func queryNVML() (info NVMLInfo) {
	defer func() {
		// go-nvml panics on some loader failures; treat them as unavailable.
		if r := recover(); r != nil {
			info = NVMLInfo{Reason: "panic: " + toString(r)}
		}
	}()
	switch ret := nvml.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return NVMLInfo{Reason: "libnvidia-ml.so.1 not found"}
	default:
		return NVMLInfo{Reason: "nvmlInit: " + ret.Error()}
	}
	defer nvml.Shutdown()
	info.Available = true
	if v, ret := nvml.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		info.DriverVersion = v
	} else {
		info.DriverVersion = "? (" + ret.Error() + ")"
	}
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		info.Reason = "device count: " + ret.Error()
		return info
	}
	for i := 0; i < n; i++ {
		d := NVMLDevice{Index: i}
		h, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			d.Errors = append(d.Errors, "handle: "+ret.Error())
			info.Devices = append(info.Devices, d)
			continue
		}
		if d.Name, ret = h.GetName(); ret != nvml.SUCCESS {
			d.Errors = append(d.Errors, "name: "+ret.Error())
		}
		if d.UUID, ret = h.GetUUID(); ret != nvml.SUCCESS {
			d.Errors = append(d.Errors, "uuid: "+ret.Error())
		}
		info.Devices = append(info.Devices, d)
	}
	return info
}

func toString(v any) string {
	if e, ok := v.(error); ok {
		return e.Error()
	}
	if s, ok := v.(string); ok {
		return s
	}
	return "unknown"
}
