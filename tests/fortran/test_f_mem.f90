! SPDX-License-Identifier: BSD-3-Clause
!
! The memory domain from Fortran: cucopy_mem_query of host (pageable,
! pinned, registered), device and managed memory; cucopy_mem_alloc /
! cucopy_mem_free (through cucopy_f_mem_alloc: memory as an integer(c_int64_t)
! address) on every device, used for put/get short and zcopy (checked with
! the raw driver); pinned host memory used as a Fortran array through
! c_f_pointer; cucopy_mem_reg / cucopy_mem_dereg of a Fortran array; the
! error statuses OUT_OF_RANGE, ALREADY_EXISTS and INVALID_PARAM.
program test_f_mem
  use, intrinsic :: iso_c_binding
  use cucopy
  use ftest
  implicit none
  integer, parameter :: n = 65536
  integer(c_size_t), parameter :: nbytes = n
  integer(c_int64_t), parameter :: all_fields = CUCOPY_MEM_ATTR_MEM_TYPE + CUCOPY_MEM_ATTR_PINNED + &
      CUCOPY_MEM_ATTR_DEVICE + CUCOPY_MEM_ATTR_CONTEXT_ID + CUCOPY_MEM_ATTR_ALLOCATION + &
      CUCOPY_MEM_ATTR_FLAGS + CUCOPY_MEM_ATTR_ACCESS
  type(c_ptr) :: ctx, iface, ep, memh, memh2, p
  type(cucopy_mem_attr_t) :: a
  type(cucopy_mem_alloc_params_t) :: params
  type(cucopy_iov_t) :: iov(1)
  type(cucopy_f_completion), target :: done
  integer(c_int8_t), target :: src(n), back(n)
  integer(c_int8_t), target, allocatable :: reg(:)
  integer(c_int8_t), pointer :: pinned(:)
  integer(c_int64_t), allocatable :: dev(:), man(:)
  integer(c_int64_t) :: hp, bad
  integer(c_int) :: s
  integer :: ndev, d

  ndev = ft_init("test_f_mem")
  call ft_require(cucopy_f_context_create(ctx), "context_create")
  call ft_require(cucopy_f_iface_open(ctx, iface), "iface_open")
  call ft_require(cucopy_ep_create(iface, ep), "ep_create")

  ! Pageable host memory (a Fortran array).
  call ft_fill(src, 1)
  a%field_mask = all_fields
  call ft_status(cucopy_mem_query(ctx, c_loc(src), nbytes, a), CUCOPY_OK, "mem_query(Fortran array)")
  call ft_check(a%mem_type == CUCOPY_MEMORY_TYPE_HOST .and. a%pinned == 0 .and. a%device == -1 &
      .and. a%context_id == 0, "a Fortran array is pageable host memory")
  call ft_check(iand(a%flags, CUCOPY_MEM_FLAG_REGISTERED + CUCOPY_MEM_FLAG_ALLOCATED) == 0, &
      "pageable: neither REGISTERED nor ALLOCATED")

  allocate(dev(0:ndev - 1), man(0:ndev - 1))
  do d = 0, ndev - 1
    ! Device memory, activating the primary context if needed.
    call ft_status(cucopy_f_mem_alloc(ctx, nbytes, dev(d), device=int(d, c_int), &
        flags=CUCOPY_MEM_ALLOC_FLAG_ACTIVATE), CUCOPY_OK, "mem_alloc on device " // ft_str(d))
    if (dev(d) == 0) call ft_finish()
    a%field_mask = all_fields
    call ft_status(cucopy_mem_query(ctx, cucopy_addr_ptr(dev(d)), nbytes, a), CUCOPY_OK, &
        "mem_query(device " // ft_str(d) // ")")
    call ft_check(a%mem_type == CUCOPY_MEMORY_TYPE_CUDA .and. a%device == d, &
        "device memory on device " // ft_str(d))
    call ft_check(a%base_address == dev(d) .and. a%alloc_length == nbytes, &
        "device " // ft_str(d) // ": allocation = [addr, +n)")
    call ft_check(iand(a%flags, CUCOPY_MEM_FLAG_ALLOCATED) /= 0, "device memory: ALLOCATED")
    call ft_check(ftd_is_fake() == 0 .or. a%context_id /= 0, "device memory: a context id")
    call ft_check(btest(a%access_mask, d), "device memory: its device may access it")
    a%field_mask = CUCOPY_MEM_ATTR_ALLOCATION
    call ft_status(cucopy_mem_query(ctx, cucopy_addr_ptr(dev(d) + 100), 16_c_size_t, a), &
        CUCOPY_OK, "mem_query inside the allocation")
    call ft_check(a%base_address == dev(d), "interior address: base is the allocation's")
    call ft_status(cucopy_mem_query(ctx, cucopy_addr_ptr(dev(d) + n - 8), 16_c_size_t, a), &
        CUCOPY_ERR_OUT_OF_RANGE, "mem_query of a range crossing the end")

    ! Copies into and out of it.
    call ft_fill(src, 10 + d)
    call ft_status(cucopy_ep_put_short(ep, c_loc(src), nbytes, dev(d)), CUCOPY_OK, &
        "put_short to cucopy_mem_alloc memory, device " // ft_str(d))
    back = 0
    call ft_check(ftd_dtoh(int(d, c_int), c_loc(back), dev(d), nbytes) == 0, "cuMemcpyDtoH")
    call ft_check(all(back == src), "put_short data, device " // ft_str(d))
    back = 0
    call ft_status(cucopy_ep_get_short(ep, c_loc(back), nbytes, dev(d)), CUCOPY_OK, "get_short")
    call ft_check(all(back == src), "get_short data, device " // ft_str(d))

    ! Managed memory.
    call ft_status(cucopy_f_mem_alloc(ctx, nbytes, man(d), mem_type=CUCOPY_MEMORY_TYPE_CUDA_MANAGED, &
        device=int(d, c_int), flags=CUCOPY_MEM_ALLOC_FLAG_ACTIVATE), CUCOPY_OK, &
        "mem_alloc managed on device " // ft_str(d))
    if (man(d) == 0) call ft_finish()
    a%field_mask = all_fields
    call ft_status(cucopy_mem_query(ctx, cucopy_addr_ptr(man(d)), nbytes, a), CUCOPY_OK, &
        "mem_query(managed " // ft_str(d) // ")")
    call ft_check(a%mem_type == CUCOPY_MEMORY_TYPE_CUDA_MANAGED .and. a%device == d, &
        "managed memory of device " // ft_str(d))
    call ft_check(a%base_address == man(d) .and. a%alloc_length == nbytes .and. &
        iand(a%flags, CUCOPY_MEM_FLAG_ALLOCATED) /= 0, "managed: allocation and ALLOCATED")
    ! device -> managed zcopy with a completion
    call cucopy_f_completion_init(done, 1)
    iov(1) = cucopy_iov(man(d), nbytes)
    s = cucopy_ep_get_zcopy(ep, iov, 1_c_size_t, dev(d), cucopy_f_completion_ptr(done))
    call cucopy_f_completion_account(done, s)
    call ft_status(cucopy_f_completion_wait(iface, done, 60d0), CUCOPY_OK, &
        "get_zcopy device -> managed, device " // ft_str(d))
    back = 0
    call ft_check(ftd_dtoh(int(d, c_int), c_loc(back), man(d), nbytes) == 0, "cuMemcpyDtoH")
    call ft_check(all(back == src), "device -> managed data, device " // ft_str(d))
  end do

  ! Pinned host memory, used as a Fortran array.
  call ft_status(cucopy_f_mem_alloc(ctx, nbytes, hp, mem_type=CUCOPY_MEMORY_TYPE_HOST), CUCOPY_OK, &
      "mem_alloc pinned host")
  if (hp == 0) call ft_finish()
  a%field_mask = all_fields
  call ft_status(cucopy_mem_query(ctx, cucopy_addr_ptr(hp), nbytes, a), CUCOPY_OK, &
      "mem_query(pinned)")
  call ft_check(a%mem_type == CUCOPY_MEMORY_TYPE_HOST .and. a%pinned == 1 .and. &
      iand(a%flags, CUCOPY_MEM_FLAG_ALLOCATED) /= 0, "pinned host memory: HOST, pinned, ALLOCATED")
  call c_f_pointer(cucopy_addr_ptr(hp), pinned, [n])
  call ft_fill(pinned, 77)
  call ft_status(cucopy_ep_put_short(ep, c_loc(pinned), nbytes, dev(0)), CUCOPY_OK, &
      "put_short pinned -> device 0")
  back = 0
  call ft_check(ftd_dtoh(0_c_int, c_loc(back), dev(0), nbytes) == 0, "cuMemcpyDtoH")
  call ft_check(all(back == pinned), "pinned -> device data")

  ! Registration of a Fortran array (a primary context is active now).
  allocate(reg(4 * n))
  call ft_status(cucopy_mem_reg(ctx, c_loc(reg), int(size(reg), c_size_t), 0_c_int, memh), &
      CUCOPY_OK, "mem_reg(Fortran array)")
  call ft_check(c_associated(memh), "mem_reg gives a handle")
  a%field_mask = all_fields
  call ft_status(cucopy_mem_query(ctx, c_loc(reg(n + 1)), nbytes, a), CUCOPY_OK, &
      "mem_query(registered)")
  call ft_check(a%mem_type == CUCOPY_MEMORY_TYPE_HOST .and. a%pinned == 1 .and. &
      iand(a%flags, CUCOPY_MEM_FLAG_REGISTERED) /= 0, "registered: HOST, pinned, REGISTERED")
  call ft_check(a%base_address == cucopy_addr(reg) .and. a%alloc_length == size(reg), &
      "registered: the registered range")
  call ft_status(cucopy_mem_reg(ctx, c_loc(reg(100)), 4096_c_size_t, 0_c_int, memh2), &
      CUCOPY_ERR_ALREADY_EXISTS, "mem_reg of an overlapping range")
  call ft_status(cucopy_mem_dereg(ctx, memh), CUCOPY_OK, "mem_dereg")
  a%field_mask = CUCOPY_MEM_ATTR_PINNED + CUCOPY_MEM_ATTR_FLAGS
  call ft_status(cucopy_mem_query(ctx, c_loc(reg), nbytes, a), CUCOPY_OK, &
      "mem_query after dereg")
  call ft_check(a%pinned == 0 .and. iand(a%flags, CUCOPY_MEM_FLAG_REGISTERED) == 0, &
      "deregistered: pageable again")
  call ft_status(cucopy_mem_dereg(ctx, c_null_ptr), CUCOPY_OK, "mem_dereg(NULL)")
  call ft_status(cucopy_mem_reg(ctx, cucopy_addr_ptr(dev(0)), nbytes, 0_c_int, memh2), &
      CUCOPY_ERR_INVALID_PARAM, "mem_reg of device memory")
  call ft_status(cucopy_mem_reg(ctx, c_loc(reg), 0_c_size_t, 0_c_int, memh2), &
      CUCOPY_ERR_INVALID_PARAM, "mem_reg of 0 bytes")

  ! Bad allocation parameters and frees.
  params%field_mask = 0
  params%length = nbytes
  params%mem_type = CUCOPY_MEMORY_TYPE_CUDA
  params%device = 0
  params%flags = 0
  call ft_status(cucopy_mem_alloc(ctx, params, p), CUCOPY_ERR_INVALID_PARAM, &
      "mem_alloc without the LENGTH field")
  call ft_status(cucopy_f_mem_alloc(ctx, 0_c_size_t, bad, device=0_c_int), &
      CUCOPY_ERR_INVALID_PARAM, "mem_alloc of 0 bytes")
  call ft_status(cucopy_f_mem_free(ctx, cucopy_addr(src)), CUCOPY_ERR_INVALID_PARAM, &
      "mem_free of a Fortran array")
  call ft_status(cucopy_f_mem_free(ctx, dev(0) + 64), CUCOPY_ERR_INVALID_PARAM, &
      "mem_free of an interior address")

  call ft_status(cucopy_f_mem_free(ctx, hp), CUCOPY_OK, "mem_free(pinned)")
  do d = 0, ndev - 1
    call ft_status(cucopy_f_mem_free(ctx, man(d)), CUCOPY_OK, "mem_free(managed)")
    call ft_status(cucopy_f_mem_free(ctx, dev(d)), CUCOPY_OK, "mem_free(device)")
  end do
  call ft_status(cucopy_f_mem_free(ctx, dev(0)), CUCOPY_ERR_INVALID_PARAM, "mem_free twice")
  call ft_check(ftd_no_current() == 1, "no current context left behind")
  call ft_status(cucopy_ep_destroy(ep), CUCOPY_OK, "ep_destroy")
  call ft_status(cucopy_iface_close(iface), CUCOPY_OK, "iface_close")
  call ft_status(cucopy_context_destroy(ctx), CUCOPY_OK, "context_destroy")
  call ft_finish()
end program test_f_mem
