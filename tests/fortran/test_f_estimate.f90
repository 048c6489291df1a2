! SPDX-License-Identifier: BSD-3-Clause
!
! cucopy_iface_estimate from Fortran: the model's pinned PCIe estimate
! (0.88 x lane rate x lanes of the reported link, 6.5 us latency, time =
! latency + length / bandwidth), field_mask semantics (a field not asked for
! is not written), and bad input (an unknown memory type, a device out of
! range, unknown flags).
program test_f_estimate
  use, intrinsic :: iso_c_binding
  use cucopy
  use ftest
  implicit none
  integer(c_int64_t), parameter :: all_fields = CUCOPY_ESTIMATE_ATTR_LATENCY + &
      CUCOPY_ESTIMATE_ATTR_BANDWIDTH + CUCOPY_ESTIMATE_ATTR_TIME + CUCOPY_ESTIMATE_ATTR_SOURCE + &
      CUCOPY_ESTIMATE_ATTR_PATH + CUCOPY_ESTIMATE_ATTR_NUMA_REMOTE
  integer(c_size_t), parameter :: length = 268435456_c_size_t
  real(c_double), parameter :: lane(6) = [0.25d9, 0.5d9, 0.985d9, 1.969d9, 3.938d9, 7.56d9]
  type(c_ptr) :: ctx, iface
  type(cucopy_estimate_attr_t) :: a
  real(c_double) :: want
  integer :: ndev

  ndev = ft_init("test_f_estimate")
  call ft_require(cucopy_f_context_create(ctx), "context_create")
  call ft_require(cucopy_f_iface_open(ctx, iface), "iface_open")

  a%field_mask = all_fields
  call ft_status(cucopy_iface_estimate(iface, CUCOPY_MEMORY_TYPE_HOST, CUCOPY_NUMA_ANY, &
      CUCOPY_MEMORY_TYPE_CUDA, 0_c_int, length, CUCOPY_ESTIMATE_SRC_PINNED, a), CUCOPY_OK, &
      "estimate pinned host -> device 0")
  write(*, '(a,es10.3,a,es10.3,a,i0,a,i0)') "h2d pinned: latency ", a%latency, " s, bandwidth ", &
      a%bandwidth, " B/s, PCIe gen ", a%path_gen, " x", a%path_width
  call ft_check(a%source == CUCOPY_ESTIMATE_SOURCE_MODEL, "source: the model")
  call ft_check(a%path == CUCOPY_PATH_PCIE, "path: PCIe")
  call ft_check(a%path_gen >= 1 .and. a%path_gen <= 6 .and. a%path_width >= 1, "a PCIe link")
  if (a%path_gen >= 1 .and. a%path_gen <= 6) then
    want = 0.88d0 * lane(a%path_gen) * a%path_width
    call ft_check(abs(a%bandwidth - want) <= 1d-9 * want, "bandwidth 0.88 x lane rate x lanes")
  end if
  call ft_check(abs(a%latency - 6.5d-6) <= 1d-15, "latency 6.5 us")
  call ft_check(abs(a%time - (a%latency + real(length, c_double) / a%bandwidth)) <= 1d-9 * a%time, &
      "time = latency + length / bandwidth")
  call ft_check(a%numa_remote == 0, "no NUMA node named: not remote")

  a%field_mask = CUCOPY_ESTIMATE_ATTR_TIME
  a%latency = -1
  call ft_status(cucopy_iface_estimate(iface, CUCOPY_MEMORY_TYPE_CUDA, 0_c_int, &
      CUCOPY_MEMORY_TYPE_CUDA, 0_c_int, length, 0_c_int, a), CUCOPY_OK, "estimate device 0 -> 0")
  call ft_check(a%time > 0, "d2d: a time")
  call ft_check(a%latency < 0, "a field outside field_mask is not written")

  a%field_mask = all_fields
  call ft_status(cucopy_iface_estimate(iface, 9_c_int, 0_c_int, CUCOPY_MEMORY_TYPE_CUDA, 0_c_int, &
      length, 0_c_int, a), CUCOPY_ERR_INVALID_PARAM, "unknown memory type")
  call ft_status(cucopy_iface_estimate(iface, CUCOPY_MEMORY_TYPE_HOST, CUCOPY_NUMA_ANY, &
      CUCOPY_MEMORY_TYPE_CUDA, int(ndev, c_int), length, 0_c_int, a), CUCOPY_ERR_INVALID_PARAM, &
      "device = count")
  call ft_status(cucopy_iface_estimate(iface, CUCOPY_MEMORY_TYPE_HOST, CUCOPY_NUMA_ANY, &
      CUCOPY_MEMORY_TYPE_CUDA, 0_c_int, length, 64_c_int, a), CUCOPY_ERR_INVALID_PARAM, &
      "unknown flags")

  call ft_status(cucopy_iface_close(iface), CUCOPY_OK, "iface_close")
  call ft_status(cucopy_context_destroy(ctx), CUCOPY_OK, "context_destroy")
  call ft_finish()
end program test_f_estimate
