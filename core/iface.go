// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/cucopy/cucopy/cudadrv"
)

// ThreadMode mirrors cucopy_thread_mode_t.
type ThreadMode int32

const (
	ThreadSingle ThreadMode = 0
	ThreadMulti  ThreadMode = 1
)

// IfaceParams are the effective iface settings (params over configuration).
type IfaceParams struct {
	ThreadMode ThreadMode
	MaxPoll    uint32
	MaxEvents  uint32
	// Lanes: on multi-thread ifaces, endpoints are dealt round robin to this
	// many lanes, each with its own streams and events in every context
	// (0 means 1). Single-thread ifaces have one lane.
	Lanes uint32
}

// Iface owns, per CUDA context it has seen, a stream per direction kind, a
// short stream and a capped pool of events, all created lazily on first use
// and found again by context id (the slot table, slots.go). It tracks
// outstanding zcopy pieces in per-(context, kind) FIFO queues (queue.go),
// completes them in progress (progress.go), and implements flush (flush.go)
// and the event fd (notify.go). Endpoints issue the copies (ep.go).
//
// Multi-thread ifaces (docs/design.md, "Threads"): a copy takes no iface
// lock. The driver layer looks its context up in the slot table without a
// lock and issues it under that slot's lock word, which it hands back held
// when the piece must be queued. Progress claims a context's queues (one
// thread at a time pops them; others skip them) and takes no iface-wide
// lock either. mu is the cold lock: it serializes changes to the slot
// table, the resource creation a copy asks for (prepare.go), flush, arm,
// release and close. flushMu guards the flush list and readyMu the
// completions ready to run; operations are counted down with atomics
// (operation.go), and cbMu lets one thread at a time run completions.
//
// Lock order: mu, a slot's claim, flushMu, a slot's lock, readyMu; an
// endpoint's free-list lock (Ep.mu) is a leaf, taken under a slot's lock
// when a completed operation is recycled. Single-thread ifaces take none
// of these locks. est.mu (estimate.go, taken on every iface) is held by an
// estimate alone and, across a calibration, over the context's locks and a
// private iface's, never with any lock of this iface.
type Iface struct {
	ctx     *Context
	drv     cudadrv.Interface
	params  IfaceParams
	multi   bool
	serial  uint64 // unique in the process (Serial)
	mu      ifaceLock
	flushMu ifaceLock  // flushes
	readyMu ifaceLock  // ready
	cbMu    sync.Mutex // held by the thread running completions (RunCallbacks)

	// slots is what the copy hot path reads, by slot index; res is the rest
	// of each context's state, same index. Both have a fixed capacity and
	// never move: a copy reads slots[:nslots] while another thread adds one.
	// fast is the C steady state's view of the iface (cudadrv/fast.go),
	// nil on a Go fake; with it, slots, nslots and primary are its C memory.
	fast    *cudadrv.FastIface
	slots   []cudadrv.Slot
	res     []ctxResources
	pq      []cudadrv.SlotQuery // per slot, what progress asks the driver layer; the claim's holder's (C memory with fast)
	nslots  *atomic.Int32
	primary []cudadrv.Context // per device: a primary context we retained, or 0 (cudadrv.StorePrimary)

	completed atomic.Int64 // operations whose last piece finished since the last Progress
	ready     []ReadyComp  // completions to run, oldest first; under readyMu
	nready    atomic.Int64 // completions made ready and not yet run
	nrunning  atomic.Int64 // callbacks running now (RunCallbacks)
	batch     []ReadyComp  // what RunCallbackBatches is running; the cbMu holder's
	cbRunning bool         // single-thread: RunCallbacks is running (a callback called progress)
	flushes   []flushReq   // under flushMu
	nflushes  atomic.Int32 // len(flushes)

	fenceTargets []queueTarget // fence.go; under mu
	nfence       atomic.Int32  // len(fenceTargets), read without mu

	single issueBuf // single-thread: the copy being issued, so no allocation per copy
	// booked holds the free list of the operations drainInbox books for
	// the pieces the C steady state queued (it is no endpoint of the
	// program's).
	booked Ep
	// runs: zcopy pieces go to the driver layer with the operation's next
	// ones, which may join their run (CUCOPY_IOV_BATCH not off); runFlags
	// are the flags that choose how a run is issued.
	runs       bool
	runFlags   uint32
	maxCreated atomic.Int32 // the most events a slot created (reserve.go)

	fd       int // eventfd, -1 until first needed
	closed   atomic.Bool
	nextLane uint32 // the lane of the next endpoint; under mu

	reclaimFrom int // where the next search for an idle slot starts (slots.go); under mu

	est *estimator // the performance model's topology and calibrations (estimate.go)

	stage stager // pageable staging and its bounce buffers (stage.go)

	packBelow uint64 // cudadrv.CopyOp.PackBelow (pack.go)

	counters     ifaceCounters // stats.go
	statsPrinted bool
	goAtOpen     [2]metrics.Sample // with CUCOPY_STATS: Go heap allocations and GC cycles at open
}

// OpenIface opens an iface. No CUDA resource is created here.
func (c *Context) OpenIface(p IfaceParams) (*Iface, error) {
	const api = "iface_open"
	if p.ThreadMode != ThreadSingle && p.ThreadMode != ThreadMulti {
		return nil, errorf(ErrInvalid, api, "thread mode %d", p.ThreadMode)
	}
	if err := CheckLimit("max_poll", p.MaxPoll); err != nil {
		return nil, &Error{Status: ErrInvalid, Op: api, Msg: err.Error()}
	}
	if err := CheckLimit("max_events", p.MaxEvents); err != nil {
		return nil, &Error{Status: ErrInvalid, Op: api, Msg: err.Error()}
	}
	if p.Lanes > MaxLanes {
		return nil, errorf(ErrInvalid, api, "%d lanes: at most %d", p.Lanes, MaxLanes)
	}
	if p.Lanes == 0 || p.ThreadMode == ThreadSingle {
		p.Lanes = 1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return nil, errorf(ErrHandle, api, "the context is destroyed")
	}
	c.ifaces++
	i := &Iface{
		ctx:    c,
		drv:    c.drv,
		params: p,
		multi:  p.ThreadMode == ThreadMulti,
		res:    make([]ctxResources, MaxSlots),
		fd:     -1,
		serial: ifaceSerials.Add(1),
		est:    newEstimator(c.cfg),
	}
	cudadrv.FreeRetired() // the C memory of ifaces collected since the last open
	i.stage.init(c.cfg.Stage)
	i.packBelow = c.cfg.PackBelow
	i.runs = c.cfg.IOVBatch != IOVBatchOff
	if c.cfg.IOVBatch == IOVBatchLoop {
		i.runFlags = cudadrv.CopyRunLoop
	}
	if cudadrv.Native(c.drv) {
		// The C steady state reads the tables: C memory. Freed after the
		// iface is collected, at a later open (a C ABI call may come after
		// its close; the record's open word turns it away). Also with
		// CUCOPY_C_STEADY=off, which only keeps the record closed: the
		// table passed to cd_copy must not be Go memory, whose slots hold
		// pointers (to their C buffers) that cgo's pointer check would
		// scan, the whole table, on every copy.
		i.fast = cudadrv.NewFastIface(MaxSlots, c.devices, i.multi, i.runs, i.runFlags, i.stage.min, i.stage.small, i.packBelow, c.serial)
		i.slots, i.primary, i.nslots, i.pq = i.fast.Slots(), i.fast.Primary(), &i.fast.NSlots, i.fast.Queries()
		runtime.AddCleanup(i, (*cudadrv.FastIface).Retire, i.fast)
		if !c.cfg.GoOnly {
			i.fast.Open()
		}
	} else {
		// Go memory, which the race detector sees (core's tests run on
		// Go fakes, which take the tables as Go slices); only the slots'
		// event stacks are C memory.
		i.slots, i.primary, i.nslots = make([]cudadrv.Slot, MaxSlots), make([]cudadrv.Context, c.devices), new(atomic.Int32)
		i.pq = make([]cudadrv.SlotQuery, MaxSlots)
		runtime.AddCleanup(i, cudadrv.RetireSlotBuffers, i.slots)
	}
	i.mu.multi, i.flushMu.multi, i.readyMu.multi = i.multi, i.multi, i.multi
	i.booked.iface, i.booked.mu.multi = i, i.multi
	i.counters.retired = make([][gpuDirs]DirStats, c.devices)
	if c.cfg.Stats {
		i.goAtOpen = goActivity()
	}
	return i, nil
}

// ifaceSerials numbers the ifaces of the process, from 1.
var ifaceSerials atomic.Uint64

// Fast is the iface's record for the C steady state (cudadrv.FastIface),
// C memory that capi's C side reads: an endpoint's copies run there while
// it is open (not with CUCOPY_C_STEADY=off). nil on a driver written in Go.
func (i *Iface) Fast() *cudadrv.FastIface { return i.fast }

// Steady says whether the iface's calls may run in the C steady state:
// on the native driver, unless CUCOPY_C_STEADY=off.
func (i *Iface) Steady() bool { return i.fast != nil && !i.ctx.cfg.GoOnly }

// Serial is the iface's number, unique in the process and never 0: what
// capi's C side records as "the iface whose callback this thread runs".
func (i *Iface) Serial() uint64 { return i.serial }

// ifaceLock is a mutex that only multi-thread ifaces take: a single-thread
// iface's caller serializes its calls, and it takes no lock at all.
type ifaceLock struct {
	m     sync.Mutex // never used directly: lock and unlock look at multi
	multi bool
}

func (l *ifaceLock) lock() {
	if l.multi {
		l.m.Lock()
	}
}

func (l *ifaceLock) unlock() {
	if l.multi {
		l.m.Unlock()
	}
}

// lockSlot and unlockSlot take a slot's lock word (cudadrv.Slot.Lock) on
// multi-thread ifaces.

func (i *Iface) lockSlot(s int) {
	if i.multi {
		i.slots[s].Lock()
	}
}

func (i *Iface) unlockSlot(s int) {
	if i.multi {
		i.slots[s].Unlock()
	}
}

// Params are the effective settings.
func (i *Iface) Params() IfaceParams { return i.params }

// Context is the cucopy context the iface was opened on.
func (i *Iface) Context() *Context { return i.ctx }

// Closed says whether the iface is closed.
func (i *Iface) Closed() bool { return i.closed.Load() }

// Close waits for the copies in flight and releases every resource.
// Pending completions are dropped.
func (i *Iface) Close() error {
	const api = "iface_close"
	i.mu.lock()
	defer i.mu.unlock()
	if i.closed.Load() {
		return errorf(ErrHandle, api, "iface is already closed")
	}
	// No copy runs in the C steady state from here on; if close fails,
	// they may again.
	if i.fast != nil {
		i.fast.Shut()
	}
	var errs []error
	for s := range int(i.nslots.Load()) {
		errs = append(errs, i.releaseSlot(s)...)
	}
	for dev, p := range i.primary {
		if p == 0 {
			continue
		}
		if err := i.drv.PrimaryRelease(dev); err != nil && !deinitialized(err) {
			errs = append(errs, fmt.Errorf("releasing the primary context on device %d: %w", dev, err))
			continue
		}
		cudadrv.StorePrimary(i.primary, dev, 0)
	}
	if i.ctx.cfg.Stats && !i.statsPrinted { // after the releases: they are counted
		i.printStats()
		i.statsPrinted = true
	}
	if len(errs) > 0 {
		// What could not be released is still held: the iface stays open
		// and close can be called again.
		if i.Steady() {
			i.fast.Open()
		}
		return &Error{Status: ErrCUDA, Op: api, Msg: "releasing resources (the iface stays open; call close again)", Err: errors.Join(errs...)}
	}
	i.closed.Store(true)
	i.flushMu.lock()
	i.flushes = nil
	i.nflushes.Store(0)
	i.flushMu.unlock()
	i.readyMu.lock()
	i.nready.Add(-int64(len(i.ready))) // pending completions are dropped (a batch running keeps its count)
	i.ready = nil
	i.readyMu.unlock()
	if i.fd >= 0 {
		unix.Close(i.fd)
		i.fd = -1
	}
	i.ctx.mu.Lock()
	i.ctx.ifaces--
	i.ctx.mu.Unlock()
	return nil
}
