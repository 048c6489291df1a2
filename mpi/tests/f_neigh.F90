! SPDX-License-Identifier: BSD-3-Clause
!
! The neighborhood collectives with device buffers from Fortran, run under
! LD_PRELOAD=libcucopy_mpi.so (mpirun -n 2 and -n 3; blocking calls from
! device 0 into device 1, nonblocking ones the other way; device 0 alone on
! a one-GPU machine).
! Built three times from this file, as f_icoll.F90: -DCUCOPY_MPIFH (include
! 'mpif.h'), neither (use mpi) and -DCUCOPY_F08 (use mpi_f08). Open MPI's
! Fortran neighborhood collectives call PMPI_* directly, past the shim's C
! wrappers: the shim's Fortran entry points must catch them.
!
! On a non-periodic 1-D Cartesian communicator (MPI_PROC_NULL neighbours at
! both ends) and a periodic 2-D one: MPI_Neighbor_allgather, _allgatherv,
! _alltoall, _alltoallv and _alltoallw (byte displacements of
! INTEGER(MPI_ADDRESS_KIND)), then the same five as MPI_Ineighbor_*, each
! completed by MPI_Waitall with the same call on host arrays. The receive
! buffer starts as a canary; after each call it is read back whole from the
! device and must equal the host array the same call filled (blocks where MPI
! writes, the canary in the gaps and in the blocks of MPI_PROC_NULL
! neighbours). Without the shim the first device call (MPI_Neighbor_allgather)
! faults inside MPI: the negative control.
!
! MPICH 4.0.2's `use mpi_f08` MPI_Neighbor_alltoallw and _Ineighbor_alltoallw
! abort on a Cartesian communicator, on host memory and without the shim
! (they ask for the degrees of a distributed graph, measured 2026-12-01):
! skipped there, with a line saying so.
!
! Prints "f_neigh: rank R: PASS (N checks)", or a "FAIL: f_neigh: rank R: ..."
! line per failed check and "f_neigh: rank R: FAILED (...)"; exit status 1 on
! a failure.
program f_neigh
  use, intrinsic :: iso_c_binding
  use ftest, only: ftd_init, ftd_dev_alloc, ftd_dev_free, ftd_htod, ftd_dtoh, ft_check, &
                   ft_report
#include "f_mpi.h"

  ! K elements per block, NMAX in each buffer, at most NB neighbours.
  integer, parameter :: K = 5, NMAX = 256, NB = 4, CANARY = -777
  integer :: rank, np, ierr, g1, ndev, nd, q, op, nbk, dev(2)
  integer(c_int64_t) :: addr(2)
  integer, pointer, contiguous :: d0(:) => null(), d1(:) => null()
  character(len=32) :: who
  character(len=48) :: what
  COMM :: cart
  REQUEST :: req(2)
  integer :: dims(2)
  logical :: periods(2), ok, skip_w
  character(len=MPI_MAX_LIBRARY_VERSION_STRING) :: lib
  integer :: liblen
  integer, target :: hs(NMAX), hr(NMAX), got(NMAX), pat(NMAX), can(NMAX)
  ! Counts and displacements: MPI may read them until completion.
  integer :: cnt(NB), dsp(NB), kk(NB), ie(2)
  integer(kind=MPI_ADDRESS_KIND) :: bdsp(NB)
  DATATYPE :: types(NB)
  character(len=12), parameter :: names(5) = [character(len=12) :: "allgather", "allgatherv", &
                                              "alltoall", "alltoallv", "alltoallw"]

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  write(who, '(a,i0,a)') "f_neigh: rank ", rank, ":"
  ndev = ftd_init()
  if (ndev < 1) then
    write(*, '(a)') trim(who) // " FAILED: no device"
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  g1 = min(1, ndev - 1)
  ! Device 0 sends into device 1 (blocking), then the other way (nonblocking).
  dev = [0, g1]
  addr(1) = ftd_dev_alloc(0, int(NMAX * 4, c_size_t))
  addr(2) = ftd_dev_alloc(g1, int(NMAX * 4, c_size_t))
  call c_f_pointer(transfer(addr(1), c_null_ptr), d0, [NMAX])
  call c_f_pointer(transfer(addr(2), c_null_ptr), d1, [NMAX])
  kk = K
  call MPI_Get_library_version(lib, liblen, ierr)
  skip_w = .false.
#if defined(CUCOPY_F08)
  skip_w = index(lib, "MPICH") > 0
  if (skip_w .and. rank == 0) write(*, '(a)') trim(who) // " MPICH's mpi_f08 " // &
    "MPI_Neighbor_alltoallw aborts on a Cartesian communicator: skipped"
#endif
  do q = 1, NMAX
    pat(q) = 1000 * rank + q
    can(q) = CANARY - q
  end do

  do nd = 1, 2
    dims = 0
    periods = nd == 2
    call MPI_Dims_create(np, nd, dims, ierr)
    call MPI_Cart_create(MPI_COMM_WORLD, nd, dims, periods, .false., cart, ierr)
    ! Blocks: K + the dimension elements, in reverse order, 3 apart; alltoallw
    ! in bytes, of MPI_INTEGER.
    do q = 1, 2 * nd
      cnt(q) = K + (q - 1) / 2
      types(q) = MPI_INTEGER
    end do
    dsp(2 * nd) = 2
    do q = 2 * nd - 1, 1, -1
      dsp(q) = dsp(q + 1) + cnt(q + 1) + 3
    end do
    bdsp = 4 * int(dsp, MPI_ADDRESS_KIND)
    do nbk = 0, 1
      do op = 1, merge(4, 5, skip_w)
        call put(addr(1 + nbk), dev(1 + nbk), pat)
        call put(addr(2 - nbk), dev(2 - nbk), can)
        hs = pat
        hr = can
        req = MPI_REQUEST_NULL
        ie = -1
        if (nbk == 0) call neigh(op, .false., d0, d1, 1)
        if (nbk == 1) call neigh(op, .true., d1, d0, 1)
        call neigh(op, nbk == 1, hs, hr, 2)
        if (nbk == 1) then
          call check(ie(1) == MPI_SUCCESS .and. ie(2) == MPI_SUCCESS, &
                     "Ineighbor: MPI_SUCCESS and a request")
          call MPI_Waitall(2, req, MPI_STATUSES_IGNORE, ierr)
        end if
        write(what, '(a,i0,a,a,a)') "cart ", nd, "-D ", merge("I", " ", nbk == 1), &
                                    trim(names(op))
        got = 0
        ok = ftd_dtoh(dev(2 - nbk), c_loc(got), addr(2 - nbk), int(NMAX * 4, c_size_t)) == 0
        if (ok) ok = ie(1) == MPI_SUCCESS .and. all(got == hr)
        call check(ok, trim(what) // ": the device buffer is the host one")
        call check(any(hr /= can), trim(what) // ": MPI wrote something")
      end do
    end do
    call MPI_Comm_free(cart, ierr)
  end do

  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (ftd_dev_free(0, addr(1)) /= 0 .or. ftd_dev_free(g1, addr(2)) /= 0) &
    call check(.false., "cuMemFree")
  call MPI_Finalize(ierr)
  call ft_report(who)

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    call ft_check(ok, trim(who) // " " // what)
  end subroutine check

  subroutine put(addr, dev, v)
    integer(c_int64_t), intent(in) :: addr
    integer, intent(in) :: dev
    integer, intent(in), target :: v(NMAX)
    if (ftd_htod(dev, addr, c_loc(v), int(NMAX * 4, c_size_t)) /= 0) &
      call check(.false., "cuMemcpyHtoD")
  end subroutine put

  !> Call op (1 allgather .. 5 alltoallw) from s into r, nonblocking with
  !> req(j) when nb; ie(j) its ierror.
  subroutine neigh(op, nb, s, r, j)
    integer, intent(in) :: op, j
    logical, intent(in) :: nb
    integer :: s(NMAX), r(NMAX)
    select case (op)
    case (1)
      if (nb) then
        call MPI_Ineighbor_allgather(s, K, MPI_INTEGER, r, K, MPI_INTEGER, cart, req(j), ie(j))
      else
        call MPI_Neighbor_allgather(s, K, MPI_INTEGER, r, K, MPI_INTEGER, cart, ie(j))
      end if
    case (2)
      if (nb) then
        call MPI_Ineighbor_allgatherv(s, K, MPI_INTEGER, r, kk, dsp, &
                                      MPI_INTEGER, cart, req(j), ie(j))
      else
        call MPI_Neighbor_allgatherv(s, K, MPI_INTEGER, r, kk, dsp, &
                                     MPI_INTEGER, cart, ie(j))
      end if
    case (3)
      if (nb) then
        call MPI_Ineighbor_alltoall(s, K, MPI_INTEGER, r, K, MPI_INTEGER, cart, req(j), ie(j))
      else
        call MPI_Neighbor_alltoall(s, K, MPI_INTEGER, r, K, MPI_INTEGER, cart, ie(j))
      end if
    case (4)
      if (nb) then
        call MPI_Ineighbor_alltoallv(s, cnt, dsp, MPI_INTEGER, r, cnt, dsp, MPI_INTEGER, cart, &
                                     req(j), ie(j))
      else
        call MPI_Neighbor_alltoallv(s, cnt, dsp, MPI_INTEGER, r, cnt, dsp, MPI_INTEGER, cart, &
                                    ie(j))
      end if
    case default
      if (nb) then
        call MPI_Ineighbor_alltoallw(s, cnt, bdsp, types, r, cnt, bdsp, types, cart, req(j), &
                                     ie(j))
      else
        call MPI_Neighbor_alltoallw(s, cnt, bdsp, types, r, cnt, bdsp, types, cart, ie(j))
      end if
    end select
  end subroutine neigh
end program f_neigh
