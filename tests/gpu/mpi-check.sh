# SPDX-License-Identifier: BSD-3-Clause
#
# check(), sourced by tests/gpu/mpi-shim.sh, mpi-collv.sh, mpi-icoll.sh and the others:
# runs one MPI program under mpirun, with or without the shim, and prints
# PASS/FAIL. The caller sets $build (the build tree), $shim (the preloaded
# library) and failed=0; check sets failed=1 on a failure. A pass is exit
# status 0 and no "rank N: FAILED" line (and, when the caller sets
# CHECK_REQUIRE, a line matching that regex); a fault is a failed job that
# died of SIGSEGV with no "rank N: PASS" line. CHECK_TIMEOUT: seconds
# (default 300).

# check NAME EXPECT(pass|fault) RANKS PRELOAD(yes|no) PROGRAM ARGS... ; env from the caller
check() {
    local name=$1 expect=$2 ranks=$3 preload=$4
    shift 4
    local pre=()
    [[ $preload == yes ]] && pre=(-x "LD_PRELOAD=$shim")
    # The shim's settings a caller sets for one check reach every rank.
    local v
    for v in CUCOPY_MPI_ISEND CUCOPY_MPI_PIPELINE_KB CUCOPY_MPI_PIPELINE_CHUNK_KB; do
        [[ -n ${!v:-} ]] && pre+=(-x "$v")
    done
    local out rc
    out=$(timeout "${CHECK_TIMEOUT:-300}" mpirun --allow-run-as-root --oversubscribe \
        -n "$ranks" -x CUCOPY_MPI -x CUCOPY_MPI_STATS "${pre[@]}" "$build/bin/$1" "${@:2}" 2>&1)
    rc=$?
    local ok=0
    if [[ $expect == pass ]]; then
        [[ $rc -eq 0 ]] && ! grep -qE ": rank [0-9]+: FAILED" <<<"$out" &&
            { [[ -z ${CHECK_REQUIRE:-} ]] || grep -qE "$CHECK_REQUIRE" <<<"$out"; } && ok=1
    else
        [[ $rc -ne 0 ]] && ! grep -qE ": rank [0-9]+: PASS" <<<"$out" &&
            grep -qiE "segmentation fault|signal 11|SIGSEGV" <<<"$out" && ok=1
    fi
    if [[ $ok -eq 1 ]]; then
        echo "PASS  $name (exit $rc)"
    else
        echo "FAIL  $name (exit $rc, expected $expect)"
        failed=1
    fi
    printf '%s\n' "$out" | sed "s/^/    $name: /" | tail -n 40
}
