// SPDX-License-Identifier: BSD-3-Clause

package core

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
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
// and found again by context id (the slot table). It tracks outstanding
// zcopy pieces in per-(context, kind) FIFO queues, completes them in
// progress, and implements flush and the event fd.
//
// Multi-thread ifaces (docs/design.md, "Threads"): a copy takes no iface
// lock. The driver layer looks its context up in the slot table without a
// lock and issues it under that slot's lock word, which it hands back held
// when the piece must be queued. Progress claims a context's queues (one
// thread at a time pops them; others skip them) and takes no iface-wide
// lock either. mu is the cold lock: it serializes changes to the slot
// table, the resource creation a copy asks for, flush, arm, release and
// close. flushMu guards the flush list and readyMu the completions ready to
// run; operations are counted down with atomics (opState), and cbMu lets one
// thread at a time run completions. Lock order: mu, a slot's claim,
// flushMu, a slot's lock, readyMu. Single-thread ifaces take none of these
// locks.
type Iface struct {
	ctx     *Context
	drv     cudadrv.Interface
	params  IfaceParams
	multi   bool
	mu      sync.Mutex
	flushMu sync.Mutex // flushes
	readyMu sync.Mutex // ready
	cbMu    sync.Mutex // held by the thread running completions (RunCallbacks)

	// slots is what the copy hot path reads, by slot index; res is the rest
	// of each context's state, same index. Both have a fixed capacity and
	// never move: a copy reads slots[:nslots] while another thread adds one.
	slots   []cudadrv.Slot
	res     []ctxResources
	nslots  atomic.Int32
	primary []cudadrv.Context // per device: a primary context we retained, or 0 (cudadrv.StorePrimary)

	completed atomic.Int64 // operations whose last piece finished since the last Progress
	ready     []readyComp  // completions to run, oldest first; under readyMu
	nready    atomic.Int64 // completions made ready and not yet run
	batch     []readyComp  // what RunCallbacks is running; the cbMu holder's
	cbRunning bool         // single-thread: RunCallbacks is running (a callback called progress)
	flushes   []flushReq   // under flushMu
	nflushes  atomic.Int32 // len(flushes)

	scratch cudadrv.CopyOp // single-thread: the copy being issued, so no allocation per copy

	fd       int // eventfd, -1 until first needed
	closed   atomic.Bool
	nextLane uint32 // the lane of the next endpoint; under mu

	cpuOps, cpuBytes atomic.Uint64
	statsPrinted     bool
	goAtOpen         [2]metrics.Sample // with CUCOPY_STATS: Go heap allocations and GC cycles at open
}

// MaxContexts is how many slots, i.e. (CUDA context, lane) pairs, one iface
// holds resources in at once; a released or ended context's slots are
// reused.
const MaxContexts = 128

// ctxResources is one CUDA context's resources beyond its slot. The
// identity (ctx to dead) changes under mu and the slot's lock, and a live
// slot dies only under its claim too; events, free and queues change under
// the slot's lock, pops only under the claim (and, once the slot is hidden
// from copies, under mu and the claim alone); the statistics are atomic.
type ctxResources struct {
	ctx         cudadrv.Context
	id          uint64
	device      int
	ownsPrimary bool // we hold a retain on ctx, the device's primary context
	dead        bool // a tombstone: the context was released or ended
	events      int  // events created (in queues, free, or in the slot)
	free        []cudadrv.Event
	queues      [cudadrv.NumAsyncKinds]eventQueue
	ops, bytes  [cudadrv.NumKinds]atomic.Uint64
	polling     atomic.Bool // multi-thread: claimed by the thread popping the queues (Iface.tryClaim)
}

// eventQueue is a FIFO of zcopy pieces on one stream, each with its event.
// events and ops are rings of the same capacity. A piece's sequence
// number is issued after its push; the counters never go back, not even
// when the slot is reused, so an old sequence number never names a new
// piece.
type eventQueue struct {
	events       []cudadrv.Event
	ops          []*opState
	head, count  int
	issued, done uint64 // pieces pushed and popped so far
}

// opState is one zcopy operation: its completion, its first error, and how
// many of its pieces are in flight, plus issuingGuard while the zcopy call
// is still issuing: pieces that finish meanwhile count down, and the call
// adds the pieces it queued minus the guard when it is done, so the
// operation completes exactly once, in whichever thread brings pending to
// 0, and never under its issuer. No lock: the queues hold *opState.
type opState struct {
	ep        *Ep            // whose free list it goes back to
	req       cudadrv.CopyOp // multi-thread: the issuing call's request (copyOp)
	comp      uintptr
	pending   atomic.Int32
	status    atomic.Int32 // Status: the first error, else OK
	abandoned bool         // the call failed (or queued nothing): finish silently; written before the issuer's last add
}

const issuingGuard = 1 << 30

type readyComp struct {
	comp   uintptr
	status Status
}

type flushReq struct {
	comp    uintptr
	targets []flushTarget
}

type flushTarget struct {
	slot, kind int
	seq        uint64
}

// OpenIface opens an iface. No CUDA resource is created here.
func (c *Context) OpenIface(p IfaceParams) (*Iface, error) {
	if p.ThreadMode != ThreadSingle && p.ThreadMode != ThreadMulti {
		return nil, errorf(ErrInvalid, "iface_open", "thread mode %d", p.ThreadMode)
	}
	if err := CheckLimit("max_poll", p.MaxPoll); err != nil {
		return nil, &Error{Status: ErrInvalid, Op: "iface_open", Msg: err.Error()}
	}
	if err := CheckLimit("max_events", p.MaxEvents); err != nil {
		return nil, &Error{Status: ErrInvalid, Op: "iface_open", Msg: err.Error()}
	}
	if p.Lanes > MaxLanes {
		return nil, errorf(ErrInvalid, "iface_open", "%d lanes: at most %d", p.Lanes, MaxLanes)
	}
	if p.Lanes == 0 || p.ThreadMode == ThreadSingle {
		p.Lanes = 1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return nil, errorf(ErrHandle, "iface_open", "the context is destroyed")
	}
	c.ifaces++
	i := &Iface{
		ctx:     c,
		drv:     c.drv,
		params:  p,
		multi:   p.ThreadMode == ThreadMulti,
		slots:   make([]cudadrv.Slot, MaxContexts),
		res:     make([]ctxResources, MaxContexts),
		primary: make([]cudadrv.Context, c.devices),
		fd:      -1,
	}
	if c.cfg.Stats {
		i.goAtOpen = goActivity()
	}
	return i, nil
}

func (i *Iface) lock() {
	if i.multi {
		i.mu.Lock()
	}
}

func (i *Iface) unlock() {
	if i.multi {
		i.mu.Unlock()
	}
}

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

func (i *Iface) lockFlushes() {
	if i.multi {
		i.flushMu.Lock()
	}
}

func (i *Iface) unlockFlushes() {
	if i.multi {
		i.flushMu.Unlock()
	}
}

func (i *Iface) lockReady() {
	if i.multi {
		i.readyMu.Lock()
	}
}

func (i *Iface) unlockReady() {
	if i.multi {
		i.readyMu.Unlock()
	}
}

// copyOp is the request a copy is issued with: the iface's own on a
// single-thread iface, else op's, which the issuing call owns. (A sync.Pool
// missed about once per 300 copies with 8 threads and 32 Ps: a cgo caller's
// goroutine need not get the same P back on its next call.)
func (i *Iface) copyOp(op *opState) *cudadrv.CopyOp {
	if !i.multi {
		return &i.scratch
	}
	return &op.req
}

// count adds one copy to the statistics.
func (i *Iface) count(c *cudadrv.CopyOp) {
	if c.Slot < 0 {
		i.cpuOps.Add(1)
		i.cpuBytes.Add(c.Len)
		return
	}
	r := &i.res[c.Slot]
	r.ops[c.Kind].Add(1)
	r.bytes[c.Kind].Add(c.Len)
}

// Params are the effective settings.
func (i *Iface) Params() IfaceParams { return i.params }

// Context is the cucopy context the iface was opened on.
func (i *Iface) Context() *Context { return i.ctx }

func (q *eventQueue) push(ev cudadrv.Event, op *opState) {
	if q.count == len(q.events) {
		n := 2 * len(q.events)
		if n == 0 {
			n = 16
		}
		events := make([]cudadrv.Event, n)
		ops := make([]*opState, n)
		for j := 0; j < q.count; j++ {
			events[j] = q.events[(q.head+j)%len(q.events)]
			ops[j] = q.ops[(q.head+j)%len(q.ops)]
		}
		q.events, q.ops, q.head = events, ops, 0
	}
	tail := (q.head + q.count) % len(q.events)
	q.events[tail] = ev
	q.ops[tail] = op
	q.count++
	q.issued++
}

// segment is the longest run of queued events, oldest first, that is
// contiguous in the ring, capped at max.
func (q *eventQueue) segment(max int) []cudadrv.Event {
	n := min(q.count, len(q.events)-q.head, max)
	return q.events[q.head : q.head+n]
}

func (q *eventQueue) pop() (cudadrv.Event, *opState) {
	ev, op := q.events[q.head], q.ops[q.head]
	q.ops[q.head] = nil
	q.head = (q.head + 1) % len(q.events)
	q.count--
	q.done++
	return ev, op
}

// newOp starts an operation of e, issuing. Operations are reused from the
// endpoint's free list: they come back there from whichever thread
// completes them, so a pool per thread (or per P) would keep missing.
func (i *Iface) newOp(e *Ep, comp uintptr) *opState {
	var op *opState
	i.lockEp(e)
	if n := len(e.free); n > 0 {
		op = e.free[n-1]
		e.free = e.free[:n-1]
	}
	i.unlockEp(e)
	if op == nil {
		op = &opState{ep: e}
	}
	op.comp, op.abandoned = comp, false
	op.status.Store(int32(OK))
	op.pending.Store(issuingGuard)
	return op
}

// issued ends the issuing of op, which queued `queued` pieces. An operation
// with pieces queued completes through progress, even when they all
// finished (or were canceled) before the call returned; one with none (CPU
// copies only) is over, and freed silently.
func (i *Iface) issued(op *opState, queued int32) {
	op.abandoned = op.abandoned || queued == 0
	if op.pending.Add(queued-issuingGuard) == 0 {
		i.completeOp(op)
	}
}

// finish accounts one finished piece of op; the operation's last makes it
// ready.
func (i *Iface) finish(op *opState, st Status) {
	if i.finished(op, st) {
		i.completeOp(op)
	}
}

// finished counts one finished piece of op and says whether it was the
// operation's last: the caller then completes it.
func (i *Iface) finished(op *opState, st Status) bool {
	if st < 0 {
		op.status.CompareAndSwap(int32(OK), int32(st))
	}
	return op.pending.Add(-1) == 0
}

// readyBatch collects the operations one poll completes, so that they are
// counted and made ready under one lock, in order.
type readyBatch struct {
	n, completed int
	comps        [64]readyComp
}

func (b *readyBatch) add(i *Iface, op *opState) {
	if !op.abandoned {
		b.completed++
		if op.comp != 0 {
			if b.n == len(b.comps) {
				b.flush(i)
			}
			b.comps[b.n] = readyComp{comp: op.comp, status: Status(op.status.Load())}
			b.n++
		}
	}
	i.recycle(op)
}

func (b *readyBatch) flush(i *Iface) {
	if b.completed > 0 {
		i.completed.Add(int64(b.completed))
		b.completed = 0
	}
	if b.n == 0 {
		return
	}
	i.lockReady()
	i.ready = append(i.ready, b.comps[:b.n]...)
	i.nready.Add(int64(b.n))
	i.unlockReady()
	b.n = 0
}

// completeOp counts op as completed and makes its completion ready, unless
// abandoned; then frees it.
func (i *Iface) completeOp(op *opState) {
	if !op.abandoned {
		i.completed.Add(1)
		if op.comp != 0 {
			i.makeReady(op.comp, Status(op.status.Load()))
		}
	}
	i.recycle(op)
}

// recycle puts op back on its endpoint's free list.
func (i *Iface) recycle(op *opState) {
	e := op.ep
	i.lockEp(e)
	e.free = append(e.free, op)
	i.unlockEp(e)
}

func (i *Iface) lockEp(e *Ep) {
	if i.multi {
		e.mu.Lock()
	}
}

func (i *Iface) unlockEp(e *Ep) {
	if i.multi {
		e.mu.Unlock()
	}
}

// makeReady queues a completion for RunCallbacks.
func (i *Iface) makeReady(comp uintptr, st Status) {
	i.lockReady()
	i.ready = append(i.ready, readyComp{comp: comp, status: st})
	i.nready.Add(1)
	i.unlockReady()
}

// releaseEvent gives a completed piece's event back to its context; under
// the slot's lock.
func (i *Iface) releaseEvent(s int, ev cudadrv.Event) {
	if i.slots[s].Event == 0 {
		i.slots[s].Event = ev
		return
	}
	i.res[s].free = append(i.res[s].free, ev)
}

// Progress completes finished pieces on every context and returns how many
// operations (all of their pieces) completed since the last call, here or
// on a context that ended; their completions then run with RunCallbacks.
// On a multi-thread iface it takes no iface-wide lock: threads progressing
// at once share the contexts out (one polls a context's queues, the others
// skip it), and copies go on meanwhile.
func (i *Iface) Progress() (int, error) {
	if i.closed.Load() {
		return 0, errorf(ErrHandle, "iface_progress", "iface is closed")
	}
	for s := range int(i.nslots.Load()) {
		if !i.tryClaim(s) {
			continue
		}
		if inc, gone := i.poll(s); gone {
			i.dropGone(s, inc)
		}
	}
	i.completeFlushes()
	return int(i.completed.Swap(0)), nil
}

// poll completes the finished pieces of slot s, which the caller claimed;
// it gives the claim back (also if it panics: capi recovers panics, and a
// claim or slot lock left set would hang every later call). The slot's lock
// is taken twice, around the driver's queries, not during them. gone says
// that the slot's incarnation inc ended: the caller drops the slot.
func (i *Iface) poll(s int) (inc cudadrv.Incarnation, gone bool) {
	defer i.unclaim(s)
	segs, n := i.segments(s)
	if n == 0 {
		return inc, false
	}
	// Without the lock, the segments stay valid (only the claim's holder
	// pops; a push writes past the queued pieces or into a new ring), and
	// so does the incarnation (it changes only under the claim).
	inc = i.inc(s)
	var done [cudadrv.NumAsyncKinds]int
	var errs [cudadrv.NumAsyncKinds]error
	for k, seg := range segs {
		if len(seg) == 0 {
			continue
		}
		done[k], errs[k] = i.drv.QueryEvents(inc, seg)
		if errs[k] == cudadrv.ErrContextGone {
			return inc, true
		}
	}
	dev, id := i.popFinished(s, &done, &errs)
	for k, err := range errs {
		if err != nil && !isPopFailure(err) {
			logf(LogWarn, "copy on device %d (context id %d, %s stream) failed: %v",
				dev, id, cudadrv.KindName(k), err)
		} else if err != nil {
			// The events were counted correctly; only leaving the context
			// failed.
			logf(LogWarn, "progress on device %d (context id %d): %v", dev, id, err)
		}
	}
	return inc, false
}

// segments is, per queue of slot s, the leading events progress asks the
// driver about, and their number; 0 also when a copy holds the slot's lock
// (progress looks again next time rather than wait: the issuer comes back
// to progress).
func (i *Iface) segments(s int) (segs [cudadrv.NumAsyncKinds][]cudadrv.Event, n int) {
	if i.multi && !i.slots[s].TryLock() {
		return segs, 0
	}
	defer i.unlockSlot(s)
	r := &i.res[s]
	if r.dead {
		return segs, 0
	}
	for k := range r.queues {
		q := &r.queues[k]
		segs[k] = q.segment(int(i.params.MaxPoll))
		n += len(segs[k])
		// Until they are popped, these pieces' events are not re-recorded
		// by a later piece of their operation (CopyReuse): the driver's
		// answer must stay true.
		i.slots[s].Queried[k] = max(i.slots[s].Queried[k], q.done+uint64(len(segs[k])))
	}
	return segs, n
}

// popFinished pops what the driver reported finished (done) or failed
// (errs, a failed query fails the head piece) from slot s's queues, and
// returns the slot's device and context id for messages.
func (i *Iface) popFinished(s int, done *[cudadrv.NumAsyncKinds]int, errs *[cudadrv.NumAsyncKinds]error) (int, uint64) {
	var b readyBatch
	i.lockSlot(s)
	defer i.unlockSlot(s)
	defer b.flush(i) // under the slot's lock (and the claim): in order with the next poll's
	r := &i.res[s]
	for k := range r.queues {
		q := &r.queues[k]
		for j := 0; j < done[k]; j++ {
			ev, op := q.pop()
			i.releaseEvent(s, ev)
			if i.finished(op, OK) {
				b.add(i, op)
			}
		}
		if errs[k] != nil && !isPopFailure(errs[k]) {
			// The head piece's query failed (e.g. a sticky error in this
			// context) or its context cannot be entered: fail that piece;
			// the other contexts go on.
			ev, op := q.pop()
			i.releaseEvent(s, ev)
			if i.finished(op, ErrCUDA) {
				b.add(i, op)
			}
		}
		// The pieces still queued may be joined again: the next query
		// raises Queried first (only the claim's holder queries).
		i.slots[s].Queried[k] = q.done
	}
	return r.device, r.id
}

// tryClaim, claim and unclaim own slot s's queues for popping: on a
// multi-thread iface one thread at a time polls them, and releasing or
// dropping the slot waits for it. Single-thread ifaces need no claim.
func (i *Iface) tryClaim(s int) bool {
	// Looking before the compare-and-swap keeps the slot's cache line
	// shared while another thread holds the claim.
	return !i.multi || (!i.res[s].polling.Load() && i.res[s].polling.CompareAndSwap(false, true))
}

func (i *Iface) claim(s int) {
	for !i.tryClaim(s) {
		runtime.Gosched()
	}
}

func (i *Iface) unclaim(s int) {
	if i.multi {
		i.res[s].polling.Store(false)
	}
}

// dropGone drops slot s, whose incarnation inc was found ended, unless it
// was dropped (or reused) meanwhile.
func (i *Iface) dropGone(s int, inc cudadrv.Incarnation) {
	i.lock()
	defer i.unlock()
	if !i.res[s].dead && i.inc(s) == inc {
		i.dropSlot(s, ErrCanceled)
	}
}

// RunCallbacks runs every completion made ready (by progress, or by a
// release or a reset), oldest first, with run. On a multi-thread iface one
// thread at a time does, so that they run one at a time and in the order
// the operations completed; a thread that finds another one running them
// leaves them to it. A callback may call back in: a progress it calls
// leaves the completions it readies to this loop.
func (i *Iface) RunCallbacks(run func(comp uintptr, st Status)) {
	if i.nready.Load() == 0 {
		return
	}
	if !i.multi {
		if !i.cbRunning {
			i.cbRunning = true
			i.runBatches(run)
			i.cbRunning = false
		}
		return
	}
	// Looking again after unlocking: a completion made ready while this
	// thread held the lock, by a thread whose TryLock failed, is not left
	// behind.
	for i.nready.Load() > 0 && i.cbMu.TryLock() {
		i.runBatches(run)
		i.cbMu.Unlock()
	}
}

// runBatches is RunCallbacks' loop, for the one thread running callbacks.
func (i *Iface) runBatches(run func(comp uintptr, st Status)) {
	for {
		// Take the whole list in one go; the spare one collects new ones.
		i.lockReady()
		batch := i.ready
		i.ready = i.batch[:0]
		i.unlockReady()
		if len(batch) == 0 {
			i.batch = batch
			return
		}
		for k, rc := range batch {
			batch[k] = readyComp{}
			i.nready.Add(-1)
			run(rc.comp, rc.status)
		}
		i.batch = batch[:0]
	}
}

// completeFlushes makes ready the flushes whose targets are reached. A
// released or dropped slot popped all of its pieces, so its targets are
// reached too.
func (i *Iface) completeFlushes() {
	if i.nflushes.Load() == 0 {
		return
	}
	i.lockFlushes()
	defer i.unlockFlushes()
	kept := i.flushes[:0]
	for _, f := range i.flushes {
		done := true
		for _, t := range f.targets {
			i.lockSlot(t.slot)
			reached := i.res[t.slot].queues[t.kind].done >= t.seq
			i.unlockSlot(t.slot)
			if !reached {
				done = false
				break
			}
		}
		if done {
			i.makeReady(f.comp, OK)
		} else {
			kept = append(kept, f)
		}
	}
	i.flushes = kept
	i.nflushes.Store(int32(len(kept)))
}

// Flush returns OK when nothing is outstanding, else InProgress, with comp
// (if non-zero) completed once everything issued before has completed.
func (i *Iface) Flush(op string, comp uintptr) (Status, error) {
	i.lock()
	defer i.unlock()
	if i.closed.Load() {
		return ErrHandle, errorf(ErrHandle, op, "iface is closed")
	}
	var targets []flushTarget
	for s := range int(i.nslots.Load()) {
		r := &i.res[s]
		for k := range r.queues {
			q := &r.queues[k]
			i.lockSlot(s)
			count, seq := q.count, q.issued
			i.unlockSlot(s)
			if count > 0 {
				if comp == 0 {
					return InProgress, nil // nothing to record: polling allocates nothing
				}
				targets = append(targets, flushTarget{slot: s, kind: k, seq: seq})
			}
		}
	}
	if len(targets) == 0 {
		return OK, nil
	}
	i.lockFlushes()
	i.flushes = append(i.flushes, flushReq{comp: comp, targets: targets})
	i.nflushes.Store(int32(len(i.flushes)))
	i.unlockFlushes()
	return InProgress, nil
}

// eventFD creates the eventfd on first use.
func (i *Iface) eventFD() (int, error) {
	if i.fd >= 0 {
		return i.fd, nil
	}
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return -1, &Error{Status: ErrNoResource, Op: "iface_event_fd", Msg: "eventfd", Err: err}
	}
	i.fd = fd
	return fd, nil
}

// EventFD returns the iface's eventfd.
func (i *Iface) EventFD() (int, error) {
	i.lock()
	defer i.unlock()
	if i.closed.Load() {
		return -1, errorf(ErrHandle, "iface_event_fd", "iface is closed")
	}
	return i.eventFD()
}

// EventSendComp is CUCOPY_EVENT_SEND_COMP.
const EventSendComp = 1

// Arm arms the event fd: ErrBusy when completions are waiting, else every
// queue with pieces in flight gets a host function that writes the fd when
// the stream reaches it.
func (i *Iface) Arm(events uint32) (Status, error) {
	if events&^EventSendComp != 0 {
		return ErrInvalid, errorf(ErrInvalid, "iface_event_arm", "unknown event bits 0x%x", events&^EventSendComp)
	}
	i.lock()
	defer i.unlock()
	if i.closed.Load() {
		return ErrHandle, errorf(ErrHandle, "iface_event_arm", "iface is closed")
	}
	fd, err := i.eventFD()
	if err != nil {
		return StatusOf(err), err
	}
	var buf [8]byte
	for {
		if _, err := unix.Read(fd, buf[:]); err != nil {
			break // EAGAIN: drained
		}
	}
	if i.nready.Load() > 0 {
		return ErrBusy, nil
	}
	if events == 0 {
		return OK, nil
	}
	for s := range int(i.nslots.Load()) {
		r := &i.res[s]
		if r.dead {
			continue
		}
		for k := range r.queues {
			q := &r.queues[k]
			i.lockSlot(s)
			var head cudadrv.Event
			if q.count > 0 {
				head = q.events[q.head]
			}
			i.unlockSlot(s)
			if head == 0 {
				continue
			}
			// A piece queued after this look is not covered: the caller
			// arms after issuing.
			busy, err := i.drv.Arm(i.inc(s), i.slots[s].Stream[k], head, fd)
			if err == cudadrv.ErrContextGone {
				i.dropSlot(s, ErrCanceled)
				return ErrBusy, nil // its canceled operations are ready
			}
			if queryFailure(err) {
				// A sticky error in this context: progress fails its pieces.
				return ErrBusy, nil
			}
			if err != nil {
				return ErrCUDA, driverError("iface_event_arm", fmt.Sprintf("device %d", r.device), err)
			}
			if busy {
				return ErrBusy, nil
			}
		}
	}
	return OK, nil
}

// findSlot is the slot of context (id, ctx)'s lane, -1 if none; under mu.
func (i *Iface) findSlot(id uint64, ctx cudadrv.Context, lane int32) int {
	for s := range int(i.nslots.Load()) {
		if sid, sctx, slane := i.slots[s].Identity(); sid == id && sctx == ctx && slane == lane {
			return s
		}
	}
	return -1
}

// addSlot makes a slot for a context's lane seen for the first time; under
// mu. When ctx is its device's primary context, a retain is held so that
// the program releasing its own retain cannot destroy the context under our
// resources.
func (i *Iface) addSlot(op string, ctx cudadrv.Context, id uint64, lane int32) (int, error) {
	s := int(i.nslots.Load())
	for t := range s {
		if i.res[t].dead {
			s = t
			break
		}
	}
	if s == len(i.slots) {
		return -1, errorf(ErrNoResource, op, "the iface already holds resources in %d CUDA contexts (lanes counted apart); release some (cucopy_iface_release_context)", len(i.slots))
	}
	dev, err := i.drv.ContextDevice(ctx)
	if err != nil {
		return -1, driverError(op, "querying the device of a context", err)
	}
	owns := false
	if active, err := i.drv.PrimaryActive(dev); err == nil && active {
		if p, err := i.drv.PrimaryRetain(dev); err == nil {
			if p == ctx {
				owns = true
			} else if err := i.drv.PrimaryRelease(dev); err != nil {
				logf(LogWarn, "releasing the primary context of device %d: %v", dev, err)
			}
		}
	}
	var canary, canaryID uint64
	if !i.drv.HasCtxID() {
		canary, canaryID = i.canary(ctx)
	}
	// A slot past nslots is invisible to copies until nslots grows; a
	// tombstone may be looked at, so it is filled under its lock, the
	// identity last.
	i.lockSlot(s)
	r := &i.res[s]
	r.ctx, r.id, r.device, r.ownsPrimary, r.dead = ctx, id, dev, owns, false
	slot := &i.slots[s]
	slot.Device, slot.Canary, slot.CanaryID = int32(dev), canary, canaryID
	slot.SetIdentity(id, ctx, lane)
	i.unlockSlot(s)
	if s == int(i.nslots.Load()) {
		i.nslots.Store(int32(s + 1))
	}
	logf(LogDebug, "new context: device %d, context id %d, lane %d, slot %d", dev, id, lane, s)
	return s, nil
}

// canary makes the generation marker of a context on drivers without
// cuCtxGetId: a 1-byte allocation whose BUFFER_ID (never reused) lives
// exactly as long as the context's incarnation. Without one (allocation
// failed) the slot is keyed by handle alone, as before.
func (i *Iface) canary(ctx cudadrv.Context) (uint64, uint64) {
	p, err := i.drv.MemAlloc(ctx, cudadrv.MemDevice, 1)
	if err != nil {
		logf(LogWarn, "no generation canary for a context (%v): a reset or a reused handle will not be detected there", err)
		return 0, 0
	}
	info, err := i.drv.MemQuery(p, i.ctx.devices)
	if err != nil || info.BufferID == 0 {
		logf(LogWarn, "no BUFFER_ID for the generation canary (%v)", err)
		_ = i.drv.MemFree(ctx, cudadrv.MemDevice, p)
		return 0, 0
	}
	return p, info.BufferID
}

// usePrimary retains the primary context of dev for memory that has no
// owning context, if the program has activated it.
func (i *Iface) usePrimary(op string, dev int) error {
	if i.primary[dev] != 0 {
		// Ours, but the driver reports the context destroyed: the program
		// reset it. The retain outlives a reset; give it back (allowed
		// after a reset) and look at the device afresh.
		if err := i.drv.PrimaryRelease(dev); err != nil && !deinitialized(err) {
			logf(LogInfo, "releasing the primary context of device %d after its reset: %v", dev, err)
		}
		cudadrv.StorePrimary(i.primary, dev, 0)
	}
	active, err := i.drv.PrimaryActive(dev)
	if err != nil {
		return driverError(op, fmt.Sprintf("primary context state of device %d", dev), err)
	}
	if !active {
		return errorf(ErrNoDevice, op, "memory of device %d has no owning context and the device's primary context is not active; cucopy does not activate it", dev)
	}
	ctx, err := i.drv.PrimaryRetain(dev)
	if err != nil {
		return driverError(op, fmt.Sprintf("retaining the primary context of device %d", dev), err)
	}
	cudadrv.StorePrimary(i.primary, dev, ctx)
	return nil
}

// firstActivePrimary is the context for managed memory whose device is
// unknown when the caller has no current context; 0 if none is active.
func (i *Iface) firstActivePrimary(op string) (cudadrv.Context, error) {
	for dev := range i.primary {
		if i.primary[dev] != 0 {
			return i.primary[dev], nil
		}
		if active, err := i.drv.PrimaryActive(dev); err == nil && active {
			if err := i.usePrimary(op, dev); err != nil {
				return 0, err
			}
			return i.primary[dev], nil
		}
	}
	return 0, nil
}

// issue runs one copy piece, doing the cold work the driver layer asks for
// (new slot, stream, event, primary context, peer access) and retrying. It
// returns CopyDone, CopyQueued (the piece is in a queue for zop, and
// c.ReuseSeq is its sequence number there), CopyJoined (folded into the
// previous piece's queue entry), or an error. Multi-thread ifaces take no
// lock here but the slot's, which the driver layer hands over on CopyQueued
// and CopyJoined; the cold work takes mu.
func (i *Iface) issue(op string, c *cudadrv.CopyOp, zop *opState) (cudadrv.CopyStatus, error) {
	if i.multi {
		c.Flags |= cudadrv.CopyLock
	}
	for {
		st := i.drv.Copy(i.slots[:i.nslots.Load()], i.primary, c)
		if c.Err.Entry >= 0 && st != cudadrv.CopyDriverError {
			// Issued, but leaving the copy's context failed (cuCtxPopCurrent).
			logf(LogWarn, "%s: the copy was issued, but restoring the calling thread's CUDA context failed: %v", op, i.drv.Error(c.Err))
		}
		switch st {
		case cudadrv.CopyDone:
			i.count(c)
			return st, nil
		case cudadrv.CopyCPU:
			if err := cpuCopy(op, c.Dst, c.Src, c.Len); err != nil {
				return st, err
			}
			c.Slot = -1
			i.count(c)
			return cudadrv.CopyDone, nil
		case cudadrv.CopyJoined:
			// Folded into the operation's previous piece: its queue entry
			// and event now stand for both.
			i.count(c)
			i.unlockSlot(int(c.Slot))
			return st, nil
		case cudadrv.CopyQueued:
			i.book(c, zop)
			return st, nil
		case cudadrv.CopyOutOfRange:
			which := "source"
			if c.Side == 1 {
				which = "destination"
			}
			return st, errorf(ErrOutOfRange, op, "%s range [0x%x, +%d) crosses the end of its allocation", which, pick(c.Side == 1, c.Dst, c.Src), c.Len)
		case cudadrv.CopyDriverError:
			return st, driverError(op, "", i.drv.Error(c.Err))
		default:
			if err := i.prepare(op, st, c); err != nil {
				return st, err
			}
		}
	}
}

// book queues a piece cd_copy issued and refills the slot's free event,
// under the slot's lock that cd_copy handed over; it releases it (also if
// it panics).
func (i *Iface) book(c *cudadrv.CopyOp, zop *opState) {
	s := int(c.Slot)
	defer i.unlockSlot(s)
	r := &i.res[s]
	q := &r.queues[c.Kind]
	q.push(c.Event, zop)
	c.ReuseSeq = q.issued
	i.slots[s].Event = 0
	if n := len(r.free); n > 0 {
		i.slots[s].Event = r.free[n-1]
		r.free = r.free[:n-1]
	}
	i.count(c)
}

// prepare does the cold work a copy asked for (st), under mu: the copy is
// then tried again. What another thread did meanwhile is looked at first:
// the copy may simply find it done.
func (i *Iface) prepare(op string, st cudadrv.CopyStatus, c *cudadrv.CopyOp) error {
	i.lock()
	defer i.unlock()
	if i.closed.Load() {
		return errorf(ErrHandle, op, "iface is closed")
	}
	switch st {
	case cudadrv.CopyNeedSlot:
		if i.findSlot(c.CtxID, c.Ctx, c.Lane) >= 0 {
			return nil
		}
		_, err := i.addSlot(op, c.Ctx, c.CtxID, c.Lane)
		return err
	case cudadrv.CopyNeedPrimary:
		return i.needPrimary(op, c)
	}
	s := int(c.Slot)
	if id, ctx, lane := i.slots[s].Identity(); id != c.CtxID || ctx != c.Ctx || lane != c.Lane {
		return nil // the slot was released or reused meanwhile: look again
	}
	r := &i.res[s]
	slot := &i.slots[s]
	switch st {
	case cudadrv.CopyStale:
		i.dropSlot(s, ErrCanceled) // then the context gets a fresh slot
	case cudadrv.CopyNeedStream:
		if slot.Stream[c.Kind] != 0 {
			return nil
		}
		stream, err := i.drv.StreamCreate(r.ctx)
		if err != nil {
			return driverError(op, fmt.Sprintf("creating the %s stream on device %d", cudadrv.KindName(int(c.Kind)), r.device), err)
		}
		i.lockSlot(s)
		slot.Stream[c.Kind] = stream
		i.unlockSlot(s)
	case cudadrv.CopyNeedEvent:
		i.lockSlot(s)
		if slot.Event == 0 && len(r.free) > 0 {
			slot.Event = r.free[len(r.free)-1]
			r.free = r.free[:len(r.free)-1]
		}
		has, events := slot.Event != 0, r.events
		i.unlockSlot(s)
		if has {
			return nil
		}
		if events >= int(i.params.MaxEvents) {
			return errorf(ErrNoResource, op, "all %d events of device %d (context id %d) are in flight; call progress and retry", i.params.MaxEvents, r.device, r.id)
		}
		ev, err := i.drv.EventCreate(r.ctx)
		if err != nil {
			return driverError(op, fmt.Sprintf("creating an event on device %d", r.device), err)
		}
		i.lockSlot(s)
		r.events++
		if slot.Event == 0 {
			slot.Event = ev
		} else {
			r.free = append(r.free, ev)
		}
		i.unlockSlot(s)
	case cudadrv.CopyNeedPeer:
		for _, p := range slot.Peer[:slot.NPeers] {
			if p == c.PeerCtx {
				return nil
			}
		}
		if err := i.drv.EnablePeer(r.ctx, c.PeerCtx); err != nil {
			logf(LogInfo, "peer access from device %d not enabled (%v); the driver stages the copy", r.device, err)
		}
		i.lockSlot(s)
		if slot.NPeers == cudadrv.MaxPeers {
			copy(slot.Peer[:], slot.Peer[1:])
			slot.NPeers--
		}
		slot.Peer[slot.NPeers] = c.PeerCtx
		slot.NPeers++
		i.unlockSlot(s)
	default:
		return errorf(ErrInternal, op, "unexpected copy status %d", st)
	}
	return nil
}

// needPrimary finds a context for memory without an owning context; under mu.
func (i *Iface) needPrimary(op string, c *cudadrv.CopyOp) error {
	if dev := int(c.Device); dev >= 0 {
		if dev >= len(i.primary) {
			return errorf(ErrNoDevice, op, "the driver reports memory on device %d of %d", dev, len(i.primary))
		}
		if i.primary[dev] != c.SeenPrimary {
			return nil // another thread retained it meanwhile: look again
		}
		return i.usePrimary(op, dev)
	}
	if c.Flags&(cudadrv.CopyFallbackCtx|cudadrv.CopyForceCPU) != 0 {
		// Asked again although a context was given: no driver answer
		// tells the memory's device. Never spin here.
		return errorf(ErrNoDevice, op, "no CUDA context can run a copy of this memory (its device is unknown)")
	}
	ctx, err := i.firstActivePrimary(op)
	if err != nil {
		return err
	}
	if ctx == 0 {
		c.Flags |= cudadrv.CopyForceCPU
	} else {
		c.Flags |= cudadrv.CopyFallbackCtx
		c.Ctx = ctx
	}
	return nil
}

// isPopFailure reports whether a driver error came from leaving a context
// (cuCtxPopCurrent) rather than from the operation itself.
func isPopFailure(err error) bool {
	var r *cudadrv.Result
	return errors.As(err, &r) && r.Call == "cuCtxPopCurrent"
}

// queryFailure reports a failed cuEventQuery: the piece it asked about
// failed, and progress reports it on that piece's operation.
func queryFailure(err error) bool {
	var r *cudadrv.Result
	return errors.As(err, &r) && r.Call == "cuEventQuery"
}

func pick(cond bool, a, b uint64) uint64 {
	if cond {
		return a
	}
	return b
}

// waitQueued waits for pieces already issued by an operation that then
// failed, so that an error return never leaves a copy running on the
// caller's buffers. The pieces still complete through progress. A slot
// released meanwhile waited for them itself; one dropped has no copies.
func (i *Iface) waitQueued(issued []pieceRef, lane int32) {
	if len(issued) == 0 {
		return
	}
	i.lock()
	defer i.unlock()
	for _, p := range issued {
		r := &i.res[p.slot]
		stream := i.slots[p.slot].Stream[p.kind]
		if id, ctx, l := i.slots[p.slot].Identity(); id != p.id || ctx != r.ctx || l != lane || stream == 0 {
			continue // released (it waited for them) or dropped, maybe reused since
		}
		if err := i.drv.StreamSynchronize(r.ctx, stream); err != nil {
			logf(LogWarn, "waiting for a failed operation's pieces on device %d: %v", r.device, err)
		}
	}
}

// pieceRef is a queued piece of the operation being issued.
type pieceRef struct {
	slot, kind int32
	id         uint64 // the slot's context id when the piece was queued
	event      cudadrv.Event
	seq        uint64 // its sequence number in its queue
}

// Close waits for the copies in flight and releases every resource.
// Pending completions are dropped.
func (i *Iface) Close() error {
	i.lock()
	defer i.unlock()
	if i.closed.Load() {
		return errorf(ErrHandle, "iface_close", "iface is already closed")
	}
	if i.ctx.cfg.Stats && !i.statsPrinted {
		i.printStats()
		i.statsPrinted = true
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
	if len(errs) > 0 {
		// What could not be released is still held: the iface stays open
		// and close can be called again.
		return &Error{Status: ErrCUDA, Op: "iface_close", Msg: "releasing resources (the iface stays open; call close again)", Err: errors.Join(errs...)}
	}
	i.closed.Store(true)
	i.lockFlushes()
	i.flushes = nil
	i.nflushes.Store(0)
	i.unlockFlushes()
	i.lockReady()
	i.nready.Add(-int64(len(i.ready))) // pending completions are dropped (a batch running keeps its count)
	i.ready = nil
	i.unlockReady()
	if i.fd >= 0 {
		unix.Close(i.fd)
		i.fd = -1
	}
	i.ctx.mu.Lock()
	i.ctx.ifaces--
	i.ctx.mu.Unlock()
	return nil
}

// deinitialized says the driver is already gone (process exit): not an error.
func deinitialized(err error) bool {
	var r *cudadrv.Result
	return errors.As(err, &r) && r.Code == cudadrv.ErrorDeinitialized
}

// sticky says the context carries a sticky error (an illegal address, a
// failed launch, ...): the driver refuses every later call on it, releases
// included, until the program resets it, which frees everything anyway.
func sticky(err error) bool {
	var r *cudadrv.Result
	if !errors.As(err, &r) {
		return false
	}
	switch r.Code {
	case 700, 709, 710, 714, 715, 716, 717, 718, 719:
		return true
	}
	return false
}

// inc is slot s's incarnation as the driver layer checks it; under mu.
func (i *Iface) inc(s int) cudadrv.Incarnation {
	r := &i.res[s]
	dev := int32(-1)
	if r.ownsPrimary {
		dev = int32(r.device)
	}
	return cudadrv.Incarnation{Ctx: r.ctx, ID: r.id, Canary: i.slots[s].Canary, CanaryID: i.slots[s].CanaryID, PrimaryDevice: dev}
}

// hide takes slot s away from copies: no lookup matches it any more, and
// once the short copies running on it without its lock are done, only the
// holder of mu touches it. No later piece joins one of its queued pieces.
func (i *Iface) hide(s int) {
	r := &i.res[s]
	slot := &i.slots[s]
	i.lockSlot(s)
	slot.SetIdentity(0, 0, 0)
	for k := range r.queues {
		slot.Queried[k] = r.queues[k].issued
	}
	i.unlockSlot(s)
	if i.multi {
		slot.WaitUsers()
	}
}

// releaseSlot waits for slot s's copies, destroys its streams and events,
// gives back its primary-context retain and leaves a tombstone that no
// context matches. Pieces in flight complete normally. If the context's
// incarnation has ended (a reset), nothing is called on it: see dropSlot.
// Under mu.
func (i *Iface) releaseSlot(s int) []error {
	r := &i.res[s]
	if r.dead {
		return nil
	}
	i.claim(s)
	defer i.unclaim(s)
	slot := &i.slots[s]
	if (r.ownsPrimary || slot.Canary != 0) && i.drv.Gone(i.inc(s)) {
		i.dropClaimed(s, ErrCanceled)
		return nil
	}
	i.hide(s) // what a failed release leaves stays hidden, for another attempt
	var errs []error
	failed := func(what string, err error) bool {
		if err == nil || deinitialized(err) {
			return false
		}
		if sticky(err) { // released by the program's reset of the sick context
			logf(LogInfo, "%s on device %d (context id %d, sick): %v; left to the context's reset", what, r.device, r.id, err)
			return false
		}
		errs = append(errs, fmt.Errorf("%s on device %d: %w", what, r.device, err))
		return true
	}
	pieces := OK // how the pieces in flight ended
	for _, stream := range slot.Stream {
		// A sick context (a sticky error) cannot be synchronized: its
		// copies failed. That is their status, not a release error.
		if stream != 0 {
			if err := i.drv.StreamSynchronize(r.ctx, stream); err != nil && !deinitialized(err) {
				logf(LogInfo, "synchronizing a stream of device %d (context id %d) before release: %v", r.device, r.id, err)
				pieces = ErrCUDA
			}
		}
	}
	i.lockSlot(s) // flushes read the queues' counters under it
	for k := range r.queues {
		q := &r.queues[k]
		for q.count > 0 {
			ev, op := q.pop()
			r.free = append(r.free, ev)
			i.finish(op, pieces) // its stream was synchronized
		}
	}
	i.unlockSlot(s)
	if slot.Event != 0 {
		r.free = append(r.free, slot.Event)
		slot.Event = 0
	}
	// Whatever fails to be released stays recorded, for another attempt.
	kept := r.free[:0]
	for _, ev := range r.free {
		if failed("destroying an event", i.drv.EventDestroy(r.ctx, ev)) {
			kept = append(kept, ev)
		}
	}
	r.free = kept
	r.events = len(kept) // the queues are empty: the kept ones are all it still has
	for k, stream := range slot.Stream {
		if stream != 0 && !failed("destroying a stream", i.drv.StreamDestroy(r.ctx, stream)) {
			slot.Stream[k] = 0
		}
	}
	if slot.Canary != 0 && !failed("freeing the generation canary", i.drv.MemFree(r.ctx, cudadrv.MemDevice, slot.Canary)) {
		slot.Canary = 0
	}
	if len(errs) > 0 {
		return errs
	}
	if r.ownsPrimary && failed("releasing the primary context", i.drv.PrimaryRelease(r.device)) {
		return errs
	}
	i.bury(s)
	return nil
}

// dropSlot forgets slot s of a context whose incarnation ended, without a
// single call on it: its pieces in flight fail with st, its streams and
// events die with the context. Under mu.
func (i *Iface) dropSlot(s int, st Status) {
	i.claim(s)
	defer i.unclaim(s)
	i.dropClaimed(s, st)
}

// dropClaimed is dropSlot with the slot claimed.
func (i *Iface) dropClaimed(s int, st Status) {
	r := &i.res[s]
	i.hide(s)
	pieces := 0
	i.lockSlot(s) // flushes read the queues' counters under it
	for k := range r.queues {
		q := &r.queues[k]
		for q.count > 0 {
			_, op := q.pop()
			i.finish(op, st)
			pieces++
		}
	}
	i.unlockSlot(s)
	logf(LogInfo, "context id %d of device %d ended (reset, or the driver deinitialized): %d piece(s) in flight canceled, its streams and events dropped without driver calls", r.id, r.device, pieces)
	if r.ownsPrimary {
		// Allowed after a reset: "it is safe ... to call cuDevicePrimaryCtxRelease() even after resetting".
		if err := i.drv.PrimaryRelease(r.device); err != nil && !deinitialized(err) {
			logf(LogInfo, "releasing the primary context of device %d after its reset: %v", r.device, err)
		}
	}
	i.bury(s)
}

// bury turns hidden slot s into a tombstone that addSlot reuses. Its
// queues' counters stay, so the flushes and sequence numbers that named its
// pieces stay settled. Under mu and the claim.
func (i *Iface) bury(s int) {
	r := &i.res[s]
	i.lockSlot(s)
	slot := &i.slots[s]
	slot.Stream, slot.Event = [cudadrv.NumKinds]cudadrv.Stream{}, 0
	slot.Peer, slot.NPeers = [cudadrv.MaxPeers]cudadrv.Context{}, 0
	slot.Canary, slot.CanaryID, slot.Device = 0, 0, 0
	r.ctx, r.id, r.ownsPrimary, r.dead = 0, 0, false, true
	r.events, r.free = 0, nil
	for k := range r.queues {
		r.queues[k] = eventQueue{issued: r.queues[k].issued, done: r.queues[k].done}
	}
	for k := range r.ops {
		r.ops[k].Store(0)
		r.bytes[k].Store(0)
	}
	i.unlockSlot(s)
	i.completeFlushes()
}

// ReleaseContext releases, now, everything the iface holds in the context
// with id (cucopy_iface_release_context): call it before destroying a
// context the program created. Copies in flight there complete first. An id
// the iface holds nothing for is not an error.
func (i *Iface) ReleaseContext(id uint64) error {
	i.lock()
	defer i.unlock()
	if i.closed.Load() {
		return errorf(ErrHandle, "iface_release_context", "iface is closed")
	}
	for s := range int(i.nslots.Load()) {
		if r := &i.res[s]; !r.dead && r.id == id {
			if errs := i.releaseSlot(s); len(errs) > 0 {
				return &Error{Status: ErrCUDA, Op: "iface_release_context", Msg: fmt.Sprintf("context id %d", id), Err: errors.Join(errs...)}
			}
		}
	}
	return nil
}

func (i *Iface) printStats() {
	var b strings.Builder
	fmt.Fprintf(&b, "cucopy stats: iface closed; cpu copies %d (%d bytes)\n", i.cpuOps.Load(), i.cpuBytes.Load())
	for s := range int(i.nslots.Load()) {
		r := &i.res[s]
		if r.dead {
			continue
		}
		fmt.Fprintf(&b, "  device %d context id %d", r.device, r.id)
		if i.params.Lanes > 1 {
			fmt.Fprintf(&b, " lane %d", i.slots[s].Lane)
		}
		fmt.Fprintf(&b, ": events %d", r.events)
		for k := 0; k < cudadrv.NumKinds; k++ {
			if n := r.ops[k].Load(); n > 0 {
				fmt.Fprintf(&b, ", %s %d ops %d bytes", cudadrv.KindName(k), n, r.bytes[k].Load())
			}
		}
		b.WriteString("\n")
	}
	now := goActivity()
	fmt.Fprintf(&b, "  Go runtime while open: %d heap allocations, %d GC cycles (process-wide)\n",
		now[0].Value.Uint64()-i.goAtOpen[0].Value.Uint64(), now[1].Value.Uint64()-i.goAtOpen[1].Value.Uint64())
	os.Stderr.WriteString(b.String())
}

// goActivity reads the Go runtime's allocation and GC counters: the noise a
// library adds to a bulk-synchronous HPC code.
func goActivity() [2]metrics.Sample {
	s := [2]metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s[:])
	return s
}
