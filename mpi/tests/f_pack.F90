! SPDX-License-Identifier: BSD-3-Clause
!
! MPI_Pack and MPI_Unpack with device buffers from Fortran, run under
! LD_PRELOAD=libcucopy_mpi.so (mpirun -n 2; typed buffers on device 0,
! packed ones on device 1, or device 0 again on a one-GPU machine). Built
! three times from this file, as f_icoll.F90: -DCUCOPY_MPIFH (include
! 'mpif.h'), neither (use mpi) and -DCUCOPY_F08 (use mpi_f08). Open MPI's
! Fortran MPI_Pack and MPI_Unpack call PMPI_Pack and PMPI_Unpack directly,
! past the shim's C wrappers: the shim's Fortran entry points must catch
! them.
!
! Two packs into one device buffer from position 8 (K INTEGERs, then one
! element of a vector type: K INTEGERs with holes), then the two unpacks
! from it into device buffers holding a canary; each call also on host
! arrays, and every device buffer read back whole must equal its host twin
! (only the bytes MPI writes change), the positions too. Without the shim
! the first device call (MPI_Pack) faults inside MPI: the negative control.
!
! Prints "f_pack: rank R: PASS (N checks)", or a "FAIL: f_pack: rank R: ..."
! line per failed check and "f_pack: rank R: FAILED (...)"; exit status 1 on
! a failure.
program f_pack
  use, intrinsic :: iso_c_binding
  use ftest, only: ftd_init, ftd_dev_alloc, ftd_dev_free, ftd_htod, ftd_dtoh, ft_check, &
                   ft_report
#include "f_mpi.h"

  integer, parameter :: K = 7, NMAX = 128, NB = 4
  integer :: rank, ierr, g1, ndev, q, pos, hpos, psize, vsize
  character(len=32) :: who
  DATATYPE :: vec
  ! Buffers 1, 2: typed (device 0); 3: packed (device 1); 4: unpacked into.
  integer :: dev(NB)
  integer(c_int64_t) :: addr(NB)
  integer, pointer, contiguous :: d1(:) => null(), d2(:) => null(), d3(:) => null(), &
                                  d4(:) => null()
  integer, target :: h(NMAX, NB), got(NMAX)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  write(who, '(a,i0,a)') "f_pack: rank ", rank, ":"
  ndev = ftd_init()
  if (ndev < 1) then
    write(*, '(a)') trim(who) // " FAILED: no device"
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  g1 = min(1, ndev - 1)
  dev = [0, 0, g1, g1]
  do q = 1, NB
    addr(q) = ftd_dev_alloc(dev(q), int(NMAX * 4, c_size_t))
  end do
  call c_f_pointer(transfer(addr(1), c_null_ptr), d1, [NMAX])
  call c_f_pointer(transfer(addr(2), c_null_ptr), d2, [NMAX])
  call c_f_pointer(transfer(addr(3), c_null_ptr), d3, [NMAX])
  call c_f_pointer(transfer(addr(4), c_null_ptr), d4, [NMAX])
  call MPI_Type_vector(K, 1, 2, MPI_INTEGER, vec, ierr)
  call MPI_Type_commit(vec, ierr)
  call MPI_Pack_size(K, MPI_INTEGER, MPI_COMM_WORLD, psize, ierr)
  call MPI_Pack_size(1, vec, MPI_COMM_WORLD, vsize, ierr)
  do q = 1, NMAX
    h(q, 1) = 100 * rank + q
    h(q, 2) = -100 * rank - q
    h(q, 3) = -7000 - q
    h(q, 4) = -9000 - q
  end do
  do q = 1, NB
    if (ftd_htod(dev(q), addr(q), c_loc(h(1, q)), int(NMAX * 4, c_size_t)) /= 0) &
      call check(.false., "cuMemcpyHtoD")
  end do

  ! Pack K INTEGERs, then one vector, into buffer 3 from byte 8.
  pos = 8
  hpos = 8
  call MPI_Pack(d1, K, MPI_INTEGER, d3, NMAX * 4, pos, MPI_COMM_WORLD, ierr)
  call check(ierr == MPI_SUCCESS, "MPI_Pack of INTEGERs")
  call MPI_Pack(h(:, 1), K, MPI_INTEGER, h(:, 3), NMAX * 4, hpos, MPI_COMM_WORLD, ierr)
  call MPI_Pack(d2, 1, vec, d3, NMAX * 4, pos, MPI_COMM_WORLD, ierr)
  call check(ierr == MPI_SUCCESS, "MPI_Pack of a vector")
  call MPI_Pack(h(:, 2), 1, vec, h(:, 3), NMAX * 4, hpos, MPI_COMM_WORLD, ierr)
  call check(pos == hpos .and. pos == 8 + psize + vsize, "MPI_Pack: the position")
  call same(3, "MPI_Pack: the packed device buffer")

  ! Unpack them: the INTEGERs into buffer 4, the vector over buffer 4 again
  ! from element K + 1 (its holes keep the INTEGERs or the canary).
  pos = 8
  hpos = 8
  call MPI_Unpack(d3, NMAX * 4, pos, d4, K, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call check(ierr == MPI_SUCCESS, "MPI_Unpack of INTEGERs")
  call MPI_Unpack(h(:, 3), NMAX * 4, hpos, h(:, 4), K, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call same(4, "MPI_Unpack of INTEGERs: the device buffer")
  call MPI_Unpack(d3, NMAX * 4, pos, d1, 1, vec, MPI_COMM_WORLD, ierr)
  call check(ierr == MPI_SUCCESS, "MPI_Unpack of a vector")
  call MPI_Unpack(h(:, 3), NMAX * 4, hpos, h(:, 1), 1, vec, MPI_COMM_WORLD, ierr)
  call check(pos == hpos, "MPI_Unpack: the position")
  call same(1, "MPI_Unpack of a vector: the device buffer (holes kept)")
  call check(any(h(:, 1) /= [(100 * rank + q, q = 1, NMAX)]), "MPI_Unpack wrote something")

  call MPI_Type_free(vec, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  do q = 1, NB
    if (ftd_dev_free(dev(q), addr(q)) /= 0) call check(.false., "cuMemFree")
  end do
  call MPI_Finalize(ierr)
  call ft_report(who)

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    call ft_check(ok, trim(who) // " " // what)
  end subroutine check

  !> Device buffer q read back whole must equal its host twin h(:, q).
  subroutine same(q, what)
    integer, intent(in) :: q
    character(len=*), intent(in) :: what
    logical :: ok
    got = 0
    ok = ftd_dtoh(dev(q), c_loc(got), addr(q), int(NMAX * 4, c_size_t)) == 0
    if (ok) ok = all(got == h(:, q))
    call check(ok, what)
  end subroutine same
end program f_pack
