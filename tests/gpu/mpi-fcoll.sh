#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The Fortran entry points of the blocking and nonblocking collectives
# (mpi/shim_fortran.c)
# on a GPU machine, over a build tree made elsewhere, with the real driver
# and the machine's own (not CUDA-aware) Open MPI, run as root:
#
#   tests/gpu/mpi-fcoll.sh BUILD_DIR
#
# f_coll.F90 (every blocking collective the shim wraps, roots other than 0,
# every MPI_IN_PLACE form, SUM/MAX on INTEGER and DOUBLE PRECISION, a Fortran
# user op, canaries where MPI must not write, two refusals) for each Fortran
# binding built (mpif.h, use mpi, use mpi_f08) under LD_PRELOAD at -n 2 and
# -n 3 (ranks share the GPUs), and the negative control without the shim
# (MPI_Bcast on device memory must fault in MPI); the same for f_icoll.F90
# (every nonblocking collective the shim wraps, several outstanding, completed
# by Waitall, Test loops and Wait; MPI_Ibcast must fault without the shim).
# Prints PASS/FAIL per check; exit status 1 if any failed.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES FAKECUDA_DELAY_US
shim=$build/lib/libcucopy_mpi.so
mpirun --version 2>&1 | head -1
failed=0

. "$(dirname "$0")/mpi-check.sh" # check()

export CUCOPY_MPI_STATS=1 CUCOPY_MPI=auto
ran=0
for k in coll icoll; do
    ran=0
    for b in mpifh usempi f08; do
        [[ -x $build/bin/mpi_shim_f${k}_$b ]] || continue
        ran=1
        check mpi_shim_fortran_${k}_${b}_n2 pass 2 yes mpi_shim_f${k}_$b
        check mpi_shim_fortran_${k}_${b}_n3 pass 3 yes mpi_shim_f${k}_$b
    done
    if [[ -x $build/bin/mpi_shim_f${k}_usempi ]]; then
        check mpi_shim_fortran_${k}_negative_control fault 2 no mpi_shim_f${k}_usempi
    fi
    if [[ $ran -eq 0 ]]; then
        echo "FAIL  no mpi_shim_f${k}_* program in $build/bin (built with Open MPI's Fortran?)"
        failed=1
    fi
done
exit $failed
