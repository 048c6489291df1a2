! SPDX-License-Identifier: BSD-3-Clause
!
! The event fd protocol of cucopy.h from Fortran, with poll(2) through
! bind(C): the fd is stable, arm with nothing outstanding is OK, and with
! 16 MiB zcopies in flight on every device, arm / poll / progress complete
! them all (a poll timeout is a lost wake-up).
program test_f_event_fd
  use, intrinsic :: iso_c_binding
  use cucopy
  use ftest
  implicit none
  integer, parameter :: n = 16 * 1048576
  integer(c_size_t), parameter :: nbytes = n
  integer(c_int), parameter :: poll_timeout_ms = 20000
  type(c_ptr) :: ctx, iface, ep
  integer(c_int8_t), target, allocatable :: src(:)
  integer(c_int64_t), allocatable :: dev(:)
  type(cucopy_iov_t) :: iov(1)
  type(cucopy_f_completion), target, allocatable :: comps(:)
  type(ft_pollfd) :: pfd(1)
  integer(c_int) :: fd, fd2, s, ready, got
  integer :: ndev, d, trial, arms_ok, arms_busy, wakeups, loops

  ndev = ft_init("test_f_event_fd")
  call ft_require(cucopy_f_context_create(ctx), "context_create")
  call ft_require(cucopy_f_iface_open(ctx, iface), "iface_open")
  call ft_require(cucopy_ep_create(iface, ep), "ep_create")
  allocate(dev(0:ndev - 1), src(n), comps(0:ndev - 1))
  call ft_fill(src, 7)
  do d = 0, ndev - 1
    dev(d) = ftd_dev_alloc(int(d, c_int), nbytes)
    call ft_check(dev(d) /= 0, "cuMemAlloc on device " // ft_str(d))
    if (dev(d) == 0) call ft_finish()
  end do

  call ft_status(cucopy_iface_event_fd(iface, fd), CUCOPY_OK, "event_fd")
  call ft_check(fd >= 0, "event fd is a descriptor")
  call ft_status(cucopy_iface_event_fd(iface, fd2), CUCOPY_OK, "event_fd again")
  call ft_check(fd2 == fd, "event_fd gives the same fd every time")
  call ft_status(cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP), CUCOPY_OK, &
      "arm with nothing outstanding")

  arms_ok = 0
  arms_busy = 0
  wakeups = 0
  do trial = 1, 3
    do d = 0, ndev - 1
      call cucopy_f_completion_init(comps(d), 1)
      iov(1) = cucopy_iov(c_loc(src), n)
      s = cucopy_ep_put_zcopy(ep, iov, 1_c_size_t, dev(d), cucopy_f_completion_ptr(comps(d)))
      call ft_check(s == CUCOPY_OK .or. s == CUCOPY_INPROGRESS, "16 MiB put_zcopy to device " // &
          ft_str(d) // ": " // cucopy_status_str(s))
      call cucopy_f_completion_account(comps(d), s)
    end do
    loops = 0
    do
      if (all(comps(:)%fired > 0)) exit
      loops = loops + 1
      if (loops > 1000) then
        call ft_check(.false., "event fd protocol: completions still pending after 1000 rounds")
        exit
      end if
      s = cucopy_iface_event_arm(iface, CUCOPY_EVENT_SEND_COMP)
      if (s == CUCOPY_ERR_BUSY) then
        arms_busy = arms_busy + 1
        got = cucopy_iface_progress(iface)
        if (got < 0) call ft_status(got, CUCOPY_OK, "progress after BUSY")
        cycle
      end if
      if (s /= CUCOPY_OK) then
        call ft_status(s, CUCOPY_OK, "event_arm")
        exit
      end if
      arms_ok = arms_ok + 1
      pfd(1)%fd = fd
      pfd(1)%events = FT_POLLIN
      pfd(1)%revents = 0
      ready = -1
      do while (ready < 0)  ! -1: EINTR from Go's preemption signal (SIGURG); retry
        ready = ft_poll(pfd, 1_c_long, poll_timeout_ms)
      end do
      if (ready /= 1 .or. iand(int(pfd(1)%revents), int(FT_POLLIN)) == 0) then
        call ft_check(.false., "armed with work pending, but the fd did not become readable: " // &
            "lost wake-up (poll returned " // ft_str(int(ready)) // ")")
        exit
      end if
      wakeups = wakeups + 1
      got = cucopy_iface_progress(iface)
      if (got < 0) then
        call ft_status(got, CUCOPY_OK, "progress after wake-up")
        exit
      end if
    end do
    call ft_check(all(comps(:)%fired == 1), "trial " // ft_str(trial) // &
        ": every completion fired exactly once")
    call ft_check(all(comps(:)%comp%status == CUCOPY_OK), "trial " // ft_str(trial) // &
        ": completion status OK")
  end do
  write(*, '(a,i0,a,i0,a,i0)') "test_f_event_fd: arms OK ", arms_ok, ", BUSY ", arms_busy, &
      ", wake-ups ", wakeups
  call ft_check(ftd_no_current() == 1, "no current context left behind")

  do d = 0, ndev - 1
    call ft_check(ftd_dev_free(int(d, c_int), dev(d)) == 0, "cuMemFree")
  end do
  call ft_status(cucopy_ep_destroy(ep), CUCOPY_OK, "ep_destroy")
  call ft_status(cucopy_iface_close(iface), CUCOPY_OK, "iface_close")
  call ft_status(cucopy_context_destroy(ctx), CUCOPY_OK, "context_destroy")
  call ft_finish()
end program test_f_event_fd
