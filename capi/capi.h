/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal C helpers of the export layer, called from Go. Declarations only:
 * this header is included in the preamble of files with //export, which cgo
 * compiles twice.
 */
#ifndef CUCOPY_CAPI_H
#define CUCOPY_CAPI_H

#include <stddef.h>
#include <stdint.h>

#include "cucopy.h"

/* Store the thread's last-error message (copied, truncated to fit). */
void cucopy_set_last_error(const char *msg, size_t len);

/* Account one finished operation on a cucopy_completion_t and run its
 * callback when the count reaches zero, recording iface_serial as the iface
 * whose callback the thread runs meanwhile (cucopy_running_iface). */
void cucopy_complete(uintptr_t comp, int status, uint64_t iface_serial);

/* The serial of the iface whose completion callback this thread is running,
 * 0 outside callbacks. */
uint64_t cucopy_running_iface(void);

/* Re-install the fault dispatcher where the host replaced Go's handlers;
 * returns how many signals it took back. */
int cucopy_signals_reassert(void);

#endif
