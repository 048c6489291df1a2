/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fault-signal dispatcher.
 *
 * Go turns a nil dereference in Go code into a recoverable panic only while
 * its SIGSEGV/SIGBUS/SIGFPE handlers are installed. Host runtimes (gfortran,
 * Open MPI with UCX, tools) replace them after the library loaded. The
 * constructor below saves Go's handlers (Go's runtime constructor runs first
 * and installs them synchronously); cucopy_signals_reassert(), called on
 * cold paths, takes the three signals back where someone replaced them and
 * installs a dispatcher: faults whose PC lies in this library's code go to
 * Go's handler, every other fault to the handler the host installed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>

#include "capi.h"

static const int fault_signals[] = {SIGSEGV, SIGBUS, SIGFPE};
#define NFAULT ((int)(sizeof(fault_signals) / sizeof(fault_signals[0])))

static struct sigaction go_action[NFAULT];
static struct sigaction host_action[NFAULT];
static int have_go[NFAULT];
static uintptr_t text_lo;
static uintptr_t text_hi;

static void *handler_of(const struct sigaction *sa)
{
    return (sa->sa_flags & SA_SIGINFO) ? (void *)sa->sa_sigaction : (void *)sa->sa_handler;
}

static int find_text(struct dl_phdr_info *info, size_t size, void *self_base)
{
    (void)size;
    if ((void *)info->dlpi_addr != self_base)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            text_lo = info->dlpi_addr + ph->p_vaddr;
            text_hi = text_lo + ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

static uintptr_t fault_pc(void *uc)
{
#if defined(__x86_64__)
    return (uintptr_t)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (uintptr_t)((ucontext_t *)uc)->uc_mcontext.pc;
#else
    (void)uc;
    return 0;
#endif
}

static void dispatch(int sig, siginfo_t *si, void *uc)
{
    int k = 0;
    while (k < NFAULT && fault_signals[k] != sig)
        k++;
    if (k == NFAULT)
        return;
    uintptr_t pc = fault_pc(uc);
    if (have_go[k] && pc >= text_lo && pc < text_hi) {
        go_action[k].sa_sigaction(sig, si, uc);
        return;
    }
    const struct sigaction *host = &host_action[k];
    if (host->sa_flags & SA_SIGINFO) {
        host->sa_sigaction(sig, si, uc);
    } else if (host->sa_handler == SIG_IGN) {
        return;
    } else if (host->sa_handler == SIG_DFL) {
        /* Returning re-runs the faulting instruction under the default action. */
        signal(sig, SIG_DFL);
    } else {
        host->sa_handler(sig);
    }
}

/* Save the handlers of fault signals that are Go's, i.e. lie in this object. */
static void save_go_handlers(void)
{
    Dl_info self;
    if (dladdr((void *)save_go_handlers, &self) == 0)
        return;
    if (text_hi == 0)
        dl_iterate_phdr(find_text, self.dli_fbase);
    for (int k = 0; k < NFAULT; k++) {
        struct sigaction cur;
        Dl_info owner;
        if (have_go[k] || sigaction(fault_signals[k], NULL, &cur) != 0)
            continue;
        void *h = handler_of(&cur);
        if (h != (void *)dispatch && (cur.sa_flags & SA_SIGINFO) && dladdr(h, &owner) != 0 &&
            owner.dli_fbase == self.dli_fbase) {
            go_action[k] = cur;
            have_go[k] = 1;
        }
    }
}

/* Go's runtime constructor installs its handlers synchronously before this
 * one runs; catch them before the host program can replace them. */
__attribute__((constructor)) static void save_go_handlers_at_load(void)
{
    save_go_handlers();
}

int cucopy_signals_reassert(void)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int taken = 0;
    pthread_mutex_lock(&lock);
    save_go_handlers(); /* in case the constructor ran before Go's */
    for (int k = 0; k < NFAULT; k++) {
        struct sigaction cur;
        if (!have_go[k] || sigaction(fault_signals[k], NULL, &cur) != 0)
            continue;
        void *h = handler_of(&cur);
        if (h == (void *)dispatch || h == handler_of(&go_action[k]))
            continue;
        host_action[k] = cur;
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = dispatch;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
        sigfillset(&sa.sa_mask);
        if (sigaction(fault_signals[k], &sa, NULL) == 0)
            taken++;
    }
    pthread_mutex_unlock(&lock);
    return taken;
}
