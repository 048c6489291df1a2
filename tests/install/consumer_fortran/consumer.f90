! SPDX-License-Identifier: BSD-3-Clause
!
! A Fortran program built against an installed cucopy (find_package with
! cucopy::fortran, or pkg-config's fortran_module): context, iface, endpoint,
! a round trip of copies, data checked, "OK".
! Usage: consumer [expected_device_count]
program consumer
  use, intrinsic :: iso_c_binding
  use cucopy
  implicit none
  integer, parameter :: n = 65536
  type(c_ptr) :: ctx, iface, ep
  integer(c_int) :: st, ndev
  integer(c_int8_t), target :: src(n), mid(n), dst(n)
  character(len=32) :: arg
  integer :: i, want

  call check(cucopy_context_create(c_null_ptr, ctx), "cucopy_context_create")
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
  call check(cucopy_iface_open(ctx, c_null_ptr, iface), "cucopy_iface_open")
  call check(cucopy_ep_create(iface, ep), "cucopy_ep_create")

  do i = 1, n
    src(i) = int(mod(i * 7 + 1, 128), c_int8_t)
  end do
  mid = 0
  dst = 0
  call check(cucopy_ep_put_short(ep, c_loc(src), int(n, c_size_t), addr(c_loc(mid))), &
             "cucopy_ep_put_short")
  call check(cucopy_ep_get_short(ep, c_loc(dst), int(n, c_size_t), addr(c_loc(mid))), &
             "cucopy_ep_get_short")
  if (any(src /= dst)) then
    print '(a)', "FAIL round trip: data differs"
    stop 1
  end if

  call check(cucopy_ep_destroy(ep), "cucopy_ep_destroy")
  call check(cucopy_iface_close(iface), "cucopy_iface_close")
  call check(cucopy_context_destroy(ctx), "cucopy_context_destroy")
  print '(a)', "OK"

contains

  ! The address of a buffer as the uint64_t remote address of the C API.
  function addr(p) result(a)
    type(c_ptr), intent(in) :: p
    integer(c_int64_t) :: a
    a = transfer(p, a)
  end function addr

  subroutine check(status, what)
    integer(c_int), intent(in) :: status
    character(len=*), intent(in) :: what
    if (status /= CUCOPY_OK) then
      print '(a,a,a,i0)', "FAIL ", what, ": status ", status
      stop 1
    end if
  end subroutine check
end program consumer
