! SPDX-License-Identifier: BSD-3-Clause
!
! ep flush and iface flush from Fortran: with nothing outstanding (OK), with
! zcopies in flight on every device and a completion (INPROGRESS, then the
! completion fires once everything issued before completed: the data is
! there), and iface flush without a completion (call again until OK); a
! fence between a put to device 0 and a get back from it, with no wait in
! between (iface fence and ep fence); the fences and the gets in
! cucopy_iface_stats, and one life per device in its list of context lives.
program test_f_flush
  use, intrinsic :: iso_c_binding
  use cucopy
  use ftest
  implicit none
  integer, parameter :: n = 1048576
  integer(c_size_t), parameter :: nbytes = n
  type(c_ptr) :: ctx, iface, ep
  integer(c_int8_t), target, allocatable :: src(:, :), back(:)
  integer(c_int64_t), allocatable :: dev(:)
  type(cucopy_iov_t) :: iov(1)
  type(cucopy_f_completion), target :: fl
  type(cucopy_iface_stats_t) :: stats
  type(cucopy_incarnation_stats_t), target :: lives(8)
  integer(c_int) :: s
  integer :: ndev, d, round
  character(len=8) :: kind

  ndev = ft_init("test_f_flush")
  call ft_require(cucopy_f_context_create(ctx), "context_create")
  call ft_require(cucopy_f_iface_open(ctx, iface), "iface_open")
  call ft_require(cucopy_ep_create(iface, ep), "ep_create")
  allocate(dev(0:ndev - 1), src(n, 0:ndev - 1), back(n))
  do d = 0, ndev - 1
    dev(d) = ftd_dev_alloc(int(d, c_int), nbytes)
    call ft_check(dev(d) /= 0, "cuMemAlloc on device " // ft_str(d))
    if (dev(d) == 0) call ft_finish()
  end do

  call cucopy_f_completion_init(fl, 1)
  call ft_status(cucopy_ep_flush(ep, 0_c_int, cucopy_f_completion_ptr(fl)), CUCOPY_OK, &
      "ep_flush with nothing outstanding")
  call ft_status(cucopy_iface_flush(iface, 0_c_int, c_null_ptr), CUCOPY_OK, &
      "iface_flush with nothing outstanding")
  call ft_check(fl%fired == 0, "a flush that returned OK does not call its completion")

  do round = 1, 3
    ! round 1: ep flush + completion; 2: iface flush + completion;
    ! 3: iface flush without completion, called again until OK.
    kind = merge("ep   ", "iface", round == 1)
    do d = 0, ndev - 1
      call ft_fill(src(:, d), 100 * round + d)
      iov(1) = cucopy_iov(c_loc(src(1, d)), n)
      s = cucopy_ep_put_zcopy(ep, iov, 1_c_size_t, dev(d), c_null_ptr)
      call ft_check(s == CUCOPY_OK .or. s == CUCOPY_INPROGRESS, "put_zcopy (no completion) " // &
          "to device " // ft_str(d) // ": " // cucopy_status_str(s))
    end do
    if (round < 3) then
      call cucopy_f_completion_init(fl, 1)
      if (round == 1) then
        s = cucopy_ep_flush(ep, 0_c_int, cucopy_f_completion_ptr(fl))
      else
        s = cucopy_iface_flush(iface, 0_c_int, cucopy_f_completion_ptr(fl))
      end if
      call ft_check(s == CUCOPY_OK .or. s == CUCOPY_INPROGRESS, trim(kind) // &
          "_flush returned " // cucopy_status_str(s))
      call cucopy_f_completion_account(fl, s)
      call ft_status(cucopy_f_completion_wait(iface, fl, 60d0), CUCOPY_OK, &
          trim(kind) // "_flush completion")
      call ft_check(fl%fired == 1, trim(kind) // "_flush completion fired once")
    else
      s = flush_until_ok(iface)
      call ft_status(s, CUCOPY_OK, "iface_flush(NULL) repeated until OK")
    end if
    ! Everything issued before the flush is in place.
    do d = 0, ndev - 1
      back = 0
      call ft_check(ftd_dtoh(int(d, c_int), c_loc(back), dev(d), nbytes) == 0, "cuMemcpyDtoH")
      call ft_check(all(back == src(:, d)), "data after " // trim(kind) // "_flush, round " // &
          ft_str(round) // ", device " // ft_str(d))
    end do
  end do

  do round = 1, 2
    call ft_fill(src(:, 0), 17 + round)
    back = 0
    iov(1) = cucopy_iov(c_loc(src(1, 0)), n)
    s = cucopy_ep_put_zcopy(ep, iov, 1_c_size_t, dev(0), c_null_ptr)
    call ft_check(s == CUCOPY_INPROGRESS, "put_zcopy before the fence: " // cucopy_status_str(s))
    if (round == 1) then
      call ft_status(cucopy_iface_fence(iface, 0_c_int), CUCOPY_OK, "iface_fence")
    else
      call ft_status(cucopy_ep_fence(ep, 0_c_int), CUCOPY_OK, "ep_fence")
    end if
    iov(1) = cucopy_iov(c_loc(back), n)
    s = cucopy_ep_get_zcopy(ep, iov, 1_c_size_t, dev(0), c_null_ptr)
    call ft_check(s == CUCOPY_INPROGRESS, "get_zcopy after the fence: " // cucopy_status_str(s))
    s = flush_until_ok(iface)
    call ft_status(s, CUCOPY_OK, "iface_flush(NULL) after the fenced pair")
    call ft_check(all(back == src(:, 0)), "the get after a fence read what the put wrote, round " // &
        ft_str(round))
  end do
  call ft_status(cucopy_iface_fence(iface, 1_c_int), CUCOPY_ERR_INVALID_PARAM, &
      "iface_fence with flags 1")
  stats%field_mask = ior(CUCOPY_IFACE_STATS_EVENTS, CUCOPY_IFACE_STATS_DIRECTIONS)
  call ft_status(cucopy_iface_stats(iface, stats), CUCOPY_OK, "iface_stats")
  call ft_check(stats%fences == 2, "iface_stats: 2 fences, got " // ft_str(int(stats%fences)))
  call ft_check(stats%dir_operations(CUCOPY_DIR_D2H + 1) == 2, "iface_stats: 2 operations d2h, got " // &
      ft_str(int(stats%dir_operations(CUCOPY_DIR_D2H + 1))))
  ! one life per device's primary context, all live, in serial order
  stats%field_mask = CUCOPY_IFACE_STATS_INCARNATIONS
  stats%incarnations = c_loc(lives)
  stats%incarnations_capacity = size(lives, kind=c_size_t)
  call ft_status(cucopy_iface_stats(iface, stats), CUCOPY_OK, "iface_stats incarnations")
  call ft_check(stats%incarnations_count == ndev, "iface_stats: " // ft_str(ndev) // " lives, got " // &
      ft_str(int(stats%incarnations_count)))
  do d = 1, min(ndev, size(lives))
    call ft_check(lives(d)%serial == d .and. lives(d)%state == CUCOPY_INCARNATION_LIVE .and. &
        lives(d)%bytes(CUCOPY_DIR_H2D + 1) > 0, "life " // ft_str(d) // ": serial " // &
        ft_str(int(lives(d)%serial)) // ", state " // ft_str(int(lives(d)%state)))
  end do

  call ft_status(cucopy_ep_flush(ep, 1_c_int, c_null_ptr), CUCOPY_ERR_INVALID_PARAM, &
      "ep_flush with flags 1")
  call ft_status(cucopy_iface_flush(iface, 1_c_int, c_null_ptr), CUCOPY_ERR_INVALID_PARAM, &
      "iface_flush with flags 1")

  do d = 0, ndev - 1
    call ft_check(ftd_dev_free(int(d, c_int), dev(d)) == 0, "cuMemFree")
  end do
  call ft_status(cucopy_ep_destroy(ep), CUCOPY_OK, "ep_destroy")
  call ft_status(cucopy_iface_close(iface), CUCOPY_OK, "iface_close")
  call ft_status(cucopy_context_destroy(ctx), CUCOPY_OK, "context_destroy")
  call ft_finish()
contains

  ! iface flush without a completion, called again (with progress) until
  ! it is no longer INPROGRESS; its last status.
  integer(c_int) function flush_until_ok(iface) result(s)
    type(c_ptr), intent(in) :: iface
    integer :: tries
    tries = 0
    do
      s = cucopy_iface_flush(iface, 0_c_int, c_null_ptr)
      if (s /= CUCOPY_INPROGRESS) exit
      tries = tries + 1
      if (cucopy_iface_progress(iface) < 0) exit
      if (tries > 100000000) exit
    end do
  end function flush_until_ok
end program test_f_flush
