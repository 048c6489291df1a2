#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The Fortran entry points of the blocking collectives (mpi/shim_fortran.c)
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
# (MPI_Bcast on device memory must fault in MPI). Prints PASS/FAIL per check;
# exit status 1 if any failed.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES FAKECUDA_DELAY_US
shim=$build/lib/libcucopy_mpi.so
mpirun --version 2>&1 | head -1
failed=0

. "$(dirname "$0")/mpi-check.sh" # check()

export CUCOPY_MPI_STATS=1 CUCOPY_MPI=auto
ran=0
for b in mpifh usempi f08; do
    [[ -x $build/bin/mpi_shim_fcoll_$b ]] || continue
    ran=1
    check mpi_shim_fortran_coll_${b}_n2 pass 2 yes mpi_shim_fcoll_$b
    check mpi_shim_fortran_coll_${b}_n3 pass 3 yes mpi_shim_fcoll_$b
done
if [[ -x $build/bin/mpi_shim_fcoll_usempi ]]; then
    check mpi_shim_fortran_coll_negative_control fault 2 no mpi_shim_fcoll_usempi
fi
if [[ $ran -eq 0 ]]; then
    echo "FAIL  no mpi_shim_fcoll_* program in $build/bin (built with Open MPI's Fortran?)"
    failed=1
fi
exit $failed
