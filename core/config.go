// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cucopy/cucopy/cudadrv"
)

// Config is the process configuration read from CUCOPY_* environment
// variables; context and iface params override parts of it.
type Config struct {
	DriverPath string   // CUCOPY_CUDA_DRIVER, default "libcuda.so.1"
	MaxPoll    uint32   // CUCOPY_MAX_POLL, default 16
	MaxEvents  uint32   // CUCOPY_MAX_EVENTS, default 4096 (per CUDA context)
	Lanes      uint32   // CUCOPY_LANES, default 16: streams per context and direction on multi-thread ifaces
	LogLevel   LogLevel // CUCOPY_LOG_LEVEL, default warn
	Stats      bool     // CUCOPY_STATS: print per-context counters at iface close
	IOVBatch   IOVBatch // CUCOPY_IOV_BATCH, default auto
	Calibrate  bool     // CUCOPY_CALIBRATE: estimates measure each pair once (estimate.go)
	Stage      Stage    // CUCOPY_STAGE*: pageable staging (stage.go)
	PackBelow  uint64   // CUCOPY_2D_PACK_BELOW, default 32: 2-D rows narrower than this take the pack path (pack.go); 0 never
	GoOnly     bool     // CUCOPY_C_STEADY=off: every call goes through Go, none runs in the C steady state (cudadrv/fast.go)
}

// Stage is how large copies between pageable host memory and a GPU are
// staged through the library's pinned bounce buffers (stage.go):
// CUCOPY_STAGE (auto: from Threshold bytes on; off: the driver's own path),
// CUCOPY_STAGE_THRESHOLD, CUCOPY_STAGE_CHUNK, CUCOPY_STAGE_THREADS,
// CUCOPY_STAGE_POOL, CUCOPY_STAGE_CPU.
type Stage struct {
	Off       bool
	Memmove   bool   // CUCOPY_STAGE_CPU=memmove: CPU copies in user space (goCopy), not in the kernel
	Threshold uint64 // a piece of at least this many bytes is staged
	Chunk     uint64 // the most bytes per pipeline step; a bounce buffer's size
	Threads   uint32 // CPU copy threads per staged copy (the caller's included)
	Pool      uint32 // bounce-buffer pairs per iface: staged copies at once
	Small     uint64 // CUCOPY_STAGE_SMALL: D2H runs into pageable memory of at most this footprint are staged in one step; 0 never
}

// IOVBatch is how a zcopy issues consecutive iov entries that run on one
// context and stream (a run): CUCOPY_IOV_BATCH.
type IOVBatch uint8

const (
	IOVBatchAuto IOVBatch = iota // one cuMemcpyBatchAsync per run where the driver has it, else IOVBatchLoop
	IOVBatchLoop                 // one driver-layer call per run, one cuMemcpyAsync per entry, one event
	IOVBatchOff                  // one driver-layer call and one cuMemcpyAsync per entry (runs share one event)
)

var iovBatchNames = [...]string{IOVBatchAuto: "auto", IOVBatchLoop: "loop", IOVBatchOff: "off"}

func (b IOVBatch) String() string { return iovBatchNames[b] }

// Defaults and limits.
const (
	DefaultDriverPath = "libcuda.so.1"
	DefaultMaxPoll    = 16
	DefaultMaxEvents  = 4096
	DefaultLanes      = 16
	MaxLanes          = cudadrv.FastLanes // the C steady state counts its calls per lane
	MaxIOV            = 64
	// Measured on an H200 through cucopy_ep_copy_2d (tests/gpu/copy2d.sh,
	// docs/gpu-validation.md run A of the fourth session), 512 KiB of rows
	// 2 KiB apart between device and pinned host memory, pack path against
	// plain 2-D, D2H / H2D us: 8 B rows 42 / 56 against 99 / 185, 16 B 56 /
	// 56 against 57 / 74, 32 B 45 / 45 against 37 / 41, 64 B about equal:
	// the pack path pays from 32 B on.
	DefaultPackBelow = 32
	maxPackBelow     = 1 << 20
	maxEventsLimit   = 1 << 20
	maxPollLimit     = 1 << 16

	// Measured on an H200 host (16 cores, tests/gpu/stage-bench.sh,
	// docs/gpu-validation.md): 8 threads and 16 MiB chunks reach 3.0 x
	// the driver's pageable H2D rate and 1.5 x its D2H rate at 256 MiB,
	// and staging wins from 16-64 MiB on (two hosts; 16 MiB lost 0.84 on
	// one), hence 32 MiB.
	DefaultStageThreshold = 32 << 20
	DefaultStageChunk     = 16 << 20
	DefaultStageThreads   = 8
	DefaultStagePool      = 2
	// Small staging (stage.go, runSmall): a run of two or more
	// device-to-pageable copies of at most this footprint goes through a
	// bounce buffer in one batch, one wait and CPU copies, instead of the
	// driver's pageable path (cuMemcpyAsync to pageable memory returns
	// only once it is done). On an H200 (docs/gpu-validation.md, run N):
	// 16 x 8 B at 5.27 x the raw loop's rate; one copy alone lost 0.8-1.6
	// us, so it is never staged this way.
	DefaultStageSmall = 64 << 10
	minStageChunk     = 64 << 10
	maxStageChunk     = 1 << 30
	maxStageThreads   = 64
	maxStagePool      = 64
)

// LoadConfig reads the CUCOPY_* variables through getenv. An invalid value
// is an error naming the variable; nothing is silently ignored.
func LoadConfig(getenv func(string) string) (Config, error) {
	cfg := Config{
		DriverPath: DefaultDriverPath,
		MaxPoll:    DefaultMaxPoll,
		MaxEvents:  DefaultMaxEvents,
		Lanes:      DefaultLanes,
		LogLevel:   LogWarn,
		Stage:      Stage{Threshold: DefaultStageThreshold, Chunk: DefaultStageChunk, Threads: DefaultStageThreads, Pool: DefaultStagePool, Small: DefaultStageSmall},
	}
	if v := getenv("CUCOPY_CUDA_DRIVER"); v != "" {
		cfg.DriverPath = v
	}
	var err error
	if cfg.MaxPoll, err = parseCount(getenv, "CUCOPY_MAX_POLL", DefaultMaxPoll, maxPollLimit); err != nil {
		return cfg, err
	}
	if cfg.MaxEvents, err = parseCount(getenv, "CUCOPY_MAX_EVENTS", DefaultMaxEvents, maxEventsLimit); err != nil {
		return cfg, err
	}
	if cfg.Lanes, err = parseCount(getenv, "CUCOPY_LANES", DefaultLanes, MaxLanes); err != nil {
		return cfg, err
	}
	if v := getenv("CUCOPY_LOG_LEVEL"); v != "" {
		if cfg.LogLevel, err = ParseLogLevel(v); err != nil {
			return cfg, err
		}
	}
	if v := getenv("CUCOPY_IOV_BATCH"); v != "" {
		if cfg.IOVBatch, err = parseIOVBatch(v); err != nil {
			return cfg, err
		}
	}
	if v := getenv("CUCOPY_STATS"); v != "" {
		if cfg.Stats, err = parseBool(v); err != nil {
			return cfg, fmt.Errorf("CUCOPY_STATS=%q: %v", v, err)
		}
	}
	if v := getenv("CUCOPY_CALIBRATE"); v != "" {
		if cfg.Calibrate, err = parseBool(v); err != nil {
			return cfg, fmt.Errorf("CUCOPY_CALIBRATE=%q: %v", v, err)
		}
	}
	if v := getenv("CUCOPY_C_STEADY"); v != "" {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "on":
		case "off":
			cfg.GoOnly = true
		default:
			return cfg, fmt.Errorf("CUCOPY_C_STEADY=%q: want on or off", v)
		}
	}
	if cfg.PackBelow, err = parseSize(getenv, "CUCOPY_2D_PACK_BELOW", DefaultPackBelow, 0, maxPackBelow); err != nil {
		return cfg, err
	}
	err = loadStage(getenv, &cfg.Stage)
	return cfg, err
}

// loadStage reads the CUCOPY_STAGE* variables into st (defaults set).
func loadStage(getenv func(string) string, st *Stage) error {
	if v := getenv("CUCOPY_STAGE"); v != "" {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "auto":
		case "off":
			st.Off = true
		default:
			return fmt.Errorf("CUCOPY_STAGE=%q: want auto or off", v)
		}
	}
	var err error
	if st.Threshold, err = parseSize(getenv, "CUCOPY_STAGE_THRESHOLD", st.Threshold, 1, 1<<40); err != nil {
		return err
	}
	if st.Chunk, err = parseSize(getenv, "CUCOPY_STAGE_CHUNK", st.Chunk, minStageChunk, maxStageChunk); err != nil {
		return err
	}
	if st.Small, err = parseSize(getenv, "CUCOPY_STAGE_SMALL", st.Small, 0, maxStageChunk); err != nil {
		return err
	}
	if st.Small > st.Chunk {
		return fmt.Errorf("CUCOPY_STAGE_SMALL=%d is larger than CUCOPY_STAGE_CHUNK=%d: want at most one bounce buffer", st.Small, st.Chunk)
	}
	if st.Threads, err = parseCount(getenv, "CUCOPY_STAGE_THREADS", st.Threads, maxStageThreads); err != nil {
		return err
	}
	if st.Pool, err = parseCount(getenv, "CUCOPY_STAGE_POOL", st.Pool, maxStagePool); err != nil {
		return err
	}
	if v := getenv("CUCOPY_STAGE_CPU"); v != "" {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "kernel":
		case "memmove":
			st.Memmove = true
		default:
			return fmt.Errorf("CUCOPY_STAGE_CPU=%q: want kernel or memmove", v)
		}
	}
	return nil
}

// parseSize reads a byte count: an integer with an optional K, M or G
// suffix (powers of 1024), from lo to hi.
func parseSize(getenv func(string) string, name string, def, lo, hi uint64) (uint64, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	t := strings.ToUpper(strings.TrimSpace(v))
	shift := 0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			shift = 10
		case 'M':
			shift = 20
		case 'G':
			shift = 30
		}
		if shift != 0 {
			t = t[:n-1]
		}
	}
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil || n > hi>>shift || n<<shift < lo {
		return 0, fmt.Errorf("%s=%q: want a size from %d to %d bytes (an integer, optionally with K, M or G)", name, v, lo, hi)
	}
	return n << shift, nil
}

func parseCount(getenv func(string) string, name string, def, limit uint32) (uint32, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
	if err != nil || n < 1 || n > uint64(limit) {
		return 0, fmt.Errorf("%s=%q: want an integer from 1 to %d", name, v, limit)
	}
	return uint32(n), nil
}

func parseIOVBatch(v string) (IOVBatch, error) {
	for b, name := range iovBatchNames {
		if strings.EqualFold(strings.TrimSpace(v), name) {
			return IOVBatch(b), nil
		}
	}
	return 0, fmt.Errorf("CUCOPY_IOV_BATCH=%q: want auto, loop or off", v)
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "y", "yes", "on", "true":
		return true, nil
	case "0", "n", "no", "off", "false":
		return false, nil
	}
	return false, fmt.Errorf("want y/n, yes/no, on/off, 1/0 or true/false")
}

// CheckLimit validates a param value against the same bounds as the
// environment variable it overrides.
func CheckLimit(name string, v uint32) error {
	limit := uint32(maxEventsLimit)
	if name == "max_poll" {
		limit = maxPollLimit
	}
	if v < 1 || v > limit {
		return fmt.Errorf("%s=%d: want 1 to %d", name, v, limit)
	}
	return nil
}
