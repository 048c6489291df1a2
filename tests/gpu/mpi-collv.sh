#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The v and w blocking collectives of the MPI interposer (mpi/shim_coll.c)
# on a GPU machine, over a build tree made elsewhere, with the real driver
# and the machine's own (not CUDA-aware) Open MPI, run as root:
#
#   tests/gpu/mpi-collv.sh BUILD_DIR
#
# coll_device's "v" part (Gatherv, Scatterv, Allgatherv, Alltoallv,
# Alltoallw with uneven counts, canaries in the gaps between blocks, every
# MPI_IN_PLACE form, refused input) under LD_PRELOAD at -n 2, 3 and 4 (ranks
# share the GPUs), the whole of coll_device at -n 2, and the negative control
# without the shim (MPI_Gatherv on device memory must fault in MPI). Prints
# PASS/FAIL per check; exit status 1 if any failed.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES FAKECUDA_DELAY_US
shim=$build/lib/libcucopy_mpi.so
mpirun --version 2>&1 | head -1
failed=0

. "$(dirname "$0")/mpi-check.sh" # check()

export CUCOPY_MPI_STATS=1 CUCOPY_MPI=auto
check mpi_shim_collv_n2 pass 2 yes mpi_shim_coll_device v
check mpi_shim_collv_n3 pass 3 yes mpi_shim_coll_device v
check mpi_shim_collv_n4 pass 4 yes mpi_shim_coll_device v
check mpi_shim_coll_all_n2 pass 2 yes mpi_shim_coll_device
check mpi_shim_collv_negative_control fault 2 no mpi_shim_coll_device gatherv
exit $failed
