// SPDX-License-Identifier: BSD-3-Clause

// Package cudadrv is cucopy's binding of the CUDA driver API.
//
// The driver is loaded at run time (dlopen of libcuda.so.1 or a chosen path)
// and its entry points are resolved once, through cuGetProcAddress, into a
// table of function pointers (cudadrv/entry_points.h is the one list). Go
// calls thin C functions, one per operation, so the per-copy hot path crosses
// cgo once. Interface is what the core depends on; tests substitute a Go fake.
package cudadrv

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
)

// Context, Stream and Event are driver handles (CUcontext, CUstream,
// CUevent). They are opaque integers on the Go side and never dereferenced.
type (
	Context uintptr
	Stream  uintptr
	Event   uintptr
)

// Stream kinds: the zcopy directions (first NumAsyncKinds) and the short
// stream. They mirror CD_KIND_* in cd_shim.h.
const (
	KindH2D       = 0
	KindD2H       = 1
	KindD2D       = 2 // both buffers in one context
	KindPeer      = 3 // device buffers of two different contexts
	NumAsyncKinds = 4
	KindShort     = 4
	NumKinds      = 5
	MaxPeers      = 16
)

// KindName names a stream kind for messages and statistics.
func KindName(kind int) string {
	switch kind {
	case KindH2D:
		return "h2d"
	case KindD2H:
		return "d2h"
	case KindD2D:
		return "d2d"
	case KindPeer:
		return "peer"
	case KindShort:
		return "short"
	}
	return fmt.Sprintf("kind%d", kind)
}

// Slot is one CUDA context's resources as the copy hot path needs them. It
// mirrors struct cd_slot (cd_shim.h; layout checked at compile time). The
// core owns and writes it; Copy reads it during a call. On multi-thread
// ifaces Copy matches CtxID and Ctx without a lock (the core writes them with
// SetIdentity) and reads the rest under the slot's lock word (CopyLock).
type Slot struct {
	CtxID  uint64
	Ctx    Context
	Stream [NumKinds]Stream
	Event  Event // the next free event, 0 if none
	Peer   [MaxPeers]Context
	// Drivers without cuCtxGetId: a 1-byte allocation in the context and its
	// BUFFER_ID, the context's generation (see Incarnation).
	Canary   uint64
	CanaryID uint64
	Device   int32
	NPeers   int32
	lock     int32 // see Lock
	users    int32 // short copies running on the slot's streams without the lock
	// Lane: multi-thread ifaces keep one slot per (context, lane), and an
	// endpoint's copies use its lane (CopyOp.Lane). Set with SetIdentity.
	Lane int32
	_    int32
	// Queried[k]: the entries of the context's queue k, by sequence number
	// from 1, that progress has queried: a piece never re-records their
	// events (CopyReuse), since progress may pop them.
	Queried [NumAsyncKinds]uint64
}

// Lock takes the slot's lock word, shared with cd_copy (C atomics on the
// same word): it guards the slot and its context's queues and event pool on
// multi-thread ifaces. Copy hands it over held on CopyQueued and CopyJoined.
func (s *Slot) Lock() {
	for spins := 0; !s.TryLock(); spins++ {
		if spins >= 64 {
			runtime.Gosched()
		}
	}
}

// TryLock takes the slot's lock word if it is free.
func (s *Slot) TryLock() bool {
	return atomic.LoadInt32(&s.lock) == 0 && atomic.CompareAndSwapInt32(&s.lock, 0, 1)
}

// Unlock releases the slot's lock word.
func (s *Slot) Unlock() { atomic.StoreInt32(&s.lock, 0) }

// Identity is the context and lane the slot belongs to (context 0, 0 for
// none), read as a lock-free lookup does.
func (s *Slot) Identity() (uint64, Context, int32) {
	return atomic.LoadUint64(&s.CtxID), Context(atomic.LoadUintptr((*uintptr)(&s.Ctx))), atomic.LoadInt32(&s.Lane)
}

// SetIdentity gives the slot to a context's lane, or with (0, 0, 0) hides
// it from every lookup. On multi-thread ifaces the caller holds the slot's
// lock.
func (s *Slot) SetIdentity(id uint64, ctx Context, lane int32) {
	atomic.StoreInt32(&s.Lane, lane)
	atomic.StoreUint64(&s.CtxID, id)
	atomic.StoreUintptr((*uintptr)(&s.Ctx), uintptr(ctx))
}

// AddUser and DoneUser count a short copy that runs on the slot without its
// lock (fake drivers; cd_copy does the same in C).
func (s *Slot) AddUser()  { atomic.AddInt32(&s.users, 1) }
func (s *Slot) DoneUser() { atomic.AddInt32(&s.users, -1) }

// WaitUsers waits until no short copy runs on the slot: a slot hidden from
// lookups (SetIdentity(0, 0)) then has no copy in flight outside its queues.
func (s *Slot) WaitUsers() {
	for atomic.LoadInt32(&s.users) != 0 {
		runtime.Gosched()
	}
}

// LoadPrimary and StorePrimary read and write an entry of the primary-context
// table passed to Copy: multi-thread ifaces change it while copies read it.
func LoadPrimary(primary []Context, dev int) Context {
	return Context(atomic.LoadUintptr((*uintptr)(&primary[dev])))
}

func StorePrimary(primary []Context, dev int, ctx Context) {
	atomic.StoreUintptr((*uintptr)(&primary[dev]), uintptr(ctx))
}

// Copy flags (CD_COPY_*).
const (
	CopySync     = 1 << 0 // short: copy on the short stream, then synchronize
	CopyForceCPU = 1 << 1 // managed memory without a usable context: CPU copy
	// CopyFallbackCtx: managed memory without an owning context runs on op.Ctx.
	CopyFallbackCtx = 1 << 2
	// CopyReuse: the previous piece of the operation went to (op.ReuseSlot,
	// op.ReuseKind) as queue entry op.ReuseSeq; a piece landing there too,
	// while progress has not queried that entry, re-records op.ReuseEvent
	// after itself instead of taking a new event (CopyJoined).
	CopyReuse = 1 << 3
	// CopyLock: take the slot's lock after the lookup (multi-thread ifaces);
	// it comes back held on CopyQueued and CopyJoined, released otherwise. A
	// short copy gives it up before copying and counts itself a user.
	CopyLock = 1 << 4
)

// CopyStatus is the outcome of Interface.Copy (CD_COPY_*).
type CopyStatus int32

const (
	CopyDone        CopyStatus = 0  // finished: a CPU copy or a synchronized short copy
	CopyQueued      CopyStatus = 1  // issued on op.Slot, op.Kind; op.Event recorded after it
	CopyNeedSlot    CopyStatus = 2  // context op.Ctx (op.CtxID) has no slot for op.Lane
	CopyNeedStream  CopyStatus = 3  // slot op.Slot lacks the stream of op.Kind
	CopyNeedEvent   CopyStatus = 4  // slot op.Slot has no free event
	CopyNeedPrimary CopyStatus = 5  // memory without an owning context on device op.Device (-1 unknown)
	CopyNeedPeer    CopyStatus = 6  // peer access from op.Slot to op.PeerCtx not tried yet
	CopyOutOfRange  CopyStatus = 7  // the range crosses the end of its allocation (op.Side 0 src, 1 dst)
	CopyDriverError CopyStatus = 8  // op.Err names the failed call
	CopyJoined      CopyStatus = 9  // issued on op.Slot, op.Kind; op.ReuseEvent re-recorded after it
	CopyCPU         CopyStatus = 10 // both sides are host memory: the caller copies on the CPU
	CopyStale       CopyStatus = 11 // slot op.Slot matched by handle, but its incarnation ended
)

// CallError is a failed driver call as the C side reports it (struct cd_err).
type CallError struct {
	Entry  Entry // EntryNone for none
	Result uint32
}

// CopyOp is one copy request and its outcome; mirrors struct cd_copy_op.
type CopyOp struct {
	Dst, Src, Len uint64
	Flags         uint32
	NDevices      int32 // length of the primary-context table passed to Copy
	ReuseSlot     int32
	ReuseKind     int32
	ReuseEvent    Event
	ReuseSeq      uint64 // the previous piece's queue entry, by sequence number
	Lane          int32  // the endpoint's lane (Slot.Lane)
	_             int32
	Slot          int32
	Kind          int32
	Device        int32
	Side          int32
	Ctx           Context
	CtxID         uint64
	PeerCtx       Context
	Event         Event
	SeenPrimary   Context // CopyNeedPrimary: the primary context found ended, 0 if none was set
	Err           CallError
}

// Device attributes the tools read (CUdevice_attribute).
const (
	AttrMultiprocessorCount  = 16
	AttrPCIBusID             = 33
	AttrUnifiedAddressing    = 41
	AttrComputeCapabilityMaj = 75
	AttrComputeCapabilityMin = 76
	AttrManagedMemory        = 83
)

// MemInfo is what the driver says of one address (struct cd_mem_info).
type MemInfo struct {
	Start, Size     uint64  // the allocation, 0 if unknown
	Ctx             Context // owning context, 0 if none
	Pool            uintptr // memory pool, 0 if none
	CtxID           uint64  // cuCtxGetId of Ctx, 0 without either
	AccessMask      uint64  // VMM and pool memory: bit d, device d has access
	BufferID        uint64  // CU_POINTER_ATTRIBUTE_BUFFER_ID, 0 if unknown
	Type            uint32  // MemoryType*, 0 when CUDA does not know the address
	Managed         uint32
	Ordinal         int32 // DEVICE_ORDINAL
	Preferred       int32 // managed: preferred location (device, DeviceCPU, DeviceInvalid)
	VMM             int32 // 1: cuMemCreate + cuMemMap memory
	VMMLocationType int32 // MemLocation*
	VMMLocationID   int32
	_               int32
}

// CUmemorytype values and the managed-memory location sentinels.
const (
	MemoryTypeHost    = 1
	MemoryTypeDevice  = 2
	DeviceCPU         = -1
	DeviceInvalid     = -2
	MemLocationDevice = 1
)

// MemKind is what MemAlloc allocates (CD_MEM_*).
type MemKind int32

const (
	MemDevice  MemKind = 0
	MemManaged MemKind = 1
	MemHost    MemKind = 2 // pinned, portable
)

// P2P attributes (CUdevice_P2PAttribute).
const (
	P2PPerformanceRank = 1
	P2PAccessSupported = 2
	P2PNativeAtomics   = 3
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

// ErrContextGone reports an incarnation that ended: nothing was called on it.
var ErrContextGone = errors.New("the CUDA context was reset or the driver deinitialized")

// Capability is an optional driver entry point and whether the loaded driver has it.
type Capability struct {
	Name    string
	Present bool
}

// Interface is the driver as the core uses it. Methods that need a context
// take it explicitly; none changes the calling thread's current context.
type Interface interface {
	// Path is the library that was loaded; Version its CUDA version (e.g. 13000).
	Path() string
	Version() int
	Capabilities() []Capability
	// HasCtxID says whether cuCtxGetId exists (CUDA >= 12); without it,
	// contexts are keyed by handle.
	HasCtxID() bool
	// Error turns a CallError from Copy, QueryEvents or Arm into a *Result.
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
	EventCreate(ctx Context) (Event, error)
	EventDestroy(ctx Context, e Event) error

	// Copy classifies both buffers, picks the context, and issues the copy
	// when everything it needs is in slots; otherwise it says what is missing
	// and issues nothing. primary holds the retained primary context of each
	// device (0 if none), len(primary) == op.NDevices.
	Copy(slots []Slot, primary []Context, op *CopyOp) CopyStatus
	// QueryEvents queries events in order (with the context current) and
	// returns how many leading ones completed; err is set when a query
	// failed, ErrContextGone when the incarnation ended (nothing queried).
	QueryEvents(inc Incarnation, events []Event) (done int, err error)
	// Arm returns busy when head already completed; otherwise it makes the
	// driver write to fd once stream reaches its current end.
	// ErrContextGone as for QueryEvents.
	Arm(inc Incarnation, stream Stream, head Event, fd int) (busy bool, err error)
	// Gone reports whether the incarnation ended (see Incarnation).
	Gone(inc Incarnation) bool
}
