// SPDX-License-Identifier: BSD-3-Clause

package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func presence(b bool) string {
	if b {
		return "present"
	}
	return "absent"
}

// gib formats a byte count in GiB with one decimal.
func gib(b uint64) string {
	return fmt.Sprintf("%.1f", float64(b)/(1<<30))
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// renderText writes the human-readable report.
func renderText(w io.Writer, info *Info) {
	fmt.Fprintf(w, "cucopy %s\n\n", info.Version)

	d := info.Driver
	fmt.Fprintln(w, "CUDA driver")
	t := newTable(w)
	fmt.Fprintf(t, "  path\t%s\n", d.Path)
	fmt.Fprintf(t, "  version\t%s (%d)\n", d.VersionString, d.Version)
	fmt.Fprintf(t, "  cuCtxGetId\t%s\n", yesNo(d.CtxGetID))
	t.Flush()
	fmt.Fprintln(w, "\nOptional driver capabilities")
	t = newTable(w)
	for _, c := range d.Capabilities {
		fmt.Fprintf(t, "  %s\t%s\n", c.Name, presence(c.Present))
	}
	if len(d.Capabilities) == 0 {
		fmt.Fprintln(t, "  (none)")
	}
	t.Flush()

	fmt.Fprintf(w, "\nDevices: %d\n", d.DeviceCount)
	if d.Error != "" {
		fmt.Fprintf(w, "  device count failed: %s\n", d.Error)
	}
	if len(info.Devices) > 0 {
		renderDevices(w, info.Devices)
		fmt.Fprintln(w, "\nPeer access (row can access column's memory)")
		renderPeerMatrix(w, len(info.Devices), info.Peers)
		fmt.Fprintln(w)
		renderTopology(w, info.Topology)
	}

	fmt.Fprintln(w)
	renderNVML(w, info.NVML)

	fmt.Fprintln(w, "\nEffective configuration")
	t = newTable(w)
	for _, v := range info.Config {
		fmt.Fprintf(t, "  %s\t%s\t(%s)\n", v.Name, v.Value, v.Source)
	}
	fmt.Fprintf(t, "  GOMAXPROCS\t%d\t(%s)\n", info.GOMAXPROCS, info.GOMAXPROCSSource)
	t.Flush()
}

// renderDevices writes the device table.
func renderDevices(w io.Writer, devs []Device) {
	t := newTable(w)
	fmt.Fprintln(t, "  GPU\tName\tPCI bus id\tMemory GiB\tCC\tSMs\tUnified addr\tManaged mem\tPrimary ctx")
	for _, d := range devs {
		primary := "inactive"
		if d.PrimaryActive {
			primary = "active"
		}
		fmt.Fprintf(t, "  %d\t%s\t%s\t%s\t%d.%d\t%d\t%s\t%s\t%s\n",
			d.Ordinal, d.Name, d.PCIBusID, gib(d.TotalMem), d.CCMajor, d.CCMinor,
			d.SMCount, yesNo(d.UnifiedAddressing), yesNo(d.ManagedMemory), primary)
	}
	t.Flush()
	for _, d := range devs {
		for _, e := range d.Errors {
			fmt.Fprintf(w, "  GPU%d: %s\n", d.Ordinal, e)
		}
	}
}

// renderPeerMatrix writes the n x n peer-access matrix in nvidia-smi topo -m
// style: "X" on the diagonal, "ok"/"no" elsewhere, "err" when the query failed.
func renderPeerMatrix(w io.Writer, n int, links []PeerLink) {
	cell := make([][]string, n)
	for i := range cell {
		cell[i] = make([]string, n)
		for j := range cell[i] {
			cell[i][j] = "?"
		}
		cell[i][i] = "X"
	}
	var errs []string
	for _, l := range links {
		if l.Device < 0 || l.Device >= n || l.Peer < 0 || l.Peer >= n || l.Device == l.Peer {
			continue
		}
		switch {
		case l.Error != "":
			cell[l.Device][l.Peer] = "err"
			errs = append(errs, fmt.Sprintf("  GPU%d -> GPU%d: %s", l.Device, l.Peer, l.Error))
		case l.CanAccess:
			cell[l.Device][l.Peer] = "ok"
		default:
			cell[l.Device][l.Peer] = "no"
		}
	}
	t := newTable(w)
	var hdr strings.Builder
	hdr.WriteString("  ")
	for j := 0; j < n; j++ {
		fmt.Fprintf(&hdr, "\tGPU%d", j)
	}
	fmt.Fprintln(t, hdr.String())
	for i := 0; i < n; i++ {
		fmt.Fprintf(t, "  GPU%d\t%s\n", i, strings.Join(cell[i], "\t"))
	}
	t.Flush()
	for _, e := range errs {
		fmt.Fprintln(w, e)
	}
}

// renderTopology writes the nvidia-smi topo -m style matrix of the CUDA
// devices with their CPU and NUMA affinity; cells NVML could not fill say
// "unknown", and the title says why.
func renderTopology(w io.Writer, topo Topology) {
	const title = "Topology (NVML, like nvidia-smi topo -m)"
	if topo.Reason != "" {
		fmt.Fprintf(w, "%s: unknown: %s\n", title, topo.Reason)
	} else {
		fmt.Fprintln(w, title)
	}
	n := len(topo.GPUs)
	cell := make([][]string, n)
	for i := range cell {
		cell[i] = make([]string, n)
		for j := range cell[i] {
			cell[i][j] = "?"
		}
		cell[i][i] = "X"
	}
	var errs []string
	for _, p := range topo.Pairs {
		if p.Device < 0 || p.Device >= n || p.Peer < 0 || p.Peer >= n || p.Device == p.Peer {
			continue
		}
		cell[p.Device][p.Peer] = p.Label
		if p.Error != "" {
			errs = append(errs, fmt.Sprintf("  GPU%d -> GPU%d: %s", p.Device, p.Peer, p.Error))
		}
	}
	t := newTable(w)
	var hdr strings.Builder
	hdr.WriteString("  ")
	for j := 0; j < n; j++ {
		fmt.Fprintf(&hdr, "\tGPU%d", j)
	}
	hdr.WriteString("\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID")
	fmt.Fprintln(t, hdr.String())
	for i, g := range topo.GPUs {
		fmt.Fprintf(t, "  GPU%d\t%s\t%s\t%s\t%s\n", i, strings.Join(cell[i], "\t"),
			g.CPUAffinity, g.NUMAAffinity, g.GPUNUMAID)
	}
	t.Flush()
	for _, g := range topo.GPUs {
		if g.Reason != "" {
			fmt.Fprintf(w, "  GPU%d: %s\n", g.Ordinal, g.Reason)
		}
	}
	for _, e := range errs {
		fmt.Fprintln(w, e)
	}
	fmt.Fprintln(w, "  X = self, NV# = # active NVLinks, PIX/PXB/PHB/NODE/SYS = PCIe path (see nvidia-smi topo -m)")
}

// pcieString formats a PCIe generation and width ("gen5 x16").
func pcieString(gen, width int) string {
	if gen == 0 && width == 0 {
		return unknown
	}
	g, x := "?", "?"
	if gen > 0 {
		g = fmt.Sprint(gen)
	}
	if width > 0 {
		x = fmt.Sprint(width)
	}
	return "gen" + g + " x" + x
}

// renderNVML writes the NVML section; one line when NVML is unavailable.
func renderNVML(w io.Writer, n NVMLInfo) {
	if !n.Available {
		fmt.Fprintf(w, "NVML: unavailable (%s)\n", n.Reason)
		return
	}
	fmt.Fprintf(w, "NVML: driver %s\n", n.DriverVersion)
	if n.Reason != "" {
		fmt.Fprintf(w, "  %s\n", n.Reason)
	}
	if len(n.Devices) == 0 {
		return
	}
	t := newTable(w)
	fmt.Fprintln(t, "  NVML\tCUDA\tName\tUUID\tPCI bus id\tPCIe now\tPCIe max\tNVLinks\tNUMA")
	for _, d := range n.Devices {
		cuda := "-"
		if d.CUDAOrdinal >= 0 {
			cuda = fmt.Sprintf("GPU%d", d.CUDAOrdinal)
		}
		links := unknown
		if d.NVLinks != nil {
			links = fmt.Sprint(len(d.NVLinks))
		}
		numa := orUnknown(d.NUMAAffinity)
		fmt.Fprintf(t, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Index, cuda,
			orUnknown(d.Name), orUnknown(d.UUID), orUnknown(d.PCIBusID),
			pcieString(d.PCIe.CurrGen, d.PCIe.CurrWidth), pcieString(d.PCIe.MaxGen, d.PCIe.MaxWidth),
			links, numa)
	}
	t.Flush()
	for _, d := range n.Devices {
		for _, e := range d.Errors {
			fmt.Fprintf(w, "  NVML %d: %s\n", d.Index, e)
		}
	}
}

func orUnknown(s string) string {
	if s == "" {
		return unknown
	}
	return s
}
