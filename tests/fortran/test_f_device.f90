! SPDX-License-Identifier: BSD-3-Clause
!
! cucopy_device_query and cucopy_device_peer_query from Fortran: every field
! of every device (C strings through cucopy_chars, the UUID through
! cucopy_uuid_str), field_mask semantics (fields not asked for are not
! written; unknown bits rejected), every ordered device pair (consistent with
! peer_mask), bad ordinals, and no current context left behind.
program test_f_device
  use, intrinsic :: iso_c_binding
  use cucopy
  use ftest
  implicit none
  integer(c_int64_t), parameter :: all_fields = CUCOPY_DEVICE_ATTR_NAME + CUCOPY_DEVICE_ATTR_UUID + &
      CUCOPY_DEVICE_ATTR_PCI_BUS_ID + CUCOPY_DEVICE_ATTR_NUMA_NODE + CUCOPY_DEVICE_ATTR_MEMORY + &
      CUCOPY_DEVICE_ATTR_COMPUTE_CAPABILITY + CUCOPY_DEVICE_ATTR_PEERS + &
      CUCOPY_DEVICE_ATTR_PRIMARY_ACTIVE
  integer(c_int64_t), parameter :: all_peer = CUCOPY_PEER_ATTR_CAN_ACCESS + &
      CUCOPY_PEER_ATTR_ACCESS_SUPPORTED + CUCOPY_PEER_ATTR_NATIVE_ATOMICS + &
      CUCOPY_PEER_ATTR_PERFORMANCE_RANK
  type(c_ptr) :: ctx
  type(cucopy_device_attr_t), allocatable :: attrs(:)
  type(cucopy_device_attr_t) :: a
  type(cucopy_peer_attr_t) :: pa
  character(len=:), allocatable :: name, bus
  integer(c_int) :: count
  integer :: ndev, d, p, i

  ndev = ft_init("test_f_device")
  call ft_require(cucopy_f_context_create(ctx), "context_create")
  call ft_status(cucopy_device_count(ctx, count), CUCOPY_OK, "device_count")
  call ft_check(count == ndev, "device_count equals the driver's")
  allocate(attrs(0:ndev - 1))
  do d = 0, ndev - 1
    attrs(d)%field_mask = all_fields
    call ft_status(cucopy_device_query(ctx, int(d, c_int), attrs(d)), CUCOPY_OK, &
        "device_query(" // ft_str(d) // ")")
    name = cucopy_chars(attrs(d)%name)
    bus = cucopy_chars(attrs(d)%pci_bus_id)
    write(*, '(a,i0,a)') "device ", d, ": " // name // ", " // bus // ", " // &
        trim(cucopy_uuid_str(attrs(d)%uuid))
    call ft_check(len(name) > 0 .and. len(name) < 256, "device " // ft_str(d) // ": a name")
    call ft_check(len(bus) == 12, "device " // ft_str(d) // ": pci bus id dddd:bb:dd.f")
    if (len(bus) == 12) then
      call ft_check(bus(5:5) == ":" .and. bus(8:8) == ":" .and. bus(11:11) == "." .and. &
          verify(bus(1:4) // bus(6:7) // bus(9:10) // bus(12:12), "0123456789abcdef") == 0, &
          "pci bus id format, lower-case hex: " // bus)
    end if
    call ft_check(any(attrs(d)%uuid /= 0), "device " // ft_str(d) // ": a UUID")
    call ft_check(attrs(d)%total_memory > 0, "device " // ft_str(d) // ": total memory")
    call ft_check(attrs(d)%cc_major >= 1 .and. attrs(d)%cc_minor >= 0, "compute capability")
    call ft_check(attrs(d)%numa_node >= -1, "numa node >= -1")
    call ft_check(attrs(d)%primary_active == 0 .or. attrs(d)%primary_active == 1, &
        "primary_active is 0 or 1")
  end do
  do d = 0, ndev - 1
    do p = 0, d - 1
      call ft_check(any(attrs(d)%uuid /= attrs(p)%uuid), "UUIDs differ")
    end do
  end do

  ! Only the fields asked for are written.
  a%field_mask = CUCOPY_DEVICE_ATTR_NAME
  a%total_memory = -7
  a%cc_major = -7
  a%numa_node = -7
  call ft_status(cucopy_device_query(ctx, 0_c_int, a), CUCOPY_OK, "device_query(NAME only)")
  call ft_check(cucopy_chars(a%name) == cucopy_chars(attrs(0)%name) .and. a%total_memory == -7 &
      .and. a%cc_major == -7 .and. a%numa_node == -7, "only the NAME field written")
  a%field_mask = ishft(1_c_int64_t, 40)
  call ft_status(cucopy_device_query(ctx, 0_c_int, a), CUCOPY_ERR_INVALID_PARAM, &
      "device_query with an unknown field bit")
  a%field_mask = all_fields
  call ft_status(cucopy_device_query(ctx, -1_c_int, a), CUCOPY_ERR_INVALID_PARAM, &
      "device_query(-1)")
  call ft_status(cucopy_device_query(ctx, int(ndev, c_int), a), CUCOPY_ERR_INVALID_PARAM, &
      "device_query(count)")
  call ft_status(cucopy_device_query(c_null_ptr, 0_c_int, a), CUCOPY_ERR_INVALID_HANDLE, &
      "device_query(NULL ctx)")

  ! Every ordered pair.
  do d = 0, ndev - 1
    do p = 0, ndev - 1
      pa%field_mask = all_peer
      if (p == d) then
        call ft_status(cucopy_device_peer_query(ctx, int(d, c_int), int(p, c_int), pa), &
            CUCOPY_ERR_INVALID_PARAM, "peer_query of a device with itself")
        cycle
      end if
      call ft_status(cucopy_device_peer_query(ctx, int(d, c_int), int(p, c_int), pa), CUCOPY_OK, &
          "peer_query(" // ft_str(d) // ", " // ft_str(p) // ")")
      call ft_check((pa%can_access /= 0) .eqv. btest(attrs(d)%peer_mask, p), &
          "can_access agrees with peer_mask, pair " // ft_str(d) // "," // ft_str(p))
      write(*, '(a,i0,a,i0,a,4(1x,i0))') "peer ", d, " -> ", p, ":", pa%can_access, &
          pa%access_supported, pa%native_atomics, pa%performance_rank
    end do
  end do
  i = ndev
  call ft_status(cucopy_device_peer_query(ctx, 0_c_int, int(i, c_int), pa), &
      CUCOPY_ERR_INVALID_PARAM, "peer_query with peer = count")

  call ft_check(ftd_no_current() == 1, "no current context left behind")
  call ft_status(cucopy_context_destroy(ctx), CUCOPY_OK, "context_destroy")
  call ft_finish()
end program test_f_device
