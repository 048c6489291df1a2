! SPDX-License-Identifier: BSD-3-Clause
!
! halo (Fortran): the halo exchange of halo.c, written against the cucopy
! module (include/cucopy.f90, compiled with the program) and `use mpi` (the
! mpif.h-style bindings: libmpi_mpifh.so.40, the same on every Open MPI 4.x). Every rank drives every visible
! GPU through one cucopy iface and one endpoint.
!
!   mpirun -n R ./mpi_halo_fortran [steps [nx [ny]]]
!
! Global domain: a ring of R*D slabs (D devices per rank), slab g = rank*D + d.
! A slab is ny interior rows of nx 64-bit cells plus two halo rows per side,
! in device memory: rows 0,1 = left halo (rows ny-2, ny-1 of slab g-1),
! rows 2..ny+1 = interior, rows ny+2, ny+3 = right halo (rows 0, 1 of slab g+1).
!
! Each step: new interior values (put_zcopy from pinned host); boundary strips
! device->device (put_zcopy between GPUs) for neighbours on the same rank and
! device->pinned host (get_zcopy) for neighbours on other ranks, awaited with
! the event fd protocol on even steps and progress + flush on odd ones;
! MPI_Sendrecv of the host strips; put_zcopy host->device into the halos;
! every halo cell read back (get_short) and checked. Rank 0 prints
! "halo: OK ranks=R devices=D steps=N" or the errors; non-zero exit on error.
!
! Device 0's primary context is made current at start (as a CUDA program
! would, through halo_drv.c) and must still be current at the end.
module halo_support
  use, intrinsic :: iso_c_binding
  use cucopy
  implicit none

  integer, parameter :: halo_rows = 2
  integer, parameter :: max_reports = 8
  integer(c_int), parameter :: pollin = 1

  ! A completion and a flag set by its callback. The completion comes first,
  ! so the address cucopy hands to the callback is the waiter's address.
  type, bind(C) :: waiter_t
    type(cucopy_completion_t) :: comp
    integer(c_int) :: fired
  end type waiter_t

  type, bind(C) :: pollfd_t
    integer(c_int) :: fd
    integer(c_short) :: events
    integer(c_short) :: revents
  end type pollfd_t

  interface
    ! examples/mpi/halo_drv.h: raw driver steps that are not cucopy's job
    integer(c_int) function halo_drv_init() bind(C, name="halo_drv_init")
      import :: c_int
    end function
    integer(c_int) function halo_drv_check_current() bind(C, name="halo_drv_check_current")
      import :: c_int
    end function
    integer(c_int64_t) function halo_drv_dev_alloc(dev, bytes) bind(C, name="halo_drv_dev_alloc")
      import :: c_int, c_int64_t, c_size_t
      integer(c_int), value :: dev
      integer(c_size_t), value :: bytes
    end function
    integer(c_int) function halo_drv_dev_free(dev, addr) bind(C, name="halo_drv_dev_free")
      import :: c_int, c_int64_t
      integer(c_int), value :: dev
      integer(c_int64_t), value :: addr
    end function
    type(c_ptr) function halo_drv_host_alloc(bytes) bind(C, name="halo_drv_host_alloc")
      import :: c_ptr, c_size_t
      integer(c_size_t), value :: bytes
    end function
    integer(c_int) function halo_drv_host_free(ptr) bind(C, name="halo_drv_host_free")
      import :: c_int, c_ptr
      type(c_ptr), value :: ptr
    end function
    integer(c_int) function halo_drv_fini() bind(C, name="halo_drv_fini")
      import :: c_int
    end function
    ! libc
    integer(c_int) function c_poll(fds, nfds, timeout) bind(C, name="poll")
      import :: c_int, c_long, pollfd_t
      type(pollfd_t), intent(inout) :: fds
      integer(c_long), value :: nfds
      integer(c_int), value :: timeout
    end function
  end interface

contains

  subroutine waiter_done(self) bind(C)
    type(c_ptr), value :: self
    type(waiter_t), pointer :: w
    call c_f_pointer(self, w)
    w%fired = 1
  end subroutine waiter_done

  subroutine waiter_init(w)
    type(waiter_t), intent(inout) :: w
    w%comp%func = c_funloc(waiter_done)
    w%comp%count = 0
    w%comp%status = CUCOPY_OK
    w%fired = 0
  end subroutine waiter_init

  logical function waiter_finished(w)
    type(waiter_t), intent(in) :: w
    waiter_finished = w%comp%count == 0 .or. w%fired /= 0
  end function waiter_finished

  ! The value of interior cell (row i, column j; from 0) of slab g after step s.
  integer(c_int64_t) function cell(g, i, j, s)
    integer, intent(in) :: g, i, j, s
    cell = ior(ior(ishft(int(s + 1, c_int64_t), 48), ishft(int(g, c_int64_t), 32)), &
               ior(ishft(int(i, c_int64_t), 16), int(j, c_int64_t)))
  end function cell

end module halo_support

program halo
  use, intrinsic :: iso_c_binding
  use mpi
  use cucopy
  use halo_support
  implicit none

  integer :: rank, nranks, ierr, ndev, drv_devices, steps, nx, ny, d, t, k
  integer :: ndev_min, ndev_max, errors, total_errors, sleeps, total_sleeps, reports
  integer(c_int) :: event_fd, cdev
  type(c_ptr) :: ctx, iface, ep
  type(cucopy_iface_attr_t) :: attr
  integer(c_size_t) :: row_bytes, strip_bytes, slab_bytes
  integer(c_int64_t), allocatable :: dev(:)
  type(c_ptr), allocatable :: interior_p(:), check_p(:)
  type(c_ptr) :: send_left_p, send_right_p, recv_left_p, recv_right_p
  integer(c_int64_t), pointer :: buf(:)
  integer(c_int64_t), allocatable, target :: init(:)
  type(waiter_t), target, save :: w
  character(len=32) :: arg

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  steps = 10
  nx = 1024
  ny = 64
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) steps
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) nx
  end if
  if (command_argument_count() >= 3) then
    call get_command_argument(3, arg)
    read (arg, *) ny
  end if
  if (steps < 1 .or. steps > 30000 .or. nx < 1 .or. nx > 65536 .or. &
      ny < 2*halo_rows .or. ny > 65536) then
    if (rank == 0) write (0, '(a)') "usage: mpi_halo_fortran [steps 1..30000 [nx 1..65536 [ny 4..65536]]]"
    call MPI_Finalize(ierr)
    call exit(2)
  end if
  row_bytes = int(nx, c_size_t) * 8
  strip_bytes = halo_rows * row_bytes
  slab_bytes = int(ny + 2*halo_rows, c_size_t) * row_bytes

  ! What a CUDA program does first: device 0's primary context current.
  drv_devices = halo_drv_init()
  if (drv_devices < 1) call MPI_Abort(MPI_COMM_WORLD, 2, ierr)

  call check(cucopy_context_create(ctx_p=ctx), "cucopy_context_create")
  call check(cucopy_device_count(ctx, cdev), "cucopy_device_count")
  ndev = cdev
  call MPI_Allreduce(ndev, ndev_min, 1, MPI_INTEGER, MPI_MIN, MPI_COMM_WORLD, ierr)
  call MPI_Allreduce(ndev, ndev_max, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  if (ndev_min /= ndev_max .or. ndev < 1 .or. ndev /= drv_devices) then
    if (rank == 0) write (0, '(a,i0,a,i0,a)') "halo: ranks see ", ndev_min, "..", ndev_max, &
                                              " devices; need the same number on every rank"
    call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  end if

  call check(cucopy_iface_open(ctx, iface_p=iface), "cucopy_iface_open")
  attr%field_mask = CUCOPY_IFACE_ATTR_CAP_FLAGS
  call check(cucopy_iface_query(iface, attr), "cucopy_iface_query")
  if (ndev > 1 .and. iand(attr%cap_flags, CUCOPY_IFACE_CAP_CROSS_DEVICE) == 0) then
    write (0, '(a,i0,a)') "halo[", rank, "]: the iface cannot copy between GPUs"
    call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  end if
  call check(cucopy_iface_event_fd(iface, event_fd), "cucopy_iface_event_fd")
  call check(cucopy_ep_create(iface, ep), "cucopy_ep_create")

  ! Memory: one slab per device, pinned host buffers for staging.
  allocate (dev(0:ndev-1), interior_p(0:ndev-1), check_p(0:ndev-1))
  allocate (init(0:slab_bytes/8 - 1))
  do d = 0, ndev - 1
    dev(d) = halo_drv_dev_alloc(int(d, c_int), slab_bytes)
    interior_p(d) = halo_drv_host_alloc(int(ny, c_size_t) * row_bytes)
    check_p(d) = halo_drv_host_alloc(2 * strip_bytes)
    if (dev(d) == 0 .or. .not. c_associated(interior_p(d)) .or. .not. c_associated(check_p(d))) &
      call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
    ! Initial pattern, halos included: rank/device dependent, never a cell value.
    do k = 0, size(init) - 1
      init(k) = ior(ior(ishft(int(z'dead', c_int64_t), 48), ishft(int(rank, c_int64_t), 40)), &
                    ior(ishft(int(d, c_int64_t), 32), int(k, c_int64_t)))
    end do
    call check(cucopy_ep_put_short(ep, c_loc(init), slab_bytes, dev(d)), "cucopy_ep_put_short")
  end do
  deallocate (init)
  send_left_p = halo_drv_host_alloc(strip_bytes)
  send_right_p = halo_drv_host_alloc(strip_bytes)
  recv_left_p = halo_drv_host_alloc(strip_bytes)
  recv_right_p = halo_drv_host_alloc(strip_bytes)
  if (.not. (c_associated(send_left_p) .and. c_associated(send_right_p) .and. &
             c_associated(recv_left_p) .and. c_associated(recv_right_p))) &
    call MPI_Abort(MPI_COMM_WORLD, 2, ierr)

  errors = 0
  sleeps = 0
  reports = 0
  do t = 0, steps - 1
    call step(t)
  end do

  if (halo_drv_check_current() /= 1) then
    write (0, '(a,i0,a)') "halo[", rank, "]: device 0's primary context is not current at the end"
    errors = errors + 1
  end if

  ! Tear down: cucopy first, then the memory, then the contexts.
  call check(cucopy_ep_destroy(ep), "cucopy_ep_destroy")
  call check(cucopy_iface_close(iface), "cucopy_iface_close")
  call check(cucopy_context_destroy(ctx), "cucopy_context_destroy")
  do d = 0, ndev - 1
    if (halo_drv_dev_free(int(d, c_int), dev(d)) /= 1) errors = errors + 1
    if (halo_drv_host_free(interior_p(d)) /= 1) errors = errors + 1
    if (halo_drv_host_free(check_p(d)) /= 1) errors = errors + 1
  end do
  if (halo_drv_host_free(send_left_p) /= 1 .or. halo_drv_host_free(send_right_p) /= 1 .or. &
      halo_drv_host_free(recv_left_p) /= 1 .or. halo_drv_host_free(recv_right_p) /= 1 .or. &
      halo_drv_fini() /= 1) errors = errors + 1

  call MPI_Allreduce(errors, total_errors, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Allreduce(sleeps, total_sleeps, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    if (total_errors == 0) then
      write (*, '(a,i0,a,i0,a,i0,a,i0,a,i0,a,i0,a)') "halo: OK ranks=", nranks, " devices=", ndev, &
        " steps=", steps, " (nx=", nx, " ny=", ny, ", ", total_sleeps, " event-fd wake-ups)"
    else
      write (*, '(a,i0,a,i0,a,i0,a,i0,a)') "halo: FAILED ranks=", nranks, " devices=", ndev, &
        " steps=", steps, ": ", total_errors, " errors"
    end if
    flush (6)
  end if
  call MPI_Finalize(ierr)
  if (total_errors /= 0) call exit(1)

contains

  subroutine check(s, what)
    integer(c_int), intent(in) :: s
    character(len=*), intent(in) :: what
    if (s == CUCOPY_OK) return
    write (0, '(a,i0,a,a,a,a,a,a)') "halo[", rank, "]: ", what, ": ", cucopy_status_str(s), ": ", &
      cucopy_last_error_str()
    call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  end subroutine check

  integer(c_int64_t) function row_addr(dd, row)
    integer, intent(in) :: dd, row
    row_addr = dev(dd) + int(row, c_int64_t) * int(row_bytes, c_int64_t)
  end function row_addr

  subroutine progress()
    integer(c_int) :: n
    n = cucopy_iface_progress(iface)
    if (n < 0) call check(n, "cucopy_iface_progress")
  end subroutine progress

  ! put (get = .false.) or get zcopy of one contiguous piece; retries on
  ! back-pressure; counts the operation in w when it completes later.
  subroutine zcopy(get, local, length, remote)
    logical, intent(in) :: get
    type(c_ptr), intent(in) :: local
    integer(c_size_t), intent(in) :: length
    integer(c_int64_t), intent(in) :: remote
    type(cucopy_iov_t) :: iov(1)
    integer(c_int) :: s
    iov(1)%buffer = local
    iov(1)%length = length
    do
      if (get) then
        s = cucopy_ep_get_zcopy(ep, iov, 1_c_size_t, remote, c_loc(w%comp))
      else
        s = cucopy_ep_put_zcopy(ep, iov, 1_c_size_t, remote, c_loc(w%comp))
      end if
      if (s /= CUCOPY_ERR_NO_RESOURCE) exit
      call progress()
    end do
    if (s == CUCOPY_INPROGRESS) then
      w%comp%count = w%comp%count + 1
    else
      call check(s, "cucopy_ep_put/get_zcopy")
    end if
  end subroutine zcopy

  subroutine wait_progress()
    integer(c_int) :: s
    do while (.not. waiter_finished(w))
      call progress()
    end do
    do
      s = cucopy_iface_flush(iface, 0, c_null_ptr)
      if (s /= CUCOPY_INPROGRESS) exit
      call progress()
    end do
    call check(s, "cucopy_iface_flush")
    call check(w%comp%status, "copy completion")
  end subroutine wait_progress

  ! The event fd protocol: arm; BUSY -> progress, arm again; OK -> poll the
  ! fd until readable, then progress.
  subroutine wait_event_fd()
    integer(c_int) :: s, ready
    type(pollfd_t) :: p
    do while (.not. waiter_finished(w))
      s = cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP)
      if (s == CUCOPY_ERR_BUSY) then
        call progress()
        cycle
      end if
      call check(s, "cucopy_iface_event_arm")
      p%fd = event_fd
      p%events = int(pollin, c_short)
      p%revents = 0
      ready = -1
      do while (ready < 0)  ! -1: EINTR from Go's preemption signal (SIGURG); retry
        ready = c_poll(p, 1_c_long, 30000_c_int)
      end do
      if (ready /= 1) then
        write (0, '(a,i0,a)') "halo[", rank, "]: event fd not readable after 30 s (lost wake-up)"
        call MPI_Abort(MPI_COMM_WORLD, 3, ierr)
      end if
      sleeps = sleeps + 1
      call progress()
    end do
    call check(w%comp%status, "copy completion")
  end subroutine wait_event_fd

  subroutine step(s)
    integer, intent(in) :: s
    integer :: dd, g, i, j, n, h, total, gl, gr, from, src_row, lrank, rrank, cnt
    integer(c_int64_t) :: want
    logical :: left

    ! 1. new interior values
    call waiter_init(w)
    do dd = 0, ndev - 1
      g = rank * ndev + dd
      call c_f_pointer(interior_p(dd), buf, [nx * ny])
      do i = 0, ny - 1
        do j = 0, nx - 1
          buf(i*nx + j + 1) = cell(g, i, j, s)
        end do
      end do
      call zcopy(.false., interior_p(dd), int(ny, c_size_t) * row_bytes, row_addr(dd, halo_rows))
    end do
    call wait_progress()

    ! 2. boundary strips: device->device within the rank, device->host for
    !    neighbours on other ranks (one rank: everything device->device).
    call waiter_init(w)
    do dd = 0, ndev - 1
      if (dd > 0 .or. nranks == 1) then
        n = modulo(dd - 1, ndev)
        call zcopy(.false., cucopy_addr_ptr(row_addr(dd, halo_rows)), strip_bytes, &
                   row_addr(n, ny + halo_rows))
      else
        call zcopy(.true., send_left_p, strip_bytes, row_addr(dd, halo_rows))
      end if
      if (dd < ndev - 1 .or. nranks == 1) then
        n = modulo(dd + 1, ndev)
        call zcopy(.false., cucopy_addr_ptr(row_addr(dd, ny)), strip_bytes, row_addr(n, 0))
      else
        call zcopy(.true., send_right_p, strip_bytes, row_addr(dd, ny))
      end if
    end do
    if (mod(s, 2) == 0) then
      call wait_event_fd()
    else
      call wait_progress()
    end if

    ! 3. MPI between ranks, 4. received strips host->device into the halos
    if (nranks > 1) then
      lrank = modulo(rank - 1, nranks)
      rrank = modulo(rank + 1, nranks)
      cnt = halo_rows * nx
      call mpi_strips(send_left_p, lrank, recv_right_p, rrank, cnt, 1)
      call mpi_strips(send_right_p, rrank, recv_left_p, lrank, cnt, 2)
      call waiter_init(w)
      call zcopy(.false., recv_left_p, strip_bytes, row_addr(0, 0))
      call zcopy(.false., recv_right_p, strip_bytes, row_addr(ndev - 1, ny + halo_rows))
      call wait_progress()
    end if

    ! 5. verify every halo cell
    total = nranks * ndev
    do dd = 0, ndev - 1
      g = rank * ndev + dd
      gl = modulo(g - 1, total)
      gr = modulo(g + 1, total)
      call check(cucopy_ep_get_short(ep, check_p(dd), strip_bytes, row_addr(dd, 0)), &
                 "cucopy_ep_get_short")
      call check(cucopy_ep_get_short(ep, cucopy_addr_ptr(cucopy_ptr_addr(check_p(dd)) + &
                                                         int(strip_bytes, c_int64_t)), &
                                     strip_bytes, row_addr(dd, ny + halo_rows)), &
                 "cucopy_ep_get_short")
      call c_f_pointer(check_p(dd), buf, [2 * halo_rows * nx])
      do h = 0, 2*halo_rows - 1
        left = h < halo_rows
        if (left) then
          from = gl
          src_row = ny - halo_rows + h
        else
          from = gr
          src_row = h - halo_rows
        end if
        do j = 0, nx - 1
          want = cell(from, src_row, j, s)
          if (buf(h*nx + j + 1) == want) cycle
          errors = errors + 1
          reports = reports + 1
          if (reports <= max_reports) &
            write (0, '(a,i0,a,i0,a,i0,a,a,a,i0,a,i0,a,z16.16,a,z16.16)') "halo[", rank, &
              "]: step ", s, " device ", dd, " ", trim(merge("left ", "right", left)), &
              " halo row ", mod(h, halo_rows), " col ", j, ": ", buf(h*nx + j + 1), &
              ", expected ", want
        end do
      end do
    end do
    if (halo_drv_check_current() /= 1) then
      write (0, '(a,i0,a,i0,a)') "halo[", rank, "]: step ", s, &
        ": device 0's primary context is no longer current"
      errors = errors + 1
    end if
  end subroutine step

  ! MPI_Sendrecv of two pinned host strips (type(c_ptr) -> Fortran arrays).
  subroutine mpi_strips(sendp, dest, recvp, source, count, tag)
    type(c_ptr), intent(in) :: sendp, recvp
    integer, intent(in) :: dest, source, count, tag
    integer(c_int64_t), pointer :: sbuf(:), rbuf(:)
    integer :: stat(MPI_STATUS_SIZE), e
    call c_f_pointer(sendp, sbuf, [count])
    call c_f_pointer(recvp, rbuf, [count])
    call MPI_Sendrecv(sbuf, count, MPI_INTEGER8, dest, tag, rbuf, count, MPI_INTEGER8, &
                      source, tag, MPI_COMM_WORLD, stat, e)
  end subroutine mpi_strips

end program halo
