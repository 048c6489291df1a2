/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Non-contiguous datatypes on device memory (issue 13, docs/mpi.md
 * "Non-contiguous datatypes").
 *
 * A datatype is flattened once (MPI_Type_get_envelope / get_contents,
 * recursively) into the byte runs of ONE element in type-map order: strided
 * runs {offset, width, pitch, rows}, equal-width blocks at a constant stride
 * folded into one run. The result (struct shim_layout) is cached per
 * datatype handle and dropped by the MPI_Type_free wrapper (below) and the
 * Fortran type_free entries (shim_fortran.c); a staged buffer holds a
 * reference, so a type freed while a request still uses it stays until
 * that request completes.
 *
 * A staged buffer of such a type is packed: count * size bytes of host
 * memory, gathered from the device run by run (layout_copy: one
 * cucopy_ep_copy_2d entry per strided run, up to max_iov entries per call;
 * libcucopy packs narrow rows on the device), and PMPI gets it with the
 * layout's signature type: the same type signature as one element of the
 * user's type, extent == size, so count elements of it are exactly the
 * packed bytes. A receive is scattered back run by run, only the bytes MPI
 * wrote: the holes of the type map are never written on the device.
 *
 * Or it is layout-preserving (b->span: shim_types_span for a reduction,
 * shim_types_span_blocks for Alltoallw's per-peer types): host memory of the
 * buffer's whole span, the same runs copied to the same offsets in it (the
 * host pitch is the device pitch; the holes of the host copy are
 * don't-care), and PMPI gets the user's own datatype there, so MPI applies
 * a user's op, mixes host buffers in, decodes pair types exactly as on host
 * memory. Only the runs go back to the device. The cost: span bytes of
 * staging memory, however sparse the type.
 */
#include "shim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the layout of one element ---------------------------------------------------- */

/* Blocks of one basic type, in type-map order: the signature type's pieces. */
struct sig_piece {
    MPI_Datatype type;
    MPI_Count n; /* elements of type */
};

/* One block of a layout of blocks (Alltoallw's buffer, uncached): count
 * elements of L at byte displacement disp. */
struct span_block {
    struct shim_layout *L; /* a reference */
    MPI_Count count;
    MPI_Aint disp;
};

struct shim_layout {
    struct shim_layout *next; /* the cache bucket's chain */
    MPI_Datatype dt;          /* the user's handle (the key) */
    _Atomic int refs;         /* the cache's one, plus one per staged buffer */
    MPI_Count size, ext;
    MPI_Count shape[5]; /* the envelope: integers, addresses, large counts, types, combiner */
    MPI_Count tlb, text;
    struct shim_run *runs;
    size_t nruns;
    MPI_Datatype sigtype; /* committed; MPI_DATATYPE_NULL when refused */
    MPI_Datatype basic;   /* the one basic type of the map, or MPI_DATATYPE_NULL */
    MPI_Count nbasic;     /* elements of basic per element */
    char refusal[200];    /* non-empty: why this type cannot be staged */
    struct span_block *blocks; /* a layout of blocks: these instead of runs */
    size_t nblocks;
};

/* What flattening builds. */
struct flat {
    struct shim_run *runs;
    size_t nruns, cap;
    struct sig_piece *sig;
    size_t nsig, sigcap;
    MPI_Count bytes; /* emitted so far */
    char *refusal;   /* where to write why (flattening stops at the first) */
};

/* Fold @p r into @p a when it continues it: right after a single block (both
 * single blocks: a wider block), or the same width at a's stride (a single
 * block a takes any stride not below its width). 1 when folded. */
static int run_fold(struct shim_run *a, struct shim_run r)
{
    MPI_Aint step = r.off - a->off;
    if (a->rows == 1 && r.rows == 1 && step == (MPI_Aint)a->width) {
        a->width += r.width;
        a->pitch = (MPI_Aint)a->width;
        return 1;
    }
    if (a->width != r.width)
        return 0;
    if (a->rows == 1) {
        if (step < (MPI_Aint)a->width || (r.rows > 1 && r.pitch != step))
            return 0;
        a->pitch = step;
        a->rows = 1 + r.rows;
        return 1;
    }
    if (step != a->pitch * (MPI_Aint)a->rows || (r.rows > 1 && r.pitch != a->pitch))
        return 0;
    a->rows += r.rows;
    return 1;
}

/* Append @p r to the list, folded into its last run where it continues it. */
static int runs_append(struct shim_run **runs, size_t *n, size_t *cap, struct shim_run r)
{
    if (r.width == 0 || r.rows == 0)
        return 0;
    if (*n > 0 && run_fold(&(*runs)[*n - 1], r))
        return 0;
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        struct shim_run *p = realloc(*runs, c * sizeof *p);
        if (p == NULL)
            return -1;
        *runs = p;
        *cap = c;
    }
    (*runs)[(*n)++] = r;
    return 0;
}

static int flat_refuse(struct flat *f, const char *what)
{
    if (f->refusal[0] == '\0')
        snprintf(f->refusal, 200, "%s", what);
    return -1;
}

/* The pair types with a hole ({T, int} as the C struct lays it out; MPI_2INT
 * and MPI_FLOAT_INT have none): T and the int's offset. 0 for another type. */
struct pair_short {
    short a;
    int b;
};
struct pair_long {
    long a;
    int b;
};
struct pair_double {
    double a;
    int b;
};
struct pair_long_double {
    long double a;
    int b;
};

static int pair_parts(MPI_Datatype type, MPI_Datatype *first, MPI_Aint *int_off)
{
    if (type == MPI_SHORT_INT)
        *first = MPI_SHORT, *int_off = offsetof(struct pair_short, b);
    else if (type == MPI_LONG_INT)
        *first = MPI_LONG, *int_off = offsetof(struct pair_long, b);
    else if (type == MPI_DOUBLE_INT)
        *first = MPI_DOUBLE, *int_off = offsetof(struct pair_double, b);
    else if (type == MPI_LONG_DOUBLE_INT)
        *first = MPI_LONG_DOUBLE, *int_off = offsetof(struct pair_long_double, b);
    else
        return 0;
    return 1;
}

static int flat_emit(struct flat *f, MPI_Aint disp, MPI_Datatype type, MPI_Count n);

/* @p n pairs (MPI_DOUBLE_INT & co.) at @p disp, @p ext apart: their two
 * parts each, when MPI's sizes agree with the C struct's (else refused). */
static int flat_emit_pairs(struct flat *f, MPI_Aint disp, MPI_Datatype type, MPI_Count n,
                           MPI_Count size, MPI_Count tlb, MPI_Count text, MPI_Count ext)
{
    MPI_Datatype first = MPI_DATATYPE_NULL;
    MPI_Aint int_off = 0;
    int fsize = 0;
    if (!pair_parts(type, &first, &int_off) || PMPI_Type_size(first, &fsize) != MPI_SUCCESS ||
        size != fsize + (MPI_Count)sizeof(int) || tlb != 0 ||
        text != int_off + (MPI_Count)sizeof(int) || ext < text)
        return flat_refuse(f, "a basic type with holes (other than the pair types such as "
                              "MPI_DOUBLE_INT) inside a non-contiguous datatype on device "
                              "memory is not supported");
    for (MPI_Count j = 0; j < n; j++) {
        MPI_Aint at = disp + (MPI_Aint)j * (MPI_Aint)ext;
        if (flat_emit(f, at, first, 1) != 0 || flat_emit(f, at + int_off, MPI_INT, 1) != 0)
            return -1;
    }
    return 0;
}

/* One block of @p n elements of predefined type @p type at @p disp; a pair
 * type with a hole as its two parts. */
static int flat_emit(struct flat *f, MPI_Aint disp, MPI_Datatype type, MPI_Count n)
{
    MPI_Count size = 0, tlb = 0, text = 0, lb = 0, ext = 0;
    if (PMPI_Type_size_x(type, &size) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent_x(type, &tlb, &text) != MPI_SUCCESS ||
        PMPI_Type_get_extent_x(type, &lb, &ext) != MPI_SUCCESS)
        return flat_refuse(f, "a basic type of the datatype cannot be queried");
    if (size == 0 || n == 0)
        return 0; /* MPI_LB, MPI_UB and the like: no bytes */
    if (tlb != 0 || text != size || lb != 0 || ext != size)
        return flat_emit_pairs(f, disp, type, n, size, tlb, text, ext);
    struct shim_run r = {.off = disp + (MPI_Aint)tlb, .width = (size_t)(n * size),
                         .pitch = (MPI_Aint)(n * size), .rows = 1};
    if (runs_append(&f->runs, &f->nruns, &f->cap, r) != 0)
        return flat_refuse(f, "no memory to flatten the datatype");
    f->bytes += n * size;
    if (f->nsig > 0 && f->sig[f->nsig - 1].type == type) {
        f->sig[f->nsig - 1].n += n;
        return 0;
    }
    if (f->nsig == f->sigcap) {
        size_t c = f->sigcap ? f->sigcap * 2 : 8;
        struct sig_piece *p = realloc(f->sig, c * sizeof *p);
        if (p == NULL)
            return flat_refuse(f, "no memory to flatten the datatype");
        f->sig = p;
        f->sigcap = c;
    }
    f->sig[f->nsig++] = (struct sig_piece){type, n};
    return 0;
}

static int flat_type(struct flat *f, MPI_Datatype dt, MPI_Aint disp, int depth);

static int flat_subarray(struct flat *f, int nd, const MPI_Count *sizes, const MPI_Count *subs,
                         const MPI_Count *starts, const MPI_Aint *stride, int d, MPI_Aint disp,
                         MPI_Datatype old, int depth);

/* A subarray of @p nd dimensions: dims holds the sizes, subsizes and starts
 * (nd each), in @p order, of elements of @p old (extent @p oext). */
static int flat_subarray_of(struct flat *f, int nd, const MPI_Count *dims, int order,
                            MPI_Aint disp, MPI_Aint oext, MPI_Datatype old, int depth)
{
    /* Dimensions slowest first: C order as given, Fortran order reversed. */
    MPI_Count s[32], sub[32], st[32];
    MPI_Aint stride[32];
    for (int d = 0; d < nd; d++) {
        int k = order == MPI_ORDER_FORTRAN ? nd - 1 - d : d;
        s[d] = dims[k];
        sub[d] = dims[nd + k];
        st[d] = dims[2 * nd + k];
    }
    stride[nd - 1] = oext;
    for (int d = nd - 2; d >= 0; d--)
        stride[d] = stride[d + 1] * (MPI_Aint)s[d + 1];
    return flat_subarray(f, nd, s, sub, st, stride, 0, disp, old, depth + 1);
}

/* The envelope of @p dt: integers, addresses, large counts (0 without
 * MPI-4), datatypes, combiner. MPI_Type_get_envelope fails on a type made
 * by a large-count constructor (MPICH 4.0, through the error handler: fatal
 * by default), so an MPI-4 library is asked with MPI_Type_get_envelope_c. */
static int envelope(MPI_Datatype dt, MPI_Count e[5])
{
#if SHIM_LARGE_COUNT
    int comb = 0;
    if (PMPI_Type_get_envelope_c(dt, &e[0], &e[1], &e[2], &e[3], &comb) != MPI_SUCCESS)
        return -1;
    e[4] = comb;
#else
    int ni = 0, na = 0, nt = 0, comb = 0;
    if (PMPI_Type_get_envelope(dt, &ni, &na, &nt, &comb) != MPI_SUCCESS)
        return -1;
    e[0] = ni, e[1] = na, e[2] = 0, e[3] = nt, e[4] = comb;
#endif
    return 0;
}

static int is_basic(MPI_Datatype dt)
{
    MPI_Count e[5];
    return envelope(dt, e) == 0 &&
           (e[4] == MPI_COMBINER_NAMED || e[4] == MPI_COMBINER_F90_REAL ||
            e[4] == MPI_COMBINER_F90_COMPLEX || e[4] == MPI_COMBINER_F90_INTEGER);
}

/* @p n elements of @p dt, the first at @p disp, one extent apart: n of a
 * basic type are one block (a row of a subarray: one emit, not n). */
static int flat_repeat(struct flat *f, MPI_Datatype dt, MPI_Aint disp, MPI_Count n, int depth)
{
    if (is_basic(dt))
        return flat_emit(f, disp, dt, n);
    MPI_Aint lb = 0, ext = 0;
    if (PMPI_Type_get_extent(dt, &lb, &ext) != MPI_SUCCESS)
        return flat_refuse(f, "a datatype inside the datatype cannot be queried");
    for (MPI_Count k = 0; k < n; k++)
        if (flat_type(f, dt, disp + (MPI_Aint)k * ext, depth) != 0)
            return -1;
    return 0;
}

/* The subarray's elements of dimension @p d on (slowest first), from @p disp. */
static int flat_subarray(struct flat *f, int nd, const MPI_Count *sizes, const MPI_Count *subs,
                         const MPI_Count *starts, const MPI_Aint *stride, int d, MPI_Aint disp,
                         MPI_Datatype old, int depth)
{
    MPI_Aint at = disp + (MPI_Aint)starts[d] * stride[d];
    if (d == nd - 1)
        return flat_repeat(f, old, at, subs[d], depth);
    for (MPI_Count i = 0; i < subs[d]; i++)
        if (flat_subarray(f, nd, sizes, subs, starts, stride, d + 1, at + (MPI_Aint)i * stride[d],
                          old, depth) != 0)
            return -1;
    return 0;
}

static void free_contents(MPI_Datatype *types, MPI_Count nt)
{
    for (MPI_Count i = 0; i < nt; i++)
        if (!is_basic(types[i])) /* derived ones are new objects: freed */
            PMPI_Type_free(&types[i]);
}

/* The blocks of one element of @p dt at @p disp, in type-map order.
 *
 * The contents are read in one shape, that of MPI_Type_get_contents_c: the
 * counts and displacements in one array L in the order of the constructor's
 * arguments. A type of an int constructor gives them as integers then
 * addresses (L = ints, then addrs); one of a large-count constructor
 * (MPI_Type_vector_c & co., which MPICH 4.0's MPI_Type_get_envelope fails
 * on) all in the large-count array, a subarray keeping ndims and order in
 * the integers (measured on MPICH 4.0.2 for each constructor). */
static int flat_type(struct flat *f, MPI_Datatype dt, MPI_Aint disp, int depth)
{
    if (depth > 64)
        return flat_refuse(f, "datatype nested more than 64 levels deep");
    MPI_Count e[5];
    if (envelope(dt, e) != 0)
        return flat_refuse(f, "MPI_Type_get_envelope failed on it");
    MPI_Count ni = e[0], na = e[1], nl = e[2], nt = e[3];
    int comb = (int)e[4];
    if (comb == MPI_COMBINER_NAMED || comb == MPI_COMBINER_F90_REAL ||
        comb == MPI_COMBINER_F90_COMPLEX || comb == MPI_COMBINER_F90_INTEGER)
        return flat_emit(f, disp, dt, 1);
    if (comb == MPI_COMBINER_DARRAY)
        return flat_refuse(f, "a darray datatype on device memory is not supported");
    if (ni > 0x7fffffff || na > 0x7fffffff || nt > 0x7fffffff)
        return flat_refuse(f, "a datatype of more than INT_MAX arguments is not supported");
    int *ints = malloc(sizeof(int) * (size_t)(ni + 1));
    MPI_Aint *addrs = malloc(sizeof(MPI_Aint) * (size_t)(na + 1));
    MPI_Count *L = malloc(sizeof(MPI_Count) * (size_t)(ni + na + nl + 1));
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)(nt + 1));
    int rc = 0, got = 0;
    if (ints == NULL || addrs == NULL || L == NULL || types == NULL) {
        rc = flat_refuse(f, "no memory to flatten the datatype");
        goto out;
    }
#if SHIM_LARGE_COUNT
    if (nl > 0)
        got = PMPI_Type_get_contents_c(dt, ni, na, nl, nt, ints, addrs, L, types) ==
              MPI_SUCCESS;
    else
#endif
        got = PMPI_Type_get_contents(dt, (int)ni, (int)na, (int)nt, ints, addrs, types) ==
              MPI_SUCCESS;
    if (!got) {
        rc = flat_refuse(f, "MPI_Type_get_contents failed on it");
        goto out;
    }
    if (nl == 0) {
        for (MPI_Count k = 0; k < ni; k++)
            L[k] = ints[k];
        for (MPI_Count k = 0; k < na; k++)
            L[ni + k] = addrs[k];
    }
    MPI_Aint lb = 0, oext = 0;
    if (nt > 0 && PMPI_Type_get_extent(types[0], &lb, &oext) != MPI_SUCCESS) {
        rc = flat_refuse(f, "a datatype inside the datatype cannot be queried");
        goto out;
    }
    MPI_Count n = ni + na + nl > 0 ? L[0] : 0;
    switch (comb) {
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED: /* the extent is the outer type's business */
        rc = flat_type(f, types[0], disp, depth + 1);
        break;
    case MPI_COMBINER_CONTIGUOUS:
        rc = flat_repeat(f, types[0], disp, n, depth + 1);
        break;
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR: {
        MPI_Aint stride = comb == MPI_COMBINER_VECTOR ? (MPI_Aint)L[2] * oext : (MPI_Aint)L[2];
        for (MPI_Count i = 0; i < n && rc == 0; i++)
            rc = flat_repeat(f, types[0], disp + (MPI_Aint)i * stride, L[1], depth + 1);
        break;
    }
    case MPI_COMBINER_INDEXED:
    case MPI_COMBINER_HINDEXED:
    case MPI_COMBINER_STRUCT:
        for (MPI_Count i = 0; i < n && rc == 0; i++) {
            MPI_Aint d = (MPI_Aint)L[1 + n + i] * (comb == MPI_COMBINER_INDEXED ? oext : 1);
            rc = flat_repeat(f, types[comb == MPI_COMBINER_STRUCT ? i : 0], disp + d, L[1 + i],
                             depth + 1);
        }
        break;
    case MPI_COMBINER_INDEXED_BLOCK:
    case MPI_COMBINER_HINDEXED_BLOCK:
        for (MPI_Count i = 0; i < n && rc == 0; i++) {
            MPI_Aint d = (MPI_Aint)L[2 + i] * (comb == MPI_COMBINER_INDEXED_BLOCK ? oext : 1);
            rc = flat_repeat(f, types[0], disp + d, L[1], depth + 1);
        }
        break;
    case MPI_COMBINER_SUBARRAY: {
        /* int form: ndims, sizes, subsizes, starts, order; _c: (ndims, order) and L. */
        MPI_Count nd = nl > 0 ? ints[0] : L[0];
        const MPI_Count *dims = nl > 0 ? L : L + 1;
        if (nd < 1 || nd > 32) {
            rc = flat_refuse(f, "a subarray of more than 32 dimensions is not supported");
            break;
        }
        int order = nl > 0 ? ints[1] : (int)L[1 + 3 * nd];
        rc = flat_subarray_of(f, (int)nd, dims, order, disp, oext, types[0], depth);
        break;
    }
    default: {
        char what[120];
        snprintf(what, sizeof what,
                 "a datatype of combiner %d on device memory is not supported", comb);
        rc = flat_refuse(f, what);
        break;
    }
    }
out:
    if (got)
        free_contents(types, nt);
    free(ints);
    free(addrs);
    free(L);
    free(types);
    return rc;
}

/* 1 when every byte of the flattened runs lies in [lo, hi): the true
 * extent MPI gives (the span shim_stage classified). */
static int runs_within(const struct flat *f, MPI_Count lo, MPI_Count hi)
{
    for (size_t i = 0; i < f->nruns; i++) {
        const struct shim_run *r = &f->runs[i];
        MPI_Count first = r->off, last = r->off + (MPI_Count)(r->rows - 1) * r->pitch;
        if (first < lo || last < lo || first + (MPI_Count)r->width > hi ||
            last + (MPI_Count)r->width > hi)
            return 0;
    }
    return 1;
}

/* The signature type of a flattened element (MPI_DATATYPE_NULL on failure):
 * contiguous when the map has one basic type, else a struct of its pieces at
 * their packed offsets, resized to extent == size. */
static MPI_Datatype make_sigtype(const struct flat *f, MPI_Count size, MPI_Datatype *basic,
                                 MPI_Count *nbasic)
{
    MPI_Datatype t = MPI_DATATYPE_NULL;
    int homogeneous = 1;
    for (size_t i = 1; i < f->nsig; i++)
        homogeneous &= f->sig[i].type == f->sig[0].type;
    MPI_Aint lb = 0, ext = 0;
    int bsize = 0;
    if (homogeneous && PMPI_Type_get_extent(f->sig[0].type, &lb, &ext) == MPI_SUCCESS &&
        PMPI_Type_size(f->sig[0].type, &bsize) == MPI_SUCCESS && ext == bsize && lb == 0 &&
        size / bsize <= 0x7fffffff) {
        if (PMPI_Type_contiguous((int)(size / bsize), f->sig[0].type, &t) != MPI_SUCCESS)
            return MPI_DATATYPE_NULL;
        *basic = f->sig[0].type;
        *nbasic = size / bsize;
    } else {
        if (f->nsig > 0x7fffffff)
            return MPI_DATATYPE_NULL;
        int n = (int)f->nsig;
        int *bl = malloc(sizeof(int) * f->nsig);
        MPI_Aint *disp = malloc(sizeof(MPI_Aint) * f->nsig);
        MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * f->nsig);
        MPI_Datatype st = MPI_DATATYPE_NULL;
        int ok = bl != NULL && disp != NULL && types != NULL;
        MPI_Aint at = 0;
        for (int i = 0; i < n && ok; i++) {
            int sz = 0;
            ok = f->sig[i].n <= 0x7fffffff && PMPI_Type_size(f->sig[i].type, &sz) == MPI_SUCCESS;
            bl[i] = (int)f->sig[i].n;
            disp[i] = at;
            types[i] = f->sig[i].type;
            at += (MPI_Aint)f->sig[i].n * sz;
        }
        ok = ok && PMPI_Type_create_struct(n, bl, disp, types, &st) == MPI_SUCCESS;
        free(bl);
        free(disp);
        free(types);
        if (!ok)
            return MPI_DATATYPE_NULL;
        int r = PMPI_Type_create_resized(st, 0, (MPI_Aint)size, &t);
        PMPI_Type_free(&st);
        if (r != MPI_SUCCESS)
            return MPI_DATATYPE_NULL;
    }
    if (PMPI_Type_commit(&t) != MPI_SUCCESS) {
        PMPI_Type_free(&t);
        return MPI_DATATYPE_NULL;
    }
    return t;
}

/* What a cached layout is checked against at each use: a handle freed
 * behind the shim's back (PMPI_Type_free from another library) and taken by
 * a type of another shape is rebuilt. Fills size, ext, tlb, text, shape. */
static int layout_shape(MPI_Datatype dt, struct shim_layout *L)
{
    MPI_Count lb = 0;
    return PMPI_Type_size_x(dt, &L->size) == MPI_SUCCESS &&
           PMPI_Type_get_extent_x(dt, &lb, &L->ext) == MPI_SUCCESS &&
           PMPI_Type_get_true_extent_x(dt, &L->tlb, &L->text) == MPI_SUCCESS &&
           envelope(dt, L->shape) == 0;
}

static int layout_same_shape(MPI_Datatype dt, const struct shim_layout *L)
{
    struct shim_layout now;
    return layout_shape(dt, &now) && now.size == L->size && now.ext == L->ext &&
           now.tlb == L->tlb && now.text == L->text &&
           memcmp(now.shape, L->shape, sizeof now.shape) == 0;
}

static struct shim_layout *layout_build(MPI_Datatype dt)
{
    struct shim_layout *L = calloc(1, sizeof *L);
    if (L == NULL)
        return NULL;
    L->dt = dt;
    L->sigtype = MPI_DATATYPE_NULL;
    L->basic = MPI_DATATYPE_NULL;
    atomic_init(&L->refs, 1);
    struct flat f = {.refusal = L->refusal};
    if (!layout_shape(dt, L)) {
        snprintf(L->refusal, sizeof L->refusal, "the datatype cannot be queried");
    } else if (flat_type(&f, dt, 0, 0) == 0) {
        if (f.bytes != L->size)
            snprintf(L->refusal, sizeof L->refusal,
                     "flattening the datatype gave %lld bytes, MPI_Type_size says %lld",
                     (long long)f.bytes, (long long)L->size);
        else if (!runs_within(&f, L->tlb, L->tlb + L->text))
            snprintf(L->refusal, sizeof L->refusal,
                     "flattening the datatype reached outside its true extent");
        else if ((L->sigtype = make_sigtype(&f, L->size, &L->basic, &L->nbasic)) ==
                 MPI_DATATYPE_NULL)
            snprintf(L->refusal, sizeof L->refusal,
                     "the datatype's packed signature type cannot be made");
    }
    L->runs = f.runs;
    L->nruns = f.nruns;
    free(f.sig);
    return L;
}

static void layout_unref(struct shim_layout *L)
{
    if (L == NULL || atomic_fetch_sub(&L->refs, 1) != 1)
        return;
    if (L->sigtype != MPI_DATATYPE_NULL) {
        int finalized = 0;
        PMPI_Finalized(&finalized);
        if (!finalized)
            PMPI_Type_free(&L->sigtype);
    }
    for (size_t i = 0; i < L->nblocks; i++)
        layout_unref(L->blocks[i].L);
    free(L->blocks);
    free(L->runs);
    free(L);
}

/* ---- the cache: datatype handle -> layout ------------------------------------------ */

#define CACHE_BUCKETS 64

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct shim_layout *cache[CACHE_BUCKETS];

static size_t bucket_of(MPI_Datatype dt)
{
    uint64_t k = 0;
    memcpy(&k, &dt, sizeof dt < sizeof k ? sizeof dt : sizeof k);
    k ^= k >> 29;
    k *= 0x9e3779b97f4a7c15ull;
    return (size_t)(k >> 58) % CACHE_BUCKETS;
}

/* Where @p dt's entry is linked (*slot NULL: none); under cache_mu. */
static struct shim_layout **cache_slot(MPI_Datatype dt)
{
    struct shim_layout **p = &cache[bucket_of(dt)];
    while (*p != NULL && (*p)->dt != dt)
        p = &(*p)->next;
    return p;
}

/* The layout of @p dt with a reference for the caller (built on a miss);
 * NULL without memory. */
static struct shim_layout *layout_get(MPI_Datatype dt)
{
    pthread_mutex_lock(&cache_mu);
    struct shim_layout **p = cache_slot(dt);
    struct shim_layout *L = *p;
    if (L != NULL && !layout_same_shape(dt, L)) {
        *p = L->next; /* a stale entry: its staged buffers keep it alive */
        layout_unref(L);
        L = NULL;
    }
    if (L == NULL && (L = layout_build(dt)) != NULL) {
        L->next = *p;
        *p = L;
    }
    if (L != NULL)
        atomic_fetch_add(&L->refs, 1);
    pthread_mutex_unlock(&cache_mu);
    return L;
}

void shim_types_forget(MPI_Datatype dt)
{
    pthread_mutex_lock(&cache_mu);
    struct shim_layout **p = cache_slot(dt);
    struct shim_layout *L = *p;
    if (L != NULL)
        *p = L->next;
    pthread_mutex_unlock(&cache_mu);
    layout_unref(L);
}

int shim_types_in_order(MPI_Datatype dt)
{
    if (is_basic(dt))
        return 1;
    struct shim_layout *L = layout_get(dt);
    if (L == NULL || L->refusal[0] != '\0') {
        layout_unref(L);
        return -1;
    }
    int one = L->nruns == 1 && L->runs[0].rows == 1 && L->runs[0].off == (MPI_Aint)L->tlb &&
              (MPI_Count)L->runs[0].width == L->size;
    layout_unref(L);
    return one;
}

SHIM_EXPORT int MPI_Type_free(MPI_Datatype *dt)
{
    if (dt != NULL)
        shim_types_forget(*dt);
    return PMPI_Type_free(dt);
}

/* ---- the copies of a run list: packed, or layout-preserving ------------------------ */

/* Entries per call at most (cucopy's max_iov may be lower). */
#define SHIM_COPY_ENTRIES 64
/* Calls in flight before waiting for them. */
#define COPY_WINDOW 64

struct copy_slot {
    cucopy_completion_t comp;
    _Atomic int done;
};

static void slot_done(cucopy_completion_t *c)
{
    atomic_store(&((struct copy_slot *)c)->done, 1);
}

/* Issuing and waiting for the copies of one run list. */
struct copier {
    int to_device;
    int span;      /* host mirrors the device span: a run at the same offset */
    MPI_Aint tlb;  /* span: the device offset of the host's first byte */
    size_t max;           /* entries per call */
    cucopy_copy_2d_t c2d[SHIM_COPY_ENTRIES];
    size_t n; /* entries pending */
    struct copy_slot slots[COPY_WINDOW];
    int inflight;
    cucopy_status_t st;
};

static cucopy_status_t copier_wait(struct copier *c)
{
    for (;;) {
        int pending = 0;
        for (int i = 0; i < c->inflight; i++)
            pending += !atomic_load(&c->slots[i].done);
        if (pending == 0)
            break;
        int r = shim_cc.iface_progress(shim_cc.iface);
        if (r < 0 && c->st == CUCOPY_OK)
            c->st = (cucopy_status_t)r;
    }
    for (int i = 0; i < c->inflight; i++)
        if (c->slots[i].comp.status != CUCOPY_OK && c->st == CUCOPY_OK)
            c->st = c->slots[i].comp.status;
    c->inflight = 0;
    return c->st;
}

/* Issue the pending entries as one call. */
static cucopy_status_t copier_issue(struct copier *c)
{
    if (c->n == 0 || c->st != CUCOPY_OK)
        return c->st;
    if (c->inflight == COPY_WINDOW && copier_wait(c) != CUCOPY_OK)
        return c->st;
    struct copy_slot *s = &c->slots[c->inflight];
    for (;;) {
        s->comp = (cucopy_completion_t){.func = slot_done, .count = 1, .status = CUCOPY_OK};
        atomic_store(&s->done, 0);
        cucopy_status_t st = shim_cc.ep_copy_2d(shim_cc.ep, c->c2d, c->n, &s->comp);
        if (st == CUCOPY_ERR_NO_RESOURCE) {
            /* Nothing of it is in flight: free events, then retry it whole. */
            if (c->inflight > 0)
                copier_wait(c);
            else
                shim_cc.iface_progress(shim_cc.iface);
            if (c->st != CUCOPY_OK)
                return c->st;
            s = &c->slots[c->inflight];
            continue;
        }
        if (st == CUCOPY_INPROGRESS)
            c->inflight++;
        else if (st != CUCOPY_OK)
            c->st = st;
        break;
    }
    c->n = 0;
    return c->st;
}

/* One strided run: @p rows blocks of @p width bytes, @p pitch apart, at
 * device address @p dev; at @p host packed, or (c->span) @p pitch apart too. */
static cucopy_status_t copier_add(struct copier *c, char *dev, size_t width, MPI_Aint pitch,
                                  size_t rows, char *host)
{
    if (c->n == c->max && copier_issue(c) != CUCOPY_OK)
        return c->st;
    cucopy_copy_2d_t *e = &c->c2d[c->n++];
    *e = (cucopy_copy_2d_t){0};
    size_t dpitch = rows > 1 ? (size_t)pitch : width, hpitch = c->span ? dpitch : width;
    if (c->to_device) {
        e->dst = dev;
        e->dst_pitch = dpitch;
        e->src = host;
        e->src_pitch = hpitch;
    } else {
        e->dst = host;
        e->dst_pitch = hpitch;
        e->src = dev;
        e->src_pitch = dpitch;
    }
    e->width = width;
    e->height = rows;
    return CUCOPY_OK;
}

/* Run @p r (device offsets from @p base) whose packed bytes start at @p at:
 * only what lies below @p nbytes (whole rows, then a part of one). Its host
 * bytes: at @p at (packed), or at its device offset (c->span). */
static void copier_run(struct copier *c, char *base, char *host, size_t at,
                       const struct shim_run *r, size_t nbytes)
{
    if (at >= nbytes)
        return;
    size_t rows = r->rows;
    if (at + r->width * r->rows > nbytes)
        rows = (nbytes - at) / r->width;
    char *h = c->span ? host + (r->off - c->tlb) : host + at;
    if (rows > 0)
        copier_add(c, base + r->off, r->width, r->pitch, rows, h);
    size_t tail = rows < r->rows ? nbytes - at - rows * r->width : 0;
    if (tail > 0 && c->st == CUCOPY_OK)
        copier_add(c, base + r->off + (MPI_Aint)rows * r->pitch, tail, (MPI_Aint)tail, 1,
                   c->span ? h + (MPI_Aint)rows * r->pitch : h + rows * r->width);
}

/* The runs of @p count elements of @p L at @p disp from @p base, each folded
 * into *pend when it continues it, else *pend copied (its packed bytes start
 * at *at) and replaced: count vectors of one column are one run. */
static void copier_elements(struct copier *c, const struct shim_layout *L, MPI_Count count,
                            MPI_Aint disp, char *base, char *host, size_t nbytes,
                            struct shim_run *pend, size_t *at)
{
    for (MPI_Count e = 0; e < count && *at < nbytes && c->st == CUCOPY_OK; e++) {
        for (size_t i = 0; i < L->nruns && c->st == CUCOPY_OK; i++) {
            struct shim_run r = L->runs[i];
            r.off += disp + (MPI_Aint)e * (MPI_Aint)L->ext;
            if (pend->rows > 0 && run_fold(pend, r))
                continue;
            if (pend->rows > 0) {
                copier_run(c, base, host, *at, pend, nbytes);
                *at += pend->width * pend->rows;
            }
            *pend = r;
        }
    }
}

/* Copy the first @p nbytes packed bytes (in type-map order) of @p count
 * elements of layout @p L between device buffer @p base (the buffer
 * argument: offsets are from it) and host memory @p host: packed, or with
 * @p span the same layout, @p host at device offset @p tlb. */
static cucopy_status_t layout_copy(int to_device, const struct shim_layout *L, MPI_Count count,
                                   char *base, char *host, size_t nbytes, int span,
                                   MPI_Aint tlb)
{
    struct copier *c = malloc(sizeof *c);
    if (c == NULL)
        return CUCOPY_ERR_NO_MEMORY;
    c->to_device = to_device;
    c->span = span;
    c->tlb = tlb;
    c->max = shim_cc.max_iov < SHIM_COPY_ENTRIES ? shim_cc.max_iov : SHIM_COPY_ENTRIES;
    if (c->max == 0)
        c->max = 1;
    c->n = 0;
    c->inflight = 0;
    c->st = CUCOPY_OK;
    /* The runs of all elements (of every block of a layout of blocks). */
    struct shim_run pend = {0};
    size_t at = 0; /* packed bytes of the runs before pend */
    if (L->blocks == NULL)
        copier_elements(c, L, count, 0, base, host, nbytes, &pend, &at);
    for (size_t k = 0; k < L->nblocks; k++)
        copier_elements(c, L->blocks[k].L, L->blocks[k].count, L->blocks[k].disp, base, host,
                        nbytes, &pend, &at);
    if (pend.rows > 0 && at < nbytes && c->st == CUCOPY_OK)
        copier_run(c, base, host, at, &pend, nbytes);
    if (c->st == CUCOPY_OK)
        copier_issue(c);
    copier_wait(c);
    cucopy_status_t st = c->st;
    free(c);
    return st;
}

/* ---- staging ------------------------------------------------------------------------ */

int shim_types_stage(const char *call, const void *buf, MPI_Count count, MPI_Datatype dt,
                     MPI_Comm comm, int direction, int device, struct shim_buf *b)
{
    struct shim_layout *L = layout_get(dt);
    if (L == NULL)
        return shim_error(comm, MPI_ERR_NO_MEM, call, "no memory to flatten the datatype");
    if (L->refusal[0] != '\0') {
        char what[300];
        snprintf(what, sizeof what, "non-contiguous datatype on device memory: %s", L->refusal);
        layout_unref(L);
        return shim_error(comm, MPI_ERR_TYPE, call, what);
    }
    if ((unsigned long long)count > SIZE_MAX / (unsigned long long)L->size) {
        layout_unref(L);
        return shim_error(comm, MPI_ERR_COUNT, call, "count * type size overflows");
    }
    size_t bytes = (size_t)count * (size_t)L->size;
    b->host = shim_pool_get(bytes, &b->cap, &b->pinned);
    if (b->host == NULL) {
        layout_unref(L);
        return shim_error(comm, MPI_ERR_NO_MEM, call, "no host memory for staging");
    }
    b->first = (char *)buf;
    b->tlb = 0;
    b->bytes = bytes;
    b->device = device;
    b->layout = L;
    b->count = count;
    b->ptype = L->sigtype;
    b->span = 0;
    b->staged = 1;
    if (direction & SHIM_TO_MPI) {
        int rc = shim_types_copy(call, b, 0, bytes, comm);
        if (rc != MPI_SUCCESS) {
            shim_release(b);
            return rc;
        }
    }
    return MPI_SUCCESS;
}

int shim_types_copy(const char *call, struct shim_buf *b, int to_device, size_t n,
                    MPI_Comm comm)
{
    if (n > b->bytes)
        n = b->bytes;
    if (n == 0)
        return MPI_SUCCESS;
    /* A span's bytes hold holes too: n of them is all of the type map, else n
     * bytes of it in type-map order (the first elements of a reduction). */
    size_t all = (size_t)b->count * (size_t)b->layout->size;
    if (b->span && (n == b->bytes || n > all))
        n = all;
    /* A span's first is its first byte (tlb past the buffer argument); a
     * packed buffer's first is the buffer argument itself (its tlb is where
     * PMPI's pointer is, shim_host_arg: a v form's lowest block). */
    char *base = b->span ? b->first - b->tlb : b->first;
    cucopy_status_t st = layout_copy(to_device, b->layout, b->count, base, b->host, n, b->span,
                                     b->tlb);
    if (st != CUCOPY_OK)
        return shim_cucopy_error(comm, call,
                                 to_device ? "scattering the received message to device memory"
                                           : "gathering the device buffer into host memory");
    shim_stats_add(to_device, b->device, n);
    return MPI_SUCCESS;
}

int shim_types_span(const char *call, struct shim_buf *b, MPI_Datatype dt, MPI_Comm comm)
{
    const struct shim_layout *L = b->layout;
    /* Elements at k x ext from the buffer (ext may be negative), each
     * [tlb, tlb + text): in range, shim_stage checked count x ext. */
    MPI_Count last = (b->count - 1) * L->ext;
    MPI_Count lo = L->tlb + (last < 0 ? last : 0), hi = L->tlb + L->text + (last > 0 ? last : 0);
    size_t cap = 0;
    int pinned = 0;
    char *host = shim_pool_get((size_t)(hi - lo), &cap, &pinned);
    if (host == NULL)
        return shim_error(comm, MPI_ERR_NO_MEM, call, "no host memory for staging");
    shim_pool_put(b->host, b->cap, b->pinned);
    b->host = host;
    b->cap = cap;
    b->pinned = pinned;
    b->first += lo; /* packed: first is the buffer argument */
    b->tlb = (MPI_Aint)lo;
    b->bytes = (size_t)(hi - lo);
    b->ptype = dt;
    b->span = 1;
    return MPI_SUCCESS;
}

int shim_types_span_blocks(const char *call, struct shim_buf *b, int n, struct shim_array counts,
                           struct shim_array displs, const MPI_Datatype types[], MPI_Comm comm)
{
    /* An uncached layout of its own: the blocks, each a reference to its
     * type's cached layout (memory per peer, not per element). */
    struct shim_layout *B = calloc(1, sizeof *B);
    struct span_block *blocks = n > 0 ? calloc((size_t)n, sizeof *blocks) : NULL;
    if (B == NULL || (n > 0 && blocks == NULL)) {
        free(B);
        free(blocks);
        return shim_error(comm, MPI_ERR_NO_MEM, call, "no memory for the blocks' layout");
    }
    B->dt = MPI_DATATYPE_NULL;
    B->sigtype = MPI_DATATYPE_NULL;
    B->basic = MPI_DATATYPE_NULL;
    B->blocks = blocks;
    atomic_init(&B->refs, 1);
    int rc = MPI_SUCCESS;
    for (int q = 0; q < n && rc == MPI_SUCCESS; q++) {
        MPI_Count count = shim_array_at(counts, q);
        if (count <= 0)
            continue;
        struct shim_layout *L = layout_get(types[q]);
        if (L == NULL) {
            rc = shim_error(comm, MPI_ERR_NO_MEM, call, "no memory to flatten the datatype");
        } else if (L->refusal[0] != '\0') {
            char what[300];
            snprintf(what, sizeof what, "non-contiguous datatype on device memory: %s",
                     L->refusal);
            layout_unref(L);
            rc = shim_error(comm, MPI_ERR_TYPE, call, what);
        } else {
            MPI_Aint disp = (MPI_Aint)shim_array_at(displs, q);
            blocks[B->nblocks++] = (struct span_block){L, count, disp};
            B->size += count * L->size;
        }
    }
    if (rc != MPI_SUCCESS) {
        layout_unref(B);
        return rc;
    }
    b->layout = B;
    b->count = 1;
    b->ptype = MPI_DATATYPE_NULL; /* PMPI gets the user's per-peer types */
    b->span = 1;
    return MPI_SUCCESS;
}

void shim_types_unref(struct shim_layout *L)
{
    layout_unref(L);
}


int shim_types_basic(const struct shim_layout *L, MPI_Datatype *basic, MPI_Count *per_element)
{
    *basic = L->basic;
    *per_element = L->nbasic;
    return L->basic != MPI_DATATYPE_NULL;
}

struct shim_buf shim_buf_part(const struct shim_buf *b, size_t off, size_t len)
{
    struct shim_buf part = *b;
    part.bytes = off >= b->bytes ? 0 : len < b->bytes - off ? len : b->bytes - off;
    part.host += off;
    if (b->layout == NULL) {
        part.first += off;
    } else {
        size_t size = (size_t)b->layout->size;
        part.first += (MPI_Aint)(off / size) * (MPI_Aint)b->layout->ext;
        part.count = (MPI_Count)((part.bytes + size - 1) / size);
    }
    return part;
}
