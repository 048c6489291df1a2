#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The persistent collectives through the MPI interposer on a GPU machine,
# over a build tree made elsewhere, with the real driver (CUCOPY_CUDA_DRIVER
# unset) and the machine's own (not CUDA-aware) Open MPI, run as root:
#
#   tests/gpu/mpi-pcoll.sh BUILD_DIR
#
# pcoll_device (mpi/tests/pcoll_device.c, as mpi_shim_pcoll_* runs it on the
# fake driver; Open MPI's MPIX_*_init, its pcollreq extension: the build tree
# has bin/mpi_shim_pcoll_device only where its mpi-ext.h has that extension)
# under LD_PRELOAD with 2 and 3 ranks (the ranks share the GPUs), its leak
# part under a 1 MiB pool (no pageable fallback may be counted: Request_free
# gave the staging back), then its negative control: without the shim the
# first device start must die of a segmentation fault inside MPI (check() of
# mpi-check.sh). Prints PASS/FAIL per check and the last lines of each run;
# exit status 1 if any failed.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES FAKECUDA_DELAY_US CUCOPY_MPI_POOL_MB
shim=$build/lib/libcucopy_mpi.so
mpirun --version 2>&1 | head -1
nvidia-smi -L 2>/dev/null
failed=0
if [[ ! -x $build/bin/mpi_shim_pcoll_device ]]; then
    echo "FAIL  no $build/bin/mpi_shim_pcoll_device (the build's Open MPI has no pcollreq extension?)"
    exit 1
fi

. "$(dirname "$0")/mpi-check.sh" # check()

# Every rank passed and the shim staged device buffers (its stats line).
export CUCOPY_MPI_STATS=1 CUCOPY_MPI=auto CHECK_TIMEOUT=600
CHECK_REQUIRE="device->MPI: dev0 [0-9]+ calls" check mpi_shim_pcoll_n2 pass 2 yes mpi_shim_pcoll_device
CHECK_REQUIRE="device->MPI: dev0 [0-9]+ calls" check mpi_shim_pcoll_n3 pass 3 yes mpi_shim_pcoll_device
CUCOPY_MPI_POOL_MB=1 CHECK_REQUIRE="rank 1: staging .*pageable fallbacks 0" \
    check mpi_shim_pcoll_leak pass 2 yes mpi_shim_pcoll_device leak
check mpi_shim_pcoll_negative_control fault 2 no mpi_shim_pcoll_device movement
exit $failed
