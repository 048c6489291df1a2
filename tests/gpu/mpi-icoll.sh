#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The nonblocking collectives through the MPI interposer on a GPU machine,
# over a build tree made elsewhere, with the real driver (CUCOPY_CUDA_DRIVER
# unset) and the machine's own (not CUDA-aware) Open MPI, run as root:
#
#   tests/gpu/mpi-icoll.sh BUILD_DIR
#
# icoll_device (mpi/tests/icoll_device.c, as mpi_shim_icoll_* runs it on the
# fake driver) under LD_PRELOAD with 2 and 3 ranks (the ranks share the
# GPUs), then its negative control: without the shim the first device-buffer
# call must die of a segmentation fault inside MPI. Prints PASS/FAIL per
# check and the last lines of each run; exit status 1 if any failed.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES FAKECUDA_DELAY_US
shim=$build/lib/libcucopy_mpi.so
prog=$build/bin/mpi_shim_icoll_device
mpirun --version 2>&1 | head -1
nvidia-smi -L 2>/dev/null
failed=0

# run NAME EXPECT(pass|fault) RANKS PRELOAD(yes|no) ARGS...
run() {
    local name=$1 expect=$2 ranks=$3 preload=$4
    shift 4
    local pre=()
    [[ $preload == yes ]] && pre=(-x "LD_PRELOAD=$shim")
    local out rc ok=0
    out=$(timeout 600 mpirun --allow-run-as-root --oversubscribe -n "$ranks" \
        -x CUCOPY_MPI_STATS=1 "${pre[@]}" "$prog" "$@" 2>&1)
    rc=$?
    if [[ $expect == pass ]]; then
        # every rank passed, none failed, and the shim staged device buffers
        [[ $rc -eq 0 ]] && ! grep -q FAILED <<<"$out" &&
            [[ $(grep -c "icoll_device: rank [0-9]*: PASS" <<<"$out") -eq $ranks ]] &&
            grep -q "device->MPI: dev0 [0-9]* calls" <<<"$out" && ok=1
    else
        [[ $rc -ne 0 ]] && ! grep -q "icoll_device: rank [0-9]*: PASS" <<<"$out" &&
            grep -qiE "segmentation fault|signal 11|SIGSEGV" <<<"$out" && ok=1
    fi
    if [[ $ok -eq 1 ]]; then
        echo "PASS  $name (exit $rc)"
    else
        echo "FAIL  $name (exit $rc, expected $expect)"
        failed=1
    fi
    printf '%s\n' "$out" | grep -v "^ *$" | sed "s/^/    $name: /" | tail -n 25
}

run mpi_shim_icoll_n2 pass 2 yes
run mpi_shim_icoll_n3 pass 3 yes
run mpi_shim_icoll_negative_control fault 2 no movement
exit $failed
