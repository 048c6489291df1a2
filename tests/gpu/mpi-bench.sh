#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# cucopy_mpi_bench on a GPU machine (issue 10's goals), over a build tree
# made elsewhere, with the real driver and the machine's own (not
# CUDA-aware) Open MPI, two ranks on this node, run as root:
#
#   tests/gpu/mpi-bench.sh BUILD_DIR [cucopy_mpi_bench options]
#
# 1. the full table under the shim (default: every pair, 8 B to 256 MiB by
#    powers of 2, both ranks on device 0; options are passed on, e.g.
#    --device 0,1 on a two-GPU machine), with the shim's stats line (which
#    must show no pageable fallback);
# 2. the collective rows under the shim (issue 13's goal: allreduce at
#    >= 1 MiB, H-H/D-D >= 0.7): --tests allreduce,bcast,alltoall --sizes
#    8,64K,1M,16M,64M, H-H and D-D, every rank's result verified, with the
#    stats line (no pageable fallback);
# 3. the H-H pair alone without the shim: the MPI's own host numbers, for
#    comparing with the H-H column of 1 (which pays the shim's
#    classification of host buffers);
# 4. the negative control: the quick run without the shim must die of a
#    segmentation fault in MPI (device buffers reach it unchanged).
# Prints the tables and PASS/FAIL per step; exit status 1 if a step failed
# (the goals are reported, not asserted). docs/mpi.md#benchmark.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
shift
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES FAKECUDA_DELAY_US
shim=$build/lib/libcucopy_mpi.so
bench=$build/bin/cucopy_mpi_bench
mpirun --version 2>&1 | head -1
nvidia-smi -L 2>/dev/null
failed=0

# run NAME SECONDS PRELOAD(yes|no) ARGS... : the output in $out, the exit status in $rc
run() {
    local name=$1 limit=$2 preload=$3
    shift 3
    local pre=()
    [[ $preload == yes ]] && pre=(-x "LD_PRELOAD=$shim")
    local t0=$SECONDS
    out=$(timeout "$limit" mpirun --allow-run-as-root --oversubscribe -n 2 \
        -x CUCOPY_MPI_STATS=1 "${pre[@]}" "$bench" "$@" 2>&1)
    rc=$?
    printf '%s\n' "$out" | sed "s/^/    $name: /"
    echo "    $name: exit $rc after $((SECONDS - t0)) s"
}

verdict() {
    if [[ $1 -eq 1 ]]; then
        echo "PASS  $2"
    else
        echo "FAIL  $2"
        failed=1
    fi
}

run mpi_bench 400 yes "$@"
ok=0
[[ $rc -eq 0 ]] && grep -q "rank 1: PASS" <<<"$out" &&
    ! grep -qE "pageable fallbacks [1-9]|NOT LOADED" <<<"$out" && ok=1
verdict $ok "mpi_bench (the table under the shim, every measurement verified, no pageable fallback)"
summary=$(grep -E "^# goal|^#   2 x short" <<<"$out")

# The options given first: the step's own --tests and --sizes win.
run mpi_bench_collectives 400 yes "$@" --tests allreduce,bcast,alltoall --sizes 8,64K,1M,16M,64M
ok=0
[[ $rc -eq 0 ]] && grep -q "rank 1: PASS" <<<"$out" && grep -q "^# goal allreduce: " <<<"$out" &&
    ! grep -qE "pageable fallbacks [1-9]|NOT LOADED" <<<"$out" && ok=1
verdict $ok "mpi_bench_collectives (allreduce, bcast, alltoall under the shim, every result verified)"
summary+=$'\n'$(grep -E "^# goal" <<<"$out")

run mpi_bench_host_without_shim 300 no --pairs hh "$@"
ok=0
[[ $rc -eq 0 ]] && grep -q "NOT LOADED" <<<"$out" && ok=1
verdict $ok "mpi_bench_host_without_shim (H-H, the MPI alone)"

run mpi_bench_negative_control 120 no --verify
ok=0
[[ $rc -ne 0 ]] && grep -qiE "segmentation fault|signal 11|SIGSEGV" <<<"$out" &&
    ! grep -q "rank [01]: PASS" <<<"$out" && ok=1
verdict $ok "mpi_bench_negative_control (without the shim the D-D pair dies in MPI)"

echo "goals (from mpi_bench):"
printf '%s\n' "$summary"
exit $failed
