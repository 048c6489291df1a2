// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
)

// LogLevel mirrors cucopy_log_level_t.
type LogLevel int32

const (
	LogError LogLevel = 0
	LogWarn  LogLevel = 1
	LogInfo  LogLevel = 2
	LogDebug LogLevel = 3
	LogTrace LogLevel = 4
)

var logLevelNames = [...]string{"error", "warn", "info", "debug", "trace"}

func (l LogLevel) String() string {
	if l >= 0 && int(l) < len(logLevelNames) {
		return logLevelNames[l]
	}
	return fmt.Sprintf("level%d", int32(l))
}

// ParseLogLevel accepts the names of CUCOPY_LOG_LEVEL.
func ParseLogLevel(v string) (LogLevel, error) {
	for i, n := range logLevelNames {
		if strings.EqualFold(strings.TrimSpace(v), n) {
			return LogLevel(i), nil
		}
	}
	return LogWarn, fmt.Errorf("CUCOPY_LOG_LEVEL=%q: want one of %s", v, strings.Join(logLevelNames[:], ", "))
}

var logLevel atomic.Int32

func init() { logLevel.Store(int32(LogWarn)) }

// SetLogLevel sets the process-wide level.
func SetLogLevel(l LogLevel) { logLevel.Store(int32(l)) }

// Logging reports whether messages of level l are printed.
func Logging(l LogLevel) bool { return int32(l) <= logLevel.Load() }

func logf(l LogLevel, format string, args ...any) {
	if !Logging(l) {
		return
	}
	fmt.Fprintf(os.Stderr, "cucopy %s: %s\n", l, fmt.Sprintf(format, args...))
}
