#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The performance model (cucopy_iface_estimate, cucopy_info --perf) against
# measurement, on a GPU machine, over a build tree made elsewhere:
#
#   tests/gpu/perf-model.sh BUILD_DIR [OUT_DIR]      (OUT_DIR default BUILD_DIR/perf-model)
#
# model.txt        cucopy_info --perf              (the topology model)
# calibrated.txt   cucopy_info --perf --calibrate  (every pair measured through cucopy)
# perftest.csv     cucopy_perftest, lat and bw at 8 B and 256 MiB: h2d and d2h with
#                  pinned and pageable host memory, d2d, and peer with two GPUs or more
# compare.txt      estimate vs measurement per row, printed too; rows off by more
#                  than 20% are flagged OUT, and the exit status is 1 if any is
#
# What is compared with what. The model predicts the time of one copy:
# time(len) = latency + len / bandwidth, latency being issue to completion of
# a lone small copy. cucopy_perftest's `lat` test measures exactly that: the
# average time of one put_short (h2d, d2d, peer) or get_short (d2h) of that
# size, each waited for before the next (us per op). So the judged rows
# ("lat") are estimate time(len) against perftest lat at len, for len = 8 B
# (where time(8) is the latency) and 256 MiB (where the bandwidth dominates).
# perftest's `bw` test is a different quantity: 8 copies kept in flight
# (a windowed rate), which hides the latency and overlaps copies; its rows
# ("bw", estimate bandwidth against bw at 256 MiB) are printed for
# information and flagged, but do not set the exit status. The 8 B `bw` and
# `rate` numbers are windowed rates, not a latency: not compared.
#
# Host memory: pinned = cuMemHostAlloc in perftest, pinned host in the
# model; pageable = posix_memalign in perftest, pageable in the model.
# CUCOPY_CUDA_DRIVER is honoured if set (e.g. the fake driver, for a dry
# run: the numbers are then meaningless, the script's plumbing is not).
set -uo pipefail
build=$(cd "${1:?usage: perf-model.sh BUILD_DIR [OUT_DIR]}" && pwd)
out=${2:-$build/perf-model}
mkdir -p "$out"
info=$build/bin/cucopy_info
perf=$build/bin/cucopy_perftest

"$info" --perf >"$out/model.txt" 2>&1
echo "cucopy_info --perf exit $?" >>"$out/model.txt"
"$info" --perf --calibrate >"$out/calibrated.txt" 2>&1
echo "cucopy_info --perf --calibrate exit $?" >>"$out/calibrated.txt"
cat "$out/model.txt" "$out/calibrated.txt"

gpus=$(awk '$1 ~ /^GPU[0-9]+$/ && $2 == "->" { n[$1] = 1 } END { print length(n) }' "$out/model.txt")
dirs=h2d,d2h,d2d
if [[ ${gpus:-0} -ge 2 ]]; then
    dirs=$dirs,peer
fi
"$perf" --dirs "$dirs" --host both --sizes 8,256M --tests lat,bw --format csv \
    >"$out/perftest.csv" 2>"$out/perftest.err"
echo "cucopy_perftest exit $?" >>"$out/perftest.err"
cat "$out/perftest.err"

# model.txt and calibrated.txt end with one line per pair:
#   "  SRC -> DST  latency_us  bandwidth_GBps  source  path..."
awk -F, '
FNR == 1 { file++ }
file <= 2 && $0 ~ /^  [A-Za-z0-9]+ -> [A-Za-z0-9]+ +[0-9.]+ +[0-9.]+ / {
    split($0, f, " ")
    which = file == 1 ? "model" : "calibrated"
    lat[which, f[1] " -> " f[3]] = f[4]
    bw[which, f[1] " -> " f[3]] = f[5]
    tag[which, f[1] " -> " f[3]] = f[6]
    next
}
file == 3 && FNR > 1 && $NF == "ok" {
    # test,dir,src,dst,host,size,cucopy,raw,unit,ratio,iters,status
    host = $5
    if ($2 == "h2d") pair = host " -> GPU" $4
    else if ($2 == "d2h") pair = "GPU" $3 " -> " host
    else pair = "GPU" $3 " -> GPU" $4
    rows[++n] = $1 SUBSEP pair SUBSEP $6 SUBSEP $7
}
END {
    printf "%-10s %-5s %-20s %10s %14s %14s %7s  %s\n", "estimate", "test", "pair", "size", "estimate", "measured", "ratio", "within 20%"
    bad = 0
    for (w = 1; w <= 2; w++) {
        which = w == 1 ? "model" : "calibrated"
        for (i = 1; i <= n; i++) {
            split(rows[i], r, SUBSEP)
            test = r[1]; pair = r[2]; size = r[3]; meas = r[4]
            if (!((which, pair) in lat)) { printf "%-10s %-5s %-20s %10s  no estimate\n", which, test, pair, size; bad++; continue }
            if (test == "lat") {
                est = lat[which, pair] + size / (bw[which, pair] * 1e9) * 1e6; unit = "us"
            } else if (size + 0 >= 1048576) {
                est = bw[which, pair]; unit = "GB/s"
            } else continue
            ratio = meas > 0 ? est / meas : 0
            ok = ratio >= 0.8 && ratio <= 1.2 ? "ok" : "OUT"
            if (ok == "OUT" && test == "lat") bad++
            note = (which == "calibrated" && tag[which, pair] != "calibrated") ? " (not calibrated)" : ""
            printf "%-10s %-5s %-20s %10s %11.2f %-4s %9.2f %-4s %7.2f  %s%s%s\n", which, test, pair, size, est, unit, meas, unit, ratio, ok, test == "bw" ? " (information: windowed)" : "", note
        }
    }
    printf "%d judged row(s) outside 20%%\n", bad
    exit (bad > 0)
}' "$out/model.txt" "$out/calibrated.txt" "$out/perftest.csv" | tee "$out/compare.txt"
exit "${PIPESTATUS[0]}"
