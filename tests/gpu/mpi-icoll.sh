#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The nonblocking collectives through the MPI interposer on a GPU machine,
# over a build tree made elsewhere, with the real driver (CUCOPY_CUDA_DRIVER
# unset) and the machine's own (not CUDA-aware) Open MPI, run as root:
#
#   tests/gpu/mpi-icoll.sh BUILD_DIR
#
# icoll_device (mpi/tests/icoll_device.c, as mpi_shim_icoll_* runs it on the
# fake driver) under LD_PRELOAD with 2 and 3 ranks (the ranks share the
# GPUs), then its negative control: without the shim the first device-buffer
# call must die of a segmentation fault inside MPI (check() of mpi-check.sh).
# Prints PASS/FAIL per check and the last lines of each run; exit status 1
# if any failed.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES FAKECUDA_DELAY_US
shim=$build/lib/libcucopy_mpi.so
mpirun --version 2>&1 | head -1
nvidia-smi -L 2>/dev/null
failed=0

. "$(dirname "$0")/mpi-check.sh" # check()

# Every rank passed and the shim staged device buffers (its stats line).
export CUCOPY_MPI_STATS=1 CUCOPY_MPI=auto CHECK_TIMEOUT=600
CHECK_REQUIRE="device->MPI: dev0 [0-9]+ calls" check mpi_shim_icoll_n2 pass 2 yes mpi_shim_icoll_device
CHECK_REQUIRE="device->MPI: dev0 [0-9]+ calls" check mpi_shim_icoll_n3 pass 3 yes mpi_shim_icoll_device
check mpi_shim_icoll_negative_control fault 2 no mpi_shim_icoll_device movement
exit $failed
