! SPDX-License-Identifier: BSD-3-Clause
!
! put/get zcopy with completions and progress, on every device, from
! Fortran: iov arrays built with cucopy_iov() (host arrays by c_loc, device
! memory by integer(c_int64_t) address), the ready-made cucopy_f_completion
! (exactly once, status OK), a completion with a user-written bind(C)
! callback, and one completion shared by operations on every device.
module test_f_zcopy_cb
  use, intrinsic :: iso_c_binding
  use cucopy
  implicit none
  !> A user completion: the cucopy_completion_t first, then the user's data.
  type, bind(C) :: my_completion
    type(cucopy_completion_t) :: comp
    integer(c_int) :: hits
    integer(c_int) :: status_seen
    integer(c_int) :: tag
  end type my_completion
contains
  subroutine my_done(self) bind(C)
    type(c_ptr), value :: self
    type(my_completion), pointer :: me
    call c_f_pointer(self, me)
    me%hits = me%hits + 1
    me%status_seen = me%comp%status
  end subroutine my_done
end module test_f_zcopy_cb

program test_f_zcopy
  use, intrinsic :: iso_c_binding
  use cucopy
  use ftest
  use test_f_zcopy_cb
  implicit none
  integer, parameter :: n = 65536, piece = 16384
  integer(c_size_t), parameter :: nbytes = n
  type(c_ptr) :: ctx, iface, ep
  integer(c_int8_t), target :: src(n), dst(n), back(n)
  integer(c_int8_t), target, allocatable :: multi(:, :), check(:)
  integer(c_int64_t), allocatable :: dev(:)
  type(cucopy_iov_t) :: iov(3)
  type(cucopy_f_completion), target :: done
  type(my_completion), target :: mine
  integer(c_int) :: s, got
  integer :: ndev, d, i, total

  ndev = ft_init("test_f_zcopy")
  call ft_require(cucopy_f_context_create(ctx), "context_create")
  call ft_require(cucopy_f_iface_open(ctx, iface, max_poll=4_c_int), "iface_open")
  call ft_require(cucopy_ep_create(iface, ep), "ep_create")
  allocate(dev(0:ndev - 1))
  do d = 0, ndev - 1
    dev(d) = ftd_dev_alloc(int(d, c_int), nbytes)
    call ft_check(dev(d) /= 0, "cuMemAlloc on device " // ft_str(d))
    if (dev(d) == 0) call ft_finish()
  end do

  do d = 0, ndev - 1
    ! put: three iov entries (one empty with a NULL buffer) -> device d.
    call ft_fill(src, 40 + d)
    iov(1) = cucopy_iov(c_loc(src(1)), piece)
    iov(2) = cucopy_iov(c_null_ptr, 0)
    iov(3) = cucopy_iov(c_loc(src(piece + 1)), n - piece)
    call cucopy_f_completion_init(done, 1)
    s = cucopy_ep_put_zcopy(ep, iov, 3_c_size_t, dev(d), cucopy_f_completion_ptr(done))
    call ft_check(s == CUCOPY_OK .or. s == CUCOPY_INPROGRESS, "put_zcopy to device " // &
        ft_str(d) // " returned " // cucopy_status_str(s) // ": " // cucopy_last_error_str())
    call cucopy_f_completion_account(done, s)
    call ft_status(cucopy_f_completion_wait(iface, done, 60d0), CUCOPY_OK, &
        "put_zcopy completion, device " // ft_str(d))
    do i = 1, 5
      got = cucopy_iface_progress(iface)
    end do
    call ft_check(done%fired == 1, "put_zcopy completion fired exactly once, device " // ft_str(d))
    back = 0
    call ft_check(ftd_dtoh(int(d, c_int), c_loc(back), dev(d), nbytes) == 0, "cuMemcpyDtoH")
    call ft_check(all(back == src), "put_zcopy data, device " // ft_str(d))

    ! get: device d -> two host pieces, user callback.
    dst = 0
    iov(1) = cucopy_iov(c_loc(dst(1)), int(piece, c_int64_t))
    iov(2) = cucopy_iov(cucopy_addr(dst(piece + 1)), int(n - piece, c_int64_t))
    mine%comp%func = c_funloc(my_done)
    mine%comp%count = 1
    mine%comp%status = CUCOPY_OK
    mine%hits = 0
    mine%status_seen = -100
    mine%tag = d
    s = cucopy_ep_get_zcopy(ep, iov, 2_c_size_t, dev(d), c_loc(mine%comp))
    call ft_check(s == CUCOPY_OK .or. s == CUCOPY_INPROGRESS, "get_zcopy from device " // &
        ft_str(d) // " returned " // cucopy_status_str(s))
    if (s == CUCOPY_INPROGRESS) then
      do i = 1, 10000000
        if (mine%hits > 0) exit
        got = cucopy_iface_progress(iface)
        if (got < 0) exit
      end do
      call ft_check(mine%hits == 1 .and. mine%status_seen == CUCOPY_OK .and. mine%tag == d, &
          "user callback ran once with status OK, device " // ft_str(d))
    end if
    call ft_check(all(dst == src), "get_zcopy data, device " // ft_str(d))
  end do

  ! One completion for an operation on every device at once (1 MiB each).
  allocate(multi(1048576, 0:ndev - 1), check(1048576))
  if (ndev > 0) then
    do d = 0, ndev - 1
      call ft_check(ftd_dev_free(int(d, c_int), dev(d)) == 0, "cuMemFree")
      dev(d) = ftd_dev_alloc(int(d, c_int), int(size(multi, 1), c_size_t))
      call ft_fill(multi(:, d), 60 + d)
    end do
    call cucopy_f_completion_init(done, ndev)
    total = 0
    do d = 0, ndev - 1
      iov(1) = cucopy_iov(c_loc(multi(1, d)), size(multi, 1))
      s = cucopy_ep_put_zcopy(ep, iov, 1_c_size_t, dev(d), cucopy_f_completion_ptr(done))
      if (s == CUCOPY_INPROGRESS) total = total + 1
      call cucopy_f_completion_account(done, s)
    end do
    call ft_status(cucopy_f_completion_wait(iface, done, 60d0), CUCOPY_OK, &
        "one completion over " // ft_str(ndev) // " devices")
    call ft_check(done%fired == 1 .and. done%comp%count == 0, "shared completion fired once")
    do d = 0, ndev - 1
      check = 0
      call ft_check(ftd_dtoh(int(d, c_int), c_loc(check), dev(d), &
          int(size(check), c_size_t)) == 0, "cuMemcpyDtoH")
      call ft_check(all(check == multi(:, d)), "multi-device data, device " // ft_str(d))
    end do
  end if
  call ft_check(ftd_no_current() == 1, "no current context left behind")

  do d = 0, ndev - 1
    call ft_check(ftd_dev_free(int(d, c_int), dev(d)) == 0, "cuMemFree")
  end do
  call ft_status(cucopy_ep_destroy(ep), CUCOPY_OK, "ep_destroy")
  call ft_status(cucopy_iface_close(iface), CUCOPY_OK, "iface_close")
  call ft_status(cucopy_context_destroy(ctx), CUCOPY_OK, "context_destroy")
  call ft_finish()
end program test_f_zcopy
