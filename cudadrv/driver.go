// SPDX-License-Identifier: BSD-3-Clause

package cudadrv

/*
#cgo CFLAGS: -O2 -std=gnu11 -Wall -Wextra
#cgo LDFLAGS: -ldl
#cgo nocallback cd_copy
#cgo noescape cd_query_events
#cgo noescape cd_incarnation_gone
#cgo nocallback cd_query_events
#include <stdlib.h>
#include "cd_shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// The Go mirrors must match the C structs byte for byte: these arrays have
// length zero only when sizes and offsets agree, otherwise the build fails.
var (
	_ [unsafe.Sizeof(Slot{}) - C.sizeof_cd_slot]struct{}
	_ [C.sizeof_cd_slot - unsafe.Sizeof(Slot{})]struct{}
	_ [unsafe.Offsetof(Slot{}.Device) - unsafe.Offsetof(C.cd_slot{}.device)]struct{}
	_ [unsafe.Offsetof(C.cd_slot{}.device) - unsafe.Offsetof(Slot{}.Device)]struct{}
	_ [unsafe.Sizeof(CopyOp{}) - C.sizeof_cd_copy_op]struct{}
	_ [C.sizeof_cd_copy_op - unsafe.Sizeof(CopyOp{})]struct{}
	_ [unsafe.Offsetof(CopyOp{}.Err) - unsafe.Offsetof(C.cd_copy_op{}.err)]struct{}
	_ [unsafe.Offsetof(C.cd_copy_op{}.err) - unsafe.Offsetof(CopyOp{}.Err)]struct{}
	_ [unsafe.Offsetof(CopyOp{}.Ctx) - unsafe.Offsetof(C.cd_copy_op{}.ctx)]struct{}
	_ [unsafe.Offsetof(C.cd_copy_op{}.ctx) - unsafe.Offsetof(CopyOp{}.Ctx)]struct{}
	_ [NumKinds - C.CD_NUM_KINDS]struct{}
	_ [C.CD_NUM_KINDS - NumKinds]struct{}
	_ [MaxPeers - C.CD_MAX_PEERS]struct{}
	_ [C.CD_MAX_PEERS - MaxPeers]struct{}
	_ [unsafe.Offsetof(CopyOp{}.ReuseEvent) - unsafe.Offsetof(C.cd_copy_op{}.reuse_event)]struct{}
	_ [unsafe.Offsetof(C.cd_copy_op{}.reuse_event) - unsafe.Offsetof(CopyOp{}.ReuseEvent)]struct{}
	_ [CopyJoined - C.CD_COPY_JOINED]struct{}
	_ [C.CD_COPY_JOINED - CopyJoined]struct{}
	_ [unsafe.Sizeof(MemInfo{}) - C.sizeof_cd_mem_info]struct{}
	_ [C.sizeof_cd_mem_info - unsafe.Sizeof(MemInfo{})]struct{}
	_ [unsafe.Offsetof(MemInfo{}.Type) - unsafe.Offsetof(C.cd_mem_info{}._type)]struct{}
	_ [unsafe.Offsetof(C.cd_mem_info{}._type) - unsafe.Offsetof(MemInfo{}.Type)]struct{}
	_ [unsafe.Offsetof(MemInfo{}.VMMLocationID) - unsafe.Offsetof(C.cd_mem_info{}.vmm_location_id)]struct{}
	_ [unsafe.Offsetof(C.cd_mem_info{}.vmm_location_id) - unsafe.Offsetof(MemInfo{}.VMMLocationID)]struct{}
	_ [CopyLock - C.CD_COPY_LOCK]struct{}
	_ [C.CD_COPY_LOCK - CopyLock]struct{}
	_ [unsafe.Offsetof(Slot{}.lock) - unsafe.Offsetof(C.cd_slot{}.lock)]struct{}
	_ [unsafe.Offsetof(C.cd_slot{}.lock) - unsafe.Offsetof(Slot{}.lock)]struct{}
	_ [unsafe.Offsetof(Slot{}.users) - unsafe.Offsetof(C.cd_slot{}.users)]struct{}
	_ [unsafe.Offsetof(C.cd_slot{}.users) - unsafe.Offsetof(Slot{}.users)]struct{}
	_ [unsafe.Offsetof(Slot{}.Queried) - unsafe.Offsetof(C.cd_slot{}.queried)]struct{}
	_ [unsafe.Offsetof(C.cd_slot{}.queried) - unsafe.Offsetof(Slot{}.Queried)]struct{}
	_ [unsafe.Offsetof(CopyOp{}.ReuseSeq) - unsafe.Offsetof(C.cd_copy_op{}.reuse_seq)]struct{}
	_ [unsafe.Offsetof(C.cd_copy_op{}.reuse_seq) - unsafe.Offsetof(CopyOp{}.ReuseSeq)]struct{}
	_ [unsafe.Offsetof(CopyOp{}.SeenPrimary) - unsafe.Offsetof(C.cd_copy_op{}.seen_primary)]struct{}
	_ [unsafe.Offsetof(C.cd_copy_op{}.seen_primary) - unsafe.Offsetof(CopyOp{}.SeenPrimary)]struct{}
	_ [unsafe.Offsetof(Slot{}.Lane) - unsafe.Offsetof(C.cd_slot{}.lane)]struct{}
	_ [unsafe.Offsetof(C.cd_slot{}.lane) - unsafe.Offsetof(Slot{}.Lane)]struct{}
	_ [unsafe.Offsetof(CopyOp{}.Lane) - unsafe.Offsetof(C.cd_copy_op{}.lane)]struct{}
	_ [unsafe.Offsetof(C.cd_copy_op{}.lane) - unsafe.Offsetof(CopyOp{}.Lane)]struct{}
	_ [CopyStale - C.CD_COPY_STALE]struct{}
	_ [C.CD_COPY_STALE - CopyStale]struct{}
	_ [unsafe.Sizeof(Incarnation{}) - C.sizeof_cd_inc]struct{}
	_ [C.sizeof_cd_inc - unsafe.Sizeof(Incarnation{})]struct{}
	_ [unsafe.Offsetof(Incarnation{}.PrimaryDevice) - unsafe.Offsetof(C.cd_inc{}.primary_dev)]struct{}
	_ [unsafe.Offsetof(C.cd_inc{}.primary_dev) - unsafe.Offsetof(Incarnation{}.PrimaryDevice)]struct{}
	_ [unsafe.Offsetof(Slot{}.CanaryID) - unsafe.Offsetof(C.cd_slot{}.canary_id)]struct{}
	_ [unsafe.Offsetof(C.cd_slot{}.canary_id) - unsafe.Offsetof(Slot{}.CanaryID)]struct{}
	_ [unsafe.Offsetof(MemInfo{}.BufferID) - unsafe.Offsetof(C.cd_mem_info{}.buffer_id)]struct{}
	_ [unsafe.Offsetof(C.cd_mem_info{}.buffer_id) - unsafe.Offsetof(MemInfo{}.BufferID)]struct{}
	_ [CopyCPU - C.CD_COPY_CPU]struct{}
	_ [C.CD_COPY_CPU - CopyCPU]struct{}
	_ [CopyReuse - C.CD_COPY_REUSE]struct{}
	_ [C.CD_COPY_REUSE - CopyReuse]struct{}
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

func (d *driver) Error(e CallError) error {
	if e.Result == 0 {
		return nil
	}
	return &Result{Call: e.Entry.String(), Entry: e.Entry, Code: e.Result, Name: errorName(e.Result)}
}

func (d *driver) check(rc C.int, e C.cd_err) error {
	if rc == 0 {
		return nil
	}
	return d.Error(CallError{Entry: Entry(e.entry), Result: uint32(e.result)})
}

func (d *driver) DeviceCount() (int, error) {
	var n C.int32_t
	var e C.cd_err
	err := d.check(C.cd_device_count(&n, &e), e)
	return int(n), err
}

func (d *driver) DeviceName(dev int) (string, error) {
	var buf [256]C.char
	var e C.cd_err
	if err := d.check(C.cd_device_name(C.int32_t(dev), &buf[0], C.int32_t(len(buf)), &e), e); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

func (d *driver) DeviceAttribute(dev, attr int) (int, error) {
	var v C.int32_t
	var e C.cd_err
	err := d.check(C.cd_device_attr(C.int32_t(dev), C.uint32_t(attr), &v, &e), e)
	return int(v), err
}

func (d *driver) DeviceTotalMem(dev int) (uint64, error) {
	var b C.uint64_t
	var e C.cd_err
	err := d.check(C.cd_device_total_mem(C.int32_t(dev), &b, &e), e)
	return uint64(b), err
}

func (d *driver) DevicePCIBusID(dev int) (string, error) {
	var buf [64]C.char
	var e C.cd_err
	if err := d.check(C.cd_device_pci_bus_id(C.int32_t(dev), &buf[0], C.int32_t(len(buf)), &e), e); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

func (d *driver) CanAccessPeer(dev, peer int) (bool, error) {
	var can C.int32_t
	var e C.cd_err
	err := d.check(C.cd_can_access_peer(C.int32_t(dev), C.int32_t(peer), &can, &e), e)
	return can != 0, err
}

func (d *driver) CurrentContext() (Context, error) {
	var ctx C.uintptr_t
	var e C.cd_err
	err := d.check(C.cd_ctx_current(&ctx, &e), e)
	return Context(ctx), err
}

func (d *driver) ContextID(ctx Context) (uint64, error) {
	if !d.HasCtxID() {
		return uint64(ctx), nil
	}
	var id C.uint64_t
	var e C.cd_err
	err := d.check(C.cd_ctx_id(C.uintptr_t(ctx), &id, &e), e)
	return uint64(id), err
}

func (d *driver) ContextDevice(ctx Context) (int, error) {
	var dev C.int32_t
	var e C.cd_err
	err := d.check(C.cd_ctx_device(C.uintptr_t(ctx), &dev, &e), e)
	return int(dev), err
}

func (d *driver) PrimaryActive(dev int) (bool, error) {
	var active C.int32_t
	var e C.cd_err
	err := d.check(C.cd_primary_state(C.int32_t(dev), &active, &e), e)
	return active != 0, err
}

func (d *driver) PrimaryRetain(dev int) (Context, error) {
	var ctx C.uintptr_t
	var e C.cd_err
	err := d.check(C.cd_primary_retain(C.int32_t(dev), &ctx, &e), e)
	return Context(ctx), err
}

func (d *driver) PrimaryRelease(dev int) error {
	var e C.cd_err
	return d.check(C.cd_primary_release(C.int32_t(dev), &e), e)
}

func (d *driver) EnablePeer(ctx, peer Context) error {
	var e C.cd_err
	if C.cd_enable_peer(C.uintptr_t(ctx), C.uintptr_t(peer), &e) != 0 && e.result != ErrorPeerAlreadyEnable {
		return d.check(-1, e)
	}
	return nil
}

func (d *driver) StreamCreate(ctx Context) (Stream, error) {
	var s C.uintptr_t
	var e C.cd_err
	err := d.check(C.cd_stream_create(C.uintptr_t(ctx), &s, &e), e)
	return Stream(s), err
}

func (d *driver) StreamDestroy(ctx Context, s Stream) error {
	var e C.cd_err
	return d.check(C.cd_stream_destroy(C.uintptr_t(ctx), C.uintptr_t(s), &e), e)
}

func (d *driver) StreamSynchronize(ctx Context, s Stream) error {
	var e C.cd_err
	return d.check(C.cd_stream_sync(C.uintptr_t(ctx), C.uintptr_t(s), &e), e)
}

func (d *driver) EventCreate(ctx Context) (Event, error) {
	var ev C.uintptr_t
	var e C.cd_err
	err := d.check(C.cd_event_create(C.uintptr_t(ctx), &ev, &e), e)
	return Event(ev), err
}

func (d *driver) EventDestroy(ctx Context, ev Event) error {
	var e C.cd_err
	return d.check(C.cd_event_destroy(C.uintptr_t(ctx), C.uintptr_t(ev), &e), e)
}

func (d *driver) Copy(slots []Slot, primary []Context, op *CopyOp) CopyStatus {
	var sp *C.cd_slot
	if len(slots) > 0 {
		sp = (*C.cd_slot)(unsafe.Pointer(&slots[0]))
	}
	var pp *C.uintptr_t
	if len(primary) > 0 {
		pp = (*C.uintptr_t)(unsafe.Pointer(&primary[0]))
	}
	op.NDevices = int32(len(primary))
	return CopyStatus(C.cd_copy(sp, C.int32_t(len(slots)), pp, (*C.cd_copy_op)(unsafe.Pointer(op))))
}

// callError is Error, with ErrContextGone for an ended incarnation.
func (d *driver) callError(e C.cd_err) error {
	if e.entry == C.CD_ENTRY_GONE {
		return ErrContextGone
	}
	return d.Error(CallError{Entry: Entry(e.entry), Result: uint32(e.result)})
}

func (d *driver) QueryEvents(inc Incarnation, events []Event) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	var e C.cd_err
	n := C.cd_query_events((*C.cd_inc)(unsafe.Pointer(&inc)), (*C.uintptr_t)(unsafe.Pointer(&events[0])), C.int32_t(len(events)), &e)
	if e.result != 0 {
		return int(n), d.callError(e)
	}
	return int(n), nil
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
	var e C.cd_err
	var out [16]byte
	if err := d.check(C.cd_device_uuid(C.int32_t(dev), &uuid[0], &e), e); err != nil {
		return out, err
	}
	for i := range uuid {
		out[i] = byte(uuid[i])
	}
	return out, nil
}

func (d *driver) P2PAttribute(dev, peer, attr int) (int, error) {
	var v C.int32_t
	var e C.cd_err
	err := d.check(C.cd_p2p_attr(C.int32_t(dev), C.int32_t(peer), C.uint32_t(attr), &v, &e), e)
	return int(v), err
}

func (d *driver) MemQuery(ptr uint64, devices int) (MemInfo, error) {
	var info MemInfo
	var e C.cd_err
	err := d.check(C.cd_mem_query(C.uint64_t(ptr), C.int32_t(devices), (*C.cd_mem_info)(unsafe.Pointer(&info)), &e), e)
	return info, err
}

func (d *driver) MemAlloc(ctx Context, kind MemKind, bytes uint64) (uint64, error) {
	var p C.uint64_t
	var e C.cd_err
	err := d.check(C.cd_mem_alloc(C.uintptr_t(ctx), C.int32_t(kind), C.uint64_t(bytes), &p, &e), e)
	return uint64(p), err
}

func (d *driver) MemFree(ctx Context, kind MemKind, ptr uint64) error {
	var e C.cd_err
	return d.check(C.cd_mem_free(C.uintptr_t(ctx), C.int32_t(kind), C.uint64_t(ptr), &e), e)
}

func (d *driver) HostRegister(ctx Context, ptr, bytes uint64) error {
	var e C.cd_err
	return d.check(C.cd_host_register(C.uintptr_t(ctx), C.uint64_t(ptr), C.uint64_t(bytes), &e), e)
}

func (d *driver) HostUnregister(ctx Context, ptr uint64) error {
	var e C.cd_err
	return d.check(C.cd_host_unregister(C.uintptr_t(ctx), C.uint64_t(ptr), &e), e)
}
