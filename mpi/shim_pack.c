/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MPI_Pack, MPI_Unpack, MPI_Pack_external and MPI_Unpack_external on device
 * buffers (issue 13), and their _c forms on an MPI-4 library: an MPI that is
 * not CUDA-aware packs with the CPU, which faults on device memory.
 *
 * Pack: a device inbuf is staged as a send buffer is (shim_stage: a
 * non-contiguous type packed, PMPI then gets its signature type, whose
 * packed bytes are the same); a device outbuf gets staging memory for the
 * bytes MPI may write, from *position on (the packed size, at most to
 * outsize), nothing copied in, and after PMPI only [position in, position
 * out) is copied back: the bytes before and after keep what they hold.
 * Unpack: a device inbuf's bytes from *position on (the packed size) are
 * copied in; a device buffer too short for the packed size from *position
 * on is refused (MPI_ERR_TRUNCATE); a device outbuf is staged as a receive
 * buffer is (only the type map's bytes written back). PMPI gets pointers
 * shifted so that the user's position keeps its meaning. Host buffers pass
 * through; a call with only host buffers goes to PMPI unchanged.
 *
 * They are of class p2p (CUCOPY_MPI_STAGE). The external forms have no
 * communicator: their errors go to MPI_COMM_WORLD's handler.
 */
#include "shim.h"

#include <stdint.h>

/* The staging of one call: in (what MPI reads), out (what it writes). */
struct pack_call {
    const char *call;
    MPI_Comm comm;
    struct shim_buf in, out;
};

/* Stage the @p n bytes at @p buf + @p pos that MPI may touch (nothing when
 * pos is outside [0, size]: MPI's to report) as bytes of direction @p dir
 * into *b. On device memory they must fit in [pos, size): an MPI that does
 * not check (MPICH 4.0.2's MPI_Pack writes past outsize, measured) would run
 * past the staging memory; MPI_ERR_TRUNCATE, as the standard has it. */
static int pack_bytes(struct pack_call *p, struct shim_buf *b, const void *buf, MPI_Count size,
                      MPI_Count pos, MPI_Count n, int dir)
{
    b->staged = 0;
    b->layout = NULL;
    if (pos < 0 || pos > size || n <= 0)
        return MPI_SUCCESS;
    MPI_Count room = size - pos;
    int rc = shim_stage(p->call, (const char *)buf + pos, n < room ? n : room, MPI_BYTE, p->comm,
                        dir, b);
    if (rc != MPI_SUCCESS || !b->staged || n <= room)
        return rc;
    shim_release(b);
    return shim_error(p->comm, MPI_ERR_TRUNCATE, p->call,
                      dir == SHIM_FROM_MPI
                          ? "the packed data does not fit in the device outbuf after position"
                          : "the device inbuf after position is shorter than the packed data");
}

/* Before PMPI_(Un)pack*: the typed buffer (@p count elements of @p dt at
 * @p typed: Pack's inbuf, read; Unpack's outbuf, written), then the packed
 * bytes (@p bytes, of @p size, from @p pos: Pack's outbuf, written;
 * Unpack's inbuf, read); @p packed, the packed size of count elements. */
static int pack_begin(struct pack_call *p, const char *call, MPI_Comm comm, int unpack,
                      const void *typed, MPI_Count count, MPI_Datatype dt, const void *bytes,
                      MPI_Count size, MPI_Count pos, MPI_Count packed)
{
    struct shim_buf *tb = unpack ? &p->out : &p->in, *bb = unpack ? &p->in : &p->out;
    p->call = call;
    p->comm = comm;
    bb->staged = 0;
    int rc = shim_stage(call, typed, count, dt, comm, unpack ? SHIM_FROM_MPI : SHIM_TO_MPI, tb);
    if (rc == MPI_SUCCESS)
        rc = pack_bytes(p, bb, bytes, size, pos, packed, unpack ? SHIM_TO_MPI : SHIM_FROM_MPI);
    if (rc != MPI_SUCCESS)
        shim_release(tb);
    return rc;
}

/* After PMPI returned @p rc: the first @p n bytes MPI wrote into the staged
 * outbuf copied back (when it succeeded), the staging released. */
static int pack_end(struct pack_call *p, int rc, size_t n)
{
    if (rc == MPI_SUCCESS && p->out.staged)
        rc = shim_unstage(p->call, &p->out, n, p->comm);
    shim_release(&p->in);
    shim_release(&p->out);
    return rc;
}

/* The pointer PMPI gets for a typed buffer @p b (the user's @p buf when not
 * staged), and for a byte region staged from @p pos on. */
#define PACK_TYPED(b, buf) ((b).staged ? shim_host_arg(&(b)) : (void *)(buf))
#define PACK_AT(b, buf, pos) ((b).staged ? (void *)((b).host - (pos)) : (void *)(buf))

/*
 * One wrapper: NAME (Pack, Pack_external, ...), PARAMS, the PMPI arguments
 * USER (the user's) and HOST (with PACK_TYPED / PACK_AT, and the packed
 * signature type of a staged typed buffer), the packed size's type and the
 * call that sets it (SIZE_T packed), BEGIN (pack_begin on struct pack_call
 * p, with MPI_Count pos the position in), and OUT: the
 * bytes of the staged outbuf to copy back once PMPI succeeded.
 */
#define PACK_WRAPPER(NAME, PARAMS, USER, HOST, SIZE_T, SIZE_CALL, BEGIN, OUT)     \
    SHIM_EXPORT int MPI_##NAME PARAMS                                             \
    {                                                                             \
        SIZE_T packed = 0;                                                        \
        struct pack_call p;                                                       \
        if (SHIM_LIKELY(!shim_active_for(SHIM_CLASS_P2P)) || position == NULL ||  \
            (SIZE_CALL) != MPI_SUCCESS)                                           \
            return PMPI_##NAME USER;                                              \
        MPI_Count pos = *position;                                                \
        int rc = (BEGIN);                                                         \
        if (rc != MPI_SUCCESS)                                                    \
            return rc;                                                            \
        if (!p.in.staged && !p.out.staged)                                        \
            return PMPI_##NAME USER;                                              \
        rc = PMPI_##NAME HOST;                                                    \
        return pack_end(&p, rc, rc == MPI_SUCCESS ? (size_t)(OUT) : 0);           \
    }

#define PACK_FORMS(SFX, COUNT_T, SIZE_T, POS_T, EXT_COUNT_T, EXT_SIZE_T)                        \
    PACK_WRAPPER(Pack##SFX,                                                                     \
                 (const void *inbuf, COUNT_T incount, MPI_Datatype dt, void *outbuf,             \
                  COUNT_T outsize, POS_T *position, MPI_Comm comm),                              \
                 (inbuf, incount, dt, outbuf, outsize, position, comm),                          \
                 (PACK_TYPED(p.in, inbuf), incount, shim_type_arg(&p.in, dt),                    \
                  PACK_AT(p.out, outbuf, pos), outsize, position, comm),                         \
                 SIZE_T, PMPI_Pack_size##SFX(incount, dt, comm, &packed),                        \
                 pack_begin(&p, "MPI_Pack" #SFX, comm, 0, inbuf, incount, dt, outbuf, outsize,   \
                            pos, packed),                                                        \
                 *position - pos)                                                                \
    PACK_WRAPPER(Unpack##SFX,                                                                   \
                 (const void *inbuf, COUNT_T insize, POS_T *position, void *outbuf,              \
                  COUNT_T outcount, MPI_Datatype dt, MPI_Comm comm),                             \
                 (inbuf, insize, position, outbuf, outcount, dt, comm),                          \
                 (PACK_AT(p.in, inbuf, pos), insize, position, PACK_TYPED(p.out, outbuf),        \
                  outcount, shim_type_arg(&p.out, dt), comm),                                    \
                 SIZE_T, PMPI_Pack_size##SFX(outcount, dt, comm, &packed),                       \
                 pack_begin(&p, "MPI_Unpack" #SFX, comm, 1, outbuf, outcount, dt, inbuf, insize, \
                            pos, packed),                                                        \
                 SIZE_MAX)                                                                       \
    PACK_WRAPPER(Pack_external##SFX,                                                            \
                 (const char datarep[], const void *inbuf, EXT_COUNT_T incount, MPI_Datatype dt, \
                  void *outbuf, EXT_SIZE_T outsize, EXT_SIZE_T *position),                       \
                 (datarep, inbuf, incount, dt, outbuf, outsize, position),                       \
                 (datarep, PACK_TYPED(p.in, inbuf), incount, shim_type_arg(&p.in, dt),           \
                  PACK_AT(p.out, outbuf, pos), outsize, position),                               \
                 EXT_SIZE_T, PMPI_Pack_external_size##SFX(datarep, incount, dt, &packed),        \
                 pack_begin(&p, "MPI_Pack_external" #SFX, MPI_COMM_WORLD, 0, inbuf, incount, dt, \
                            outbuf, outsize, pos, packed),                                       \
                 *position - pos)                                                                \
    PACK_WRAPPER(Unpack_external##SFX,                                                          \
                 (const char datarep[], const void *inbuf, EXT_SIZE_T insize,                    \
                  EXT_SIZE_T *position,                                                          \
                  void *outbuf, EXT_COUNT_T outcount, MPI_Datatype dt),                          \
                 (datarep, inbuf, insize, position, outbuf, outcount, dt),                       \
                 (datarep, PACK_AT(p.in, inbuf, pos), insize, position,                          \
                  PACK_TYPED(p.out, outbuf), outcount, shim_type_arg(&p.out, dt)),               \
                 EXT_SIZE_T, PMPI_Pack_external_size##SFX(datarep, outcount, dt, &packed),       \
                 pack_begin(&p, "MPI_Unpack_external" #SFX, MPI_COMM_WORLD, 1, outbuf, outcount, \
                            dt, inbuf, insize, pos, packed),                                     \
                 SIZE_MAX)

/* MPI_Pack(int), Unpack(int); the external forms' sizes and positions are
 * MPI_Aint, their counts int. */
PACK_FORMS(, int, int, int, int, MPI_Aint)
#if SHIM_LARGE_COUNT
PACK_FORMS(_c, MPI_Count, MPI_Count, MPI_Count, MPI_Count, MPI_Count)
#endif
