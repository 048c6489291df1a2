#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Pipelined device messages (docs/mpi.md, "Pipelined messages"; issue 13
# item 4) on a GPU machine, over a build tree made elsewhere, with the real
# driver and the machine's own (not CUDA-aware) Open MPI, two ranks on this
# node (both on device 0 unless --device is passed on), run as root:
#
#   tests/gpu/mpi-pipe.sh BUILD_DIR [cucopy_mpi_bench options]
#
# Sweeps cucopy_mpi_bench's point-to-point bandwidth (--tests bw, pairs H-H
# and D-D, sizes 256K to 256M) with pipelining off and with every
# CUCOPY_MPI_PIPELINE_KB x CUCOPY_MPI_PIPELINE_CHUNK_KB of the lists below
# (override with PIPE_KB="..." PIPE_CHUNK_KB="...", the sizes with
# PIPE_SIZES=a,b,...), then, with the best
# setting, pipe_device (the CTest program: every byte checked) on the real
# driver, and its negative control (without the shim it dies in MPI). Each run must pass its own data checks; a pipelined run must show
# pipelined messages in both ranks' stats lines (sent on rank 0, received on
# rank 1) and no pageable fallback. Prints each run's table, then a summary:
# D-D/H-H per size and setting, the lowest ratio at >= 1 MiB of each, the
# best setting, and the goal (D-D/H-H >= 0.85 at every size >= 1 MiB).
# Exit status 1 if a run failed (the goal is reported, not asserted).
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
shift
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES FAKECUDA_DELAY_US CUCOPY_MPI_PIPELINE_KB \
    CUCOPY_MPI_PIPELINE_CHUNK_KB
shim=$build/lib/libcucopy_mpi.so
bench=$build/bin/cucopy_mpi_bench
kbs=${PIPE_KB:-"256 1024 4096"}
chunks=${PIPE_CHUNK_KB:-"128 256 512 1024 2048"}
sizes=${PIPE_SIZES:-256K,1M,2M,4M,16M,64M,256M}
mpirun --version 2>&1 | head -1
nvidia-smi -L 2>/dev/null
failed=0
. "$(dirname "$0")/mpi-check.sh" # check()
declare -A ratio lowest

# run NAME SECONDS KB CHUNK_KB PROGRAM ARGS...: the output in $out, the exit status in $rc
run() {
    local name=$1 limit=$2 kb=$3 chunk=$4
    shift 4
    local t0=$SECONDS
    out=$(timeout "$limit" mpirun --allow-run-as-root --oversubscribe -n 2 \
        -x CUCOPY_MPI_STATS=1 -x "CUCOPY_MPI_PIPELINE_KB=$kb" \
        -x "CUCOPY_MPI_PIPELINE_CHUNK_KB=$chunk" -x "LD_PRELOAD=$shim" "$@" 2>&1)
    rc=$?
    printf '%s\n' "$out" | sed "s/^/    $name: /"
    echo "    $name: exit $rc after $((SECONDS - t0)) s"
}

# pipelined_ok KB: both ranks' stats lines count pipelined messages (KB not
# 0), or neither mentions pipelining (KB 0).
pipelined_ok() {
    if [[ $1 == 0 ]]; then
        ! grep -q "pipelined" <<<"$out"
    else
        grep -qE "rank 0: .*pipelined .*: sent [1-9]" <<<"$out" &&
            grep -qE "rank 1: .*pipelined .*: sent [0-9]+, received [1-9]" <<<"$out"
    fi
}

settings="0:0"
for kb in $kbs; do
    for c in $chunks; do
        settings+=" $kb:$c"
    done
done

for s in $settings; do
    kb=${s%%:*} c=${s##*:}
    name="bw_kb${kb}_chunk${c}"
    [[ $kb == 0 ]] && name=bw_off && c=1024
    run "$name" 500 "$kb" "$c" "$bench" --tests bw --pairs hh,dd --sizes "$sizes" "$@"
    if [[ $rc -eq 0 ]] && grep -q "cucopy_mpi_bench: rank 1: PASS" <<<"$out" &&
        ! grep -qE "pageable fallbacks [1-9]|NOT LOADED" <<<"$out" && pipelined_ok "$kb"; then
        echo "PASS  $name (bandwidth H-H and D-D, every measurement verified, pipelining as set)"
    else
        echo "FAIL  $name (exit $rc; bandwidth H-H and D-D, pipelining as set)"
        failed=1
    fi
    # Rows: size H-H D-D - - ratio iters window.
    low=
    while read -r size hh dd _ _ r _; do
        ratio[$s,$size]=$r
        case $size in *K) continue ;; esac
        if [[ -z $low ]] || awk "BEGIN{exit !($r < $low)}"; then low=$r; fi
    done < <(grep -E '^ +[0-9]+[KMG]? +[0-9.]+ +[0-9.]+ ' <<<"$out")
    lowest[$s]=${low:-0}
done

echo
echo "summary: D-D/H-H per size (bandwidth, 2 ranks); kb:chunk (KiB), 0:0 = pipelining off"
printf '%-12s' setting
for size in ${sizes//,/ }; do printf '%8s' "$size"; done
printf '%14s\n' "lowest>=1M"
best= bestlow=0
for s in $settings; do
    printf '%-12s' "$s"
    for size in ${sizes//,/ }; do printf '%8s' "${ratio[$s,$size]:--}"; done
    printf '%14s\n' "${lowest[$s]}"
    if [[ $s != 0:0 ]] && awk "BEGIN{exit !(${lowest[$s]} > $bestlow)}"; then
        best=$s bestlow=${lowest[$s]}
    fi
done
echo "off: lowest D-D/H-H at >= 1M ${lowest[0:0]}"
if [[ -n $best ]]; then
    goal="NOT MET"
    awk "BEGIN{exit !($bestlow >= 0.85)}" && goal=MET
    echo "best setting: CUCOPY_MPI_PIPELINE_KB=${best%%:*} CUCOPY_MPI_PIPELINE_CHUNK_KB=${best##*:}: lowest D-D/H-H at >= 1M $bestlow"
    echo "goal pipelined bandwidth: D-D/H-H >= 0.85 at every size >= 1M: $goal"
    # The CTest program on the real driver with the best setting: every byte
    # checked (its sizes follow the threshold and the chunk), pipelined
    # messages counted on both ranks; without the shim it dies in MPI.
    export CUCOPY_MPI_STATS=1 CUCOPY_MPI_PIPELINE_KB=${best%%:*}
    export CUCOPY_MPI_PIPELINE_CHUNK_KB=${best##*:}
    CHECK_REQUIRE="rank 1: [^;]*libcuda loaded.*pipelined .*: sent [1-9][0-9]*, received [1-9]" \
        check pipe_device pass 2 yes mpi_shim_pipe_device
    check pipe_device_negative_control fault 2 no mpi_shim_pipe_device blocking
fi
exit $failed
