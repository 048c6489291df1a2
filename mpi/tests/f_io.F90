! SPDX-License-Identifier: BSD-3-Clause
!
! MPI-IO and RMA with device buffers from Fortran, run under
! LD_PRELOAD=libcucopy_mpi.so (mpirun -n 2 and -n 3). Built three times from
! this file, as f_p2p.F90: -DCUCOPY_MPIFH (include 'mpif.h'), neither (use
! mpi) and -DCUCOPY_F08 (use mpi_f08). Open MPI's Fortran MPI-IO and RMA call
! PMPI_File_*, PMPI_Win_create, PMPI_Put & co. directly: the shim's Fortran
! entry points must catch them.
!
! One file (the path is the argument), rank r's block of K INTEGERs at
! r * K INTEGERs: written from device 0 with MPI_File_write_at, read back on
! the host (the file holds the data) and into device 1 with
! MPI_File_read_at_all; a short read at the end of the file (the status counts
! what was read, the rest of the device buffer keeps its canary); the second
! half of the file written with MPI_File_write_all through the individual
! file pointer and read back with MPI_File_read; MPI_File_write_ordered and
! MPI_File_read_ordered (back into device 0). Refused with MPI_ERR_UNSUPPORTED_OPERATION and no
! request: MPI_File_iread and MPI_File_iwrite_at of a device buffer,
! MPI_File_write_all_begin of one, MPI_Win_create on device memory, MPI_Put,
! MPI_Get and MPI_Rget with a device origin on a host window. Without the shim
! the device data does not reach the file (Open MPI 4.1 writes nothing and
! returns MPI_SUCCESS; measured in C by io_device.c): the negative control
! requires this program's check of the file to fail.
!
! Prints "f_io: rank R: PASS (N checks)", or "FAIL: f_io: rank R: ..." lines
! and "f_io: rank R: FAILED (...)"; exit status 1 on a failure.
program f_io
  use, intrinsic :: iso_c_binding
  use ftest, only: ftd_init, ftd_dev_alloc, ftd_dev_free, ftd_htod, ftd_dtoh, ft_check, &
                   ft_report
#include "f_mpi.h"

#if defined(CUCOPY_F08)
#define STATUS_DECL type(MPI_Status) :: st
#else
#define STATUS_DECL integer :: st(MPI_STATUS_SIZE)
#endif

  integer, parameter :: K = 1000, CANARY = -777
  integer :: rank, np, next, ierr, n, ndev, g1
  FILE_H :: fh
  WIN_H :: win
  REQUEST :: req
  STATUS_DECL
  integer(MPI_OFFSET_KIND) :: off
  integer(MPI_ADDRESS_KIND) :: wsize, tdisp
  integer(c_int64_t) :: a0, a1
  integer, pointer, contiguous :: d0(:), d1(:)
  integer, target :: hi(2 * K), want(2 * K), hwin(4)
  character(len=512) :: path
  character(len=32) :: who

  call get_command_argument(1, path)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  write(who, '(a,i0,a)') "f_io: rank ", rank, ":"
  next = mod(rank + 1, np)
  ndev = ftd_init()
  if (ndev < 1 .or. len_trim(path) == 0) then
    write(*, '(a)') trim(who) // " FAILED: no device, or no file path argument"
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  g1 = min(1, ndev - 1)
  a0 = ftd_dev_alloc(0, int(2 * K * 4, c_size_t))
  a1 = ftd_dev_alloc(g1, int(2 * K * 4, c_size_t))
  call c_f_pointer(transfer(a0, c_null_ptr), d0, [2 * K])
  call c_f_pointer(transfer(a1, c_null_ptr), d1, [2 * K])
  ! Errors come back (the refusals below): files return by default, the
  ! communicator and the window are set to.
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  if (rank == 0) call MPI_File_delete(trim(path), MPI_INFO_NULL, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_File_open(MPI_COMM_WORLD, trim(path), ior(MPI_MODE_CREATE, MPI_MODE_RDWR), &
                     MPI_INFO_NULL, fh, ierr)
  call check(ierr == MPI_SUCCESS, "MPI_File_open")

  ! 1. MPI_File_write_at from device 0: rank r's block at r * K INTEGERs.
  call pat(hi, K, rank)
  call put(a0, 0, hi, K)
  off = int(rank, MPI_OFFSET_KIND) * K * 4
  ierr = -1
  call MPI_File_write_at(fh, off, d0, K, MPI_INTEGER, st, ierr)
  call check_count(ierr, K, "MPI_File_write_at from device memory")
  call MPI_File_sync(fh, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_File_sync(fh, ierr)
  ! 2. The file holds it: the next rank's block read on the host.
  hi = CANARY
  off = int(next, MPI_OFFSET_KIND) * K * 4
  call MPI_File_read_at(fh, off, hi, K, MPI_INTEGER, st, ierr)
  call pat(want, K, next)
  call check(ierr == MPI_SUCCESS .and. all(hi(1:K) == want(1:K)), &
             "the file holds the device data (read on the host)")
  ! 3. MPI_File_read_at_all into device 1: the next rank's block, the rest of
  ! the buffer keeps its canary.
  want = CANARY
  call put(a1, g1, want, 2 * K)
  ierr = -1
  call MPI_File_read_at_all(fh, off, d1, K, MPI_INTEGER, st, ierr)
  call check_count(ierr, K, "MPI_File_read_at_all into device memory")
  call pat(want, K, next)
  call expect(a1, g1, want, 2 * K, "MPI_File_read_at_all: data and canary")
  ! 4. A short read at the end of the file: 2 K asked from the middle of the
  ! last block, K / 2 there.
  want = CANARY
  call put(a1, g1, want, 2 * K)
  off = (int(np, MPI_OFFSET_KIND) * K - K / 2) * 4
  ierr = -1
  call MPI_File_read_at(fh, off, d1, 2 * K, MPI_INTEGER, st, ierr)
  call check_count(ierr, K / 2, "MPI_File_read_at at the end of the file: the count read")
  call pat(hi, K, np - 1)
  want(1:K / 2) = hi(K / 2 + 1:K)
  call expect(a1, g1, want, 2 * K, "MPI_File_read_at at the end: the rest untouched")
  call MPI_Barrier(MPI_COMM_WORLD, ierr) ! before anyone makes the file longer

  ! 5. MPI_File_write_all through the individual file pointer (the second half
  ! of the file), read back with MPI_File_read.
  call pat(hi, K, 100 + rank)
  call put(a0, 0, hi, K)
  off = (int(np, MPI_OFFSET_KIND) + rank) * K * 4
  call MPI_File_seek(fh, off, MPI_SEEK_SET, ierr)
  ierr = -1
  call MPI_File_write_all(fh, d0, K, MPI_INTEGER, st, ierr)
  call check_count(ierr, K, "MPI_File_write_all from device memory")
  call MPI_File_sync(fh, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_File_sync(fh, ierr)
  off = (int(np, MPI_OFFSET_KIND) + next) * K * 4
  call MPI_File_seek(fh, off, MPI_SEEK_SET, ierr)
  want = CANARY
  call put(a1, g1, want, 2 * K)
  ierr = -1
  call MPI_File_read(fh, d1, K, MPI_INTEGER, MPI_STATUS_IGNORE, ierr)
  call check(ierr == MPI_SUCCESS, "MPI_File_read into device memory, MPI_STATUS_IGNORE")
  call pat(want, K, 100 + next)
  call expect(a1, g1, want, 2 * K, "MPI_File_read: data and canary")

  ! 6. The shared file pointer: write_ordered from device 0 after the end of
  ! the file, read_ordered back into device 0 (rank order: the same blocks).
  call MPI_File_seek_shared(fh, int(2 * np, MPI_OFFSET_KIND) * K * 4, MPI_SEEK_SET, ierr)
  call pat(hi, K, 200 + rank)
  call put(a0, 0, hi, K)
  ierr = -1
  call MPI_File_write_ordered(fh, d0, K, MPI_INTEGER, st, ierr)
  call check_count(ierr, K, "MPI_File_write_ordered from device memory")
  call MPI_File_sync(fh, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_File_sync(fh, ierr)
  call MPI_File_seek_shared(fh, int(2 * np, MPI_OFFSET_KIND) * K * 4, MPI_SEEK_SET, ierr)
  want = CANARY
  call put(a0, 0, want, 2 * K)
  ierr = -1
  call MPI_File_read_ordered(fh, d0, K, MPI_INTEGER, st, ierr)
  call check_count(ierr, K, "MPI_File_read_ordered into device memory")
  call pat(want, K, 200 + rank)
  call expect(a0, 0, want, 2 * K, "MPI_File_read_ordered: data and canary")

  ! 7. Refused: nonblocking IO and a split collective on device memory.
  req = MPI_REQUEST_NULL
  call MPI_File_iread(fh, d1, K, MPI_INTEGER, req, ierr)
  call refused(ierr, "MPI_File_iread of device memory")
  call check(req == MPI_REQUEST_NULL, "MPI_File_iread refused: no request")
  off = 0
  call MPI_File_iwrite_at(fh, off, d0, K, MPI_INTEGER, req, ierr)
  call refused(ierr, "MPI_File_iwrite_at of device memory")
  call MPI_File_write_all_begin(fh, d0, K, MPI_INTEGER, ierr)
  call refused(ierr, "MPI_File_write_all_begin of device memory")
  call MPI_File_close(fh, ierr)
  call check(ierr == MPI_SUCCESS, "MPI_File_close")
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) call MPI_File_delete(trim(path), MPI_INFO_NULL, ierr)

  ! 8. RMA: a window on device memory refused (on every rank: nobody enters
  ! the collective); device origin buffers refused on a host window.
  wsize = 2 * K * 4
  call MPI_Win_create(d0, wsize, 4, MPI_INFO_NULL, MPI_COMM_WORLD, win, ierr)
  call refused(ierr, "MPI_Win_create on device memory")
  wsize = 4 * 4
  hwin = CANARY
  call MPI_Win_create(hwin, wsize, 4, MPI_INFO_NULL, MPI_COMM_WORLD, win, ierr)
  call check(ierr == MPI_SUCCESS, "MPI_Win_create on host memory")
  call MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN, ierr)
  call MPI_Win_fence(0, win, ierr)
  tdisp = 0
  call MPI_Put(d0, 1, MPI_INTEGER, next, tdisp, 1, MPI_INTEGER, win, ierr)
  call refused(ierr, "MPI_Put from device memory")
  call MPI_Get(d1, 1, MPI_INTEGER, next, tdisp, 1, MPI_INTEGER, win, ierr)
  call refused(ierr, "MPI_Get into device memory")
  call MPI_Win_fence(0, win, ierr)
  call MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win, ierr)
  req = MPI_REQUEST_NULL
  call MPI_Rget(d1, 1, MPI_INTEGER, next, tdisp, 1, MPI_INTEGER, win, req, ierr)
  call refused(ierr, "MPI_Rget into device memory")
  call check(req == MPI_REQUEST_NULL, "MPI_Rget refused: no request")
  call MPI_Win_unlock(next, win, ierr)
  call MPI_Win_free(win, ierr)
  call check(all(hwin == CANARY), "the host window untouched by the refused calls")

  if (ftd_dev_free(0, a0) /= 0 .or. ftd_dev_free(g1, a1) /= 0) call check(.false., "cuMemFree")
  call MPI_Finalize(ierr)
  call ft_report(who)

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    call ft_check(ok, trim(who) // " " // what)
  end subroutine check

  !> The call succeeded and its status counts @p want INTEGERs.
  subroutine check_count(e, want_n, what)
    integer, intent(in) :: e, want_n
    character(len=*), intent(in) :: what
    integer :: got, e2
    got = -1
    if (e == MPI_SUCCESS) call MPI_Get_count(st, MPI_INTEGER, got, e2)
    call check(e == MPI_SUCCESS .and. got == want_n, what)
  end subroutine check_count

  !> The call failed with MPI_ERR_UNSUPPORTED_OPERATION (the shim's refusal).
  subroutine refused(e, what)
    integer, intent(in) :: e
    character(len=*), intent(in) :: what
    integer :: cls, e2
    cls = MPI_SUCCESS
    if (e /= MPI_SUCCESS) call MPI_Error_class(e, cls, e2)
    call check(cls == MPI_ERR_UNSUPPORTED_OPERATION, what // ": MPI_ERR_UNSUPPORTED_OPERATION")
  end subroutine refused

  subroutine pat(v, count, s)
    integer, intent(out) :: v(:)
    integer, intent(in) :: count, s
    integer :: i
    do i = 1, count
      v(i) = 1000 * s + i
    end do
  end subroutine pat

  subroutine put(addr, dev, v, count)
    integer(c_int64_t), intent(in) :: addr
    integer, intent(in) :: dev, count
    integer, target, intent(in) :: v(:)
    if (ftd_htod(dev, addr, c_loc(v), int(count * 4, c_size_t)) /= 0) &
      call check(.false., "cuMemcpyHtoD")
  end subroutine put

  subroutine expect(addr, dev, v, count, what)
    integer(c_int64_t), intent(in) :: addr
    integer, intent(in) :: dev, count
    integer, intent(in) :: v(:)
    character(len=*), intent(in) :: what
    integer, target :: got(2 * K)
    logical :: ok
    ok = ftd_dtoh(dev, c_loc(got), addr, int(count * 4, c_size_t)) == 0
    if (ok) ok = all(got(1:count) == v(1:count))
    call check(ok, what)
  end subroutine expect
end program f_io
