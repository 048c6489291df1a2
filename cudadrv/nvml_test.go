// SPDX-License-Identifier: BSD-3-Clause

package cudadrv

import (
	"strings"
	"testing"
)

// A bus id that does not parse is refused before NVML is asked; no GPU is
// no question. (Answers from NVML: tests/c test_estimate_nvlink and
// _nvswitch, with the fake NVML.)
func TestNVLinksInput(t *testing.T) {
	if _, err := NVLinks([]string{"0000:19:00.0", "GPU-1"}); err == nil || !strings.Contains(err.Error(), `"GPU-1"`) {
		t.Errorf("NVLinks of a bad bus id: %v", err)
	}
	if l, err := NVLinks(nil); l != nil || err != nil {
		t.Errorf("NVLinks(nil) = %v, %v", l, err)
	}
}
