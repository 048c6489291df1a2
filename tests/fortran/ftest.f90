! SPDX-License-Identifier: BSD-3-Clause
!
! Shared pieces of the Fortran tests: counted checks, the summary line and
! exit status (0 passed, 1 failed, 77 skipped, as the C suite), and bind(C)
! interfaces to the raw driver helpers of ftest_drv.c and to poll(2).
module ftest
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: error_unit, output_unit
  use cucopy
  implicit none

  integer, save :: ft_cases = 0
  integer, save :: ft_failed = 0
  character(len=64), save :: ft_name = "?"

  ! struct pollfd
  type, bind(C) :: ft_pollfd
    integer(c_int) :: fd
    integer(c_short) :: events
    integer(c_short) :: revents
  end type ft_pollfd
  integer(c_short), parameter :: FT_POLLIN = 1

  interface
    function ftd_init() bind(C, name="ftd_init") result(n)
      import :: c_int
      integer(c_int) :: n
    end function ftd_init

    function ftd_is_fake() bind(C, name="ftd_is_fake") result(fake)
      import :: c_int
      integer(c_int) :: fake
    end function ftd_is_fake

    function ftd_dev_alloc(dev, bytes) bind(C, name="ftd_dev_alloc") result(p)
      import :: c_int, c_size_t, c_int64_t
      integer(c_int), value :: dev
      integer(c_size_t), value :: bytes
      integer(c_int64_t) :: p
    end function ftd_dev_alloc

    function ftd_managed_alloc(dev, bytes) bind(C, name="ftd_managed_alloc") result(p)
      import :: c_int, c_size_t, c_int64_t
      integer(c_int), value :: dev
      integer(c_size_t), value :: bytes
      integer(c_int64_t) :: p
    end function ftd_managed_alloc

    function ftd_dev_free(dev, ptr) bind(C, name="ftd_dev_free") result(rc)
      import :: c_int, c_int64_t
      integer(c_int), value :: dev
      integer(c_int64_t), value :: ptr
      integer(c_int) :: rc
    end function ftd_dev_free

    function ftd_htod(dev, dst, src, bytes) bind(C, name="ftd_htod") result(rc)
      import :: c_int, c_int64_t, c_ptr, c_size_t
      integer(c_int), value :: dev
      integer(c_int64_t), value :: dst
      type(c_ptr), value :: src
      integer(c_size_t), value :: bytes
      integer(c_int) :: rc
    end function ftd_htod

    function ftd_dtoh(dev, dst, src, bytes) bind(C, name="ftd_dtoh") result(rc)
      import :: c_int, c_int64_t, c_ptr, c_size_t
      integer(c_int), value :: dev
      type(c_ptr), value :: dst
      integer(c_int64_t), value :: src
      integer(c_size_t), value :: bytes
      integer(c_int) :: rc
    end function ftd_dtoh

    function ftd_no_current() bind(C, name="ftd_no_current") result(none)
      import :: c_int
      integer(c_int) :: none
    end function ftd_no_current

    function ft_poll(fds, nfds, timeout_ms) bind(C, name="poll") result(n)
      import :: c_int, c_long, ft_pollfd
      type(ft_pollfd), intent(inout) :: fds(*)
      integer(c_long), value :: nfds
      integer(c_int), value :: timeout_ms
      integer(c_int) :: n
    end function ft_poll
  end interface

contains

  !> Name the test, load the raw driver; returns the number of devices.
  !> Exits 77 (skipped) when there is none, 1 when the driver cannot load.
  function ft_init(name) result(ndev)
    character(len=*), intent(in) :: name
    integer :: ndev
    ft_name = name
    ndev = ftd_init()
    if (ndev < 0) then
      write(error_unit, '(a)') trim(ft_name) // ": cannot load the CUDA driver"
      error stop 1
    end if
    if (ndev == 0) then
      write(output_unit, '(a)') trim(ft_name) // ": no CUDA device; skipped"
      stop 77
    end if
  end function ft_init

  !> One case: passes when ok.
  subroutine ft_check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    ft_cases = ft_cases + 1
    if (.not. ok) then
      ft_failed = ft_failed + 1
      write(output_unit, '(a)') "FAIL: " // what
    end if
  end subroutine ft_check

  !> One case: status == expected; an expected error also needs a non-empty
  !> cucopy_last_error().
  subroutine ft_status(got, expected, what)
    integer(c_int), intent(in) :: got, expected
    character(len=*), intent(in) :: what
    character(len=:), allocatable :: last
    ft_cases = ft_cases + 1
    if (got /= expected) then
      ft_failed = ft_failed + 1
      write(output_unit, '(a,i0,a,i0,a)') "FAIL: " // what // " returned ", got, &
          " (" // cucopy_status_str(got) // "), expected ", expected, &
          " (" // cucopy_status_str(expected) // "); last error: " // cucopy_last_error_str()
      return
    end if
    if (expected < 0) then
      last = cucopy_last_error_str()
      if (len(last) == 0) then
        ft_failed = ft_failed + 1
        write(output_unit, '(a)') "FAIL: " // what // ": cucopy_last_error() is empty"
      end if
    end if
  end subroutine ft_status

  !> A set-up step: stop the test (exit 1) unless status is OK.
  subroutine ft_require(status, what)
    integer(c_int), intent(in) :: status
    character(len=*), intent(in) :: what
    if (status /= CUCOPY_OK) then
      write(output_unit, '(a)') "FATAL: " // what // ": " // cucopy_status_str(status) // &
          " (" // cucopy_last_error_str() // ")"
      call ft_finish()
    end if
  end subroutine ft_require

  !> Print the summary, exit 0 when every case passed, else 1.
  subroutine ft_finish()
    write(output_unit, '(a,i0,a,i0,a)') trim(ft_name) // ": ", ft_cases, " cases, ", &
        ft_cases - ft_failed, " passed"
    if (ft_failed > 0 .or. ft_cases == 0) error stop 1
    stop
  end subroutine ft_finish

  !> The closing line of an MPI test program's rank (@p who: "prog: rank R:"),
  !> the one its CTest checks look for: "<who> PASS (N checks)", or "<who>
  !> FAILED (F of N checks)" and exit status 1.
  subroutine ft_report(who)
    character(len=*), intent(in) :: who
    if (ft_failed == 0) then
      write(output_unit, '(a,i0,a)') trim(who) // " PASS (", ft_cases, " checks)"
    else
      write(output_unit, '(a,i0,a,i0,a)') trim(who) // " FAILED (", ft_failed, " of ", &
          ft_cases, " checks)"
      error stop 1
    end if
  end subroutine ft_report

  !> Fill bytes with a pattern depending on seed.
  subroutine ft_fill(bytes, seed)
    integer(c_int8_t), intent(out) :: bytes(:)
    integer, intent(in) :: seed
    integer :: i
    do i = 1, size(bytes)
      bytes(i) = int(iand(i * 131 + seed * 17 + i / 256, 255) - 128, c_int8_t)
    end do
  end subroutine ft_fill

  function ft_str(i) result(s)
    integer, intent(in) :: i
    character(len=:), allocatable :: s
    character(len=32) :: buf
    write(buf, '(i0)') i
    s = trim(buf)
  end function ft_str
end module ftest
