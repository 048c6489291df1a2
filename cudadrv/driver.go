// SPDX-License-Identifier: BSD-3-Clause

package cudadrv

/*
#cgo CFLAGS: -O2 -std=gnu11 -Wall -Wextra
#cgo LDFLAGS: -ldl
#cgo nocallback cd_copy
#cgo noescape cd_query_slots
#cgo noescape cd_incarnation_gone
#cgo nocallback cd_query_slots
#cgo nocallback cd_incarnation_gone
#include <stdlib.h>
#include "cd_shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// driver is the loaded CUDA driver. There is one per process: the C table
// of entry points is process-wide.
type driver struct {
	path    string
	version int
}

var _ Interface = (*driver)(nil)

var (
	loadMu sync.Mutex
	loaded *driver
)

// LoadError says why the driver library could not be loaded.
type LoadError struct {
	Path   string
	Reason string
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("cannot load CUDA driver %q: %s", e.Path, e.Reason)
}

// Open loads the driver at path (first call in the process) or returns the
// one already loaded. A different path than the loaded one is an error: one
// process has one driver table.
func Open(path string) (Interface, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	if loaded != nil {
		if path != loaded.path {
			return nil, fmt.Errorf("CUDA driver %q already loaded; cannot also load %q", loaded.path, path)
		}
		return loaded, nil
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var (
		version C.int
		result  C.cdResult
		msg     [512]C.char
	)
	rc := C.cd_load(cpath, &version, &result, &msg[0], C.int(len(msg)))
	detail := C.GoString(&msg[0])
	switch rc {
	case C.CD_LOAD_OK:
		loaded = &driver{path: path, version: int(version)}
		return loaded, nil
	case C.CD_LOAD_DLOPEN:
		return nil, &LoadError{Path: path, Reason: detail}
	case C.CD_LOAD_MISSING:
		return nil, &LoadError{Path: path, Reason: "the driver lacks " + detail}
	}
	// Failures are not latched: a later call (another path, or after the
	// program fixed its environment) loads again.
	return nil, &LoadError{Path: path, Reason: (&Result{Call: detail, Entry: EntryOf(detail), Code: uint32(result), Name: errorName(uint32(result))}).Error()}
}

func (d *driver) Path() string { return d.path }
func (d *driver) Version() int { return d.version }

func (d *driver) HasCtxID() bool { return C.cd_entry_present(C.CD_IDX_cuCtxGetId) != 0 }

func (d *driver) Capabilities() []Capability {
	var caps []Capability
	for i := 0; i < C.CD_NUM_ENTRIES; i++ {
		if C.cd_entry_use[i] == C.CD_OPTIONAL {
			caps = append(caps, Capability{Name: EntryName(i), Present: C.cd_entry_present(C.int(i)) != 0})
		}
	}
	return caps
}

func (d *driver) Error(e CallError) error { return NativeError(e) }

// NativeError is the native driver's Error, for a CallError the C side
// reported outside a call of the driver's methods (the C steady state).
func NativeError(e CallError) error {
	if e.Result == 0 {
		return nil
	}
	return &Result{Call: e.Entry.String(), Entry: e.Entry, Code: e.Result, Name: errorName(e.Result)}
}

// call runs one cold-path C function (cd_cold.c, cd_mem.c): f calls it with
// e, and it returns 0, or -1 with the failed call in e. The hot path (Copy,
// QuerySlots, Arm, Gone) calls C directly.
func (d *driver) call(f func(e *C.cd_err) C.int) error {
	var e C.cd_err
	if f(&e) == 0 {
		return nil
	}
	return d.Error(goCallError(e))
}

func goCallError(e C.cd_err) CallError {
	return CallError{Entry: Entry(e.entry), Result: uint32(e.result)}
}

func (d *driver) DeviceCount() (int, error) {
	var n C.int32_t
	err := d.call(func(e *C.cd_err) C.int { return C.cd_device_count(&n, e) })
	return int(n), err
}

func (d *driver) DeviceName(dev int) (string, error) {
	var buf [256]C.char
	if err := d.call(func(e *C.cd_err) C.int { return C.cd_device_name(C.int32_t(dev), &buf[0], C.int32_t(len(buf)), e) }); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

func (d *driver) DeviceAttribute(dev, attr int) (int, error) {
	var v C.int32_t
	err := d.call(func(e *C.cd_err) C.int { return C.cd_device_attr(C.int32_t(dev), C.uint32_t(attr), &v, e) })
	return int(v), err
}

func (d *driver) DeviceTotalMem(dev int) (uint64, error) {
	var b C.uint64_t
	err := d.call(func(e *C.cd_err) C.int { return C.cd_device_total_mem(C.int32_t(dev), &b, e) })
	return uint64(b), err
}

func (d *driver) DevicePCIBusID(dev int) (string, error) {
	var buf [64]C.char
	if err := d.call(func(e *C.cd_err) C.int {
		return C.cd_device_pci_bus_id(C.int32_t(dev), &buf[0], C.int32_t(len(buf)), e)
	}); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

func (d *driver) CanAccessPeer(dev, peer int) (bool, error) {
	var can C.int32_t
	err := d.call(func(e *C.cd_err) C.int { return C.cd_can_access_peer(C.int32_t(dev), C.int32_t(peer), &can, e) })
	return can != 0, err
}

func (d *driver) CurrentContext() (Context, error) {
	var ctx C.uintptr_t
	err := d.call(func(e *C.cd_err) C.int { return C.cd_ctx_current(&ctx, e) })
	return Context(ctx), err
}

func (d *driver) ContextID(ctx Context) (uint64, error) {
	if !d.HasCtxID() {
		return uint64(ctx), nil
	}
	var id C.uint64_t
	err := d.call(func(e *C.cd_err) C.int { return C.cd_ctx_id(C.uintptr_t(ctx), &id, e) })
	return uint64(id), err
}

func (d *driver) ContextDevice(ctx Context) (int, error) {
	var dev C.int32_t
	err := d.call(func(e *C.cd_err) C.int { return C.cd_ctx_device(C.uintptr_t(ctx), &dev, e) })
	return int(dev), err
}

func (d *driver) PrimaryActive(dev int) (bool, error) {
	var active C.int32_t
	err := d.call(func(e *C.cd_err) C.int { return C.cd_primary_state(C.int32_t(dev), &active, e) })
	return active != 0, err
}

func (d *driver) PrimaryRetain(dev int) (Context, error) {
	var ctx C.uintptr_t
	err := d.call(func(e *C.cd_err) C.int { return C.cd_primary_retain(C.int32_t(dev), &ctx, e) })
	return Context(ctx), err
}

func (d *driver) PrimaryRelease(dev int) error {
	return d.call(func(e *C.cd_err) C.int { return C.cd_primary_release(C.int32_t(dev), e) })
}

func (d *driver) EnablePeer(ctx, peer Context) error {
	err := d.call(func(e *C.cd_err) C.int { return C.cd_enable_peer(C.uintptr_t(ctx), C.uintptr_t(peer), e) })
	if r, ok := err.(*Result); ok && r.Code == ErrorPeerAlreadyEnable {
		return nil
	}
	return err
}

func (d *driver) StreamCreate(ctx Context) (Stream, error) {
	var s C.uintptr_t
	err := d.call(func(e *C.cd_err) C.int { return C.cd_stream_create(C.uintptr_t(ctx), &s, e) })
	return Stream(s), err
}

func (d *driver) StreamDestroy(ctx Context, s Stream) error {
	return d.call(func(e *C.cd_err) C.int { return C.cd_stream_destroy(C.uintptr_t(ctx), C.uintptr_t(s), e) })
}

func (d *driver) StreamSynchronize(ctx Context, s Stream) error {
	return d.call(func(e *C.cd_err) C.int { return C.cd_stream_sync(C.uintptr_t(ctx), C.uintptr_t(s), e) })
}

func (d *driver) StreamWaitEvent(ctx Context, s Stream, ev Event) error {
	return d.call(func(e *C.cd_err) C.int {
		return C.cd_stream_wait_event(C.uintptr_t(ctx), C.uintptr_t(s), C.uintptr_t(ev), e)
	})
}

func (d *driver) EventCreate(ctx Context) (Event, error) {
	var ev C.uintptr_t
	err := d.call(func(e *C.cd_err) C.int { return C.cd_event_create(C.uintptr_t(ctx), &ev, e) })
	return Event(ev), err
}

func (d *driver) EventDestroy(ctx Context, ev Event) error {
	return d.call(func(e *C.cd_err) C.int { return C.cd_event_destroy(C.uintptr_t(ctx), C.uintptr_t(ev), e) })
}

func (d *driver) Copy(slots []Slot, primary []Context, op *CopyOp, more []Piece, mems []MemDesc) CopyStatus {
	var sp *C.cd_slot
	if len(slots) > 0 {
		sp = (*C.cd_slot)(unsafe.Pointer(&slots[0]))
	}
	var pp *C.uintptr_t
	if len(primary) > 0 {
		pp = (*C.uintptr_t)(unsafe.Pointer(&primary[0]))
	}
	var mp *C.cd_piece
	if len(more) > 0 {
		mp = (*C.cd_piece)(unsafe.Pointer(&more[0]))
	}
	var dp *C.cd_mdesc
	if len(mems) > 0 {
		dp = (*C.cd_mdesc)(unsafe.Pointer(&mems[0]))
	}
	op.NDevices = int32(len(primary))
	return CopyStatus(C.cd_copy(sp, C.int32_t(len(slots)), pp, (*C.cd_copy_op)(unsafe.Pointer(op)), mp, C.int32_t(len(more)), dp))
}

func (d *driver) Describe(ptr uint64) (MemDesc, error) {
	var m MemDesc
	err := d.call(func(e *C.cd_err) C.int {
		return C.cd_describe(C.uint64_t(ptr), (*C.cd_mdesc)(unsafe.Pointer(&m)), e)
	})
	return m, err
}

// callError is Error, with ErrContextGone for an ended incarnation.
func (d *driver) callError(e C.cd_err) error {
	if e.entry == C.CD_ENTRY_GONE {
		return ErrContextGone
	}
	return d.Error(goCallError(e))
}

func (d *driver) QuerySlots(slots []SlotQuery, first int32) error {
	if first < 0 {
		return nil
	}
	var e C.cd_err
	if C.cd_query_slots((*C.cd_slot_query)(unsafe.Pointer(&slots[0])), C.int32_t(first), &e) != 0 {
		return d.Error(goCallError(e))
	}
	return nil
}

// NewEventRing is n zeroed events in C memory, for a queue whose segments
// QuerySlots reads (Go memory holding no Go pointers could be passed too,
// but only as an argument: a QueueQuery points into the ring from inside
// the slots passed). FreeEventRing gives it back. Both are cold: a ring is
// made when a queue grows.
func NewEventRing(n int) []Event {
	p := C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(Event(0))))
	if p == nil {
		panic("cucopy: out of memory for an event ring")
	}
	return unsafe.Slice((*Event)(p), n)
}

// FreeEventRing frees a ring from NewEventRing (nil: nothing).
func FreeEventRing(r []Event) {
	if cap(r) > 0 {
		C.free(unsafe.Pointer(unsafe.SliceData(r)))
	}
}

func (d *driver) Arm(inc Incarnation, stream Stream, head Event, fd int) (bool, error) {
	var e C.cd_err
	rc := C.cd_arm((*C.cd_inc)(unsafe.Pointer(&inc)), C.uintptr_t(stream), C.uintptr_t(head), C.int32_t(fd), &e)
	if rc < 0 {
		return false, d.callError(e)
	}
	return rc == 1, nil
}

func (d *driver) Gone(inc Incarnation) bool {
	return C.cd_incarnation_gone((*C.cd_inc)(unsafe.Pointer(&inc))) != 0
}

func (d *driver) DeviceUUID(dev int) ([16]byte, error) {
	var uuid [16]C.uint8_t
	var out [16]byte
	if err := d.call(func(e *C.cd_err) C.int { return C.cd_device_uuid(C.int32_t(dev), &uuid[0], e) }); err != nil {
		return out, err
	}
	for i := range uuid {
		out[i] = byte(uuid[i])
	}
	return out, nil
}

func (d *driver) P2PAttribute(dev, peer, attr int) (int, error) {
	var v C.int32_t
	err := d.call(func(e *C.cd_err) C.int {
		return C.cd_p2p_attr(C.int32_t(dev), C.int32_t(peer), C.uint32_t(attr), &v, e)
	})
	return int(v), err
}

func (d *driver) MemQuery(ptr uint64, devices int) (MemInfo, error) {
	var info MemInfo
	err := d.call(func(e *C.cd_err) C.int {
		return C.cd_mem_query(C.uint64_t(ptr), C.int32_t(devices), (*C.cd_mem_info)(unsafe.Pointer(&info)), e)
	})
	return info, err
}

func (d *driver) MemAlloc(ctx Context, kind MemKind, bytes uint64) (uint64, error) {
	var p C.uint64_t
	err := d.call(func(e *C.cd_err) C.int {
		return C.cd_mem_alloc(C.uintptr_t(ctx), C.int32_t(kind), C.uint64_t(bytes), &p, e)
	})
	return uint64(p), err
}

func (d *driver) MemFree(ctx Context, kind MemKind, ptr uint64) error {
	return d.call(func(e *C.cd_err) C.int { return C.cd_mem_free(C.uintptr_t(ctx), C.int32_t(kind), C.uint64_t(ptr), e) })
}

func (d *driver) HostRegister(ctx Context, ptr, bytes uint64) error {
	return d.call(func(e *C.cd_err) C.int {
		return C.cd_host_register(C.uintptr_t(ctx), C.uint64_t(ptr), C.uint64_t(bytes), e)
	})
}

func (d *driver) HostUnregister(ctx Context, ptr uint64) error {
	return d.call(func(e *C.cd_err) C.int { return C.cd_host_unregister(C.uintptr_t(ctx), C.uint64_t(ptr), e) })
}
