! SPDX-License-Identifier: BSD-3-Clause
!
! The blocking collectives with device buffers from Fortran, run under
! LD_PRELOAD=libcucopy_mpi.so (mpirun -n 2 and -n 3; send buffers on device
! 0, receive buffers on device 1, or device 0 again on a one-GPU machine).
! Built three times from this file, as f_p2p.F90: -DCUCOPY_MPIFH (include
! 'mpif.h'), neither (use mpi) and -DCUCOPY_F08 (use mpi_f08). Open MPI's
! Fortran collectives call PMPI_* directly, past the shim's C wrappers: the
! shim's Fortran entry points must catch them.
!
! Every call the shim wraps: Bcast, Reduce, Allreduce, Reduce_local,
! Allgather, Gather, Scatter, Alltoall, Scan, Exscan, Reduce_scatter_block,
! Reduce_scatter, Gatherv, Scatterv, Allgatherv, Alltoallv, Alltoallw (a
! derived type for some peers, byte displacements), roots other than 0,
! every MPI_IN_PLACE form, MPI_SUM and MPI_MAX on INTEGER and DOUBLE
! PRECISION, a user-defined op (MPI_Op_create from Fortran) in Allreduce and
! Reduce, a host send buffer with a device receive buffer, and two refusals
! under MPI_ERRORS_RETURN (a vector type on device memory, MPI_BOTTOM with an
! absolute type reaching device memory). Every result is read back from the
! device (cuMemcpyDtoH), whole buffers: the elements MPI must not write
! (gaps of the v forms, receive buffers off the root, the rest of a short
! block) hold a canary that is checked unchanged. Without the shim the
! first device call (MPI_Bcast) faults inside MPI: the negative control.
!
! Prints "f_coll: rank R: PASS (N checks)", or a "FAIL: f_coll: rank R: ..."
! line per failed check and "f_coll: rank R: FAILED (...)"; exit status 1 on
! a failure.
program f_coll
  use, intrinsic :: iso_c_binding
  use ftest, only: ftd_init, ftd_dev_alloc, ftd_dev_free, ftd_htod, ftd_dtoh, ft_check, &
                   ft_report
#include "f_mpi.h"

  ! K elements per block; NMAX elements in each device buffer.
  integer, parameter :: K = 5, NMAX = 512, CANARY = -777
  double precision, parameter :: DCANARY = -7.5d0
  integer :: rank, np, root, ierr, i, j, r, n, g1, ndev, cls, ierr2, e
  character(len=32) :: who
  integer(c_int64_t) :: as, ar, ads, adr
  integer, pointer, contiguous :: si(:), ri(:)
  double precision, pointer, contiguous :: sd(:), rd(:)
  integer, target :: hi(NMAX), ei(NMAX), hx(NMAX)
  double precision, target :: hd(NMAX), ed(NMAX)
  integer :: cnt(0:63), dsp(0:63), rcnt(0:63), rdsp(0:63)
  DATATYPE :: stypes(0:63), rtypes(0:63), two, absolute
  OP :: plus1
  integer(MPI_ADDRESS_KIND) :: addr(1)
  external :: plus_one

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  write(who, '(a,i0,a)') "f_coll: rank ", rank, ":"
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  ndev = ftd_init()
  if (ndev < 1 .or. np > 64) then
    write(*, '(a)') trim(who) // " FAILED: no device, or more than 64 ranks"
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  g1 = min(1, ndev - 1)
  as = ftd_dev_alloc(0, int(NMAX * 4, c_size_t))
  ar = ftd_dev_alloc(g1, int(NMAX * 4, c_size_t))
  ads = ftd_dev_alloc(0, int(NMAX * 8, c_size_t))
  adr = ftd_dev_alloc(g1, int(NMAX * 8, c_size_t))
  call c_f_pointer(transfer(as, c_null_ptr), si, [NMAX])
  call c_f_pointer(transfer(ar, c_null_ptr), ri, [NMAX])
  call c_f_pointer(transfer(ads, c_null_ptr), sd, [NMAX])
  call c_f_pointer(transfer(adr, c_null_ptr), rd, [NMAX])
  root = np - 1

  ! 1. Bcast: INTEGER on device 1 from root np-1, DOUBLE PRECISION on device 0
  ! from root 1 (mod np).
  call pat(hi, K, root)
  if (rank /= root) hi(1:K) = CANARY
  call put_i(ar, hi)
  call MPI_Bcast(ri, K, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
  call pat(ei, K, root)
  call expect_i(ar, ei, K, ierr, "Bcast INTEGER, root np-1")
  r = mod(1, np)
  call patd(hd, K, r)
  if (rank /= r) hd(1:K) = DCANARY
  call put_d(ads, hd)
  call MPI_Bcast(sd, K, MPI_DOUBLE_PRECISION, r, MPI_COMM_WORLD, ierr)
  call patd(ed, K, r)
  call expect_d(ads, ed, K, ierr, "Bcast DOUBLE PRECISION, root 1")

  ! 2. Reduce: SUM of INTEGER to root np-1 (the receive buffer of the other
  ! ranks is not significant: it keeps its canary); MAX of DOUBLE PRECISION
  ! in place at root 1.
  call pat(hi, K, rank)
  call put_i(as, hi)
  call put_i(ar, canaries(NMAX))
  call MPI_Reduce(si, ri, K, MPI_INTEGER, MPI_SUM, root, MPI_COMM_WORLD, ierr)
  ei = CANARY
  if (rank == root) call sum_pat(ei, K)
  call expect_i(ar, ei, NMAX, ierr, "Reduce SUM INTEGER, root np-1")
  r = mod(1, np)
  call maxd(hd, K, rank)
  call put_d(ads, hd)
  call put_d(adr, hd)
  if (rank == r) then
    call MPI_Reduce(MPI_IN_PLACE, rd, K, MPI_DOUBLE_PRECISION, MPI_MAX, r, MPI_COMM_WORLD, ierr)
  else
    call MPI_Reduce(sd, rd, K, MPI_DOUBLE_PRECISION, MPI_MAX, r, MPI_COMM_WORLD, ierr)
  end if
  call maxd(ed, K, rank)
  if (rank == r) call maxd_all(ed, K)
  call expect_d(adr, ed, K, ierr, "Reduce MAX DOUBLE PRECISION, MPI_IN_PLACE at root 1")

  ! 3. Allreduce: SUM INTEGER, MAX DOUBLE PRECISION, SUM in place, and a host
  ! send buffer into a device receive buffer.
  call pat(hi, K, rank)
  call put_i(as, hi)
  call MPI_Allreduce(si, ri, K, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call sum_pat(ei, K)
  call expect_i(ar, ei, K, ierr, "Allreduce SUM INTEGER")
  call maxd(hd, K, rank)
  call put_d(ads, hd)
  call MPI_Allreduce(sd, rd, K, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  call maxd_all(ed, K)
  call expect_d(adr, ed, K, ierr, "Allreduce MAX DOUBLE PRECISION")
  call pat(hi, K, rank)
  call put_i(ar, hi)
  call MPI_Allreduce(MPI_IN_PLACE, ri, K, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call sum_pat(ei, K)
  call expect_i(ar, ei, K, ierr, "Allreduce SUM INTEGER, MPI_IN_PLACE")
  call pat(hx, K, rank)
  ierr = -1
  call MPI_Allreduce(hx, ri, K, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call sum_pat(ei, K)
  call expect_i(ar, ei, K, ierr, "Allreduce SUM host -> device")
#if defined(CUCOPY_F08)
  ! use mpi_f08: the optional ierror left out (NULL to the wrapper).
  call put_i(as, hi)
  call MPI_Allreduce(si, ri, K, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD)
  call pat(ei, K, np - 1)
  call expect_i(ar, ei, K, MPI_SUCCESS, "Allreduce MAX INTEGER without ierror")
#endif

  ! 4. Reduce_local: SUM INTEGER, MAX DOUBLE PRECISION.
  call pat(hi, K, rank)
  call put_i(as, hi)
  call pat(hi, K, rank + 7)
  call put_i(ar, hi)
  call MPI_Reduce_local(si, ri, K, MPI_INTEGER, MPI_SUM, ierr)
  do i = 1, K
    ei(i) = val(rank, i) + val(rank + 7, i)
  end do
  call expect_i(ar, ei, K, ierr, "Reduce_local SUM INTEGER")
  call maxd(hd, K, rank)
  call put_d(ads, hd)
  call maxd(hd, K, rank + 1)
  call put_d(adr, hd)
  call MPI_Reduce_local(sd, rd, K, MPI_DOUBLE_PRECISION, MPI_MAX, ierr)
  call maxd(ed, K, rank)
  call maxd(hd, K, rank + 1)
  ed(1:K) = max(ed(1:K), hd(1:K))
  call expect_d(adr, ed, K, ierr, "Reduce_local MAX DOUBLE PRECISION")

  ! 5. Allgather, plain and in place (this rank's block already in recvbuf).
  call pat(hi, K, rank)
  call put_i(as, hi)
  call put_i(ar, canaries(NMAX))
  call MPI_Allgather(si, K, MPI_INTEGER, ri, K, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call blocks(ei, K)
  call expect_i(ar, ei, NMAX, ierr, "Allgather")
  hi = CANARY
  call pat(hi(rank * K + 1:), K, rank)
  call put_i(ar, hi)
  call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ri, K, MPI_INTEGER, MPI_COMM_WORLD, &
                     ierr)
  call expect_i(ar, ei, NMAX, ierr, "Allgather MPI_IN_PLACE")

  ! 6. Gather to root np-1, plain and in place at the root.
  call pat(hi, K, rank)
  call put_i(as, hi)
  call put_i(ar, canaries(NMAX))
  call MPI_Gather(si, K, MPI_INTEGER, ri, K, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
  ei = CANARY
  if (rank == root) call blocks(ei, K)
  call expect_i(ar, ei, NMAX, ierr, "Gather, root np-1")
  hi = CANARY
  if (rank == root) call pat(hi(rank * K + 1:), K, rank)
  call put_i(ar, hi)
  if (rank == root) then
    call MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ri, K, MPI_INTEGER, root, &
                    MPI_COMM_WORLD, ierr)
  else
    call MPI_Gather(si, K, MPI_INTEGER, ri, K, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
  end if
  call expect_i(ar, ei, NMAX, ierr, "Gather MPI_IN_PLACE at the root")

  ! 7. Scatter from root np-1, plain and in place at the root (its block of
  ! sendbuf stays where it is; its recvbuf is not written).
  call blocks(hi, K)
  call put_i(as, hi)
  call put_i(ar, canaries(NMAX))
  call MPI_Scatter(si, K, MPI_INTEGER, ri, K, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
  ei = CANARY
  call pat(ei, K, rank)
  call expect_i(ar, ei, NMAX, ierr, "Scatter, root np-1")
  call put_i(ar, canaries(NMAX))
  if (rank == root) then
    call MPI_Scatter(si, K, MPI_INTEGER, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, &
                     MPI_COMM_WORLD, ierr)
    ei = CANARY
    call expect_i(ar, ei, NMAX, ierr, "Scatter MPI_IN_PLACE: the root's recvbuf untouched")
    call blocks(ei, K)
    call expect_i(as, ei, np * K, ierr, "Scatter MPI_IN_PLACE: the root's sendbuf")
  else
    call MPI_Scatter(si, K, MPI_INTEGER, ri, K, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
    call expect_i(ar, ei, NMAX, ierr, "Scatter MPI_IN_PLACE at the root: data")
  end if

  ! 8. Alltoall: block j of rank r is pattern 100 r + j; plain and in place.
  do j = 0, np - 1
    call pat(hi(j * K + 1:), K, 100 * rank + j)
    call pat(ei(j * K + 1:), K, 100 * j + rank)
  end do
  call put_i(as, hi)
  call put_i(ar, canaries(NMAX))
  call MPI_Alltoall(si, K, MPI_INTEGER, ri, K, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  ei(np * K + 1:) = CANARY
  call expect_i(ar, ei, NMAX, ierr, "Alltoall")
  call put_i(ar, hi)
  call MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ri, K, MPI_INTEGER, MPI_COMM_WORLD, &
                    ierr)
  call expect_i(ar, ei, np * K, ierr, "Alltoall MPI_IN_PLACE")

  ! 9. Scan: SUM INTEGER; MAX DOUBLE PRECISION in place.
  call pat(hi, K, rank)
  call put_i(as, hi)
  call MPI_Scan(si, ri, K, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call sum_pat(ei, K, rank)
  call expect_i(ar, ei, K, ierr, "Scan SUM INTEGER")
  call maxd(hd, K, rank)
  call put_d(adr, hd)
  call MPI_Scan(MPI_IN_PLACE, rd, K, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  call maxd_all(ed, K, rank)
  call expect_d(adr, ed, K, ierr, "Scan MAX DOUBLE PRECISION, MPI_IN_PLACE")

  ! 10. Exscan: SUM INTEGER, plain (rank 0's recvbuf keeps its canary: the
  ! shim leaves what the standard leaves undefined as it was) and in place.
  call pat(hi, K, rank)
  call put_i(as, hi)
  call put_i(ar, canaries(NMAX))
  call MPI_Exscan(si, ri, K, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  ei = CANARY
  if (rank > 0) call sum_pat(ei, K, rank - 1)
  call expect_i(ar, ei, NMAX, ierr, "Exscan SUM INTEGER")
  call put_i(ar, hi)
  call MPI_Exscan(MPI_IN_PLACE, ri, K, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank > 0) call expect_i(ar, ei, K, ierr, "Exscan SUM INTEGER, MPI_IN_PLACE")

  ! 11. Reduce_scatter_block: K per rank, SUM; in place.
  do j = 0, np - 1
    call pat(hi(j * K + 1:), K, 100 * rank + j)
  end do
  call put_i(as, hi)
  call put_i(ar, canaries(NMAX))
  call MPI_Reduce_scatter_block(si, ri, K, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  ei = CANARY
  do i = 1, K
    ei(i) = 0
    do r = 0, np - 1
      ei(i) = ei(i) + val(100 * r + rank, i)
    end do
  end do
  call expect_i(ar, ei, NMAX, ierr, "Reduce_scatter_block SUM INTEGER")
  call put_i(ar, hi)
  call MPI_Reduce_scatter_block(MPI_IN_PLACE, ri, K, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call expect_i(ar, ei, K, ierr, "Reduce_scatter_block MPI_IN_PLACE")

  ! 12. Reduce_scatter: rank j gets j + 1 elements; MAX DOUBLE PRECISION, and
  ! SUM INTEGER in place.
  n = 0
  do j = 0, np - 1
    cnt(j) = j + 1
    dsp(j) = n
    n = n + cnt(j)
  end do
  call maxd(hd, n, rank)
  call put_d(ads, hd)
  call put_d(adr, [(DCANARY, i = 1, NMAX)])
  call MPI_Reduce_scatter(sd, rd, cnt, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  call maxd_all(hd, n)
  ed = DCANARY
  ed(1:cnt(rank)) = hd(dsp(rank) + 1:dsp(rank) + cnt(rank))
  call expect_d(adr, ed, NMAX, ierr, "Reduce_scatter MAX DOUBLE PRECISION, uneven")
  call pat(hi, n, rank)
  call put_i(ar, hi)
  call MPI_Reduce_scatter(MPI_IN_PLACE, ri, cnt, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call sum_pat(hi, n)
  ei(1:cnt(rank)) = hi(dsp(rank) + 1:dsp(rank) + cnt(rank))
  call expect_i(ar, ei, cnt(rank), ierr, "Reduce_scatter SUM INTEGER, MPI_IN_PLACE")

  ! The v forms: rank j's block has cnt(j) elements (0 for j = 2), blocks in
  ! reverse rank order with a gap of 2 elements after each: the gaps keep
  ! their canary.
  call vlayout()

  ! 13. Gatherv to root np-1, plain and in place at the root.
  call pat(hi, cnt(rank), rank)
  call put_i(as, hi)
  call put_i(ar, canaries(NMAX))
  call MPI_Gatherv(si, cnt(rank), MPI_INTEGER, ri, cnt, dsp, MPI_INTEGER, root, &
                   MPI_COMM_WORLD, ierr)
  ei = CANARY
  if (rank == root) call vblocks(ei)
  call expect_i(ar, ei, NMAX, ierr, "Gatherv, root np-1, gaps")
  hi = CANARY
  if (rank == root) call pat(hi(dsp(rank) + 1:), cnt(rank), rank)
  call put_i(ar, hi)
  if (rank == root) then
    call MPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ri, cnt, dsp, MPI_INTEGER, root, &
                     MPI_COMM_WORLD, ierr)
  else
    call MPI_Gatherv(si, cnt(rank), MPI_INTEGER, ri, cnt, dsp, MPI_INTEGER, root, &
                     MPI_COMM_WORLD, ierr)
  end if
  call expect_i(ar, ei, NMAX, ierr, "Gatherv MPI_IN_PLACE at the root")

  ! 14. Scatterv from root np-1, plain and in place at the root.
  call vblocks(hi)
  call put_i(as, hi)
  call put_i(ar, canaries(NMAX))
  call MPI_Scatterv(si, cnt, dsp, MPI_INTEGER, ri, cnt(rank), MPI_INTEGER, root, &
                    MPI_COMM_WORLD, ierr)
  ei = CANARY
  call pat(ei, cnt(rank), rank)
  call expect_i(ar, ei, NMAX, ierr, "Scatterv, root np-1")
  call put_i(ar, canaries(NMAX))
  if (rank == root) then
    call MPI_Scatterv(si, cnt, dsp, MPI_INTEGER, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, &
                      MPI_COMM_WORLD, ierr)
    ei = CANARY
  else
    call MPI_Scatterv(si, cnt, dsp, MPI_INTEGER, ri, cnt(rank), MPI_INTEGER, root, &
                      MPI_COMM_WORLD, ierr)
  end if
  call expect_i(ar, ei, NMAX, ierr, "Scatterv MPI_IN_PLACE at the root")

  ! 15. Allgatherv, plain and in place.
  call pat(hi, cnt(rank), rank)
  call put_i(as, hi)
  call put_i(ar, canaries(NMAX))
  call MPI_Allgatherv(si, cnt(rank), MPI_INTEGER, ri, cnt, dsp, MPI_INTEGER, MPI_COMM_WORLD, &
                      ierr)
  ei = CANARY
  call vblocks(ei)
  call expect_i(ar, ei, NMAX, ierr, "Allgatherv, gaps")
  hi = CANARY
  call pat(hi(dsp(rank) + 1:), cnt(rank), rank)
  call put_i(ar, hi)
  call MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ri, cnt, dsp, MPI_INTEGER, &
                      MPI_COMM_WORLD, ierr)
  call expect_i(ar, ei, NMAX, ierr, "Allgatherv MPI_IN_PLACE")

  ! 16. Alltoallv: rank r sends mod(r + j, 3) + 1 elements (pattern 100 r + j)
  ! to rank j, blocks in rank order with a gap of 1; receives them in reverse
  ! order with a gap of 2. In place: the receive layout for both.
  call alayout(cnt, dsp, rcnt, rdsp)
  hi = CANARY
  do j = 0, np - 1
    call pat(hi(dsp(j) + 1:), cnt(j), 100 * rank + j)
  end do
  call put_i(as, hi)
  call put_i(ar, canaries(NMAX))
  call MPI_Alltoallv(si, cnt, dsp, MPI_INTEGER, ri, rcnt, rdsp, MPI_INTEGER, MPI_COMM_WORLD, &
                     ierr)
  ei = CANARY
  do j = 0, np - 1
    call pat(ei(rdsp(j) + 1:), rcnt(j), 100 * j + rank)
  end do
  call expect_i(ar, ei, NMAX, ierr, "Alltoallv, gaps")
  hi = CANARY
  do j = 0, np - 1
    call pat(hi(rdsp(j) + 1:), rcnt(j), 100 * rank + j)
  end do
  call put_i(ar, hi)
  call MPI_Alltoallv(MPI_IN_PLACE, cnt, dsp, MPI_DATATYPE_NULL, ri, rcnt, rdsp, MPI_INTEGER, &
                     MPI_COMM_WORLD, ierr)
  call expect_i(ar, ei, NMAX, ierr, "Alltoallv MPI_IN_PLACE")

  ! 17. Alltoallw: 2 INTEGERs to and from every rank, as 2 x MPI_INTEGER for
  ! even peers and 1 x `two` (a contiguous type of 2) for odd ones (a wrong
  ! type per peer moves 1 or 4 INTEGERs instead); byte displacements, sent in
  ! rank order 3 INTEGERs apart, received in reverse order 4 apart.
  call MPI_Type_contiguous(2, MPI_INTEGER, two, ierr)
  call MPI_Type_commit(two, ierr)
  call wlayout(cnt, dsp, rdsp, hi, ei)
  do j = 0, np - 1
    stypes(j) = merge(MPI_INTEGER, two, mod(j, 2) == 0)
  end do
  rtypes = stypes
  rcnt = cnt
  call put_i(as, hi)
  call put_i(ar, canaries(NMAX))
  call MPI_Alltoallw(si, cnt, dsp, stypes, ri, rcnt, rdsp, rtypes, MPI_COMM_WORLD, ierr)
  call expect_i(ar, ei, NMAX, ierr, "Alltoallw, a type per peer, gaps")
  hi = CANARY
  do j = 0, np - 1
    call pat(hi(4 * (np - 1 - j) + 1:), 2, 100 * rank + j)
  end do
  call put_i(ar, hi)
  call MPI_Alltoallw(MPI_IN_PLACE, cnt, dsp, stypes, ri, rcnt, rdsp, rtypes, MPI_COMM_WORLD, &
                     ierr)
  call expect_i(ar, ei, NMAX, ierr, "Alltoallw MPI_IN_PLACE")
  call MPI_Type_free(two, ierr)

  ! 18. A user-defined op made in Fortran (a + b + 1: associative and
  ! commutative), in Allreduce and in Reduce to root np-1: MPI calls the
  ! Fortran function on the staging memory.
  call MPI_Op_create(plus_one, .true., plus1, ierr)
  call pat(hi, K, rank)
  call put_i(as, hi)
  call MPI_Allreduce(si, ri, K, MPI_INTEGER, plus1, MPI_COMM_WORLD, ierr)
  call sum_pat(ei, K)
  ei(1:K) = ei(1:K) + np - 1
  call expect_i(ar, ei, K, ierr, "Allreduce, a Fortran user op")
  call put_i(ar, canaries(NMAX))
  call MPI_Reduce(si, ri, K, MPI_INTEGER, plus1, root, MPI_COMM_WORLD, ierr)
  if (rank /= root) ei = CANARY
  if (rank == root) ei(K + 1:) = CANARY
  call expect_i(ar, ei, NMAX, ierr, "Reduce, a Fortran user op, root np-1")
  call MPI_Op_free(plus1, ierr)

  ! 19. Refused with an MPI error (MPI_ERRORS_RETURN) on every rank, nothing
  ! sent: Fortran's MPI_BOTTOM with an absolute type whose block is device
  ! memory. (A reduction between a type with holes on device memory and host
  ! memory is staged: docs/mpi.md "Non-contiguous datatypes".)
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  call MPI_Get_address(ri, addr(1), ierr)
  call MPI_Type_create_hindexed(1, [K], addr, MPI_INTEGER, absolute, ierr)
  call MPI_Type_commit(absolute, ierr)
  e = MPI_SUCCESS
  call MPI_Bcast(MPI_BOTTOM, 1, absolute, root, MPI_COMM_WORLD, e)
  cls = MPI_SUCCESS
  if (e /= MPI_SUCCESS) call MPI_Error_class(e, cls, ierr2)
  call check(cls == MPI_ERR_BUFFER, "Bcast, MPI_BOTTOM reaching device memory: MPI_ERR_BUFFER")
  call MPI_Type_free(absolute, ierr)
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL, ierr)

  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (ftd_dev_free(0, as) /= 0 .or. ftd_dev_free(g1, ar) /= 0 .or. ftd_dev_free(0, ads) /= 0 &
      .or. ftd_dev_free(g1, adr) /= 0) call check(.false., "cuMemFree")
  call MPI_Finalize(ierr)
  call ft_report(who)

contains

  !> ftest's counted check, the message naming this rank ("FAIL: f_coll: rank R: ...").
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    call ft_check(ok, trim(who) // " " // what)
  end subroutine check

  include 'f_coll_data.inc'

  !> All NMAX INTEGERs of v to the device buffer at addr (device 0 for as,
  !> g1 for ar). Also sets ierr to -1: a wrapper that does not write the
  !> ierror of the call that follows fails its check.
  subroutine put_i(addr, v)
    integer(c_int64_t), intent(in) :: addr
    integer, intent(in), target :: v(NMAX)
    ierr = -1
    if (ftd_htod(dev_of(addr), addr, c_loc(v), int(NMAX * 4, c_size_t)) /= 0) &
      call check(.false., "cuMemcpyHtoD")
  end subroutine put_i

  subroutine put_d(addr, v)
    integer(c_int64_t), intent(in) :: addr
    double precision, intent(in), target :: v(NMAX)
    ierr = -1
    if (ftd_htod(dev_of(addr), addr, c_loc(v), int(NMAX * 8, c_size_t)) /= 0) &
      call check(.false., "cuMemcpyHtoD")
  end subroutine put_d

  integer function dev_of(addr)
    integer(c_int64_t), intent(in) :: addr
    dev_of = 0
    if (addr == ar .or. addr == adr) dev_of = g1
  end function dev_of

  !> The call succeeded and the device buffer at addr holds want(1:count).
  subroutine expect_i(addr, want, count, rc, what)
    integer(c_int64_t), intent(in) :: addr
    integer, intent(in) :: want(:), count, rc
    character(len=*), intent(in) :: what
    integer, target :: got(NMAX)
    logical :: ok
    ok = rc == MPI_SUCCESS .and. &
         ftd_dtoh(dev_of(addr), c_loc(got), addr, int(count * 4, c_size_t)) == 0
    if (ok) ok = all(got(1:count) == want(1:count))
    call check(ok, what)
  end subroutine expect_i

  subroutine expect_d(addr, want, count, rc, what)
    integer(c_int64_t), intent(in) :: addr
    double precision, intent(in) :: want(:)
    integer, intent(in) :: count, rc
    character(len=*), intent(in) :: what
    double precision, target :: got(NMAX)
    logical :: ok
    ok = rc == MPI_SUCCESS .and. &
         ftd_dtoh(dev_of(addr), c_loc(got), addr, int(count * 8, c_size_t)) == 0
    if (ok) ok = all(got(1:count) == want(1:count))
    call check(ok, what)
  end subroutine expect_d
end program f_coll

!> The user-defined op of f_coll: inoutvec = invec + inoutvec + 1.
#if defined(CUCOPY_F08)
subroutine plus_one(invec, inoutvec, len, datatype)
  use, intrinsic :: iso_c_binding
  use mpi_f08, only: MPI_Datatype
  implicit none
  type(c_ptr), value :: invec, inoutvec
  integer :: len
  type(MPI_Datatype) :: datatype
  integer, pointer :: a(:), b(:)
  call c_f_pointer(invec, a, [len])
  call c_f_pointer(inoutvec, b, [len])
  b = a + b + 1
end subroutine plus_one
#else
subroutine plus_one(invec, inoutvec, len, datatype)
  implicit none
  integer :: len, datatype
  integer :: invec(len), inoutvec(len)
  inoutvec = invec + inoutvec + 1
end subroutine plus_one
#endif
