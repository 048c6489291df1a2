#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Non-contiguous datatypes on device memory (docs/mpi.md "Non-contiguous
# datatypes") on a GPU machine, over a build tree made elsewhere, with the
# real driver and the machine's own (not CUDA-aware) Open MPI, two ranks on
# this node, run as root:
#
#   mpi/bench/gpu-types.sh BUILD_DIR
#
# 1. types_device (the zoo with canaries, partial receives, the layout
#    cache, the collectives, the refusals) under the shim: must PASS;
# 2. the same without the shim: must die in MPI (the negative control);
# 3. cucopy_mpi_bench --tests xface: the x-face of a 256^3 double array as
#    a subarray type against as many contiguous bytes, D-D and H-H, the
#    ratio and the goal line (reported, not asserted), every exchange's
#    data checked; then the same at 64^3.
# Exit status 1 if step 1, 2 or a data check of 3 failed.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES FAKECUDA_DELAY_US
shim=$build/lib/libcucopy_mpi.so
mpirun --version 2>&1 | head -1
nvidia-smi -L 2>/dev/null
failed=0

run() { # NAME SECONDS PRELOAD(yes|no) PROGRAM ARGS...
    local name=$1 limit=$2 preload=$3
    shift 3
    local pre=()
    [[ $preload == yes ]] && pre=(-x "LD_PRELOAD=$shim")
    local t0=$SECONDS
    out=$(timeout "$limit" mpirun --allow-run-as-root --oversubscribe -n 2 \
        -x CUCOPY_MPI_STATS=1 "${pre[@]}" "$@" 2>&1)
    rc=$?
    printf '%s\n' "$out" | sed "s/^/    $name: /"
    echo "    $name: exit $rc after $((SECONDS - t0)) s"
}

verdict() {
    if [[ $1 -eq 1 ]]; then echo "PASS  $2"; else echo "FAIL  $2"; failed=1; fi
}

run types 300 yes "$build/bin/mpi_shim_types_device"
ok=0
[[ $rc -eq 0 ]] && grep -q "types_device: rank 1: PASS" <<<"$out" && ok=1
verdict $ok "types_device under the shim"

run types_noshim 120 no "$build/bin/mpi_shim_types_device" zoo
ok=0
[[ $rc -ne 0 ]] && ! grep -q "types_device: rank [01]: PASS" <<<"$out" && ok=1
verdict $ok "types_device without the shim dies in MPI (negative control)"

for n in 256 64; do
    run "xface_$n" 300 yes "$build/bin/cucopy_mpi_bench" --tests xface --xface-n "$n"
    ok=0
    [[ $rc -eq 0 ]] && grep -q "cucopy_mpi_bench: rank 1: PASS" <<<"$out" && ok=1
    verdict $ok "x-face exchange at $n^3: data checked (the ratio is reported above)"
done
exit $failed
