// SPDX-License-Identifier: BSD-3-Clause

// Command cucopy_info prints what cucopy sees on this machine: the cucopy
// version, the CUDA driver (path, version, optional capabilities), the
// devices and their peer-access matrix, the NVML topology (NVLinks, PCIe
// link, CPU/NUMA affinity, an nvidia-smi topo -m style matrix; "unknown"
// without NVML), NVML's per-GPU view and the effective CUCOPY_*
// configuration. It only reads: it never creates,
// retains or activates a CUDA context.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/cucopy/cucopy/core"
	"github.com/cucopy/cucopy/cudadrv"
)

const usage = `usage: cucopy_info [--json] [--perf [--calibrate]]

Prints the cucopy version, the CUDA driver (path, version, optional
capabilities), the devices and their peer-access matrix, the topology
matrix like nvidia-smi topo -m (NVLinks, PCIe path, CPU/NUMA affinity) and
NVML's view of the GPUs (PCIe link, NVLinks) when NVML is installed ("unknown"
without it), and the effective configuration.

The driver is $CUCOPY_CUDA_DRIVER, default libcuda.so.1.

Flags:
  --json       print the same data as JSON
  --perf       print instead the performance model's matrix: the expected
               latency and bandwidth of copies between pageable host, pinned
               host and every GPU (cucopy_iface_estimate), from the topology
               (NVLinks from NVML when it is installed)
  --calibrate  with --perf: measure every pair (a short copy test through
               cucopy); retains each GPU's primary context meanwhile
  --help       print this help
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("cucopy_info", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	asJSON := fs.Bool("json", false, "print JSON")
	perf := fs.Bool("perf", false, "print the performance model's matrix")
	calibrate := fs.Bool("calibrate", false, "with --perf: measure every pair")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fmt.Fprint(stdout, usage)
			return 0
		}
		return 2
	}
	if *calibrate && !*perf {
		fmt.Fprintln(stderr, "cucopy_info: --calibrate needs --perf")
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cucopy_info: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}

	cfg, err := core.LoadConfig(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "cucopy_info: invalid configuration: %v\n", err)
		return 1
	}
	drv, err := cudadrv.Open(cfg.DriverPath)
	if err != nil {
		how := "the default; set CUCOPY_CUDA_DRIVER to the driver's path"
		if getenv("CUCOPY_CUDA_DRIVER") != "" {
			how = "from CUCOPY_CUDA_DRIVER"
		}
		reason := err.Error()
		var le *cudadrv.LoadError
		if errors.As(err, &le) {
			reason = le.Reason
		}
		fmt.Fprintf(stderr, "cucopy_info: cannot load the CUDA driver %q (%s): %s\n",
			cfg.DriverPath, how, reason)
		return 1
	}
	info := gather(drv, cfg, getenv)
	var out any = info
	rc := 0
	if *perf {
		busIDs := make([]string, len(info.Devices))
		for i, d := range info.Devices {
			busIDs[i] = d.PCIBusID
		}
		p := gatherPerf(drv, cfg, busIDs, *calibrate)
		out = p
		if !*asJSON {
			renderPerf(stdout, p)
		}
		if len(p.Errors) > 0 {
			rc = 1 // printed with the matrix
		}
	} else if !*asJSON {
		renderText(stdout, info)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "cucopy_info: %v\n", err)
			return 1
		}
	}
	return rc
}
