// SPDX-License-Identifier: BSD-3-Clause

package main

// The cucopy version this tool reports. It must match CUCOPY_VERSION_MAJOR,
// _MINOR and _PATCH in include/cucopy.h; version_test.go checks it.
const (
	versionMajor = 0
	versionMinor = 5
	versionPatch = 0
)
