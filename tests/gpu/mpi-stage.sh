#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# CUCOPY_MPI_STAGE (the staging policy per class, docs/mpi.md) on a GPU
# machine, over a build tree made elsewhere, with the real driver and the
# machine's own (not CUDA-aware) Open MPI, run as root:
#
#   tests/gpu/mpi-stage.sh BUILD_DIR
#
# As mpi_shim_stage_* on the fake driver: the shim is preloaded behind
# build/mpi-tests/libmpi_shim_fake_cuda_aware.so, an MPIX_Query_cuda_support
# that returns 1. A staged class's device test passes (the stats line shows
# the staging and the policy); a class passed through hands real device
# pointers to an MPI that cannot take them and dies of SIGSEGV. Then the
# machine's MPI as it is: CUCOPY_MPI_STAGE=none stages everything anyway.
# PASS/FAIL per check (check() of tests/gpu/mpi-check.sh); exit status 1 if
# any failed.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES FAKECUDA_DELAY_US
mpirun --version 2>&1 | head -1
nvidia-smi -L 2>/dev/null
failed=0

. "$(dirname "$0")/mpi-check.sh" # check()

export CUCOPY_MPI_STATS=1 CUCOPY_MPI=auto CHECK_TIMEOUT=600
shim=$build/mpi-tests/libmpi_shim_fake_cuda_aware.so:$build/lib/libcucopy_mpi.so
staged="CUCOPY_MPI_STAGE picks the classes staged., libcuda loaded. device->MPI: dev0 [0-9]+ calls"

export CUCOPY_MPI_STAGE=p2p
CHECK_REQUIRE="$staged.*staged classes: p2p\$" check stage_p2p_p2p pass 2 yes mpi_shim_p2p_device
check stage_p2p_coll fault 2 yes mpi_shim_coll_device bcast
check stage_p2p_ireduce fault 2 yes mpi_shim_icoll_device reductions

export CUCOPY_MPI_STAGE=coll,reduce
CHECK_REQUIRE="$staged.*staged classes: coll,reduce\$" check stage_coll_reduce_coll pass 2 yes \
    mpi_shim_coll_device
CHECK_REQUIRE="$staged.*staged classes: coll,reduce\$" check stage_coll_reduce_ireduce pass 2 yes \
    mpi_shim_icoll_device reductions
check stage_coll_reduce_p2p fault 2 yes mpi_shim_p2p_device blocking

export CUCOPY_MPI_STAGE=none
check stage_none_p2p fault 2 yes mpi_shim_p2p_device blocking

# Not CUDA-aware: everything staged, and rank 0 says the setting changes nothing.
shim=$build/lib/libcucopy_mpi.so
CHECK_REQUIRE="CUCOPY_MPI_STAGE=none changes nothing" check stage_ignored_icoll pass 2 yes \
    mpi_shim_icoll_device
exit $failed
