! SPDX-License-Identifier: BSD-3-Clause
!
! Error paths and helpers from Fortran: version, status strings, NULL and
! closed handles (CUCOPY_ERR_INVALID_HANDLE with a non-empty last error),
! destroy of NULL, invalid parameters, BUSY context destroy, a second context
! naming the driver path (same: OK; different: INVALID_PARAM), and the
! module's conversion helpers.
program test_f_errors
  use, intrinsic :: iso_c_binding
  use cucopy
  use ftest
  implicit none
  type(c_ptr) :: ctx, ctx2, iface, ep
  type(cucopy_context_params_t) :: cparams
  type(cucopy_iov_t) :: iov(1)
  integer(c_int8_t), target :: buf(64)
  integer(c_int) :: statuses(15), i, j, count
  character(len=4096) :: path
  character(len=:), allocatable :: str
  character(kind=c_char) :: chars(8)
  integer :: ndev, plen, pst
  logical :: failed

  ndev = ft_init("test_f_errors")

  ! Version and status strings (no driver needed).
  call ft_check(cucopy_get_version() == CUCOPY_VERSION, "cucopy_get_version() == CUCOPY_VERSION")
  statuses = [CUCOPY_OK, CUCOPY_INPROGRESS, CUCOPY_ERR_INVALID_PARAM, CUCOPY_ERR_INVALID_HANDLE, &
      CUCOPY_ERR_NO_MEMORY, CUCOPY_ERR_NO_RESOURCE, CUCOPY_ERR_BUSY, CUCOPY_ERR_UNSUPPORTED, &
      CUCOPY_ERR_NO_DEVICE, CUCOPY_ERR_NO_DRIVER, CUCOPY_ERR_CUDA, CUCOPY_ERR_FORKED, &
      CUCOPY_ERR_INTERNAL, CUCOPY_ERR_OUT_OF_RANGE, CUCOPY_ERR_ALREADY_EXISTS]
  do i = 1, size(statuses)
    str = cucopy_status_str(statuses(i))
    call ft_check(len(str) > 0 .and. index(str, "CUCOPY_") == 1, &
        "status string of " // ft_str(int(statuses(i))) // ": " // str)
    do j = 1, i - 1
      call ft_check(str /= cucopy_status_str(statuses(j)), "status strings differ")
    end do
  end do
  call ft_check(index(cucopy_status_str(CUCOPY_ERR_INVALID_HANDLE), &
      "CUCOPY_ERR_INVALID_HANDLE") == 1, "INVALID_HANDLE string names it")
  failed = cucopy_failed(CUCOPY_OK, "ok")
  call ft_check(.not. failed, "cucopy_failed(OK) is .false.")
  failed = cucopy_failed(CUCOPY_INPROGRESS, "inprogress")
  call ft_check(.not. failed, "cucopy_failed(INPROGRESS) is .false.")

  ! NULL handles.
  call ft_status(cucopy_iface_progress(c_null_ptr), CUCOPY_ERR_INVALID_HANDLE, "progress(NULL)")
  call ft_status(cucopy_ep_put_short(c_null_ptr, c_loc(buf), 8_c_size_t, cucopy_addr(buf)), &
      CUCOPY_ERR_INVALID_HANDLE, "put_short(NULL ep)")
  call ft_status(cucopy_device_count(c_null_ptr, count), CUCOPY_ERR_INVALID_HANDLE, &
      "device_count(NULL)")
  call ft_status(cucopy_iface_open(c_null_ptr, iface_p=iface), CUCOPY_ERR_INVALID_HANDLE, &
      "iface_open(NULL ctx)")
  failed = cucopy_failed(CUCOPY_ERR_INVALID_HANDLE, "expected error (printed by cucopy_failed)")
  call ft_check(failed, "cucopy_failed is .true. for an error")
  call ft_check(len(cucopy_last_error_str()) > 0, "last error after a failure: " // &
      cucopy_last_error_str())
  ! Destroy / close of NULL is a no-op.
  call ft_status(cucopy_ep_destroy(c_null_ptr), CUCOPY_OK, "ep_destroy(NULL)")
  call ft_status(cucopy_iface_close(c_null_ptr), CUCOPY_OK, "iface_close(NULL)")
  call ft_status(cucopy_context_destroy(c_null_ptr), CUCOPY_OK, "context_destroy(NULL)")

  ! Invalid parameters.
  cparams%field_mask = ishft(1_c_int64_t, 40)
  cparams%driver_path = c_null_ptr
  cparams%log_level = CUCOPY_LOG_WARN
  call ft_status(cucopy_context_create(cparams, ctx), CUCOPY_ERR_INVALID_PARAM, &
      "context_create with an unknown field bit")

  call get_environment_variable("CUCOPY_CUDA_DRIVER", path, plen, pst)
  if (pst == 0 .and. plen > 0) then
    call ft_require(cucopy_f_context_create(ctx, driver_path=path(1:plen), &
        log_level=CUCOPY_LOG_ERROR), "context_create naming $CUCOPY_CUDA_DRIVER")
  else
    call ft_require(cucopy_context_create(ctx_p=ctx), "context_create (params absent: NULL)")
  end if
  call ft_status(cucopy_device_count(ctx, count), CUCOPY_OK, "device_count")
  call ft_check(count == ndev, "device_count")
  call ft_status(cucopy_f_context_create(ctx2, driver_path="/nonexistent/other/libcuda.so.1"), &
      CUCOPY_ERR_INVALID_PARAM, "a second context naming a different driver path")
  call ft_status(cucopy_f_iface_open(ctx, iface, max_poll=0_c_int), CUCOPY_ERR_INVALID_PARAM, &
      "iface_open with max_poll 0")
  call ft_status(cucopy_f_iface_open(ctx, iface, thread_mode=7_c_int), CUCOPY_ERR_INVALID_PARAM, &
      "iface_open with thread mode 7")
  call ft_require(cucopy_f_iface_open(ctx, iface, thread_mode=CUCOPY_THREAD_MODE_MULTI), &
      "iface_open (multi)")
  call ft_require(cucopy_ep_create(iface, ep), "ep_create")
  call ft_status(cucopy_context_destroy(ctx), CUCOPY_ERR_BUSY, "context_destroy with an open iface")

  iov(1) = cucopy_iov(c_loc(buf), 8)
  call ft_status(cucopy_ep_put_zcopy(ep, iov, 0_c_size_t, cucopy_addr(buf), c_null_ptr), &
      CUCOPY_ERR_INVALID_PARAM, "put_zcopy with iovcnt 0")
  call ft_status(cucopy_ep_put_short(ep, c_null_ptr, 8_c_size_t, cucopy_addr(buf)), &
      CUCOPY_ERR_INVALID_PARAM, "put_short from NULL with 8 bytes")
  call ft_status(cucopy_iface_event_arm(iface, 128_c_int), CUCOPY_ERR_INVALID_PARAM, &
      "event_arm with an unknown event bit")

  ! Closed handles.
  call ft_status(cucopy_iface_close(iface), CUCOPY_OK, "iface_close")
  call ft_status(cucopy_iface_progress(iface), CUCOPY_ERR_INVALID_HANDLE, "progress(closed iface)")
  call ft_status(cucopy_ep_put_short(ep, c_loc(buf), 8_c_size_t, cucopy_addr(buf(9))), &
      CUCOPY_ERR_INVALID_HANDLE, "put_short on an ep of a closed iface")
  call ft_status(cucopy_context_destroy(ctx), CUCOPY_OK, "context_destroy")
  call ft_status(cucopy_device_count(ctx, count), CUCOPY_ERR_INVALID_HANDLE, &
      "device_count(destroyed context)")

  ! Helpers.
  call ft_check(cucopy_ptr_addr(cucopy_addr_ptr(int(z'7f0012345678', c_int64_t))) == &
      int(z'7f0012345678', c_int64_t), "cucopy_addr_ptr / cucopy_ptr_addr round trip")
  call ft_check(cucopy_addr(buf) == cucopy_ptr_addr(c_loc(buf)), "cucopy_addr == c_loc")
  call ft_check(cucopy_addr(buf(3)) - cucopy_addr(buf) == 2, "cucopy_addr of an element")
  call ft_check(cucopy_string(c_null_ptr) == "", "cucopy_string(NULL) is empty")
  chars = [c_char_"a", c_char_"b", c_null_char, c_char_"x", c_char_"y", c_char_"z", &
      c_char_"w", c_char_"v"]
  call ft_check(cucopy_chars(chars) == "ab", "cucopy_chars stops at NUL")
  call ft_check(iov(1)%length == 8 .and. c_associated(iov(1)%buffer, c_loc(buf)), "cucopy_iov")
  call ft_finish()
end program test_f_errors
