! SPDX-License-Identifier: BSD-3-Clause
!
! Persistent collectives (MPI-4) with device buffers from Fortran, run under
! LD_PRELOAD=libcucopy_mpi_mpich.so (MPICH 4, whose Fortran bindings of all
! three kinds call the C MPI_X_init, MPI_Start and completion calls, which
! the shim wraps); mpiexec -n 2 and -n 3, send buffers on device 0, receive
! buffers on device 1 (device 0 again on a one-GPU machine), Bcast_init's on
! device 0. Built three
! times from this file, as f_icoll.F90: -DCUCOPY_MPIFH (include 'mpif.h'),
! neither (use mpi) and -DCUCOPY_F08 (use mpi_f08).
!
! MPI_Allreduce_init (SUM, INTEGER), MPI_Allreduce_init in place (MAX,
! DOUBLE PRECISION), MPI_Bcast_init from root np-1 and MPI_Alltoall_init,
! each made once and started in four rounds with new input written to the
! device between rounds and a canary in every receive buffer: MPI_Startall
! and MPI_Waitall (rounds 1, 3), MPI_Start of each and MPI_Test loops (rounds
! 2, 4); every result read back from the device. Then MPI_Request_free of
! each (inactive). Without the shim the first start faults inside MPI: the
! negative control.
!
! Prints "f_pcoll: rank R: PASS (N checks)", or a "FAIL: f_pcoll: rank R: ..."
! line per failed check and "f_pcoll: rank R: FAILED (...)"; exit status 1 on
! a failure.
program f_pcoll
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

  integer, parameter :: K = 7, NMAX = 512, NR = 4, CANARY = -777
  integer :: rank, np, root, ierr, i, j, q, round, ndev, g1
  character(len=32) :: who
  type(dbuf) :: s(NR), b(NR)
  REQUEST :: req(NR)
  logical :: done(NR), ok
  integer, target :: hi(NMAX), ei(NMAX)
  double precision, target :: hd(NMAX), ed(NMAX)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  write(who, '(a,i0,a)') "f_pcoll: rank ", rank, ":"
  ndev = ftd_init()
  if (ndev < 1 .or. np * K > NMAX) then
    write(*, '(a)') trim(who) // " FAILED: no device, or too many ranks"
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  g1 = min(1, ndev - 1)
  do j = 1, NR
    call dev_alloc(s(j), 0)
    call dev_alloc(b(j), merge(0, g1, j == 3)) ! Bcast_init's on device 0
  end do
  root = np - 1

  call MPI_Allreduce_init(s(1)%i, b(1)%i, K, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, &
                          MPI_INFO_NULL, req(1), ierr)
  call check(ierr == MPI_SUCCESS, "MPI_Allreduce_init")
  call MPI_Allreduce_init(MPI_IN_PLACE, b(2)%d, K, MPI_DOUBLE_PRECISION, MPI_MAX, &
                          MPI_COMM_WORLD, MPI_INFO_NULL, req(2), ierr)
  call check(ierr == MPI_SUCCESS, "MPI_Allreduce_init in place")
  call MPI_Bcast_init(b(3)%i, K, MPI_INTEGER, root, MPI_COMM_WORLD, MPI_INFO_NULL, req(3), ierr)
  call check(ierr == MPI_SUCCESS, "MPI_Bcast_init")
  call MPI_Alltoall_init(s(4)%i, K, MPI_INTEGER, b(4)%i, K, MPI_INTEGER, MPI_COMM_WORLD, &
                         MPI_INFO_NULL, req(4), ierr)
  call check(ierr == MPI_SUCCESS, "MPI_Alltoall_init")

  do round = 1, 4
    ! New input on the device, a canary in the receive buffers.
    hi = CANARY
    do i = 1, K
      hi(i) = 1000 * round + 10 * rank + i
    end do
    call put_i(s(1), hi)
    call put_i(b(1), canaries())
    hd = -1d0
    do i = 1, K
      hd(i) = dble(mod(rank * 7 + i * 3 + round, 11)) + 0.5d0 * round
    end do
    call put_d(b(2), hd)
    hi = CANARY
    if (rank == root) then
      do i = 1, K
        hi(i) = 500 * round + i
      end do
    end if
    call put_i(b(3), hi)
    hi = CANARY
    do q = 0, np - 1
      do i = 1, K
        hi(q * K + i) = 10000 * round + 100 * rank + 10 * q + i
      end do
    end do
    call put_i(s(4), hi)
    call put_i(b(4), canaries())

    if (mod(round, 2) == 1) then
      call MPI_Startall(NR, req, ierr)
      call check(ierr == MPI_SUCCESS, "MPI_Startall")
      call MPI_Waitall(NR, req, MPI_STATUSES_IGNORE, ierr)
      call check(ierr == MPI_SUCCESS, "MPI_Waitall")
    else
      do j = 1, NR
        call MPI_Start(req(j), ierr)
        call check(ierr == MPI_SUCCESS, "MPI_Start")
      end do
      done = .false.
      ok = .true.
      do while (.not. all(done))
        do j = 1, NR
          if (done(j)) cycle
          call MPI_Test(req(j), done(j), MPI_STATUS_IGNORE, ierr)
          ok = ok .and. ierr == MPI_SUCCESS
        end do
      end do
      call check(ok, "MPI_Test loop")
    end if
    do j = 1, NR
      call check(req(j) /= MPI_REQUEST_NULL, "a persistent request stays after completion")
    end do

    ! The results, read back from the device.
    ei = canaries()
    do i = 1, K
      ei(i) = np * (1000 * round + i) + 10 * (np * (np - 1) / 2)
    end do
    call expect_i(b(1), ei, "Allreduce_init SUM INTEGER", round)
    ed = -1d0
    do i = 1, K
      ed(i) = -1d9
      do q = 0, np - 1
        ed(i) = max(ed(i), dble(mod(q * 7 + i * 3 + round, 11)) + 0.5d0 * round)
      end do
    end do
    call expect_d(b(2), ed, "Allreduce_init MAX DOUBLE PRECISION in place", round)
    ei = CANARY
    do i = 1, K
      ei(i) = 500 * round + i
    end do
    call expect_i(b(3), ei, "Bcast_init", round)
    ei = canaries()
    do q = 0, np - 1
      do i = 1, K
        ei(q * K + i) = 10000 * round + 100 * q + 10 * rank + i
      end do
    end do
    call expect_i(b(4), ei, "Alltoall_init", round)
  end do

  do j = 1, NR
    call MPI_Request_free(req(j), ierr)
    call check(ierr == MPI_SUCCESS .and. req(j) == MPI_REQUEST_NULL, "MPI_Request_free")
  end do
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  do j = 1, NR
    if (ftd_dev_free(s(j)%dev, s(j)%addr) /= 0 .or. ftd_dev_free(b(j)%dev, b(j)%addr) /= 0) &
      call check(.false., "cuMemFree")
  end do
  call MPI_Finalize(ierr)
  call ft_report(who)

contains

  include 'f_dbuf.inc'

  !> NMAX INTEGERs of a canary that differs element by element.
  function canaries() result(v)
    integer :: v(NMAX), n
    do n = 1, NMAX
      v(n) = CANARY - n
    end do
  end function canaries

  !> The whole device buffer (NMAX INTEGERs) holds want.
  subroutine expect_i(buf, want, what, round)
    type(dbuf), intent(in) :: buf
    integer, intent(in) :: want(NMAX), round
    character(len=*), intent(in) :: what
    integer, target :: got(NMAX)
    character(len=16) :: r
    logical :: ok
    write(r, '(a,i0)') " round ", round
    ! Two statements: Fortran may evaluate the operands of .and. in any order.
    ok = ftd_dtoh(buf%dev, c_loc(got), buf%addr, int(NMAX * 4, c_size_t)) == 0
    if (ok) ok = all(got == want)
    call check(ok, what // trim(r))
  end subroutine expect_i

  !> The whole device buffer (NMAX DOUBLE PRECISIONs) holds want.
  subroutine expect_d(buf, want, what, round)
    type(dbuf), intent(in) :: buf
    double precision, intent(in) :: want(NMAX)
    integer, intent(in) :: round
    character(len=*), intent(in) :: what
    double precision, target :: got(NMAX)
    character(len=16) :: r
    logical :: ok
    write(r, '(a,i0)') " round ", round
    ! Two statements: Fortran may evaluate the operands of .and. in any order.
    ok = ftd_dtoh(buf%dev, c_loc(got), buf%addr, int(NMAX * 8, c_size_t)) == 0
    if (ok) ok = all(got == want)
    call check(ok, what // trim(r))
  end subroutine expect_d
end program f_pcoll
