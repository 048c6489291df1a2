#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The crossings between C and Go per operation (tests/c/test_crossings), on
# the real driver, over a build tree made elsewhere (the GPU machines have no
# Go):
#
#   tests/gpu/progress-check.sh BUILD_DIR
#
# Runs test_crossings with the test build of the library
# (BUILD_DIR/testhooks/libcucopy.so.0 first on LD_LIBRARY_PATH, as the C
# suite does) and CUCOPY_CUDA_DRIVER unset (libcuda.so.1), and prints its
# per-operation and per-progress-call counts. The driver-call counts are the
# fake's only. Exit status: the test's (0 when every bound held).
set -uo pipefail
build=$(cd "${1:?usage: progress-check.sh BUILD_DIR}" && pwd)
unset CUCOPY_CUDA_DRIVER FAKECUDA_DEVICES
for f in "$build/bin/test_crossings" "$build/testhooks/libcucopy.so.0"; do
    [[ -e $f ]] || { echo "progress-check: $f missing (build the tree with make build)" >&2; exit 2; }
done
date -u
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null || true
LD_LIBRARY_PATH=$build/testhooks${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$build/bin/test_crossings"
rc=$?
echo "test_crossings exit $rc"
exit $rc
