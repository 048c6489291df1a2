/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Preloaded before libcucopy_mpi.so in mpi_shim_cuda_aware_*: an MPI that
 * claims CUDA support. The shim looks MPIX_Query_cuda_support up with
 * dlsym(RTLD_DEFAULT), which finds this definition first.
 */
__attribute__((visibility("default"))) int MPIX_Query_cuda_support(void)
{
    return 1;
}
