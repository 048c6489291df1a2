// SPDX-License-Identifier: BSD-3-Clause

package main

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestVersionMatchesHeader keeps the tool's version constants equal to
// CUCOPY_VERSION_* in include/cucopy.h.
func TestVersionMatchesHeader(t *testing.T) {
	src, err := os.ReadFile("../../include/cucopy.h")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"MAJOR": versionMajor, "MINOR": versionMinor, "PATCH": versionPatch}
	for part, v := range want {
		re := regexp.MustCompile(`(?m)^#define\s+CUCOPY_VERSION_` + part + `\s+(\d+)\s*$`)
		m := re.FindSubmatch(src)
		if m == nil {
			t.Fatalf("include/cucopy.h has no #define CUCOPY_VERSION_%s", part)
		}
		got, _ := strconv.Atoi(string(m[1]))
		if got != v {
			t.Errorf("CUCOPY_VERSION_%s is %d in include/cucopy.h, %d in tools/cucopy_info/version.go", part, got, v)
		}
	}
}
