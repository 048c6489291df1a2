#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Issue 15's runs on a machine with two GPUs (nvidia-h200-x2), over a build
# tree made elsewhere, in one call:
#
#   tests/gpu/two-gpu.sh BUILD_DIR OUT_DIR
#
# Each part writes OUT_DIR/<part>.txt and prints a PASS/FAIL/INFO line:
#   suite       the C and Fortran suites on the real driver (BUILD_DIR/run-gpu.sh),
#               test_sick_context and every two-device case included; test_fence
#               runs the fenced chain host -> GPU0 -> GPU1 -> host and prints the
#               fence cost with work in flight on both GPUs
#   openacc     the OpenACC examples under the machine's MPI, without and with the
#               shim: halo_acc2 (one rank driving both GPUs, buffers of both in one
#               MPI_Sendrecv and one MPI_Allreduce) with 1-3 ranks, halo_acc with 2-3
#   mpi         the interposer's MPI programs (two devices per rank in one call)
#   concurrent  cucopy_perftest --concurrent (both GPUs from one iface; the issue's
#               bar: bandwidth >= 1.95 x one GPU, as raw reaches) and one GPU alone
#   peer        GPU0 <-> GPU1 bandwidth and latency against raw
#   batch-memh  the batch call and memory handles per device (--batch 16, --memh)
#   mtrate      cucopy_mtrate at 2-16 threads across both GPUs
#   model       cucopy_info --perf against the measured matrix (perf-model.sh)
# Exit status 1 if a part that judges (suite, openacc, mpi, model) failed; the
# performance parts print numbers to compare, not verdicts.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
out=${2:?out dir}
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES FAKECUDA_DELAY_US
failed=0

ngpu=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$out/gpus.txt"
nvidia-smi topo -m >>"$out/gpus.txt" 2>&1
[[ $ngpu -ge 2 ]] || echo "WARN  $ngpu GPU(s): the two-device parts run on one"

# part NAME JUDGED(yes|no) COMMAND...: run, keep the output, say how it went.
part() {
    local name=$1 judged=$2
    shift 2
    local t0=$SECONDS
    "$@" >"$out/$name.txt" 2>&1
    local rc=$?
    if [[ $judged == no ]]; then
        echo "INFO  $name (exit $rc, $((SECONDS - t0)) s): $out/$name.txt"
    elif [[ $rc -eq 0 ]]; then
        echo "PASS  $name ($((SECONDS - t0)) s)"
    else
        echo "FAIL  $name (exit $rc): $out/$name.txt"
        failed=1
    fi
    grep -E "^(PASS|FAIL|SKIP)" "$out/$name.txt" | grep -v "^PASS" | head -n 20 | sed 's/^/    /'
}

part suite yes "$build/run-gpu.sh" "$build"
part openacc yes "$here/openacc.sh" "$build"
mpi_all() {
    local rc=0
    for s in mpi-shim mpi-collv mpi-icoll mpi-fcoll mpi-io; do
        echo "== $s"
        "$here/$s.sh" "$build" || rc=1
    done
    return $rc
}
part mpi yes mpi_all
pt=$build/bin/cucopy_perftest
part concurrent no bash -c "'$pt' --devices all --concurrent --tests bw,rate --sizes 8,64K,16M,256M --repeat 3 &&
                             '$pt' --devices 0 --tests bw,rate --sizes 8,64K,16M,256M --repeat 3"
part peer no "$pt" --dirs peer --sizes 8,4K,1M,16M,256M --repeat 3
part batch-memh no bash -c "for d in \$(seq 0 $((ngpu - 1))); do
                               '$pt' --devices \$d --tests rate --sizes 128 --rate-sizes 128 --batch 16 --repeat 3
                               '$pt' --devices \$d --memh --tests lat,rate --sizes 8 --repeat 3
                             done"
part mtrate no "$build/bin/cucopy_mtrate" --threads 2,4,8,16
part model yes "$here/perf-model.sh" "$build" "$out/perf-model"
exit $failed
