#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# MPI-IO and RMA under the MPI interposer (mpi/shim_io.c) on a GPU machine,
# over a build tree made elsewhere, with the real driver and the machine's
# own (not CUDA-aware) Open MPI, run as root:
#
#   tests/gpu/mpi-io.sh BUILD_DIR
#
# io_device (mpi/tests/io_device.c) under LD_PRELOAD at -n 2 and -n 3 (ranks
# share the GPUs): every blocking read and write form on device buffers, a
# strided file view, ordered and shared file pointers, short reads at the
# end of the file (only the bytes read reach the device), the refused
# nonblocking IO and RMA on device memory, host memory passed through; and
# the negative control without the shim (MPI_File_write_at of a device
# buffer must not put the data in the file: the program checks it and
# exits 0 when it holds); and f_io.F90 (the same from Fortran, each binding
# built, at -n 2 and -n 3: Open MPI's Fortran IO and RMA call PMPI_* directly,
# the shim's Fortran entry points catch them). Each run writes in a directory
# (or a file) of its own under a temporary one. Prints PASS/FAIL per check; exit
# status 1 if any failed.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES FAKECUDA_DELAY_US
shim=$build/lib/libcucopy_mpi.so
mpirun --version 2>&1 | head -1
failed=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

. "$(dirname "$0")/mpi-check.sh" # check()

# The RMA part uses host windows: osc pt2pt works whatever the BTLs' single
# copy mechanism (mpirun passes OMPI_MCA_* to the ranks).
export OMPI_MCA_osc=pt2pt
export CUCOPY_MPI_STATS=1 CUCOPY_MPI=auto
check mpi_shim_io_n2 pass 2 yes mpi_shim_io_device "$work/n2.d"
check mpi_shim_io_n3 pass 3 yes mpi_shim_io_device "$work/n3.d"
check mpi_shim_io_negative_control pass 2 no mpi_shim_io_device "$work/negative.d" negative
for b in mpifh usempi f08; do
    [[ -x $build/bin/mpi_shim_fio_$b ]] || continue
    for n in 2 3; do
        check mpi_shim_fortran_io_${b}_n$n pass $n yes mpi_shim_fio_$b "$work/f_io_${b}_n$n.dat"
    done
done
exit $failed
