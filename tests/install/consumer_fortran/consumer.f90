! SPDX-License-Identifier: BSD-3-Clause
!
! A Fortran program built against an installed cucopy (find_package with
! cucopy::fortran, or pkg-config's fortran_module): context, iface, endpoint,
! round trips of short and zcopy copies, data checked, "OK".
! Usage: consumer [expected_device_count]
program consumer
  use, intrinsic :: iso_c_binding
  use cucopy
  implicit none
  integer, parameter :: n = 65536
  type(c_ptr) :: ctx, iface, ep
  integer(c_int) :: st, ndev
  integer(c_int8_t), target :: src(n), mid(n), dst(n)
  type(cucopy_iov_t) :: iov(1)
  type(cucopy_f_completion), target :: done
  character(len=32) :: arg
  integer :: i, want

  if (cucopy_get_version() /= CUCOPY_VERSION) then
    print '(a)', "FAIL library and module versions differ"
    stop 1
  end if
  call check(cucopy_context_create(ctx_p=ctx), "cucopy_context_create")
  call check(cucopy_device_count(ctx, ndev), "cucopy_device_count")
  print '(a,i0,a)', "cucopy: ", ndev, " device(s)"
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) want
    if (ndev /= want) then
      print '(a,i0,a,i0)', "FAIL device count ", ndev, ", expected ", want
      stop 1
    end if
  end if
  call check(cucopy_iface_open(ctx, iface_p=iface), "cucopy_iface_open")
  call check(cucopy_ep_create(iface, ep), "cucopy_ep_create")

  do i = 1, n
    src(i) = int(mod(i * 7 + 1, 128), c_int8_t)
  end do

  ! short: src -> mid -> dst
  mid = 0
  dst = 0
  call check(cucopy_ep_put_short(ep, c_loc(src), int(n, c_size_t), cucopy_addr(mid)), &
             "cucopy_ep_put_short")
  call check(cucopy_ep_get_short(ep, c_loc(dst), int(n, c_size_t), cucopy_addr(mid)), &
             "cucopy_ep_get_short")
  if (any(src /= dst)) then
    print '(a)', "FAIL short round trip: data differs"
    stop 1
  end if

  ! zcopy: src -> mid -> dst, completed through progress
  mid = 0
  dst = 0
  iov(1) = cucopy_iov(c_loc(src), n)
  call cucopy_f_completion_init(done, 1)
  st = cucopy_ep_put_zcopy(ep, iov, 1_c_size_t, cucopy_addr(mid), cucopy_f_completion_ptr(done))
  if (st == CUCOPY_INPROGRESS) st = cucopy_f_completion_wait(iface, done, 30.0d0)
  call check(st, "cucopy_ep_put_zcopy")
  iov(1) = cucopy_iov(c_loc(dst), n)
  call cucopy_f_completion_init(done, 1)
  st = cucopy_ep_get_zcopy(ep, iov, 1_c_size_t, cucopy_addr(mid), cucopy_f_completion_ptr(done))
  if (st == CUCOPY_INPROGRESS) st = cucopy_f_completion_wait(iface, done, 30.0d0)
  call check(st, "cucopy_ep_get_zcopy")
  if (any(src /= dst)) then
    print '(a)', "FAIL zcopy round trip: data differs"
    stop 1
  end if

  call check(cucopy_ep_destroy(ep), "cucopy_ep_destroy")
  call check(cucopy_iface_close(iface), "cucopy_iface_close")
  call check(cucopy_context_destroy(ctx), "cucopy_context_destroy")
  print '(a)', "OK"

contains

  subroutine check(status, what)
    integer(c_int), intent(in) :: status
    character(len=*), intent(in) :: what
    if (status /= CUCOPY_OK) then
      print '(a,a,a,a)', "FAIL ", what, ": ", cucopy_status_str(status)
      stop 1
    end if
  end subroutine check
end program consumer
