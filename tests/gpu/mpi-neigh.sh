#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The neighborhood collectives (mpi/shim_neigh.c) and MPI_Pack/MPI_Unpack
# (mpi/shim_pack.c) of the MPI interposer on a GPU machine, over a build
# tree made elsewhere, with the real driver and the machine's own (not
# CUDA-aware) Open MPI, run as root:
#
#   tests/gpu/mpi-neigh.sh BUILD_DIR
#
# neigh_device (every MPI_Neighbor_* and MPI_Ineighbor_* call on periodic,
# non-periodic and mixed Cartesian communicators, a graph and a distributed
# graph, device buffers compared with the same calls on host buffers) under
# LD_PRELOAD at -n 2, 3 and 4 (ranks share the GPUs); f_neigh in each
# Fortran binding built, at -n 2; pack_device (Pack, Unpack, the external
# forms, a device MPI_PACKED message) at -n 2, and f_pack in each Fortran
# binding built; the negative controls without
# the shim (MPI_Neighbor_allgather, MPI_Pack, the Fortran
# MPI_Neighbor_allgather on device memory must fault in MPI). Prints
# PASS/FAIL per check; exit status 1 if any failed.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES FAKECUDA_DELAY_US
shim=$build/lib/libcucopy_mpi.so
mpirun --version 2>&1 | head -1
failed=0

. "$(dirname "$0")/mpi-check.sh" # check()

export CUCOPY_MPI_STATS=1 CUCOPY_MPI=auto
check mpi_shim_neigh_n2 pass 2 yes mpi_shim_neigh_device
check mpi_shim_neigh_n3 pass 3 yes mpi_shim_neigh_device
check mpi_shim_neigh_n4 pass 4 yes mpi_shim_neigh_device
check mpi_shim_neigh_negative_control fault 2 no mpi_shim_neigh_device cart
for b in mpifh usempi f08; do
    [[ -x $build/bin/mpi_shim_fneigh_$b ]] && check mpi_shim_fortran_neigh_$b pass 2 yes mpi_shim_fneigh_$b
done
[[ -x $build/bin/mpi_shim_fneigh_usempi ]] &&
    check mpi_shim_fortran_neigh_negative_control fault 2 no mpi_shim_fneigh_usempi
check mpi_shim_pack_n2 pass 2 yes mpi_shim_pack_device
check mpi_shim_pack_negative_control fault 2 no mpi_shim_pack_device local
for b in mpifh usempi f08; do
    [[ -x $build/bin/mpi_shim_fpack_$b ]] && check mpi_shim_fortran_pack_$b pass 2 yes mpi_shim_fpack_$b
done
exit $failed
