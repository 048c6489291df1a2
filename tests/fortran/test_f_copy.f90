! SPDX-License-Identifier: BSD-3-Clause
!
! Host <-> device put/get short on every device, from Fortran, through the
! module cucopy: host arrays by c_loc / cucopy_addr, device memory as a
! plain integer(c_int64_t) address (no CUDA Fortran). Also host <-> host,
! device <-> device between GPUs, iface_query, and that the calling thread's
! current context is left as found (none).
program test_f_copy
  use, intrinsic :: iso_c_binding
  use cucopy
  use ftest
  implicit none
  integer, parameter :: n = 4096
  integer(c_size_t), parameter :: nbytes = n
  type(c_ptr) :: ctx, iface, ep
  type(cucopy_iface_attr_t) :: attr
  integer(c_int8_t), target :: src(n), dst(n), back(n)
  integer(c_int64_t), allocatable :: dev(:)
  integer(c_int) :: ndev_lib
  integer :: ndev, d, e

  ndev = ft_init("test_f_copy")
  call ft_require(cucopy_f_context_create(ctx), "context_create")
  call ft_require(cucopy_device_count(ctx, ndev_lib), "device_count")
  call ft_check(ndev_lib == ndev, "cucopy_device_count equals the driver's count")
  call ft_require(cucopy_iface_open(ctx, iface_p=iface), "iface_open (params absent: NULL)")
  call ft_require(cucopy_ep_create(iface, ep), "ep_create")

  attr%field_mask = ior(ior(CUCOPY_IFACE_ATTR_CAP_FLAGS, CUCOPY_IFACE_ATTR_MAX_IOV), &
      ior(CUCOPY_IFACE_ATTR_DEVICE_COUNT, CUCOPY_IFACE_ATTR_THREAD_MODE))
  call ft_status(cucopy_iface_query(iface, attr), CUCOPY_OK, "iface_query")
  call ft_check(attr%device_count == ndev, "iface_query device_count")
  call ft_check(attr%max_iov >= 1, "iface_query max_iov >= 1")
  call ft_check(attr%thread_mode == CUCOPY_THREAD_MODE_SINGLE, "default thread mode single")
  call ft_check(iand(attr%cap_flags, CUCOPY_IFACE_CAP_PUT_SHORT) /= 0 .and. &
      iand(attr%cap_flags, CUCOPY_IFACE_CAP_GET_SHORT) /= 0, "caps: put/get short")

  ! Host <-> host: both addresses from Fortran arrays.
  call ft_fill(src, 1)
  dst = 0
  call ft_status(cucopy_ep_put_short(ep, c_loc(src), nbytes, cucopy_addr(dst)), CUCOPY_OK, &
      "put_short host -> host")
  call ft_check(all(dst == src), "host -> host data")

  allocate(dev(0:ndev - 1))
  do d = 0, ndev - 1
    dev(d) = ftd_dev_alloc(int(d, c_int), nbytes)
    call ft_check(dev(d) /= 0, "cuMemAlloc on device " // ft_str(d))
    if (dev(d) == 0) call ft_finish()

    ! put: host -> device d, checked with the raw driver.
    call ft_fill(src, 10 + d)
    back = 0
    call ft_status(cucopy_ep_put_short(ep, c_loc(src), nbytes, dev(d)), CUCOPY_OK, &
        "put_short host -> device " // ft_str(d))
    call ft_check(ftd_dtoh(int(d, c_int), c_loc(back), dev(d), nbytes) == 0, "cuMemcpyDtoH")
    call ft_check(all(back == src), "host -> device " // ft_str(d) // " data")

    ! get: device d -> host, the device set with the raw driver.
    call ft_fill(src, 20 + d)
    call ft_check(ftd_htod(int(d, c_int), dev(d), c_loc(src), nbytes) == 0, "cuMemcpyHtoD")
    dst = 0
    call ft_status(cucopy_ep_get_short(ep, c_loc(dst), nbytes, dev(d)), CUCOPY_OK, &
        "get_short device " // ft_str(d) // " -> host")
    call ft_check(all(dst == src), "device " // ft_str(d) // " -> host data")

    ! An offset into both buffers: 100 bytes at byte 17 of the device buffer.
    dst = 0
    call ft_status(cucopy_ep_get_short(ep, c_loc(dst(5)), 100_c_size_t, dev(d) + 16), &
        CUCOPY_OK, "get_short with offsets, device " // ft_str(d))
    call ft_check(all(dst(5:104) == src(17:116)) .and. all(dst(1:4) == 0) .and. &
        all(dst(105:) == 0), "offset copy data, device " // ft_str(d))

    ! Zero length is a no-op, whatever the addresses.
    call ft_status(cucopy_ep_put_short(ep, c_null_ptr, 0_c_size_t, 0_c_int64_t), CUCOPY_OK, &
        "put_short of 0 bytes")
    call ft_check(ftd_no_current() == 1, "no current context after the copies")
  end do

  ! Device <-> device between GPUs: the local side is a device address too.
  do d = 0, ndev - 1
    e = mod(d + 1, ndev)
    if (e == d) exit
    call ft_fill(src, 30 + d)
    call ft_check(ftd_htod(int(d, c_int), dev(d), c_loc(src), nbytes) == 0, "cuMemcpyHtoD")
    call ft_status(cucopy_ep_put_short(ep, cucopy_addr_ptr(dev(d)), nbytes, dev(e)), CUCOPY_OK, &
        "put_short device " // ft_str(d) // " -> device " // ft_str(e))
    back = 0
    call ft_check(ftd_dtoh(int(e, c_int), c_loc(back), dev(e), nbytes) == 0, "cuMemcpyDtoH")
    call ft_check(all(back == src), "device -> device data")
  end do

  do d = 0, ndev - 1
    call ft_check(ftd_dev_free(int(d, c_int), dev(d)) == 0, "cuMemFree")
  end do
  call ft_status(cucopy_ep_destroy(ep), CUCOPY_OK, "ep_destroy")
  call ft_status(cucopy_iface_close(iface), CUCOPY_OK, "iface_close")
  call ft_status(cucopy_context_destroy(ctx), CUCOPY_OK, "context_destroy")
  call ft_finish()
end program test_f_copy
