! SPDX-License-Identifier: BSD-3-Clause
!
! The nonblocking collectives with device buffers from Fortran, run under
! LD_PRELOAD=libcucopy_mpi.so (mpirun -n 2 and -n 3; send buffers on device
! 0, receive buffers on device 1, or device 0 again on a one-GPU machine).
! Built three times from this file, as f_coll.F90: -DCUCOPY_MPIFH (include
! 'mpif.h'), neither (use mpi) and -DCUCOPY_F08 (use mpi_f08). Open MPI's
! Fortran nonblocking collectives call PMPI_I* directly, past the shim's C
! wrappers: the shim's Fortran entry points must catch them.
!
! Every nonblocking collective the shim's Fortran entry points wrap: Ibcast,
! Ireduce, Iallreduce, Ireduce_scatter_block, Ireduce_scatter, Iscan,
! Iexscan, Igather, Iscatter, Iallgather, Ialltoall, Igatherv, Iscatterv,
! Iallgatherv, Ialltoallv, Ialltoallw (a datatype per peer, byte
! displacements); roots other than 0, MPI_IN_PLACE forms, MPI_SUM
! and MPI_MAX on INTEGER and DOUBLE PRECISION, a host send buffer with a
! device receive buffer. Each round has several requests outstanding on
! their own device buffers, completed by MPI_Waitall (round 1), MPI_Test
! loops (round 2), both (round 3) and MPI_Wait (round 4). Every result is
! read back from the device (cuMemcpyDtoH), whole buffers where MPI must not
! write everything (canaries). Without the shim the first device call
! (MPI_Ibcast) faults inside MPI: the negative control.
!
! Argument: "reductions" runs only the reductions (Ireduce, Iallreduce,
! Ireduce_scatter(_block), Iscan, Iexscan), "movement" only the others, for
! the CUCOPY_MPI_STAGE tests; anything else, or none, runs everything.
!
! Prints "f_icoll: rank R: PASS (N checks)", or a "FAIL: f_icoll: rank R: ..."
! line per failed check and "f_icoll: rank R: FAILED (...)"; exit status 1 on
! a failure.
program f_icoll
  use, intrinsic :: iso_c_binding
  use ftest, only: ftd_init, ftd_dev_alloc, ftd_dev_free, ftd_htod, ftd_dtoh, ft_check, &
                   ft_report
#include "f_mpi.h"

  !> One device buffer of NMAX DOUBLE PRECISIONs, also seen as NMAX INTEGERs.
  type dbuf
    integer(c_int64_t) :: addr = 0
    integer :: dev = 0
    integer, pointer, contiguous :: i(:) => null()
    double precision, pointer, contiguous :: d(:) => null()
  end type dbuf

  ! K elements per block; NMAX elements in each device buffer; NS buffers
  ! (and requests) per side.
  integer, parameter :: K = 5, NMAX = 512, NS = 8, CANARY = -777
  double precision, parameter :: DCANARY = -7.5d0
  integer :: rank, np, root, r1, ierr, i, j, r, n, g1, ndev
  integer :: ie(NS)
  character(len=32) :: who
  type(dbuf) :: s(NS), b(NS)
  REQUEST :: req(NS)
  logical :: done(NS), used(NS), red, mov
  character(len=16) :: part
  integer, target :: hi(NMAX), ei(NMAX), ew(NMAX), hx(NMAX)
  double precision, target :: hd(NMAX), ed(NMAX)
  ! Count and displacement arrays: MPI reads them until completion.
  integer :: rsc(0:63), cnt(0:63), dsp(0:63), acnt(0:63), adsp(0:63), arcnt(0:63), &
             ardsp(0:63), wcnt(0:63), wsdsp(0:63), wrdsp(0:63)
  DATATYPE :: wtypes(0:63), two

  ! The part to run (as mpi/tests/icoll_device.c): "reductions", "movement"
  ! (the others), or everything.
  call get_command_argument(1, part)
  red = part /= "movement"
  mov = part /= "reductions"
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  write(who, '(a,i0,a)') "f_icoll: rank ", rank, ":"
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  ndev = ftd_init()
  if (ndev < 1 .or. np > 64) then
    write(*, '(a)') trim(who) // " FAILED: no device, or more than 64 ranks"
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  g1 = min(1, ndev - 1)
  do j = 1, NS
    call dev_alloc(s(j), 0)
    call dev_alloc(b(j), g1)
  end do
  root = np - 1
  r1 = mod(1, np)

  ! Round 1: eight outstanding, completed by one MPI_Waitall.
  call start_round()
  ! Ibcast INTEGER from root np-1 into device 1.
  if (run(1, .false.)) then
    hi = CANARY
    if (rank == root) call pat(hi, K, root)
    call put_i(b(1), hi)
    call MPI_Ibcast(b(1)%i, K, MPI_INTEGER, root, MPI_COMM_WORLD, req(1), ie(1))
  end if
  ! Ireduce SUM INTEGER to root np-1 (the other ranks' recvbuf keeps its canary).
  if (run(2, .true.)) then
    call pat(hi, K, rank)
    call put_i(s(2), hi)
    call put_i(b(2), canaries(NMAX))
    call MPI_Ireduce(s(2)%i, b(2)%i, K, MPI_INTEGER, MPI_SUM, root, MPI_COMM_WORLD, req(2), ie(2))
  end if
  ! Ireduce MAX DOUBLE PRECISION, MPI_IN_PLACE at root 1.
  if (run(3, .true.)) then
    call maxd(hd, K, rank)
    call put_d(s(3), hd)
    call put_d(b(3), hd)
    if (rank == r1) then
      call MPI_Ireduce(MPI_IN_PLACE, b(3)%d, K, MPI_DOUBLE_PRECISION, MPI_MAX, r1, &
                       MPI_COMM_WORLD, req(3), ie(3))
    else
      call MPI_Ireduce(s(3)%d, b(3)%d, K, MPI_DOUBLE_PRECISION, MPI_MAX, r1, MPI_COMM_WORLD, &
                       req(3), ie(3))
    end if
  end if
  ! Iallreduce MAX DOUBLE PRECISION in place.
  if (run(4, .true.)) then
    call maxd(hd, K, rank + 1)
    call put_d(b(4), hd)
    call MPI_Iallreduce(MPI_IN_PLACE, b(4)%d, K, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, &
                        req(4), ie(4))
  end if
  ! Ireduce_scatter_block SUM INTEGER, K per rank.
  if (run(5, .true.)) then
    do j = 0, np - 1
      call pat(hi(j * K + 1:), K, 100 * rank + j)
    end do
    call put_i(s(5), hi)
    call put_i(b(5), canaries(NMAX))
    call MPI_Ireduce_scatter_block(s(5)%i, b(5)%i, K, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, &
                                   req(5), ie(5))
  end if
  ! Ireduce_scatter MAX DOUBLE PRECISION, rank j gets j + 1 elements.
  n = 0
  do j = 0, np - 1
    rsc(j) = j + 1
    n = n + rsc(j)
  end do
  if (run(6, .true.)) then
    call maxd(hd, n, rank)
    call put_d(s(6), hd)
    call put_d(b(6), [(DCANARY, i = 1, NMAX)])
    call MPI_Ireduce_scatter(s(6)%d, b(6)%d, rsc, MPI_DOUBLE_PRECISION, MPI_MAX, &
                             MPI_COMM_WORLD, req(6), ie(6))
  end if
  ! Iscan SUM INTEGER.
  if (run(7, .true.)) then
    call pat(hi, K, rank)
    call put_i(s(7), hi)
    call MPI_Iscan(s(7)%i, b(7)%i, K, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req(7), ie(7))
  end if
  ! Iexscan SUM INTEGER in place (rank 0's result is undefined: not checked).
  if (run(8, .true.)) then
    call put_i(b(8), hi)
    call MPI_Iexscan(MPI_IN_PLACE, b(8)%i, K, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req(8), &
                     ie(8))
  end if
  call check_started(8, "round 1")
  ierr = -1
  call MPI_Waitall(8, req, MPI_STATUSES_IGNORE, ierr)
  call check(ierr == MPI_SUCCESS, "round 1: MPI_Waitall")
  call check_completed(8, "round 1")
  call pat(ei, K, root)
  call expect_i(b(1), ei, K, 1, "Ibcast INTEGER, root np-1")
  ei = CANARY
  if (rank == root) call sum_pat(ei, K)
  call expect_i(b(2), ei, NMAX, 2, "Ireduce SUM INTEGER, root np-1")
  call maxd(ed, K, rank)
  if (rank == r1) call maxd_all(ed, K)
  call expect_d(b(3), ed, K, 3, "Ireduce MAX DOUBLE PRECISION, MPI_IN_PLACE at root 1")
  call maxd_all(ed, K)
  call expect_d(b(4), ed, K, 4, "Iallreduce MAX DOUBLE PRECISION, MPI_IN_PLACE")
  ei = CANARY
  do i = 1, K
    ei(i) = 0
    do r = 0, np - 1
      ei(i) = ei(i) + val(100 * r + rank, i)
    end do
  end do
  call expect_i(b(5), ei, NMAX, 5, "Ireduce_scatter_block SUM INTEGER")
  call maxd_all(hd, n)
  ed = DCANARY
  j = sum(rsc(0:rank - 1))
  ed(1:rsc(rank)) = hd(j + 1:j + rsc(rank))
  call expect_d(b(6), ed, NMAX, 6, "Ireduce_scatter MAX DOUBLE PRECISION, uneven")
  call sum_pat(ei, K, rank)
  call expect_i(b(7), ei, K, 7, "Iscan SUM INTEGER")
  if (rank > 0) then
    call sum_pat(ei, K, rank - 1)
    call expect_i(b(8), ei, K, 8, "Iexscan SUM INTEGER, MPI_IN_PLACE")
  end if

  ! Round 2: six outstanding, completed by MPI_Test loops.
  call start_round()
  ! Igather INTEGER to root np-1.
  if (run(1, .false.)) then
    call pat(hi, K, rank)
    call put_i(s(1), hi)
    call put_i(b(1), canaries(NMAX))
    call MPI_Igather(s(1)%i, K, MPI_INTEGER, b(1)%i, K, MPI_INTEGER, root, MPI_COMM_WORLD, &
                     req(1), ie(1))
  end if
  ! Iscatter from root np-1, MPI_IN_PLACE at the root (its recvbuf untouched).
  if (run(2, .false.)) then
    call blocks(hi, K)
    call put_i(s(2), hi)
    call put_i(b(2), canaries(NMAX))
    if (rank == root) then
      call MPI_Iscatter(s(2)%i, K, MPI_INTEGER, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, &
                        MPI_COMM_WORLD, req(2), ie(2))
    else
      call MPI_Iscatter(s(2)%i, K, MPI_INTEGER, b(2)%i, K, MPI_INTEGER, root, MPI_COMM_WORLD, &
                        req(2), ie(2))
    end if
  end if
  ! Iallgather in place (this rank's block already in recvbuf).
  if (run(3, .false.)) then
    hi = CANARY
    call pat(hi(rank * K + 1:), K, rank)
    call put_i(b(3), hi)
    call MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b(3)%i, K, MPI_INTEGER, &
                        MPI_COMM_WORLD, req(3), ie(3))
  end if
  ! Ialltoall: block j of rank r is pattern 100 r + j.
  if (run(4, .false.)) then
    do j = 0, np - 1
      call pat(hi(j * K + 1:), K, 100 * rank + j)
    end do
    call put_i(s(4), hi)
    call put_i(b(4), canaries(NMAX))
    call MPI_Ialltoall(s(4)%i, K, MPI_INTEGER, b(4)%i, K, MPI_INTEGER, MPI_COMM_WORLD, req(4), &
                       ie(4))
  end if
  ! Ibcast DOUBLE PRECISION from root 1 into device 0.
  if (run(5, .false.)) then
    call patd(hd, K, r1)
    if (rank /= r1) hd(1:K) = DCANARY
    call put_d(s(5), hd)
    call MPI_Ibcast(s(5)%d, K, MPI_DOUBLE_PRECISION, r1, MPI_COMM_WORLD, req(5), ie(5))
  end if
  ! Iscan MAX DOUBLE PRECISION in place.
  if (run(6, .true.)) then
    call maxd(hd, K, rank)
    call put_d(b(6), hd)
    call MPI_Iscan(MPI_IN_PLACE, b(6)%d, K, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, &
                   req(6), ie(6))
  end if
  call check_started(6, "round 2")
  call test_loop(6, "round 2")
  call check_completed(6, "round 2")
  ei = CANARY
  if (rank == root) call blocks(ei, K)
  call expect_i(b(1), ei, NMAX, 1, "Igather, root np-1")
  ei = CANARY
  if (rank /= root) call pat(ei, K, rank)
  call expect_i(b(2), ei, NMAX, 2, "Iscatter, MPI_IN_PLACE at root np-1: recvbuf")
  if (rank == root) then
    call blocks(ei, K)
    call expect_i(s(2), ei, np * K, 2, "Iscatter MPI_IN_PLACE: the root's sendbuf")
  end if
  call blocks(ei, K)
  call expect_i(b(3), ei, NMAX, 3, "Iallgather MPI_IN_PLACE")
  ei = CANARY
  do j = 0, np - 1
    call pat(ei(j * K + 1:), K, 100 * j + rank)
  end do
  call expect_i(b(4), ei, NMAX, 4, "Ialltoall")
  call patd(ed, K, r1)
  call expect_d(s(5), ed, K, 5, "Ibcast DOUBLE PRECISION, root 1")
  call maxd_all(ed, K, rank)
  call expect_d(b(6), ed, K, 6, "Iscan MAX DOUBLE PRECISION, MPI_IN_PLACE")

  ! Round 3: the v and w forms, eight outstanding; MPI_Test loops on the first
  ! three, then MPI_Waitall on all (the completed ones are MPI_REQUEST_NULL).
  ! Rank j's block has cnt(j) elements (0 for j = 2), blocks in reverse rank
  ! order with a gap of 2 after each: the gaps keep their canary.
  call start_round()
  call MPI_Type_contiguous(2, MPI_INTEGER, two, ierr)
  call MPI_Type_commit(two, ierr)
  call vlayout()
  call alayout(acnt, adsp, arcnt, ardsp)
  ! Igatherv to root np-1.
  if (run(1, .false.)) then
    call pat(hi, cnt(rank), rank)
    call put_i(s(1), hi)
    call put_i(b(1), canaries(NMAX))
    call MPI_Igatherv(s(1)%i, cnt(rank), MPI_INTEGER, b(1)%i, cnt, dsp, MPI_INTEGER, root, &
                      MPI_COMM_WORLD, req(1), ie(1))
  end if
  ! Iscatterv from root np-1, MPI_IN_PLACE at the root.
  if (run(2, .false.)) then
    call vblocks(hi)
    call put_i(s(2), hi)
    call put_i(b(2), canaries(NMAX))
    if (rank == root) then
      call MPI_Iscatterv(s(2)%i, cnt, dsp, MPI_INTEGER, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, &
                         root, MPI_COMM_WORLD, req(2), ie(2))
    else
      call MPI_Iscatterv(s(2)%i, cnt, dsp, MPI_INTEGER, b(2)%i, cnt(rank), MPI_INTEGER, root, &
                         MPI_COMM_WORLD, req(2), ie(2))
    end if
  end if
  ! Iallgatherv.
  if (run(3, .false.)) then
    call pat(hi, cnt(rank), rank)
    call put_i(s(3), hi)
    call put_i(b(3), canaries(NMAX))
    call MPI_Iallgatherv(s(3)%i, cnt(rank), MPI_INTEGER, b(3)%i, cnt, dsp, MPI_INTEGER, &
                         MPI_COMM_WORLD, req(3), ie(3))
  end if
  ! Iallgatherv in place.
  if (run(4, .false.)) then
    hi = CANARY
    call pat(hi(dsp(rank) + 1:), cnt(rank), rank)
    call put_i(b(4), hi)
    call MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b(4)%i, cnt, dsp, MPI_INTEGER, &
                         MPI_COMM_WORLD, req(4), ie(4))
  end if
  ! Ialltoallv: rank r sends mod(r + j, 3) + 1 elements (pattern 100 r + j) to
  ! rank j in rank order with a gap of 1; receives them in reverse order with
  ! a gap of 2.
  if (run(5, .false.)) then
    hi = CANARY
    do j = 0, np - 1
      call pat(hi(adsp(j) + 1:), acnt(j), 100 * rank + j)
    end do
    call put_i(s(5), hi)
    call put_i(b(5), canaries(NMAX))
    call MPI_Ialltoallv(s(5)%i, acnt, adsp, MPI_INTEGER, b(5)%i, arcnt, ardsp, MPI_INTEGER, &
                        MPI_COMM_WORLD, req(5), ie(5))
  end if
  ! Ialltoallv in place: the receive layout.
  if (run(6, .false.)) then
    hi = CANARY
    do j = 0, np - 1
      call pat(hi(ardsp(j) + 1:), arcnt(j), 100 * rank + j)
    end do
    call put_i(b(6), hi)
    call MPI_Ialltoallv(MPI_IN_PLACE, acnt, adsp, MPI_DATATYPE_NULL, b(6)%i, arcnt, ardsp, &
                        MPI_INTEGER, MPI_COMM_WORLD, req(6), ie(6))
  end if
  ! Igatherv in place at root np-1.
  if (run(7, .false.)) then
    hi = CANARY
    if (rank == root) call pat(hi(dsp(rank) + 1:), cnt(rank), rank)
    call put_i(b(7), hi)
    call pat(hi, cnt(rank), rank)
    call put_i(s(7), hi)
    if (rank == root) then
      call MPI_Igatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b(7)%i, cnt, dsp, MPI_INTEGER, root, &
                        MPI_COMM_WORLD, req(7), ie(7))
    else
      call MPI_Igatherv(s(7)%i, cnt(rank), MPI_INTEGER, b(7)%i, cnt, dsp, MPI_INTEGER, root, &
                        MPI_COMM_WORLD, req(7), ie(7))
    end if
  end if
  ! Ialltoallw: 2 INTEGERs to and from every rank, as 2 x MPI_INTEGER for even
  ! peers and 1 x `two` (a contiguous type of 2) for odd ones (a wrong type
  ! per peer moves 1 or 4 INTEGERs instead); byte displacements, sent in rank
  ! order 3 INTEGERs apart, received in reverse order 4 apart (f_coll.F90's
  ! Alltoallw). Not in place: MPICH 4.0.2 gets that wrong without the shim.
  if (run(8, .false.)) then
    call wlayout(wcnt, wsdsp, wrdsp, hi, ew)
    do j = 0, np - 1
      wtypes(j) = merge(MPI_INTEGER, two, mod(j, 2) == 0)
    end do
    call put_i(s(8), hi)
    call put_i(b(8), canaries(NMAX))
    call MPI_Ialltoallw(s(8)%i, wcnt, wsdsp, wtypes, b(8)%i, wcnt, wrdsp, wtypes, &
                        MPI_COMM_WORLD, req(8), ie(8))
  end if
  call check_started(8, "round 3")
  call test_loop(3, "round 3")
  ierr = -1
  call MPI_Waitall(8, req, MPI_STATUSES_IGNORE, ierr)
  call check(ierr == MPI_SUCCESS, "round 3: MPI_Waitall")
  call check_completed(8, "round 3")
  call MPI_Type_free(two, ierr)
  ei = CANARY
  if (rank == root) call vblocks(ei)
  call expect_i(b(1), ei, NMAX, 1, "Igatherv, root np-1, gaps")
  ei = CANARY
  if (rank /= root) call pat(ei, cnt(rank), rank)
  call expect_i(b(2), ei, NMAX, 2, "Iscatterv, MPI_IN_PLACE at root np-1")
  call vblocks(ei)
  call expect_i(b(3), ei, NMAX, 3, "Iallgatherv, gaps")
  call expect_i(b(4), ei, NMAX, 4, "Iallgatherv MPI_IN_PLACE")
  ei = CANARY
  do j = 0, np - 1
    call pat(ei(ardsp(j) + 1:), arcnt(j), 100 * j + rank)
  end do
  call expect_i(b(5), ei, NMAX, 5, "Ialltoallv, gaps")
  call expect_i(b(6), ei, NMAX, 6, "Ialltoallv MPI_IN_PLACE")
  ei = CANARY
  if (rank == root) call vblocks(ei)
  call expect_i(b(7), ei, NMAX, 7, "Igatherv MPI_IN_PLACE at root np-1")
  call expect_i(b(8), ew, NMAX, 8, "Ialltoallw, a type per peer, gaps")

  ! Round 4: a host send buffer into a device receive buffer, MPI_Wait.
  call start_round()
  if (run(1, .true.)) then
    call pat(hx, K, rank)
    call MPI_Iallreduce(hx, b(1)%i, K, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req(1), ie(1))
  end if
#if defined(CUCOPY_F08)
  ! use mpi_f08: the optional ierror left out (NULL to the wrapper; ie(2)
  ! stays MPI_SUCCESS).
  if (run(2, .true.)) then
    call pat(hi, K, rank)
    call put_i(s(2), hi)
    ie(2) = MPI_SUCCESS
    call MPI_Iallreduce(s(2)%i, b(2)%i, K, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, req(2))
  end if
  call check_started(2, "round 4")
  call MPI_Wait(req(2), MPI_STATUS_IGNORE)
#else
  call check_started(1, "round 4")
#endif
  ierr = -1
  call MPI_Wait(req(1), MPI_STATUS_IGNORE, ierr)
  call check(ierr == MPI_SUCCESS, "round 4: MPI_Wait")
  call check_completed(2, "round 4")
  call sum_pat(ei, K)
  call expect_i(b(1), ei, K, 1, "Iallreduce SUM host -> device")
  call pat(ei, K, np - 1)
  call expect_i(b(2), ei, K, 2, "Iallreduce MAX INTEGER without ierror (use mpi_f08)")

  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  do j = 1, NS
    if (ftd_dev_free(s(j)%dev, s(j)%addr) /= 0 .or. ftd_dev_free(b(j)%dev, b(j)%addr) /= 0) &
      call check(.false., "cuMemFree")
  end do
  call MPI_Finalize(ierr)
  call ft_report(who)

contains

  include 'f_dbuf.inc'

  !> No request yet, every ierror -1: a wrapper that writes neither fails.
  subroutine start_round()
    req = MPI_REQUEST_NULL
    ie = -1
    used = .false.
  end subroutine start_round

  !> Whether this run makes call q of the round (a reduction or not); marks it used.
  logical function run(q, reduction)
    integer, intent(in) :: q
    logical, intent(in) :: reduction
    run = merge(red, mov, reduction)
    if (run) used(q) = .true.
  end function run

  !> Each of the first nreq calls that was made returned a request and MPI_SUCCESS.
  subroutine check_started(nreq, what)
    integer, intent(in) :: nreq
    character(len=*), intent(in) :: what
    integer :: q
    do q = 1, nreq
      if (used(q)) call check(ie(q) == MPI_SUCCESS .and. req(q) /= MPI_REQUEST_NULL, &
                              what // ": a request and MPI_SUCCESS")
    end do
  end subroutine check_started

  subroutine check_completed(nreq, what)
    integer, intent(in) :: nreq
    character(len=*), intent(in) :: what
    integer :: q
    logical :: ok
    ok = .true.
    do q = 1, nreq
      ok = ok .and. req(q) == MPI_REQUEST_NULL
    end do
    call check(ok, what // ": requests freed at completion")
  end subroutine check_completed

  !> MPI_Test on each of the first nreq requests until all have completed.
  subroutine test_loop(nreq, what)
    integer, intent(in) :: nreq
    character(len=*), intent(in) :: what
    integer :: q, e
    logical :: ok
    done = .false.
    ok = .true.
    do while (.not. all(done(1:nreq)))
      do q = 1, nreq
        if (done(q)) cycle
        e = -1
        call MPI_Test(req(q), done(q), MPI_STATUS_IGNORE, e)
        if (e /= MPI_SUCCESS) then
          ok = .false.
          done(q) = .true.
        end if
      end do
    end do
    call check(ok, what // ": MPI_Test loop")
  end subroutine test_loop

  include 'f_coll_data.inc'

  !> Call q of the round (if made) succeeded and buf holds want(1:count).
  subroutine expect_i(buf, want, count, q, what)
    type(dbuf), intent(in) :: buf
    integer, intent(in) :: want(:), count, q
    character(len=*), intent(in) :: what
    integer, target :: got(NMAX)
    logical :: ok
    if (.not. used(q)) return
    ok = ie(q) == MPI_SUCCESS .and. &
         ftd_dtoh(buf%dev, c_loc(got), buf%addr, int(count * 4, c_size_t)) == 0
    if (ok) ok = all(got(1:count) == want(1:count))
    call check(ok, what)
  end subroutine expect_i

  subroutine expect_d(buf, want, count, q, what)
    type(dbuf), intent(in) :: buf
    double precision, intent(in) :: want(:)
    integer, intent(in) :: count, q
    character(len=*), intent(in) :: what
    double precision, target :: got(NMAX)
    logical :: ok
    if (.not. used(q)) return
    ok = ie(q) == MPI_SUCCESS .and. &
         ftd_dtoh(buf%dev, c_loc(got), buf%addr, int(count * 8, c_size_t)) == 0
    if (ok) ok = all(got(1:count) == want(1:count))
    call check(ok, what)
  end subroutine expect_d
end program f_icoll
