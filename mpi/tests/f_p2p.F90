! SPDX-License-Identifier: BSD-3-Clause
!
! Point-to-point with device buffers from Fortran, run under
! LD_PRELOAD=libcucopy_mpi.so (mpirun -n 2 and -n 3, two devices per rank,
! or one device twice on a one-GPU machine: each rank sends to the next and
! receives from the previous one). Built three
! times from this file: -DCUCOPY_MPIFH (include 'mpif.h'), neither (use mpi)
! and -DCUCOPY_F08 (use mpi_f08): Open MPI's three Fortran bindings, which
! all call PMPI_* directly, past the shim's C wrappers.
!
! Device memory comes from the raw driver (module ftest's ftd_* helpers,
! tests/fortran/ftest_drv.c: the fake under CTest, whose device memory faults
! on a CPU access) and reaches MPI as the address of a Fortran array, as
! `!$acc host_data use_device` gives it. Every message is verified on the
! device (cuMemcpyDtoH), and so are the bytes a short receive must leave
! alone. Without the shim the first device-buffer call faults inside MPI:
! the negative control.
!
! Prints "f_p2p: rank R: PASS (N checks)" or "FAILED" lines; exit status 1
! on a failure.
program f_p2p
  use, intrinsic :: iso_c_binding
  use ftest, only: ftd_init, ftd_dev_alloc, ftd_dev_free, ftd_htod, ftd_dtoh
#include "f_mpi.h"

#if defined(CUCOPY_F08)
#define STATUS_DECL type(MPI_Status) :: st, sts(4)
#define SOURCE_OF(s) s%MPI_SOURCE
#define TAG_OF(s) s%MPI_TAG
#define STS(i) sts(i)
#define STS_SOURCE(i) sts(i)%MPI_SOURCE
#else
#define STATUS_DECL integer :: st(MPI_STATUS_SIZE), sts(MPI_STATUS_SIZE, 4)
#define SOURCE_OF(s) s(MPI_SOURCE)
#define TAG_OF(s) s(MPI_TAG)
#define STS(i) sts(:, i)
#define STS_SOURCE(i) sts(MPI_SOURCE, i)
#endif

  integer, parameter :: N = 1000
  integer, parameter :: BIG = 300000
  integer :: rank, np, to, from, ierr, checks, fails, round, idx, outcount, cnt
  integer :: indices(4), provided
  integer(c_int8_t) :: battach(8 * BIG)
  logical :: flag
  integer(c_int64_t) :: a0, a1, ab, ab1
  integer, pointer, contiguous :: d0(:), d1(:), db(:), db1(:), d0half(:), d1half(:)
  integer, target :: h(BIG), e(BIG)
  REQUEST :: r(4), rs, rr
  MESSAGE :: msg
  DATATYPE :: vec, absolute
  integer :: cls, ierr2
  integer :: ndev, g1
  integer(MPI_ADDRESS_KIND) :: addr(1)
  STATUS_DECL

  checks = 0
  fails = 0
  ! mpif.h: MPI_Init; use mpi: MPI_Init_thread; use mpi_f08: MPI_Init without
  ! its optional ierror (the wrapper gets NULL).
#if defined(CUCOPY_MPIFH)
  call MPI_Init(ierr)
#elif defined(CUCOPY_F08)
  call MPI_Init()
#else
  call MPI_Init_thread(MPI_THREAD_MULTIPLE, provided, ierr)
#endif
  call MPI_Buffer_attach(battach, 8 * BIG, ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  to = mod(rank + 1, np)
  from = mod(rank + np - 1, np)
  ! The "second device" g1: device 1, or device 0 again on a one-GPU machine.
  ndev = ftd_init()
  if (ndev < 1) then
    write(*, '(a,i0,a)') "f_p2p: rank ", rank, ": FAILED: no device"
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  g1 = min(1, ndev - 1)
  a0 = ftd_dev_alloc(0, int(N * 4, c_size_t))
  a1 = ftd_dev_alloc(g1, int(N * 4, c_size_t))
  ab = ftd_dev_alloc(0, int(BIG * 4, c_size_t))
  ab1 = ftd_dev_alloc(g1, int(BIG * 4, c_size_t))
  call c_f_pointer(transfer(a0, c_null_ptr), d0, [N])
  call c_f_pointer(transfer(a1, c_null_ptr), d1, [N])
  call c_f_pointer(transfer(ab, c_null_ptr), db, [BIG])
  call c_f_pointer(transfer(ab1, c_null_ptr), db1, [BIG])
  ! The second halves (a Fortran element of a pointer array cannot stand for
  ! the array that follows it).
  call c_f_pointer(transfer(a0 + N / 2 * 4, c_null_ptr), d0half, [N / 2])
  call c_f_pointer(transfer(a1 + N / 2 * 4, c_null_ptr), d1half, [N / 2])

  ! 1. Send / Recv, device 0 -> device 1, with a status.
  call fill(0, a0, rank + 10, N)
  call fill(g1, a1, 0, N)
  if (mod(rank, 2) == 0) then
    call MPI_Send(d0, N, MPI_INTEGER, to, 10, MPI_COMM_WORLD, ierr)
    call MPI_Recv(d1, N, MPI_INTEGER, from, 10, MPI_COMM_WORLD, st, ierr)
  else
    call MPI_Recv(d1, N, MPI_INTEGER, from, 10, MPI_COMM_WORLD, st, ierr)
    call MPI_Send(d0, N, MPI_INTEGER, to, 10, MPI_COMM_WORLD, ierr)
  end if
  call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
  call check(SOURCE_OF(st) == from .and. TAG_OF(st) == 10 .and. cnt == N, "Recv: status")
  call check(dev_is(g1, a1, from + 10, N), "Send dev0 -> Recv dev1: data")
  call check(dev_is(0, a0, rank + 10, N), "Send: the send buffer changed")

  ! 2. Ssend from device 1, Recv into device 0 with MPI_STATUS_IGNORE.
  call fill(g1, a1, rank + 20, N)
  if (mod(rank, 2) == 0) then
    call MPI_Ssend(d1, N, MPI_INTEGER, to, 20, MPI_COMM_WORLD, ierr)
    call MPI_Recv(d0, N, MPI_INTEGER, from, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  else
    call MPI_Recv(d0, N, MPI_INTEGER, from, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call MPI_Ssend(d1, N, MPI_INTEGER, to, 20, MPI_COMM_WORLD, ierr)
  end if
  call check(dev_is(0, a0, from + 20, N), "Ssend dev1 -> Recv(STATUS_IGNORE) dev0: data")

  ! 3. Isend / Irecv, Wait with a status and with MPI_STATUS_IGNORE.
  call fill(0, a0, rank + 30, N)
  call MPI_Irecv(d1, N, MPI_INTEGER, from, 30, MPI_COMM_WORLD, rr, ierr)
  call MPI_Isend(d0, N, MPI_INTEGER, to, 30, MPI_COMM_WORLD, rs, ierr)
  call MPI_Wait(rs, MPI_STATUS_IGNORE, ierr)
  call MPI_Wait(rr, st, ierr)
  call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
  call check(cnt == N .and. rr == MPI_REQUEST_NULL, "Irecv + Wait: status, request")
  call check(dev_is(g1, a1, from + 30, N), "Isend dev0 -> Irecv dev1 + Wait: data")

  ! 4. Waitall over both devices, statuses ignored, then kept.
  call fill(0, a0, rank + 40, N / 2)
  call fill(g1, a1, rank + 41, N / 2)
  call MPI_Irecv(d0half, N / 2, MPI_INTEGER, from, 41, MPI_COMM_WORLD, r(1), ierr)
  call MPI_Irecv(d1half, N / 2, MPI_INTEGER, from, 40, MPI_COMM_WORLD, r(2), ierr)
  call MPI_Isend(d0, N / 2, MPI_INTEGER, to, 40, MPI_COMM_WORLD, r(3), ierr)
  call MPI_Isend(d1, N / 2, MPI_INTEGER, to, 41, MPI_COMM_WORLD, r(4), ierr)
  call MPI_Waitall(4, r, MPI_STATUSES_IGNORE, ierr)
  call check(dev_is(0, a0 + N / 2 * 4, from + 41, N / 2), "Waitall: dev1 -> dev0 data")
  call check(dev_is(g1, a1 + N / 2 * 4, from + 40, N / 2), "Waitall: dev0 -> dev1 data")
  call fill(0, a0, rank + 42, N)
  call MPI_Irecv(d1, N, MPI_INTEGER, from, 42, MPI_COMM_WORLD, r(1), ierr)
  call MPI_Isend(d0, N, MPI_INTEGER, to, 42, MPI_COMM_WORLD, r(2), ierr)
  call MPI_Waitall(2, r, sts, ierr)
  call MPI_Get_count(STS(1), MPI_INTEGER, cnt, ierr)
  call check(cnt == N .and. STS_SOURCE(1) == from, "Waitall: statuses")
  call check(dev_is(g1, a1, from + 42, N), "Waitall with statuses: data")

  ! 5. Sendrecv: a buffer of each device in one call; then Sendrecv_replace.
  call fill(0, a0, rank + 50, N)
  call MPI_Sendrecv(d0, N, MPI_INTEGER, to, 50, d1, N, MPI_INTEGER, from, 50, &
                    MPI_COMM_WORLD, st, ierr)
  call check(dev_is(g1, a1, from + 50, N), "Sendrecv dev0 -> dev1: data")
  call fill(g1, a1, rank + 51, N)
  call MPI_Sendrecv_replace(d1, N, MPI_INTEGER, to, 51, from, 51, MPI_COMM_WORLD, &
                            MPI_STATUS_IGNORE, ierr)
  call check(dev_is(g1, a1, from + 51, N), "Sendrecv_replace dev1: data")

  ! 6. Mixed host and device: device -> host, host -> device.
  call fill(0, a0, rank + 60, N)
  e(1:N) = -1
  call MPI_Sendrecv(d0, N, MPI_INTEGER, to, 60, e, N, MPI_INTEGER, from, 60, &
                    MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call check(host_is(e, from + 60, N), "Sendrecv dev0 -> host: data")
  call pattern(e, rank + 61, N)
  call MPI_Sendrecv(e, N, MPI_INTEGER, to, 61, d1, N, MPI_INTEGER, from, 61, &
                    MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call check(dev_is(g1, a1, from + 61, N), "Sendrecv host -> dev1: data")
  ! A device send into host receives, Irecv + Wait and Recv (pipelined
  ! messages under CUCOPY_MPI_PIPELINE_KB=1: the envelope check of the host
  ! receives); the status counts the message.
  call fill(0, a0, rank + 62, N)
  e(1:N) = -1
  call MPI_Irecv(e, N, MPI_INTEGER, from, 62, MPI_COMM_WORLD, rr, ierr)
  call MPI_Send(d0, N, MPI_INTEGER, to, 62, MPI_COMM_WORLD, ierr)
  call MPI_Wait(rr, st, ierr)
  call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
  call check(cnt == N .and. host_is(e, from + 62, N), "Send dev0 -> Irecv host: data, count")
  call fill(0, a0, rank + 63, N)
  e(1:N) = -1
  call MPI_Isend(d0, N, MPI_INTEGER, to, 63, MPI_COMM_WORLD, rs, ierr)
  call MPI_Recv(e, N, MPI_INTEGER, from, 63, MPI_COMM_WORLD, st, ierr)
  call MPI_Wait(rs, MPI_STATUS_IGNORE, ierr)
  call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
  call check(cnt == N .and. host_is(e, from + 63, N), "Isend dev0 -> Recv host: data, count")

  ! 7. Test until done; Waitany; Waitsome; Testall.
  call fill(g1, a1, rank + 70, N)
  call MPI_Irecv(d0, N, MPI_INTEGER, from, 70, MPI_COMM_WORLD, rr, ierr)
  call MPI_Isend(d1, N, MPI_INTEGER, to, 70, MPI_COMM_WORLD, rs, ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Test(rr, flag, st, ierr)
  end do
  call MPI_Wait(rs, MPI_STATUS_IGNORE, ierr)
  call check(dev_is(0, a0, from + 70, N), "Test loop: data")
  call fill(0, a0, rank + 71, N)
  call MPI_Irecv(d1, N, MPI_INTEGER, from, 71, MPI_COMM_WORLD, r(1), ierr)
  call MPI_Isend(d0, N, MPI_INTEGER, to, 71, MPI_COMM_WORLD, r(2), ierr)
  outcount = 0
  do while (r(1) /= MPI_REQUEST_NULL)
    call MPI_Waitany(2, r, idx, st, ierr)
    outcount = outcount + 1
  end do
  call MPI_Wait(r(2), MPI_STATUS_IGNORE, ierr)
  call check(dev_is(g1, a1, from + 71, N), "Waitany: data")
  call fill(g1, a1, rank + 72, N)
  call MPI_Irecv(d0, N, MPI_INTEGER, from, 72, MPI_COMM_WORLD, r(1), ierr)
  call MPI_Isend(d1, N, MPI_INTEGER, to, 72, MPI_COMM_WORLD, r(2), ierr)
  do while (r(1) /= MPI_REQUEST_NULL .or. r(2) /= MPI_REQUEST_NULL)
    call MPI_Waitsome(2, r, outcount, indices, MPI_STATUSES_IGNORE, ierr)
  end do
  call check(dev_is(0, a0, from + 72, N), "Waitsome: data")
  call fill(0, a0, rank + 73, N)
  call MPI_Irecv(d1, N, MPI_INTEGER, from, 73, MPI_COMM_WORLD, r(1), ierr)
  call MPI_Isend(d0, N, MPI_INTEGER, to, 73, MPI_COMM_WORLD, r(2), ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Testall(2, r, flag, MPI_STATUSES_IGNORE, ierr)
  end do
  call check(dev_is(g1, a1, from + 73, N), "Testall: data")

  ! 7b. Testany, Testsome and Request_get_status until done; Issend, Ibsend,
  ! Bsend; Rsend and Irsend against posted receives.
  call fill(0, a0, rank + 74, N)
  call MPI_Irecv(d1, N, MPI_INTEGER, from, 74, MPI_COMM_WORLD, r(1), ierr)
  call MPI_Issend(d0, N, MPI_INTEGER, to, 74, MPI_COMM_WORLD, r(2), ierr)
  do while (r(1) /= MPI_REQUEST_NULL .or. r(2) /= MPI_REQUEST_NULL)
    call MPI_Testany(2, r, idx, flag, MPI_STATUS_IGNORE, ierr)
  end do
  call check(dev_is(g1, a1, from + 74, N), "Issend + Testany: data")
  call fill(g1, a1, rank + 75, N)
  call MPI_Irecv(d0, N, MPI_INTEGER, from, 75, MPI_COMM_WORLD, r(1), ierr)
  call MPI_Ibsend(d1, N, MPI_INTEGER, to, 75, MPI_COMM_WORLD, r(2), ierr)
  do while (r(1) /= MPI_REQUEST_NULL .or. r(2) /= MPI_REQUEST_NULL)
    call MPI_Testsome(2, r, outcount, indices, sts, ierr)
  end do
  call check(dev_is(0, a0, from + 75, N), "Ibsend + Testsome: data")
  call fill(0, a0, rank + 76, N)
  call MPI_Irecv(d1, N, MPI_INTEGER, from, 76, MPI_COMM_WORLD, rr, ierr)
  call MPI_Bsend(d0, N, MPI_INTEGER, to, 76, MPI_COMM_WORLD, ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Request_get_status(rr, flag, st, ierr)
  end do
  call check(dev_is(g1, a1, from + 76, N), "Bsend + Request_get_status: data before the Wait")
  call MPI_Wait(rr, st, ierr)
  call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
  call check(cnt == N .and. dev_is(g1, a1, from + 76, N), "Request_get_status, then Wait")
  call fill(g1, a1, rank + 77, N)
  call MPI_Irecv(d0, N / 2, MPI_INTEGER, from, 77, MPI_COMM_WORLD, r(1), ierr)
  call MPI_Irecv(d0half, N / 2, MPI_INTEGER, from, 78, MPI_COMM_WORLD, r(2), ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Rsend(d1, N / 2, MPI_INTEGER, to, 77, MPI_COMM_WORLD, ierr)
  call MPI_Irsend(d1half, N / 2, MPI_INTEGER, to, 78, MPI_COMM_WORLD, r(3), ierr)
  call MPI_Waitall(3, r, MPI_STATUSES_IGNORE, ierr)
  call check(dev_is(0, a0, from + 77, N), "Rsend + Irsend dev1 -> dev0: data")
#if defined(CUCOPY_F08)
  ! use mpi_f08: the optional ierror left out (NULL to the wrappers).
  call fill(0, a0, rank + 79, N)
  call MPI_Irecv(d1, N, MPI_INTEGER, from, 79, MPI_COMM_WORLD, r(1))
  call MPI_Isend(d0, N, MPI_INTEGER, to, 79, MPI_COMM_WORLD, r(2))
  call MPI_Wait(r(2), MPI_STATUS_IGNORE)
  call MPI_Waitall(1, r, MPI_STATUSES_IGNORE)
  call check(dev_is(g1, a1, from + 79, N), "f08 without ierror: data")
#endif

  ! 8. Persistent requests, restarted: Startall + Waitall, Start + Wait,
  ! Ssend_init and Send_init.
  call MPI_Ssend_init(d0, N, MPI_INTEGER, to, 80, MPI_COMM_WORLD, rs, ierr)
  call MPI_Recv_init(d1, N, MPI_INTEGER, from, 80, MPI_COMM_WORLD, rr, ierr)
  do round = 1, 6
    call fill(0, a0, rank + 80 + round, N)
    r(1) = rr
    r(2) = rs
    if (mod(round, 2) == 0) then
      call MPI_Startall(2, r, ierr)
      call MPI_Waitall(2, r, MPI_STATUSES_IGNORE, ierr)
    else
      call MPI_Start(rr, ierr)
      call MPI_Start(rs, ierr)
      call MPI_Wait(rs, MPI_STATUS_IGNORE, ierr)
      call MPI_Wait(rr, st, ierr)
    end if
    call check(dev_is(g1, a1, from + 80 + round, N), "persistent round: data")
  end do
  call MPI_Request_free(rs, ierr)
  call MPI_Request_free(rr, ierr)
  call MPI_Send_init(d1, N, MPI_INTEGER, to, 81, MPI_COMM_WORLD, rs, ierr)
  call MPI_Recv_init(d0, N, MPI_INTEGER, from, 81, MPI_COMM_WORLD, rr, ierr)
  do round = 1, 3
    call fill(g1, a1, rank + 180 + round, N)
    call MPI_Start(rr, ierr)
    call MPI_Start(rs, ierr)
    flag = .false.
    do while (.not. flag)
      call MPI_Test(rr, flag, MPI_STATUS_IGNORE, ierr)
    end do
    call MPI_Wait(rs, MPI_STATUS_IGNORE, ierr)
    call check(dev_is(0, a0, from + 180 + round, N), "Send_init + Test: data")
  end do
  call MPI_Request_free(rs, ierr)
  call MPI_Request_free(rr, ierr)

  ! 9. Probes, then matched receives: Mprobe + Mrecv, Mprobe + Imrecv + Wait.
  !    Each probe counts the message's elements (also a pipelined one's).
  call fill(g1, a1, rank + 90, N)
  call MPI_Isend(d1, N, MPI_INTEGER, to, 90, MPI_COMM_WORLD, rs, ierr)
  call MPI_Probe(from, 90, MPI_COMM_WORLD, st, ierr)
  call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
  call check(cnt == N, "Probe: count")
  flag = .false.
  call MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, flag, st, ierr)
  call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
  call check(flag .and. cnt == N, "Iprobe: flag and count")
  call MPI_Mprobe(from, 90, MPI_COMM_WORLD, msg, st, ierr)
  call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
  call check(cnt == N, "Mprobe: count")
  call MPI_Mrecv(d0, N, MPI_INTEGER, msg, st, ierr)
  call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
  call check(cnt == N .and. SOURCE_OF(st) == from .and. TAG_OF(st) == 90, "Mrecv: status")
  call MPI_Wait(rs, MPI_STATUS_IGNORE, ierr)
  call check(dev_is(0, a0, from + 90, N), "Mrecv dev0: data")
  call fill(0, a0, rank + 91, N)
  call MPI_Isend(d0, N, MPI_INTEGER, to, 91, MPI_COMM_WORLD, rs, ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Improbe(from, 91, MPI_COMM_WORLD, flag, msg, st, ierr)
  end do
  call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
  call check(cnt == N, "Improbe: count")
  call MPI_Imrecv(d1, N, MPI_INTEGER, msg, rr, ierr)
  call MPI_Wait(rr, st, ierr)
  call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
  call check(cnt == N .and. SOURCE_OF(st) == from .and. TAG_OF(st) == 91, "Imrecv: status")
  call MPI_Wait(rs, MPI_STATUS_IGNORE, ierr)
  call check(dev_is(g1, a1, from + 91, N), "Imrecv dev1: data")

  ! 10. A short message: the status says how much, the rest is untouched.
  call fill(0, a0, rank + 100, N)
  call fill(g1, a1, 7, N)
  call MPI_Irecv(d1, N, MPI_INTEGER, from, 100, MPI_COMM_WORLD, rr, ierr)
  call MPI_Send(d0, N / 4, MPI_INTEGER, to, 100, MPI_COMM_WORLD, ierr)
  call MPI_Wait(rr, st, ierr)
  call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
  call check(cnt == N / 4 .and. dev_is(g1, a1, from + 100, N / 4), "short message: data")
  call check(dev_is(g1, a1 + N / 4 * 4, 7, N - N / 4, N / 4), "short message: the rest")

  ! 11. A large message (1.2 MB): device 0 to device 1, blocking send.
  call fill(0, ab, rank + 110, BIG)
  call fill(g1, ab1, 0, BIG)
  call MPI_Irecv(db1, BIG, MPI_INTEGER, from, 110, MPI_COMM_WORLD, rr, ierr)
  call MPI_Send(db, BIG, MPI_INTEGER, to, 110, MPI_COMM_WORLD, ierr)
  call MPI_Wait(rr, MPI_STATUS_IGNORE, ierr)
  call check(dev_is(g1, ab1, from + 110, BIG), "large message dev0 -> dev1: data")

  ! 12. A type with holes on device memory is staged packed (docs/mpi.md
  ! "Non-contiguous datatypes"): INTEGERs 1, 2, 6, 7 of d1 get the peer's,
  ! the others keep their canary.
  call MPI_Type_vector(2, 2, 5, MPI_INTEGER, vec, ierr)
  call MPI_Type_commit(vec, ierr)
  call fill(0, a0, rank + 120, N)
  call fill(g1, a1, 7, N)
  call MPI_Sendrecv(d0, 1, vec, to, 120, d1, 1, vec, from, 120, MPI_COMM_WORLD, st, ierr)
  call MPI_Get_count(st, vec, cnt, ierr2)
  call check(ierr == MPI_SUCCESS .and. cnt == 1, "vector type on device memory: Sendrecv")
  call check(strided(g1, a1, from + 120, 7, 5, 2), "vector type on device memory: data, holes")
  ! The shim's layout of a freed type must go with it (Open MPI's Fortran
  ! MPI_Type_free and MPICH's mpi_f08 one call PMPI_Type_free: the shim's
  ! Fortran entry): the next type likely gets the same handle, and has the
  ! same size, extent and envelope (every other INTEGER: 1, 3, 5, 7).
  call MPI_Type_free(vec, ierr)
  call MPI_Type_vector(4, 1, 2, MPI_INTEGER, vec, ierr)
  call MPI_Type_commit(vec, ierr)
  call fill(0, a0, rank + 122, N)
  call fill(g1, a1, 8, N)
  call MPI_Sendrecv(d0, 1, vec, to, 122, d1, 1, vec, from, 122, MPI_COMM_WORLD, st, ierr)
  call check(strided(g1, a1, from + 122, 8, 2, 1), "a type made after MPI_Type_free: data, holes")
  ! Refused with an MPI error (MPI_ERRORS_RETURN), nothing sent: Fortran's
  ! MPI_BOTTOM with an absolute type whose block is device memory (the MPI's
  ! own Fortran MPI_BOTTOM must be seen as C's: else its block would be read
  ! on the CPU).
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  call MPI_Get_address(d0, addr(1), ierr)
  call MPI_Type_create_hindexed(1, [N], addr, MPI_INTEGER, absolute, ierr)
  call MPI_Type_commit(absolute, ierr)
  call MPI_Send(MPI_BOTTOM, 1, absolute, to, 121, MPI_COMM_WORLD, ierr)
  cls = MPI_SUCCESS
  if (ierr /= MPI_SUCCESS) call MPI_Error_class(ierr, cls, ierr2)
  call check(cls == MPI_ERR_BUFFER, "MPI_BOTTOM reaching device memory: MPI_ERR_BUFFER")
  call MPI_Type_free(vec, ierr)
  call MPI_Type_free(absolute, ierr)
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL, ierr)

  call MPI_Barrier(MPI_COMM_WORLD, ierr)
#if !defined(CUCOPY_F08)
  call MPI_Buffer_detach(battach, cnt, ierr)
#endif
  if (ftd_dev_free(0, a0) /= 0 .or. ftd_dev_free(g1, a1) /= 0 .or. ftd_dev_free(0, ab) /= 0 &
      .or. ftd_dev_free(g1, ab1) /= 0) call check(.false., "cuMemFree")
  call MPI_Finalize(ierr)
  if (fails == 0) then
    write(*, '(a,i0,a,i0,a)') "f_p2p: rank ", rank, ": PASS (", checks, " checks)"
  else
    write(*, '(a,i0,a,i0,a,i0,a)') "f_p2p: rank ", rank, ": FAILED (", fails, " of ", &
      checks, " checks)"
    error stop 1
  end if

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    checks = checks + 1
    if (.not. ok) then
      fails = fails + 1
      write(*, '(a,i0,a)') "f_p2p: rank ", rank, ": FAILED: " // what
    end if
  end subroutine check

  subroutine pattern(v, seed, count)
    integer, intent(out) :: v(:)
    integer, intent(in) :: seed, count
    integer :: i
    do i = 1, count
      v(i) = seed * 100003 + i
    end do
  end subroutine pattern

  !> count INTEGERs of the pattern of seed at device address addr.
  subroutine fill(dev, addr, seed, count)
    integer, intent(in) :: dev, seed, count
    integer(c_int64_t), intent(in) :: addr
    call pattern(h, seed, count)
    if (ftd_htod(dev, addr, c_loc(h), int(count * 4, c_size_t)) /= 0) &
      call check(.false., "cuMemcpyHtoD")
  end subroutine fill

  logical function host_is(v, seed, count)
    integer, intent(in) :: v(:), seed, count
    integer :: i
    host_is = .true.
    do i = 1, count
      if (v(i) /= seed * 100003 + i) then
        host_is = .false.
        return
      end if
    end do
  end function host_is

  !> The device holds count INTEGERs of seed's pattern at addr, starting at
  !> its element skip + 1 (default 0).
  logical function dev_is(dev, addr, seed, count, skip)
    integer, intent(in) :: dev, seed, count
    integer(c_int64_t), intent(in) :: addr
    integer, intent(in), optional :: skip
    integer :: i, s
    s = 0
    if (present(skip)) s = skip
    dev_is = .true.
    if (count == 0) return
    if (ftd_dtoh(dev, c_loc(h), addr, int(count * 4, c_size_t)) /= 0) then
      dev_is = .false.
      return
    end if
    do i = 1, count
      if (h(i) /= seed * 100003 + s + i) then
        dev_is = .false.
        return
      end if
    end do
  end function dev_is

  !> The first 8 INTEGERs at addr: blocks of blen from 1, stride apart, up to
  !> the 7th, of seed's pattern, the others of the canary's.
  logical function strided(dev, addr, seed, canary, stride, blen)
    integer, intent(in) :: dev, seed, canary, stride, blen
    integer(c_int64_t), intent(in) :: addr
    integer :: i, want
    strided = ftd_dtoh(dev, c_loc(h), addr, int(8 * 4, c_size_t)) == 0
    do i = 1, 8
      want = canary * 100003 + i
      if (mod(i - 1, stride) < blen .and. i <= 7) want = seed * 100003 + i
      if (h(i) /= want) strided = .false.
    end do
  end function strided
end program f_p2p
