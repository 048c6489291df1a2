#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The OpenACC example on a GPU machine, under its own MPI (not CUDA-aware),
# with and without the interposer:
#
#   tests/gpu/openacc.sh BUILD_DIR
#
# BUILD_DIR/openacc holds halo_acc (built on the development machine with
# gcc -fopenacc -foffload=nvptx-none; `make openacc`) and that machine's
# libgomp.so.1 and libgomp-plugin-nvptx.so.1, which go first on
# LD_LIBRARY_PATH (the GPU machine's own libgomp may lack the nvptx plugin
# or be another GCC's). Without the shim the program must fail (MPI touches
# device memory from the CPU); with it, it must verify on the GPU.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES FAKECUDA_DELAY_US
export LD_LIBRARY_PATH=$build/openacc${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
run() { timeout 300 mpirun --allow-run-as-root --oversubscribe -n "$1" -x LD_LIBRARY_PATH "${@:2}" 2>&1; }
failed=0
out=$(run 2 "$build/openacc/halo_acc"); rc=$?
if [[ $rc -ne 0 ]]; then echo "PASS  halo_acc without the shim fails (exit $rc)"; else echo "FAIL  halo_acc without the shim passed"; failed=1; fi
printf '%s\n' "$out" | tail -n 5 | sed 's/^/    /'
for n in 2 3; do
    out=$(run "$n" -x CUCOPY_MPI_STATS=1 -x "LD_PRELOAD=$build/lib/libcucopy_mpi.so" "$build/openacc/halo_acc"); rc=$?
    if [[ $rc -eq 0 ]] && grep -q "halo_acc: OK.*OpenACC device: nvidia" <<<"$out"; then
        echo "PASS  halo_acc with the shim, $n ranks"
    else
        echo "FAIL  halo_acc with the shim, $n ranks (exit $rc)"; failed=1
    fi
    printf '%s\n' "$out" | tail -n 6 | sed 's/^/    /'
done
exit $failed
