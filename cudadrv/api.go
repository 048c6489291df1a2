// SPDX-License-Identifier: BSD-3-Clause

// Package cudadrv is cucopy's binding of the CUDA driver API.
//
// The driver is loaded at run time (dlopen of libcuda.so.1 or a chosen path)
// and its entry points are resolved once, through cuGetProcAddress, into a
// table of function pointers (cudadrv/entry_points.h is the one list). Go
// calls thin C functions, one per operation, so the per-copy hot path crosses
// cgo once. Interface is what the core depends on; tests substitute a Go fake
// (cudadrv/fakedrv).
//
// Files: api.go the Interface; copy.go the copy protocol (read it before
// Copy); slot.go the per-context slot the copy path reads; results.go
// CUresults, entry points and Result; memory.go and device.go the memory
// and device values; driver.go the cgo implementation, layout.go its
// compile-time agreement with the C structs. C: cd_shim.h declares what Go
// calls; cd_load.c loads the driver; cd_copy.c is the copy hot path,
// cd_progress.c progress and arm, cd_cold.c and cd_mem.c the cold calls;
// stage.go and cd_stage.c the step of pageable staging (core/stage.go);
// nvml.go and cd_nvml.c the NVLinks of the performance model, from NVML
// loaded with dlopen (not the driver: no entry point of the table).
package cudadrv

/*
#include "cd_shim.h"
*/
import "C"

import "errors"

// Context, Stream and Event are driver handles (CUcontext, CUstream,
// CUevent). They are opaque integers on the Go side and never dereferenced.
type (
	Context uintptr
	Stream  uintptr
	Event   uintptr
)

// Incarnation is one life of a CUDA context (struct cd_inc). For a primary
// context (PrimaryDevice >= 0) the driver layer checks, before any call on
// it, that the device's primary context is still active under ID: a reset
// ends an incarnation, and nothing is then called on its streams or events.
// A context the program owns (PrimaryDevice -1) is not checked: the program
// says it goes away with cucopy_iface_release_context. Drivers without
// cuCtxGetId key contexts by handle; there the generation is the canary's
// BUFFER_ID, checked for every context.
type Incarnation struct {
	Ctx           Context
	ID            uint64
	Canary        uint64
	CanaryID      uint64
	PrimaryDevice int32
	_             int32
}

// QueueQuery is one queue's segment for QuerySlots (struct cd_queue_query):
// its leading events, oldest first, in a ring from NewEventRing (C memory,
// which the C side may read during the call). Every entry of a queue is
// last recorded after every earlier one's (docs/design.md), except that the
// newest entry of a segment may be a detached piece (QueryInOrder): stream
// order then lets a query of the segment's newest event answer for all of
// it.
type QueueQuery struct {
	Events *Event
	N      int32
	Flags  int32 // QueryInOrder
	Done   int32 // out
	_      int32
	Err    CallError // out
}

// QueryInOrder: the segment's newest event may have been recorded before
// an earlier entry's; query in order only.
const QueryInOrder = C.CD_QUERY_IN_ORDER

// SlotQuery is one slot's queues for QuerySlots (struct cd_slot_query).
type SlotQuery struct {
	Inc   Incarnation
	Next  int32 // the next slot's index, -1 after the last
	Gone  int32 // out
	Queue [NumAsyncKinds]QueueQuery
}

// ErrContextGone reports an incarnation that ended: nothing was called on it.
var ErrContextGone = errors.New("the CUDA context was reset or the driver deinitialized")

// Capability is an optional driver entry point and whether the loaded driver has it.
type Capability struct {
	Name    string
	Present bool
}

// Interface is the driver as the core uses it. Methods that need a context
// take it explicitly; none changes the calling thread's current context.
// Errors are *Result (results.go) unless said otherwise.
type Interface interface {
	// Path is the library that was loaded; Version its CUDA version (e.g. 13000).
	Path() string
	Version() int
	Capabilities() []Capability
	// HasCtxID says whether cuCtxGetId exists (CUDA >= 12); without it,
	// contexts are keyed by handle.
	HasCtxID() bool
	// Error turns a CallError from Copy, QuerySlots or Arm into a *Result.
	Error(e CallError) error

	DeviceCount() (int, error)
	DeviceName(dev int) (string, error)
	DeviceAttribute(dev, attr int) (int, error)
	DeviceTotalMem(dev int) (uint64, error)
	DevicePCIBusID(dev int) (string, error)
	CanAccessPeer(dev, peer int) (bool, error)
	DeviceUUID(dev int) ([16]byte, error)
	P2PAttribute(dev, peer, attr int) (int, error)

	// MemQuery says what ptr is; devices bounds the access query.
	MemQuery(ptr uint64, devices int) (MemInfo, error)
	// MemAlloc and MemFree run in ctx (made current for the call).
	MemAlloc(ctx Context, kind MemKind, bytes uint64) (uint64, error)
	MemFree(ctx Context, kind MemKind, ptr uint64) error
	// HostRegister pins [ptr, ptr+bytes) for every context (PORTABLE).
	HostRegister(ctx Context, ptr, bytes uint64) error
	HostUnregister(ctx Context, ptr uint64) error

	CurrentContext() (Context, error)
	ContextID(ctx Context) (uint64, error)
	ContextDevice(ctx Context) (int, error)
	PrimaryActive(dev int) (bool, error)
	PrimaryRetain(dev int) (Context, error)
	PrimaryRelease(dev int) error
	// EnablePeer enables access from ctx to peer's memory; "already
	// enabled" counts as success.
	EnablePeer(ctx, peer Context) error

	StreamCreate(ctx Context) (Stream, error)
	StreamDestroy(ctx Context, s Stream) error
	StreamSynchronize(ctx Context, s Stream) error
	// StreamWaitEvent makes the work enqueued on s from now on wait for
	// the work ev's last record captured (ev may be of another context or
	// device); ctx is s's context.
	StreamWaitEvent(ctx Context, s Stream, ev Event) error
	EventCreate(ctx Context) (Event, error)
	EventDestroy(ctx Context, e Event) error

	// Copy runs one piece of a copy, and the run of later pieces in more
	// that can go with it, as the copy protocol says (copy.go): it issues
	// the copy when slots hold everything it needs, otherwise it says what
	// is missing and issues nothing. primary holds the retained primary
	// context of each device (0 if none); mems the descriptions that op's
	// and more's SrcMem and DstMem index (MemDesc).
	Copy(slots []Slot, primary []Context, op *CopyOp, more []Piece, mems []MemDesc) CopyStatus
	// Describe classifies ptr once, as Copy's step 1 would, for a memory
	// handle (PrimaryDevice is left -1: the caller knows the primary
	// contexts).
	Describe(ptr uint64) (MemDesc, error)
	// QuerySlots answers, in one call, the queries of one progress call:
	// for each slot of the list slots[first], slots[slots[first].Next], ...
	// (-1 ends it), whether its incarnation ended (Gone: nothing queried),
	// else per queue how many leading events of its segment completed
	// (Done) and the query that failed (Err, also when the context could
	// not be entered); every query runs with the slot's context current.
	// The slots of one context should follow each other in the list: the
	// context is entered once for them. The error is the failed restore of
	// the caller's context at the end (the answers stand).
	QuerySlots(slots []SlotQuery, first int32) error
	// Arm returns busy when head already completed; otherwise it makes the
	// driver write to fd once stream reaches its current end.
	// ErrContextGone when the incarnation ended (nothing called).
	Arm(inc Incarnation, stream Stream, head Event, fd int) (busy bool, err error)
	// Gone reports whether the incarnation ended (see Incarnation).
	Gone(inc Incarnation) bool

	// StageStep is one step of a copy the core stages through its pinned
	// bounce buffers (CopyNeedStage; core/stage.go), in ctx (pushed if not
	// current): with StageWaitBefore, synchronize stream first; then
	// enqueue the contiguous pieces on it (several: one batch where the
	// driver has it and StageLoop is not set, device the ordinal of their device-side memory and
	// kind KindH2D or KindD2H for its location hints); then with
	// StageWaitAfter synchronize it again. An enqueue that fails
	// synchronizes the stream: nothing stays in flight on an error but
	// behind a failed wait.
	StageStep(ctx Context, stream Stream, flags uint32, device, kind int32, pieces []Piece) error
}

// StageStep's flags.
const (
	StageWaitBefore = C.CD_STAGE_WAIT_BEFORE
	StageWaitAfter  = C.CD_STAGE_WAIT_AFTER
	StageLoop       = C.CD_STAGE_LOOP // one cuMemcpyAsync per piece, never a batch
)
