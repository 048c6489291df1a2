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
#include <string.h>

#include "cd_internal.h"

int cd_slot_grow_free(cd_slot *slot, int32_t n)
{
    if (n <= slot->free_cap)
        return 0;
    uintptr_t *p = realloc(slot->free_ev, (size_t)n * sizeof(uintptr_t));
    if (p == NULL)
        return -1;
    slot->free_ev = p;
    slot->free_cap = n;
    return 0;
}

int cd_slot_make_inbox(cd_slot *slot)
{
    if (slot->inbox == NULL)
        slot->inbox = calloc(1, sizeof(cd_inbox));
    return slot->inbox != NULL ? 0 : -1;
}

cd_fast_iface *cd_fast_iface_new(int32_t cap, int32_t ndevices)
{
    cd_fast_iface *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    f->slots = calloc((size_t)cap, sizeof(cd_slot));
    f->primary = calloc(ndevices > 0 ? (size_t)ndevices : 1, sizeof(uintptr_t));
    f->queries = calloc((size_t)cap, sizeof(cd_slot_query));
    if (f->slots == NULL || f->primary == NULL || f->queries == NULL) {
        cd_fast_iface_free_tables(f);
        free(f);
        return NULL;
    }
    f->cap = cap;
    f->ndevices = ndevices;
    return f;
}

void cd_slots_free_buffers(cd_slot *slots, int32_t n)
{
    for (int32_t k = 0; slots != NULL && k < n; k++) {
        free(slots[k].free_ev);
        free(slots[k].inbox);
        slots[k].free_ev = NULL;
        slots[k].inbox = NULL;
    }
}

void cd_fast_iface_free_tables(cd_fast_iface *f)
{
    cd_slots_free_buffers(f->slots, f->cap);
    free(f->slots);
    free(f->primary);
    free(f->queries);
    f->slots = NULL;
    f->primary = NULL;
    f->queries = NULL;
}

/* Enter f as a user in lane: 0 when it is not open (closing, closed, or
 * never opened to the C steady state). Close clears open, then waits for
 * the users to leave (cudadrv.FastIface.Shut): a user counted before it
 * looks at open is seen by that wait, or sees open cleared. */
static int cd_fast_enter(cd_fast_iface *f, int32_t lane)
{
    if (f == NULL || (uint32_t)lane >= CD_FAST_LANES)
        return 0;
    __atomic_add_fetch(&f->users[lane].n, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&f->open, __ATOMIC_SEQ_CST))
        return 1;
    __atomic_sub_fetch(&f->users[lane].n, 1, __ATOMIC_RELEASE);
    return 0;
}

static void cd_fast_leave(cd_fast_iface *f, int32_t lane)
{
    __atomic_sub_fetch(&f->users[lane].n, 1, __ATOMIC_RELEASE);
}

/* core's countCopy for an operation's first piece and the run of n - 1
 * that joined it: one operation, n pieces. */
static void cd_count(cd_slot *slot, int32_t dir, int32_t n, uint64_t bytes)
{
    cd_counts *c = &slot->counts[dir];
    __atomic_add_fetch(&c->operations, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->pieces, (uint64_t)n, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->bytes, bytes, __ATOMIC_RELAXED);
}

/* Go's answers: a length of 0 is done, a NULL or overflowing side an error. */
static int cd_fast_args(const cd_piece *p)
{
    return p->len != 0 && p->dst != 0 && p->src != 0 && p->dst <= UINT64_MAX - p->len &&
           p->src <= UINT64_MAX - p->len;
}

/* cd_copy on the request core's issuing path builds (core/ep.go:
 * issuePiece) for an operation's n pieces, with flags: the first piece
 * and the others as the run that may join it; their handle indices name
 * mems. */
static int cd_fast_copy(const cd_fast_iface *f, int32_t lane, uint32_t flags,
                        const cd_piece *pieces, int32_t n, const cd_mdesc *mems, cd_copy_op *op)
{
    const cd_piece *p = &pieces[0];
    memset(op, 0, sizeof(*op));
    op->dst = p->dst;
    op->src = p->src;
    op->len = p->len;
    op->src_mem = p->src_mem;
    op->dst_mem = p->dst_mem;
    op->flags = flags | (f->multi ? CD_COPY_LOCK : 0);
    op->lane = lane;
    op->ndevices = f->ndevices;
    op->stage_min = f->stage_min;
    op->pack_below = f->pack_below;
    op->stage_small = f->stage_small;
    int32_t nslots = __atomic_load_n(&f->nslots, __ATOMIC_ACQUIRE);
    return cd_copy(f->slots, nslots, f->primary, op, pieces + 1, n - 1, mems);
}

int cd_fast_short(cd_fast_iface *f, int32_t lane, const cd_piece *piece, const cd_mdesc *mems,
                  cd_err *err)
{
    if (!cd_fast_args(piece) || !cd_fast_enter(f, lane))
        return CD_FAST_DECLINED;
    cd_copy_op op; /* core.Ep.short's request: a synchronous piece */
    int st = cd_fast_copy(f, lane, CD_COPY_SYNC, piece, 1, mems, &op);
    int rc = CD_FAST_DECLINED;
    if (st == CD_COPY_DONE && op.slot >= 0) {
        cd_count(&f->slots[op.slot], op.dir, 1, piece->len);
        rc = op.err.entry < 0 ? CD_FAST_DONE : CD_FAST_DONE_WARN;
    } else if (st == CD_COPY_DRIVER_ERROR) {
        rc = CD_FAST_FAILED;
    }
    *err = op.err;
    cd_fast_leave(f, lane);
    return rc;
}

/* core's queuePiece for a piece cd_copy queued on slot (under its lock on
 * a multi-thread iface): booked in the inbox instead of core's queue, the
 * queue's newest entry advanced as a push would (joins need it), the
 * slot's free event refilled. */
static void cd_book(cd_slot *slot, const cd_copy_op *op, uintptr_t comp)
{
    cd_inbox *in = slot->inbox; /* room checked by cd_copy (CD_COPY_BOOK_C) */
    cd_booking *b = &in->b[(in->head + in->count) % CD_INBOX_CAP];
    b->event = op->event;
    b->comp = comp;
    b->kind = op->kind;
    in->count++;
    slot->issued[op->kind]++;
    slot->event = 0; /* the piece's now (never detached: cd_copy's CD_COPY_BOOK_C) */
    if (slot->nfree > 0)
        slot->event = slot->free_ev[--slot->nfree];
}

int cd_fast_zcopy(cd_fast_iface *f, int32_t lane, const cd_piece *pieces, int32_t n,
                  const cd_mdesc *mems, uintptr_t comp, cd_err *err)
{
    if (n < 1 || n > CD_MAX_RUN || (n > 1 && !f->runs))
        return CD_FAST_DECLINED;
    uint64_t bytes = 0;
    for (int32_t k = 0; k < n; k++) {
        if (!cd_fast_args(&pieces[k]))
            return CD_FAST_DECLINED;
        bytes += pieces[k].len;
    }
    if (!cd_fast_enter(f, lane))
        return CD_FAST_DECLINED;
    /* core.Ep.zcopy's request: its pieces as one run, or nothing issued
     * (CD_COPY_BOOK_C). */
    cd_copy_op op;
    int st = cd_fast_copy(f, lane, CD_COPY_BOOK_C | f->run_flags, pieces, n, mems, &op);
    int rc = CD_FAST_DECLINED;
    if (st == CD_COPY_QUEUED) {
        cd_slot *slot = &f->slots[op.slot];
        cd_book(slot, &op, comp);
        cd_count(slot, op.dir, n, bytes);
        if (f->multi)
            cd_slot_unlock(slot);
        rc = op.err.entry < 0 ? CD_FAST_DONE : CD_FAST_DONE_WARN;
    } else if (st == CD_COPY_DRIVER_ERROR) {
        rc = CD_FAST_FAILED;
    }
    *err = op.err;
    cd_fast_leave(f, lane);
    return rc;
}
