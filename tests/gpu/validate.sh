#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Everything docs/gpu-validation.md records, in one run on a GPU machine, over
# a build tree made elsewhere (the GPU machines have no Go):
#
#   tests/gpu/validate.sh BUILD_DIR OUT_DIR
#
# machine.txt     date, nvidia-smi, topology, driver, libraries
# checks.txt      cudadrv's declarations against the real cuda.h; the cost of
#                 the driver queries on the copy path; cucopy_info
# suite.txt       the C and Fortran suites against the real driver + their logs
# perftest.txt    per device and direction: cucopy vs raw driver loops
# concurrent.txt  all devices at once from one iface
# mpi.txt         the MPI halo examples (C, Fortran), mpirun -n 2
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
out=${2:?output dir}
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$out"
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES

{
    date -u
    uname -a
    nvidia-smi
    nvidia-smi topo -m
    cat /proc/driver/nvidia/version
    ldd "$build/lib/libcucopy.so.0"
    mpirun --version 2>&1 | head -1
} >"$out/machine.txt" 2>&1

{
    cuda_h=$(ls /usr/local/cuda/include/cuda.h /usr/include/cuda.h 2>/dev/null | head -1)
    if [[ -n $cuda_h ]]; then
        gcc -std=c11 -Wall -Werror -I"$(dirname "$cuda_h")" -I"$src/cudadrv" \
            "$src/tests/gpu/check_cuda_h.c" -o /tmp/check_cuda_h && /tmp/check_cuda_h
        echo "check_cuda_h exit $?"
    else
        echo "check_cuda_h: no cuda.h found"
    fi
    gcc -O2 -std=gnu11 -I"$src/cudadrv" -I"$src/tests/common" "$src/tests/gpu/attr_cost.c" \
        "$src/tests/common/testdrv.c" -ldl -o /tmp/attr_cost && /tmp/attr_cost
    echo "attr_cost exit $?"
    "$build/bin/cucopy_info"
    echo "cucopy_info exit $?"
} >"$out/checks.txt" 2>&1

rm -f "$build"/run-gpu-logs/*.log # only this run's logs below
RUN_GPU_FILTER= bash "$build/run-gpu.sh" "$build" >"$out/suite.txt" 2>&1
suite_rc=$?
echo "suite exit $suite_rc" >>"$out/suite.txt"
for log in "$build"/run-gpu-logs/*.log; do
    printf '\n===== %s\n' "$(basename "$log")"
    cat "$log"
done >>"$out/suite.txt"

perf=$build/bin/cucopy_perftest
"$perf" --sizes 8,4K,64K,1M,16M,256M --host all >"$out/perftest.txt" 2>&1
perf_rc=$?
echo "perftest exit $perf_rc" >>"$out/perftest.txt"
"$perf" --concurrent --tests bw,rate --sizes 1M,256M >"$out/concurrent.txt" 2>&1
conc_rc=$?
echo "concurrent exit $conc_rc" >>"$out/concurrent.txt"

bash "$build/run-mpi-gpu.sh" "$build" >"$out/mpi.txt" 2>&1
mpi_rc=$?
echo "mpi exit $mpi_rc" >>"$out/mpi.txt"

grep -hE '^(run-gpu|run-mpi-gpu|check_cuda_h|attr_cost|PASS|FAIL|SKIP)|exit [0-9]' "$out"/*.txt
# The summary above is for reading; the status is the runs' own.
exit $((suite_rc || perf_rc || conc_rc || mpi_rc))
