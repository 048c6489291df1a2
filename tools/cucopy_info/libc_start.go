// SPDX-License-Identifier: BSD-3-Clause

package main

// The executable's entry into glibc, for the glibc floor
// (cmake/CucopyGlibc.cmake): the build links it with
// -Wl,--wrap=__libc_start_main, so the start file calls the original
// __libc_start_main through this wrapper. Unused (and harmless) otherwise.

// #include "../../cmake/glibc/libc_start.c"
import "C"
