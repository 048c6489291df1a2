// SPDX-License-Identifier: BSD-3-Clause

package cudadrv

// The copy protocol: Interface.Copy's request and outcome (CopyOp), its
// flags and statuses. This is the one full description; cd_copy
// (cd_copy.c) implements it, fakedrv ports it, and both point here.
//
// One Copy call runs one piece (a contiguous range) of an operation:
//
//  1. Classify both addresses (cuPointerGetAttributes: type, owning
//     context, device ordinal, managed, allocation range). Host memory is
//     memory CUDA does not know (pageable) and CUDA-known host memory with
//     an owning context (cuMemHostAlloc, cuMemHostRegister); managed
//     memory and host-located VMM memory (HOST, no context) are
//     device-side. A device-side range that crosses the end of its
//     allocation is CopyOutOfRange, source checked first (Side 0 src, 1
//     dst): refused instead of faulting the GPU. A side with a memory
//     handle (SrcMem, DstMem > 0; Piece's too) is not queried: it is
//     mems[SrcMem-1] (MemDesc), and the caller checked that the range lies
//     inside the handle's.
//  2. Both sides host memory, or CopyForceCPU: CopyCPU. Nothing is issued
//     and no context touched; the caller copies on the CPU (where a fault
//     on a freed address can become an error).
//  3. The kind and context. H2D runs on the destination's context, D2H on
//     the source's; device to device on the source's, KindD2D when the
//     destination runs on the same context, else KindPeer with PeerCtx the
//     destination's. A buffer runs on its owning context; memory with none
//     (VMM, pools) on primary[its ordinal] when that is set; managed memory
//     with none on Ctx when the caller set CopyFallbackCtx and Ctx, else on
//     the calling thread's current context. Otherwise CopyNeedPrimary with
//     Device the ordinal (-1 for managed memory: unknown) and SeenPrimary
//     0: the caller retains that device's primary context into primary[],
//     or for Device -1 sets CopyFallbackCtx or CopyForceCPU, and retries.
//  4. The context's id: cuCtxGetId (the handle on drivers without it), or
//     for a context that owns a described side, that MemDesc's CtxID
//     (checked as MemDesc says: CopyStaleMemh). A
//     context in primary[d] whose cuCtxGetId says CONTEXT_IS_DESTROYED is
//     a retained primary context reset since (the handle persists):
//     CopyNeedPrimary with Device d and SeenPrimary that context; the
//     caller looks at device d again unless primary[d] changed meanwhile.
//     From here on Ctx, CtxID and Kind (KindShort with CopySync) are set.
//  5. The slot: slots[i] whose (CtxID, Ctx, Lane) equals (id, context,
//     op.Lane), found without a lock. None: CopyNeedSlot (Slot -1, Device
//     -1); the caller adds one (Slot.SetIdentity) and retries. From here on
//     Slot is set.
//  6. CopyLock (multi-thread ifaces): take the slot's lock word and check
//     its identity again (emptied meanwhile: CopyNeedSlot). The lock comes
//     back held on CopyQueued and CopyJoined, for the caller to book the
//     piece and release it; it is released on every other status.
//  7. What the slot lacks, in this order: CopyStale (drivers without
//     cuCtxGetId: the slot's canary says its context's incarnation ended;
//     the caller drops the slot); CopyNeedPeer (KindPeer and PeerCtx not in
//     Peer[:NPeers]; the caller tries EnablePeer once and records PeerCtx
//     there, the driver stages the copy if that failed); CopyNeedStream
//     (Stream[Kind] is 0); CopyNeedFence (bit Kind of Slot.Fence is set: a
//     fence was issued since this stream's last copy; the caller makes the
//     stream wait for the work before the fence, clears the bit and
//     retries); then, with CopyPlan (a zcopy), CopyPlanned: Slot, Kind,
//     CtxID and Taken (the run, as below) say where the piece would go,
//     nothing is issued and no event is taken, and the lock is released;
//     then for a zcopy piece the event. The piece
//     joins the previous one (CopyReuse, ReuseSlot == Slot, ReuseKind ==
//     Kind, ReuseSeq > Queried[Kind]: progress has not queried that queue
//     entry, so its event may still be re-recorded, and ReuseSeq ==
//     Issued[Kind]: it is the newest entry of its queue, so that every
//     entry stays last recorded after every earlier one's): it re-records
//     ReuseEvent. Otherwise it takes Slot.Event; 0 is CopyNeedEvent.
//     A zcopy piece also takes a run: the pieces of `more` (the
//     operation's next pieces) that follow it without a break on the same
//     context, kind and peer context, none of them managed memory (the
//     batch's location hints could not be given for it), crossing its
//     allocation's end or failing to classify (the piece's own call
//     reports that), at most CD_MAX_RUN in all. Taken says how many.
//     Staging: a piece (zcopy or short) of at least StageMin bytes (not 0)
//     with pageable host memory is CopyNeedStage after the fence check,
//     before the plan (a plan counts no event for it) and the event:
//     nothing is issued, Taken is 0, the lock
//     is released and the caller stages the piece itself through pinned
//     bounce buffers on Stream[Kind] (core/stage.go, StageStep). A run
//     stops before such a piece: its own call stages it. Small staging:
//     a contiguous D2H piece (zcopy or short) into pageable host memory
//     whose StageSpan is at most StageSmall (not 0), not staged as above,
//     is CopyNeedStage too, at the same point, and a zcopy piece's run
//     then takes the pieces of `more` that run with it (as below) and are
//     themselves such pieces, while the spans of the run's pieces add up
//     to at most StageSmall; Taken says how many. The caller copies the
//     run into one bounce buffer (piece k at the sum of the earlier spans)
//     in one StageStep, waits for it, and copies each piece out. A piece
//     whose run takes no other piece (a short copy, a single entry) is not
//     staged this way after all: it goes on as if StageSmall were 0 but
//     takes no run (on an H200 the driver's path was 0.8-1.6 us faster
//     for one copy, and 4-5 x slower for 16). Any other run stops before
//     such a piece: its own call stages it, or issues it alone.
//  8. Issue: push the context if it is not current, cuMemcpyAsync on
//     Stream[Kind] (a run: one cuMemcpyBatchAsync where the driver has it
//     and CopyRunLoop is not set, else one cuMemcpyAsync per piece; the
//     batch's copies run in no set order among themselves, the batch as a
//     whole in stream order; a run that fails part-way synchronizes the
//     stream), then cuEventRecord (zcopy; if that fails the stream is
//     synchronized, so no copy runs on the caller's buffers after an
//     error) or cuStreamSynchronize (CopySync), pop if pushed. A short copy
//     with CopyLock gives the lock up first and counts itself a user of
//     the slot (Slot.WaitUsers). So does, with CopyLock, a zcopy piece
//     whose run has pageable host memory (CUDA does not know it: the
//     driver stages it inside the enqueue, which can block for
//     milliseconds, and no thread may spin on a lock held meanwhile): it
//     never joins, takes Slot.Event and sets Slot.Event to 0 before it
//     gives the lock up, and sets Detached. Issued, it takes the lock
//     again for the caller as for any CopyQueued; the caller books the
//     piece (refilling Slot.Event only if it is still 0), releases the
//     lock and then counts itself out of the users (Slot.DoneUser). On
//     CopyDriverError it returns without the lock, Event the event it
//     took, for the caller to give back before counting itself out.
//     Outcomes: CopyDone (short), CopyQueued
//     (Event is Slot.Event, now recorded after the piece: the caller pushes
//     it on the context's queue Kind, whose sequence number becomes the
//     next piece's ReuseSeq, and refills Slot.Event), CopyJoined (Event is
//     ReuseEvent: that queue entry now stands for both pieces). A failed
//     call is CopyDriverError with Err; a failed pop after an issued copy
//     keeps its status and sets Err (EntryCtxPopCurrent).
//
// 2-D pieces (Height > 0; ep_copy_2d): Height rows of Len bytes, row i at
// Src + i*SrcPitch and Dst + i*DstPitch. They follow the same steps with
// these differences: step 1 checks each side's span [p, p + (Height-1) *
// pitch + Len) against its allocation; step 2 answers CopyCPU as usual (the
// caller copies row by row); a 2-D piece never takes a run and no run takes
// it (cd_extend_run stops before it), and is never staged by the library
// (StageMin does not apply: the driver stages pageable rows itself); step 8
// issues one cuMemcpy2DAsync.
//
// The pack path: a 2-D zcopy piece with Len < PackBelow (not 0; no
// CopyNoPack), KindD2H or KindH2D, whose device side is not managed memory
// and whose host side is CUDA-known (not pageable) with its rows packed
// (its pitch == Len), moves its rows inside the device through the slot's
// Scratch[Kind]: D2H one cuMemcpy2DAsync from the source rows into the
// scratch, packed, then one cuMemcpyAsync of Len*Height bytes from it to
// the host; H2D the reverse. Both go on Stream[Kind] before the event is
// recorded, and only that stream uses that scratch, so stream order keeps
// the operations' uses of it apart; a failure after the first copy
// synchronizes the stream. Step 7 checks, after the stage check and before
// the plan: bit Kind of ScratchOff set is a plain 2-D copy; else a
// ScratchSize[Kind] below Len*Height is CopyNeedScratch (nothing issued,
// the lock released): the caller makes or grows the scratch under the
// slot's lock, sets ScratchOff's bit when it cannot, or sets CopyNoPack
// for a piece larger than it allows, and retries.
//
// Progress (QuerySlots) raises Queried[k] under the slot's lock before it
// queries queue k's entries, so a piece never re-records an event that
// progress may already have seen complete and popped; the core sets
// Issued[k] under the lock when it books a piece (CopyQueued).

/*
#include "cd_shim.h"
*/
import "C"

// Copy flags (CD_COPY_*); the protocol above says what each one does.
const (
	CopySync        = C.CD_COPY_SYNC         // short: the short stream, then synchronize
	CopyForceCPU    = C.CD_COPY_FORCE_CPU    // managed memory without a usable context: CopyCPU
	CopyFallbackCtx = C.CD_COPY_FALLBACK_CTX // managed memory without an owning context runs on Ctx
	CopyReuse       = C.CD_COPY_REUSE        // the previous piece went to (ReuseSlot, ReuseKind) as ReuseSeq
	CopyLock        = C.CD_COPY_LOCK         // take the slot's lock; held on Queued and Joined
	CopyRunLoop     = C.CD_COPY_RUN_LOOP     // issue a run with one cuMemcpyAsync per piece, not a batch
	CopyPlan        = C.CD_COPY_PLAN         // zcopy: say where the piece and its run would go, issue nothing
	CopyNoPack      = C.CD_COPY_NO_PACK      // a 2-D piece never takes the pack path
)

// MaxRun is the most pieces one Copy issues (its own and Taken of more).
const MaxRun = C.CD_MAX_RUN

// Piece is one later piece of an operation, which may join the run of a
// Copy (struct cd_piece).
type Piece struct {
	Dst, Src, Len      uint64
	SrcMem, DstMem     int32  // as CopyOp's
	Height             uint64 // as CopyOp's: 0 for a contiguous piece
	SrcPitch, DstPitch uint64
}

// MemDesc is a range classified once, by a memory handle (struct cd_mdesc):
// what step 1 says of any address inside it, the owning context's id, and
// PrimaryDevice >= 0 when that context is the device's primary context. A
// piece side that names one (CopyOp.SrcMem, DstMem: 1 + an index into
// Copy's mems) is not queried: step 1 takes the description; step 4 takes CtxID
// as the owning context's id, checking it with cuCtxGetId only for a
// primary context (whose handle outlives a reset): a new id, or none, is
// CopyStaleMemh with Side the stale side. A context the program created
// is not checked (touching a destroyed one is undefined): the program
// releases handles to its memory before destroying it.
type MemDesc struct {
	Start, Size   uint64
	Ctx           Context
	CtxID         uint64
	Type, Managed uint32
	Ordinal       int32
	PrimaryDevice int32
}

// CopyStatus is the outcome of Interface.Copy (CD_COPY_*).
type CopyStatus int32

const (
	CopyDone        CopyStatus = C.CD_COPY_DONE         // a synchronized short copy finished
	CopyQueued      CopyStatus = C.CD_COPY_QUEUED       // issued on Slot, Kind; Event recorded after it
	CopyNeedSlot    CopyStatus = C.CD_COPY_NEED_SLOT    // context Ctx (CtxID) has no slot for Lane
	CopyNeedStream  CopyStatus = C.CD_COPY_NEED_STREAM  // slot Slot lacks the stream of Kind
	CopyNeedEvent   CopyStatus = C.CD_COPY_NEED_EVENT   // slot Slot has no free event
	CopyNeedPrimary CopyStatus = C.CD_COPY_NEED_PRIMARY // no context for memory on Device (-1 unknown)
	CopyNeedPeer    CopyStatus = C.CD_COPY_NEED_PEER    // peer access from Slot to PeerCtx not tried yet
	CopyOutOfRange  CopyStatus = C.CD_COPY_OUT_OF_RANGE // a range crosses its allocation's end (Side)
	CopyDriverError CopyStatus = C.CD_COPY_DRIVER_ERROR // Err names the failed call
	CopyJoined      CopyStatus = C.CD_COPY_JOINED       // issued on Slot, Kind; ReuseEvent re-recorded after it
	CopyCPU         CopyStatus = C.CD_COPY_CPU          // both sides host memory: the caller copies on the CPU
	CopyStale       CopyStatus = C.CD_COPY_STALE        // slot Slot matched by handle, but its incarnation ended
	CopyNeedFence   CopyStatus = C.CD_COPY_NEED_FENCE   // Stream[Kind] of slot Slot must wait for a fence first (Slot.Fence)
	CopyPlanned     CopyStatus = C.CD_COPY_PLANNED      // CopyPlan: Slot, Kind and Taken say where it would go
	CopyStaleMemh   CopyStatus = C.CD_COPY_STALE_MEMH   // the memory handle of Side names a primary context reset since
	CopyNeedStage   CopyStatus = C.CD_COPY_NEED_STAGE   // StageMin: the caller stages the piece on Stream[Kind] of Slot
	CopyNeedScratch CopyStatus = C.CD_COPY_NEED_SCRATCH // the pack path: Scratch[Kind] of Slot is missing or too small
)

// CallError is a failed driver call as the C side reports it (struct
// cd_err); Interface.Error turns it into a *Result.
type CallError struct {
	Entry  Entry // EntryNone for none
	Result uint32
}

// CopyOp is one copy request and its outcome (struct cd_copy_op), as the
// protocol above uses its fields.
type CopyOp struct {
	// In.
	Dst, Src, Len uint64
	Flags         uint32
	NDevices      int32 // len(primary); Copy sets it
	ReuseSlot     int32
	ReuseKind     int32
	ReuseEvent    Event
	ReuseSeq      uint64 // the previous piece's queue entry, by sequence number
	Lane          int32  // the endpoint's lane (Slot.Lane)
	Dir           int32  // out: the direction kind (KindH2D to KindPeer), also of a short copy, whose Kind is KindShort
	SrcMem        int32  // 0: classify the source; k > 0: its MemDesc is Copy's mems[k-1]
	DstMem        int32  // the destination's
	// Out (Ctx is also in, with CopyFallbackCtx).
	Taken       int32 // CopyQueued, CopyJoined: the pieces of more issued in this piece's run
	Detached    int32 // 1: issued as a user of the slot without its lock (step 8)
	Slot        int32
	Kind        int32
	Device      int32
	Side        int32
	Ctx         Context
	CtxID       uint64
	PeerCtx     Context
	Event       Event
	SeenPrimary Context // CopyNeedPrimary: the primary context found ended, 0 if none was set
	Err         CallError
	StageMin    uint64 // in: CopyNeedStage for a piece of at least this length with pageable memory; 0 never
	// In: a 2-D piece (Height > 0): Height rows of Len bytes (2-D pieces, above).
	Height    uint64
	SrcPitch  uint64
	DstPitch  uint64
	PackBelow uint64 // in: the pack path for 2-D pieces with Len below this; 0 never
	// In: CopyNeedStage for a D2H piece into pageable memory whose
	// footprint (StageSpan) is at most this, with its run; 0 never.
	StageSmall uint64
}

// StageAlign is what small staging rounds each piece's room in a bounce
// buffer up to (step 7).
const StageAlign = C.CD_STAGE_ALIGN

// StageSpan is the room a piece of n bytes takes in a bounce buffer under
// small staging: piece k of a staged run lies at the sum of the earlier
// pieces' spans.
func StageSpan(n uint64) uint64 { return (n + StageAlign - 1) &^ (StageAlign - 1) }
