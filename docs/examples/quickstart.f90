! SPDX-License-Identifier: BSD-3-Clause
!
! cucopy quick start in Fortran: context, iface, endpoint, a device buffer,
! host -> GPU with put_zcopy and a completion, GPU -> host with get_short,
! flush, teardown. See docs/quickstart.md.
!
! Build (installed prefix, pkg-config):
!   gfortran -c "$(pkg-config --variable=fortran_module cucopy)" -J mod/ -o cucopy_mod.o
!   gfortran -I mod/ quickstart.f90 cucopy_mod.o $(pkg-config --libs cucopy) \
!            -Wl,-rpath,$(pkg-config --variable=libdir cucopy)
program quickstart
  use, intrinsic :: iso_c_binding
  use cucopy
  implicit none
  integer, parameter :: n = 1048576
  type(c_ptr) :: ctx, iface, ep
  integer(c_int) :: st, ndev
  integer(c_int64_t) :: dev0
  integer(c_int8_t), target :: src(n), dst(n)
  type(cucopy_iov_t) :: iov(1)
  type(cucopy_f_completion), target :: done, flushed
  integer :: i

  ! 1. Context (loads $CUCOPY_CUDA_DRIVER or libcuda.so.1), iface, endpoint.
  call cucopy_check(cucopy_f_context_create(ctx), "context_create")
  call cucopy_check(cucopy_device_count(ctx, ndev), "device_count")
  print '(a,i0,a)', "cucopy: ", ndev, " device(s)"
  call cucopy_check(cucopy_f_iface_open(ctx, iface, thread_mode=CUCOPY_THREAD_MODE_SINGLE), &
                    "iface_open")
  call cucopy_check(cucopy_ep_create(iface, ep), "ep_create")

  ! 2. A device buffer on GPU 0 (an address, never dereferenced in Fortran).
  !    ACTIVATE: this program uses no CUDA itself, so GPU 0's primary context
  !    is inactive until cucopy retains it for the allocation.
  call cucopy_check(cucopy_f_mem_alloc(ctx, int(n, c_size_t), dev0, device=0, &
                                       flags=CUCOPY_MEM_ALLOC_FLAG_ACTIVATE), "mem_alloc")

  do i = 1, n
    src(i) = int(mod(i * 7 + 1, 128), c_int8_t)
  end do
  dst = 0

  ! 3. Host -> GPU 0, asynchronous, with a completion.
  iov(1) = cucopy_iov(c_loc(src), n)
  call cucopy_f_completion_init(done, 1)
  st = cucopy_ep_put_zcopy(ep, iov, 1_c_size_t, dev0, cucopy_f_completion_ptr(done))
  call cucopy_f_completion_account(done, st)   ! OK or an error: it will not report
  st = cucopy_f_completion_wait(iface, done, 10.0d0)   ! progress until it fired
  call cucopy_check(st, "put_zcopy")

  ! 4. GPU 0 -> host, synchronous.
  call cucopy_check(cucopy_ep_get_short(ep, c_loc(dst), int(n, c_size_t), dev0), "get_short")
  if (any(src /= dst)) then
    print '(a)', "data differs"
    error stop 1
  end if
  print '(a)', "host -> GPU 0 -> host: ok"

  ! 5. Flush (nothing is outstanding here, so it returns CUCOPY_OK at once).
  call cucopy_f_completion_init(flushed, 1)
  st = cucopy_iface_flush(iface, 0, cucopy_f_completion_ptr(flushed))
  call cucopy_f_completion_account(flushed, st)
  call cucopy_check(cucopy_f_completion_wait(iface, flushed, 10.0d0), "iface_flush")

  ! 6. Teardown.
  call cucopy_check(cucopy_ep_destroy(ep), "ep_destroy")
  call cucopy_check(cucopy_iface_close(iface), "iface_close")
  call cucopy_check(cucopy_f_mem_free(ctx, dev0), "mem_free")
  call cucopy_check(cucopy_context_destroy(ctx), "context_destroy")
  print '(a)', "OK"
end program quickstart
