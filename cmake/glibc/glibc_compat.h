/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Forced into every C file of the shipped binaries (-include, and through
 * CGO_CFLAGS into the Go library's cgo and runtime/cgo files) when
 * CUCOPY_GLIBC_FLOOR is set (cmake/CucopyGlibc.cmake): binds the glibc
 * functions that glibc 2.32 and 2.34 gave new symbol versions (those moved
 * from libdl and libpthread into libc) to their original versions, so that
 * what is built on a new glibc also loads on an old one (RHEL 8: 2.28). The
 * original versions stay in every later glibc, as compatibility symbols of
 * the same functions. tests/abi/glibc_floor.cmake checks the result with
 * objdump -T. A function the shipped code starts to use that has a version
 * above the floor makes that test fail: add it here.
 */
#ifndef CUCOPY_GLIBC_COMPAT_H
#define CUCOPY_GLIBC_COMPAT_H
#if !defined(__ASSEMBLER__) && defined(__linux__)

/* The first version of each function: the architecture's base version
 * (x86-64 GLIBC_2.2.5, aarch64 GLIBC_2.17, where every function here
 * already existed), or on x86-64 the version that added it. */
#if defined(__x86_64__)
#define CUCOPY_GLIBC_BASE "GLIBC_2.2.5"
#define CUCOPY_GLIBC_FIRST(x86_64) x86_64
#elif defined(__aarch64__)
#define CUCOPY_GLIBC_BASE "GLIBC_2.17"
#define CUCOPY_GLIBC_FIRST(x86_64) CUCOPY_GLIBC_BASE
#endif

#ifdef CUCOPY_GLIBC_BASE
#define CUCOPY_GLIBC_SYMVER_AT(sym, x86_64)                                                    \
    __asm__(".symver " #sym "," #sym "@" CUCOPY_GLIBC_FIRST(x86_64))
#define CUCOPY_GLIBC_SYMVER(sym) CUCOPY_GLIBC_SYMVER_AT(sym, CUCOPY_GLIBC_BASE)
/* libdl, in libc since 2.34 */
CUCOPY_GLIBC_SYMVER(dladdr);
CUCOPY_GLIBC_SYMVER(dlclose);
CUCOPY_GLIBC_SYMVER(dlerror);
CUCOPY_GLIBC_SYMVER_AT(dlinfo, "GLIBC_2.3.3");
CUCOPY_GLIBC_SYMVER(dlopen);
CUCOPY_GLIBC_SYMVER(dlsym);
/* libpthread, in libc since 2.32 / 2.34 */
CUCOPY_GLIBC_SYMVER(pthread_attr_getstack);
CUCOPY_GLIBC_SYMVER(pthread_attr_getstacksize);
CUCOPY_GLIBC_SYMVER(pthread_attr_setstacksize);
CUCOPY_GLIBC_SYMVER(pthread_barrier_destroy);
CUCOPY_GLIBC_SYMVER(pthread_barrier_init);
CUCOPY_GLIBC_SYMVER(pthread_barrier_wait);
CUCOPY_GLIBC_SYMVER(pthread_create);
CUCOPY_GLIBC_SYMVER(pthread_detach);
CUCOPY_GLIBC_SYMVER(pthread_getattr_np);
CUCOPY_GLIBC_SYMVER(pthread_getspecific);
CUCOPY_GLIBC_SYMVER(pthread_join);
CUCOPY_GLIBC_SYMVER(pthread_key_create);
CUCOPY_GLIBC_SYMVER(pthread_key_delete);
CUCOPY_GLIBC_SYMVER(pthread_mutex_trylock);
CUCOPY_GLIBC_SYMVER(pthread_once);
CUCOPY_GLIBC_SYMVER(pthread_setspecific);
CUCOPY_GLIBC_SYMVER(pthread_sigmask);
CUCOPY_GLIBC_SYMVER_AT(pthread_timedjoin_np, "GLIBC_2.3.3");
#endif

#endif
#endif
