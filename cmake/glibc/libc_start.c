/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shipped executables' entry into glibc. The start file (crt1.o) calls
 * __libc_start_main, which glibc 2.34 versioned anew; linked with
 * -Wl,--wrap=__libc_start_main (cmake/CucopyGlibc.cmake) the call comes here
 * and goes to the original version, present in every glibc since, so that
 * the executable loads on glibc 2.28 too.
 */
#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
#include "glibc_compat.h"

typedef int (*cucopy_main_fn)(int, char **, char **);

int cucopy_libc_start_main(cucopy_main_fn main, int argc, char **argv, void (*init)(void),
                           void (*fini)(void), void (*rtld_fini)(void), void *stack_end);
__asm__(".symver cucopy_libc_start_main,__libc_start_main@" CUCOPY_GLIBC_BASE);

int __wrap___libc_start_main(cucopy_main_fn main, int argc, char **argv, void (*init)(void),
                             void (*fini)(void), void (*rtld_fini)(void), void *stack_end);
int __wrap___libc_start_main(cucopy_main_fn main, int argc, char **argv, void (*init)(void),
                             void (*fini)(void), void (*rtld_fini)(void), void *stack_end)
{
    return cucopy_libc_start_main(main, argc, argv, init, fini, rtld_fini, stack_end);
}
#endif
