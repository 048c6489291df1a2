/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The C steady state (docs/design.md, "The C steady state"): the calls of
 * the C ABI that need none of Go's cold work run here, without entering Go.
 * Nothing here decides anything of its own: it runs cd_copy with the
 * request core's issuing path would build (core/ep.go), accepts only the
 * answer that ends the call there, and leaves every other case to the Go
 * export, which then does the whole call and reports its errors.
 */
#include <stdlib.h>

#include "cd_internal.h"

cd_fast_iface *cd_fast_iface_new(int32_t cap, int32_t ndevices)
{
    cd_fast_iface *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    f->slots = calloc((size_t)cap, sizeof(cd_slot));
    f->primary = calloc(ndevices > 0 ? (size_t)ndevices : 1, sizeof(uintptr_t));
    if (f->slots == NULL || f->primary == NULL) {
        cd_fast_iface_free_tables(f);
        free(f);
        return NULL;
    }
    f->cap = cap;
    f->ndevices = ndevices;
    return f;
}

void cd_fast_iface_free_tables(cd_fast_iface *f)
{
    free(f->slots);
    free(f->primary);
    f->slots = NULL;
    f->primary = NULL;
}

/* Enter f as a user: 0 when it is not open (closing, closed, or never
 * opened to the C steady state). Close clears open, then waits for the
 * users to leave (cudadrv.FastIface.Shut): a user counted before it looks
 * at open is seen by that wait, or sees open cleared. */
static int cd_fast_enter(cd_fast_iface *f)
{
    __atomic_add_fetch(&f->users, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&f->open, __ATOMIC_SEQ_CST))
        return 1;
    __atomic_sub_fetch(&f->users, 1, __ATOMIC_RELEASE);
    return 0;
}

static void cd_fast_leave(cd_fast_iface *f)
{
    __atomic_sub_fetch(&f->users, 1, __ATOMIC_RELEASE);
}

/* core's countCopy for one piece that is its operation's first. */
static void cd_count_first(cd_slot *slot, int32_t dir, uint64_t bytes)
{
    cd_counts *c = &slot->counts[dir];
    __atomic_add_fetch(&c->operations, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->pieces, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->bytes, bytes, __ATOMIC_RELAXED);
}

int cd_fast_short(cd_fast_iface *f, int32_t lane, uint64_t dst, uint64_t src, uint64_t len,
                  const cd_mdesc *dst_d, const cd_mdesc *src_d, cd_err *err)
{
    /* Go's answers: a length of 0 is done, a NULL or overflowing side an error. */
    if (len == 0 || dst == 0 || src == 0 || dst > UINT64_MAX - len || src > UINT64_MAX - len)
        return CD_FAST_DECLINED;
    if (!cd_fast_enter(f))
        return CD_FAST_DECLINED;
    /* core.Ep.short's request: a synchronous piece, the slot's lock on a
     * multi-thread iface, the iface's staging and packing limits. */
    cd_mdesc mems[2];
    int32_t nmems = 0;
    cd_copy_op op = {0};
    op.dst = dst;
    op.src = src;
    op.len = len;
    op.flags = CD_COPY_SYNC | (f->multi ? CD_COPY_LOCK : 0);
    op.lane = lane;
    op.ndevices = f->ndevices;
    op.stage_min = f->stage_min;
    op.pack_below = f->pack_below;
    if (dst_d != NULL) {
        mems[nmems++] = *dst_d;
        op.dst_mem = nmems;
    }
    if (src_d != NULL) {
        mems[nmems++] = *src_d;
        op.src_mem = nmems;
    }
    int32_t nslots = __atomic_load_n(&f->nslots, __ATOMIC_ACQUIRE);
    int st = cd_copy(f->slots, nslots, f->primary, &op, NULL, 0, mems);
    int rc = CD_FAST_DECLINED;
    if (st == CD_COPY_DONE && op.slot >= 0) {
        cd_count_first(&f->slots[op.slot], op.dir, len);
        rc = op.err.entry < 0 ? CD_FAST_DONE : CD_FAST_DONE_WARN;
    } else if (st == CD_COPY_DRIVER_ERROR) {
        rc = CD_FAST_FAILED;
    }
    *err = op.err;
    cd_fast_leave(f);
    return rc;
}
