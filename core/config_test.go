// SPDX-License-Identifier: BSD-3-Clause

package core_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cucopy/cucopy/core"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for k := 0; k+1 < len(kv); k += 2 {
		m[kv[k]] = kv[k+1]
	}
	return func(name string) string { return m[name] }
}

func TestLoadConfigDefaults(t *testing.T) {
	cfg, err := core.LoadConfig(env())
	require.NoError(t, err)
	assert.Equal(t, core.Config{
		DriverPath: "libcuda.so.1", MaxPoll: 16, MaxEvents: 4096, Lanes: 16, LogLevel: core.LogWarn, Stats: false,
		Stage: core.Stage{Threshold: 32 << 20, Chunk: 16 << 20, Threads: 8, Pool: 2, Small: 64 << 10}, PackBelow: 32,
	}, cfg)
}

func TestLoadConfigValid(t *testing.T) {
	cases := []struct {
		name, value string
		check       func(t *testing.T, c core.Config)
	}{
		{"CUCOPY_CUDA_DRIVER", "/opt/fake/libcuda.so", func(t *testing.T, c core.Config) { assert.Equal(t, "/opt/fake/libcuda.so", c.DriverPath) }},
		{"CUCOPY_MAX_POLL", "1", func(t *testing.T, c core.Config) { assert.Equal(t, uint32(1), c.MaxPoll) }},
		{"CUCOPY_MAX_POLL", "65536", func(t *testing.T, c core.Config) { assert.Equal(t, uint32(65536), c.MaxPoll) }},
		{"CUCOPY_MAX_POLL", " 32 ", func(t *testing.T, c core.Config) { assert.Equal(t, uint32(32), c.MaxPoll) }},
		{"CUCOPY_MAX_EVENTS", "1", func(t *testing.T, c core.Config) { assert.Equal(t, uint32(1), c.MaxEvents) }},
		{"CUCOPY_MAX_EVENTS", "1048576", func(t *testing.T, c core.Config) { assert.Equal(t, uint32(1<<20), c.MaxEvents) }},
		{"CUCOPY_LANES", "1", func(t *testing.T, c core.Config) { assert.Equal(t, uint32(1), c.Lanes) }},
		{"CUCOPY_LANES", "16", func(t *testing.T, c core.Config) { assert.Equal(t, uint32(16), c.Lanes) }},
		{"CUCOPY_LOG_LEVEL", "error", func(t *testing.T, c core.Config) { assert.Equal(t, core.LogError, c.LogLevel) }},
		{"CUCOPY_LOG_LEVEL", "WARN", func(t *testing.T, c core.Config) { assert.Equal(t, core.LogWarn, c.LogLevel) }},
		{"CUCOPY_LOG_LEVEL", "Info", func(t *testing.T, c core.Config) { assert.Equal(t, core.LogInfo, c.LogLevel) }},
		{"CUCOPY_LOG_LEVEL", " debug", func(t *testing.T, c core.Config) { assert.Equal(t, core.LogDebug, c.LogLevel) }},
		{"CUCOPY_LOG_LEVEL", "trace", func(t *testing.T, c core.Config) { assert.Equal(t, core.LogTrace, c.LogLevel) }},
		{"CUCOPY_IOV_BATCH", "auto", func(t *testing.T, c core.Config) { assert.Equal(t, core.IOVBatchAuto, c.IOVBatch) }},
		{"CUCOPY_IOV_BATCH", " Loop", func(t *testing.T, c core.Config) { assert.Equal(t, core.IOVBatchLoop, c.IOVBatch) }},
		{"CUCOPY_IOV_BATCH", "OFF", func(t *testing.T, c core.Config) { assert.Equal(t, core.IOVBatchOff, c.IOVBatch) }},
		{"CUCOPY_CALIBRATE", "1", func(t *testing.T, c core.Config) { assert.True(t, c.Calibrate) }},
		{"CUCOPY_CALIBRATE", "off", func(t *testing.T, c core.Config) { assert.False(t, c.Calibrate) }},
		{"CUCOPY_STAGE", " OFF", func(t *testing.T, c core.Config) { assert.True(t, c.Stage.Off) }},
		{"CUCOPY_STAGE", "auto", func(t *testing.T, c core.Config) { assert.False(t, c.Stage.Off) }},
		{"CUCOPY_C_STEADY", " Off", func(t *testing.T, c core.Config) { assert.True(t, c.GoOnly) }},
		{"CUCOPY_C_STEADY", "on", func(t *testing.T, c core.Config) { assert.False(t, c.GoOnly) }},
		{"CUCOPY_2D_PACK_BELOW", "0", func(t *testing.T, c core.Config) { assert.Zero(t, c.PackBelow) }},
		{"CUCOPY_2D_PACK_BELOW", "1k", func(t *testing.T, c core.Config) { assert.Equal(t, uint64(1024), c.PackBelow) }},
		{"CUCOPY_STAGE_THRESHOLD", "1", func(t *testing.T, c core.Config) { assert.Equal(t, uint64(1), c.Stage.Threshold) }},
		{"CUCOPY_STAGE_THRESHOLD", "16m", func(t *testing.T, c core.Config) { assert.Equal(t, uint64(16<<20), c.Stage.Threshold) }},
		{"CUCOPY_STAGE_CHUNK", "64K", func(t *testing.T, c core.Config) { assert.Equal(t, uint64(64<<10), c.Stage.Chunk) }},
		{"CUCOPY_STAGE_CHUNK", "1G", func(t *testing.T, c core.Config) { assert.Equal(t, uint64(1<<30), c.Stage.Chunk) }},
		{"CUCOPY_STAGE_CHUNK", "2097152", func(t *testing.T, c core.Config) { assert.Equal(t, uint64(2<<20), c.Stage.Chunk) }},
		{"CUCOPY_STAGE_THREADS", "1", func(t *testing.T, c core.Config) { assert.Equal(t, uint32(1), c.Stage.Threads) }},
		{"CUCOPY_STAGE_THREADS", "64", func(t *testing.T, c core.Config) { assert.Equal(t, uint32(64), c.Stage.Threads) }},
		{"CUCOPY_STAGE_POOL", "64", func(t *testing.T, c core.Config) { assert.Equal(t, uint32(64), c.Stage.Pool) }},
		{"CUCOPY_STAGE_SMALL", "0", func(t *testing.T, c core.Config) { assert.Zero(t, c.Stage.Small) }},
		{"CUCOPY_STAGE_SMALL", "16k", func(t *testing.T, c core.Config) { assert.Equal(t, uint64(16<<10), c.Stage.Small) }},
		{"CUCOPY_STAGE_SMALL", "16M", func(t *testing.T, c core.Config) { assert.Equal(t, uint64(16<<20), c.Stage.Small) }},
		{"CUCOPY_STAGE_CPU", " Memmove", func(t *testing.T, c core.Config) { assert.True(t, c.Stage.Memmove) }},
		{"CUCOPY_STAGE_CPU", "kernel", func(t *testing.T, c core.Config) { assert.False(t, c.Stage.Memmove) }},
	}
	for _, v := range []string{"1", "y", "yes", "on", "true", "TRUE", " Yes "} {
		cases = append(cases, struct {
			name, value string
			check       func(t *testing.T, c core.Config)
		}{"CUCOPY_STATS", v, func(t *testing.T, c core.Config) { assert.True(t, c.Stats) }})
	}
	for _, v := range []string{"0", "n", "no", "off", "false", "OFF"} {
		cases = append(cases, struct {
			name, value string
			check       func(t *testing.T, c core.Config)
		}{"CUCOPY_STATS", v, func(t *testing.T, c core.Config) { assert.False(t, c.Stats) }})
	}
	for _, c := range cases {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			cfg, err := core.LoadConfig(env(c.name, c.value))
			require.NoError(t, err)
			c.check(t, cfg)
		})
	}
}

func TestLoadConfigInvalid(t *testing.T) {
	cases := []struct{ name, value string }{
		{"CUCOPY_LANES", "0"},
		{"CUCOPY_LANES", "17"},
		{"CUCOPY_MAX_POLL", "0"},
		{"CUCOPY_MAX_POLL", "65537"},
		{"CUCOPY_MAX_POLL", "-1"},
		{"CUCOPY_MAX_POLL", "abc"},
		{"CUCOPY_MAX_POLL", "16k"},
		{"CUCOPY_MAX_POLL", "0x10"},
		{"CUCOPY_MAX_POLL", "4294967312"}, // 2^32+16: must not wrap to 16
		{"CUCOPY_MAX_POLL", " "},
		{"CUCOPY_MAX_EVENTS", "0"},
		{"CUCOPY_MAX_EVENTS", "1048577"},
		{"CUCOPY_MAX_EVENTS", "1.5"},
		{"CUCOPY_MAX_EVENTS", "99999999999999999999"},
		{"CUCOPY_LOG_LEVEL", "verbose"},
		{"CUCOPY_LOG_LEVEL", "3"},
		{"CUCOPY_LOG_LEVEL", "warning"},
		{"CUCOPY_IOV_BATCH", "on"},
		{"CUCOPY_IOV_BATCH", "batch"},
		{"CUCOPY_STATS", "maybe"},
		{"CUCOPY_STATS", "2"},
		{"CUCOPY_STATS", " "},
		{"CUCOPY_CALIBRATE", "sometimes"},
		{"CUCOPY_STAGE", "on"},
		{"CUCOPY_STAGE", " "},
		{"CUCOPY_C_STEADY", "1"},
		{"CUCOPY_C_STEADY", " "},
		{"CUCOPY_2D_PACK_BELOW", "2M"},
		{"CUCOPY_2D_PACK_BELOW", "-1"},
		{"CUCOPY_STAGE_THRESHOLD", "0"},
		{"CUCOPY_STAGE_THRESHOLD", "2T"},
		{"CUCOPY_STAGE_THRESHOLD", "-1"},
		{"CUCOPY_STAGE_THRESHOLD", "4 M"},
		{"CUCOPY_STAGE_CHUNK", "32K"},
		{"CUCOPY_STAGE_CHUNK", "2G"},
		{"CUCOPY_STAGE_CHUNK", "M"},
		{"CUCOPY_STAGE_CHUNK", "18014398509481984K"}, // overflows when shifted: must not wrap
		{"CUCOPY_STAGE_THREADS", "0"},
		{"CUCOPY_STAGE_THREADS", "65"},
		{"CUCOPY_STAGE_POOL", "0"},
		{"CUCOPY_STAGE_POOL", "65"},
		{"CUCOPY_STAGE_CPU", "user"},
		{"CUCOPY_STAGE_SMALL", "-1"},
		{"CUCOPY_STAGE_SMALL", "2G"},
		{"CUCOPY_STAGE_SMALL", "17M"}, // more than one bounce buffer (CUCOPY_STAGE_CHUNK 16M)
	}
	for _, c := range cases {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			_, err := core.LoadConfig(env(c.name, c.value))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.name, "the error names the variable")
		})
	}
}

func TestParseLogLevel(t *testing.T) {
	for l := core.LogError; l <= core.LogTrace; l++ {
		got, err := core.ParseLogLevel(l.String())
		require.NoError(t, err)
		assert.Equal(t, l, got)
	}
	_, err := core.ParseLogLevel("")
	assert.Error(t, err)
	_, err = core.ParseLogLevel("fatal")
	assert.Error(t, err)
	assert.Equal(t, "level9", core.LogLevel(9).String())
	assert.Equal(t, "level-1", core.LogLevel(-1).String())
}

func TestSetLogLevel(t *testing.T) {
	defer core.SetLogLevel(core.LogWarn)
	core.SetLogLevel(core.LogError)
	assert.True(t, core.Logging(core.LogError))
	assert.False(t, core.Logging(core.LogWarn))
	core.SetLogLevel(core.LogTrace)
	assert.True(t, core.Logging(core.LogDebug))
}

func TestCheckLimit(t *testing.T) {
	cases := []struct {
		name string
		v    uint32
		ok   bool
	}{
		{"max_poll", 0, false},
		{"max_poll", 1, true},
		{"max_poll", 1 << 16, true},
		{"max_poll", 1<<16 + 1, false},
		{"max_events", 0, false},
		{"max_events", 1, true},
		{"max_events", 1 << 20, true},
		{"max_events", 1<<20 + 1, false},
		{"max_events", 1<<32 - 1, false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s=%d", c.name, c.v), func(t *testing.T) {
			err := core.CheckLimit(c.name, c.v)
			if c.ok {
				assert.NoError(t, err)
			} else {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.name)
			}
		})
	}
}

func TestStatusOf(t *testing.T) {
	assert.Equal(t, core.OK, core.StatusOf(nil))
	e := &core.Error{Status: core.ErrNoResource, Op: "ep_put_zcopy", Msg: "full"}
	assert.Equal(t, core.ErrNoResource, core.StatusOf(e))
	assert.Equal(t, core.ErrNoResource, core.StatusOf(fmt.Errorf("wrapped: %w", e)))
	assert.Equal(t, core.ErrInternal, core.StatusOf(errors.New("plain")))
	assert.Equal(t, "ep_put_zcopy: full", e.Error())
	inner := errors.New("boom")
	e2 := &core.Error{Status: core.ErrCUDA, Op: "x", Msg: "m", Err: inner}
	assert.Equal(t, "x: m: boom", e2.Error())
	assert.ErrorIs(t, e2, inner)
	assert.Equal(t, "x: boom", (&core.Error{Status: core.ErrCUDA, Op: "x", Err: inner}).Error())
}

// The pinned values of cucopy_status_t.
func TestStatusValues(t *testing.T) {
	want := []core.Status{0, 1, -1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11}
	got := []core.Status{core.OK, core.InProgress, core.ErrInvalid, core.ErrHandle, core.ErrNoMemory,
		core.ErrNoResource, core.ErrBusy, core.ErrUnsupport, core.ErrNoDevice, core.ErrNoDriver,
		core.ErrCUDA, core.ErrForked, core.ErrInternal}
	assert.Equal(t, want, got)
}

func FuzzLoadConfig(f *testing.F) {
	f.Add("libcuda.so.1", "16", "4096", "warn", "y")
	f.Add("", "0", "1048577", "verbose", "maybe")
	f.Add("x", " 1 ", "-5", "TRACE", "off")
	f.Add("", "18446744073709551617", "4294967297", "", "")
	f.Fuzz(func(t *testing.T, drv, poll, events, level, stats string) {
		cfg, err := core.LoadConfig(env("CUCOPY_CUDA_DRIVER", drv, "CUCOPY_MAX_POLL", poll,
			"CUCOPY_MAX_EVENTS", events, "CUCOPY_LOG_LEVEL", level, "CUCOPY_STATS", stats))
		if err != nil {
			if !strings.Contains(err.Error(), "CUCOPY_") {
				t.Fatalf("error does not name a variable: %v", err)
			}
			return
		}
		if cfg.MaxPoll < 1 || cfg.MaxPoll > 1<<16 || cfg.MaxEvents < 1 || cfg.MaxEvents > 1<<20 {
			t.Fatalf("out-of-range config accepted: %+v", cfg)
		}
		if cfg.LogLevel < core.LogError || cfg.LogLevel > core.LogTrace {
			t.Fatalf("bad log level %d", cfg.LogLevel)
		}
		if drv != "" && cfg.DriverPath != drv || drv == "" && cfg.DriverPath != core.DefaultDriverPath {
			t.Fatalf("driver path %q from %q", cfg.DriverPath, drv)
		}
	})
}

// FuzzZcopyArgs feeds arbitrary iov entries and remote addresses to the
// argument checks of a zcopy: never a panic, never a status outside the
// header's list, and a rejected call leaves nothing in flight.
func FuzzZcopyArgs(f *testing.F) {
	f.Add(uint64(8), uint64(8), uint64(0), uint8(1), true)
	f.Add(uint64(0), uint64(1<<63), uint64(1<<63), uint8(3), false)
	f.Add(uint64(4096), uint64(0), uint64(0), uint8(64), true)
	f.Fuzz(func(t *testing.T, l1, l2, remoteOff uint64, n uint8, put bool) {
		r := newRig(t, 2)
		host := r.drv.Pageable(4096)
		dev := r.drv.AllocDevice(0, 4096)
		iov := make([]core.IOV, int(n)%70)
		for k := range iov {
			iov[k] = core.IOV{Buffer: uintptr(host), Length: l1 % 8192}
			if k%2 == 1 {
				iov[k] = core.IOV{Buffer: uintptr(host + l2%4096), Length: l2}
			}
		}
		st, err := r.ep.Zcopy(put, iov, dev+remoteOff, 0)
		switch st {
		case core.OK, core.InProgress:
			require.NoError(t, err)
			r.drv.Run()
			r.progress()
		case core.ErrInvalid, core.ErrOutOfRange, core.ErrCUDA, core.ErrNoResource:
			require.Error(t, err)
			assert.Zero(t, r.drv.Pending(), "a rejected zcopy left work in flight")
		default:
			t.Fatalf("status %d (%v)", st, err)
		}
	})
}
