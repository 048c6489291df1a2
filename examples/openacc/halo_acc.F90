! SPDX-License-Identifier: BSD-3-Clause
!
! halo_acc.c in Fortran: an unchanged OpenACC program that hands device
! buffers to MPI. A 1-D domain split over the ranks, its field on the GPU
! (!$acc enter data), one ghost cell on each side exchanged every step with
! MPI_Sendrecv and with MPI_Isend/MPI_Irecv/MPI_Waitall on the device
! addresses of `!$acc host_data use_device(u)`, a three-point average
! computed on the GPU. At the end the field is compared with the same
! computation done on the host (no MPI, no GPU).
!
! One source, two bindings: `use mpi` (halo_acc_f), and `use mpi_f08` when
! built with -DCUCOPY_F08 (halo_acc_f08). With an MPI that is not
! CUDA-aware the MPI calls read and write device memory from the CPU and the
! program crashes or computes garbage; with
!   mpirun -x LD_PRELOAD=.../libcucopy_mpi.so ./halo_acc_f
! it verifies. Built with gfortran -fopenacc -foffload=nvptx-none (GCC's
! OpenACC), run on a GPU machine (tests/gpu/openacc.sh).
program halo_acc_f
#ifdef CUCOPY_F08
    use mpi_f08
#else
    use mpi
#endif
    use openacc
    implicit none
#ifdef CUCOPY_F08
    character(len=*), parameter :: prog = 'halo_acc_f08'
#else
    character(len=*), parameter :: prog = 'halo_acc_f'
#endif
    integer, parameter :: local = 65536, steps = 40
    ! u(0) and u(local + 1) are the ghost cells.
    real(8), allocatable :: u(:), t(:), ru(:), rt(:)
    integer :: rank, np, left, right, step, ierr
    integer(8) :: i, n, bad, total
    real(8) :: want, got
    character(len=6) :: device, status

    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
    left = modulo(rank - 1, np)
    right = modulo(rank + 1, np)

    allocate(u(0:local + 1), t(0:local + 1))
    u = 0
    do i = 1, local
        u(i) = initial(int(rank, 8) * local + i - 1)
    end do
    !$acc enter data copyin(u) create(t)

    do step = 0, steps - 1
        call exchange(u, step)
        !$acc parallel loop present(u, t)
        do i = 1, local
            t(i) = (u(i - 1) + u(i) + u(i + 1)) / 3.0d0
        end do
        !$acc parallel loop present(u, t)
        do i = 1, local
            u(i) = t(i)
        end do
    end do
    !$acc exit data copyout(u) delete(t)

    ! Reference on the host, whole domain (periodic), and this rank's part of it.
    n = int(np, 8) * local
    allocate(ru(0:n - 1), rt(0:n - 1))
    do i = 0, n - 1
        ru(i) = initial(i)
    end do
    do step = 1, steps
        do i = 0, n - 1
            rt(i) = (ru(modulo(i - 1, n)) + ru(i) + ru(modulo(i + 1, n))) / 3.0d0
        end do
        ru = rt
    end do
    bad = 0
    do i = 1, local
        want = ru(int(rank, 8) * local + i - 1)
        got = u(i)
        if (got < want - 1d-9 * (1 + want) .or. got > want + 1d-9 * (1 + want)) bad = bad + 1
    end do
    call MPI_Allreduce(bad, total, 1, MPI_INTEGER8, MPI_SUM, MPI_COMM_WORLD, ierr)
    device = 'host'
    if (acc_get_device_type() == acc_device_nvidia) device = 'nvidia'
    status = 'OK'
    if (total /= 0) status = 'FAILED'
    if (rank == 0) write (*, '(a, ": ", a, " ranks=", i0, " steps=", i0, " cells=", i0, &
                              &" wrong=", i0, " (OpenACC device: ", a, ")")') &
        prog, trim(status), np, steps, n, total, trim(device)
    deallocate(u, t, ru, rt)
    call MPI_Finalize(ierr)
    if (total /= 0) stop 1

contains

    ! The ghost exchange on the device copy of u. An explicit-shape dummy:
    ! GCC 12 refuses an ALLOCATABLE array in use_device. The MPI library
    ! writes u behind the compiler's back between MPI_Irecv and MPI_Waitall
    ! (ASYNCHRONOUS).
    subroutine exchange(u, step)
        real(8), intent(inout), asynchronous :: u(0:local + 1)
        integer, intent(in) :: step
#ifdef CUCOPY_F08
        type(MPI_Request) :: r(4)
#else
        integer :: r(4)
#endif
        integer :: ierr

        !$acc host_data use_device(u)
            if (mod(step, 2) == 0) then
                ! right edge -> right neighbour's left ghost, and back
                call MPI_Sendrecv(u(local), 1, MPI_DOUBLE_PRECISION, right, 1, u(0), 1, &
                                  MPI_DOUBLE_PRECISION, left, 1, MPI_COMM_WORLD, &
                                  MPI_STATUS_IGNORE, ierr)
                call MPI_Sendrecv(u(1), 1, MPI_DOUBLE_PRECISION, left, 2, u(local + 1), 1, &
                                  MPI_DOUBLE_PRECISION, right, 2, MPI_COMM_WORLD, &
                                  MPI_STATUS_IGNORE, ierr)
            else
                call MPI_Irecv(u(0), 1, MPI_DOUBLE_PRECISION, left, 3, MPI_COMM_WORLD, r(1), ierr)
                call MPI_Irecv(u(local + 1), 1, MPI_DOUBLE_PRECISION, right, 4, MPI_COMM_WORLD, &
                               r(2), ierr)
                call MPI_Isend(u(local), 1, MPI_DOUBLE_PRECISION, right, 3, MPI_COMM_WORLD, r(3), &
                               ierr)
                call MPI_Isend(u(1), 1, MPI_DOUBLE_PRECISION, left, 4, MPI_COMM_WORLD, r(4), ierr)
                call MPI_Waitall(4, r, MPI_STATUSES_IGNORE, ierr)
            end if
        !$acc end host_data
    end subroutine exchange

    real(8) function initial(g)
        integer(8), intent(in) :: g
        initial = real(mod(g * 37, 1009_8), 8)
    end function initial

end program halo_acc_f
