#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The OpenACC examples on a GPU machine, under its own MPI (not CUDA-aware),
# with and without the interposer:
#
#   tests/gpu/openacc.sh BUILD_DIR
#
# BUILD_DIR/openacc holds halo_acc (C) and, when Fortran was built,
# halo_acc_f (`use mpi`) and halo_acc_f08 (`use mpi_f08`), all built on the
# development machine with GCC's -fopenacc -foffload=nvptx-none (`make
# build`), and that machine's libgomp.so.1 and libgomp-plugin-nvptx.so.1,
# which go first on LD_LIBRARY_PATH (the GPU machine's own libgomp may lack
# the nvptx plugin or be another GCC's; libgfortran and the MPI are the GPU
# machine's). Each program without the shim must fail (MPI touches device
# memory from the CPU); with it, it must verify on the GPU with 2 and 3
# ranks (halo_acc2, one rank driving two GPUs, also with 1 rank). A program
# that was not built is reported SKIP (the C ones: FAIL).
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES FAKECUDA_DELAY_US
export LD_LIBRARY_PATH=$build/openacc${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
run() { timeout 300 mpirun --allow-run-as-root --oversubscribe -n "$1" -x LD_LIBRARY_PATH "${@:2}" 2>&1; }
failed=0
nvidia-smi --query-gpu=index,name --format=csv,noheader 2>/dev/null | sed 's/^/    GPU /'
for prog in halo_acc halo_acc2 halo_acc_f halo_acc_f08; do
    if [[ ! -x $build/openacc/$prog ]]; then
        if [[ $prog == halo_acc || $prog == halo_acc2 ]]; then
            echo "FAIL  $prog not built ($build/openacc/$prog)"; failed=1
        else
            echo "SKIP  $prog not built (no Fortran OpenACC offload or MPI Fortran binding)"
        fi
        continue
    fi
    out=$(run 2 "$build/openacc/$prog"); rc=$?
    if [[ $rc -ne 0 ]]; then echo "PASS  $prog without the shim fails (exit $rc)"; else echo "FAIL  $prog without the shim passed"; failed=1; fi
    printf '%s\n' "$out" | tail -n 5 | sed 's/^/    /'
    ranks="2 3"
    [[ $prog == halo_acc2 ]] && ranks="1 2 3"
    for n in $ranks; do
        out=$(run "$n" -x CUCOPY_MPI_STATS=1 -x "LD_PRELOAD=$build/lib/libcucopy_mpi.so" "$build/openacc/$prog"); rc=$?
        if [[ $rc -eq 0 ]] && grep -q "$prog: OK.*OpenACC device: nvidia" <<<"$out"; then
            echo "PASS  $prog with the shim, $n ranks"
        else
            echo "FAIL  $prog with the shim, $n ranks (exit $rc)"; failed=1
        fi
        printf '%s\n' "$out" | tail -n 6 | sed 's/^/    /'
    done
done
exit $failed
