#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The MPI interposer's checks on a GPU machine, over a build tree made
# elsewhere, with the real driver and the machine's own (not CUDA-aware)
# Open MPI, run as root:
#
#   tests/gpu/mpi-shim.sh BUILD_DIR
#
# The same programs as mpi/tests/CMakeLists.txt runs on the fake driver:
# p2p_device and coll_device (blocking collectives) under LD_PRELOAD with 2
# and 3 ranks (3 ranks share the GPUs), isend_device (deferred nonblocking
# sends, async and sync, and pipelined) at 2 ranks, p2p_device's Waitall of
# large receives (copied back while it waits),
# the Fortran program f_p2p in each binding built (mpif.h, use mpi, mpi_f08),
# the negative controls (without the shim, and CUCOPY_MPI=off: device
# buffers reach MPI, which must fault), the host-only program with and
# without the shim (never maps libcucopy or libcuda), and the host
# pass-through overhead (--bench). Prints PASS/FAIL per check; exit status
# 1 if any failed.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES FAKECUDA_DELAY_US
shim=$build/lib/libcucopy_mpi.so
mpirun --version 2>&1 | head -1
ompi_info 2>/dev/null | grep -i "cuda" | head -3
failed=0

. "$(dirname "$0")/mpi-check.sh" # check()

export CUCOPY_MPI_STATS=1 CUCOPY_MPI=auto
check mpi_shim_p2p_n2 pass 2 yes mpi_shim_p2p_device
check mpi_shim_p2p_n3 pass 3 yes mpi_shim_p2p_device
check mpi_shim_coll_n2 pass 2 yes mpi_shim_coll_device
check mpi_shim_coll_n3 pass 3 yes mpi_shim_coll_device
check mpi_shim_isend_async pass 2 yes mpi_shim_isend_device
CUCOPY_MPI_ISEND=sync check mpi_shim_isend_sync pass 2 yes mpi_shim_isend_device
check mpi_shim_isend_negative_control fault 2 no mpi_shim_isend_device order
# Pipelined Isends deferred too (64 KiB threshold, 16 KiB chunks): the stats
# line must count them; and a Waitall of large device receives copying each
# back while it waits for the others.
CUCOPY_MPI_PIPELINE_KB=64 CUCOPY_MPI_PIPELINE_CHUNK_KB=16 \
    CHECK_REQUIRE="returned with it in flight; [1-9][0-9]* of them pipelined" \
    check mpi_shim_isend_pipelined pass 2 yes mpi_shim_isend_device
CHECK_REQUIRE="receives copied to the device while their Waitall waited: [1-9]" \
    check mpi_shim_p2p_waitall_early pass 2 yes mpi_shim_p2p_device waitall_large
check mpi_shim_host_only pass 2 yes mpi_shim_host_only --expect-shim
check mpi_shim_host_only_plain pass 2 no mpi_shim_host_only --expect-no-shim
check mpi_shim_negative_control fault 2 no mpi_shim_p2p_device blocking
check mpi_shim_coll_negative_control fault 2 no mpi_shim_coll_device bcast
CUCOPY_MPI=off check mpi_shim_off fault 2 yes mpi_shim_p2p_device blocking
for b in mpifh usempi f08; do
    [[ -x $build/bin/mpi_shim_f_$b ]] && check mpi_shim_fortran_$b pass 2 yes mpi_shim_f_$b
done
[[ -x $build/bin/mpi_shim_f_usempi ]] && check mpi_shim_fortran_negative_control fault 2 no mpi_shim_f_usempi
export CUCOPY_MPI_STATS=0
check mpi_shim_bench_without pass 2 no mpi_shim_host_only --bench
check mpi_shim_bench_with_shim pass 2 yes mpi_shim_host_only --bench
check mpi_shim_bench_with_shim_cuda_loaded pass 2 yes mpi_shim_host_only --bench --load-cuda
exit $failed
