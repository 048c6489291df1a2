#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Everything docs/gpu-validation.md records, in one run on a GPU machine, over
# a build tree made elsewhere (the GPU machines have no Go):
#
#   tests/gpu/validate.sh BUILD_DIR OUT_DIR
#
# machine.txt       date, nvidia-smi, topology, driver
# check_cuda_h.txt  cudadrv's declarations against the real cuda.h
# suite.txt         the C suite against the real driver (run-gpu.sh) + its logs
# info.txt          cucopy_info
# attr_cost.txt     cost of the driver queries on the copy path
# perftest.txt      per-device latency, bandwidth, rate: cucopy vs raw driver
# concurrent.txt    all devices at once from one iface
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
} >"$out/machine.txt" 2>&1

cuda_h=$(ls /usr/local/cuda/include/cuda.h /usr/include/cuda.h 2>/dev/null | head -1)
if [[ -n $cuda_h ]]; then
    gcc -std=c11 -Wall -Werror -I"$(dirname "$cuda_h")" -I"$src/cudadrv" \
        "$src/tests/gpu/check_cuda_h.c" -o /tmp/check_cuda_h >"$out/check_cuda_h.txt" 2>&1 &&
        /tmp/check_cuda_h >>"$out/check_cuda_h.txt" 2>&1
    echo "exit $?" >>"$out/check_cuda_h.txt"
else
    echo "no cuda.h found" >"$out/check_cuda_h.txt"
fi

bash "$build/run-gpu.sh" "$build" >"$out/suite.txt" 2>&1
echo "exit $?" >>"$out/suite.txt"
for log in "$build"/run-gpu-logs/*.log; do
    printf '\n===== %s\n' "$(basename "$log")"
    cat "$log"
done >>"$out/suite.txt"

"$build/bin/cucopy_info" >"$out/info.txt" 2>&1

gcc -O2 -std=gnu11 -I"$src/cudadrv" -I"$src/tests/common" "$src/tests/gpu/attr_cost.c" \
    "$src/tests/common/testdrv.c" -ldl -o /tmp/attr_cost >"$out/attr_cost.txt" 2>&1 &&
    /tmp/attr_cost >>"$out/attr_cost.txt" 2>&1

perf=$build/bin/cucopy_perftest
"$perf" --sizes 8,4K,64K,1M,16M,256M --host both >"$out/perftest.txt" 2>&1
echo "exit $?" >>"$out/perftest.txt"
"$perf" --concurrent --tests bw,rate --sizes 1M,256M >"$out/concurrent.txt" 2>&1
echo "exit $?" >>"$out/concurrent.txt"

grep -hE '^(run-gpu|check_cuda_h|attr_cost|exit)' "$out"/*.txt
