// SPDX-License-Identifier: BSD-3-Clause

package cudadrv

// The Go mirrors of the C structs (Slot, CopyOp, Piece, MemDesc, MemInfo,
// Incarnation, QueueQuery, SlotQuery) agree with cd_shim.h byte for byte:
// checked at compile time.

/*
#include "cd_shim.h"
*/
import "C"

import "unsafe"

// Each line compiles only when its two sides are equal: the index of a
// one-element array must be the constant 0 (a difference below zero does
// not compile either).
var (
	_ = [1]struct{}{}[unsafe.Sizeof(Slot{})-C.sizeof_cd_slot]
	_ = [1]struct{}{}[unsafe.Offsetof(Slot{}.Device)-unsafe.Offsetof(C.cd_slot{}.device)]
	_ = [1]struct{}{}[unsafe.Offsetof(Slot{}.lock)-unsafe.Offsetof(C.cd_slot{}.lock)]
	_ = [1]struct{}{}[unsafe.Offsetof(Slot{}.users)-unsafe.Offsetof(C.cd_slot{}.users)]
	_ = [1]struct{}{}[unsafe.Offsetof(Slot{}.Lane)-unsafe.Offsetof(C.cd_slot{}.lane)]
	_ = [1]struct{}{}[unsafe.Offsetof(Slot{}.Fence)-unsafe.Offsetof(C.cd_slot{}.fence)]
	_ = [1]struct{}{}[unsafe.Offsetof(Slot{}.Queried)-unsafe.Offsetof(C.cd_slot{}.queried)]
	_ = [1]struct{}{}[unsafe.Offsetof(Slot{}.Issued)-unsafe.Offsetof(C.cd_slot{}.issued)]
	_ = [1]struct{}{}[unsafe.Offsetof(Slot{}.CanaryID)-unsafe.Offsetof(C.cd_slot{}.canary_id)]
	_ = [1]struct{}{}[unsafe.Offsetof(Slot{}.Scratch)-unsafe.Offsetof(C.cd_slot{}.scratch)]
	_ = [1]struct{}{}[unsafe.Offsetof(Slot{}.ScratchSize)-unsafe.Offsetof(C.cd_slot{}.scratch_size)]
	_ = [1]struct{}{}[unsafe.Offsetof(Slot{}.ScratchOff)-unsafe.Offsetof(C.cd_slot{}.scratch_off)]
	_ = [1]struct{}{}[unsafe.Offsetof(Slot{}.Counts)-unsafe.Offsetof(C.cd_slot{}.counts)]
	_ = [1]struct{}{}[unsafe.Offsetof(Slot{}.freeEv)-unsafe.Offsetof(C.cd_slot{}.free_ev)]
	_ = [1]struct{}{}[unsafe.Offsetof(Slot{}.nfree)-unsafe.Offsetof(C.cd_slot{}.nfree)]
	_ = [1]struct{}{}[unsafe.Offsetof(Slot{}.inbox)-unsafe.Offsetof(C.cd_slot{}.inbox)]
	_ = [1]struct{}{}[unsafe.Sizeof(Booking{})-C.sizeof_cd_booking]
	_ = [1]struct{}{}[unsafe.Offsetof(Booking{}.Comp)-unsafe.Offsetof(C.cd_booking{}.comp)]
	_ = [1]struct{}{}[unsafe.Offsetof(Booking{}.Kind)-unsafe.Offsetof(C.cd_booking{}.kind)]
	_ = [1]struct{}{}[unsafe.Sizeof(inbox{})-C.sizeof_cd_inbox]
	_ = [1]struct{}{}[unsafe.Offsetof(inbox{}.b)-unsafe.Offsetof(C.cd_inbox{}.b)]
	_ = [1]struct{}{}[unsafe.Sizeof(Counts{})-C.sizeof_cd_counts]
	_ = [1]struct{}{}[unsafe.Offsetof(Counts{}.Bytes)-unsafe.Offsetof(C.cd_counts{}.bytes)]

	_ = [1]struct{}{}[unsafe.Sizeof(FastIface{})-C.sizeof_cd_fast_iface]
	_ = [1]struct{}{}[unsafe.Offsetof(FastIface{}.queries)-unsafe.Offsetof(C.cd_fast_iface{}.queries)]
	_ = [1]struct{}{}[unsafe.Offsetof(FastIface{}.NSlots)-unsafe.Offsetof(C.cd_fast_iface{}.nslots)]
	_ = [1]struct{}{}[unsafe.Offsetof(FastIface{}.cap)-unsafe.Offsetof(C.cd_fast_iface{}.cap)]
	_ = [1]struct{}{}[unsafe.Offsetof(FastIface{}.open)-unsafe.Offsetof(C.cd_fast_iface{}.open)]
	_ = [1]struct{}{}[unsafe.Offsetof(FastIface{}.users)-unsafe.Offsetof(C.cd_fast_iface{}.users)]
	_ = [1]struct{}{}[unsafe.Sizeof(FastIface{}.users[0])-64]
	_ = [1]struct{}{}[unsafe.Offsetof(FastIface{}.runFlags)-unsafe.Offsetof(C.cd_fast_iface{}.run_flags)]
	_ = [1]struct{}{}[unsafe.Offsetof(FastIface{}.runs)-unsafe.Offsetof(C.cd_fast_iface{}.runs)]
	_ = [1]struct{}{}[unsafe.Offsetof(FastIface{}.stageMin)-unsafe.Offsetof(C.cd_fast_iface{}.stage_min)]
	_ = [1]struct{}{}[unsafe.Offsetof(FastIface{}.ctxSerial)-unsafe.Offsetof(C.cd_fast_iface{}.ctx_serial)]
	_ = [1]struct{}{}[unsafe.Offsetof(FastIface{}.stageSmall)-unsafe.Offsetof(C.cd_fast_iface{}.stage_small)]

	_ = [1]struct{}{}[unsafe.Sizeof(CopyOp{})-C.sizeof_cd_copy_op]
	_ = [1]struct{}{}[unsafe.Offsetof(CopyOp{}.ReuseEvent)-unsafe.Offsetof(C.cd_copy_op{}.reuse_event)]
	_ = [1]struct{}{}[unsafe.Offsetof(CopyOp{}.ReuseSeq)-unsafe.Offsetof(C.cd_copy_op{}.reuse_seq)]
	_ = [1]struct{}{}[unsafe.Offsetof(CopyOp{}.Lane)-unsafe.Offsetof(C.cd_copy_op{}.lane)]
	_ = [1]struct{}{}[unsafe.Offsetof(CopyOp{}.Dir)-unsafe.Offsetof(C.cd_copy_op{}.dir)]
	_ = [1]struct{}{}[unsafe.Offsetof(CopyOp{}.Taken)-unsafe.Offsetof(C.cd_copy_op{}.taken)]
	_ = [1]struct{}{}[unsafe.Offsetof(CopyOp{}.Slot)-unsafe.Offsetof(C.cd_copy_op{}.slot)]
	_ = [1]struct{}{}[unsafe.Offsetof(CopyOp{}.Ctx)-unsafe.Offsetof(C.cd_copy_op{}.ctx)]
	_ = [1]struct{}{}[unsafe.Offsetof(CopyOp{}.SeenPrimary)-unsafe.Offsetof(C.cd_copy_op{}.seen_primary)]
	_ = [1]struct{}{}[unsafe.Offsetof(CopyOp{}.Err)-unsafe.Offsetof(C.cd_copy_op{}.err)]
	_ = [1]struct{}{}[unsafe.Offsetof(CopyOp{}.StageMin)-unsafe.Offsetof(C.cd_copy_op{}.stage_min)]
	_ = [1]struct{}{}[unsafe.Offsetof(CopyOp{}.Height)-unsafe.Offsetof(C.cd_copy_op{}.height)]
	_ = [1]struct{}{}[unsafe.Offsetof(CopyOp{}.SrcPitch)-unsafe.Offsetof(C.cd_copy_op{}.src_pitch)]
	_ = [1]struct{}{}[unsafe.Offsetof(CopyOp{}.DstPitch)-unsafe.Offsetof(C.cd_copy_op{}.dst_pitch)]
	_ = [1]struct{}{}[unsafe.Offsetof(CopyOp{}.PackBelow)-unsafe.Offsetof(C.cd_copy_op{}.pack_below)]
	_ = [1]struct{}{}[unsafe.Offsetof(CopyOp{}.StageSmall)-unsafe.Offsetof(C.cd_copy_op{}.stage_small)]
	_ = [1]struct{}{}[unsafe.Sizeof(CallError{})-C.sizeof_cd_err]
	_ = [1]struct{}{}[unsafe.Offsetof(CopyOp{}.SrcMem)-unsafe.Offsetof(C.cd_copy_op{}.src_mem)]
	_ = [1]struct{}{}[unsafe.Offsetof(CopyOp{}.DstMem)-unsafe.Offsetof(C.cd_copy_op{}.dst_mem)]
	_ = [1]struct{}{}[unsafe.Offsetof(Piece{}.SrcMem)-unsafe.Offsetof(C.cd_piece{}.src_mem)]
	_ = [1]struct{}{}[unsafe.Offsetof(MemDesc{}.Size)-unsafe.Offsetof(C.cd_mdesc{}.size)]
	_ = [1]struct{}{}[unsafe.Offsetof(MemDesc{}.Ctx)-unsafe.Offsetof(C.cd_mdesc{}.ctx)]
	_ = [1]struct{}{}[unsafe.Offsetof(MemDesc{}.Type)-unsafe.Offsetof(C.cd_mdesc{}._type)]
	_ = [1]struct{}{}[unsafe.Offsetof(MemDesc{}.Managed)-unsafe.Offsetof(C.cd_mdesc{}.managed)]
	_ = [1]struct{}{}[unsafe.Offsetof(MemDesc{}.Ordinal)-unsafe.Offsetof(C.cd_mdesc{}.ordinal)]
	_ = [1]struct{}{}[unsafe.Sizeof(Piece{})-C.sizeof_cd_piece]
	_ = [1]struct{}{}[unsafe.Offsetof(Piece{}.DstMem)-unsafe.Offsetof(C.cd_piece{}.dst_mem)]
	_ = [1]struct{}{}[unsafe.Offsetof(Piece{}.Height)-unsafe.Offsetof(C.cd_piece{}.height)]
	_ = [1]struct{}{}[unsafe.Offsetof(Piece{}.DstPitch)-unsafe.Offsetof(C.cd_piece{}.dst_pitch)]
	_ = [1]struct{}{}[unsafe.Sizeof(MemDesc{})-C.sizeof_cd_mdesc]
	_ = [1]struct{}{}[unsafe.Offsetof(MemDesc{}.CtxID)-unsafe.Offsetof(C.cd_mdesc{}.ctx_id)]
	_ = [1]struct{}{}[unsafe.Offsetof(MemDesc{}.PrimaryDevice)-unsafe.Offsetof(C.cd_mdesc{}.primary_dev)]

	_ = [1]struct{}{}[unsafe.Sizeof(MemInfo{})-C.sizeof_cd_mem_info]
	_ = [1]struct{}{}[unsafe.Offsetof(MemInfo{}.Type)-unsafe.Offsetof(C.cd_mem_info{}._type)]
	_ = [1]struct{}{}[unsafe.Offsetof(MemInfo{}.BufferID)-unsafe.Offsetof(C.cd_mem_info{}.buffer_id)]
	_ = [1]struct{}{}[unsafe.Offsetof(MemInfo{}.VMMLocationID)-unsafe.Offsetof(C.cd_mem_info{}.vmm_location_id)]

	_ = [1]struct{}{}[unsafe.Sizeof(Incarnation{})-C.sizeof_cd_inc]
	_ = [1]struct{}{}[unsafe.Offsetof(Incarnation{}.PrimaryDevice)-unsafe.Offsetof(C.cd_inc{}.primary_dev)]

	_ = [1]struct{}{}[unsafe.Sizeof(QueueQuery{})-C.sizeof_cd_queue_query]
	_ = [1]struct{}{}[unsafe.Offsetof(QueueQuery{}.N)-unsafe.Offsetof(C.cd_queue_query{}.n)]
	_ = [1]struct{}{}[unsafe.Offsetof(QueueQuery{}.Flags)-unsafe.Offsetof(C.cd_queue_query{}.flags)]
	_ = [1]struct{}{}[unsafe.Offsetof(QueueQuery{}.Done)-unsafe.Offsetof(C.cd_queue_query{}.done)]
	_ = [1]struct{}{}[unsafe.Offsetof(QueueQuery{}.Err)-unsafe.Offsetof(C.cd_queue_query{}.err)]
	_ = [1]struct{}{}[unsafe.Sizeof(SlotQuery{})-C.sizeof_cd_slot_query]
	_ = [1]struct{}{}[unsafe.Offsetof(SlotQuery{}.Next)-unsafe.Offsetof(C.cd_slot_query{}.next)]
	_ = [1]struct{}{}[unsafe.Offsetof(SlotQuery{}.Gone)-unsafe.Offsetof(C.cd_slot_query{}.gone)]
	_ = [1]struct{}{}[unsafe.Offsetof(SlotQuery{}.Queue)-unsafe.Offsetof(C.cd_slot_query{}.queue)]
)
