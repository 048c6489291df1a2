// SPDX-License-Identifier: BSD-3-Clause

// Package fakedrv is a Go fake of cudadrv.Interface for the core's unit
// tests: N devices with simulated memory backed by Go byte slices, primary
// and user contexts with ids, streams whose work runs only when the test says
// so (Run, Step), fault injection, accounting and strictness checks.
//
// Copy follows cudadrv/cd_ops.c: the same classification of both buffers,
// the same choice of context, the same NEED_* protocol. Addresses are fake:
// every buffer a test copies must come from one of the Alloc* helpers.
package fakedrv

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cucopy/cucopy/cudadrv"
)

// CUresult values the fake returns.
const (
	ErrInvalidValue            = 1
	ErrInvalidContext          = 201
	ErrInvalidHandle           = 400
	ErrIllegalAddress          = 700
	ErrContextDestroyed        = 709
	memTypeHost                = 1
	memTypeDevice              = 2
	allocAlign                 = 1 << 12
	allocGap                   = 1 << 16 // unmapped gap after every allocation
	deviceBase          uint64 = 1 << 44
)

var errNames = map[uint32]string{
	1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY", 4: "CUDA_ERROR_DEINITIALIZED",
	201: "CUDA_ERROR_INVALID_CONTEXT", 400: "CUDA_ERROR_INVALID_HANDLE", 600: "CUDA_ERROR_NOT_READY",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS", 709: "CUDA_ERROR_CONTEXT_IS_DESTROYED",
}

// Entry points named in CallError.Entry.
const (
	entryPointerAttrs = iota
	entryMemcpyAsync
	entryEventRecord
	entryEventQuery
	entryLaunchHostFunc
)

var entryNames = []string{"cuPointerGetAttributes", "cuMemcpyAsync", "cuEventRecord", "cuEventQuery", "cuLaunchHostFunc"}

type alloc struct {
	base    uint64
	data    []byte
	typ     uint32 // 0 pageable, memTypeHost, memTypeDevice
	ctx     cudadrv.Context
	dev     int
	managed bool
	// preferred is managed memory's preferred location (cudadrv.DeviceCPU,
	// a device, or cudadrv.DeviceInvalid).
	preferred int32
	id        uint64 // BUFFER_ID: unique per allocation
	ctxGen    uint64 // the owning context's incarnation when allocated (memory dies with it)
}

type context struct {
	handle  cudadrv.Context
	id      uint64
	dev     int
	primary bool
	alive   bool // user: not destroyed; primary: active
	retains int  // primary only
	poison  uint32
}

// owner identifies a context incarnation: a reset primary keeps its handle
// but gets a new id.
type owner struct {
	ctx cudadrv.Context
	id  uint64
}

type work struct {
	stream cudadrv.Stream
	run    func()
	events []cudadrv.Event
	fds    []int
}

type event struct {
	owner
	item *work // the work item the last record waits for; nil when complete
}

type fault struct {
	nth  int
	code uint32
}

// Driver is the fake. All methods are safe for concurrent use.
type Driver struct {
	mu          sync.Mutex
	devices     int
	hasCtxID    bool
	allocs      []*alloc
	next        map[uint64]uint64 // range base -> next free address
	ctxs        map[cudadrv.Context]*context
	primary     []cudadrv.Context
	nextID      uint64
	nextHandle  uintptr
	current     cudadrv.Context
	streams     map[cudadrv.Stream]owner
	events      map[cudadrv.Event]*event
	pending     []*work // issued, not yet executed, oldest first
	peers       map[[2]cudadrv.Context]bool
	calls       map[string]int
	faults      map[string][]fault
	onCopy      func() // OnCopy
	activations int
	violations  []string
	nextBuffer  uint64 // BUFFER_ID of the last allocation
}

var _ cudadrv.Interface = (*Driver)(nil)

// New makes a fake with the given number of devices, all primary contexts inactive.
func New(devices int) *Driver {
	d := &Driver{
		devices: devices, hasCtxID: true, next: map[uint64]uint64{},
		ctxs: map[cudadrv.Context]*context{}, streams: map[cudadrv.Stream]owner{},
		events: map[cudadrv.Event]*event{}, peers: map[[2]cudadrv.Context]bool{},
		calls: map[string]int{}, faults: map[string][]fault{}, nextHandle: 0x1000,
	}
	for dev := 0; dev < devices; dev++ {
		c := &context{handle: d.handle(), dev: dev, primary: true}
		d.ctxs[c.handle] = c
		d.primary = append(d.primary, c.handle)
	}
	return d
}

func (d *Driver) handle() cudadrv.Context { d.nextHandle += 0x10; return cudadrv.Context(d.nextHandle) }

func (d *Driver) newID() uint64 { d.nextID++; return d.nextID }

// ---- test helpers: contexts ----

// ActivatePrimary is the program retaining dev's primary context (activating
// it when inactive). It does not count as an activation by the library.
func (d *Driver) ActivatePrimary(dev int) cudadrv.Context {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.retain(dev, false)
}

func (d *Driver) retain(dev int, byLibrary bool) cudadrv.Context {
	c := d.ctxs[d.primary[dev]]
	if !c.alive {
		c.alive, c.id = true, d.newID()
		if byLibrary {
			d.activations++
		}
	}
	c.retains++
	return c.handle
}

// ReleasePrimary is the program releasing one retain; the last one deactivates the context.
func (d *Driver) ReleasePrimary(dev int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.release(dev)
}

func (d *Driver) release(dev int) error {
	c := d.ctxs[d.primary[dev]]
	if c.retains == 0 {
		return d.violate(ErrInvalidContext, "PrimaryRelease(%d) without a retain", dev)
	}
	if c.retains--; c.retains == 0 {
		c.alive, c.poison = false, 0
	}
	return nil
}

// ResetPrimary is cuDevicePrimaryCtxReset: the context loses every resource and
// becomes inactive; retains stay, the next activation gives it a new id.
func (d *Driver) ResetPrimary(dev int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.ctxs[d.primary[dev]]
	c.alive, c.poison, c.id = false, 0, 0
}

// PrimaryRetains is the retain count of dev's primary context.
func (d *Driver) PrimaryRetains(dev int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ctxs[d.primary[dev]].retains
}

// Activations counts primary contexts activated through the Interface (PrimaryRetain).
func (d *Driver) Activations() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.activations
}

// Primary is the handle of dev's primary context (active or not).
func (d *Driver) Primary(dev int) cudadrv.Context { return d.primary[dev] }

// CreateContext is cuCtxCreate on dev.
func (d *Driver) CreateContext(dev int) cudadrv.Context {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := &context{handle: d.handle(), id: d.newID(), dev: dev, alive: true}
	d.ctxs[c.handle] = c
	return c.handle
}

// DestroyContext is cuCtxDestroy: its streams and events die with it.
func (d *Driver) DestroyContext(ctx cudadrv.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ctxs[ctx].alive = false
}

// ID is the current id of a context.
func (d *Driver) ID(ctx cudadrv.Context) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ctxs[ctx].id
}

// SetCurrent sets the context CurrentContext reports (one for the whole fake).
func (d *Driver) SetCurrent(ctx cudadrv.Context) { d.mu.Lock(); d.current = ctx; d.mu.Unlock() }

// SetHasCtxID simulates a driver without cuCtxGetId (contexts keyed by handle).
func (d *Driver) SetHasCtxID(has bool) { d.mu.Lock(); d.hasCtxID = has; d.mu.Unlock() }

// Poison gives ctx a sticky error: its copies, queries and arms fail with code.
func (d *Driver) Poison(ctx cudadrv.Context, code uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ctxs[ctx].poison = code
}

// ---- test helpers: memory ----

func (d *Driver) alloc(rangeBase uint64, n int, a *alloc) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	addr := d.next[rangeBase]
	if addr == 0 {
		addr = rangeBase
	}
	size := (uint64(max(n, 1)) + allocAlign - 1) &^ (allocAlign - 1)
	d.next[rangeBase] = addr + size + allocGap
	a.base, a.data = addr, make([]byte, n)
	d.nextBuffer++
	a.id = d.nextBuffer
	d.allocs = append(d.allocs, a)
	return addr
}

func devRange(dev int, sub uint64) uint64 { return deviceBase*uint64(dev+1) + sub<<40 }

// AllocDevice allocates device memory owned by dev's primary context, which
// it activates the way the CUDA runtime's cudaMalloc does (a program retain).
func (d *Driver) AllocDevice(dev, n int) uint64 {
	ctx := d.ActivatePrimary(dev)
	return d.alloc(devRange(dev, 0), n, &alloc{typ: memTypeDevice, ctx: ctx, dev: dev})
}

// AllocCtx allocates device memory owned by ctx (e.g. a CreateContext context).
func (d *Driver) AllocCtx(ctx cudadrv.Context, n int) uint64 {
	d.mu.Lock()
	dev := d.ctxs[ctx].dev
	d.mu.Unlock()
	return d.alloc(devRange(dev, 1), n, &alloc{typ: memTypeDevice, ctx: ctx, dev: dev})
}

// AllocVMM allocates device memory of dev with no owning context (VMM, pools).
func (d *Driver) AllocVMM(dev, n int) uint64 {
	return d.alloc(devRange(dev, 2), n, &alloc{typ: memTypeDevice, dev: dev})
}

// AllocManaged allocates managed memory owned by dev's primary context (activated).
func (d *Driver) AllocManaged(dev, n int) uint64 {
	ctx := d.ActivatePrimary(dev)
	return d.alloc(devRange(dev, 3), n, &alloc{typ: memTypeDevice, ctx: ctx, dev: dev, managed: true, preferred: cudadrv.DeviceInvalid})
}

// AllocManagedUnowned allocates managed memory with neither context nor device.
func (d *Driver) AllocManagedUnowned(n int) uint64 {
	return d.alloc(3<<40, n, &alloc{typ: memTypeDevice, dev: -1, managed: true, preferred: cudadrv.DeviceInvalid})
}

// AllocHost allocates host memory CUDA knows (pinned, or registered when !pinned).
func (d *Driver) AllocHost(n int, pinned bool) uint64 {
	base := uint64(1 << 40)
	if !pinned {
		base += 1 << 36
	}
	return d.alloc(base, n, &alloc{typ: memTypeHost, dev: -1})
}

// Pageable allocates plain host memory the driver does not know.
func (d *Driver) Pageable(n int) uint64 {
	return d.alloc(2<<40, n, &alloc{dev: -1})
}

func (d *Driver) find(addr uint64) *alloc {
	for _, a := range d.allocs { // an address in the gap after an allocation belongs to it
		if addr >= a.base && addr < a.base+uint64(len(a.data))+allocGap {
			return a
		}
	}
	return nil
}

// span is the backing of [addr, addr+n), nil when it leaves its allocation.
func (d *Driver) span(addr uint64, n uint64) []byte {
	a := d.find(addr)
	if a == nil || addr-a.base > uint64(len(a.data)) || n > uint64(len(a.data))-(addr-a.base) {
		return nil
	}
	return a.data[addr-a.base : addr-a.base+n]
}

// Bytes is the backing memory of [addr, addr+n): fill it, check it. It
// panics when the range is not inside one allocation.
func (d *Driver) Bytes(addr uint64, n int) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.span(addr, uint64(n))
	if b == nil {
		panic(fmt.Sprintf("fakedrv: [0x%x, +%d) is not allocated", addr, n))
	}
	return b
}

// ---- test helpers: execution, faults, accounting ----

// Run executes all queued work; it returns how many items ran.
func (d *Driver) Run() int { return d.Step(-1) }

// Step executes the n oldest queued work items of all streams (all when n < 0).
func (d *Driver) Step(n int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n < 0 || n > len(d.pending) {
		n = len(d.pending)
	}
	items := d.pending[:n:n]
	d.pending = d.pending[n:]
	for _, w := range items {
		d.execute(w)
	}
	return n
}

// Pending is the number of queued work items.
func (d *Driver) Pending() int { d.mu.Lock(); defer d.mu.Unlock(); return len(d.pending) }

func (d *Driver) execute(w *work) {
	w.run()
	for _, ev := range w.events {
		if e := d.events[ev]; e != nil && e.item == w {
			e.item = nil
		}
	}
	var one = [8]byte{1}
	for _, fd := range w.fds {
		_, _ = unix.Write(fd, one[:]) // EAGAIN: already readable
	}
}

// syncStream executes the queued work of one stream.
func (d *Driver) syncStream(s cudadrv.Stream) {
	kept := d.pending[:0]
	var run []*work
	for _, w := range d.pending {
		if w.stream == s {
			run = append(run, w)
		} else {
			kept = append(kept, w)
		}
	}
	d.pending = kept
	for _, w := range run {
		d.execute(w)
	}
}

func (d *Driver) last(s cudadrv.Stream) *work {
	for i := len(d.pending) - 1; i >= 0; i-- {
		if d.pending[i].stream == s {
			return d.pending[i]
		}
	}
	return nil
}

// OnCopy makes every later Copy call run f first, outside the driver's
// lock (nil: none): a test interleaves progress or a release with the
// pieces of a copy being issued.
func (d *Driver) OnCopy(f func()) { d.mu.Lock(); d.onCopy = f; d.mu.Unlock() }

// Fail makes the nth next call of method (1 = the next one) fail with code.
// "cuCtxPopCurrent" fails the pop at the end of a QueryEvents call: the
// leading completed events are still counted, and the error is returned too.
// For Copy only calls that get as far as issuing the copy count (the failure
// is cuMemcpyAsync's), so NEED_* round trips do not shift nth.
func (d *Driver) Fail(method string, nth int, code uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults[method] = append(d.faults[method], fault{nth, code})
}

// fault counts a call of method toward pending faults; non-zero when it fails.
func (d *Driver) fault(method string) uint32 {
	var code uint32
	fs := d.faults[method][:0]
	for _, f := range d.faults[method] {
		if f.nth--; f.nth == 0 {
			code = f.code
		} else {
			fs = append(fs, f)
		}
	}
	d.faults[method] = fs
	return code
}

func (d *Driver) enter(method string) uint32 {
	d.calls[method]++
	if method == "Copy" {
		return 0
	}
	return d.fault(method)
}

func result(call string, code uint32) error {
	return &cudadrv.Result{Call: call, Code: code, Name: errName(code)}
}

func errName(code uint32) string {
	if n, ok := errNames[code]; ok {
		return n
	}
	return fmt.Sprintf("CUresult %d", code)
}

func (d *Driver) violate(code uint32, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	d.violations = append(d.violations, msg)
	return result("fakedrv", code)
}

// Calls is how many times method was called.
func (d *Driver) Calls(method string) int { d.mu.Lock(); defer d.mu.Unlock(); return d.calls[method] }

// Violations lists uses the real driver would reject or leave undefined.
func (d *Driver) Violations() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.violations...)
}

// LiveStreams and LiveEvents count created, not destroyed handles.
func (d *Driver) LiveStreams() int { d.mu.Lock(); defer d.mu.Unlock(); return len(d.streams) }
func (d *Driver) LiveEvents() int  { d.mu.Lock(); defer d.mu.Unlock(); return len(d.events) }

// ---- cudadrv.Interface ----

func (d *Driver) Path() string                       { return "fakedrv" }
func (d *Driver) Version() int                       { return 13000 }
func (d *Driver) Capabilities() []cudadrv.Capability { return nil }
func (d *Driver) HasCtxID() bool                     { d.mu.Lock(); defer d.mu.Unlock(); return d.hasCtxID }

func (d *Driver) Error(e cudadrv.CallError) error {
	if e.Result == 0 {
		return nil
	}
	call := "driver call"
	if e.Entry >= 0 && int(e.Entry) < len(entryNames) {
		call = entryNames[e.Entry]
	}
	return result(call, e.Result)
}

func (d *Driver) devCall(method string, dev int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if code := d.enter(method); code != 0 {
		return result(method, code)
	}
	if dev < 0 || dev >= d.devices {
		return result(method, 101) // CUDA_ERROR_INVALID_DEVICE
	}
	return nil
}

func (d *Driver) DeviceCount() (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if code := d.enter("DeviceCount"); code != 0 {
		return 0, result("cuDeviceGetCount", code)
	}
	return d.devices, nil
}

func (d *Driver) DeviceName(dev int) (string, error) {
	return fmt.Sprintf("Fake GPU %d", dev), d.devCall("DeviceName", dev)
}
func (d *Driver) DeviceAttribute(dev, attr int) (int, error) {
	return 1, d.devCall("DeviceAttribute", dev)
}
func (d *Driver) DeviceTotalMem(dev int) (uint64, error) {
	return 80 << 30, d.devCall("DeviceTotalMem", dev)
}
func (d *Driver) DevicePCIBusID(dev int) (string, error) {
	return fmt.Sprintf("0000:%02x:00.0", dev+1), d.devCall("DevicePCIBusID", dev)
}
func (d *Driver) CanAccessPeer(dev, peer int) (bool, error) {
	return dev != peer, d.devCall("CanAccessPeer", dev)
}

func (d *Driver) CurrentContext() (cudadrv.Context, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if code := d.enter("CurrentContext"); code != 0 {
		return 0, result("cuCtxGetCurrent", code)
	}
	return d.current, nil
}

// live returns ctx when it is alive; otherwise it records a violation.
func (d *Driver) live(method string, ctx cudadrv.Context) (*context, error) {
	if code := d.enter(method); code != 0 {
		return nil, result(method, code)
	}
	c := d.ctxs[ctx]
	if c == nil || !c.alive {
		return nil, d.violate(ErrContextDestroyed, "%s on dead or unknown context 0x%x", method, ctx)
	}
	return c, nil
}

func (d *Driver) ContextID(ctx cudadrv.Context) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.live("ContextID", ctx)
	if err != nil {
		return 0, err
	}
	return c.id, nil
}

func (d *Driver) ContextDevice(ctx cudadrv.Context) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.live("ContextDevice", ctx)
	if err != nil {
		return -1, err
	}
	return c.dev, nil
}

func (d *Driver) PrimaryActive(dev int) (bool, error) {
	if err := d.devCall("PrimaryActive", dev); err != nil {
		return false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ctxs[d.primary[dev]].alive, nil
}

func (d *Driver) PrimaryRetain(dev int) (cudadrv.Context, error) {
	if err := d.devCall("PrimaryRetain", dev); err != nil {
		return 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.retain(dev, true), nil
}

func (d *Driver) PrimaryRelease(dev int) error {
	if err := d.devCall("PrimaryRelease", dev); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.release(dev)
}

func (d *Driver) EnablePeer(ctx, peer cudadrv.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.live("EnablePeer", ctx); err != nil {
		return err
	}
	d.peers[[2]cudadrv.Context{ctx, peer}] = true
	return nil
}

// PeerEnabled says whether EnablePeer(ctx, peer) succeeded.
func (d *Driver) PeerEnabled(ctx, peer cudadrv.Context) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peers[[2]cudadrv.Context{ctx, peer}]
}

// owned checks that a handle's context is the live incarnation of ctx.
func (d *Driver) owned(method string, ctx cudadrv.Context, o owner, ok bool, what string, h uintptr) error {
	if !ok {
		return d.violate(ErrInvalidHandle, "%s: unknown %s 0x%x", method, what, h)
	}
	c := d.ctxs[o.ctx]
	if !c.alive || c.id != o.id {
		return d.violate(ErrContextDestroyed, "%s: %s 0x%x of a released/destroyed context (id %d)", method, what, h, o.id)
	}
	if o.ctx != ctx {
		return d.violate(ErrInvalidHandle, "%s: %s 0x%x used under context 0x%x, it belongs to 0x%x", method, what, h, ctx, o.ctx)
	}
	return nil
}

func (d *Driver) StreamCreate(ctx cudadrv.Context) (cudadrv.Stream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.live("StreamCreate", ctx)
	if err != nil {
		return 0, err
	}
	s := cudadrv.Stream(d.handle())
	d.streams[s] = owner{ctx, c.id}
	return s, nil
}

func (d *Driver) streamCall(method string, ctx cudadrv.Context, s cudadrv.Stream) error {
	if code := d.enter(method); code != 0 {
		return result(method, code)
	}
	o, ok := d.streams[s]
	return d.owned(method, ctx, o, ok, "stream", uintptr(s))
}

func (d *Driver) StreamDestroy(ctx cudadrv.Context, s cudadrv.Stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.streamCall("StreamDestroy", ctx, s); err != nil {
		return err
	}
	d.syncStream(s) // the driver lets queued work finish
	delete(d.streams, s)
	return nil
}

func (d *Driver) StreamSynchronize(ctx cudadrv.Context, s cudadrv.Stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.streamCall("StreamSynchronize", ctx, s); err != nil {
		return err
	}
	d.syncStream(s)
	return nil
}

func (d *Driver) EventCreate(ctx cudadrv.Context) (cudadrv.Event, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.live("EventCreate", ctx)
	if err != nil {
		return 0, err
	}
	e := cudadrv.Event(d.handle())
	d.events[e] = &event{owner: owner{ctx, c.id}}
	return e, nil
}

func (d *Driver) eventCall(method string, ctx cudadrv.Context, ev cudadrv.Event) (*event, error) {
	e, ok := d.events[ev]
	var o owner
	if ok {
		o = e.owner
	}
	return e, d.owned(method, ctx, o, ok, "event", uintptr(ev))
}

func (d *Driver) EventDestroy(ctx cudadrv.Context, ev cudadrv.Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if code := d.enter("EventDestroy"); code != 0 {
		return result("EventDestroy", code)
	}
	if _, err := d.eventCall("EventDestroy", ctx, ev); err != nil {
		return err
	}
	delete(d.events, ev)
	return nil
}

// mem is cd_mem: what one pointer is.
type mem struct {
	typ     uint32
	ctx     cudadrv.Context
	ordinal int
	managed bool
	start   uint64
	size    uint64
}

func (m *mem) host() bool { return !m.managed && m.typ != memTypeDevice }

func (m *mem) crossesEnd(ptr, n uint64) bool {
	if m.host() || m.size == 0 || ptr < m.start {
		return false
	}
	return n > m.size-(ptr-m.start)
}

func (d *Driver) classify(ptr uint64) (mem, bool) {
	a := d.find(ptr)
	if a == nil {
		return mem{ordinal: -1}, false
	}
	m := mem{typ: a.typ, ctx: a.ctx, ordinal: a.dev, managed: a.managed}
	if a.typ != 0 {
		m.start, m.size = a.base, uint64(len(a.data))
	}
	return m, true
}

// execCtx is cd_exec_ctx.
func (d *Driver) execCtx(m *mem, primary []cudadrv.Context, op *cudadrv.CopyOp, status *cudadrv.CopyStatus) cudadrv.Context {
	if m.ctx != 0 {
		return m.ctx
	}
	if m.ordinal >= 0 && m.ordinal < int(op.NDevices) {
		if p := cudadrv.LoadPrimary(primary, m.ordinal); p != 0 {
			return p
		}
	}
	if m.managed && op.Flags&cudadrv.CopyFallbackCtx != 0 {
		return op.Ctx
	}
	if m.managed && d.current != 0 {
		return d.current
	}
	op.Device = int32(m.ordinal)
	if m.managed {
		op.Device = -1
	}
	op.SeenPrimary = 0
	*status = cudadrv.CopyNeedPrimary
	return 0
}

func driverErr(op *cudadrv.CopyOp, entry int32, code uint32) cudadrv.CopyStatus {
	op.Err = cudadrv.CallError{Entry: entry, Result: code}
	return cudadrv.CopyDriverError
}

// Copy is cd_copy.
func (d *Driver) Copy(slots []cudadrv.Slot, primary []cudadrv.Context, op *cudadrv.CopyOp) cudadrv.CopyStatus {
	d.mu.Lock()
	if f := d.onCopy; f != nil {
		d.mu.Unlock()
		f()
		d.mu.Lock()
	}
	defer d.mu.Unlock()
	locked := false
	st := d.copy(slots, primary, op, &locked)
	if locked && st != cudadrv.CopyQueued && st != cudadrv.CopyJoined {
		slots[op.Slot].Unlock()
	}
	return st
}

// copy is Copy under d.mu; *locked says it took the slot's lock (CopyLock).
func (d *Driver) copy(slots []cudadrv.Slot, primary []cudadrv.Context, op *cudadrv.CopyOp, locked *bool) cudadrv.CopyStatus {
	d.enter("Copy")
	op.NDevices = int32(len(primary))
	op.Err = cudadrv.CallError{Entry: -1}
	op.Slot = -1
	src, ok1 := d.classify(op.Src)
	dst, ok2 := d.classify(op.Dst)
	if !ok1 || !ok2 {
		return driverErr(op, entryPointerAttrs, ErrInvalidValue) // an address the fake never handed out
	}
	if src.crossesEnd(op.Src, op.Len) {
		op.Side = 0
		return cudadrv.CopyOutOfRange
	}
	if dst.crossesEnd(op.Dst, op.Len) {
		op.Side = 1
		return cudadrv.CopyOutOfRange
	}
	from, to := d.span(op.Src, op.Len), d.span(op.Dst, op.Len)
	if from == nil || to == nil {
		d.violate(ErrIllegalAddress, "Copy: host range [0x%x -> 0x%x, +%d) leaves its allocation", op.Src, op.Dst, op.Len)
		return driverErr(op, entryMemcpyAsync, ErrIllegalAddress)
	}
	if (src.host() && dst.host()) || op.Flags&cudadrv.CopyForceCPU != 0 {
		copy(to, from)
		return cudadrv.CopyDone
	}

	status := cudadrv.CopyDone
	var kind int32
	var ctx, peer cudadrv.Context
	switch {
	case src.host():
		kind, ctx = cudadrv.KindH2D, d.execCtx(&dst, primary, op, &status)
	case dst.host():
		kind, ctx = cudadrv.KindD2H, d.execCtx(&src, primary, op, &status)
	default:
		ctx = d.execCtx(&src, primary, op, &status)
		if ctx != 0 {
			peer = d.execCtx(&dst, primary, op, &status)
		}
		kind = cudadrv.KindPeer
		if peer == ctx {
			kind = cudadrv.KindD2D
		}
	}
	if ctx == 0 || (kind == cudadrv.KindPeer && peer == 0) {
		return status
	}
	id := uint64(ctx)
	if d.hasCtxID {
		c := d.ctxs[ctx]
		if c == nil || !c.alive {
			d.violate(ErrContextDestroyed, "Copy: memory of dead context 0x%x", ctx)
			return driverErr(op, -1, ErrContextDestroyed)
		}
		id = c.id
	}
	s := -1
	for i := range slots {
		if sid, sctx, lane := slots[i].Identity(); sid == id && sctx == ctx && lane == op.Lane {
			s = i
			break
		}
	}
	op.Ctx, op.CtxID, op.Kind = ctx, id, kind
	sync := op.Flags&cudadrv.CopySync != 0
	if sync {
		op.Kind = cudadrv.KindShort
	}
	if s < 0 {
		op.Device = -1
		return cudadrv.CopyNeedSlot
	}
	op.Slot = int32(s)
	slot := &slots[s]
	if op.Flags&cudadrv.CopyLock != 0 {
		// As cd_copy: the slot's lock after the lookup. Never spin on it
		// holding d.mu: its holder may need the driver meanwhile.
		d.mu.Unlock()
		slot.Lock()
		d.mu.Lock()
		if sid, sctx, lane := slot.Identity(); sid != id || sctx != ctx || lane != op.Lane { // emptied meanwhile
			slot.Unlock()
			op.Slot, op.Device = -1, -1
			return cudadrv.CopyNeedSlot
		}
		*locked = true
	}
	if !d.hasCtxID && slot.Canary != 0 && d.gone(cudadrv.Incarnation{Ctx: ctx, Canary: slot.Canary, CanaryID: slot.CanaryID, PrimaryDevice: -1}) {
		return cudadrv.CopyStale
	}
	if kind == cudadrv.KindPeer {
		tried := false
		for i := int32(0); i < slot.NPeers; i++ {
			tried = tried || slot.Peer[i] == peer
		}
		if !tried {
			op.PeerCtx = peer
			return cudadrv.CopyNeedPeer
		}
	}
	stream := slot.Stream[op.Kind]
	if stream == 0 {
		return cudadrv.CopyNeedStream
	}
	joined := !sync && op.Flags&cudadrv.CopyReuse != 0 && op.ReuseSlot == int32(s) && op.ReuseKind == op.Kind &&
		op.ReuseSeq > slot.Queried[op.Kind]
	event := slot.Event
	if joined {
		event = op.ReuseEvent
	}
	if !sync && event == 0 {
		return cudadrv.CopyNeedEvent
	}
	if sync && *locked {
		// As cd_copy: a short copy runs without the lock, as a user of the
		// slot that a release waits for.
		slot.AddUser()
		defer slot.DoneUser()
		slot.Unlock()
		*locked = false
	}
	o, ok := d.streams[stream]
	if err := d.owned("Copy", ctx, o, ok, "stream", uintptr(stream)); err != nil {
		return driverErr(op, entryMemcpyAsync, err.(*cudadrv.Result).Code)
	}
	if code := d.fault("Copy"); code != 0 {
		return driverErr(op, entryMemcpyAsync, code)
	}
	if code := d.ctxs[ctx].poison; code != 0 {
		return driverErr(op, entryMemcpyAsync, code)
	}
	w := &work{stream: stream, run: func() { copy(to, from) }}
	d.pending = append(d.pending, w)
	if sync {
		d.syncStream(stream)
		return cudadrv.CopyDone
	}
	e, err := d.eventCall("Copy", ctx, event)
	if err != nil {
		d.syncStream(stream)
		return driverErr(op, entryEventRecord, err.(*cudadrv.Result).Code)
	}
	e.item = w
	w.events = append(w.events, event)
	op.Event = event
	if joined {
		return cudadrv.CopyJoined
	}
	return cudadrv.CopyQueued
}

// gone is cd_incarnation_gone: device-level state and the primary
// handle's id only.
func (d *Driver) gone(inc cudadrv.Incarnation) bool {
	if inc.PrimaryDevice >= 0 && !d.ctxs[d.primary[inc.PrimaryDevice]].alive {
		return true
	}
	if !d.hasCtxID { // the canary's allocation is the generation
		if inc.Canary == 0 {
			return false
		}
		a := d.find(inc.Canary)
		c := d.ctxs[inc.Ctx]
		return a == nil || a.id != inc.CanaryID || a.ctx != inc.Ctx || !c.alive || c.id != a.ctxGen
	}
	return inc.PrimaryDevice >= 0 && d.ctxs[inc.Ctx].id != inc.ID
}

// Gone is cd_incarnation_gone.
func (d *Driver) Gone(inc cudadrv.Incarnation) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gone(inc)
}

// QueryEvents is cd_query_events.
func (d *Driver) QueryEvents(inc cudadrv.Incarnation, events []cudadrv.Event) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gone(inc) {
		return 0, cudadrv.ErrContextGone
	}
	ctx := inc.Ctx
	c, err := d.live("QueryEvents", ctx)
	if err != nil {
		return 0, err
	}
	for n, ev := range events {
		e, err := d.eventCall("QueryEvents", ctx, ev)
		if err != nil {
			return n, err
		}
		if c.poison != 0 {
			return n, result("cuEventQuery", c.poison)
		}
		if e.item != nil {
			return n, d.popFault()
		}
	}
	return len(events), d.popFault()
}

// popFault is Fail("cuCtxPopCurrent", ...): cd_query_events reports a failed
// pop of the context it pushed after the queries, with done unchanged.
func (d *Driver) popFault() error {
	if code := d.enter("cuCtxPopCurrent"); code != 0 {
		return result("cuCtxPopCurrent", code)
	}
	return nil
}

// Arm is cd_arm.
func (d *Driver) Arm(inc cudadrv.Incarnation, stream cudadrv.Stream, head cudadrv.Event, fd int) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gone(inc) {
		return false, cudadrv.ErrContextGone
	}
	ctx := inc.Ctx
	c, err := d.live("Arm", ctx)
	if err != nil {
		return false, err
	}
	e, err := d.eventCall("Arm", ctx, head)
	if err != nil {
		return false, err
	}
	if c.poison != 0 {
		return false, result("cuEventQuery", c.poison)
	}
	if e.item == nil {
		return true, nil
	}
	o, ok := d.streams[stream]
	if err := d.owned("Arm", ctx, o, ok, "stream", uintptr(stream)); err != nil {
		return false, err
	}
	if w := d.last(stream); w != nil {
		w.fds = append(w.fds, fd)
	} else {
		var one = [8]byte{1}
		_, _ = unix.Write(fd, one[:])
	}
	return false, nil
}
