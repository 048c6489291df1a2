#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Non-contiguous datatypes on device memory (docs/mpi.md "Non-contiguous
# datatypes") on a GPU machine, over a build tree made elsewhere, with the
# real driver and the machine's own (not CUDA-aware) Open MPI, two ranks on
# this node, run as root:
#
#   tests/gpu/mpi-types.sh BUILD_DIR
#
# types_device (the zoo with canaries in every hole, partial receives, the
# layout cache, the collectives, the refusals) under the shim, and without it
# (the negative control: it dies in MPI); then cucopy_mpi_bench --tests xface
# (the x-face of an n^3 double array as a subarray type against as many
# contiguous bytes, D-D and H-H, every exchange's data checked) at n = 256 and
# 64, with the library's defaults and with CUCOPY_2D_PACK_BELOW=0 (plain 2-D
# copies: faster when both ranks share one GPU, docs/mpi.md "Benchmark").
# The x-face ratio and its goal line are printed, not judged. Prints PASS/FAIL
# per check; exit status 1 if any failed.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES FAKECUDA_DELAY_US CUCOPY_2D_PACK_BELOW
shim=$build/lib/libcucopy_mpi.so
mpirun --version 2>&1 | head -1
failed=0

. "$(dirname "$0")/mpi-check.sh" # check()

export CUCOPY_MPI_STATS=1 CUCOPY_MPI=auto
check mpi_shim_types_n2 pass 2 yes mpi_shim_types_device
check mpi_shim_types_negative_control fault 2 no mpi_shim_types_device zoo
for pack in default 0; do
    for n in 256 64; do
        [[ $pack == 0 ]] && export CUCOPY_2D_PACK_BELOW=0
        CHECK_REQUIRE="cucopy_mpi_bench: rank 1: PASS" \
            check "xface_n${n}_pack_$pack" pass 2 yes cucopy_mpi_bench --tests xface --xface-n "$n"
        unset CUCOPY_2D_PACK_BELOW
    done
done
exit $failed
