#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Strided copies (cucopy_ep_copy_2d) on a GPU machine, over a build tree made
# elsewhere:
#
#   tests/gpu/copy2d.sh BUILD_DIR [OUT_DIR]     (OUT_DIR default BUILD_DIR/copy2d)
#
# suite.txt   test_copy_2d on the real driver, with the defaults and with
#             CUCOPY_2D_PACK_BELOW=0 (the plain 2-D path only)
# perf.txt    cucopy_perftest --2d on device 0, pinned and pageable host
#             memory, 512 KiB of rows each: the x-face of a 256^3 double
#             array (65536 rows of 8 B, 2048 B apart), rows of 16, 32, 64
#             and 128 B at the same pitch, and the y-face (256 rows of 2 KiB,
#             512 KiB apart); d2h gathers into packed host memory, h2d
#             scatters from it; with the defaults and with
#             CUCOPY_2D_PACK_BELOW=0. ratio = raw us / cucopy us (raw: one
#             cuMemcpy2DAsync).
#
# Measured on an H200 (docs/gpu-validation.md, fourth session, run A):
# defaults, pinned: 8 B rows ratio 2.1 (d2h) and 2.9 (h2d), 16 B rows (also
# packed) 0.8-1.2, wider rows and the y-face (plain 2-D copies) 0.6-0.9: one
# operation's issue-to-completion cost over cuStreamSynchronize; with
# CUCOPY_2D_PACK_BELOW=0 every row 0.6-0.9. Exit status 1 when a test
# failed or the 8 B pinned rows with the defaults are below 1.5 x raw.
set -uo pipefail
build=$(cd "${1:?usage: copy2d.sh BUILD_DIR [OUT_DIR]}" && pwd)
out=${2:-$build/copy2d}
mkdir -p "$out"
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES CUCOPY_2D_PACK_BELOW
export LD_LIBRARY_PATH=$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

rc=0
{
    for knob in default 0; do
        if [[ $knob == default ]]; then
            "$build/bin/test_copy_2d"
        else
            CUCOPY_2D_PACK_BELOW=$knob "$build/bin/test_copy_2d"
        fi
        st=$?
        echo "test_copy_2d CUCOPY_2D_PACK_BELOW=$knob exit $st"
        [[ $st -eq 0 ]] || rc=1
    done
} >"$out/suite.txt" 2>&1

shapes=8x65536:2048,16x32768:2048,32x16384:2048,64x8192:2048,128x4096:2048,2048x256:512K
{
    for knob in default 0; do
        echo "## CUCOPY_2D_PACK_BELOW=$knob"
        if [[ $knob == default ]]; then
            "$build/bin/cucopy_perftest" --devices 0 --host both --repeat 5 --2d "$shapes"
        else
            CUCOPY_2D_PACK_BELOW=$knob "$build/bin/cucopy_perftest" --devices 0 --host both \
                --repeat 5 --2d "$shapes"
        fi
        st=$?
        echo "cucopy_perftest exit $st"
        [[ $st -eq 0 ]] || rc=1
    done
} >"$out/perf.txt" 2>&1

# The goal: the x-face (8 B rows) through pinned memory, defaults.
goal=$(awk '/^## CUCOPY_2D_PACK_BELOW=default/ { on = 1; next } /^## / { on = 0 }
    on && $1 == "8x65536:2048" && $3 == "pinned" {
        printf "GOAL x-face %s pinned ratio %s (want >= 1.5): %s\n", $2, $7, ($7 >= 1.5 ? "met" : "MISSED")
    }' "$out/perf.txt")
echo "$goal" >>"$out/perf.txt"
grep -q MISSED <<<"$goal" && rc=1
[[ -n $goal ]] || rc=1
cat "$out/suite.txt" "$out/perf.txt" | grep -E '^(test_copy_2d|#|  |##|GOAL|cucopy_perftest)'
echo "copy2d exit $rc"
exit $rc
