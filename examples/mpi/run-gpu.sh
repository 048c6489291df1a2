#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Run the MPI halo examples against the real CUDA driver (libcuda.so.1).
#
#   examples/mpi/run-gpu.sh [BUILD_DIR]    from a source tree (default ./build)
#   BUILD_DIR/run-mpi-gpu.sh               from a build tree copied to a GPU machine
#
# Needs bash, coreutils and an Open MPI 4.x mpirun (libmpi.so.40): no cmake,
# ctest or Go. Runs BUILD_DIR/bin/mpi_halo_c and BUILD_DIR/bin/mpi_halo_fortran
# (whichever exist) with `mpirun -n 2`; every rank drives every visible GPU.
# Prints PASS/FAIL per binary; exit status 0 only if every run passed.
#
# Environment: MPIRUN (default: mpirun), HALO_NP (ranks, default 2),
# HALO_ARGS (steps nx ny, default "50 65536 64": 1 MiB strips, 32 MiB slabs),
# HALO_TIMEOUT (seconds per run, default 300), MPI_LIB_DIR (prepended to
# LD_LIBRARY_PATH, e.g. a directory holding the build machine's libmpi.so.40).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ $# -ge 1 ]]; then
    build=$1
elif [[ -d $here/bin && -d $here/lib ]]; then
    build=$here                    # the copy inside a build tree
else
    build=$here/../../build        # examples/mpi/run-gpu.sh in the source tree
fi
if [[ ! -d $build/bin ]]; then
    echo "run-mpi-gpu: no $build/bin; build first (make build) or pass the build dir" >&2
    exit 2
fi
build=$(cd "$build" && pwd)

# The real driver, never the fake one.
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES FAKECUDA_DELAY_US FAKECUDA_STRICT_EXIT
if [[ -n ${MPI_LIB_DIR:-} ]]; then
    export LD_LIBRARY_PATH=$MPI_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

mpirun=${MPIRUN:-mpirun}
if ! command -v "$mpirun" >/dev/null 2>&1; then
    echo "run-mpi-gpu: $mpirun not found (install Open MPI 4.x or set MPIRUN)" >&2
    exit 2
fi
np=${HALO_NP:-2}
read -r -a args <<<"${HALO_ARGS:-50 65536 64}"
limit=${HALO_TIMEOUT:-300}
flags=(-n "$np")
if "$mpirun" --version 2>&1 | grep -q "Open MPI\|OpenRTE"; then
    flags+=(--oversubscribe)
    [[ $(id -u) -eq 0 ]] && flags+=(--allow-run-as-root)
fi

echo "run-mpi-gpu: $("$mpirun" --version 2>&1 | head -1); build $build"
nvidia-smi -L 2>/dev/null || echo "run-mpi-gpu: nvidia-smi not available"

pass=0 fail=0 ran=0
for name in mpi_halo_c mpi_halo_fortran; do
    bin=$build/bin/$name
    [[ -x $bin ]] || { echo "SKIP $name (not built)"; continue; }
    ran=$((ran + 1))
    missing=$(ldd "$bin" 2>/dev/null | grep "not found" || true)
    if [[ -n $missing ]]; then
        echo "FAIL $name: missing libraries (set MPI_LIB_DIR?):"
        echo "$missing"
        fail=$((fail + 1))
        continue
    fi
    log=$(mktemp)
    SECONDS=0
    timeout "$limit" "$mpirun" "${flags[@]}" "$bin" "${args[@]}" >"$log" 2>&1
    rc=$?
    secs=$SECONDS
    if [[ $rc -eq 0 ]] && grep -q "^halo: OK" "$log"; then
        echo "PASS $name ($(grep "^halo: OK" "$log"); ${secs}s)"
        pass=$((pass + 1))
    else
        echo "FAIL $name (exit $rc, ${secs}s):"
        sed 's/^/    /' "$log" | tail -40
        fail=$((fail + 1))
    fi
    rm -f "$log"
done
if [[ $ran -eq 0 ]]; then
    echo "run-mpi-gpu: no example binaries in $build/bin" >&2
    exit 2
fi
echo "run-mpi-gpu: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
