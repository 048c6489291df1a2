#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Run the C test suite against the real CUDA driver (libcuda.so.1).
#
#   tests/run-gpu.sh [BUILD_DIR]     from a source tree (default BUILD_DIR: ./build)
#   BUILD_DIR/run-gpu.sh             from a build tree copied to a GPU machine
#
# Needs only bash and coreutils: no cmake, ctest or Go. The binaries to run are
# listed in BUILD_DIR/tests/*/suite.txt (the C and Fortran suites; one name per line, found in
# BUILD_DIR/bin; '#' comments and blank lines ignored); without that file,
# every BUILD_DIR/bin/test_* runs. Exit status 77 means SKIP.
#
# Environment: RUN_GPU_TIMEOUT (seconds per binary, default 600),
# RUN_GPU_FILTER (extended regex; only matching names run).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ $# -ge 1 ]]; then
    build=$1
elif [[ -d $here/bin && -d $here/lib ]]; then
    build=$here                    # the copy inside a build tree
else
    build=$here/../build           # tests/run-gpu.sh in the source tree
fi
if [[ ! -d $build/bin ]]; then
    echo "run-gpu: no $build/bin; build first (make build) or pass the build dir" >&2
    exit 2
fi
build=$(cd "$build" && pwd)

# The real driver, never the fake one.
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES

tests=()
suites=("$build"/tests/*/suite.txt)
if [[ -f ${suites[0]} ]]; then
    for suite in "${suites[@]}"; do
        while IFS= read -r line || [[ -n $line ]]; do
            line=${line%%#*}
            line=${line//[[:space:]]/}
            [[ -n $line ]] && tests+=("$line")
        done <"$suite"
    done
    source_desc="${suites[*]}"
else
    for f in "$build"/bin/test_*; do
        [[ -f $f && -x $f ]] && tests+=("$(basename "$f")")
    done
    source_desc="$build/bin/test_*"
fi
if [[ -n ${RUN_GPU_FILTER:-} ]]; then
    kept=()
    for t in "${tests[@]}"; do
        [[ $t =~ $RUN_GPU_FILTER ]] && kept+=("$t")
    done
    tests=("${kept[@]}")
fi
if [[ ${#tests[@]} -eq 0 ]]; then
    echo "run-gpu: no test binaries found ($source_desc)" >&2
    exit 2
fi

echo "run-gpu: ${#tests[@]} binaries from $source_desc, real driver"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L 2>/dev/null | sed 's/^/run-gpu:   /'
else
    echo "run-gpu: nvidia-smi not found"
fi

timeout_s=${RUN_GPU_TIMEOUT:-600}
have_timeout=0
command -v timeout >/dev/null 2>&1 && have_timeout=1
logdir=$build/run-gpu-logs
mkdir -p "$logdir"

# Tests that inject faults inside the library load the test build
# (BUILD_DIR/testhooks, tests/c/CMakeLists.txt); every other one the release
# library its RUNPATH names.
hooked=" "
if [[ -f $build/tests/c/testhooks.txt ]]; then
    hooked=" $(tr '\n' ' ' <"$build/tests/c/testhooks.txt")"
fi

pass=0 fail=0 skip=0
failed=()
for t in "${tests[@]}"; do
    if [[ $t == */* ]]; then exe=$build/$t; else exe=$build/bin/$t; fi
    name=$(basename "$t")
    log=$logdir/$name.log
    if [[ ! -x $exe ]]; then
        printf 'FAIL  %-40s (missing: %s)\n' "$name" "$exe"
        fail=$((fail + 1)); failed+=("$name")
        continue
    fi
    libpath=${LD_LIBRARY_PATH:-}
    [[ $hooked == *" $name "* ]] && libpath=$build/testhooks${libpath:+:$libpath}
    start=$(date +%s)
    if [[ $have_timeout -eq 1 ]]; then
        (cd "$build/bin" && LD_LIBRARY_PATH=$libpath timeout "$timeout_s" "$exe") >"$log" 2>&1
    else
        (cd "$build/bin" && LD_LIBRARY_PATH=$libpath "$exe") >"$log" 2>&1
    fi
    rc=$?
    secs=$(( $(date +%s) - start ))
    case $rc in
        0)  printf 'PASS  %-40s %4ds\n' "$name" "$secs"; pass=$((pass + 1)) ;;
        77) printf 'SKIP  %-40s %4ds  %s\n' "$name" "$secs" "$(tail -n 1 "$log")"
            skip=$((skip + 1)) ;;
        124) printf 'FAIL  %-40s %4ds  timed out after %ss\n' "$name" "$secs" "$timeout_s"
            fail=$((fail + 1)); failed+=("$name") ;;
        *)  printf 'FAIL  %-40s %4ds  exit %d\n' "$name" "$secs" "$rc"
            sed 's/^/      | /' "$log" | tail -n 20
            fail=$((fail + 1)); failed+=("$name") ;;
    esac
done

echo "run-gpu: $pass passed, $fail failed, $skip skipped (of ${#tests[@]}); logs in $logdir"
if [[ $fail -gt 0 ]]; then
    echo "run-gpu: failed: ${failed[*]}"
    exit 1
fi
exit 0
