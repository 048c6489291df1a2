// SPDX-License-Identifier: BSD-3-Clause

// Package core is cucopy's transport engine: the context (driver and memory
// domain), the iface with its table of per-CUDA-context resources, endpoints
// with short and zero-copy operations, progress, flush and the event fd.
//
// core is pure Go and never imports "C": it reaches the driver only through
// cudadrv.Interface, so its tests run against a Go fake of the driver.
package core
